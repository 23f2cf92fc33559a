// Gradient encodings and error feedback (compress.h, docs/compression.md).
//
// Layout of an encoding (little-endian, as the rest of the wire):
//   byte 0     encoding: 0 none, 1 fp16, 2 qsgd, 3 topk, 4 randk
//   byte 1     qsgd: bits per value; otherwise 0
//   bytes 2-3  0
//   bytes 4-7  uint32: qsgd bucket length; topk/randk: pairs k; otherwise 0
//   body       none:  n float32
//              fp16:  n binary16
//              qsgd:  ceil(n / bucket) float32 scales, then n codes of `bits`
//                     bits packed from the lowest bit of each byte up; a code
//                     c means level c - s; unused bits of the last byte are 0
//              topk, randk: k uint32 indices (ascending, < n), then k float32
#include "net/compress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define COMPRESS_HAVE_F16C_PATH 1
#endif

struct compressor {
    compress_spec_t spec;
    size_t max_n;
    rng_t rng;
    float *work;  // (max_n) x + residual: the vector being encoded
    float *mag;  // (max_n) topk: magnitudes, reordered while selecting
    uint64_t *chosen;  // (max_n / 64 + 1) randk: which indices were drawn
};

static const char *const kind_names[COMPRESS_KIND_COUNT_] = {"none", "fp16", "qsgd", "topk", "randk"};

const char *compress_kind_name(compress_kind_t k) {
    return (unsigned)k < COMPRESS_KIND_COUNT_ ? kind_names[k] : "unknown";
}

int compress_is_lossy(const compress_spec_t *s) { return s->kind != COMPRESS_KIND_NONE; }

// ---- spec ------------------------------------------------------------------------

int compress_spec_parse(const char *text, compress_spec_t *out, char *err, size_t err_len) {
    compress_spec_t s = {COMPRESS_KIND_NONE, 0, 0, 1.0};
    const char *colon = text ? strchr(text, ':') : NULL;
    size_t name_len = colon ? (size_t)(colon - text) : (text ? strlen(text) : 0);
    const char *arg = colon ? colon + 1 : NULL;
    int found = 0;
    for (int k = 0; text && k < COMPRESS_KIND_COUNT_; k++) {
        if (strlen(kind_names[k]) == name_len && strncmp(text, kind_names[k], name_len) == 0) {
            s.kind = (compress_kind_t)k;
            found = 1;
        }
    }
    if (!found) {
        snprintf(err, err_len, "--compress '%s': expected none, fp16, qsgd:BITS, topk:FRACTION or randk:FRACTION",
                 text ? text : "");
        return -1;
    }
    switch (s.kind) {
        case COMPRESS_KIND_NONE:
        case COMPRESS_KIND_FP16:
            if (arg) {
                snprintf(err, err_len, "--compress '%s': %s takes no parameter", text, kind_names[s.kind]);
                return -1;
            }
            break;
        case COMPRESS_KIND_QSGD: {
            char *end = NULL;
            unsigned long bits = arg ? strtoul(arg, &end, 10) : 0;
            unsigned long bucket = COMPRESS_QSGD_BUCKET;
            int bad_bucket = 0;
            if (arg && end != arg && *end == ':') {
                const char *b = end + 1;
                bucket = strtoul(b, &end, 10);
                bad_bucket = end == b || *b == '-' || bucket == 0 || bucket > (1ul << 24);
            }
            if (!arg || end == arg || *end != '\0' || *arg == '-' || bad_bucket || bits < COMPRESS_QSGD_MIN_BITS ||
                bits > COMPRESS_QSGD_MAX_BITS) {
                snprintf(
                    err, err_len,
                    "--compress '%s': expected qsgd:BITS with BITS %u..%u (or qsgd:BITS:BUCKET, BUCKET 1..16777216)",
                    text, COMPRESS_QSGD_MIN_BITS, COMPRESS_QSGD_MAX_BITS);
                return -1;
            }
            s.bits = (unsigned)bits;
            s.bucket = (uint32_t)bucket;
            break;
        }
        case COMPRESS_KIND_TOPK:
        case COMPRESS_KIND_RANDK: {
            char *end = NULL;
            double f = arg ? strtod(arg, &end) : NAN;
            if (!arg || end == arg || *end != '\0' || !(f > 0.0 && f <= 1.0)) {
                snprintf(err, err_len, "--compress '%s': expected %s:FRACTION with FRACTION in (0, 1], e.g. %s:0.01",
                         text, kind_names[s.kind], kind_names[s.kind]);
                return -1;
            }
            s.fraction = f;
            break;
        }
        default:
            break;
    }
    *out = s;
    return 0;
}

void compress_spec_format(const compress_spec_t *s, char *out, size_t out_len) {
    switch (s->kind) {
        case COMPRESS_KIND_QSGD:
            if (s->bucket == COMPRESS_QSGD_BUCKET)
                snprintf(out, out_len, "qsgd:%u", s->bits);
            else
                snprintf(out, out_len, "qsgd:%u:%u", s->bits, s->bucket);
            break;
        case COMPRESS_KIND_TOPK:
        case COMPRESS_KIND_RANDK:
            snprintf(out, out_len, "%s:%g", kind_names[s->kind], s->fraction);
            break;
        default:
            snprintf(out, out_len, "%s", compress_kind_name(s->kind));
            break;
    }
}

size_t compress_values_sent(const compress_spec_t *s, size_t n) {
    if (s->kind != COMPRESS_KIND_TOPK && s->kind != COMPRESS_KIND_RANDK) return n;
    if (n == 0) return 0;
    double want = s->fraction * (double)n;
    size_t k = (size_t)want;
    if (want - (double)k > 1e-9 * want) k++;  // ceil, forgiving the rounding of fraction * n
    if (k < 1) k = 1;
    if (k > n) k = n;
    return k;
}

static size_t qsgd_buckets(size_t n, uint32_t bucket) { return (n + bucket - 1) / bucket; }
static size_t qsgd_code_bytes(size_t n, unsigned bits) { return (n * bits + 7) / 8; }

size_t compress_encoded_bytes(const compress_spec_t *s, size_t n) {
    size_t body = 0;
    switch (s->kind) {
        case COMPRESS_KIND_NONE:
            body = 4 * n;
            break;
        case COMPRESS_KIND_FP16:
            body = 2 * n;
            break;
        case COMPRESS_KIND_QSGD:
            body = 4 * qsgd_buckets(n, s->bucket) + qsgd_code_bytes(n, s->bits);
            break;
        case COMPRESS_KIND_TOPK:
        case COMPRESS_KIND_RANDK:
            body = 8 * compress_values_sent(s, n);
            break;
        default:
            break;
    }
    return COMPRESS_DESCRIPTOR_BYTES + body;
}

size_t compress_max_encoded_bytes(size_t n) {
    const compress_spec_t widest[] = {
        {COMPRESS_KIND_NONE, 0, 0, 0.0},
        {COMPRESS_KIND_FP16, 0, 0, 0.0},
        {COMPRESS_KIND_QSGD, COMPRESS_QSGD_MAX_BITS, 1, 0.0},
        {COMPRESS_KIND_TOPK, 0, 0, 1.0},
        {COMPRESS_KIND_RANDK, 0, 0, 1.0},
    };
    size_t most = 0;
    for (size_t i = 0; i < sizeof widest / sizeof widest[0]; i++) {
        size_t b = compress_encoded_bytes(&widest[i], n);
        if (b > most) most = b;
    }
    return most;
}

// ---- residual --------------------------------------------------------------------

int ef_residual_init(ef_residual_t *r, size_t n, char *err, size_t err_len) {
    r->n = n;
    r->e = calloc(n ? n : 1, sizeof *r->e);
    if (!r->e) {
        snprintf(err, err_len, "error feedback: out of memory for a residual of %zu values", n);
        return -1;
    }
    return 0;
}

void ef_residual_free(ef_residual_t *r) {
    free(r->e);
    r->e = NULL;
    r->n = 0;
}

double ef_residual_norm(const ef_residual_t *r) {
    double s = 0.0;
    for (size_t i = 0; i < r->n; i++) s += (double)r->e[i] * (double)r->e[i];
    return sqrt(s);
}

// ---- fp16 ------------------------------------------------------------------------

// v >> shift, rounded to nearest, ties to even; shift in 1..31.
static uint32_t shift_round_even(uint32_t v, unsigned shift) {
    uint32_t q = v >> shift, rem = v & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

uint16_t compress_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;  // NaN stays NaN
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    // 65504 and everything that would round above it: the largest finite half.
    if (ax >= 0x477fe000u) return sign | 0x7bffu;
    uint32_t exp = ax >> 23;  // biased float exponent
    if (exp < 113) {
        // Below 2^-14: a half subnormal m * 2^-24, m = value * 2^24 rounded.
        // Below 2^-25 (half the smallest subnormal) everything rounds to zero,
        // float subnormals included.
        if (exp < 102) return sign;
        uint32_t mant = (ax & 0x7fffffu) | 0x800000u;  // value = mant * 2^(exp - 150)
        return sign | (uint16_t)shift_round_even(mant, 126 - exp);  // shift 14..24
    }
    // Normal: rebias the exponent, round 23 mantissa bits to 10 (a carry
    // moves into the exponent, which is what rounding up should do).
    uint32_t h = ((exp - 112) << 10) | ((ax & 0x7fffffu) >> 13);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
}

float compress_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f;  // exact
        return sign ? -v : v;
    }
    uint32_t x = sign | (exp == 31 ? 0x7f800000u | (mant << 13) : ((exp + 112) << 23) | (mant << 13));
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

// fp16 of x[0..n): the halves into out (little-endian; NULL: none), and the
// values they stand for into q (NULL: none; q may be x). The scalar functions
// above are the reference; on x86-64 CPUs with F16C the conversion runs eight
// values at a time in hardware, clamped to +-65504 first so that it saturates
// as they do, and any block holding an infinity or a NaN goes through the
// scalar path. tests/net/test_compress.c checks both paths against each other.
static void fp16_pack_scalar(const float *x, size_t n, uint8_t *out, float *q) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = compress_f32_to_f16(x[i]);
        if (out) {
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        if (q) q[i] = compress_f16_to_f32(h);
    }
}

static void fp16_unpack_scalar(const uint8_t *in, size_t n, float *out, int add) {
    for (size_t i = 0; i < n; i++) {
        float v = compress_f16_to_f32((uint16_t)(in[2 * i] | (in[2 * i + 1] << 8)));
        out[i] = add ? out[i] + v : v;
    }
}

#ifdef COMPRESS_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) static void fp16_pack_f16c(const float *x, size_t n, uint8_t *out, float *q) {
    const __m256 top = _mm256_set1_ps(COMPRESS_FP16_MAX), bottom = _mm256_set1_ps(-COMPRESS_FP16_MAX);
    const __m256 inf = _mm256_set1_ps(INFINITY), sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        // |v| not below infinity, or unordered (NaN): the scalar path keeps them as they are.
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), inf, _CMP_NLT_UQ))) {
            fp16_pack_scalar(x + i, 8, out ? out + 2 * i : NULL, q ? q + i : NULL);
            continue;
        }
        __m128i h = _mm256_cvtps_ph(_mm256_min_ps(top, _mm256_max_ps(bottom, v)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (out) _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), h);
        if (q) _mm256_storeu_ps(q + i, _mm256_cvtph_ps(h));
    }
    fp16_pack_scalar(x + i, n - i, out ? out + 2 * i : NULL, q ? q + i : NULL);
}

__attribute__((target("avx,f16c"))) static void fp16_unpack_f16c(const uint8_t *in, size_t n, float *out, int add) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(in + 2 * i)));
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
        _mm256_storeu_ps(out + i, v);
    }
    fp16_unpack_scalar(in + 2 * i, n - i, out + i, add);
}

// Read from CPUID and XGETBV rather than __builtin_cpu_supports: clang 14
// does not know the "f16c" feature name. AVX needs the OS to save the YMM
// state too (OSXSAVE set and XCR0 bits 1-2 on).
static int probe_f16c(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    const unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((ecx & (osxsave | avx | f16c)) != (osxsave | avx | f16c)) return 0;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    return (xcr0_lo & 0x6u) == 0x6u;
}

static int have_f16c(void) {
    static atomic_int cached = -1;  // -1: not probed yet; racing probes agree
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = probe_f16c();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}
#endif

static void fp16_pack(const float *x, size_t n, uint8_t *out, float *q) {
#ifdef COMPRESS_HAVE_F16C_PATH
    if (have_f16c()) {
        fp16_pack_f16c(x, n, out, q);
        return;
    }
#endif
    fp16_pack_scalar(x, n, out, q);
}

static void fp16_unpack(const uint8_t *in, size_t n, float *out, int add) {
#ifdef COMPRESS_HAVE_F16C_PATH
    if (have_f16c()) {
        fp16_unpack_f16c(in, n, out, add);
        return;
    }
#endif
    fp16_unpack_scalar(in, n, out, add);
}

int compress_fp16_hardware(void) {
#ifdef COMPRESS_HAVE_F16C_PATH
    return have_f16c();
#else
    return 0;
#endif
}

void compress_fp16_reference(const float *x, size_t n, uint8_t *out, float *q) { fp16_pack_scalar(x, n, out, q); }

void compress_encode_fp16(const float *x, size_t n, uint8_t *out) {
    out[0] = COMPRESS_KIND_FP16;
    memset(out + 1, 0, COMPRESS_DESCRIPTOR_BYTES - 1);
    fp16_pack(x, n, out + COMPRESS_DESCRIPTOR_BYTES, NULL);
}

void compress_round_fp16(float *x, size_t n) { fp16_pack(x, n, NULL, x); }

// ---- the compressor ----------------------------------------------------------------

compressor_t *compressor_new(const compress_spec_t *s, size_t max_n, uint64_t seed, uint64_t stream, char *err,
                             size_t err_len) {
    if ((unsigned)s->kind >= COMPRESS_KIND_COUNT_ ||
        (s->kind == COMPRESS_KIND_QSGD &&
         (s->bits < COMPRESS_QSGD_MIN_BITS || s->bits > COMPRESS_QSGD_MAX_BITS || s->bucket == 0)) ||
        ((s->kind == COMPRESS_KIND_TOPK || s->kind == COMPRESS_KIND_RANDK) && !(s->fraction > 0 && s->fraction <= 1))) {
        snprintf(err, err_len, "compressor: invalid spec (kind %d, bits %u, bucket %u, fraction %g)", (int)s->kind,
                 s->bits, s->bucket, s->fraction);
        return NULL;
    }
    if (max_n > UINT32_MAX) {
        snprintf(err, err_len, "compressor: %zu values do not fit 32-bit indices", max_n);
        return NULL;
    }
    compressor_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "compressor: out of memory");
        return NULL;
    }
    c->spec = *s;
    c->max_n = max_n;
    rng_seed(&c->rng, seed, stream);
    size_t n = max_n ? max_n : 1;
    c->work = malloc(n * sizeof *c->work);
    if (s->kind == COMPRESS_KIND_TOPK) c->mag = malloc(n * sizeof *c->mag);
    if (s->kind == COMPRESS_KIND_RANDK) c->chosen = calloc(n / 64 + 1, sizeof *c->chosen);
    if (!c->work || (s->kind == COMPRESS_KIND_TOPK && !c->mag) || (s->kind == COMPRESS_KIND_RANDK && !c->chosen)) {
        snprintf(err, err_len, "compressor: out of memory for vectors of %zu values", max_n);
        compressor_destroy(&c);
        return NULL;
    }
    return c;
}

void compressor_destroy(compressor_t **cp) {
    if (!cp || !*cp) return;
    compressor_t *c = *cp;
    free(c->work);
    free(c->mag);
    free(c->chosen);
    free(c);
    *cp = NULL;
}

const compress_spec_t *compressor_spec(const compressor_t *c) { return &c->spec; }

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, sizeof v); }
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static void put_f32(uint8_t *p, float v) { memcpy(p, &v, sizeof v); }
static float get_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void write_descriptor(uint8_t *out, compress_kind_t k, unsigned bits, uint32_t param) {
    out[0] = (uint8_t)k;
    out[1] = (uint8_t)bits;
    out[2] = out[3] = 0;
    put_u32(out + 4, param);
}

// Uniform in [0, 1) with 24 random bits: enough for the rounding decisions.
static float uniform24(rng_t *r) { return (float)(rng_next(r) >> 40) * 0x1p-24f; }

// The vector to encode: x, or x + residual in the compressor's scratch.
static const float *encode_input(compressor_t *c, const float *x, size_t n, const float *residual, char *err,
                                 size_t err_len) {
    const float *p = x;
    if (residual) {
        for (size_t i = 0; i < n; i++) c->work[i] = x[i] + residual[i];
        p = c->work;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(p[i])) {
            snprintf(err, err_len,
                     "compress %s: value %zu of %zu is %g: a gradient that is not finite cannot be encoded",
                     compress_kind_name(c->spec.kind), i, n, (double)p[i]);
            return NULL;
        }
    }
    return p;
}

// What a value was sent as, and what error feedback keeps of it.
static inline void account(float *residual, float *sent, size_t i, float p, float q) {
    if (residual) residual[i] = p - q;
    if (sent) sent[i] = q;
}

static void encode_fp16(const float *p, size_t n, float *residual, float *sent, uint8_t *body) {
    // The values sent land in the residual (p is the compressor's own copy
    // then) or in sent, and feedback is taken from there.
    float *q = residual ? residual : sent;
    fp16_pack(p, n, body, q);
    if (!residual) return;
    for (size_t i = 0; i < n; i++) {
        float v = residual[i];
        residual[i] = p[i] - v;
        if (sent) sent[i] = v;
    }
}

static void encode_qsgd(compressor_t *c, const float *p, size_t n, float *residual, float *sent, uint8_t *body) {
    unsigned bits = c->spec.bits;
    uint32_t bucket = c->spec.bucket, s = (1u << (bits - 1)) - 1u;
    size_t nb = qsgd_buckets(n, bucket);
    uint8_t *codes = body + 4 * nb;
    uint64_t acc = 0;
    unsigned held = 0;  // bits in acc not yet written
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * bucket, hi = lo + bucket < n ? lo + bucket : n;
        float scale = 0.0f;
        for (size_t i = lo; i < hi; i++)
            if (fabsf(p[i]) > scale) scale = fabsf(p[i]);
        put_f32(body + 4 * b, scale);
        float unit = scale / (float)s, inv = scale > 0.0f ? (float)s / scale : 0.0f;
        for (size_t i = lo; i < hi; i++) {
            // |p| / scale * s in [0, s]: round down or up with the probability
            // that makes the expected level exactly that.
            float a = fabsf(p[i]) * inv;
            uint32_t level = (uint32_t)a;
            if (uniform24(&c->rng) < a - (float)level) level++;
            if (level > s) level = s;
            uint32_t code = p[i] < 0.0f ? s - level : s + level;
            account(residual, sent, i, p[i], (float)((int32_t)code - (int32_t)s) * unit);
            acc |= (uint64_t)code << held;
            held += bits;
            while (held >= 8) {
                *codes++ = (uint8_t)acc;
                acc >>= 8;
                held -= 8;
            }
        }
    }
    if (held) *codes = (uint8_t)acc;
}

static void swap_f(float *a, float *b) {
    float t = *a;
    *a = *b;
    *b = t;
}

// The value a[kth] would have if a[0..n) were sorted ascending (Hoare's
// selection; reorders a). n >= 1, kth < n.
static float select_kth(float *a, size_t n, size_t kth) {
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, k = (ptrdiff_t)kth;
    while (lo < hi) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        // Median of three as the pivot: sorted inputs stay linear.
        if (a[mid] < a[lo]) swap_f(&a[mid], &a[lo]);
        if (a[hi] < a[lo]) swap_f(&a[hi], &a[lo]);
        if (a[hi] < a[mid]) swap_f(&a[hi], &a[mid]);
        float pivot = a[mid];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                swap_f(&a[i], &a[j]);
                i++;
                j--;
            }
        }
        // Now a[lo..j] <= pivot <= a[i..hi], and anything between equals pivot.
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

static void encode_topk(compressor_t *c, const float *p, size_t n, size_t k, float *residual, float *sent,
                        uint8_t *body) {
    uint8_t *idx = body, *val = body + 4 * k;
    if (k == 0) return;
    for (size_t i = 0; i < n; i++) c->mag[i] = fabsf(p[i]);
    float threshold = select_kth(c->mag, n, n - k);  // the k-th largest magnitude
    size_t above = 0;
    for (size_t i = 0; i < n; i++) above += fabsf(p[i]) > threshold;
    size_t ties = k - above;  // values equal to the threshold still to take, lowest indices first
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        float m = fabsf(p[i]);
        int take = m > threshold || (m == threshold && ties > 0);
        if (take && m == threshold) ties--;
        if (take) {
            put_u32(idx + 4 * j, (uint32_t)i);
            put_f32(val + 4 * j, p[i]);
            j++;
        }
        account(residual, sent, i, p[i], take ? p[i] : 0.0f);
    }
}

static void encode_randk(compressor_t *c, const float *p, size_t n, size_t k, float *residual, float *sent,
                         uint8_t *body) {
    uint8_t *idx = body, *val = body + 4 * k;
    size_t words = n / 64 + 1;
    memset(c->chosen, 0, words * sizeof *c->chosen);
    // Floyd's sampling: k distinct indices, every k-subset equally likely.
    for (size_t j = n - k; j < n; j++) {
        size_t t = (size_t)rng_below(&c->rng, (uint64_t)j + 1);
        size_t pick = (c->chosen[t / 64] >> (t % 64)) & 1u ? j : t;
        c->chosen[pick / 64] |= (uint64_t)1 << (pick % 64);
    }
    // Each index is drawn with probability k / n: scaling by n / k keeps the
    // expected value of every coordinate what it was. Under error feedback the
    // values go unscaled: feedback needs a compressor that never sends more
    // than it has (scaled, the residual would take -(n/k - 1) times every sent
    // value and grow without bound), and what is not sent now is sent later.
    float scale = residual ? 1.0f : (float)((double)n / (double)k);
    if (residual || sent)
        for (size_t i = 0; i < n; i++) account(residual, sent, i, p[i], 0.0f);
    size_t j = 0;
    for (size_t w = 0; w < words; w++) {
        uint64_t bits = c->chosen[w];
        while (bits) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            float q = p[i] * scale;
            put_u32(idx + 4 * j, (uint32_t)i);
            put_f32(val + 4 * j, q);
            account(residual, sent, i, p[i], q);
            j++;
        }
    }
}

int compress_encode(compressor_t *c, const float *x, size_t n, float *residual, float *sent, uint8_t *out,
                    size_t out_len, char *err, size_t err_len) {
    const compress_spec_t *s = &c->spec;
    if (n > c->max_n) {
        snprintf(err, err_len, "compress %s: %zu values but the compressor was sized for %zu",
                 compress_kind_name(s->kind), n, c->max_n);
        return -1;
    }
    size_t need = compress_encoded_bytes(s, n);
    if (out_len < need) {
        snprintf(err, err_len, "compress %s: %zu values need %zu bytes, the buffer has %zu",
                 compress_kind_name(s->kind), n, need, out_len);
        return -1;
    }
    const float *p = encode_input(c, x, n, residual, err, err_len);
    if (!p) return -1;
    uint8_t *body = out + COMPRESS_DESCRIPTOR_BYTES;
    size_t k = compress_values_sent(s, n);
    switch (s->kind) {
        case COMPRESS_KIND_NONE:
            write_descriptor(out, s->kind, 0, 0);
            memcpy(body, p, n * sizeof *p);
            for (size_t i = 0; i < n; i++) account(residual, sent, i, p[i], p[i]);
            break;
        case COMPRESS_KIND_FP16:
            write_descriptor(out, s->kind, 0, 0);
            encode_fp16(p, n, residual, sent, body);
            break;
        case COMPRESS_KIND_QSGD:
            write_descriptor(out, s->kind, s->bits, s->bucket);
            encode_qsgd(c, p, n, residual, sent, body);
            break;
        case COMPRESS_KIND_TOPK:
            write_descriptor(out, s->kind, 0, (uint32_t)k);
            encode_topk(c, p, n, k, residual, sent, body);
            break;
        case COMPRESS_KIND_RANDK:
            write_descriptor(out, s->kind, 0, (uint32_t)k);
            encode_randk(c, p, n, k, residual, sent, body);
            break;
        default:
            break;
    }
    return 0;
}

// ---- decoding --------------------------------------------------------------------

int compress_encoded_kind(const uint8_t *in, size_t len) { return len < COMPRESS_DESCRIPTOR_BYTES ? -1 : (int)in[0]; }

#define BAD(...) (snprintf(err, err_len, __VA_ARGS__), -1)

static int check_size(const char *name, size_t len, size_t want, size_t n, char *err, size_t err_len) {
    if (len == want) return 0;
    return BAD("encoded %s gradient: %zu bytes for %zu values, expected %zu", name, len, n, want);
}

int compress_check(const uint8_t *in, size_t len, size_t n, char *err, size_t err_len) {
    if (len < COMPRESS_DESCRIPTOR_BYTES)
        return BAD("encoded gradient of %zu bytes is shorter than its %u-byte descriptor", len,
                   COMPRESS_DESCRIPTOR_BYTES);
    unsigned kind = in[0], bits = in[1];
    uint32_t param = get_u32(in + 4);
    const uint8_t *body = in + COMPRESS_DESCRIPTOR_BYTES;
    if (kind >= COMPRESS_KIND_COUNT_)
        return BAD("unknown gradient encoding %u (this build knows 0 none, 1 fp16, 2 qsgd, 3 topk, 4 randk)", kind);
    const char *name = kind_names[kind];
    if (in[2] || in[3])
        return BAD("encoded %s gradient: descriptor bytes 2-3 are %u, %u; they must be 0", name, in[2], in[3]);
    switch ((compress_kind_t)kind) {
        case COMPRESS_KIND_NONE:
        case COMPRESS_KIND_FP16: {
            if (bits || param)
                return BAD("encoded %s gradient: descriptor parameters %u, %u must be 0", name, bits, param);
            size_t width = kind == COMPRESS_KIND_NONE ? 4 : 2;
            if (check_size(name, len, COMPRESS_DESCRIPTOR_BYTES + width * n, n, err, err_len) != 0) return -1;
            for (size_t i = 0; i < n; i++) {
                int finite = kind == COMPRESS_KIND_NONE ? isfinite(get_f32(body + 4 * i))
                                                        : ((body[2 * i + 1] >> 2) & 0x1fu) != 0x1fu;
                if (!finite) return BAD("encoded %s gradient: value %zu is not finite", name, i);
            }
            return 0;
        }
        case COMPRESS_KIND_QSGD: {
            if (bits < COMPRESS_QSGD_MIN_BITS || bits > COMPRESS_QSGD_MAX_BITS)
                return BAD("encoded qsgd gradient: %u bits per value; expected %u..%u", bits, COMPRESS_QSGD_MIN_BITS,
                           COMPRESS_QSGD_MAX_BITS);
            if (param == 0) return BAD("encoded qsgd gradient: bucket length 0");
            size_t nb = qsgd_buckets(n, param);
            if (check_size(name, len, COMPRESS_DESCRIPTOR_BYTES + 4 * nb + qsgd_code_bytes(n, bits), n, err, err_len) !=
                0)
                return -1;
            for (size_t b = 0; b < nb; b++) {
                float scale = get_f32(body + 4 * b);
                if (!(scale >= 0.0f) || !isfinite(scale))
                    return BAD("encoded qsgd gradient: bucket %zu has scale %g; expected a finite value >= 0", b,
                               (double)scale);
            }
            const uint8_t *codes = body + 4 * nb;
            uint32_t top = 2u * ((1u << (bits - 1)) - 1u), mask = (1u << bits) - 1u;
            for (size_t i = 0; i < n; i++) {
                size_t bit = i * bits;
                uint32_t two =
                    codes[bit / 8] | (bit / 8 + 1 < qsgd_code_bytes(n, bits) ? (uint32_t)codes[bit / 8 + 1] << 8 : 0);
                uint32_t code = (two >> (bit % 8)) & mask;
                if (code > top) return BAD("encoded qsgd gradient: code %u of value %zu is above %u", code, i, top);
            }
            size_t used = n * bits;
            if (used % 8 && (codes[used / 8] >> (used % 8)) != 0)
                return BAD("encoded qsgd gradient: the unused bits of the last byte are not 0");
            return 0;
        }
        case COMPRESS_KIND_TOPK:
        case COMPRESS_KIND_RANDK: {
            if (bits) return BAD("encoded %s gradient: descriptor byte 1 is %u; it must be 0", name, bits);
            if (param > n) return BAD("encoded %s gradient: %u pairs for a vector of %zu values", name, param, n);
            if (check_size(name, len, COMPRESS_DESCRIPTOR_BYTES + 8 * (size_t)param, n, err, err_len) != 0) return -1;
            for (uint32_t j = 0; j < param; j++) {
                uint32_t i = get_u32(body + 4 * (size_t)j);
                if (i >= n) return BAD("encoded %s gradient: index %u of pair %u is not below %zu", name, i, j, n);
                if (j > 0 && i <= get_u32(body + 4 * (size_t)(j - 1)))
                    return BAD("encoded %s gradient: indices are not ascending at pair %u (%u after %u)", name, j, i,
                               get_u32(body + 4 * (size_t)(j - 1)));
                if (!isfinite(get_f32(body + 4 * (size_t)param + 4 * (size_t)j)))
                    return BAD("encoded %s gradient: value of pair %u is not finite", name, j);
            }
            return 0;
        }
        default:
            break;
    }
    return BAD("unknown gradient encoding %u", kind);
}

static int decode_impl(const uint8_t *in, size_t len, size_t n, float *out, int add, char *err, size_t err_len) {
    if (compress_check(in, len, n, err, err_len) != 0) return -1;
    unsigned kind = in[0], bits = in[1];
    uint32_t param = get_u32(in + 4);
    const uint8_t *body = in + COMPRESS_DESCRIPTOR_BYTES;
    switch ((compress_kind_t)kind) {
        case COMPRESS_KIND_NONE:
            for (size_t i = 0; i < n; i++) out[i] = (add ? out[i] : 0.0f) + get_f32(body + 4 * i);
            break;
        case COMPRESS_KIND_FP16:
            fp16_unpack(body, n, out, add);
            break;
        case COMPRESS_KIND_QSGD: {
            uint32_t s = (1u << (bits - 1)) - 1u, mask = (1u << bits) - 1u;
            size_t nb = qsgd_buckets(n, param);
            const uint8_t *codes = body + 4 * nb;
            uint64_t acc = 0;
            unsigned held = 0;
            for (size_t b = 0; b < nb; b++) {
                float unit = get_f32(body + 4 * b) / (float)s;  // as the encoder computed it
                size_t lo = b * param, hi = lo + param < n ? lo + param : n;
                for (size_t i = lo; i < hi; i++) {
                    while (held < bits) {
                        acc |= (uint64_t)*codes++ << held;
                        held += 8;
                    }
                    uint32_t code = (uint32_t)acc & mask;
                    acc >>= bits;
                    held -= bits;
                    float v = (float)((int32_t)code - (int32_t)s) * unit;
                    out[i] = add ? out[i] + v : v;
                }
            }
            break;
        }
        case COMPRESS_KIND_TOPK:
        case COMPRESS_KIND_RANDK:
            if (!add) memset(out, 0, n * sizeof *out);
            for (uint32_t j = 0; j < param; j++)
                out[get_u32(body + 4 * (size_t)j)] += get_f32(body + 4 * (size_t)param + 4 * (size_t)j);
            break;
        default:
            break;
    }
    return 0;
}

int compress_decode(const uint8_t *in, size_t len, size_t n, float *out, char *err, size_t err_len) {
    return decode_impl(in, len, n, out, 0, err, err_len);
}

int compress_decode_add(const uint8_t *in, size_t len, size_t n, float *out, char *err, size_t err_len) {
    return decode_impl(in, len, n, out, 1, err, err_len);
}
