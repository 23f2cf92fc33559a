// --collective mpi (engine/replica/collective_mpi.h) under a real `mpirun -np 2`:
//   - `asgd launch --sync allreduce --collective mpi`, one rank per worker:
//     both workers say "collective":"mpi", send no byte through ZeroMQ, end
//     with the same bits (dense_params_checksum), and the saved model is
//     bit-identical to a `--collective ring` run of the same seed (with 2
//     workers each element is x_0 + x_1 either way, and float addition
//     commutes); the same under local SGD (--local-steps 3);
//   - refused: outside mpirun, with --compress, under asp; built without MPI,
//     "asgd was built without MPI" (then the test skips: nothing else to run).
// Skipped (77) when built without MPI; a missing mpirun, with MPI found at
// configure time, is a skip that ASGD_REQUIRE_ALL=1 turns into a failure.
#include <stdlib.h>
#include <string.h>

#include "tests/support/proc_support.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_collective_mpi_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#ifdef ASGD_HAVE_MPI
static const char *path_of(const char *name) {
    static char p[8][400];
    static int next;
    char *s = p[next++ % 8];
    snprintf(s, 400, "%s/%s", dir, name);
    return s;
}

// 5400 training examples, rounds of 8 per worker.
static const char *const model_args[] = {"--model",  "logreg", "--data",  "gen:sparse:n=6000,dim=1000,nnz=20",
                                         "--batch",  "8",      "--lr",    "0.5",
                                         "--epochs", "2",      "--quiet", "--worker-eval",
                                         "off",      NULL};

// args: "launch" + model_args + --sync sync + extra + --collective collective
// + --run-dir and --save-model named after `name`; returns the count.
static int launch_args(const char **a, const char *name, const char *sync, const char *collective,
                       const char *const *extra) {
    int n = 0;
    a[n++] = "launch";
    for (const char *const *m = model_args; *m; m++) a[n++] = *m;
    a[n++] = "--sync";
    a[n++] = sync;
    for (const char *const *e = extra; e && *e; e++) a[n++] = *e;
    a[n++] = "--collective";
    a[n++] = collective;
    a[n++] = "--run-dir";
    a[n++] = path_of(name);
    char model[64];
    snprintf(model, sizeof model, "%s.model", name);
    a[n++] = "--save-model";
    a[n++] = path_of(model);
    a[n] = NULL;
    return n;
}

// Both workers' JSON of run `name`: the collective they report, and the same final bits.
static void check_workers(const char *name, const char *expect) {
    char want[32];
    snprintf(want, sizeof want, "\"collective\":\"%s\"", expect);
    char *c0 = launch_checksum(path_of(name), 0), *c1 = launch_checksum(path_of(name), 1);
    CHECK(strcmp(c0, c1) == 0);
    for (int k = 0; k < 2; k++) {
        char file[32];
        snprintf(file, sizeof file, "worker-%d.json", k);
        char *json = launch_file(name, file);
        CHECK(strstr(json, want));
        if (strcmp(expect, "mpi") == 0) CHECK(launch_field(json, "bytes_out") == 0);  // nothing on the ring
        free(json);
    }
    printf("%s: both workers summed through %s and end with checksum %s\n", name, expect, c0);
    free(c0);
    free(c1);
}

// `mpirun -np 2 asgd launch ... --collective mpi` for run `name`; 0 when it succeeded.
static int run_mpi(const char *name, const char *sync, const char *const *extra) {
    char coordinator[32];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", proc_free_port());
    // --timeout: MPI_Allreduce has none of its own; a hang becomes a failure.
    const char *a[80] = {ASGD_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "--timeout", "240", "-np",
                         "2",          ASGD_BINARY};
    int n = 8;
    n += launch_args(a + n, name, sync, "mpi", extra);
    a[n++] = "--coordinator";
    a[n++] = coordinator;
    a[n] = NULL;
    char out[128], err[128];
    snprintf(out, sizeof out, "%s.out", name);
    snprintf(err, sizeof err, "%s.err", name);
    // Open MPI leaves its own allocations behind at MPI_Finalize: leak
    // detection (ASan builds) is off in the ranks it starts.
    const char *asan = getenv("ASAN_OPTIONS");
    char saved[512], opts[600];
    snprintf(saved, sizeof saved, "%s", asan ? asan : "");
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", saved, saved[0] ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    pid_t pid = proc_start(a, path_of(out), path_of(err));
    if (asan)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char *e = launch_slurp(path_of(err));
        fprintf(stderr, "mpirun -np 2 asgd launch --collective mpi (%s) failed (status %d):\n%s\n", name, st, e);
        free(e);
        return -1;
    }
    return 0;
}

static int same_bits(const char *a_name, const char *b_name) {
    char a[128], b[128];
    snprintf(a, sizeof a, "%s.model", a_name);
    snprintf(b, sizeof b, "%s.model", b_name);
    size_t na, nb;
    float *x = launch_load_model(path_of(a), &na), *y = launch_load_model(path_of(b), &nb);
    int same = na == nb && memcmp(x, y, na * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

// mpi (under mpirun) against the ring (asgd's own launcher) for one sync mode.
static void compare(const char *label, const char *sync, const char *const *extra) {
    char m[64], r[64];
    snprintf(m, sizeof m, "%s-mpi", label);
    snprintf(r, sizeof r, "%s-ring", label);
    CHECK(run_mpi(m, sync, extra) == 0);
    check_workers(m, "mpi");
    const char *a[64];
    launch_args(a, r, sync, "ring", extra);
    const char *tail[] = {"--workers", "2", NULL};
    int n = 0;
    while (a[n]) n++;
    for (const char *const *t = tail; *t; t++) a[n++] = *t;
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    check_workers(r, "ring");
    CHECK(same_bits(m, r));
    printf("%s --sync %s, 2 workers: mpi and ring models bit-identical\n", label, sync);
}
#endif

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    const char *base[] = {"launch",    "--model", "logreg", "--data",    "gen:sparse:n=600,dim=100,nnz=5",
                          "--workers", "2",       "--sync", "allreduce", "--collective",
                          "mpi",       NULL,      NULL,     NULL};
#ifndef ASGD_HAVE_MPI
    launch_expect_refusal(base, "asgd was built without MPI");
    CHECK(test_remove_tree(dir) == 0);
    return test_skip(
        "test_collective_mpi: asgd was built without MPI (Open MPI not found at configure time, or "
        "-DASGD_MPI=OFF)");
#else
    // Outside mpirun (this test is not under it), compressed, and under asp.
    unsetenv("OMPI_COMM_WORLD_SIZE");
    launch_expect_refusal(base, "--collective mpi: this process was not started by mpirun");
    base[11] = "--compress";
    base[12] = "fp16";
    launch_expect_refusal(base, "--collective mpi: compressed exchanges (--compress fp16) go round the ring");
    base[8] = "asp";
    base[11] = NULL;
    launch_expect_refusal(base, "--collective mpi: applies to --sync allreduce and local");
    if (access(ASGD_MPIEXEC, X_OK) != 0) {
        CHECK(test_remove_tree(dir) == 0);
        return test_skip("%s (found at configure time) is missing: apt-get install openmpi-bin", ASGD_MPIEXEC);
    }
    compare("allreduce", "allreduce", NULL);
    const char *local[] = {"--local-steps", "3", NULL};
    compare("local", "local", local);
    CHECK(test_remove_tree(dir) == 0);
    printf("collective mpi tests passed\n");
    return 0;
#endif
}
