#ifndef ASGD_TESTS_LAUNCH_SUPPORT_H
#define ASGD_TESTS_LAUNCH_SUPPORT_H
// Running the asgd binary from a test and reading its JSON outputs: for tests
// that start whole distributed runs with `asgd launch`. The including file
// defines `dir`, the test's scratch directory, before including this (stdout
// and stderr of the last run land there).
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datasets/text_io.h"
#include "engine/run/model_file.h"
#include "tests/support/test_support.h"

extern char **environ;

static inline char *launch_slurp(const char *path) {
    char *text, err[256];
    size_t len;
    return text_file_read(path, &text, &len, err, sizeof err) == 0 ? text : calloc(1, 1);
}

// Runs the program `binary` (ASGD_BINARY, or ASGD_HOOKS_BINARY for a run that
// sets a switch of engine/core/test_hooks.h) with a NULL-terminated argument
// list; returns its exit status (printing its stderr when that is not 0).
static inline int launch_run_binary(const char *binary, const char *const *args) {
    const char *argv[100] = {binary};
    int n = 1;
    for (; args[n - 1] && n < 99; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char out_path[256], err_path[256];
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    CHECK(posix_spawn(&pid, binary, &fa, NULL, (char **)argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));  // never a crash
    if (WEXITSTATUS(status) != 0) {
        char *e = launch_slurp(err_path);
        fprintf(stderr, "asgd %s exited %d:\n%s\n", args[0], WEXITSTATUS(status), e);
        free(e);
    }
    return WEXITSTATUS(status);
}

// Runs the installed program's build, asgd.
static inline int launch_run(const char *const *args) { return launch_run_binary(ASGD_BINARY, args); }

// The parameters of a whole model written by --save-model (docs/model_file.md):
// its header, size and checksum checked; *n their count. Caller frees.
static inline float *launch_load_model(const char *path, size_t *n) {
    model_file_t f;
    char err[512];
    if (model_file_read(path, &f, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    CHECK(f.info.first == 0 && f.info.count == f.info.n_params && f.info.n_params > 0);
    *n = (size_t)f.info.count;
    return f.params;
}

// The last run's "stdout" or "stderr" (caller frees).
static inline char *launch_output(const char *stream) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, stream);
    return launch_slurp(path);
}

static inline char *launch_stderr(void) { return launch_output("stderr"); }

// The number after "key": (NaN for null); a missing key fails the test.
static inline double launch_field(const char *json, const char *key) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    if (!p) {
        fprintf(stderr, "no \"%s\" in %s\n", key, json);
        exit(1);
    }
    p += strlen(pattern);
    return strncmp(p, "null", 4) == 0 ? NAN : strtod(p, NULL);
}

static inline const char *launch_section(const char *json, const char *key) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    CHECK(p);
    return p;
}

// Largest |a - b| / max(1, |a|) over two saved models of the same size.
static inline double launch_model_diff(const char *a_path, const char *b_path) {
    size_t na, nb;
    float *a = launch_load_model(a_path, &na), *b = launch_load_model(b_path, &nb);
    CHECK(na == nb);
    double worst = 0.0;
    for (size_t i = 0; i < na; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)a[i]));
        if (d > worst) worst = d;
    }
    free(a);
    free(b);
    return worst;
}

// Worker k's dense_params_checksum in run directory rd (8 hex digits: the
// wire checksum of its final dense parameters); the caller frees.
static inline char *launch_checksum(const char *rd, int k) {
    char path[600];
    snprintf(path, sizeof path, "%s/worker-%d.json", rd, k);
    char *w = launch_slurp(path);
    const char *key = "\"dense_params_checksum\":\"";
    const char *p = strstr(w, key);
    CHECK(p);
    p += strlen(key);
    CHECK(strspn(p, "0123456789abcdef") == 8 && p[8] == '"');
    char *sum = calloc(9, 1);
    memcpy(sum, p, 8);
    free(w);
    return sum;
}

// Runs asgd with args, which must be refused as a usage error (exit 2) with a
// message on stderr containing needle; prints the message.
static inline void launch_expect_refusal(const char *const *args, const char *needle) {
    CHECK(launch_run(args) == 2);
    char *e = launch_stderr();
    printf("refused: %s", e);
    CHECK(strstr(e, needle));
    free(e);
}

// dir/name/file, read whole (caller frees).
static inline char *launch_file(const char *name, const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", dir, name, file);
    return launch_slurp(path);
}

#endif
