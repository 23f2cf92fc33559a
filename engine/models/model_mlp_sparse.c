// softmax and mlp over sparse input (libsvm, CSV): the first layer is a
// sparse-dense product over each example's non-zeros, so a 100,000-feature
// input never becomes a dense row. Its weights are stored one row of
// width[1] per feature (W0 (dim, width[1]) row-major, then b0), so a step
// reads and writes only the rows of the features its examples hold (Hogwild!:
// sparse updates of W0, dense ones for the rest). The layers above are the
// dense model's (model_mlp.c): W_l (width[l+1], width[l]) and bias_l, through
// the same kernels. L2 applies to W0's rows a step touches (lazily, as the
// linear models do) and to every W_l above.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"
#include "engine/core/model_impl.h"
#include "kernels/dense.h"

#define SMLP_TILE_FLOATS 16384  // gradient block handed to an apply callback

typedef struct smlp_model {
    model_t base;
    const sparse_dataset_t *train;
    const sparse_dataset_t *test;
    size_t n_layers;  // weight layers (hidden layers + 1)
    size_t width[MODEL_MAX_LAYERS + 1];  // width[0] = features, width[n_layers] = classes
    size_t w_offset[MODEL_MAX_LAYERS];  // W0 (dim, width[1]) at 0; W_l (width[l+1], width[l]) above
    size_t b_offset[MODEL_MAX_LAYERS];
    size_t dense_start;  // b0's offset: [dense_start, num_params) is read whole every step
    size_t num_params;
    size_t max_row_nnz;  // the training set's most non-zeros in one example
    float l2;
} smlp_model_t;

// One non-zero of a minibatch, for gathering W0's gradient by feature.
typedef struct smlp_entry {
    uint32_t col, row;
    float val;
} smlp_entry_t;

typedef struct smlp_ws {
    model_ws_header_t header;  // no parameter copy: W0's rows are read from w as needed
    size_t rows;  // capacity in examples
    size_t entry_cap;  // capacity of entries (training minibatches' non-zeros)
    float *dense;  // (num_params - dense_start) this step's copy of b0 and the layers above
    float *act[MODEL_MAX_LAYERS + 1];  // act[0] unused (the input stays sparse); act[l] (rows, width[l])
    float *delta[MODEL_MAX_LAYERS + 1];
    int32_t *labels;  // (rows)
    float *tile;  // (max(SMLP_TILE_FLOATS, width[1])) one block of a gradient
    smlp_entry_t *entries;  // (entry_cap)
} smlp_ws_t;

static const model_ops_t smlp_ops;

#define DENSE_AT(mm, ws, offset) ((ws)->dense + ((offset) - (mm)->dense_start))

static size_t smlp_num_params(const model_t *m) { return ((const smlp_model_t *)m)->num_params; }

static void smlp_describe(const model_t *m, char *out, size_t out_len) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    int at = snprintf(out, out_len, "%s sparse ", m->name);
    for (size_t l = 0; l <= mm->n_layers && at > 0 && (size_t)at < out_len; l++)
        at += snprintf(out + at, out_len - at, l ? "-%zu" : "%zu", mm->width[l]);
    if (at > 0 && (size_t)at < out_len) snprintf(out + at, out_len - at, " (%zu params)", mm->num_params);
}

static double smlp_flops(const model_t *m) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    const sparse_dataset_t *d = mm->train;
    double nnz = d->n ? (double)d->nnz / (double)d->n : 0.0;
    double flops = 4.0 * nnz * (double)mm->width[1];  // the sparse product and W0's gradient
    for (size_t l = 1; l < mm->n_layers; l++) flops += 6.0 * (double)mm->width[l] * (double)mm->width[l + 1];
    return flops;
}

static void smlp_init(const model_t *m, param_t *w, uint64_t seed) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    rng_t rng;
    rng_seed(&rng, seed, 0x534d4c50);  // "SMLP"
    for (size_t l = 0; l < mm->n_layers; l++) {
        // He initialisation over the layer's fan-in (for W0: every feature).
        double std = sqrt(2.0 / (double)mm->width[l]);
        size_t n = mm->width[l] * mm->width[l + 1];
        for (size_t i = 0; i < n; i++) param_set(&w[mm->w_offset[l] + i], (float)(std * rng_normal(&rng)));
        for (size_t i = 0; i < mm->width[l + 1]; i++) param_set(&w[mm->b_offset[l] + i], 0.0f);
    }
}

static void smlp_ws_destroy(model_ws_t *p) {
    smlp_ws_t *ws = (smlp_ws_t *)p;
    if (!ws) return;
    free(ws->dense);
    for (size_t l = 0; l <= MODEL_MAX_LAYERS; l++) {
        free(ws->act[l]);
        free(ws->delta[l]);
    }
    free(ws->labels);
    free(ws->tile);
    free(ws->entries);
    free(ws);
}

static model_ws_t *smlp_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    smlp_ws_t *ws = calloc(1, sizeof *ws);
    int ok = ws != NULL;
    if (ok) {
        ws->header.ops = &smlp_ops;
        ws->rows = max_batch > MODEL_EVAL_ROWS ? max_batch : MODEL_EVAL_ROWS;
        ws->entry_cap = (max_batch ? max_batch : 1) * (mm->max_row_nnz ? mm->max_row_nnz : 1);
        size_t tile = SMLP_TILE_FLOATS > mm->width[1] ? SMLP_TILE_FLOATS : mm->width[1];
        ws->dense = malloc((mm->num_params - mm->dense_start) * sizeof *ws->dense);
        ws->labels = malloc(ws->rows * sizeof *ws->labels);
        ws->tile = malloc(tile * sizeof *ws->tile);
        ws->entries = malloc(ws->entry_cap * sizeof *ws->entries);
        ok = ws->dense && ws->labels && ws->tile && ws->entries;
        for (size_t l = 1; ok && l <= mm->n_layers; l++) {
            ws->act[l] = malloc(ws->rows * mm->width[l] * sizeof(float));
            ws->delta[l] = malloc(ws->rows * mm->width[l] * sizeof(float));
            ok = ws->act[l] && ws->delta[l];
        }
    }
    if (!ok) {
        snprintf(err, err_len, "%s: allocating workspace for %zu rows: %s", m->name, max_batch, strerror(errno));
        smlp_ws_destroy((model_ws_t *)ws);
        return NULL;
    }
    return (model_ws_t *)ws;
}

// Forward pass over examples rows_of[0..rows) of d; leaves the logits in
// ws->act[n_layers]. ws->dense must hold the current dense parameters.
static void smlp_forward(const smlp_model_t *mm, const param_t *w, const sparse_dataset_t *d, const uint32_t *idx,
                         size_t first, int rows, smlp_ws_t *ws) {
    size_t h = mm->width[1];
    const float *b0 = DENSE_AT(mm, ws, mm->b_offset[0]);
    for (int r = 0; r < rows; r++) {
        size_t row = idx ? idx[r] : first + (size_t)r;
        float *z = ws->act[1] + (size_t)r * h;
        memcpy(z, b0, h * sizeof *z);
        for (size_t k = d->row_ptr[row]; k < d->row_ptr[row + 1]; k++) {
            float v = d->val[k];
            if (d->col[k] >= mm->width[0]) continue;  // a feature the model never saw (test data): weight 0
            const param_t *w0 = w + mm->w_offset[0] + (size_t)d->col[k] * h;
            for (size_t j = 0; j < h; j++) z[j] += v * param_get(&w0[j]);
        }
    }
    if (mm->n_layers > 1) relu_forward_cpu(rows * (int)h, ws->act[1]);
    for (size_t l = 1; l < mm->n_layers; l++) {
        int in = (int)mm->width[l], out = (int)mm->width[l + 1];
        dense_forward_cpu(rows, in, out, ws->act[l], DENSE_AT(mm, ws, mm->w_offset[l]),
                          DENSE_AT(mm, ws, mm->b_offset[l]), ws->act[l + 1]);
        if (l + 1 < mm->n_layers) relu_forward_cpu(rows * out, ws->act[l + 1]);
    }
}

static void read_dense(const smlp_model_t *mm, const param_t *w, smlp_ws_t *ws) {
    params_read(w + mm->dense_start, mm->num_params - mm->dense_start, ws->dense);
}

static int entry_order(const void *a, const void *b) {
    const smlp_entry_t *x = a, *y = b;
    if (x->col != y->col) return x->col < y->col ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

// The backward pass from the top: each dense layer passes its delta down,
// then hands its weight and bias gradients to `apply` in blocks; W0's gradient
// goes out one feature's row at a time, summed over the minibatch's examples
// that hold the feature. Returns the L2 term's value.
static double smlp_loss_grad_apply(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, model_ws_t *p,
                                   grad_block_fn apply, void *ctx) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    smlp_ws_t *ws = (smlp_ws_t *)p;
    const sparse_dataset_t *d = mm->train;
    int rows = (int)count;
    read_dense(mm, w, ws);
    smlp_forward(mm, w, d, idx, 0, rows, ws);
    for (int r = 0; r < rows; r++) ws->labels[r] = sparse_dataset_class(d, idx[r]);
    size_t top = mm->n_layers;
    double loss = softmax_xent_cpu(rows, (int)mm->width[top], ws->act[top], ws->labels, 1.0f / (float)rows,
                                   ws->delta[top], NULL) /
                  rows;
    double sq = 0.0;
    for (size_t l = top; l-- > 1;) {
        int in = (int)mm->width[l], out = (int)mm->width[l + 1];
        const float *wl = DENSE_AT(mm, ws, mm->w_offset[l]);
        dense_backward_input_cpu(rows, in, out, ws->delta[l + 1], wl, ws->delta[l]);
        relu_backward_cpu(rows * in, ws->act[l], ws->delta[l]);
        int tile_rows = SMLP_TILE_FLOATS / in > 0 ? SMLP_TILE_FLOATS / in : 1;
        for (int o = 0; o < out; o += tile_rows) {
            int n_rows = out - o < tile_rows ? out - o : tile_rows;
            size_t offset = mm->w_offset[l] + (size_t)o * in, n = (size_t)n_rows * in;
            dense_weight_grad_set_cpu(rows, in, n_rows, ws->delta[l + 1] + o, out, ws->act[l], ws->tile);
            if (mm->l2 > 0.0f) {
                const float *wv = DENSE_AT(mm, ws, offset);
                for (size_t i = 0; i < n; i++) {
                    ws->tile[i] += mm->l2 * wv[i];
                    sq += (double)wv[i] * wv[i];
                }
            }
            apply(ctx, offset, ws->tile, n);
        }
        memset(ws->tile, 0, (size_t)out * sizeof *ws->tile);
        dense_bias_grad_cpu(rows, out, ws->delta[l + 1], ws->tile);
        apply(ctx, mm->b_offset[l], ws->tile, (size_t)out);
    }
    // The first layer: b0 densely, W0 by the features present.
    size_t h = mm->width[1];
    memset(ws->tile, 0, h * sizeof *ws->tile);
    dense_bias_grad_cpu(rows, (int)h, ws->delta[1], ws->tile);
    apply(ctx, mm->b_offset[0], ws->tile, h);
    size_t n_entries = 0;
    for (int r = 0; r < rows; r++)
        for (size_t k = d->row_ptr[idx[r]]; k < d->row_ptr[idx[r] + 1]; k++)
            ws->entries[n_entries++] = (smlp_entry_t){d->col[k], (uint32_t)r, d->val[k]};
    qsort(ws->entries, n_entries, sizeof *ws->entries, entry_order);
    for (size_t e = 0; e < n_entries;) {
        uint32_t col = ws->entries[e].col;
        memset(ws->tile, 0, h * sizeof *ws->tile);
        for (; e < n_entries && ws->entries[e].col == col; e++) {
            const float *dz = ws->delta[1] + (size_t)ws->entries[e].row * h;
            float v = ws->entries[e].val;
            for (size_t j = 0; j < h; j++) ws->tile[j] += v * dz[j];
        }
        size_t offset = mm->w_offset[0] + (size_t)col * h;
        if (mm->l2 > 0.0f) {
            for (size_t j = 0; j < h; j++) {
                float wj = param_get(&w[offset + j]);
                ws->tile[j] += mm->l2 * wj;
                sq += (double)wj * wj;
            }
        }
        apply(ctx, offset, ws->tile, h);
    }
    return loss + 0.5 * mm->l2 * sq;
}

static void add_into_gradient(void *ctx, size_t offset, const float *block, size_t n) {
    grad_t *g = ctx;
    for (size_t i = 0; i < n; i++) grad_add(g, (uint32_t)(offset + i), block[i]);
}

static double smlp_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                             model_ws_t *ws) {
    return smlp_loss_grad_apply(m, w, idx, count, ws, add_into_gradient, g);
}

// Test examples' labels in the training set's classes (a test set without
// classes: y > 0 is class 1).
static void test_labels(const sparse_dataset_t *d, size_t start, int rows, int32_t *out) {
    for (int r = 0; r < rows; r++) out[r] = sparse_dataset_class(d, start + (size_t)r);
}

static void smlp_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *p,
                          eval_sums_t *sums) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    smlp_ws_t *ws = (smlp_ws_t *)p;
    read_dense(mm, w, ws);
    // Blocks at multiples of MODEL_EVAL_ROWS (model.h), within the workspace's rows.
    for (size_t start = begin, stop; start < end; start = stop) {
        stop = model_eval_block_end(start, end);
        int rows = (int)(stop - start);
        smlp_forward(mm, w, mm->test, NULL, start, rows, ws);
        test_labels(mm->test, start, rows, ws->labels);
        int correct = 0;
        sums->loss_sum += softmax_xent_cpu(rows, (int)mm->width[mm->n_layers], ws->act[mm->n_layers], ws->labels, 1.0f,
                                           NULL, &correct);
        sums->metric_sum += correct;
        sums->count += (size_t)rows;
    }
}

static void smlp_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *p, double *out) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    smlp_ws_t *ws = (smlp_ws_t *)p;
    size_t classes = mm->width[mm->n_layers];
    read_dense(mm, w, ws);
    // Blocks at multiples of MODEL_EVAL_ROWS (model.h), within the workspace's rows.
    for (size_t start = begin, stop; start < end; start = stop) {
        stop = model_eval_block_end(start, end);
        int rows = (int)(stop - start);
        smlp_forward(mm, w, mm->test, NULL, start, rows, ws);
        const float *logits = ws->act[mm->n_layers];
        for (size_t k = 0; k < (size_t)rows * classes; k++) out[(start - begin) * classes + k] = logits[k];
    }
}

static void smlp_destroy(model_t *m) { free(m); }

// An MLP layout without dense training data: the GPU steps refuse it.
static void smlp_layout(const model_t *m, model_layout_t *out) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    out->kind = MODEL_KIND_MLP;
    out->l2 = mm->l2;
    out->n_layers = mm->n_layers;
    out->dim = mm->width[0];
    memcpy(out->width, mm->width, sizeof mm->width);
    memcpy(out->w_offset, mm->w_offset, sizeof mm->w_offset);
    memcpy(out->b_offset, mm->b_offset, sizeof mm->b_offset);
    out->sparse_train = mm->train;
}

// W0's rows of the examples' features.
static size_t smlp_sparse_keys(const model_t *m, int of_test, const uint32_t *idx, size_t count, uint8_t *mark,
                               uint32_t *keys) {
    const smlp_model_t *mm = (const smlp_model_t *)m;
    return model_feature_rows_keys(of_test ? mm->test : mm->train, idx, count, mm->width[1], mm->width[0], mark, keys);
}

static const model_ops_t smlp_ops = {
    .describe = smlp_describe,
    .num_params = smlp_num_params,
    .flops_per_example = smlp_flops,
    .init_params = smlp_init,
    .ws_new = smlp_ws_new,
    .ws_destroy = smlp_ws_destroy,
    .loss_grad = smlp_loss_grad,
    .evaluate = smlp_evaluate,
    .predict = smlp_predict,
    .destroy = smlp_destroy,
    .layout = smlp_layout,
    .loss_grad_apply = smlp_loss_grad_apply,
    .sparse_keys = smlp_sparse_keys,
};

// The same classes: the same labels, or for a set without labels (generated:
// y only) the same count.
static int same_classes(const sparse_dataset_t *a, const sparse_dataset_t *b) {
    if (!a->cls || !b->cls) return sparse_dataset_num_classes(a) == sparse_dataset_num_classes(b);
    return a->n_classes == b->n_classes && memcmp(a->labels, b->labels, a->n_classes * sizeof *a->labels) == 0;
}

model_t *model_new_mlp_sparse(const sparse_dataset_t *train, const sparse_dataset_t *test, const size_t *hidden,
                              size_t n_hidden, double l2, char *err, size_t err_len) {
    const char *name = n_hidden ? "mlp" : "softmax";
    if (!train || train->n == 0 || train->dim == 0) {
        snprintf(err, err_len, "%s: the training set is empty (no examples or no features)", name);
        return NULL;
    }
    size_t classes = sparse_dataset_num_classes(train);
    if (classes < 2) {
        snprintf(err, err_len, "%s: the training data has one label (%d); need at least 2 classes", name,
                 train->labels ? (int)train->labels[0] : 0);
        return NULL;
    }
    if (test && (test->dim > train->dim || !same_classes(train, test))) {
        snprintf(err, err_len,
                 "%s: the test set (%zu features, %zu classes) does not match the training set (%zu, %zu "
                 "classes): read it with the training set's labels",
                 name, test->dim, sparse_dataset_num_classes(test), train->dim, classes);
        return NULL;
    }
    if (n_hidden + 1 > MODEL_MAX_LAYERS) {
        snprintf(err, err_len, "%s: %zu hidden layers; at most %d are supported", name, n_hidden, MODEL_MAX_LAYERS - 1);
        return NULL;
    }
    smlp_model_t *mm = calloc(1, sizeof *mm);
    if (!mm) {
        snprintf(err, err_len, "%s: allocating: %s", name, strerror(errno));
        return NULL;
    }
    mm->base.ops = &smlp_ops;
    mm->base.name = name;
    mm->base.num_train = train->n;
    mm->base.num_test = test ? test->n : 0;
    mm->base.grad_dense = 0;  // a step touches its features' rows of W0 and the dense rest
    mm->base.metric = METRIC_KIND_ACCURACY;
    mm->train = train;
    mm->test = test;
    mm->l2 = (float)l2;
    mm->n_layers = n_hidden + 1;
    mm->width[0] = train->dim;
    for (size_t l = 0; l < n_hidden; l++) {
        if (hidden[l] == 0 || hidden[l] > (1u << 20)) {
            snprintf(err, err_len, "%s: hidden layer %zu has width %zu; expected 1..1048576", name, l + 1, hidden[l]);
            free(mm);
            return NULL;
        }
        mm->width[l + 1] = hidden[l];
    }
    mm->width[mm->n_layers] = classes;
    size_t at = 0;
    for (size_t l = 0; l < mm->n_layers; l++) {
        if (mm->width[l] > (SIZE_MAX / 4 - at) / mm->width[l + 1] || at >= UINT32_MAX) break;
        mm->w_offset[l] = at;
        at += mm->width[l] * mm->width[l + 1];
        mm->b_offset[l] = at;
        at += mm->width[l + 1];
    }
    if (at >= UINT32_MAX || mm->b_offset[mm->n_layers - 1] == 0) {
        snprintf(err, err_len, "%s: %zu features x %zu units exceed the 32-bit parameter index range", name, train->dim,
                 mm->width[1]);
        free(mm);
        return NULL;
    }
    mm->num_params = at;
    mm->dense_start = mm->b_offset[0];
    mm->base.sparse_params = mm->dense_start;  // W0, one row per feature
    for (size_t i = 0; i < train->n; i++) {
        size_t nnz = train->row_ptr[i + 1] - train->row_ptr[i];
        if (nnz > mm->max_row_nnz) mm->max_row_nnz = nnz;
    }
    return &mm->base;
}
