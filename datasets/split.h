#ifndef ASGD_DATASETS_SPLIT_H
#define ASGD_DATASETS_SPLIT_H
// Seeded train/test splits and disjoint shards.
#include <stddef.h>
#include <stdint.h>

// A seeded random split of [0, n): n_test = round(n * test_fraction), the rest
// train; each part's indices sorted ascending. Caller frees both arrays.
// test_fraction must be in [0, 1).
int split_train_test(size_t n, double test_fraction, uint64_t seed, uint32_t **train_idx, size_t *n_train,
                     uint32_t **test_idx, size_t *n_test, char *err, size_t err_len);

// Shard `shard` of n_shards over [0, n): contiguous, disjoint, covering, sizes
// differing by at most one (the first n % n_shards shards get one more).
void shard_range(size_t n, size_t n_shards, size_t shard, size_t *begin, size_t *end);

#endif
