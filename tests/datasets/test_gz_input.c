// .gz input as users see it: a gzip'd libsvm file, ratings file and IDX pair
// (written here with zlib's gzopen/gzwrite) load exactly as their plain
// versions, and so does a FIFO fed one; truncated and corrupted .gz files,
// devices and directories are refused with one line naming the file; plain
// data from a FIFO is capped as inflated data is; an IDX file inflates no further
// than its header allows, and any .gz input no further than the cap. The seed
// corpus tests/data/gz/ (multi-member, every header flag, hand-broken streams)
// reads as its plain twins or is refused.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "datasets/data_input.h"
#include "datasets/idx.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "tests/support/input_support.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_gz_input_XXXXXX";

static const char *path_of(const char *name) { return input_path(dir, name); }

// Compresses a plain file to path_of(gz_name) with zlib's gzip writer; returns the gz path.
static const char *gzip_file(const char *plain_name, const char *gz_name) {
    size_t len;
    char *bytes = input_slurp(path_of(plain_name), &len);
    const char *gz_path = path_of(gz_name);
    gzFile g = gzopen(gz_path, "wb9");
    CHECK(g);
    CHECK(gzwrite(g, bytes, (unsigned)len) == (int)len);
    CHECK(gzclose(g) == Z_OK);
    free(bytes);
    return gz_path;
}

// Writes a broken copy of a .gz file: its first `keep` bytes, or all of it with one byte flipped.
static const char *broken_copy(const char *gz_name, const char *out_name, size_t keep, long flip_at) {
    size_t len;
    char *bytes = input_slurp(path_of(gz_name), &len);
    CHECK(keep <= len);
    if (flip_at >= 0) bytes[flip_at] ^= 0x55;
    const char *p = test_write_file(dir, out_name, bytes, keep);
    free(bytes);
    return p;
}

// A refusal: rc -1, one line, naming the file, saying `words`.
static void expect_refused(int rc, const char *err, const char *path, const char *words) {
    printf("  refused: %s\n", err);
    CHECK(rc == -1);
    CHECK(strstr(err, path) == err);
    CHECK(strstr(err, words) != NULL);
    CHECK(strchr(err, '\n') == NULL);
}

static void libsvm_gz(void) {
    printf("libsvm\n");
    char err[512];
    sparse_dataset_t orig, plain, gz;
    make_sparse(&orig, 3000, 500, 20, 7);  // ~0.9 MB of text: several of the reader's blocks once inflated
    CHECK_OK(libsvm_write(path_of("data.svm"), &orig, err, sizeof err), err);
    const char *gz_path = gzip_file("data.svm", "data.svm.gz");
    CHECK_OK(libsvm_load(path_of("data.svm"), 0, &plain, err, sizeof err), err);
    CHECK_OK(libsvm_load(gz_path, 0, &gz, err, sizeof err), err);
    input_same_examples(&plain, &gz);
    input_same_examples(&orig, &gz);
    printf("  data.svm.gz reads as data.svm: %zu examples, %zu non-zeros\n", gz.n, gz.nnz);
    // The same bytes in memory, compressed, through libsvm_parse.
    size_t len;
    char *bytes = input_slurp(gz_path, &len);
    sparse_dataset_t mem;
    CHECK_OK(libsvm_parse("mem.svm.gz", bytes, len, 0, &mem, err, sizeof err), err);
    input_same_examples(&plain, &mem);
    sparse_dataset_free(&mem);

    // Cut inside the compressed data, cut inside the 8-byte trailer, a flipped byte.
    sparse_dataset_t d;
    const char *p = broken_copy("data.svm.gz", "half.svm.gz", len / 2, -1);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "truncated gzip data");
    CHECK(d.n == 0 && d.row_ptr == NULL);
    p = broken_copy("data.svm.gz", "trailer.svm.gz", len - 3, -1);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "truncated gzip data");
    p = broken_copy("data.svm.gz", "flipped.svm.gz", len, (long)(len / 2));
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "corrupt gzip data");
    p = broken_copy("data.svm.gz", "crc.svm.gz", len, (long)len - 6);  // inside the CRC-32 of the trailer
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "incorrect data check");
    free(bytes);

    // The cap on inflated bytes: the .gz file is refused beyond it, the plain one is not capped.
    uint64_t cap_before = data_input_set_max_inflated(64 << 10);
    expect_refused(libsvm_load(gz_path, 0, &d, err, sizeof err), err, gz_path, "inflates to more than 65536 bytes");
    CHECK_OK(libsvm_load(path_of("data.svm"), 0, &d, err, sizeof err), err);
    sparse_dataset_free(&d);
    data_input_set_max_inflated(cap_before);
    CHECK(data_input_max_inflated() == DATA_INPUT_MAX_INFLATED_DEFAULT);

    sparse_dataset_free(&orig);
    sparse_dataset_free(&plain);
    sparse_dataset_free(&gz);
}

static void ratings_gz(void) {
    printf("ratings\n");
    FILE *f = fopen(path_of("r.csv"), "w");
    CHECK(f);
    fprintf(f, "userId,movieId,rating,timestamp\n");
    rng_t r;
    rng_seed(&r, 11, 0);
    for (int i = 0; i < 20000; i++)
        fprintf(f, "%u,%u,%.1f,%u\n", (unsigned)rng_below(&r, 700), (unsigned)rng_below(&r, 900),
                0.5 * (double)(1 + rng_below(&r, 10)), 1000000000u + (unsigned)i);
    CHECK(fclose(f) == 0);
    const char *gz_path = gzip_file("r.csv", "r.csv.gz");
    char err[512];
    ratings_t plain, gz;
    CHECK_OK(ratings_load(path_of("r.csv"), &plain, err, sizeof err), err);
    CHECK_OK(ratings_load(gz_path, &gz, err, sizeof err), err);
    CHECK(plain.n == 20000 && gz.n == plain.n && gz.n_users == plain.n_users && gz.n_items == plain.n_items);
    CHECK(memcmp(gz.user, plain.user, gz.n * sizeof *gz.user) == 0 &&
          memcmp(gz.item, plain.item, gz.n * sizeof *gz.item) == 0);
    CHECK(memcmp(gz.rating, plain.rating, gz.n * sizeof *gz.rating) == 0);
    printf("  r.csv.gz reads as r.csv: %zu ratings, %zu users, %zu items\n", gz.n, gz.n_users, gz.n_items);
    size_t len;
    free(input_slurp(gz_path, &len));
    ratings_t d;
    const char *p = broken_copy("r.csv.gz", "r-half.csv.gz", len / 2, -1);
    expect_refused(ratings_load(p, &d, err, sizeof err), err, p, "truncated gzip data");
    CHECK(d.n == 0 && d.user == NULL);
    p = broken_copy("r.csv.gz", "r-flipped.csv.gz", len, (long)(len / 3));
    expect_refused(ratings_load(p, &d, err, sizeof err), err, p, "corrupt gzip data");
    ratings_free(&plain);
    ratings_free(&gz);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

// n images of rows x cols and their labels, as IDX files images_name and labels_name.
static void write_idx_pair(const char *images_name, const char *labels_name, uint32_t n, uint32_t rows, uint32_t cols) {
    size_t px = (size_t)n * rows * cols;
    uint8_t *buf = malloc(16 + px);
    CHECK(buf);
    put_be32(buf, 0x803), put_be32(buf + 4, n), put_be32(buf + 8, rows), put_be32(buf + 12, cols);
    for (size_t k = 0; k < px; k++) buf[16 + k] = (uint8_t)(k * 131 % 251);
    test_write_file(dir, images_name, (const char *)buf, 16 + px);
    put_be32(buf, 0x801), put_be32(buf + 4, n);
    for (uint32_t i = 0; i < n; i++) buf[8 + i] = (uint8_t)(i * 7 % 10);
    test_write_file(dir, labels_name, (const char *)buf, 8 + n);
    free(buf);
}

static void idx_gz(void) {
    printf("IDX\n");
    write_idx_pair("i-idx3", "l-idx1", 300, 28, 28);
    gzip_file("i-idx3", "i-idx3.gz");
    gzip_file("l-idx1", "l-idx1.gz");
    char err[512];
    dense_dataset_t plain, gz, mixed;
    CHECK_OK(idx_load(path_of("i-idx3"), path_of("l-idx1"), 0, &plain, err, sizeof err), err);
    CHECK_OK(idx_load(path_of("i-idx3.gz"), path_of("l-idx1.gz"), 0, &gz, err, sizeof err), err);
    CHECK_OK(idx_load(path_of("i-idx3.gz"), path_of("l-idx1"), 0, &mixed, err, sizeof err), err);
    CHECK(plain.n == 300 && plain.dim == 784 && gz.n == plain.n && gz.dim == plain.dim && mixed.n == plain.n);
    CHECK(memcmp(gz.x, plain.x, plain.n * plain.dim * sizeof *gz.x) == 0 &&
          memcmp(gz.y, plain.y, plain.n * sizeof *gz.y) == 0);
    CHECK(memcmp(mixed.x, plain.x, plain.n * plain.dim * sizeof *gz.x) == 0);
    CHECK(plain.x[1] == (float)131 / 255.0f && plain.y[3] == 1);
    printf("  i-idx3.gz + l-idx1.gz read as the plain pair: %zu x %zu\n", gz.n, gz.dim);
    dense_dataset_free(&plain);
    dense_dataset_free(&gz);
    dense_dataset_free(&mixed);

    size_t len;
    free(input_slurp(path_of("i-idx3.gz"), &len));
    dense_dataset_t d;
    const char *p = broken_copy("i-idx3.gz", "half-idx3.gz", len / 2, -1);
    expect_refused(idx_load(p, path_of("l-idx1.gz"), 0, &d, err, sizeof err), err, p, "truncated gzip data");
    p = broken_copy("i-idx3.gz", "flipped-idx3.gz", len, (long)(len / 2));
    expect_refused(idx_load(p, path_of("l-idx1.gz"), 0, &d, err, sizeof err), err, p, "corrupt gzip data");
    CHECK(d.n == 0 && d.x == NULL);

    // The header bounds what is inflated: 5 images of 3 x 4 in a first gzip member,
    // then 4096 members of 1 MiB of zeros each (4 GiB inflated, ~4 MB on disk).
    // It is refused after the 60 declared bytes and a 4 KiB look beyond them.
    write_idx_pair("five-idx3", "five-idx1", 5, 3, 4);
    gzip_file("five-idx3", "bomb-idx3.gz");
    char *zeros = calloc(1, 1 << 20);
    CHECK(zeros);
    gzFile g = gzopen(path_of("zeros.gz"), "wb9");
    CHECK(g && gzwrite(g, zeros, 1 << 20) == 1 << 20 && gzclose(g) == Z_OK);
    free(zeros);
    size_t zlen;
    char *member = input_slurp(path_of("zeros.gz"), &zlen);
    FILE *f = fopen(path_of("bomb-idx3.gz"), "ab");
    CHECK(f);
    for (int i = 0; i < 4096; i++) CHECK(fwrite(member, 1, zlen, f) == zlen);
    CHECK(fclose(f) == 0);
    free(member);
    p = path_of("bomb-idx3.gz");
    expect_refused(idx_load(p, path_of("five-idx1"), 0, &d, err, sizeof err), err, p,
                   "at least 4096 trailing byte(s) after the 5 images of 3 x 4 pixels");
    // A header that claims more than the data holds, beyond the cap: refused at the cap.
    write_idx_pair("big-idx3", "big-idx1", 1, 1, 1);
    uint8_t header[16];
    put_be32(header, 0x803), put_be32(header + 4, 1u << 20), put_be32(header + 8, 28), put_be32(header + 12, 28);
    g = gzopen(path_of("claims-idx3.gz"), "wb1");
    CHECK(g && gzwrite(g, header, 16) == 16);
    zeros = calloc(1, 1 << 20);
    for (int i = 0; i < 4; i++) CHECK(gzwrite(g, zeros, 1 << 20) == 1 << 20);
    CHECK(gzclose(g) == Z_OK);
    free(zeros);
    uint64_t cap_before = data_input_set_max_inflated(1 << 20);
    p = path_of("claims-idx3.gz");
    expect_refused(idx_load(p, path_of("big-idx1"), 0, &d, err, sizeof err), err, p,
                   "inflates to more than 1048576 bytes");
    data_input_set_max_inflated(cap_before);
    expect_refused(idx_load(p, path_of("big-idx1"), 0, &d, err, sizeof err), err, p,
                   "truncated: header says 1048576 images");
}

// FIFOs are read (plain or compressed, as a file); devices and directories
// are refused at once, naming the file and what it is.
static void not_regular(void) {
    printf("FIFOs, devices, directories\n");
    char err[512];
    sparse_dataset_t s, plain;
    ratings_t r;
    dense_dataset_t d;
    const char *fifo = path_of("fifo.svm");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_OK(libsvm_load(path_of("data.svm"), 0, &plain, err, sizeof err), err);
    pid_t w = input_feed(-1, fifo, path_of("data.svm.gz"));
    CHECK_OK(libsvm_load(fifo, 0, &s, err, sizeof err), err);
    input_fed(w, 1);
    input_same_examples(&plain, &s);
    printf("  a FIFO fed data.svm.gz reads as data.svm: %zu examples\n", s.n);
    sparse_dataset_free(&s);
    // A plain stream from a FIFO is capped as a compressed one is.
    uint64_t cap_before = data_input_set_max_inflated(64 << 10);
    w = input_feed(-1, fifo, path_of("data.svm"));
    expect_refused(libsvm_load(fifo, 0, &s, err, sizeof err), err, fifo,
                   "more than 65536 bytes, the cap on data read from a pipe or stdin");
    input_fed(w, 0);
    data_input_set_max_inflated(cap_before);
    w = input_feed(-1, fifo, path_of("r.csv"));
    CHECK_OK(ratings_load(fifo, &r, err, sizeof err), err);
    input_fed(w, 1);
    CHECK(r.n == 20000);
    ratings_free(&r);
    sparse_dataset_free(&plain);
    expect_refused(libsvm_load("/dev/zero", 0, &s, err, sizeof err), err, "/dev/zero",
                   "is a character device, not a regular file");
    expect_refused(idx_load(path_of("i-idx3"), "/dev/zero", 0, &d, err, sizeof err), err, "/dev/zero",
                   "is a character device");
    expect_refused(ratings_load(dir, &r, err, sizeof err), err, dir, "is a directory");
    CHECK(s.n == 0 && r.n == 0 && d.n == 0);
}

// tests/data/gz/: every X.gz reads as exactly X, every bad-*.gz is refused naming it.
static void seed_corpus(void) {
    const char *seeds = ASGD_TEST_DATA_DIR "/gz";
    printf("seed corpus %s\n", seeds);
    DIR *dd = opendir(seeds);
    CHECK(dd);
    int good = 0, bad = 0;
    for (struct dirent *e; (e = readdir(dd)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".gz") != 0) continue;
        char path[512], twin[512], err[512] = "";
        snprintf(path, sizeof path, "%s/%s", seeds, e->d_name);
        data_input_t *in;
        CHECK_OK(data_input_open(&in, path, err, sizeof err), err);
        CHECK(data_input_compressed(in));
        size_t cap = 1 << 20, got;
        char *out = malloc(cap);
        CHECK(out);
        int rc = data_input_read(in, out, cap, &got, err, sizeof err);
        data_input_close(in);
        if (strncmp(e->d_name, "bad-", 4) == 0) {
            expect_refused(rc, err, path, "gzip");
            bad++;
        } else {
            CHECK_OK(rc, err);
            snprintf(twin, sizeof twin, "%s/%.*s", seeds, (int)(n - 3), e->d_name);
            size_t len;
            char *want = input_slurp(twin, &len);
            CHECK(got == len && memcmp(out, want, len) == 0);
            free(want);
            good++;
        }
        free(out);
    }
    closedir(dd);
    CHECK(good >= 5 && bad >= 10);
    printf("  %d read as their plain twins, %d refused\n", good, bad);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    libsvm_gz();
    ratings_gz();
    idx_gz();
    not_regular();
    seed_corpus();
    CHECK(test_remove_tree(dir) == 0);
    printf("gz input tests passed\n");
    return 0;
}
