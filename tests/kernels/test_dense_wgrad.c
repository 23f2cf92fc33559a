// The weight gradient dw = dz^T x (dense_weight_grad_set_cpu): against a
// double-precision sum at every shape the MLP's blocks take and at the
// edges of the small-batch kernel's blocking (rows by 6, 4, 2, 1; columns by
// 16, 8, 1), bit for bit against one FMA chain per output where the small-
// batch kernel runs, overwriting whatever dw held, and reading dz through a
// row stride.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dense.h"
#include "kernels/dense_wgrad.h"
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

static int small_kernel_runs(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// One shape: dz (batch, ldz) whose columns [first, first + out) are the
// block, x (batch, in).
static void check_shape(int batch, int in, int out, int ldz, int first) {
    float *dz = filled((size_t)batch * (size_t)ldz, 7u + (unsigned)(batch * 31 + in));
    float *x = filled((size_t)batch * (size_t)in, 11u + (unsigned)(out * 17 + in));
    float *dw = malloc((size_t)out * (size_t)in * sizeof *dw);
    CHECK(dw);
    for (size_t i = 0; i < (size_t)out * (size_t)in; i++) dw[i] = NAN;  // overwritten, never read
    dense_weight_grad_set_cpu(batch, in, out, dz + first, ldz, x, dw);
    int exact = batch <= DENSE_WGRAD_SMALL_BATCH && small_kernel_runs();
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
                fprintf(stderr, "batch %d in %d out %d: dw[%d][%d] = %.9g, one FMA chain gives %.9g\n", batch, in,
                        out, r, c, (double)got, (double)chain);
                CHECK(0);
            }
        }
    free(dz);
    free(x);
    free(dw);
}

int main(void) {
    __builtin_cpu_init();
    // The MLP 784-256-128-10's blocks at batch 16 (20 and 16 rows of the
    // first layer, 64 of the second, the 10 of the third), then batch 1 and
    // the largest the small kernel takes.
    check_shape(16, 784, 20, 256, 0);
    check_shape(16, 784, 16, 256, 240);
    check_shape(16, 256, 64, 128, 64);
    check_shape(16, 128, 10, 10, 0);
    check_shape(1, 784, 20, 256, 20);
    check_shape(DENSE_WGRAD_SMALL_BATCH, 784, 20, 256, 0);
    // Every row count through the blocking's remainders (6, 4, 2, 1), and
    // columns of 16s, an 8 and single floats.
    for (int out = 1; out <= 13; out++) check_shape(3, 16 + 8 + 3, out, 15, 1);
    for (int in = 1; in <= 33; in++) check_shape(5, in, 7, 7, 0);
    // Past the small kernel: OpenBLAS, the same product.
    check_shape(DENSE_WGRAD_SMALL_BATCH + 1, 100, 9, 12, 2);
    check_shape(64, 784, 20, 256, 0);
    printf("dense weight gradient tests passed (%s)\n",
           small_kernel_runs() ? "the small-batch kernel bit for bit" : "no AVX2+FMA: OpenBLAS throughout");
    return 0;
}
