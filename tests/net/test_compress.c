// Gradient compression (net/compress.h):
//   - specs parse and print back; bad ones are refused with the flag's name;
//   - fp16 conversion: every half survives half -> float -> half, our rounding
//     agrees with the compiler's _Float16 where it has one, ties go to even,
//     large values saturate;
//   - every method's round trip stays within its stated error bound;
//   - qsgd and randk are unbiased: the mean of many seeded encodings of one
//     vector is the vector, within a few standard errors per coordinate, while
//     the same statistic rejects topk (biased by design);
//   - error feedback: what is sent over many steps adds up to what should have
//     been sent less the last residual, and the residual stays bounded, while
//     without it topk's sum drifts further away every step;
//   - malformed encodings are refused with a message saying what is wrong, and
//     leave the output untouched;
//   - the same seed gives the same bytes.
#include "net/compress.h"
#include "tests/support/test_support.h"

#define ERR_LEN 256

static compress_spec_t spec_of(const char *text) {
    char err[ERR_LEN];
    compress_spec_t s;
    CHECK_OK(compress_spec_parse(text, &s, err, sizeof err), err);
    return s;
}

// Seeded values spanning magnitudes from 1e-6 to 1e2, either sign, a few zeros.
static void varied_values(float *x, size_t n, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, 11);
    for (size_t i = 0; i < n; i++) {
        double mag = pow(10.0, -6.0 + 8.0 * rng_uniform(&r));
        x[i] = (float)(rng_uniform(&r) < 0.5 ? -mag : mag);
        if (i % 97 == 5) x[i] = 0.0f;
    }
}

static uint8_t *encode_new(compressor_t *c, const float *x, size_t n, float *residual, float *sent, size_t *len) {
    char err[ERR_LEN];
    *len = compress_encoded_bytes(compressor_spec(c), n);
    uint8_t *buf = malloc(*len);
    CHECK(buf);
    CHECK_OK(compress_encode(c, x, n, residual, sent, buf, *len, err, sizeof err), err);
    return buf;
}

// ---- specs ------------------------------------------------------------------------

static void test_specs(void) {
    const char *good[] = {"none", "fp16", "qsgd:2", "qsgd:8", "qsgd:4:128", "topk:0.01", "randk:0.5", "topk:1"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        compress_spec_t s = spec_of(good[i]);
        char back[64];
        compress_spec_format(&s, back, sizeof back);
        CHECK(strcmp(back, good[i]) == 0);
    }
    compress_spec_t q = spec_of("qsgd:4");
    CHECK(q.kind == COMPRESS_KIND_QSGD && q.bits == 4 && q.bucket == COMPRESS_QSGD_BUCKET);
    const char *bad[] = {"",         "zip",  "fp16:2", "qsgd",     "qsgd:1",     "qsgd:9",    "qsgd:x", "qsgd:4:",
                         "qsgd:4:0", "topk", "topk:0", "topk:1.5", "randk:-0.1", "randk:nan", "none:1", "topk:0.1x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[ERR_LEN] = "";
        compress_spec_t s;
        CHECK(compress_spec_parse(bad[i], &s, err, sizeof err) == -1);
        CHECK(strstr(err, "--compress"));
    }
    // k = ceil(fraction n), at least one, at most n.
    compress_spec_t t = spec_of("topk:0.01");
    CHECK(compress_values_sent(&t, 100) == 1 && compress_values_sent(&t, 101) == 2 && compress_values_sent(&t, 5) == 1);
    CHECK(compress_values_sent(&t, 0) == 0);
    CHECK(compress_encoded_bytes(&t, 1000) == 8 + 8 * 10);
    compress_spec_t q4 = spec_of("qsgd:4");
    CHECK(compress_encoded_bytes(&q4, 1000) == 8 + 4 * 2 + 500);
    compress_spec_t f = spec_of("fp16");
    CHECK(compress_encoded_bytes(&f, 1001) == 8 + 2002);
    printf("specs: parse, print back, refuse %zu bad ones\n", sizeof bad / sizeof *bad);
}

// ---- fp16 -------------------------------------------------------------------------

static void test_fp16(void) {
    // Every half that is not NaN comes back bit for bit.
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) continue;
        CHECK(compress_f32_to_f16(compress_f16_to_f32((uint16_t)h)) == h);
    }
    CHECK(compress_f16_to_f32(0x3c00) == 1.0f && compress_f16_to_f32(0xc000) == -2.0f);
    CHECK(compress_f16_to_f32(0x0001) == 0x1p-24f && compress_f16_to_f32(0x7bff) == 65504.0f);
    // Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
    CHECK(compress_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(compress_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);
    CHECK(compress_f32_to_f16(0x1p-25f) == 0x0000 && compress_f32_to_f16(0x1.8p-25f) == 0x0001);
    // Far below the smallest half, float subnormals included: zero with its sign.
    CHECK(compress_f32_to_f16(1e-30f) == 0x0000 && compress_f32_to_f16(-0x1p-140f) == 0x8000);
    CHECK(compress_f32_to_f16(0x1.fffffep-26f) == 0x0000 && compress_f32_to_f16(-0x1p-24f) == 0x8001);
    // Saturation instead of infinity; infinities and NaN pass.
    CHECK(compress_f32_to_f16(1e9f) == 0x7bff && compress_f32_to_f16(-70000.0f) == 0xfbff);
    CHECK(compress_f32_to_f16(INFINITY) == 0x7c00 && isnan(compress_f16_to_f32(compress_f32_to_f16(NAN))));
    // Random floats over the whole finite range: error within the bound.
    rng_t r;
    rng_seed(&r, 3, 1);
    size_t agreed = 0;
    for (int i = 0; i < 200000; i++) {
        float x = (float)(pow(2.0, -149.0 + 276.0 * rng_uniform(&r)) * (rng_uniform(&r) < 0.5 ? -1 : 1));
        float q = compress_f16_to_f32(compress_f32_to_f16(x));
        double e = fabs((double)q - (double)x), ax = fabs((double)x);
        if (ax >= 0x1p-14 && ax <= 65504.0)
            CHECK(e <= 0x1p-11 * ax);
        else if (ax < 0x1p-14)
            CHECK(e <= 0x1p-25);
        else
            CHECK(q == (x > 0 ? 65504.0f : -65504.0f));
#ifdef __FLT16_MAX__
        if (ax <= 65504.0) {
            _Float16 ref = (_Float16)x;
            uint16_t bits;
            memcpy(&bits, &ref, sizeof bits);
            CHECK(bits == compress_f32_to_f16(x));
            agreed++;
        }
#endif
    }
    // The vector path (F16C where the CPU has it) gives the reference's bits,
    // infinities, NaN, saturation, subnormals and odd lengths included.
    enum { V = 4099 };
    float *v = malloc(V * sizeof *v), *q1 = malloc(V * sizeof *q1), *q2 = malloc(V * sizeof *q2);
    uint8_t *b1 = malloc(8 + 2 * V), *b2 = malloc(2 * V);
    CHECK(v && q1 && q2 && b1 && b2);
    for (size_t i = 0; i < V; i++)
        v[i] = (float)(pow(2.0, -40.0 + 60.0 * rng_uniform(&r)) * (rng_uniform(&r) < 0.5 ? -1 : 1));
    v[3] = INFINITY, v[17] = -INFINITY, v[40] = NAN, v[41] = 1e9f, v[42] = -65519.0f, v[43] = 65520.0f;
    compress_encode_fp16(v, V, b1);
    compress_fp16_reference(v, V, b2, q2);
    CHECK(memcmp(b1 + 8, b2, 2 * V) == 0);
    memcpy(q1, v, V * sizeof *v);
    compress_round_fp16(q1, V);
    CHECK(memcmp(q1, q2, V * sizeof *q1) == 0);
    free(v);
    free(q1);
    free(q2);
    free(b1);
    free(b2);
    printf(
        "fp16: every half round-trips; 200000 random floats (2^-149 .. 2^127) within 2^-11 relative / 2^-25 "
        "absolute; %zu agree with the compiler's _Float16; the %s path equals the reference\n",
        agreed, compress_fp16_hardware() ? "F16C" : "scalar");
}

// ---- round trips -----------------------------------------------------------------

static void test_round_trips(void) {
    char err[ERR_LEN];
    const size_t sizes[] = {0, 1, 7, 511, 512, 513, 5000};
    const char *methods[] = {"none",       "fp16",     "qsgd:2",    "qsgd:4", "qsgd:8",
                             "qsgd:3:100", "topk:0.1", "randk:0.1", "topk:1"};
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
        compress_spec_t s = spec_of(methods[m]);
        compressor_t *c = compressor_new(&s, 5000, 42, 7, err, sizeof err);
        CHECK(c);
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            size_t n = sizes[z];
            float *x = malloc((n + 1) * sizeof *x), *sent = malloc((n + 1) * sizeof *sent),
                  *back = malloc((n + 1) * sizeof *back);
            CHECK(x && sent && back);
            varied_values(x, n, 100 + n);
            size_t len;
            uint8_t *buf = encode_new(c, x, n, NULL, sent, &len);
            CHECK(compress_encoded_kind(buf, len) == (int)s.kind);
            CHECK_OK(compress_decode(buf, len, n, back, err, sizeof err), err);
            // The decoder sees exactly what the encoder said it sent.
            CHECK(n == 0 || memcmp(sent, back, n * sizeof *back) == 0);
            size_t k = compress_values_sent(&s, n), nonzero = 0;
            uint32_t levels = s.kind == COMPRESS_KIND_QSGD ? (1u << (s.bits - 1)) - 1u : 0;
            for (size_t i = 0; i < n; i++) {
                double e = fabs((double)back[i] - (double)x[i]);
                nonzero += back[i] != 0.0f;
                switch (s.kind) {
                    case COMPRESS_KIND_NONE:
                        CHECK(back[i] == x[i]);
                        break;
                    case COMPRESS_KIND_FP16:
                        CHECK(fabs(x[i]) < 0x1p-14 ? e <= 0x1p-25 : e <= 0x1p-11 * fabs(x[i]));
                        break;
                    case COMPRESS_KIND_QSGD: {
                        // At most one level (bucket scale / s) away, same sign, zero stays zero.
                        size_t lo = i / s.bucket * s.bucket, hi = lo + s.bucket < n ? lo + s.bucket : n;
                        float scale = 0.0f;
                        for (size_t j = lo; j < hi; j++) scale = fmaxf(scale, fabsf(x[j]));
                        CHECK(e <= (double)scale / levels * (1 + 1e-6));
                        CHECK(back[i] * x[i] >= 0.0f);
                        if (x[i] == 0.0f) CHECK(back[i] == 0.0f);
                        break;
                    }
                    case COMPRESS_KIND_TOPK:
                        CHECK(back[i] == 0.0f || back[i] == x[i]);
                        break;
                    case COMPRESS_KIND_RANDK:
                        CHECK(back[i] == 0.0f || back[i] == x[i] * (float)((double)n / (double)k));
                        break;
                    default:
                        break;
                }
            }
            if (s.kind == COMPRESS_KIND_TOPK) {
                // The k largest magnitudes: nothing dropped is larger than anything kept.
                float smallest_kept = INFINITY, largest_dropped = 0.0f;
                for (size_t i = 0; i < n; i++) {
                    if (back[i] != 0.0f)
                        smallest_kept = fminf(smallest_kept, fabsf(x[i]));
                    else
                        largest_dropped = fmaxf(largest_dropped, fabsf(x[i]));
                }
                CHECK(n == 0 || largest_dropped <= smallest_kept);
                CHECK(nonzero <= k);
            }
            if (s.kind == COMPRESS_KIND_RANDK) CHECK(nonzero <= k);
            free(buf);
            free(x);
            free(sent);
            free(back);
        }
        compressor_destroy(&c);
        CHECK(c == NULL);
    }
    compressor_destroy(NULL);
    printf("round trips: %zu methods x %zu sizes within their bounds\n", sizeof methods / sizeof *methods,
           sizeof sizes / sizeof *sizes);
}

// ---- unbiasedness --------------------------------------------------------------------

// Encodes one vector `draws` times (the rng moves on each time) and returns the
// largest |mean - x| / standard error over the coordinates, with the standard
// error sigma_i / sqrt(draws) estimated from the draws themselves.
static double worst_z(const char *method, const float *x, size_t n, int draws) {
    char err[ERR_LEN];
    compress_spec_t s = spec_of(method);
    compressor_t *c = compressor_new(&s, n, 9, 1, err, sizeof err);
    CHECK(c);
    double *sum = calloc(n, sizeof *sum), *sq = calloc(n, sizeof *sq);
    float *back = malloc(n * sizeof *back);
    size_t len = compress_encoded_bytes(&s, n);
    uint8_t *buf = malloc(len);
    CHECK(sum && sq && back && buf);
    for (int d = 0; d < draws; d++) {
        CHECK_OK(compress_encode(c, x, n, NULL, NULL, buf, len, err, sizeof err), err);
        CHECK_OK(compress_decode(buf, len, n, back, err, sizeof err), err);
        for (size_t i = 0; i < n; i++) {
            sum[i] += back[i];
            sq[i] += (double)back[i] * back[i];
        }
    }
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double mean = sum[i] / draws, var = sq[i] / draws - mean * mean;
        double se = sqrt(fmax(var, 0.0) / draws);
        // Coordinates that never vary are exact (or exactly biased).
        double z = se > 0 ? fabs(mean - x[i]) / se : (fabs(mean - x[i]) > 1e-6 * fabs(x[i]) ? INFINITY : 0.0);
        if (z > worst) worst = z;
    }
    free(sum);
    free(sq);
    free(back);
    free(buf);
    compressor_destroy(&c);
    return worst;
}

static void test_unbiased(void) {
    enum { N = 300, DRAWS = 4000 };
    float x[N];
    rng_t r;
    rng_seed(&r, 5, 2);
    for (size_t i = 0; i < N; i++) x[i] = (float)rng_normal(&r);
    // With 300 coordinates a |z| above 5 happens by chance with probability
    // about 300 * 6e-7; the seeds are fixed, so the outcome is too.
    double zq2 = worst_z("qsgd:2", x, N, DRAWS), zq4 = worst_z("qsgd:4:64", x, N, DRAWS);
    double zr = worst_z("randk:0.2", x, N, DRAWS), zt = worst_z("topk:0.2", x, N, DRAWS);
    printf(
        "unbiasedness over %d draws, worst |z| of %d coordinates: qsgd:2 %.2f, qsgd:4:64 %.2f, randk:0.2 %.2f; "
        "topk:0.2 (biased) %.3g\n",
        DRAWS, N, zq2, zq4, zr, zt);
    CHECK(zq2 < 5.0 && zq4 < 5.0 && zr < 5.0);
    CHECK(zt > 50.0);  // the statistic does see a bias when there is one
}

// ---- error feedback ---------------------------------------------------------------

typedef struct ef_outcome {
    double gap_end;  // |sum of g - sum of sent| after the last step
    double residual_end;  // |residual| after the last step
    double max_first, max_second;  // largest |residual| in each half of the run
    double identity;  // | (sum g - sum sent) - residual |, float rounding only
} ef_outcome_t;

static ef_outcome_t run_feedback(const char *method, int feedback, size_t n, int steps) {
    char err[ERR_LEN];
    compress_spec_t s = spec_of(method);
    compressor_t *c = compressor_new(&s, n, 21, 3, err, sizeof err);
    CHECK(c);
    ef_residual_t res;
    CHECK_OK(ef_residual_init(&res, n, err, sizeof err), err);
    double *want = calloc(n, sizeof *want), *got = calloc(n, sizeof *got);
    float *g = malloc(n * sizeof *g), *sent = malloc(n * sizeof *sent), *drift = malloc(n * sizeof *drift);
    size_t len = compress_encoded_bytes(&s, n);
    uint8_t *buf = malloc(len);
    CHECK(want && got && g && sent && drift && buf);
    rng_t r;
    rng_seed(&r, 77, 4);
    // Gradients with a persistent direction (what a biased compressor loses
    // every step) plus noise.
    for (size_t i = 0; i < n; i++) drift[i] = (float)(0.1 * rng_normal(&r));
    ef_outcome_t o = {0, 0, 0, 0, 0};
    for (int t = 0; t < steps; t++) {
        for (size_t i = 0; i < n; i++) g[i] = drift[i] + (float)rng_normal(&r);
        CHECK_OK(compress_encode(c, g, n, feedback ? res.e : NULL, sent, buf, len, err, sizeof err), err);
        for (size_t i = 0; i < n; i++) {
            want[i] += g[i];
            got[i] += sent[i];
        }
        double norm = ef_residual_norm(&res);
        if (t < steps / 2)
            o.max_first = fmax(o.max_first, norm);
        else
            o.max_second = fmax(o.max_second, norm);
    }
    double gap = 0, id = 0;
    for (size_t i = 0; i < n; i++) {
        gap += (want[i] - got[i]) * (want[i] - got[i]);
        double d = (want[i] - got[i]) - res.e[i];
        id += d * d;
    }
    o.gap_end = sqrt(gap);
    o.residual_end = ef_residual_norm(&res);
    o.identity = sqrt(id);
    free(want);
    free(got);
    free(g);
    free(sent);
    free(drift);
    free(buf);
    ef_residual_free(&res);
    compressor_destroy(&c);
    return o;
}

static void test_error_feedback(void) {
    enum { N = 2000, STEPS = 600 };
    const char *methods[] = {"topk:0.01", "randk:0.05", "qsgd:2", "fp16"};
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
        ef_outcome_t on = run_feedback(methods[m], 1, N, STEPS), off = run_feedback(methods[m], 0, N, STEPS);
        printf(
            "error feedback %-10s |sum g - sum sent| after %d steps: %.4g with (residual %.4g, max %.4g then "
            "%.4g), %.4g without\n",
            methods[m], STEPS, on.gap_end, on.residual_end, on.max_first, on.max_second, off.gap_end);
        // What was not sent is exactly what the residual holds (to float rounding).
        CHECK(on.identity <= 1e-3 * (1.0 + on.gap_end));
        // The residual stays bounded: no larger late in the run than early on.
        CHECK(on.max_second <= 1.5 * on.max_first + 1e-6);
        if (strcmp(methods[m], "topk:0.01") == 0) {
            // Without feedback topk loses the persistent part of every step.
            CHECK(on.gap_end < 0.1 * off.gap_end);
        }
    }
}

// ---- malformed input ---------------------------------------------------------------

// Expects decode to fail with a message containing `want`, leaving out as it was.
static void expect_bad(const uint8_t *buf, size_t len, size_t n, const char *want) {
    char err[ERR_LEN] = "";
    float out[64];
    for (size_t i = 0; i < 64; i++) out[i] = 1.5f;
    CHECK(n <= 64);
    CHECK(compress_check(buf, len, n, err, sizeof err) == -1);
    if (!strstr(err, want)) {
        fprintf(stderr, "expected an error about '%s', got '%s'\n", want, err);
        exit(1);
    }
    CHECK(compress_decode(buf, len, n, out, err, sizeof err) == -1);
    CHECK(compress_decode_add(buf, len, n, out, err, sizeof err) == -1);
    for (size_t i = 0; i < 64; i++) CHECK(out[i] == 1.5f);
}

static void test_malformed(void) {
    char err[ERR_LEN];
    enum { N = 40 };
    float x[N];
    varied_values(x, N, 5);
    uint8_t tmp[1024] = {0};
    size_t cases = 0;
    // Too short for a descriptor, unknown encoding, nonzero reserved bytes.
    expect_bad(tmp, 5, N, "shorter than");
    cases++;
    compress_spec_t f = spec_of("fp16");
    compressor_t *c = compressor_new(&f, N, 1, 1, err, sizeof err);
    CHECK(c);
    size_t len;
    uint8_t *buf = encode_new(c, x, N, NULL, NULL, &len);
    memcpy(tmp, buf, len);
    tmp[0] = 99;
    expect_bad(tmp, len, N, "unknown gradient encoding 99");
    memcpy(tmp, buf, len);
    tmp[2] = 1;
    expect_bad(tmp, len, N, "bytes 2-3");
    expect_bad(buf, len - 1, N, "expected");  // truncated
    expect_bad(buf, len, N + 1, "expected");  // another length than announced
    memcpy(tmp, buf, len);
    tmp[8 + 2 * 3 + 1] = 0x7c;  // value 3 becomes infinity
    expect_bad(tmp, len, N, "not finite");
    cases += 5;
    free(buf);
    compressor_destroy(&c);

    compress_spec_t q = spec_of("qsgd:4:16");
    c = compressor_new(&q, N, 1, 1, err, sizeof err);
    CHECK(c);
    buf = encode_new(c, x, N - 1, NULL, NULL, &len);  // 39 values: the last code byte is half used
    size_t codes = 8 + 4 * 3;
    memcpy(tmp, buf, len);
    tmp[1] = 9;
    expect_bad(tmp, len, N - 1, "bits per value");
    memcpy(tmp, buf, len);
    memset(tmp + 4, 0, 4);
    expect_bad(tmp, len, N - 1, "bucket length 0");
    memcpy(tmp, buf, len);
    tmp[codes] = 0xff;  // code 15 > 2s = 14
    expect_bad(tmp, len, N - 1, "above 14");
    memcpy(tmp, buf, len);
    tmp[len - 1] |= 0xf0;  // padding bits set
    expect_bad(tmp, len, N - 1, "unused bits");
    memcpy(tmp, buf, len);
    float neg = -1.0f;
    memcpy(tmp + 8, &neg, 4);
    expect_bad(tmp, len, N - 1, "scale");
    cases += 5;
    free(buf);
    compressor_destroy(&c);

    compress_spec_t t = spec_of("topk:0.25");
    c = compressor_new(&t, N, 1, 1, err, sizeof err);
    CHECK(c);
    buf = encode_new(c, x, N, NULL, NULL, &len);  // 10 pairs
    uint32_t v;
    memcpy(tmp, buf, len);
    v = N;
    memcpy(tmp + 8 + 4 * 9, &v, 4);  // last index out of range
    expect_bad(tmp, len, N, "not below 40");
    memcpy(tmp, buf, len);
    memcpy(&v, tmp + 8 + 4 * 3, 4);
    memcpy(tmp + 8 + 4 * 4, &v, 4);  // a repeated index
    expect_bad(tmp, len, N, "not ascending");
    memcpy(tmp, buf, len);
    v = 200;
    memcpy(tmp + 4, &v, 4);  // more pairs than values
    expect_bad(tmp, len, N, "200 pairs");
    memcpy(tmp, buf, len);
    float inf = INFINITY;
    memcpy(tmp + 8 + 40, &inf, 4);
    expect_bad(tmp, len, N, "not finite");
    cases += 4;
    // A well-formed encoding still decodes after all that.
    float out[N];
    CHECK_OK(compress_decode(buf, len, N, out, err, sizeof err), err);
    free(buf);
    compressor_destroy(&c);
    printf("malformed encodings: %zu kinds refused with a message, output untouched\n", cases);
}

// ---- encoder errors, determinism, decode_add ----------------------------------------------

static void test_encoder(void) {
    char err[ERR_LEN];
    enum { N = 1000 };
    float x[N], a[N], b[N];
    varied_values(x, N, 8);
    const char *methods[] = {"qsgd:3", "randk:0.1"};
    for (size_t m = 0; m < 2; m++) {
        compress_spec_t s = spec_of(methods[m]);
        compressor_t *c1 = compressor_new(&s, N, 5, 2, err, sizeof err),
                     *c2 = compressor_new(&s, N, 5, 2, err, sizeof err),
                     *c3 = compressor_new(&s, N, 6, 2, err, sizeof err);
        CHECK(c1 && c2 && c3);
        size_t l1, l2, l3;
        uint8_t *e1 = encode_new(c1, x, N, NULL, NULL, &l1), *e2 = encode_new(c2, x, N, NULL, NULL, &l2),
                *e3 = encode_new(c3, x, N, NULL, NULL, &l3);
        CHECK(l1 == l2 && memcmp(e1, e2, l1) == 0);  // same seed, same bytes
        CHECK(memcmp(e1, e3, l1) != 0);  // another seed, other draws
        // decode_add adds onto what is there.
        for (size_t i = 0; i < N; i++) a[i] = b[i] = (float)i;
        float d[N];
        CHECK_OK(compress_decode(e1, l1, N, d, err, sizeof err), err);
        CHECK_OK(compress_decode_add(e1, l1, N, a, err, sizeof err), err);
        for (size_t i = 0; i < N; i++) CHECK(a[i] == b[i] + d[i]);
        free(e1);
        free(e2);
        free(e3);
        compressor_destroy(&c1);
        compressor_destroy(&c2);
        compressor_destroy(&c3);
    }
    compress_spec_t s = spec_of("qsgd:4");
    compressor_t *c = compressor_new(&s, N, 1, 1, err, sizeof err);
    CHECK(c);
    uint8_t buf[4096];
    x[17] = NAN;
    CHECK(compress_encode(c, x, N, NULL, NULL, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "value 17"));
    x[17] = 1.0f;
    CHECK(compress_encode(c, x, N, NULL, NULL, buf, 10, err, sizeof err) == -1 && strstr(err, "need"));
    float big[N + 1];
    CHECK(compress_encode(c, big, N + 1, NULL, NULL, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "sized"));
    compress_spec_t bad = {COMPRESS_KIND_QSGD, 1, 512, 1.0};
    CHECK(compressor_new(&bad, N, 1, 1, err, sizeof err) == NULL);
    compressor_destroy(&c);
    // compress_round_fp16 is the fp16 round trip.
    float r1[N], r2[N];
    varied_values(r1, N, 9);
    memcpy(r2, r1, sizeof r1);
    compress_round_fp16(r1, N);
    for (size_t i = 0; i < N; i++) CHECK(r1[i] == compress_f16_to_f32(compress_f32_to_f16(r2[i])));
    printf("encoder: seeded draws reproducible, decode_add adds, bad input and sizes refused\n");
}

int main(void) {
    test_specs();
    test_fp16();
    test_round_trips();
    test_unbiased();
    test_error_feedback();
    test_malformed();
    test_encoder();
    printf("compression tests passed\n");
    return 0;
}
