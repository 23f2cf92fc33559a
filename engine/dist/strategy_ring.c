// allreduce: the rounds of bsp without a server. The replicas sum their
// averaged gradients, weighted by examples, with a ring allreduce (through
// shared memory or MPI when the run chose it: collective.h), and every replica
// applies the identical update (sync_strategy.h). Also the weighted sum that
// local SGD and hybrid share.
#include <string.h>

#include "engine/dist/collective_mpi.h"  // defines: collective_mpi_sum
#include "engine/dist/replica_impl.h"
#include "net/hier_allreduce.h"  // defines: hier_allreduce_sum
#include "net/ring.h"  // defines: ring_allreduce_sum, ring_allreduce_sum_fp16, ring_allgather_encoded
#include "net/shm_allreduce.h"  // defines: shm_allreduce_sum
#include "net/stream_ring.h"  // defines: stream_ring_allreduce_sum

// Encodings that cannot be added on the way: every worker's goes round (an
// allgather), and every replica adds them up in rank order, so all apply the
// same bits.
static int ring_sum_allgather(replica_t *r, float *buf, size_t m, size_t examples, float *total) {
    size_t me = r->rc->id;
    r->blob_lens[me] = compress_encoded_bytes(compressor_spec(r->comp), m);
    r->blob_weights[me] = (uint32_t)examples;
    if (compress_encode(r->comp, buf, m, r->resid.e, NULL, r->blobs + me * r->blob_cap, r->blob_cap, r->err,
                        sizeof r->err) != 0 ||
        ring_allgather_encoded(r->rc->ring, r->blobs, r->blob_cap, r->blob_lens, r->blob_weights, m,
                               r->rc->timeout_ms, r->err, sizeof r->err) != 0)
        return -1;
    memset(buf, 0, m * sizeof *buf);
    uint64_t examples_all = 0;
    for (size_t k = 0; k < r->rc->n_workers; k++) {
        if (compress_decode_add(r->blobs + k * r->blob_cap, r->blob_lens[k], m, buf, r->err, sizeof r->err) != 0)
            return -1;
        examples_all += r->blob_weights[k];
    }
    *total = (float)examples_all;
    return 0;
}

static int ring_sum(replica_t *r, float *buf, size_t m, size_t examples, float *total);

// The collective's call, a span of a --trace timeline (docs/trace.md).
int replica_ring_sum(replica_t *r, float *buf, size_t m, size_t examples, float *total) {
    static const trace_kind_t allreduce = {"allreduce", "net", "floats"};
    uint64_t span = TRACE_BEGIN();
    int rc = ring_sum(r, buf, m, examples, total);
    TRACE_END(&allreduce, span, m + 1);
    return rc;
}

// The float32 sum of n values through the collective the run opened: shared
// memory, hier, the stream ring, MPI, or else the ZeroMQ ring. Never
// compressed (replica.c checks that the first four are not asked to be).
static int sum_float32(replica_t *r, float *buf, size_t n) {
    const replica_config_t *c = r->rc;
    char *err = r->err;
    size_t len = sizeof r->err;
    if (c->shm) return shm_allreduce_sum(c->shm, buf, n, c->timeout_ms, err, len);
    if (c->hier) return hier_allreduce_sum(c->hier, buf, n, c->timeout_ms, err, len);
    if (c->stream) return stream_ring_allreduce_sum(c->stream, buf, n, c->timeout_ms, err, len);
    if (c->mpi) return collective_mpi_sum(buf, n, err, len);
    return ring_allreduce_sum(c->ring, buf, n, c->timeout_ms, err, len);
}

static int ring_sum(replica_t *r, float *buf, size_t m, size_t examples, float *total) {
    buf[m] = (float)examples;
    if (!r->comp) {
        if (sum_float32(r, buf, m + 1) != 0) return -1;
        *total = buf[m];
        return 0;
    }
    if (compressor_spec(r->comp)->kind == COMPRESS_KIND_FP16) {
        // fp16 partial sums on the wire, added in float32; the count stays exact.
        if (ring_allreduce_sum_fp16(r->rc->ring, buf, m + 1, m, r->rc->timeout_ms, r->err, sizeof r->err) != 0)
            return -1;
        *total = buf[m];
    } else if (ring_sum_allgather(r, buf, m, examples, total) != 0) {
        return -1;
    }
    r->raw_out += ring_allreduce_bytes_sent(r->rc->ring, m + 1);
    return 0;
}

static int exchange_allreduce(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    (void)w;
    replica_t *r = ctx;
    double t0 = replica_now_s();
    float *buf = r->ring_buf;
    float ex = (float)examples;
    if (sum->dense) {
        for (size_t j = 0; j < r->n; j++) buf[j] = sum->value[j] * ex;
    } else {
        memset(buf, 0, r->n * sizeof *buf);
        for (size_t k = 0; k < sum->n_touched; k++) buf[sum->touched[k]] = sum->value[sum->touched[k]] * ex;
    }
    float total;
    if (replica_ring_sum(r, buf, r->n, examples, &total) != 0) return -1;
    r->clock++;
    r->stats.pushes++;
    if (total <= 0.0f) {
        if (!sum->dense) grad_clear(sum);
        *applied = 1;  // no example anywhere this round: nothing to apply
    } else if (sum->dense) {
        for (size_t j = 0; j < r->n; j++) sum->value[j] = buf[j] / total;
    } else {
        grad_clear(sum);
        for (size_t j = 0; j < r->n; j++)
            if (buf[j] != 0.0f) grad_add(sum, (uint32_t)j, buf[j] / total);
    }
    r->stats.comm_s += replica_now_s() - t0;
    return 0;
}

const sync_strategy_t sync_strategy_allreduce = {
    .family = "allreduce",
    .train_mode = TRAIN_MODE_SYNC,
    .ring = 1,
    .exchange = exchange_allreduce,
};
