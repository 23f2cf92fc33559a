#ifndef ASGD_KERNELS_FOUNDATION_RNG_H
#define ASGD_KERNELS_FOUNDATION_RNG_H
// Seeded pseudo-random numbers: xoshiro256** seeded through splitmix64.
// Header-only so that generators, shuffles and initialisers all draw the same
// streams on every platform: a (seed, stream) pair names one reproducible sequence.
#include <math.h>
#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng_t;

static inline uint64_t rng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Independent streams for one seed (one per thread, per epoch, per purpose).
static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng_t *r) {
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

// Uniform in [0, 1) with 53 random bits.
static inline double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method).
static inline uint64_t rng_below(rng_t *r, uint64_t n) {
    __uint128_t m = (__uint128_t)rng_next(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (__uint128_t)rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

// Standard normal (Box-Muller; the second variate is discarded to keep the state simple).
static inline double rng_normal(rng_t *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Fisher-Yates shuffle of a uint32 array.
static inline void rng_shuffle_u32(rng_t *r, uint32_t *a, uint64_t n) {
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rng_below(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

#endif
