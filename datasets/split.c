#include "datasets/split.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/rng.h"

int split_train_test(size_t n, double test_fraction, uint64_t seed, uint32_t **train_idx, size_t *n_train,
                     uint32_t **test_idx, size_t *n_test, char *err, size_t err_len) {
    *train_idx = *test_idx = NULL;
    *n_train = *n_test = 0;
    if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
        snprintf(err, err_len, "split: test fraction %g; expected a number in [0, 1)", test_fraction);
        return -1;
    }
    if (n > UINT32_MAX) {
        snprintf(err, err_len, "split: %zu examples exceed the 32-bit index range", n);
        return -1;
    }
    size_t tests = (size_t)llround((double)n * test_fraction);
    uint8_t *is_test = calloc(n ? n : 1, 1);
    uint32_t *perm = malloc((n ? n : 1) * sizeof *perm);
    uint32_t *train = malloc((n - tests ? n - tests : 1) * sizeof *train);
    uint32_t *test = malloc((tests ? tests : 1) * sizeof *test);
    if (!is_test || !perm || !train || !test) {
        snprintf(err, err_len, "split: allocating indices for %zu examples: %s", n, strerror(errno));
        free(is_test), free(perm), free(train), free(test);
        return -1;
    }
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    rng_t rng;
    rng_seed(&rng, seed, 0x53504c54);  // "SPLT"
    rng_shuffle_u32(&rng, perm, n);
    for (size_t i = 0; i < tests; i++) is_test[perm[i]] = 1;
    size_t a = 0, b = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_test[i]) test[b++] = (uint32_t)i;
        else train[a++] = (uint32_t)i;
    }
    free(is_test);
    free(perm);
    *train_idx = train;
    *test_idx = test;
    *n_train = a;
    *n_test = b;
    return 0;
}

void shard_range(size_t n, size_t n_shards, size_t shard, size_t *begin, size_t *end) {
    size_t base = n / n_shards, extra = n % n_shards;
    *begin = shard * base + (shard < extra ? shard : extra);
    *end = *begin + base + (shard < extra ? 1 : 0);
}
