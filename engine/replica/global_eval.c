// The run's global-model evaluator (global_eval.h).
#include "engine/replica/global_eval.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/params.h"
#include "kernels/foundation/mono_clock.h"
#include "net/ps_client.h"

#define ERR_LEN 512
#define IDLE_WAIT_S 1.0  // the longest sleep between looks at shard 0's progress when no point is due sooner

// A model pulled at an evaluation point and not yet evaluated: its row is
// filled but for the evaluation's figures.
typedef struct snapshot {
    float *values;  // (n_params)
    global_eval_row_t row;
    size_t row_index;
} snapshot_t;

struct global_eval {
    global_eval_config_t cfg;
    ps_client_t *client;
    float *pulled;  // (n_params)
    param_t *w;  // (n_params) what is evaluated
    model_ws_t *ws;
    snapshot_t *snaps;  // kept for after training, in order
    size_t n_snaps, cap_snaps, snap_bytes;
    pthread_t thread;
    int started;
    atomic_int stop;
    atomic_int first_taken;  // the first point is taken (or the thread ended without it)
    double t0;
    global_eval_row_t *rows;
    size_t n_rows, cap_rows;
    int failed;
    char err[ERR_LEN];
};

// Appends a row; one still to be evaluated (pending) reaches on_row later.
static int append_row(global_eval_t *g, const global_eval_row_t *row, int pending) {
    if (g->n_rows == g->cap_rows) {
        size_t cap = g->cap_rows ? 2 * g->cap_rows : 64;
        global_eval_row_t *grown = realloc(g->rows, cap * sizeof *grown);
        if (!grown) {
            snprintf(g->err, sizeof g->err, "out of memory for its rows");
            return -1;
        }
        g->rows = grown;
        g->cap_rows = cap;
    }
    g->rows[g->n_rows++] = *row;
    if (g->cfg.on_row && !pending) g->cfg.on_row(row, g->cfg.on_row_ctx);
    return 0;
}

// Evaluates values on the test set into row's loss and metric.
static void evaluate_values(global_eval_t *g, const float *values, global_eval_row_t *row) {
    for (size_t j = 0; j < g->cfg.n_params; j++) param_set(&g->w[j], values[j]);
    size_t limit = model_num_test(g->cfg.model);
    if (g->cfg.eval_limit && g->cfg.eval_limit < limit) limit = g->cfg.eval_limit;
    eval_sums_t sums = {0.0, 0.0, 0};
    model_evaluate(g->cfg.model, g->w, 0, limit, g->ws, &sums);
    row->test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
    row->test_metric = eval_metric_value(model_metric(g->cfg.model), &sums);
}

// Keeps the model just pulled for evaluation after training, when the budget
// allows (or always: `final`, the last point, pulled once training is over,
// which must not be marked as evaluated during it). Returns 1 when kept, 0
// when not (evaluate it now), -1 on error.
static int keep_snapshot(global_eval_t *g, const global_eval_row_t *row, int final) {
    size_t bytes = g->cfg.n_params * sizeof(float);
    if (!final && g->snap_bytes + bytes > g->cfg.snapshot_budget_bytes) return 0;
    if (g->n_snaps == g->cap_snaps) {
        size_t cap = g->cap_snaps ? 2 * g->cap_snaps : 16;
        snapshot_t *grown = realloc(g->snaps, cap * sizeof *grown);
        if (!grown) goto oom;
        g->snaps = grown;
        g->cap_snaps = cap;
    }
    float *values = malloc(bytes);
    if (!values) goto oom;
    memcpy(values, g->pulled, bytes);
    g->snaps[g->n_snaps++] = (snapshot_t){values, *row, g->n_rows};
    g->snap_bytes += bytes;
    return 1;
oom:
    snprintf(g->err, sizeof g->err, "out of memory for a snapshot of %zu parameters", g->cfg.n_params);
    return -1;
}

// A row labelled with shard 0's progress `at`, read at read_at for an
// evaluation that began at sent_at; its test figures still to come.
static global_eval_row_t row_at(const global_eval_t *g, const ps_progress_t *at, double read_at, double sent_at) {
    double n = (double)at->staleness_count;
    return (global_eval_row_t){
        .wall_s = read_at - g->t0,
        .samples = at->samples,
        .updates = at->version,
        .test_loss = NAN,
        .test_metric = NAN,
        .wait_s = at->wait_s,
        .staleness_versions_mean = n ? (double)at->staleness_versions_sum / n : NAN,
        .staleness_versions_max = n ? (double)at->staleness_versions_max : NAN,
        .staleness_clocks_mean = n ? (double)at->staleness_clocks_sum / n : NAN,
        .staleness_clocks_max = n ? (double)at->staleness_clocks_max : NAN,
        .eval_s = read_at - sent_at,
    };
}

// Reads the global model (every shard holding the updates of clock `need` from
// every worker) and keeps it for evaluation after training (or, past the
// snapshot budget, evaluates it now; the final point is always kept). The
// row is labelled with shard 0's progress as published once the model had
// come: it counts every update the model holds (the pull was answered
// before), so the curve never credits the model with fewer examples than it
// was trained on. Returns 0, 1 when stopped meanwhile, -1 on error.
static int evaluate_at(global_eval_t *g, const ps_progress_t *due, double sent_at, int final) {
    uint64_t min_clock;
    if (ps_client_pull(g->client, due->min_clock, g->pulled, &min_clock, g->err, sizeof g->err) != 0)
        return atomic_load(&g->stop) ? 1 : -1;
    double read_at = mono_clock_s();
    ps_progress_t at;
    ps_server_progress(g->cfg.shard, &at);
    global_eval_row_t row = row_at(g, &at, read_at, sent_at);
    int kept = keep_snapshot(g, &row, final);
    if (kept < 0) return -1;
    if (!kept) {
        evaluate_values(g, g->pulled, &row);
        row.during_training = 1;
        row.eval_s = mono_clock_s() - sent_at;
    }
    return append_row(g, &row, kept);
}

// Every worker has left (the shards serve on for this: ps_config_t.
// observer_linger_ms): the servers' final model, then a BYE that lets the
// shards end. Read even when shard 0's progress has not moved since the last
// row: that row's label may be ahead of the model it read (evaluate_at), so
// only this read is sure to hold every update. Returns 0, 1 when stopped
// meanwhile, -1 on error.
static int final_point(global_eval_t *g, const ps_progress_t *at, double now) {
    int rc = evaluate_at(g, at, now, 1);
    if (rc != 0) return rc;
    if (ps_client_bye(g->client, g->err, sizeof g->err) != 0) return atomic_load(&g->stop) ? 1 : -1;
    return 0;
}

// After training: evaluates the snapshots into their rows, in order, and
// hands each to on_row (rows evaluated during training were handed over as
// they came).
static void evaluate_snapshots(global_eval_t *g) {
    for (size_t i = 0; i < g->n_snaps; i++) {
        snapshot_t *s = &g->snaps[i];
        double t0 = mono_clock_s();
        evaluate_values(g, s->values, &s->row);
        s->row.eval_s += mono_clock_s() - t0;
        g->rows[s->row_index] = s->row;
        if (g->cfg.on_row) g->cfg.on_row(&s->row, g->cfg.on_row_ctx);
        free(s->values);
        s->values = NULL;
    }
    g->n_snaps = 0;
    g->snap_bytes = 0;
}

static void *eval_main(void *arg) {
    global_eval_t *g = arg;
    const global_eval_config_t *c = &g->cfg;
    uint64_t next_samples = c->every_samples;
    double next_s = c->every_s;
    int first = 1;
    while (!atomic_load(&g->stop)) {
        ps_progress_t at;
        ps_server_progress(c->shard, &at);
        double now = mono_clock_s();
        if (at.workers_gone && !first) {  // the end of training's point, then the thread's end
            int rc = final_point(g, &at, now);
            g->failed = rc < 0;
            break;
        }
        int due =
            first || (c->every_samples && at.samples >= next_samples) || (c->every_s > 0 && now - g->t0 >= next_s);
        if (!due) {
            // Asleep until shard 0 publishes the next point's samples (it
            // wakes us), the next point in time, or a stop: no polling to
            // take turns from the serving thread.
            double sleep_s = c->every_s > 0 ? next_s - (now - g->t0) : IDLE_WAIT_S;
            ps_server_progress_wait(c->shard, c->every_samples ? next_samples : UINT64_MAX,
                                    sleep_s < IDLE_WAIT_S ? sleep_s : IDLE_WAIT_S);
            continue;
        }
        int rc = evaluate_at(g, &at, now, 0);
        if (first) atomic_store(&g->first_taken, 1);  // shard 0 lets the workers in (ps_server_hold_hellos)
        first = 0;
        if (rc != 0) {
            g->failed = rc < 0;
            break;
        }
        while (c->every_samples && next_samples <= at.samples) next_samples += c->every_samples;
        while (c->every_s > 0 && next_s <= now - g->t0) next_s += c->every_s;
    }
    atomic_store(&g->first_taken, 1);  // stopped or failed first: nothing to wait for
    return NULL;
}

global_eval_t *global_eval_start(const global_eval_config_t *c, char *err, size_t err_len) {
    global_eval_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_len, "global evaluator: out of memory");
        return NULL;
    }
    g->cfg = *c;
    atomic_init(&g->stop, 0);
    atomic_init(&g->first_taken, 0);
    g->pulled = malloc(c->n_params * sizeof *g->pulled);
    g->w = params_new(c->n_params, err, err_len);
    if (!g->pulled || !g->w) {
        if (g->w) snprintf(err, err_len, "global evaluator: out of memory for %zu parameters", c->n_params);
        global_eval_destroy(&g);
        return NULL;
    }
    if (!(g->ws = model_ws_new(c->model, 1, err, err_len)) ||
        !(g->client = ps_client_new_observer(c->zmq_ctx, c->run_id, c->servers, c->n_servers,
                                             c->keys ? c->keys->n_global : c->n_params, c->timeout_ms, err, err_len)) ||
        (c->keys && ps_client_set_key_map(g->client, c->keys, err, err_len) != 0)) {
        global_eval_destroy(&g);
        return NULL;
    }
    ps_client_set_abort(g->client, &g->stop);
    g->t0 = mono_clock_s();
    int prc = pthread_create(&g->thread, NULL, eval_main, g);
    if (prc != 0) {
        snprintf(err, err_len, "global evaluator: starting its thread: %s", strerror(prc));
        global_eval_destroy(&g);
        return NULL;
    }
    g->started = 1;
    return g;
}

static void stop_thread(global_eval_t *g) {
    if (!g->started) return;
    atomic_store(&g->stop, 1);
    ps_server_progress_wake(g->cfg.shard);
    pthread_join(g->thread, NULL);
    g->started = 0;
}

int global_eval_stop(global_eval_t *g, char *err, size_t err_len) {
    stop_thread(g);
    evaluate_snapshots(g);
    if (g->failed) {
        snprintf(err, err_len, "global evaluator: %s", g->err);
        return -1;
    }
    return 0;
}

const global_eval_row_t *global_eval_rows(const global_eval_t *g, size_t *n) {
    *n = g->n_rows;
    return g->rows;
}

size_t global_eval_params(const global_eval_t *g) { return g->cfg.n_params; }

const atomic_int *global_eval_first_taken(const global_eval_t *g) { return &g->first_taken; }

void global_eval_destroy(global_eval_t **gp) {
    global_eval_t *g = *gp;
    if (!g) return;
    stop_thread(g);
    ps_client_destroy(&g->client);
    for (size_t i = 0; i < g->n_snaps; i++) free(g->snaps[i].values);
    free(g->snaps);
    model_ws_destroy(&g->ws);
    params_free(&g->w);
    free(g->pulled);
    free(g->rows);
    free(g);
    *gp = NULL;
}
