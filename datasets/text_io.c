#include "datasets/text_io.h"

#include "datasets/text_decimal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// ---- reading a whole text file ----

int text_file_read(const char *path, char **out, size_t *out_len, char *err, size_t err_len) {
    *out = NULL;
    *out_len = 0;
    data_input_t *in;
    if (data_input_open(&in, path, err, err_len) != 0) return -1;
    // The buffer grows until a read stops short (the end of the data).
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf && cap - len < 2) {
            char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) free(buf);
            buf = bigger;
            cap *= 2;
        }
        if (!buf) {
            snprintf(err, err_len, "%s: out of memory reading the file (%zu bytes so far)", path, len);
            data_input_close(in);
            return -1;
        }
        size_t want = cap - len - 1, got;
        if (data_input_read(in, buf + len, want, &got, err, err_len) != 0) {
            free(buf);
            data_input_close(in);
            return -1;
        }
        len += got;
        if (got < want) break;
    }
    data_input_close(in);
    buf[len] = '\0';
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        size_t line = 1;
        const char *line_start = buf;
        for (const char *c = buf; c < nul; c++)
            if (*c == '\n') line++, line_start = c + 1;
        snprintf(err, err_len, "%s:%zu:%zu: NUL byte in a text file (is it binary?)", path, line,
                 (size_t)(nul - line_start) + 1);
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

// ---- reading blocks of whole lines ----

// Binary content by its first bytes: what it is, for a refusal.
typedef struct binary_magic {
    const char *bytes;
    size_t len;
    const char *what;
} binary_magic_t;

static const binary_magic_t binary_magics[] = {
    {"\x7f"
     "ELF",
     4, "an ELF program or library"},
    {"\x89PNG\r\n\x1a\n", 8, "a PNG image"},
    {"\xff\xd8\xff", 3, "a JPEG image"},
    {"GIF87a", 6, "a GIF image"},
    {"GIF89a", 6, "a GIF image"},
    {"%PDF-", 5, "a PDF document"},
    {"\x89HDF\r\n\x1a\n", 8, "an HDF5 file"},
    {"\x93NUMPY", 6, "a NumPy .npy array"},
    {"PAR1", 4, "a Parquet file"},
    {"SQLite format 3", 16, "an SQLite database"},
    {"ASGDMODL", 8, "an asgd model file (--save-model)"},
    {"\x00\x00\x08\x01", 4, "an IDX file (binary labels)"},
    {"\x00\x00\x08\x03", 4, "an IDX file (binary images)"},
};

// -1 with err when the first bytes of the input are a known binary format.
static int refuse_binary(const text_reader_t *r, const char *p, size_t n, char *err, size_t err_len) {
    const char *what = NULL;
    for (size_t i = 0; i < sizeof binary_magics / sizeof binary_magics[0] && !what; i++)
        if (n >= binary_magics[i].len && memcmp(p, binary_magics[i].bytes, binary_magics[i].len) == 0)
            what = binary_magics[i].what;
    if (!what && n >= 262 && memcmp(p + 257, "ustar", 5) == 0) what = "a tar archive";
    if (!what) return 0;
    snprintf(err, err_len,
             "%s: is %s%s, not text (expected a text data file: libsvm, CSV or ratings, plain or "
             "compressed)",
             r->name, what, data_input_compressed(r->in) ? " inside compressed data" : "");
    return -1;
}

// block: the bytes read for a block (its lines cut at the last '\n').
static int reader_start(text_reader_t *r, size_t block) {
    r->name = data_input_name(r->in);
    r->block = block;
    return 0;
}

int text_reader_open(text_reader_t *r, const char *path, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    if (data_input_open(&r->in, path, err, err_len) != 0) return -1;
    return reader_start(r, TEXT_BLOCK_BYTES);
}

int text_reader_open_memory(text_reader_t *r, const char *name, const void *data, size_t len, char *err,
                            size_t err_len) {
    memset(r, 0, sizeof *r);
    if (data_input_open_memory(&r->in, name, data, len, err, err_len) != 0) return -1;
    // Plain bytes need no more room than they take (a parser may be called
    // millions of times on small inputs); compressed ones start at 64 KiB.
    size_t block = data_input_compressed(r->in) ? (size_t)1 << 16 : len < TEXT_BLOCK_BYTES ? len + 1 : TEXT_BLOCK_BYTES;
    return reader_start(r, block);
}

// Makes b hold at least `need` bytes (and the '\0' and pad after them).
static int block_reserve(text_block_buf_t *b, size_t need) {
    if (need <= b->cap && b->data) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > SIZE_MAX / 4) return -1;
        cap *= 2;
    }
    char *bigger = realloc(b->data, cap + 1 + TEXT_BLOCK_PAD);
    if (!bigger) return -1;
    memset(bigger + cap, 0, 1 + TEXT_BLOCK_PAD);  // the pad's bytes are defined
    b->data = bigger;
    b->cap = cap;
    return 0;
}

// Keeps b->data[from..len) as the partial line for the next block.
static int carry_rest(text_reader_t *r, text_block_buf_t *b, size_t from) {
    size_t n = b->len - from;
    if (n > r->carry_cap) {
        char *bigger = realloc(r->carry, n);
        if (!bigger) return -1;
        r->carry = bigger;
        r->carry_cap = n;
    }
    if (n) memcpy(r->carry, b->data + from, n);
    r->carry_len = n;
    b->len = from;
    return 0;
}

int text_reader_next_into(text_reader_t *r, text_block_buf_t *b, int append, char *err, size_t err_len) {
    if (!r->in) return 0;
    // A block reads the same bytes whatever its buffer held before, so that
    // blocks are cut alike however they are handed out.
    size_t kept = append ? b->len : 0, target = kept + r->carry_len + r->block;
    if (block_reserve(b, target) != 0) goto oom;
    if (r->carry_len) memcpy(b->data + kept, r->carry, r->carry_len);  // carry is NULL until a line is carried
    b->len = kept + r->carry_len;
    size_t searched = b->len;  // no '\n' before this but in kept bytes
    r->carry_len = 0;
    for (;;) {
        if (!r->at_eof && b->len < target) {
            size_t want = target - b->len, got;
            if (data_input_read(r->in, b->data + b->len, want, &got, err, err_len) != 0) return -1;
            b->len += got;
            if (got < want) r->at_eof = 1;
        }
        const char *nl = b->len > searched ? memrchr(b->data + searched, '\n', b->len - searched) : NULL;
        if (nl) {
            if (carry_rest(r, b, (size_t)(nl - b->data) + 1) != 0) goto oom;
            break;
        }
        searched = b->len;
        if (r->at_eof) break;  // the last line, without its '\n'
        // One line fills the whole block: grow it (lines may be of any length).
        if (target > SIZE_MAX / 4 || block_reserve(b, target *= 2) != 0) {
            snprintf(err, err_len, "%s: out of memory for a line longer than %zu bytes", r->name, b->len);
            return -1;
        }
    }
    if (b->len == kept) return 0;
    b->data[b->len] = '\0';
    if (r->blocks++ == 0 && refuse_binary(r, b->data + kept, b->len - kept, err, err_len) != 0) return -1;
    return 1;
oom:
    snprintf(err, err_len, "%s: out of memory for a read buffer", r->name);
    return -1;
}

int text_reader_next(text_reader_t *r, const char **block, size_t *len, char *err, size_t err_len) {
    int rc = text_reader_next_into(r, &r->own, 0, err, err_len);
    *block = rc == 1 ? r->own.data : NULL;
    *len = rc == 1 ? r->own.len : 0;
    return rc;
}

void text_block_buf_free(text_block_buf_t *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void text_reader_close(text_reader_t *r) {
    data_input_close(r->in);
    free(r->carry);
    text_block_buf_free(&r->own);
    memset(r, 0, sizeof *r);
}

// ---- numbers ----

static const double exact_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_alnum_or_dot(char c) { return text_is_digit(c) || c == '.' || ((unsigned)((c | 0x20) - 'a') < 26); }

const char *text_parse_double(const char *p, double *value) {
    // Clinger's fast path: a mantissa below 2^53 times or divided by an exact
    // power of ten <= 1e22 is one correctly rounded operation, so the result is
    // bit-identical to strtod's. Anything else (more digits, large exponents,
    // hex, inf, nan, a number glued to letters) goes to strtod itself.
    // strtod would skip leading white space, newlines included, and read a number
    // from the next line: a number must start right here.
    if (!(is_alnum_or_dot(*p) || *p == '+' || *p == '-')) {
        *value = 0.0;
        return p;
    }
    const char *s = p;
    int negative = 0;
    if (*s == '+' || *s == '-') negative = *s++ == '-';
    uint64_t mantissa = 0;
    int digits = 0, exponent = 0, any = 0;
    for (; text_is_digit(*s); s++, any = 1) {
        if (digits >= 19) goto slow;
        mantissa = mantissa * 10 + (uint64_t)(*s - '0');
        digits += mantissa != 0;
    }
    if (*s == '.') {
        for (s++; text_is_digit(*s); s++, any = 1) {
            if (digits >= 19) goto slow;
            mantissa = mantissa * 10 + (uint64_t)(*s - '0');
            digits += mantissa != 0;
            exponent--;
        }
    }
    if (!any) goto slow;
    if (*s == 'e' || *s == 'E') {
        const char *e = s + 1;
        int e_negative = 0;
        if (*e == '+' || *e == '-') e_negative = *e++ == '-';
        if (!text_is_digit(*e)) goto slow;
        int e_value = 0;
        for (; text_is_digit(*e); e++)
            if (e_value < 100000) e_value = e_value * 10 + (*e - '0');
        exponent += e_negative ? -e_value : e_value;
        s = e;
    }
    if (is_alnum_or_dot(*s)) goto slow;
    if (mantissa == 0) {
        *value = negative ? -0.0 : 0.0;
        return s;
    }
    if (mantissa > (UINT64_C(1) << 53) || exponent < -22 || exponent > 22) goto slow;
    double v = (double)mantissa;
    v = exponent < 0 ? v / exact_pow10[-exponent] : v * exact_pow10[exponent];
    *value = negative ? -v : v;
    return s;
slow:;
    char *end;
    int saved = errno;
    double v2 = strtod(p, &end);
    errno = saved;
    *value = end == p ? 0.0 : v2;
    return end;
}

float text_strtof(const char *p) {
    int saved = errno;
    float f = strtof(p, NULL);
    errno = saved;
    return f;
}

const char *text_parse_double_padded(const char *p, double *value) {
    uint64_t mantissa;
    int frac_digits, negative;
    const char *end = text_decimal_fast(p, &mantissa, &frac_digits, &negative);
    if (!end) return text_parse_double(p, value);
    *value = text_decimal_double(mantissa, frac_digits, negative);
    return end;
}

const char *text_parse_float_padded(const char *p, float *value, double *wide) {
    uint64_t mantissa;
    int frac_digits, negative;
    const char *end = text_decimal_fast(p, &mantissa, &frac_digits, &negative);
    if (!end) {
        end = text_parse_double(p, wide);
        *value = end == p ? 0.0f : text_strtof(p);  // not (float)*wide, which could round twice
        return end;
    }
    *value = text_decimal_float(mantissa, frac_digits, negative, p);
    *wide = *value;  // a fast decimal is finite and below 10^15: no check can tell
    return end;
}

// ---- formatting floats ----

static const uint64_t pow5[23] = {1ull,
                                  5ull,
                                  25ull,
                                  125ull,
                                  625ull,
                                  3125ull,
                                  15625ull,
                                  78125ull,
                                  390625ull,
                                  1953125ull,
                                  9765625ull,
                                  48828125ull,
                                  244140625ull,
                                  1220703125ull,
                                  6103515625ull,
                                  30517578125ull,
                                  152587890625ull,
                                  762939453125ull,
                                  3814697265625ull,
                                  19073486328125ull,
                                  95367431640625ull,
                                  476837158203125ull,
                                  2384185791015625ull};

// printf's arbitrary-precision path costs ~280 ns a value, most of the
// time of writing a large file; floats in [1e-14, 1e9) are instead rounded
// exactly in 128-bit integers: v = m * 2^k with m < 2^24, so v * 10^p =
// m * 5^p * 2^(k+p) with m * 5^p < 2^76 for p <= 22.
int text_format_float(float v, char out[32]) {
    double x = fabs((double)v);
    if (!(x >= 1e-14 && x < 1e9)) return snprintf(out, 32, "%.9g", (double)v);
    char *o = out;
    if (v < 0) *o++ = '-';
    int k;
    double fraction = frexp(x, &k);
    uint64_t m = (uint64_t)ldexp(fraction, 24);  // exact: a float has 24 significant bits
    k -= 24;
    // A first guess at the decimal exponent (10^e10 <= x < 10^(e10+1)); the rounded
    // table entries can make it one off, which the exact check below corrects.
    static const double decade[23] = {1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3,
                                      1e-2,  1e-1,  1e0,   1e1,   1e2,   1e3,  1e4,  1e5,  1e6,  1e7,  1e8};
    int e10 = -14;
    while (e10 < 8 && x >= decade[e10 + 15]) e10++;
    uint64_t q = 0;
    for (int tries = 0; tries < 3; tries++) {
        int p = 8 - e10;  // scale to 9 digits before the point
        if (p < 0 || p > 22) return snprintf(out, 32, "%.9g", (double)v);
        __uint128_t scaled = (__uint128_t)m * pow5[p];
        int shift = k + p;
        uint64_t truncated;
        int round_up = 0;
        if (shift >= 0) {
            truncated = (uint64_t)(scaled << shift);
        } else {
            int sh = -shift;
            truncated = (uint64_t)(scaled >> sh);
            __uint128_t rest = scaled & ((((__uint128_t)1) << sh) - 1), half = ((__uint128_t)1) << (sh - 1);
            round_up = rest > half || (rest == half && (truncated & 1));  // ties to even, as printf
        }
        if (truncated >= 1000000000ull) {
            e10++;
            continue;
        }
        if (truncated < 100000000ull) {
            e10--;
            continue;
        }
        q = truncated + (uint64_t)round_up;
        break;
    }
    if (q == 0) return snprintf(out, 32, "%.9g", (double)v);
    if (q == 1000000000ull) q = 100000000ull, e10++;  // 9.999999995 rounds to 10.0000000
    char d[9];
    for (int i = 8; i >= 0; i--) d[i] = (char)('0' + q % 10), q /= 10;
    int last = 8;  // %g drops trailing zeros of the fraction
    if (e10 < -4 || e10 >= 9) {
        while (last > 0 && d[last] == '0') last--;
        *o++ = d[0];
        if (last > 0) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)last);
            o += last;
        }
        int ex = e10 < 0 ? -e10 : e10;
        *o++ = 'e';
        *o++ = e10 < 0 ? '-' : '+';
        if (ex >= 100) *o++ = (char)('0' + ex / 100);
        *o++ = (char)('0' + ex / 10 % 10);
        *o++ = (char)('0' + ex % 10);
    } else if (e10 >= 0) {
        while (last > e10 && d[last] == '0') last--;
        memcpy(o, d, (size_t)e10 + 1);
        o += e10 + 1;
        if (last > e10) {
            *o++ = '.';
            memcpy(o, d + e10 + 1, (size_t)(last - e10));
            o += last - e10;
        }
    } else {
        while (d[last] == '0') last--;
        *o++ = '0';
        *o++ = '.';
        for (int i = -1; i > e10; i--) *o++ = '0';
        memcpy(o, d, (size_t)last + 1);
        o += last + 1;
    }
    *o = '\0';
    return (int)(o - out);
}

const char *text_show_char(const char *p, char buf[48]) {
    unsigned char c = (unsigned char)*p;
    const char *after = p;
    while (*after == ' ' || *after == '\t' || *after == '\r') after++;
    if (c == '\0' || c == '\n' || (c == '\r' && (*after == '\n' || *after == '\0'))) return "the end of the line";
    if (c == '#') return "a '#' comment";
    if (c == ' ') return "a space";
    if (c == '\t') return "a tab";
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 48, "'%c'", c);
    else
        snprintf(buf, 48, "byte 0x%02x", c);
    return buf;
}

// ---- output memory ----

void text_copy_fresh(void *to, const void *from, size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes >= 16 * page) {  // a few faults cost less than the call
        uintptr_t start = (uintptr_t)to & ~(uintptr_t)(page - 1), end = (uintptr_t)to + bytes;
        (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
    }
#endif
    if (bytes) memcpy(to, from, bytes);
}
