// Sparse linear classifiers (logistic regression, hinge-loss SVM): Hogwild!'s case.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"
#include "engine/core/model_impl.h"
#include "engine/models/model_registry.h"
#include "kernels/sparse_sgd.h"

typedef struct linear_model {
    model_t base;
    linear_loss_t loss;
    const sparse_dataset_t *train;
    const sparse_dataset_t *test;
    size_t dim;  // features; parameter dim is the bias
    float l2;
} linear_model_t;

typedef struct linear_ws {
    model_ws_header_t header;  // no parameter copy: w is read directly
} linear_ws_t;

static const model_ops_t linear_ops;

static size_t linear_num_params(const model_t *m) { return ((const linear_model_t *)m)->dim + 1; }

static void linear_describe(const model_t *m, char *out, size_t out_len) {
    const linear_model_t *lm = (const linear_model_t *)m;
    snprintf(out, out_len, "%s %zu features, l2 %g", m->name, lm->dim, (double)lm->l2);
}

static double linear_flops(const model_t *m) {
    const linear_model_t *lm = (const linear_model_t *)m;
    double nnz = lm->train->n ? (double)lm->train->nnz / (double)lm->train->n : 0.0;
    return 4.0 * nnz;  // dot product, then gradient scatter: 2 flops per non-zero each
}

static void linear_init(const model_t *m, param_t *w, uint64_t seed) {
    (void)seed;  // a convex model starts at zero, the usual choice for sparse logistic regression
    size_t n = linear_num_params(m);
    for (size_t i = 0; i < n; i++) param_set(&w[i], 0.0f);
}

static void linear_init_range(const model_t *m, uint64_t seed, size_t begin, size_t end, float *out) {
    (void)m;
    (void)seed;
    memset(out, 0, (end - begin) * sizeof *out);  // linear_init's zeros
}

static model_ws_t *linear_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    (void)m;
    (void)max_batch;
    linear_ws_t *ws = malloc(sizeof *ws);
    if (!ws) {
        snprintf(err, err_len, "linear model: allocating workspace: %s", strerror(errno));
        return NULL;
    }
    ws->header.ops = &linear_ops;
    ws->header.param_copy = NULL;
    ws->header.copy_current = 0;
    return (model_ws_t *)ws;
}

static void linear_ws_destroy(model_ws_t *ws) { free(ws); }

// The score w.x + bias. A float sum over a few dozen products is as accurate as
// the float parameters it reads, and keeps the hot loop in single precision.
static float margin_of(const linear_model_t *lm, const sparse_dataset_t *d, size_t row, const param_t *w) {
    float dot = param_get(&w[lm->dim]);
    for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) dot += param_get(&w[d->col[k]]) * d->val[k];
    return dot;
}

static double linear_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                               model_ws_t *ws) {
    (void)ws;
    const linear_model_t *lm = (const linear_model_t *)m;
    const sparse_dataset_t *d = lm->train;
    double inv = 1.0 / (double)count, total = 0.0;
    for (size_t e = 0; e < count; e++) {
        size_t row = idx[e];
        double dscore;
        total += linear_example_loss(lm->loss == LINEAR_LOSS_HINGE, d->y[row], margin_of(lm, d, row, w), &dscore);
        float coef = (float)(dscore * inv);
        if (coef == 0.0f) continue;
        for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) grad_add(g, d->col[k], coef * d->val[k]);
        grad_add(g, (uint32_t)lm->dim, coef);
    }
    double loss = total * inv;
    if (lm->l2 > 0.0f) {
        // Lazy L2 over the features this minibatch touched (never the bias).
        for (size_t e = 0; e < count; e++) {
            size_t row = idx[e];
            for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) {
                uint32_t j = d->col[k];
                if (g->is_touched[j] == 2) continue;  // already regularised in this minibatch
                float wj = param_get(&w[j]);
                grad_add(g, j, lm->l2 * wj);
                g->is_touched[j] = 2;
                loss += 0.5 * lm->l2 * (double)wj * wj;
            }
        }
        for (size_t k = 0; k < g->n_touched; k++) g->is_touched[g->touched[k]] = 1;
    }
    return loss;
}

// The same arithmetic as linear_loss_grad on one example followed by
// w[j] -= lr * g[j]: every coordinate gets the same float expression, the data
// term plus the lazy L2 term (each feature occurs once in an example).
static double linear_sgd_step_one(const model_t *m, param_t *w, uint32_t example, float lr) {
    const linear_model_t *lm = (const linear_model_t *)m;
    const sparse_dataset_t *d = lm->train;
    double dscore;
    double loss =
        linear_example_loss(lm->loss == LINEAR_LOSS_HINGE, d->y[example], margin_of(lm, d, example, w), &dscore);
    float coef = (float)dscore, l2 = lm->l2;
    if (coef == 0.0f && l2 == 0.0f) return loss;
    for (size_t k = d->row_ptr[example]; k < d->row_ptr[example + 1]; k++) {
        param_t *wj = &w[d->col[k]];
        float value = param_get(wj);
        float g = coef * d->val[k];
        if (l2 > 0.0f) {
            g += l2 * value;
            loss += 0.5 * l2 * (double)value * value;
        }
        param_set(wj, value - lr * g);
    }
    if (coef != 0.0f) param_set(&w[lm->dim], param_get(&w[lm->dim]) - lr * coef);
    return loss;
}

// linear_loss_grad on one example, as pairs: the data term of each feature
// (0 + coef x, the arithmetic of a clear gradient) and of the bias, then the
// lazy L2 term added to each feature's; with a zero coefficient only the L2
// terms, and nothing at all without L2.
static size_t linear_grad_one_pairs(const model_t *m, const param_t *w, uint32_t example, uint32_t *idx, float *val,
                                    size_t cap, double *loss) {
    const linear_model_t *lm = (const linear_model_t *)m;
    const sparse_dataset_t *d = lm->train;
    double dscore;
    *loss = linear_example_loss(lm->loss == LINEAR_LOSS_HINGE, d->y[example], margin_of(lm, d, example, w), &dscore);
    float coef = (float)dscore, l2 = lm->l2;
    size_t begin = d->row_ptr[example], nnz = d->row_ptr[example + 1] - begin;
    if (coef == 0.0f && l2 == 0.0f) return 0;
    size_t n = nnz + (coef != 0.0f);
    if (n > cap) return n;
    for (size_t k = 0; k < nnz; k++) {
        uint32_t j = d->col[begin + k];
        float g = coef != 0.0f ? 0.0f + coef * d->val[begin + k] : 0.0f;
        if (l2 > 0.0f) {
            float wj = param_get(&w[j]);
            g += l2 * wj;
            *loss += 0.5 * l2 * (double)wj * wj;
        }
        idx[k] = j;
        val[k] = g;
    }
    if (coef != 0.0f) {
        idx[nnz] = (uint32_t)lm->dim;
        val[nnz] = 0.0f + coef;
    }
    return n;
}

// Without L2 an example's gradient is dscore * (x, 1): linear_grad_one_pairs's
// values are 0 + scale * x_j and 0 + scale, and a zero scale writes none.
static int linear_has_grad_one_scale(const model_t *m) { return ((const linear_model_t *)m)->l2 == 0.0f; }

static double linear_grad_one_scale(const model_t *m, const param_t *w, uint32_t example, float *scale) {
    const linear_model_t *lm = (const linear_model_t *)m;
    const sparse_dataset_t *d = lm->train;
    double dscore;
    double loss =
        linear_example_loss(lm->loss == LINEAR_LOSS_HINGE, d->y[example], margin_of(lm, d, example, w), &dscore);
    *scale = (float)dscore;
    return loss;
}

static void linear_sgd_apply_one_scale(const model_t *m, param_t *w, uint32_t example, float scale, float lr) {
    const linear_model_t *lm = (const linear_model_t *)m;
    if (scale == 0.0f) return;
    const sparse_dataset_t *d = lm->train;
    const uint32_t *col = d->col;
    const float *val = d->val;
    for (size_t k = d->row_ptr[example], end = d->row_ptr[example + 1]; k < end; k++) {
        param_t *wj = &w[col[k]];
        param_set(wj, param_get(wj) - lr * (0.0f + scale * val[k]));
    }
    param_t *bias = &w[lm->dim];
    param_set(bias, param_get(bias) - lr * (0.0f + scale));
}

static void linear_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws,
                            eval_sums_t *sums) {
    (void)ws;
    const linear_model_t *lm = (const linear_model_t *)m;
    const sparse_dataset_t *d = lm->test;
    for (size_t row = begin; row < end; row++) {
        double dscore, score = margin_of(lm, d, row, w);
        sums->loss_sum += linear_example_loss(lm->loss == LINEAR_LOSS_HINGE, d->y[row], score, &dscore);
        sums->metric_sum += (score >= 0.0 ? 1.0f : -1.0f) == d->y[row];
        sums->count++;
    }
}

static void linear_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    (void)ws;
    const linear_model_t *lm = (const linear_model_t *)m;
    for (size_t row = begin; row < end; row++) out[row - begin] = margin_of(lm, lm->test, row, w);
}

static void linear_destroy(model_t *m) { free(m); }

static void linear_layout(const model_t *m, model_layout_t *out) {
    const linear_model_t *lm = (const linear_model_t *)m;
    out->kind = MODEL_KIND_LINEAR;
    out->l2 = lm->l2;
    out->loss = lm->loss;
    out->dim = lm->dim;
    out->sparse_train = lm->train;
}

static size_t linear_sparse_keys(const model_t *m, int of_test, const uint32_t *idx, size_t count, uint8_t *mark,
                                 uint32_t *keys) {
    const linear_model_t *lm = (const linear_model_t *)m;
    return model_feature_rows_keys(of_test ? lm->test : lm->train, idx, count, 1, lm->dim, mark, keys);
}

static const model_ops_t linear_ops = {
    .describe = linear_describe,
    .num_params = linear_num_params,
    .flops_per_example = linear_flops,
    .init_params = linear_init,
    .init_range = linear_init_range,
    .ws_new = linear_ws_new,
    .ws_destroy = linear_ws_destroy,
    .loss_grad = linear_loss_grad,
    .evaluate = linear_evaluate,
    .predict = linear_predict,
    .destroy = linear_destroy,
    .layout = linear_layout,
    .sgd_step_one = linear_sgd_step_one,
    .grad_one_pairs = linear_grad_one_pairs,
    .has_grad_one_scale = linear_has_grad_one_scale,
    .grad_one_scale = linear_grad_one_scale,
    .sgd_apply_one_scale = linear_sgd_apply_one_scale,
    .sparse_keys = linear_sparse_keys,
};

model_t *model_new_linear(linear_loss_t loss, const sparse_dataset_t *train, const sparse_dataset_t *test, double l2,
                          char *err, size_t err_len) {
    if (!train || train->n == 0) {
        snprintf(err, err_len, "linear model: the training set is empty");
        return NULL;
    }
    if (train->cls && train->n_classes > 2) {
        char shown[160];
        dataset_labels_text(train->labels, train->n_classes, shown, sizeof shown);
        snprintf(err, err_len,
                 "linear model: the training data has %zu labels (%s); a binary classifier takes two "
                 "(softmax and mlp take more)",
                 train->n_classes, shown);
        return NULL;
    }
    if (test && test->dim > train->dim) {
        snprintf(err, err_len, "linear model: test set has %zu features but the training set only %zu", test->dim,
                 train->dim);
        return NULL;
    }
    if (train->dim >= UINT32_MAX) {
        snprintf(err, err_len, "linear model: %zu features exceed the 32-bit index range", train->dim);
        return NULL;
    }
    linear_model_t *lm = calloc(1, sizeof *lm);
    if (!lm) {
        snprintf(err, err_len, "linear model: allocating: %s", strerror(errno));
        return NULL;
    }
    lm->base.ops = &linear_ops;
    lm->base.name = loss == LINEAR_LOSS_HINGE ? "svm" : "logreg";
    lm->base.num_train = train->n;
    lm->base.num_test = test ? test->n : 0;
    lm->base.grad_dense = 0;
    lm->base.metric = METRIC_KIND_ACCURACY;
    lm->loss = loss;
    lm->train = train;
    lm->test = test;
    lm->dim = train->dim;
    lm->base.sparse_params = train->dim;  // the weights; the bias is read by every step
    lm->l2 = (float)l2;
    return &lm->base;
}

// ---- descriptors: logreg and svm ----

static model_t *logreg_create(const void *train, const void *test, const void *opts, double l2, uint64_t seed,
                              char *err, size_t err_len) {
    (void)opts, (void)seed;
    return model_new_linear(LINEAR_LOSS_LOGISTIC, train, test, l2, err, err_len);
}

static model_t *svm_create(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                           size_t err_len) {
    (void)opts, (void)seed;
    return model_new_linear(LINEAR_LOSS_HINGE, train, test, l2, err, err_len);
}

static int linear_shape_of(const model_t *m, model_shape_t *out, char *err, size_t err_len) {
    (void)err, (void)err_len;
    out->dim = ((const linear_model_t *)m)->dim;
    out->classes = 2;
    sparse_dataset_binary_labels(((const linear_model_t *)m)->train, out->labels);
    out->label_text = sparse_dataset_binary_label_text(((const linear_model_t *)m)->train);
    return 0;
}

static uint64_t linear_shape_params(const model_shape_t *s) { return s->dim + 1; }

static void linear_options_of_shape(const model_shape_t *s, void *opts) { (void)s, (void)opts; }

#define LINEAR_DESCRIPTOR(NAME, SUMMARY, OUTPUT, CREATE)                                                               \
    {                                                                                                                  \
        .name = NAME, .summary = SUMMARY, .data = DATA_KIND_SPARSE, .metric = METRIC_KIND_ACCURACY, .output = OUTPUT,  \
        .defaults = {.lr = 0.5, .batch = 1, .l2 = 0.0, .data = "gen:sparse"}, .create = CREATE, .gpu = 1,              \
        .shape_of = linear_shape_of, .shape_params = linear_shape_params, .options_of_shape = linear_options_of_shape, \
    }

const model_descriptor_t model_logreg_descriptor = LINEAR_DESCRIPTOR(
    "logreg", "logistic regression on sparse features, labels -1/+1 (lazy L2)", MODEL_OUTPUT_LOGISTIC, logreg_create);
const model_descriptor_t model_svm_descriptor = LINEAR_DESCRIPTOR(
    "svm", "linear SVM (hinge loss) on sparse features, labels -1/+1 (lazy L2)", MODEL_OUTPUT_MARGIN, svm_create);
