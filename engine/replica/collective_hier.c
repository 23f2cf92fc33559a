// The hierarchical allreduce behind the collective table
// (collective_impl.h): shared memory within each host, rings across hosts
// (net/hier_allreduce.h).
#include "engine/replica/collective_impl.h"
#include "net/hier_allreduce.h"

static int hier_sum(void *impl, float *buf, size_t n, int timeout_ms, char *err, size_t err_len) {
    return hier_allreduce_sum(impl, buf, n, timeout_ms, err, err_len);
}

static void hier_bytes(const void *impl, uint64_t *sent, uint64_t *recv) { hier_allreduce_net_bytes(impl, sent, recv); }

static const char *hier_cross_ring(const void *impl) { return hier_allreduce_uses_stream(impl) ? "stream" : "zeromq"; }

static void hier_free(void *impl) {
    hier_allreduce_t *h = impl;
    hier_allreduce_destroy(&h);
}

const collective_ops_t collective_hier_ops = {
    .kind = COLLECTIVE_HIER,
    .sum = hier_sum,
    .net_bytes = hier_bytes,
    .cross_ring = hier_cross_ring,
    .destroy = hier_free,
};
