// libsvm reader and writer: good files parsed exactly, every bad file refused
// with the exact file:line:column, and write -> load round trips.
#include <stdint.h>
#include <unistd.h>

#include "datasets/libsvm.h"
#include "test_support.h"

typedef struct bad_case {
    const char *file;
    size_t dim;            // passed to libsvm_load
    const char *location;  // "line:column"
    const char *words;     // part of the message
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"bad_label.svm", 0, "2:1", "label 2 is not -1, +1, 0 or 1"},
    {"bad_index_zero.svm", 0, "1:4", "feature index 0"},
    {"bad_unsorted.svm", 0, "1:8", "comes after 3"},
    {"bad_duplicate.svm", 0, "1:8", "is a duplicate"},
    {"bad_missing_colon.svm", 0, "1:5", "expected ':' after feature index 4"},
    {"bad_value.svm", 0, "1:6", "expected a number, got 'abc'"},
    {"bad_nan.svm", 0, "1:6", "not a finite float"},
    {"bad_inf.svm", 0, "1:6", "not a finite float"},
    {"bad_overflow.svm", 0, "1:6", "value 1e999 is not a finite float"},
    {"bad_beyond_dim.svm", 10, "1:4", "beyond the 10 features"},
    {"bad_negative_index.svm", 0, "1:4", "expected a feature index"},
    {"bad_empty_value.svm", 0, "1:6", "expected a value after '3:'"},
    {"bad_mixed_labels.svm", 0, "3:1", "mixes the {-1,+1} and {0,1} conventions"},
    {"bad_long_line.svm", 0, "2:148898", "got 'x'"},
};

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char path[512], err[512], want[64];
    sparse_dataset_t d;

    // A good file with comments, CRLF, a blank line, qid and an example without features.
    snprintf(path, sizeof path, "%s/libsvm/good_basic.svm", ASGD_TEST_DATA_DIR);
    CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 4 && d.nnz == 4);
    CHECK(d.y[0] == 1.0f && d.y[1] == -1.0f && d.y[2] == 1.0f);
    CHECK(d.row_ptr[1] == 2 && d.row_ptr[2] == 4 && d.row_ptr[3] == 4);
    CHECK(d.col[0] == 0 && d.col[1] == 2 && d.col[2] == 1 && d.col[3] == 3);
    CHECK(d.val[0] == 0.5f && d.val[1] == 1.25f && d.val[2] == 0.25f && d.val[3] == -2e-3f);
    sparse_dataset_free(&d);
    // A fixed dimension larger than the largest index is kept.
    CHECK_OK(libsvm_load(path, 100, &d, err, sizeof err), err);
    CHECK(d.dim == 100);
    sparse_dataset_free(&d);
    // Labels in {0, 1}: 0 becomes -1.
    snprintf(path, sizeof path, "%s/libsvm/good_01.svm", ASGD_TEST_DATA_DIR);
    CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.y[0] == 1.0f && d.y[1] == -1.0f && d.y[2] == 1.0f);
    sparse_dataset_free(&d);

    // Every bad file fails at the exact place, and leaves the output empty.
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case_t *b = &bad_cases[i];
        snprintf(path, sizeof path, "%s/libsvm/%s", ASGD_TEST_DATA_DIR, b->file);
        err[0] = '\0';
        int rc = libsvm_load(path, b->dim, &d, err, sizeof err);
        printf("%-24s -> %s\n", b->file, err);
        snprintf(want, sizeof want, "%s:%s: ", b->file, b->location);
        CHECK(rc == -1);
        CHECK(strstr(err, want) != NULL);
        CHECK(strstr(err, b->words) != NULL);
        CHECK(d.n == 0 && d.row_ptr == NULL);
    }
    snprintf(path, sizeof path, "%s/libsvm/bad_empty.svm", ASGD_TEST_DATA_DIR);
    CHECK(libsvm_load(path, 0, &d, err, sizeof err) == -1 && strstr(err, "no examples"));
    CHECK(libsvm_load("/nonexistent/file.svm", 0, &d, err, sizeof err) == -1 && strstr(err, "/nonexistent/file.svm"));
    CHECK(strstr(err, "No such file"));

    // Round trip: write then load gives identical data, values bit for bit.
    sparse_dataset_t orig;
    make_sparse(&orig, 200, 50, 7, 9);
    for (size_t k = 0; k < orig.nnz; k++) orig.val[k] *= 1.0f / 3.0f;  // values that need all 9 digits
    char tmp[] = "/tmp/asgd_libsvm_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(libsvm_write(tmp, &orig, err, sizeof err), err);
    CHECK_OK(libsvm_load(tmp, orig.dim, &d, err, sizeof err), err);
    CHECK(d.n == orig.n && d.nnz == orig.nnz && d.dim == orig.dim);
    CHECK(memcmp(d.row_ptr, orig.row_ptr, (d.n + 1) * sizeof *d.row_ptr) == 0);
    CHECK(memcmp(d.col, orig.col, d.nnz * sizeof *d.col) == 0);
    CHECK(memcmp(d.val, orig.val, d.nnz * sizeof *d.val) == 0);
    CHECK(memcmp(d.y, orig.y, d.n * sizeof *d.y) == 0);
    unlink(tmp);
    sparse_dataset_free(&d);
    sparse_dataset_free(&orig);
    printf("libsvm tests passed\n");
    return 0;
}
