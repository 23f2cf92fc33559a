#ifndef ASGD_ENGINE_CORE_MODEL_IMPL_H
#define ASGD_ENGINE_CORE_MODEL_IMPL_H
// What each model provides to model.c's dispatch: for code that implements a
// model (engine/models/, or a program's own model registered at run time via
// engine/models/model_registry.h), not for users of model.h.
#include "engine/core/model.h"

typedef struct model_ops {
    void (*describe)(const model_t *m, char *out, size_t out_len);
    size_t (*num_params)(const model_t *m);
    double (*flops_per_example)(const model_t *m);
    void (*init_params)(const model_t *m, param_t *w, uint64_t seed);
    // Optional: values [begin, end) of init_params' model, the same bits,
    // without making the rest (a parameter server's shard of a model larger
    // than it holds).
    void (*init_range)(const model_t *m, uint64_t seed, size_t begin, size_t end, float *out);
    model_ws_t *(*ws_new)(const model_t *m, size_t max_batch, char *err, size_t err_len);
    void (*ws_destroy)(model_ws_t *ws);
    double (*loss_grad)(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                        model_ws_t *ws);
    void (*evaluate)(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, eval_sums_t *sums);
    // Outputs for test examples (see model_predict in model.h).
    void (*predict)(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out);
    void (*destroy)(model_t *m);
    void (*layout)(const model_t *m, model_layout_t *out);  // optional: MODEL_KIND_OTHER
    // Optional: the gradient handed over in blocks (see model.h).
    double (*loss_grad_apply)(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, model_ws_t *ws,
                              grad_block_fn apply, void *ctx);
    // Optional: one example's plain-SGD step applied straight to w (see model.h).
    double (*sgd_step_one)(const model_t *m, param_t *w, uint32_t example, float lr);
    // Optional: one example's gradient as (index, value) pairs (see model.h).
    size_t (*grad_one_pairs)(const model_t *m, const param_t *w, uint32_t example, uint32_t *idx, float *val,
                             size_t cap, double *loss);
    // Optional: one example's gradient as a multiple of its features (see model.h).
    int (*has_grad_one_scale)(const model_t *m);
    double (*grad_one_scale)(const model_t *m, const param_t *w, uint32_t example, float *scale);
    void (*sgd_apply_one_scale)(const model_t *m, param_t *w, uint32_t example, float scale, float lr);
    // Optional: the sparse parameters some examples touch (see model.h).
    // of_test: idx are test examples.
    size_t (*sparse_keys)(const model_t *m, int of_test, const uint32_t *idx, size_t count, uint8_t *mark,
                          uint32_t *keys);
} model_ops_t;

// A sparse_keys for models whose block [0, S) is one row of `width`
// parameters per feature of a sparse dataset, feature f at [f*width,
// (f+1)*width): the rows of examples idx[0..count) of d, features from `dim`
// on (none in the training set) left out. mark has a byte per row.
size_t model_feature_rows_keys(const sparse_dataset_t *d, const uint32_t *idx, size_t count, size_t width, size_t dim,
                               uint8_t *mark, uint32_t *keys);

// Every workspace starts with this header.
typedef struct model_ws_header {
    const model_ops_t *ops;
    float *param_copy;  // (num_params) dense models' private copy, else NULL
    int copy_current;  // the copy already holds w: skip the next refresh
} model_ws_header_t;

// Every model struct starts with this header.
struct model {
    const model_ops_t *ops;
    const char *name;  // its descriptor's name (model_registry.h)
    size_t num_train;
    size_t num_test;
    int grad_dense;
    metric_kind_t metric;
    size_t sparse_params;  // parameters [0, sparse_params) form a sparse block (model_num_sparse_params)
};

#endif
