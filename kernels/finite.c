#include "kernels/finite.h"

#include <stdint.h>
#include <string.h>

#define EXPONENT_BITS 0x7f800000u  // all ones: NaN or Inf

static inline uint32_t not_finite(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits & EXPONENT_BITS) == EXPONENT_BITS;
}

int all_finite_cpu(const float *v, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) bad |= not_finite(v[i]);
    return !bad;
}

int weighted_store_finite_cpu(float *restrict dst, const float *restrict src, float weight, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float x = 0.0f + weight * src[i];
        dst[i] = x;
        bad |= not_finite(x);
    }
    return !bad;
}
