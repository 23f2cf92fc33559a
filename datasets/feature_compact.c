// Renumbering a data set's features to the ones it uses (feature_compact.h).
#include "datasets/feature_compact.h"

#include <stdio.h>
#include <stdlib.h>

static void mark_used(const sparse_dataset_t *d, uint64_t *used) {
    for (size_t i = 0; i < d->nnz; i++) used[d->col[i] >> 6] |= UINT64_C(1) << (d->col[i] & 63);
}

// A feature's new number: the used features below it.
static uint32_t rank_of(const uint64_t *used, const uint32_t *before, uint32_t f) {
    uint64_t below = used[f >> 6] & ((UINT64_C(1) << (f & 63)) - 1);
    return before[f >> 6] + (uint32_t)__builtin_popcountll(below);
}

static void renumber(sparse_dataset_t *d, const uint64_t *used, const uint32_t *before) {
    for (size_t i = 0; i < d->nnz; i++) d->col[i] = rank_of(used, before, d->col[i]);
}

int feature_compact(sparse_dataset_t *train, sparse_dataset_t *test, uint32_t **rows, size_t *n, char *err,
                    size_t err_len) {
    *rows = NULL;
    *n = 0;
    size_t dim = train->dim;
    if (test->dim > dim || dim == 0) return 1;
    // A bit per feature and a count per 64 of them: 1/6 of a byte per feature,
    // 33 MB at 200 million, for as long as the renumbering takes.
    size_t words = (dim + 63) / 64;
    uint64_t *used = calloc(words, sizeof *used);
    uint32_t *before = malloc(words * sizeof *before);
    if (!used || !before) {
        free(used);
        free(before);
        snprintf(err, err_len, "out of memory numbering the %zu features the data uses", dim);
        return -1;
    }
    mark_used(train, used);
    mark_used(test, used);
    size_t count = 0;
    for (size_t w = 0; w < words; w++) {
        before[w] = (uint32_t)count;
        count += (size_t)__builtin_popcountll(used[w]);
    }
    int rc = 1;
    if (count == 0 || count == dim) goto out;
    rc = -1;
    if (!(*rows = malloc(count * sizeof **rows))) {
        snprintf(err, err_len, "out of memory numbering the %zu features the data uses", count);
        goto out;
    }
    for (size_t w = 0, k = 0; w < words; w++)
        for (uint64_t bits = used[w]; bits; bits &= bits - 1)
            (*rows)[k++] = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
    renumber(train, used, before);
    renumber(test, used, before);
    train->dim = test->dim = count;
    *n = count;
    rc = 0;
out:
    free(used);
    free(before);
    return rc;
}

void feature_restore(sparse_dataset_t *train, sparse_dataset_t *test, const uint32_t *rows, size_t dim) {
    for (size_t i = 0; i < train->nnz; i++) train->col[i] = rows[train->col[i]];
    for (size_t i = 0; i < test->nnz; i++) test->col[i] = rows[test->col[i]];
    train->dim = test->dim = dim;
}
