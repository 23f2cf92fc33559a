#ifndef ASGD_ENGINE_RUN_BANNER_H
#define ASGD_ENGINE_RUN_BANNER_H
// The startup banner: version, BLAS kernels, CPUs, GPU.
#include <stddef.h>

// The banner of `asgd COMMAND`, one line without its '\n'.
void banner_line(char *out, size_t out_len, const char *command);
// The banner's GPU part: device 0 when there is one, else "no GPU" (or "no
// GPU (CUDA not built)"); with details, the CUDA runtime's own answer (why
// there is none). Details are wanted when ASGD_CUDA_DETAILS is set and not 0.
void cuda_banner_part(char *out, size_t out_len, int details);
int cuda_details_wanted(void);

#endif
