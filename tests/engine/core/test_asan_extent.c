// Code that AddressSanitizer does not check access by access (the small-batch
// products' register blocks, the parameters' vector asm) checks each call's
// whole extents instead (kernels/foundation/asan_extent.h). Under ASan, each
// case here runs in a child process with one operand short of what the call
// reads or writes (a product's by one float; the parameters by 16, so that
// what is missing falls in the vector lanes at any width, not in the
// per-float tail, which ASan checks access by access): the child must die of
// ASan's heap-buffer-overflow report, and the same call with the operand
// whole must not. Without ASan the checks compile to nothing; the calls with
// whole operands still run, and their results are checked against plain
// arithmetic.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/params.h"
#include "kernels/dense_small.h"
#include "kernels/foundation/asan_extent.h"
#include "tests/support/test_support.h"

enum { BATCH = 5, IN = 21, OUT = 7, LDZ = 9 };

typedef enum operand { WHOLE, SHORT_W, SHORT_Z, SHORT_DZ, SHORT_DW, SHORT_PARAMS } operand_t;

// Floats 1..n scaled, in an allocation of exactly n floats (ASan's bounds).
static float *floats(size_t n, float scale) {
    float *p = malloc(n * sizeof *p);
    CHECK(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (float)(i % 13 + 1);
    return p;
}

// The calls, with `shorter` made short (above). Returns 0 when every
// product applied (this CPU has AVX2 and FMA), 2 when one did not.
static int calls(operand_t shorter) {
    size_t cut = 1;
    float *x = floats(BATCH * IN, 0.25f), *w = floats(OUT * IN - (shorter == SHORT_W) * cut, 0.5f);
    float *bias = floats(OUT, 1.0f), *z = floats(BATCH * OUT - (shorter == SHORT_Z) * cut, 0.0f);
    float *dz = floats((BATCH - 1) * LDZ + OUT - (shorter == SHORT_DZ) * cut, 0.125f);
    float *dw = floats(OUT * IN - (shorter == SHORT_DW) * cut, 0.0f);
    int applied = dense_forward_small(BATCH, IN, OUT, x, w, bias, z);
    applied &= dense_wgrad_small(BATCH, IN, OUT, dz, LDZ, x, dw);
    if (shorter == WHOLE) {
        // Plain arithmetic within float rounding (the kernels' own bits are test_dense_small's).
        for (int b = 0; b < BATCH; b++)
            for (int o = 0; o < OUT; o++) {
                double s = bias[o];
                for (int k = 0; k < IN; k++) s += (double)w[o * IN + k] * x[b * IN + k];
                CHECK_NEAR(z[b * OUT + o], s, 1e-4 * (1.0 + s));
            }
        for (int o = 0; o < OUT; o++)
            for (int c = 0; c < IN; c++) {
                double s = 0.0;
                for (int b = 0; b < BATCH; b++) s += (double)dz[b * LDZ + o] * x[b * IN + c];
                CHECK_NEAR(dw[o * IN + c], s, 1e-4 * (1.0 + s));
            }
    }
    // 48 parameters: 192 bytes, a whole number of params_new's 64, so the
    // allocation ends where they do; the short case asks for 64, a whole
    // number of vectors of 4, 8 or 16 floats, all of them in the lanes.
    char err[256];
    size_t n = 48, asked = shorter == SHORT_PARAMS ? 64 : n;
    param_t *p = params_new(n, err, sizeof err);
    CHECK_OK(p ? 0 : -1, err);
    float *g = floats(asked, 1.0f), *copy = floats(asked, 0.0f);
    params_sgd(p, asked, g, 0.5f, copy);
    if (shorter == WHOLE)
        for (size_t i = 0; i < n; i++) CHECK(copy[i] == -0.5f * g[i] && param_get(&p[i]) == copy[i]);
    params_free(&p);
    free(x), free(w), free(bias), free(z), free(dz), free(dw), free(g), free(copy);
    return applied ? 0 : 2;
}

#ifdef ASAN_EXTENT_CHECKED
static const char *const operand_names[] = {"every operand whole",
                                            "forward: w a float short",
                                            "forward: z a float short",
                                            "weight gradient: dz a float short",
                                            "weight gradient: dw a float short",
                                            "params_sgd: p 16 floats short"};

// Runs calls(shorter) in a child with its stderr in a pipe; returns what
// the child wrote, and its wait status in *status. The caller frees.
static char *child_report(operand_t shorter, int *status) {
    int fd[2];
    CHECK(pipe(fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        _exit(calls(shorter));
    }
    close(fd[1]);
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    CHECK(text);
    ssize_t got;
    while ((got = read(fd[0], text + len, cap - 1 - len)) > 0) {
        len += (size_t)got;
        if (len + 1 == cap) {
            char *bigger = realloc(text, cap *= 2);
            CHECK(bigger);
            text = bigger;
        }
    }
    text[len] = '\0';
    close(fd[0]);
    CHECK(waitpid(pid, status, 0) == pid);
    return text;
}
#endif

int main(void) {
#ifdef ASAN_EXTENT_CHECKED
    for (operand_t o = WHOLE; o <= SHORT_PARAMS; o++) {
        int status;
        char *report = child_report(o, &status);
        int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("%-36s -> %s\n", operand_names[o],
               clean                                           ? "returned"
               : WIFEXITED(status) && WEXITSTATUS(status) == 2 ? "a product did not apply (no AVX2 and FMA)"
               : strstr(report, "heap-buffer-overflow")        ? "ASan: heap-buffer-overflow"
                                                               : "died otherwise");
        if (o == WHOLE) {
            if (!clean) fprintf(stderr, "%s", report);
            CHECK(clean);
        } else {
            CHECK(!clean && strstr(report, "ERROR: AddressSanitizer: heap-buffer-overflow"));
        }
        free(report);
    }
    printf("asan extent tests passed (an ASan build: every short operand reported)\n");
#else
    CHECK(calls(WHOLE) == 0);
    printf("asan extent tests passed (no ASan in this build: the checks compile to nothing; the calls checked)\n");
#endif
    return 0;
}
