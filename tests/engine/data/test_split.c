// Seeded train/test splits and shards: sizes, disjointness, coverage, order,
// determinism by seed, uniformity, and shard_range over many (n, shards) pairs.
#include "engine/data/train_test_split.h"
#include "kernels/foundation/partition.h"
#include "tests/support/test_support.h"

// Both parts ascending, disjoint, and together exactly [0, n).
static void check_partition(size_t n, const uint32_t *train, size_t n_train, const uint32_t *test, size_t n_test) {
    CHECK(n_train + n_test == n);
    uint8_t *seen = calloc(n ? n : 1, 1);
    for (size_t i = 0; i < n_train; i++) {
        CHECK(train[i] < n && !seen[train[i]]);
        seen[train[i]] = 1;
        if (i) CHECK(train[i] > train[i - 1]);
    }
    for (size_t i = 0; i < n_test; i++) {
        CHECK(test[i] < n && !seen[test[i]]);
        seen[test[i]] = 2;
        if (i) CHECK(test[i] > test[i - 1]);
    }
    for (size_t i = 0; i < n; i++) CHECK(seen[i]);
    free(seen);
}

static void splits(void) {
    char err[256];
    uint32_t *train, *test, *train2, *test2;
    size_t n_train, n_test, n2_train, n2_test;
    static const double fractions[] = {0.0, 0.1, 0.2, 0.25, 0.5, 0.9, 0.999};
    for (size_t n = 0; n < 5000; n = n * 3 + 1) {
        for (size_t f = 0; f < sizeof fractions / sizeof fractions[0]; f++) {
            double frac = fractions[f];
            CHECK_OK(split_train_test(n, frac, 7, &train, &n_train, &test, &n_test, err, sizeof err), err);
            CHECK(train && test);  // valid pointers even for empty parts
            CHECK(n_test == (size_t)floor((double)n * frac + 0.5));
            check_partition(n, train, n_train, test, n_test);
            // The same seed gives the same split; another seed another one.
            CHECK_OK(split_train_test(n, frac, 7, &train2, &n2_train, &test2, &n2_test, err, sizeof err), err);
            CHECK(n2_test == n_test && memcmp(test, test2, n_test * sizeof *test) == 0);
            CHECK(n2_train == n_train && memcmp(train, train2, n_train * sizeof *train) == 0);
            free(train2), free(test2);
            if (n > 100 && n_test > 0 && n_train > 0) {
                CHECK_OK(split_train_test(n, frac, 8, &train2, &n2_train, &test2, &n2_test, err, sizeof err), err);
                CHECK(n2_test == n_test && memcmp(test, test2, n_test * sizeof *test) != 0);
                free(train2), free(test2);
            }
            free(train), free(test);
        }
    }
    // Spot values: 10 * 0.25 = 2.5 rounds up; 0.999 of 1000 leaves one for training.
    CHECK_OK(split_train_test(10, 0.25, 1, &train, &n_train, &test, &n_test, err, sizeof err), err);
    CHECK(n_test == 3 && n_train == 7);
    free(train), free(test);
    CHECK_OK(split_train_test(1000, 0.999, 1, &train, &n_train, &test, &n_test, err, sizeof err), err);
    CHECK(n_test == 999 && n_train == 1);
    free(train), free(test);

    // Uniform: over 2,000 seeds every index of 20 lands in test ~ 2000 * 0.3 = 600
    // times (binomial sd 20.5; +-6 sd).
    size_t hits[20] = {0};
    for (uint64_t seed = 0; seed < 2000; seed++) {
        CHECK_OK(split_train_test(20, 0.3, seed, &train, &n_train, &test, &n_test, err, sizeof err), err);
        CHECK(n_test == 6);
        for (size_t i = 0; i < n_test; i++) hits[test[i]]++;
        free(train), free(test);
    }
    for (size_t i = 0; i < 20; i++) CHECK(hits[i] > 477 && hits[i] < 723);

    // Bad fractions leave NULL arrays and zero counts.
    static const double bad[] = {1.0, -0.1, 1.5, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        train = test = (uint32_t *)&n_train;
        CHECK(split_train_test(10, bad[i], 1, &train, &n_train, &test, &n_test, err, sizeof err) == -1);
        CHECK(strstr(err, "test_fraction") && strstr(err, "[0, 1)"));
        CHECK(!train && !test && n_train == 0 && n_test == 0);
    }
    printf("split: %s\n", err);
    CHECK(split_train_test((size_t)UINT32_MAX + 2, 0.1, 1, &train, &n_train, &test, &n_test, err, sizeof err) == -1);
    printf("split: %s\n", err);
    CHECK(strstr(err, "2^32") && !train && !test);
}

static void shards(void) {
    for (size_t n = 0; n < 400; n += (n < 40 ? 1 : 13)) {
        for (size_t n_shards = 1; n_shards <= 40; n_shards++) {
            size_t expect = 0, smallest = SIZE_MAX, largest = 0;
            for (size_t s = 0; s < n_shards; s++) {
                size_t b, e;
                shard_range(n, n_shards, s, &b, &e);
                CHECK(b == expect && e >= b);  // contiguous, disjoint, in order
                size_t size = e - b;
                CHECK(size == n / n_shards + (s < n % n_shards ? 1 : 0));  // the first n % shards get one more
                smallest = size < smallest ? size : smallest;
                largest = size > largest ? size : largest;
                expect = e;
            }
            CHECK(expect == n);  // covering
            CHECK(largest - smallest <= 1);
        }
    }
    // Large n: no overflow.
    size_t b, e, n = SIZE_MAX - 5;
    shard_range(n, 7, 6, &b, &e);
    CHECK(e == n && e - b == n / 7);
    shard_range(n, 7, 0, &b, &e);
    CHECK(b == 0 && e - b == n / 7 + (n % 7 > 0));
    // Out-of-range shard numbers give an empty range at the end, not a crash.
    shard_range(10, 0, 0, &b, &e);
    CHECK(b == 10 && e == 10);
    shard_range(10, 3, 3, &b, &e);
    CHECK(b == 10 && e == 10);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    splits();
    shards();
    printf("split tests passed\n");
    return 0;
}
