#ifndef ASGD_DATASETS_LIBSVM_H
#define ASGD_DATASETS_LIBSVM_H
// libsvm / svmlight sparse text format: `label idx:val idx:val ... [# comment]`.
// Indices are 1-based in the file and stored 0-based; they must be strictly
// increasing within a line. Labels are all in {-1,+1} or all in {0,1} (0 -> -1).
// A `qid:N` token after the label is accepted and ignored; blank lines, `#`
// comments and CRLF line ends are fine.
#include <stddef.h>

#include "datasets/dataset.h"  // defines: sparse_dataset_t

// dim > 0 fixes the feature count (an index above it is an error); dim == 0
// infers it as the largest index. On error `out` stays empty and err names
// file:line:column and what was expected.
int libsvm_load(const char *path, size_t dim, sparse_dataset_t *out, char *err, size_t err_len);

// Writes labels as +1/-1 and values with 9 significant digits (exact float round trip).
int libsvm_write(const char *path, const sparse_dataset_t *d, char *err, size_t err_len);

// Reads a whole file into a NUL-terminated buffer (caller frees); shared by the text readers.
int text_file_read(const char *path, char **out, size_t *out_len, char *err, size_t err_len);

#endif
