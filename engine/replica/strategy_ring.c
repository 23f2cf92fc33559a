// allreduce: the rounds of bsp without a server. The replicas sum their
// averaged gradients, weighted by examples, with a ring allreduce (through
// shared memory or MPI when the run chose it: collective.h), and every replica
// applies the identical update (sync_strategy.h). Also the weighted sum that
// local SGD and hybrid share.
#include <string.h>

#include "engine/replica/collective.h"
#include "engine/replica/replica_impl.h"
#include "kernels/update.h"

// Through the collective the run opened (rc->collective); compressed
// exchanges only on the ZeroMQ ring (replica.c checks that no other is asked to).
static int ring_sum(replica_t *r, float *buf, size_t m, size_t examples, float *total) {
    const replica_config_t *c = r->rc;
    buf[m] = (float)examples;
    if (r->comp)
        return collective_sum_compressed(c->collective, r->comp, r->resid.e, buf, m, examples, total, &r->raw_out,
                                         c->timeout_ms, r->err, sizeof r->err);
    if (collective_sum(c->collective, buf, m + 1, c->timeout_ms, r->err, sizeof r->err) != 0) return -1;
    *total = buf[m];
    return 0;
}

// The collective's call, a span of a --trace timeline (docs/trace.md).
static const trace_kind_t allreduce_span = {"allreduce", "net", "floats"};

int replica_ring_sum(replica_t *r, float *buf, size_t m, size_t examples, float *total) {
    uint64_t span = TRACE_BEGIN();
    int rc = ring_sum(r, buf, m, examples, total);
    TRACE_END(&allreduce_span, span, m + 1);
    return rc;
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
    replica_count_push(r);
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

int replica_ring_sum_map(replica_t *r, float *buf, size_t examples, float *total, collective_map_fn map, void *ctx,
                         float *out) {
    const replica_config_t *c = r->rc;
    if (r->comp) {  // summed whole round the ring, then mapped whole
        if (replica_ring_sum(r, buf, r->n, examples, total) != 0) return -1;
        if (*total > 0.0f) collective_map_all(buf, r->n, map, ctx, out);
        return 0;
    }
    uint64_t span = TRACE_BEGIN();
    int rc = collective_sum_map(c->collective, buf, r->n, (float)examples, total, map, ctx, out, c->timeout_ms, r->err,
                                sizeof r->err);
    TRACE_END(&allreduce_span, span, r->n + 1);
    return rc;
}

// The step by the replicas' average, block by block as the sum is formed
// (collective_sum_map): the parameters' new values in place of the sum.
typedef struct step_map {
    float lr;
    const float *total;  // the examples behind the sum (set before the first block)
    const float *params;  // the values before the step
} step_map_t;

static void step_block(void *ctx, size_t offset, float *values, size_t n) {
    const step_map_t *m = ctx;
    sgd_divided_update_cpu(n, m->lr, *m->total, values, m->params + offset, values);
}

// The same round with the replica's gradient times its examples already in
// the ring's buffer (the trainer stored it there: train_link_t.exchange_step):
// no pass to weight it before the sum nor to average it after, and the step
// made as the sum is formed (in shared memory each worker steps its slice and
// the others copy it: collective_sum_map), so the parameters come back stepped.
static int exchange_allreduce_step(void *ctx, size_t examples, float lr, float *params, int *stepped) {
    replica_t *r = ctx;
    double t0 = replica_now_s();
    float total = 0.0f;
    step_map_t m = {lr, &total, params};
    if (replica_ring_sum_map(r, r->ring_buf, examples, &total, step_block, &m, params) != 0) return -1;
    r->clock++;
    replica_count_push(r);
    *stepped = total > 0.0f;
    r->stats.comm_s += replica_now_s() - t0;
    return 0;
}

const sync_strategy_t sync_strategy_allreduce = {
    .family = "allreduce",
    .train_mode = TRAIN_MODE_SYNC,
    .ring = 1,
    .exchange = exchange_allreduce,
    .exchange_step = exchange_allreduce_step,
};
