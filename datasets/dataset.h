#ifndef ASGD_DATASETS_DATASET_H
#define ASGD_DATASETS_DATASET_H
// In-memory datasets, one struct per model family. Caller-allocated structs:
// x_init zeroes, x_alloc sizes the arrays, x_free releases them (safe after init).
// Every loader fills its output only on success; on error the output stays empty.
#include <stddef.h>
#include <stdint.h>

// Which of the three sets below a model reads.
typedef enum data_kind {
    DATA_KIND_DENSE,  // dense_dataset_t: images
    DATA_KIND_SPARSE,  // sparse_dataset_t: libsvm
    DATA_KIND_RATINGS,  // ratings_t
} data_kind_t;

// Dense labelled examples (images).
typedef struct dense_dataset {
    size_t n;  // examples
    size_t dim;  // features per example
    size_t n_classes;  // labels are in [0, n_classes)
    float *x;  // (n, dim) row-major; pixels scaled to [0, 1]
    int32_t *y;  // (n)
} dense_dataset_t;

// The most distinct class labels a file may hold (a model file's limit too).
#define DATASET_MAX_CLASSES 1024
// The longest string label, in bytes (a model file keeps every class's name).
#define DATASET_MAX_LABEL_BYTES 64

// Sparse labelled examples in CSR form. Files (libsvm, CSV) carry integer
// labels: the distinct ones, ascending, are classes 0..n_classes-1 (labels[k]
// is class k's label, cls[i] example i's class). A CSV file's labels may be
// strings instead: then label_text holds the class names, the distinct ones in
// byte order (strcmp), each NUL-terminated, one after another, and labels[k]
// is k. y is the binary view that
// logreg and svm train on: with two classes, class 0 -> -1 and class 1 -> +1;
// with one, +1 for a label > 0, else -1; with more, the same (binary models
// refuse such sets). Generated sets have y only (n_classes 0, labels and cls
// NULL): their class is y > 0.
typedef struct sparse_dataset {
    size_t n;  // examples
    size_t dim;  // features (largest index + 1, or as declared)
    size_t nnz;  // stored non-zeros
    size_t *row_ptr;  // (n + 1); example i owns [row_ptr[i], row_ptr[i+1])
    uint32_t *col;  // (nnz) 0-based feature index, strictly increasing within a row
    float *val;  // (nnz)
    float *y;  // (n) -1 or +1
    size_t n_classes;  // distinct labels (0: y only)
    int32_t *labels;  // (n_classes) ascending, or NULL
    int32_t *cls;  // (n) class in [0, n_classes), or NULL
    char *label_text;  // n_classes names (string labels), or NULL: the labels are integers
} sparse_dataset_t;

// (user, item, rating) triples with dense 0-based ids.
typedef struct ratings {
    size_t n;  // ratings
    size_t n_users;  // user ids are in [0, n_users)
    size_t n_items;  // item ids are in [0, n_items)
    uint32_t *user;  // (n)
    uint32_t *item;  // (n)
    float *rating;  // (n)
} ratings_t;

void dense_dataset_init(dense_dataset_t *d);
int dense_dataset_alloc(dense_dataset_t *d, size_t n, size_t dim, size_t n_classes, char *err, size_t err_len);
void dense_dataset_free(dense_dataset_t *d);

void sparse_dataset_init(sparse_dataset_t *d);
int sparse_dataset_alloc(sparse_dataset_t *d, size_t n, size_t dim, size_t nnz, char *err, size_t err_len);
void sparse_dataset_free(sparse_dataset_t *d);

// Example i's class: cls[i], or y[i] > 0 for a set without classes.
static inline int32_t sparse_dataset_class(const sparse_dataset_t *d, size_t i) {
    return d->cls ? d->cls[i] : d->y[i] > 0.0f;
}
// Its classes: n_classes, or 2 for a set without classes.
static inline size_t sparse_dataset_num_classes(const sparse_dataset_t *d) { return d->cls ? d->n_classes : 2; }

// The labels a binary model's classes -1 and +1 stand for: a two-class set's
// own, else -1 and +1.
static inline void sparse_dataset_binary_labels(const sparse_dataset_t *d, int32_t out[2]) {
    int two = d->cls && d->n_classes == 2;
    out[0] = two ? d->labels[0] : -1;
    out[1] = two ? d->labels[1] : +1;
}

// The names of those two labels (string labels), or NULL.
static inline const char *sparse_dataset_binary_label_text(const sparse_dataset_t *d) {
    return d->cls && d->n_classes == 2 ? d->label_text : NULL;
}

// Gives d (n examples allocated) the classes labels[0..k) (ascending,
// distinct, copied) and every example class 0 (y -1). 0, or -1 with err.
int sparse_dataset_set_classes(sparse_dataset_t *d, const int32_t *labels, size_t k, char *err, size_t err_len);
// Takes over a file reader's arrays as the set d: d holds n, dim, nnz,
// row_ptr, col, val, cls, labels, label_text and n_classes as the reader grew
// them (capacities may exceed the counts; col and val may be NULL without
// non-zeros). cls NULL: the examples have no classes (y -1 each, labels
// NULL); cls with labels NULL: allocating the labels failed. Trims the
// arrays, gives col and val valid pointers and computes y. 0, or -1 out of
// memory, with err naming `name` and every array freed (d empty).
int sparse_dataset_adopt(sparse_dataset_t *d, const char *name, char *err, size_t err_len);

// Gives d's k classes the names in label_text (copied; NULL: integer labels).
int sparse_dataset_set_label_text(sparse_dataset_t *d, const char *label_text, char *err, size_t err_len);

// Rewrites d's classes as classes of labels[0..k) (another set's: a model's or
// a training set's; label_text their names, or NULL for integer labels), which
// must hold each of d's labels; a set without classes is left alone. -1 with
// err naming `name` and the label otherwise.
int sparse_dataset_remap(sparse_dataset_t *d, const int32_t *labels, const char *label_text, size_t k, const char *name,
                         char *err, size_t err_len);

// Labels to classes, shared by the file readers. label_class: the class of
// label among labels[0..k) (ascending), or -1 when absent. classes_of: the
// distinct values of raw[0..n), ascending, into a new *labels (*k of them;
// more than DATASET_MAX_CLASSES is an error naming them `name`), and raw
// rewritten in place to class indices. binary_y: y of a class (above).
int32_t dataset_label_class(const int32_t *labels, size_t k, int32_t label);
int dataset_classes_of(const char *name, int32_t *raw, size_t n, int32_t **labels, size_t *k, char *err,
                       size_t err_len);
float dataset_binary_y(const int32_t *labels, size_t k, int32_t cls);
// "1, 2, 3" (at most the first 16, then "..."): a set's labels for messages.
void dataset_labels_text(const int32_t *labels, size_t k, char *out, size_t out_len);
// The same for a set's labels whatever their kind: names ("'setosa',
// 'versicolor'") or integers.
void sparse_dataset_labels_text(const sparse_dataset_t *d, char *out, size_t out_len);

// String labels: the bytes of k names in label_text, one after another, each
// NUL-terminated. label_text_bytes: how many bytes they take. label_names:
// pointers to each (names[0..k)). label_text_find: the class of name among
// the k names (names, ascending by strcmp), or -1.
size_t dataset_label_text_bytes(const char *label_text, size_t k);
void dataset_label_names(const char *label_text, size_t k, const char **names);
int32_t dataset_label_name_class(const char *const *names, size_t k, const char *name);
// "'a', 'b', 'c'" (at most the first 16, then "..."): names for messages.
void dataset_label_names_text(const char *label_text, size_t k, char *out, size_t out_len);

void ratings_init(ratings_t *r);
int ratings_alloc(ratings_t *r, size_t n, size_t n_users, size_t n_items, char *err, size_t err_len);
void ratings_free(ratings_t *r);

// Copies the examples named by idx (count of them, each < src->n) into dst
// (which must be freshly initialised). Dimensions and classes carry over.
int sparse_dataset_subset(const sparse_dataset_t *src, const uint32_t *idx, size_t count, sparse_dataset_t *dst,
                          char *err, size_t err_len);
int ratings_subset(const ratings_t *src, const uint32_t *idx, size_t count, ratings_t *dst, char *err, size_t err_len);

#endif
