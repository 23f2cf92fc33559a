// The model registry (engine/models/model_registry.h): a model defined here,
// outside the engine — least squares on dense images, with its own flag —
// registered at run time, is listed with its flag by `asgd train --help`,
// trains through the same command line as the built-ins to the loss only a
// correct gradient reaches, and has its flag checked like any other; a second
// registration of a name, a bad name and a flag that clashes are refused.
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cli/commands.h"
#include "engine/core/model_impl.h"
#include "engine/models/model_registry.h"
#include "kernels/blas_runtime.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_model_registry_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

// ---- the model: prediction w.x + b for the target scale * label, loss 1/2 err^2 ----

typedef struct lsq_model {
    model_t base;
    const dense_dataset_t *train, *test;
    size_t dim;
    double scale;
} lsq_model_t;

typedef struct lsq_ws {
    model_ws_header_t header;
} lsq_ws_t;

static const model_ops_t lsq_ops;

static size_t lsq_num_params(const model_t *m) { return ((const lsq_model_t *)m)->dim + 1; }

static void lsq_describe(const model_t *m, char *out, size_t out_len) {
    const lsq_model_t *q = (const lsq_model_t *)m;
    snprintf(out, out_len, "lsq %zu features, scale %g", q->dim, q->scale);
}

static double lsq_flops(const model_t *m) { return 4.0 * (double)((const lsq_model_t *)m)->dim; }

static void lsq_init(const model_t *m, param_t *w, uint64_t seed) {
    (void)seed;
    for (size_t j = 0; j < lsq_num_params(m); j++) param_set(&w[j], 0.0f);
}

static model_ws_t *lsq_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    (void)m, (void)max_batch;
    lsq_ws_t *ws = calloc(1, sizeof *ws);
    if (!ws) {
        snprintf(err, err_len, "lsq: out of memory");
        return NULL;
    }
    ws->header.ops = &lsq_ops;
    return (model_ws_t *)ws;
}

static void lsq_ws_destroy(model_ws_t *ws) { free(ws); }

// The residual of example i of d.
static double residual(const lsq_model_t *q, const dense_dataset_t *d, size_t i, const param_t *w) {
    const float *x = d->x + i * d->dim;
    double pred = param_get(&w[q->dim]);
    for (size_t j = 0; j < q->dim; j++) pred += param_get(&w[j]) * x[j];
    return pred - q->scale * d->y[i];
}

static double lsq_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                            model_ws_t *ws) {
    (void)ws;
    const lsq_model_t *q = (const lsq_model_t *)m;
    double loss = 0.0;
    for (size_t e = 0; e < count; e++) {
        double r = residual(q, q->train, idx[e], w);
        const float *x = q->train->x + (size_t)idx[e] * q->dim;
        loss += 0.5 * r * r;
        for (size_t j = 0; j < q->dim; j++) g->value[j] += (float)(r * x[j] / (double)count);
        g->value[q->dim] += (float)(r / (double)count);
    }
    return loss / (double)count;
}

static void lsq_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws,
                         eval_sums_t *sums) {
    (void)ws;
    const lsq_model_t *q = (const lsq_model_t *)m;
    for (size_t i = begin; i < end; i++) {
        double r = residual(q, q->test, i, w);
        sums->loss_sum += 0.5 * r * r;
        sums->metric_sum += r * r;
        sums->count++;
    }
}

static void lsq_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    (void)ws;
    const lsq_model_t *q = (const lsq_model_t *)m;
    for (size_t i = begin; i < end; i++) out[i - begin] = residual(q, q->test, i, w) + q->scale * q->test->y[i];
}

static void lsq_destroy(model_t *m) { free(m); }

static const model_ops_t lsq_ops = {
    .describe = lsq_describe,
    .num_params = lsq_num_params,
    .flops_per_example = lsq_flops,
    .init_params = lsq_init,
    .ws_new = lsq_ws_new,
    .ws_destroy = lsq_ws_destroy,
    .loss_grad = lsq_loss_grad,
    .evaluate = lsq_evaluate,
    .predict = lsq_predict,
    .destroy = lsq_destroy,
};

// ---- its descriptor ----

typedef struct lsq_options {
    double scale;  // --lsq-scale
} lsq_options_t;

static void lsq_options_default(void *opts) { ((lsq_options_t *)opts)->scale = 1.0; }

static void lsq_flags(void *opts, flag_spec_t *specs) {
    specs[0] = (flag_spec_t){"lsq-scale",
                             FLAG_TYPE_DOUBLE,
                             &((lsq_options_t *)opts)->scale,
                             "S",
                             "regress S times the label (default 1)",
                             1e-3,
                             1e3,
                             NULL,
                             0};
}

static model_t *lsq_create(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                           size_t err_len) {
    (void)l2, (void)seed;
    const dense_dataset_t *tr = train;
    lsq_model_t *q = calloc(1, sizeof *q);
    if (!q) {
        snprintf(err, err_len, "lsq: out of memory");
        return NULL;
    }
    q->base.ops = &lsq_ops;
    q->base.name = "lsq";
    q->base.num_train = tr->n;
    q->base.num_test = ((const dense_dataset_t *)test)->n;
    q->base.grad_dense = 1;
    q->base.metric = METRIC_KIND_RMSE;
    q->train = tr;
    q->test = test;
    q->dim = tr->dim;
    q->scale = ((const lsq_options_t *)opts)->scale;
    return &q->base;
}

static const model_descriptor_t lsq_descriptor = {
    .name = "lsq",
    .summary = "least-squares regression of the label on the pixels (a test's model)",
    .data = DATA_KIND_DENSE,
    .metric = METRIC_KIND_RMSE,
    .output = MODEL_OUTPUT_VALUE,
    .defaults = {.lr = 0.1, .batch = 8, .l2 = 0.0, .data = "fashion-mnist"},
    .options_size = sizeof(lsq_options_t),
    .n_flags = 1,
    .options_default = lsq_options_default,
    .flags = lsq_flags,
    .create = lsq_create,
};

// ---- data: IDX files whose label is a linear function of pixel 0 ----

static void put_be32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    CHECK(fwrite(b, 1, 4, f) == 4);
}

// n 2x2 images: pixel 0 = 25 * label + 10, the others noise; labels 0..9. The
// least-squares fit is exact and needs the bias (label = 10.2 x0 - 0.4).
static void write_idx(const char *split, uint32_t n, uint64_t seed) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
    FILE *img = fopen(path, "wb");
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    FILE *lab = fopen(path, "wb");
    CHECK(img && lab);
    put_be32(img, 0x803);
    put_be32(img, n);
    put_be32(img, 2);
    put_be32(img, 2);
    put_be32(lab, 0x801);
    put_be32(lab, n);
    uint64_t s = seed;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t px[4];
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint8_t label = (uint8_t)((s >> 33) % 10);
        px[0] = (uint8_t)(25 * label + 10);
        for (int k = 1; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            px[k] = (uint8_t)(s >> 40);
        }
        CHECK(fwrite(px, 1, 4, img) == 4 && fwrite(&label, 1, 1, lab) == 1);
    }
    CHECK(fclose(img) == 0 && fclose(lab) == 0);
}

// ---- running the command line in this process ----

// asgd_cli_main on a NULL-terminated list, its stdout captured into a file; returns its status.
static int run_cli(const char *out_path, const char *const *args) {
    char *argv[64];
    int argc = 0;
    argv[argc++] = "asgd";
    for (; args[argc - 1] && argc < 63; argc++) argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(saved >= 0 && fd >= 0 && dup2(fd, STDOUT_FILENO) >= 0);
    close(fd);
    int rc = asgd_cli_main(argc, argv);
    fflush(stdout);
    CHECK(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    return rc;
}

int main(void) {
    // asgd_cli_main restarts the process when it would pick other BLAS kernels
    // or threads (blas_prepare_process); this process keeps what it loaded, as
    // a user who sets both variables does, so that its registration stays.
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    setenv("OPENBLAS_CORETYPE", blas_core_name(), 0);
    CHECK(mkdtemp(dir));
    char err[512], out[400], summary[400];
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(summary, sizeof summary, "%s/summary.json", dir);

    // Built-ins first, in their fixed order (checkpoints record the position).
    const char *builtin[] = {"logreg", "svm", "softmax", "mlp", "mf", "embmlp"};
    size_t n_builtin = sizeof builtin / sizeof builtin[0];
    CHECK(model_registry_count() == n_builtin);
    for (size_t i = 0; i < n_builtin; i++) CHECK(strcmp(model_registry_at(i)->name, builtin[i]) == 0);
    CHECK(model_registry_at(n_builtin) == NULL && model_registry_find("lsq") == NULL);

    CHECK_OK(model_registry_add(&lsq_descriptor, err, sizeof err), err);
    CHECK(model_registry_count() == n_builtin + 1 && model_registry_at(n_builtin) == &lsq_descriptor);
    CHECK(model_registry_find("lsq") == &lsq_descriptor && model_registry_index(&lsq_descriptor) == (int)n_builtin);

    // Refused: the same name again, a built-in's name, a bad name, a flag name of another type.
    CHECK(model_registry_add(&lsq_descriptor, err, sizeof err) == -1 && strstr(err, "'lsq' is already registered"));
    printf("refused: %s\n", err);
    model_descriptor_t clash = lsq_descriptor;
    clash.name = "mlp";
    CHECK(model_registry_add(&clash, err, sizeof err) == -1 && strstr(err, "'mlp' is already registered"));
    clash.name = "Has Space";
    CHECK(model_registry_add(&clash, err, sizeof err) == -1 && strstr(err, "model name 'Has Space'"));
    printf("refused: %s\n", err);
    clash.name = "lsq2";
    clash.create = NULL;
    CHECK(model_registry_add(&clash, err, sizeof err) == -1 && strstr(err, "needs create"));
    CHECK(model_registry_count() == n_builtin + 1);

    // --help lists it, its summary, defaults and its own flag under it, and --model's choices name it.
    CHECK(run_cli(out, (const char *[]){"train", "--help", NULL}) == 0);
    char *help = launch_slurp(out);
    const char *section = strstr(help, "\n  lsq ");
    CHECK(strstr(help, "(logreg|svm|softmax|mlp|mf|embmlp|lsq; default "));
    CHECK(section && strstr(section, "least-squares regression") && strstr(section, "--lr 0.1 --batch 8"));
    CHECK(strstr(section, "--lsq-scale S") && strstr(section, "regress S times the label"));
    CHECK(strstr(help, "--lsq-scale") > strstr(help, "\n  embmlp "));  // under the model, after the built-ins
    CHECK(strstr(strstr(help, "\n  mlp "), "--hidden W1,W2"));  // the built-ins' own flags too
    free(help);

    // Trains through the command line: RMSE from ~10.7 (w = 0) to near 0 only if the gradient is right.
    write_idx("train", 2000, 1);
    write_idx("t10k", 400, 2);
    const char *train[] = {"train",    "--model", "lsq",     "--data-dir", dir,     "--lsq-scale", "2",
                           "--epochs", "25",      "--quiet", "--summary",  summary, NULL};
    CHECK(run_cli(out, train) == 0);
    char *json = launch_slurp(summary);
    double rmse = launch_field(json, "final_test_rmse");
    printf("lsq, --lsq-scale 2: final test RMSE %.5f (predicting 0: %.2f)\n", rmse, 2 * sqrt(28.5));
    CHECK(rmse < 0.05);
    CHECK(strstr(json, "\"model\":\"lsq\"") && strstr(json, "scale 2") && launch_field(json, "lr") == 0.1);
    CHECK(strstr(json, "\"target_metric\":\"test_rmse\""));
    free(json);

    // Its flag is checked like any other's, whichever model runs; --target-acc is not its metric.
    CHECK(run_cli(out, (const char *[]){"train", "--model", "logreg", "--lsq-scale", "0", NULL}) == 2);
    CHECK(run_cli(out, (const char *[]){"train", "--model", "lsq", "--target-acc", "0.5", NULL}) == 2);
    // It has no model-file hooks: --save-model refuses it before training.
    char model_path[400];
    snprintf(model_path, sizeof model_path, "%s/lsq.model", dir);
    CHECK(run_cli(out, (const char *[]){"train", "--model", "lsq", "--data-dir", dir, "--quiet", "--save-model",
                                        model_path, NULL}) == 1);
    CHECK(access(model_path, F_OK) != 0);

    CHECK(test_remove_tree(dir) == 0);
    printf("model registry: a registered model is listed, trained and checked by the command line\n");
    return 0;
}
