// The NaN/Inf tests of kernels/finite.h. weighted_store_finite_cpu stores
// exactly 0.0f + weight * src[i] (bit for bit the scalar expression, -0.0
// made +0.0 as a sum does) and answers 0 for a NaN or an Inf at any position
// of any length (the vector body and its tail), including one the product
// makes from finite inputs; all_finite_cpu gives the same answer on what was
// stored.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/finite.h"
#include "tests/support/test_support.h"

#define MAX_N 67

static uint32_t bits_of(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static void fill(float *v, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((int)((seed >> 8) % 20001) - 10000) * 1e-3f;
    }
}

// Stores src scaled by weight and checks every stored bit and the answer.
static void check_store(const float *src, size_t n, float weight, int want_finite) {
    float dst[MAX_N + 1];
    dst[n] = 42.0f;  // past the end: untouched
    int got = weighted_store_finite_cpu(dst, src, weight, n);
    CHECK(got == want_finite);
    CHECK(all_finite_cpu(dst, n) == want_finite);
    for (size_t i = 0; i < n; i++) {
        volatile float w = weight, x = src[i];  // the scalar expression, not vectorised
        float expect = 0.0f + w * x;
        CHECK(bits_of(dst[i]) == bits_of(expect));
    }
    CHECK(dst[n] == 42.0f);
}

int main(void) {
    const float bad[] = {NAN, INFINITY, -INFINITY};
    float src[MAX_N] = {0};
    for (size_t n = 0; n <= MAX_N; n++) {
        fill(src, n, 7u + (unsigned)n);
        check_store(src, n, 0.25f, 1);
        check_store(src, n, -3.0f, 1);
        if (n == 0) continue;
        src[n / 2] = -0.0f;  // -0 times a positive weight: stored as +0
        src[0] = 1e-40f;  // subnormal: finite
        check_store(src, n, 0.5f, 1);
        size_t at[] = {0, n / 2, n - 1};
        for (size_t a = 0; a < 3; a++) {
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                float keep = src[at[a]];
                src[at[a]] = bad[b];
                check_store(src, n, 0.5f, 0);
                src[at[a]] = keep;
            }
            float keep = src[at[a]];
            src[at[a]] = 3e38f;  // finite, but its product overflows to Inf
            check_store(src, n, 10.0f, 0);
            src[at[a]] = keep;
        }
    }
    printf(
        "ok: weighted_store_finite_cpu stores 0.0f + w * x bit for bit and finds NaN/Inf at every position, "
        "lengths 0..%d\n",
        MAX_N);
    return 0;
}
