#ifndef ASGD_KERNELS_UPDATE_H
#define ASGD_KERNELS_UPDATE_H
// Optimizer steps and reductions on plain float arrays (a parameter server's
// shard, a GPU replica's model), with the same arithmetic as the engine's
// shared-parameter optimizer, so a step applied here and one applied in a
// single process give the same bits. The *_cuda twins take device pointers
// (see kernels/gpu.h) and exist only in builds with CUDA.
#include <stddef.h>
#include <stdint.h>

// w[i] -= lr * g[i]
void sgd_update_cpu(size_t n, float lr, const float *g, float *w);
// w[i] = w[i] - lr * (0.0f + weight * g[i]): a step by one share of a sum
// (the engine's params_sgd_weighted on plain floats, the same bits).
void sgd_weighted_update_cpu(size_t n, float lr, float weight, const float *g, float *w);
// w[i] = w[i] - lr * ((0.0f + w0 * g0[i]) + w1 * g1[i]): a step by the sum of
// two weighted gradients in one pass, the bits of zeroing a sum, axpy_cpu of
// each, then sgd_update_cpu (a BSP round of two workers).
void sgd_sum2_update_cpu(size_t n, float lr, float w0, const float *g0, float w1, const float *g1, float *w);
// out[i] = w[i] - lr * (g[i] / divisor): a step by the average of a sum over
// `divisor` examples, the bits of forming the average first (out may be w or g).
void sgd_divided_update_cpu(size_t n, float lr, float divisor, const float *g, const float *w, float *out);
// h[i] += g[i]^2;  w[i] -= lr * g[i] / (sqrt(h[i]) + eps)
void adagrad_update_cpu(size_t n, float lr, float eps, const float *g, float *h, float *w);
// The same two rules at scattered indices: parameter idx[k] gets value g[k].
void sgd_update_sparse_cpu(size_t nnz, float lr, const uint32_t *idx, const float *g, float *w);
void adagrad_update_sparse_cpu(size_t nnz, float lr, float eps, const uint32_t *idx, const float *g, float *h,
                               float *w);
// sum[i] += weight * g[i]
void axpy_cpu(size_t n, float weight, const float *g, float *sum);

// Heavy-ball momentum as the engine applies it: v = momentum * v + g; w -= lr * v
void momentum_update_cpu(size_t n, float lr, float momentum, const float *g, float *v, float *w);
// acc[0] += weight * sum_i x[i] * y[i], summed in double (a loss term).
void dot_accumulate_cpu(size_t n, float weight, const float *x, const float *y, double *acc);
// acc[0] += sum_i x[i], in double.
void sum_accumulate_cpu(size_t n, const float *x, double *acc);

// ---- CUDA twins ---------------------------------------------------------------
void sgd_update_cuda(size_t n, float lr, const float *g, float *w);
void adagrad_update_cuda(size_t n, float lr, float eps, const float *g, float *h, float *w);
void momentum_update_cuda(size_t n, float lr, float momentum, const float *g, float *v, float *w);
void axpy_cuda(size_t n, float weight, const float *g, float *sum);
void dot_accumulate_cuda(size_t n, float weight, const float *x, const float *y, double *acc);
void sum_accumulate_cuda(size_t n, const float *x, double *acc);

#endif
