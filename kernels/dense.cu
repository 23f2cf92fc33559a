// CUDA twins of kernels/dense.c: the matrix products through cuBLAS (FP32),
// the rest as small kernels. Row-major matrices are handed to column-major
// cuBLAS as their transposes: a row-major (r, c) matrix is a column-major
// (c, r) one with the same leading dimension.
#include "kernels/cuda_check.h"

extern "C" {
#include "kernels/dense.h"
}

#define WARP 32

// ---- matrix products --------------------------------------------------------

// z^T (out, batch) = w (out, in) . x^T (in, batch), with beta deciding whether z accumulates.
static void forward_product(int batch, int in, int out, const float *x, const float *w, float beta, float *z) {
    cublasHandle_t h = gpu_current_cublas();
    if (!h) return;
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, w, in, x, in, &beta, z, out));
}

__global__ void bias_act_kernel(int rows, int out, const float *__restrict__ bias, float *__restrict__ z, int relu) {
    size_t n = (size_t)rows * out;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = z[i] + bias[i % out];
        z[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

extern "C" void dense_forward_act_cuda(int batch, int in, int out, const float *x, const float *w, const float *bias,
                                       float *z, int relu) {
    forward_product(batch, in, out, x, w, 0.0f, z);
    size_t n = (size_t)batch * out;
    bias_act_kernel<<<gpu_grid(n), GPU_BLOCK, 0, gpu_current_stream()>>>(batch, out, bias, z, relu);
    CUDA_CHECK_LAUNCH("bias_act_kernel");
}

extern "C" void dense_forward_cuda(int batch, int in, int out, const float *x, const float *w, const float *bias,
                                   float *z) {
    dense_forward_act_cuda(batch, in, out, x, w, bias, z, 0);
}

extern "C" void dense_weight_grad_cuda(int batch, int in, int out, const float *dz, int ldz, const float *x,
                                       float *dw) {
    // dw^T (in, out) += x^T (in, batch) . dz (batch, out)
    cublasHandle_t h = gpu_current_cublas();
    if (!h) return;
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, x, in, dz, ldz, &one, dw, in));
}

extern "C" void dense_weight_grad_set_cuda(int batch, int in, int out, const float *dz, int ldz, const float *x,
                                           float *dw) {
    // dw^T (in, out) = x^T (in, batch) . dz (batch, out)
    cublasHandle_t h = gpu_current_cublas();
    if (!h) return;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, x, in, dz, ldz, &zero, dw, in));
}

extern "C" void dense_backward_input_cuda(int batch, int in, int out, const float *dz, const float *w, float *dx) {
    // dx^T (in, batch) = w^T (in, out) . dz^T (out, batch)
    cublasHandle_t h = gpu_current_cublas();
    if (!h) return;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one, w, in, dz, out, &zero, dx, in));
}

// ---- element-wise -----------------------------------------------------------

__global__ void relu_forward_kernel(int n, float *z) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        z[i] = z[i] > 0.0f ? z[i] : 0.0f;
}

__global__ void relu_backward_kernel(int n, const float *__restrict__ activation, float *__restrict__ dz) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dz[i] = activation[i] > 0.0f ? dz[i] : 0.0f;
}

extern "C" void relu_forward_cuda(int n, float *z) {
    relu_forward_kernel<<<gpu_grid((size_t)n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, z);
    CUDA_CHECK_LAUNCH("relu_forward_kernel");
}

extern "C" void relu_backward_cuda(int n, const float *activation, float *dz) {
    relu_backward_kernel<<<gpu_grid((size_t)n), GPU_BLOCK, 0, gpu_current_stream()>>>(n, activation, dz);
    CUDA_CHECK_LAUNCH("relu_backward_kernel");
}

// ---- bias gradient: column sums ----------------------------------------------

// A block of (32, 32) threads owns 32 columns of a slab of BIAS_ROWS rows:
// thread (x, y) sums rows y, y+32, ... of the slab in column x (reads
// coalesced along x), the 32 partial sums are added, and one atomicAdd per
// column adds the slab's sum. Many slabs keep the device busy for the narrow
// layers (10 or 128 columns) a single block per column group would not.
#define BIAS_ROWS 256
__global__ void bias_grad_kernel(int batch, int out, const float *__restrict__ dz, float *__restrict__ dbias) {
    __shared__ float partial[WARP][WARP + 1];
    int col = blockIdx.x * WARP + threadIdx.x;
    int first = blockIdx.y * BIAS_ROWS, last = min(batch, first + BIAS_ROWS);
    float sum = 0.0f;
    if (col < out)
        for (int r = first + threadIdx.y; r < last; r += WARP) sum += dz[(size_t)r * out + col];
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < out) {
        float total = 0.0f;
        for (int y = 0; y < WARP; y++) total += partial[y][threadIdx.x];
        atomicAdd(&dbias[col], total);
    }
}

extern "C" void dense_bias_grad_cuda(int batch, int out, const float *dz, float *dbias) {
    dim3 block(WARP, WARP), grid((out + WARP - 1) / WARP, (batch + BIAS_ROWS - 1) / BIAS_ROWS);
    if (grid.y == 0) grid.y = 1;
    bias_grad_kernel<<<grid, block, 0, gpu_current_stream()>>>(batch, out, dz, dbias);
    CUDA_CHECK_LAUNCH("bias_grad_kernel");
}

// ---- softmax cross-entropy: one warp per row -----------------------------------

__global__ void softmax_xent_rows_kernel(int batch, int classes, const float *__restrict__ logits,
                                         const int32_t *__restrict__ labels, float scale, float *__restrict__ dlogits,
                                         float *__restrict__ row_loss, float *__restrict__ row_correct) {
    int lane = threadIdx.x % WARP;
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int rows_per_grid = gridDim.x * blockDim.x / WARP;
    for (; row < batch; row += rows_per_grid) {
        const float *z = logits + (size_t)row * classes;
        // Max and its first index (the CPU twin keeps the first of equal maxima).
        float max = -INFINITY;
        int arg = classes;
        for (int c = lane; c < classes; c += WARP)
            if (z[c] > max) max = z[c], arg = c;
        for (int off = WARP / 2; off > 0; off /= 2) {
            float m2 = __shfl_xor_sync(0xffffffffu, max, off);
            int a2 = __shfl_xor_sync(0xffffffffu, arg, off);
            if (m2 > max || (m2 == max && a2 < arg)) max = m2, arg = a2;
        }
        double sum = 0.0;
        for (int c = lane; c < classes; c += WARP) sum += exp((double)(z[c] - max));
        for (int off = WARP / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        double log_sum = log(sum);
        int label = labels[row];
        if (dlogits) {
            float *d = dlogits + (size_t)row * classes;
            for (int c = lane; c < classes; c += WARP) {
                double p = exp((double)(z[c] - max) - log_sum);
                d[c] = scale * (float)(p - (c == label ? 1.0 : 0.0));
            }
        }
        if (lane == 0) {
            row_loss[row] = (float)(log_sum - (double)(z[label] - max));
            row_correct[row] = arg == label ? 1.0f : 0.0f;
        }
    }
}

extern "C" void softmax_xent_rows_cuda(int batch, int classes, const float *logits, const int32_t *labels, float scale,
                                       float *dlogits, float *row_loss, float *row_correct) {
    size_t threads = (size_t)batch * WARP;
    softmax_xent_rows_kernel<<<gpu_grid(threads), GPU_BLOCK, 0, gpu_current_stream()>>>(
        batch, classes, logits, labels, scale, dlogits, row_loss, row_correct);
    CUDA_CHECK_LAUNCH("softmax_xent_rows_kernel");
}

// ---- gathering a minibatch: one block per row -----------------------------------

__global__ void gather_rows_kernel(int rows, int dim, const float *__restrict__ src, const int32_t *__restrict__ src_labels,
                                   const uint32_t *__restrict__ idx, float *__restrict__ dst,
                                   int32_t *__restrict__ dst_labels) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        size_t from = (size_t)idx[r] * dim, to = (size_t)r * dim;
        for (int c = threadIdx.x; c < dim; c += blockDim.x) dst[to + c] = src[from + c];
        if (threadIdx.x == 0) dst_labels[r] = src_labels[idx[r]];
    }
}

extern "C" void gather_rows_cuda(int rows, int dim, const float *src, const int32_t *src_labels, const uint32_t *idx,
                                 float *dst, int32_t *dst_labels) {
    int blocks = rows < 65535 ? (rows > 0 ? rows : 1) : 65535;
    gather_rows_kernel<<<blocks, GPU_BLOCK, 0, gpu_current_stream()>>>(rows, dim, src, src_labels, idx, dst,
                                                                      dst_labels);
    CUDA_CHECK_LAUNCH("gather_rows_kernel");
}
