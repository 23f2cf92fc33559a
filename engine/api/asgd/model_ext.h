#ifndef ASGD_MODEL_EXT_H
#define ASGD_MODEL_EXT_H
// A model of your own, trained by asgd like the built-in ones: on Hogwild!,
// locked or sync threads, in the staleness simulator and in distributed
// runs. A program describes it with an asgd_model_def_t (its name, data,
// metric, defaults, flags, a constructor and an ops table) and registers it
// with asgd_model_register at the start of main; from then on it is one of
// --model's choices, `--help` lists it with its flags, and jobs, checkpoints
// and summaries name it. docs/api.md, examples/custom_model/.
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "asgd/export.h"

// ---- parameters and gradients ----------------------------------------------

// One shared parameter. Several threads step at once without locks
// (Hogwild!), so every read and write goes through asgd_param_get /
// asgd_param_set: relaxed atomics, a plain load or store on x86-64.
typedef _Atomic float asgd_param_t;

static inline float asgd_param_get(const asgd_param_t *p) {
    return atomic_load_explicit((asgd_param_t *)p, memory_order_relaxed);
}
static inline void asgd_param_set(asgd_param_t *p, float v) { atomic_store_explicit(p, v, memory_order_relaxed); }

// A minibatch's gradient over every parameter; loss_grad adds into it.
typedef struct asgd_grad asgd_grad_t;

// g[i] += v (i < the model's num_params).
ASGD_API void asgd_grad_add(asgd_grad_t *g, uint32_t i, float v);

// ---- the data a model is built over (borrowed: valid for the model's life) ----

typedef enum asgd_data_kind {
    ASGD_DATA_KIND_DENSE,  // images: asgd_dense_data_t (--data fashion-mnist)
    ASGD_DATA_KIND_SPARSE,  // libsvm, CSV, gen:sparse: asgd_sparse_data_t
    ASGD_DATA_KIND_RATINGS,  // user item rating: asgd_ratings_data_t
} asgd_data_kind_t;

typedef struct asgd_dense_data {
    size_t n, dim, n_classes;
    const float *x;  // (n, dim) row-major; pixels in [0, 1]
    const int32_t *y;  // (n) classes in [0, n_classes)
} asgd_dense_data_t;

typedef struct asgd_sparse_data {
    size_t n, dim, nnz;
    const size_t *row_ptr;  // (n + 1); example i owns [row_ptr[i], row_ptr[i + 1])
    const uint32_t *col;  // (nnz) feature index, increasing within an example
    const float *val;  // (nnz)
    const float *y;  // (n) -1 or +1
} asgd_sparse_data_t;

typedef struct asgd_ratings_data {
    size_t n, n_users, n_items;
    const uint32_t *user, *item;  // (n) ids in [0, n_users), [0, n_items)
    const float *rating;  // (n)
} asgd_ratings_data_t;

// One training or test set; only the member of its kind is filled.
typedef struct asgd_data {
    asgd_data_kind_t kind;
    asgd_dense_data_t dense;
    asgd_sparse_data_t sparse;
    asgd_ratings_data_t ratings;
} asgd_data_t;

// ---- what a model computes --------------------------------------------------

typedef enum asgd_metric {
    ASGD_METRIC_ACCURACY,  // fraction of test examples right (--target-acc)
    ASGD_METRIC_RMSE,  // root mean squared error (--target-rmse)
} asgd_metric_t;

// What predict's outputs mean, for `asgd predict`.
typedef enum asgd_output {
    ASGD_OUTPUT_CLASS_LOGITS,  // one logit per class
    ASGD_OUTPUT_LOGISTIC,  // one score s: label sign(s), P = 1 / (1 + exp(-|s|))
    ASGD_OUTPUT_MARGIN,  // one score s: label sign(s)
    ASGD_OUTPUT_VALUE,  // one predicted value (a rating)
} asgd_output_t;

// Sums over test examples: evaluate adds to them.
typedef struct asgd_eval_sums {
    double loss_sum;  // data loss, no regulariser
    double metric_sum;  // correct predictions (accuracy) or squared errors (RMSE)
    size_t count;  // examples
} asgd_eval_sums_t;

// The operations on a built model (self: what create returned). Several
// threads call them at once on one model, each with its own workspace.
typedef struct asgd_model_ops {
    size_t (*num_params)(const void *self);
    // Mean objective of training examples idx[0..count) (loss plus the
    // regulariser); its gradient added into g (clear on entry).
    double (*loss_grad)(const void *self, const asgd_param_t *w, const uint32_t *idx, size_t count, asgd_grad_t *g,
                        void *ws);
    // Adds test examples [begin, end)'s loss and metric to sums.
    void (*evaluate)(const void *self, const asgd_param_t *w, size_t begin, size_t end, void *ws,
                     asgd_eval_sums_t *sums);
    // One output per test example in [begin, end) into out[i - begin].
    void (*predict)(const void *self, const asgd_param_t *w, size_t begin, size_t end, void *ws, double *out);
    // Optional below.
    void (*init_params)(const void *self, asgd_param_t *w, uint64_t seed);  // NULL: all zero
    void (*describe)(const void *self, char *out, size_t out_len);  // NULL: the name
    double (*flops_per_example)(const void *self);  // NULL: 0
    // One thread's scratch for minibatches of at most max_batch examples
    // (NULL with err on failure). NULL ws_new: ws is NULL.
    void *(*ws_new)(const void *self, size_t max_batch, char *err, size_t err_len);
    void (*ws_destroy)(void *ws);
    void (*destroy)(void *self);  // NULL: nothing to free
} asgd_model_ops_t;

// ---- its own flags, parsed into its options struct ---------------------------

typedef enum asgd_flag_type {
    ASGD_FLAG_BOOL,  // int, set to 1 when given
    ASGD_FLAG_SIZE,  // size_t, within [min, max]
    ASGD_FLAG_DOUBLE,  // double, finite, within [min, max]
    ASGD_FLAG_STRING,  // const char *
} asgd_flag_type_t;

typedef struct asgd_model_flag {
    const char *name;  // without dashes: "margin" is --margin
    asgd_flag_type_t type;
    size_t offset;  // of its field in the options struct: offsetof(my_options_t, margin)
    const char *value_name;  // in --help: "M"
    const char *help;  // one line
    double min, max;  // range of a number; both 0: unchecked
} asgd_model_flag_t;

// ---- the model as a --model ----------------------------------------------------

typedef struct asgd_model_def {
    const char *name;  // --model NAME: 1 to 15 of a-z, 0-9, _ and -, starting with a letter
    const char *summary;  // one line for --help
    asgd_data_kind_t data;
    asgd_metric_t metric;
    asgd_output_t output;
    int grad_dense;  // 1: loss_grad writes every parameter (else a few per example)
    // Defaults of the shared flags when the job does not set them.
    double default_lr;
    size_t default_batch;
    double default_l2;
    const char *default_data;  // --data
    // Its options: a struct of options_size bytes (at most 256), set by
    // options_default (NULL: all zero), then by its flags.
    size_t options_size;
    void (*options_default)(void *opts);
    size_t n_flags;  // at most 8
    const asgd_model_flag_t *flags;
    // Builds the model over train and test (of kind `data`) with the parsed
    // options, --l2 and --seed; returns self, or NULL with a line in err.
    void *(*create)(const asgd_data_t *train, const asgd_data_t *test, const void *opts, double l2, uint64_t seed,
                    char *err, size_t err_len);
    const asgd_model_ops_t *ops;
} asgd_model_def_t;

// Makes def a --model. def, its flags and ops must outlive the program (a
// static). Call before anything reads the models (at the start of main, and
// before asgd_run_role: a distributed run's servers and workers are this
// program again). Returns 0, or -1 with err: a missing create or required
// op, a flag outside the options, a name taken, too many models or flags.
ASGD_API int asgd_model_register(const asgd_model_def_t *def, char *err, size_t err_len);

#endif
