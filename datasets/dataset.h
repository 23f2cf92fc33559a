#ifndef ASGD_DATASETS_DATASET_H
#define ASGD_DATASETS_DATASET_H
// In-memory datasets, one struct per model family. Caller-allocated structs:
// x_init zeroes, x_alloc sizes the arrays, x_free releases them (safe after init).
// Every loader fills its output only on success; on error the output stays empty.
#include <stddef.h>
#include <stdint.h>

// Which of the three sets below a model reads.
typedef enum data_kind {
    DATA_KIND_DENSE,    // dense_dataset_t: images
    DATA_KIND_SPARSE,   // sparse_dataset_t: libsvm
    DATA_KIND_RATINGS,  // ratings_t
} data_kind_t;

// Dense labelled examples (images).
typedef struct dense_dataset {
    size_t n;          // examples
    size_t dim;        // features per example
    size_t n_classes;  // labels are in [0, n_classes)
    float *x;          // (n, dim) row-major; pixels scaled to [0, 1]
    int32_t *y;        // (n)
} dense_dataset_t;

// Sparse binary-labelled examples in CSR form.
typedef struct sparse_dataset {
    size_t n;          // examples
    size_t dim;        // features (largest index + 1, or as declared)
    size_t nnz;        // stored non-zeros
    size_t *row_ptr;   // (n + 1); example i owns [row_ptr[i], row_ptr[i+1])
    uint32_t *col;     // (nnz) 0-based feature index, strictly increasing within a row
    float *val;        // (nnz)
    float *y;          // (n) -1 or +1
} sparse_dataset_t;

// (user, item, rating) triples with dense 0-based ids.
typedef struct ratings {
    size_t n;          // ratings
    size_t n_users;    // user ids are in [0, n_users)
    size_t n_items;    // item ids are in [0, n_items)
    uint32_t *user;    // (n)
    uint32_t *item;    // (n)
    float *rating;     // (n)
} ratings_t;

void dense_dataset_init(dense_dataset_t *d);
int dense_dataset_alloc(dense_dataset_t *d, size_t n, size_t dim, size_t n_classes, char *err, size_t err_len);
void dense_dataset_free(dense_dataset_t *d);

void sparse_dataset_init(sparse_dataset_t *d);
int sparse_dataset_alloc(sparse_dataset_t *d, size_t n, size_t dim, size_t nnz, char *err, size_t err_len);
void sparse_dataset_free(sparse_dataset_t *d);

void ratings_init(ratings_t *r);
int ratings_alloc(ratings_t *r, size_t n, size_t n_users, size_t n_items, char *err, size_t err_len);
void ratings_free(ratings_t *r);

// Copies the examples named by idx (count of them, each < src->n) into dst
// (which must be freshly initialised). Dimensions carry over.
int sparse_dataset_subset(const sparse_dataset_t *src, const uint32_t *idx, size_t count, sparse_dataset_t *dst, char *err, size_t err_len);
int ratings_subset(const ratings_t *src, const uint32_t *idx, size_t count, ratings_t *dst, char *err, size_t err_len);

#endif
