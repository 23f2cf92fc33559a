// Hogwild!'s lost updates on real workloads (engine/models/update_counter.h):
// the fraction of updates two (or --threads) racing threads lose, per run, for
// the MLP 784-256-128-10 on Fashion-MNIST (batch 16) and sparse logistic
// regression on the default gen:sparse set (200,000 x 100,000, ~60 Zipf-
// popular features per example, batch 1). One epoch each; min, median and
// max over --runs runs, and the same for one thread (which must be 0).
//
//   build/bench_lost_updates [--runs 5] [--threads 2]
#include <string.h>
#include <unistd.h>

#include "bench/bench_support.h"
#include "engine/core/trainer.h"
#include "engine/data/data_source.h"
#include "engine/models/update_counter.h"
#include "kernels/blas_runtime.h"

// The lost fraction of one counted run; -1 on error (message printed). With
// w_out, the final counts (in units) are left there.
static double lost_once(const model_t *inner, size_t threads, size_t batch, float *w_out) {
    char err[512];
    model_t *counter = update_counter_new(inner, err, sizeof err);
    if (!counter) goto fail;
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = 1.0;
    train_config_t c;
    train_config_default(&c);
    c.mode = TRAIN_MODE_HOGWILD;
    c.threads = threads;
    c.batch = batch;
    c.epochs = 1;
    c.eval_every = model_num_train(inner);
    size_t n = model_num_params(inner);
    float *w = malloc(n * sizeof *w);
    train_result_t r;
    if (!w || train_fresh(counter, &oc, &c, 1, NULL, &r, w, err, sizeof err) != 0) {
        free(w);
        model_destroy(&counter);
        goto fail;
    }
    double lost = update_count_lost_fraction(update_counter_result(counter, w));
    for (size_t i = 0; w_out && i < n; i++) w_out[i] = w[i] / UPDATE_COUNT_UNIT;
    free(w);
    model_destroy(&counter);
    return lost;
fail:
    fprintf(stderr, "bench_lost_updates: %s\n", err);
    return -1.0;
}

static int row(const char *label, const model_t *m, size_t batch, size_t threads, int runs) {
    double v[64];
    for (size_t t = 1; t <= threads; t += threads - 1) {
        for (int k = 0; k < runs; k++)
            if ((v[k] = lost_once(m, t, batch, NULL)) < 0) return -1;
        double lo = v[0], hi = v[0];
        for (int k = 1; k < runs; k++) lo = v[k] < lo ? v[k] : lo, hi = v[k] > hi ? v[k] : hi;
        printf("| %s | %zu | %zu | %.3g | %.3g | %.3g |\n", label, batch, t, lo, bench_median(v, runs), hi);
        if (threads == 1) break;
    }
    return 0;
}

static int by_count_desc(const void *a, const void *b) {
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x < y) - (x > y);
}

// Where one run's lost updates were: the bias, the features by how often the
// data has them (a batch-1 epoch updates each feature once per occurrence).
static int where_lost(const model_t *lr, const sparse_dataset_t *d, size_t threads) {
    size_t dim = model_num_params(lr) - 1;
    float *w = malloc((dim + 1) * sizeof *w);
    double *rows = calloc(2 * dim, sizeof *rows);  // (expected, lost) per feature
    if (!w || !rows || lost_once(lr, threads, 1, w) < 0) return -1;
    for (size_t k = 0; k < d->nnz; k++) rows[2 * d->col[k]] += 1.0;
    double total_lost = (double)d->n - w[dim], handed = (double)(d->n + d->nnz);
    for (size_t j = 0; j < dim; j++) total_lost += (rows[2 * j + 1] = rows[2 * j] - w[j]);
    qsort(rows, dim, 2 * sizeof *rows, by_count_desc);
    double top10 = 0, top100 = 0, top10_exp = 0, top100_exp = 0;
    for (size_t j = 0; j < 100 && j < dim; j++) {
        if (j < 10) top10 += rows[2 * j + 1], top10_exp += rows[2 * j];
        top100 += rows[2 * j + 1], top100_exp += rows[2 * j];
    }
    printf(
        "\none %zu-thread logreg run: %.0f of %.0f updates lost (%.3g); of the bias's %zu updates %.0f lost (%.3g); "
        "of the 10 most frequent features' %.0f, %.0f (%.3g); of the next 90's %.0f, %.0f (%.3g); of the other "
        "%zu features' %.0f, %.0f (%.3g)\n",
        threads, total_lost, handed, total_lost / handed, d->n, (double)d->n - w[dim], 1.0 - w[dim] / (double)d->n,
        top10_exp, top10, top10 / top10_exp, top100_exp - top10_exp, top100 - top10,
        (top100 - top10) / (top100_exp - top10_exp), dim - 100, handed - d->n - top100_exp,
        total_lost - ((double)d->n - w[dim]) - top100,
        (total_lost - ((double)d->n - w[dim]) - top100) / (handed - d->n - top100_exp));
    free(w);
    free(rows);
    return 0;
}

int main(int argc, char **argv) {
    blas_prepare_process(argv, 0);
    int runs = 5;
    size_t threads = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_lost_updates [--runs R (1..64)] [--threads T (1..64)]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 64 || threads < 1 || threads > 64) {
        fprintf(stderr, "bench_lost_updates: --runs and --threads must be 1..64\n");
        return 2;
    }
    char err[512], blas[256];
    blas_describe(blas, sizeof blas);
    printf("bench_lost_updates | %s | %ld CPUs | %d runs of one epoch each\n\n", blas, sysconf(_SC_NPROCESSORS_ONLN),
           runs);
    printf("| model | batch | threads | lost min | lost median | lost max |\n|---|--:|--:|--:|--:|--:|\n");
    data_options_t fm = {"fashion-mnist", NULL, 0, 0, 0.1, 1, NULL, NULL, 0};
    data_bundle_t d;
    if (data_bundle_load(&fm, DATA_KIND_DENSE, &d, err, sizeof err) != 0) {
        fprintf(stderr, "bench_lost_updates: %s\n", err);
        return 1;
    }
    size_t hidden[2] = {256, 128};
    model_t *mlp = model_new_mlp(&d.dense_train, &d.dense_test, hidden, 2, 0.0, err, sizeof err);
    if (!mlp || row("mlp 784-256-128-10, Fashion-MNIST", mlp, 16, threads, runs) != 0) return 1;
    model_destroy(&mlp);
    data_bundle_free(&d);
    data_options_t gs = {"gen:sparse", NULL, 0, 0, 0.1, 1, NULL, NULL, 0};
    if (data_bundle_load(&gs, DATA_KIND_SPARSE, &d, err, sizeof err) != 0) {
        fprintf(stderr, "bench_lost_updates: %s\n", err);
        return 1;
    }
    model_t *lr = model_new_linear(LINEAR_LOSS_LOGISTIC, &d.sparse_train, &d.sparse_test, 0.0, err, sizeof err);
    if (!lr || row("logreg, gen:sparse (Zipf)", lr, 1, threads, runs) != 0) return 1;
    if (threads > 1 && where_lost(lr, &d.sparse_train, threads) != 0) return 1;
    model_destroy(&lr);
    data_bundle_free(&d);
    return 0;
}
