#ifndef ASGD_ENGINE_CORE_PARAMS_H
#define ASGD_ENGINE_CORE_PARAMS_H
// Shared model parameters.
//
// Hogwild! threads read and write the same parameters without locks. Those races
// are the algorithm, so every shared parameter is an _Atomic float accessed with
// memory_order_relaxed: the program stays race-free in the C11 sense (and quiet
// under TSan) while on x86-64 each access compiles to a plain mov. A read-modify-
// write (load, subtract, store) is deliberately not one atomic operation: two
// threads updating the same coordinate at once can lose one update, exactly as
// in the Hogwild! paper's implementation; fetch-add would need a CAS loop per float.
#include <stdatomic.h>
#include <stddef.h>

typedef _Atomic float param_t;

static inline float param_get(const param_t *p) {
    return atomic_load_explicit((param_t *)p, memory_order_relaxed);
}

static inline void param_set(param_t *p, float v) { atomic_store_explicit(p, v, memory_order_relaxed); }

// A 64-byte-aligned array of n parameters, all 0. Caller frees with params_free.
param_t *params_new(size_t n, char *err, size_t err_len);
void params_free(param_t **p);

// A plain-float copy (relaxed loads, one per element).
void params_read(const param_t *p, size_t n, float *out);

#endif
