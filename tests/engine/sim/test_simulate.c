// The staleness simulator: delay-model parsing and sampling, fixed:0 against
// single-thread Hogwild! bit for bit, determinism (in process and through
// `asgd train --save-model`), the measured staleness, and a learning check.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/data_source.h"
#include "engine/core/model.h"
#include "engine/run/model_file.h"
#include "engine/sim/simulate.h"
#include "engine/core/trainer.h"
#include "staleness/delay_model.h"
#include "staleness/stale_update.h"
#include "tests/support/test_support.h"

// ---- delay models ----

static delay_model_t parse_ok(const char *spec) {
    char err[256];
    delay_model_t m;
    CHECK_OK(delay_model_parse(spec, &m, err, sizeof err), err);
    return m;
}

static void expect_parse_error(const char *spec, const char *message) {
    char err[256] = "";
    delay_model_t m;
    CHECK(delay_model_parse(spec, &m, err, sizeof err) != 0);
    if (strcmp(err, message) != 0) {
        fprintf(stderr, "--delay %s:\n  got:      %s\n  expected: %s\n", spec, err, message);
        exit(1);
    }
}

static void expect_describe(const delay_model_t *m, const char *text) {
    char d[160];
    delay_model_describe(m, d, sizeof d);
    if (strcmp(d, text) != 0) {
        fprintf(stderr, "describe: got '%s', expected '%s'\n", d, text);
        exit(1);
    }
}

static void test_parse(void) {
    delay_model_t m = parse_ok("fixed:3");
    CHECK(m.kind == DELAY_KIND_FIXED && m.lo == 3 && m.hi == 3);
    expect_describe(&m, "fixed:3");
    m = parse_ok("uniform:2,5");
    CHECK(m.kind == DELAY_KIND_UNIFORM && m.lo == 2 && m.hi == 5);
    expect_describe(&m, "uniform:2,5");
    m = parse_ok("geometric:0.25");
    // The default bound M is the smallest with 0.75^(M+1) <= 1e-6.
    CHECK(m.kind == DELAY_KIND_GEOMETRIC && m.p == 0.25 && m.hi == 48);
    expect_describe(&m, "geometric:0.25,max=48");
    m = parse_ok("geometric:1");
    CHECK(m.hi == 0);
    m = parse_ok("geometric:0.5,max=10");
    CHECK(m.hi == 10 && delay_model_max_in_flight(&m) == 10);
    m = parse_ok("straggler:slow=8");
    CHECK(m.kind == DELAY_KIND_STRAGGLER && m.slow == 8.0 && m.slow_workers == 1 && m.workers == 0);
    m = parse_ok("straggler:n=2,slow=2.5");
    CHECK(m.slow_workers == 2 && m.slow == 2.5);
    m.workers = 6;
    char err[256];
    CHECK_OK(delay_model_check(&m, err, sizeof err), err);
    expect_describe(&m, "straggler:slow=2.5,n=2 (6 workers)");
    CHECK(delay_model_max_in_flight(&m) == 6);
    CHECK(delay_model_duration(&m, 0) == 2560 && delay_model_duration(&m, 1) == 2560);
    CHECK(delay_model_duration(&m, 2) == DELAY_MODEL_TIME_UNIT);

    expect_parse_error("foo",
                       "--delay 'foo': unknown model 'foo'; expected fixed:K, uniform:A,B, "
                       "geometric:P[,max=M], trace:FILE or straggler:slow=F[,n=S]");
    expect_parse_error("fixed", "--delay 'fixed': K '' is not an integer in 0..1000000");
    expect_parse_error("fixed:-1", "--delay 'fixed:-1': K '-1' is not an integer in 0..1000000");
    expect_parse_error("fixed:2x", "--delay 'fixed:2x': K '2x' is not an integer in 0..1000000");
    expect_parse_error("fixed:1000001", "--delay 'fixed:1000001': K '1000001' is not an integer in 0..1000000");
    expect_parse_error("uniform:3", "--delay 'uniform:3': expected uniform:A,B (two integers)");
    expect_parse_error("uniform:x,2", "--delay 'uniform:x,2': A 'x' is not an integer in 0..1000000");
    expect_parse_error("uniform:1,", "--delay 'uniform:1,': B '' is not an integer in 0..1000000");
    expect_parse_error("uniform:5,2", "--delay 'uniform:5,2': B (2) must be >= A (5)");
    expect_parse_error("geometric", "--delay 'geometric': expected geometric:P[,max=M]");
    expect_parse_error("geometric:0", "--delay 'geometric:0': P '0' is not a number in (0, 1]");
    expect_parse_error("geometric:1.5", "--delay 'geometric:1.5': P '1.5' is not a number in (0, 1]");
    expect_parse_error("geometric:0.5,cap=3", "--delay 'geometric:0.5,cap=3': unknown field 'cap'; expected max=M");
    expect_parse_error("geometric:0.5,max=-3",
                       "--delay 'geometric:0.5,max=-3': max '-3' is not an integer in 0..1000000");
    expect_parse_error("straggler:n=1",
                       "--delay 'straggler:n=1': missing slow=F (a slow worker's time per gradient "
                       "over a fast one's)");
    expect_parse_error("straggler:slow=0.5",
                       "--delay 'straggler:slow=0.5': slow '0.5' is not a number in [1, 1000000]");
    expect_parse_error("straggler:fast=0,slow=2",
                       "--delay 'straggler:fast=0,slow=2': unknown field 'fast'; expected slow=F or n=S");

    m = parse_ok("straggler:slow=4");
    m.workers = 1;
    CHECK(delay_model_check(&m, err, sizeof err) != 0);
    CHECK(strcmp(err, "--delay straggler: needs --simulate-workers W in 2..1000000 (got 1)") == 0);
    m = parse_ok("straggler:slow=4,n=5");
    m.workers = 4;
    CHECK(delay_model_check(&m, err, sizeof err) != 0);
    CHECK(strcmp(err, "--delay straggler: n (5) must be <= --simulate-workers (4)") == 0);
}

static void test_sampler(void) {
    enum { N = 200000 };
    delay_sampler_t s, t;
    delay_model_t m = parse_ok("fixed:7");
    delay_sampler_init(&s, &m, 1);
    for (int i = 0; i < 1000; i++) CHECK(delay_sampler_next(&s) == 7);

    m = parse_ok("uniform:2,10");
    delay_sampler_init(&s, &m, 1);
    delay_sampler_init(&t, &m, 1);
    double sum = 0;
    uint64_t seen_lo = 0, seen_hi = 0;
    for (int i = 0; i < N; i++) {
        uint64_t d = delay_sampler_next(&s);
        CHECK(d == delay_sampler_next(&t));  // same seed, same stream
        CHECK(d >= 2 && d <= 10);
        seen_lo += d == 2;
        seen_hi += d == 10;
        sum += (double)d;
    }
    CHECK_NEAR(sum / N, 6.0, 0.05);
    CHECK(seen_lo > N / 20 && seen_hi > N / 20);  // each end ~ 1/9 of the draws
    delay_sampler_init(&t, &m, 2);
    int differ = 0;
    for (int i = 0; i < 100; i++) differ += delay_sampler_next(&s) != delay_sampler_next(&t);
    CHECK(differ > 50);

    m = parse_ok("geometric:0.2");
    delay_sampler_init(&s, &m, 3);
    sum = 0;
    uint64_t zeros = 0;
    for (int i = 0; i < N; i++) {
        uint64_t d = delay_sampler_next(&s);
        CHECK(d <= m.hi);
        zeros += d == 0;
        sum += (double)d;
    }
    CHECK_NEAR(sum / N, (1 - 0.2) / 0.2, 0.08);  // mean (1-p)/p
    CHECK_NEAR((double)zeros / N, 0.2, 0.01);  // P(0) = p

    m = parse_ok("geometric:0.01,max=5");
    delay_sampler_init(&s, &m, 3);
    for (int i = 0; i < 1000; i++) CHECK(delay_sampler_next(&s) <= 5);
}

static void test_update_rules(void) {
    stale_update_config_t c = {1, 0.0, 0};
    CHECK(stale_update_lr(&c, 0.5f, 0) == 0.5f && stale_update_lr(&c, 0.5f, 1) == 0.5f);
    CHECK(stale_update_lr(&c, 0.5f, 4) == 0.125f);
    c.staleness_aware = 0;
    CHECK(stale_update_lr(&c, 0.5f, 4) == 0.5f);
    float g[3] = {1.0f, -2.0f, 0.5f}, now[3] = {1.0f, 1.0f, 3.0f}, then[3] = {0.0f, 1.0f, 1.0f};
    dc_asgd_compensate(g, now, then, 3, 0.5f);
    CHECK(g[0] == 1.5f && g[1] == -2.0f && g[2] == 0.75f);
    char err[128];
    c.dc_lambda = -1;
    CHECK(stale_update_config_check(&c, err, sizeof err) != 0 && strstr(err, "--dc-asgd"));
}

// ---- runs ----

typedef struct run_opts {
    optimizer_kind_t kind;
    double momentum;
    lr_schedule_t schedule;
    size_t batch, epochs;
} run_opts_t;

static optimizer_config_t opt_config(const run_opts_t *o, double lr) {
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.kind = o->kind;
    oc.lr = lr;
    oc.momentum = o->momentum;
    oc.schedule = o->schedule;
    if (o->schedule == LR_SCHEDULE_INVERSE_TIME) oc.decay = 0.01;
    if (o->schedule == LR_SCHEDULE_EPOCH_DECAY) oc.decay = 0.5;
    return oc;
}

static float *simulate(const model_t *m, const run_opts_t *o, double lr, const char *delay, uint64_t workers, int aware,
                       double dc, uint64_t seed, simulate_result_t *r) {
    char err[256];
    optimizer_config_t oc = opt_config(o, lr);
    simulate_config_t c;
    simulate_config_default(&c);
    c.train.batch = o->batch;
    c.train.epochs = o->epochs;
    c.train.seed = seed;
    c.train.eval_every = model_num_train(m) / 3;
    c.delay = parse_ok(delay);
    c.delay.workers = workers;
    c.update.staleness_aware = aware;
    c.update.dc_lambda = dc;
    float *w = malloc(model_num_params(m) * sizeof *w);
    CHECK(w);
    CHECK_OK(simulate_fresh(m, &oc, &c, seed, NULL, r, w, err, sizeof err), err);
    return w;
}

static float *hogwild_one_thread(const model_t *m, const run_opts_t *o, double lr, uint64_t seed, train_result_t *r) {
    char err[256];
    optimizer_config_t oc = opt_config(o, lr);
    train_config_t c;
    train_config_default(&c);
    c.mode = TRAIN_MODE_HOGWILD;
    c.threads = 1;
    c.batch = o->batch;
    c.epochs = o->epochs;
    c.seed = seed;
    c.eval_every = model_num_train(m) / 3;
    float *w = malloc(model_num_params(m) * sizeof *w);
    CHECK(w);
    CHECK_OK(train_fresh(m, &oc, &c, seed, NULL, r, w, err, sizeof err), err);
    return w;
}

static void check_same_params(const model_t *m, const float *a, const float *b, const char *what) {
    if (memcmp(a, b, model_num_params(m) * sizeof *a) != 0) {
        size_t i = 0;
        while (a[i] == b[i]) i++;
        fprintf(stderr, "%s: parameters differ first at %zu: %.9g vs %.9g\n", what, i, a[i], b[i]);
        exit(1);
    }
}

// fixed:0 applies every gradient at once: `--mode hogwild --threads 1`, bit for bit.
static void check_fixed0_is_sgd(const model_t *m, const run_opts_t *o, double lr, const char *what) {
    train_result_t tr;
    simulate_result_t sr;
    float *a = hogwild_one_thread(m, o, lr, 5, &tr);
    float *b = simulate(m, o, lr, "fixed:0", 0, 0, 0.0, 5, &sr);
    check_same_params(m, a, b, what);
    CHECK(sr.train.samples == tr.samples && sr.train.updates == tr.updates);
    CHECK(sr.train.last.test_loss == tr.last.test_loss && sr.train.last.test_metric == tr.last.test_metric);
    CHECK(sr.staleness.count == sr.train.updates && sr.staleness.max == 0 && sr.max_in_flight == 1);
    free(b);
    // Neither staleness-aware steps nor delay compensation change a fresh gradient.
    b = simulate(m, o, lr, "fixed:0", 0, 1, 0.5, 5, &sr);
    check_same_params(m, a, b, what);
    free(a);
    free(b);
}

// W equal workers in round-robin are fixed:W-1, bit for bit.
static void check_round_robin_is_fixed(const model_t *m, const run_opts_t *o, double lr, const char *what) {
    simulate_result_t r1, r2;
    float *a = simulate(m, o, lr, "fixed:4", 0, 0, 0.3, 9, &r1);
    float *b = simulate(m, o, lr, "straggler:slow=1", 5, 0, 0.3, 9, &r2);
    check_same_params(m, a, b, what);
    CHECK(r1.staleness.sum == r2.staleness.sum && r1.staleness.max == 4 && r2.staleness.max == 4);
    free(a);
    free(b);
}

static void test_equivalences(void) {
    char err[256];
    sparse_dataset_t str, ste;
    make_sparse(&str, 1500, 400, 12, 1);
    make_sparse(&ste, 300, 400, 12, 2);
    model_t *lin = model_new_linear(LINEAR_LOSS_LOGISTIC, &str, &ste, 0.001, err, sizeof err);
    CHECK(lin);
    run_opts_t o = {OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 1, 2};
    check_fixed0_is_sgd(lin, &o, 0.5, "logreg batch 1");
    o = (run_opts_t){OPTIMIZER_KIND_SGD, 0.9, LR_SCHEDULE_INVERSE_TIME, 7, 2};  // uneven last batch
    check_fixed0_is_sgd(lin, &o, 0.1, "logreg batch 7 momentum inverse-time");
    o = (run_opts_t){OPTIMIZER_KIND_ADAGRAD, 0.0, LR_SCHEDULE_EPOCH_DECAY, 4, 3};
    check_fixed0_is_sgd(lin, &o, 0.2, "logreg adagrad epoch-decay");
    o = (run_opts_t){OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 1, 2};
    check_round_robin_is_fixed(lin, &o, 0.5, "logreg round-robin");

    dense_dataset_t dtr, dte;
    make_dense(&dtr, 400, 12, 3, 3);
    make_dense(&dte, 100, 12, 3, 4);
    size_t hidden[1] = {10};
    model_t *mlp = model_new_mlp(&dtr, &dte, hidden, 1, 0.001, err, sizeof err);
    CHECK(mlp);
    o = (run_opts_t){OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 8, 2};
    check_fixed0_is_sgd(mlp, &o, 0.05, "mlp sgd");
    o = (run_opts_t){OPTIMIZER_KIND_SGD, 0.5, LR_SCHEDULE_CONSTANT, 6, 2};
    check_fixed0_is_sgd(mlp, &o, 0.05, "mlp momentum");
    check_round_robin_is_fixed(mlp, &o, 0.05, "mlp round-robin");

    ratings_t rtr, rte;
    make_ratings(&rtr, 2000, 40, 30, 3, 5);
    make_ratings(&rte, 300, 40, 30, 3, 6);
    model_t *mf = model_new_mf(&rtr, &rte, 4, 0.01, err, sizeof err);
    CHECK(mf);
    o = (run_opts_t){OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 1, 2};
    check_fixed0_is_sgd(mf, &o, 0.02, "mf");

    model_destroy(&lin);
    model_destroy(&mlp);
    model_destroy(&mf);
    sparse_dataset_free(&str);
    sparse_dataset_free(&ste);
    dense_dataset_free(&dtr);
    dense_dataset_free(&dte);
    ratings_free(&rtr);
    ratings_free(&rte);
}

static void test_staleness_and_determinism(void) {
    char err[256];
    sparse_dataset_t str, ste;
    make_sparse(&str, 1000, 300, 10, 7);
    make_sparse(&ste, 200, 300, 10, 8);
    model_t *lin = model_new_linear(LINEAR_LOSS_LOGISTIC, &str, &ste, 0.0, err, sizeof err);
    CHECK(lin);
    run_opts_t o = {OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 3, 2};
    size_t updates = 2 * ((1000 + 2) / 3);

    // fixed:K: every update is exactly K stale, except the first K (0, 1, ..., K-1).
    simulate_result_t r;
    float *w = simulate(lin, &o, 0.3, "fixed:5", 0, 0, 0.0, 1, &r);
    CHECK(r.train.updates == updates && r.staleness.count == updates);
    for (int k = 0; k < 5; k++) CHECK(r.staleness.bins[k] == 1);
    CHECK(r.staleness.bins[5] == updates - 5 && r.staleness.max == 5 && r.max_in_flight == 6);
    free(w);
    // W round-robin workers with one straggler: the straggler's gradients are far staler.
    w = simulate(lin, &o, 0.3, "straggler:slow=8", 4, 0, 0.0, 1, &r);
    CHECK(r.train.updates == updates && r.max_in_flight == 4);
    CHECK(r.staleness.max >= 8 * 3 - 1);  // the fast three apply ~24 updates while it computes
    CHECK(staleness_hist_quantile(&r.staleness, 0.5) == 2);  // a fast one misses the two others
    free(w);

    // Same seed, same run, bit for bit; another seed, another run.
    const char *models[] = {"uniform:0,8", "geometric:0.3", "straggler:slow=3,n=2"};
    for (size_t i = 0; i < 3; i++) {
        simulate_result_t r1, r2, r3;
        float *a = simulate(lin, &o, 0.3, models[i], 6, 1, 0.2, 11, &r1);
        float *b = simulate(lin, &o, 0.3, models[i], 6, 1, 0.2, 11, &r2);
        float *c = simulate(lin, &o, 0.3, models[i], 6, 1, 0.2, 12, &r3);
        check_same_params(lin, a, b, models[i]);
        CHECK(r1.staleness.sum == r2.staleness.sum && r1.train.last.test_loss == r2.train.last.test_loss);
        CHECK(memcmp(a, c, model_num_params(lin) * sizeof *a) != 0);
        free(a);
        free(b);
        free(c);
    }
    model_destroy(&lin);
    sparse_dataset_free(&str);
    sparse_dataset_free(&ste);
}

// Per-gradient delays against a reference written here. Every training
// example is the same one, so the data order cannot matter: the reference
// reads a gradient at each step with the sampler's delay (seeded as the
// simulator seeds it) and applies, at each step, the gradients due then in
// the order they were read. Applying the same gradients in any other order
// changes the parameters' bits, so this checks the simulator's queue (its
// ring of buckets, and its heap when the delay bound exceeds the run).
static float *reference_delayed_sgd(const model_t *m, const char *spec, float lr, size_t steps, uint64_t seed) {
    char err[256];
    size_t dim = model_num_params(m), max_pairs = 64;
    delay_model_t dm = parse_ok(spec);
    delay_sampler_t sampler;
    delay_sampler_init(&sampler, &dm, seed);
    param_t *w = params_new(dim, err, sizeof err);
    model_ws_t *ws = model_ws_new(m, 1, err, sizeof err);
    grad_t g;
    CHECK(w && ws && grad_init(&g, dim, 0, err, sizeof err) == 0);
    model_init_params(m, w, seed);
    uint64_t *due = malloc(steps * sizeof *due);
    size_t *n = calloc(steps, sizeof *n);
    uint32_t *idx = malloc(steps * max_pairs * sizeof *idx);
    float *val = malloc(steps * max_pairs * sizeof *val);
    CHECK(due && n && idx && val);
    uint32_t example = 0;
    for (uint64_t t = 0; t < steps + dm.hi; t++) {
        if (t < steps) {
            due[t] = t + delay_sampler_next(&sampler);
            model_loss_grad(m, w, &example, 1, &g, ws);
            CHECK(g.n_touched <= max_pairs);
            for (size_t k = 0; k < g.n_touched; k++) {
                idx[t * max_pairs + k] = g.touched[k];
                val[t * max_pairs + k] = g.value[g.touched[k]];
            }
            n[t] = g.n_touched;
            grad_clear(&g);
        }
        for (uint64_t r = t > dm.hi ? t - dm.hi : 0; r <= t && r < steps; r++) {
            if (due[r] != t) continue;
            for (size_t k = 0; k < n[r]; k++) {
                param_t *wi = &w[idx[r * max_pairs + k]];
                param_set(wi, param_get(wi) - lr * val[r * max_pairs + k]);
            }
        }
    }
    float *out = malloc(dim * sizeof *out);
    CHECK(out);
    params_read(w, dim, out);
    free(due);
    free(n);
    free(idx);
    free(val);
    grad_free(&g);
    model_ws_destroy(&ws);
    params_free(&w);
    return out;
}

static void test_delays_against_reference(void) {
    char err[256];
    sparse_dataset_t str, ste;
    size_t rows = 150, epochs = 2, nnz = 12;
    make_sparse(&str, rows, 96, nnz, 21);
    make_sparse(&ste, 40, 96, nnz, 22);
    for (size_t i = 1; i < rows; i++) {
        memcpy(&str.col[i * nnz], str.col, nnz * sizeof *str.col);
        memcpy(&str.val[i * nnz], str.val, nnz * sizeof *str.val);
        str.y[i] = str.y[0];
    }
    model_t *lin = model_new_linear(LINEAR_LOSS_LOGISTIC, &str, &ste, 0.0, err, sizeof err);
    CHECK(lin);
    run_opts_t o = {OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 1, epochs};
    // Ring: delays up to 6 or 9 within a 300-step run. Heap: delays up to 400.
    const char *specs[] = {"fixed:3", "uniform:0,6", "geometric:0.3,max=9", "uniform:0,400"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        simulate_result_t r;
        float *got = simulate(lin, &o, 0.3, specs[i], 0, 0, 0.0, 13, &r);
        float *want = reference_delayed_sgd(lin, specs[i], 0.3f, rows * epochs, 13);
        check_same_params(lin, want, got, specs[i]);
        CHECK(r.train.updates == rows * epochs && r.staleness.count == rows * epochs);
        free(got);
        free(want);
    }
    model_destroy(&lin);
    sparse_dataset_free(&str);
    sparse_dataset_free(&ste);
}

// The summary's figures at their source: the last point's train loss is the
// last window's (the point after the in-flight gradients were applied reads
// no minibatch), and the model of time with its workers.
typedef struct points {
    size_t n;
    train_point_t p[16];
} points_t;

static void record_point(const train_point_t *p, void *ctx) {
    points_t *pts = ctx;
    if (pts->n < 16) pts->p[pts->n++] = *p;
}

static void test_summary_figures(void) {
    char err[256];
    sparse_dataset_t str, ste;
    make_sparse(&str, 900, 300, 10, 7);
    make_sparse(&ste, 200, 300, 10, 8);
    model_t *lin = model_new_linear(LINEAR_LOSS_LOGISTIC, &str, &ste, 0.0, err, sizeof err);
    CHECK(lin);
    run_opts_t o = {OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 1, 2};
    optimizer_config_t oc = opt_config(&o, 0.3);
    const char *delays[] = {"fixed:16", "straggler:slow=3", "fixed:0"};
    const uint64_t workers[] = {0, 4, 0};
    for (size_t i = 0; i < 3; i++) {
        simulate_config_t c;
        simulate_config_default(&c);
        c.train.batch = 1;
        c.train.epochs = 2;
        c.train.seed = 3;
        c.train.eval_every = 600;  // points at 0, 600, 1200, 1800 samples, then the end
        c.delay = parse_ok(delays[i]);
        c.delay.workers = workers[i];
        points_t pts = {0, {{0}}};
        train_callbacks_t cb = {record_point, NULL, &pts};
        simulate_result_t r;
        CHECK_OK(simulate_fresh(lin, &oc, &c, 3, &cb, &r, NULL, err, sizeof err), err);
        CHECK(pts.n >= 4 && isnan(pts.p[0].train_loss));
        const train_point_t *last = &pts.p[pts.n - 1], *before = &pts.p[pts.n - 2];
        CHECK(isfinite(r.train.last.train_loss) && r.train.last.train_loss == last->train_loss);
        CHECK(last->samples == 1800 && last->updates == 1800);
        if (before->samples == last->samples) CHECK(last->train_loss == before->train_loss);
        if (workers[i])
            CHECK(r.workers == workers[i] && strcmp(r.time_model, SIMULATE_TIME_WORKERS) == 0);
        else
            CHECK(r.workers == 0 && strcmp(r.time_model, SIMULATE_TIME_PER_GRADIENT) == 0);
    }
    model_destroy(&lin);
    sparse_dataset_free(&str);
    sparse_dataset_free(&ste);
}

// A large fixed delay hurts plain SGD on sparse logistic regression (the bias
// and the popular features see 64 stale steps at once); staleness-aware steps
// recover. Seeded and single-threaded, so deterministic: the measured losses
// and accuracies are asserted to their printed digits.
static void test_learning(void) {
    char err[256];
    data_options_t dopt = {"gen:sparse:n=20000,dim=2000", NULL, 0, 0, 0.1, 1, NULL, NULL, 0};
    data_bundle_t data;
    data_bundle_init(&data);
    CHECK_OK(data_bundle_load(&dopt, DATA_KIND_SPARSE, &data, err, sizeof err), err);
    model_t *m = model_new_linear(LINEAR_LOSS_LOGISTIC, &data.sparse_train, &data.sparse_test, 0.0, err, sizeof err);
    CHECK(m);
    run_opts_t o = {OPTIMIZER_KIND_SGD, 0.0, LR_SCHEDULE_CONSTANT, 1, 2};
    simulate_result_t plain, aware, fresh;
    free(simulate(m, &o, 0.5, "fixed:0", 0, 0, 0.0, 1, &fresh));
    free(simulate(m, &o, 0.5, "fixed:64", 0, 0, 0.0, 1, &plain));
    free(simulate(m, &o, 0.5, "fixed:64", 0, 1, 0.0, 1, &aware));
    fprintf(stderr,
            "after 2 epochs: test loss / accuracy fixed:0 %.9f / %.9f, fixed:64 %.9f / %.9f, fixed:64 "
            "staleness-aware %.9f / %.9f\n",
            fresh.train.last.test_loss, fresh.train.last.test_metric, plain.train.last.test_loss,
            plain.train.last.test_metric, aware.train.last.test_loss, aware.train.last.test_metric);
    CHECK(fresh.train.last.test_loss < plain.train.last.test_loss);
    CHECK(aware.train.last.test_loss < plain.train.last.test_loss - 0.5);
    CHECK(aware.train.last.test_metric > plain.train.last.test_metric + 0.1);
    // Measured (the same digits with glibc's FMA and AVX2 variants of exp and
    // log masked: GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F).
    CHECK_NEAR(fresh.train.last.test_loss, 0.395302553, 1e-6);
    CHECK_NEAR(fresh.train.last.test_metric, 0.836, 1e-6);
    CHECK_NEAR(plain.train.last.test_loss, 3.132958676, 1e-6);
    CHECK_NEAR(plain.train.last.test_metric, 0.5365, 1e-6);
    CHECK_NEAR(aware.train.last.test_loss, 0.656719799, 1e-6);
    CHECK_NEAR(aware.train.last.test_metric, 0.7985, 1e-6);
    model_destroy(&m);
    data_bundle_free(&data);
}

// ---- through the CLI: --save-model twice, identical files ----

static int run_cli(const char *dir, const char *args, const char *out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s train --quiet --model logreg --data gen:sparse:n=3000,dim=500 --epochs 2 %s "
             "--save-model %s/%s > %s/%s.json",
             ASGD_BINARY, args, dir, out, dir, out);
    return system(cmd);
}

static char *slurp(const char *dir, const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*len + 1);
    CHECK(b && fread(b, 1, *len, f) == *len);
    b[*len] = '\0';
    fclose(f);
    return b;
}

static void test_cli(void) {
    char dir[] = "/tmp/asgd_test_simulate_XXXXXX";
    CHECK(mkdtemp(dir));
    const char *args = "--delay uniform:0,16 --staleness-aware --dc-asgd 0.5 --seed 3";
    CHECK(run_cli(dir, args, "a.bin") == 0);
    CHECK(run_cli(dir, args, "b.bin") == 0);
    CHECK(run_cli(dir, "--delay uniform:0,16 --staleness-aware --dc-asgd 0.5 --seed 4", "c.bin") == 0);
    CHECK(run_cli(dir, "--simulate-workers 8 --delay straggler:slow=4,n=1", "d.bin") == 0);
    size_t la, lb, lc, ld;
    char *a = slurp(dir, "a.bin", &la), *b = slurp(dir, "b.bin", &lb), *c = slurp(dir, "c.bin", &lc);
    // A model file (docs/model_file.md): header, 2 labels, 501 parameters, CRC.
    CHECK(la == MODEL_FILE_HEADER_BYTES + 2 * 4 + 501 * sizeof(float) + 4 && la == lb && memcmp(a, b, la) == 0);
    CHECK(lc == la && memcmp(a, c, la) != 0);
    char *j = slurp(dir, "a.bin.json", &la);
    CHECK(strstr(j, "\"mode\":\"simulate\"") && strstr(j, "\"delay\":\"uniform:0,16\""));
    CHECK(strstr(j, "\"staleness_aware\":true") && strstr(j, "\"p99\":"));
    CHECK(strstr(j, "\"time_model\":\"per-gradient\"") && strstr(j, "\"workers\":null"));
    CHECK(strstr(j, "\"final_train_loss\":") && !strstr(j, "\"final_train_loss\":null"));
    free(j);
    j = slurp(dir, "d.bin.json", &ld);
    CHECK(strstr(j, "\"workers\":8") && strstr(j, "straggler:slow=4,n=1 (8 workers)"));
    CHECK(strstr(j, "\"time_model\":\"workers\"") && !strstr(j, "\"final_train_loss\":null"));
    free(j);
    free(a);
    free(b);
    free(c);
    // Usage errors are one line each, exit status 2.
    char cmd[1024];
    const char *bad[] = {
        "--delay fixed:2 --threads 2", "--delay fixed:2 --mode sync",          "--staleness-aware",
        "--delay uniform:4,1",         "--simulate-workers 4 --delay fixed:3", "--delay straggler:slow=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s train --quiet --model logreg --data gen:sparse:n=300,dim=50 %s 2>%s/err.txt",
                 ASGD_BINARY, bad[i], dir);
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        size_t le;
        char *e = slurp(dir, "err.txt", &le);
        CHECK(le > 0 && strchr(e, '\n') == e + le - 1);  // exactly one line
        fprintf(stderr, "  %-40s -> %s", bad[i], e);
        free(e);
    }
    CHECK(test_remove_tree(dir) == 0);
}

// --delay-adaptive TAU_C through the CLI, against the rules it falls back to:
// a threshold above every staleness is the plain step, bit for bit; TAU_C = 1
// is the staleness-aware step; 8 (the workers) differs from both.
static void test_cli_delay_adaptive(void) {
    char dir[] = "/tmp/asgd_test_simulate_XXXXXX";
    CHECK(mkdtemp(dir));
    const char *w = "--simulate-workers 8 --delay straggler:slow=4,n=1 --seed 2";
    const char *runs[][2] = {{"", "plain.bin"},
                             {"--delay-adaptive 1000000", "high.bin"},
                             {"--staleness-aware", "aware.bin"},
                             {"--delay-adaptive 1", "one.bin"},
                             {"--delay-adaptive 8", "eight.bin"}};
    char *bin[5];
    size_t len[5];
    for (int i = 0; i < 5; i++) {
        char args[256];
        snprintf(args, sizeof args, "%s %s", w, runs[i][0]);
        CHECK(run_cli(dir, args, runs[i][1]) == 0);
        bin[i] = slurp(dir, runs[i][1], &len[i]);
        CHECK(len[i] == len[0]);
    }
    CHECK(memcmp(bin[0], bin[1], len[0]) == 0);  // no update staler than 1,000,000
    CHECK(memcmp(bin[2], bin[3], len[0]) == 0);  // tau_C 1 = lr / max(1, tau)
    CHECK(memcmp(bin[4], bin[0], len[0]) != 0 && memcmp(bin[4], bin[2], len[0]) != 0);
    for (int i = 0; i < 5; i++) free(bin[i]);
    size_t lj;
    char *j = slurp(dir, "eight.bin.json", &lj);
    CHECK(strstr(j, "\"delay_adaptive\":8") && strstr(j, "\"staleness_aware\":false"));
    free(j);
    j = slurp(dir, "plain.bin.json", &lj);
    CHECK(strstr(j, "\"delay_adaptive\":null"));
    free(j);
    const char *bad[] = {"--delay-adaptive 4", "--delay fixed:4 --staleness-aware --delay-adaptive 4",
                         "--delay fixed:4 --delay-adaptive 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s train --quiet --model logreg --data gen:sparse:n=300,dim=50 %s 2>%s/err.txt",
                 ASGD_BINARY, bad[i], dir);
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        size_t le;
        char *e = slurp(dir, "err.txt", &le);
        CHECK(le > 0 && strchr(e, '\n') == e + le - 1 && strstr(e, "--delay-adaptive"));
        fprintf(stderr, "  %-40s -> %s", bad[i], e);
        free(e);
    }
    CHECK(test_remove_tree(dir) == 0);
}

int main(void) {
    test_parse();
    test_sampler();
    test_update_rules();
    test_equivalences();
    test_staleness_and_determinism();
    test_delays_against_reference();
    test_summary_figures();
    test_learning();
    test_cli();
    test_cli_delay_adaptive();
    printf("test_simulate: ok\n");
    return 0;
}
