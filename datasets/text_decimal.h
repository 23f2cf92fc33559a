#ifndef ASGD_DATASETS_TEXT_DECIMAL_H
#define ASGD_DATASETS_TEXT_DECIMAL_H
// Decimal numbers read without a loop over their digits, for the parsers' hot
// loops: the token's shape from one 16-byte load (SSE2), its digits converted
// 8 at a time in a 64-bit word. Text must be padded: 32 bytes readable from
// every byte up to the number's end (a block's text: text_io.h's
// TEXT_BLOCK_PAD). The results are those of text_io.h's text_parse_double,
// bit for bit; what these do not cover, the caller hands to it.
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static const uint64_t text_pow10_u64[20] = {1ull,
                                            10ull,
                                            100ull,
                                            1000ull,
                                            10000ull,
                                            100000ull,
                                            1000000ull,
                                            10000000ull,
                                            100000000ull,
                                            1000000000ull,
                                            10000000000ull,
                                            100000000000ull,
                                            1000000000000ull,
                                            10000000000000ull,
                                            100000000000000ull,
                                            1000000000000000ull,
                                            10000000000000000ull,
                                            100000000000000000ull,
                                            1000000000000000000ull,
                                            10000000000000000000ull};
// 10^k and 10^-k as doubles: exact, and rounded to nearest.
static const double text_pow10_exact[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                            1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
static const double text_pow10_inverse[16] = {1e0,  1e-1, 1e-2,  1e-3,  1e-4,  1e-5,  1e-6,  1e-7,
                                              1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15};

// A word of text, read little-endian (x86-64, arm64).
static inline uint64_t text_load8(const char *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

// How many of the 8 bytes of x, from the first, are ASCII digits: 0..8. A byte
// after the first non-digit may be misjudged (a carry out of the one before),
// which does not change the count.
static inline int text_digit_run8(uint64_t x) {
    const uint64_t high = 0xF0F0F0F0F0F0F0F0ull, zeros = 0x3030303030303030ull;
    uint64_t not_digit = ((x & high) ^ zeros) | (((x + 0x0606060606060606ull) & high) ^ zeros);
    return not_digit ? __builtin_ctzll(not_digit) >> 3 : 8;
}

// The number the first k (1..8) digits of x spell: the k bytes are moved to the
// top, zero bytes in front of them read as leading zeros, and pairs, quads and
// halves combined by three multiplications.
static inline uint64_t text_digits_value8(uint64_t x, int k) {
    x = (x & 0x0F0F0F0F0F0F0F0Full) << (8 * (8 - k));
    x = (x * 2561) >> 8;
    x = ((x & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
    return ((x & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
}

// The number the first k (0..8) digits of x spell, without a branch: the
// bytes after them are masked off, and k = 0 gives 0.
__attribute__((always_inline)) static inline uint64_t text_digits_masked8(uint64_t x, int k) {
    static const uint64_t first_bytes[9] = {0,
                                            0xFFull,
                                            0xFFFFull,
                                            0xFFFFFFull,
                                            0xFFFFFFFFull,
                                            0xFFFFFFFFFFull,
                                            0xFFFFFFFFFFFFull,
                                            0xFFFFFFFFFFFFFFull,
                                            0xFFFFFFFFFFFFFFFFull};
    x = (x & first_bytes[k] & 0x0F0F0F0F0F0F0F0Full) << ((64 - 8 * k) & 63);
    x = (x * 2561) >> 8;
    x = ((x & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
    return ((x & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
}

// The number k (0..16) digits at q spell: two words, whatever k is, so that
// numbers of mixed lengths cost no mispredicted branch.
__attribute__((always_inline)) static inline uint64_t text_digits_value(const char *q, int k) {
    int high = k < 8 ? k : 8;
    return text_digits_masked8(text_load8(q), high) * text_pow10_u64[k - high] +
           text_digits_masked8(text_load8(q + 8), k - high);
}

// The digits at p as an integer: *digits of them (0 when p is not a digit; at
// most 19 are read, and *value is exact below 10^19).
static inline const char *text_parse_digits_padded(const char *p, uint64_t *value, int *digits) {
    uint64_t x = text_load8(p), v = 0;
    int k = text_digit_run8(x), n = 0;
    while (k > 0) {
        if (n == 16 && k > 3) k = 3;  // 19 digits at most: below 10^19 < 2^64
        v = v * text_pow10_u64[k] + text_digits_value8(x, k);
        n += k;
        if (k < 8 || n == 19) break;
        x = text_load8(p + n);
        k = text_digit_run8(x);
    }
    *value = v;
    *digits = n;
    return p + n;
}

// The shape of the unsigned decimal at s: *int_digits digits, then with a '.'
// *frac_digits more. Returns its length, or 0 when it has no digit or is 16
// bytes or longer.
#if defined(__SSE2__)
__attribute__((always_inline)) static inline int text_decimal_shape(const char *s, int *int_digits, int *frac_digits) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i t = _mm_sub_epi8(x, _mm_set1_epi8('0'));
    unsigned digits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(9)), t));
    unsigned dots = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')));
    int a = __builtin_ctz(~digits);  // ~digits has bit 16 set: a <= 16
    int dot = (int)((dots >> a) & 1), b = __builtin_ctz(~(digits >> (a + 1))) & -dot, len = a + dot + b;
    *int_digits = a;
    *frac_digits = b;
    return len < 16 && a + b > 0 ? len : 0;
}
#else
__attribute__((always_inline)) static inline int text_decimal_shape(const char *s, int *int_digits, int *frac_digits) {
    uint64_t ignored;
    const char *t = text_parse_digits_padded(s, &ignored, int_digits);
    *frac_digits = 0;
    if (*t == '.') text_parse_digits_padded(t + 1, &ignored, frac_digits);
    int len = *int_digits + (*t == '.') + *frac_digits;
    return len < 16 && *int_digits + *frac_digits > 0 ? len : 0;
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <smmintrin.h>  // SSE4.1 (and SSSE3) intrinsics, used under a target attribute

// The digits of the decimal at s (a digits, a point, b digits; a + b <= 15) as
// one number, all at once: SSSE3 moves them into place past the point and
// SSE4.1 adds them up. Only where the CPU has both; inlined into code compiled
// for them (TEXT_HOT_CLONES), called elsewhere.
__attribute__((target("ssse3,sse4.1"))) static inline uint64_t text_decimal_digits_sse41(const char *s, int a, int b) {
    // Output lane j (0..15) takes digit i = j - (16 - a - b): the digits end at
    // lane 15, lanes before the first are 0, and digits past the point come
    // from one byte further on.
    const __m128i lanes = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i digit = _mm_sub_epi8(lanes, _mm_set1_epi8((char)(16 - a - b)));
    __m128i past_point = _mm_cmpgt_epi8(digit, _mm_set1_epi8((char)(a - 1)));  // -1 where digit >= a
    __m128i from = _mm_or_si128(_mm_sub_epi8(digit, past_point), _mm_cmplt_epi8(digit, _mm_setzero_si128()));
    __m128i x = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)s), _mm_set1_epi8('0'));
    __m128i d = _mm_shuffle_epi8(x, from);  // a lane of from with its high bit set is 0
    __m128i pairs = _mm_maddubs_epi16(d, _mm_setr_epi8(10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1));
    __m128i fours = _mm_madd_epi16(pairs, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
    __m128i eights = _mm_madd_epi16(_mm_packus_epi32(fours, fours), _mm_setr_epi16(10000, 1, 10000, 1, 0, 0, 0, 0));
    uint64_t high = (uint32_t)_mm_cvtsi128_si32(eights), low = (uint32_t)_mm_extract_epi32(eights, 1);
    return high * 100000000u + low;
}
#define TEXT_DECIMAL_DIGITS(s, a, b)                \
    (__builtin_cpu_supports("sse4.1")               \
         ? text_decimal_digits_sse41((s), (a), (b)) \
         : text_digits_value((s), (a)) * text_pow10_u64[(b)] + text_digits_value((s) + (a) + 1, (b)))
// A parser's hot function compiled twice, for any x86-64 CPU and for those
// with SSE4.1 (x86-64-v2), the one to run chosen once when the program loads:
// in the second the digits above are inlined, not called (about 15% of a
// libsvm parse). GCC only; clang's build (the fuzzers) calls them. Not under
// TSan: the clones' resolver runs while the program is relocated, before the
// sanitizer's runtime is up, and its instrumented entry crashes the load.
#if !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define TEXT_HOT_CLONES __attribute__((target_clones("default", "arch=x86-64-v2")))
#endif
#else
#define TEXT_DECIMAL_DIGITS(s, a, b) \
    (text_digits_value((s), (a)) * text_pow10_u64[(b)] + text_digits_value((s) + (a) + 1, (b)))
#endif
#ifndef TEXT_HOT_CLONES
#define TEXT_HOT_CLONES
#endif

// strtof's float for the number at p, errno left as it was (text_io.c). Out
// of line and cold: the hot loops keep their registers across the rare call.
__attribute__((cold, noinline)) float text_strtof(const char *p);

// The plain decimal at p: [+-] digits [. digits], shorter than 16 bytes after
// its sign. Returns where it stops, with its digits as *mantissa (below 10^15:
// exact in a double) and *frac_digits after the point, or NULL when p has no
// such decimal. What follows it is the caller's to check (text_decimal_fast,
// or a parser whose token must end exactly there).
__attribute__((always_inline)) static inline const char *text_decimal_scan(const char *p, uint64_t *mantissa,
                                                                           int *frac_digits, int *negative) {
    *negative = *p == '-';
    const char *s = p + (*p == '-' || *p == '+');
    int a, b, len = text_decimal_shape(s, &a, &b);
    if (!len) return NULL;
    *mantissa = TEXT_DECIMAL_DIGITS(s, a, b);
    *frac_digits = b;
    return s + len;
}

// A decimal of the fast kind: text_decimal_scan's, with no letter, digit or
// '.' after it. Returns its end, or NULL for any other text.
__attribute__((always_inline)) static inline const char *text_decimal_fast(const char *p, uint64_t *mantissa,
                                                                           int *frac_digits, int *negative) {
    const char *e = text_decimal_scan(p, mantissa, frac_digits, negative);
    if (!e) return NULL;
    char after = *e;
    if ((unsigned)(after - '0') < 10 || after == '.' || (unsigned)((after | 0x20) - 'a') < 26) return NULL;
    return e;
}

// mantissa / 10^frac_digits, correctly rounded (Clinger: both exact doubles).
static inline double text_decimal_double(uint64_t mantissa, int frac_digits, int negative) {
    double v = (double)mantissa;
    if (frac_digits) v /= text_pow10_exact[frac_digits];
    return negative ? -v : v;
}

// The float strtof reads: the decimal correctly rounded to a float, found by
// a multiplication: mantissa * 10^-k is within 3 units in the last place of
// the exact quotient, so both round to the same float unless a float midpoint
// (in the 29 bits a float drops: 2^28) lies near. Only then does strtof read
// the text (the number's first byte, its sign included): rounding the
// correctly rounded double instead could round twice.
__attribute__((always_inline)) static inline float text_decimal_float(uint64_t mantissa, int frac_digits, int negative,
                                                                      const char *text) {
    double v = (double)mantissa, q = v * text_pow10_inverse[frac_digits];  // exact for frac_digits 0
    uint64_t bits;
    memcpy(&bits, &q, sizeof bits);
    int64_t from_midpoint = (int64_t)(bits & ((UINT64_C(1) << 29) - 1)) - (INT64_C(1) << 28);
    if (__builtin_expect(from_midpoint <= 8 && from_midpoint >= -8, 0)) return text_strtof(text);
    // The sign set in the float's bits, not by a branch: about half of a
    // file's values are negative, in no order a predictor could learn, and
    // `negative ? -q : q` compiled to a jump mispredicted on every other one.
    float f = (float)q;
    uint32_t f_bits;
    memcpy(&f_bits, &f, sizeof f_bits);
    f_bits |= (uint32_t)negative << 31;
    memcpy(&f, &f_bits, sizeof f);
    return f;
}

#endif
