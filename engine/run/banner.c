// The startup line every command that trains shows (banner.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/run/banner.h"
#include "kernels/blas_runtime.h"
#include "kernels/cuda_info.h"

int cuda_details_wanted(void) {
    const char *v = getenv("ASGD_CUDA_DETAILS");
    return v && *v && strcmp(v, "0") != 0;
}

void cuda_banner_part(char *out, size_t out_len, int details) {
    char summary[256];
    int devices = cuda_device_summary(summary, sizeof summary);
    if (devices > 0 || details)
        snprintf(out, out_len, "%s", summary);
    else
        snprintf(out, out_len, "%s", strstr(summary, "not built") ? "no GPU (CUDA not built)" : "no GPU");
}

void banner_line(char *out, size_t out_len, const char *command) {
    char blas[256], cuda[256];
    blas_describe(blas, sizeof blas);
    cuda_banner_part(cuda, sizeof cuda, cuda_details_wanted());
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(out, out_len, "asgd %s %s | %s | %ld CPUs | %s", ASGD_VERSION, command, blas, cpus, cuda);
}
