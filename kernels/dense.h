#ifndef ASGD_KERNELS_DENSE_H
#define ASGD_KERNELS_DENSE_H
// Dense-layer kernels for minibatch forward/backward (MLP, softmax regression).
// CPU versions here; CUDA twins take the same arguments (device pointers).
// Shapes are row-major: a minibatch is (batch, features); a weight matrix is (out, in).
#include <stdint.h>

// z = x w^T + bias          x (batch, in), w (out, in), bias (out), z (batch, out)
void dense_forward_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z);

// In place: z = max(z, 0).
void relu_forward_cpu(int n, float *z);

// dz *= (activation > 0), where activation is the ReLU output of the same layer.
void relu_backward_cpu(int n, const float *activation, float *dz);

// Softmax cross-entropy over rows of logits (batch, classes). Returns the summed loss.
// If dlogits is not NULL it receives scale * (softmax - onehot(label)).
// If correct is not NULL it receives the number of rows whose argmax equals the label.
double softmax_xent_cpu(int batch, int classes, const float *logits, const int32_t *labels, float scale,
                        float *dlogits, int *correct);

// dw += dz^T x      dz (batch, out) with row stride ldz >= out, x (batch, in), dw (out, in)
// Accumulates: with beta = 1 OpenBLAS skips its separate pass that scales (here:
// zeroes) all of dw, a full sweep over the largest matrix at every step. A
// stride lets a caller compute a block of rows (dz + first_row, ldz = layer width).
void dense_weight_grad_cpu(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);

// dbias += column sums of dz    dz (batch, out)
void dense_bias_grad_cpu(int batch, int out, const float *dz, float *dbias);

// dx = dz w (overwrites)     dz (batch, out), w (out, in), dx (batch, in)
void dense_backward_input_cpu(int batch, int in, int out, const float *dz, const float *w, float *dx);

#endif
