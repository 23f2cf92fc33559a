// The payload checksum's inner loop (wire.h): whole 32-byte blocks added to
// its four 64-bit lanes, vectorised, with a copy in the same pass if wanted.
#ifndef ASGD_NET_CHECKSUM_LANES_H
#define ASGD_NET_CHECKSUM_LANES_H

#include <stddef.h>
#include <stdint.h>

// For each of `blocks` blocks of 32 bytes at p, and each lane l (the block's
// l-th little-endian 64-bit word w): a[l] += w; b[l] += a[l]. With q set,
// the blocks are also copied to q. All sums mod 2^64. Takes the fastest way
// this CPU has.
void checksum_lanes_add(uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q, size_t blocks);

// The ways, each giving the same sums; tests run every one the CPU has.
typedef enum checksum_lanes_way {
    CHECKSUM_LANES_WORDS,  // a word at a time (any compiler, any byte order)
    CHECKSUM_LANES_VECTOR2,  // 128-bit vectors (SSE2 on x86-64, NEON on arm64)
    CHECKSUM_LANES_AVX2,  // one 256-bit register per block (x86-64 with AVX2)
} checksum_lanes_way_t;
int checksum_lanes_available(checksum_lanes_way_t way);
void checksum_lanes_add_with(checksum_lanes_way_t way, uint64_t a[4], uint64_t b[4], const uint8_t *p, uint8_t *q,
                             size_t blocks);

#endif
