#ifndef ASGD_ENGINE_DATA_TRAIN_TEST_SPLIT_H
#define ASGD_ENGINE_DATA_TRAIN_TEST_SPLIT_H
// Seeded train/test splits of example indices.
#include <stddef.h>
#include <stdint.h>

// A seeded uniform random split of [0, n): n_test = round(n * test_fraction)
// (halves round up), the rest train; each part's indices ascending. The same
// (n, test_fraction, seed) gives the same split on every machine.
// test_fraction must be in [0, 1) and n at most 2^32 (indices are uint32).
// Returns 0, or -1 with one line in err (then *train_idx and *test_idx are
// NULL and the counts 0). On success the caller owns and frees both arrays,
// which are valid pointers even when a part is empty.
int split_train_test(size_t n, double test_fraction, uint64_t seed, uint32_t **train_idx, size_t *n_train,
                     uint32_t **test_idx, size_t *n_test, char *err, size_t err_len);

#endif
