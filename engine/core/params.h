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
//
// Whole ranges go through the bulk operations below, a vector of floats per
// instruction on x86-64, which compilers never make of atomic accesses. They
// stay defined behaviour because the compiler does not make those accesses
// either: each vector load or store of shared parameters is an asm statement
// whose memory operand names the exact floats it reads or writes, so the C
// program performs no conflicting non-atomic access (C11 5.1.2.4) and the
// compiler can neither cache nor invent one; every other access stays a
// relaxed atomic. A racing reader then sees what the processor guarantees:
// x86-64 splits a vector access only at boundaries of 8 bytes or more, never
// inside a naturally aligned float, so each float is read or written whole,
// the value of some store, as with the relaxed atomics, and a read-modify-write
// racing with another can lose one update, as above. Sanitizers cannot see
// into asm. TSan builds compile the same operations as the per-float
// relaxed-atomic loops (the reference tests/engine/core/test_params.c holds the vector
// code to, bit for bit): TSan still checks every parameter access as the
// atomic it stands for, and a plain access racing with them is still reported.
// ASan builds keep the vector code and check, once per call, that the whole
// range of parameters it reads or writes is addressable.
// The update loops also prefetch the parameters ahead of those accesses; a
// prefetch is a hint that reads and writes no object, so it adds no access.
#include <stdatomic.h>
#include <stddef.h>

typedef _Atomic float param_t;

static inline float param_get(const param_t *p) { return atomic_load_explicit((param_t *)p, memory_order_relaxed); }

static inline void param_set(param_t *p, float v) { atomic_store_explicit(p, v, memory_order_relaxed); }

// A 64-byte-aligned array of n parameters, all 0. Caller frees with params_free.
param_t *params_new(size_t n, char *err, size_t err_len);
void params_free(param_t **p);

// out[i] = p[i] for i < n: a plain-float copy.
void params_read(const param_t *p, size_t n, float *out);

// p[i] = in[i] for i < n.
void params_write(param_t *p, size_t n, const float *in);

// Plain SGD on a range of shared parameters: p[i] = p[i] - lr * g[i] (one
// product, one difference: the arithmetic of optimizer.c's update rule), and
// copy[i] = the value written, unless copy is NULL.
void params_sgd(param_t *p, size_t n, const float *g, float lr, float *copy);

// The same step for a sync round with one thread, from its gradient's
// weighted share of the round: p[i] = p[i] - lr * (0.0f + weight * g[i]), the
// sum sync mode's reduce forms, so the same bits as forming it first; and
// copy[i] = the value written (copy not NULL).
void params_sgd_weighted(param_t *p, size_t n, const float *g, float weight, float lr, float *copy);

#endif
