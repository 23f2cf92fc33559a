// CUDA device query for the startup line. Every CUDA call's failure is reported
// with the call and the runtime's own text.
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "kernels/cuda_info.h"
}

extern "C" int cuda_device_summary(char *out, size_t out_len) {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        snprintf(out, out_len, "CUDA %d.%d: no device (cudaGetDeviceCount: %s)", runtime / 1000, runtime % 1000 / 10,
                 cudaGetErrorString(rc));
        return 0;
    }
    if (count == 0) {
        snprintf(out, out_len, "CUDA %d.%d: no device", runtime / 1000, runtime % 1000 / 10);
        return 0;
    }
    cudaDeviceProp prop;
    rc = cudaGetDeviceProperties(&prop, 0);
    if (rc != cudaSuccess) {
        snprintf(out, out_len, "CUDA %d.%d: %d device(s); cudaGetDeviceProperties(0): %s", runtime / 1000,
                 runtime % 1000 / 10, count, cudaGetErrorString(rc));
        return count;
    }
    snprintf(out, out_len, "CUDA %d.%d: %d device(s), 0: %s (sm_%d%d, %.0f GiB)", runtime / 1000, runtime % 1000 / 10,
             count, prop.name, prop.major, prop.minor, (double)prop.totalGlobalMem / (1u << 30));
    return count;
}
