#ifndef ASGD_DATASETS_TEXT_SPAN_H
#define ASGD_DATASETS_TEXT_SPAN_H
// Where a token ends, found apart from reading it: the parsers' hot loops take
// the next token's start from this scan (a few instructions on 32 bytes) and
// only check that the number they read ends at the same byte, so one token's
// reading does not wait for the last one's. Text must be padded: 32 bytes
// readable from the token's start (a block's text: text_io.h's TEXT_BLOCK_PAD).
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Bytes before the first one, within 32 from p, that is a space, a control
// byte (tab, CR, '\n', NUL, ...) or c: 0..31, or 32 when there is none.
__attribute__((always_inline)) static inline int text_span_until(const char *p, char c) {
#if defined(__SSE2__)
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i space = _mm_set1_epi8(' '), cc = _mm_set1_epi8(c);
    __m128i stop_a = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(a, space), a), _mm_cmpeq_epi8(a, cc));
    __m128i stop_b = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(b, space), b), _mm_cmpeq_epi8(b, cc));
    uint64_t stops = (uint64_t)(unsigned)_mm_movemask_epi8(stop_a) | (uint64_t)(unsigned)_mm_movemask_epi8(stop_b)
                                                                         << 16;
    return __builtin_ctzll(stops | (UINT64_C(1) << 32));
#else
    int n = 0;
    while (n < 32 && (unsigned char)p[n] > ' ' && p[n] != c) n++;
    return n;
#endif
}

#endif
