#ifndef ASGD_ENGINE_MODELS_MODEL_REGISTRY_H
#define ASGD_ENGINE_MODELS_MODEL_REGISTRY_H
// The models the engine can train, by name: one descriptor per --model name.
// The built-ins (engine/models/model_*.c) come first, in a fixed order; a
// program adds its own with model_registry_add before parsing flags. Everything
// that names models — --model's choices, `asgd train --help`, per-model
// defaults, model files, checkpoints, summaries — reads this registry.
//
// Registration is not synchronised: add models before any thread reads the
// registry (at the start of main), then only look them up.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"
#include "engine/core/flags.h"
#include "engine/core/model.h"

#define MODEL_REGISTRY_MAX 32  // models, built-ins included
#define MODEL_NAME_MAX 15  // characters of a name (a model file's kind field holds 16 bytes)
#define MODEL_MAX_FLAGS 8  // a model's own flags
#define MODEL_REGISTRY_MAX_FLAGS 16  // distinct flag names over all models
#define MODEL_OPTIONS_BYTES 256  // room for one model's parsed options
#define MODEL_SHAPE_MAX_HIDDEN 8
#define MODEL_SHAPE_MAX_CLASSES 1024

// Storage for one model's parsed options.
typedef union model_options {
    max_align_t align;
    unsigned char bytes[MODEL_OPTIONS_BYTES];
} model_options_t;

// What a test example's outputs (model_predict) mean, for `asgd predict`.
typedef enum model_output {
    MODEL_OUTPUT_CLASS_LOGITS,  // one logit per class: the label of the largest, softmax probability
    MODEL_OUTPUT_LOGISTIC,  // one score s: label of sign(s), probability 1 / (1 + exp(-|s|))
    MODEL_OUTPUT_MARGIN,  // one score s: label of sign(s) and s itself
    MODEL_OUTPUT_VALUE,  // one predicted value (a rating)
} model_output_t;

// A model's shapes as a model file stores them (docs/model_file.md): enough
// to rebuild it without its training data. Fields a model does not use are 0.
typedef struct model_shape {
    uint64_t dim;  // input features
    uint64_t classes;  // output classes: 2 for binary models, 0 for regression
    uint64_t n_hidden, hidden[MODEL_SHAPE_MAX_HIDDEN];
    uint64_t embed_dim;
    uint64_t rank, users, items;
    float mean;
    uint32_t sparse_input;  // 1: a model on dense data built over sparse input (create_sparse)
    int32_t labels[MODEL_SHAPE_MAX_CLASSES];  // class k's label
    const char *label_text;  // string labels: the classes' names (datasets/dataset.h's label_text), or NULL
} model_shape_t;
_Static_assert(MODEL_SHAPE_MAX_CLASSES >= DATASET_MAX_CLASSES, "a model file holds every class a file may have");

// Per-model defaults of the shared training flags.
typedef struct model_defaults {
    double lr;  // --lr
    size_t batch;  // --batch
    double l2;  // --l2
    const char *data;  // --data
} model_defaults_t;

typedef struct model_descriptor {
    const char *name;  // --model NAME: 1..MODEL_NAME_MAX of [a-z0-9_-], starting with a letter
    const char *summary;  // one line for --help
    data_kind_t data;  // the data it trains on
    metric_kind_t metric;  // what its evaluation measures: --target-acc or --target-rmse
    model_output_t output;
    model_defaults_t defaults;

    // Its own flags, parsed into opts (a model_options_t; options_size bytes used).
    size_t options_size;  // <= MODEL_OPTIONS_BYTES
    size_t n_flags;  // <= MODEL_MAX_FLAGS
    void (*options_default)(void *opts);  // optional: zero bytes otherwise
    // Writes its n_flags specs, whose targets lie in opts.
    void (*flags)(void *opts, flag_spec_t *specs);
    // Optional: after parsing, checks across its flags and derived values
    // (err names the flag). `specs` are its own, `seen` set. Returns 0 or -1.
    int (*options_finish)(void *opts, const flag_spec_t *specs, char *err, size_t err_len);

    // Builds the model over borrowed training and test sets of kind `data`
    // (dense_dataset_t, sparse_dataset_t or ratings_t), with the finished
    // options and the --l2 strength; seed is --seed (parameters are
    // initialised separately, by model_init_params). NULL with err on failure.
    model_t *(*create)(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                       size_t err_len);
    // Optional, for a model on dense data that also reads sparse data
    // (softmax and mlp: libsvm or CSV files, gen:sparse): create over
    // sparse_dataset_t sets. Such a model reads sparse data from every --data
    // but its dense source (data_spec_kind, engine/data/data_source.h); the
    // GPU steps do not run it (`gpu` covers dense input only).
    model_t *(*create_sparse)(const void *train, const void *test, const void *opts, double l2, uint64_t seed,
                              char *err, size_t err_len);

    // Whether --device cuda runs it (engine/gpu runs the model_layout kinds
    // LINEAR, MLP and MF). 0: refused up front.
    int gpu;
    // Its parameters split into a sparse part and a dense part
    // (model_num_sparse_params > 0): --sync hybrid runs it.
    int split;

    // Model files (optional, all three or none: without them --save-model
    // refuses the model). shape_of describes a built model (a message in err
    // when the format cannot hold it); shape_params is the parameter count a
    // shape implies (0: no such model); options_of_shape sets the options that
    // rebuild it (after options_default) from a training set of one example.
    int (*shape_of)(const model_t *m, model_shape_t *out, char *err, size_t err_len);
    uint64_t (*shape_params)(const model_shape_t *s);
    void (*options_of_shape)(const model_shape_t *s, void *opts);
} model_descriptor_t;

// Adds a model after the built-ins. Refuses (-1, with a message in err) an
// invalid name, a name already taken, a descriptor without create or flags
// its n_flags needs, a flag another model declares with another type, more
// than MODEL_REGISTRY_MAX_FLAGS distinct flag names in all, or a full
// registry. A model's flags must not reuse a training flag's name (--lr ...). The descriptor must outlive the registry (a static).
int model_registry_add(const model_descriptor_t *d, char *err, size_t err_len);

// d built over train and test of `kind` (create, or create_sparse for sparse
// data on a model whose own kind is dense). NULL with err when d does not
// read that kind.
model_t *model_create(const model_descriptor_t *d, data_kind_t kind, const void *train, const void *test,
                      const void *opts, double l2, uint64_t seed, char *err, size_t err_len);

// The model --model defaults to.
const model_descriptor_t *model_registry_default(void);

// The distinct names of every registered model's own flags, in order of
// first declaration: n (<= MODEL_REGISTRY_MAX_FLAGS) of them into names,
// with the spec of the first model declaring each (targets are scratch).
size_t model_registry_flag_names(const char **names, flag_spec_t *first_spec);

// The model called name, or NULL.
const model_descriptor_t *model_registry_find(const char *name);
// Its position (model_registry_at(i) == d), or -1 when not registered.
int model_registry_index(const model_descriptor_t *d);

size_t model_registry_count(void);
// Built-ins first, in a stable order, then models added, in order; NULL past the end.
const model_descriptor_t *model_registry_at(size_t i);

// The registered names for which keep (NULL: all) is true, joined by sep,
// into out (truncated to out_len). Returns how many.
size_t model_registry_names(char *out, size_t out_len, const char *sep, int (*keep)(const model_descriptor_t *d));

// The descriptor's default options with its flags' specs (pointing into
// opts): what the command line parses a model's flags into.
void model_options_init(const model_descriptor_t *d, void *opts, flag_spec_t *specs);

#endif
