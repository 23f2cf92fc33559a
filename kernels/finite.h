#ifndef ASGD_KERNELS_FINITE_H
#define ASGD_KERNELS_FINITE_H
// Whether a float array holds only finite values (no NaN, no +-Inf): the test
// a parameter server makes on every pushed update, one pass over bits that
// vectorises (an exponent of all ones is what NaN and Inf share).
#include <stddef.h>

// 1 if every v[i] is finite, else 0.
int all_finite_cpu(const float *v, size_t n);

// dst[i] = 0.0f + weight * src[i] (a sum of one weighted term, the bits a
// reduction over one gradient gives), and 1 if every value stored is finite,
// else 0: the test made on the values in registers as they are stored, where
// all_finite_cpu after the store reads them again (and, into memory another
// process read last, waits there for the stores' lines).
int weighted_store_finite_cpu(float *restrict dst, const float *restrict src, float weight, size_t n);

#endif
