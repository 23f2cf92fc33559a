// Seeded train/test splits and shards: sizes, disjointness, coverage, determinism.
#include "datasets/split.h"
#include "test_support.h"

int main(void) {
    char err[256];
    uint32_t *train, *test, *train2, *test2;
    size_t n_train, n_test, n2_train, n2_test;
    for (size_t n = 1; n < 2000; n = n * 3 + 1) {
        CHECK_OK(split_train_test(n, 0.2, 7, &train, &n_train, &test, &n_test, err, sizeof err), err);
        CHECK(n_test == (size_t)llround(0.2 * (double)n) && n_train + n_test == n);
        uint8_t *seen = calloc(n, 1);
        for (size_t i = 0; i < n_train; i++) {
            CHECK(train[i] < n && !seen[train[i]]);
            seen[train[i]] = 1;
            if (i) CHECK(train[i] > train[i - 1]);
        }
        for (size_t i = 0; i < n_test; i++) {
            CHECK(test[i] < n && !seen[test[i]]);
            seen[test[i]] = 1;
            if (i) CHECK(test[i] > test[i - 1]);
        }
        free(seen);
        CHECK_OK(split_train_test(n, 0.2, 7, &train2, &n2_train, &test2, &n2_test, err, sizeof err), err);
        CHECK(n2_test == n_test && memcmp(test, test2, n_test * sizeof *test) == 0);
        free(train2), free(test2);
        if (n > 100) {
            CHECK_OK(split_train_test(n, 0.2, 8, &train2, &n2_train, &test2, &n2_test, err, sizeof err), err);
            CHECK(memcmp(test, test2, n_test * sizeof *test) != 0);  // another seed, another split
            free(train2), free(test2);
        }
        free(train), free(test);
    }
    CHECK(split_train_test(10, 1.0, 1, &train, &n_train, &test, &n_test, err, sizeof err) == -1 && strstr(err, "[0, 1)"));
    for (size_t n = 0; n < 300; n += 7)
        for (size_t shards = 1; shards < 20; shards++) {
            size_t expect = 0, smallest = SIZE_MAX, largest = 0;
            for (size_t s = 0; s < shards; s++) {
                size_t b, e;
                shard_range(n, shards, s, &b, &e);
                CHECK(b == expect && e >= b);
                expect = e;
                smallest = e - b < smallest ? e - b : smallest;
                largest = e - b > largest ? e - b : largest;
            }
            CHECK(expect == n && largest - smallest <= 1);
        }
    printf("split tests passed\n");
    return 0;
}
