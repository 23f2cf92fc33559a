#ifndef ASGD_ENGINE_GPU_GPU_MODULE_H
#define ASGD_ENGINE_GPU_GPU_MODULE_H
// The CUDA code lives in a module of its own, libasgd_cuda.so (cuda_model.c
// and kernels/*.cu, linked against cudart and cuBLAS), installed beside
// libasgd. Loading those libraries costs a process about 217 MB of resident
// memory, so the library opens the module only when something asks for the
// GPU: --device cuda (gpu_model_new), or a device query (gpu_device_summary).
// A CPU run never maps it.
//
// The module is self-contained: it calls nothing of the library's, and the
// library reaches it only through the table below, which gpu_model.c wraps
// as the gpu_model.h functions.
#include <stddef.h>

#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "engine/core/params.h"
#include "engine/gpu/gpu_model.h"

#define GPU_MODULE_FILE "libasgd_cuda.so"
#define GPU_MODULE_ENTRY "asgd_gpu_module"  // the table's symbol in the module
#define GPU_MODULE_ABI 1  // changes with the table or the structs it takes

// What the module needs to know of a model: its layout (which borrows the
// training data) and its sizes.
typedef struct gpu_model_spec {
    model_layout_t layout;
    size_t n_params, n_train;
} gpu_model_spec_t;

typedef struct cuda_model cuda_model_t;

// The gpu_model.h functions, over the module's own model. Messages begin
// with "--device cuda: ".
typedef struct gpu_module {
    int abi;  // GPU_MODULE_ABI of the build that made the module
    // Device count and one line naming the runtime and device 0 (kernels/cuda_info.h).
    int (*device_summary)(char *out, size_t out_len);
    cuda_model_t *(*model_new)(const gpu_model_spec_t *spec, const optimizer_config_t *oc, const gpu_options_t *o,
                               size_t max_batch, char *err, size_t err_len);
    void (*model_destroy)(cuda_model_t *g);
    int (*bind_thread)(cuda_model_t *g, char *err, size_t err_len);
    void (*unbind_thread)(void);
    int (*set_params)(cuda_model_t *g, const param_t *w, char *err, size_t err_len);
    int (*get_params)(cuda_model_t *g, param_t *w, char *err, size_t err_len);
    int (*set_order)(cuda_model_t *g, const uint32_t *order, size_t n, char *err, size_t err_len);
    int (*is_hogwild)(const cuda_model_t *g);
    size_t (*hogwild_chunk)(const cuda_model_t *g);
    int (*step)(cuda_model_t *g, size_t pos, size_t count, float lr, char *err, size_t err_len);
    int (*take_loss)(cuda_model_t *g, double *loss_sum, char *err, size_t err_len);
    const float *(*snapshot)(cuda_model_t *g, char *err, size_t err_len);
    float *(*delta_buffer)(cuda_model_t *g);
    int (*add_delta)(cuda_model_t *g, char *err, size_t err_len);
    void (*describe)(const cuda_model_t *g, char *out, size_t out_len);
} gpu_module_t;

// Room for gpu_module_get's err: two paths and the loader's words.
#define GPU_MODULE_ERR_LEN (3 * 4096)

// The module, opened on the first call (thread-safe) from the folder of the
// library or program that holds this code, else from that folder's ../lib
// (an installed bin/asgd). NULL when it cannot be had, with why in err (no prefix):
// "this asgd was built without CUDA support", or "cannot load
// libasgd_cuda.so: ..." with the loader's words. The answer is kept.
const gpu_module_t *gpu_module_get(char *err, size_t err_len);

// Number of usable CUDA devices, through the module; out says which runtime
// and device 0, or why there are none ("CUDA: not built (...)", "CUDA:
// cannot load libasgd_cuda.so: ...", or the runtime's own answer).
int gpu_device_summary(char *out, size_t out_len);

// NVIDIA GPUs the kernel driver lists (/proc/driver/nvidia/gpus), without
// loading CUDA: what a CPU run's startup line can say at no cost.
int gpu_driver_devices(void);

#endif
