// A small minibatch's weight gradient, dw = dz^T x, without OpenBLAS.
//
// Why: at batch 16 the product has K = 16, and the MLP's step computes a
// layer's gradient in blocks of rows (engine/models/model_mlp.c) that it
// hands on while they are in cache. For every block OpenBLAS packs all of x
// (16 x 784 floats for the first layer, 13 times a step) and, on cores
// without beta-0 kernels, needs its output zeroed first: a two-thread
// Hogwild! profile on the Zen kernels had 4% of its samples in that packing
// (`sgemm_itcopy` under `sgemm_nt`) and 3% in the zeroing (memset), for a
// product whose arithmetic is 16 FMAs an output. Here a column chunk of x
// (batch vectors of 8 floats) stays in L1 while every row of the block is
// formed against it, eight rows at a time in registers, and each output is
// stored once.
//
// Each output is a chain of FMAs over the batch in order, from zero:
// acc = fma(dz[b][r], x[b][c], acc) for b = 0, 1, ... . The vector lanes and
// the scalar columns left over (fmaf, an FMA instruction in this target)
// compute the same expression, so the bits do not depend on where a column
// falls, and every mode that calls dense_weight_grad_set_cpu (Hogwild!,
// locked, sync, the simulator, a stored gradient) gets the same gradient.
#include "kernels/dense_wgrad.h"

#include <math.h>
#include <stddef.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define WGRAD_TARGET __attribute__((target("avx2,fma")))

// Rows [0, R) of dw at columns [0, 8 CV): dz points at the block's first
// row in dz's row 0, x and dw at the block's first column. R x CV
// accumulators: for each example, CV loads of x and R broadcasts of dz feed
// R x CV FMAs (6 x 2: 8 loads for 12 FMAs, which the FMA units, not the
// loads, then bound; 8 x 1 had 9 loads for 8 and ran at the loads' pace).
#define WGRAD_BLOCK(R, CV)                                                                                       \
    WGRAD_TARGET static inline __attribute__((always_inline)) void wgrad_block_##R##x##CV(                       \
        int batch, int in, const float *dz, int ldz, const float *x, float *dw) {                                \
        __m256 acc[R][CV];                                                                                       \
        for (int r = 0; r < R; r++)                                                                              \
            for (int v = 0; v < CV; v++) acc[r][v] = _mm256_setzero_ps();                                        \
        for (int b = 0; b < batch; b++) {                                                                        \
            __m256 xv[CV];                                                                                       \
            for (int v = 0; v < CV; v++) xv[v] = _mm256_loadu_ps(x + (size_t)b * (size_t)in + 8 * v);           \
            const float *d = dz + (size_t)b * (size_t)ldz;                                                       \
            for (int r = 0; r < R; r++) {                                                                        \
                __m256 dv = _mm256_broadcast_ss(d + r);                                                          \
                for (int v = 0; v < CV; v++) acc[r][v] = _mm256_fmadd_ps(dv, xv[v], acc[r][v]);                 \
            }                                                                                                    \
        }                                                                                                        \
        for (int r = 0; r < R; r++)                                                                              \
            for (int v = 0; v < CV; v++) _mm256_storeu_ps(dw + (size_t)r * (size_t)in + 8 * v, acc[r][v]);      \
    }
WGRAD_BLOCK(6, 2)
WGRAD_BLOCK(4, 2)
WGRAD_BLOCK(2, 2)
WGRAD_BLOCK(1, 2)
WGRAD_BLOCK(6, 1)
WGRAD_BLOCK(1, 1)

// Every row of dw at the columns [c, c + 8 CV), six rows at a time.
#define WGRAD_COLUMNS(CV)                                                                             \
    WGRAD_TARGET static inline __attribute__((always_inline)) void wgrad_columns_##CV(                \
        int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {            \
        int r = 0;                                                                                    \
        for (; r + 6 <= out; r += 6) wgrad_block_6x##CV(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in); \
        WGRAD_REST_##CV                                                                               \
        for (; r < out; r++) wgrad_block_1x##CV(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in); \
    }
#define WGRAD_REST_2                                                                                          \
    if (r + 4 <= out) wgrad_block_4x2(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in), r += 4;     \
    if (r + 2 <= out) wgrad_block_2x2(batch, in, dz + r, ldz, x, dw + (size_t)r * (size_t)in), r += 2;
#define WGRAD_REST_1
WGRAD_COLUMNS(2)
WGRAD_COLUMNS(1)

WGRAD_TARGET static void wgrad_fma(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
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

static int have_fma(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

int dense_wgrad_small(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    if (batch > DENSE_WGRAD_SMALL_BATCH || !have_fma()) return 0;
    wgrad_fma(batch, in, out, dz, ldz, x, dw);
    return 1;
}

#else
int dense_wgrad_small(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    (void)batch, (void)in, (void)out, (void)dz, (void)ldz, (void)x, (void)dw;
    return 0;
}
#endif
