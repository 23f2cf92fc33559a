// A small batch's dense products (kernels/dense_small.h) through
// kernels/dense.h. The weight gradient dw = dz^T x (dense_weight_grad_set_cpu)
// and the forward z = x w^T + bias (dense_forward_cpu): against a
// double-precision sum at every shape the MLP's step takes and at the edges
// of the kernels' blocking (gradient rows by 6, 4, 2, 1 and columns by 16, 8,
// 1; forward rows by 3 and 1, examples by 4 and 1, k by 8 and 1), bit for
// bit against the arithmetic dense_small.c fixes for each output where the
// small-batch kernels run, overwriting whatever the output held, and
// reading dz through a row stride.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dense.h"
#include "kernels/dense_small.h"
#include "tests/support/test_support.h"

static float *filled(size_t n, unsigned seed) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    CHECK(v);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
    }
    return v;
}

static int small_kernel_runs(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// One shape: dz (batch, ldz) whose columns [first, first + out) are the
// block, x (batch, in).
static void check_wgrad(int batch, int in, int out, int ldz, int first) {
    float *dz = filled((size_t)batch * (size_t)ldz, 7u + (unsigned)(batch * 31 + in));
    float *x = filled((size_t)batch * (size_t)in, 11u + (unsigned)(out * 17 + in));
    float *dw = malloc((size_t)out * (size_t)in * sizeof *dw);
    CHECK(dw);
    for (size_t i = 0; i < (size_t)out * (size_t)in; i++) dw[i] = NAN;  // overwritten, never read
    dense_weight_grad_set_cpu(batch, in, out, dz + first, ldz, x, dw);
    int exact = batch <= DENSE_SMALL_BATCH && small_kernel_runs();
    for (int r = 0; r < out; r++)
        for (int c = 0; c < in; c++) {
            double sum = 0.0, size = 0.0;
            float chain = 0.0f;
            for (int b = 0; b < batch; b++) {
                float d = dz[(size_t)b * (size_t)ldz + (size_t)(first + r)], v = x[(size_t)b * (size_t)in + c];
                sum += (double)d * v;
                size += fabs((double)d * v);
                chain = fmaf(d, v, chain);
            }
            float got = dw[(size_t)r * (size_t)in + c];
            if (fabs((double)got - sum) > 1e-6 * (size + 1.0)) {
                fprintf(stderr, "batch %d in %d out %d: dw[%d][%d] = %.9g, the sum is %.9g\n", batch, in, out, r, c,
                        (double)got, sum);
                CHECK(0);
            }
            if (exact && memcmp(&got, &chain, sizeof got) != 0) {
                fprintf(stderr, "batch %d in %d out %d: dw[%d][%d] = %.9g, one FMA chain gives %.9g\n", batch, in, out,
                        r, c, (double)got, (double)chain);
                CHECK(0);
            }
        }
    free(dz);
    free(x);
    free(dw);
}

// The forward's fixed arithmetic for one output: 8 lanes of FMA chains over
// k below the last whole 8, summed ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
// (l3 + l7)), the rest of k by an FMA chain, then the bias.
static float forward_formula(int in, const float *xrow, const float *wrow, float bias) {
    float lane[8] = {0};
    int k8 = in / 8 * 8;
    for (int k = 0; k < k8; k++) lane[k % 8] = fmaf(wrow[k], xrow[k], lane[k % 8]);
    float s = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (int k = k8; k < in; k++) s = fmaf(wrow[k], xrow[k], s);
    return s + bias;
}

static void check_forward(int batch, int in, int out) {
    float *x = filled((size_t)batch * (size_t)in, 3u + (unsigned)(batch * 13 + in));
    float *w = filled((size_t)out * (size_t)in, 5u + (unsigned)(out * 7 + in));
    float *bias = filled((size_t)out, 9u + (unsigned)out);
    float *z = malloc((size_t)batch * (size_t)out * sizeof *z);
    CHECK(z);
    for (size_t i = 0; i < (size_t)batch * (size_t)out; i++) z[i] = NAN;  // overwritten, never read
    dense_forward_cpu(batch, in, out, x, w, bias, z);
    int exact = batch <= DENSE_SMALL_BATCH && small_kernel_runs();
    for (int b = 0; b < batch; b++)
        for (int o = 0; o < out; o++) {
            const float *xrow = x + (size_t)b * (size_t)in, *wrow = w + (size_t)o * (size_t)in;
            double sum = bias[o], size = fabs((double)bias[o]);
            for (int k = 0; k < in; k++) {
                sum += (double)xrow[k] * wrow[k];
                size += fabs((double)xrow[k] * wrow[k]);
            }
            float got = z[(size_t)b * (size_t)out + o], formula = forward_formula(in, xrow, wrow, bias[o]);
            if (fabs((double)got - sum) > 1e-6 * (size + 1.0)) {
                fprintf(stderr, "forward batch %d in %d out %d: z[%d][%d] = %.9g, the sum is %.9g\n", batch, in, out, b,
                        o, (double)got, sum);
                CHECK(0);
            }
            if (exact && memcmp(&got, &formula, sizeof got) != 0) {
                fprintf(stderr, "forward batch %d in %d out %d: z[%d][%d] = %.9g, the fixed arithmetic gives %.9g\n",
                        batch, in, out, b, o, (double)got, (double)formula);
                CHECK(0);
            }
        }
    free(x);
    free(w);
    free(bias);
    free(z);
}

int main(void) {
    __builtin_cpu_init();
    // The MLP 784-256-128-10's blocks at batch 16 (20 and 16 rows of the
    // first layer, 64 of the second, the 10 of the third), then batch 1 and
    // the largest the small kernel takes.
    check_wgrad(16, 784, 20, 256, 0);
    check_wgrad(16, 784, 16, 256, 240);
    check_wgrad(16, 256, 64, 128, 64);
    check_wgrad(16, 128, 10, 10, 0);
    check_wgrad(1, 784, 20, 256, 20);
    check_wgrad(DENSE_SMALL_BATCH, 784, 20, 256, 0);
    // Every row count through the blocking's remainders (6, 4, 2, 1), and
    // columns of 16s, an 8 and single floats.
    for (int out = 1; out <= 13; out++) check_wgrad(3, 16 + 8 + 3, out, 15, 1);
    for (int in = 1; in <= 33; in++) check_wgrad(5, in, 7, 7, 0);
    // Past the small kernel: OpenBLAS, the same product.
    check_wgrad(DENSE_SMALL_BATCH + 1, 100, 9, 12, 2);
    check_wgrad(64, 784, 20, 256, 0);
    // The forward: the MLP's three layers at batch 16, batch 1 and the
    // largest the small kernel takes, every remainder of rows (by 3),
    // examples (by 4) and k (by 8), then OpenBLAS past it.
    check_forward(16, 784, 256);
    check_forward(16, 256, 128);
    check_forward(16, 128, 10);
    check_forward(1, 784, 256);
    check_forward(DENSE_SMALL_BATCH, 784, 256);
    for (int out = 1; out <= 7; out++)
        for (int batch = 1; batch <= 9; batch++) check_forward(batch, 8 * 3 + 5, out);
    for (int in = 1; in <= 17; in++) check_forward(5, in, 4);
    check_forward(DENSE_SMALL_BATCH + 1, 100, 9);
    check_forward(64, 784, 256);
    printf("dense small-batch product tests passed (%s)\n",
           small_kernel_runs() ? "the small-batch kernel bit for bit" : "no AVX2+FMA: OpenBLAS throughout");
    return 0;
}
