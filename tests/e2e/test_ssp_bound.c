// The SSP bound, end to end: a real `asgd launch --sync ssp` with one worker
// far slower than the others, whose measured staleness (summary.json, merged
// from the shards) stays within the bounds docs/distributed.md derives,
//   in clocks    s
//   in versions  (N - 1)(2s + 1) + s      (whatever --push-every is)
// and the same run with the gate switched off (ASGD_TEST_SSP_GATE_OFF=1, a
// switch of engine/core/test_hooks.h that only the test build of the program,
// asgd-test-hooks, reads) goes beyond both: the bound is the gate's doing.
// The release program given the same switch ignores it: its run holds the
// bounds as the first one does.
//
// Why the gate-off run exceeds them by construction, with s = 1 (bounds 1 and
// 7): each worker has R = 9 rounds (2 steps per thread) and pulls every
// round. The fast workers sleep 4 ms a step, so that each round is a push of
// its own (faster threads fold rounds into fewer pushes, each one version,
// when their communication thread falls behind: with 1 ms steps, beside three
// TSan tests on 2 CPUs, 17 pushes came where 51 were due): without the gate
// they finish in about 9 x 8 ms. The slowed worker sleeps 240 ms a step: each
// of its rounds takes 480 ms, its run 4.3 s. So a fast worker's clock runs up
// to ~R ahead of the min clock it reads (> 1), and the 2R = 18 fast updates
// land within the read-to-apply span of the slow worker's first push: it
// counts more than 7 unless rounds fold more than twice over, or the fast
// workers' runs stretch over six times their own length.
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_ssp_bound_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define WORKERS 3
#define BOUND 1

typedef struct measured {
    double clocks_max, versions_max, pushes, fast_wait_s;
} measured_t;

// gate_off: the run's environment has ASGD_TEST_SSP_GATE_OFF=1; binary: the
// program that runs it (ASGD_BINARY or ASGD_HOOKS_BINARY).
static measured_t run(const char *name, int gate_off, const char *binary) {
    char rd[300];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    const char *a[] = {"launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=900,dim=1000,nnz=10",
                       "--batch",
                       "8",
                       "--servers",
                       "1",
                       "--workers",
                       "3",
                       "--threads",
                       "2",
                       "--push-every",
                       "4",
                       "--fetch-every",
                       "4",
                       "--sync",
                       "ssp",
                       "--staleness",
                       "1",
                       "--delay-worker",
                       "0:240,1:4,2:4",
                       "--quiet",
                       "--run-dir",
                       rd,
                       NULL};
    if (gate_off)
        setenv("ASGD_TEST_SSP_GATE_OFF", "1", 1);
    else
        unsetenv("ASGD_TEST_SSP_GATE_OFF");
    CHECK(launch_run_binary(binary, a) == 0);
    unsetenv("ASGD_TEST_SSP_GATE_OFF");
    char *s = launch_file(name, "summary.json");
    measured_t m;
    m.clocks_max = launch_field(launch_section(s, "staleness_clocks"), "max");
    m.versions_max = launch_field(launch_section(s, "staleness_updates"), "max");
    m.pushes = launch_field(s, "pushes");
    CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
    free(s);
    m.fast_wait_s = 0.0;
    for (int k = 1; k < WORKERS; k++) {
        char file[32];
        snprintf(file, sizeof file, "worker-%d.json", k);
        char *w = launch_file(name, file);
        m.fast_wait_s += launch_field(w, "wait_s");
        free(w);
    }
    printf("%-8s staleness max %g clocks, %g versions; %g pushes; fast workers held %.3f s\n", name, m.clocks_max,
           m.versions_max, m.pushes, m.fast_wait_s);
    return m;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    const double clock_bound = BOUND, version_bound = (WORKERS - 1) * (2 * BOUND + 1) + BOUND;
    printf("bounds for s = %d, N = %d: %g clocks, %g versions\n", BOUND, WORKERS, clock_bound, version_bound);
    measured_t on = run("gate-on", 0, ASGD_HOOKS_BINARY);
    CHECK(on.clocks_max <= clock_bound);
    CHECK(on.versions_max <= version_bound);
    CHECK(on.fast_wait_s > 0.0);  // the gate held the fast workers back
    measured_t off = run("gate-off", 1, ASGD_HOOKS_BINARY);
    CHECK(off.fast_wait_s == 0.0);  // nobody was held
    CHECK(off.clocks_max > clock_bound);
    CHECK(off.versions_max > version_bound);
    // The release program reads no test switch: the same environment leaves its gate on.
    measured_t release = run("release", 1, ASGD_BINARY);
    CHECK(release.clocks_max <= clock_bound);
    CHECK(release.versions_max <= version_bound);
    CHECK(release.fast_wait_s > 0.0);
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
