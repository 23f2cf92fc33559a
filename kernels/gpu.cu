// Device memory, streams, events and error reporting (gpu.h) over the CUDA
// runtime. Every call's failure is reported with the call, where it was made
// and the runtime's own text.
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_check.h"

extern "C" {
#include "kernels/gpu.h"
}

struct gpu_stream {
    cudaStream_t stream;
};
struct gpu_event {
    cudaEvent_t event;
};

// Per host thread: the first recorded failure, the launch stream, the cuBLAS handle.
static thread_local char first_failure[512];
static thread_local int failed;
static thread_local cudaStream_t current_stream;
static thread_local cublasHandle_t cublas;
static thread_local int cublas_tried;

int gpu_record_failure(int rc, const char *expr, const char *library_text, const char *func, const char *file,
                       int line) {
    (void)file;  // kept for a debugger; messages name the call, never a source path
    (void)line;
    if (rc != 0 && !failed) {
        snprintf(first_failure, sizeof first_failure, "%s failed: %s (in %s)", expr, library_text, func);
        failed = 1;
    }
    return rc;
}

int gpu_check_launch(const char *kernel, const char *func, const char *file, int line) {
    cudaError_t rc = cudaGetLastError();
    if (rc == cudaSuccess) return 0;
    char what[160];
    snprintf(what, sizeof what, "launching %s", kernel);
    return gpu_record_failure(-1, what, cudaGetErrorString(rc), func, file, line);
}

const char *cublas_status_text(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown cuBLAS status";
    }
}

// Moves a recorded failure (if any) into err; returns -1 if there was one.
static int take_failure(char *err, size_t err_len) {
    if (!failed) return 0;
    snprintf(err, err_len, "%s", first_failure);
    failed = 0;
    first_failure[0] = '\0';
    return -1;
}

// A call's own failure, reported at once.
#define REPORT(expr)                                 \
    do {                                             \
        if (CUDA_CHECK(expr) != 0) return take_failure(err, err_len); \
    } while (0)

cudaStream_t gpu_current_stream(void) { return current_stream; }

cublasHandle_t gpu_current_cublas(void) {
    if (!cublas && !cublas_tried) {
        cublas_tried = 1;
        if (CUBLAS_CHECK(cublasCreate(&cublas)) != 0) {
            cublas = NULL;
            return NULL;
        }
        // Plain FP32 arithmetic: the CPU twins are compared with these kernels at 1e-4.
        CUBLAS_CHECK(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));
        CUBLAS_CHECK(cublasSetStream(cublas, current_stream));
    }
    return cublas;
}

extern "C" int gpu_device_count(char *why, size_t why_len) {
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
        cudaGetLastError();  // not sticky: clear it
        return 0;
    }
    if (count == 0) snprintf(why, why_len, "no CUDA device");
    return count;
}

extern "C" int gpu_select(int device, char *err, size_t err_len) {
    REPORT(cudaSetDevice(device));
    return 0;
}

extern "C" void *gpu_alloc(size_t bytes, char *err, size_t err_len) {
    void *p = NULL;
    if (CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1)) != 0) {
        take_failure(err, err_len);
        return NULL;
    }
    return p;
}

extern "C" void gpu_free(void *p) {
    if (p) CUDA_CHECK(cudaFree(p));
}

extern "C" void *gpu_alloc_host(size_t bytes, char *err, size_t err_len) {
    void *p = NULL;
    if (CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1)) != 0) {
        take_failure(err, err_len);
        return NULL;
    }
    return p;
}

extern "C" void gpu_free_host(void *p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

extern "C" int gpu_upload(void *dst, const void *src, size_t bytes, char *err, size_t err_len) {
    REPORT(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

extern "C" int gpu_download(void *dst, const void *src, size_t bytes, char *err, size_t err_len) {
    REPORT(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

extern "C" int gpu_zero(void *dst, size_t bytes, char *err, size_t err_len) {
    REPORT(cudaMemset(dst, 0, bytes));
    return 0;
}

extern "C" gpu_stream_t *gpu_stream_new(char *err, size_t err_len) {
    gpu_stream_t *s = (gpu_stream_t *)calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "gpu_stream_new: out of memory");
        return NULL;
    }
    if (CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != 0) {
        take_failure(err, err_len);
        free(s);
        return NULL;
    }
    return s;
}

extern "C" void gpu_stream_destroy(gpu_stream_t **s) {
    if (!s || !*s) return;
    CUDA_CHECK(cudaStreamDestroy((*s)->stream));
    free(*s);
    *s = NULL;
}

extern "C" int gpu_stream_sync(gpu_stream_t *s, char *err, size_t err_len) {
    REPORT(cudaStreamSynchronize(s ? s->stream : 0));
    return 0;
}

extern "C" int gpu_copy_async(void *dst, const void *src, size_t bytes, gpu_stream_t *s, char *err,
                              size_t err_len) {
    REPORT(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s ? s->stream : 0));
    return 0;
}

extern "C" int gpu_zero_async(void *dst, size_t bytes, gpu_stream_t *s, char *err, size_t err_len) {
    REPORT(cudaMemsetAsync(dst, 0, bytes, s ? s->stream : 0));
    return 0;
}

extern "C" int gpu_use_stream(gpu_stream_t *s, char *err, size_t err_len) {
    current_stream = s ? s->stream : 0;
    if (cublas && CUBLAS_CHECK(cublasSetStream(cublas, current_stream)) != 0) return take_failure(err, err_len);
    return 0;
}

extern "C" gpu_event_t *gpu_event_new(int timing, char *err, size_t err_len) {
    gpu_event_t *e = (gpu_event_t *)calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_len, "gpu_event_new: out of memory");
        return NULL;
    }
    if (CUDA_CHECK(cudaEventCreateWithFlags(&e->event, timing ? cudaEventDefault : cudaEventDisableTiming)) != 0) {
        take_failure(err, err_len);
        free(e);
        return NULL;
    }
    return e;
}

extern "C" void gpu_event_destroy(gpu_event_t **e) {
    if (!e || !*e) return;
    CUDA_CHECK(cudaEventDestroy((*e)->event));
    free(*e);
    *e = NULL;
}

extern "C" int gpu_event_record(gpu_event_t *e, gpu_stream_t *s, char *err, size_t err_len) {
    REPORT(cudaEventRecord(e->event, s ? s->stream : 0));
    return 0;
}

extern "C" int gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e, char *err, size_t err_len) {
    REPORT(cudaStreamWaitEvent(s ? s->stream : 0, e->event, 0));
    return 0;
}

extern "C" int gpu_event_sync(gpu_event_t *e, char *err, size_t err_len) {
    REPORT(cudaEventSynchronize(e->event));
    return 0;
}

extern "C" int gpu_event_elapsed_ms(gpu_event_t *start, gpu_event_t *end, float *ms, char *err, size_t err_len) {
    REPORT(cudaEventElapsedTime(ms, start->event, end->event));
    return 0;
}

extern "C" int gpu_check(char *err, size_t err_len) {
    gpu_check_launch("an earlier kernel", __func__, __FILE__, __LINE__);
    return take_failure(err, err_len);
}

extern "C" int gpu_sync_device(char *err, size_t err_len) {
    REPORT(cudaDeviceSynchronize());
    return take_failure(err, err_len);
}

extern "C" void gpu_release_thread(void) {
    if (cublas) CUBLAS_CHECK(cublasDestroy(cublas));
    cublas = NULL;
    cublas_tried = 0;
}
