// asgd launch --server-replicas R: each shard runs as a primary and R - 1
// backups; a replica SIGKILLed mid-run is replaced (a backup takes over, and
// the launcher restarts the dead one as a backup that copies the live one's
// state) and no acknowledged push is lost.
//
//   a) asp, one shard, two workers: the primary (replica 0) is killed once the
//      workers' ledgers count KILL_AFTER acknowledged pushes. The launch exits
//      0; replica 1 says it took over and replica 0 that it copied its state;
//      the content check holds exactly (for every worker, the pushes sent =
//      acknowledged = applied by the shard, none lost, and summary.json's
//      acked_pushes_applied_once is true); both replicas end with
//      bit-identical parameters (their server-0-replica-I.values).
//   b), c), d) the same under ssp, bsp and hybrid.
//   e) asp, one replica after the other: replica 0 killed, then, once the
//      restarted replica 0 has joined as the backup (the record names it) and
//      KILL_AFTER more pushes were acknowledged, replica 1 (the primary now).
//   f) refused: --server-replicas 2 under allreduce, and with --restart-servers.
//   h) --server-replicas 3 under asp, then bsp: the primary (replica 0) is
//      killed after KILL_AFTER acknowledged pushes; once the record names a
//      new primary with two backups in sync again (the replica that did not
//      take over left and was restarted, and so was replica 0), that primary
//      is killed after KILL_AFTER more. The launch exits 0; the content check
//      holds exactly; summary.json counts at least the 4 replica restarts
//      (two kills, two backups leaving); every replica that ended in sync
//      (at least two) holds the same bytes.
//   g) in one process (net/ps_replica.h): a bsp shard with a backup, two
//      workers; worker 0 joins and goes silent, worker 1 pushes round 0. The
//      primary evicts worker 0, which completes the round; the backup, told
//      first, applies it too: both end at version 1 with one eviction and
//      bit-identical values (-lr * the gradient).
//
// Kills are triggered by counts (the workers' push ledgers) and events (the
// replicas' record), never by a time window; the waits have hang bounds only.
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <zmq.h>

#include "datasets/storage/counter_file.h"
#include "engine/run/dist.h"
#include "engine/run/run_record.h"
#include "net/ps_client.h"
#include "net/ps_replica.h"
#include "net/ps_server.h"
#include "tests/support/proc_support.h"
#include "tests/support/server_thread.h"

#define WORKERS 2
// A bound on every wait, never a window. A launch with three replicas under
// TSan, beside three other TSan tests on 2 cores, was still training (epoch 7
// of 8) after 112 s: the bound leaves room for that.
#define HANG_S 300.0
#define KILL_AFTER 100  // acknowledged pushes (both workers) before a kill
// Two epochs: the last kill comes after at most ~300 acknowledged pushes of
// the 4,500-5,400 a run makes (both workers); hybrid, which pushes 680 in
// all over four epochs, keeps four.

static char dir[] = "/tmp/asgd_replicas_XXXXXX";

// The workers' push ledgers (engine/run/push_ledger.c): run id, then per shard sent and acknowledged.
static const char push_magic[8] = {'A', 'S', 'G', 'D', 'P', 'U', 'S', 'H'};

// Pushes to shard 0 acknowledged to all workers so far (first incarnations); -1 while a ledger is unreadable.
static long acked_pushes(const char *rd) {
    long total = 0;
    for (int k = 0; k < WORKERS; k++) {
        uint64_t v[3];
        size_t held = 0;
        char err[512];
        if (counter_file_read(proc_path(rd, "worker-%d.pushes.0", k), push_magic, 3, v, &held, err, sizeof err) != 0 ||
            held != 3)
            return -1;
        total += (long)v[2];
    }
    return total;
}

// The replicas' record names a backup other than `not`: one joined.
static int backup_joined(const char *rd, const char * not ) {
    char *rec = proc_slurp(proc_path(rd, "server-0.replicas"));
    const char *b = strstr(rec, "backup ");
    int joined = b && strncmp(b + 7, "-\n", 2) != 0 && (!not || strncmp(b + 7, not, strlen(not )) != 0);
    free(rec);
    return joined;
}

static void backup_of(const char *rd, char *out, size_t len) {
    char *rec = proc_slurp(proc_path(rd, "server-0.replicas"));
    const char *b = strstr(rec, "backup ");
    CHECK(b);
    snprintf(out, len, "%.*s", (int)strcspn(b + 7, "\n"), b + 7);
    free(rec);
}

// The record's "replicas" line: the primary's index, then its backups' in
// order, into ids[]; returns how many (0: no record yet).
static int record_replicas(const char *rd, int ids[4]) {
    char *rec = proc_slurp(proc_path(rd, "server-0.replicas"));
    const char *line = strstr(rec, "replicas ");
    int n = 0;
    for (const char *p = line ? line + 9 : NULL; p && n < 4;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int)v;
        p = end;
    }
    free(rec);
    return n;
}

// Fails at once (with its stderr) when the launch ended while the test waits on it.
static void still_running(pid_t launcher, const char *name) {
    int st;
    if (waitpid(launcher, &st, WNOHANG) != launcher) return;
    char *log = proc_slurp(proc_path(dir, "%s.err", name));
    fprintf(stderr, "asgd launch ended (status %d) before the kill:\n%s\n", st, log);
    free(log);
    exit(1);
}

static void kill_replica(pid_t launcher, const char *name, const char *rd, int replica, long after) {
    double until = proc_now_s() + HANG_S;
    long seen;
    while ((seen = acked_pushes(rd)) < after) {
        still_running(launcher, name);
        CHECK(proc_now_s() < until);
        proc_sleep_ms(2);
    }
    pid_t victim = proc_find_child_with(launcher, "server", "--replica", replica);  // shard 0's
    CHECK(victim > 0);
    CHECK(kill(victim, SIGKILL) == 0);
    printf("  replica %d (pid %d) killed after %ld acknowledged pushes\n", replica, (int)victim, seen);
}

// The content check: every acknowledged push applied once, none lost, more
// than `acked_more_than` in all; summary.json counts at least `replica_restarts`.
static void pushes_applied_once(const char *rd, uint64_t acked_more_than, unsigned replica_restarts) {
    char *summary = proc_slurp(proc_path(rd, "summary.json"));
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    const char *rr = strstr(summary, "\"server_replica_restarts\":");
    CHECK(rr);
    unsigned restarts = (unsigned)strtoul(rr + strlen("\"server_replica_restarts\":"), NULL, 10);
    printf("  summary.json: server_replica_restarts %u\n", restarts);
    CHECK(restarts >= replica_restarts && restarts > 0);
    free(summary);
    server_result_t rec;
    char err[1200];
    CHECK(run_record_read_server(rd, 0, &rec, err, sizeof err) == 0);
    CHECK(rec.lost_known && rec.workers == WORKERS);
    uint64_t acked_total = 0;
    for (int k = 0; k < WORKERS; k++) {
        ps_push_count_t sums[1];
        size_t incarnations = 0;
        CHECK(dist_push_ledger_sum(rd, rec.run_id, (size_t)k, 1, sums, &incarnations, err, sizeof err) == 0);
        CHECK(incarnations == 1);
        printf("  worker %d: sent %llu, acknowledged %llu, applied by the shard %llu, lost %llu\n", k,
               (unsigned long long)sums[0].sent, (unsigned long long)sums[0].acked,
               (unsigned long long)rec.pushes_total[k], (unsigned long long)rec.pushes_lost[k]);
        CHECK(sums[0].sent == sums[0].acked);
        CHECK(sums[0].acked == rec.pushes_total[k] && rec.pushes_lost[k] == 0);
        acked_total += sums[0].acked;
    }
    CHECK(acked_total > acked_more_than);
    server_result_free(&rec);
}

// Every replica of R that wrote its final values (at least `at_least` did)
// holds the same parameters, bit for bit.
static void same_values(const char *rd, int replicas, int at_least) {
    char *first = NULL;
    size_t n_first = 0;
    int present = 0;
    for (int i = 0; i < replicas; i++) {
        FILE *f = fopen(proc_path(rd, "server-0-replica-%d.values", i), "rb");
        if (!f) continue;
        char *v = malloc(1 << 20);
        CHECK(v);
        size_t n = fread(v, 1, 1 << 20, f);
        fclose(f);
        present++;
        if (!first) {
            first = v, n_first = n;
            printf("  replica %d's values: %zu bytes\n", i, n);
            CHECK(n > 0);
            continue;
        }
        int same = n == n_first && memcmp(v, first, n) == 0;
        printf("  replica %d's values: %zu bytes, %s\n", i, n, same ? "bit-identical" : "DIFFERENT");
        CHECK(same);
        free(v);
    }
    free(first);
    CHECK(present >= at_least);
}

// Under asp, a push and a pull every step (the arguments a, NULL-terminated
// with room for four more, get them at their end). The checks kill replicas
// after counts of acknowledged pushes and need the run to go on well past
// them, for a restarted backup to catch up; asp's default paces its
// exchanges, which in these short runs makes a few hundred pushes in all.
static void every_step_under_asp(const char **a, const char *sync) {
    if (strcmp(sync, "asp") != 0) return;
    size_t end = 0;
    while (a[end]) end++;
    const char *periods[] = {"--push-every", "1", "--fetch-every", "1"};
    for (size_t i = 0; i < 4; i++) a[end + i] = periods[i];
    a[end + 4] = NULL;
}

// Launches, kills replica 0 (and with `twice` then replica 1), and checks the outcome.
static void replicated(const char *name, const char *sync, int twice) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    CHECK(mkdir(rd, 0755) == 0);
    int hybrid = strcmp(sync, "hybrid") == 0;
    const char *a[40] = {ASGD_BINARY,
                         "launch",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=3000,dim=2000,nnz=20",
                         "--servers",
                         "1",
                         "--workers",
                         "2",
                         "--sync",
                         sync,
                         "--epochs",
                         hybrid ? "4" : "2",
                         "--delay-worker",
                         "0:1,1:1",
                         "--heartbeat-ms",
                         "100",
                         "--retry-ms",
                         "200",
                         "--server-replicas",
                         "2",
                         "--quiet",
                         "--run-dir",
                         rd,
                         hybrid ? "--embed-dim" : NULL,
                         "4",
                         "--hidden",
                         "16",
                         NULL};
    if (hybrid) a[3] = "embmlp";  // hybrid needs a sparse and a dense part
    every_step_under_asp(a, sync);
    printf("%s:\n", name);
    pid_t launcher = proc_start(a, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name));
    double until = proc_now_s() + HANG_S;
    while (!backup_joined(rd, NULL)) {
        still_running(launcher, name);
        CHECK(proc_now_s() < until);
        proc_sleep_ms(5);
    }
    char first_backup[300];
    backup_of(rd, first_backup, sizeof first_backup);
    kill_replica(launcher, name, rd, 0, KILL_AFTER);
    if (twice) {
        // The restarted replica 0 joined the promoted replica 1 as its backup.
        while (!backup_joined(rd, first_backup)) {
            still_running(launcher, name);
            CHECK(proc_now_s() < until);
            proc_sleep_ms(5);
        }
        kill_replica(launcher, name, rd, 1, acked_pushes(rd) + KILL_AFTER);
    }
    int status = proc_wait(launcher, HANG_S);
    char *log = proc_slurp(proc_path(dir, "%s.err", name));
    if (status != 0) {
        fprintf(stderr, "asgd launch exited %d:\n%s\n", status, log);
        exit(1);
    }
    CHECK(strstr(log, "server 0 replica 0 (pid ") && strstr(log, "killed by signal 9") &&
          strstr(log, "; restarting it as a backup"));
    CHECK(strstr(log, "replica 1 took over as the primary"));
    CHECK(strstr(log, "replica 0 copied the state of the primary"));
    if (twice) {
        CHECK(strstr(log, "server 0 replica 1 (pid ") && strstr(log, "replica 0 took over as the primary"));
        CHECK(strstr(log, "replica 1 copied the state of the primary"));
    }
    free(log);
    pushes_applied_once(rd, (uint64_t)(twice ? 2 : 1) * KILL_AFTER, twice ? 2 : 1);
    same_values(rd, 2, 2);
}

// h) three replicas: the primary killed, then the next primary once two backups are in sync again.
static void replicated3(const char *name, const char *sync) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    CHECK(mkdir(rd, 0755) == 0);
    const char *a[40] = {
        ASGD_BINARY,  "launch", "--model",           "logreg",  "--data",         "gen:sparse:n=3000,dim=2000,nnz=20",
        "--servers",  "1",      "--workers",         "2",       "--sync",         sync,
        "--epochs",   "2",      "--delay-worker",    "0:1,1:1", "--heartbeat-ms", "100",
        "--retry-ms", "200",    "--server-replicas", "3",       "--quiet",        "--run-dir",
        rd,           NULL};
    every_step_under_asp(a, sync);
    printf("%s:\n", name);
    pid_t launcher = proc_start(a, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name));
    double until = proc_now_s() + HANG_S;
    int ids[4];
    while (record_replicas(rd, ids) < 3) {  // the primary and both backups in sync
        still_running(launcher, name);
        CHECK(proc_now_s() < until);
        proc_sleep_ms(5);
    }
    CHECK(ids[0] == 0);
    kill_replica(launcher, name, rd, 0, KILL_AFTER);
    // A new primary, with two backups in sync again: the one that did not
    // take over left and was restarted, and so was replica 0.
    while (record_replicas(rd, ids) < 3 || ids[0] == 0) {
        still_running(launcher, name);
        CHECK(proc_now_s() < until);
        proc_sleep_ms(5);
    }
    int second = ids[0];
    printf("  replica %d took over; backups %d and %d in sync\n", second, ids[1], ids[2]);
    kill_replica(launcher, name, rd, second, acked_pushes(rd) + KILL_AFTER);
    int status = proc_wait(launcher, HANG_S);
    char *log = proc_slurp(proc_path(dir, "%s.err", name));
    if (status != 0) {
        fprintf(stderr, "asgd launch exited %d:\n%s\n", status, log);
        exit(1);
    }
    CHECK(record_replicas(rd, ids) >= 1 && ids[0] != second);
    char took[64];
    snprintf(took, sizeof took, "replica %d took over as the primary", second);
    CHECK(strstr(log, took));
    snprintf(took, sizeof took, "replica %d took over as the primary", ids[0]);
    CHECK(strstr(log, took));
    CHECK(strstr(log, "no longer in sync with the primary"));  // a backup that did not take over left
    free(log);
    pushes_applied_once(rd, 2 * KILL_AFTER, 4);
    same_values(rd, 3, 2);
}

// f) refusals (exit 2), each naming the flag.
static void refused(const char *name, const char *sync, const char *more, const char *needle) {
    const char *a[] = {ASGD_BINARY,
                       "launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=300,dim=20,nnz=4",
                       "--sync",
                       sync,
                       "--server-replicas",
                       "2",
                       "--run-dir",
                       proc_path(dir, "%s", name),
                       more,
                       more ? "1" : NULL,
                       NULL};
    char *log = proc_run_expect(a, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name), HANG_S, 2);
    printf("%s: refused: %s", name, log);
    CHECK(strstr(log, needle));
    free(log);
}

// g) a replicated eviction, in one process: a shard's thread and its replica.
typedef struct serving {
    server_thread_t t;
    ps_replica_t *r;
} serving_t;

// A backup's thread: it joins its primary (copying the state), then serves.
static void *join_and_serve(void *arg) {
    serving_t *p = arg;
    p->t.rc = ps_replica_join(p->r, p->t.s, p->t.err, sizeof p->t.err);
    return p->t.rc == 0 ? server_thread_main(&p->t) : NULL;
}

#define EVICT_RUN 0x5e9e1ca500000001ull
#define EVICT_N 64

static void replicated_eviction(void) {
    char sd[400], err[512];
    snprintf(sd, sizeof sd, "%s/evict", dir);
    CHECK(mkdir(sd, 0755) == 0);
    void *ctx = zmq_ctx_new();
    CHECK(ctx);
    float init[EVICT_N] = {0};
    ps_config_t c = {.run_id = EVICT_RUN,
                     .shard = 0,
                     .n_shards = 1,
                     .n_params = EVICT_N,
                     .n_workers = 2,
                     .mode = SYNC_MODE_BSP,
                     .optimizer = OPTIMIZER_KIND_SGD,
                     .lr = 0.5f,
                     .worker_timeout_ms = 300,
                     .quiet = 1};
    ps_config_t cb = c;
    cb.worker_timeout_ms = 0;  // a backup evicts only when told
    ps_replica_config_t rc = {.state_dir = sd,
                              .shard = 0,
                              .replica = 0,
                              .run_id = EVICT_RUN,
                              .n_workers = 2,
                              .ack_timeout_ms = 60000,
                              .worker_timeout_ms = 300,
                              .join_timeout_ms = 60000,
                              .quiet = 1};
    serving_t p = {0}, b = {0};
    atomic_init(&b.t.stop, 0);
    CHECK((p.t.s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err)));
    CHECK((p.r = ps_replica_new(ctx, &rc, err, sizeof err)) && ps_replica_lead(p.r, p.t.s, err, sizeof err) == 0);
    rc.replica = 1;
    CHECK((b.t.s = ps_server_new(ctx, &cb, "tcp://127.0.0.1:*", init, err, sizeof err)));
    CHECK((b.r = ps_replica_new(ctx, &rc, err, sizeof err)));
    CHECK(pthread_create(&b.t.tid, NULL, join_and_serve, &b) == 0);
    CHECK(ps_replica_await_backup(p.r, p.t.s, err, sizeof err) == 0);
    server_thread_start(&p.t);
    const char *eps[1] = {ps_server_endpoint(p.t.s)};
    ps_client_t *w0 = ps_client_new(ctx, EVICT_RUN, 0, eps, 1, EVICT_N, 0, 60000, err, sizeof err);
    CHECK_OK(!w0, err);
    ps_client_t *w1 = ps_client_new(ctx, EVICT_RUN, 1, eps, 1, EVICT_N, 0, 60000, err, sizeof err);
    CHECK_OK(!w1, err);
    float *const *frames = ps_client_push_frames(w1, err, sizeof err);
    CHECK(frames);
    for (size_t i = 0; i < EVICT_N; i++) frames[0][i] = 1.0f;
    CHECK(ps_client_push_commit(w1, 0, 1, 1, err, sizeof err) == 0);
    // Round 0 is applied once worker 0 is evicted; worker 1's pulls (answered
    // at once) keep it heard meanwhile.
    float out[EVICT_N] = {0};
    double until = proc_now_s() + HANG_S;
    while (out[0] != -0.5f) {
        CHECK(proc_now_s() < until);
        CHECK(ps_client_pull(w1, 0, out, NULL, err, sizeof err) == 0);
        proc_sleep_ms(20);
    }
    CHECK(out[0] == -0.5f && out[EVICT_N - 1] == -0.5f);
    CHECK(ps_client_bye(w1, err, sizeof err) == 0);
    CHECK(ps_client_bye(w0, err, sizeof err) == 0);
    server_thread_join(&p.t);
    server_thread_join(&b.t);
    ps_stats_t sp, sb;
    ps_server_stats(p.t.s, &sp);
    ps_server_stats(b.t.s, &sb);
    ps_replica_stats_t rs;
    ps_replica_stats(p.r, &rs);
    printf(
        "evict: primary version %llu, evictions %llu; backup version %llu, evictions %llu; %llu messages "
        "forwarded\n",
        (unsigned long long)sp.version, (unsigned long long)sp.evictions, (unsigned long long)sb.version,
        (unsigned long long)sb.evictions, (unsigned long long)rs.forwarded);
    CHECK(sp.version == 1 && sb.version == 1 && sp.evictions == 1 && sb.evictions == 1);
    CHECK(memcmp(ps_server_values(p.t.s), ps_server_values(b.t.s), sizeof init) == 0);
    CHECK(ps_server_values(b.t.s)[0] == -0.5f);
    ps_client_destroy(&w0);
    ps_client_destroy(&w1);
    ps_server_destroy(&p.t.s);
    ps_server_destroy(&b.t.s);
    ps_replica_destroy(&p.r);
    ps_replica_destroy(&b.r);
    zmq_ctx_term(ctx);
}

// Two parts, each its own ctest (tests/tests.cmake: PARTS): "one-kill"
// (a)-d), f), g)) and "more-kills" (e), h)); no argument runs both.
int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const char *const parts[] = {"one-kill", "more-kills"};
    int part = test_part(argc, argv, parts, 2), one_kill = part != 1, more_kills = part != 0;
    CHECK(mkdtemp(dir));
    if (one_kill) {
        replicated_eviction();
        refused("allreduce", "allreduce", NULL, "--server-replicas 2: --sync allreduce runs without parameter servers");
        refused("restart-servers", "asp", "--restart-servers", "--restart-servers: with --server-replicas");
        replicated("asp", "asp", 0);
        replicated("ssp", "ssp", 0);
        replicated("bsp", "bsp", 0);
        replicated("hybrid", "hybrid", 0);
    }
    if (more_kills) {
        replicated("asp-twice", "asp", 1);
        replicated3("asp-3", "asp");
        replicated3("bsp-3", "bsp");
    }
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
