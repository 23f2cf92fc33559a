// CSV reader (datasets/csv.c): any bytes as a file's contents, the header
// detected and the label in column 0 (integers or strings), then read again
// with its own classes.
#include <math.h>

#include "datasets/csv.h"
#include "tests/fuzz/fuzz.h"

int fuzz_csv(const uint8_t *data, size_t size, char *err, size_t err_len) {
    sparse_dataset_t d;
    csv_options_t o = {NULL, 0, NULL, 0, NULL};
    int rc = fuzz_refused(csv_parse("fuzz.csv", (const char *)data, size, &o, &d, err, err_len), err);
    if (rc != 0) return rc;
    FUZZ_ASSERT(d.n > 0 && d.dim > 0 && d.row_ptr[0] == 0 && d.row_ptr[d.n] == d.nnz);
    FUZZ_ASSERT(d.n_classes >= 1 && d.n_classes <= DATASET_MAX_CLASSES && d.labels && d.cls);
    for (size_t c = 1; c < d.n_classes; c++) FUZZ_ASSERT(d.labels[c - 1] < d.labels[c]);
    if (d.label_text) {  // string labels: names 1..DATASET_MAX_LABEL_BYTES bytes, ascending, classes 0..k-1
        const char *names[DATASET_MAX_CLASSES];
        dataset_label_names(d.label_text, d.n_classes, names);
        for (size_t c = 0; c < d.n_classes; c++) {
            size_t len = strlen(names[c]);
            FUZZ_ASSERT(d.labels[c] == (int32_t)c && len >= 1 && len <= DATASET_MAX_LABEL_BYTES);
            FUZZ_ASSERT(c == 0 || strcmp(names[c - 1], names[c]) < 0);
        }
    }
    for (size_t i = 0; i < d.n; i++) {
        FUZZ_ASSERT(d.cls[i] >= 0 && (size_t)d.cls[i] < d.n_classes);
        FUZZ_ASSERT(d.y[i] == 1.0f || d.y[i] == -1.0f);
        FUZZ_ASSERT(d.row_ptr[i] <= d.row_ptr[i + 1]);
        for (size_t k = d.row_ptr[i]; k < d.row_ptr[i + 1]; k++) {
            FUZZ_ASSERT(d.col[k] < d.dim);
            FUZZ_ASSERT(k == d.row_ptr[i] || d.col[k - 1] < d.col[k]);
            FUZZ_ASSERT(isfinite(d.val[k]) && d.val[k] != 0.0f);
        }
    }
    // Read again with its own classes: the same classes.
    sparse_dataset_t again;
    char err2[512];
    o.labels = d.labels;
    o.k = d.n_classes;
    o.label_text = d.label_text;
    FUZZ_ASSERT(csv_parse("fuzz.csv", (const char *)data, size, &o, &again, err2, sizeof err2) == 0);
    FUZZ_ASSERT(again.n == d.n && again.nnz == d.nnz && memcmp(again.cls, d.cls, d.n * sizeof *d.cls) == 0);
    sparse_dataset_free(&again);
    sparse_dataset_free(&d);
    return 0;
}

FUZZ_ENTRY(fuzz_csv)
