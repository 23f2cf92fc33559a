#include "kernels/foundation/partition.h"

void shard_range(size_t n, size_t n_shards, size_t shard, size_t *begin, size_t *end) {
    if (n_shards == 0 || shard >= n_shards) {
        *begin = *end = n;
        return;
    }
    size_t base = n / n_shards, extra = n % n_shards;
    *begin = shard * base + (shard < extra ? shard : extra);
    *end = *begin + base + (shard < extra ? 1 : 0);
}
