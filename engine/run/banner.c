// The startup line every command that trains shows (banner.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/gpu/gpu_module.h"
#include "engine/run/banner.h"
#include "kernels/blas_runtime.h"

int cuda_details_wanted(void) {
    const char *v = getenv("ASGD_CUDA_DETAILS");
    return v && *v && strcmp(v, "0") != 0;
}

void cuda_banner_part(char *out, size_t out_len, int uses_gpu, int details) {
#ifndef ASGD_HAVE_CUDA
    if (!details) {
        snprintf(out, out_len, "no GPU (CUDA not built)");
        return;
    }
#endif
    // A CPU run does not load CUDA (gpu_module.h) for its startup line.
    if (!uses_gpu && !details) {
        int listed = gpu_driver_devices();
        if (listed > 0)
            snprintf(out, out_len, "%d GPU%s, not used", listed, listed == 1 ? "" : "s");
        else
            snprintf(out, out_len, "no GPU");
        return;
    }
    char summary[256];
    int devices = gpu_device_summary(summary, sizeof summary);
    snprintf(out, out_len, "%s", devices > 0 || details ? summary : "no GPU");
}

void banner_line(char *out, size_t out_len, const char *command, int uses_gpu) {
    char blas[256], cuda[256];
    blas_describe(blas, sizeof blas);
    cuda_banner_part(cuda, sizeof cuda, uses_gpu, cuda_details_wanted());
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(out, out_len, "asgd %s %s | %s | %ld CPUs | %s", ASGD_VERSION, command, blas, cpus, cuda);
}
