// feature_compact: a training and a test set renumbered to the features they
// use, in order, with the map back to the original numbers exact, both dims the
// count used, and feature_restore giving back every original number; nothing
// changes when every feature is used or the test set reaches past the
// training set's dim.
#include "datasets/feature_compact.h"
#include "tests/support/test_support.h"

// A set of rows given as feature lists ending in UINT32_MAX, each value 1.
static void make(sparse_dataset_t *d, size_t dim, const uint32_t *features, size_t n_rows) {
    char err[256];
    size_t nnz = 0, rows = 0;
    for (const uint32_t *f = features; rows < n_rows; f++) *f == UINT32_MAX ? rows++ : nnz++;
    CHECK(sparse_dataset_alloc(d, n_rows, dim, nnz, err, sizeof err) == 0);
    size_t at = 0, row = 0;
    for (const uint32_t *f = features; row < n_rows; f++) {
        if (*f == UINT32_MAX) {
            d->row_ptr[++row] = at;
            continue;
        }
        d->col[at] = *f;
        d->val[at++] = 1.0f;
    }
}

static void check_cols(const sparse_dataset_t *d, const uint32_t *want, size_t n) {
    CHECK(d->nnz == n);
    for (size_t i = 0; i < n; i++) CHECK(d->col[i] == want[i]);
}

int main(void) {
    char err[256];
    enum { END = UINT32_MAX };
    static const uint32_t train_rows[] = {5, 100, END, 7, END, 5, 999, END};
    static const uint32_t test_rows[] = {3, 100, END};
    sparse_dataset_t train, test;
    make(&train, 1000, train_rows, 3);
    make(&test, 1000, test_rows, 1);
    uint32_t *rows;
    size_t n;
    CHECK(feature_compact(&train, &test, &rows, &n, err, sizeof err) == 0);
    static const uint32_t used[] = {3, 5, 7, 100, 999};
    CHECK(n == 5 && train.dim == 5 && test.dim == 5);
    for (size_t k = 0; k < n; k++) CHECK(rows[k] == used[k]);
    static const uint32_t train_new[] = {1, 3, 2, 1, 4}, test_new[] = {0, 3};
    check_cols(&train, train_new, 5);
    check_cols(&test, test_new, 2);
    feature_restore(&train, &test, rows, 1000);
    static const uint32_t train_back[] = {5, 100, 7, 5, 999}, test_back[] = {3, 100};
    check_cols(&train, train_back, 5);
    check_cols(&test, test_back, 2);
    CHECK(train.dim == 1000 && test.dim == 1000);
    free(rows);
    sparse_dataset_free(&train);
    sparse_dataset_free(&test);

    // Every feature used: nothing to gain, nothing changed.
    static const uint32_t all_rows[] = {0, 2, END, 1, END};
    make(&train, 3, all_rows, 2);
    make(&test, 3, test_back, 0);
    CHECK(feature_compact(&train, &test, &rows, &n, err, sizeof err) == 1 && rows == NULL && n == 0);
    check_cols(&train, (const uint32_t[]){0, 2, 1}, 3);
    CHECK(train.dim == 3);
    sparse_dataset_free(&train);
    sparse_dataset_free(&test);

    // A test set wider than the training set: its extra features have no row on the servers.
    make(&train, 10, (const uint32_t[]){1, END}, 1);
    make(&test, 20, (const uint32_t[]){15, END}, 1);
    CHECK(feature_compact(&train, &test, &rows, &n, err, sizeof err) == 1 && rows == NULL);
    CHECK(train.col[0] == 1 && test.col[0] == 15 && train.dim == 10 && test.dim == 20);
    sparse_dataset_free(&train);
    sparse_dataset_free(&test);
    printf("test_feature_compact: ok\n");
    return 0;
}
