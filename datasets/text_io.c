#include "datasets/text_io.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        snprintf(err, err_len, "%s:%zu:%zu: NUL byte in a text file (is it binary?)", path, line, (size_t)(nul - line_start) + 1);
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

// cap: the first block's size (grown for a longer line).
static int reader_start(text_reader_t *r, const char *path, size_t cap, char *err, size_t err_len) {
    r->path = path;
    r->cap = cap;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        snprintf(err, err_len, "%s: out of memory for a read buffer", path);
        text_reader_close(r);
        return -1;
    }
    return 0;
}

int text_reader_open(text_reader_t *r, const char *path, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    if (data_input_open(&r->in, path, err, err_len) != 0) return -1;
    return reader_start(r, path, (size_t)1 << 20, err, err_len);
}

int text_reader_open_memory(text_reader_t *r, const char *name, const void *data, size_t len, char *err,
                            size_t err_len) {
    memset(r, 0, sizeof *r);
    if (data_input_open_memory(&r->in, name, data, len, err, err_len) != 0) return -1;
    // Plain bytes need no more room than they take (a parser may be called
    // millions of times on small inputs); compressed ones start at 64 KiB.
    size_t cap = data_input_compressed(r->in) ? (size_t)1 << 16 : len < ((size_t)1 << 20) ? len + 2 : (size_t)1 << 20;
    return reader_start(r, name, cap, err, err_len);
}

int text_reader_next(text_reader_t *r, const char **block, size_t *len, char *err, size_t err_len) {
    *block = NULL;
    *len = 0;
    if (!r->buf) return 0;
    if (r->given) {  // drop the block handed out last time, keep the partial line after it
        r->buf[r->given] = r->cut;
        memmove(r->buf, r->buf + r->given, r->len - r->given);
        r->len -= r->given;
        r->given = 0;
    }
    for (;;) {
        if (!r->at_eof && r->len < r->cap - 1) {
            size_t want = r->cap - 1 - r->len, got;
            if (data_input_read(r->in, r->buf + r->len, want, &got, err, err_len) != 0) return -1;
            r->len += got;
            if (got < want) r->at_eof = 1;
        }
        size_t end = r->len;
        while (end > 0 && r->buf[end - 1] != '\n') end--;
        if (end == 0 && !r->at_eof) {
            // One line fills the whole buffer: grow it (lines may be of any length).
            char *bigger = r->cap <= SIZE_MAX / 2 ? realloc(r->buf, r->cap * 2) : NULL;
            if (!bigger) {
                snprintf(err, err_len, "%s: out of memory for a line longer than %zu bytes", r->path, r->len);
                return -1;
            }
            r->buf = bigger;
            r->cap *= 2;
            continue;
        }
        if (end == 0) end = r->len;  // the last line, without its '\n'
        if (end == 0) return 0;
        r->given = end;
        r->cut = r->buf[end];
        r->buf[end] = '\0';
        *block = r->buf;
        *len = end;
        return 1;
    }
}

void text_reader_close(text_reader_t *r) {
    data_input_close(r->in);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

// ---- numbers ----

static const double exact_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_alnum_or_dot(char c) {
    return text_is_digit(c) || c == '.' || ((unsigned)((c | 0x20) - 'a') < 26);
}

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

// ---- formatting floats ----

static const uint64_t pow5[23] = {
    1ull,          5ull,           25ull,           125ull,           625ull,            3125ull,
    15625ull,      78125ull,       390625ull,       1953125ull,       9765625ull,        48828125ull,
    244140625ull,  1220703125ull,  6103515625ull,   30517578125ull,   152587890625ull,   762939453125ull,
    3814697265625ull, 19073486328125ull, 95367431640625ull, 476837158203125ull, 2384185791015625ull};

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
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 48, "'%c'", c);
    else snprintf(buf, 48, "byte 0x%02x", c);
    return buf;
}
