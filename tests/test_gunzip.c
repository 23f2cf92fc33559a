// Round-trips data through the system gzip and back through our inflater, and
// feeds it corrupt and hand-built streams that must fail cleanly. With
// ASGD_WRITE_SEEDS=1 it also rewrites the seed corpus in tests/data/gz/.
#include <assert.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/gunzip.h"  // defines: gz_read_file, gz_inflate_buffer
#include "datasets/rng.h"     // defines: rng_seed, rng_next, rng_below

#define SEED_DIR ASGD_TEST_DATA_DIR "/gz"

static char tmpdir[64];
static int n_errors_seen;

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert(f);
    assert(fwrite(data, 1, len, f) == len);
    assert(fclose(f) == 0);
}

// Reads a file without our code under test, so expectations stay independent.
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert(f);
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    assert(buf);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            buf = realloc(buf, cap *= 2);
            assert(buf);
        }
    }
    assert(!ferror(f));
    fclose(f);
    *len = n;
    return buf;
}

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...) {
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert(w > 0 && (size_t)w < sizeof cmd);
    if (system(cmd) != 0) {
        fprintf(stderr, "command failed: %s\n", cmd);
        exit(1);
    }
}

static const char *tmp(const char *name) {
    static char paths[8][256];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    return p;
}

// Bitwise reference CRC-32, deliberately unlike the table-driven one under test.
static uint32_t ref_crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static void expect_file_roundtrip(const char *gz_path, const uint8_t *want, size_t want_len) {
    uint8_t *out = NULL;
    size_t out_len = 0;
    char err[512] = "";
    int rc = gz_read_file(gz_path, &out, &out_len, err, sizeof err);
    if (rc != 0) fprintf(stderr, "unexpected error: %s\n", err);
    assert(rc == 0);
    assert(out != NULL);
    assert(out_len == want_len);
    assert(want_len == 0 || memcmp(out, want, want_len) == 0);
    free(out);
}

// The buffer is copied to an allocation of exactly len bytes so that ASan
// catches any read past the end of the input.
static int inflate_copy(const uint8_t *buf, size_t len, const char *name, uint8_t **out, size_t *out_len, char *err, size_t err_len) {
    uint8_t *exact = malloc(len ? len : 1);
    assert(exact);
    if (len) memcpy(exact, buf, len);
    int rc = gz_inflate_buffer(exact, len, name, out, out_len, err, err_len);
    free(exact);
    return rc;
}

static void expect_error(const uint8_t *buf, size_t len, const char *name, const char *must_contain, int verbose) {
    uint8_t *out = (uint8_t *)1;
    size_t out_len = 1;
    char err[512] = "";
    int rc = inflate_copy(buf, len, name, &out, &out_len, err, sizeof err);
    if (rc != -1 || err[0] == '\0' || !strstr(err, name) || (must_contain && !strstr(err, must_contain))) {
        fprintf(stderr, "%s: expected an error containing '%s', got rc=%d err='%s'\n", name, must_contain ? must_contain : "", rc, err);
        exit(1);
    }
    assert(out == NULL && out_len == 0);
    if (verbose) printf("  ok (error): %s\n", err);
    n_errors_seen++;
}

static void expect_ok(const uint8_t *buf, size_t len, const char *name, const void *want, size_t want_len) {
    uint8_t *out = NULL;
    size_t out_len = 0;
    char err[512] = "";
    int rc = inflate_copy(buf, len, name, &out, &out_len, err, sizeof err);
    if (rc != 0) fprintf(stderr, "%s: unexpected error: %s\n", name, err);
    assert(rc == 0);
    assert(out_len == want_len && memcmp(out, want, want_len) == 0);
    free(out);
}

// First block header of a `gzip -n` file (10-byte header): BTYPE in bits 1-2.
static unsigned first_block_type(const uint8_t *gz, size_t len) {
    assert(len > 10 && gz[3] == 0);
    return (gz[10] >> 1) & 3u;
}

static void save_seed(const char *name, const void *data, size_t len) {
    if (!getenv("ASGD_WRITE_SEEDS")) return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", SEED_DIR, name);
    write_file(path, data, len);
    printf("  wrote seed %s\n", path);
}

// ---- inputs ----------------------------------------------------------------------
static uint8_t *make_text(size_t len, uint64_t seed) {
    static const char *words[] = {"the", "gradient", "of", "a", "stale", "replica", "is", "applied", "asynchronously", "to",
                                  "shared", "parameters", "while", "workers", "race", "and", "converge", "anyway", "\n", ", "};
    rng_t r;
    rng_seed(&r, seed, 0);
    uint8_t *t = malloc(len);
    assert(t);
    size_t n = 0;
    while (n < len) {
        const char *w = words[rng_below(&r, sizeof words / sizeof *words)];
        for (size_t i = 0; w[i] && n < len; i++) t[n++] = (uint8_t)w[i];
        if (n < len) t[n++] = ' ';
    }
    return t;
}

// Random bytes interleaved with copies from up to 40 KB back (beyond DEFLATE's
// 32 KB window too), so long and short matches and literals all occur.
static uint8_t *make_repeats(size_t len, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, 1);
    uint8_t *t = malloc(len);
    assert(t);
    size_t n = 0;
    while (n < len) {
        if (n < 64 || rng_below(&r, 3) == 0) {
            size_t run = 1 + rng_below(&r, 64);
            for (size_t i = 0; i < run && n < len; i++) t[n++] = (uint8_t)rng_below(&r, 40);
        } else {
            size_t dist = 1 + rng_below(&r, n < 40000 ? n : 40000), run = 3 + rng_below(&r, 300);
            for (size_t i = 0; i < run && n < len; i++, n++) t[n] = t[n - dist];
        }
    }
    return t;
}

static uint8_t *make_random(size_t len, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, 2);
    uint8_t *t = malloc(len ? len : 1);
    assert(t);
    for (size_t i = 0; i < len; i++) t[i] = (uint8_t)rng_next(&r);
    return t;
}

// ---- hand-built streams -------------------------------------------------------------
typedef struct bitwriter {
    uint8_t buf[1024];
    size_t nbits;
} bitwriter_t;

static void put_bits(bitwriter_t *w, unsigned value, unsigned n) {
    for (unsigned i = 0; i < n; i++, w->nbits++) {
        assert(w->nbits / 8 < sizeof w->buf);
        if (value >> i & 1u) w->buf[w->nbits / 8] |= (uint8_t)(1u << (w->nbits % 8));
    }
}

// Huffman codes go most-significant bit first.
static void put_code(bitwriter_t *w, unsigned code, unsigned len) {
    for (unsigned i = len; i-- > 0;) put_bits(w, code >> i & 1u, 1);
}

static void put_fixed(bitwriter_t *w, unsigned sym) {
    if (sym < 144) put_code(w, 0x30 + sym, 8);
    else if (sym < 256) put_code(w, 0x190 + sym - 144, 9);
    else if (sym < 280) put_code(w, sym - 256, 7);
    else put_code(w, 0xC0 + sym - 280, 8);
}

// Dynamic block header whose code-length code gives symbols 0..15 four bits each
// (a complete code), so code length L is sent as the 4-bit code L.
static void put_dynamic_header(bitwriter_t *w, int final, const uint8_t *litlens, unsigned hlit, const uint8_t *distlens, unsigned hdist) {
    put_bits(w, final ? 1 : 0, 1);
    put_bits(w, 2, 2);
    put_bits(w, hlit - 257, 5);
    put_bits(w, hdist - 1, 5);
    put_bits(w, 19 - 4, 4);
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    for (int i = 0; i < 19; i++) put_bits(w, order[i] >= 16 ? 0 : 4, 3);
    for (unsigned i = 0; i < hlit; i++) put_code(w, litlens[i], 4);
    for (unsigned i = 0; i < hdist; i++) put_code(w, distlens[i], 4);
}

// Wraps raw DEFLATE bytes in a gzip member whose trailer matches `data`.
static size_t wrap_member(uint8_t *dst, const uint8_t *deflate, size_t deflate_len, const void *data, size_t data_len) {
    static const uint8_t header[10] = {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3};
    memcpy(dst, header, 10);
    memcpy(dst + 10, deflate, deflate_len);
    uint32_t crc = ref_crc32(data, data_len), isize = (uint32_t)data_len;
    uint8_t *t = dst + 10 + deflate_len;
    for (int i = 0; i < 4; i++) t[i] = (uint8_t)(crc >> 8 * i), t[4 + i] = (uint8_t)(isize >> 8 * i);
    return 18 + deflate_len;
}

static size_t wrap_bits(uint8_t *dst, const bitwriter_t *w, const void *data, size_t data_len) {
    return wrap_member(dst, w->buf, (w->nbits + 7) / 8, data, data_len);
}

static void test_hand_built(void) {
    printf("hand-built streams\n");
    uint8_t gz[2048];
    size_t n;

    {  // fixed block: 'a', then length 3 at distance 1, then end of block
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 1, 2);
        put_fixed(&w, 'a');
        put_fixed(&w, 257);
        put_code(&w, 0, 5);
        put_fixed(&w, 256);
        n = wrap_bits(gz, &w, "aaaa", 4);
        expect_ok(gz, n, "fixed-match.gz", "aaaa", 4);
        save_seed("fixed-match.gz", gz, n);
        save_seed("fixed-match", "aaaa", 4);
    }
    {  // a match before any output
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 1, 2);
        put_fixed(&w, 257);
        put_code(&w, 0, 5);
        put_fixed(&w, 256);
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-distance.gz", "distance 1 reaches before", 1);
        save_seed("bad-distance.gz", gz, n);
    }
    {  // length symbol 286 exists in the fixed code but means nothing
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 1, 2);
        put_fixed(&w, 'a');
        put_fixed(&w, 286);
        n = wrap_bits(gz, &w, "a", 1);
        expect_error(gz, n, "bad-length-symbol.gz", "length symbol 286", 1);
    }
    {  // distance symbol 30, likewise
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 1, 2);
        put_fixed(&w, 'a');
        put_fixed(&w, 257);
        put_code(&w, 30, 5);
        n = wrap_bits(gz, &w, "a", 1);
        expect_error(gz, n, "bad-distance-symbol.gz", "distance symbol 30", 1);
    }
    {  // reserved block type 3
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 3, 2);
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-btype3.gz", "block type 3", 1);
        save_seed("bad-btype3.gz", gz, n);
    }
    {  // stored block whose NLEN is not ~LEN
        const uint8_t deflate[] = {0x01, 0x05, 0x00, 0xFA, 0xFE, 'h', 'e', 'l', 'l', 'o'};
        n = wrap_member(gz, deflate, sizeof deflate, "hello", 5);
        expect_error(gz, n, "bad-nlen.gz", "NLEN", 1);
        save_seed("bad-nlen.gz", gz, n);
        gz[10 + 4] = 0xFF;  // now NLEN = ~LEN
        expect_ok(gz, n, "stored.gz", "hello", 5);
    }
    {  // stored block claiming more bytes than the input holds
        const uint8_t deflate[] = {0x01, 0x00, 0x01, 0xFF, 0xFE, 'h', 'e', 'l', 'l', 'o'};
        expect_error(deflate, 0, "empty.gz", "not a gzip stream", 1);
        n = wrap_member(gz, deflate, sizeof deflate, "hello", 5);
        expect_error(gz, n, "bad-stored-len.gz", "stored block of 256 bytes", 1);
    }
    {  // code-length code with four 1-bit codes: over-subscribed
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 2, 2);
        put_bits(&w, 0, 5);
        put_bits(&w, 0, 5);
        put_bits(&w, 0, 4);
        for (int i = 0; i < 4; i++) put_bits(&w, 1, 3);
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-code-lengths.gz", "over-subscribed", 1);
        save_seed("bad-code-lengths.gz", gz, n);
    }
    {  // HLIT of 287 codes
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 2, 2);
        put_bits(&w, 30, 5);
        put_bits(&w, 0, 5);
        put_bits(&w, 0, 4);
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-hlit.gz", "HLIT", 1);
    }
    {  // repeat-previous (16) as the first code length
        bitwriter_t w = {0};
        put_bits(&w, 1, 1);
        put_bits(&w, 2, 2);
        put_bits(&w, 0, 5);
        put_bits(&w, 0, 5);
        put_bits(&w, 0, 4);
        put_bits(&w, 1, 3);  // precode: symbols 16 and 17 get one bit each
        put_bits(&w, 1, 3);
        put_bits(&w, 0, 3);
        put_bits(&w, 0, 3);
        put_code(&w, 0, 1);  // symbol 16
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-repeat.gz", "no previous length", 1);
    }
    uint8_t lit[286] = {0}, dist[30] = {0};
    {  // dynamic code with only two literals and end-of-block, no distances: "aa"
        lit['a'] = 1;
        lit[256] = 1;
        bitwriter_t w = {0};
        put_dynamic_header(&w, 1, lit, 257, dist, 1);
        put_code(&w, 0, 1);
        put_code(&w, 0, 1);
        put_code(&w, 1, 1);
        n = wrap_bits(gz, &w, "aa", 2);
        expect_ok(gz, n, "dynamic-literals.gz", "aa", 2);
    }
    {  // the same without an end-of-block code
        memset(lit, 0, sizeof lit);
        lit['a'] = 1;
        lit['b'] = 1;
        bitwriter_t w = {0};
        put_dynamic_header(&w, 1, lit, 257, dist, 1);
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-no-eob.gz", "end-of-block", 1);
    }
    {  // incomplete literal/length code
        memset(lit, 0, sizeof lit);
        lit['a'] = 2;
        lit[256] = 2;
        bitwriter_t w = {0};
        put_dynamic_header(&w, 1, lit, 257, dist, 1);
        n = wrap_bits(gz, &w, "", 0);
        expect_error(gz, n, "bad-incomplete.gz", "incomplete", 1);
    }
    {  // a single one-bit distance code is the one incomplete code allowed
        memset(lit, 0, sizeof lit);
        lit['a'] = 1;   // code 0
        lit[256] = 2;   // code 10
        lit[257] = 2;   // code 11: length 3
        dist[0] = 1;    // code 0: distance 1
        for (int bad = 0; bad < 2; bad++) {
            bitwriter_t w = {0};
            put_dynamic_header(&w, 1, lit, 258, dist, 1);
            put_code(&w, 0, 1);
            put_code(&w, 3, 2);
            put_code(&w, bad, 1);  // 1 is the unused half of the distance code
            put_code(&w, 2, 2);
            n = wrap_bits(gz, &w, "aaaa", 4);
            if (bad) expect_error(gz, n, "bad-distance-code.gz", "invalid distance Huffman code", 1);
            else expect_ok(gz, n, "dynamic-one-distance.gz", "aaaa", 4);
        }
    }
    {  // every optional header field, then a stored "hello"
        const uint8_t deflate[] = {0x01, 0x05, 0x00, 0xFA, 0xFF, 'h', 'e', 'l', 'l', 'o'};
        uint8_t h[64];
        size_t k = 0;
        const uint8_t fixed[10] = {0x1F, 0x8B, 8, 2 | 4 | 8 | 16, 1, 2, 3, 4, 0, 3};
        memcpy(h, fixed, 10);
        k = 10;
        h[k++] = 5, h[k++] = 0;
        memcpy(h + k, "xtra!", 5), k += 5;
        memcpy(h + k, "name.txt", 9), k += 9;
        memcpy(h + k, "a comment", 10), k += 10;
        uint32_t hcrc = ref_crc32(h, k);
        h[k++] = (uint8_t)hcrc, h[k++] = (uint8_t)(hcrc >> 8);
        uint8_t member[128];
        size_t m = wrap_member(member, deflate, sizeof deflate, "hello", 5);
        memcpy(gz, h, k);
        memcpy(gz + k, member + 10, m - 10);
        n = k + m - 10;
        expect_ok(gz, n, "all-flags.gz", "hello", 5);
        save_seed("all-flags.gz", gz, n);
        save_seed("all-flags", "hello", 5);
        gz[k - 1] ^= 0x40;
        expect_error(gz, n, "bad-header-crc.gz", "CRC16", 1);
        save_seed("bad-header-crc.gz", gz, n);
        gz[k - 1] ^= 0x40;
        for (size_t cut = 0; cut < n; cut++) expect_error(gz, cut, "all-flags-cut.gz", NULL, 0);
        gz[10] = 200;  // FEXTRA longer than the whole member
        expect_error(gz, n, "bad-fextra.gz", "FEXTRA", 1);
        gz[10] = 5;
        gz[3] |= 0x20;
        expect_error(gz, n, "bad-flags.gz", "reserved", 1);
        gz[3] &= 0x1F;
        gz[2] = 9;
        expect_error(gz, n, "bad-method.gz", "compression method 9", 1);
        gz[2] = 8;
        // zero padding after the last member is accepted, other bytes are not
        memset(gz + n, 0, 7);
        expect_ok(gz, n + 7, "zero-padded.gz", "hello", 5);
        gz[n + 3] = 'x';
        expect_error(gz, n + 7, "trailing-garbage.gz", "unexpected byte 0x78", 1);
        save_seed("bad-trailing-garbage.gz", gz, n + 7);
        gz[n] = 0x1F;
        expect_error(gz, n + 1, "trailing-1f.gz", "unexpected byte 0x1f", 1);
    }
}

// ---- system gzip round trips -----------------------------------------------------------
typedef struct input {
    const char *name;
    uint8_t *data;
    size_t len;
} input_t;

static void test_roundtrips(input_t *inputs, int n_inputs) {
    printf("round trips through system gzip\n");
    for (int i = 0; i < n_inputs; i++) {
        write_file(tmp(inputs[i].name), inputs[i].data, inputs[i].len);
        for (int level = 1; level <= 9; level += level == 1 ? 5 : 3) {
            sh("gzip -n -%d -c '%s' > '%s.%d.gz'", level, tmp(inputs[i].name), tmp(inputs[i].name), level);
            char gz[300];
            snprintf(gz, sizeof gz, "%s.%d.gz", tmp(inputs[i].name), level);
            size_t gz_len;
            uint8_t *g = slurp(gz, &gz_len);
            printf("  %-10s %8zu bytes, gzip -%d: %8zu bytes, first block type %u\n", inputs[i].name, inputs[i].len, level, gz_len,
                   first_block_type(g, gz_len));
            free(g);
            expect_file_roundtrip(gz, inputs[i].data, inputs[i].len);
        }
    }
}

static void test_block_types(void) {
    // Make sure all three block types were exercised, not just the common one.
    size_t len;
    uint8_t *g = slurp(tmp("one.1.gz"), &len);
    assert(first_block_type(g, len) == 1);
    free(g);
    g = slurp(tmp("text.6.gz"), &len);
    assert(first_block_type(g, len) == 2);
    free(g);
    g = slurp(tmp("random.1.gz"), &len);
    assert(first_block_type(g, len) == 0);
    free(g);
}

static void test_concatenated(input_t *inputs) {
    printf("concatenated members\n");
    sh("cat '%s.6.gz' '%s.1.gz' '%s.9.gz' '%s.1.gz' > '%s'", tmp("text"), tmp("empty"), tmp("one"), tmp("random"), tmp("cat.gz"));
    size_t total = inputs[0].len + inputs[1].len + inputs[2].len + inputs[4].len;
    uint8_t *want = malloc(total);
    assert(want);
    size_t at = 0;
    const int order[4] = {0, 1, 2, 4};
    for (int i = 0; i < 4; i++) {
        memcpy(want + at, inputs[order[i]].data, inputs[order[i]].len);
        at += inputs[order[i]].len;
    }
    expect_file_roundtrip(tmp("cat.gz"), want, total);
    free(want);
}

static void test_raw_files(input_t *inputs) {
    printf("raw (not gzip) files come back unchanged\n");
    expect_file_roundtrip(tmp("text"), inputs[0].data, inputs[0].len);
    expect_file_roundtrip(tmp("empty"), NULL, 0);
    expect_file_roundtrip(tmp("one"), inputs[2].data, inputs[2].len);
    write_file(tmp("lone-1f"), "\x1f", 1);
    expect_file_roundtrip(tmp("lone-1f"), (const uint8_t *)"\x1f", 1);

    char err[512] = "";
    uint8_t *out = (uint8_t *)1;
    size_t out_len = 1;
    assert(gz_read_file(tmp("does-not-exist.gz"), &out, &out_len, err, sizeof err) == -1);
    assert(out == NULL && out_len == 0);
    assert(strstr(err, "does-not-exist.gz") && strstr(err, "No such file or directory"));
    printf("  ok (error): %s\n", err);
    assert(gz_read_file(tmpdir, &out, &out_len, err, sizeof err) == -1);
    assert(strstr(err, tmpdir) && strstr(err, "directory"));
    printf("  ok (error): %s\n", err);
}

static void test_corrupt(input_t *inputs) {
    printf("corrupt gzip files\n");
    size_t len;
    uint8_t *g = slurp(tmp("text.6.gz"), &len);
    assert(len > 100);

    // Truncated files, through the file API: each must fail, not hang or crash.
    const size_t cuts[] = {2, 3, 9, 10, 11, 12, len / 4, len / 2, len - 9, len - 8, len - 5, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_file(tmp("cut.gz"), g, cuts[i]);
        char err[512] = "";
        uint8_t *out = (uint8_t *)1;
        size_t out_len = 1;
        assert(gz_read_file(tmp("cut.gz"), &out, &out_len, err, sizeof err) == -1);
        assert(out == NULL && out_len == 0 && strstr(err, "cut.gz"));
        printf("  ok (error, cut at %zu of %zu): %s\n", cuts[i], len, err);
    }
    expect_error(g, len / 2, "text-half.gz", "truncated", 1);

    uint8_t *c = malloc(len);
    assert(c);
    memcpy(c, g, len);
    c[len / 2] ^= 0xFF;
    expect_error(c, len, "flipped-middle.gz", NULL, 1);
    memcpy(c, g, len);
    c[len - 8] ^= 0x01;
    expect_error(c, len, "bad-crc.gz", "CRC-32 mismatch", 1);
    memcpy(c, g, len);
    c[len - 4] ^= 0x01;
    expect_error(c, len, "bad-isize.gz", "ISIZE mismatch", 1);
    free(c);
    free(g);

    // Every prefix and every single-bit flip of a small dynamic-Huffman file: a
    // prefix must always fail; a flip must fail or (for bits no check covers,
    // like MTIME) give back exactly the original.
    g = slurp(tmp("small.9.gz"), &len);
    const input_t *small = &inputs[5];
    g[len / 2] ^= 0xFF;
    expect_error(g, len, "bad-flipped.gz", NULL, 1);
    save_seed("bad-flipped.gz", g, len);
    g[len / 2] ^= 0xFF;
    g[len - 8] ^= 0x01;
    expect_error(g, len, "bad-crc.gz", "CRC-32 mismatch", 0);
    save_seed("bad-crc.gz", g, len);
    g[len - 8] ^= 0x01;
    g[len - 4] ^= 0x01;
    expect_error(g, len, "bad-isize.gz", "ISIZE mismatch", 0);
    save_seed("bad-isize.gz", g, len);
    g[len - 4] ^= 0x01;
    for (size_t cut = 0; cut < len; cut++) expect_error(g, cut, "small-prefix.gz", NULL, 0);
    size_t flips = 0, caught = 0;
    for (size_t at = 0; at < len; at++) {
        for (int bit = 0; bit < 8; bit++) {
            g[at] ^= (uint8_t)(1u << bit);
            uint8_t *out = NULL;
            size_t out_len = 0;
            char err[512] = "";
            int rc = inflate_copy(g, len, "small-flip.gz", &out, &out_len, err, sizeof err);
            if (rc == 0) {
                if (getenv("ASGD_DEBUG_FLIPS")) printf("    flip byte %zu bit %d unnoticed\n", at, bit);
                assert(out_len == small->len && memcmp(out, small->data, out_len) == 0);
                free(out);
            } else {
                assert(rc == -1 && out == NULL && strstr(err, "small-flip.gz"));
                caught++;
            }
            flips++;
            g[at] ^= (uint8_t)(1u << bit);
        }
    }
    printf("  %zu prefixes of small.9.gz (%zu bytes) all fail; %zu of %zu single-bit flips fail, the rest inflate to the original\n", len,
           len, caught, flips);
    // FTEXT, MTIME, XFL, OS and the last deflate byte's padding bits carry
    // nothing a check covers, and now and then a flipped distance points at an
    // identical copy of the same bytes (zlib lets the same 57 flips through).
    assert(flips - caught <= flips / 50);
    free(g);
}

// Every file in tests/data/gz: bad-*.gz must fail; X.gz must inflate to the file X.
static void test_seed_corpus(void) {
    printf("seed corpus %s\n", SEED_DIR);
    DIR *d = opendir(SEED_DIR);
    if (!d) {
        fprintf(stderr, "%s: cannot open the committed seed corpus\n", SEED_DIR);
        exit(1);
    }
    int n_good = 0, n_bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 4 || strcmp(e->d_name + nl - 3, ".gz") != 0) continue;
        char path[512], want_path[512];
        snprintf(path, sizeof path, "%s/%s", SEED_DIR, e->d_name);
        uint8_t *out = NULL;
        size_t out_len = 0;
        char err[512] = "";
        int rc = gz_read_file(path, &out, &out_len, err, sizeof err);
        if (strncmp(e->d_name, "bad-", 4) == 0) {
            assert(rc == -1 && strstr(err, e->d_name));
            printf("  ok (error): %s\n", err);
            n_bad++;
            continue;
        }
        if (rc != 0) fprintf(stderr, "%s\n", err);
        assert(rc == 0);
        snprintf(want_path, sizeof want_path, "%.*s", (int)strlen(path) - 3, path);
        size_t want_len;
        uint8_t *want = slurp(want_path, &want_len);
        assert(out_len == want_len && memcmp(out, want, want_len) == 0);
        printf("  ok: %s -> %zu bytes\n", e->d_name, out_len);
        free(want);
        free(out);
        n_good++;
    }
    closedir(d);
    assert(n_good >= 4 && n_bad >= 6);
}

static void write_gzip_seeds(void) {
    if (!getenv("ASGD_WRITE_SEEDS")) return;
    sh("cp '%s' '%s/small' && gzip -n -9 -c '%s' > '%s/small.gz'", tmp("small"), SEED_DIR, tmp("small"), SEED_DIR);
    sh("head -c 2048 '%s' > '%s/random' && gzip -n -1 -c '%s/random' > '%s/random.gz'", tmp("random"), SEED_DIR, SEED_DIR, SEED_DIR);
    sh("printf 'hello, hello, hello world\\n' > '%s/hello' && gzip -n -9 -c '%s/hello' > '%s/hello.gz'", SEED_DIR, SEED_DIR, SEED_DIR);
    sh("cat '%s/hello' '%s/small' > '%s/multi' && cat '%s/hello.gz' '%s/small.gz' > '%s/multi.gz'", SEED_DIR, SEED_DIR, SEED_DIR, SEED_DIR,
       SEED_DIR, SEED_DIR);
    sh("head -c 300 '%s/small.gz' > '%s/bad-truncated.gz'", SEED_DIR, SEED_DIR);
}

int main(void) {
    if (system("command -v gzip > /dev/null 2>&1") != 0) {
        printf("SKIP: the system `gzip` is not on PATH; it is needed to make test inputs\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  // keep stdout and stderr in order in ctest logs
    strcpy(tmpdir, "/tmp/asgd_test_gunzip_XXXXXX");
    assert(mkdtemp(tmpdir));

    input_t inputs[] = {
        {"text", make_text(300000, 1), 300000},
        {"empty", make_random(0, 0), 0},
        {"one", make_random(1, 2), 1},
        {"repeats", make_repeats(1 << 20, 3), 1 << 20},
        {"random", make_random(256 << 10, 4), 256 << 10},
        {"small", make_text(3000, 5), 3000},
    };
    const int n_inputs = sizeof inputs / sizeof *inputs;
    test_roundtrips(inputs, n_inputs);
    test_block_types();
    test_concatenated(inputs);
    test_raw_files(inputs);
    test_hand_built();
    test_corrupt(inputs);
    write_gzip_seeds();
    test_seed_corpus();

    for (int i = 0; i < n_inputs; i++) free(inputs[i].data);
    sh("rm -rf '%s'", tmpdir);
    printf("PASS (%d error cases checked)\n", n_errors_seen);
    return 0;
}
