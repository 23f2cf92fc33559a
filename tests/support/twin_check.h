#ifndef ASGD_TESTS_TWIN_CHECK_H
#define ASGD_TESTS_TWIN_CHECK_H
// How a CUDA kernel (or a GPU run) is compared with its CPU twin, shared by
// the GPU tests and bench/bench_gpu.c: fresh random inputs that are never
// zero, and a relative error that values near zero after cancellation do not
// dominate.
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "kernels/foundation/rng.h"

// n floats uniform in [lo, hi), none of them 0. Caller frees; NULL if out of memory.
static inline float *twin_random_floats(rng_t *rng, size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        float v;
        do v = lo + (hi - lo) * (float)rng_uniform(rng);
        while (v == 0.0f);
        p[i] = v;
    }
    return p;
}

// max_i |got_i - want_i| / max(|want_i|, 1% of max_j |want_j|); NaN counts as the worst.
static inline double twin_rel_err(const float *got, const float *want, size_t n) {
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), 0.01 * scale);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

#endif
