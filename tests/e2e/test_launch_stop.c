// asgd launch stopped or disturbed, and what it keeps (docs/reliability.md, "Signals"):
//   a) SIGINT while the workers train under --worker-eval off: the live line
//      counted samples before any worker finished (from the workers' live
//      files); exit 130, the workers left, summary.json (and stdout) say
//      "interrupted": true, the model is saved and reads back; no worker's
//      JSON on stderr, and the final line printed once;
//   b) asgd merge RUN_DIR rebuilds (a)'s staleness.csv, merged.csv and
//      summary.json from the records: the same figures, and with
//      --save-model the same model bytes;
//   c) SIGTERM to an allreduce launch: exit 143, summary interrupted, worker
//      0's model saved, the replicas' parameters the same (a worker caught in
//      the exchange its peer left ends with the last round both applied);
//   d) a second signal while the first is being served (a worker inside a
//      60 s step) kills the launcher at once, and its children with it;
//   e) a worker the server evicts (SIGSTOPped after the other finished) and
//      then finishes without, set going again: it ends, the run merges (exit
//      0), summary.json counts it in workers_evicted and samples_evicted;
//   f) a server that dies before the rendezvous completes (the test build's
//      ASGD_TEST_SERVER_FAIL_EARLY) ends the launch naming it, with
//      --server-replicas 2 too (its first replica: nothing to take over
//      from), and --restart-servers says what to do;
//   g) a server whose shard the machine cannot hold (the test build's
//      ASGD_TEST_MEMORY_AVAILABLE) refuses before the run starts, saying how
//      many bytes it needs, and so does `asgd train` with a model too large.
// Every wait is a hang bound far below the runs' --timeout-ms, not a timing
// assertion: without the fixes (e) and (f) wait out 600 s and fail.
#include <sys/stat.h>

#include "engine/run/model_file.h"
#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_launch_stop_XXXXXX";

#define HANG_S 120.0
#define DATA "gen:sparse:n=6000,dim=500,nnz=10"

static int add_args(const char **a, int n, const char *const *more) {
    for (; *more; more++) a[n++] = *more;
    return n;
}

static void expect(const char *text, const char *needle) {
    if (!strstr(text, needle)) {
        fprintf(stderr, "expected \"%s\" in:\n%s\n", needle, text);
        exit(1);
    }
}

// Lines of s that start with prefix and hold needle.
static size_t lines_with(const char *s, const char *prefix, const char *needle) {
    size_t n = 0;
    while (*s) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char line[4096];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), s);
        n += strncmp(line, prefix, strlen(prefix)) == 0 && strstr(line, needle);
        s += len + (end != NULL);
    }
    return n;
}

// Waits (hang-bounded) until path holds a launch progress line showing more than 0 samples.
static int wait_counting_line(const char *path) {
    for (double until = proc_now_s() + HANG_S; proc_now_s() < until; proc_sleep_ms(20)) {
        char *text = proc_slurp(path);
        int found = 0;
        for (const char *p = text; (p = strstr(p, "s of training, ")) != NULL; p++)
            if (strtod(p + strlen("s of training, "), NULL) > 0) found = 1;
        free(text);
        if (found) return 1;
    }
    return 0;
}

static int alive(pid_t pid) {
    char *stat = proc_slurp(proc_path("/proc", "%d/stat", (int)pid));
    const char *p = strrchr(stat, ')');
    int live = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
    free(stat);
    return live;
}

static unsigned char *file_bytes(const char *path, size_t *len) {
    struct stat st;
    *len = stat(path, &st) == 0 ? (size_t)st.st_size : 0;
    unsigned char *bytes = malloc(*len + 1);
    FILE *f = fopen(path, "rb");
    CHECK(bytes && f && fread(bytes, 1, *len, f) == *len);
    fclose(f);
    return bytes;
}

// The samples worker k's live file (RUN_DIR/worker-K.live) counts, or 0.
static double live_samples(const char *rd, size_t k) {
    FILE *f = fopen(proc_path(rd, "worker-%zu.live", k), "r");
    double samples = 0;
    if (f && fscanf(f, "%lf", &samples) != 1) samples = 0;
    if (f) fclose(f);
    return samples;
}

// A worker's live file against its JSON: the replica's steps, pushes and
// pulls it counted as they happened never exceed what the worker reported at
// the end (the live counters are written at ticks, the JSON after the last
// push and pull).
static void check_live_counts(const char *rd, size_t k) {
    FILE *f = fopen(proc_path(rd, "worker-%zu.live", k), "r");
    CHECK(f);
    double samples, rate, wall, steps, pushes, pulls;
    CHECK(fscanf(f, "%lf %lf %lf %lf %lf %lf", &samples, &rate, &wall, &steps, &pushes, &pulls) == 6);
    fclose(f);
    char *w = proc_slurp(proc_path(rd, "worker-%zu.json", k));
    CHECK(steps <= proc_json_number(w, NULL, "updates") && samples <= proc_json_number(w, NULL, "samples"));
    CHECK(pushes <= proc_json_number(w, NULL, "pushes") && pulls <= proc_json_number(w, NULL, "pulls"));
    free(w);
}

// a) and b)
static void interrupted_launch_and_merge(void) {
    const char *rd = proc_path(dir, "a"), *model = proc_path(dir, "a.model");
    char rd_s[600], model_s[600];
    snprintf(rd_s, sizeof rd_s, "%s", rd);
    snprintf(model_s, sizeof model_s, "%s", model);
    // Every step of worker 1 sleeps 2 ms: it is still training when the signal comes.
    const char *a[64] = {ASGD_BINARY,
                         "launch",
                         "--model",
                         "logreg",
                         "--data",
                         DATA,
                         "--workers",
                         "2",
                         "--epochs",
                         "100000",
                         "--worker-eval",
                         "off",
                         "--delay-worker",
                         "0:2,1:2",
                         "--progress-every",
                         "0.05",
                         "--run-dir",
                         rd_s,
                         "--save-model",
                         model_s,
                         NULL};
    char out[600], err[600];  // kept: proc_path's buffers rotate
    snprintf(out, sizeof out, "%s", proc_path(dir, "a.out"));
    snprintf(err, sizeof err, "%s", proc_path(dir, "a.err"));
    pid_t launcher = proc_start(a, out, err);
    CHECK(wait_counting_line(err));  // the event: the live line counts samples while every worker trains
    CHECK(kill(launcher, SIGINT) == 0);
    int st = proc_wait(launcher, HANG_S);
    char *e = proc_slurp(err), *o = proc_slurp(out);
    char *summary = proc_slurp(proc_path(rd_s, "summary.json"));
    printf("a) SIGINT: exit %d, %zu progress lines, %.0f samples, workers_left %.0f, interrupted %s\n", st,
           lines_with(e, "asgd launch: ", "s of training"), proc_json_number(summary, NULL, "samples"),
           proc_json_number(summary, NULL, "workers_left"), strstr(summary, "\"interrupted\":true") ? "true" : "false");
    CHECK(st == 130);
    expect(e, "asgd launch: signal 2 (Interrupt): stopping the run in order");
    expect(e, "marked interrupted; the model saved");
    CHECK(strstr(summary, "\"interrupted\":true") && strstr(o, "\"interrupted\":true"));
    CHECK(proc_json_number(summary, NULL, "workers_left") == 2);
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    CHECK(lines_with(e, "[worker", "\"role\":\"worker\"") == 0);  // their JSON is in the run directory
    CHECK(lines_with(e, "[worker 0]", "left the run on signal 15") == 1);
    // The final line once: its counts are the merged run's, on no other line.
    char final_count[64];
    snprintf(final_count, sizeof final_count, " %.0f samples,", proc_json_number(summary, NULL, "samples"));
    CHECK(lines_with(e, "asgd launch: ", final_count) == 1);
    check_live_counts(rd_s, 0);
    check_live_counts(rd_s, 1);
    model_file_t f;
    char why[512];
    CHECK_OK(model_file_read(model_s, &f, why, sizeof why), why);
    CHECK(f.info.count == f.info.n_params && f.info.split.recorded == 1);
    model_file_free(&f);

    // b) The merged files again, from the records alone.
    const char *merged[] = {"summary.json", "merged.csv", "staleness.csv"};
    char *before[3];
    for (int i = 0; i < 3; i++) {
        before[i] = proc_slurp(proc_path(rd_s, "%s", merged[i]));
        CHECK(unlink(proc_path(rd_s, "%s", merged[i])) == 0);
    }
    const char *again = proc_path(dir, "b.model");
    char again_s[600];
    snprintf(again_s, sizeof again_s, "%s", again);
    const char *m[] = {ASGD_BINARY, "merge", rd_s, "--save-model", again_s, NULL};
    st = proc_wait(proc_start(m, proc_path(dir, "b.out"), proc_path(dir, "b.err")), HANG_S);
    char *after = proc_slurp(proc_path(rd_s, "summary.json"));
    printf("b) asgd merge: exit %d, samples %.0f (launch %.0f), final accuracy %.9g (launch %.9g)\n", st,
           proc_json_number(after, NULL, "samples"), proc_json_number(before[0], NULL, "samples"),
           proc_json_number(after, NULL, "final_test_accuracy"),
           proc_json_number(before[0], NULL, "final_test_accuracy"));
    CHECK(st == 0);
    const char *same[] = {"samples", "final_test_accuracy", "final_test_loss", "pushes", "workers_left", "wall_s"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        CHECK(proc_json_number(after, NULL, same[i]) == proc_json_number(before[0], NULL, same[i]));
    CHECK(strstr(after, "\"interrupted\":true") && strstr(after, "\"launch_wall_s\":null"));
    for (int i = 1; i < 3; i++) {
        char *now = proc_slurp(proc_path(rd_s, "%s", merged[i]));
        CHECK(strcmp(now, before[i]) == 0);
        free(now);
    }
    size_t n1, n2;
    unsigned char *m1 = file_bytes(model_s, &n1), *m2 = file_bytes(again_s, &n2);
    CHECK(n1 > 0 && n1 == n2 && memcmp(m1, m2, n1) == 0);
    printf("   merged.csv and staleness.csv byte for byte, the model's %zu bytes too\n", n1);
    free(m1), free(m2), free(after);
    for (int i = 0; i < 3; i++) free(before[i]);
    free(e), free(o), free(summary);
}

// c)
static void interrupted_allreduce(void) {
    const char *rd = proc_path(dir, "c"), *model = proc_path(dir, "c.model");
    char rd_s[600], model_s[600];
    snprintf(rd_s, sizeof rd_s, "%s", rd);
    snprintf(model_s, sizeof model_s, "%s", model);
    const char *a[64] = {ASGD_BINARY,    "launch",    "--model",
                         "logreg",       "--data",    DATA,
                         "--workers",    "2",         "--sync",
                         "allreduce",    "--epochs",  "100000",
                         "--eval-every", "600",       "--progress-every",
                         "0.05",         "--run-dir", rd_s,
                         "--save-model", model_s,     NULL};
    pid_t launcher = proc_start(a, proc_path(dir, "c.out"), proc_path(dir, "c.err"));
    // The event: training, past two evaluation points (which the ring modes
    // evaluate after training, from snapshots: worker-0.csv is written at the
    // end, so the worker's live counts say it; not --quiet, which stops them).
    double samples = 0;
    for (double until = proc_now_s() + HANG_S; samples < 1200 && proc_now_s() < until;) {
        proc_sleep_ms(20);
        samples = live_samples(rd_s, 0);
    }
    CHECK(samples >= 1200);
    CHECK(kill(launcher, SIGTERM) == 0);
    int st = proc_wait(launcher, HANG_S);
    char *summary = proc_slurp(proc_path(rd_s, "summary.json"));
    printf("c) allreduce, SIGTERM: exit %d, interrupted %s, model %s\n", st,
           strstr(summary, "\"interrupted\":true") ? "true" : "false", access(model_s, R_OK) == 0 ? "saved" : "none");
    CHECK(st == 143);
    CHECK(strstr(summary, "\"interrupted\":true"));
    // Both stopped at a round every replica had applied, whichever saw the signal first.
    char *w0 = proc_slurp(proc_path(rd_s, "worker-0.json")), *w1 = proc_slurp(proc_path(rd_s, "worker-1.json"));
    const char *c0 = strstr(w0, "\"dense_params_checksum\":"), *c1 = strstr(w1, "\"dense_params_checksum\":");
    CHECK(c0 && c1 && strncmp(c0, c1, 36) == 0);
    free(w0), free(w1);
    model_file_t f;
    char why[512];
    CHECK_OK(model_file_read(model_s, &f, why, sizeof why), why);
    model_file_free(&f);
    free(summary);
}

// d)
static void second_signal_kills(void) {
    const char *rd = proc_path(dir, "d");
    char rd_s[600];
    snprintf(rd_s, sizeof rd_s, "%s", rd);
    // Worker 0's every step sleeps a minute after it is computed: asked to
    // leave, it finishes that step first, so the stop takes that long.
    const char *a[64] = {ASGD_BINARY, "launch", "--model",        "logreg",  "--data",    DATA, "--workers", "2",
                         "--epochs",  "100",    "--delay-worker", "0:60000", "--run-dir", rd_s, "--quiet",   NULL};
    char err[600];  // kept: proc_path's buffers rotate
    snprintf(err, sizeof err, "%s", proc_path(dir, "d.err"));
    pid_t launcher = proc_start(a, proc_path(dir, "d.out"), err);
    const char *csv = proc_path(rd_s, "worker-0.csv");
    for (double until = proc_now_s() + HANG_S; proc_count_lines(csv) < 2 && proc_now_s() < until;) proc_sleep_ms(20);
    CHECK(proc_count_lines(csv) >= 2);  // its first evaluation: every child is up
    pid_t kids[3] = {proc_find_child(launcher, "server", 0), proc_find_child(launcher, "worker", 0),
                     proc_find_child(launcher, "worker", 1)};
    CHECK(kids[0] > 0 && kids[1] > 0 && kids[2] > 0);
    CHECK(kill(launcher, SIGINT) == 0);
    CHECK(proc_wait_for_text(err, "stopping the run in order", HANG_S));  // the first is being served
    CHECK(kill(launcher, SIGINT) == 0);
    int st = proc_wait(launcher, HANG_S);
    size_t left = 3;
    for (double until = proc_now_s() + HANG_S; left > 0 && proc_now_s() < until;) {
        left = 0;
        for (int i = 0; i < 3; i++) left += (size_t)alive(kids[i]);
        if (left) proc_sleep_ms(20);
    }
    printf("d) a second SIGINT: the launcher %s (status %d), %zu children left\n",
           st == 128 + SIGINT ? "killed by SIGINT" : "ended otherwise", st, left);
    CHECK(st == 128 + SIGINT && left == 0);
    CHECK(access(proc_path(rd_s, "summary.json"), F_OK) != 0);
}

// e)
static void evicted_worker(void) {
    const char *rd = proc_path(dir, "e");
    char rd_s[600];
    snprintf(rd_s, sizeof rd_s, "%s", rd);
    // Worker 1 is slow (1 ms a step); once worker 0 has finished it is
    // stopped, evicted after 1 s of silence, and the server, with no worker
    // left, finishes 1 s later.
    const char *a[64] = {ASGD_BINARY,        "launch", "--model",        "logreg", "--data",         DATA,
                         "--workers",        "2",      "--epochs",       "40",     "--delay-worker", "1:1",
                         "--worker-timeout", "1000",   "--heartbeat-ms", "250",    "--timeout-ms",   "600000",
                         "--run-dir",        rd_s,     "--quiet",        NULL};
    char err[600];  // kept: proc_path's buffers rotate
    snprintf(err, sizeof err, "%s", proc_path(dir, "e.err"));
    pid_t launcher = proc_start(a, proc_path(dir, "e.out"), err);
    const char *w0 = proc_path(rd_s, "worker-0.result");
    for (double until = proc_now_s() + HANG_S; access(w0, F_OK) != 0 && proc_now_s() < until;) proc_sleep_ms(10);
    CHECK(access(w0, F_OK) == 0);  // the event: worker 0 has finished
    pid_t w1 = proc_find_child(launcher, "worker", 1);
    CHECK(w1 > 0 && kill(w1, SIGSTOP) == 0);
    const char *s0 = proc_path(rd_s, "server-0.result");
    for (double until = proc_now_s() + HANG_S; access(s0, F_OK) != 0 && proc_now_s() < until;) proc_sleep_ms(10);
    CHECK(access(s0, F_OK) == 0);  // the server finished without worker 1
    CHECK(kill(w1, SIGCONT) == 0);
    int st = proc_wait(launcher, HANG_S);
    char *summary = proc_slurp(proc_path(rd_s, "summary.json")), *wj = proc_slurp(proc_path(rd_s, "worker-1.json"));
    char *e = proc_slurp(err);
    printf("e) evicted worker: exit %d, workers_evicted %.0f, samples_evicted %.0f of %.0f\n", st,
           proc_json_number(summary, NULL, "workers_evicted"), proc_json_number(summary, NULL, "samples_evicted"),
           proc_json_number(summary, NULL, "samples"));
    CHECK(st == 0);
    CHECK(proc_json_number(summary, NULL, "workers_evicted") == 1);
    CHECK(proc_json_number(summary, NULL, "samples_evicted") == proc_json_number(wj, NULL, "samples"));
    CHECK(proc_json_number(summary, NULL, "samples_evicted") > 0);
    CHECK(strstr(wj, "\"evicted\":true"));
    expect(e, "asgd worker 1: the servers finished the run without it");
    free(summary), free(wj), free(e);
}

// f) the test build's server 0 fails before it joins, every time.
static void server_dies_before_rendezvous(void) {
    setenv("ASGD_TEST_SERVER_FAIL_EARLY", "0", 1);  // read by the test build only
    const char *const cases[][8] = {
        {NULL},
        {"--server-replicas", "2", NULL},
        {"--restart-servers", "1", "--checkpoint-every", "0.1", NULL},
    };
    const char *const names[] = {"plain", "--server-replicas 2", "--restart-servers 1"};
    for (int c = 0; c < 3; c++) {
        char rd[600];
        snprintf(rd, sizeof rd, "%s/f%d", dir, c);
        const char *a[64] = {ASGD_HOOKS_BINARY, "launch", "--model",   "logreg", "--data", DATA, "--workers", "2",
                             "--timeout-ms",    "600000", "--run-dir", rd,       "--quiet"};
        int n = add_args(a, 13, cases[c]);
        a[n] = NULL;
        char err[600];
        snprintf(err, sizeof err, "%s", proc_path(dir, "f%d.err", c));
        int st = proc_wait(proc_start(a, proc_path(dir, "f%d.out", c), err), HANG_S);
        char *e = proc_slurp(err);
        printf("f) server 0 dies before the rendezvous, %s: exit %d\n%s", names[c], st, e);
        CHECK(st == 1);
        expect(e, "asgd launch: server 0 (pid ");
        expect(e,
               "failed: exit status 1: asgd server 0: ASGD_TEST_SERVER_FAIL_EARLY=0: failing before joining the run");
        CHECK(!strstr(e, "refused key"));
        if (c == 1) expect(e, "died before the run's processes had met");
        if (c == 2) expect(e, "nothing to restart it from; its message below says why it failed");
        free(e);
    }
    unsetenv("ASGD_TEST_SERVER_FAIL_EARLY");
}

// g) a server whose shard the machine cannot hold (the test build's
// ASGD_TEST_MEMORY_AVAILABLE: 10 MB, which holds each worker's ~100,000
// weights) refuses before the run starts, with the bytes it needs; so does a
// single process whose model it cannot hold.
// Runs args (output files named after `name` in dir), which must exit 1 with
// `needle` on stderr; what = what the case is, for the log.
static void expect_refused_run(const char *const *args, const char *name, const char *what, const char *needle) {
    char out[600], err[600];
    snprintf(out, sizeof out, "%s", proc_path(dir, "%s.out", name));
    snprintf(err, sizeof err, "%s", proc_path(dir, "%s.err", name));
    int st = proc_wait(proc_start(args, out, err), HANG_S);
    char *e = proc_slurp(err);
    printf("g) %s: exit %d\n%s", what, st, e);
    CHECK(st == 1);
    expect(e, needle);
    free(e);
}

static void too_large_for_memory(void) {
    setenv("ASGD_TEST_MEMORY_AVAILABLE", "10000000", 1);  // read by the test build only
    const char *a[] = {ASGD_HOOKS_BINARY,   "launch", "--model",   "logreg", "--data",  "gen:sparse:n=2000,dim=1000000",
                       "--servers",         "1",      "--workers", "2",      "--quiet", "--run-dir",
                       proc_path(dir, "g"), NULL};
    // 1,000,001 parameters at 20 bytes each under asp with sgd; logistic
    // regression makes its shard's starting values alone (no seeded model).
    expect_refused_run(
        a, "g", "a shard larger than the memory available",
        "asgd server 0: its shard of 1000001 of the model's 1000001 parameters needs 20.0 MB, more than the 10.0 "
        "MB this machine has available: run more --servers (on more machines) or train a smaller model");
    // Softmax (two classes: 2,000,002 parameters) draws its starting values:
    // its server makes the 8 MB seeded model for a moment beside its shard.
    const char *soft[] = {ASGD_HOOKS_BINARY,
                          "launch",
                          "--model",
                          "softmax",
                          "--data",
                          "gen:sparse:n=2000,dim=1000000",
                          "--servers",
                          "1",
                          "--workers",
                          "2",
                          "--quiet",
                          "--run-dir",
                          proc_path(dir, "g-soft"),
                          NULL};
    expect_refused_run(
        soft, "g-soft", "softmax's shard larger than the memory available",
        "asgd server 0: its shard of 2000002 of the model's 2000002 parameters needs 48.0 MB (40.0 MB the shard, "
        "8.0 MB the seeded model it starts from), more than the 10.0 MB this machine has available: run more "
        "--servers (on more machines) or train a smaller model");
    const char *t[] = {ASGD_HOOKS_BINARY, "train", "--model", "logreg", "--data", "gen:sparse:n=2000,dim=1000000",
                       "--threads",       "2",     "--quiet", NULL};
    // The weights (4 bytes) and 2 threads' gradients (9 bytes each) of 1,000,001 parameters.
    expect_refused_run(t, "g-train", "a model larger than the memory available",
                       "the model's 1000001 parameters need 22.0 MB (its weights and each of 2 threads' gradients), "
                       "more than the 10.0 MB this machine has available");
    unsetenv("ASGD_TEST_MEMORY_AVAILABLE");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    interrupted_launch_and_merge();
    interrupted_allreduce();
    second_signal_kills();
    evicted_worker();
    server_dies_before_rendezvous();
    too_large_for_memory();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
