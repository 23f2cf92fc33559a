// Loads tiny hand-made IDX files (raw and gzipped) and checks every value, runs
// a corpus of broken files that must each fail with the file's name in the
// message, and, where the system has it, loads the real Fashion-MNIST.
// With ASGD_WRITE_SEEDS=1 it also rewrites the seed corpus in tests/data/idx/.
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "datasets/idx.h"
#include "tests/support/test_support.h"

#define SEED_DIR ASGD_TEST_DATA_DIR "/idx"
#define N 5
#define ROWS 3
#define COLS 4

static const uint8_t labels5[N] = {3, 0, 9, 1, 7};
static int have_gzip;

// Covers 0 and 255 so that both ends of the [0, 1] scaling are checked.
static uint8_t pixel(size_t i, size_t j) {
    if (i == 0 && j == 0) return 0;
    if (i == N - 1 && j == ROWS * COLS - 1) return 255;
    return (uint8_t)((i * 53 + j * 29 + 1) % 256);
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert(f);
    assert(fwrite(data, 1, len, f) == len);
    assert(fclose(f) == 0);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

// An images file with the given header and `payload` pixel bytes after it.
static void write_images(const char *dir, const char *name, size_t header_len, uint32_t magic, uint32_t n,
                         uint32_t rows, uint32_t cols, size_t payload) {
    uint8_t buf[256] = {0};
    assert(16 + payload <= sizeof buf);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    put_be32(buf + 8, rows);
    put_be32(buf + 12, cols);
    for (size_t k = 0; k < payload; k++) buf[16 + k] = pixel(k / (ROWS * COLS), k % (ROWS * COLS));
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, buf, header_len < 16 ? header_len : 16 + payload);
}

static void write_labels(const char *dir, const char *name, uint32_t magic, uint32_t n, const uint8_t *labels,
                         size_t count) {
    uint8_t buf[64];
    assert(8 + count <= sizeof buf);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    memcpy(buf + 8, labels, count);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, buf, 8 + count);
}

static void write_corpus(const char *dir) {
    const size_t px = N * ROWS * COLS;
    write_images(dir, "good-images-idx3-ubyte", 16, 0x803, N, ROWS, COLS, px);
    write_labels(dir, "good-labels-idx1-ubyte", 0x801, N, labels5, N);
    write_images(dir, "bad-magic-images-idx3-ubyte", 16, 0x00000000, N, ROWS, COLS, px);
    write_images(dir, "bad-type-images-idx3-ubyte", 16, 0x00000D03, N, ROWS, COLS, px);  // float32 images
    write_images(dir, "truncated-images-idx3-ubyte", 16, 0x803, N, ROWS, COLS, px - 1);
    write_images(dir, "trailing-images-idx3-ubyte", 16, 0x803, N, ROWS, COLS, px + 1);
    write_images(dir, "short-header-images-idx3-ubyte", 10, 0x803, N, ROWS, COLS, 0);
    write_images(dir, "zero-rows-images-idx3-ubyte", 16, 0x803, N, 0, COLS, 0);
    write_images(dir, "zero-count-images-idx3-ubyte", 16, 0x803, 0, ROWS, COLS, 0);
    write_images(dir, "huge-dims-images-idx3-ubyte", 16, 0x803, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0);
    write_images(dir, "huge-count-images-idx3-ubyte", 16, 0x803, 0xFFFFFFFFu, ROWS, COLS, px);
    write_labels(dir, "bad-magic-labels-idx1-ubyte", 0x803, N, labels5, N);
    write_labels(dir, "count-mismatch-labels-idx1-ubyte", 0x801, N - 1, labels5, N - 1);
    write_labels(dir, "truncated-labels-idx1-ubyte", 0x801, N, labels5, N - 1);
    write_labels(dir, "trailing-labels-idx1-ubyte", 0x801, N - 1, labels5, N);
    const uint8_t bad_label[N] = {3, 0, 10, 1, 7};
    write_labels(dir, "bad-label-labels-idx1-ubyte", 0x801, N, bad_label, N);
    if (have_gzip) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && gzip -n -9 -c good-images-idx3-ubyte > good-images-idx3-ubyte.gz && "
                 "gzip -n -9 -c good-labels-idx1-ubyte > good-labels-idx1-ubyte.gz && "
                 "head -c 40 good-images-idx3-ubyte.gz > truncated-images-idx3-ubyte.gz",
                 dir);
        assert(system(cmd) == 0);
    }
}

static const char *path_in(const char *dir, const char *name) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void check_good(const dense_dataset_t *d, size_t n) {
    assert(d->n == n);
    assert(d->dim == ROWS * COLS);
    assert(d->n_classes == IDX_N_CLASSES);
    for (size_t i = 0; i < n; i++) {
        assert(d->y[i] == labels5[i]);
        for (size_t j = 0; j < ROWS * COLS; j++) assert(d->x[i * d->dim + j] == (float)pixel(i, j) / 255.0f);
    }
    assert(d->x[0] == 0.0f);
    if (n == N) assert(d->x[N * ROWS * COLS - 1] == 1.0f);
}

static void test_good(const char *dir) {
    const char *images[] = {"good-images-idx3-ubyte", "good-images-idx3-ubyte.gz"};
    const char *labels[] = {"good-labels-idx1-ubyte", "good-labels-idx1-ubyte.gz"};
    for (int gi = 0; gi < 1 + have_gzip; gi++) {
        for (int gl = 0; gl < 1 + have_gzip; gl++) {
            const size_t limits[] = {0, 1, 2, N, N + 100};
            for (size_t k = 0; k < sizeof limits / sizeof *limits; k++) {
                dense_dataset_t d;
                char err[512] = "";
                int rc = idx_load(path_in(dir, images[gi]), path_in(dir, labels[gl]), limits[k], &d, err, sizeof err);
                if (rc != 0) fprintf(stderr, "unexpected error: %s\n", err);
                assert(rc == 0);
                check_good(&d, limits[k] == 0 || limits[k] > N ? N : limits[k]);
                dense_dataset_free(&d);
                assert(d.x == NULL && d.n == 0);
            }
        }
    }
    printf("  ok: %s: good files (raw%s), limits 0, 1, 2, 5, 105\n", dir, have_gzip ? " and gzipped" : "");
}

typedef struct bad_case {
    const char *images, *labels;
    const char *blamed;  // the file the message must name
    const char *must_contain;  // and what it must say
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"bad-magic-images-idx3-ubyte", "good-labels-idx1-ubyte", "bad-magic-images-idx3-ubyte",
     "bad IDX magic 0x00000000"},
    {"bad-type-images-idx3-ubyte", "good-labels-idx1-ubyte", "bad-type-images-idx3-ubyte", "expected 0x00000803"},
    {"good-labels-idx1-ubyte", "good-labels-idx1-ubyte", "good-labels-idx1-ubyte", "bad IDX magic 0x00000801"},
    {"truncated-images-idx3-ubyte", "good-labels-idx1-ubyte", "truncated-images-idx3-ubyte", "truncated"},
    {"trailing-images-idx3-ubyte", "good-labels-idx1-ubyte", "trailing-images-idx3-ubyte", "1 trailing byte(s)"},
    {"short-header-images-idx3-ubyte", "good-labels-idx1-ubyte", "short-header-images-idx3-ubyte", "too short"},
    {"zero-rows-images-idx3-ubyte", "good-labels-idx1-ubyte", "zero-rows-images-idx3-ubyte", "rows is 0"},
    {"zero-count-images-idx3-ubyte", "good-labels-idx1-ubyte", "zero-count-images-idx3-ubyte", "image count is 0"},
    {"huge-dims-images-idx3-ubyte", "good-labels-idx1-ubyte", "huge-dims-images-idx3-ubyte", "more than 2^64"},
    {"huge-count-images-idx3-ubyte", "good-labels-idx1-ubyte", "huge-count-images-idx3-ubyte", "truncated"},
    {"good-images-idx3-ubyte", "bad-magic-labels-idx1-ubyte", "bad-magic-labels-idx1-ubyte", "expected 0x00000801"},
    {"good-images-idx3-ubyte", "count-mismatch-labels-idx1-ubyte", "count-mismatch-labels-idx1-ubyte",
     "expected the same count"},
    {"good-images-idx3-ubyte", "truncated-labels-idx1-ubyte", "truncated-labels-idx1-ubyte", "truncated"},
    {"good-images-idx3-ubyte", "trailing-labels-idx1-ubyte", "trailing-labels-idx1-ubyte", "trailing"},
    {"good-images-idx3-ubyte", "bad-label-labels-idx1-ubyte", "bad-label-labels-idx1-ubyte",
     "label 10 of example 2 at byte offset 10"},
    {"missing-images-idx3-ubyte", "good-labels-idx1-ubyte", "missing-images-idx3-ubyte", "No such file or directory"},
    {"good-images-idx3-ubyte", "missing-labels-idx1-ubyte", "missing-labels-idx1-ubyte", "No such file or directory"},
    {"truncated-images-idx3-ubyte.gz", "good-labels-idx1-ubyte", "truncated-images-idx3-ubyte.gz", "truncated"},
};

static void test_bad(const char *dir) {
    for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
        const bad_case_t *c = &bad_cases[k];
        if (!have_gzip && strstr(c->images, ".gz")) continue;
        dense_dataset_t d;
        memset(&d, 0xA5, sizeof d);  // idx_load must reset it even on error
        char err[512] = "";
        int rc = idx_load(path_in(dir, c->images), path_in(dir, c->labels), 0, &d, err, sizeof err);
        if (rc != -1 || !strstr(err, c->blamed) || !strstr(err, c->must_contain)) {
            fprintf(stderr, "%s + %s: expected an error naming %s and saying '%s', got rc=%d err='%s'\n", c->images,
                    c->labels, c->blamed, c->must_contain, rc, err);
            exit(1);
        }
        assert(d.n == 0 && d.dim == 0 && d.n_classes == 0 && d.x == NULL && d.y == NULL);
        printf("  ok (error): %s\n", err);
    }
}

static void test_fashion_layout(const char *tmpdir) {
    // The loader prefers "<name>.gz" and falls back to "<name>": give it one of each.
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir fm && cp good-images-idx3-ubyte fm/t10k-images-idx3-ubyte && "
             "cp good-labels-idx1-ubyte%s fm/t10k-labels-idx1-ubyte%s",
             tmpdir, have_gzip ? ".gz" : "", have_gzip ? ".gz" : "");
    assert(system(cmd) == 0);
    dense_dataset_t d;
    char err[512] = "";
    int rc = fashion_mnist_load(path_in(tmpdir, "fm"), 0, 0, &d, err, sizeof err);
    if (rc != 0) fprintf(stderr, "unexpected error: %s\n", err);
    assert(rc == 0);
    check_good(&d, N);
    dense_dataset_free(&d);

    rc = fashion_mnist_load(path_in(tmpdir, "fm"), 1, 0, &d, err, sizeof err);
    assert(rc == -1 && d.n == 0 && d.x == NULL);
    assert(strstr(err, "train-images-idx3-ubyte") && strstr(err, "No such file or directory"));
    const char *hint =
        "---> HINT: is dataset-fashion-mnist installed? (apt-get install dataset-fashion-mnist), or pass --data-dir "
        "DIR";
    assert(strlen(err) > strlen(hint) && strcmp(err + strlen(err) - strlen(hint), hint) == 0);
    printf("  ok (error): %s\n", err);
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

// Reference numbers computed independently (Python's gzip module) from the
// files shipped by dataset-fashion-mnist.
static void check_fashion(const dense_dataset_t *d, size_t n, const int32_t *first_labels, double mean,
                          unsigned first_image_sum) {
    assert(d->n == n && d->dim == 784 && d->n_classes == 10);
    size_t hist[10] = {0};
    for (size_t i = 0; i < d->n; i++) {
        assert(d->y[i] >= 0 && d->y[i] < 10);
        hist[d->y[i]]++;
    }
    for (int c = 0; c < 10; c++) assert(hist[c] == n / 10);
    for (int i = 0; i < 10; i++) assert(d->y[i] == first_labels[i]);
    float lo = 1.0f, hi = 0.0f;
    double sum = 0.0, first = 0.0;
    for (size_t i = 0; i < n * 784; i++) {
        float v = d->x[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        if (i < 784) first += (double)v * 255.0;
    }
    assert(lo == 0.0f && hi == 1.0f);
    assert(sum / (double)(n * 784) > mean - 1e-6 && sum / (double)(n * 784) < mean + 1e-6);
    assert((unsigned)(first + 0.5) == first_image_sum);
    printf("  ok: %zu x %zu, n_classes %zu, %zu per class, pixels in [%g, %g], mean %.6f\n", d->n, d->dim, d->n_classes,
           hist[0], lo, hi, sum / (double)(n * 784));
}

static int test_real_fashion_mnist(void) {
    if (!test_have_fashion_mnist("test_idx: the real Fashion-MNIST part")) return 0;
    printf("real Fashion-MNIST from %s\n", ASGD_FASHION_MNIST_DIR);
    dense_dataset_t train, test, few;
    char err[512] = "";
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = fashion_mnist_load(NULL, 1, 0, &train, err, sizeof err);
    double t_train = seconds_since(&t0);
    if (rc != 0) fprintf(stderr, "%s\n", err);
    assert(rc == 0);
    printf("  train loaded in %.3f s\n", t_train);
    const int32_t train_first[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
    check_fashion(&train, 60000, train_first, 0.2860405969887955, 76247);

    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = fashion_mnist_load(NULL, 0, 0, &test, err, sizeof err);
    double t_test = seconds_since(&t0);
    if (rc != 0) fprintf(stderr, "%s\n", err);
    assert(rc == 0);
    printf("  test loaded in %.3f s\n", t_test);
    const int32_t test_first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    check_fashion(&test, 10000, test_first, 0.28684928071228494, 33456);

    rc = fashion_mnist_load(NULL, 1, 100, &few, err, sizeof err);
    assert(rc == 0 && few.n == 100 && few.dim == 784);
    assert(memcmp(few.x, train.x, 100 * 784 * sizeof *few.x) == 0 && memcmp(few.y, train.y, 100 * sizeof *few.y) == 0);
    printf("  ok: limit 100 gives the first 100 training examples\n");
    dense_dataset_free(&few);
    dense_dataset_free(&train);
    dense_dataset_free(&test);
    return 1;
}

// The same checks on bytes in memory (idx_parse): a header that claims 2^31
// images of 28 x 28 on 16 bytes is refused from the header and the length
// alone, before anything is allocated for it; the same in a gzip stream.
static void test_in_memory(void) {
    uint8_t images[32] = {0, 0, 8, 3, 0x80, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28};
    uint8_t labels[9] = {0, 0, 8, 1, 0, 0, 0, 1, 7};
    dense_dataset_t d;
    char err[512];
    assert(idx_parse("claims.idx3", images, 16, "l.idx1", labels, 9, 0, &d, err, sizeof err) == -1);
    assert(strstr(err, "claims.idx3: truncated: header says 2147483648 images of 28 x 28 pixels"));
    assert(d.x == NULL && d.n == 0);
    // One image of 2 x 2 pixels, raw: accepted; its labels file one byte short: refused, naming it.
    uint8_t one[20] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 85, 170, 255};
    assert(idx_parse("one.idx3", one, 20, "l.idx1", labels, 9, 0, &d, err, sizeof err) == 0);
    assert(d.n == 1 && d.dim == 4 && d.y[0] == 7 && d.x[3] == 1.0f);
    dense_dataset_free(&d);
    assert(idx_parse("one.idx3", one, 20, "short.idx1", labels, 8, 0, &d, err, sizeof err) == -1);
    assert(strstr(err, "short.idx1: file is 8 bytes") || strstr(err, "short.idx1: truncated"));
    // Wrong magic, and bytes that start like gzip but are not.
    assert(idx_parse("one.idx3", labels, 9, "l.idx1", labels, 9, 0, &d, err, sizeof err) == -1);
    assert(strstr(err, "one.idx3: bad IDX magic 0x00000801 at byte offset 0"));
    uint8_t fake_gz[4] = {0x1f, 0x8b, 8, 0};
    assert(idx_parse("fake.gz", fake_gz, 4, "l.idx1", labels, 9, 0, &d, err, sizeof err) == -1);
    assert(strstr(err, "fake.gz"));
    printf("in memory: a 2^31-image header on 16 bytes, a short labels file, wrong magic and broken gzip refused\n");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);  // keep stdout and stderr in order in ctest logs
    have_gzip = system("command -v gzip > /dev/null 2>&1") == 0;
    if (!have_gzip) test_skip("test_idx: no `gzip` on PATH, so the gzipped variants are not built or checked");
    char tmpdir[] = "/tmp/asgd_test_idx_XXXXXX";
    assert(mkdtemp(tmpdir));

    printf("synthetic IDX files in %s\n", tmpdir);
    write_corpus(tmpdir);
    test_good(tmpdir);
    test_bad(tmpdir);
    test_fashion_layout(tmpdir);

    if (getenv("ASGD_WRITE_SEEDS")) {
        write_corpus(SEED_DIR);
        printf("wrote the seed corpus to %s\n", SEED_DIR);
    }
    // The committed corpus must keep meaning what its names say.
    printf("seed corpus %s\n", SEED_DIR);
    struct stat st;
    if (stat(SEED_DIR "/good-images-idx3-ubyte.gz", &st) == 0) have_gzip = 1;
    test_good(SEED_DIR);
    test_bad(SEED_DIR);

    test_in_memory();
    int real = test_real_fashion_mnist();
    CHECK(test_remove_tree(tmpdir) == 0);
    printf("PASS%s\n", real ? "" : " (synthetic parts only)");
    return 0;
}
