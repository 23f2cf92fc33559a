#ifndef ASGD_KERNELS_BLAS_RUNTIME_H
#define ASGD_KERNELS_BLAS_RUNTIME_H
// Which OpenBLAS kernels run, and making sure they are the fast ones.
//
// OpenBLAS picks its kernels (its "core") once, when the library is loaded, from
// CPUID. On CPUs newer than the library it can fall back to slow generic SSE3
// kernels ("Prescott"): 1024^2 sgemm was seen 5x slower that way. The only switch
// is the OPENBLAS_CORETYPE environment variable, read at load time, so asgd sets
// it and re-executes itself before doing any work. It only ever names a core
// whose instructions this CPU (and OS) supports.
#include <stddef.h>

// Call first thing in main(). When OpenBLAS chose generic kernels although the
// CPU supports a faster set, sets OPENBLAS_CORETYPE; when keep_thread_pool is 0,
// also sets OPENBLAS_NUM_THREADS=1 so that OpenBLAS starts no thread pool of its
// own (asgd's threads are the parallelism, and an idle OpenBLAS pool thread spins
// in sched_yield, taking a core from them). If either variable had to be set,
// execv()s argv again, once. Variables the user set are always respected. Never
// fails: what happened is recorded for blas_describe().
void blas_prepare_process(char **argv, int keep_thread_pool);

// The decision blas_prepare_process makes: the core to switch to when OpenBLAS
// runs `current`, or NULL to keep it (it is not generic, or this CPU supports
// nothing faster). *why says what the CPU supports.
const char *blas_better_core(const char *current, const char **why);

// One line for the startup banner, e.g.
// "OpenBLAS 0.3.21 core=Haswell (selected by asgd: library chose Prescott; CPU has AVX2+FMA)".
void blas_describe(char *out, size_t out_len);

// The core OpenBLAS is running now ("Haswell", "Zen", "SkylakeX", ...).
const char *blas_core_name(void);

// Whether the running kernels write a product with beta = 0 straight into C:
// OpenBLAS's small-matrix kernels (its AVX-512 cores: SkylakeX, Cooperlake,
// SapphireRapids) have beta-0 variants that do; every other core first
// scales C by beta in a pass of its own (`sgemm_beta`), which for the MLP's
// weight-gradient blocks at batch 16 took 11% of a Hogwild! run's samples on
// the Zen kernels, where zeroing C with memset and asking for beta = 1 gives
// the same bits. Decided once per process.
int blas_beta0_direct(void);

// Threads OpenBLAS may use inside one call. asgd's trainers run their own
// threads and set this to 1 so that T trainer threads use T cores, not T^2.
void blas_set_threads(int n);
int blas_get_threads(void);

#endif
