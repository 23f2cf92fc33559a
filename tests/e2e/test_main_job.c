// The main job, experiments/async_vs_sync, fails when one of its runs fails:
// with an `asgd` whose BSP launches fail (a wrapper script this test writes,
// given as ASGD), the script exits 1 and names the run, writing no table
// (an earlier version warned, dropped the distributed rows and exited 0).
// CI runs the job itself, in a short form (.ci/run).
#include <sys/stat.h>

#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_main_job_XXXXXX";

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    const char *wrapper = proc_path(dir, "asgd-failing-bsp");
    FILE *f = fopen(wrapper, "w");
    CHECK(f);
    fprintf(f,
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = bsp ] && { echo 'asgd launch: provoked failure' >&2; exit 3; };"
            " done\nexec '%s' \"$@\"\n",
            ASGD_BINARY);
    CHECK(fclose(f) == 0 && chmod(wrapper, 0755) == 0);
    CHECK(setenv("ASGD", wrapper, 1) == 0);
    const char *out = proc_path(dir, "out");
    const char *argv[] = {ASGD_SOURCE_DIR "/experiments/async_vs_sync",
                          "--model",
                          "logreg",
                          "--out",
                          out,
                          "--",
                          "--train-limit",
                          "2000",
                          "--test-limit",
                          "500",
                          NULL};
    const char *err_path = proc_path(dir, "job.err");
    int status = proc_wait(proc_start(argv, proc_path(dir, "job.out"), err_path), 120.0);
    char *err = proc_slurp(err_path);
    printf("async_vs_sync with failing BSP launches: exit %d; it said:\n%s", status, err);
    CHECK(status == 1);
    CHECK(strstr(err, "async_vs_sync: the launch --sync bsp run failed (exit 3)"));
    CHECK(strstr(err, "asgd launch: provoked failure"));
    CHECK(access(proc_path(out, "dist-ssp/summary.json"), F_OK) == 0);  // the runs before it ran
    CHECK(access(proc_path(out, "summary.csv"), F_OK) != 0);  // and no table was written
    free(err);
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
