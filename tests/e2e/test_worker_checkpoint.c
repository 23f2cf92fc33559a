// Worker checkpoints (asp, ssp): asgd worker --checkpoint-every S writes
// DIR/worker-K.ckpt, and a worker restarted with --resume DIR goes on from it.
//
//   a) asp, one server, one worker of two threads, batch 1: the worker's
//      first checkpoint past its first epoch (2700 samples) is its last, and from then on it
//      neither pushes nor pulls (ASGD_TEST_WORKER_FREEZE_AT_SAMPLES, test
//      only) while its threads train on. Once its progress file shows 200
//      steps past the checkpoint it is SIGKILLed and started again with
//      --resume. It goes on from the checkpoint's position and clock (read
//      from the file here), not from scratch; its samples are the planned
//      ones; samples_retrained is exactly the steps the dead process took
//      after the checkpoint (from its progress file, read here after the
//      kill); and every acknowledged push was applied once.
//   b) refused, one line naming the file: a checkpoint of another layout
//      (--threads 3), a missing one; --resume under bsp.
//   c) asgd launch --sync ssp --restart-workers 1 --checkpoint-every 0.1:
//      worker 1 is SIGKILLed once its second checkpoint is on disk; the
//      launcher restarts it from the checkpoint, it resumes, the run ends with
//      the planned samples and every acknowledged push applied once.
//
// Kills are triggered by what the worker's files hold, never by a time
// window; the waits have hang bounds only.
#include <sys/stat.h>

#include "datasets/storage/checkpoint_file.h"
#include "engine/run/dist.h"
#include "engine/replica/worker_checkpoint.h"
#include "tests/support/proc_support.h"

#define HANG_S 120.0
#define N_TRAIN 2700  // gen:...n=3000 keeps 10% for testing
#define EPOCHS 4
#define AFTER 200  // steps the killed worker takes after its checkpoint

static char dir[] = "/tmp/asgd_wckpt_XXXXXX";

// What a worker checkpoint holds, read straight from its sections.
typedef struct seen {
    uint64_t seq, clock, steps[2], samples[2];
} seen_t;

static int read_ckpt(const char *path, seen_t *s) {
    char err[512];
    ckpt_file_t *f = ckpt_file_read(path, err, sizeof err);
    if (!f) return -1;
    uint64_t counts[4];
    int rc = ckpt_file_get(f, "wk.counts", counts, sizeof counts, err, sizeof err) == 0 &&
                     ckpt_file_get(f, "wk.steps", s->steps, sizeof s->steps, err, sizeof err) == 0 &&
                     ckpt_file_get(f, "wk.samples", s->samples, sizeof s->samples, err, sizeof err) == 0
                 ? 0
                 : -1;
    ckpt_file_free(&f);
    s->seq = counts[0];
    s->clock = counts[1];
    return rc;
}

static const char *const common[] = {"--model",        "logreg", "--data",     "gen:sparse:n=3000,dim=2000,nnz=20",
                                     "--threads",      "2",      "--batch",    "1",
                                     "--epochs",       "4",      "--lr",       "0.5",
                                     "--heartbeat-ms", "100",    "--retry-ms", "200",
                                     "--timeout-ms",   "30000",  "--run-id",   "4343",
                                     "--quiet",        NULL};

static int role_args(const char **a, const char *role, const char *rd, const char *coordinator, int workers) {
    int n = 0;
    a[n++] = ASGD_BINARY;
    a[n++] = role;
    for (const char *const *c = common; *c; c++) a[n++] = *c;
    a[n++] = "--servers";
    a[n++] = "1";
    a[n++] = "--workers";
    a[n++] = workers == 1 ? "1" : "2";
    a[n++] = "--coordinator";
    a[n++] = coordinator;
    a[n++] = "--run-dir";
    a[n++] = rd;
    a[n++] = "--id";
    a[n++] = "0";
    return n;
}

static void show(const char *path) {
    char *text = proc_slurp(path);
    fprintf(stderr, "---- %s:\n%s\n", path, text);
    free(text);
}

static void expect_ok(pid_t pid, const char *rd, const char *name) {
    int st = proc_wait(pid, HANG_S);
    if (st != 0) {
        fprintf(stderr, "%s exited with %d\n", name, st);
        show(proc_path(rd, "%s.err", name));
        show(proc_path(rd, "server-0.err"));
        exit(1);
    }
}

static void resume_exact(void) {
    char rd[400], coordinator[64], host[80];
    snprintf(rd, sizeof rd, "%s/a", dir);
    CHECK(mkdir(rd, 0755) == 0);
    int port = proc_free_port();
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *a[64];
    int n = role_args(a, "server", rd, coordinator, 1);
    a[n++] = "--host-coordinator";
    a[n++] = host;
    a[n] = NULL;
    pid_t server = proc_start(a, proc_path(rd, "server-0.out"), proc_path(rd, "server-0.err"));
    // The worker: 0.3 ms after each step, checkpoints every 0.05 s of training.
    n = role_args(a, "worker", rd, coordinator, 1);
    const char *ck[] = {"--delay-worker", "0:0.3", "--checkpoint-every", "0.05", NULL};
    for (const char *const *c = ck; *c; c++) a[n++] = *c;
    a[n] = NULL;
    a[0] = ASGD_HOOKS_BINARY;  // the test build reads the switch below
    setenv("ASGD_TEST_WORKER_FREEZE_AT_SAMPLES", "2700", 1);
    pid_t worker = proc_start(a, proc_path(rd, "worker-a.out"), proc_path(rd, "worker-a.err"));
    unsetenv("ASGD_TEST_WORKER_FREEZE_AT_SAMPLES");
    const char *ckpt = proc_path(rd, "worker-0.ckpt");
    char progress[600];
    snprintf(progress, sizeof progress, "%s/worker-0.progress", rd);
    // The frozen checkpoint: the first with a whole epoch (2700 samples) behind it.
    seen_t at;
    double until = proc_now_s() + HANG_S;
    while ((read_ckpt(ckpt, &at) != 0 || at.samples[0] + at.samples[1] < N_TRAIN) && proc_now_s() < until)
        proc_sleep_ms(5);
    CHECK(at.samples[0] + at.samples[1] >= N_TRAIN);
    uint64_t dead[2] = {0, 0}, carried_r, carried_s;
    char err[512];
    while (proc_now_s() < until) {
        if (worker_progress_read(progress, 2, dead, &carried_r, &carried_s, err, sizeof err) == 0 &&
            dead[0] + dead[1] >= at.steps[0] + at.steps[1] + AFTER)
            break;
        proc_sleep_ms(2);
    }
    CHECK(kill(worker, SIGKILL) == 0);
    CHECK(proc_wait(worker, 10.0) == 128 + SIGKILL);
    seen_t last;
    CHECK(read_ckpt(ckpt, &last) == 0);
    CHECK(last.seq == at.seq);  // frozen: none after it
    CHECK(worker_progress_read(progress, 2, dead, &carried_r, &carried_s, err, sizeof err) == 0);
    uint64_t retrained = dead[0] - at.steps[0] + dead[1] - at.steps[1];  // batch 1: a step is a sample
    CHECK(dead[0] >= at.steps[0] && dead[1] >= at.steps[1] && retrained >= AFTER);
    printf("a) killed after checkpoint %llu (clock %llu, %llu samples); %llu steps after it\n",
           (unsigned long long)at.seq, (unsigned long long)at.clock,
           (unsigned long long)(at.samples[0] + at.samples[1]), (unsigned long long)retrained);

    n = role_args(a, "worker", rd, coordinator, 1);
    const char *again[] = {"--delay-worker", "0:0.3", "--checkpoint-every", "0.05", "--resume", rd, NULL};
    for (const char *const *c = again; *c; c++) a[n++] = *c;
    a[n] = NULL;
    worker = proc_start(a, proc_path(rd, "worker-b.out"), proc_path(rd, "worker-b.err"));
    expect_ok(worker, rd, "worker-b");
    expect_ok(server, rd, "server-0");
    char *json = proc_slurp(proc_path(rd, "worker-0.json"));
    printf("   resumed at %.0f samples, clock %.0f; %.0f samples in all, %.0f retrained, %.0f skipped\n",
           proc_json_number(json, NULL, "resumed_samples"), proc_json_number(json, NULL, "resumed_clock"),
           proc_json_number(json, NULL, "samples"), proc_json_number(json, NULL, "samples_retrained"),
           proc_json_number(json, NULL, "samples_skipped"));
    CHECK(strstr(json, "\"resumed\":true"));
    // From the checkpoint: its position and clock (past epoch 0, so not from scratch).
    CHECK(proc_json_number(json, NULL, "resumed_samples") == (double)(at.samples[0] + at.samples[1]));
    CHECK(proc_json_number(json, NULL, "resumed_clock") == (double)at.clock);
    CHECK(proc_json_number(json, NULL, "start_clock") == (double)at.clock);
    CHECK(proc_json_number(json, NULL, "samples") == (double)(N_TRAIN * EPOCHS));
    CHECK(proc_json_number(json, NULL, "samples_retrained") == (double)retrained);
    CHECK(proc_json_number(json, NULL, "samples_skipped") == 0);
    // Trained in all: the dead incarnation's steps plus the new one's (the planned
    // samples from the checkpoint's position on) = planned + retrained.
    double trained = (double)(dead[0] + dead[1]) + (double)(N_TRAIN * EPOCHS) - (double)(at.samples[0] + at.samples[1]);
    CHECK(trained == (double)(N_TRAIN * EPOCHS) + proc_json_number(json, NULL, "samples_retrained"));
    char why[512];
    CHECK(dist_check_pushes_applied_once(rd, 1, 1, why, sizeof why) == 0);
    printf("   every acknowledged push applied once\n");
    free(json);
}

static void refusals(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/a", dir);
    const char *a[64];
    // Another layout: --threads 3 against the checkpoint's 2.
    int n = role_args(a, "worker", rd, "127.0.0.1:9", 1);
    CHECK(strcmp(a[6], "--threads") == 0);
    a[7] = "3";
    a[n++] = "--resume";
    a[n++] = rd;
    a[n] = NULL;
    char *e = proc_run_expect(a, proc_path(dir, "ref1.out"), proc_path(dir, "ref1.err"), HANG_S, 1);
    printf("b) %s", e);
    CHECK(proc_count_lines(proc_path(dir, "ref1.err")) == 1);
    CHECK(strstr(e, "worker-0.ckpt") && strstr(e, "threads 2 in the checkpoint, 3 in this worker"));
    free(e);
    // No checkpoint there.
    n = role_args(a, "worker", rd, "127.0.0.1:9", 1);
    a[n++] = "--resume";
    a[n++] = dir;
    a[n] = NULL;
    e = proc_run_expect(a, proc_path(dir, "ref2.out"), proc_path(dir, "ref2.err"), HANG_S, 1);
    printf("   %s", e);
    CHECK(proc_count_lines(proc_path(dir, "ref2.err")) == 1 && strstr(e, "worker-0.ckpt"));
    free(e);
    // bsp workers do not checkpoint.
    n = role_args(a, "worker", rd, "127.0.0.1:9", 1);
    a[n++] = "--sync";
    a[n++] = "bsp";
    a[n++] = "--resume";
    a[n++] = rd;
    a[n] = NULL;
    e = proc_run_expect(a, proc_path(dir, "ref3.out"), proc_path(dir, "ref3.err"), HANG_S, 2);
    printf("   %s", e);
    CHECK(strstr(e, "--resume") && strstr(e, "asp and ssp"));
    free(e);
}

static void launch_end_to_end(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/c", dir);
    const char *a[] = {ASGD_BINARY,
                       "launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--servers",
                       "1",
                       "--workers",
                       "2",
                       "--threads",
                       "2",
                       "--batch",
                       "1",
                       "--epochs",
                       "4",
                       "--sync",
                       "ssp",
                       "--staleness",
                       "2",
                       "--lr",
                       "0.5",
                       "--delay-worker",
                       "0:0.3,1:0.3",
                       "--heartbeat-ms",
                       "100",
                       "--retry-ms",
                       "200",
                       "--restart-workers",
                       "1",
                       "--checkpoint-every",
                       "0.1",
                       "--quiet",
                       "--run-dir",
                       rd,
                       NULL};
    pid_t launcher = proc_start(a, proc_path(dir, "c.out"), proc_path(dir, "c.err"));
    const char *ckpt = proc_path(rd, "worker-1.ckpt");
    seen_t at = {0};
    double until = proc_now_s() + HANG_S;
    while ((read_ckpt(ckpt, &at) != 0 || at.seq < 2) && proc_now_s() < until) proc_sleep_ms(5);
    CHECK(at.seq >= 2);
    pid_t worker = proc_find_child(launcher, "worker", 1);
    CHECK(worker > 0);
    CHECK(kill(worker, SIGKILL) == 0);
    int st = proc_wait(launcher, HANG_S);
    char *log = proc_slurp(proc_path(dir, "c.err")), *summary = proc_slurp(proc_path(dir, "c.out"));
    if (st != 0) {
        fprintf(stderr, "asgd launch exited with %d:\n%s\n", st, log);
        exit(1);
    }
    const char *line = strstr(log, "asgd launch: worker 1");
    printf("c) %.*s", line ? (int)(strchr(line, '\n') - line + 1) : 0, line ? line : "");
    CHECK(line && strstr(line, "killed by signal 9") && strstr(line, "restarting it from") &&
          strstr(line, "worker-1.ckpt"));
    char *w1 = proc_slurp(proc_path(rd, "worker-1.json"));
    CHECK(strstr(w1, "\"resumed\":true"));
    // At the checkpoint seen before the kill or a later one, never from scratch.
    CHECK(proc_json_number(w1, NULL, "resumed_samples") >= (double)(at.samples[0] + at.samples[1]));
    CHECK(proc_json_number(w1, NULL, "resumed_clock") >= (double)at.clock);
    printf(
        "   worker 1 resumed at %.0f samples, clock %.0f (checkpoint %llu had %llu); %.0f retrained, %.0f "
        "skipped\n",
        proc_json_number(w1, NULL, "resumed_samples"), proc_json_number(w1, NULL, "resumed_clock"),
        (unsigned long long)at.seq, (unsigned long long)(at.samples[0] + at.samples[1]),
        proc_json_number(w1, NULL, "samples_retrained"), proc_json_number(w1, NULL, "samples_skipped"));
    CHECK(proc_json_number(summary, NULL, "samples") == (double)(N_TRAIN * EPOCHS));
    CHECK(proc_json_number(summary, NULL, "samples_retrained") == proc_json_number(w1, NULL, "samples_retrained"));
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    printf("   summary: %.0f samples, %.0f retrained; every acknowledged push applied once\n",
           proc_json_number(summary, NULL, "samples"), proc_json_number(summary, NULL, "samples_retrained"));
    free(w1);
    free(log);
    free(summary);
}

int main(void) {
    CHECK(mkdtemp(dir));
    resume_exact();
    refusals();
    launch_end_to_end();
    if (test_remove_tree(dir) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("ok\n");
    return 0;
}
