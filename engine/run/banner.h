#ifndef ASGD_ENGINE_RUN_BANNER_H
#define ASGD_ENGINE_RUN_BANNER_H
// The startup banner: version, BLAS kernels, CPUs, GPU.
#include <stddef.h>

// The banner of `asgd COMMAND`, one line without its '\n'; uses_gpu: the run
// trains with --device cuda.
void banner_line(char *out, size_t out_len, const char *command, int uses_gpu);
// The banner's GPU part. A run on the GPU: device 0 when there is one, else
// "no GPU". A CPU run does not load CUDA for it: "no GPU", or how many GPUs
// the driver lists ("1 GPU, not used"); "no GPU (CUDA not built)" in a build
// without CUDA. With details, the CUDA runtime's own answer (why there is
// none) in every case. Details are wanted when ASGD_CUDA_DETAILS is set and not 0.
void cuda_banner_part(char *out, size_t out_len, int uses_gpu, int details);
int cuda_details_wanted(void);

#endif
