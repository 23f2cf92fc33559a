// The staleness simulator (engine/sim/simulate.h) against the one-thread
// trainer (train_fresh, --mode hogwild --threads 1) on the same problem, in one
// process: each round runs the trainer and then the simulator at every delay,
// so that a shared machine's load falls on all of them alike. Prints the
// median updates/s of each and sim/trainer, both as the ratio of the medians
// and as the median of the per-round ratios. Not part of the test suite.
//
//   bench_simulate [--reps R] [--epochs E] [--only sparse|mlp] [--delay SPEC] [--alone]
//
// --delay SPEC times only that one of the delays below (with the trainer).
// --alone runs only that delay (or, without --delay, only the trainer), R
// times, for a profiler: perf record bench_simulate --only sparse --delay fixed:64 --alone
//
// sparse: logistic regression on --data gen:sparse (the CLI's defaults: 180,000
//   training examples x 100,000 features, ~60 non-zeros), batch 1, lr 0.5.
// mlp: a 64-64-10 MLP on 8,000 generated dense examples (10 Gaussian clusters
//   in 64 dimensions), batch 16, lr 0.05.
// Delays: fixed:0, fixed:4, fixed:64, uniform:0,32, straggler:slow=4,n=1 with
// 8 workers. Evaluation runs at the start and the end only (off the clock).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_support.h"
#include "engine/core/trainer.h"
#include "engine/data/data_source.h"
#include "engine/sim/simulate.h"
#include "kernels/foundation/rng.h"
#include "staleness/delay_model.h"

#define MAX_REPS 15

typedef struct sim_case {
    const char *delay;
    uint64_t workers;  // straggler only
} sim_case_t;

static const sim_case_t cases[] = {
    {"fixed:0", 0}, {"fixed:4", 0}, {"fixed:64", 0}, {"uniform:0,32", 0}, {"straggler:slow=4,n=1", 8},
};
#define N_CASES (sizeof cases / sizeof cases[0])
static const char *only_delay;  // --delay: time just this case
static int alone;  // --alone: no trainer runs (or only them, without --delay)

typedef struct problem {
    const char *name;
    const model_t *model;
    size_t batch, epochs;
    double lr;
} problem_t;

static optimizer_config_t opt_config(const problem_t *p) {
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = p->lr;
    return oc;
}

static void train_config(const problem_t *p, train_config_t *c) {
    train_config_default(c);
    c->mode = TRAIN_MODE_HOGWILD;
    c->threads = 1;
    c->batch = p->batch;
    c->epochs = p->epochs;
    c->seed = 1;
    c->eval_every = model_num_train(p->model) * p->epochs;
}

static double run_trainer(const problem_t *p, double *loss) {
    char err[256];
    optimizer_config_t oc = opt_config(p);
    train_config_t c;
    train_config(p, &c);
    train_result_t r;
    if (train_fresh(p->model, &oc, &c, 1, NULL, &r, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_simulate: trainer: %s\n", err);
        exit(1);
    }
    *loss = r.last.test_loss;
    return r.updates_per_s;
}

static double run_sim(const problem_t *p, const sim_case_t *sc, double *loss) {
    char err[256];
    optimizer_config_t oc = opt_config(p);
    simulate_config_t c;
    simulate_config_default(&c);
    train_config(p, &c.train);
    if (delay_model_parse(sc->delay, &c.delay, err, sizeof err) != 0) {
        fprintf(stderr, "bench_simulate: %s\n", err);
        exit(1);
    }
    c.delay.workers = sc->workers;
    simulate_result_t r;
    if (simulate_fresh(p->model, &oc, &c, 1, NULL, &r, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_simulate: --delay %s: %s\n", sc->delay, err);
        exit(1);
    }
    *loss = r.train.last.test_loss;
    return r.train.updates_per_s;
}

static void bench_problem(const problem_t *p, int reps) {
    double trainer[MAX_REPS], sim[N_CASES][MAX_REPS], ratio[N_CASES][MAX_REPS];
    double trainer_loss = 0.0, sim_loss[N_CASES];
    printf("%s: %zu training examples, batch %zu, lr %g, %zu epoch(s) per run, %d rounds\n", p->name,
           model_num_train(p->model), p->batch, p->lr, p->epochs, reps);
    for (int r = 0; r < reps; r++) {
        trainer[r] = alone && only_delay ? 1.0 : run_trainer(p, &trainer_loss);
        for (size_t k = 0; k < N_CASES; k++) {
            if ((only_delay && strcmp(only_delay, cases[k].delay)) || (alone && !only_delay)) continue;
            sim[k][r] = run_sim(p, &cases[k], &sim_loss[k]);
            ratio[k][r] = sim[k][r] / trainer[r];
        }
    }
    double t = bench_median(trainer, reps);
    printf("  %-40s %14s %10s %12s %10s\n", "run", "updates/s", "sim/train", "per-round", "test loss");
    printf("  %-40s %14.0f %10s %12s %10.4f\n", "trainer --threads 1", t, "", "", trainer_loss);
    for (size_t k = 0; k < N_CASES; k++) {
        if ((only_delay && strcmp(only_delay, cases[k].delay)) || (alone && !only_delay)) continue;
        char label[64];
        if (cases[k].workers)
            snprintf(label, sizeof label, "--delay %s (%llu workers)", cases[k].delay,
                     (unsigned long long)cases[k].workers);
        else
            snprintf(label, sizeof label, "--delay %s", cases[k].delay);
        double s = bench_median(sim[k], reps);
        printf("  %-40s %14.0f %10.3f %12.3f %10.4f\n", label, s, s / t, bench_median(ratio[k], reps), sim_loss[k]);
    }
    printf("\n");
    fflush(stdout);
}

// n examples in dim dimensions around `classes` random centres.
static int make_clusters(dense_dataset_t *d, size_t n, size_t dim, size_t classes, uint64_t seed, char *err,
                         size_t err_len) {
    if (dense_dataset_alloc(d, n, dim, classes, err, err_len) != 0) return -1;
    rng_t r;
    rng_seed(&r, seed, 1);
    float *centre = malloc(classes * dim * sizeof *centre);
    if (!centre) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    rng_t c;
    rng_seed(&c, 99, 1);  // the same centres for train and test
    for (size_t i = 0; i < classes * dim; i++) centre[i] = (float)rng_uniform(&c);
    for (size_t i = 0; i < n; i++) {
        int32_t k = (int32_t)rng_below(&r, classes);
        d->y[i] = k;
        for (size_t j = 0; j < dim; j++) d->x[i * dim + j] = centre[(size_t)k * dim + j] + 0.5f * (float)rng_normal(&r);
    }
    free(centre);
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_simulate [--reps R (1..%d)] [--epochs E] [--only sparse|mlp] [--delay SPEC] [--alone]\n",
            MAX_REPS);
    exit(2);
}

int main(int argc, char **argv) {
    int reps = 5;
    size_t epochs = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--delay") && i + 1 < argc)
            only_delay = argv[++i];
        else if (!strcmp(argv[i], "--alone"))
            alone = 1;
        else
            usage();
    }
    if (reps < 1 || reps > MAX_REPS || (only && strcmp(only, "sparse") && strcmp(only, "mlp"))) usage();
    int known = !only_delay;
    for (size_t k = 0; k < N_CASES; k++) known |= only_delay && !strcmp(only_delay, cases[k].delay);
    if (!known) usage();
    char err[512];
    if (!only || !strcmp(only, "sparse")) {
        data_options_t o = {"gen:sparse", NULL, 0, 0, 0.1, 1, NULL, NULL, 0};
        data_bundle_t data;
        data_bundle_init(&data);
        if (data_bundle_load(&o, DATA_KIND_SPARSE, &data, err, sizeof err) != 0) {
            fprintf(stderr, "bench_simulate: %s\n", err);
            return 1;
        }
        model_t *m =
            model_new_linear(LINEAR_LOSS_LOGISTIC, &data.sparse_train, &data.sparse_test, 0.0, err, sizeof err);
        if (!m) {
            fprintf(stderr, "bench_simulate: %s\n", err);
            return 1;
        }
        problem_t p = {"logreg on gen:sparse", m, 1, epochs ? epochs : 2, 0.5};
        bench_problem(&p, reps);
        model_destroy(&m);
        data_bundle_free(&data);
    }
    if (!only || !strcmp(only, "mlp")) {
        dense_dataset_t tr, te;
        if (make_clusters(&tr, 8000, 64, 10, 1, err, sizeof err) != 0 ||
            make_clusters(&te, 2000, 64, 10, 2, err, sizeof err) != 0) {
            fprintf(stderr, "bench_simulate: %s\n", err);
            return 1;
        }
        size_t hidden[1] = {64};
        model_t *m = model_new_mlp(&tr, &te, hidden, 1, 0.0, err, sizeof err);
        if (!m) {
            fprintf(stderr, "bench_simulate: %s\n", err);
            return 1;
        }
        problem_t p = {"mlp 64-64-10 on 8,000 generated dense examples", m, 16, epochs ? epochs : 4, 0.05};
        bench_problem(&p, reps);
        model_destroy(&m);
        dense_dataset_free(&tr);
        dense_dataset_free(&te);
    }
    return 0;
}
