// The checksum's lanes as vectors (checksum_lanes.h). The sums are the same
// on every path; only the instructions differ. A 32-byte block is one AVX2
// register or two 128-bit ones; the four lanes are independent chains, so
// the loop runs at the speed of its loads. Word by word, the compiler
// vectorised the sum but not the sum with a copy: see docs/benchmarks.md.
#include "net/checksum_lanes.h"

#include <string.h>

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HAVE_VECTORS 1
#if defined(__x86_64__)
#define HAVE_AVX2 1
#endif
#endif

static uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void lanes_add_words(uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q, size_t blocks) {
    if (q) memcpy(q, p, 32 * blocks);
    for (size_t i = 0; i < blocks; i++)
        for (int l = 0; l < 4; l++) {
            a[l] += load_le64(p + 32 * i + 8 * (size_t)l);
            b[l] += a[l];
        }
}

#ifdef HAVE_VECTORS
typedef uint64_t lanes2_t __attribute__((vector_size(16)));

static void lanes_add_vector2(uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q, size_t blocks) {
    lanes2_t a0, a1, b0, b1;
    memcpy(&a0, a, 16), memcpy(&a1, a + 2, 16), memcpy(&b0, b, 16), memcpy(&b1, b + 2, 16);
    if (q) {
        for (size_t i = 0; i < blocks; i++) {
            lanes2_t w0, w1;
            memcpy(&w0, p + 32 * i, 16), memcpy(&w1, p + 32 * i + 16, 16);
            memcpy(q + 32 * i, &w0, 16), memcpy(q + 32 * i + 16, &w1, 16);
            a0 += w0, a1 += w1, b0 += a0, b1 += a1;
        }
    } else {
        for (size_t i = 0; i < blocks; i++) {
            lanes2_t w0, w1;
            memcpy(&w0, p + 32 * i, 16), memcpy(&w1, p + 32 * i + 16, 16);
            a0 += w0, a1 += w1, b0 += a0, b1 += a1;
        }
    }
    memcpy(a, &a0, 16), memcpy(a + 2, &a1, 16), memcpy(b, &b0, 16), memcpy(b + 2, &b1, 16);
}
#endif

#ifdef HAVE_AVX2
typedef uint64_t lanes4_t __attribute__((vector_size(32)));

__attribute__((target("avx2"))) static void lanes_add_avx2(uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q,
                                                           size_t blocks) {
    lanes4_t va, vb;
    memcpy(&va, a, 32), memcpy(&vb, b, 32);
    if (q) {
        for (size_t i = 0; i < blocks; i++) {
            lanes4_t w;
            memcpy(&w, p + 32 * i, 32);
            memcpy(q + 32 * i, &w, 32);
            va += w, vb += va;
        }
    } else {
        for (size_t i = 0; i < blocks; i++) {
            lanes4_t w;
            memcpy(&w, p + 32 * i, 32);
            va += w, vb += va;
        }
    }
    memcpy(a, &va, 32), memcpy(b, &vb, 32);
}
#endif

int checksum_lanes_available(checksum_lanes_way_t way) {
    switch (way) {
        case CHECKSUM_LANES_WORDS:
            return 1;
#ifdef HAVE_VECTORS
        case CHECKSUM_LANES_VECTOR2:
            return 1;
#endif
#ifdef HAVE_AVX2
        case CHECKSUM_LANES_AVX2:
            return __builtin_cpu_supports("avx2") != 0;
#endif
        default:
            return 0;
    }
}

void checksum_lanes_add_with(checksum_lanes_way_t way, uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q,
                             size_t blocks) {
    switch (way) {
#ifdef HAVE_AVX2
        case CHECKSUM_LANES_AVX2:
            lanes_add_avx2(a, b, p, q, blocks);
            return;
#endif
#ifdef HAVE_VECTORS
        case CHECKSUM_LANES_VECTOR2:
            lanes_add_vector2(a, b, p, q, blocks);
            return;
#endif
        default:
            lanes_add_words(a, b, p, q, blocks);
            return;
    }
}

void checksum_lanes_add(uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q, size_t blocks) {
    checksum_lanes_way_t way = checksum_lanes_available(CHECKSUM_LANES_AVX2)      ? CHECKSUM_LANES_AVX2
                               : checksum_lanes_available(CHECKSUM_LANES_VECTOR2) ? CHECKSUM_LANES_VECTOR2
                                                                                  : CHECKSUM_LANES_WORDS;
    checksum_lanes_add_with(way, a, b, p, q, blocks);
}
