// The public model extension (asgd/model_ext.h) and the typed job
// (asgd_job_config_t) in process: a model registered with public names alone
// trains, its workspaces are made and freed in pairs, and bad definitions are
// refused with a line naming what is wrong; a job configured from the typed
// struct is the job set flag by flag (bit-identical results), and a failing
// asgd_job_configure leaves the job as it was.
#include <asgd/asgd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/api/api_job.h"
#include "tests/support/test_support.h"

// ---- a least-squares linear model on sparse data: y ~ w.x + b ----

typedef struct lsq_options {
    double scale;  // --lsq-scale: multiplies the loss
} lsq_options_t;

typedef struct lsq {
    const asgd_sparse_data_t *train, *test;
    double scale;
} lsq_t;

static int ws_made, ws_freed;

static float lsq_score(const asgd_sparse_data_t *d, size_t row, const asgd_param_t *w) {
    float s = asgd_param_get(&w[d->dim]);
    for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) s += asgd_param_get(&w[d->col[k]]) * d->val[k];
    return s;
}

static size_t lsq_num_params(const void *self) { return ((const lsq_t *)self)->train->dim + 1; }

static double lsq_loss_grad(const void *self, const asgd_param_t *w, const uint32_t *idx, size_t count, asgd_grad_t *g,
                            void *ws) {
    const lsq_t *m = self;
    CHECK(ws != NULL && *(int *)ws == 42);
    double loss = 0.0;
    for (size_t i = 0; i < count; i++) {
        const asgd_sparse_data_t *d = m->train;
        float e = lsq_score(d, idx[i], w) - d->y[idx[i]];
        loss += 0.5 * m->scale * (double)e * e;
        float coef = (float)m->scale * e / (float)count;
        for (size_t k = d->row_ptr[idx[i]]; k < d->row_ptr[idx[i] + 1]; k++)
            asgd_grad_add(g, d->col[k], coef * d->val[k]);
        asgd_grad_add(g, (uint32_t)d->dim, coef);
    }
    return loss / (double)count;
}

static void lsq_evaluate(const void *self, const asgd_param_t *w, size_t begin, size_t end, void *ws,
                         asgd_eval_sums_t *sums) {
    const lsq_t *m = self;
    for (size_t row = begin; row < end; row++) {
        float s = lsq_score(m->test, row, w), y = m->test->y[row];
        sums->loss_sum += 0.5 * (double)(s - y) * (s - y);
        sums->metric_sum += (s >= 0.0f ? 1.0f : -1.0f) == y;
        sums->count++;
    }
}

static void lsq_predict(const void *self, const asgd_param_t *w, size_t begin, size_t end, void *ws, double *out) {
    const lsq_t *m = self;
    for (size_t row = begin; row < end; row++) out[row - begin] = lsq_score(m->test, row, w);
}

static void *lsq_ws_new(const void *self, size_t max_batch, char *err, size_t err_len) {
    int *ws = malloc(sizeof *ws);
    CHECK(ws != NULL);
    *ws = 42;
    ws_made++;
    return ws;
}

static void lsq_ws_destroy(void *ws) {
    ws_freed++;
    free(ws);
}

static void lsq_destroy(void *self) { free(self); }

static const asgd_model_ops_t lsq_ops = {
    .num_params = lsq_num_params,
    .loss_grad = lsq_loss_grad,
    .evaluate = lsq_evaluate,
    .predict = lsq_predict,
    .ws_new = lsq_ws_new,
    .ws_destroy = lsq_ws_destroy,
    .destroy = lsq_destroy,
};

static void *lsq_create(const asgd_data_t *train, const asgd_data_t *test, const void *opts, double l2, uint64_t seed,
                        char *err, size_t err_len) {
    CHECK(train->kind == ASGD_DATA_KIND_SPARSE && test->kind == ASGD_DATA_KIND_SPARSE);
    lsq_t *m = calloc(1, sizeof *m);
    CHECK(m != NULL);
    m->train = &train->sparse;
    m->test = &test->sparse;
    m->scale = ((const lsq_options_t *)opts)->scale;
    return m;
}

static void lsq_options_default(void *opts) { ((lsq_options_t *)opts)->scale = 1.0; }

static const asgd_model_flag_t lsq_flags[] = {
    {"lsq-scale", ASGD_FLAG_DOUBLE, offsetof(lsq_options_t, scale), "S", "lsq: multiplies the loss", 0.1, 10},
};

static const asgd_model_def_t lsq_def = {
    .name = "lsq",
    .summary = "least squares on sparse features (a test model)",
    .data = ASGD_DATA_KIND_SPARSE,
    .metric = ASGD_METRIC_ACCURACY,
    .output = ASGD_OUTPUT_MARGIN,
    .default_lr = 0.05,
    .default_batch = 4,
    .default_data = "gen:sparse",
    .options_size = sizeof(lsq_options_t),
    .options_default = lsq_options_default,
    .n_flags = 1,
    .flags = lsq_flags,
    .create = lsq_create,
    .ops = &lsq_ops,
};

static const char *const data = "gen:sparse:n=2000,dim=300,nnz=10,seed=4";

static void run_job(asgd_job_t *job, asgd_result_t *r) {
    char err[512];
    CHECK(job != NULL);
    CHECK_OK(asgd_job_set(job, "quiet", NULL, err, sizeof err), err);
    CHECK_OK(asgd_train(job, r, err, sizeof err), err);
    asgd_job_destroy(&job);
}

int main(void) {
    char err[512];
    CHECK_OK(asgd_model_register(&lsq_def, err, sizeof err), err);

    // Refused definitions, each with its reason; none is registered.
    asgd_model_def_t bad = lsq_def;
    bad.name = "lsq2";
    bad.ops = NULL;
    CHECK(asgd_model_register(&bad, err, sizeof err) == -1 && strstr(err, "needs create") != NULL);
    printf("refused: %s\n", err);
    asgd_model_flag_t far = lsq_flags[0];
    far.offset = sizeof(lsq_options_t);
    bad = lsq_def;
    bad.name = "lsq3";
    bad.flags = &far;
    CHECK(asgd_model_register(&bad, err, sizeof err) == -1 && strstr(err, "--lsq-scale") != NULL);
    printf("refused: %s\n", err);
    CHECK(asgd_model_register(&lsq_def, err, sizeof err) == -1 && strstr(err, "already registered") != NULL);
    printf("refused: %s\n", err);

    // The model trains in sync mode on 2 threads, with its own flag.
    asgd_job_config_t c;
    asgd_job_config_init(&c);
    c.model = "lsq";
    c.data = data;
    c.mode = "sync";
    c.threads = 2;
    c.epochs = 2;
    c.seed = 9;
    asgd_job_t *job = asgd_job_new(err, sizeof err);
    CHECK_OK(asgd_job_configure(job, &c, err, sizeof err), err);
    CHECK_OK(asgd_job_set(job, "lsq-scale", "2", err, sizeof err), err);
    asgd_result_t typed = {0};
    run_job(job, &typed);
    CHECK(strcmp(typed.model, "lsq") == 0 && strcmp(typed.metric, "accuracy") == 0);
    CHECK(typed.samples == 2 * 1800);  // 2 epochs of 2,000 less the tenth held out
    CHECK(typed.final.test_loss < typed.points[0].test_loss);
    // One workspace per training thread and the evaluation's, each freed.
    CHECK(ws_made > 0 && ws_made == ws_freed);
    printf("lsq: loss %.4f -> %.4f, accuracy %.3f, %d workspaces\n", typed.points[0].test_loss, typed.final.test_loss,
           typed.final.test_metric, ws_made);

    // The same job flag by flag: the same run, bit for bit.
    static const char *const pairs[] = {"model",  "lsq", "data", NULL, "mode",      "sync", "threads", "2",
                                        "epochs", "2",   "seed", "9",  "lsq-scale", "2",    NULL};
    job = asgd_job_new(err, sizeof err);
    for (size_t i = 0; pairs[i]; i += 2)
        CHECK_OK(asgd_job_set(job, pairs[i], i == 2 ? data : pairs[i + 1], err, sizeof err), err);
    asgd_result_t named = {0};
    run_job(job, &named);
    CHECK(named.n_points == typed.n_points && named.samples == typed.samples);
    for (size_t i = 0; i < named.n_points; i++) {  // all but the wall clock
        const asgd_point_t *a = &named.points[i], *b = &typed.points[i];
        CHECK(a->samples == b->samples && a->epoch == b->epoch && a->test_loss == b->test_loss &&
              a->test_metric == b->test_metric);
        CHECK(a->train_loss == b->train_loss || (isnan(a->train_loss) && isnan(b->train_loss)));
    }
    asgd_result_free(&typed);
    asgd_result_free(&named);

    // A double goes through as the same double.
    asgd_job_config_init(&c);
    c.lr = 0.1;
    job = asgd_job_new(err, sizeof err);
    CHECK_OK(asgd_job_configure(job, &c, err, sizeof err), err);
    CHECK(job->n == 1 && strcmp(job->flag[0], "lr") == 0 && strtod(job->value[0], NULL) == 0.1);
    asgd_job_destroy(&job);

    // All or nothing: a job one flag short of full takes the first field, not
    // the second, so it is left as it was.
    job = asgd_job_new(err, sizeof err);
    for (int i = 0; i < ASGD_JOB_MAX_FLAGS - 1; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        CHECK_OK(asgd_job_set(job, name, "1", err, sizeof err), err);
    }
    asgd_job_config_init(&c);
    c.model = "lsq";
    c.threads = 2;
    CHECK(asgd_job_configure(job, &c, err, sizeof err) == -1 && strstr(err, "at most") != NULL);
    char last[16];
    snprintf(last, sizeof last, "f%d", ASGD_JOB_MAX_FLAGS - 2);
    CHECK(job->n == ASGD_JOB_MAX_FLAGS - 1 && strcmp(job->flag[job->n - 1], last) == 0);
    printf("refused: %s\n", err);
    asgd_job_destroy(&job);
    return 0;
}
