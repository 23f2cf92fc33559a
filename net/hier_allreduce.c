// Hierarchical allreduce: shared memory within a host, a ring across hosts
// (hier_allreduce.h, docs/allreduce.md).
#include "net/hier_allreduce.h"

#include <stdio.h>
#include <stdlib.h>

#include "net/ring.h"
#include "net/shm_allreduce.h"
#include "net/stream_ring.h"

struct hier_allreduce {
    size_t host, hosts, local, local_n;
    shm_allreduce_t *shm;
    ring_t *cross;  // the cross ring over ZeroMQ, or
    stream_ring_t *stream;  // over plain TCP
};

// Host h's segment: its own run id, so that hosts that are really one
// machine (ASGD_HOST_ID) get one segment each.
static uint64_t host_run_id(uint64_t run_id, size_t host) {
    return run_id ^ (0x9e3779b97f4a7c15ull * (uint64_t)(host + 1));
}

hier_allreduce_t *hier_allreduce_new(void *zmq_ctx, int stream, uint64_t run_id, size_t host, size_t hosts,
                                     size_t local, size_t local_n, size_t max_count, const char *bind_host, char *err,
                                     size_t err_len) {
    if (hosts == 0 || host >= hosts || local_n == 0 || local >= local_n) {
        snprintf(err, err_len,
                 "hier_allreduce_new: need host < hosts and local < local_n (host %zu of %zu, local %zu "
                 "of %zu)",
                 host, hosts, local, local_n);
        return NULL;
    }
    hier_allreduce_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, err_len, "hier_allreduce_new: out of memory");
        return NULL;
    }
    *h = (hier_allreduce_t){.host = host, .hosts = hosts, .local = local, .local_n = local_n};
    size_t b, e;
    shm_allreduce_slice(max_count, local_n, 0, &b, &e);  // slice 0 is the longest
    h->shm = shm_allreduce_new(host_run_id(run_id, host), local, local_n, max_count, err, err_len);
    if (h->shm && stream)
        h->stream = stream_ring_new(host, hosts, run_id, e - b, bind_host, err, err_len);
    else if (h->shm)
        h->cross = ring_new(zmq_ctx, host, hosts, run_id, e - b, bind_host, err, err_len);
    if (!h->cross && !h->stream) hier_allreduce_destroy(&h);
    return h;
}

const char *hier_allreduce_endpoint(const hier_allreduce_t *h) {
    return h->stream ? stream_ring_endpoint(h->stream) : ring_endpoint(h->cross);
}

int hier_allreduce_connect(hier_allreduce_t *h, const char *next_endpoint, int timeout_ms, char *err, size_t err_len) {
    if (h->hosts == 1) return 0;
    if (h->stream) return stream_ring_connect(h->stream, next_endpoint, timeout_ms, err, err_len);
    return ring_connect(h->cross, next_endpoint, err, err_len);
}

int hier_allreduce_sum(hier_allreduce_t *h, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    size_t b, e;
    shm_allreduce_slice(count, h->local_n, h->local, &b, &e);
    if (shm_allreduce_reduce_scatter(h->shm, data, count, timeout_ms, err, err_len) != 0) return -1;
    int rc = h->stream ? stream_ring_allreduce_sum(h->stream, data + b, e - b, timeout_ms, err, err_len)
                       : ring_allreduce_sum(h->cross, data + b, e - b, timeout_ms, err, err_len);
    if (rc != 0) return -1;
    return shm_allreduce_allgather(h->shm, data, count, timeout_ms, err, err_len);
}

void hier_allreduce_net_bytes(const hier_allreduce_t *h, uint64_t *sent, uint64_t *recv) {
    ring_stats_t rs;
    if (h->stream)
        stream_ring_get_stats(h->stream, &rs);
    else
        ring_get_stats(h->cross, &rs);
    *sent = rs.bytes_sent;
    *recv = rs.bytes_recv;
}

int hier_allreduce_uses_stream(const hier_allreduce_t *h) { return h->stream != NULL; }

void hier_allreduce_destroy(hier_allreduce_t **hp) {
    if (!hp || !*hp) return;
    shm_allreduce_destroy(&(*hp)->shm);
    ring_destroy(&(*hp)->cross);
    stream_ring_destroy(&(*hp)->stream);
    free(*hp);
    *hp = NULL;
}
