// A sparse embedding of libsvm features feeding a small dense MLP: a model
// with a sparse part and a dense part, the case `--sync hybrid` is for.
//
//   z   = sum over the example's features f of x_f E[f]        (k)
//   h   = relu(W1 z + b1)                                       (H)
//   out = w2 . h + b2, logistic loss log(1 + exp(-y out)), y = -1/+1
//
// Parameters: E (dim, k) first — a step touches only the rows of its
// examples' features, so that block is the sparse part — then the dense part:
// W1 (H, k), b1 (H), w2 (H), b2. L2 (l2/2 |W|^2) on W1 and w2.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"
#include "engine/core/model_impl.h"
#include "engine/models/layer_widths.h"
#include "engine/models/model_registry.h"
#include "kernels/sparse_sgd.h"

typedef struct embmlp_model {
    model_t base;
    const sparse_dataset_t *train;
    const sparse_dataset_t *test;
    size_t dim, k, hidden;
    size_t w1, b1, w2, b2;  // offsets of the dense blocks
    float l2;
} embmlp_model_t;

typedef struct embmlp_ws {
    model_ws_header_t header;  // no parameter copy: w is read directly
    float *z, *h, *dh, *dz;  // (k), (H), (H), (k)
} embmlp_ws_t;

static const model_ops_t embmlp_ops;

static size_t embmlp_num_params(const model_t *m) { return ((const embmlp_model_t *)m)->b2 + 1; }

static void embmlp_describe(const model_t *m, char *out, size_t out_len) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    snprintf(out, out_len, "embmlp %zu features x %zu embedding -> %zu -> 1 (sparse %zu + dense %zu parameters), l2 %g",
             e->dim, e->k, e->hidden, e->dim * e->k, embmlp_num_params(m) - e->dim * e->k, (double)e->l2);
}

static double embmlp_flops(const model_t *m) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    double nnz = e->train->n ? (double)e->train->nnz / (double)e->train->n : 0.0;
    // Embedding sum and its gradient, then the two layers forward and backward.
    return 4.0 * nnz * (double)e->k + 6.0 * (double)(e->hidden * e->k) + 6.0 * (double)e->hidden;
}

static void embmlp_init(const model_t *m, param_t *w, uint64_t seed) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    rng_t r;
    rng_seed(&r, seed, 0x454d424dull);
    double sd_w1 = sqrt(2.0 / (double)e->k), sd_w2 = sqrt(1.0 / (double)e->hidden);
    for (size_t i = 0; i < e->dim * e->k; i++) param_set(&w[i], (float)(0.1 * rng_normal(&r)));
    for (size_t i = 0; i < e->hidden * e->k; i++) param_set(&w[e->w1 + i], (float)(sd_w1 * rng_normal(&r)));
    for (size_t i = 0; i < e->hidden; i++) {
        param_set(&w[e->b1 + i], 0.0f);
        param_set(&w[e->w2 + i], (float)(sd_w2 * rng_normal(&r)));
    }
    param_set(&w[e->b2], 0.0f);
}

static model_ws_t *embmlp_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    (void)max_batch;
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    embmlp_ws_t *ws = calloc(1, sizeof *ws);
    float *buf = ws ? malloc((2 * e->k + 2 * e->hidden) * sizeof *buf) : NULL;
    if (!buf) {
        free(ws);
        snprintf(err, err_len, "embmlp: allocating workspace: %s", strerror(errno));
        return NULL;
    }
    ws->header.ops = &embmlp_ops;
    ws->z = buf;
    ws->dz = buf + e->k;
    ws->h = buf + 2 * e->k;
    ws->dh = ws->h + e->hidden;
    return (model_ws_t *)ws;
}

static void embmlp_ws_destroy(model_ws_t *ws) {
    free(((embmlp_ws_t *)ws)->z);
    free(ws);
}

// The forward pass of one example: fills ws->z and ws->h, returns the score.
static float forward(const embmlp_model_t *e, const sparse_dataset_t *d, size_t row, const param_t *w,
                     embmlp_ws_t *ws) {
    size_t k = e->k, H = e->hidden;
    for (size_t i = 0; i < k; i++) ws->z[i] = 0.0f;
    for (size_t p = d->row_ptr[row]; p < d->row_ptr[row + 1]; p++) {
        const param_t *emb = &w[(size_t)d->col[p] * k];
        float x = d->val[p];
        for (size_t i = 0; i < k; i++) ws->z[i] += x * param_get(&emb[i]);
    }
    float out = param_get(&w[e->b2]);
    for (size_t j = 0; j < H; j++) {
        float a = param_get(&w[e->b1 + j]);
        const param_t *row_w = &w[e->w1 + j * k];
        for (size_t i = 0; i < k; i++) a += param_get(&row_w[i]) * ws->z[i];
        ws->h[j] = a > 0.0f ? a : 0.0f;
        out += param_get(&w[e->w2 + j]) * ws->h[j];
    }
    return out;
}

static double embmlp_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                               model_ws_t *wsp) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    embmlp_ws_t *ws = (embmlp_ws_t *)wsp;
    const sparse_dataset_t *d = e->train;
    size_t k = e->k, H = e->hidden;
    double inv = 1.0 / (double)count, total = 0.0;
    for (size_t n = 0; n < count; n++) {
        size_t row = idx[n];
        double dout;
        total += linear_example_loss(0, d->y[row], forward(e, d, row, w, ws), &dout);
        float c = (float)(dout * inv);  // d loss / d out, this example's share of the mean
        grad_add(g, (uint32_t)e->b2, c);
        for (size_t j = 0; j < H; j++) {
            grad_add(g, (uint32_t)(e->w2 + j), c * ws->h[j]);
            ws->dh[j] = ws->h[j] > 0.0f ? c * param_get(&w[e->w2 + j]) : 0.0f;
        }
        for (size_t i = 0; i < k; i++) ws->dz[i] = 0.0f;
        for (size_t j = 0; j < H; j++) {
            float dh = ws->dh[j];
            grad_add(g, (uint32_t)(e->b1 + j), dh);
            const param_t *row_w = &w[e->w1 + j * k];
            for (size_t i = 0; i < k; i++) {
                grad_add(g, (uint32_t)(e->w1 + j * k + i), dh * ws->z[i]);
                ws->dz[i] += dh * param_get(&row_w[i]);
            }
        }
        for (size_t p = d->row_ptr[row]; p < d->row_ptr[row + 1]; p++) {
            size_t base = (size_t)d->col[p] * k;
            float x = d->val[p];
            for (size_t i = 0; i < k; i++) grad_add(g, (uint32_t)(base + i), x * ws->dz[i]);
        }
    }
    double loss = total * inv;
    if (e->l2 > 0.0f) {
        for (size_t i = 0; i < H * k; i++) {
            float v = param_get(&w[e->w1 + i]);
            grad_add(g, (uint32_t)(e->w1 + i), e->l2 * v);
            loss += 0.5 * e->l2 * (double)v * v;
        }
        for (size_t j = 0; j < H; j++) {
            float v = param_get(&w[e->w2 + j]);
            grad_add(g, (uint32_t)(e->w2 + j), e->l2 * v);
            loss += 0.5 * e->l2 * (double)v * v;
        }
    }
    return loss;
}

static void embmlp_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *wsp,
                            eval_sums_t *sums) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    embmlp_ws_t *ws = (embmlp_ws_t *)wsp;
    const sparse_dataset_t *d = e->test;
    for (size_t row = begin; row < end; row++) {
        double dout, out = forward(e, d, row, w, ws);
        sums->loss_sum += linear_example_loss(0, d->y[row], out, &dout);
        sums->metric_sum += (out >= 0.0 ? 1.0f : -1.0f) == d->y[row];
        sums->count++;
    }
}

static void embmlp_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *wsp, double *out) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    for (size_t row = begin; row < end; row++) out[row - begin] = forward(e, e->test, row, w, (embmlp_ws_t *)wsp);
}

static size_t embmlp_sparse_keys(const model_t *m, int of_test, const uint32_t *idx, size_t count, uint8_t *mark,
                                 uint32_t *keys) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    return model_feature_rows_keys(of_test ? e->test : e->train, idx, count, e->k, e->dim, mark, keys);
}

static void embmlp_destroy(model_t *m) { free(m); }

static void embmlp_layout(const model_t *m, model_layout_t *out) {
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    out->kind = MODEL_KIND_EMBMLP;
    out->l2 = e->l2;
    out->dim = e->dim;
    out->rank = e->k;
    out->sparse_train = e->train;
}

static const model_ops_t embmlp_ops = {
    .describe = embmlp_describe,
    .num_params = embmlp_num_params,
    .flops_per_example = embmlp_flops,
    .init_params = embmlp_init,
    .ws_new = embmlp_ws_new,
    .ws_destroy = embmlp_ws_destroy,
    .loss_grad = embmlp_loss_grad,
    .evaluate = embmlp_evaluate,
    .predict = embmlp_predict,
    .destroy = embmlp_destroy,
    .layout = embmlp_layout,
    .sparse_keys = embmlp_sparse_keys,
};

model_t *model_new_embmlp(const sparse_dataset_t *train, const sparse_dataset_t *test, size_t embed_dim, size_t hidden,
                          double l2, char *err, size_t err_len) {
    if (!train || train->n == 0) {
        snprintf(err, err_len, "embmlp: the training set is empty");
        return NULL;
    }
    if (train->cls && train->n_classes > 2) {
        char shown[160];
        dataset_labels_text(train->labels, train->n_classes, shown, sizeof shown);
        snprintf(err, err_len,
                 "embmlp: the training data has %zu labels (%s); a binary classifier takes two "
                 "(softmax and mlp take more)",
                 train->n_classes, shown);
        return NULL;
    }
    if (test && test->dim > train->dim) {
        snprintf(err, err_len, "embmlp: test set has %zu features but the training set only %zu", test->dim,
                 train->dim);
        return NULL;
    }
    if (embed_dim == 0 || hidden == 0 || embed_dim > 4096 || hidden > 4096) {
        snprintf(err, err_len, "embmlp: --embed-dim %zu and hidden width %zu must be 1..4096", embed_dim, hidden);
        return NULL;
    }
    size_t n = train->dim * embed_dim + hidden * embed_dim + 2 * hidden + 1;
    if (train->dim > UINT32_MAX / embed_dim || n >= UINT32_MAX) {
        snprintf(err, err_len, "embmlp: %zu features x %zu exceed the 32-bit parameter index range", train->dim,
                 embed_dim);
        return NULL;
    }
    embmlp_model_t *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_len, "embmlp: allocating: %s", strerror(errno));
        return NULL;
    }
    e->base.ops = &embmlp_ops;
    e->base.name = "embmlp";
    e->base.num_train = train->n;
    e->base.num_test = test ? test->n : 0;
    e->base.grad_dense = 0;
    e->base.metric = METRIC_KIND_ACCURACY;
    e->base.sparse_params = train->dim * embed_dim;
    e->train = train;
    e->test = test;
    e->dim = train->dim;
    e->k = embed_dim;
    e->hidden = hidden;
    e->w1 = train->dim * embed_dim;
    e->b1 = e->w1 + hidden * embed_dim;
    e->w2 = e->b1 + hidden;
    e->b2 = e->w2 + hidden;
    e->l2 = (float)l2;
    return &e->base;
}

// ---- descriptor ----

typedef struct embmlp_options {
    const char *hidden;  // --hidden: one width
    size_t embed_dim;  // --embed-dim
    size_t width;  // parsed --hidden
} embmlp_options_t;
_Static_assert(sizeof(embmlp_options_t) <= MODEL_OPTIONS_BYTES, "embmlp options");

static void embmlp_options_default(void *opts) {
    embmlp_options_t *o = opts;
    o->hidden = "32";
    o->embed_dim = 8;
}

static void embmlp_flags(void *opts, flag_spec_t *specs) {
    embmlp_options_t *o = opts;
    specs[0] =
        (flag_spec_t){"hidden", FLAG_TYPE_STRING, &o->hidden, "W", "the one hidden layer's width", 0, 0, NULL, 0};
    specs[1] =
        (flag_spec_t){"embed-dim", FLAG_TYPE_SIZE, &o->embed_dim, "K", "embedding width per feature", 1, 4096, NULL, 0};
}

static int embmlp_options_finish(void *opts, const flag_spec_t *specs, char *err, size_t err_len) {
    (void)specs;
    embmlp_options_t *o = opts;
    size_t widths[MODEL_SHAPE_MAX_HIDDEN], n = 0;
    if (model_parse_widths("--hidden", o->hidden, widths, MODEL_SHAPE_MAX_HIDDEN, &n, err, err_len) != 0 || n != 1) {
        snprintf(err, err_len, "--hidden '%s': embmlp has one hidden layer; give one width, e.g. --hidden 32",
                 o->hidden);
        return -1;
    }
    o->width = widths[0];
    return 0;
}

static model_t *embmlp_create(const void *train, const void *test, const void *opts, double l2, uint64_t seed,
                              char *err, size_t err_len) {
    (void)seed;
    const embmlp_options_t *o = opts;
    return model_new_embmlp(train, test, o->embed_dim, o->width, l2, err, err_len);
}

static int embmlp_shape_of(const model_t *m, model_shape_t *out, char *err, size_t err_len) {
    (void)err, (void)err_len;
    const embmlp_model_t *e = (const embmlp_model_t *)m;
    out->dim = e->dim;
    out->embed_dim = e->k;
    out->n_hidden = 1;
    out->hidden[0] = e->hidden;
    out->classes = 2;
    sparse_dataset_binary_labels(e->train, out->labels);
    out->label_text = sparse_dataset_binary_label_text(e->train);
    return 0;
}

static uint64_t embmlp_shape_params(const model_shape_t *s) {
    return s->n_hidden == 1 ? s->dim * s->embed_dim + s->hidden[0] * s->embed_dim + 2 * s->hidden[0] + 1 : 0;
}

static void embmlp_options_of_shape(const model_shape_t *s, void *opts) {
    embmlp_options_t *o = opts;
    o->embed_dim = s->embed_dim;
    o->width = s->hidden[0];
}

const model_descriptor_t model_embmlp_descriptor = {
    .name = "embmlp",
    .summary =
        "sparse feature embedding into a one-hidden-layer MLP, logistic loss, labels -1/+1 "
        "(a sparse and a dense part: --sync hybrid)",
    .data = DATA_KIND_SPARSE,
    .metric = METRIC_KIND_ACCURACY,
    .output = MODEL_OUTPUT_LOGISTIC,
    .defaults = {.lr = 0.5, .batch = 16, .l2 = 0.0, .data = "gen:sparse"},
    .options_size = sizeof(embmlp_options_t),
    .n_flags = 2,
    .options_default = embmlp_options_default,
    .flags = embmlp_flags,
    .options_finish = embmlp_options_finish,
    .create = embmlp_create,
    .gpu = 0,
    .split = 1,
    .shape_of = embmlp_shape_of,
    .shape_params = embmlp_shape_params,
    .options_of_shape = embmlp_options_of_shape,
};
