// asgd launch --restart-servers N: a server shard SIGKILLed mid-run is started
// again by the launcher from its last checkpoint and the run completes.
//
//   a) asp, one server, two workers: server 0 is killed once its checkpoint
//      holds 200 pushes and it has applied 40 more after it (its later
//      checkpoints frozen meanwhile: a directory where the next one would be
//      written). The launch exits 0; summary.json counts one restart and the
//      pushes lost; the shard's records say the same, that count is at least
//      what the test saw applied after the checkpoint (less at most one per
//      worker: the last push, its acknowledgement lost, is resent and applied
//      again), and for every worker and shard the acknowledged pushes are
//      exactly the applied ones plus the lost ones, with none unresolved.
//   b) the same under bsp with two servers, server 1 killed.
//   c) --restart-servers 0: the same kill fails the run, naming the server.
//   d) refused: --restart-servers under allreduce, and without --checkpoint-every.
//
// The kill is triggered by counts read from the shard's files (its checkpoint,
// and the ledger it keeps beside it), never by a time window; the waits have
// hang bounds only.
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "engine/run/dist.h"
#include "engine/run/run_record.h"
#include "net/ps_client.h"
#include "tests/support/proc_support.h"

#define WORKERS 2
#define HANG_S 120.0  // a bound on every wait, never a window
#define IN_CHECKPOINT 200  // pushes the checkpoint holds before it is frozen
#define AFTER_CHECKPOINT 40  // pushes applied after it before the kill

static char dir[] = "/tmp/asgd_restartsrv_XXXXXX";

// The launch's ledger layout (net/ps_server.c): per worker, pushes applied and the last clock + 1.
static const char ledger_magic[8] = {'A', 'S', 'G', 'D', 'A', 'P', 'P', 'L'};

// Pushes applied by shard `s` from all workers, as its checkpoint holds them; -1 while it has none.
static long checkpoint_pushes(const char *ck, int s) {
    char err[512];
    ckpt_file_t *f = ckpt_file_read(proc_path(ck, "server-%d.ckpt", s), err, sizeof err);
    if (!f) return -1;
    uint64_t counts[WORKERS];
    int rc = ckpt_file_get(f, "ps.pushes_total", counts, sizeof counts, err, sizeof err);
    ckpt_file_free(&f);
    return rc == 0 ? (long)(counts[0] + counts[1]) : -1;
}

// Pushes applied by shard `s` from all workers so far, from its live ledger; -1 while unreadable.
static long ledger_pushes(const char *ck, int s) {
    uint64_t v[2 * WORKERS];
    size_t held = 0;
    char err[512];
    if (counter_file_read(proc_path(ck, "server-%d.ckpt.ledger", s), ledger_magic, 2 * WORKERS, v, &held, err,
                          sizeof err) != 0 ||
        held != 2 * WORKERS)
        return -1;
    return (long)(v[0] + v[2]);
}

typedef struct outcome {
    int status;  // the launcher's exit status
    long seen_after;  // pushes the test saw applied after the frozen checkpoint, before the kill
    pid_t victim;
    char rd[400], ck[450];
} outcome_t;

// Launches a run and SIGKILLs server `victim` once its checkpoint holds
// IN_CHECKPOINT pushes and it has applied AFTER_CHECKPOINT more.
static void run_and_kill(const char *name, const char *sync, int servers, int victim, const char *restarts,
                         outcome_t *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->rd, sizeof o->rd, "%s/%s", dir, name);
    snprintf(o->ck, sizeof o->ck, "%s/ck", o->rd);
    CHECK(mkdir(o->rd, 0755) == 0 && mkdir(o->ck, 0755) == 0);
    char servers_text[8];
    snprintf(servers_text, sizeof servers_text, "%d", servers);
    const char *a[] = {ASGD_BINARY,
                       "launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--servers",
                       servers_text,
                       "--workers",
                       "2",
                       "--sync",
                       sync,
                       "--epochs",
                       "4",
                       "--delay-worker",
                       "0:1,1:1",
                       "--heartbeat-ms",
                       "100",
                       "--retry-ms",
                       "200",
                       "--checkpoint-every",
                       "0.1",
                       "--checkpoint-dir",
                       o->ck,
                       "--restart-servers",
                       restarts,
                       "--quiet",
                       "--run-dir",
                       o->rd,
                       NULL};
    pid_t launcher = proc_start(a, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name));
    double until = proc_now_s() + HANG_S;
    while (checkpoint_pushes(o->ck, victim) < IN_CHECKPOINT) {
        CHECK(proc_now_s() < until);
        proc_sleep_ms(5);
    }
    // No later checkpoint: a directory where the shard writes its next one makes each fail.
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/server-%d.ckpt.tmp", o->ck, victim);
    while (mkdir(tmp, 0755) != 0) {  // EEXIST: a checkpoint being written
        CHECK(errno == EEXIST && proc_now_s() < until);
        proc_sleep_ms(1);
    }
    long held = checkpoint_pushes(o->ck, victim);
    CHECK(held >= IN_CHECKPOINT);
    while (ledger_pushes(o->ck, victim) < held + AFTER_CHECKPOINT) {
        CHECK(proc_now_s() < until);
        proc_sleep_ms(2);
    }
    o->victim = proc_find_child(launcher, "server", victim);
    CHECK(o->victim > 0);
    CHECK(kill(o->victim, SIGSTOP) == 0);  // its ledger stands still while it is read
    o->seen_after = ledger_pushes(o->ck, victim) - held;
    CHECK(kill(o->victim, SIGKILL) == 0);
    CHECK(rmdir(tmp) == 0);
    o->status = proc_wait(launcher, HANG_S);
    printf("%s: server %d (pid %d) killed after %ld pushes in its checkpoint and %ld after it; launch exit %d\n", name,
           victim, (int)o->victim, held, o->seen_after, o->status);
}

// The launch's stderr line about the killed server.
static char *victim_line(const char *name, const outcome_t *o, int victim) {
    char *log = proc_slurp(proc_path(dir, "%s.err", name));
    char needle[64];
    snprintf(needle, sizeof needle, "asgd launch: server %d (pid %d) failed: ", victim, (int)o->victim);
    char *line = strstr(log, needle);
    if (!line) {
        fprintf(stderr, "no \"%s\" in the launch's stderr:\n%s\n", needle, log);
        exit(1);
    }
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    char *copy = strdup(line);
    free(log);
    return copy;
}

// a), b): restarted, completed, and the lost pushes accounted for exactly.
static void restarted(const char *name, const char *sync, int servers, int victim) {
    outcome_t o;
    run_and_kill(name, sync, servers, victim, "1", &o);
    if (o.status != 0) {
        char *log = proc_slurp(proc_path(dir, "%s.err", name));
        fprintf(stderr, "asgd launch exited %d:\n%s\n", o.status, log);
        exit(1);
    }
    char *line = victim_line(name, &o, victim);
    printf("  %s\n", line);
    CHECK(strstr(line, "killed by signal 9") && strstr(line, "restarting it from") &&
          strstr(line, "restart 1 of at most 1"));
    free(line);
    char *summary = proc_slurp(proc_path(o.rd, "summary.json"));
    char key[8];
    snprintf(key, sizeof key, "%d", victim);
    double lost = proc_json_number(summary, NULL, "pushes_lost");
    printf("  summary: server_restarts %.0f, pushes_lost %.0f, acked_pushes_applied_once %s\n",
           proc_json_number(summary, NULL, "server_restarts"), lost,
           strstr(summary, "\"acked_pushes_applied_once\":true") ? "true" : "false");
    CHECK(proc_json_number(summary, NULL, "server_restarts") == 1);
    CHECK(proc_json_number(summary, "server_restarts_by_shard", key) == 1);
    CHECK(proc_json_number(summary, "pushes_lost_by_shard", key) == lost);
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    // What the shards' records say, and the workers' ledgers: exact.
    double lost_records = 0;
    uint64_t run_id = 0;
    server_result_t rec[2];
    char err[1200];
    for (int s = 0; s < servers; s++) {
        CHECK(run_record_read_server(o.rd, (size_t)s, &rec[s], err, sizeof err) == 0);
        CHECK(rec[s].lost_known && rec[s].workers == WORKERS);
        uint64_t shard_lost = rec[s].pushes_lost[0] + rec[s].pushes_lost[1];
        lost_records += (double)shard_lost;
        if (s != victim) CHECK(shard_lost == 0);
        if (s == 0) run_id = rec[0].run_id;
    }
    CHECK(lost_records == lost);
    // The pushes it applied after its checkpoint are lost, but for the last
    // one of each worker when its acknowledgement was lost with the shard
    // (the worker resends it, and the new shard applies it again).
    CHECK(lost >= (double)(o.seen_after - WORKERS) && lost <= (double)o.seen_after);
    for (int k = 0; k < WORKERS; k++) {
        ps_push_count_t sums[2];
        size_t incarnations = 0;
        CHECK(dist_push_ledger_sum(o.rd, run_id, (size_t)k, (size_t)servers, sums, &incarnations, err, sizeof err) ==
              0);
        CHECK(incarnations == 1);
        for (int s = 0; s < servers; s++) {
            uint64_t applied = rec[s].pushes_total[k], shard_lost = rec[s].pushes_lost[k];
            printf("  worker %d, shard %d: sent %llu, acknowledged %llu = applied %llu + lost %llu\n", k, s,
                   (unsigned long long)sums[s].sent, (unsigned long long)sums[s].acked, (unsigned long long)applied,
                   (unsigned long long)shard_lost);
            CHECK(sums[s].sent == sums[s].acked);  // nothing unresolved: the check is exact
            CHECK(sums[s].acked == applied + shard_lost);
        }
    }
    for (int s = 0; s < servers; s++) server_result_free(&rec[s]);
    char *server = proc_slurp(proc_path(o.rd, "server-%d.json", victim));
    CHECK(proc_json_number(server, NULL, "resumed_version") > 0);
    free(server);
    // The global model was still evaluated after the restart, and it learned.
    double acc = proc_json_number(summary, NULL, "final_test_accuracy");
    double loss = proc_json_number(summary, NULL, "final_test_loss");
    printf("  final_test_accuracy %.3f, final_test_loss %.4f\n", acc, loss);
    // The untrained model (all zeros) scores about 0.5 with loss ln 2; this
    // one beats it by at least 0.1 on both counts.
    CHECK(acc > 0.6);
    CHECK(loss <= M_LN2 - 0.1);
    free(summary);
}

// c) without restarts the kill fails the run, naming the server.
static void not_restarted(void) {
    outcome_t o;
    run_and_kill("no-restart", "asp", 1, 0, "0", &o);
    CHECK(o.status == 1);
    char *line = victim_line("no-restart", &o, 0);
    printf("  %s\n", line);
    CHECK(strstr(line, "killed by signal 9") && strstr(line, "stopped the others") && !strstr(line, "restarting"));
    free(line);
    CHECK(access(proc_path(o.rd, "summary.json"), F_OK) != 0);
}

// d) refusals (exit 2), each naming the flag.
static void refused(const char *name, const char *sync, const char *more, const char *needle) {
    const char *a[] = {ASGD_BINARY,
                       "launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=300,dim=20,nnz=4",
                       "--sync",
                       sync,
                       "--restart-servers",
                       "1",
                       "--run-dir",
                       proc_path(dir, "%s", name),
                       more,
                       more ? "0.1" : NULL,
                       NULL};
    char *log = proc_run_expect(a, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name), HANG_S, 2);
    printf("%s: refused: %s", name, log);
    CHECK(strstr(log, needle));
    free(log);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    refused("allreduce", "allreduce", "--checkpoint-every", "--restart-servers: --sync allreduce runs without servers");
    refused("no-checkpoints", "asp", NULL, "--restart-servers: a server restarts from its last checkpoint");
    restarted("asp", "asp", 1, 0);
    restarted("bsp", "bsp", 2, 1);
    not_restarted();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
