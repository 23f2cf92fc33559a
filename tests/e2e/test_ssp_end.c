// The end of an ssp run, when a worker's last pull can never be answered.
//
// The gate's pull goes out ahead of the threads' allowance, naming the round
// after the one the last answer allowed. When the threads end on a round's
// boundary just as the answer for that round comes back, the next pull names
// a round past this worker's last push: the shards count its clock while it
// is live, and it pushes no more, so no answer comes. The worker gives that
// pull up (ps_client_pull_cancel) and finishes; waiting for it hung the run,
// the shard acknowledging the push the pull resends, so no timeout fired.
//
// The race makes that end now and then (under load, about once in many
// runs); the test switch ASGD_TEST_PULL_PAST_END=1 (engine/core/test_hooks.h,
// read by asgd-test-hooks only) makes it every time: each worker ends with a
// pull in flight for the round after its last. The run must end (before the
// fix it never did: ctest's timeout was the failure), every worker having
// given up exactly that one pull, every acknowledged push applied once, and
// every worker's clock at the rounds it trained.
//
// The clock at the end, when a push carried steps past its round: a push's
// clock counts the rounds its worker's threads had completed when the
// communication thread looked, and the delta is read after; threads that
// cross a round's end in between put that round's steps in under the
// earlier clock. If that push is the last, nothing is left to send, and the
// shards counted the worker one round short (seen once under TSan: worker 0
// at clock 89 of 90). ASGD_TEST_PUSH_AFTER_END=1 makes it every time: once
// training has ended, each worker pushes the steps it has not pushed under
// its clock as it stands, before its last push. Every worker's clock and the
// shards' must still reach the rounds trained, every push applied once.
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_ssp_end_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define WORKERS 3
#define ROUNDS 90  // 2,700 training examples (3,000 generated, 10% held out) / 3 workers / 10 steps a round

// One run of asgd-test-hooks with `hook` set for it alone, 3 workers, pushing
// and fetching every 10 steps under `sync` (staleness: ssp's bound, else
// NULL). Every acknowledged push applied once, every worker's clock and both
// shards' at ROUNDS, and each worker having given up `cancelled` pulls.
static void run(const char *name, const char *hook, const char *sync, const char *staleness, double cancelled) {
    char rd[300];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    const char *a[32] = {"launch",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=3000,dim=500,nnz=10",
                         "--servers",
                         "2",
                         "--workers",
                         "3",
                         "--threads",
                         "1",
                         "--push-every",
                         "10",
                         "--fetch-every",
                         "10",
                         "--sync",
                         sync,
                         "--quiet",
                         "--run-dir",
                         rd};
    size_t n = 20;
    if (staleness) a[n++] = "--staleness", a[n++] = staleness;
    a[n] = NULL;
    setenv(hook, "1", 1);
    CHECK(launch_run_binary(ASGD_HOOKS_BINARY, a) == 0);
    unsetenv(hook);
    char *s = launch_file(name, "summary.json");
    CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
    free(s);
    for (int k = 0; k < WORKERS; k++) {
        char file[32];
        snprintf(file, sizeof file, "worker-%d.json", k);
        char *w = launch_file(name, file);
        double gave_up = launch_field(w, "pulls_cancelled"), clock = launch_field(w, "clock");
        printf("%s: worker %d gave up %g pull(s) at the end, clock %g after %g pushes, %g pulls answered\n", name, k,
               gave_up, clock, launch_field(w, "pushes"), launch_field(w, "pulls"));
        CHECK(gave_up == cancelled);
        CHECK(clock == ROUNDS);
        CHECK(launch_field(w, "samples") == ROUNDS * 10);
        free(w);
    }
    for (int k = 0; k < 2; k++) {
        char file[32];
        snprintf(file, sizeof file, "server-%d.json", k);
        char *srv = launch_file(name, file);
        CHECK(launch_field(srv, "min_clock") == ROUNDS && launch_field(srv, "max_clock") == ROUNDS);
        free(srv);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    run("bound-0", "ASGD_TEST_PULL_PAST_END", "ssp", "0", 1.0);
    run("bound-2", "ASGD_TEST_PULL_PAST_END", "ssp", "2", 1.0);
    run("push-after-end", "ASGD_TEST_PUSH_AFTER_END", "asp", NULL, 0.0);  // asp's pulls name no round: none given up
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
