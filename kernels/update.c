#include "kernels/update.h"

#include <math.h>

void sgd_update_cpu(size_t n, float lr, const float *g, float *w) {
    for (size_t i = 0; i < n; i++) w[i] = w[i] - lr * g[i];
}

void sgd_weighted_update_cpu(size_t n, float lr, float weight, const float *g, float *w) {
    for (size_t i = 0; i < n; i++) w[i] = w[i] - lr * (0.0f + weight * g[i]);
}

void sgd_sum2_update_cpu(size_t n, float lr, float w0, const float *g0, float w1, const float *g1, float *w) {
    for (size_t i = 0; i < n; i++) w[i] = w[i] - lr * ((0.0f + w0 * g0[i]) + w1 * g1[i]);
}

void sgd_divided_update_cpu(size_t n, float lr, float divisor, const float *g, const float *w, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = w[i] - lr * (g[i] / divisor);
}

void adagrad_update_cpu(size_t n, float lr, float eps, const float *g, float *h, float *w) {
    for (size_t i = 0; i < n; i++) {
        h[i] = h[i] + g[i] * g[i];
        w[i] = w[i] - lr * g[i] / (sqrtf(h[i]) + eps);
    }
}

void sgd_update_sparse_cpu(size_t nnz, float lr, const uint32_t *idx, const float *g, float *w) {
    for (size_t k = 0; k < nnz; k++) w[idx[k]] = w[idx[k]] - lr * g[k];
}

void adagrad_update_sparse_cpu(size_t nnz, float lr, float eps, const uint32_t *idx, const float *g, float *h,
                               float *w) {
    for (size_t k = 0; k < nnz; k++) {
        uint32_t i = idx[k];
        h[i] = h[i] + g[k] * g[k];
        w[i] = w[i] - lr * g[k] / (sqrtf(h[i]) + eps);
    }
}

void axpy_cpu(size_t n, float weight, const float *g, float *sum) {
    for (size_t i = 0; i < n; i++) sum[i] += weight * g[i];
}

void momentum_update_cpu(size_t n, float lr, float momentum, const float *g, float *v, float *w) {
    for (size_t i = 0; i < n; i++) {
        v[i] = momentum * v[i] + g[i];
        w[i] = w[i] - lr * v[i];
    }
}

void dot_accumulate_cpu(size_t n, float weight, const float *x, const float *y, double *acc) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)x[i] * y[i];
    acc[0] += weight * sum;
}

void sum_accumulate_cpu(size_t n, const float *x, double *acc) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += x[i];
    acc[0] += sum;
}
