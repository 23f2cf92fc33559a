#ifndef ASGD_ENGINE_DATA_DATA_SOURCE_H
#define ASGD_ENGINE_DATA_DATA_SOURCE_H
// Turns a --data spec into train and test sets:
//   fashion-mnist                 Debian's dataset-fashion-mnist (or --data-dir), official split
//   gen:sparse[:k=v,...]          generated RCV1-like sparse data (n, dim, nnz, zipf, noise, seed)
//   gen:ratings[:k=v,...]         generated low-rank ratings (users, items, rank, n, noise, seed)
//   PATH                          a libsvm file (logreg, svm, embmlp, softmax, mlp) or a ratings file (mf)
//   PATH.csv, PATH.tsv, csv:PATH  a dense CSV file (logreg, svm, embmlp, softmax, mlp; datasets/csv.h),
//                                 read into the sparse form; .gz after the extension is read too
// softmax and mlp read sparse data from every spec but fashion-mnist
// (data_spec_kind).
// Sets without their own test split are split with --test-frac, seeded, unless
// --test-data names the test set: then the training data is used whole and the
// test set is that file (a libsvm or ratings file, read by the same parser), or
// for dense models a directory of IDX files (t10k-images-idx3-ubyte[.gz] and
// t10k-labels-idx1-ubyte[.gz]). A libsvm test file is read at the training
// data's width (an index beyond it is an error at its file:line:column; a
// narrower file is fine); a ratings test file shares the training file's ids.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"
#include "engine/data/generate.h"

typedef struct data_options {
    const char *spec;
    const char *data_dir;  // NULL: the default Fashion-MNIST location
    size_t train_limit;  // 0: all
    size_t test_limit;  // 0: all
    double test_fraction;  // for sets without a test split
    uint64_t seed;  // generators' default seed and the split's seed
    const char *test_spec;  // --test-data: the test set (NULL: split the data with test_fraction)
    const char *label_column;  // CSV: --label-column (NULL: the first column)
    int csv_header;  // CSV: --csv-header (1: the first line names the columns; 0: detected)
} data_options_t;

typedef struct data_bundle {
    data_kind_t kind;
    dense_dataset_t dense_train, dense_test;
    sparse_dataset_t sparse_train, sparse_test;
    ratings_t ratings_train, ratings_test;
    char description[256];
} data_bundle_t;

// Where a --data spec says the data comes from, before anything is read.
typedef enum data_source {
    DATA_SOURCE_FASHION_MNIST,
    DATA_SOURCE_GEN_SPARSE,
    DATA_SOURCE_GEN_RATINGS,
    DATA_SOURCE_FILE,
    DATA_SOURCE_CSV,
} data_source_t;

typedef struct data_spec {
    data_source_t source;
    sparse_gen_config_t sparse;  // DATA_SOURCE_GEN_SPARSE: the generator's parameters
    ratings_gen_config_t ratings;  // DATA_SOURCE_GEN_RATINGS
    const char *path;  // DATA_SOURCE_FILE: the spec itself; DATA_SOURCE_CSV: after any "csv:"
} data_spec_t;

// The kind of data spec gives a model whose own kind is model_kind; a model
// that also reads sparse data (also_sparse: its descriptor's create_sparse)
// reads it from every spec but the dense source, fashion-mnist.
data_kind_t data_spec_kind(const char *spec, data_kind_t model_kind, int also_sparse);

// Parses a spec for a model that reads `kind` data; seed is the generators'
// default. Returns 0, or -1 with err naming the spec and what is wrong.
int data_spec_parse(const char *spec, data_kind_t kind, uint64_t seed, data_spec_t *out, char *err, size_t err_len);

void data_bundle_init(data_bundle_t *b);
int data_bundle_load(const data_options_t *o, data_kind_t kind, data_bundle_t *b, char *err, size_t err_len);
void data_bundle_free(data_bundle_t *b);

size_t data_bundle_num_train(const data_bundle_t *b);
size_t data_bundle_num_test(const data_bundle_t *b);

#endif
