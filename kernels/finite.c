#include "kernels/finite.h"

#include <stdint.h>
#include <string.h>

int all_finite_cpu(const float *v, size_t n) {
    const uint32_t exponent = 0x7f800000u;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        bad |= (bits & exponent) == exponent;
    }
    return !bad;
}
