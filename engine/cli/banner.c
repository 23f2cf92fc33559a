// The startup line every command that trains prints (commands.h).
#include <stdio.h>
#include <unistd.h>

#include "engine/cli/commands.h"
#include "kernels/blas_runtime.h"  // defines: blas_describe
#include "kernels/cuda_info.h"     // defines: cuda_device_summary

void print_banner(FILE *out, const char *command) {
    char blas[256], cuda[256];
    blas_describe(blas, sizeof blas);
    cuda_device_summary(cuda, sizeof cuda);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "asgd %s %s | %s | %ld CPUs | %s\n", ASGD_VERSION, command, blas, cpus, cuda);
}
