// libsvm reader (datasets/libsvm.c): any bytes as a file's contents.
#include <math.h>

#include "datasets/libsvm.h"
#include "tests/fuzz/fuzz.h"

static void check_dataset(const sparse_dataset_t *d) {
    FUZZ_ASSERT(d->n > 0 && d->dim <= LIBSVM_MAX_DIM &&
                (d->dim > 0 || d->nnz == 0));  // labels alone: a bias-only model
    FUZZ_ASSERT(d->row_ptr[0] == 0 && d->row_ptr[d->n] == d->nnz);
    FUZZ_ASSERT(d->n_classes >= 1 && d->n_classes <= DATASET_MAX_CLASSES && d->labels && d->cls);
    for (size_t c = 1; c < d->n_classes; c++) FUZZ_ASSERT(d->labels[c - 1] < d->labels[c]);
    for (size_t i = 0; i < d->n; i++) {
        FUZZ_ASSERT(d->y[i] == 1.0f || d->y[i] == -1.0f);
        FUZZ_ASSERT(d->cls[i] >= 0 && (size_t)d->cls[i] < d->n_classes);
        FUZZ_ASSERT(d->row_ptr[i] <= d->row_ptr[i + 1]);
        for (size_t k = d->row_ptr[i]; k < d->row_ptr[i + 1]; k++) {
            FUZZ_ASSERT(d->col[k] < d->dim);
            FUZZ_ASSERT(k == d->row_ptr[i] || d->col[k - 1] < d->col[k]);
            FUZZ_ASSERT(isfinite(d->val[k]));
        }
    }
}

int fuzz_libsvm(const uint8_t *data, size_t size, char *err, size_t err_len) {
    sparse_dataset_t d;
    int rc = fuzz_refused(libsvm_parse("fuzz.svm", (const char *)data, size, 0, &d, err, err_len), err);
    if (rc != 0) return rc;
    check_dataset(&d);
    // The inferred dimension, given explicitly, reads the same examples.
    sparse_dataset_t again;
    char err2[512];
    FUZZ_ASSERT(libsvm_parse("fuzz.svm", (const char *)data, size, d.dim, &again, err2, sizeof err2) == 0);
    FUZZ_ASSERT(again.n == d.n && again.nnz == d.nnz && again.dim == d.dim);
    FUZZ_ASSERT(memcmp(again.col, d.col, d.nnz * sizeof *d.col) == 0);
    FUZZ_ASSERT(memcmp(again.val, d.val, d.nnz * sizeof *d.val) == 0);
    sparse_dataset_free(&again);
    sparse_dataset_free(&d);
    return 0;
}

FUZZ_ENTRY(fuzz_libsvm)
