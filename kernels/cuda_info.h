#ifndef ASGD_KERNELS_CUDA_INFO_H
#define ASGD_KERNELS_CUDA_INFO_H
// What CUDA offers this process, for the startup line and for tests that need a
// GPU. Plain C: callers never include a CUDA header. Built from cuda_info.cu
// when the CUDA Toolkit was found at configure time, else from cuda_info.c.
#include <stddef.h>

// Number of usable CUDA devices: > 0 devices found; 0 none, or built without CUDA
// (out then says which, e.g. "CUDA: not built" or "CUDA 13.0: no device (cudaGetDeviceCount:
// no CUDA-capable device is detected)"). out also names device 0 when there is one.
int cuda_device_summary(char *out, size_t out_len);

#endif
