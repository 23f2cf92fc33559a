#ifndef ASGD_KERNELS_GPU_H
#define ASGD_KERNELS_GPU_H
// The GPU behind plain C: device memory, pinned host memory, streams, events
// and error reporting, so that code outside kernels/ never includes a CUDA
// header. Built from gpu.cu into the CUDA module (libasgd_cuda.so,
// engine/gpu/gpu_module.h) only: libasgd itself never defines these, and
// outside the module only the CUDA tests and benches call them.
//
// Kernels (the *_cuda twins of the *_cpu functions in dense.h, sparse_sgd.h,
// update.h) take device pointers and have the CPU twins' signatures: they
// launch on the calling thread's current stream (gpu_use_stream) and never
// return an error. A failing launch or library call is recorded instead, with
// the call, file and line, and the first such failure since the last check is
// returned by gpu_check on the same thread. Check at least once per step.
#include <stddef.h>

typedef struct gpu_stream gpu_stream_t;
typedef struct gpu_event gpu_event_t;

// Number of usable devices (0 when none, or when built without CUDA); why
// receives the reason when there are none.
int gpu_device_count(char *why, size_t why_len);

// Makes `device` current for the calling thread. Returns 0, or -1 with err.
int gpu_select(int device, char *err, size_t err_len);

// Device memory; gpu_free accepts NULL. Returns NULL with err on failure.
void *gpu_alloc(size_t bytes, char *err, size_t err_len);
void gpu_free(void *p);
// Page-locked host memory (fast, asynchronous copies); gpu_free_host accepts NULL.
void *gpu_alloc_host(size_t bytes, char *err, size_t err_len);
void gpu_free_host(void *p);

// Blocking copies between host and device, and a device memset.
int gpu_upload(void *device_dst, const void *host_src, size_t bytes, char *err, size_t err_len);
int gpu_download(void *host_dst, const void *device_src, size_t bytes, char *err, size_t err_len);
int gpu_zero(void *device_dst, size_t bytes, char *err, size_t err_len);

// Streams. A stream created here is non-blocking with respect to the legacy
// default stream. Copies with the _async calls need pinned host memory to
// overlap with kernels.
gpu_stream_t *gpu_stream_new(char *err, size_t err_len);
void gpu_stream_destroy(gpu_stream_t **s);
int gpu_stream_sync(gpu_stream_t *s, char *err, size_t err_len);
int gpu_copy_async(void *dst, const void *src, size_t bytes, gpu_stream_t *s, char *err, size_t err_len);
int gpu_zero_async(void *device_dst, size_t bytes, gpu_stream_t *s, char *err, size_t err_len);

// The stream the calling thread's *_cuda kernels launch on (and its cuBLAS
// handle's stream). NULL: the legacy default stream.
int gpu_use_stream(gpu_stream_t *s, char *err, size_t err_len);

// Events: mark a point in a stream, make another stream wait for it, or wait
// for it on the host. gpu_event_elapsed_ms times the interval between two
// recorded events (both must have completed).
gpu_event_t *gpu_event_new(int timing, char *err, size_t err_len);
void gpu_event_destroy(gpu_event_t **e);
int gpu_event_record(gpu_event_t *e, gpu_stream_t *s, char *err, size_t err_len);
int gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e, char *err, size_t err_len);
int gpu_event_sync(gpu_event_t *e, char *err, size_t err_len);
int gpu_event_elapsed_ms(gpu_event_t *start, gpu_event_t *end, float *ms, char *err, size_t err_len);

// The first failure a *_cuda kernel recorded on this thread since the last call
// (then cleared), plus any error a launch left pending. 0 when none.
int gpu_check(char *err, size_t err_len);

// Waits for all work on the device; reports a failure of any of it.
int gpu_sync_device(char *err, size_t err_len);

// Frees the calling thread's cuBLAS handle (each thread that ran a cuBLAS
// kernel owns one). Call before a thread that used the GPU exits.
void gpu_release_thread(void);

#endif
