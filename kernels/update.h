#ifndef ASGD_KERNELS_UPDATE_H
#define ASGD_KERNELS_UPDATE_H
// Optimizer steps on plain float arrays (a parameter server's shard), with the
// same arithmetic as the engine's shared-parameter optimizer, so a step applied
// here and one applied in a single process give the same bits.
#include <stddef.h>
#include <stdint.h>

// w[i] -= lr * g[i]
void sgd_update_cpu(size_t n, float lr, const float *g, float *w);
// h[i] += g[i]^2;  w[i] -= lr * g[i] / (sqrt(h[i]) + eps)
void adagrad_update_cpu(size_t n, float lr, float eps, const float *g, float *h, float *w);
// The same two rules at scattered indices: parameter idx[k] gets value g[k].
void sgd_update_sparse_cpu(size_t nnz, float lr, const uint32_t *idx, const float *g, float *w);
void adagrad_update_sparse_cpu(size_t nnz, float lr, float eps, const uint32_t *idx, const float *g, float *h,
                               float *w);
// sum[i] += weight * g[i]
void axpy_cpu(size_t n, float weight, const float *g, float *sum);

#endif
