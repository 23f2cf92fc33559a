// local: local SGD. Each replica's threads step alone (plain SGD, rounds as
// in sync mode over its slice of the data), and every H rounds (and after the
// last) the replicas average their models by ring allreduce, weighted by the
// examples each took since the last average (sync_strategy.h). Evaluations in
// between are of the model right after an average, by a thread beside
// training (replica.h).
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dist/replica_impl.h"

// ---- the evaluator of the averaged model ------------------------------------------

struct avg_eval {
    pthread_t thread;
    int inited, started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;            // a snapshot is waiting or being evaluated
    int stop;
    param_t *snap;       // (n) the averaged model to evaluate
    model_ws_t *ws;
    train_point_t point; // its point; test fields filled by the thread
    size_t limit;        // test examples per evaluation
    uint64_t every, next;       // this replica's examples between points, and the next point
    double every_s, next_s;     // > 0: points by training time too
    double t0;           // when training started (the trainer's first evaluation ended)
    const train_callbacks_t *user;  // forwarded to, one call at a time
    train_callbacks_t wrapped;      // what the trainer calls instead
};

static void *avg_eval_main(void *arg) {
    replica_t *r = arg;
    avg_eval_t *e = r->ae;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->busy && !e->stop) pthread_cond_wait(&e->cv, &e->mu);
        if (!e->busy) break;
        pthread_mutex_unlock(&e->mu);
        eval_sums_t sums = {0.0, 0.0, 0};
        model_evaluate(r->model, e->snap, 0, e->limit, e->ws, &sums);
        e->point.test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
        e->point.test_metric = eval_metric_value(model_metric(r->model), &sums);
        pthread_mutex_lock(&e->mu);
        if (e->user && e->user->on_eval) e->user->on_eval(&e->point, e->user->ctx);
        e->busy = 0;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

// The trainer's callbacks, forwarded one at a time (the evaluator thread
// reports too); its own evaluations (the first and the last) wait for the
// evaluator to finish, so rows stay in order.
static void avg_eval_on_eval(const train_point_t *p, void *ctx) {
    replica_t *r = ctx;
    avg_eval_t *e = r->ae;
    pthread_mutex_lock(&e->mu);
    while (e->busy) pthread_cond_wait(&e->cv, &e->mu);
    if (e->user && e->user->on_eval) e->user->on_eval(p, e->user->ctx);
    pthread_mutex_unlock(&e->mu);
    if (e->t0 == 0.0) e->t0 = replica_now_s();  // the first evaluation is done: training starts
}

static void avg_eval_on_progress(const train_point_t *p, double eta_s, void *ctx) {
    replica_t *r = ctx;
    avg_eval_t *e = r->ae;
    pthread_mutex_lock(&e->mu);
    if (e->user && e->user->on_progress) e->user->on_progress(p, eta_s, e->user->ctx);
    pthread_mutex_unlock(&e->mu);
}

// Right after an average (thread 0, the other threads at the round's barrier):
// hands the averaged model to the evaluator when a point is due and it is free.
static void avg_eval_offer(replica_t *r, const param_t *w, float lr) {
    avg_eval_t *e = r->ae;
    if (!e->started || r->clock == r->last_round) return;  // the trainer's last evaluation is of this average
    double now = replica_now_s(), wall = now - e->t0;
    int due = r->samples >= e->next || (e->every_s > 0 && wall >= e->next_s);
    if (!due) return;
    pthread_mutex_lock(&e->mu);
    if (!e->busy) {
        for (size_t j = 0; j < r->n; j++) param_set(&e->snap[j], param_get(&w[j]));
        train_point_t *p = &e->point;
        p->wall_s = wall;
        p->samples = r->samples;
        p->updates = r->clock;
        p->epoch = (double)r->samples * (double)r->rc->n_workers / (double)model_num_train(r->model);
        p->samples_per_s = wall > 0 ? (double)r->samples / wall : 0.0;
        p->lr = lr;
        p->train_loss = NAN;  // the threads' losses are the trainer's
        p->test_loss = p->test_metric = NAN;
        e->busy = 1;
        while (e->next <= r->samples) e->next = (r->samples / e->every + 1) * e->every;
        while (e->every_s > 0 && e->next_s <= wall) e->next_s += e->every_s;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

// Takes over the trainer's evaluation points (tc: the trainer's config, which
// keeps only its first and last) and starts the evaluator. Returns 0, or -1.
static int avg_eval_start(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len) {
    avg_eval_t *e = r->ae;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->inited = 1;
    size_t every = tc->eval_every ? tc->eval_every : model_num_train(r->model) / r->rc->n_workers;
    e->every = every ? every : 1;
    e->next = e->every;
    e->every_s = tc->eval_every_s;
    e->next_s = e->every_s;
    e->user = *cb;
    size_t limit = model_num_test(r->model);
    if (tc->eval_limit && tc->eval_limit < limit) limit = tc->eval_limit;
    e->limit = limit;
    tc->eval_every = (size_t)1 << 62;  // the trainer evaluates at its start and end only
    tc->eval_every_s = 0;
    e->wrapped = (train_callbacks_t){avg_eval_on_eval, avg_eval_on_progress, r};
    *cb = &e->wrapped;
    if (e->every >= ((uint64_t)1 << 62) && e->every_s <= 0) return 0;  // no point in between
    e->snap = params_new(r->n, err, err_len);
    if (!e->snap || !(e->ws = model_ws_new(r->model, 1, err, err_len))) return -1;
    int prc = pthread_create(&e->thread, NULL, avg_eval_main, r);
    if (prc != 0) {
        snprintf(err, err_len, "worker: starting the evaluator thread: %s", strerror(prc));
        return -1;
    }
    e->started = 1;
    return 0;
}

static void avg_eval_stop(replica_t *r) {
    avg_eval_t *e = r->ae;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        e->started = 0;
    }
    model_ws_destroy(&e->ws);
    params_free(&e->snap);
    if (e->inited) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        e->inited = 0;
    }
}

// A round of local SGD. Between averages the trainer applies this replica's
// own averaged gradient (its step alone). Every local_steps rounds, and after
// the run's last, the replica applies its step here and the replicas average
// their models: each sends its parameters times the examples it took since the
// last average, the ring sums them with those counts, and every replica
// divides, so all hold the same bits.
static int exchange_local(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    replica_t *r = ctx;
    r->clock++;
    r->since_avg += examples;
    r->samples += examples;
    if (r->clock % r->rc->local_steps != 0 && r->clock != r->last_round) return 0;
    double t0 = replica_now_s();
    if (sum->dense) optimizer_apply_range(r->opt, w, sum->value, 0, r->n, lr);
    else optimizer_apply_and_clear(r->opt, w, sum, lr);
    *applied = 1;
    float *buf = r->ring_buf, ex = (float)r->since_avg, total;
    for (size_t j = 0; j < r->n; j++) buf[j] = param_get(&w[j]) * ex;
    if (replica_ring_sum(r, buf, r->n, r->since_avg, &total) != 0) return -1;
    if (total > 0.0f)
        for (size_t j = 0; j < r->n; j++) param_set(&w[j], buf[j] / total);
    r->since_avg = 0;
    r->stats.pushes++;  // averages
    r->stats.comm_s += replica_now_s() - t0;
    avg_eval_offer(r, w, lr);
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
    if (!(r->ae = calloc(1, sizeof *r->ae))) return replica_out_of_memory(r, err, err_len);
    return 0;
}

static int local_begin(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len) {
    // Rounds of the run: every replica runs all of them (no time limit, no
    // early stop under local SGD), and the last is followed by an average.
    size_t n_train = model_num_train(r->model), round_size = r->rc->n_workers * r->threads * tc->batch;
    r->last_round = (uint64_t)tc->epochs * ((n_train + round_size - 1) / round_size);
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
    .begin = local_begin,
    .end = avg_eval_stop,
    .exchange = exchange_local,
};
