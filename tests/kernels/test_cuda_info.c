// The CUDA code is a module the library opens only when asked
// (engine/gpu/gpu_module.h):
//  - a CPU run of `asgd train` never opens libasgd_cuda.so or CUDA's
//    libraries (the dynamic loader's own log, LD_DEBUG=files, says what it
//    opened); `asgd version --verbose`, a device query, opens the module in
//    a CUDA build;
//  - the query answers in every build: a device count and one line naming
//    the runtime and device 0, or why there is none; in this process the
//    module is mapped only after it;
//  - a program that cannot have the module (a copy of asgd away from the
//    build, the same beside a file that is no module, or a build without
//    CUDA) refuses --device cuda in one line that says why.
// Without a GPU (or a CUDA build) the device part is skipped (exit 77) after
// checking all that.
#include <string.h>

#include "engine/gpu/gpu_module.h"
#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_cuda_info_XXXXXX";

#define DATA "gen:sparse:n=200,dim=50,nnz=5"

static int mapped(const char *name) {
    char *maps = proc_slurp("/proc/self/maps");
    int found = strstr(maps, name) != NULL;
    free(maps);
    return found;
}

// Runs `binary argv...` with the dynamic loader logging the files it opens
// on stderr; returns that stderr (caller frees), after checking the exit status.
static char *run_logging_loads(const char *name, const char *binary, const char **args, int status) {
    const char *argv[16] = {binary};
    size_t n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    CHECK(setenv("LD_DEBUG", "files", 1) == 0);
    char *err = proc_run_expect(argv, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name), 120, status);
    CHECK(unsetenv("LD_DEBUG") == 0);
    return err;
}

static void cpu_run_loads_no_cuda(void) {
    const char *train[] = {"train", "--model", "logreg", "--data", DATA, "--epochs", "1", NULL};
    char *log = run_logging_loads("train", ASGD_BINARY, train, 0);
    CHECK(strstr(log, "| no GPU") || strstr(log, ", not used"));  // its startup line
    CHECK(!strstr(log, GPU_MODULE_FILE) && !strstr(log, "libcudart") && !strstr(log, "libcublas"));
    free(log);
    const char *query[] = {"version", "--verbose", NULL};
    log = run_logging_loads("version", ASGD_BINARY, query, 0);
#ifdef ASGD_HAVE_CUDA
    CHECK(strstr(log, GPU_MODULE_FILE) && strstr(log, "libcudart"));
#else
    CHECK(!strstr(log, GPU_MODULE_FILE));
#endif
    free(log);
}

// `copy train --device cuda` fails in one line; returns it (caller frees).
// Its output goes to dir/name.out and .err.
static char *gpu_run_refused(const char *name, const char *copy) {
    const char *argv[] = {copy, "train", "--model", "logreg", "--data", DATA, "--device", "cuda", "--quiet", NULL};
    char *err = proc_run_expect(argv, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name), 120, 1);
    printf("refused: %s", err);
    CHECK(strchr(err, '\n') && !strchr(err, '\n')[1]);  // one line
    return err;
}

// A copy of the program with no module beside it (nor in ../lib), then
// with a file of the module's name that is not one.
static void no_module_refuses_in_one_line(void) {
    char copy[256], command[600];
    snprintf(copy, sizeof copy, "%s/bin/asgd", dir);
    snprintf(command, sizeof command, "mkdir -p %s/bin && cp %s %s", dir, ASGD_BINARY, copy);
    CHECK(system(command) == 0);
    char *err = gpu_run_refused("no-module", copy);
#ifdef ASGD_HAVE_CUDA
    char expected[600];
    snprintf(expected, sizeof expected, "--device cuda: cannot load %s: not in %s/bin nor in %s/bin/../lib",
             GPU_MODULE_FILE, dir, dir);
    CHECK(strstr(err, expected));
    free(err);
    test_write_file(dir, "bin/" GPU_MODULE_FILE, "not a module", 12);
    err = gpu_run_refused("not-a-module", copy);
    snprintf(expected, sizeof expected, "--device cuda: cannot load %s: %s/bin/%s: ", GPU_MODULE_FILE, dir,
             GPU_MODULE_FILE);
    CHECK(strstr(err, expected));  // then the loader's words
#else
    CHECK(strstr(err, "--device cuda: this asgd was built without CUDA support"));
#endif
    free(err);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    cpu_run_loads_no_cuda();
    no_module_refuses_in_one_line();

    CHECK(!mapped(GPU_MODULE_FILE) && !mapped("libcudart"));
    char summary[256] = "";
    int devices = gpu_device_summary(summary, sizeof summary);
    printf("%s\n", summary);
    CHECK(devices >= 0 && strncmp(summary, "CUDA", 4) == 0);
#ifdef ASGD_HAVE_CUDA
    CHECK(strstr(summary, "not built") == NULL && strstr(summary, "cannot load") == NULL);
    CHECK(mapped(GPU_MODULE_FILE));
#else
    CHECK(devices == 0 && strstr(summary, "not built") != NULL);
    CHECK(!mapped(GPU_MODULE_FILE));
#endif
    CHECK(test_remove_tree(dir) == 0);
    if (devices == 0) {
        return test_skip_no_gpu("no CUDA device here");
    }
    CHECK(strstr(summary, "sm_") != NULL);
    return 0;
}
