// Dense MLP and softmax regression on image data, minibatched through sgemm.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"
#include "engine/core/model_impl.h"
#include "engine/models/layer_widths.h"
#include "engine/models/model_registry.h"
#include "kernels/dense.h"

#define MLP_TILE_FLOATS 16384  // gradient block handed to an apply callback: 64 KB, cache-resident

typedef struct mlp_model {
    model_t base;
    const dense_dataset_t *train;
    const dense_dataset_t *test;
    size_t n_layers;  // weight layers (hidden layers + 1)
    size_t width[MODEL_MAX_LAYERS + 1];  // width[0] = input, width[n_layers] = classes
    size_t w_offset[MODEL_MAX_LAYERS];  // W_l (width[l+1], width[l]) starts here
    size_t b_offset[MODEL_MAX_LAYERS];  // bias_l (width[l+1]) starts here
    size_t num_params;
    size_t max_width;
    float l2;
} mlp_model_t;

typedef struct mlp_ws {
    model_ws_header_t header;  // header.param_copy is `w` below
    size_t rows;  // capacity in examples
    float *w;  // (num_params) this step's copy of the shared parameters
    float *act[MODEL_MAX_LAYERS + 1];  // act[0] = input batch (rows, width[0]); act[l] (rows, width[l])
    float *delta[MODEL_MAX_LAYERS + 1];
    int32_t *labels;  // (rows)
    float *tile;  // (MLP_TILE_FLOATS) one block of a layer's weight gradient
} mlp_ws_t;

static const model_ops_t mlp_ops;

static size_t mlp_num_params(const model_t *m) { return ((const mlp_model_t *)m)->num_params; }

static void mlp_describe(const model_t *m, char *out, size_t out_len) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    int at = snprintf(out, out_len, "%s ", m->name);
    for (size_t l = 0; l <= mm->n_layers && at > 0 && (size_t)at < out_len; l++)
        at += snprintf(out + at, out_len - at, l ? "-%zu" : "%zu", mm->width[l]);
    if (at > 0 && (size_t)at < out_len) snprintf(out + at, out_len - at, " (%zu params)", mm->num_params);
}

static double mlp_flops(const model_t *m) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    double flops = 0.0;
    for (size_t l = 0; l < mm->n_layers; l++) {
        double mac = (double)mm->width[l] * mm->width[l + 1];
        flops += 2 * mac + 2 * mac;  // forward product, weight gradient
        if (l > 0) flops += 2 * mac;  // input gradient (not needed for the data layer)
    }
    return flops;
}

static void mlp_init(const model_t *m, param_t *w, uint64_t seed) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    rng_t rng;
    rng_seed(&rng, seed, 0x4d4c50);  // "MLP"
    for (size_t l = 0; l < mm->n_layers; l++) {
        // He initialisation keeps ReLU activations' variance steady through depth.
        double std = sqrt(2.0 / (double)mm->width[l]);
        size_t n = mm->width[l] * mm->width[l + 1];
        for (size_t i = 0; i < n; i++) param_set(&w[mm->w_offset[l] + i], (float)(std * rng_normal(&rng)));
        for (size_t i = 0; i < mm->width[l + 1]; i++) param_set(&w[mm->b_offset[l] + i], 0.0f);
    }
}

static void mlp_ws_destroy(model_ws_t *p) {
    mlp_ws_t *ws = (mlp_ws_t *)p;
    if (!ws) return;
    free(ws->w);
    for (size_t l = 0; l <= MODEL_MAX_LAYERS; l++) {
        free(ws->act[l]);
        free(ws->delta[l]);
    }
    free(ws->labels);
    free(ws->tile);
    free(ws);
}

static model_ws_t *mlp_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    mlp_ws_t *ws = calloc(1, sizeof *ws);
    int ok = ws != NULL;
    if (ok) {
        ws->header.ops = &mlp_ops;
        ws->rows = max_batch > MODEL_EVAL_ROWS ? max_batch : MODEL_EVAL_ROWS;
        ws->w = malloc(mm->num_params * sizeof *ws->w);
        ws->labels = malloc(ws->rows * sizeof *ws->labels);
        ws->tile = malloc((MLP_TILE_FLOATS > mm->max_width ? MLP_TILE_FLOATS : mm->max_width) * sizeof *ws->tile);
        ws->header.param_copy = ws->w;
        ok = ws->w && ws->labels && ws->tile;
        for (size_t l = 0; ok && l <= mm->n_layers; l++) {
            ws->act[l] = malloc(ws->rows * mm->width[l] * sizeof(float));
            ws->delta[l] = malloc(ws->rows * mm->width[l] * sizeof(float));
            ok = ws->act[l] && ws->delta[l];
        }
    }
    if (!ok) {
        snprintf(err, err_len, "mlp: allocating workspace for %zu rows: %s", max_batch, strerror(errno));
        mlp_ws_destroy((model_ws_t *)ws);
        return NULL;
    }
    return (model_ws_t *)ws;
}

// Forward pass over ws->act[0] (rows examples); leaves logits in ws->act[n_layers].
static void mlp_forward(const mlp_model_t *mm, mlp_ws_t *ws, int rows) {
    for (size_t l = 0; l < mm->n_layers; l++) {
        int in = (int)mm->width[l], out = (int)mm->width[l + 1];
        dense_forward_cpu(rows, in, out, ws->act[l], ws->w + mm->w_offset[l], ws->w + mm->b_offset[l], ws->act[l + 1]);
        if (l + 1 < mm->n_layers) relu_forward_cpu(rows * out, ws->act[l + 1]);
    }
}

// Forward pass and loss for a minibatch; leaves the top layer's delta ready.
static double mlp_forward_loss(const mlp_model_t *mm, const param_t *w, const uint32_t *idx, int rows, mlp_ws_t *ws) {
    const dense_dataset_t *d = mm->train;
    if (!ws->header.copy_current) params_read(w, mm->num_params, ws->w);
    ws->header.copy_current = 0;
    for (int r = 0; r < rows; r++) {
        memcpy(ws->act[0] + (size_t)r * d->dim, d->x + (size_t)idx[r] * d->dim, d->dim * sizeof(float));
        ws->labels[r] = d->y[idx[r]];
    }
    mlp_forward(mm, ws, rows);
    size_t top = mm->n_layers;
    return softmax_xent_cpu(rows, (int)mm->width[top], ws->act[top], ws->labels, 1.0f / (float)rows, ws->delta[top],
                            NULL) /
           rows;
}

// Propagates layer l's delta to layer l-1 (through the ReLU), using W_l.
static void mlp_backward_input(const mlp_model_t *mm, mlp_ws_t *ws, int rows, size_t l) {
    int in = (int)mm->width[l], out = (int)mm->width[l + 1];
    dense_backward_input_cpu(rows, in, out, ws->delta[l + 1], ws->w + mm->w_offset[l], ws->delta[l]);
    relu_backward_cpu(rows * in, ws->act[l], ws->delta[l]);
}

// The backward pass, layer by layer from the top and in blocks of rows of W:
// each layer first passes its delta down (which needs its old weights), then
// hands its weight and bias gradients to `apply`, which may overwrite them.
// Storing the gradient (mlp_loss_grad) and applying it block by block (Hogwild!)
// share this one pass, so every mode does the same arithmetic. Given
// grad_block_store, the blocks are computed where they are stored.
static double mlp_loss_grad_apply(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, model_ws_t *p,
                                  grad_block_fn apply, void *ctx) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    mlp_ws_t *ws = (mlp_ws_t *)p;
    int rows = (int)count;
    double loss = mlp_forward_loss(mm, w, idx, rows, ws), sq = 0.0;
    float *store = apply == grad_block_store ? ctx : NULL;
    for (size_t l = mm->n_layers; l-- > 0;) {
        int in = (int)mm->width[l], out = (int)mm->width[l + 1];
        if (l > 0) mlp_backward_input(mm, ws, rows, l);
        int tile_rows = MLP_TILE_FLOATS / in > 0 ? MLP_TILE_FLOATS / in : 1;
        for (int o = 0; o < out; o += tile_rows) {
            int n_rows = out - o < tile_rows ? out - o : tile_rows;
            size_t offset = mm->w_offset[l] + (size_t)o * in, n = (size_t)n_rows * in;
            float *block = store ? store + offset : ws->tile;
            dense_weight_grad_set_cpu(rows, in, n_rows, ws->delta[l + 1] + o, out, ws->act[l], block);
            if (mm->l2 > 0.0f) {
                for (size_t i = 0; i < n; i++) {
                    float wi = ws->w[offset + i];
                    block[i] += mm->l2 * wi;
                    sq += (double)wi * wi;
                }
            }
            if (!store) apply(ctx, offset, block, n);
        }
        float *bias = store ? store + mm->b_offset[l] : ws->tile;
        memset(bias, 0, (size_t)out * sizeof *bias);
        dense_bias_grad_cpu(rows, out, ws->delta[l + 1], bias);
        if (!store) apply(ctx, mm->b_offset[l], bias, (size_t)out);
    }
    return loss + 0.5 * mm->l2 * sq;
}

static void add_into_gradient(void *ctx, size_t offset, const float *block, size_t n) {
    float *g = (float *)ctx + offset;
    for (size_t i = 0; i < n; i++) g[i] += block[i];
}

static double mlp_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                            model_ws_t *ws) {
    return mlp_loss_grad_apply(m, w, idx, count, ws, add_into_gradient, g->value);
}

static void mlp_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *p,
                         eval_sums_t *sums) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    mlp_ws_t *ws = (mlp_ws_t *)p;
    const dense_dataset_t *d = mm->test;
    params_read(w, mm->num_params, ws->w);
    // Blocks at multiples of MODEL_EVAL_ROWS (model.h), within the workspace's rows.
    for (size_t start = begin, stop; start < end; start = stop) {
        stop = model_eval_block_end(start, end);
        int rows = (int)(stop - start);
        memcpy(ws->act[0], d->x + start * d->dim, (size_t)rows * d->dim * sizeof(float));
        mlp_forward(mm, ws, rows);
        int correct = 0;
        sums->loss_sum += softmax_xent_cpu(rows, (int)mm->width[mm->n_layers], ws->act[mm->n_layers], d->y + start,
                                           1.0f, NULL, &correct);
        sums->metric_sum += correct;
        sums->count += (size_t)rows;
    }
}

static void mlp_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *p, double *out) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    mlp_ws_t *ws = (mlp_ws_t *)p;
    const dense_dataset_t *d = mm->test;
    size_t classes = mm->width[mm->n_layers];
    params_read(w, mm->num_params, ws->w);
    // Blocks at multiples of MODEL_EVAL_ROWS (model.h), within the workspace's rows.
    for (size_t start = begin, stop; start < end; start = stop) {
        stop = model_eval_block_end(start, end);
        int rows = (int)(stop - start);
        memcpy(ws->act[0], d->x + start * d->dim, (size_t)rows * d->dim * sizeof(float));
        mlp_forward(mm, ws, rows);
        const float *logits = ws->act[mm->n_layers];
        for (size_t k = 0; k < (size_t)rows * classes; k++) out[(start - begin) * classes + k] = logits[k];
    }
}

static void mlp_destroy(model_t *m) { free(m); }

static void mlp_layout(const model_t *m, model_layout_t *out) {
    const mlp_model_t *mm = (const mlp_model_t *)m;
    out->kind = MODEL_KIND_MLP;
    out->l2 = mm->l2;
    out->n_layers = mm->n_layers;
    memcpy(out->width, mm->width, sizeof mm->width);
    memcpy(out->w_offset, mm->w_offset, sizeof mm->w_offset);
    memcpy(out->b_offset, mm->b_offset, sizeof mm->b_offset);
    out->dense_train = mm->train;
}

static const model_ops_t mlp_ops = {
    .describe = mlp_describe,
    .num_params = mlp_num_params,
    .flops_per_example = mlp_flops,
    .init_params = mlp_init,
    .ws_new = mlp_ws_new,
    .ws_destroy = mlp_ws_destroy,
    .loss_grad = mlp_loss_grad,
    .evaluate = mlp_evaluate,
    .predict = mlp_predict,
    .destroy = mlp_destroy,
    .layout = mlp_layout,
    .loss_grad_apply = mlp_loss_grad_apply,
};

model_t *model_new_mlp(const dense_dataset_t *train, const dense_dataset_t *test, const size_t *hidden, size_t n_hidden,
                       double l2, char *err, size_t err_len) {
    if (!train || train->n == 0 || train->dim == 0) {
        snprintf(err, err_len, "mlp: the training set is empty");
        return NULL;
    }
    if (train->n_classes < 2) {
        snprintf(err, err_len, "mlp: the training set has %zu classes; need at least 2", train->n_classes);
        return NULL;
    }
    if (test && (test->dim != train->dim || test->n_classes > train->n_classes)) {
        snprintf(err, err_len, "mlp: test set shape (%zu features, %zu classes) does not match training set (%zu, %zu)",
                 test->dim, test->n_classes, train->dim, train->n_classes);
        return NULL;
    }
    if (n_hidden + 1 > MODEL_MAX_LAYERS) {
        snprintf(err, err_len, "mlp: %zu hidden layers; at most %d are supported", n_hidden, MODEL_MAX_LAYERS - 1);
        return NULL;
    }
    mlp_model_t *mm = calloc(1, sizeof *mm);
    if (!mm) {
        snprintf(err, err_len, "mlp: allocating: %s", strerror(errno));
        return NULL;
    }
    mm->base.ops = &mlp_ops;
    mm->base.name = n_hidden ? "mlp" : "softmax";
    mm->base.num_train = train->n;
    mm->base.num_test = test ? test->n : 0;
    mm->base.grad_dense = 1;
    mm->base.metric = METRIC_KIND_ACCURACY;
    mm->train = train;
    mm->test = test;
    mm->l2 = (float)l2;
    mm->n_layers = n_hidden + 1;
    mm->width[0] = train->dim;
    for (size_t l = 0; l < n_hidden; l++) {
        if (hidden[l] == 0 || hidden[l] > (1u << 20)) {
            snprintf(err, err_len, "mlp: hidden layer %zu has width %zu; expected 1..1048576", l + 1, hidden[l]);
            free(mm);
            return NULL;
        }
        mm->width[l + 1] = hidden[l];
    }
    mm->width[mm->n_layers] = train->n_classes;
    size_t at = 0;
    for (size_t l = 0; l < mm->n_layers; l++) {
        mm->w_offset[l] = at;
        at += mm->width[l] * mm->width[l + 1];
        mm->b_offset[l] = at;
        at += mm->width[l + 1];
    }
    for (size_t l = 0; l <= mm->n_layers; l++)
        if (mm->width[l] > mm->max_width) mm->max_width = mm->width[l];
    mm->num_params = at;
    return &mm->base;
}

// ---- descriptors: softmax and mlp ----

typedef struct mlp_options {
    const char *hidden;  // --hidden
    size_t widths[MODEL_SHAPE_MAX_HIDDEN], n;  // parsed
} mlp_options_t;
_Static_assert(sizeof(mlp_options_t) <= MODEL_OPTIONS_BYTES, "mlp options");

static void mlp_options_default(void *opts) { ((mlp_options_t *)opts)->hidden = "256,128"; }

static void mlp_flags(void *opts, flag_spec_t *specs) {
    specs[0] = (flag_spec_t){"hidden",
                             FLAG_TYPE_STRING,
                             &((mlp_options_t *)opts)->hidden,
                             "W1,W2",
                             "hidden layer widths (none: softmax regression)",
                             0,
                             0,
                             NULL,
                             0};
}

static int mlp_options_finish(void *opts, const flag_spec_t *specs, char *err, size_t err_len) {
    (void)specs;
    mlp_options_t *o = opts;
    return model_parse_widths("--hidden", o->hidden, o->widths, MODEL_MAX_LAYERS - 1, &o->n, err, err_len);
}

static model_t *mlp_create(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                           size_t err_len) {
    (void)seed;
    const mlp_options_t *o = opts;
    return model_new_mlp(train, test, o->widths, o->n, l2, err, err_len);
}

static model_t *mlp_create_sparse(const void *train, const void *test, const void *opts, double l2, uint64_t seed,
                                  char *err, size_t err_len) {
    (void)seed;
    const mlp_options_t *o = opts;
    return model_new_mlp_sparse(train, test, o->widths, o->n, l2, err, err_len);
}

// Dense and sparse input alike, through the layout: widths, and for sparse
// input the training set's labels.
static int mlp_shape_of(const model_t *m, model_shape_t *out, char *err, size_t err_len) {
    model_layout_t L;
    model_layout(m, &L);
    size_t top = L.n_layers;
    if (top > MODEL_SHAPE_MAX_HIDDEN + 1 || L.width[top] > MODEL_SHAPE_MAX_CLASSES) {
        snprintf(err, err_len, "model file: an mlp of %zu layers and %zu classes does not fit the format", top,
                 L.width[top]);
        return -1;
    }
    out->dim = L.width[0];
    out->n_hidden = top - 1;
    for (size_t k = 0; k + 1 < top; k++) out->hidden[k] = L.width[k + 1];
    out->classes = L.width[top];
    const sparse_dataset_t *s = L.sparse_train;
    out->sparse_input = s != NULL;
    for (uint64_t c = 0; c < out->classes; c++)
        out->labels[c] = s && s->cls ? s->labels[c] : s ? (c ? +1 : -1) : (int32_t)c;
    out->label_text = s && s->cls ? s->label_text : NULL;
    return 0;
}

static uint64_t mlp_shape_params(const model_shape_t *s) {
    uint64_t n = 0, in = s->dim;
    for (uint64_t l = 0; l <= s->n_hidden; l++) {
        uint64_t out = l < s->n_hidden ? s->hidden[l] : s->classes;
        n += out * in + out;
        in = out;
    }
    return n;
}

static void mlp_options_of_shape(const model_shape_t *s, void *opts) {
    mlp_options_t *o = opts;
    o->n = s->n_hidden < MODEL_SHAPE_MAX_HIDDEN ? s->n_hidden : MODEL_SHAPE_MAX_HIDDEN;
    for (size_t k = 0; k < o->n; k++) o->widths[k] = s->hidden[k];
}

#define MLP_DESCRIPTOR(NAME, SUMMARY, N_FLAGS)                                                                    \
    {                                                                                                             \
        .name = NAME, .summary = SUMMARY, .data = DATA_KIND_DENSE, .metric = METRIC_KIND_ACCURACY,                \
        .output = MODEL_OUTPUT_CLASS_LOGITS,                                                                      \
        .defaults = {.lr = 0.05, .batch = 16, .l2 = 0.0, .data = "fashion-mnist"},                                \
        .options_size = sizeof(mlp_options_t), .n_flags = N_FLAGS, .options_default = mlp_options_default,        \
        .flags = mlp_flags, .options_finish = N_FLAGS ? mlp_options_finish : NULL, .create = mlp_create,          \
        .create_sparse = mlp_create_sparse, .gpu = 1, .shape_of = mlp_shape_of, .shape_params = mlp_shape_params, \
        .options_of_shape = mlp_options_of_shape,                                                                 \
    }

// softmax has no --hidden: its options stay at zero layers.
const model_descriptor_t model_softmax_descriptor =
    MLP_DESCRIPTOR("softmax", "softmax regression (one layer, cross-entropy) on dense images or sparse features", 0);
const model_descriptor_t model_mlp_descriptor =
    MLP_DESCRIPTOR("mlp", "MLP: ReLU hidden layers, softmax cross-entropy; dense images (sgemm) or sparse features", 1);
