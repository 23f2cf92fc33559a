#include "engine/data/train_test_split.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"

#define SPLIT_STREAM 0x53504c54u  // "SPLT": not shared with the generators' streams

int split_train_test(size_t n, double test_fraction, uint64_t seed, uint32_t **train_idx, size_t *n_train,
                     uint32_t **test_idx, size_t *n_test, char *err, size_t err_len) {
    *train_idx = *test_idx = NULL;
    *n_train = *n_test = 0;
    if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
        snprintf(err, err_len, "split: test_fraction is %g; expected a number in [0, 1)", test_fraction);
        return -1;
    }
    if ((uint64_t)n > (uint64_t)UINT32_MAX + 1) {
        snprintf(err, err_len, "split: %zu examples; at most 2^32 fit 32-bit indices", n);
        return -1;
    }
    size_t tests = (size_t)((double)n * test_fraction + 0.5);
    if (tests > n) tests = n;
    uint32_t *train = malloc((n - tests ? n - tests : 1) * sizeof *train);
    uint32_t *test = malloc((tests ? tests : 1) * sizeof *test);
    if (!train || !test) {
        snprintf(err, err_len, "split: allocating indices for %zu examples: %s", n, strerror(errno));
        free(train);
        free(test);
        return -1;
    }
    // Selection sampling (Knuth's algorithm S): index i goes to test with
    // probability (tests still needed) / (indices left), which picks a uniform
    // subset of exactly `tests` indices in one ascending pass.
    rng_t rng;
    rng_seed(&rng, seed, SPLIT_STREAM);
    size_t a = 0, b = 0;
    for (size_t i = 0; i < n; i++) {
        if (b < tests && rng_below(&rng, n - i) < tests - b)
            test[b++] = (uint32_t)i;
        else
            train[a++] = (uint32_t)i;
    }
    *train_idx = train;
    *test_idx = test;
    *n_train = a;
    *n_test = b;
    return 0;
}
