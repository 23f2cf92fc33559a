// Parsing alone: the libsvm and CSV readers' MB/s from text already in
// memory (no disk, no decompression), on 1 thread and on 2
// (text_blocks_set_threads), and per core.
//
//   build/bench_parse [--libsvm FILE] [--csv FILE] [--reps R] [--threads 1,2] [--only libsvm|csv]
//
// Text (read into memory once; without a file, made here and kept in memory):
//   libsvm  what `asgd gen sparse --n 160000 --dim 100000 --nnz 60 --seed 7
//           --out big.svm` writes (176 MB, 9.6M non-zeros, values as %.9g)
//   CSV     a header line, then 400,000 rows: an integer label 0/1 and 32
//           features, about one in five "0", the rest normal floats (sd 3)
//           as %.9g writes them (~130 MB)
// Each text is parsed R times (default 5) at each thread count, the counts
// alternating within a repeat; every parse must give the same data set, bit
// for bit, as the first. Reported: the median wall seconds, MB/s (10^6 bytes
// of text a second), MB/s per core (MB/s / threads), and the CPU seconds of
// the process (all threads) during the parse with MB per CPU second. The
// parse is the whole of libsvm_parse / csv_parse: blocks, joining, classes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench_support.h"
#include "datasets/csv.h"
#include "datasets/libsvm.h"
#include "datasets/text_blocks.h"
#include "datasets/text_io.h"
#include "engine/data/generate.h"
#include "kernels/foundation/rng.h"

#define MAX_REPS 64
#define MAX_COUNTS 8

static void die(const char *what) {
    fprintf(stderr, "bench_parse: %s\n", what);
    exit(1);
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

// ---- the texts ----

static void read_text(const char *path, char **text, size_t *len) {
    char err[1024];
    if (text_file_read(path, text, len, err, sizeof err) != 0) die(err);
}

// The generator's libsvm file, through a temporary file (libsvm_write writes paths).
static void make_libsvm(char **text, size_t *len) {
    char err[1024], path[] = "/tmp/bench_parse_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) die("cannot make a temporary file in /tmp");
    sparse_gen_config_t c;
    sparse_gen_config_default(&c);
    c.n_examples = 160000;
    c.dim = 100000;
    c.nnz_per_example = 60;
    c.seed = 7;
    sparse_dataset_t d;
    int rc = gen_sparse(&c, &d, err, sizeof err) == 0 && libsvm_write(path, &d, err, sizeof err) == 0 ? 0 : -1;
    if (rc == 0) sparse_dataset_free(&d);
    if (rc == 0) read_text(path, text, len);
    unlink(path);
    close(fd);
    if (rc != 0) die(err);
}

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf_t;

static void put(text_buf_t *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = 2 * (b->len + n + 1);
        if (!(b->data = realloc(b->data, b->cap))) die("out of memory for the CSV text");
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void make_csv(char **text, size_t *len) {
    enum { ROWS = 400000, FEATURES = 32 };
    text_buf_t b = {NULL, 0, 0};
    char num[40];
    put(&b, "label", 5);
    for (int k = 0; k < FEATURES; k++) put(&b, num, (size_t)snprintf(num, sizeof num, ",f%d", k + 1));
    put(&b, "\n", 1);
    rng_t r;
    rng_seed(&r, 11, 0);
    for (int i = 0; i < ROWS; i++) {
        put(&b, rng_below(&r, 2) ? "1" : "0", 1);
        for (int k = 0; k < FEATURES; k++) {
            num[0] = ',';
            if (rng_below(&r, 5) == 0)
                put(&b, ",0", 2);
            else
                put(&b, num, 1 + (size_t)text_format_float((float)(rng_normal(&r) * 3.0), num + 1));
        }
        put(&b, "\n", 1);
    }
    *text = b.data;
    *len = b.len;
}

// ---- timing ----

static int same_sets(const sparse_dataset_t *a, const sparse_dataset_t *b) {
    return a->n == b->n && a->nnz == b->nnz && a->dim == b->dim && a->n_classes == b->n_classes &&
           memcmp(a->row_ptr, b->row_ptr, (a->n + 1) * sizeof *a->row_ptr) == 0 &&
           memcmp(a->col, b->col, a->nnz * sizeof *a->col) == 0 &&
           memcmp(a->val, b->val, a->nnz * sizeof *a->val) == 0 && memcmp(a->cls, b->cls, a->n * sizeof *a->cls) == 0;
}

static void parse_text(const char *label, const char *text, size_t len, int csv, const size_t *counts, size_t n_counts,
                       int reps) {
    static double wall[MAX_COUNTS][MAX_REPS], cpu[MAX_COUNTS][MAX_REPS];
    sparse_dataset_t first;
    sparse_dataset_init(&first);
    char err[1024];
    for (int r = 0; r < reps; r++) {
        for (size_t t = 0; t < n_counts; t++) {
            text_blocks_set_threads(counts[t]);
            sparse_dataset_t d;
            csv_options_t o = {.label_column = NULL};
            double c0 = cpu_s(), t0 = bench_now_s();
            int rc = csv ? csv_parse(label, text, len, &o, &d, err, sizeof err)
                         : libsvm_parse(label, text, len, 0, &d, err, sizeof err);
            wall[t][r] = bench_now_s() - t0;
            cpu[t][r] = cpu_s() - c0;
            if (rc != 0) die(err);
            if (!first.row_ptr) {
                first = d;
                continue;
            }
            if (!same_sets(&first, &d)) die("a parse differs from the first");
            sparse_dataset_free(&d);
        }
    }
    text_blocks_set_threads(0);
    double mb = (double)len / 1e6;
    printf("%s: %.1f MB, %zu rows, %zu non-zeros, medians of %d\n", label, mb, first.n, first.nnz, reps);
    printf("  threads   wall s    MB/s  MB/s per core   cpu s  MB per cpu s\n");
    for (size_t t = 0; t < n_counts; t++) {
        double w = bench_median(wall[t], reps), c = bench_median(cpu[t], reps);
        printf("  %7zu %8.3f %7.0f %14.0f %7.3f %13.0f\n", counts[t], w, mb / w, mb / w / (double)counts[t], c, mb / c);
    }
    sparse_dataset_free(&first);
}

int main(int argc, char **argv) {
    const char *libsvm_path = NULL, *csv_path = NULL, *only = NULL;
    int reps = 5;
    size_t counts[MAX_COUNTS] = {1, 2}, n_counts = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--libsvm") == 0 && v)
            libsvm_path = v, i++;
        else if (strcmp(a, "--csv") == 0 && v)
            csv_path = v, i++;
        else if (strcmp(a, "--only") == 0 && v && (!strcmp(v, "libsvm") || !strcmp(v, "csv")))
            only = v, i++;
        else if (strcmp(a, "--reps") == 0 && v)
            reps = atoi(v), i++;
        else if (strcmp(a, "--threads") == 0 && v)
            n_counts = bench_parse_list("bench_parse", v, counts, MAX_COUNTS), i++;
        else {
            fprintf(stderr,
                    "usage: bench_parse [--libsvm FILE] [--csv FILE] [--reps R (1..%d)] [--threads 1,2] "
                    "[--only libsvm|csv]\n",
                    MAX_REPS);
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS) die("--reps: 1 to 64");
    char *text;
    size_t len;
    if (!only || strcmp(only, "libsvm") == 0) {
        if (libsvm_path)
            read_text(libsvm_path, &text, &len);
        else
            make_libsvm(&text, &len);
        parse_text(libsvm_path ? libsvm_path : "gen-sparse.svm", text, len, 0, counts, n_counts, reps);
        free(text);
    }
    if (!only || strcmp(only, "csv") == 0) {
        if (csv_path)
            read_text(csv_path, &text, &len);
        else
            make_csv(&text, &len);
        parse_text(csv_path ? csv_path : "dense.csv", text, len, 1, counts, n_counts, reps);
        free(text);
    }
    return 0;
}
