// Every acknowledged push is applied exactly once, checked on the parameters
// themselves. Two real `asgd server` shards of a 64-parameter logistic
// regression (it starts at exactly 0; sgd, --server-lr 0.5) and workers that
// are child processes of this test, meeting the servers at the coordinator
// and pushing known values: through net/ps_client.h, or, where a message must
// be delivered twice or its acknowledgement ignored, as hand-built messages on
// a socket of their own. Every value is a small multiple of 1/16, so every
// sum is exact in float in any order: at the end a shard holds exactly
// -0.5 x (the sum of the pushes it applied), compared bit for bit with what
// the test knows was applied.
//
//   a) worker 0 is SIGKILLed with a push in flight and started again: it
//      rejoins and finishes. Its ledger keeps the killed incarnation's counts.
//   b) one PUSH message (same bytes, same clock) delivered twice: acknowledged
//      twice, applied once, counted as a duplicate.
//   c) shard 0 is SIGKILLed and resumed from its checkpoint (`--resume`):
//      checkpoints are frozen once one holds every push of phase A, phase B
//      is applied and lost with the crash, and phase C after the restart; a
//      push whose acknowledgement the worker "lost" is resent to the resumed
//      shard and applied again, and is then no longer lost.
// In each, the shards' lifetime counts (applied, lost, duplicates) and the
// workers' ledgers (sent, acknowledged) are asserted exactly, and the
// launcher's check (dist_check_pushes_applied_once) holds; an incarnation
// claiming acknowledgements the shard never applied makes it fail, naming
// worker and shard.
// Events are waited for (files, acknowledgements, the checkpoint's counts),
// each with a generous limit that fails loudly.
#include <errno.h>
#include <sys/stat.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/partition.h"
#include "engine/run/dist.h"
#include "net/ps_client.h"
#include "net/rendezvous.h"
#include "net/zmsg.h"
#include "tests/support/proc_support.h"

#define N 64  // logreg over dim 63: 63 weights and a bias
#define SHARDS 2
#define WORKERS 2
#define LR 0.5
#define RUN_ID 7717
#define WAIT_S 60.0

static char dir[] = "/tmp/asgd_once_XXXXXX";

typedef struct run {
    char rd[400];
    char ck[450];  // checkpoint directory ("" : none)
    char coordinator[64];
    int port;
    pid_t server[SHARDS];
} run_t;

// The value worker k's incarnation `inc` pushes at parameter j in its push i.
static float grad(int k, int inc, int i, size_t j) {
    return (float)(((k * 3 + inc * 5 + i) % 5) + 1) * (float)((j % 3) + 1) / 16.0f;
}

static void touch(const run_t *r, const char *name) {
    FILE *f = fopen(proc_path(r->rd, "%s", name), "w");
    CHECK(f && fclose(f) == 0);
}

static void wait_file(const run_t *r, const char *name) {
    const char *path = proc_path(r->rd, "%s", name);
    double until = proc_now_s() + WAIT_S;
    while (access(path, F_OK) != 0) {
        if (proc_now_s() > until) {
            fprintf(stderr, "no %s after %.0f s\n", path, WAIT_S);
            exit(1);
        }
        proc_sleep_ms(5);
    }
}

// ---- servers ------------------------------------------------------------------------

static pid_t start_server(const run_t *r, int s, int resume) {
    char id[16], host[80];
    snprintf(id, sizeof id, "%d", s);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", r->port);
    const char *a[64] = {ASGD_BINARY,
                         "server",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=64,dim=63,nnz=4",
                         "--servers",
                         "2",
                         "--workers",
                         "2",
                         "--sync",
                         "asp",
                         "--server-lr",
                         "0.5",
                         "--worker-timeout",
                         "0",
                         "--run-id",
                         "7717",
                         "--coordinator",
                         r->coordinator,
                         "--run-dir",
                         r->rd,
                         "--id",
                         id};
    int n = 0;
    while (a[n]) n++;
    if (r->ck[0]) {
        a[n++] = "--checkpoint-dir";
        a[n++] = r->ck;
        a[n++] = "--checkpoint-every";
        a[n++] = "0.05";
    }
    if (resume) {
        a[n++] = "--resume";
        a[n++] = r->ck;
    } else if (s == 0) {
        a[n++] = "--host-coordinator";
        a[n++] = host;
    }
    a[n] = NULL;
    return proc_start(a, proc_path(r->rd, "server-%d.out", s), proc_path(r->rd, "server-%d.err", s));
}

static void start_run(run_t *r, const char *name, int checkpoints) {
    snprintf(r->rd, sizeof r->rd, "%s/%s", dir, name);
    CHECK(mkdir(r->rd, 0755) == 0);
    r->ck[0] = '\0';
    if (checkpoints) snprintf(r->ck, sizeof r->ck, "%s/ck", r->rd);
    r->port = proc_free_port();
    snprintf(r->coordinator, sizeof r->coordinator, "127.0.0.1:%d", r->port);
    for (int s = 0; s < SHARDS; s++) r->server[s] = start_server(r, s, 0);
}

static void expect_exit(const run_t *r, pid_t pid, const char *what) {
    int st = proc_wait(pid, WAIT_S);
    if (st == 0) return;
    fprintf(stderr, "%s exited with %d\n", what, st);
    for (int s = 0; s < SHARDS; s++) {
        char *e = proc_slurp(proc_path(r->rd, "server-%d.err", s));
        fprintf(stderr, "---- server %d's stderr:\n%s\n", s, e);
        free(e);
    }
    exit(1);
}

static void finish_run(const run_t *r, pid_t *kids, int n) {
    for (int i = 0; i < n; i++) expect_exit(r, kids[i], "a worker");
    for (int s = 0; s < SHARDS; s++) expect_exit(r, r->server[s], "a server");
}

// ---- workers (child processes) ---------------------------------------------------------

typedef struct worker {
    void *ctx;
    rdv_entry_t *table;
    const char *endpoints[SHARDS];
    counter_file_t ledger;
    ps_push_count_t *counts;
    ps_client_t *client;
    void *raw[SHARDS];  // hand-built messages: one DEALER per shard
    int k;
} worker_t;

// Meets the others at the coordinator and opens this incarnation's ledger.
static void worker_begin(worker_t *w, const run_t *r, int k) {
    char err[512];
    memset(w, 0, sizeof *w);
    w->k = k;
    w->ctx = zmq_ctx_new();
    CHECK(w->ctx);
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.rank = (uint32_t)(SHARDS + k);
    me.role = DIST_ROLE_WORKER;
    snprintf(me.endpoint, sizeof me.endpoint, "-");
    char coord[80];
    snprintf(coord, sizeof coord, "tcp://%s", r->coordinator);
    CHECK_OK(rdv_join(w->ctx, coord, RUN_ID, &me, SHARDS + WORKERS, &w->table, (int)(WAIT_S * 1000), err, sizeof err),
             err);
    for (int s = 0; s < SHARDS; s++) w->endpoints[s] = w->table[s].endpoint;
    size_t incarnation;
    CHECK_OK(dist_push_ledger_open(r->rd, RUN_ID, (size_t)k, SHARDS, &w->ledger, &incarnation, err, sizeof err), err);
    w->counts = dist_push_ledger_counts(&w->ledger);
}

static void client_connect(worker_t *w) {
    char err[512];
    w->client = ps_client_new(w->ctx, RUN_ID, (uint32_t)w->k, w->endpoints, SHARDS, N, 0, (int)(WAIT_S * 1000), err,
                              sizeof err);
    CHECK_OK(w->client == NULL, err);
    ps_client_set_retry_ms(w->client, 100);
    ps_client_count_pushes(w->client, w->counts);
}

// Push i of this incarnation, at clock `clock`, to every shard (not waited for).
static void client_push(worker_t *w, int inc, int i, uint64_t clock) {
    char err[512];
    float *const *frames = ps_client_push_frames(w->client, err, sizeof err);
    CHECK_OK(frames == NULL, err);
    for (int s = 0; s < SHARDS; s++) {
        size_t b, e;
        shard_range(N, SHARDS, (size_t)s, &b, &e);
        for (size_t j = b; j < e; j++) frames[s][j - b] = grad(w->k, inc, i, j);
    }
    CHECK_OK(ps_client_push_commit(w->client, clock, 1, 0, err, sizeof err), err);
}

static void client_wait(worker_t *w) {
    char err[512];
    CHECK_OK(ps_client_wait_acks(w->client, err, sizeof err), err);
}

// Pulls the whole model into run/model.bin.
static void client_save_model(worker_t *w, const run_t *r) {
    char err[512];
    float v[N];
    CHECK_OK(ps_client_pull(w->client, 0, v, NULL, err, sizeof err), err);
    FILE *f = fopen(proc_path(r->rd, "model.bin"), "wb");
    CHECK(f && fwrite(v, sizeof *v, N, f) == N && fclose(f) == 0);
}

static void worker_end(worker_t *w) {
    char err[512];
    if (w->client) {
        CHECK_OK(ps_client_bye(w->client, err, sizeof err), err);
        ps_client_destroy(&w->client);
    }
    for (int s = 0; s < SHARDS; s++)
        if (w->raw[s]) zmq_close(w->raw[s]);
    counter_file_close(&w->ledger);
    free(w->table);
    CHECK(zmq_ctx_term(w->ctx) == 0);
    exit(0);
}

// -- hand-built messages

static wire_header_t raw_header(const worker_t *w, uint16_t type, int s) {
    wire_header_t h = zmsg_header(type, RUN_ID);
    h.sender = (uint32_t)w->k;
    h.shard = (uint32_t)s;
    return h;
}

static void raw_send(worker_t *w, int s, wire_header_t h, const float *values, size_t n) {
    char err[512];
    zmq_msg_t frame;
    if (values) {
        CHECK_OK(zmsg_frame_alloc(&frame, n * sizeof *values, err, sizeof err), err);
        memcpy(zmq_msg_data(&frame), values, n * sizeof *values);
    }
    CHECK_OK(zmsg_send(w->raw[s], NULL, &h, values ? &frame : NULL, values ? 1 : 0, 0, err, sizeof err), err);
}

// The next reply from shard s is of `type` (a PUSH_ACK for the push of `clock`).
static void raw_expect(worker_t *w, int s, uint16_t type, uint64_t clock) {
    char err[512];
    zmsg_t m;
    int got = zmsg_recv(w->raw[s], 0, RUN_ID, &m, err, sizeof err);
    if (got != 1 || m.h.type != type || (type == MSG_TYPE_PUSH_ACK && m.h.offset != clock)) {
        fprintf(stderr, "worker %d: from shard %d wanted a %s (clock %llu), got %s\n", w->k, s, msg_type_name(type),
                (unsigned long long)clock,
                got == 1   ? msg_type_name(m.h.type)
                : got == 0 ? "an invalid message"
                           : err);
        exit(1);
    }
    zmsg_close(&m);
}

static void raw_connect(worker_t *w) {
    char err[512], id[16];
    int id_len = snprintf(id, sizeof id, "w%d", w->k), timeout = (int)(WAIT_S * 1000);
    for (int s = 0; s < SHARDS; s++) {
        size_t b, e;
        shard_range(N, SHARDS, (size_t)s, &b, &e);
        w->raw[s] = zmq_socket(w->ctx, ZMQ_DEALER);
        CHECK(w->raw[s]);
        CHECK_OK(zmsg_socket_defaults(w->raw[s], 0, err, sizeof err), err);
        CHECK(zmq_setsockopt(w->raw[s], ZMQ_ROUTING_ID, id, (size_t)id_len) == 0);
        CHECK(zmq_setsockopt(w->raw[s], ZMQ_RCVTIMEO, &timeout, sizeof timeout) == 0);
        CHECK_OK(zmsg_connect(w->raw[s], w->endpoints[s], zmsg_max_frame(e - b), err, sizeof err), err);
        wire_header_t h = raw_header(w, MSG_TYPE_HELLO, s);
        h.offset = N;
        raw_send(w, s, h, NULL, 0);
        raw_expect(w, s, MSG_TYPE_WELCOME, 0);
    }
}

// Sends push i (clock i) to shard s `copies` times: the same message each time.
static void raw_push(worker_t *w, int s, int i, int copies) {
    size_t b, e;
    shard_range(N, SHARDS, (size_t)s, &b, &e);
    float v[N];
    for (size_t j = b; j < e; j++) v[j - b] = grad(w->k, 0, i, j);
    wire_header_t h = raw_header(w, MSG_TYPE_PUSH, s);
    h.clock = (uint64_t)i;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.offset = b;
    h.count = (uint32_t)(e - b);
    h.aux = 1;
    for (int c = 0; c < copies; c++) raw_send(w, s, h, v, e - b);
}

static void raw_bye(worker_t *w) {
    for (int s = 0; s < SHARDS; s++) {
        raw_send(w, s, raw_header(w, MSG_TYPE_BYE, s), NULL, 0);
        raw_expect(w, s, MSG_TYPE_BYE_ACK, 0);
    }
}

// ---- what the test checks -------------------------------------------------------------

// The pushes a shard applied, by worker: want[k] = {applied, lost, duplicates}.
// ANY_DUPS: a ps_client worker's retries may deliver a push more than once
// (each copy after the first acknowledged and not applied: the values say so).
#define ANY_DUPS UINT64_MAX
static void expect_shard(const run_t *r, int s, const uint64_t want[WORKERS][3]) {
    char *json = proc_slurp(proc_path(r->rd, "server-%d.json", s));
    CHECK(json[0]);
    CHECK(strstr(json, "\"pushes_lost_known\":true"));
    for (int k = 0; k < WORKERS; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        double applied = proc_json_number(json, "pushes_total_by_worker", key);
        double lost = proc_json_number(json, "pushes_lost_by_worker", key);
        double dups = proc_json_number(json, "duplicates_by_worker", key);
        printf("  shard %d, worker %d: %.0f applied, %.0f lost, %.0f duplicates\n", s, k, applied, lost, dups);
        CHECK(applied == (double)want[k][0] && lost == (double)want[k][1]);
        CHECK(want[k][2] == ANY_DUPS || dups == (double)want[k][2]);
    }
    free(json);
}

// Worker k's ledgers over its incarnations, per shard: want[s] = {sent, acked}.
static void expect_ledger(const run_t *r, int k, size_t incarnations, const uint64_t want[SHARDS][2]) {
    char err[512];
    ps_push_count_t sums[SHARDS];
    size_t n;
    CHECK_OK(dist_push_ledger_sum(r->rd, RUN_ID, (size_t)k, SHARDS, sums, &n, err, sizeof err), err);
    for (int s = 0; s < SHARDS; s++) {
        printf("  worker %d, shard %d: %zu incarnation(s) sent %llu pushes, %llu acknowledged\n", k, s, n,
               (unsigned long long)sums[s].sent, (unsigned long long)sums[s].acked);
        CHECK(sums[s].sent == want[s][0] && sums[s].acked == want[s][1]);
    }
    CHECK(n == incarnations);
}

// The pulled model is exactly -LR x the sum of `applied` (n pushes: worker,
// incarnation, push index, shard or -1 for every shard).
typedef struct applied {
    int k, inc, i, shard;
} applied_t;

static void expect_model(const run_t *r, const applied_t *applied, size_t n) {
    double want[N] = {0};
    for (size_t p = 0; p < n; p++) {
        for (int s = 0; s < SHARDS; s++) {
            if (applied[p].shard >= 0 && applied[p].shard != s) continue;
            size_t b, e;
            shard_range(N, SHARDS, (size_t)s, &b, &e);
            for (size_t j = b; j < e; j++) want[j] -= LR * grad(applied[p].k, applied[p].inc, applied[p].i, j);
        }
    }
    FILE *f = fopen(proc_path(r->rd, "model.bin"), "rb");
    float got[N];
    CHECK(f && fread(got, sizeof *got, N, f) == N);
    fclose(f);
    for (size_t j = 0; j < N; j++) {
        if (got[j] == (float)want[j]) continue;
        fprintf(stderr, "parameter %zu: the shard holds %.9g; the pushes applied sum to %.9g\n", j, got[j], want[j]);
        exit(1);
    }
    printf("  every parameter holds exactly the pushes applied (%zu pushes; parameter 0: %g)\n", n, got[0]);
}

// The launcher's check holds; an incarnation claiming more acknowledgements than
// the shard applied makes it fail, naming worker and shard.
static void expect_check(const run_t *r, int k, int s) {
    char why[600] = "";
    if (dist_check_pushes_applied_once(r->rd, SHARDS, WORKERS, why, sizeof why) != 0) {
        fprintf(stderr, "the check failed: %s\n", why);
        exit(1);
    }
    counter_file_t f;
    size_t inc;
    CHECK_OK(dist_push_ledger_open(r->rd, RUN_ID, (size_t)k, SHARDS, &f, &inc, why, sizeof why), why);
    dist_push_ledger_counts(&f)[s].sent = dist_push_ledger_counts(&f)[s].acked = 1000;
    counter_file_close(&f);
    CHECK(dist_check_pushes_applied_once(r->rd, SHARDS, WORKERS, why, sizeof why) == 1);
    char names[64];
    snprintf(names, sizeof names, "worker %d, shard %d: a push was acknowledged but not applied", k, s);
    printf("  the check holds; with 1000 acknowledgements too many: %s\n", why);
    CHECK(strstr(why, names));
}

// ---- a) a worker killed with a push in flight, restarted ------------------------------

#define A_FIRST 20  // worker 0's pushes before it is killed (one more is in flight)
#define A_SECOND 15  // its pushes after the restart
#define A_OTHER 25  // worker 1's

static void killed_worker(void) {
    run_t r;
    start_run(&r, "killed-worker", 0);
    pid_t w1 = fork();
    CHECK(w1 >= 0);
    if (w1 == 0) {
        worker_t w;
        worker_begin(&w, &r, 1);
        client_connect(&w);
        for (int i = 0; i < A_OTHER; i++) client_push(&w, 0, i, (uint64_t)i);
        client_wait(&w);
        wait_file(&r, "w0-done");
        client_save_model(&w, &r);
        worker_end(&w);
    }
    pid_t w0 = fork();
    CHECK(w0 >= 0);
    if (w0 == 0) {
        worker_t w;
        worker_begin(&w, &r, 0);
        client_connect(&w);
        for (int i = 0; i < A_FIRST; i++) client_push(&w, 0, i, (uint64_t)i);
        client_wait(&w);
        client_push(&w, 0, A_FIRST, A_FIRST);  // in flight: never waited for
        touch(&r, "w0-in-flight");
        for (;;) pause();
    }
    wait_file(&r, "w0-in-flight");
    CHECK(kill(w0, SIGKILL) == 0);
    CHECK(proc_wait(w0, WAIT_S) == 128 + SIGKILL);
    w0 = fork();
    CHECK(w0 >= 0);
    if (w0 == 0) {
        worker_t w;
        worker_begin(&w, &r, 0);
        client_connect(&w);  // a rejoin: the shards give it the clock to continue from
        uint64_t clock = ps_client_join_clock(w.client);
        CHECK(clock >= A_FIRST);
        for (int i = 0; i < A_SECOND; i++) client_push(&w, 1, i, clock + (uint64_t)i);
        client_wait(&w);
        touch(&r, "w0-done");
        worker_end(&w);
    }
    pid_t kids[] = {w0, w1};
    finish_run(&r, kids, 2);
    printf("a) worker 0 killed after %d acknowledged pushes with one more in flight, restarted, %d more:\n", A_FIRST,
           A_SECOND);
    // Whether the push in flight was applied is each shard's to say; either is
    // right (it was never acknowledged), and the parameters must agree.
    applied_t ap[A_FIRST + 1 + A_SECOND + A_OTHER + SHARDS];
    size_t n = 0;
    for (int i = 0; i < A_FIRST; i++) ap[n++] = (applied_t){0, 0, i, -1};
    for (int i = 0; i < A_SECOND; i++) ap[n++] = (applied_t){0, 1, i, -1};
    for (int i = 0; i < A_OTHER; i++) ap[n++] = (applied_t){1, 0, i, -1};
    for (int s = 0; s < SHARDS; s++) {
        char *json = proc_slurp(proc_path(r.rd, "server-%d.json", s));
        double in_flight = proc_json_number(json, "pushes_total_by_worker", "0") - (A_FIRST + A_SECOND);
        CHECK(in_flight == 0 || in_flight == 1);
        CHECK(proc_json_number(json, NULL, "rejoins") == 1);
        free(json);
        printf("  shard %d %s the push in flight\n", s, in_flight ? "applied" : "never saw");
        if (in_flight) ap[n++] = (applied_t){0, 0, A_FIRST, s};
        const uint64_t want[WORKERS][3] = {{A_FIRST + A_SECOND + (uint64_t)in_flight, 0, ANY_DUPS},
                                           {A_OTHER, 0, ANY_DUPS}};
        expect_shard(&r, s, want);
    }
    const uint64_t w0_ledger[SHARDS][2] = {{A_FIRST + 1 + A_SECOND, A_FIRST + A_SECOND},
                                           {A_FIRST + 1 + A_SECOND, A_FIRST + A_SECOND}};
    const uint64_t w1_ledger[SHARDS][2] = {{A_OTHER, A_OTHER}, {A_OTHER, A_OTHER}};
    expect_ledger(&r, 0, 2, w0_ledger);
    expect_ledger(&r, 1, 1, w1_ledger);
    expect_model(&r, ap, n);
    expect_check(&r, 0, 1);
}

// ---- b) the same PUSH delivered twice ---------------------------------------------------

#define B_OTHER 10

static void duplicated_push(void) {
    run_t r;
    start_run(&r, "duplicate", 0);
    pid_t w0 = fork();
    CHECK(w0 >= 0);
    if (w0 == 0) {
        worker_t w;
        worker_begin(&w, &r, 0);
        client_connect(&w);
        for (int i = 0; i < B_OTHER; i++) client_push(&w, 0, i, (uint64_t)i);
        client_wait(&w);
        wait_file(&r, "w1-done");
        client_save_model(&w, &r);
        worker_end(&w);
    }
    pid_t w1 = fork();
    CHECK(w1 >= 0);
    if (w1 == 0) {
        worker_t w;
        worker_begin(&w, &r, 1);
        raw_connect(&w);
        // Push 0 to shard 1, delivered twice (as a retry would): both copies are
        // acknowledged; the worker counts one push, acknowledged.
        w.counts[1].sent++;
        raw_push(&w, 1, 0, 2);
        raw_expect(&w, 1, MSG_TYPE_PUSH_ACK, 0);
        w.counts[1].acked++;
        raw_expect(&w, 1, MSG_TYPE_PUSH_ACK, 0);
        w.counts[1].sent++;
        raw_push(&w, 1, 1, 1);
        raw_expect(&w, 1, MSG_TYPE_PUSH_ACK, 1);
        w.counts[1].acked++;
        raw_bye(&w);
        touch(&r, "w1-done");
        worker_end(&w);
    }
    pid_t kids[] = {w0, w1};
    finish_run(&r, kids, 2);
    printf("b) worker 1's push 0 delivered to shard 1 twice:\n");
    const uint64_t shard0[WORKERS][3] = {{B_OTHER, 0, ANY_DUPS}, {0, 0, 0}};
    const uint64_t shard1[WORKERS][3] = {{B_OTHER, 0, ANY_DUPS}, {2, 0, 1}};
    expect_shard(&r, 0, shard0);
    expect_shard(&r, 1, shard1);
    const uint64_t w0_ledger[SHARDS][2] = {{B_OTHER, B_OTHER}, {B_OTHER, B_OTHER}};
    const uint64_t w1_ledger[SHARDS][2] = {{0, 0}, {2, 2}};
    expect_ledger(&r, 0, 1, w0_ledger);
    expect_ledger(&r, 1, 1, w1_ledger);
    applied_t ap[B_OTHER + 2];
    size_t n = 0;
    for (int i = 0; i < B_OTHER; i++) ap[n++] = (applied_t){0, 0, i, -1};
    ap[n++] = (applied_t){1, 0, 0, 1};
    ap[n++] = (applied_t){1, 0, 1, 1};
    expect_model(&r, ap, n);
    expect_check(&r, 1, 1);
}

// ---- c) a shard killed and resumed from its checkpoint ------------------------------------

#define C_A 12  // worker 0's pushes in the checkpoint
#define C_B 7  // applied after it, lost with the crash
#define C_C 9  // applied by the resumed shard
#define C_RAW 5  // worker 1's pushes to shard 0 in the checkpoint; its push C_RAW is applied after it

// The pushes of workers 0 and 1 that shard 0's checkpoint holds.
static int checkpoint_counts(const run_t *r, uint64_t counts[WORKERS]) {
    char err[512];
    ckpt_file_t *f = ckpt_file_read(proc_path(r->ck, "server-0.ckpt"), err, sizeof err);
    if (!f) return -1;
    int rc = ckpt_file_get(f, "ps.pushes_total", counts, WORKERS * sizeof *counts, err, sizeof err);
    ckpt_file_free(&f);
    return rc;
}

static void resumed_shard(void) {
    run_t r;
    start_run(&r, "resumed-shard", 1);
    pid_t w0 = fork();
    CHECK(w0 >= 0);
    if (w0 == 0) {
        worker_t w;
        worker_begin(&w, &r, 0);
        client_connect(&w);
        int i = 0;
        for (; i < C_A; i++) client_push(&w, 0, i, (uint64_t)i);
        client_wait(&w);
        touch(&r, "w0-A");
        wait_file(&r, "go-B");
        for (; i < C_A + C_B; i++) client_push(&w, 0, i, (uint64_t)i);
        client_wait(&w);
        touch(&r, "w0-B");
        wait_file(&r, "go-C");
        for (; i < C_A + C_B + C_C; i++) client_push(&w, 0, i, (uint64_t)i);  // the first waits for the shard
        client_wait(&w);
        wait_file(&r, "w1-done");
        client_save_model(&w, &r);
        worker_end(&w);
    }
    pid_t w1 = fork();
    CHECK(w1 >= 0);
    if (w1 == 0) {
        worker_t w;
        worker_begin(&w, &r, 1);
        raw_connect(&w);
        for (int i = 0; i < C_RAW; i++) {
            w.counts[0].sent++;
            raw_push(&w, 0, i, 1);
            raw_expect(&w, 0, MSG_TYPE_PUSH_ACK, (uint64_t)i);
            w.counts[0].acked++;
        }
        touch(&r, "w1-A");
        wait_file(&r, "go-B");
        // Applied after the checkpoint; its acknowledgement arrives, and this
        // worker takes it as lost: it does not count it, and sends the push again
        // to the resumed shard, which applies it again.
        w.counts[0].sent++;
        raw_push(&w, 0, C_RAW, 1);
        raw_expect(&w, 0, MSG_TYPE_PUSH_ACK, C_RAW);
        touch(&r, "w1-B");
        wait_file(&r, "go-C");
        raw_push(&w, 0, C_RAW, 1);
        raw_expect(&w, 0, MSG_TYPE_PUSH_ACK, C_RAW);
        w.counts[0].acked++;
        raw_bye(&w);
        touch(&r, "w1-done");
        worker_end(&w);
    }
    wait_file(&r, "w0-A");
    wait_file(&r, "w1-A");
    // Once a checkpoint holds phase A, no later one is written: a directory
    // where the shard writes its next one (CHECKPOINT.tmp) makes each fail.
    uint64_t held[WORKERS] = {0};
    double until = proc_now_s() + WAIT_S;
    while (checkpoint_counts(&r, held) != 0 || held[0] != C_A || held[1] != C_RAW) {
        CHECK(proc_now_s() < until);
        proc_sleep_ms(5);
    }
    const char *tmp = proc_path(r.ck, "server-0.ckpt.tmp");
    while (mkdir(tmp, 0755) != 0) {  // EEXIST: a checkpoint being written
        CHECK(errno == EEXIST && proc_now_s() < until);
        proc_sleep_ms(1);
    }
    CHECK(checkpoint_counts(&r, held) == 0 && held[0] == C_A && held[1] == C_RAW);
    touch(&r, "go-B");
    wait_file(&r, "w0-B");
    wait_file(&r, "w1-B");
    CHECK(kill(r.server[0], SIGKILL) == 0);
    CHECK(proc_wait(r.server[0], WAIT_S) == 128 + SIGKILL);
    CHECK(rmdir(tmp) == 0);
    r.server[0] = start_server(&r, 0, 1);
    CHECK(proc_wait_for_text(proc_path(r.rd, "server-0.err"), "resumed from", WAIT_S));
    touch(&r, "go-C");
    pid_t kids[] = {w0, w1};
    finish_run(&r, kids, 2);
    printf(
        "c) shard 0 killed after %d + %d pushes of worker 0 (its checkpoint held %d) and %d + 1 of worker 1 (held "
        "%d), resumed:\n",
        C_A, C_B, C_A, C_RAW, C_RAW);
    char *json = proc_slurp(proc_path(r.rd, "server-0.json"));
    CHECK(proc_json_number(json, "resumed_pushes_by_worker", "0") == C_A);
    CHECK(proc_json_number(json, "resumed_pushes_by_worker", "1") == C_RAW);
    free(json);
    // Shard 0: worker 0's phase B is lost; worker 1's push after the checkpoint
    // was lost too, then applied again when resent.
    const uint64_t shard0[WORKERS][3] = {{C_A + C_C, C_B, ANY_DUPS}, {C_RAW + 1, 0, 0}};
    const uint64_t shard1[WORKERS][3] = {{C_A + C_B + C_C, 0, ANY_DUPS}, {0, 0, 0}};
    expect_shard(&r, 0, shard0);
    expect_shard(&r, 1, shard1);
    const uint64_t w0_ledger[SHARDS][2] = {{C_A + C_B + C_C, C_A + C_B + C_C}, {C_A + C_B + C_C, C_A + C_B + C_C}};
    const uint64_t w1_ledger[SHARDS][2] = {{C_RAW + 1, C_RAW + 1}, {0, 0}};
    expect_ledger(&r, 0, 1, w0_ledger);
    expect_ledger(&r, 1, 1, w1_ledger);
    applied_t ap[C_A + C_B + 2 * C_C + C_RAW + 1];
    size_t n = 0;
    for (int i = 0; i < C_A + C_B + C_C; i++) {
        int lost = i >= C_A && i < C_A + C_B;
        ap[n++] = (applied_t){0, 0, i, lost ? 1 : -1};  // phase B only in shard 1
    }
    for (int i = 0; i <= C_RAW; i++) ap[n++] = (applied_t){1, 0, i, 0};
    expect_model(&r, ap, n);
    expect_check(&r, 0, 0);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    killed_worker();
    duplicated_push();
    resumed_shard();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
