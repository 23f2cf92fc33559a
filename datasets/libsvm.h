#ifndef ASGD_DATASETS_LIBSVM_H
#define ASGD_DATASETS_LIBSVM_H
// libsvm / svmlight sparse text format, one example per line:
//   label [qid:N] index:value index:value ... [# comment]
// Indices are 1-based in the file and stored 0-based; within a line they must be
// strictly increasing. Labels are integer class ids in any decimal form
// ("+1", "1", "-1", "0", "1.0", "7"): the distinct labels, ascending, become
// classes 0..K-1 (at most DATASET_MAX_CLASSES), recorded in the set's labels[];
// the binary view y maps two labels to -1 (the lower) and +1 (datasets/dataset.h).
// The optional qid:N token right after the label is ignored. Blank lines, `#`
// comments, CRLF line ends and a UTF-8 BOM are accepted; lines may be of any
// length. The file may be compressed (gzip, xz, zstd), a pipe, or "-" for
// stdin (datasets/data_input.h: read transparently, bounded). It is parsed in
// blocks on several threads (datasets/text_blocks.h): the same set, and the
// same first error, as one thread gives.
//
// libsvm_load and libsvm_write return 0 on success and -1 on error with ONE line in err:
// "file:line:column: what was expected" for bad input (columns count bytes from
// 1), "file: what failed: strerror" for I/O errors.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"

// The widest feature space accepted (2^32 - 2 = 4,294,967,294 features):
// every index fits the 32-bit columns and keys, with room for a model's bias
// after the last weight. A larger index is refused where it stands. A wide
// space costs the reader nothing; the model it implies is sized by the run:
// a worker of a distributed run holds the features its data uses, a server
// its shard, and every process refuses, before it allocates, a model the
// machine's available memory cannot hold (engine/run), so that a few bytes of
// text cannot make a run allocate gigabytes.
#define LIBSVM_MAX_DIM ((size_t)UINT32_MAX - 1)

// dim > 0 fixes the feature count (an index above it is an error); dim == 0
// infers it as the largest index in the file; either is at most
// LIBSVM_MAX_DIM. Values must be finite and within float range (|v| rounds to
// at most FLT_MAX); values too small for a float round to zero or a denormal,
// as strtof would. A file with no examples is an
// error. out is initialised first and filled only on success; the caller then
// owns its arrays (sparse_dataset_free).
int libsvm_load(const char *path, size_t dim, sparse_dataset_t *out, char *err, size_t err_len);

// libsvm_load with the classes of another set (a training set's labels[0..k),
// ascending): a label not among them is an error at its line. labels NULL:
// libsvm_load. A set whose labels are strings (label_text, its names, not
// NULL: a CSV file's) cannot classify a libsvm file's integers: refused.
int libsvm_load_mapped(const char *path, size_t dim, const int32_t *labels, const char *label_text, size_t k,
                       sparse_dataset_t *out, char *err, size_t err_len);

// libsvm_load for prediction (asgd predict): a line's label is optional and
// any number (an unlabelled line begins with its first index:value, or qid:),
// and is not kept; a feature whose index is above dim (> 0: the model's
// width) is skipped and counted in *beyond rather than refused. The set has
// no classes (n_classes 0, y -1: the caller gives it a model's) and width dim.
int libsvm_load_unlabelled(const char *path, size_t dim, sparse_dataset_t *out, size_t *beyond, char *err,
                           size_t err_len);

// libsvm_load over len bytes in memory (a file's contents, plain or gzipped;
// they need not end in '\n' or a NUL); name stands for the path in messages.
int libsvm_parse(const char *name, const char *text, size_t len, size_t dim, sparse_dataset_t *out, char *err,
                 size_t err_len);

// Writes labels as the set's own (labels[cls[i]]) or, for a set without
// classes, as +1/-1 (y > 0 is +1), and values exactly as printf's "%.9g",
// which round-trips every float bit for bit. Creates or truncates path.
int libsvm_write(const char *path, const sparse_dataset_t *d, char *err, size_t err_len);

#endif
