// A small minibatch's dense products without OpenBLAS: the forward
// z = x w^T + bias and the weight gradient dw = dz^T x, at batch <= 32.
//
// Why: at batch 16 a product's shared dimension or its batch side is 16, and
// OpenBLAS packs its operands before every call: the forward packs all of
// the layer's weights (784 x 256 floats for the MLP's first layer, at every
// step) and the weight gradient, which the MLP's step computes in blocks of
// rows that it hands on while they are in cache (engine/models/model_mlp.c),
// packs all of x for every block (13 times a step); on cores without beta-0
// kernels the gradient's block also needs zeroing first. A two-thread
// Hogwild! profile on the Zen kernels had 11% of its samples packing the
// weights (`sgemm_oncopy` under `sgemm_tn`), 4% packing x (`sgemm_itcopy`
// under `sgemm_nt`) and 3% zeroing (memset). Here each operand is read where
// it lies, through register blocks whose loads feed more FMAs than the
// loads' own port count allows (docs/benchmarks.md measures both).
//
// The arithmetic of every output is fixed, whatever block computes it, so
// that the bits do not depend on the shape's remainders and every mode that
// calls these (Hogwild!, locked, sync, the simulator, a stored gradient)
// computes the same thing:
// - weight gradient: one FMA chain over the batch in order, from zero:
//   acc = fma(dz[b][r], x[b][c], acc), b = 0, 1, ...;
// - forward: 8 lanes, lane l an FMA chain over k = l, l + 8, ... below the
//   last whole 8, from zero; the lanes summed as ((l0 + l4) + (l2 + l6)) +
//   ((l1 + l5) + (l3 + l7)); the k left over added by an FMA chain in order;
//   then the bias added.
// tests/kernels/test_dense_small.c checks both bit for bit.
#include "kernels/dense_small.h"

#include <math.h>
#include <stddef.h>

#include "kernels/foundation/asan_extent.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// Under AddressSanitizer (and UBSan, which it comes with here) the register
// blocks below are not instrumented: checked load by load (two shadow tests
// per 32-byte load, the accumulators spilled around them) they ran about 25
// times slower than without, and the MLP's tests spent most of the sanitized
// suite's time in them. Instead each call checks every operand's whole
// extent first (kernels/foundation/asan_extent.h). That the kernels touch
// nothing outside those extents, and their arithmetic, is what
// tests/kernels/test_dense_small.c checks bit for bit against a plain
// reference at every shape's remainder.
#define SMALL_TARGET __attribute__((target("avx2,fma"))) ASAN_EXTENT_UNCHECKED_BODY

static int have_fma(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// ---- the weight gradient ----
// Rows [0, R) of dw at columns [0, 8 CV): dz points at the block's first
// row in dz's row 0, x and dw at the block's first column. R x CV
// accumulators: for each example, CV loads of x and R broadcasts of dz feed
// R x CV FMAs (6 x 2: 8 loads for 12 FMAs, which the FMA units, not the
// loads, then bound; 8 x 1 had 9 loads for 8 and ran at the loads' pace).
#define WGRAD_BLOCK(R, CV)                                                                                 \
    SMALL_TARGET static inline __attribute__((always_inline)) void wgrad_block_##R##x##CV(                 \
        int batch, int in, const float *dz, int ldz, const float *x, float *dw) {                          \
        __m256 acc[R][CV];                                                                                 \
        for (int r = 0; r < R; r++)                                                                        \
            for (int v = 0; v < CV; v++) acc[r][v] = _mm256_setzero_ps();                                  \
        for (int b = 0; b < batch; b++) {                                                                  \
            __m256 xv[CV];                                                                                 \
            for (int v = 0; v < CV; v++) xv[v] = _mm256_loadu_ps(x + (size_t)b * (size_t)in + 8 * v);      \
            const float *d = dz + (size_t)b * (size_t)ldz;                                                 \
            for (int r = 0; r < R; r++) {                                                                  \
                __m256 dv = _mm256_broadcast_ss(d + r);                                                    \
                for (int v = 0; v < CV; v++) acc[r][v] = _mm256_fmadd_ps(dv, xv[v], acc[r][v]);            \
            }                                                                                              \
        }                                                                                                  \
        for (int r = 0; r < R; r++)                                                                        \
            for (int v = 0; v < CV; v++) _mm256_storeu_ps(dw + (size_t)r * (size_t)in + 8 * v, acc[r][v]); \
    }
WGRAD_BLOCK(6, 2)
WGRAD_BLOCK(4, 2)
WGRAD_BLOCK(2, 2)
WGRAD_BLOCK(1, 2)
WGRAD_BLOCK(6, 1)
WGRAD_BLOCK(4, 1)
WGRAD_BLOCK(2, 1)
WGRAD_BLOCK(1, 1)

// Every row of dw at the columns [c, c + 8 CV): six rows at a time, then
// the rest by 4, 2 and 1.
#define WGRAD_COLUMNS(CV)                                                                                        \
    SMALL_TARGET static inline __attribute__((always_inline)) void wgrad_columns_##CV(                           \
        int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {                       \
        int r = 0;                                                                                               \
        for (; r + 6 <= out; r += 6) wgrad_block_6x##CV(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in); \
        if (r + 4 <= out) wgrad_block_4x##CV(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in), r += 4;    \
        if (r + 2 <= out) wgrad_block_2x##CV(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in), r += 2;    \
        if (r < out) wgrad_block_1x##CV(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in);                 \
    }
WGRAD_COLUMNS(2)
WGRAD_COLUMNS(1)

SMALL_TARGET static void wgrad_fma(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    int c = 0;
    for (; c + 16 <= in; c += 16) wgrad_columns_2(batch, in, out, dz, ldz, x + c, dw + c);
    for (; c + 8 <= in; c += 8) wgrad_columns_1(batch, in, out, dz, ldz, x + c, dw + c);
    for (; c < in; c++)
        for (int r = 0; r < out; r++) {
            float acc = 0.0f;
            for (int b = 0; b < batch; b++)
                acc = fmaf(dz[(size_t)b * (size_t)ldz + r], x[(size_t)b * (size_t)in + c], acc);
            dw[(size_t)r * (size_t)in + c] = acc;
        }
}

int dense_wgrad_small(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    if (batch > DENSE_SMALL_BATCH || !have_fma()) return 0;
    if (batch > 0 && in > 0 && out > 0) {
        asan_extent_check(dz, ((size_t)(batch - 1) * (size_t)ldz + (size_t)out) * sizeof *dz);
        asan_extent_check(x, (size_t)batch * (size_t)in * sizeof *x);
        asan_extent_check(dw, (size_t)out * (size_t)in * sizeof *dw);
    }
    wgrad_fma(batch, in, out, dz, ldz, x, dw);
    return 1;
}

// ---- the forward ----

// The lanes' sum in the fixed order above.
SMALL_TARGET static inline __attribute__((always_inline)) float fwd_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

// Outputs (b, o) for RW weight rows and RX examples: w and bias at the first
// row, x at the first example, z at (first example, first row). RW x RX
// accumulators, each 8 partial sums over k: for each 8 of k, RW + RX loads
// feed RW x RX FMAs (3 x 4: 7 for 12), and a block's weight rows (3 x 784
// floats) stay in L1 while the examples pass.
#define FWD_BLOCK(RW, RX)                                                                         \
    SMALL_TARGET static inline __attribute__((always_inline)) void fwd_block_##RW##x##RX(         \
        int in, int out, const float *x, const float *w, const float *bias, float *z) {           \
        __m256 acc[RW][RX];                                                                       \
        for (int o = 0; o < RW; o++)                                                              \
            for (int b = 0; b < RX; b++) acc[o][b] = _mm256_setzero_ps();                         \
        int k = 0;                                                                                \
        for (; k + 8 <= in; k += 8) {                                                             \
            __m256 wv[RW];                                                                        \
            for (int o = 0; o < RW; o++) wv[o] = _mm256_loadu_ps(w + (size_t)o * (size_t)in + k); \
            for (int b = 0; b < RX; b++) {                                                        \
                __m256 xv = _mm256_loadu_ps(x + (size_t)b * (size_t)in + k);                      \
                for (int o = 0; o < RW; o++) acc[o][b] = _mm256_fmadd_ps(wv[o], xv, acc[o][b]);   \
            }                                                                                     \
        }                                                                                         \
        for (int o = 0; o < RW; o++)                                                              \
            for (int b = 0; b < RX; b++) {                                                        \
                float s = fwd_hsum(acc[o][b]);                                                    \
                for (int t = k; t < in; t++)                                                      \
                    s = fmaf(w[(size_t)o * (size_t)in + t], x[(size_t)b * (size_t)in + t], s);    \
                z[(size_t)b * (size_t)out + o] = s + bias[o];                                     \
            }                                                                                     \
    }
FWD_BLOCK(3, 4)
FWD_BLOCK(3, 1)
FWD_BLOCK(1, 4)
FWD_BLOCK(1, 1)

// The outputs of RW weight rows (w and bias at the first, z at its column),
// four examples at a time, then one.
#define FWD_ROWS(RW)                                                                                       \
    SMALL_TARGET static inline __attribute__((always_inline)) void fwd_rows_##RW(                          \
        int batch, int in, int out, const float *x, const float *w, const float *bias, float *z) {         \
        int b = 0;                                                                                         \
        for (; b + 4 <= batch; b += 4)                                                                     \
            fwd_block_##RW##x4(in, out, x + (size_t)b * (size_t)in, w, bias, z + (size_t)b * (size_t)out); \
        for (; b < batch; b++)                                                                             \
            fwd_block_##RW##x1(in, out, x + (size_t)b * (size_t)in, w, bias, z + (size_t)b * (size_t)out); \
    }
FWD_ROWS(3)
FWD_ROWS(1)

// Every output, three weight rows at a time, then one.
SMALL_TARGET static void fwd_fma(int batch, int in, int out, const float *x, const float *w, const float *bias,
                                 float *z) {
    int o = 0;
    for (; o + 3 <= out; o += 3) fwd_rows_3(batch, in, out, x, w + (size_t)o * (size_t)in, bias + o, z + o);
    for (; o < out; o++) fwd_rows_1(batch, in, out, x, w + (size_t)o * (size_t)in, bias + o, z + o);
}

int dense_forward_small(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z) {
    if (batch > DENSE_SMALL_BATCH || !have_fma()) return 0;
    if (batch > 0 && out > 0) {
        asan_extent_check(x, (size_t)batch * (size_t)in * sizeof *x);
        asan_extent_check(w, (size_t)out * (size_t)in * sizeof *w);
        asan_extent_check(bias, (size_t)out * sizeof *bias);
        asan_extent_check(z, (size_t)batch * (size_t)out * sizeof *z);
    }
    fwd_fma(batch, in, out, x, w, bias, z);
    return 1;
}

#else
int dense_wgrad_small(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    (void)batch, (void)in, (void)out, (void)dz, (void)ldz, (void)x, (void)dw;
    return 0;
}

int dense_forward_small(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z) {
    (void)batch, (void)in, (void)out, (void)x, (void)w, (void)bias, (void)z;
    return 0;
}
#endif
