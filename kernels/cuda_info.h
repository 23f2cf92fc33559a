#ifndef ASGD_KERNELS_CUDA_INFO_H
#define ASGD_KERNELS_CUDA_INFO_H
// What CUDA offers this process. Plain C: callers never include a CUDA header.
// Built from cuda_info.cu into the CUDA module only; the library asks through
// gpu_device_summary (engine/gpu/gpu_module.h), which answers without CUDA too.
#include <stddef.h>

// Number of usable CUDA devices: > 0 devices found; 0 none (out then says why,
// e.g. "CUDA 13.0: no device (cudaGetDeviceCount: no CUDA-capable device is
// detected)"). out also names device 0 when there is one.
int cuda_device_summary(char *out, size_t out_len);

#endif
