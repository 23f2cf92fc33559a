#include "engine/core/params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/asan_extent.h"

param_t *params_new(size_t n, char *err, size_t err_len) {
    size_t bytes = (n ? n : 1) * sizeof(param_t);
    bytes = (bytes + 63) / 64 * 64;
    param_t *p = aligned_alloc(64, bytes);
    if (!p) {
        snprintf(err, err_len, "params: allocating %zu parameters (%zu bytes): %s", n, bytes, strerror(errno));
        return NULL;
    }
    for (size_t i = 0; i < n; i++) atomic_init(&p[i], 0.0f);
    return p;
}

void params_free(param_t **p) {
    if (!p || !*p) return;
    free(*p);
    *p = NULL;
}

// ---- the reference: one relaxed atomic access per float ----

static void read_floats(const param_t *p, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = param_get(&p[i]);
}

static void write_floats(param_t *p, size_t n, const float *in) {
    for (size_t i = 0; i < n; i++) param_set(&p[i], in[i]);
}

static void sgd_floats(param_t *p, size_t n, const float *g, float lr, float *copy) {
    for (size_t i = 0; i < n; i++) {
        float value = param_get(&p[i]) - lr * g[i];
        param_set(&p[i], value);
        if (copy) copy[i] = value;
    }
}

static void sgd_weighted_floats(param_t *p, size_t n, const float *g, float weight, float lr, float *copy) {
    for (size_t i = 0; i < n; i++) {
        float value = param_get(&p[i]) - lr * (0.0f + weight * g[i]);
        param_set(&p[i], value);
        copy[i] = value;
    }
}

// ---- the same in vector lanes (x86-64; see params.h for why it is defined) ----

// TSan cannot see into asm: its builds keep the per-float loops, each access
// checked as the atomic it stands for. ASan builds keep the vector lanes and
// check, once per call, the whole extent of parameters the asm reads or writes
// (params_extent_check); the caller's floats are plain C accesses, checked as
// any other.
#if defined(__SANITIZE_THREAD__)
#define PARAMS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PARAMS_TSAN 1
#endif
#endif

#if defined(__x86_64__) && !defined(PARAMS_TSAN)
#define PARAMS_LANES 1

// One vector's worth of operations, for lanes of WIDTH floats: the racy load
// and store (asm whose operand is the span of parameters accessed; the span
// type may alias anything, so no access to those floats is moved across
// them), plain loads of the caller's floats, and the four bulk loops, which
// return how far they got (a multiple of WIDTH; the reference does the rest).
// The arithmetic between the asm statements is C on vector types: a product
// and a difference per lane, the reference's expression, so the same bits.
//
// The update loops ask for the parameters and the copy PARAMS_AHEAD floats
// ahead of where they are (one prefetch per vector; at the end, where they
// are): a Hogwild! step writes the whole model, which is no longer in this
// core's cache by then (other threads have written it, the step's GEMMs have
// pushed it out), and the processor's own prefetcher kept too few of those
// lines on their way (the MLP's one-thread step 12% faster with them; write
// intent, prefetchw, was no faster; docs/benchmarks.md). A prefetch is a hint,
// not an access: it reads and writes no object, so it races with nothing, and
// it never faults. (GCC drops a prefetch under an if here: hence the clamp.)
#define PARAMS_AHEAD 128
#define LANE_OPERATIONS(NAME, WIDTH, TARGET, MOVE)                                                                 \
    typedef float NAME##_lanes __attribute__((vector_size(4 * WIDTH)));                                            \
    typedef struct {                                                                                               \
        float f[WIDTH];                                                                                            \
    } __attribute__((may_alias)) NAME##_span;                                                                      \
    TARGET static inline NAME##_lanes NAME##_load(const param_t *p) {                                              \
        NAME##_lanes v;                                                                                            \
        __asm__ volatile(MOVE " %1, %0" : "=x"(v) : "m"(*(const NAME##_span *)p));                                 \
        return v;                                                                                                  \
    }                                                                                                              \
    TARGET static inline void NAME##_store(param_t *p, NAME##_lanes v) {                                           \
        __asm__ volatile(MOVE " %1, %0" : "=m"(*(NAME##_span *)p) : "x"(v));                                       \
    }                                                                                                              \
    TARGET static inline NAME##_lanes NAME##_plain(const float *x) {                                               \
        NAME##_lanes v;                                                                                            \
        memcpy(&v, x, sizeof v);                                                                                   \
        return v;                                                                                                  \
    }                                                                                                              \
    TARGET static inline void NAME##_ahead(const param_t *p, const float *copy, size_t i, size_t n) {              \
        size_t ahead = n - i > PARAMS_AHEAD ? PARAMS_AHEAD : 0;                                                    \
        __builtin_prefetch((const void *)(p + i + ahead), 1, 3);                                                   \
        __builtin_prefetch(copy + i + ahead, 1, 3);                                                                \
    }                                                                                                              \
    TARGET static size_t NAME##_read(const param_t *p, size_t n, float *out) {                                     \
        size_t i = 0;                                                                                              \
        for (; i + WIDTH <= n; i += WIDTH) {                                                                       \
            NAME##_lanes v = NAME##_load(p + i);                                                                   \
            memcpy(out + i, &v, sizeof v);                                                                         \
        }                                                                                                          \
        return i;                                                                                                  \
    }                                                                                                              \
    TARGET static size_t NAME##_write(param_t *p, size_t n, const float *in) {                                     \
        size_t i = 0;                                                                                              \
        for (; i + WIDTH <= n; i += WIDTH) NAME##_store(p + i, NAME##_plain(in + i));                              \
        return i;                                                                                                  \
    }                                                                                                              \
    TARGET static size_t NAME##_sgd(param_t *p, size_t n, const float *g, float lr, float *copy) {                 \
        size_t i = 0;                                                                                              \
        if (!copy) {                                                                                               \
            for (; i + WIDTH <= n; i += WIDTH) NAME##_store(p + i, NAME##_load(p + i) - lr * NAME##_plain(g + i)); \
            return i;                                                                                              \
        }                                                                                                          \
        for (; i + WIDTH <= n; i += WIDTH) {                                                                       \
            NAME##_ahead(p, copy, i, n);                                                                           \
            NAME##_lanes v = NAME##_load(p + i) - lr * NAME##_plain(g + i);                                        \
            NAME##_store(p + i, v);                                                                                \
            memcpy(copy + i, &v, sizeof v);                                                                        \
        }                                                                                                          \
        return i;                                                                                                  \
    }                                                                                                              \
    TARGET static size_t NAME##_sgd_weighted(param_t *p, size_t n, const float *g, float weight, float lr,         \
                                             float *copy) {                                                        \
        size_t i = 0;                                                                                              \
        for (; i + WIDTH <= n; i += WIDTH) {                                                                       \
            NAME##_ahead(p, copy, i, n);                                                                           \
            NAME##_lanes v = NAME##_load(p + i) - lr * (0.0f + weight * NAME##_plain(g + i));                      \
            NAME##_store(p + i, v);                                                                                \
            memcpy(copy + i, &v, sizeof v);                                                                        \
        }                                                                                                          \
        return i;                                                                                                  \
    }

// SSE2 is part of x86-64; AVX's 8 lanes and AVX-512's 16 are chosen at run
// time where the CPU has them. (AVX-512 was once measured no faster on these
// streams, which wait on the caches; with the prefetches above, the MLP's
// two-thread Hogwild! step ran 4-14% faster with it in three alternated sets
// on an AVX-512 Xeon, where each store then writes a whole cache line that
// the other thread also writes; one thread: within the spread; see
// docs/benchmarks.md. The argument in params.h holds for any width.)
#define BASELINE
LANE_OPERATIONS(sse, 4, BASELINE, "movups")
LANE_OPERATIONS(avx, 8, __attribute__((target("avx"))), "vmovups")
LANE_OPERATIONS(avx512, 16, __attribute__((target("avx512f"))), "vmovups")

static int have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int have_avx(void) { return __builtin_cpu_supports("avx"); }
#endif

// The parameters [p, p + n) the asm of a bulk operation reads or writes.
static void params_extent_check(const param_t *p, size_t n) { asan_extent_check(p, n * sizeof *p); }

void params_read(const param_t *p, size_t n, float *out) {
    size_t done = 0;
    params_extent_check(p, n);
#ifdef PARAMS_LANES
    done = have_avx512() ? avx512_read(p, n, out) : have_avx() ? avx_read(p, n, out) : sse_read(p, n, out);
#endif
    read_floats(p + done, n - done, out + done);
}

void params_write(param_t *p, size_t n, const float *in) {
    size_t done = 0;
    params_extent_check(p, n);
#ifdef PARAMS_LANES
    done = have_avx512() ? avx512_write(p, n, in) : have_avx() ? avx_write(p, n, in) : sse_write(p, n, in);
#endif
    write_floats(p + done, n - done, in + done);
}

void params_sgd(param_t *p, size_t n, const float *g, float lr, float *copy) {
    size_t done = 0;
    params_extent_check(p, n);
#ifdef PARAMS_LANES
    done = have_avx512() ? avx512_sgd(p, n, g, lr, copy)
           : have_avx()  ? avx_sgd(p, n, g, lr, copy)
                         : sse_sgd(p, n, g, lr, copy);
#endif
    sgd_floats(p + done, n - done, g + done, lr, copy ? copy + done : NULL);
}

void params_sgd_weighted(param_t *p, size_t n, const float *g, float weight, float lr, float *copy) {
    size_t done = 0;
    params_extent_check(p, n);
#ifdef PARAMS_LANES
    done = have_avx512() ? avx512_sgd_weighted(p, n, g, weight, lr, copy)
           : have_avx()  ? avx_sgd_weighted(p, n, g, weight, lr, copy)
                         : sse_sgd_weighted(p, n, g, weight, lr, copy);
#endif
    sgd_weighted_floats(p + done, n - done, g + done, weight, lr, copy + done);
}
