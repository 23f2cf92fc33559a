#ifndef ASGD_DATASETS_FEATURE_COMPACT_H
#define ASGD_DATASETS_FEATURE_COMPACT_H
// Renumbers a training and a test set's features to the ones they use: a
// process that trains on a few million of two hundred million features then
// holds a model of the few million (the servers keep the rest). The numbering
// keeps the order (feature a < b stays a < b), so rows stay sorted and a set of
// renumbered features, ascending, names the original ones ascending.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"

// Renumbers both sets' features to 0..n-1, where n is the number of distinct
// features either uses, and sets both dims to n; *rows (n entries, to free)
// names each new feature's original number. Returns 0; 1, changing nothing,
// when compacting would not shrink the features (every one is used, or the
// test set reaches past the training set's dim); -1 with err (out of memory).
int feature_compact(sparse_dataset_t *train, sparse_dataset_t *test, uint32_t **rows, size_t *n, char *err,
                    size_t err_len);

// Undoes feature_compact: the original numbers back, and both dims `dim`.
void feature_restore(sparse_dataset_t *train, sparse_dataset_t *test, const uint32_t *rows, size_t dim);

#endif
