#ifndef ASGD_TESTS_TEST_SUPPORT_H
#define ASGD_TESTS_TEST_SUPPORT_H
// Small helpers shared by the C tests: checks that print what failed and where,
// tiny in-memory datasets built from a seed, and removing a test's directory.
// nftw needs _GNU_SOURCE (or _XOPEN_SOURCE 700), which CMake's asgd_defs gives
// every test on the command line.
#include <ftw.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/dataset.h"
#include "kernels/foundation/rng.h"

#define TEST_SKIP 77

// What a test (or a part of one) cannot do here: says why on stderr and
// returns TEST_SKIP, so `return test_skip(...)` skips the test and a bare
// `test_skip(...)` drops the part and goes on. Under ASGD_REQUIRE_ALL=1 (CI)
// nothing may be left out: it fails the test instead. Every skip goes through
// here or through test_skip_no_gpu below; no test returns TEST_SKIP itself.
__attribute__((format(printf, 1, 2))) static inline int test_skip(const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *all = getenv("ASGD_REQUIRE_ALL");
    if (all && strcmp(all, "1") == 0) {
        fprintf(stderr, "FAILED: cannot run here, and ASGD_REQUIRE_ALL=1 forbids skipping: %s\n", why);
        exit(1);
    }
    fprintf(stderr, "skipped: %s\n", why);
    fflush(stdout);
    return TEST_SKIP;
}

// The one skip ASGD_REQUIRE_ALL=1 allows: a GPU test on a machine without a
// CUDA device, or in a build without CUDA (CI machines have no GPU).
__attribute__((format(printf, 1, 2))) static inline int test_skip_no_gpu(const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "skipped (no GPU): %s\n", why);
    fflush(stdout);
    return TEST_SKIP;
}

// A test run as one ctest per part (tests/tests.cmake: PARTS): `test_x PART`
// runs that part, no argument runs them all. Returns the part's index in
// parts (n names), -1 for all of them; exits 2 naming the expected parts when
// the argument is none of them.
static inline int test_part(int argc, char **argv, const char *const *parts, size_t n) {
    if (argc < 2) return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(argv[1], parts[i]) == 0) return (int)i;
    fprintf(stderr, "%s: unknown part '%s'; expected one of:", argv[0], argv[1]);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", parts[i]);
    fprintf(stderr, "\n");
    exit(2);
}

// 1 when Fashion-MNIST is installed; otherwise test_skip(part: why) and 0.
static inline int test_have_fashion_mnist(const char *part) {
    if (access(ASGD_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0 &&
        access(ASGD_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) == 0)
        return 1;
    test_skip("%s: Fashion-MNIST is not installed in " ASGD_FASHION_MNIST_DIR
              " (apt-get install dataset-fashion-mnist)",
              part);
    return 0;
}

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

#define CHECK_OK(call, err)                                                            \
    do {                                                                               \
        if ((call) != 0) {                                                             \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, err); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                        \
    do {                                                                                                             \
        double a_ = (a), b_ = (b);                                                                                   \
        if (!(fabs(a_ - b_) <= (tol))) {                                                                             \
            fprintf(stderr, "%s:%d: %s = %.9g, %s = %.9g, differ by more than %g\n", __FILE__, __LINE__, #a, a_, #b, \
                    b_, (double)(tol));                                                                              \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

// Writes bytes to dir/name and returns the path (a static buffer: one at a time).
static inline const char *test_write_file(const char *dir, const char *name, const char *bytes, size_t len) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(fwrite(bytes, 1, len, f) == len);
    CHECK(fclose(f) == 0);
    return path;
}

static inline int test_remove_tree_unlock(const char *path, const struct stat *st, int type, struct FTW *at) {
    (void)at;
    if ((type == FTW_D || type == FTW_DNR) && (st->st_mode & S_IRWXU) != S_IRWXU) {
        chmod(path, (st->st_mode & 07777) | S_IRWXU);
        if (type == FTW_DNR) return 1;  // walk again: its contents were out of reach
    }
    return 0;
}

static inline int test_remove_tree_one(const char *path, const struct stat *st, int type, struct FTW *at) {
    (void)st, (void)at;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

// Removes dir and everything under it, as `rm -rf` would but without a shell:
// symbolic links are removed, never followed, and directories a test made
// read-only are made writable first. Does nothing for "" or "/", nor when
// ASGD_KEEP_TEST_DIR is set (it says what it kept). Returns 0 when all is gone.
// Tests call it once they passed and every process they started was waited
// for; a failed CHECK exits before it, leaving the files to look at.
static inline int test_remove_tree(const char *dir) {
    if (!dir || dir[strspn(dir, "/")] == '\0') return -1;
    if (getenv("ASGD_KEEP_TEST_DIR")) {
        fprintf(stderr, "kept %s (ASGD_KEEP_TEST_DIR is set)\n", dir);
        return 0;
    }
    for (int pass = 0; pass < 64; pass++)  // one more walk per unreadable level
        if (nftw(dir, test_remove_tree_unlock, 16, FTW_PHYS) != 1) break;
    return nftw(dir, test_remove_tree_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

// The slot-th CPU (mod their count) of those in set, in ascending order: what
// --pin should choose (engine/core/cpu_pin.h), found without its code.
static inline int test_nth_cpu(const cpu_set_t *set, size_t slot) {
    size_t want = slot % (size_t)CPU_COUNT(set);
    for (int c = 0;; c++)
        if (CPU_ISSET(c, set) && want-- == 0) return c;
}

// n examples of dim features in `classes` clusters (class c centred on a seeded point).
static inline void make_dense(dense_dataset_t *d, size_t n, size_t dim, size_t classes, uint64_t seed) {
    char err[256];
    CHECK_OK(dense_dataset_alloc(d, n, dim, classes, err, sizeof err), err);
    rng_t r;
    rng_seed(&r, seed, 1);
    float *centre = malloc(classes * dim * sizeof *centre);
    for (size_t i = 0; i < classes * dim; i++) centre[i] = (float)rng_uniform(&r);
    for (size_t i = 0; i < n; i++) {
        int32_t c = (int32_t)rng_below(&r, classes);
        d->y[i] = c;
        for (size_t j = 0; j < dim; j++) d->x[i * dim + j] = centre[c * dim + j] + 0.3f * (float)rng_normal(&r);
    }
    free(centre);
}

// n examples, nnz distinct sorted features each, labels from a hidden weight vector.
static inline void make_sparse(sparse_dataset_t *d, size_t n, size_t dim, size_t nnz, uint64_t seed) {
    char err[256];
    CHECK_OK(sparse_dataset_alloc(d, n, dim, n * nnz, err, sizeof err), err);
    rng_t r;
    rng_seed(&r, seed, 2);
    float *hidden = malloc(dim * sizeof *hidden);
    for (size_t j = 0; j < dim; j++) hidden[j] = (float)rng_normal(&r);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        // nnz distinct features: a random start and stride keep them sorted and unique.
        size_t stride = dim / nnz, start = rng_below(&r, stride);
        double score = 0.0;
        for (size_t k = 0; k < nnz; k++) {
            uint32_t j = (uint32_t)(start + k * stride);
            d->col[at] = j;
            d->val[at] = (float)(0.2 + rng_uniform(&r));
            score += hidden[j] * d->val[at];
            at++;
        }
        d->row_ptr[i + 1] = at;
        d->y[i] = score >= 0 ? 1.0f : -1.0f;
    }
    free(hidden);
}

// Ratings from rank-k factors plus noise.
static inline void make_ratings(ratings_t *rt, size_t n, size_t users, size_t items, size_t rank, uint64_t seed) {
    char err[256];
    CHECK_OK(ratings_alloc(rt, n, users, items, err, sizeof err), err);
    rng_t r;
    rng_seed(&r, seed, 3);
    float *u = malloc(users * rank * sizeof *u), *v = malloc(items * rank * sizeof *v);
    for (size_t i = 0; i < users * rank; i++) u[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < items * rank; i++) v[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < n; i++) {
        uint32_t a = (uint32_t)rng_below(&r, users), b = (uint32_t)rng_below(&r, items);
        double dot = 3.0;
        for (size_t k = 0; k < rank; k++) dot += u[a * rank + k] * v[b * rank + k] / sqrt((double)rank);
        rt->user[i] = a;
        rt->item[i] = b;
        rt->rating[i] = (float)(dot + 0.1 * rng_normal(&r));
    }
    free(u);
    free(v);
}

#endif
