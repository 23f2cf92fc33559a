#ifndef ASGD_KERNELS_FINITE_H
#define ASGD_KERNELS_FINITE_H
// Whether a float array holds only finite values (no NaN, no +-Inf): the test
// a parameter server makes on every pushed update, one pass over bits that
// vectorises (an exponent of all ones is what NaN and Inf share).
#include <stddef.h>

// 1 if every v[i] is finite, else 0.
int all_finite_cpu(const float *v, size_t n);

#endif
