#ifndef ASGD_ENGINE_CORE_MODEL_H
#define ASGD_ENGINE_CORE_MODEL_H
// One interface for every model the engine trains.
//
// A model is bound at creation to its training and test data (borrowed, not
// owned: they must outlive the model). Its parameters live outside it, in a
// shared param_t array, so that the same model object serves every thread and
// every training mode. Per-thread scratch memory lives in a model_ws_t.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"
#include "engine/core/grad.h"
#include "engine/core/params.h"

typedef struct model model_t;
typedef struct model_ws model_ws_t;

typedef enum metric_kind {
    METRIC_KIND_ACCURACY,  // fraction of test examples classified correctly (higher is better)
    METRIC_KIND_RMSE,  // root mean squared rating error (lower is better)
} metric_kind_t;

#define MODEL_MAX_LAYERS 8  // weight layers of an MLP

typedef enum linear_loss {
    LINEAR_LOSS_LOGISTIC,  // log(1 + exp(-y w.x))
    LINEAR_LOSS_HINGE,  // max(0, 1 - y w.x)  (linear SVM)
} linear_loss_t;

// Sums over a range of test examples; combine ranges by adding fields.
typedef struct eval_sums {
    double loss_sum;  // data loss, no regulariser
    double metric_sum;  // correct predictions (accuracy) or squared errors (RMSE)
    size_t count;
} eval_sums_t;

// Sparse linear classifier over features [0, dim) plus a bias (the last parameter).
// L2 (l2/2 * w_j^2) is applied lazily, only to the features a minibatch touches,
// so a step stays O(non-zeros).
model_t *model_new_linear(linear_loss_t loss, const sparse_dataset_t *train, const sparse_dataset_t *test, double l2,
                          char *err, size_t err_len);

// Dense MLP: in -> hidden[0] -> ... -> classes, ReLU between layers, softmax
// cross-entropy at the top; n_hidden = 0 gives softmax regression.
// Parameters, per layer: W (out, in) row-major, then bias (out). L2 on W only.
model_t *model_new_mlp(const dense_dataset_t *train, const dense_dataset_t *test, const size_t *hidden, size_t n_hidden,
                       double l2, char *err, size_t err_len);

// The same over sparse input (libsvm, CSV): classes from the training set's
// (sparse_dataset_num_classes); the first layer a sparse-dense product, its
// weights one row of hidden[0] (or classes) per feature: W0 (dim, width1)
// row-major, then b0, then the layers above as in model_new_mlp. A step
// touches only its features' rows of W0; L2 on W0 applies lazily to those.
model_t *model_new_mlp_sparse(const sparse_dataset_t *train, const sparse_dataset_t *test, const size_t *hidden,
                              size_t n_hidden, double l2, char *err, size_t err_len);

// Matrix factorisation: rating(u, i) ~ mean + U[u] . V[i], with U (users, rank)
// then V (items, rank); loss 1/2 err^2 + l2/2 (|U[u]|^2 + |V[i]|^2) per rating.
// `mean` is the training ratings' mean, fixed at creation.
model_t *model_new_mf(const ratings_t *train, const ratings_t *test, size_t rank, double l2, char *err, size_t err_len);

// A sparse embedding of libsvm features feeding a small dense MLP (one hidden
// layer of `hidden` ReLU units, logistic output): E (dim, embed_dim) — the
// sparse part, rows touched by an example's features — then W1 (hidden,
// embed_dim), b1 (hidden), w2 (hidden), b2. L2 on W1 and w2.
model_t *model_new_embmlp(const sparse_dataset_t *train, const sparse_dataset_t *test, size_t embed_dim, size_t hidden,
                          double l2, char *err, size_t err_len);

void model_destroy(model_t **m);

void model_describe(const model_t *m, char *out, size_t out_len);  // e.g. "mlp 784-256-128-10"
// The name of its kind: its descriptor's in the model registry
// (engine/models/model_registry.h), e.g. "mlp", or "softmax" for an mlp
// without hidden layers.
const char *model_name(const model_t *m);
size_t model_num_params(const model_t *m);
size_t model_num_train(const model_t *m);
size_t model_num_test(const model_t *m);
int model_grad_is_dense(const model_t *m);
// Models read by key keep their sparse block first: parameters [0, S) are
// rows a step reads only for its examples (a linear model's weights, mf's
// factors, a sparse mlp's or embmlp's first layer), [S, n) are read by every
// step (biases, dense layers). S, or 0 for a dense model. A model whose S is
// below n has a sparse and a dense part (--sync hybrid takes those with a
// registry split, model_registry.h).
size_t model_num_sparse_params(const model_t *m);
// The sparse parameters examples idx[0..count) touch, each once, in no
// particular order, written to keys (room for model_num_sparse_params); mark
// is scratch of model_num_sparse_params bytes, all zero, and left so. Returns
// how many; 0 for models without a sparse part.
size_t model_sparse_keys(const model_t *m, const uint32_t *idx, size_t count, uint8_t *mark, uint32_t *keys);
// The same for test examples idx[0..count): what evaluating them reads.
size_t model_sparse_test_keys(const model_t *m, const uint32_t *idx, size_t count, uint8_t *mark, uint32_t *keys);
metric_kind_t model_metric(const model_t *m);
// Floating-point operations of one forward+backward pass over one example, as counted
// for throughput reports (2 per multiply-add of the matrix products).
double model_flops_per_example(const model_t *m);

// Seeded initialisation (same seed, same parameters).
void model_init_params(const model_t *m, param_t *w, uint64_t seed);

// Values [begin, end) of model_init_params' parameters into out, without the
// rest, where the model can (model_has_init_range): a shard of a model no
// process need hold whole. The same bits as the range of the whole.
int model_has_init_range(const model_t *m);
void model_init_range(const model_t *m, uint64_t seed, size_t begin, size_t end, float *out);

// Scratch for one thread, for minibatches of at most max_batch examples.
model_ws_t *model_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len);
void model_ws_destroy(model_ws_t **ws);

// Mean loss over the training examples idx[0..count) plus the regulariser, and
// its gradient with respect to w, added into g (which must be clear — all zero —
// with dim == model_num_params, dense iff model_grad_is_dense). Reads w with relaxed
// atomic loads, so it may run while other threads write w.
double model_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                       model_ws_t *ws);

// One training example's plain-SGD step, w -= lr * gradient, applied directly
// without building a gradient: bit-identical to model_loss_grad on that one
// example followed by a plain-SGD optimizer_apply_and_clear, and several times
// cheaper for sparse models (the Hogwild! paper's setting). Returns the
// example's objective.
// Only for models where model_has_sgd_step_one() is true.
int model_has_sgd_step_one(const model_t *m);
double model_sgd_step_one(const model_t *m, param_t *w, uint32_t example, float lr);

// One example's gradient as (index, value) pairs, for a gradient kept to be
// applied later (the simulator's delayed sparse gradients): the coordinates
// model_loss_grad would touch on this example, in its order and with its
// arithmetic, so applying the pairs equals applying that gradient bit for
// bit, without scattering into and clearing a model-sized buffer. Writes at
// most cap pairs and returns how many there are: when that is more than cap,
// nothing was written (call again with room). *loss gets the objective.
// Only for models where model_has_grad_one_pairs() is true.
int model_has_grad_one_pairs(const model_t *m);
size_t model_grad_one_pairs(const model_t *m, const param_t *w, uint32_t example, uint32_t *idx, float *val, size_t cap,
                            double *loss);

// One example's gradient when it is a multiple of the example: scale * x_j
// for each feature j the example has and scale for the bias (linear models
// without L2). model_grad_one_scale returns the objective and writes the
// scale; model_sgd_apply_one_scale later applies w -= lr * gradient from it,
// bit for bit what model_grad_one_pairs's pairs applied by plain SGD write,
// without storing the pairs (the simulator's delayed one-example gradients).
// The two calls only where model_has_grad_one_scale() is true.
int model_has_grad_one_scale(const model_t *m);
double model_grad_one_scale(const model_t *m, const param_t *w, uint32_t example, float *scale);
void model_sgd_apply_one_scale(const model_t *m, param_t *w, uint32_t example, float scale, float lr);

// A destination for a gradient handed over block by block: `n` values for the
// parameters [offset, offset + n).
typedef void (*grad_block_fn)(void *ctx, size_t offset, const float *g, size_t n);

// model_loss_grad for Hogwild! on dense models: instead of storing the whole
// gradient (the size of the model) and applying it in a second pass, the model
// hands it to `apply` in blocks small enough to still be in cache, as soon as
// each block is final; the blocks cover every parameter exactly once. `apply`
// may write the workspace's parameter copy (the values a block covers are not
// read again in this step). Only where model_has_loss_grad_apply() is true.
int model_has_loss_grad_apply(const model_t *m);

// The destination that stores the gradient: ctx is an array of the model's
// size, and each block's values go to ctx + offset. Passed as `apply`, it lets
// a model compute a block in that place instead of in its workspace, so the
// block is not copied (a dense model's whole gradient, every step of --mode
// sync); called, it copies the block there.
void grad_block_store(void *ctx, size_t offset, const float *g, size_t n);

double model_loss_grad_apply(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, model_ws_t *ws,
                             grad_block_fn apply, void *ctx);

// Dense models compute on a private float copy of the parameters, refreshed from
// w at the start of every model_loss_grad. A Hogwild! thread that has just
// written every parameter itself can refresh the copy during that write instead
// (optimizer_apply_block) and mark it current, saving a full pass over the
// model. model_ws_param_copy returns NULL for models that read w directly.
float *model_ws_param_copy(model_ws_t *ws);
void model_ws_mark_copy_current(model_ws_t *ws);

// What a model is made of, for code that runs it elsewhere (engine/gpu/gpu_model.c):
// its kind, shapes, where each block of parameters starts, and its training
// data (borrowed from the model). Fields of the other kinds are zero. The
// kinds are the parameter layouts the GPU steps know; OTHER (a model without
// a layout op) runs on the CPU only.
typedef enum model_kind {
    MODEL_KIND_OTHER,
    MODEL_KIND_LINEAR,
    MODEL_KIND_MLP,
    MODEL_KIND_MF,
    MODEL_KIND_EMBMLP
} model_kind_t;

typedef struct model_layout {
    model_kind_t kind;
    float l2;
    // linear: features [0, dim), the bias at w[dim]
    linear_loss_t loss;
    size_t dim;
    const sparse_dataset_t *sparse_train;
    // mlp: layer l maps width[l] -> width[l+1]; W_l (width[l+1], width[l]) at w_offset[l], bias at b_offset[l]
    size_t n_layers;
    size_t width[MODEL_MAX_LAYERS + 1];
    size_t w_offset[MODEL_MAX_LAYERS], b_offset[MODEL_MAX_LAYERS];
    const dense_dataset_t *dense_train;
    // embmlp: dim features, rank = the embedding width; the GPU path does not run it
    // mf: U (n_users, rank) then V (n_items, rank); prediction mean + U[u] . V[i]
    size_t rank, n_users, n_items;
    float mean;
    const ratings_t *ratings_train;
} model_layout_t;

void model_layout(const model_t *m, model_layout_t *out);

// Models that evaluate rows together (one matrix product over a block of test
// examples: mlp, softmax, the sparse mlp) take blocks of MODEL_EVAL_ROWS that
// start at multiples of it, whatever [begin, end) is. A BLAS kernel may round
// a row's product differently with the number of rows in the call (OpenBLAS's
// Zen kernels do), so a row's loss is the same in every evaluator only if
// every caller's blocks are: callers that split the test set (the trainer's
// evaluation threads, asgd eval) split it at multiples of MODEL_EVAL_ROWS
// (model_eval_slice), and the global evaluator's one slice from 0 then gives
// the same numbers as one process.
#define MODEL_EVAL_ROWS 256

// Where slice i of n of the test examples [0, limit) begins: i * limit / n
// rounded down to a multiple of MODEL_EVAL_ROWS (limit for i == n).
size_t model_eval_slice(size_t limit, size_t i, size_t n);

// The end of the evaluation block that holds test example `start`, within end.
size_t model_eval_block_end(size_t start, size_t end);

// Adds the loss and metric over test examples [begin, end) to sums.
void model_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, eval_sums_t *sums);

// The model's outputs for test examples [begin, end), the same forward pass
// model_evaluate measures: model_num_outputs(m) values per example, written to
// out[(i - begin) * outputs + k]. Linear models and embmlp: the score (>= 0
// predicts +1; logreg and embmlp: P(+1) = 1 / (1 + exp(-score))); mlp and
// softmax: the logits of the classes; mf: the predicted rating.
size_t model_num_outputs(const model_t *m);
void model_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out);

// The metric value from sums: accuracy in [0,1] or RMSE.
double eval_metric_value(metric_kind_t kind, const eval_sums_t *sums);

#endif
