#include "kernels/blas_runtime.h"

#include <cblas.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define REEXEC_MARK "ASGD_BLAS_REEXEC"

// Cores OpenBLAS falls back to when it does not recognise a CPU; none of them
// uses AVX, so any AVX2 machine loses several times its matrix throughput.
static const char *const generic_cores[] = {"prescott", "katmai",    "coppermine", "northwood", "banias",
                                            "core2",    "penryn",    "dunnington", "nehalem",   "atom",
                                            "opteron",  "barcelona", "bobcat",     "generic",   NULL};

static int is_generic_core(const char *name) {
    for (int i = 0; generic_cores[i]; i++)
        if (strcasecmp(name, generic_cores[i]) == 0) return 1;
    return 0;
}

// The fastest OpenBLAS core this CPU can execute, and why (NULL: none better than generic).
static const char *best_supported_core(const char **why) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd")) {
        *why = "CPU has AVX-512 F/BW/VL/DQ/CD";
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *why = "CPU has AVX2+FMA";
        return "Haswell";
    }
    if (__builtin_cpu_supports("avx")) {
        *why = "CPU has AVX";
        return "SandyBridge";
    }
    *why = "CPU has no AVX";
    return NULL;
}

const char *blas_better_core(const char *current, const char **why) {
    const char *best = best_supported_core(why);
    return current && best && is_generic_core(current) ? best : NULL;
}

static char selection_note[200] = "library's own choice";

void blas_prepare_process(char **argv, int keep_thread_pool) {
    const char *chosen_before = getenv(REEXEC_MARK);
    if (chosen_before) {
        const char *reason = getenv("ASGD_BLAS_REASON");
        if (*chosen_before) {
            snprintf(selection_note, sizeof selection_note, "selected by asgd: library chose %s; %s", chosen_before,
                     reason ? reason : "");
            unsetenv("OPENBLAS_CORETYPE");  // asgd's choice, not the user's: children choose again
        } else if (getenv("OPENBLAS_CORETYPE")) {
            snprintf(selection_note, sizeof selection_note, "OPENBLAS_CORETYPE=%s set by the user",
                     getenv("OPENBLAS_CORETYPE"));
        }
        // Children (launched workers) decide for themselves.
        unsetenv(REEXEC_MARK);
        unsetenv("ASGD_BLAS_REASON");
        return;
    }
    int restart = 0;
    if (!keep_thread_pool && !getenv("OPENBLAS_NUM_THREADS")) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        restart = 1;
    }
    const char *user_core = getenv("OPENBLAS_CORETYPE");
    const char *current = openblas_get_corename();
    const char *why = "";
    const char *best = blas_better_core(current, &why);
    if (user_core) {
        snprintf(selection_note, sizeof selection_note, "OPENBLAS_CORETYPE=%s set by the user", user_core);
        setenv(REEXEC_MARK, "", 1);
    } else if (best) {
        setenv("OPENBLAS_CORETYPE", best, 1);
        setenv(REEXEC_MARK, current, 1);
        setenv("ASGD_BLAS_REASON", why, 1);
        restart = 1;
    } else {
        setenv(REEXEC_MARK, "", 1);
    }
    if (!restart) {
        unsetenv(REEXEC_MARK);
        return;
    }
    // The library is already loaded: restart so that it reads the variables.
    execv("/proc/self/exe", argv);
    snprintf(selection_note, sizeof selection_note, "could not restart to select kernels (%s): execv failed: %s",
             best ? best : current, strerror(errno));
    unsetenv(REEXEC_MARK);
    unsetenv("ASGD_BLAS_REASON");
}

const char *blas_core_name(void) {
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

void blas_describe(char *out, size_t out_len) {
    const char *config = openblas_get_config();
    const char *version = "OpenBLAS";
    char buf[64] = "OpenBLAS";
    if (config && strncmp(config, "OpenBLAS ", 9) == 0) {
        size_t len = strcspn(config + 9, " ");
        if (len > 40) len = 40;
        snprintf(buf, sizeof buf, "OpenBLAS %.*s", (int)len, config + 9);
        version = buf;
    }
    snprintf(out, out_len, "%s core=%s (%s), %d BLAS thread%s per call", version, blas_core_name(), selection_note,
             blas_get_threads(), blas_get_threads() == 1 ? "" : "s");
}

void blas_set_threads(int n) { openblas_set_num_threads(n); }

int blas_get_threads(void) { return openblas_get_num_threads(); }

static _Atomic int beta0_direct = -1;  // -1: not decided yet

int blas_beta0_direct(void) {
    // Racing first calls decide the same value (relaxed: nothing else is
    // published with it).
    int v = atomic_load_explicit(&beta0_direct, memory_order_relaxed);
    if (v >= 0) return v;
    const char *core = blas_core_name();
    v = strcasecmp(core, "SkylakeX") == 0 || strcasecmp(core, "Cooperlake") == 0 ||
        strcasecmp(core, "SapphireRapids") == 0;
    atomic_store_explicit(&beta0_direct, v, memory_order_relaxed);
    return v;
}
