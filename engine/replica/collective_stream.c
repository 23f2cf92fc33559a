// The stream ring behind the collective table (collective_impl.h): the
// ring over plain TCP connections (net/stream_ring.h).
#include "engine/replica/collective_impl.h"
#include "net/stream_ring.h"

static int stream_sum(void *impl, float *buf, size_t n, int timeout_ms, char *err, size_t err_len) {
    return stream_ring_allreduce_sum(impl, buf, n, timeout_ms, err, err_len);
}

static void stream_bytes(const void *impl, uint64_t *sent, uint64_t *recv) {
    ring_stats_t rs;
    stream_ring_get_stats(impl, &rs);
    *sent = rs.bytes_sent;
    *recv = rs.bytes_recv;
}

static void stream_free(void *impl) {
    stream_ring_t *s = impl;
    stream_ring_destroy(&s);
}

const collective_ops_t collective_stream_ops = {
    .kind = COLLECTIVE_STREAM,
    .sum = stream_sum,
    .net_bytes = stream_bytes,
    .destroy = stream_free,
};
