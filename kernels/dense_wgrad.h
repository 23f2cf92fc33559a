#ifndef ASGD_KERNELS_DENSE_WGRAD_H
#define ASGD_KERNELS_DENSE_WGRAD_H
// The weight gradient of a small minibatch without OpenBLAS (dense_wgrad.c
// says why), for dense_weight_grad_set_cpu.

// The largest batch it takes: up to here x's column chunk stays in L1 and
// OpenBLAS's packing costs more than it saves.
#define DENSE_WGRAD_SMALL_BATCH 32

// dw = dz^T x (overwrites), shapes as dense_weight_grad_set_cpu's. Returns 1
// when it did, 0 when it does not apply (a larger batch, or a CPU without
// AVX2 and FMA) and dw is untouched.
int dense_wgrad_small(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);

#endif
