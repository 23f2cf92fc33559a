#ifndef ASGD_KERNELS_SPARSE_SGD_H
#define ASGD_KERNELS_SPARSE_SGD_H
// Kernels for the sparse models, the Hogwild! paper's cases: linear
// classifiers on CSR rows (logistic regression, hinge-loss SVM) and matrix
// factorisation. Each *_cpu function has a *_cuda twin with the same
// signature taking device pointers (see kernels/gpu.h; builds with CUDA only).
//
// The *_hogwild kernels take one plain-SGD step per example. The CPU twin
// takes them in order; the CUDA twin takes them all at once, one warp per
// example, every warp reading the shared weights as it finds them and
// writing its update without locks — Hogwild! on the GPU. scatter_atomic
// chooses how an update is written: 0, a plain load and store (a concurrent
// update of the same coordinate may be lost, as on the CPU); 1, atomicAdd
// (none is lost). in_flight caps the examples under way at once (warps; 0:
// all of them), the degree of asynchrony: each example's update may miss up
// to in_flight - 1 others. The CPU twin has one in flight whatever it is told.
// Per example the arithmetic is the engine's
// (model_sgd_step_one), so on examples that share no coordinate the twins
// agree to rounding.
//
// Objectives are added in double to *loss_acc (a device pointer for the twins).
#include <stddef.h>
#include <stdint.h>

// Loss of one example with label y (-1/+1) and score s, and d loss / d s into
// *dscore. Logistic: log(1 + exp(-y s)) and its derivative from one
// exponential, without overflow for either sign of the margin; hinge:
// max(0, 1 - y s).
double linear_example_loss(int hinge, double y, double score, double *dscore);

// Linear model over features [0, dim) plus a bias w[dim]; rows in CSR form,
// labels y = -1/+1. hinge: 0 logistic loss, 1 hinge. Lazy L2 on the features
// an example touches (never the bias).
void linear_sgd_hogwild_cpu(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                            const float *val, const float *y, size_t dim, int hinge, float lr, float l2,
                            int scatter_atomic, size_t in_flight, float *w, double *loss_acc);

// A minibatch's data gradient: for rows order[0..count), grad (dim + 1) +=
// scale * d loss / d w, touched[j] = 1 for every feature the rows contain,
// and *loss_acc += sum of the rows' losses. The GPU adds with atomics.
void linear_grad_csr_cpu(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                         const float *val, const float *y, size_t dim, int hinge, float scale, const float *w,
                         float *grad, uint8_t *touched, double *loss_acc);

// The minibatch's SGD step with lazy L2: for every touched feature j,
// g_j += l2 * w_j and *loss_acc += loss_weight * l2/2 * w_j^2; then
// w -= lr * g over the touched features and the bias, and grad and touched
// are cleared for the next minibatch.
void linear_apply_csr_cpu(size_t dim, float lr, float l2, float loss_weight, float *grad, uint8_t *touched, float *w,
                          double *loss_acc);

// Matrix factorisation: w holds U (n_users, rank) then V (items, rank); a rating
// r(u, i) is predicted as mean + U[u] . V[i]. One plain-SGD step per rating in
// order[0..count), loss 1/2 err^2 + l2/2 (|U[u]|^2 + |V[i]|^2).
void mf_sgd_hogwild_cpu(size_t count, const uint32_t *order, const uint32_t *user, const uint32_t *item,
                        const float *rating, float mean, size_t n_users, size_t rank, float lr, float l2,
                        int scatter_atomic, size_t in_flight, float *w, double *loss_acc);

// ---- CUDA twins ---------------------------------------------------------------
void linear_sgd_hogwild_cuda(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                             const float *val, const float *y, size_t dim, int hinge, float lr, float l2,
                             int scatter_atomic, size_t in_flight, float *w, double *loss_acc);
void linear_grad_csr_cuda(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                          const float *val, const float *y, size_t dim, int hinge, float scale, const float *w,
                          float *grad, uint8_t *touched, double *loss_acc);
void linear_apply_csr_cuda(size_t dim, float lr, float l2, float loss_weight, float *grad, uint8_t *touched, float *w,
                           double *loss_acc);
void mf_sgd_hogwild_cuda(size_t count, const uint32_t *order, const uint32_t *user, const uint32_t *item,
                         const float *rating, float mean, size_t n_users, size_t rank, float lr, float l2,
                         int scatter_atomic, size_t in_flight, float *w, double *loss_acc);

#endif
