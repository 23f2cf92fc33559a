// OpenBLAS kernel selection: the decision for generic and non-generic cores on
// this CPU, and the asgd binary's restart that disables OpenBLAS's thread pool
// and reports the kernels in its startup line.
#include <stdlib.h>

#include "kernels/blas_runtime.h"
#include "tests/support/test_support.h"

static char *run_version(const char *env) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env -u OPENBLAS_NUM_THREADS -u OPENBLAS_CORETYPE %s %s version 2>&1", env, ASGD_BINARY);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    char *out = calloc(1, 4096);
    size_t n = fread(out, 1, 4095, p);
    out[n] = '\0';
    CHECK(pclose(p) == 0);
    printf("%s: %s", env[0] ? env : "(no variables)", out);
    return out;
}

int main(void) {
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512cd");
    const char *why = "";
    const char *better = blas_better_core("Prescott", &why);
    printf("generic Prescott on this CPU -> %s (%s)\n", better ? better : "(keep)", why);
    if (avx512)
        CHECK(better && strcmp(better, "SkylakeX") == 0);
    else if (avx2)
        CHECK(better && strcmp(better, "Haswell") == 0);
    CHECK(blas_better_core("Nehalem", &why) == better);  // every generic core is replaced alike
    // A core that is not generic is kept, whatever the CPU.
    CHECK(blas_better_core("Zen", &why) == NULL);
    CHECK(blas_better_core("Haswell", &why) == NULL);
    CHECK(blas_better_core("SkylakeX", &why) == NULL);

    // The binary restarts itself without the pool: one BLAS thread, and it says which core.
    char *plain = run_version("");
    CHECK(strstr(plain, "core=") && strstr(plain, "1 BLAS thread per call"));
    CHECK(!strstr(plain, "could not restart"));
    // A core the user chose is respected and named as theirs.
    char *user = run_version("OPENBLAS_CORETYPE=Prescott");
    CHECK(strstr(user, "core=Prescott") && strstr(user, "set by the user"));
    free(plain);
    free(user);
    printf("blas runtime tests passed\n");
    return 0;
}
