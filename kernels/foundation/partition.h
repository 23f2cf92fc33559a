#ifndef ASGD_KERNELS_FOUNDATION_PARTITION_H
#define ASGD_KERNELS_FOUNDATION_PARTITION_H
// Balanced contiguous ranges: how examples are dealt to threads and
// parameters to server shards and ring chunks.
#include <stddef.h>

// Shard `shard` of n_shards over [0, n) as [*begin, *end): contiguous, disjoint,
// covering [0, n) in shard order, sizes differing by at most one (the first
// n % n_shards shards get one more). With n_shards == 0 or shard >= n_shards
// the range is empty ([n, n)).
void shard_range(size_t n, size_t n_shards, size_t shard, size_t *begin, size_t *end);

#endif
