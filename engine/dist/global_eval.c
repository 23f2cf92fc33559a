// The run's global-model evaluator (global_eval.h).
#include "engine/dist/global_eval.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/params.h"  // defines: param_t, params_new, param_set
#include "kernels/mono_clock.h"  // defines: mono_clock_s
#include "net/ps_client.h"  // defines: ps_client_new_observer, ps_client_pull

#define ERR_LEN 512
#define POLL_NS 2000000L  // how often shard 0's progress is looked at: 2 ms

struct global_eval {
    global_eval_config_t cfg;
    ps_client_t *client;
    float *pulled;      // (n_params)
    param_t *w;         // (n_params) what is evaluated
    model_ws_t *ws;
    pthread_t thread;
    int started;
    atomic_int stop;
    double t0;
    global_eval_row_t *rows;
    size_t n_rows, cap_rows;
    int failed;
    char err[ERR_LEN];
};

static int append_row(global_eval_t *g, const global_eval_row_t *row) {
    if (g->n_rows == g->cap_rows) {
        size_t cap = g->cap_rows ? 2 * g->cap_rows : 64;
        global_eval_row_t *grown = realloc(g->rows, cap * sizeof *grown);
        if (!grown) {
            snprintf(g->err, sizeof g->err, "global evaluator: out of memory for its rows");
            return -1;
        }
        g->rows = grown;
        g->cap_rows = cap;
    }
    g->rows[g->n_rows++] = *row;
    if (g->cfg.on_row) g->cfg.on_row(row, g->cfg.on_row_ctx);
    return 0;
}

// Reads the global model (every shard holding the updates of clock `need` from
// every worker) and evaluates it. The row is labelled with shard 0's progress
// as published once the model had come: it counts every update the model
// holds (the pull was answered before), so the curve never credits the
// model with fewer examples than it was trained on. Returns 0, 1 when
// stopped meanwhile, -1 on error.
static int evaluate_at(global_eval_t *g, const ps_progress_t *due, double sent_at) {
    uint64_t min_clock;
    if (ps_client_pull(g->client, due->min_clock, g->pulled, &min_clock, g->err, sizeof g->err) != 0)
        return atomic_load(&g->stop) ? 1 : -1;
    double read_at = mono_clock_s();
    ps_progress_t at;
    ps_server_progress(g->cfg.shard, &at);
    for (size_t j = 0; j < g->cfg.n_params; j++) param_set(&g->w[j], g->pulled[j]);
    size_t limit = model_num_test(g->cfg.model);
    if (g->cfg.eval_limit && g->cfg.eval_limit < limit) limit = g->cfg.eval_limit;
    eval_sums_t sums = {0.0, 0.0, 0};
    model_evaluate(g->cfg.model, g->w, 0, limit, g->ws, &sums);
    double n = (double)at.staleness_count;
    global_eval_row_t row = {
        .wall_s = read_at - g->t0,
        .samples = at.samples,
        .updates = at.version,
        .test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN,
        .test_metric = eval_metric_value(model_metric(g->cfg.model), &sums),
        .wait_s = at.wait_s,
        .staleness_versions_mean = n ? (double)at.staleness_versions_sum / n : NAN,
        .staleness_versions_max = n ? (double)at.staleness_versions_max : NAN,
        .staleness_clocks_mean = n ? (double)at.staleness_clocks_sum / n : NAN,
        .staleness_clocks_max = n ? (double)at.staleness_clocks_max : NAN,
        .eval_s = mono_clock_s() - sent_at,
    };
    return append_row(g, &row);
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
        int due = first || (c->every_samples && at.samples >= next_samples) || (c->every_s > 0 && now - g->t0 >= next_s);
        if (!due) {
            struct timespec nap = {0, POLL_NS};
            nanosleep(&nap, NULL);
            continue;
        }
        first = 0;
        int rc = evaluate_at(g, &at, now);
        if (rc != 0) {
            g->failed = rc < 0;
            break;
        }
        while (c->every_samples && next_samples <= at.samples) next_samples += c->every_samples;
        while (c->every_s > 0 && next_s <= now - g->t0) next_s += c->every_s;
    }
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
    g->pulled = malloc(c->n_params * sizeof *g->pulled);
    g->w = params_new(c->n_params, err, err_len);
    if (!g->pulled || !g->w) {
        if (g->w) snprintf(err, err_len, "global evaluator: out of memory for %zu parameters", c->n_params);
        global_eval_destroy(&g);
        return NULL;
    }
    if (!(g->ws = model_ws_new(c->model, 1, err, err_len)) ||
        !(g->client = ps_client_new_observer(c->zmq_ctx, c->run_id, c->servers, c->n_servers, c->n_params,
                                             c->timeout_ms, err, err_len))) {
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
    pthread_join(g->thread, NULL);
    g->started = 0;
}

int global_eval_stop(global_eval_t *g, char *err, size_t err_len) {
    stop_thread(g);
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

void global_eval_destroy(global_eval_t **gp) {
    global_eval_t *g = *gp;
    if (!g) return;
    stop_thread(g);
    ps_client_destroy(&g->client);
    model_ws_destroy(&g->ws);
    params_free(&g->w);
    free(g->pulled);
    free(g->rows);
    free(g);
    *gp = NULL;
}
