#ifndef ASGD_KERNELS_CUDA_CHECK_H
#define ASGD_KERNELS_CUDA_CHECK_H
// For kernels/*.cu only: the checks every CUDA and cuBLAS call goes through,
// and the per-thread state the *_cuda kernels launch with. Never included by
// C code (it needs the CUDA headers).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

// Records the first failure on this thread: the expression, function, file,
// line and the library's own text. Returns `failed`.
int gpu_record_failure(int failed, const char *expr, const char *library_text, const char *func, const char *file,
                       int line);

const char *cublas_status_text(cublasStatus_t s);

// Checks a call whose failure the caller also returns (rc) or only records.
#define CUDA_CHECK(expr)                                                                                   \
    ([&]() -> int {                                                                                        \
        cudaError_t rc_ = (expr);                                                                          \
        return rc_ == cudaSuccess                                                                          \
                   ? 0                                                                                     \
                   : gpu_record_failure(-1, #expr, cudaGetErrorString(rc_), __func__, __FILE__, __LINE__); \
    }())
#define CUBLAS_CHECK(expr)                                                                                 \
    ([&]() -> int {                                                                                        \
        cublasStatus_t rc_ = (expr);                                                                       \
        return rc_ == CUBLAS_STATUS_SUCCESS                                                                \
                   ? 0                                                                                     \
                   : gpu_record_failure(-1, #expr, cublas_status_text(rc_), __func__, __FILE__, __LINE__); \
    }())
// After every kernel launch: a bad configuration shows up here, not later.
int gpu_check_launch(const char *kernel, const char *func, const char *file, int line);
#define CUDA_CHECK_LAUNCH(kernel) gpu_check_launch(kernel, __func__, __FILE__, __LINE__)

// The calling thread's stream for kernel launches, and its cuBLAS handle bound
// to that stream (created on first use; NULL when that failed, failure recorded).
cudaStream_t gpu_current_stream(void);
cublasHandle_t gpu_current_cublas(void);

// Threads per block for element-wise kernels, and the grid that covers n elements.
#define GPU_BLOCK 256
static inline unsigned gpu_grid(size_t n) {
    size_t blocks = (n + GPU_BLOCK - 1) / GPU_BLOCK;
    return (unsigned)(blocks == 0 ? 1 : blocks > 65535u * 16u ? 65535u * 16u : blocks);
}

#endif
