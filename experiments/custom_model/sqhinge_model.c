// A model defined outside asgd: the squared hinge loss (an L2-SVM) on sparse
// data, with its own flag --margin. It fills asgd's model table
// (model_ops_t) and registers a descriptor, which is all asgd needs to train
// it on threads, in a distributed run, and to list it in --help.
#include "sqhinge_model.h"

#include <asgd/asgd.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct sqhinge_options {
    double margin;
} sqhinge_options_t;

typedef struct sqhinge {
    struct model base;  // first: asgd sees a model_t
    const sparse_dataset_t *train, *test;
    float margin, l2;
} sqhinge_t;

static float score(const sqhinge_t *s, const sparse_dataset_t *d, size_t row, const param_t *w) {
    float dot = param_get(&w[d->dim]);
    for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) dot += param_get(&w[d->col[k]]) * d->val[k];
    return dot;
}

static void describe(const model_t *m, char *out, size_t out_len) {
    const sqhinge_t *s = (const sqhinge_t *)m;
    snprintf(out, out_len, "sqhinge %zu features, margin %g", s->train->dim, (double)s->margin);
}
static size_t num_params(const model_t *m) { return ((const sqhinge_t *)m)->train->dim + 1; }
static double flops(const model_t *m) {
    const sqhinge_t *s = (const sqhinge_t *)m;
    return s->train->n ? 4.0 * (double)s->train->nnz / (double)s->train->n : 0.0;
}
static void init_params(const model_t *m, param_t *w, uint64_t seed) {
    (void)seed;
    for (size_t i = 0; i < num_params(m); i++) param_set(&w[i], 0.0f);
}

// The workspace holds nothing but the header asgd reads.
static model_ws_t *ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    (void)max_batch;
    model_ws_header_t *h = calloc(1, sizeof *h);
    if (!h) snprintf(err, err_len, "sqhinge: out of memory");
    else h->ops = m->ops;
    return (model_ws_t *)h;
}
static void ws_destroy(model_ws_t *ws) { free(ws); }

static double loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                        model_ws_t *ws) {
    (void)ws;
    const sqhinge_t *s = (const sqhinge_t *)m;
    const sparse_dataset_t *d = s->train;
    double loss = 0.0;
    float scale = 1.0f / (float)count;
    for (size_t i = 0; i < count; i++) {
        size_t row = idx[i];
        float y = d->y[row], gap = s->margin - y * score(s, d, row, w);
        if (gap <= 0.0f) continue;
        loss += (double)gap * gap;
        float coef = -2.0f * gap * y * scale;  // d/dw of gap^2, averaged over the batch
        for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) {
            uint32_t j = d->col[k];
            grad_add(g, j, coef * d->val[k] + s->l2 * scale * param_get(&w[j]));
        }
        grad_add(g, (uint32_t)d->dim, coef);
    }
    return loss / (double)count;
}

static void evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws,
                     eval_sums_t *sums) {
    (void)ws;
    const sqhinge_t *s = (const sqhinge_t *)m;
    for (size_t row = begin; row < end; row++) {
        float y = s->test->y[row], sc = score(s, s->test, row, w), gap = s->margin - y * sc;
        sums->loss_sum += gap > 0.0f ? (double)gap * gap : 0.0;
        sums->metric_sum += (sc >= 0.0f ? 1.0f : -1.0f) == y;
        sums->count++;
    }
}

static void predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    (void)ws;
    const sqhinge_t *s = (const sqhinge_t *)m;
    for (size_t row = begin; row < end; row++) out[row - begin] = score(s, s->test, row, w);
}

static void destroy(model_t *m) { free(m); }

static const model_ops_t sqhinge_ops = {
    .describe = describe,
    .num_params = num_params,
    .flops_per_example = flops,
    .init_params = init_params,
    .ws_new = ws_new,
    .ws_destroy = ws_destroy,
    .loss_grad = loss_grad,
    .evaluate = evaluate,
    .predict = predict,
    .destroy = destroy,
};

static model_t *create(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                       size_t err_len) {
    (void)seed;
    const sparse_dataset_t *tr = train, *te = test;
    if (te->dim > tr->dim) {
        snprintf(err, err_len, "sqhinge: the test set has %zu features, the training set %zu", te->dim, tr->dim);
        return NULL;
    }
    sqhinge_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "sqhinge: out of memory");
        return NULL;
    }
    s->base = (struct model){.ops = &sqhinge_ops, .name = "sqhinge", .num_train = tr->n, .num_test = te->n,
                             .grad_dense = 0, .metric = METRIC_KIND_ACCURACY};
    s->train = tr;
    s->test = te;
    s->margin = (float)((const sqhinge_options_t *)opts)->margin;
    s->l2 = (float)l2;
    return &s->base;
}

static void options_default(void *opts) { ((sqhinge_options_t *)opts)->margin = 1.0; }

static void flags(void *opts, flag_spec_t *specs) {
    specs[0] = (flag_spec_t){"margin", FLAG_TYPE_DOUBLE, &((sqhinge_options_t *)opts)->margin, "M",
                             "sqhinge: the margin the loss asks of y (w.x + b) (default 1)", 0.01, 100, NULL, 0};
}

static const model_descriptor_t sqhinge_descriptor = {
    .name = "sqhinge",
    .summary = "sparse linear classifier, squared hinge loss (an example model from outside asgd)",
    .data = DATA_KIND_SPARSE,
    .metric = METRIC_KIND_ACCURACY,
    .output = MODEL_OUTPUT_MARGIN,
    .defaults = {.lr = 0.1, .batch = 1, .l2 = 0.0, .data = "gen:sparse"},
    .options_size = sizeof(sqhinge_options_t),
    .n_flags = 1,
    .options_default = options_default,
    .flags = flags,
    .create = create,
};

int sqhinge_register(char *err, size_t err_len) { return model_registry_add(&sqhinge_descriptor, err, err_len); }
