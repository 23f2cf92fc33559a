#ifndef ASGD_KERNELS_DENSE_SMALL_H
#define ASGD_KERNELS_DENSE_SMALL_H
// A small minibatch's dense products without OpenBLAS (dense_small.c says
// why, and the arithmetic each output gets), for kernels/dense.c.

// The largest batch they take: up to here an operand's block stays in L1 and
// OpenBLAS's packing costs more than it saves.
#define DENSE_SMALL_BATCH 32

// Each returns 1 when it did the product, 0 when it does not apply (a
// larger batch, or a CPU without AVX2 and FMA) and its output is untouched.

// dw = dz^T x (overwrites), shapes as dense_weight_grad_set_cpu's.
int dense_wgrad_small(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);

// z = x w^T + bias (overwrites), shapes as dense_forward_cpu's.
int dense_forward_small(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z);

#endif
