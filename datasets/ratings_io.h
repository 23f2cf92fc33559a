#ifndef ASGD_DATASETS_RATINGS_IO_H
#define ASGD_DATASETS_RATINGS_IO_H
// Ratings files: one `user item rating [timestamp]` per line, separated by ',',
// tabs or spaces, or MovieLens' `user::item::rating::timestamp`. A first line
// that is not numeric (a header such as userId,movieId,rating,timestamp) is
// skipped; `#` comments and blank lines too. Ids are any non-negative integers,
// remapped to dense 0-based ids in order of first appearance.
#include <stddef.h>

#include "datasets/dataset.h"  // defines: ratings_t

int ratings_load(const char *path, ratings_t *out, char *err, size_t err_len);

// CSV `user,item,rating` with dense ids, no header; ratings with 9 significant digits.
int ratings_write(const char *path, const ratings_t *r, char *err, size_t err_len);

#endif
