#ifndef ASGD_DATASETS_RATINGS_IO_H
#define ASGD_DATASETS_RATINGS_IO_H
// Ratings files, one rating per line:
//   user item rating [timestamp]
// with fields separated by ',' (spaces around it allowed), tabs or spaces, or
// MovieLens' "::" (user::item::rating::timestamp). The optional 4th field must
// be a number and is ignored. If the first line that is not blank or a comment
// has letters and no digits it is a header (userId,movieId,rating,timestamp)
// and is skipped. `#` starts a comment; blank lines, CRLF and a UTF-8 BOM are
// fine. Ids are any non-negative integers (up to 2^64 - 1); they are remapped
// to dense 0-based ids in order of first appearance, users and items separately.
// Ratings must be finite and within float range. The file may be compressed
// (gzip, xz, zstd), a pipe, or "-" for stdin (datasets/data_input.h: read
// transparently, bounded).
//
// Both functions return 0 on success and -1 on error with ONE line in err:
// "file:line:column: what was expected" for bad input, "file: what failed:
// strerror" for I/O errors.
#include <stddef.h>

#include "datasets/dataset.h"

// out is initialised first and filled only on success; the caller then owns its
// arrays (ratings_free). A file with no ratings is an error.
int ratings_load(const char *path, ratings_t *out, char *err, size_t err_len);

// Two files whose ids mean the same users and items (a training file and its
// test file): second's ids are numbered after out's, so an id in both files is
// one user (item); second's n_users/n_items count both files' ids. Errors as
// ratings_load's, naming the file at fault; on error neither is filled.
int ratings_load_pair(const char *path, const char *second_path, ratings_t *out, ratings_t *second, char *err,
                      size_t err_len);

// ratings_load over len bytes in memory (a file's contents, plain or gzipped);
// name stands for the path in messages.
int ratings_parse(const char *name, const char *text, size_t len, ratings_t *out, char *err, size_t err_len);

// Writes CSV `user,item,rating` with the dense ids, ratings as printf's "%.9g"
// (exact float round trip), no header. Creates or truncates path.
int ratings_write(const char *path, const ratings_t *r, char *err, size_t err_len);

#endif
