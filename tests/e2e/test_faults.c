// Worker failures in a real distributed run: a server and three workers as
// separate processes on 127.0.0.1 (started here, the way a user or a cluster
// script starts them), and a worker killed with SIGKILL in the middle.
//
//   a) SSP: the dead worker is evicted after --worker-timeout, and the other
//      two finish: their clocks run past the dead worker's by more than the
//      staleness bound, which they could not have done while it held them.
//   b) BSP: the dead worker is evicted, the round goes on without it, and the
//      worker restarted with the same command line rejoins at the current
//      round and finishes with the others: every clock ends equal.
//   c) ASP: a worker killed and restarted at once (before it could be
//      evicted) rejoins as well.
//   d) BSP with checkpoints every 0.2 s: the server is killed and restarted
//      with --resume; the workers reconnect by themselves, the rounds the
//      server lost are skipped, and the run completes with every acknowledged
//      push applied once, except those after the checkpoint (counted).
//   e) asgd launch --restart-workers 1: a worker it started is killed, the
//      launcher starts it again, it rejoins, and the run's summary counts the
//      pushes of both its incarnations and says every
//      acknowledged push was applied once.
// In every run each worker's acknowledged pushes (since it last joined) equal
// the pushes the server applied from it, a restarted worker's earlier pushes
// are still counted in its total, and the model learned.
//
// No check depends on how fast anything runs: a live worker's heartbeats
// come every 0.1 s and a worker is evicted after WORKER_TIMEOUT of silence
// (30 heartbeats missed, which no live process on a loaded machine or under
// TSan misses); a restarted worker is back before the others go on (they are
// stopped until the server has its HELLO); every wait on an event is bounded
// only to end a hang.
#include <stdarg.h>
#include <sys/stat.h>

#include "engine/run/dist.h"
#include "tests/support/proc_support.h"

#define WORKERS 3
#define WORKER_TIMEOUT "3000"  // ms
// BSP with a restarted worker: the others are stopped while it joins again
// (restart_holding_others), so they must outlast that stop unheard.
#define HELD_WORKER_TIMEOUT "10000"  // ms

static char dir[] = "/tmp/asgd_faults_XXXXXX";

typedef struct run {
    char rd[400];
    char coordinator[64];
    const char *sync;
    const char *worker_timeout;
    const char *checkpoint_dir;  // servers checkpoint there every 0.2 s (NULL: not)
    pid_t server, workers[WORKERS];
} run_t;

// The flags every process of the run gets.
static int common_args(const run_t *r, const char **a) {
    // 2 ms a step: longer than a pull's round trip on a slow build. ASP and SSP
    // workers pull in the background, so a step reads parameters as old as
    // the round trip is long in steps: at 0.5 ms under TSan the servers saw
    // staleness 17.5 and 19.9 clocks on average (9.4 and 8.0 at 2 ms), and a
    // CI run's ASP model ended at loss 0.644, short of the bound below.
    const char *common[] = {"--model",        "logreg",      "--data",         "gen:sparse:n=3000,dim=2000,nnz=20",
                            "--servers",      "1",           "--workers",      "3",
                            "--threads",      "1",           "--eval-every",   "300",
                            "--delay-worker", "0:2,1:2,2:2", "--heartbeat-ms", "100",
                            "--retry-ms",     "200",         "--timeout-ms",   "30000",
                            "--run-id",       "4242",        "--quiet",        NULL};
    int n = 0;
    for (const char *const *c = common; *c; c++) a[n++] = *c;
    a[n++] = "--sync";
    a[n++] = r->sync;
    // BSP rounds wait for every worker: one epoch takes as long as three of
    // ASP's; and each averages three gradients, so it takes larger steps.
    int bsp = strcmp(r->sync, "bsp") == 0;
    a[n++] = "--epochs";
    a[n++] = bsp ? "1" : "3";
    // ASP and SSP average the workers' pushes on the server (--server-lr =
    // --lr / 3; docs/distributed.md, "Summed deltas and the hot coordinates").
    // Summed, the three workers each corrected the bias within a push period
    // and the server added the three corrections up, so the global model
    // swung through a run (a worker's evaluations reached test loss 3.9 and
    // accuracy 0.45 in its second epoch) and a CI run's ASP model under TSan
    // ended at 0.647 (loss 0.607), under the bounds of check_learned.
    a[n++] = "--lr";
    a[n++] = bsp ? "2" : "0.5";
    if (!bsp) {
        a[n++] = "--server-lr";
        a[n++] = "0.1667";
    }
    if (strcmp(r->sync, "ssp") == 0) {
        a[n++] = "--staleness";
        a[n++] = "2";
    }
    a[n++] = "--worker-timeout";
    a[n++] = r->worker_timeout;
    a[n++] = "--coordinator";
    a[n++] = r->coordinator;
    a[n++] = "--run-dir";
    a[n++] = r->rd;
    if (r->checkpoint_dir) {
        a[n++] = "--checkpoint-dir";
        a[n++] = r->checkpoint_dir;
        a[n++] = "--checkpoint-every";
        a[n++] = "0.2";
    }
    return n;
}

static pid_t start_worker_of(const char *binary, const run_t *r, int id) {
    const char *a[64] = {binary, "worker"};
    int n = 2 + common_args(r, a + 2);
    char id_text[16];
    snprintf(id_text, sizeof id_text, "%d", id);
    a[n++] = "--id";
    a[n++] = id_text;
    a[n] = NULL;
    return proc_start(a, proc_path(r->rd, "worker-%d.out", id), proc_path(r->rd, "worker-%d.err", id));
}

static pid_t start_worker(const run_t *r, int id) { return start_worker_of(ASGD_BINARY, r, id); }

static int is_stopped(pid_t pid) { return proc_state(pid, NULL) == 'T'; }

static void start_run(run_t *r, const char *name, const char *sync, const char *worker_timeout) {
    snprintf(r->rd, sizeof r->rd, "%s/%s", dir, name);
    CHECK(mkdir(r->rd, 0755) == 0);
    r->checkpoint_dir = NULL;
    r->sync = sync;
    r->worker_timeout = worker_timeout;
    int port = proc_free_port();
    snprintf(r->coordinator, sizeof r->coordinator, "127.0.0.1:%d", port);
    char host[80];
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *a[64] = {ASGD_BINARY, "server"};
    int n = 2 + common_args(r, a + 2);
    a[n++] = "--id";
    a[n++] = "0";
    a[n++] = "--host-coordinator";
    a[n++] = host;
    a[n] = NULL;
    r->server = proc_start(a, proc_path(r->rd, "server-0.out"), proc_path(r->rd, "server-0.err"));
    for (int k = 0; k < WORKERS; k++) r->workers[k] = start_worker(r, k);
}

// Kills worker k once it is training (its log has an evaluation after the first).
static void kill_when_training(run_t *r, int k) {
    const char *csv = proc_path(r->rd, "worker-%d.csv", k);
    double until = proc_now_s() + 30.0;
    while (proc_count_lines(csv) < 3 && proc_now_s() < until) proc_sleep_ms(10);
    CHECK(proc_count_lines(csv) >= 3);
    CHECK(kill(r->workers[k], SIGKILL) == 0);
    CHECK(proc_wait(r->workers[k], 10.0) == 128 + SIGKILL);
}

// A restarted worker must be back before the others finish, or it finds no
// rounds left to train. The others are stopped (SIGSTOP) from its start until
// the server has taken its HELLO (an event in the server's log), then go on.
static void restart_holding_others(run_t *r, int k) {
    // The same command line, in the test build, which stops itself once its data
    // is loaded: the others are held for its join only, however long loading takes.
    char id_text[16];
    snprintf(id_text, sizeof id_text, "%d", k);
    CHECK(setenv("ASGD_TEST_WORKER_STOP_BEFORE_JOIN", id_text, 1) == 0);
    r->workers[k] = start_worker_of(ASGD_HOOKS_BINARY, r, k);
    CHECK(unsetenv("ASGD_TEST_WORKER_STOP_BEFORE_JOIN") == 0);
    double until = proc_now_s() + 60.0;  // a hang bound
    while (!is_stopped(r->workers[k]) && proc_now_s() < until) proc_sleep_ms(5);
    CHECK(is_stopped(r->workers[k]));
    for (int j = 0; j < WORKERS; j++)
        if (j != k) CHECK(kill(r->workers[j], SIGSTOP) == 0);
    CHECK(kill(r->workers[k], SIGCONT) == 0);
    char rejoined[32];
    snprintf(rejoined, sizeof rejoined, "worker %d rejoined", k);
    CHECK(proc_wait_for_text(proc_path(r->rd, "server-0.err"), rejoined, 60.0));
    for (int j = 0; j < WORKERS; j++)
        if (j != k) CHECK(kill(r->workers[j], SIGCONT) == 0);
}

static void show_stderr(const run_t *r, const char *name) {
    char *text = proc_slurp(proc_path(r->rd, "%s", name));
    fprintf(stderr, "---- %s:\n%s\n", name, text);
    free(text);
}

static void expect_exit(const run_t *r, pid_t pid, const char *name, double timeout_s) {
    int st = proc_wait(pid, timeout_s);
    if (st != 0) {
        char err_name[64];
        snprintf(err_name, sizeof err_name, "%s.err", name);
        fprintf(stderr, "%s exited with %d\n", name, st);
        show_stderr(r, err_name);
        show_stderr(r, "server-0.err");
        exit(1);
    }
}

// Each worker's acknowledged pushes (since it last joined) were applied once:
// the server counts the same number for it. A worker that was restarted (or,
// dead, has no JSON of its own) pushed before: its total over the run counts
// those pushes too, the others' totals are their pushes since joining.
// Returns the server's JSON.
static char *check_accounting(const run_t *r, int dead_worker, int restarted_worker) {
    char *server = proc_slurp(proc_path(r->rd, "server-0.json"));
    CHECK(server[0]);
    for (int k = 0; k < WORKERS; k++) {
        char key[8];
        snprintf(key, sizeof key, "%d", k);
        double total = proc_json_number(server, "pushes_total_by_worker", key);
        double applied = proc_json_number(server, "pushes_by_worker", key);
        if (k == dead_worker) {
            printf("  worker %d (dead): %.0f pushes applied\n", k, total);
            CHECK(total > 0 && applied == total);
            continue;
        }
        char *w = proc_slurp(proc_path(r->rd, "worker-%d.json", k));
        double acked = proc_json_number(w, NULL, "push_messages_acked");
        printf("  worker %d: %.0f pushes acknowledged, %.0f applied since it joined, %.0f in all\n", k, acked, applied,
               total);
        CHECK(acked > 0 && acked == applied);
        if (k == restarted_worker)
            CHECK(total > applied);  // its first life's pushes (it trained before the kill)
        else
            CHECK(total == applied);
        free(w);
    }
    return server;
}

// The model learned: a worker's evaluation of the global model. On this data
// (a 300-example test set, 45% positive) the untrained model scores 0.45 with
// loss ln 2 = 0.693, and no constant predictor beats 0.55 / 0.688. Measured
// at 0.5 ms a step, before pulls went to the background (4 runs of each
// case, 3 of them side by side): SSP 0.820-0.833 (loss 0.448-0.449), BSP
// with a restarted worker 0.767-0.777 (0.503-0.505), ASP 0.763-0.837
// (0.420-0.472), BSP with a resumed server 0.763-0.773 (0.503-0.506); at
// 2 ms, one run under TSan with two busy loops beside it: 0.833 (0.4486),
// 0.770 (0.5030), 0.837 (0.4150), 0.767 (0.5049). SSP and ASP since their
// pushes are averaged (common_args), one run of the plain build and two under
// TSan with a training run beside them: SSP 0.827-0.843 (loss 0.534-0.536),
// ASP 0.770-0.813 (0.502-0.523). The bounds sit more than 0.1 under the
// worst run's accuracy and at least 0.1 better than the untrained model on
// both counts.
static void check_learned(const char *worker_json) {
    double acc = proc_json_number(worker_json, NULL, "global_test_accuracy");
    double loss = proc_json_number(worker_json, NULL, "global_test_loss");
    printf("  global model: accuracy %.3f, test loss %.4f\n", acc, loss);
    CHECK(acc > 0.65 && loss <= M_LN2 - 0.1);
}

static double clock_of(const char *server, int k) {
    char key[8];
    snprintf(key, sizeof key, "%d", k);
    return proc_json_number(server, "clocks", key);
}

// a) SSP: the others finish without the dead worker.
static void ssp_dead_worker(void) {
    run_t r;
    start_run(&r, "ssp-dead", "ssp", WORKER_TIMEOUT);
    kill_when_training(&r, 2);
    double killed_at = proc_now_s();
    CHECK(proc_wait_for_text(proc_path(r.rd, "server-0.err"), "worker 2 silent", 20.0));
    printf("ssp: worker 2 killed; evicted after %.2f s\n", proc_now_s() - killed_at);
    expect_exit(&r, r.workers[0], "worker-0", 60.0);
    expect_exit(&r, r.workers[1], "worker-1", 60.0);
    expect_exit(&r, r.server, "server-0", 30.0);  // once the dead worker had a timeout more to come back
    char *server = check_accounting(&r, 2, -1);
    printf("  clocks: %.0f, %.0f, dead worker's %.0f; evictions %.0f\n", clock_of(server, 0), clock_of(server, 1),
           clock_of(server, 2), proc_json_number(server, NULL, "evictions"));
    CHECK(proc_json_number(server, NULL, "evictions") == 1);
    // Alive, the dead worker would have held them within 2 rounds of its clock.
    CHECK(clock_of(server, 0) > clock_of(server, 2) + 2 && clock_of(server, 1) > clock_of(server, 2) + 2);
    char *w0 = proc_slurp(proc_path(r.rd, "worker-0.json"));
    check_learned(w0);
    free(w0);
    free(server);
}

// b) BSP: evicted, restarted, rejoined at the current round.
static void bsp_restarted_worker(void) {
    run_t r;
    start_run(&r, "bsp-rejoin", "bsp", HELD_WORKER_TIMEOUT);
    kill_when_training(&r, 2);
    CHECK(proc_wait_for_text(proc_path(r.rd, "server-0.err"), "worker 2 silent", 40.0));
    restart_holding_others(&r, 2);
    for (int k = 0; k < WORKERS; k++) {
        char name[16];
        snprintf(name, sizeof name, "worker-%d", k);
        expect_exit(&r, r.workers[k], name, 60.0);
    }
    expect_exit(&r, r.server, "server-0", 30.0);
    printf("bsp: worker 2 killed, evicted, restarted\n");
    char *server = check_accounting(&r, -1, 2);
    char *w2 = proc_slurp(proc_path(r.rd, "worker-2.json"));
    double start = proc_json_number(w2, NULL, "start_clock");
    printf("  it rejoined at round %.0f; final rounds %.0f, %.0f, %.0f; evictions %.0f, rejoins %.0f\n", start,
           clock_of(server, 0), clock_of(server, 1), clock_of(server, 2), proc_json_number(server, NULL, "evictions"),
           proc_json_number(server, NULL, "rejoins"));
    CHECK(start > 0);
    CHECK(proc_json_number(server, NULL, "evictions") == 1 && proc_json_number(server, NULL, "rejoins") >= 1);
    // It skipped exactly the rounds it missed: everyone ends at the same round.
    CHECK(clock_of(server, 0) == clock_of(server, 1) && clock_of(server, 1) == clock_of(server, 2));
    check_learned(w2);
    free(w2);
    free(server);
}

// c) ASP: killed and restarted before the server noticed.
static void asp_quick_restart(void) {
    run_t r;
    start_run(&r, "asp-restart", "asp", "60000");  // no eviction: the restart comes long before
    kill_when_training(&r, 1);
    restart_holding_others(&r, 1);
    for (int k = 0; k < WORKERS; k++) {
        char name[16];
        snprintf(name, sizeof name, "worker-%d", k);
        expect_exit(&r, r.workers[k], name, 60.0);
    }
    expect_exit(&r, r.server, "server-0", 30.0);
    printf("asp: worker 1 killed and restarted at once\n");
    char *server = check_accounting(&r, -1, 1);
    char *w1 = proc_slurp(proc_path(r.rd, "worker-1.json"));
    printf("  it rejoined at clock %.0f; evictions %.0f, rejoins %.0f\n", proc_json_number(w1, NULL, "start_clock"),
           proc_json_number(server, NULL, "evictions"), proc_json_number(server, NULL, "rejoins"));
    CHECK(proc_json_number(w1, NULL, "start_clock") > 0);
    check_learned(w1);
    CHECK(proc_json_number(server, NULL, "evictions") == 0 && proc_json_number(server, NULL, "rejoins") >= 1);
    free(w1);
    free(server);
}

// d) BSP: the server is killed and resumed from its checkpoint.
static void bsp_restarted_server(void) {
    run_t r;
    static char ckdir[500];
    // start_run with checkpoints: the fields are set before the processes start.
    snprintf(r.rd, sizeof r.rd, "%s/bsp-server", dir);
    snprintf(ckdir, sizeof ckdir, "%s/ck", r.rd);
    CHECK(mkdir(r.rd, 0755) == 0);
    r.sync = "bsp";
    r.worker_timeout = WORKER_TIMEOUT;
    r.checkpoint_dir = ckdir;
    int port = proc_free_port();
    snprintf(r.coordinator, sizeof r.coordinator, "127.0.0.1:%d", port);
    char host[80];
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *a[64] = {ASGD_BINARY, "server"};
    int n = 2 + common_args(&r, a + 2);
    a[n++] = "--id";
    a[n++] = "0";
    const char **tail = a + n;
    a[n++] = "--host-coordinator";
    a[n++] = host;
    a[n] = NULL;
    r.server = proc_start(a, proc_path(r.rd, "server-0.out"), proc_path(r.rd, "server-0.err"));
    for (int k = 0; k < WORKERS; k++) r.workers[k] = start_worker(&r, k);
    // Killed once it has checkpointed and the workers are well into the run.
    const char *csv = proc_path(r.rd, "worker-0.csv");
    double until = proc_now_s() + 30.0;
    while ((proc_count_lines(csv) < 4 || access(proc_path(r.rd, "ck/server-0.ckpt"), R_OK) != 0) &&
           proc_now_s() < until)
        proc_sleep_ms(10);
    CHECK(proc_count_lines(csv) >= 4 && access(proc_path(r.rd, "ck/server-0.ckpt"), R_OK) == 0);
    CHECK(kill(r.server, SIGKILL) == 0);
    CHECK(proc_wait(r.server, 10.0) == 128 + SIGKILL);
    tail[0] = "--resume";  // the same command, resumed (no coordinator: the run has met already)
    tail[1] = ckdir;
    r.server = proc_start(a, proc_path(r.rd, "server-0.out"), proc_path(r.rd, "server-0.err"));
    for (int k = 0; k < WORKERS; k++) {
        char name[16];
        snprintf(name, sizeof name, "worker-%d", k);
        expect_exit(&r, r.workers[k], name, 60.0);
    }
    expect_exit(&r, r.server, "server-0", 30.0);
    char *server = proc_slurp(proc_path(r.rd, "server-0.json"));
    printf("bsp: server killed, resumed at version %.0f; %.0f rounds it had applied after that were lost and skipped\n",
           proc_json_number(server, NULL, "resumed_version"), proc_json_number(server, NULL, "rounds_skipped"));
    CHECK(proc_json_number(server, NULL, "resumed_version") > 0);
    // Every acknowledged push was applied (and kept, or counted lost) once.
    char why[512];
    int once = dist_check_pushes_applied_once(r.rd, 1, WORKERS, why, sizeof why);
    if (once != 0) fprintf(stderr, "exactly-once check: %s\n", why);
    CHECK(once == 0);
    double lost_all = 0;
    for (int k = 0; k < WORKERS; k++) {
        char key[8];
        snprintf(key, sizeof key, "%d", k);
        char *w = proc_slurp(proc_path(r.rd, "worker-%d.json", k));
        double acked = proc_json_number(w, NULL, "push_messages_acked");
        double applied = proc_json_number(server, "pushes_total_by_worker", key);
        double lost = proc_json_number(server, "pushes_lost_by_worker", key);
        printf(
            "  worker %d: %.0f pushes acknowledged, %.0f applied over the run, %.0f of them lost with the server; "
            "%.0f retries\n",
            k, acked, applied + lost, lost, proc_json_number(w, NULL, "retries"));
        // What is lost is what the server applied after its checkpoint: at most
        // one push per round it skipped on resuming (a lost push the worker
        // resent after the restart was applied again and is not lost).
        double skipped = proc_json_number(server, NULL, "rounds_skipped");
        CHECK(applied > 0 && lost <= skipped);
        lost_all += lost;
        check_learned(w);
        free(w);
    }
    // lost_all is 0 when the kill came right after a checkpoint: reported, not asserted.
    printf("  %.0f pushes lost in all\n", lost_all);
    CHECK(clock_of(server, 0) == clock_of(server, 1) && clock_of(server, 1) == clock_of(server, 2));
    free(server);
}

// e) the launcher restarts a worker that died.
static void launch_restarts_worker(void) {
    char rd[400], out[450], err_path[450], command[700];
    snprintf(rd, sizeof rd, "%s/launch-restart", dir);
    snprintf(out, sizeof out, "%s.out", rd);
    snprintf(err_path, sizeof err_path, "%s.err", rd);
    const char *a[] = {ASGD_BINARY,
                       "launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--workers",
                       "3",
                       "--sync",
                       "ssp",
                       "--staleness",
                       "2",
                       "--epochs",
                       "3",
                       "--eval-every",
                       "300",
                       "--delay-worker",
                       "0:2,1:2,2:2",
                       "--heartbeat-ms",
                       "100",
                       "--worker-timeout",
                       WORKER_TIMEOUT,
                       "--retry-ms",
                       "200",
                       "--restart-workers",
                       "1",
                       "--quiet",
                       "--run-dir",
                       rd,
                       NULL};
    pid_t launcher = proc_start(a, out, err_path);
    char csv[450];
    snprintf(csv, sizeof csv, "%s/worker-1.csv", rd);
    double until = proc_now_s() + 30.0;
    while (proc_count_lines(csv) < 3 && proc_now_s() < until) proc_sleep_ms(10);
    CHECK(proc_count_lines(csv) >= 3);
    // "[w]" keeps the pattern from matching the shell that runs pkill.
    snprintf(command, sizeof command, "pkill -KILL -f -- '[w]orker .*--id 1 --coordinator .*--run-dir %s$'", rd);
    CHECK(system(command) == 0);
    int st = proc_wait(launcher, 90.0);
    char *log = proc_slurp(err_path), *summary = proc_slurp(out);
    if (st != 0) {
        fprintf(stderr, "asgd launch exited with %d:\n%s\n", st, log);
        exit(1);
    }
    const char *line = strstr(log, "asgd launch: worker 1");
    printf("launch: %.*s", line ? (int)(strchr(line, '\n') - line + 1) : 0, line ? line : "");
    CHECK(line && strstr(line, "killed by signal 9") && strstr(line, "restarting it"));
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    char server_json[450];
    snprintf(server_json, sizeof server_json, "%s/server-0.json", rd);
    char *server = proc_slurp(server_json);
    printf("  the run completed; rejoins %.0f; every acknowledged push applied once\n",
           proc_json_number(server, NULL, "rejoins"));
    CHECK(proc_json_number(server, NULL, "rejoins") >= 1);
    // The summary's pushes count both of worker 1's incarnations: every push
    // the shard applied, plus at most the one the kill left in flight.
    double applied = 0;
    for (int k = 0; k < 3; k++) {
        char key[8];
        snprintf(key, sizeof key, "%d", k);
        applied += proc_json_number(server, "pushes_total_by_worker", key);
    }
    double pushes = proc_json_number(summary, NULL, "pushes");
    printf("  summary: %.0f pushes; the shard applied %.0f\n", pushes, applied);
    CHECK(applied <= pushes && pushes <= applied + 1);
    free(server);
    free(log);
    free(summary);
}

// Two parts, each its own ctest (tests/tests.cmake: PARTS), so that they run
// side by side: "evictions" (a), b)) and "restarts" (c)-e)); no argument runs both.
int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const char *const parts[] = {"evictions", "restarts"};
    int part = test_part(argc, argv, parts, 2), evictions = part != 1, restarts = part != 0;
    CHECK(mkdtemp(dir));
    if (evictions) {
        ssp_dead_worker();
        bsp_restarted_worker();
    }
    if (restarts) {
        asp_quick_restart();
        bsp_restarted_server();
        launch_restarts_worker();
    }
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
