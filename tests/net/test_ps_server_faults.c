// A parameter-server shard's handling of failures, message by message: the
// shard runs ps_server_run in a thread on 127.0.0.1, the workers are raw
// DEALER sockets (so that the test decides exactly what is sent and when) or
// ps_heartbeat threads.
//
//   a) a push sent twice (a retry) is applied once and acknowledged twice,
//      each acknowledgement naming the push's clock;
//   b) a silent worker is evicted after the worker timeout: an SSP pull that
//      waited for it is answered, its next push is refused as EVICTED, and its
//      HELLO rejoins it at the slowest live worker's clock;
//   c) heartbeats keep a worker that sends nothing else from being evicted:
//      of two workers it fell silent first, yet the other is evicted and it
//      is not;
//   d) a push holding NaN is refused, the values stay as they were, and the
//      shard stops with an error saying the run diverged;
//   e) the shard ends once every worker has left or been evicted and one more
//      timeout has passed;
//   f) a shard that adopts another's saved state judges a push's clock as
//      that shard would;
//   g) under BSP, a gradient the shard holds as received (its round not yet
//      complete) travels in the saved state: the copy that adopts it applies
//      it with the other worker's, bit for bit the weighted sum.
// Nothing is timed: what is checked is which messages come back, in which
// order, and the shard's counts. Heartbeats come every 50 ms against a worker
// timeout of WORKER_TIMEOUT_MS (20 missed, which no live thread misses on a
// loaded machine or under TSan); every wait is bounded only to end a hang.
#include <pthread.h>
#include <stdatomic.h>
#include <zmq.h>

#include "net/ps_heartbeat.h"
#include "net/ps_server.h"
#include "net/zmsg.h"
#include "tests/support/proc_support.h"

#define RUN_ID 0x7e57000fa0170001ull
#define N 8
#define TIMEOUT_MS 5000  // a reply's hang bound
#define WORKER_TIMEOUT_MS 1000  // the shard evicts a worker silent this long
#define HEARTBEAT_MS 50

typedef struct shard {
    ps_server_t *s;
    pthread_t tid;
    atomic_int stop, returned;
    int rc;
    char err[256];
    const char *adopt;
} shard_t;

static void *serve(void *arg) {
    shard_t *sh = arg;
    sh->rc = ps_server_run(sh->s, &sh->stop, sh->err, sizeof sh->err);
    atomic_store(&sh->returned, 1);
    return NULL;
}

static void shard_start(shard_t *sh, void *ctx, sync_mode_t mode, size_t workers, int worker_timeout_ms,
                        const float *init) {
    ps_config_t c;
    memset(&c, 0, sizeof c);
    c.run_id = RUN_ID;
    c.n_shards = 1;
    c.n_params = N;
    c.n_workers = workers;
    c.mode = mode;
    c.staleness = 0;
    c.lr = 0.5f;
    c.adagrad_eps = 1e-8f;
    c.worker_timeout_ms = worker_timeout_ms;
    c.quiet = 1;
    char err[256];
    const char *adopt = sh->adopt;  // set by the caller: a saved state the shard takes before serving
    memset(sh, 0, sizeof *sh);
    sh->adopt = adopt;
    sh->s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK_OK(sh->s == NULL, err);
    if (sh->adopt) CHECK_OK(ps_server_adopt(sh->s, sh->adopt, err, sizeof err), err);
    atomic_init(&sh->stop, 0);
    atomic_init(&sh->returned, 0);
    CHECK(pthread_create(&sh->tid, NULL, serve, sh) == 0);
}

static void shard_join(shard_t *sh) { CHECK(pthread_join(sh->tid, NULL) == 0); }

static void *dealer(void *ctx, const ps_server_t *s, uint32_t worker) {
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    char id[16];
    int n = snprintf(id, sizeof id, "w%u", worker), zero = 0, timeout = TIMEOUT_MS;
    CHECK(zmq_setsockopt(d, ZMQ_ROUTING_ID, id, (size_t)n) == 0);
    CHECK(zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero) == 0);
    CHECK(zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout, sizeof timeout) == 0);
    CHECK(zmq_connect(d, ps_server_endpoint(s)) == 0);
    return d;
}

static void send_msg(void *d, wire_header_t h, const float *values) {
    char err[256];
    zmq_msg_t frame;
    if (values) {
        CHECK_OK(zmsg_frame_alloc(&frame, N * sizeof(float), err, sizeof err), err);
        memcpy(zmq_msg_data(&frame), values, N * sizeof(float));
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.count = N;
    }
    CHECK_OK(zmsg_send(d, NULL, &h, values ? &frame : NULL, values ? 1 : 0, 0, err, sizeof err), err);
}

static wire_header_t header(uint16_t type, uint32_t worker, uint64_t clock) {
    wire_header_t h = zmsg_header(type, RUN_ID);
    h.sender = worker;
    h.shard = 0;
    h.clock = clock;
    if (type == MSG_TYPE_HELLO) h.offset = N;
    if (type == MSG_TYPE_PUSH) h.aux = 1;  // the steps it covers: one, as a batch-1 worker's push
    return h;
}

// The next reply, which must be of `type` (and aux `aux` for a REJECT).
static wire_header_t expect(void *d, uint16_t type, uint32_t aux) {
    char err[256];
    zmsg_t m;
    int got = zmsg_recv(d, 0, RUN_ID, &m, err, sizeof err);
    if (got != 1) {
        fprintf(stderr, "no valid reply (want %s): %s\n", msg_type_name(type), got < 0 ? err : "invalid");
        exit(1);
    }
    wire_header_t h = m.h;
    zmsg_close(&m);
    if (h.type != type || (type == MSG_TYPE_REJECT && h.aux != aux)) {
        fprintf(stderr, "got %s (aux %u), want %s (aux %u)\n", msg_type_name(h.type), h.aux, msg_type_name(type), aux);
        exit(1);
    }
    return h;
}

// Nothing arrives within ms.
static void expect_nothing(void *d, int ms) {
    zmq_pollitem_t item = {d, 0, ZMQ_POLLIN, 0};
    CHECK(zmq_poll(&item, 1, ms) == 0);
}

// Heartbeats from worker every HEARTBEAT_MS until a reply is waiting on d
// (which the caller then reads); fails after 60 s without one.
static void heartbeat_until_reply(void *d, uint32_t worker) {
    double until = proc_now_s() + 60.0;
    for (;;) {
        send_msg(d, header(MSG_TYPE_HEARTBEAT, worker, 0), NULL);
        zmq_pollitem_t item = {d, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&item, 1, HEARTBEAT_MS);
        CHECK(rc >= 0);
        if (rc == 1) return;
        CHECK(proc_now_s() < until);
    }
}

static void bye(void *d, uint32_t worker) {
    send_msg(d, header(MSG_TYPE_BYE, worker, 0), NULL);
    expect(d, MSG_TYPE_BYE_ACK, 0);
}

static void hello(void *d, uint32_t worker) {
    send_msg(d, header(MSG_TYPE_HELLO, worker, 0), NULL);
    expect(d, MSG_TYPE_WELCOME, 0);
}

// Saves a stopped shard's state into a new file named from `path` (ending in XXXXXX).
static void save_state(const shard_t *sh, char *path) {
    char err[256];
    int fd = mkstemp(path);
    CHECK(fd >= 0 && close(fd) == 0);
    CHECK_OK(ps_server_save(sh->s, path, err, sizeof err), err);
}

// a) a retried push is applied once.
static void test_duplicate_push(void *ctx) {
    float init[N], g[N], want[N];
    for (int j = 0; j < N; j++) init[j] = (float)j, g[j] = 0.25f * (float)(j + 1), want[j] = init[j] - 0.5f * g[j];
    shard_t sh = {0};
    shard_start(&sh, ctx, SYNC_MODE_ASP, 1, 0, init);
    void *d = dealer(ctx, sh.s, 0);
    send_msg(d, header(MSG_TYPE_HELLO, 0, 0), NULL);
    CHECK(expect(d, MSG_TYPE_WELCOME, 0).clock == 0);
    send_msg(d, header(MSG_TYPE_PUSH, 0, 0), g);
    send_msg(d, header(MSG_TYPE_PUSH, 0, 0), g);  // its retry
    CHECK(expect(d, MSG_TYPE_PUSH_ACK, 0).offset == 0);
    CHECK(expect(d, MSG_TYPE_PUSH_ACK, 0).offset == 0);
    expect_nothing(d, 100);  // one acknowledgement per message, nothing more
    wire_header_t later = header(MSG_TYPE_PUSH, 0, 3);  // a later push (rounds 1-2 in between carried nothing)
    later.aux = 1;  // one step since clock 0 cannot reach clock 3 (docs/security.md): refused
    send_msg(d, later, g);
    expect(d, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE);
    later.aux = 2;  // two can: the clock is now just plausible
    send_msg(d, later, g);
    CHECK(expect(d, MSG_TYPE_PUSH_ACK, 0).offset == 3);
    for (int j = 0; j < N; j++) want[j] -= 0.5f * g[j];
    bye(d, 0);
    shard_join(&sh);
    CHECK_OK(sh.rc, sh.err);
    ps_stats_t st;
    ps_server_stats(sh.s, &st);
    printf("duplicate: 3 pushes sent, %llu applied, %llu acknowledged again\n", (unsigned long long)st.pushes_applied,
           (unsigned long long)st.duplicates);
    CHECK(st.pushes_applied == 2 && st.duplicates == 1 && st.version == 2);
    CHECK(memcmp(ps_server_values(sh.s), want, sizeof want) == 0);
    CHECK(ps_server_clocks(sh.s)[0] == 4);
    zmq_close(d);
    ps_server_destroy(&sh.s);
}

// f) a shard that adopts another's saved state (a rejoining replica,
// ps_server_adopt) judges a push's clock as that shard would: the steps the
// worker's pushes claimed travel with the state, so a clock the first shard
// would refuse is refused by the copy too (a resumed shard instead re-anchors).
static void test_adopted_claims(void *ctx) {
    float init[N] = {0}, g[N];
    for (int j = 0; j < N; j++) g[j] = 1.0f;
    shard_t first = {0};
    shard_start(&first, ctx, SYNC_MODE_ASP, 1, 0, init);
    void *d = dealer(ctx, first.s, 0);
    hello(d, 0);
    wire_header_t h = header(MSG_TYPE_PUSH, 0, 0);
    h.aux = 3;  // clock 0 with 3 steps: clocks up to 3 are plausible next
    send_msg(d, h, g);
    expect(d, MSG_TYPE_PUSH_ACK, 0);
    atomic_store(&first.stop, 1);
    shard_join(&first);
    zmq_close(d);
    char path[] = "/tmp/asgd_adopt_XXXXXX";
    save_state(&first, path);
    shard_t copy = {.adopt = path};
    shard_start(&copy, ctx, SYNC_MODE_ASP, 1, 0, init);
    d = dealer(ctx, copy.s, 0);
    h = header(MSG_TYPE_PUSH, 0, 5);  // 5 > 0 + 3 + 1
    send_msg(d, h, g);
    expect(d, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE);
    h.clock = 4;  // 0 + 3 + 1: plausible
    send_msg(d, h, g);
    CHECK(expect(d, MSG_TYPE_PUSH_ACK, 0).offset == 4);
    bye(d, 0);
    shard_join(&copy);
    CHECK_OK(copy.rc, copy.err);
    CHECK(ps_server_clocks(copy.s)[0] == 5);
    printf("adopted claims: the copy refused clock 5 and took clock 4 after a push of clock 0 with 3 steps\n");
    zmq_close(d);
    unlink(path);
    ps_server_destroy(&first.s);
    ps_server_destroy(&copy.s);
}

// g) BSP keeps a received dense gradient as it came (no copy) until its round
// is applied; saving the state then must write that gradient, so that the
// shard adopting it sums it with the round's other gradient.
static void test_saved_bsp_gradient(void *ctx) {
    float init[N] = {0}, g0[N], g1[N];
    for (int j = 0; j < N; j++) g0[j] = 0.25f * (float)(j + 1), g1[j] = -1.5f + (float)j;
    shard_t first = {0};
    shard_start(&first, ctx, SYNC_MODE_BSP, 2, 0, init);
    void *d0 = dealer(ctx, first.s, 0);
    hello(d0, 0);
    wire_header_t h = header(MSG_TYPE_PUSH, 0, 0);
    h.flags |= WIRE_FLAG_SUM;
    h.aux = 3;  // 3 examples: the round weighs it 3/4
    send_msg(d0, h, g0);
    expect(d0, MSG_TYPE_PUSH_ACK, 0);
    bye(d0, 0);
    atomic_store(&first.stop, 1);
    shard_join(&first);
    zmq_close(d0);
    CHECK(ps_server_values(first.s)[0] == 0.0f);  // the round waits for worker 1
    char path[] = "/tmp/asgd_bsp_held_XXXXXX";
    save_state(&first, path);
    shard_t copy = {.adopt = path};
    shard_start(&copy, ctx, SYNC_MODE_BSP, 2, 0, init);
    void *d1 = dealer(ctx, copy.s, 1);
    hello(d1, 1);
    h = header(MSG_TYPE_PUSH, 1, 0);
    h.flags |= WIRE_FLAG_SUM;
    h.aux = 1;
    send_msg(d1, h, g1);
    expect(d1, MSG_TYPE_PUSH_ACK, 0);
    bye(d1, 1);
    shard_join(&copy);
    CHECK_OK(copy.rc, copy.err);
    const float *w = ps_server_values(copy.s);
    for (int j = 0; j < N; j++) {
        float sum = 0.0f;
        sum += 0.75f * g0[j];
        sum += 0.25f * g1[j];
        float want = 0.0f - 0.5f * sum;
        CHECK(memcmp(&w[j], &want, sizeof want) == 0);
    }
    printf("saved bsp gradient: the copy summed worker 0's held gradient (3 examples) with worker 1's (1 example)\n");
    zmq_close(d1);
    unlink(path);
    ps_server_destroy(&first.s);
    ps_server_destroy(&copy.s);
}

// b) eviction and rejoin; e) the end after everyone is gone.
static void test_evict_and_rejoin(void *ctx) {
    float init[N] = {0}, g[N];
    for (int j = 0; j < N; j++) g[j] = 1.0f;
    shard_t sh = {0};
    shard_start(&sh, ctx, SYNC_MODE_SSP, 2, WORKER_TIMEOUT_MS, init);
    void *d0 = dealer(ctx, sh.s, 0), *d1 = dealer(ctx, sh.s, 1);
    hello(d0, 0);
    hello(d1, 1);
    // Worker 0 pushes rounds 0 and 1 and asks for parameters with every worker past round 1:
    // worker 1 (silent from now on) holds it until it is evicted.
    send_msg(d0, header(MSG_TYPE_PUSH, 0, 0), g);
    expect(d0, MSG_TYPE_PUSH_ACK, 0);
    send_msg(d0, header(MSG_TYPE_PUSH, 0, 1), g);
    expect(d0, MSG_TYPE_PUSH_ACK, 0);
    send_msg(d0, header(MSG_TYPE_PULL, 0, 2), NULL);
    // Worker 0 itself keeps talking (heartbeats), so only worker 1 goes silent.
    heartbeat_until_reply(d0, 0);
    wire_header_t p = expect(d0, MSG_TYPE_PARAMS, 0);
    // Every live worker past round 1: worker 1, at round 0, was no longer counted.
    printf("eviction: the pull waiting on the silent worker was answered with min clock %llu\n",
           (unsigned long long)p.clock);
    CHECK(p.clock == 2);
    // The evicted worker's push is refused, and its HELLO rejoins it at round 2.
    send_msg(d1, header(MSG_TYPE_PUSH, 1, 0), g);
    expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_EVICTED);
    send_msg(d1, header(MSG_TYPE_HELLO, 1, 0), NULL);
    CHECK(expect(d1, MSG_TYPE_WELCOME, 0).clock == 2);
    send_msg(d1, header(MSG_TYPE_PUSH, 1, 2), g);
    CHECK(expect(d1, MSG_TYPE_PUSH_ACK, 0).offset == 2);
    ps_stats_t st;
    // Both leave... worker 0 says goodbye, worker 1 goes silent again: evicted, then the shard ends by itself.
    bye(d0, 0);
    for (int i = 0; i < 6000 && !atomic_load(&sh.returned); i++) proc_sleep_ms(10);  // a hang bound: 60 s
    CHECK(atomic_load(&sh.returned));
    shard_join(&sh);
    CHECK_OK(sh.rc, sh.err);
    ps_server_stats(sh.s, &st);
    printf("eviction: evictions %llu, rejoins %llu, pulls that waited %llu; the shard ended by itself\n",
           (unsigned long long)st.evictions, (unsigned long long)st.rejoins, (unsigned long long)st.pulls_waited);
    CHECK(st.evictions == 2 && st.rejoins == 1 && st.pushes_applied == 3);
    CHECK(st.pulls_waited == 1);  // worker 0's pull, held until worker 1 was evicted
    CHECK(ps_server_pushes_per_worker(sh.s)[1] == 1 && ps_server_pushes_total_per_worker(sh.s)[1] == 1);
    CHECK(ps_server_clocks(sh.s)[1] == 3);
    zmq_close(d0);
    zmq_close(d1);
    ps_server_destroy(&sh.s);
}

// c) heartbeats alone keep a worker live. Worker 0 pushes round 0 and asks
// for parameters with every worker past round 0; then worker 1 says HELLO and
// nothing more. From then on worker 0 sends only heartbeats (from a
// ps_heartbeat thread): it fell silent before worker 1 did, so without them it
// would be evicted first and its pull dropped. With them, worker 1 is evicted,
// which answers the pull, and worker 0 goes on.
static void test_heartbeats(void *ctx) {
    float init[N] = {0}, g[N];
    for (int j = 0; j < N; j++) g[j] = 1.0f;
    char err[256];
    shard_t sh = {0};
    shard_start(&sh, ctx, SYNC_MODE_SSP, 2, WORKER_TIMEOUT_MS, init);
    void *d0 = dealer(ctx, sh.s, 0), *d1 = dealer(ctx, sh.s, 1);
    hello(d0, 0);
    const char *ep[1] = {ps_server_endpoint(sh.s)};
    ps_heartbeat_t *hb = ps_heartbeat_start(ctx, RUN_ID, 0, ep, 1, HEARTBEAT_MS, err, sizeof err);
    CHECK_OK(hb == NULL, err);
    send_msg(d0, header(MSG_TYPE_PUSH, 0, 0), g);
    expect(d0, MSG_TYPE_PUSH_ACK, 0);
    send_msg(d0, header(MSG_TYPE_PULL, 0, 1), NULL);  // held: worker 1 is at round 0
    hello(d1, 1);  // worker 1's last word; the shard heard it after worker 0's pull
    wire_header_t p = expect(d0, MSG_TYPE_PARAMS, 0);  // waits (up to TIMEOUT_MS) for the eviction
    CHECK(p.clock == 1);  // worker 1 no longer counted; worker 0, which pushed round 0, still is
    send_msg(d0, header(MSG_TYPE_PULL, 0, 0), NULL);
    expect(d0, MSG_TYPE_PARAMS, 0);  // not EVICTED
    ps_heartbeat_stop(&hb);
    CHECK(hb == NULL);
    bye(d0, 0);
    shard_join(&sh);
    CHECK_OK(sh.rc, sh.err);
    ps_stats_t st;
    ps_server_stats(sh.s, &st);
    printf(
        "heartbeats: worker 0 fell silent but for heartbeats before worker 1 did: evictions %llu (worker 1's), "
        "worker 0's pull answered at min clock %llu\n",
        (unsigned long long)st.evictions, (unsigned long long)p.clock);
    CHECK(st.evictions == 1 && st.pulls_waited == 1);
    zmq_close(d0);
    zmq_close(d1);
    ps_server_destroy(&sh.s);
}

// d) NaN in a push: refused, the shard keeps its values and fails with the reason.
static void test_not_finite(void *ctx) {
    float init[N], g[N];
    for (int j = 0; j < N; j++) init[j] = (float)j, g[j] = 1.0f;
    g[5] = NAN;
    shard_t sh = {0};
    shard_start(&sh, ctx, SYNC_MODE_ASP, 2, 0, init);
    void *d0 = dealer(ctx, sh.s, 0), *d1 = dealer(ctx, sh.s, 1);
    hello(d0, 0);
    hello(d1, 1);
    send_msg(d0, header(MSG_TYPE_PUSH, 0, 0), g);
    expect(d0, MSG_TYPE_REJECT, WIRE_STATUS_NOT_FINITE);
    send_msg(d1, header(MSG_TYPE_PULL, 1, 0), NULL);  // the other worker learns it too
    expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_NOT_FINITE);
    shard_join(&sh);
    printf("not finite: the shard stopped with: %s\n", sh.err);
    CHECK(sh.rc == -1 && strstr(sh.err, "NaN or Inf") && strstr(sh.err, "worker 0"));
    CHECK(memcmp(ps_server_values(sh.s), init, sizeof init) == 0);
    zmq_close(d0);
    zmq_close(d1);
    ps_server_destroy(&sh.s);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    void *ctx = zmq_ctx_new();
    CHECK(ctx);
    test_duplicate_push(ctx);
    test_evict_and_rejoin(ctx);
    test_heartbeats(ctx);
    test_not_finite(ctx);
    test_adopted_claims(ctx);
    test_saved_bsp_gradient(ctx);
    CHECK(zmq_ctx_term(ctx) == 0);
    return 0;
}
