// A model defined outside asgd: the squared hinge loss (an L2-SVM) on sparse
// data, with its own flag --margin. It fills asgd's public model table
// (asgd_model_ops_t, <asgd/model_ext.h>) and registers a definition, which is
// all asgd needs to train it on threads, in a distributed run, and to list it
// in --help.
#include "sqhinge_model.h"

#include <asgd/asgd.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct sqhinge_options {
    double margin;
} sqhinge_options_t;

typedef struct sqhinge {
    const asgd_sparse_data_t *train, *test;  // borrowed from asgd for the model's life
    float margin, l2;
} sqhinge_t;

static float score(const asgd_sparse_data_t *d, size_t row, const asgd_param_t *w) {
    float dot = asgd_param_get(&w[d->dim]);
    for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) dot += asgd_param_get(&w[d->col[k]]) * d->val[k];
    return dot;
}

static void describe(const void *self, char *out, size_t out_len) {
    const sqhinge_t *s = self;
    snprintf(out, out_len, "sqhinge %zu features, margin %g", s->train->dim, (double)s->margin);
}
static size_t num_params(const void *self) { return ((const sqhinge_t *)self)->train->dim + 1; }
static double flops(const void *self) {
    const sqhinge_t *s = self;
    return s->train->n ? 4.0 * (double)s->train->nnz / (double)s->train->n : 0.0;
}

static double loss_grad(const void *self, const asgd_param_t *w, const uint32_t *idx, size_t count, asgd_grad_t *g,
                        void *ws) {
    (void)ws;
    const sqhinge_t *s = self;
    const asgd_sparse_data_t *d = s->train;
    double loss = 0.0;
    float scale = 1.0f / (float)count;
    for (size_t i = 0; i < count; i++) {
        size_t row = idx[i];
        float y = d->y[row], gap = s->margin - y * score(d, row, w);
        if (gap <= 0.0f) continue;
        loss += (double)gap * gap;
        float coef = -2.0f * gap * y * scale;  // d/dw of gap^2, averaged over the batch
        for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) {
            uint32_t j = d->col[k];
            asgd_grad_add(g, j, coef * d->val[k] + s->l2 * scale * asgd_param_get(&w[j]));
        }
        asgd_grad_add(g, (uint32_t)d->dim, coef);
    }
    return loss / (double)count;
}

static void evaluate(const void *self, const asgd_param_t *w, size_t begin, size_t end, void *ws,
                     asgd_eval_sums_t *sums) {
    (void)ws;
    const sqhinge_t *s = self;
    for (size_t row = begin; row < end; row++) {
        float y = s->test->y[row], sc = score(s->test, row, w), gap = s->margin - y * sc;
        sums->loss_sum += gap > 0.0f ? (double)gap * gap : 0.0;
        sums->metric_sum += (sc >= 0.0f ? 1.0f : -1.0f) == y;
        sums->count++;
    }
}

static void predict(const void *self, const asgd_param_t *w, size_t begin, size_t end, void *ws, double *out) {
    (void)ws;
    const sqhinge_t *s = self;
    for (size_t row = begin; row < end; row++) out[row - begin] = score(s->test, row, w);
}

static void destroy(void *self) { free(self); }

static const asgd_model_ops_t sqhinge_ops = {
    .num_params = num_params,
    .loss_grad = loss_grad,
    .evaluate = evaluate,
    .predict = predict,
    .describe = describe,
    .flops_per_example = flops,
    .destroy = destroy,  // init_params: all zero, no workspace
};

static void *create(const asgd_data_t *train, const asgd_data_t *test, const void *opts, double l2, uint64_t seed,
                    char *err, size_t err_len) {
    (void)seed;
    if (test->sparse.dim > train->sparse.dim) {
        snprintf(err, err_len, "sqhinge: the test set has %zu features, the training set %zu", test->sparse.dim,
                 train->sparse.dim);
        return NULL;
    }
    sqhinge_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "sqhinge: out of memory");
        return NULL;
    }
    s->train = &train->sparse;
    s->test = &test->sparse;
    s->margin = (float)((const sqhinge_options_t *)opts)->margin;
    s->l2 = (float)l2;
    return s;
}

static void options_default(void *opts) { ((sqhinge_options_t *)opts)->margin = 1.0; }

static const asgd_model_flag_t sqhinge_flags[] = {
    {"margin", ASGD_FLAG_DOUBLE, offsetof(sqhinge_options_t, margin), "M",
     "sqhinge: the margin the loss asks of y (w.x + b) (default 1)", 0.01, 100},
};

static const asgd_model_def_t sqhinge_def = {
    .name = "sqhinge",
    .summary = "sparse linear classifier, squared hinge loss (an example model from outside asgd)",
    .data = ASGD_DATA_KIND_SPARSE,
    .metric = ASGD_METRIC_ACCURACY,
    .output = ASGD_OUTPUT_MARGIN,
    .grad_dense = 0,
    .default_lr = 0.1,
    .default_batch = 1,
    .default_l2 = 0.0,
    .default_data = "gen:sparse",
    .options_size = sizeof(sqhinge_options_t),
    .options_default = options_default,
    .n_flags = sizeof sqhinge_flags / sizeof sqhinge_flags[0],
    .flags = sqhinge_flags,
    .create = create,
    .ops = &sqhinge_ops,
};

int sqhinge_register(char *err, size_t err_len) { return asgd_model_register(&sqhinge_def, err, err_len); }
