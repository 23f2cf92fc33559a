// libsvm reader and writer: good files parsed exactly, every bad file refused
// with its exact file:line:column and an empty output, the writer equal to
// printf's "%.9g" byte for byte, and write -> load round trips bit for bit.
// For prediction (libsvm_load_unlabelled): labelled and unlabelled lines
// mixed, any number as a label, indices past the width skipped and counted
// (past the largest accepted index too), and a first token that is neither a
// number nor a feature refused at its column.
#include <float.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "datasets/libsvm.h"
#include "datasets/text_io.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_libsvm_XXXXXX";

static const char *put(const char *name, const char *bytes, size_t len) {
    return test_write_file(dir, name, bytes, len);
}

static const char *put_text(const char *name, const char *text) { return put(name, text, strlen(text)); }

static const char *data_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/libsvm/%s", ASGD_TEST_DATA_DIR, name);
    return path;
}

// One expected row: label, then (index as in the file, value) pairs.
static void check_row(const sparse_dataset_t *d, size_t i, float y, size_t nnz, const uint32_t *index1,
                      const float *value) {
    CHECK(i < d->n);
    CHECK(d->y[i] == y);
    CHECK(d->row_ptr[i + 1] - d->row_ptr[i] == nnz);
    for (size_t k = 0; k < nnz; k++) {
        CHECK(d->col[d->row_ptr[i] + k] == index1[k] - 1);
        CHECK(d->val[d->row_ptr[i] + k] == value[k]);
    }
}

static void good_files(void) {
    char err[512];
    sparse_dataset_t d;

    // Comments, CRLF, a blank line, qid and an example without features.
    CHECK_OK(libsvm_load(data_path("good_basic.svm"), 0, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 4 && d.nnz == 4 && d.row_ptr[0] == 0);
    check_row(&d, 0, 1.0f, 2, (uint32_t[]){1, 3}, (float[]){0.5f, 1.25f});
    check_row(&d, 1, -1.0f, 2, (uint32_t[]){2, 4}, (float[]){0.25f, -2e-3f});
    check_row(&d, 2, 1.0f, 0, NULL, NULL);
    sparse_dataset_free(&d);
    // A declared dim at or above the largest index is kept.
    CHECK_OK(libsvm_load(data_path("good_basic.svm"), 4, &d, err, sizeof err), err);
    CHECK(d.dim == 4);
    sparse_dataset_free(&d);
    CHECK_OK(libsvm_load(data_path("good_basic.svm"), 100, &d, err, sizeof err), err);
    CHECK(d.dim == 100 && d.n == 3);
    sparse_dataset_free(&d);

    // {0, 1} labels: 0 -> -1, 1 -> +1.
    CHECK_OK(libsvm_load(data_path("good_01.svm"), 0, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 2 && d.nnz == 4);
    check_row(&d, 0, 1.0f, 1, (uint32_t[]){1}, (float[]){1.0f});
    check_row(&d, 1, -1.0f, 1, (uint32_t[]){2}, (float[]){1.0f});
    check_row(&d, 2, 1.0f, 2, (uint32_t[]){1, 2}, (float[]){0.5f, 0.5f});
    sparse_dataset_free(&d);

    // Every spelling of +-1.
    CHECK_OK(libsvm_load(data_path("good_label_forms.svm"), 0, &d, err, sizeof err), err);
    CHECK(d.n == 8 && d.dim == 8 && d.nnz == 8);
    const float forms[8] = {1, 1, -1, 1, -1, 1, 1, -1};
    for (size_t i = 0; i < 8; i++)
        check_row(&d, i, forms[i], 1, (uint32_t[]){(uint32_t)i + 1}, (float[]){(float)(i + 1)});
    sparse_dataset_free(&d);

    // Written here: tabs, trailing blanks, number spellings, a BOM, no final newline.
    const char *path = put_text("forms.svm",
                                "\xEF\xBB\xBF-1\t1:1e-3\t10:-.5  \n"
                                "+1 2:5. 3:+7 4:1E+2 5:0x1p-3 6:1e-50 7:3.40282347e+38 8:-0\n"
                                "  # an indented comment\n"
                                "-1.0 9:123456789012345678901234567890\r\n"
                                "1.0 1:2.5");
    CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
    CHECK(d.n == 4 && d.dim == 10 && d.nnz == 11);
    check_row(&d, 0, -1.0f, 2, (uint32_t[]){1, 10}, (float[]){1e-3f, -0.5f});
    check_row(&d, 1, 1.0f, 7, (uint32_t[]){2, 3, 4, 5, 6, 7, 8},
              (float[]){5.0f, 7.0f, 100.0f, 0.125f, 0.0f, 3.40282347e+38f, 0.0f});
    CHECK(signbit(d.val[d.row_ptr[1] + 6]));  // "-0" stays a negative zero
    check_row(&d, 2, -1.0f, 1, (uint32_t[]){9},
              (float[]){(float)123456789012345678901234567890.0});  // past the fast path
    check_row(&d, 3, 1.0f, 1, (uint32_t[]){1}, (float[]){2.5f});
    sparse_dataset_free(&d);

    // The largest index accepted; dim inferred from it. One more, or an index
    // a uint32 column could hold but no model should be sized by, is refused
    // where it stands.
    path = put_text("big_index.svm", "+1 3:1 4294967295:2\n");
    CHECK(libsvm_load(path, 0, &d, err, sizeof err) == -1);
    CHECK(strstr(err, "big_index.svm:1:8: feature index 4294967295 is too large (at most 4294967294 features)"));
    path = put_text("huge_index.svm", "+1 3:1 40000000000:2\n");
    CHECK(libsvm_load(path, 0, &d, err, sizeof err) == -1);
    CHECK(strstr(err, "huge_index.svm:1:8: feature index 40000000000 is too large"));
    CHECK(libsvm_load(path, (size_t)5000000000u, &d, err, sizeof err) == -1);
    CHECK(strstr(err, "huge_index.svm: a dimension of 5000000000 features is more than the 4294967294 accepted"));
    path = put_text("max_index.svm", "+1 3:1 4294967294:2\n");
    CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
    CHECK(d.dim == LIBSVM_MAX_DIM && d.col[1] == LIBSVM_MAX_DIM - 1);
    sparse_dataset_free(&d);

    // A line of 250,000 features (2.6 MB, longer than the reader's 1 MiB block)
    // between two short ones, then an error at the very end of a second long line.
    size_t cap = 8 << 20, len = 0;
    char *text = malloc(cap);
    len += (size_t)sprintf(text + len, "-1 7:0.5\n+1");
    for (uint32_t j = 1; j <= 250000; j++) len += (size_t)sprintf(text + len, " %u:%u", j, j % 1000);
    len += (size_t)sprintf(text + len, "\n+1 250000:1\n");
    path = put("long_lines.svm", text, len);
    CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 250000 && d.nnz == 250002);
    CHECK(d.row_ptr[1] == 1 && d.row_ptr[2] == 250001);
    for (uint32_t j = 1; j <= 250000; j++) CHECK(d.col[j] == j - 1 && d.val[j] == (float)(j % 1000));
    sparse_dataset_free(&d);
    size_t second = len;
    len += (size_t)sprintf(text + len, "-1");
    for (uint32_t j = 1; j <= 250000; j++) len += (size_t)sprintf(text + len, " %u:1", j);
    size_t column = len - second + 2;  // after one more space
    len += (size_t)sprintf(text + len, " 250000:1\n");
    path = put("long_lines_bad.svm", text, len);
    char want[96];
    snprintf(want, sizeof want, "long_lines_bad.svm:4:%zu: duplicate feature index 250000", column);
    CHECK(libsvm_load(path, 0, &d, err, sizeof err) == -1);
    printf("%.120s\n", err);
    CHECK(strstr(err, want) && d.n == 0 && d.row_ptr == NULL);
    free(text);
}

typedef struct bad_case {
    const char *file;
    size_t dim;  // passed to libsvm_load
    const char *location;  // "line:column"
    const char *words;  // part of the message
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"bad_label.svm", 0, "2:1", "label '2.5' is not an integer"},
    {"bad_index_zero.svm", 0, "1:4", "feature index 0 (indices are 1-based)"},
    {"bad_unsorted.svm", 0, "1:8", "feature index 2 after 3 (indices must be strictly increasing)"},
    {"bad_duplicate.svm", 0, "1:8", "duplicate feature index 1"},
    {"bad_missing_colon.svm", 0, "1:5", "expected ':' after feature index 4, got a space"},
    {"bad_value.svm", 0, "1:6", "expected a number after '1:', got 'abc'"},
    {"bad_nan.svm", 0, "1:6", "value 'nan' is not finite"},
    {"bad_inf.svm", 0, "1:6", "value 'inf' is not finite"},
    {"bad_overflow.svm", 0, "1:6", "value '1e999' is out of float range"},
    {"bad_float_range.svm", 0, "1:12", "value '3.5e38' is out of float range"},
    {"bad_beyond_dim.svm", 10, "1:4", "feature index 11 is beyond dim 10"},
    {"bad_negative_index.svm", 0, "1:4", "expected a feature index (an integer >= 1) followed by ':', got '-3:1'"},
    {"bad_empty_value.svm", 0, "1:6", "expected a value after '3:', got the end of the line"},
    {"bad_empty_index.svm", 0, "1:4", "expected a feature index (an integer >= 1) followed by ':', got ':5'"},
    {"bad_crlf_comments.svm", 0, "4:10", "duplicate feature index 2"},
    {"bad_qid.svm", 0, "1:8", "expected a query id (digits) after 'qid:', got 'x'"},
    {"bad_index_overflow.svm", 0, "1:4", "feature index 4294967296 is too large"},
    {"bad_missing_label.svm", 0, "1:1",
     "expected a label (an integer class id, such as -1, +1, 0, 1 or 7), got '1:0.5'"},
    {"bad_nul.svm", 0, "2:7", "NUL byte"},
    {"bad_trailing_junk.svm", 0, "2:13", "expected a number after '7:', got '2.5e-3junk'"},
    {"bad_long_line.svm", 0, "2:148898", "got 'x'"},
};

// Integer labels of any kind: classes in ascending label order, the mapping
// kept; a second file read with the first's classes; the binary view y.
static void multiclass(void) {
    char err[512];
    sparse_dataset_t d, t;
    const char *train = put_text("multi.svm", "7 1:1\n-3 2:1\n0 3:1\n7.0 1:2\n+12 2:2\n");
    CHECK_OK(libsvm_load(train, 0, &d, err, sizeof err), err);
    CHECK(d.n == 5 && d.n_classes == 4 && d.cls && d.labels);
    CHECK(d.labels[0] == -3 && d.labels[1] == 0 && d.labels[2] == 7 && d.labels[3] == 12);
    const int32_t want_cls[5] = {2, 0, 1, 2, 3};
    for (size_t i = 0; i < 5; i++) CHECK(d.cls[i] == want_cls[i] && sparse_dataset_class(&d, i) == want_cls[i]);
    CHECK(d.y[0] == 1.0f && d.y[1] == -1.0f && d.y[2] == -1.0f);  // more than two classes: the sign of the label
    // A subset keeps the mapping.
    sparse_dataset_t sub;
    CHECK_OK(sparse_dataset_subset(&d, (uint32_t[]){4, 1}, 2, &sub, err, sizeof err), err);
    CHECK(sub.n_classes == 4 && sub.labels[3] == 12 && sub.cls[0] == 3 && sub.cls[1] == 0);
    sparse_dataset_free(&sub);
    // The writer writes the labels back.
    const char *again = put_text("again.svm", "");
    CHECK_OK(libsvm_write(again, &d, err, sizeof err), err);
    char *text = NULL;
    size_t text_len = 0;
    CHECK_OK(text_file_read(again, &text, &text_len, err, sizeof err), err);
    CHECK(text && text_len == 32 && memcmp(text, "7 1:1\n-3 2:1\n0 3:1\n7 1:2\n12 2:2\n", 32) == 0);
    free(text);

    // A test file with the training classes: its own labels are a subset.
    const char *test = put_text("multi_test.svm", "12 1:1\n-3 1:1\n");
    CHECK_OK(libsvm_load_mapped(test, 0, d.labels, NULL, d.n_classes, &t, err, sizeof err), err);
    CHECK(t.n_classes == 4 && t.cls[0] == 3 && t.cls[1] == 0 && t.labels[2] == 7);
    sparse_dataset_free(&t);
    // A label training never saw: refused at its line.
    const char *unseen = put_text("unseen.svm", "12 1:1\n\n5 1:1\n");
    CHECK(libsvm_load_mapped(unseen, 0, d.labels, NULL, d.n_classes, &t, err, sizeof err) == -1);
    printf("%s\n", err);
    CHECK(strstr(err, "unseen.svm:3:1: label 5 is not among the training data's labels (-3, 0, 7, 12)"));
    CHECK(t.n == 0 && t.cls == NULL && t.labels == NULL);
    sparse_dataset_free(&d);

    // Two labels: the lower is -1, the higher +1, whatever they are.
    CHECK_OK(libsvm_load(put_text("two.svm", "2 1:1\n1 1:1\n2 1:1\n"), 0, &d, err, sizeof err), err);
    CHECK(d.n_classes == 2 && d.labels[0] == 1 && d.labels[1] == 2);
    CHECK(d.y[0] == 1.0f && d.y[1] == -1.0f && d.y[2] == 1.0f && d.cls[1] == 0);
    sparse_dataset_free(&d);
    // One label: its sign.
    CHECK_OK(libsvm_load(put_text("one.svm", "0 1:1\n"), 0, &d, err, sizeof err), err);
    CHECK(d.n_classes == 1 && d.y[0] == -1.0f);
    sparse_dataset_free(&d);
    // -1, 0 and +1 together: three classes (no longer a mix of conventions).
    CHECK_OK(libsvm_load(put_text("three.svm", "+1 1:1\n0 2:1\n-1 3:1\n"), 0, &d, err, sizeof err), err);
    CHECK(d.n_classes == 3 && d.cls[0] == 2 && d.cls[1] == 1 && d.cls[2] == 0);
    sparse_dataset_free(&d);
    // Too many distinct labels (a regression file, say).
    size_t cap = (DATASET_MAX_CLASSES + 1) * 8, at = 0;
    char *many = malloc(cap);
    CHECK(many != NULL);
    for (int i = 0; i <= DATASET_MAX_CLASSES; i++) at += (size_t)snprintf(many + at, cap - at, "%d 1:1\n", i);
    CHECK(libsvm_load(put_text("many.svm", many), 0, &d, err, sizeof err) == -1);
    printf("%s\n", err);
    CHECK(strstr(err, "many.svm: 1025 distinct labels (0, 1, 2") && strstr(err, "at most 1024 classes"));
    free(many);
}

static void bad_files(void) {
    char err[512], want[96];
    sparse_dataset_t d;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case_t *b = &bad_cases[i];
        err[0] = '\0';
        int rc = libsvm_load(data_path(b->file), b->dim, &d, err, sizeof err);
        printf("%-26s -> %s\n", b->file, err);
        snprintf(want, sizeof want, "%s:%s: ", b->file, b->location);
        CHECK(rc == -1);
        CHECK(strstr(err, want) != NULL);
        CHECK(strstr(err, b->words) != NULL);
        CHECK(strchr(err, '\n') == NULL);
        CHECK(d.n == 0 && d.nnz == 0 && d.row_ptr == NULL && d.col == NULL && d.val == NULL && d.y == NULL);
    }
    // A dim of exactly the largest index is fine; one less is not.
    CHECK_OK(libsvm_load(data_path("bad_beyond_dim.svm"), 11, &d, err, sizeof err), err);
    sparse_dataset_free(&d);

    CHECK(libsvm_load(data_path("bad_empty.svm"), 0, &d, err, sizeof err) == -1 &&
          strstr(err, "bad_empty.svm: no examples"));
    printf("%-26s -> %s\n", "bad_empty.svm", err);
    CHECK(libsvm_load(put_text("empty.svm", ""), 0, &d, err, sizeof err) == -1 && strstr(err, "no examples"));
    CHECK(libsvm_load("/nonexistent/file.svm", 0, &d, err, sizeof err) == -1);
    printf("%-26s -> %s\n", "(missing file)", err);
    CHECK(strstr(err, "/nonexistent/file.svm: cannot open: No such file or directory"));
    CHECK(libsvm_load(dir, 0, &d, err, sizeof err) == -1 && strstr(err, "is a directory, not a regular file"));
    printf("%-26s -> %s\n", "(a directory)", err);
    const char gzip[] = {0x1f, (char)0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00};
    // A gzip header and nothing after it (.gz files proper: test_gz_input.c).
    CHECK(libsvm_load(put("data.svm.gz", gzip, sizeof gzip), 0, &d, err, sizeof err) == -1 &&
          strstr(err, "truncated gzip data"));
    printf("%-26s -> %s\n", "(a gzip header alone)", err);
    CHECK(d.n == 0 && d.row_ptr == NULL);
}

static void unlabelled(void) {
    const char *path = put_text("predict.svm",
                                "1:0.5 3:2\n"
                                "7 2:1 6:9 9:1\n"
                                "-0.25 qid:4 1:1 99999999999:3\n"
                                "qid:2 5:4\n"
                                "\n"
                                "1.5e3\n");
    sparse_dataset_t d;
    char err[512];
    size_t beyond = 99;
    CHECK_OK(libsvm_load_unlabelled(path, 5, &d, &beyond, err, sizeof err), err);
    printf("unlabelled, width 5: %zu examples, %zu non-zeros, %zu features beyond\n", d.n, d.nnz, beyond);
    CHECK(d.n == 5 && d.dim == 5 && d.nnz == 5 && beyond == 3);  // 6:9, 9:1, 99999999999:3
    CHECK(d.n_classes == 0 && d.cls == NULL && d.labels == NULL);
    check_row(&d, 0, -1.0f, 2, (const uint32_t[]){1, 3}, (const float[]){0.5f, 2.0f});
    check_row(&d, 1, -1.0f, 1, (const uint32_t[]){2}, (const float[]){1.0f});
    check_row(&d, 2, -1.0f, 1, (const uint32_t[]){1}, (const float[]){1.0f});
    check_row(&d, 3, -1.0f, 1, (const uint32_t[]){5}, (const float[]){4.0f});
    check_row(&d, 4, -1.0f, 0, NULL, NULL);
    sparse_dataset_free(&d);
    // Without a width nothing is beyond it: an index past the largest accepted is refused, as always.
    CHECK(libsvm_load_unlabelled(path, 0, &d, &beyond, err, sizeof err) == -1 && strstr(err, "predict.svm:3:") &&
          strstr(err, "is too large"));
    // A labelled read refuses the unlabelled line.
    CHECK(libsvm_load(path, 0, &d, err, sizeof err) == -1 && strstr(err, "predict.svm:1:1: expected a label"));
    path = put_text("predict_bad.svm", "1:1\nyes 2:1\n");
    CHECK(libsvm_load_unlabelled(path, 5, &d, &beyond, err, sizeof err) == -1);
    printf("%-26s -> %s\n", "predict_bad.svm", err);
    CHECK(strstr(err, "predict_bad.svm:2:1: expected a label (a number) or a feature (index:value), got 'yes'"));
    CHECK(d.n == 0 && d.row_ptr == NULL);
}

// Random floats of every magnitude, bit patterns included.
static float random_float(rng_t *r) {
    for (;;) {
        uint32_t bits = (uint32_t)rng_next(r);
        float f;
        switch (rng_below(r, 4)) {
            case 0:
                memcpy(&f, &bits, sizeof f);  // any finite float, denormals too
                if (isfinite(f)) return f;
                break;
            case 1:
                return (float)rng_uniform(r);  // the generators' range
            case 2:
                return (float)(1000000.0 + (double)(bits % 8000000) / 8.0);  // x.125, x.375: ties at 9 digits
            default:
                return (float)(rng_normal(r) * 1e6);
        }
    }
}

static void writer(void) {
    char err[512], value[32], expect[64];
    rng_t r;
    rng_seed(&r, 11, 0);
    // text_format_float is printf's %.9g, byte for byte.
    static const float edges[] = {0.0f,         -0.0f,         1.0f,         -1.0f,           1e-14f,
                                  9.99999e-15f, 1e9f,          999999936.0f, 1e-5f,           9.9999997e-5f,
                                  1e-4f,        123456789.0f,  1234567.125f, 1234567.375f,    0.5f,
                                  FLT_MIN,      FLT_MAX,       -FLT_MAX,     1.17549421e-38f, 1e-45f,
                                  0.1f,         9.99999999e8f, 99999999.5f,  0.30000001f,     1e8f,
                                  5e-5f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0] + 1000000; i++) {
        float f = i < sizeof edges / sizeof edges[0] ? edges[i] : random_float(&r);
        int n = text_format_float(f, value);
        snprintf(expect, sizeof expect, "%.9g", (double)f);
        if (strcmp(value, expect) != 0 || n != (int)strlen(expect)) {
            fprintf(stderr, "text_format_float(%a) = '%s', printf gives '%s'\n", (double)f, value, expect);
            exit(1);
        }
    }

    // A set with values of every magnitude round trips bit for bit, and the file is
    // exactly what fprintf would write.
    sparse_dataset_t orig, d;
    size_t n = 3000, dim = 5000;
    CHECK_OK(sparse_dataset_alloc(&orig, n, dim, n * 8, err, sizeof err), err);
    size_t at = 0, text_cap = n * 8 * 40 + n * 8, text_len = 0;
    char *text = malloc(text_cap);
    for (size_t i = 0; i < n; i++) {
        orig.y[i] = rng_below(&r, 2) ? 1.0f : -1.0f;
        text_len += (size_t)sprintf(text + text_len, "%s", orig.y[i] > 0 ? "+1" : "-1");
        size_t len = i % 9;  // 0..8 features, some rows empty
        uint32_t j = (uint32_t)rng_below(&r, 100);
        for (size_t k = 0; k < len; k++, at++) {
            orig.col[at] = j;
            orig.val[at] = random_float(&r);
            text_len += (size_t)sprintf(text + text_len, " %u:%.9g", j + 1, (double)orig.val[at]);
            j += 1 + (uint32_t)rng_below(&r, 500);
        }
        text_len += (size_t)sprintf(text + text_len, "\n");
        orig.row_ptr[i + 1] = at;
    }
    orig.nnz = at;
    char path[512], *bytes;
    size_t bytes_len;
    snprintf(path, sizeof path, "%s/round_trip.svm", dir);
    CHECK_OK(libsvm_write(path, &orig, err, sizeof err), err);
    CHECK_OK(text_file_read(path, &bytes, &bytes_len, err, sizeof err), err);
    CHECK(bytes_len == text_len && memcmp(bytes, text, text_len) == 0);
    free(bytes);
    free(text);
    CHECK_OK(libsvm_load(path, dim, &d, err, sizeof err), err);
    CHECK(d.n == orig.n && d.nnz == orig.nnz && d.dim == orig.dim);
    CHECK(memcmp(d.row_ptr, orig.row_ptr, (d.n + 1) * sizeof *d.row_ptr) == 0);
    CHECK(memcmp(d.col, orig.col, d.nnz * sizeof *d.col) == 0);
    CHECK(memcmp(d.val, orig.val, d.nnz * sizeof *d.val) == 0);  // bit for bit, -0 and denormals included
    CHECK(memcmp(d.y, orig.y, d.n * sizeof *d.y) == 0);
    sparse_dataset_free(&d);
    sparse_dataset_free(&orig);

    CHECK(libsvm_write("/nonexistent/dir/out.svm", &orig, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent/dir/out.svm: cannot open for writing: No such file or directory"));
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Not a pass/fail check (sanitizer builds are slower): prints what parsing costs.
static void timing(void) {
    char err[512], path[512];
    sparse_dataset_t orig, d;
    make_sparse(&orig, 20000, 100000, 60, 3);
    for (size_t k = 0; k < orig.nnz; k++) orig.val[k] = orig.val[k] / 7.0f;  // 9 significant digits
    snprintf(path, sizeof path, "%s/timing.svm", dir);
    double t0 = seconds();
    CHECK_OK(libsvm_write(path, &orig, err, sizeof err), err);
    double t1 = seconds();
    CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
    double t2 = seconds();
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK(d.nnz == orig.nnz && memcmp(d.val, orig.val, d.nnz * sizeof *d.val) == 0);
    printf("20,000 x 60 (%.1f MB): written in %.3f s, parsed in %.3f s (%.0f MB/s)\n", (double)st.st_size / 1e6,
           t1 - t0, t2 - t1, (double)st.st_size / 1e6 / (t2 - t1));
    sparse_dataset_free(&d);
    sparse_dataset_free(&orig);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    good_files();
    multiclass();
    bad_files();
    unlabelled();
    writer();
    timing();
    // Everything the test wrote lives in dir.
    static const char *const names[] = {"forms.svm",      "big_index.svm",      "huge_index.svm", "max_index.svm",
                                        "long_lines.svm", "long_lines_bad.svm", "empty.svm",      "data.svm.gz",
                                        "round_trip.svm", "timing.svm",         "multi.svm",      "again.svm",
                                        "multi_test.svm", "unseen.svm",         "two.svm",        "one.svm",
                                        "three.svm",      "many.svm",           "predict.svm",    "predict_bad.svm"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK(unlink(path) == 0);
    }
    CHECK(rmdir(dir) == 0);
    printf("libsvm tests passed\n");
    return 0;
}
