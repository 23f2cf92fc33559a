#ifndef ASGD_ENGINE_RUN_MODEL_FILE_H
#define ASGD_ENGINE_RUN_MODEL_FILE_H
// Model files: what --save-model writes and `asgd predict` / `asgd eval` read.
// A file names the model's kind (its name in the model registry, whose
// descriptor describes and rebuilds it), the shapes that rebuild it, its class labels
// and its float32 parameters (all of them, or one contiguous part: a
// parameter-server shard's). docs/model_file.md gives the layout, byte by byte:
//
//   header  256 bytes: "ASGDMODL", u32 version (1, or 2 with class names),
//           u32 header size (256), kind name (16 bytes, NUL-padded), u64
//           n_params, first, count, dim, classes, n_hidden, hidden[8],
//           embed_dim, rank, users, items, f32 mean, u32 sparse_input,
//           u32 label_text_bytes (0 in version 1), the training run's split
//           (u32 recorded, u32 test_data, 4 zero bytes, f64 test_frac, u64
//           seed, train_limit, test_limit, train and test fingerprints),
//           zero padding
//   labels  classes x i32
//   names   label_text_bytes: version 2 only (string labels): each class's
//           name, NUL-terminated, in class order
//   params  count x f32: parameters [first, first + count) of n_params
//   crc     u32 CRC-32 (IEEE, as zlib's) of every byte before it
//
// All fields little-endian. A file that is not a model file (no magic: for
// instance the headerless float32 dump of older versions), of another format
// version, truncated, longer than its header says, inconsistent or corrupt
// is refused with a message naming the file and what was expected.
#include <stddef.h>
#include <stdint.h>

#include "engine/data/data_source.h"
#include "engine/core/model.h"
#include "engine/core/params.h"
#include "engine/models/model_registry.h"

#define MODEL_FILE_MAGIC "ASGDMODL"
#define MODEL_FILE_VERSION 1u  // integer labels
#define MODEL_FILE_VERSION_NAMES 2u  // string labels: the classes' names follow their labels
#define MODEL_FILE_HEADER_BYTES 256u
#define MODEL_FILE_MAX_HIDDEN MODEL_SHAPE_MAX_HIDDEN
#define MODEL_FILE_MAX_CLASSES MODEL_SHAPE_MAX_CLASSES
#define MODEL_FILE_MAX_LABEL_TEXT (MODEL_FILE_MAX_CLASSES * (DATASET_MAX_LABEL_BYTES + 1))

// The training run's data and split, as a file records them for asgd eval:
// with the same --data and these flags, --split test scores the rows the run
// held out. Files of builds before the record have zeros (recorded 0).
typedef struct model_file_split {
    uint32_t recorded;  // 1: the fields below are the training run's
    uint32_t test_data;  // 1: its test set was a file of its own (--test-data): no split
    double test_frac;
    uint64_t seed, train_limit, test_limit;
    uint64_t train_fingerprint, test_fingerprint;  // data_fingerprint.h of its training and test sets
} model_file_split_t;

typedef struct model_file_info {
    const model_descriptor_t *model;  // the kind: a registered model (model_registry.h)
    uint64_t n_params;  // the whole model's
    uint64_t first, count;  // the parameters stored: [first, first + count)
    uint64_t dim;  // input features (logreg, svm, embmlp: sparse; mlp, softmax: dense); mf: 0
    uint64_t classes;  // output classes: 2 for the binary models, 0 for mf
    uint64_t n_hidden, hidden[MODEL_FILE_MAX_HIDDEN];  // mlp's widths; embmlp's one; else 0
    uint64_t embed_dim;  // embmlp
    uint64_t rank, users, items;  // mf
    float mean;  // mf: the training ratings' mean, the prediction's offset
    uint32_t sparse_input;  // 1: softmax or mlp trained on sparse input (libsvm, CSV); 0 otherwise
    int32_t labels[MODEL_FILE_MAX_CLASSES];  // class k's label: the training data's (fashion-mnist: 0..9)
    uint32_t label_text_bytes;  // string labels: the bytes of their names in label_text; 0: integer labels
    char label_text[MODEL_FILE_MAX_LABEL_TEXT];  // class k's name, each NUL-terminated, in class order
    // Not part of the model's identity (model_file_join takes the first part's).
    model_file_split_t split;
} model_file_info_t;

typedef struct model_file {
    model_file_info_t info;
    float *params;  // info.count values
} model_file_t;

// What describes model m (kind, shapes, labels); first = 0, count = n_params;
// no split recorded (model_file_split_of fills one).
// Returns 0, or -1 with err (a model this format does not describe: one whose
// descriptor has no model-file hooks).
int model_file_info_of(const model_t *m, model_file_info_t *out, char *err, size_t err_len);

// The split record of a run that trained on data (loaded with these flags).
void model_file_split_of(const data_bundle_t *data, double test_frac, uint64_t seed, size_t train_limit,
                         size_t test_limit, int test_data, model_file_split_t *out);

// Writes parameters [info->first, info->first + info->count) (values holds
// exactly those) to path, through path.tmp renamed into place. `flag` names
// the option in messages ("--save-model"). Returns 0, or -1 with err.
int model_file_write(const char *path, const char *flag, const model_file_info_t *info, const float *values, char *err,
                     size_t err_len);

void model_file_init(model_file_t *f);
void model_file_free(model_file_t *f);

// Reads and checks one file (a whole model or a part). Returns 0, or -1 with
// err "PATH: what is wrong; what was expected".
int model_file_read(const char *path, model_file_t *out, char *err, size_t err_len);

// One whole model from n files of the same model, applied in order (a later
// file's parameters replace an earlier one's where they overlap): the
// servers' shards of a run, or worker 0's replica then the servers' sparse
// part under hybrid. Together they must cover every parameter.
int model_file_join(const char *const *paths, size_t n, model_file_t *out, char *err, size_t err_len);

// The kind of data the model reads (sparse for sparse_input).
data_kind_t model_file_data_kind(const model_file_info_t *info);

// The classes' names (datasets/dataset.h's label_text) for a model trained on
// string labels, else NULL.
const char *model_file_label_text(const model_file_info_t *info);
// Class k's label as predictions print it: its name, or its integer in buf.
const char *model_file_label(const model_file_info_t *info, size_t k, char buf[16]);

// A saved model, rebuilt over test examples to predict or evaluate with.
typedef struct model_file_model {
    model_t *model;  // its test set is the caller's
    param_t *w;  // the file's parameters
    data_bundle_t shape;  // a one-example training set of the file's shape (the model borrows it)
} model_file_model_t;

// Builds the model of a whole file f over `test` (dense, sparse or ratings as
// model_file_data_kind says; borrowed: it must outlive out). Data that do not
// fit the model (more features, another input width, more classes, unknown
// users or items) are refused: err names `data_name` and what the model takes.
int model_file_instantiate(const model_file_t *f, const void *test, const char *data_name, model_file_model_t *out,
                           char *err, size_t err_len);
void model_file_model_free(model_file_model_t *mm);

#endif
