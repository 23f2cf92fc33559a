// local: local SGD. Each replica's threads step alone (plain SGD, rounds as
// in sync mode over its slice of the data), and every H rounds (and after the
// last) the replicas average their models by ring allreduce, weighted by the
// examples each took since the last average (sync_strategy.h). Evaluations in
// between are of the model right after an average, copied then and evaluated
// after training (replica.h).
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/replica/replica_impl.h"

#define AVERAGE_CHUNK 1024  // floats of w scaled or written at a time (4 KB, in L1)

// ---- the evaluator of the averaged model ------------------------------------------
//
// Off the clock: right after an average that falls on an evaluation point,
// the averaged model is copied (by thread 0, the others at the round's
// barrier), and the copies are evaluated once training is done, when the
// trainer reports its last point (its threads have finished), just before
// that point, so rows stay in order. A point past the snapshot budget
// (train_config_t.defer_eval_bytes, handed to this evaluator instead) is
// evaluated at once, after the copies before it, holding the round.

typedef struct avg_point {
    float *values;  // (n) the averaged model
    train_point_t point;  // test fields filled when evaluated
} avg_point_t;

typedef struct avg_eval {
    pthread_mutex_t mu;  // the pending copies, between thread 0 and the trainer's main thread
    int inited;
    avg_point_t *pending;
    size_t n_pending, cap_pending, bytes, budget;
    param_t *w;  // (n) where a copy is evaluated
    model_ws_t *ws;
    size_t limit;  // test examples per evaluation
    uint64_t every, next;  // this replica's examples between points, and the next point
    double every_s, next_s;  // > 0: points by training time too
    double t0;  // when training started (the trainer's first evaluation ended)
    const train_callbacks_t *user;  // forwarded to
    train_callbacks_t wrapped;  // what the trainer calls instead
} avg_eval_t;

// The mode's state (r->mode).
typedef struct local_sgd {
    uint64_t last_round;  // rounds the run has: the last one is always followed by an average
    uint64_t since_avg;  // examples this replica took since the last average
    uint64_t samples;  // examples this replica took
    avg_eval_t ae;  // the evaluator of the averaged model
} local_sgd_t;

static avg_eval_t *avg_eval_of(replica_t *r) {
    local_sgd_t *loc = r->mode;
    return &loc->ae;
}

// Evaluates the averaged model `values` into p and reports it (e->mu held).
static void avg_eval_report(replica_t *r, const float *values, train_point_t *p) {
    avg_eval_t *e = avg_eval_of(r);
    for (size_t j = 0; j < r->n; j++) param_set(&e->w[j], values[j]);
    eval_sums_t sums = {0.0, 0.0, 0};
    model_evaluate(r->model, e->w, 0, e->limit, e->ws, &sums);
    p->test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
    p->test_metric = eval_metric_value(model_metric(r->model), &sums);
    if (e->user && e->user->on_eval) e->user->on_eval(p, e->user->ctx);
}

// Evaluates and reports the pending copies, in order (e->mu held).
static void avg_eval_flush(replica_t *r) {
    avg_eval_t *e = avg_eval_of(r);
    for (size_t i = 0; i < e->n_pending; i++) {
        avg_eval_report(r, e->pending[i].values, &e->pending[i].point);
        free(e->pending[i].values);
    }
    e->n_pending = 0;
    e->bytes = 0;
}

// The trainer's points (its first and its last) come after the copies before
// them; its first one's end is when training starts.
static void avg_eval_on_eval(const train_point_t *p, void *ctx) {
    replica_t *r = ctx;
    avg_eval_t *e = avg_eval_of(r);
    pthread_mutex_lock(&e->mu);
    avg_eval_flush(r);
    if (e->user && e->user->on_eval) e->user->on_eval(p, e->user->ctx);
    pthread_mutex_unlock(&e->mu);
    if (e->t0 == 0.0) e->t0 = replica_now_s();  // the first evaluation is done: training starts
}

static void avg_eval_on_progress(const train_point_t *p, double eta_s, void *ctx) {
    replica_t *r = ctx;
    avg_eval_t *e = avg_eval_of(r);
    pthread_mutex_lock(&e->mu);
    if (e->user && e->user->on_progress) e->user->on_progress(p, eta_s, e->user->ctx);
    pthread_mutex_unlock(&e->mu);
}

// Keeps a copy of w at point p for after training; 0 when the budget (or
// memory) has no room for it.
static int avg_eval_keep(avg_eval_t *e, const float *averaged, size_t n, const train_point_t *p) {
    size_t bytes = n * sizeof(float);
    if (e->bytes + bytes > e->budget) return 0;
    if (e->n_pending == e->cap_pending) {
        size_t cap = e->cap_pending ? 2 * e->cap_pending : 16;
        avg_point_t *grown = realloc(e->pending, cap * sizeof *grown);
        if (!grown) return 0;
        e->pending = grown;
        e->cap_pending = cap;
    }
    float *values = malloc(bytes);
    if (!values) return 0;
    memcpy(values, averaged, bytes);
    e->pending[e->n_pending++] = (avg_point_t){values, *p};
    e->bytes += bytes;
    return 1;
}

// Right after an average (thread 0, the other threads at the round's barrier):
// keeps the averaged model when a point is due (or evaluates it now, past the budget).
static void avg_eval_offer(replica_t *r, const float *averaged, float lr) {
    local_sgd_t *loc = r->mode;
    avg_eval_t *e = &loc->ae;
    if (!e->ws || r->clock == loc->last_round) return;  // the trainer's last evaluation is of this average
    double now = replica_now_s(), wall = now - e->t0;
    int due = loc->samples >= e->next || (e->every_s > 0 && wall >= e->next_s);
    if (!due) return;
    train_point_t p = {
        .wall_s = wall,
        .samples = loc->samples,
        .updates = r->clock,
        .epoch = (double)loc->samples * (double)r->rc->n_workers / (double)model_num_train(r->model),
        .samples_per_s = wall > 0 ? (double)loc->samples / wall : 0.0,
        .lr = lr,
        .train_loss = NAN,  // the threads' losses are the trainer's
        .test_loss = NAN,
        .test_metric = NAN,
    };
    pthread_mutex_lock(&e->mu);
    if (!avg_eval_keep(e, averaged, r->n, &p)) {
        avg_eval_flush(r);
        avg_eval_report(r, averaged, &p);
    }
    pthread_mutex_unlock(&e->mu);
    while (e->next <= loc->samples) e->next = (loc->samples / e->every + 1) * e->every;
    while (e->every_s > 0 && e->next_s <= wall) e->next_s += e->every_s;
}

// Takes over the trainer's evaluation points (tc: the trainer's config, which
// keeps only its first and last, evaluated at once) and the snapshot budget.
// Returns 0, or -1.
static int avg_eval_start(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len) {
    avg_eval_t *e = avg_eval_of(r);
    pthread_mutex_init(&e->mu, NULL);
    e->inited = 1;
    size_t every = tc->eval_every ? tc->eval_every : model_num_train(r->model) / r->rc->n_workers;
    e->every = every ? every : 1;
    e->next = e->every;
    e->every_s = tc->eval_every_s;
    e->next_s = e->every_s;
    e->budget = tc->defer_eval_bytes;
    e->user = *cb;
    size_t limit = model_num_test(r->model);
    if (tc->eval_limit && tc->eval_limit < limit) limit = tc->eval_limit;
    e->limit = limit;
    tc->eval_every = (size_t)1 << 62;  // the trainer evaluates at its start and end only
    tc->eval_every_s = 0;
    tc->defer_eval_bytes = 0;
    e->wrapped = (train_callbacks_t){avg_eval_on_eval, avg_eval_on_progress, r};
    *cb = &e->wrapped;
    if (e->every >= ((uint64_t)1 << 62) && e->every_s <= 0) return 0;  // no point in between
    if (!(e->w = params_new(r->n, err, err_len)) || !(e->ws = model_ws_new(r->model, 1, err, err_len))) return -1;
    return 0;
}

static void avg_eval_stop(replica_t *r) {
    avg_eval_t *e = avg_eval_of(r);
    for (size_t i = 0; i < e->n_pending; i++) free(e->pending[i].values);  // a run that failed
    free(e->pending);
    e->pending = NULL;
    e->n_pending = e->cap_pending = e->bytes = 0;
    model_ws_destroy(&e->ws);
    params_free(&e->w);
    if (e->inited) {
        pthread_mutex_destroy(&e->mu);
        e->inited = 0;
    }
}

// Counts a round of local SGD (its `examples` this replica's); 1 when the
// replicas average after it: every local_steps rounds, and after the run's last.
static int local_round_ends_period(replica_t *r, size_t examples) {
    local_sgd_t *loc = r->mode;
    r->clock++;
    loc->since_avg += examples;
    loc->samples += examples;
    return r->clock % r->rc->local_steps == 0 || r->clock == loc->last_round;
}

static void local_averaged(replica_t *r, double t0) {
    local_sgd_t *loc = r->mode;
    loc->since_avg = 0;
    replica_count_push(r);  // averages
    r->stats.comm_s += replica_now_s() - t0;
}

// A round of local SGD, after the trainer applied this replica's own averaged
// gradient (its step alone; the link's update_before_exchange, set in
// local_begin). At a period's end the replicas average their models: each
// sends its parameters times the examples it took since the last average,
// the ring sums them with those counts, and every replica divides, so all
// hold the same bits.
static int exchange_local(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)sum;
    replica_t *r = ctx;
    local_sgd_t *loc = r->mode;
    if (!local_round_ends_period(r, examples)) return 0;
    double t0 = replica_now_s();
    *applied = 1;  // w is rewritten
    float *buf = r->ring_buf, ex = (float)loc->since_avg, total;
    // w's bulk reads and writes, through a chunk in L1 (vector lanes, params.h).
    float chunk[AVERAGE_CHUNK];
    for (size_t off = 0; off < r->n; off += AVERAGE_CHUNK) {
        size_t m = r->n - off < AVERAGE_CHUNK ? r->n - off : AVERAGE_CHUNK;
        params_read(w + off, m, chunk);
        for (size_t i = 0; i < m; i++) buf[off + i] = chunk[i] * ex;
    }
    if (replica_ring_sum(r, buf, r->n, loc->since_avg, &total) != 0) return -1;
    for (size_t off = 0; off < r->n; off += AVERAGE_CHUNK) {
        size_t m = r->n - off < AVERAGE_CHUNK ? r->n - off : AVERAGE_CHUNK;
        if (!(total > 0.0f)) {
            params_read(w + off, m, buf + off);  // nothing to average: buf becomes w, for the evaluator
            continue;
        }
        for (size_t i = 0; i < m; i++) buf[off + i] = buf[off + i] / total;
        params_write(w + off, m, buf + off);
    }
    local_averaged(r, t0);
    avg_eval_offer(r, buf, lr);
    return 0;
}

static void average_block(void *ctx, size_t offset, float *values, size_t n) {
    (void)offset;
    const float total = *(const float *)ctx;
    for (size_t i = 0; i < n; i++) values[i] = values[i] / total;
}

// The same, for one thread that steps its copy of the parameters alone
// (train_link_t.exchange_step): the copy is averaged as the sum is formed (in
// shared memory each worker divides its slice and the others copy it:
// collective_sum_map), the same bits as exchange_local's.
static int exchange_local_step(void *ctx, size_t examples, float lr, float *params, int *stepped) {
    replica_t *r = ctx;
    local_sgd_t *loc = r->mode;
    *stepped = 0;
    if (!local_round_ends_period(r, examples)) return 0;
    double t0 = replica_now_s();
    float *buf = r->ring_buf, ex = (float)loc->since_avg, total = 0.0f;
    for (size_t i = 0; i < r->n; i++) buf[i] = params[i] * ex;
    if (replica_ring_sum_map(r, buf, loc->since_avg, &total, average_block, &total, params) != 0) return -1;
    *stepped = total > 0.0f;
    local_averaged(r, t0);
    avg_eval_offer(r, params, lr);
    return 0;
}

// ---- the strategy ---------------------------------------------------------------

static int local_check(replica_t *r, const optimizer_config_t *oc, char *err, size_t err_len) {
    if (r->rc->local_steps == 0 || oc->kind != OPTIMIZER_KIND_SGD || oc->momentum > 0.0) {
        snprintf(err, err_len, "--sync local: needs --local-steps H >= 1 and plain SGD (no momentum) on the workers");
        return -1;
    }
    return 0;
}

static int local_alloc(replica_t *r, char *err, size_t err_len) {
    if (!(r->mode = calloc(1, sizeof(local_sgd_t)))) return replica_out_of_memory(r, err, err_len);
    return 0;
}

static void local_free(replica_t *r) {
    free(r->mode);
    r->mode = NULL;
}

static int local_begin(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len) {
    // Rounds of the run: every replica runs all of them (no time limit, no
    // early stop under local SGD), and the last is followed by an average.
    local_sgd_t *loc = r->mode;
    size_t n_train = model_num_train(r->model), round_size = r->rc->n_workers * r->threads * tc->batch;
    loc->last_round = (uint64_t)tc->epochs * ((n_train + round_size - 1) / round_size);
    // Models are averaged, not gradients: the trainer applies each round's
    // step to w, in the pass that computes it where it can.
    r->link.update_before_exchange = 1;
    if (avg_eval_start(r, tc, cb, err, err_len) == 0) return 0;
    avg_eval_stop(r);
    return -1;
}

const sync_strategy_t sync_strategy_local = {
    .family = "local",
    .train_mode = TRAIN_MODE_SYNC,
    .ring = 1,
    .check = local_check,
    .alloc = local_alloc,
    .free = local_free,
    .begin = local_begin,
    .end = avg_eval_stop,
    .exchange = exchange_local,
    .exchange_step = exchange_local_step,
};
