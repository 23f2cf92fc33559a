// Compressed input recognised by its content (datasets/data_input.h):
//   a) xz and zstd files (one stream or frame, several, zstd's skippable
//      frames, xz's stream padding) read exactly as the plain file, whatever
//      their name: libsvm, CSV with string labels, ratings, IDX;
//   b) truncated, corrupt and trailed xz and zstd data, a failed checksum,
//      more than the cap, a dictionary or window beyond the bound: refused
//      with one line naming the file and what is wrong;
//   c) content compressed another way or archived (bzip2, lz4, lzip, .lzma,
//      .Z, zip, 7-Zip, RAR) and binary content read as text (a program, an
//      image, an IDX or model file, a tar archive inside gzip): refused,
//      naming the file and what it looks like.
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "datasets/csv.h"
#include "datasets/data_input.h"
#include "datasets/idx.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "tests/support/input_support.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_compressed_XXXXXX";

static const char *path_of(const char *name) { return input_path(dir, name); }

static unsigned char *slurp(const char *path, size_t *len) { return (unsigned char *)input_slurp(path, len); }

static void spill(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, len, f) == len && fclose(f) == 0);
}

// A buffer growing by appends.
typedef struct bytes {
    unsigned char *p;
    size_t len, cap;
} bytes_t;

static void append(bytes_t *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        CHECK((b->p = realloc(b->p, b->cap)) != NULL);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void xz_append(bytes_t *out, const unsigned char *in, size_t n, uint32_t preset) {
    size_t cap = lzma_stream_buffer_bound(n), pos = 0;
    unsigned char *buf = malloc(cap);
    CHECK(buf && lzma_easy_buffer_encode(preset, LZMA_CHECK_CRC64, NULL, in, n, buf, &pos, cap) == LZMA_OK);
    append(out, buf, pos);
    free(buf);
}

// A zstd frame of in: with a checksum and without the content size, so the
// frame header holds a window descriptor (at byte 5).
static void zstd_append(bytes_t *out, const unsigned char *in, size_t n, int level) {
    ZSTD_CCtx *c = ZSTD_createCCtx();
    CHECK(c);
    CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)));
    CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)));
    CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)));
    size_t cap = ZSTD_compressBound(n);
    unsigned char *buf = malloc(cap);
    size_t got = ZSTD_compress2(c, buf, cap, in, n);
    CHECK(buf && !ZSTD_isError(got));
    append(out, buf, got);
    free(buf);
    ZSTD_freeCCtx(c);
}

// The plain file `plain` compressed as `name` in `form`: "xz", "xz2" (two
// streams and padding), "zst", "zst2" (two frames around a skippable one).
static const char *compress_file(const char *plain, const char *name, const char *form) {
    size_t len;
    unsigned char *in = slurp(path_of(plain), &len);
    bytes_t out = {0};
    if (strcmp(form, "xz") == 0) {
        xz_append(&out, in, len, 6);
    } else if (strcmp(form, "xz2") == 0) {
        xz_append(&out, in, len / 3, 1);
        append(&out, "\0\0\0\0\0\0\0\0", 8);  // stream padding: a multiple of 4 zero bytes
        xz_append(&out, in + len / 3, len - len / 3, 9);
    } else if (strcmp(form, "zst") == 0) {
        zstd_append(&out, in, len, 3);
    } else {
        zstd_append(&out, in, len / 2, 1);
        const unsigned char skippable[12] = {0x5a, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'a', 's', 'g', 'd'};
        append(&out, skippable, sizeof skippable);
        zstd_append(&out, in + len / 2, len - len / 2, 19);
    }
    const char *path = path_of(name);
    spill(path, out.p, out.len);
    free(out.p);
    free(in);
    return path;
}

static void expect_refused(int rc, const char *err, const char *path, const char *words) {
    printf("  refused: %s\n", err);
    CHECK(rc == -1);
    CHECK(strstr(err, path) == err);
    if (!strstr(err, words)) {
        fprintf(stderr, "want: %s\n", words);
        exit(1);
    }
    CHECK(strchr(err, '\n') == NULL);
}

static const char *const forms[] = {"xz", "xz2", "zst", "zst2"};

// ---- a) the same as plain ----

static void round_trips(void) {
    printf("a) xz and zstd read as the plain files\n");
    char err[512];
    sparse_dataset_t orig, plain;
    make_sparse(&orig, 6000, 700, 20, 3);  // ~1.7 MB of text: more than one block once decompressed
    CHECK_OK(libsvm_write(path_of("data.svm"), &orig, err, sizeof err), err);
    CHECK_OK(libsvm_load(path_of("data.svm"), 0, &plain, err, sizeof err), err);
    for (size_t f = 0; f < 4; f++) {
        char name[64];
        snprintf(name, sizeof name, "data-%s.txt", forms[f]);  // the name says nothing
        sparse_dataset_t d;
        CHECK_OK(libsvm_load(compress_file("data.svm", name, forms[f]), 0, &d, err, sizeof err), err);
        input_same_sparse(&plain, &d);
        sparse_dataset_free(&d);
        printf("  libsvm as %s: %zu examples\n", forms[f], plain.n);
    }
    sparse_dataset_free(&plain);
    sparse_dataset_free(&orig);

    // CSV with string labels, and ratings.
    FILE *f = fopen(path_of("iris.csv"), "w");
    CHECK(f);
    fprintf(f, "a,b,species\n");
    for (int i = 0; i < 5000; i++)
        fprintf(f, "%d.%d,%d,%s\n", i % 7, i % 10, i % 3,
                i % 3 ? (i % 3 == 1 ? "versicolor" : "\"virginica, v\"") : "setosa");
    CHECK(fclose(f) == 0);
    f = fopen(path_of("r.csv"), "w");
    CHECK(f);
    for (int i = 0; i < 5000; i++) fprintf(f, "%d,%d,%.1f\n", i % 71, i % 113, 0.5 * (1 + i % 10));
    CHECK(fclose(f) == 0);
    csv_options_t o = {"species", 0, NULL, 0, NULL};
    sparse_dataset_t cp;
    ratings_t rp;
    CHECK_OK(csv_load(path_of("iris.csv"), &o, &cp, err, sizeof err), err);
    CHECK_OK(ratings_load(path_of("r.csv"), &rp, err, sizeof err), err);
    CHECK(cp.n == 5000 && cp.n_classes == 3 && cp.label_text);
    for (size_t k = 0; k < 4; k++) {
        char name[64];
        sparse_dataset_t d;
        ratings_t r;
        snprintf(name, sizeof name, "iris.csv.%s", forms[k]);
        CHECK_OK(csv_load(compress_file("iris.csv", name, forms[k]), &o, &d, err, sizeof err), err);
        input_same_sparse(&cp, &d);
        sparse_dataset_free(&d);
        snprintf(name, sizeof name, "r.%s", forms[k]);
        CHECK_OK(ratings_load(compress_file("r.csv", name, forms[k]), &r, err, sizeof err), err);
        CHECK(r.n == rp.n && memcmp(r.user, rp.user, r.n * 4) == 0 && memcmp(r.rating, rp.rating, r.n * 4) == 0);
        ratings_free(&r);
    }
    printf("  CSV of string labels and ratings as xz, xz2, zst, zst2: the same sets\n");
    sparse_dataset_free(&cp);
    ratings_free(&rp);

    // An IDX pair, one file xz and one zstd.
    unsigned char images[16 + 4 * 3 * 3] = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 3};
    unsigned char labels[8 + 4] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
    for (int i = 0; i < 36; i++) images[16 + i] = (unsigned char)(i * 7);
    spill(path_of("i-idx3"), images, sizeof images);
    spill(path_of("l-idx1"), labels, sizeof labels);
    dense_dataset_t a, b;
    CHECK_OK(idx_load(path_of("i-idx3"), path_of("l-idx1"), 0, &a, err, sizeof err), err);
    CHECK_OK(idx_load(compress_file("i-idx3", "i-idx3.xz", "xz"), compress_file("l-idx1", "l-idx1.zst", "zst"), 0, &b,
                      err, sizeof err),
             err);
    CHECK(a.n == 4 && b.n == 4 && memcmp(a.x, b.x, 4 * 9 * sizeof *a.x) == 0 && memcmp(a.y, b.y, 4 * sizeof *a.y) == 0);
    dense_dataset_free(&a);
    dense_dataset_free(&b);
    printf("  an IDX pair as xz and zstd\n");
}

// ---- b) broken xz and zstd ----

// A copy of path's bytes as `name`: its first `keep` bytes, then `extra`; one byte xored at flip_at (-1: none).
static const char *variant(const char *path, const char *name, size_t keep, long flip_at, const char *extra) {
    size_t len;
    unsigned char *b = slurp(path, &len);
    if (keep > len) keep = len;
    if (flip_at >= 0) b[flip_at] ^= 0x55;
    bytes_t out = {0};
    append(&out, b, keep);
    if (extra) append(&out, extra, strlen(extra));
    const char *p = path_of(name);
    spill(p, out.p, out.len);
    free(out.p);
    free(b);
    return p;
}

static size_t size_of(const char *path) {
    size_t len;
    free(slurp(path, &len));
    return len;
}

// The dictionary size in the first block header of an xz file set to its
// largest (4 GiB), the header's CRC-32 made right again.
static const char *xz_huge_dictionary(const char *path, const char *name) {
    size_t len;
    unsigned char *b = slurp(path, &len);
    size_t at = 12, size = ((size_t)b[at] + 1) * 4, p = at + 2;  // after the stream header: the block header
    unsigned flags = b[at + 1];
    for (int field = 0; field < 2; field++)
        if (flags & (0x40u << field))
            while (b[p++] & 0x80) {
            }
    CHECK(b[p] == 0x21 && b[p + 1] == 1);  // LZMA2, one byte of properties
    b[p + 2] = 40;
    uint32_t crc = (uint32_t)crc32(0, b + at, (uInt)(size - 4));
    for (int i = 0; i < 4; i++) b[at + size - 4 + i] = (unsigned char)(crc >> (8 * i));
    const char *out = path_of(name);
    spill(out, b, len);
    free(b);
    return out;
}

static void broken(void) {
    printf("b) broken xz and zstd data\n");
    char err[512];
    sparse_dataset_t d;
    char xz[512], zst[512];
    snprintf(xz, sizeof xz, "%s", path_of("data-xz.txt"));
    snprintf(zst, sizeof zst, "%s", path_of("data-zst.txt"));
    size_t xn = size_of(xz), zn = size_of(zst);
    const char *p = variant(xz, "half.xz", xn / 2, -1, NULL);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "truncated xz data");
    p = variant(xz, "flip.xz", xn, (long)(xn / 2), NULL);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p,
                   "corrupt xz data in the stream from byte offset 0: the data or its integrity check is wrong");
    p = variant(xz, "check.xz", xn, (long)xn - 20, NULL);  // inside the index or its CRC
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "corrupt xz data");
    p = variant(xz, "trailed.xz", xn, -1, "more text\n");
    expect_refused(
        libsvm_load(p, 0, &d, err, sizeof err), err, p,
        "byte 0x6d at byte offset 622532 follows the end of the xz data (expected another xz stream or the end of "
        "the file)");
    p = xz_huge_dictionary(xz, "huge-dict.xz");
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p,
                   "MiB of memory to decompress, more than the 128 MiB allowed");

    p = variant(zst, "half.zst", zn / 2, -1, NULL);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "truncated zstd data");
    p = variant(zst, "flip.zst", zn, (long)(zn / 2), NULL);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "corrupt zstd data in the frame from byte offset 0");
    p = variant(zst, "checksum.zst", zn, (long)zn - 2, NULL);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p,
                   "corrupt zstd data in the frame from byte offset 0: the data or its checksum is wrong");
    p = variant(zst, "trailed.zst", zn, -1, "ab");
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "byte 0x61 at byte offset");
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p,
                   "follows the end of the zstd data (expected another zstd "
                   "frame or the end of the file)");
    size_t len;
    unsigned char *b = slurp(zst, &len);
    CHECK((b[4] & 0x20) == 0);  // not a single segment: byte 5 is the window descriptor
    b[5] = 20 << 3;  // a window of 2^30 bytes
    p = path_of("window.zst");
    spill(p, b, len);
    free(b);
    expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, "the zstd data needs a window of more than 128 MiB");

    // The cap on decompressed bytes, as for gzip.
    uint64_t before = data_input_set_max_inflated(64 << 10);
    expect_refused(libsvm_load(xz, 0, &d, err, sizeof err), err, xz,
                   "decompresses to more than 65536 bytes, the cap on xz-compressed input");
    expect_refused(libsvm_load(zst, 0, &d, err, sizeof err), err, zst,
                   "decompresses to more than 65536 bytes, the cap on zstd-compressed input");
    data_input_set_max_inflated(before);
    CHECK(d.n == 0 && d.row_ptr == NULL);
}

// ---- c) other compressions, archives, binary content ----

static void refused_content(void) {
    printf("c) content asgd does not read\n");
    static const struct {
        const char *name, *bytes;
        size_t len;
        const char *words;
    } cases[] = {
        {"data.bz2", "BZh91AY&SY\x01\x02", 12,
         "is bzip2-compressed (it starts with 42 5a 68 39 31 41 'BZh91A'); asgd reads "
         "plain text and gzip, xz or zstd data: decompress it first (bunzip2 -k FILE)"},
        {"data.lz4", "\x04\x22\x4d\x18\x64\x40\xa7", 7, "is lz4-compressed"},
        {"data.lz", "LZIP\x01\x0c", 6, "is lzip-compressed"},
        {"data.lzma", "\x5d\x00\x00\x80\x00\xff", 6, "is compressed in the .lzma format, older than .xz"},
        {"data.Z", "\x1f\x9d\x90\x31", 4, "is compressed by compress(1), a .Z file"},
        {"data.zip", "PK\x03\x04\x14\x00", 6, "is a zip archive"},
        {"data.7z", "7z\xbc\xaf\x27\x1c\x00\x04", 8, "is a 7-Zip archive"},
        {"data.rar", "Rar!\x1a\x07\x01\x00", 8, "is a RAR archive"},
        {"prog",
         "\x7f"
         "ELF\x02\x01\x01\x00",
         8, "is an ELF program or library, not text"},
        {"img.png", "\x89PNG\r\n\x1a\n\0\0", 10, "is a PNG image, not text"},
        {"m.model", "ASGDMODL\x01\0\0\0", 12, "is an asgd model file (--save-model), not text"},
        {"images", "\x00\x00\x08\x03\x00\x00\x00\x01", 8, "is an IDX file (binary images), not text"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = path_of(cases[i].name);
        spill(p, cases[i].bytes, cases[i].len);
        sparse_dataset_t d;
        expect_refused(libsvm_load(p, 0, &d, err, sizeof err), err, p, cases[i].words);
        csv_options_t o = {NULL, 0, NULL, 0, NULL};
        expect_refused(csv_load(p, &o, &d, err, sizeof err), err, p, cases[i].words);
    }
    // A tar archive inside gzip, and an IDX reader given bzip2.
    char tar[1024];
    memset(tar, 0, sizeof tar);
    snprintf(tar, 100, "data.svm");
    memcpy(tar + 257, "ustar", 5);
    gzFile g = gzopen(path_of("data.tar.gz"), "wb");
    CHECK(g && gzwrite(g, tar, sizeof tar) == (int)sizeof tar && gzclose(g) == Z_OK);
    sparse_dataset_t d;
    expect_refused(libsvm_load(path_of("data.tar.gz"), 0, &d, err, sizeof err), err, path_of("data.tar.gz"),
                   "is a tar archive inside compressed data, not text");
    dense_dataset_t dd;
    expect_refused(idx_load(path_of("data.bz2"), path_of("l-idx1"), 0, &dd, err, sizeof err), err, path_of("data.bz2"),
                   "is bzip2-compressed");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    round_trips();
    broken();
    refused_content();
    CHECK(test_remove_tree(dir) == 0);
    printf("compressed input tests passed\n");
    return 0;
}
