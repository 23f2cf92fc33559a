#ifndef ASGD_KERNELS_DENSE_H
#define ASGD_KERNELS_DENSE_H
// Dense-layer kernels for minibatch forward/backward (MLP, softmax regression).
// Every *_cpu function has a *_cuda twin with the same signature that takes
// device pointers (scalar results stay on the host) and launches on the
// calling thread's stream; see kernels/gpu.h for how its errors are reported.
// The twins exist only in builds with CUDA.
// Shapes are row-major: a minibatch is (batch, features); a weight matrix is (out, in).
#include <stdint.h>

// z = x w^T + bias          x (batch, in), w (out, in), bias (out), z (batch, out)
// A batch of up to DENSE_SMALL_BATCH on a CPU with AVX2 and FMA goes through
// asgd's own kernel (dense_small.h: the weights read where they lie, not
// packed at every call); otherwise OpenBLAS.
void dense_forward_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z);

// The same product through OpenBLAS at any batch: what the library alone
// allows, the reference bench_engine --mlp-gemm times the step against.
void dense_forward_blas_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z);

// In place: z = max(z, 0).
void relu_forward_cpu(int n, float *z);

// dz *= (activation > 0), where activation is the ReLU output of the same layer.
void relu_backward_cpu(int n, const float *activation, float *dz);

// Softmax cross-entropy over rows of logits (batch, classes). Returns the summed loss.
// If dlogits is not NULL it receives scale * (softmax - onehot(label)).
// If correct is not NULL it receives the number of rows whose argmax equals the label.
double softmax_xent_cpu(int batch, int classes, const float *logits, const int32_t *labels, float scale, float *dlogits,
                        int *correct);

// dw += dz^T x      dz (batch, out) with row stride ldz >= out, x (batch, in), dw (out, in)
// Accumulates: with beta = 1 OpenBLAS skips its separate pass that scales (here:
// zeroes) all of dw, a full sweep over the largest matrix at every step. A
// stride lets a caller compute a block of rows (dz + first_row, ldz = layer width).
void dense_weight_grad_cpu(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);

// dw = dz^T x (overwrites; dw need not hold anything)    shapes as above
// For a caller that computes a layer's weight gradient in blocks into one
// buffer and hands each block on, without a separate zeroing pass over the
// block (memset was 5% of a Hogwild! MLP step). A batch of up to
// DENSE_SMALL_BATCH on a CPU with AVX2 and FMA goes through asgd's own
// kernel (dense_small.h: no packing of x for every block, each output one
// FMA chain over the batch); otherwise OpenBLAS, with the same bits as
// zeroing dw and then accumulating.
void dense_weight_grad_set_cpu(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);

// dbias += column sums of dz    dz (batch, out)
void dense_bias_grad_cpu(int batch, int out, const float *dz, float *dbias);

// dx = dz w (overwrites)     dz (batch, out), w (out, in), dx (batch, in)
void dense_backward_input_cpu(int batch, int in, int out, const float *dz, const float *w, float *dx);

// z = act(x w^T + bias), act = ReLU when relu != 0, else the identity. The
// CUDA twin runs cuBLAS sgemm, then one fused pass for the bias and the ReLU.
void dense_forward_act_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z,
                           int relu);

// Softmax cross-entropy per row: row_loss[r] the loss of row r, row_correct[r]
// 1 if its argmax is the label else 0, and (if dlogits is not NULL) dlogits =
// scale * (softmax - onehot(label)). On the GPU one warp takes one row.
void softmax_xent_rows_cpu(int batch, int classes, const float *logits, const int32_t *labels, float scale,
                           float *dlogits, float *row_loss, float *row_correct);

// dst row r = src row idx[r] (rows of `dim` floats), and dst_labels[r] = src_labels[idx[r]]:
// a minibatch gathered from a data set held in the same memory.
void gather_rows_cpu(int rows, int dim, const float *src, const int32_t *src_labels, const uint32_t *idx, float *dst,
                     int32_t *dst_labels);

// ---- CUDA twins ---------------------------------------------------------------
void dense_forward_cuda(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z);
void relu_forward_cuda(int n, float *z);
void relu_backward_cuda(int n, const float *activation, float *dz);
void dense_weight_grad_cuda(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);
void dense_weight_grad_set_cuda(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw);
void dense_bias_grad_cuda(int batch, int out, const float *dz, float *dbias);
void dense_backward_input_cuda(int batch, int in, int out, const float *dz, const float *w, float *dx);
void dense_forward_act_cuda(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z,
                            int relu);
void softmax_xent_rows_cuda(int batch, int classes, const float *logits, const int32_t *labels, float scale,
                            float *dlogits, float *row_loss, float *row_correct);
void gather_rows_cuda(int rows, int dim, const float *src, const int32_t *src_labels, const uint32_t *idx, float *dst,
                      int32_t *dst_labels);

#endif
