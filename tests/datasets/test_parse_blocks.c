// The libsvm and CSV readers on several threads (datasets/text_blocks.h):
//   a) the repository's test data (tests/data/libsvm, tests/data/csv) reads
//      bit for bit as the single-threaded reader before the block parser did
//      (digests and messages recorded from it), on 1 and 2 threads;
//   b) files of many blocks read the same on 1, 2, 3 and 4 threads, byte for
//      byte, and as the examples that were written;
//   c) an error far into a file is named at its exact line and column, the
//      first one when there are two, whatever the thread count; a corrupt
//      compressed file after good blocks is reported, a bad line before it
//      first;
//   d) short decimals read without a loop over their digits give strtod's
//      double and strtof's float exactly (text_decimal.h), near float
//      midpoints too;
//   e) awkward values (exponents, many digits, denormals, signs, float
//      midpoints) read through the whole libsvm and CSV readers, on 1 and 2
//      threads, are strtof's floats bit for bit;
//   f) a CSV cell whose number stops before the cell does ("1.5+2", "3:",
//      "2.5\"") is refused at its line and column, on 1 and 2 threads, far into
//      a file too, and the cells after it do not change what is read;
//   g) integer labels of 1,024 classes in any order (the most a file may have)
//      become their classes, ascending; one more is refused, naming the count.
#include <float.h>
#include <zlib.h>

#include "datasets/csv.h"
#include "datasets/libsvm.h"
#include "datasets/text_blocks.h"
#include "datasets/text_decimal.h"
#include "datasets/text_io.h"
#include "tests/support/input_support.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_parse_blocks_XXXXXX";

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

// The digest the old reader's results were recorded with (its fields only).
static uint64_t digest(const sparse_dataset_t *d) {
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, &d->n, sizeof d->n);
    h = fnv(h, &d->dim, sizeof d->dim);
    h = fnv(h, &d->nnz, sizeof d->nnz);
    h = fnv(h, d->row_ptr, (d->n + 1) * sizeof *d->row_ptr);
    h = fnv(h, d->col, d->nnz * sizeof *d->col);
    h = fnv(h, d->val, d->nnz * sizeof *d->val);
    h = fnv(h, d->y, d->n * sizeof *d->y);
    h = fnv(h, &d->n_classes, sizeof d->n_classes);
    if (d->cls) {
        h = fnv(h, d->cls, d->n * sizeof *d->cls);
        h = fnv(h, d->labels, d->n_classes * sizeof *d->labels);
    }
    return h;
}

// ---- a) the test data against the reader before blocks ----

typedef struct golden {
    const char *file;  // under tests/data
    uint64_t digest;  // of the set read, or 0 with...
    const char *error;  // ...the message after "tests/data/<folder>/"
} golden_t;

// Printed by the reader of commit 790f411 (one thread, no blocks), with the
// default options: libsvm_load(path, 0) and csv_load(path, {NULL, 0, NULL, 0}).
static const golden_t goldens[] = {
    {"libsvm/bad_beyond_dim.svm", 0x4ee95d6227c36ad3ull, NULL},
    {"libsvm/bad_crlf_comments.svm", 0,
     "bad_crlf_comments.svm:4:10: duplicate feature index 2 (indices must be strictly increasing)"},
    {"libsvm/bad_duplicate.svm", 0,
     "bad_duplicate.svm:1:8: duplicate feature index 1 (indices must be strictly increasing)"},
    {"libsvm/bad_empty.svm", 0, "bad_empty.svm: no examples (the file is empty or has only comments and blank lines)"},
    {"libsvm/bad_empty_index.svm", 0,
     "bad_empty_index.svm:1:4: expected a feature index (an integer >= 1) followed by ':', got ':5'"},
    {"libsvm/bad_empty_value.svm", 0, "bad_empty_value.svm:1:6: expected a value after '3:', got the end of the line"},
    {"libsvm/bad_float_range.svm", 0,
     "bad_float_range.svm:1:12: value '3.5e38' is out of float range (|value| <= 3.40282347e+38)"},
    {"libsvm/bad_index_overflow.svm", 0,
     "bad_index_overflow.svm:1:4: feature index 4294967296 is too large (at most 4294967294 features)"},
    {"libsvm/bad_index_zero.svm", 0, "bad_index_zero.svm:1:4: feature index 0 (indices are 1-based)"},
    {"libsvm/bad_inf.svm", 0, "bad_inf.svm:1:6: value 'inf' is not finite"},
    {"libsvm/bad_label.svm", 0, "bad_label.svm:2:1: label '2.5' is not an integer (labels are class ids)"},
    {"libsvm/bad_long_line.svm", 0,
     "bad_long_line.svm:2:148898: expected a feature index (an integer >= 1) followed by ':', got 'x'"},
    {"libsvm/bad_missing_colon.svm", 0, "bad_missing_colon.svm:1:5: expected ':' after feature index 4, got a space"},
    {"libsvm/bad_missing_label.svm", 0,
     "bad_missing_label.svm:1:1: expected a label (an integer class id, such as -1, +1, 0, 1 or 7), got '1:0.5'"},
    {"libsvm/bad_nan.svm", 0, "bad_nan.svm:1:6: value 'nan' is not finite"},
    {"libsvm/bad_negative_index.svm", 0,
     "bad_negative_index.svm:1:4: expected a feature index (an integer >= 1) followed by ':', got '-3:1'"},
    {"libsvm/bad_nul.svm", 0, "bad_nul.svm:2:7: NUL byte in a text file (is it binary?)"},
    {"libsvm/bad_overflow.svm", 0,
     "bad_overflow.svm:1:6: value '1e999' is out of float range (|value| <= 3.40282347e+38)"},
    {"libsvm/bad_qid.svm", 0, "bad_qid.svm:1:8: expected a query id (digits) after 'qid:', got 'x'"},
    {"libsvm/bad_trailing_junk.svm", 0, "bad_trailing_junk.svm:2:13: expected a number after '7:', got '2.5e-3junk'"},
    {"libsvm/bad_unsorted.svm", 0,
     "bad_unsorted.svm:1:8: feature index 2 after 3 (indices must be strictly increasing)"},
    {"libsvm/bad_value.svm", 0, "bad_value.svm:1:6: expected a number after '1:', got 'abc'"},
    {"libsvm/good_01.svm", 0x9667f72a4e6756dfull, NULL},
    {"libsvm/good_basic.svm", 0xddc9bab5611f1dcdull, NULL},
    {"libsvm/good_label_forms.svm", 0xfaae46326cd77e2bull, NULL},
    {"libsvm/good_multiclass.svm", 0xf600ae36cc70482eull, NULL},
    {"csv/bad_cell.csv", 0, "bad_cell.csv:3:5: column 2 ('x2'): expected a number, got 'abc'"},
    {"csv/bad_empty_cell.csv", 0, "bad_empty_cell.csv:2:3: column 1 ('b'): empty cell (expected a number)"},
    {"csv/bad_header_only.csv", 0, "bad_header_only.csv: no examples (the file is empty, blank or a header alone)"},
    {"csv/bad_inf.csv", 0, "bad_inf.csv:2:5: column 2 ('c'): value 'inf' is not finite"},
    {"csv/bad_label.csv", 0, "bad_label.csv:2:1: column 0 ('a'): label '0.5' is not an integer (labels are class ids)"},
    {"csv/bad_long.csv", 0, "bad_long.csv:2:4: more than 2 cells (the first line has 2)"},
    {"csv/bad_nul.csv", 0, "bad_nul.csv:2:4: 2 cells; the first line has 3"},
    {"csv/bad_one_column.csv", 0,
     "bad_one_column.csv:1: one column: a label and at least one feature are needed (cells separated by commas or "
     "tabs)"},
    {"csv/bad_range.csv", 0, "bad_range.csv:1:3: column 1: value '1e400' is not finite"},
    {"csv/bad_short.csv", 0, "bad_short.csv:3:4: 2 cells; the first line has 3"},
    {"csv/bad_tabs_label.tsv", 0,
     "bad_tabs_label.tsv:2:1: column 0: label '0.5' is not an integer (labels are class ids)"},
    {"csv/good_bom_exponents.csv", 0x045e73d2a3a52849ull, NULL},
    {"csv/good_header.csv", 0x9cc8d3aa0e4d0f97ull, NULL},
    {"csv/good_plain.csv", 0x84a64fc4f21f67d4ull, NULL},
};

static int read_file(const char *path, int csv, sparse_dataset_t *d, char *err, size_t err_len) {
    csv_options_t o = {NULL, 0, NULL, 0, NULL};
    return csv ? csv_load(path, &o, d, err, err_len) : libsvm_load(path, 0, d, err, err_len);
}

static void test_data_as_before(void) {
    printf("a) tests/data read as before, on 1 and 2 threads\n");
    size_t n = sizeof goldens / sizeof goldens[0];
    for (size_t i = 0; i < n; i++) {
        const golden_t *g = &goldens[i];
        char path[512], err[1024];
        snprintf(path, sizeof path, "%s/%s", ASGD_TEST_DATA_DIR, g->file);
        int csv = strncmp(g->file, "csv/", 4) == 0;
        for (size_t threads = 1; threads <= 2; threads++) {
            text_blocks_set_threads(threads);
            sparse_dataset_t d;
            int rc = read_file(path, csv, &d, err, sizeof err);
            if (g->error) {
                const char *slash = strrchr(path, '/');
                CHECK(rc == -1);
                CHECK(strncmp(err, path, (size_t)(slash + 1 - path)) == 0);
                if (strcmp(err + (slash + 1 - path), g->error) != 0) {
                    fprintf(stderr, "%s: got %s\n   want %s\n", g->file, err, g->error);
                    exit(1);
                }
            } else {
                CHECK_OK(rc, err);
                CHECK(d.label_text == NULL);
                if (digest(&d) != g->digest) {
                    fprintf(stderr, "%s: digest %016llx, the reader before blocks gave %016llx\n", g->file,
                            (unsigned long long)digest(&d), (unsigned long long)g->digest);
                    exit(1);
                }
                sparse_dataset_free(&d);
            }
        }
    }
    text_blocks_set_threads(0);
    printf("  %zu files: the same sets and messages\n", n);
}

// ---- b) many blocks, any thread count ----

static const char *path_of(const char *name) { return input_path(dir, name); }

// Reads path on 1..4 threads: every read equal to the first. Returns it (caller frees).
static sparse_dataset_t read_on_threads(const char *path, const csv_options_t *o) {
    char err[1024];
    sparse_dataset_t first;
    for (size_t threads = 1; threads <= 4; threads++) {
        text_blocks_set_threads(threads);
        sparse_dataset_t d;
        if (o)
            CHECK_OK(csv_load(path, o, &d, err, sizeof err), err);
        else
            CHECK_OK(libsvm_load(path, 0, &d, err, sizeof err), err);
        if (threads == 1) {
            first = d;
        } else {
            input_same_sparse(&first, &d);
            sparse_dataset_free(&d);
        }
    }
    text_blocks_set_threads(0);
    return first;
}

static void many_blocks(void) {
    printf("b) files of many blocks on 1-4 threads\n");
    char err[512];
    sparse_dataset_t orig;
    make_sparse(&orig, 30000, 4000, 25, 5);  // ~5 MB of text: five or more blocks
    CHECK_OK(sparse_dataset_set_classes(&orig, (const int32_t[]){-1, 1}, 2, err, sizeof err), err);
    for (size_t i = 0; i < orig.n; i++) orig.cls[i] = orig.y[i] > 0;
    CHECK_OK(libsvm_write(path_of("many.svm"), &orig, err, sizeof err), err);
    sparse_dataset_t d = read_on_threads(path_of("many.svm"), NULL);
    CHECK(d.n == orig.n && d.nnz == orig.nnz);
    CHECK(memcmp(d.col, orig.col, d.nnz * sizeof *d.col) == 0 && memcmp(d.val, orig.val, d.nnz * sizeof *d.val) == 0);
    CHECK(memcmp(d.cls, orig.cls, d.n * sizeof *d.cls) == 0);
    printf("  libsvm: %zu examples, %zu non-zeros, the same on 1-4 threads and as written\n", d.n, d.nnz);
    sparse_dataset_free(&d);

    // CSV: string labels (quoted now and then), integers, exponents, blanks, zeros.
    static const char *const species[] = {"setosa", "versicolor", "virginica", "x,y \"quoted\""};
    FILE *f = fopen(path_of("many.csv"), "w");
    CHECK(f);
    fprintf(f, "f1,f2,\"species, as named\",f3,f4\n");
    rng_t r;
    rng_seed(&r, 9, 0);
    for (int i = 0; i < 120000; i++) {
        int s = (int)rng_below(&r, 4);
        const char *name = species[s];
        double a = rng_normal(&r), b = rng_uniform(&r) < 0.3 ? 0.0 : rng_uniform(&r);
        if (s == 3)
            fprintf(f, "%.6g,%g, \"x,y \"\"quoted\"\"\" ,%de-2,0\n", a, b, i % 97);
        else if (i % 5 == 0)
            fprintf(f, " %.9g , %.3f,\"%s\",%d,%.1f\r\n", a, b, name, i % 13, 0.5 * (i % 4));
        else
            fprintf(f, "%.9g,%.3f,%s,%d,%.1f\n", a, b, name, i % 13, 0.5 * (i % 4));
    }
    CHECK(fclose(f) == 0);
    csv_options_t o = {"species, as named", 0, NULL, 0, NULL};
    d = read_on_threads(path_of("many.csv"), &o);
    CHECK(d.n == 120000 && d.dim == 4 && d.n_classes == 4 && d.label_text);
    const char *names[4];
    dataset_label_names(d.label_text, 4, names);
    CHECK(strcmp(names[0], "setosa") == 0 && strcmp(names[1], "versicolor") == 0 &&
          strcmp(names[2], "virginica") == 0 && strcmp(names[3], "x,y \"quoted\"") == 0);
    rng_seed(&r, 9, 0);
    for (size_t i = 0; i < d.n; i++) {
        int s = (int)rng_below(&r, 4);
        rng_normal(&r);
        if (rng_uniform(&r) >= 0.3) rng_uniform(&r);
        CHECK(d.cls[i] == s);
    }
    printf("  csv: %zu examples, %zu non-zeros, classes %s / %s / %s / %s, the same on 1-4 threads\n", d.n, d.nnz,
           names[0], names[1], names[2], names[3]);
    sparse_dataset_free(&d);
    sparse_dataset_free(&orig);
}

// ---- c) errors far into a file ----

// A file of `lines` good lines where line bad_line (from 1) is replaced by bad_text (and, when
// later_line > 0, that line by later_text), gzip-compressed when gz.
static const char *write_with_errors(const char *name, int lines, int bad_line, const char *bad_text, int later_line,
                                     const char *later_text, int gz) {
    const char *path = path_of(name);
    gzFile g = gz ? gzopen(path, "wb1") : NULL;
    FILE *f = gz ? NULL : fopen(path, "w");
    CHECK(gz ? g != NULL : f != NULL);
    char line[256];
    for (int i = 1; i <= lines; i++) {
        if (i == bad_line)
            snprintf(line, sizeof line, "%s\n", bad_text);
        else if (i == later_line)
            snprintf(line, sizeof line, "%s\n", later_text);
        else
            snprintf(line, sizeof line, "%d 3:0.%d 17:1.25 %d:%d.5 4000:0.0625\n", i % 2 ? 1 : -1, i % 1000,
                     20 + i % 3000, i % 7);
        if (gz)
            CHECK(gzputs(g, line) > 0);
        else
            CHECK(fputs(line, f) >= 0);
    }
    CHECK(gz ? gzclose(g) == Z_OK : fclose(f) == 0);
    return path;
}

static void expect_error_on_threads(const char *path, const char *want) {
    char err[1024];
    for (size_t threads = 1; threads <= 4; threads++) {
        text_blocks_set_threads(threads);
        sparse_dataset_t d;
        CHECK(libsvm_load(path, 0, &d, err, sizeof err) == -1);
        CHECK(d.n == 0 && d.row_ptr == NULL);
        if (strncmp(err, path, strlen(path)) != 0 || strcmp(err + strlen(path), want) != 0) {
            fprintf(stderr, "%zu threads: got %s\n   want %s%s\n", threads, err, path, want);
            exit(1);
        }
    }
    text_blocks_set_threads(0);
    printf("  %s%s\n", strrchr(path, '/') + 1, want);
}

static void errors_far_in(void) {
    printf("c) errors far into a file, on 1-4 threads\n");
    // ~45 bytes a line: 200000 lines are ~9 MB, nine blocks or more.
    expect_error_on_threads(write_with_errors("late.svm", 200000, 187654, "1 3:0.5 17:x", 0, NULL, 0),
                            ":187654:12: expected a number after '17:', got 'x'");
    expect_error_on_threads(write_with_errors("two.svm", 200000, 150001, "-1 5:1 5:2", 190000, "1 0:1", 0),
                            ":150001:8: duplicate feature index 5 (indices must be strictly increasing)");
    expect_error_on_threads(write_with_errors("first_block.svm", 200000, 3, "+1 2:1 1:1", 199999, "x", 0),
                            ":3:8: feature index 1 after 2 (indices must be strictly increasing)");
    expect_error_on_threads(write_with_errors("last.svm", 200000, 200000, "1 7:1e999", 0, NULL, 0),
                            ":200000:5: value '1e999' is out of float range (|value| <= 3.40282347e+38)");

    // A gzip file cut short after several blocks: the cut is reported, after a bad line before it.
    const char *gz = write_with_errors("cut.svm.gz", 200000, 0, NULL, 0, NULL, 1);
    FILE *f = fopen(gz, "r+b");
    CHECK(f && fseek(f, 0, SEEK_END) == 0);
    long size = ftell(f);
    CHECK(fclose(f) == 0 && truncate(gz, size * 3 / 4) == 0);
    char err[1024];
    for (size_t threads = 1; threads <= 4; threads++) {
        text_blocks_set_threads(threads);
        sparse_dataset_t d;
        CHECK(libsvm_load(gz, 0, &d, err, sizeof err) == -1);
        CHECK(strstr(err, gz) == err && strstr(err, "truncated gzip data"));
    }
    printf("  %s\n", err);
    gz = write_with_errors("bad_then_cut.svm.gz", 200000, 20000, "1 1:1 2:?", 0, NULL, 1);
    f = fopen(gz, "r+b");
    CHECK(f && fseek(f, 0, SEEK_END) == 0);
    size = ftell(f);
    CHECK(fclose(f) == 0 && truncate(gz, size * 3 / 4) == 0);
    expect_error_on_threads(gz, ":20000:9: expected a number after '2:', got '?'");
}

// ---- d) short decimals, exactly ----

static void decimals_exact(void) {
    printf("d) short decimals as strtod reads them\n");
    rng_t r;
    rng_seed(&r, 17, 0);
    char buf[64 + TEXT_BLOCK_PAD];
    size_t fast = 0, n = 0, exact_path = 0;
    for (int i = 0; i < 2000000; i++) {
        memset(buf, 0, sizeof buf);
        int kind = (int)rng_below(&r, 5);
        if (kind == 0) {  // a float's shortest-ish decimal
            snprintf(buf, 64, "%.*g", 1 + (int)rng_below(&r, 9),
                     (double)(float)(rng_normal(&r) * pow(10, (int)rng_below(&r, 12) - 6)));
        } else if (kind == 1) {  // near a float midpoint, as close as 15 characters allow
            float a = (float)(rng_uniform(&r) * pow(10, (int)rng_below(&r, 8) - 4));
            double mid = 0.5 * ((double)a + (double)nextafterf(a, FLT_MAX));
            snprintf(buf, 64, "%.13g", mid);
        } else if (kind == 2) {  // digits and a point anywhere
            int len = 1 + (int)rng_below(&r, 16), dot = (int)rng_below(&r, (uint64_t)len + 1);
            int at = rng_below(&r, 2) ? (buf[0] = '-', 1) : 0;
            for (int k = 0; k < len; k++) {
                if (k == dot) buf[at++] = '.';
                buf[at++] = (char)('0' + rng_below(&r, 10));
            }
        } else if (kind == 3) {  // leading zeros, exponents, odd forms
            static const char *const odd[] = {"0.000000000000000000001234",
                                              "007",
                                              "-0",
                                              "+.5",
                                              "1.",
                                              ".",
                                              "1e5",
                                              "1.5E-3",
                                              "00000000000000000000.5",
                                              "123456789012345678",
                                              "9007199254740993",
                                              "0x10",
                                              "inf",
                                              "-"};
            snprintf(buf, 64, "%s", odd[rng_below(&r, sizeof odd / sizeof odd[0])]);
        } else {  // libsvm's own: %.9g of floats in (0, 1)
            snprintf(buf, 64, "%.9g", (double)(float)rng_uniform(&r));
        }
        buf[strlen(buf)] = ' ';
        char *end;
        double want = strtod(buf, &end), got, wide;
        float gotf;
        const char *e1 = text_parse_double_padded(buf, &got);
        const char *e2 = text_parse_float_padded(buf, &gotf, &wide);
        if (end == buf) {
            CHECK(e1 == buf && e2 == buf);
            continue;
        }
        n++;
        uint64_t mantissa;
        int frac, negative;
        if (text_decimal_fast(buf, &mantissa, &frac, &negative)) {
            fast++;
            double q = (double)mantissa * text_pow10_inverse[frac];
            uint64_t bits;
            memcpy(&bits, &q, 8);
            int64_t from_mid = (int64_t)(bits & ((1ull << 29) - 1)) - (1ll << 28);
            exact_path += frac && from_mid <= 8 && from_mid >= -8;
        }
        float wantf = strtof(buf, NULL);
        if (e1 != end || e2 != end || memcmp(&got, &want, 8) != 0 || memcmp(&wantf, &gotf, 4) != 0) {
            fprintf(stderr, "'%s': strtod %.17g (strtof %.9g), padded %.17g, float %.9g\n", buf, want, (double)wantf,
                    got, (double)gotf);
            exit(1);
        }
    }
    printf("  %zu numbers (%zu of the fast kind, %zu of them near a float midpoint): the same doubles and floats\n", n,
           fast, exact_path);
    CHECK(exact_path > 100);  // the midpoints were reached

    // Digits 8 at a time, against strtoull.
    for (int i = 0; i < 200000; i++) {
        memset(buf, 0, sizeof buf);
        int len = (int)rng_below(&r, 22);
        for (int k = 0; k < len; k++) buf[k] = (char)('0' + rng_below(&r, 10));
        buf[len] = (char)(rng_below(&r, 2) ? ':' : ' ');
        uint64_t v;
        int digits;
        const char *e = text_parse_digits_padded(buf, &v, &digits);
        int want_digits = len < 19 ? len : 19;
        char keep = buf[want_digits];
        buf[want_digits] = '\0';
        CHECK(digits == want_digits && e == buf + want_digits && v == (want_digits ? strtoull(buf, NULL, 10) : 0));
        buf[want_digits] = keep;
    }
    printf("  digits 8 at a time: as strtoull\n");
}

// ---- e) awkward values through the readers ----

// An awkward decimal into buf (NUL-terminated).
static void awkward_value(rng_t *r, char *buf, size_t cap) {
    static const char *const fixed[] = {"1e-45",
                                        "-1.4e-45",
                                        "7e-46",
                                        "1.17549435e-38",
                                        "1.1754942e-38",
                                        "3.4028234e38",
                                        "-3.40282346638528859811704183484516925440e+38",
                                        "+0.5",
                                        "-0",
                                        "+0",
                                        "0.0",
                                        "1.0000000596046447753906250000001",
                                        "1.00000005960464477539062499999",
                                        "0.000000000000000000000000000000000000000000001",
                                        "123456789012345678901234567890",
                                        "16777217",
                                        "16777216.5",
                                        "9.99999999e-10",
                                        "1E+10",
                                        "5e-324",
                                        "2.5E-39"};
    int kind = (int)rng_below(r, 5);
    if (kind == 0) {
        snprintf(buf, cap, "%s", fixed[rng_below(r, sizeof fixed / sizeof fixed[0])]);
    } else if (kind == 1) {  // a float midpoint to many digits, a little above or below it
        float a = (float)(rng_uniform(r) * pow(10, (int)rng_below(r, 30) - 15));
        double mid = 0.5 * ((double)a + (double)nextafterf(a, FLT_MAX));
        int n = snprintf(buf, cap, "%.25e", mid);
        char *e = strchr(buf, 'e');
        if (e && rng_below(r, 2)) {  // past the double's precision: strtod lands on the midpoint
            memmove(e + 6, e, (size_t)(buf + n - e) + 1);
            memcpy(e, rng_below(r, 2) ? "00001" : "99999", 5);
            e[5] = rng_below(r, 2) ? '1' : '9';
        }
    } else if (kind == 2) {  // exponents, signs, denormals
        snprintf(buf, cap, "%s%.*e",
                 rng_below(r, 2)   ? "-"
                 : rng_below(r, 2) ? "+"
                                   : "",
                 (int)rng_below(r, 12), rng_uniform(r) * pow(10, (int)rng_below(r, 90) - 60));
    } else if (kind == 3) {  // 14-17 significant digits without an exponent
        snprintf(buf, cap, "%.*f", 14 + (int)rng_below(r, 4), rng_uniform(r) * pow(10, (int)rng_below(r, 3)));
    } else {  // the common kind
        snprintf(buf, cap, "%.9g", (double)(float)(rng_normal(r) * 3));
    }
}

static void awkward_values(void) {
    printf("e) awkward values through the readers, as strtof reads them\n");
    enum { ROWS = 3000, PER_ROW = 20 };
    rng_t r;
    rng_seed(&r, 23, 0);
    size_t cap = (size_t)ROWS * PER_ROW * 80;
    char *svm = malloc(cap), *csv = malloc(cap), value[96];
    float *want = malloc((size_t)ROWS * PER_ROW * sizeof *want);
    CHECK(svm && csv && want);
    size_t ls = 0, lc = 0, n = 0;
    for (int i = 0; i < ROWS; i++) {
        ls += (size_t)snprintf(svm + ls, cap - ls, "%d", i % 2);
        lc += (size_t)snprintf(csv + lc, cap - lc, "%d", i % 2);
        for (int k = 0; k < PER_ROW; k++) {
            awkward_value(&r, value, sizeof value);
            want[n++] = strtof(value, NULL);
            ls += (size_t)snprintf(svm + ls, cap - ls, " %d:%s", k + 1, value);
            lc += (size_t)snprintf(csv + lc, cap - lc, ",%s", value);
        }
        svm[ls++] = '\n';
        csv[lc++] = '\n';
    }
    for (size_t threads = 1; threads <= 2; threads++) {
        text_blocks_set_threads(threads);
        char err[512];
        sparse_dataset_t d;
        CHECK(libsvm_parse("awkward.svm", svm, ls, 0, &d, err, sizeof err) == 0);
        CHECK(d.nnz == n);
        CHECK(memcmp(d.val, want, n * sizeof *want) == 0);
        sparse_dataset_free(&d);
        csv_options_t o = {.label_column = NULL};
        CHECK(csv_parse("awkward.csv", csv, lc, &o, &d, err, sizeof err) == 0);
        size_t kept = 0;  // CSV keeps the values that are not 0, in order
        for (size_t i = 0; i < n; i++) {
            if (want[i] == 0.0f) continue;
            CHECK(kept < d.nnz && memcmp(&d.val[kept], &want[i], sizeof want[i]) == 0);
            kept++;
        }
        CHECK(kept == d.nnz && d.n == ROWS);
        sparse_dataset_free(&d);
    }
    text_blocks_set_threads(0);
    printf("  %zu values in libsvm and CSV on 1 and 2 threads: strtof's floats\n", n);
    free(svm);
    free(csv);
    free(want);
}

// ---- f) CSV cells a number does not fill ----

// A CSV text of `rows` rows of a label and 4 features, row bad_row (from 1, after
// the header) replaced by bad; into buf (caller frees), its length in *len.
static char *csv_with_row(int rows, int bad_row, const char *bad, size_t *len) {
    size_t cap = (size_t)rows * 64 + 256, n = 0;
    char *buf = malloc(cap);
    CHECK(buf);
    n += (size_t)snprintf(buf + n, cap - n, "y,a,b,c,d\n");
    for (int i = 1; i <= rows; i++) {
        if (i == bad_row)
            n += (size_t)snprintf(buf + n, cap - n, "%s\n", bad);
        else
            n += (size_t)snprintf(buf + n, cap - n, "%d,%d.25,0,-%d.5,%d\n", i % 3, i % 100, i % 7, i % 11);
    }
    *len = n;
    return buf;
}

static void expect_csv_error(int rows, int bad_row, const char *bad, const char *want) {
    size_t len;
    char *text = csv_with_row(rows, bad_row, bad, &len), err[512];
    for (size_t threads = 1; threads <= 2; threads++) {
        text_blocks_set_threads(threads);
        sparse_dataset_t d;
        csv_options_t o = {.label_column = NULL};
        CHECK(csv_parse("short.csv", text, len, &o, &d, err, sizeof err) == -1);
        if (strcmp(err, want) != 0) {
            fprintf(stderr, "%zu threads: got %s\n   want %s\n", threads, err, want);
            exit(1);
        }
    }
    text_blocks_set_threads(0);
    printf("  %s\n", want);
    free(text);
}

static void csv_short_numbers(void) {
    printf("f) CSV cells a number does not fill, on 1 and 2 threads\n");
    expect_csv_error(10, 2, "1,1.5+2,0,1,2", "short.csv:3:3: column 1 ('a'): expected a number, got '1.5+2'");
    expect_csv_error(10, 4, "1,2,3:,4,5", "short.csv:5:5: column 2 ('b'): expected a number, got '3:'");
    expect_csv_error(10, 1, "0,1,2,3,2.5\"", "short.csv:2:9: column 4 ('d'): expected a number, got '2.5\"'");
    expect_csv_error(10, 3, "0,-7/2,1,2,3", "short.csv:4:3: column 1 ('a'): expected a number, got '-7/2'");
    expect_csv_error(10, 5, "0,1,2,3,4-", "short.csv:6:9: column 4 ('d'): expected a number, got '4-'");
    expect_csv_error(10, 6, "1:,1,2,3,4",
                     "short.csv:7:1: column 0 ('y'): expected a number, got '1:' (the first data line's label is a "
                     "number: every label must be one)");
    // Far in (many blocks), with good-looking cells after the bad one.
    expect_csv_error(300000, 287654, "2,0.125,1e3%,0.5,7",
                     "short.csv:287655:9: column 2 ('b'): expected a number, got '1e3%'");
    expect_csv_error(300000, 150001, "2,0.125=,1,0.5,7",
                     "short.csv:150002:3: column 1 ('a'): expected a number, got '0.125='");

    // Blanks between a number and its delimiter are read, not refused.
    size_t len;
    char *text = csv_with_row(10, 4, "2 , 1.5 ,0\t, -2.25\r ,3 ", &len), err[512];
    sparse_dataset_t d;
    csv_options_t o = {.label_column = NULL};
    CHECK_OK(csv_parse("blanks.csv", text, len, &o, &d, err, sizeof err), err);
    size_t at = d.row_ptr[3];
    CHECK(d.row_ptr[4] - at == 3 && d.val[at] == 1.5f && d.val[at + 1] == -2.25f && d.val[at + 2] == 3.0f);
    CHECK(d.col[at] == 0 && d.col[at + 1] == 2 && d.col[at + 2] == 3 && d.labels[d.cls[3]] == 2);
    sparse_dataset_free(&d);
    free(text);
    printf("  blanks around numbers: read\n");
}

// ---- g) many integer classes ----

static void many_classes(void) {
    printf("g) integer labels of many classes, in any order\n");
    enum { ROWS = 20000 };
    rng_t r;
    rng_seed(&r, 31, 0);
    char *text = malloc((size_t)ROWS * 32 + 64), err[512];
    int32_t *label = malloc(ROWS * sizeof *label);
    CHECK(text && label);
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = 0;
        for (int i = 0; i < ROWS; i++) {
            // Labels -500 + 3j for j < 1024 (+ one more with extra), every one at least once.
            int j = i < 1024 + extra ? i * 7 % (1024 + extra) : (int)rng_below(&r, 1024 + (uint64_t)extra);
            label[i] = -500 + 3 * j;
            n += (size_t)sprintf(text + n, "%d,%d.5\n", (int)label[i], i % 5);
        }
        sparse_dataset_t d;
        csv_options_t o = {.label_column = NULL};
        int rc = csv_parse("classes.csv", text, n, &o, &d, err, sizeof err);
        if (extra) {
            CHECK(rc == -1 && strcmp(err,
                                     "classes.csv: 1025 distinct labels (-500, -497, -494, -491, -488, -485, -482, "
                                     "-479, -476, -473, -470, -467, -464, -461, -458, -455, ...); at most 1024 "
                                     "classes are read (labels are class ids, not values to regress on)") == 0);
            continue;
        }
        CHECK_OK(rc, err);
        CHECK(d.n == ROWS && d.n_classes == 1024);
        for (size_t c = 0; c < 1024; c++) CHECK(d.labels[c] == -500 + 3 * (int32_t)c);
        for (size_t i = 0; i < ROWS; i++) CHECK(d.labels[d.cls[i]] == label[i]);
        sparse_dataset_free(&d);
    }
    printf("  1024 classes as their labels, ascending; 1025 refused\n");
    free(text);
    free(label);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    test_data_as_before();
    many_blocks();
    errors_far_in();
    decimals_exact();
    awkward_values();
    csv_short_numbers();
    many_classes();
    CHECK(test_remove_tree(dir) == 0);
    printf("parse block tests passed\n");
    return 0;
}
