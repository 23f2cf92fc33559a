// Gradient-norm clipping (--clip-grad-norm): grad_clip_norm itself, then
// whole training runs, sparse and dense, in every mode and in the simulator:
// with plain SGD the update a step applies has norm at most lr * C and points
// along the step's own (unclipped) gradient.
#include <math.h>

#include "engine/core/grad.h"
#include "engine/core/params.h"
#include "engine/sim/simulate.h"
#include "engine/core/trainer.h"
#include "tests/support/test_support.h"

#define LR 0.1f
#define CLIP 0.5
#define INIT_SEED 11
#define ROUNDING 1e-5  // relative: float sums in another order, float updates

static double norm(const float *v, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

static void test_grad_clip_norm(void) {
    char err[256];
    grad_t g;
    CHECK_OK(grad_init(&g, 10, 0, err, sizeof err), err);
    grad_add(&g, 2, 3.0f);
    grad_add(&g, 7, -4.0f);
    CHECK(grad_clip_norm(&g, 1.0) == 5.0);  // the norm before clipping
    CHECK_NEAR(g.value[2], 0.6, 1e-7);
    CHECK_NEAR(g.value[7], -0.8, 1e-7);
    CHECK_NEAR(norm(g.value, 10), 1.0, 1e-7);
    CHECK(g.n_touched == 2 && g.value[0] == 0.0f);
    // At or below the limit: untouched, bit for bit.
    float before[10];
    memcpy(before, g.value, sizeof before);
    CHECK_NEAR(grad_clip_norm(&g, 1.0), 1.0, 1e-7);
    CHECK_NEAR(grad_clip_norm(&g, 2.0), 1.0, 1e-7);
    CHECK(memcmp(before, g.value, sizeof before) == 0);
    grad_free(&g);
    // Dense; a NaN is left for the divergence check to see.
    CHECK_OK(grad_init(&g, 4, 1, err, sizeof err), err);
    g.value[0] = 1.0f, g.value[1] = -2.0f, g.value[2] = 2.0f;
    CHECK(grad_clip_norm(&g, 1.5) == 3.0);
    CHECK_NEAR(g.value[0], 0.5, 1e-7);
    CHECK_NEAR(g.value[1], -1.0, 1e-7);
    CHECK_NEAR(g.value[2], 1.0, 1e-7);
    g.value[3] = NAN;
    CHECK(isnan(grad_clip_norm(&g, 1.0)) && g.value[0] == 0.5f && isnan(g.value[3]));
    grad_free(&g);
    printf("grad_clip_norm: scaled to the limit along the same direction; shorter or NaN gradients untouched\n");
}

// The parameters init_seed gives, and the gradient of the whole training set there.
static double initial_gradient(const model_t *m, float *w0, float *g_out) {
    char err[256];
    size_t n = model_num_params(m), n_train = model_num_train(m);
    param_t *w = params_new(n, err, sizeof err);
    CHECK_OK(w == NULL, err);
    model_init_params(m, w, INIT_SEED);
    params_read(w, n, w0);
    grad_t g;
    CHECK_OK(grad_init(&g, n, model_grad_is_dense(m), err, sizeof err), err);
    model_ws_t *ws = model_ws_new(m, n_train, err, sizeof err);
    CHECK_OK(ws == NULL, err);
    uint32_t *all = malloc(n_train * sizeof *all);
    for (size_t i = 0; i < n_train; i++) all[i] = (uint32_t)i;
    model_loss_grad(m, w, all, n_train, &g, ws);
    memcpy(g_out, g.value, n * sizeof *g_out);
    free(all);
    model_ws_destroy(&ws);
    grad_free(&g);
    params_free(&w);
    return norm(g_out, n);
}

static train_config_t config(train_mode_t mode, size_t threads, size_t batch, size_t epochs, double clip) {
    train_config_t c;
    train_config_default(&c);
    c.mode = mode;
    c.threads = threads;
    c.batch = batch;
    c.epochs = epochs;
    c.seed = 5;
    c.clip_grad_norm = clip;
    return c;
}

static void run(const model_t *m, const train_config_t *c, float *final_w) {
    char err[256];
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = LR;
    train_result_t r;
    CHECK_OK(train_fresh(m, &oc, c, INIT_SEED, NULL, &r, final_w, err, sizeof err), err);
}

// One step over the whole training set: the update is -lr * g * C / |g| exactly
// (up to rounding), in every mode; without clipping it is -lr * g.
static void check_one_step(const char *label, const model_t *m) {
    size_t n = model_num_params(m), n_train = model_num_train(m);
    float *w0 = malloc(n * sizeof *w0), *g = malloc(n * sizeof *g), *w = malloc(n * sizeof *w);
    float *step = malloc(n * sizeof *step);
    double gn = initial_gradient(m, w0, g);
    CHECK(gn > 10 * CLIP);  // else there would be nothing to clip
    static const struct {
        train_mode_t mode;
        size_t threads;
    } modes[] = {{TRAIN_MODE_HOGWILD, 1}, {TRAIN_MODE_LOCKED, 1}, {TRAIN_MODE_SYNC, 1}, {TRAIN_MODE_SYNC, 2}};
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        // sync with 2 threads: each clips its half's gradient; one averaged update.
        size_t batch = n_train / modes[k].threads;
        train_config_t c = config(modes[k].mode, modes[k].threads, batch, 1, CLIP);
        run(m, &c, w);
        for (size_t i = 0; i < n; i++) step[i] = w[i] - w0[i];
        double sn = norm(step, n);
        if (!(sn <= LR * CLIP * (1 + ROUNDING))) {
            fprintf(stderr, "%s, %s x%zu: the update's norm %.9g is above lr * C = %.9g\n", label,
                    train_mode_name(modes[k].mode), modes[k].threads, sn, LR * CLIP);
            exit(1);
        }
        if (modes[k].threads == 1) {
            CHECK_NEAR(sn, LR * CLIP, LR * CLIP * ROUNDING);
            // Along the gradient: step = -lr * C / |g| * g, coordinate by coordinate.
            for (size_t i = 0; i < n; i++) CHECK_NEAR(step[i], -LR * CLIP / gn * g[i], LR * CLIP * ROUNDING);
        }
    }
    // Without clipping the same step is the whole gradient's.
    train_config_t c = config(TRAIN_MODE_HOGWILD, 1, n_train, 1, 0.0);
    run(m, &c, w);
    for (size_t i = 0; i < n; i++) step[i] = w[i] - w0[i];
    CHECK_NEAR(norm(step, n), LR * gn, LR * gn * ROUNDING);
    printf(
        "%s: one step, |g| = %.4g: update norm lr * C = %.4g along -g in hogwild, locked, sync (1 and 2 threads); "
        "unclipped %.4g\n",
        label, gn, LR * CLIP, LR * gn);
    free(w0);
    free(g);
    free(w);
    free(step);
}

// Many one-example steps: the model moves at most steps * lr * C in all,
// while unclipped it moves further (so the bound is not met by chance).
static void check_many_steps(const char *label, const model_t *m) {
    char err[256];
    size_t n = model_num_params(m), n_train = model_num_train(m), epochs = 2, steps = epochs * n_train;
    float *w0 = malloc(n * sizeof *w0), *g = malloc(n * sizeof *g), *w = malloc(n * sizeof *w);
    initial_gradient(m, w0, g);
    double moved[2];
    for (int clip = 0; clip < 2; clip++) {
        train_config_t c = config(TRAIN_MODE_HOGWILD, 1, 1, epochs, clip ? CLIP : 0.0);
        run(m, &c, w);
        for (size_t i = 0; i < n; i++) w[i] -= w0[i];
        moved[clip] = norm(w, n);
    }
    double bound = (double)steps * LR * CLIP;
    CHECK(moved[1] <= bound * (1 + ROUNDING));
    CHECK(moved[0] > bound);
    // The simulator clips each gradient it computes: with no delay it is one-thread Hogwild!.
    simulate_config_t sc;
    simulate_config_default(&sc);
    sc.train = config(TRAIN_MODE_HOGWILD, 1, 1, epochs, CLIP);
    sc.delay.kind = DELAY_KIND_FIXED;
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = LR;
    simulate_result_t sr;
    float *ws = malloc(n * sizeof *ws);
    CHECK_OK(simulate_fresh(m, &oc, &sc, INIT_SEED, NULL, &sr, ws, err, sizeof err), err);
    train_config_t c = config(TRAIN_MODE_HOGWILD, 1, 1, epochs, CLIP);
    run(m, &c, w);
    for (size_t i = 0; i < n; i++) CHECK_NEAR(ws[i], w[i], 1e-6 * (1 + fabs(w[i])));
    printf("%s: %zu clipped steps moved the model %.4g <= %.4g (unclipped: %.4g); the simulator agrees\n", label, steps,
           moved[1], bound, moved[0]);
    free(w0);
    free(g);
    free(w);
    free(ws);
}

int main(void) {
    char err[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_grad_clip_norm();

    // Sparse logistic regression with large feature values: long gradients.
    sparse_dataset_t tr, te;
    make_sparse(&tr, 64, 40, 5, 3);
    make_sparse(&te, 16, 40, 5, 4);
    for (size_t k = 0; k < tr.nnz; k++) tr.val[k] *= 50.0f;
    model_t *logreg = model_new_linear(LINEAR_LOSS_LOGISTIC, &tr, &te, 0.0, err, sizeof err);
    CHECK_OK(logreg == NULL, err);
    check_one_step("logreg", logreg);
    check_many_steps("logreg", logreg);
    model_destroy(&logreg);
    sparse_dataset_free(&tr);
    sparse_dataset_free(&te);

    // A small MLP (dense gradients, normally applied block by block as computed).
    dense_dataset_t dtr, dte;
    make_dense(&dtr, 32, 8, 3, 5);
    make_dense(&dte, 8, 8, 3, 6);
    for (size_t i = 0; i < dtr.n * dtr.dim; i++) dtr.x[i] *= 100.0f;
    size_t hidden[1] = {6};
    model_t *mlp = model_new_mlp(&dtr, &dte, hidden, 1, 0.0, err, sizeof err);
    CHECK_OK(mlp == NULL, err);
    check_one_step("mlp", mlp);
    check_many_steps("mlp", mlp);
    model_destroy(&mlp);
    dense_dataset_free(&dtr);
    dense_dataset_free(&dte);

    // A norm that is not positive, or clipping on the GPU, is refused.
    train_config_t c = config(TRAIN_MODE_HOGWILD, 1, 1, 1, -1.0);
    CHECK(train_config_check(&c, 10, err, sizeof err) == -1 && strstr(err, "--clip-grad-norm"));
    printf("test_clip_trainer: ok\n");
    return 0;
}
