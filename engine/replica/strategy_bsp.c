// bsp: a synchronous parameter server. Each round the replica's threads
// average one gradient, thread 0 pushes it to every shard (flag SUM), the
// servers apply the workers' sum once, and the replica pulls the result
// (sync_strategy.h): a dense gradient asks for it with the push
// (ps_client_push_commit_ask), which saves the pull's message and lets a
// large shard answer range by range as it applies the round; with one thread
// and plain SGD the answer goes straight into the thread's parameter copy
// (exchange_bsp_step). With backup workers the servers close a round without
// the late gradients; the replica does the same either way.
// A model read by key (working_set.h) with a sparse gradient pulls no model
// after its push: before each round it pulls the keys that round's examples
// read, once the round before it is complete, and the whole model only
// before an evaluation and at the end.
// Where every shard offers it (a local launch: net/ps_local_round.h), a dense
// round stepped in place goes through shared memory instead of ZeroMQ: the
// trainer stores the average where the shard reads it, and the round's
// values are copied straight into the thread's copy.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/replica/by_key.h"
#include "engine/replica/replica_impl.h"
#include "kernels/foundation/partition.h"
#include "net/ps_client.h"
#include "net/ps_local_round.h"

#define PUSH_BLOCK 2048  // floats per block copied into a push frame and checksummed at once

// The mode's state (r->mode): a model read by key's.
typedef struct bsp {
    by_key_t by_key;
    int round_prepared;  // this round's keys were pulled (its round before complete)
    // (n) A dense model stepped in place (exchange_bsp_step): the replica's
    // average, stored there by the trainer (train_link_t.sum_buffer).
    float *average;
    // Stepped in place with one server: the trainer stores the average in
    // the next push's frame itself (the link's sum_buffer moves to each new
    // frame), so the push checksums it and sends it without copying it.
    int average_in_frame;
    // (n_servers) Each shard's segment, where every shard offers one and the
    // round is stepped in place; NULL: rounds go through ZeroMQ.
    ps_local_round_t **local;
    uint64_t local_rounds;  // rounds that went through them
    int average_finite;  // the trainer's word on the average it stored (train_link_t.sum_finite)
} bsp_t;

// A dense average pushed to every shard, asking for the round's values back
// into `out`.
static int push_dense_ask(replica_t *r, const float *average, size_t examples, float *out) {
    float *const *frames = ps_client_push_frames(r->client, r->err, sizeof r->err);
    if (!frames) return -1;
    // Copied block by block, each block checksummed while still in cache
    // (the commit then sends without another pass over the frame).
    size_t begin = 0, end = 0;
    for (size_t k = 0; k < r->rc->n_servers; k++) {
        shard_range(r->n, r->rc->n_servers, k, &begin, &end);
        for (size_t from = 0; from < end - begin; from += PUSH_BLOCK) {
            size_t len = end - begin - from < PUSH_BLOCK ? end - begin - from : PUSH_BLOCK;
            memcpy(frames[k] + from, average + begin + from, len * sizeof(float));
            ps_client_push_block_written(r->client, k, from, len);
        }
    }
    return ps_client_push_commit_ask(r->client, r->clock, (uint32_t)examples, 1, out, r->err, sizeof r->err);
}

// This round's average, pushed as the run asks: encoded, dense frames, or the
// touched coordinates in key order. *asked: the push asked for the round's
// values (into r->pulled), so no pull follows.
static int push_round(replica_t *r, grad_t *sum, size_t examples, int *asked) {
    *asked = 0;
    if (sum->dense && r->comp) return replica_push_encoded(r, sum->value, (uint32_t)examples, 1);
    if (sum->dense) {
        *asked = 1;
        return push_dense_ask(r, sum->value, examples, r->pulled);
    }
    memcpy(r->idx, sum->touched, sum->n_touched * sizeof *r->idx);
    qsort(r->idx, sum->n_touched, sizeof *r->idx, replica_cmp_u32);
    for (size_t k = 0; k < sum->n_touched; k++) r->val[k] = sum->value[r->idx[k]];
    return ps_client_push_sparse(r->client, r->idx, r->val, sum->n_touched, r->clock, (uint32_t)examples, 1, r->err,
                                 sizeof r->err);
}

// The wait for a round's end in a --trace timeline (docs/trace.md): after the
// push, or by key before the next round.
static const trace_kind_t TK_ROUND_WAIT = {"round_wait", "sync", "clock"};

// By key, before a round: the keys its examples read, as they are once every
// worker's gradient of the round before is in.
static int prepare_bsp(void *ctx, const uint32_t *examples, size_t count, param_t *w) {
    replica_t *r = ctx;
    bsp_t *b = r->mode;
    if (!b->by_key.on) return 0;
    double t0 = replica_now_s();
    size_t nk = working_set_keys(&b->by_key.ws, examples, count, b->by_key.pull_keys);
    uint64_t span = TRACE_BEGIN();
    if (ps_client_pull_keys_at(r->client, ssp_gate(r->clock, 0, 0).pull_clock, b->by_key.pull_keys, nk, r->pulled,
                               r->err, sizeof r->err) != 0)
        return -1;
    TRACE_END(&TK_ROUND_WAIT, span, r->clock);
    for (size_t i = 0; i < nk; i++) param_set(&w[b->by_key.pull_keys[i]], r->pulled[i]);
    replica_count_pull(r);
    b->round_prepared = 1;
    double dt = replica_now_s() - t0;
    r->stats.wait_s += dt;  // the round before ends when the slowest worker's gradient is in
    r->stats.comm_s += dt;
    return 0;
}

static const trace_kind_t TK_PUSH = {"push", "net", "clock"};

// This round's push sent (its span began at `span`): the clock, the count, the timeline.
static void round_pushed(replica_t *r, uint64_t span) {
    r->clock++;
    replica_count_push(r);
    TRACE_END(&TK_PUSH, span, r->clock);
}

// The round's values: asked for with the push (they arrive where it asked),
// else pulled into r->pulled. The wait is the round's: it ends when the
// slowest worker's gradient is in.
static int await_round(replica_t *r, int asked) {
    uint64_t min_clock;
    double wait_from = replica_now_s();
    uint64_t span = TRACE_BEGIN();
    int rc = asked ? ps_client_await_values(r->client, &min_clock, r->err, sizeof r->err)
                   : ps_client_pull(r->client, ssp_gate(r->clock, 0, 0).pull_clock, r->pulled, &min_clock, r->err,
                                    sizeof r->err);
    if (rc != 0) return -1;
    TRACE_END(&TK_ROUND_WAIT, span, r->clock);
    r->stats.wait_s += replica_now_s() - wait_from;
    replica_count_pull(r);
    return 0;
}

static int exchange_bsp(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    replica_t *r = ctx;
    bsp_t *b = r->mode;
    double t0 = replica_now_s();
    // By key, a round with none of this replica's examples had no prepare:
    // its push still waits for the round before it to be complete.
    if (b->by_key.on && !b->round_prepared && prepare_bsp(r, NULL, 0, w) != 0) return -1;
    b->round_prepared = 0;
    uint64_t span = TRACE_BEGIN();
    int asked;
    if (push_round(r, sum, examples, &asked) != 0) return -1;
    round_pushed(r, span);
    if (b->by_key.on && !asked) {
        // The next round's prepare pulls its keys once this one is complete.
        *applied = 1;
        r->stats.comm_s += replica_now_s() - t0;
        return 0;
    }
    // The next round (bound 0) starts on the model every worker's gradient of this one is in.
    if (await_round(r, asked) != 0) return -1;
    params_write(w, r->n, r->pulled);
    *applied = 1;
    r->stats.comm_s += replica_now_s() - t0;
    return 0;
}

// A round through shared memory: the average posted to every shard (with
// one shard the trainer stored it in place already), then each shard's values
// copied into params. The counts and the timeline are a ZeroMQ round's.
static int local_round(replica_t *r, bsp_t *b, size_t examples, float *params) {
    size_t ns = r->rc->n_servers, begin, end;
    uint64_t span = TRACE_BEGIN();
    for (size_t k = 0; k < ns; k++) {
        shard_range(r->n, ns, k, &begin, &end);
        if (ns > 1) memcpy(ps_local_round_gradient(b->local[k]), b->average + begin, (end - begin) * sizeof(float));
        ps_client_local_push_sent(r->client, k, end - begin);
        if (ps_local_round_post(b->local[k], r->clock, ps_client_shard_version(r->client, k), (uint32_t)examples,
                                b->average_finite, r->err, sizeof r->err) != 0)
            return -1;
    }
    uint64_t clock = r->clock;
    round_pushed(r, span);
    double wait_from = replica_now_s();
    span = TRACE_BEGIN();
    for (size_t k = 0; k < ns; k++) {
        shard_range(r->n, ns, k, &begin, &end);
        ps_local_answer_t a;
        if (ps_local_round_await(b->local[k], clock, params + begin, r->rc->servers_finished, &a, r->err,
                                 sizeof r->err) != 0)
            return -1;
        if (a.refused != WIRE_STATUS_OK) return ps_client_local_refusal(r->client, k, a.refused, r->err, sizeof r->err);
        ps_client_local_push_answered(r->client, k, a.version, end - begin);
    }
    TRACE_END(&TK_ROUND_WAIT, span, r->clock);
    double waited = replica_now_s() - wait_from;
    r->stats.wait_s += waited;
    ps_client_local_round_done(r->client, waited);
    replica_count_pull(r);
    b->local_rounds++;
    return 0;
}

// With the average in the push's frame: the next round's frame, where the
// trainer stores it (train_link_t.sum_buffer, read anew each round).
static int next_frame(replica_t *r) {
    float *const *frames = ps_client_push_frames(r->client, r->err, sizeof r->err);
    if (!frames) return -1;
    r->link.sum_buffer = frames[0];
    return 0;
}

// A dense round stepped in place (train_link_t.exchange_step, sum_is_average):
// the trainer stored the replica's average in b->average; the servers' values
// after the round come back straight into the thread's copy, `params`, where
// exchange_bsp's answer went to r->pulled, then to w, and the next step read
// w into the copy again: two passes over the model a round fewer. The pushed
// bits are exchange_bsp's, so the servers' model is too.
static int exchange_bsp_step(void *ctx, size_t examples, float lr, float *params, int *stepped) {
    (void)lr;
    replica_t *r = ctx;
    bsp_t *b = r->mode;
    double t0 = replica_now_s();
    if (b->local) {
        if (local_round(r, b, examples, params) != 0) return -1;
        *stepped = 1;
        r->stats.comm_s += replica_now_s() - t0;
        return 0;
    }
    uint64_t span = TRACE_BEGIN();
    int rc;
    if (b->average_in_frame) {  // the commit checksums the frame in one pass
        rc = ps_client_push_commit_ask(r->client, r->clock, (uint32_t)examples, 1, params, r->err, sizeof r->err);
    } else {
        rc = push_dense_ask(r, b->average, examples, params);
    }
    if (rc != 0) return -1;
    round_pushed(r, span);
    if (await_round(r, 1) != 0) return -1;
    *stepped = 1;  // params hold the servers' values, w is behind them
    r->stats.comm_s += replica_now_s() - t0;
    return b->average_in_frame ? next_frame(r) : 0;
}

// By key: the whole model as of the last complete round, into w.
static int refresh_bsp(void *ctx, param_t *w) {
    replica_t *r = ctx;
    bsp_t *b = r->mode;
    if (!b->by_key.on) return 0;
    uint64_t min_clock;
    if (ps_client_pull(r->client, ssp_gate(r->clock, 0, 0).pull_clock, r->pulled, &min_clock, r->err, sizeof r->err) !=
        0)
        return -1;
    for (size_t j = 0; j < r->n; j++) param_set(&w[j], r->pulled[j]);
    replica_count_pull(r);
    return 0;
}

// By key for a model with a sparse block whose gradient is sparse (a dense
// one is pushed and answered whole).
static int bsp_alloc(replica_t *r, char *err, size_t err_len) {
    bsp_t *b = r->mode = calloc(1, sizeof *b);
    if (!b) return replica_out_of_memory(r, err, err_len);
    b->by_key.on = working_set_by_key(r->model, SYNC_MODE_BSP, r->gpu != NULL, r->comp != NULL);
    if (!b->by_key.on) return 0;
    b->by_key.pull_keys = malloc(r->n * sizeof *b->by_key.pull_keys);
    if (!b->by_key.pull_keys) return replica_out_of_memory(r, err, err_len);
    return working_set_init_keys(&b->by_key.ws, r->model, err, err_len);
}

static void close_local(replica_t *r, bsp_t *b) {
    for (size_t k = 0; b->local && k < r->rc->n_servers; k++) ps_local_round_destroy(&b->local[k]);
    free(b->local);
    b->local = NULL;
}

// Every shard's segment, or none (a shard without one: another machine, or
// a run that does not offer them, and every round goes through ZeroMQ).
static void open_local(replica_t *r, bsp_t *b) {
    size_t ns = r->rc->n_servers, begin, end;
    if (!(b->local = calloc(ns, sizeof *b->local))) return;
    char why[256];
    for (size_t k = 0; k < ns; k++) {
        shard_range(r->n, ns, k, &begin, &end);
        if (!(b->local[k] =
                  ps_local_round_attach(r->rc->run_id, k, (uint32_t)r->rc->id, end - begin, why, sizeof why))) {
            close_local(r, b);
            return;
        }
    }
}

static void bsp_free(replica_t *r) {
    bsp_t *b = r->mode;
    close_local(r, b);
    by_key_free(&b->by_key);
    free(b->average);
    free(b);
    r->mode = NULL;
}

// A dense model pushed whole as float32 from the CPU is offered the round in
// place (the trainer takes it with one thread and plain SGD:
// train_link_t.exchange_step); by key, the link keeps its prepare.
static int bsp_begin(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len) {
    (void)tc, (void)cb;
    bsp_t *b = r->mode;
    train_link_t *l = &r->link;
    if (b->by_key.on) return 0;
    l->prepare = NULL;  // nothing to bring up to date before a round
    if (r->comp || r->gpu || r->sparse) return 0;
    l->exchange_step = exchange_bsp_step;
    l->sum_is_average = 1;
    open_local(r, b);
    // The shards take the trainer's word that the average is finite (checked
    // as it was stored) instead of reading it again on their round's path.
    if (b->local) l->sum_finite = &b->average_finite;
    if (b->local && r->rc->n_servers == 1) {
        l->sum_buffer = ps_local_round_gradient(b->local[0]);  // where the shard reads it
        return 0;
    }
    // Several shards' frames are not one array.
    b->average_in_frame = !b->local && r->rc->n_servers == 1;
    if (b->average_in_frame) {
        if (next_frame(r) != 0) {
            snprintf(err, err_len, "%s", r->err);
            return -1;
        }
        return 0;
    }
    if (!(b->average = malloc(r->n * sizeof *b->average))) return replica_out_of_memory(r, err, err_len);
    l->sum_buffer = b->average;
    return 0;
}

// By key: the replica's model is the servers' after the last round.
static void bsp_end(replica_t *r) {
    bsp_t *b = r->mode;
    if (b->by_key.on && !atomic_load(&r->abort) && refresh_bsp(r, r->w) != 0) atomic_store(&r->abort, 1);
}

static void bsp_report(const replica_t *r, replica_stats_t *stats) {
    const bsp_t *b = r->mode;
    stats->local_rounds = b->local_rounds;
}

static by_key_t *bsp_by_key(replica_t *r) {
    bsp_t *b = r->mode;
    return b->by_key.on ? &b->by_key : NULL;
}

const sync_strategy_t sync_strategy_bsp = {
    .family = "bsp",
    .train_mode = TRAIN_MODE_SYNC,
    .servers = 1,
    .alloc = bsp_alloc,
    .free = bsp_free,
    .begin = bsp_begin,
    .exchange = exchange_bsp,
    .prepare = prepare_bsp,
    .refresh = refresh_bsp,
    .end = bsp_end,
    .by_key = bsp_by_key,
    .report = bsp_report,
    .global = replica_evaluate_global,  // the servers' model: the replica's too
};
