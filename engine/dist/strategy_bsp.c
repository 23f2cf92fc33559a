// bsp: a synchronous parameter server. Each round the replica's threads
// average one gradient, thread 0 pushes it to every shard (flag SUM), the
// servers apply the workers' sum once, and the replica pulls the result
// (sync_strategy.h): a dense gradient asks for it with the push
// (ps_client_push_commit_ask), which saves the pull's message and lets a
// large shard answer range by range as it applies the round. With backup workers the servers close a round without
// the late gradients; the replica does the same either way.
#include <stdlib.h>
#include <string.h>

#include "engine/dist/replica_impl.h"
#include "kernels/partition.h"  // defines: shard_range
#include "net/ps_client.h"      // defines: ps_client_push_*, ps_client_await_values, ps_client_pull

#define PUSH_BLOCK 2048  // floats per block copied into a push frame and checksummed at once

// This round's average, pushed as the run asks: encoded, dense frames, or the
// touched coordinates in key order. *asked: the push asked for the round's
// values (into r->pulled), so no pull follows.
static int push_round(replica_t *r, grad_t *sum, size_t examples, int *asked) {
    *asked = 0;
    if (sum->dense && r->comp) return replica_push_encoded(r, sum->value, (uint32_t)examples, 1);
    if (sum->dense) {
        float *const *frames = ps_client_push_frames(r->client, r->err, sizeof r->err);
        if (!frames) return -1;
        // Copied block by block, each block checksummed while still in cache
        // (the commit then sends without another pass over the frame).
        size_t begin = 0, end = 0;
        for (size_t k = 0; k < r->rc->n_servers; k++) {
            shard_range(r->n, r->rc->n_servers, k, &begin, &end);
            for (size_t from = 0; from < end - begin; from += PUSH_BLOCK) {
                size_t len = end - begin - from < PUSH_BLOCK ? end - begin - from : PUSH_BLOCK;
                memcpy(frames[k] + from, sum->value + begin + from, len * sizeof(float));
                ps_client_push_block_written(r->client, k, from, len);
            }
        }
        *asked = 1;
        return ps_client_push_commit_ask(r->client, r->clock, (uint32_t)examples, 1, r->pulled, r->err, sizeof r->err);
    }
    memcpy(r->idx, sum->touched, sum->n_touched * sizeof *r->idx);
    qsort(r->idx, sum->n_touched, sizeof *r->idx, replica_cmp_u32);
    for (size_t k = 0; k < sum->n_touched; k++) r->val[k] = sum->value[r->idx[k]];
    return ps_client_push_sparse(r->client, r->idx, r->val, sum->n_touched, r->clock, (uint32_t)examples, 1, r->err,
                                 sizeof r->err);
}

static int exchange_bsp(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    static const trace_kind_t push = {"push", "net", "clock"}, round_wait = {"round_wait", "sync", "clock"};
    replica_t *r = ctx;
    double t0 = replica_now_s();
    uint64_t span = TRACE_BEGIN();
    int asked;
    if (push_round(r, sum, examples, &asked) != 0) return -1;
    r->clock++;
    r->stats.pushes++;
    TRACE_END(&push, span, r->clock);
    // The next round (bound 0) starts on the model every worker's gradient of this one is in.
    uint64_t min_clock;
    double wait_from = replica_now_s();
    span = TRACE_BEGIN();
    int rc = asked ? ps_client_await_values(r->client, &min_clock, r->err, sizeof r->err)
                   : ps_client_pull(r->client, ssp_gate(r->clock, 0, 0).pull_clock, r->pulled, &min_clock, r->err,
                                    sizeof r->err);
    if (rc != 0) return -1;
    TRACE_END(&round_wait, span, r->clock);
    r->stats.wait_s += replica_now_s() - wait_from;  // the round ends when the slowest worker's gradient is in
    r->stats.pulls++;
    for (size_t j = 0; j < r->n; j++) param_set(&w[j], r->pulled[j]);
    *applied = 1;
    r->stats.comm_s += replica_now_s() - t0;
    return 0;
}

const sync_strategy_t sync_strategy_bsp = {
    .family = "bsp",
    .train_mode = TRAIN_MODE_SYNC,
    .servers = 1,
    .exchange = exchange_bsp,
    .global = replica_evaluate_global,  // the servers' model: the replica's too
};
