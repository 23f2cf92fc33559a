// CUDA twins of kernels/sparse_sgd.c. One warp per example: its lanes split
// the example's non-zeros (or the factor rank), a warp sum gives the score,
// and each lane writes the updates of its coordinates. Shared weights are
// read through L2 (__ldcg), so a warp sees other warps' recent writes rather
// than a copy cached in its SM's L1.
#include "kernels/cuda_check.h"
#include "kernels/linear_loss.h"  // defines: linear_loss_of

extern "C" {
#include "kernels/sparse_sgd.h"
}

#define WARP 32
#define FULL 0xffffffffu

__device__ static double warp_sum(double v) {
    for (int off = WARP / 2; off > 0; off /= 2) v += __shfl_xor_sync(FULL, v, off);
    return v;
}

__device__ static float warp_sum_f(float v) {
    for (int off = WARP / 2; off > 0; off /= 2) v += __shfl_xor_sync(FULL, v, off);
    return v;
}

// Adds `v` (each warp's lane 0 holds its warps' total) to *acc once per block.
__device__ static void add_block_total(double v, double *acc) {
    __shared__ double partial[GPU_BLOCK / WARP];
    if (threadIdx.x % WARP == 0) partial[threadIdx.x / WARP] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int k = 0; k < GPU_BLOCK / WARP; k++) total += partial[k];
        atomicAdd(acc, total);
    }
}

__device__ static void scatter(float *p, float old_value, float delta, int atomic) {
    if (atomic) atomicAdd(p, delta);
    else *p = old_value + delta;
}

// The score w . x + bias of one row, summed by the whole warp (every lane gets it).
// Lanes add their products in float, as the CPU's float dot does, then the warp
// adds the 32 partial sums: the order differs from the CPU's, the precision not.
__device__ static float row_score(size_t begin, size_t end, const uint32_t *__restrict__ col,
                                  const float *__restrict__ val, const float *w, size_t dim, int lane) {
    float dot = 0.0f;
    for (size_t k = begin + lane; k < end; k += WARP) dot += __ldcg(&w[col[k]]) * val[k];
    return warp_sum_f(dot) + __ldcg(&w[dim]);
}

__global__ void linear_sgd_hogwild_kernel(size_t count, const uint32_t *__restrict__ order,
                                          const size_t *__restrict__ row_ptr, const uint32_t *__restrict__ col,
                                          const float *__restrict__ val, const float *__restrict__ y, size_t dim,
                                          int hinge, float lr, float l2, int atomic, float *w, double *loss_acc) {
    int lane = threadIdx.x % WARP;
    size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP;
    size_t warps = (size_t)gridDim.x * blockDim.x / WARP;
    double my_loss = 0.0;
    for (size_t e = warp; e < count; e += warps) {
        size_t row = order[e], begin = row_ptr[row], end = row_ptr[row + 1];
        double dscore;
        double loss = linear_loss_of(hinge, y[row], row_score(begin, end, col, val, w, dim, lane), &dscore);
        float coef = (float)dscore;
        double reg = 0.0;
        if (coef != 0.0f || l2 != 0.0f) {
            for (size_t k = begin + lane; k < end; k += WARP) {
                float *wj = &w[col[k]];
                float value = __ldcg(wj);
                float g = coef * val[k];
                if (l2 > 0.0f) {
                    g += l2 * value;
                    reg += (double)value * value;
                }
                scatter(wj, value, -lr * g, atomic);
            }
            if (lane == 0 && coef != 0.0f) scatter(&w[dim], __ldcg(&w[dim]), -lr * coef, atomic);
        }
        my_loss += loss + 0.5 * l2 * warp_sum(reg);
    }
    add_block_total(my_loss, loss_acc);
}

// One warp per example in flight (8 per block); each loops over examples.
static unsigned example_grid(size_t count) {
    size_t blocks = (count + GPU_BLOCK / WARP - 1) / (GPU_BLOCK / WARP);
    if (blocks == 0) blocks = 1;
    return (unsigned)(blocks < 8192 ? blocks : 8192);
}

extern "C" void linear_sgd_hogwild_cuda(size_t count, const uint32_t *order, const size_t *row_ptr,
                                        const uint32_t *col, const float *val, const float *y, size_t dim, int hinge,
                                        float lr, float l2, int scatter_atomic, size_t in_flight, float *w, double *loss_acc) {
    linear_sgd_hogwild_kernel<<<example_grid(in_flight && in_flight < count ? in_flight : count), GPU_BLOCK, 0, gpu_current_stream()>>>(
        count, order, row_ptr, col, val, y, dim, hinge, lr, l2, scatter_atomic, w, loss_acc);
    CUDA_CHECK_LAUNCH("linear_sgd_hogwild_kernel");
}

__global__ void linear_grad_csr_kernel(size_t count, const uint32_t *__restrict__ order,
                                       const size_t *__restrict__ row_ptr, const uint32_t *__restrict__ col,
                                       const float *__restrict__ val, const float *__restrict__ y, size_t dim,
                                       int hinge, float scale, const float *w, float *grad, uint8_t *touched,
                                       double *loss_acc) {
    int lane = threadIdx.x % WARP;
    size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP;
    size_t warps = (size_t)gridDim.x * blockDim.x / WARP;
    double my_loss = 0.0;
    for (size_t e = warp; e < count; e += warps) {
        size_t row = order[e], begin = row_ptr[row], end = row_ptr[row + 1];
        double dscore;
        my_loss += linear_loss_of(hinge, y[row], row_score(begin, end, col, val, w, dim, lane), &dscore);
        float coef = (float)(dscore * scale);
        for (size_t k = begin + lane; k < end; k += WARP) {
            atomicAdd(&grad[col[k]], coef * val[k]);
            touched[col[k]] = 1;
        }
        if (lane == 0) atomicAdd(&grad[dim], coef);
    }
    add_block_total(my_loss, loss_acc);
}

extern "C" void linear_grad_csr_cuda(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                                     const float *val, const float *y, size_t dim, int hinge, float scale,
                                     const float *w, float *grad, uint8_t *touched, double *loss_acc) {
    linear_grad_csr_kernel<<<example_grid(count), GPU_BLOCK, 0, gpu_current_stream()>>>(
        count, order, row_ptr, col, val, y, dim, hinge, scale, w, grad, touched, loss_acc);
    CUDA_CHECK_LAUNCH("linear_grad_csr_kernel");
}

__global__ void linear_apply_csr_kernel(size_t dim, float lr, float l2, float loss_weight, float *grad,
                                        uint8_t *touched, float *w, double *loss_acc) {
    double reg = 0.0;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j <= dim; j += (size_t)gridDim.x * blockDim.x) {
        if (j == dim) {  // the bias: no L2, always applied
            w[j] = w[j] - lr * grad[j];
            grad[j] = 0.0f;
            continue;
        }
        if (!touched[j]) continue;
        float g = grad[j];
        if (l2 > 0.0f) {
            g += l2 * w[j];
            reg += (double)w[j] * w[j];
        }
        w[j] = w[j] - lr * g;
        grad[j] = 0.0f;
        touched[j] = 0;
    }
    add_block_total(warp_sum(reg) * (loss_weight * 0.5 * l2), loss_acc);
}

extern "C" void linear_apply_csr_cuda(size_t dim, float lr, float l2, float loss_weight, float *grad,
                                      uint8_t *touched, float *w, double *loss_acc) {
    unsigned blocks = gpu_grid(dim + 1);
    linear_apply_csr_kernel<<<blocks < 1024 ? blocks : 1024, GPU_BLOCK, 0, gpu_current_stream()>>>(
        dim, lr, l2, loss_weight, grad, touched, w, loss_acc);
    CUDA_CHECK_LAUNCH("linear_apply_csr_kernel");
}

__global__ void mf_sgd_hogwild_kernel(size_t count, const uint32_t *__restrict__ order, const uint32_t *__restrict__ user,
                                      const uint32_t *__restrict__ item, const float *__restrict__ rating, float mean,
                                      size_t n_users, size_t rank, float lr, float l2, int atomic, float *w,
                                      double *loss_acc) {
    int lane = threadIdx.x % WARP;
    size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP;
    size_t warps = (size_t)gridDim.x * blockDim.x / WARP;
    double my_loss = 0.0;
    for (size_t e = warp; e < count; e += warps) {
        uint32_t r = order[e];
        float *u = w + (size_t)user[r] * rank, *v = w + (n_users + (size_t)item[r]) * rank;
        double dot = 0.0;
        for (size_t k = lane; k < rank; k += WARP) dot += (double)__ldcg(&u[k]) * __ldcg(&v[k]);
        double err = warp_sum(dot) + mean - rating[r], reg = 0.0;
        for (size_t k = lane; k < rank; k += WARP) {
            float uk = __ldcg(&u[k]), vk = __ldcg(&v[k]);
            reg += (double)uk * uk + (double)vk * vk;
            scatter(&u[k], uk, -lr * (float)(err * vk + l2 * uk), atomic);
            scatter(&v[k], vk, -lr * (float)(err * uk + l2 * vk), atomic);
        }
        my_loss += 0.5 * err * err + 0.5 * l2 * warp_sum(reg);
    }
    add_block_total(my_loss, loss_acc);
}

extern "C" void mf_sgd_hogwild_cuda(size_t count, const uint32_t *order, const uint32_t *user, const uint32_t *item,
                                    const float *rating, float mean, size_t n_users, size_t rank, float lr, float l2,
                                    int scatter_atomic, size_t in_flight, float *w, double *loss_acc) {
    mf_sgd_hogwild_kernel<<<example_grid(in_flight && in_flight < count ? in_flight : count), GPU_BLOCK, 0, gpu_current_stream()>>>(
        count, order, user, item, rating, mean, n_users, rank, lr, l2, scatter_atomic, w, loss_acc);
    CUDA_CHECK_LAUNCH("mf_sgd_hogwild_kernel");
}
