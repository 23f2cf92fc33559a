// CUDA twins of kernels/update.c: the same per-element arithmetic, one thread
// per element (grid-stride), and reductions summed in double.
#include "kernels/cuda_check.h"

extern "C" {
#include "kernels/update.h"
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void sgd_kernel(size_t n, float lr, const float *__restrict__ g, float *__restrict__ w) {
    GRID_STRIDE(i, n) w[i] = w[i] - lr * g[i];
}

__global__ void adagrad_kernel(size_t n, float lr, float eps, const float *__restrict__ g, float *__restrict__ h,
                               float *__restrict__ w) {
    GRID_STRIDE(i, n) {
        float hi = h[i] + g[i] * g[i];
        h[i] = hi;
        w[i] = w[i] - lr * g[i] / (sqrtf(hi) + eps);
    }
}

__global__ void momentum_kernel(size_t n, float lr, float momentum, const float *__restrict__ g, float *__restrict__ v,
                                float *__restrict__ w) {
    GRID_STRIDE(i, n) {
        float vi = momentum * v[i] + g[i];
        v[i] = vi;
        w[i] = w[i] - lr * vi;
    }
}

__global__ void axpy_kernel(size_t n, float weight, const float *__restrict__ g, float *__restrict__ sum) {
    GRID_STRIDE(i, n) sum[i] += weight * g[i];
}

extern "C" void sgd_update_cuda(size_t n, float lr, const float *g, float *w) {
    sgd_kernel<<<gpu_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, lr, g, w);
    CUDA_CHECK_LAUNCH("sgd_kernel");
}

extern "C" void adagrad_update_cuda(size_t n, float lr, float eps, const float *g, float *h, float *w) {
    adagrad_kernel<<<gpu_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, lr, eps, g, h, w);
    CUDA_CHECK_LAUNCH("adagrad_kernel");
}

extern "C" void momentum_update_cuda(size_t n, float lr, float momentum, const float *g, float *v, float *w) {
    momentum_kernel<<<gpu_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, lr, momentum, g, v, w);
    CUDA_CHECK_LAUNCH("momentum_kernel");
}

extern "C" void axpy_cuda(size_t n, float weight, const float *g, float *sum) {
    axpy_kernel<<<gpu_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, weight, g, sum);
    CUDA_CHECK_LAUNCH("axpy_kernel");
}

// ---- reductions: per-thread double sums, a block sum, one atomic per block ------

#define REDUCE_BLOCKS 264  // 2 per SM of an H100; enough to stream memory at full rate

__device__ static void add_block_sum(double sum, double *acc) {
    __shared__ double partial[GPU_BLOCK / 32];
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int k = 0; k < GPU_BLOCK / 32; k++) total += partial[k];
        atomicAdd(acc, total);
    }
}

__global__ void dot_kernel(size_t n, float weight, const float *__restrict__ x, const float *__restrict__ y,
                           double *acc) {
    double sum = 0.0;
    GRID_STRIDE(i, n) sum += (double)x[i] * y[i];
    add_block_sum(weight * sum, acc);
}

__global__ void sum_kernel(size_t n, const float *__restrict__ x, double *acc) {
    double sum = 0.0;
    GRID_STRIDE(i, n) sum += x[i];
    add_block_sum(sum, acc);
}

static unsigned reduce_grid(size_t n) {
    unsigned g = gpu_grid(n);
    return g < REDUCE_BLOCKS ? g : REDUCE_BLOCKS;
}

extern "C" void dot_accumulate_cuda(size_t n, float weight, const float *x, const float *y, double *acc) {
    dot_kernel<<<reduce_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, weight, x, y, acc);
    CUDA_CHECK_LAUNCH("dot_kernel");
}

extern "C" void sum_accumulate_cuda(size_t n, const float *x, double *acc) {
    sum_kernel<<<reduce_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, x, acc);
    CUDA_CHECK_LAUNCH("sum_kernel");
}
