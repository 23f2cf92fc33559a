// The CPU-only build's answer; cuda_info.cu replaces it when CUDA is built.
#include "kernels/cuda_info.h"

#include <stdio.h>

#ifndef ASGD_HAVE_CUDA
int cuda_device_summary(char *out, size_t out_len) {
    snprintf(out, out_len, "CUDA: not built (configure with the CUDA Toolkit installed, ASGD_CUDA=AUTO or ON)");
    return 0;
}
#endif
