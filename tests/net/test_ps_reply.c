// Zero-copy PARAMS replies (net/ps_reply.h): a shard lends its values to a
// reply, and a push applied while the reply is still held goes to the other
// buffer, so that the reply carries exactly the values of the version it
// names and the shard ends where the serial order puts it.
//
// Everything is on inproc:// in one context, where libzmq hands the reply
// message itself to the receiving socket: a raw DEALER that has the reply
// waiting (zmq_poll says so) but has not read it holds the shard's buffer, for
// as long as the test wants, with no timing involved.
//
// 1. ASP: reader R pulls and leaves the reply unread; worker W pushes g1 and
//    pulls, pushes g2 and pulls. R's reply is w0 bit for bit, W's pulls are
//    w0 - lr g1 and w0 - lr g1 - lr g2 (sgd_update_cpu in the test, in order);
//    the shard counts one write moved and W's first reply copied. Then the
//    same with payloads in shared memory (--ps-transport shm): the values'
//    buffers are in /dev/shm and the lent replies go by reference without a
//    copy, R's holding a reader on the buffer until R reads and closes it;
//    the same bits and the same counts, and four payloads sent without a
//    copy (two replies, and W's pushes, written in their slots).
// 2. BSP, 2 workers, 2 shards, and an observer that holds a reply over a
//    round: every pulled model is the serial weighted sum applied once per
//    round (computed here), and the observer's held reply is the model before
//    the round.
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <zmq.h>

#include "kernels/foundation/partition.h"
#include "kernels/update.h"
#include "net/ps_client.h"
#include "net/ps_server.h"
#include "net/shm_frames.h"
#include "net/zmsg.h"
#include "tests/support/server_thread.h"
#include "tests/support/test_support.h"

#define RUN_ID 0x7e57000052e90001ull
#define TIMEOUT_MS 60000  // a hang guard, not a window: generous for TSan on a loaded machine
#define N 10007  // several of ps_reply.c's blocks, not a multiple of one
#define MAX_SHARDS 2

static void server_start(server_thread_t *st, void *ctx, ps_config_t c, size_t shard, const float *init,
                         const char *endpoint) {
    char err[256];
    c.shard = shard;
    size_t begin, end;
    shard_range(c.n_params, c.n_shards, shard, &begin, &end);
    st->s = ps_server_new(ctx, &c, endpoint, init + begin, err, sizeof err);
    if (!st->s) {
        fprintf(stderr, "ps_server_new: %s\n", err);
        exit(1);
    }
    server_thread_start(st);
}

static void server_finish(server_thread_t *st, ps_stats_t *stats) {
    atomic_store(&st->stop, 1);
    server_thread_join(st);
    ps_server_stats(st->s, stats);
    ps_server_destroy(&st->s);
}

static ps_config_t config(size_t n_shards, size_t n_workers, sync_mode_t mode) {
    ps_config_t c;
    memset(&c, 0, sizeof c);
    c.run_id = RUN_ID;
    c.n_shards = n_shards;
    c.n_params = N;
    c.n_workers = n_workers;
    c.mode = mode;
    c.optimizer = OPTIMIZER_KIND_SGD;
    c.lr = 0.37f;
    c.quiet = 1;
    return c;
}

static void fill(float *v, size_t n, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, 0);
    for (size_t i = 0; i < n; i++) v[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
}

static void check_bits(const float *got, const float *want, size_t n, const char *what) {
    if (memcmp(got, want, n * sizeof *got) == 0) return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0) {
            fprintf(stderr, "FAILED: %s: value %zu is %.9g, want %.9g\n", what, i, (double)got[i], (double)want[i]);
            exit(1);
        }
}

static ps_client_t *client(void *ctx, uint32_t worker, const char *const *eps, size_t n_shards) {
    char err[256];
    ps_client_t *c = ps_client_new(ctx, RUN_ID, worker, eps, n_shards, N, 0, TIMEOUT_MS, err, sizeof err);
    if (!c) {
        fprintf(stderr, "ps_client_new(worker %u): %s\n", worker, err);
        exit(1);
    }
    return c;
}

static void push(ps_client_t *c, size_t n_shards, const float *g, uint64_t clock, uint32_t examples, int bsp) {
    char err[256];
    float *const *frames = ps_client_push_frames(c, err, sizeof err);
    CHECK(frames != NULL);
    for (size_t k = 0; k < n_shards; k++) {
        size_t begin, end;
        shard_range(N, n_shards, k, &begin, &end);
        memcpy(frames[k], g + begin, (end - begin) * sizeof *g);
    }
    CHECK_OK(ps_client_push_commit(c, clock, examples, bsp, err, sizeof err), err);
}

static void pull(ps_client_t *c, uint64_t need, float *out) {
    char err[256];
    CHECK_OK(ps_client_pull(c, need, out, NULL, err, sizeof err), err);
}

// A raw DEALER that sends a PULL as `sender` and waits until the whole reply
// is in its queue, without reading it.
static void *raw_dealer(void *ctx, const char *endpoint) { return server_test_dealer(ctx, endpoint, TIMEOUT_MS); }

static void raw_send(void *d, wire_header_t h) {
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(&h, bytes);
    CHECK(zmq_send(d, bytes, sizeof bytes, 0) == (int)sizeof bytes);
}

static void pull_and_hold(void *d, uint32_t sender, uint32_t shard) {
    wire_header_t h = zmsg_header(MSG_TYPE_PULL, RUN_ID);
    h.sender = sender;
    h.shard = shard;
    raw_send(d, h);
    zmq_pollitem_t item = {.socket = d, .events = ZMQ_POLLIN};
    CHECK(zmq_poll(&item, 1, TIMEOUT_MS) == 1);  // the reply is here (inproc: the message itself)
}

// Reads the held reply (checksum verified by zmsg_recv) into out.
static void read_held(void *d, float *out, size_t n, uint64_t *version) {
    char err[256];
    zmsg_t m;
    int got = zmsg_recv(d, 0, RUN_ID, &m, err, sizeof err);
    if (got != 1) {
        fprintf(stderr, "FAILED: the held reply: %s\n", got < 0 ? err : wire_status_name(m.status));
        exit(1);
    }
    CHECK(m.h.type == MSG_TYPE_PARAMS && m.h.count == n && m.n_frames == 1);
    memcpy(out, zmsg_payload(&m, 0), n * sizeof *out);
    *version = m.h.param_version;
    zmsg_close(&m);
}

static uint64_t payloads_without_copy(void) {
    shm_frames_counts_t c;
    shm_frames_counts(&c);
    return c.without_copy;
}

static void test_asp(int shm) {
    if (shm) shm_frames_enable(RUN_ID);
    uint64_t lent_before = payloads_without_copy();
    void *ctx = zmq_ctx_new();
    CHECK(ctx != NULL);
    ps_config_t c = config(1, 2, SYNC_MODE_ASP);
    float *w0 = malloc(N * sizeof *w0), *g1 = malloc(N * sizeof *g1), *g2 = malloc(N * sizeof *g2);
    float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    CHECK(w0 && g1 && g2 && want && got);
    fill(w0, N, 1), fill(g1, N, 2), fill(g2, N, 3);
    server_thread_t st;
    server_start(&st, ctx, c, 0, w0, "inproc://ps-reply-asp");
    const char *eps[1] = {"inproc://ps-reply-asp"};

    // Worker 1 reads through a raw socket and holds the reply.
    void *r = raw_dealer(ctx, eps[0]);
    wire_header_t hello = zmsg_header(MSG_TYPE_HELLO, RUN_ID);
    hello.sender = 1;
    hello.shard = 0;
    hello.offset = N;
    raw_send(r, hello);
    {
        char err[256];
        zmsg_t m;
        CHECK(zmsg_recv(r, 0, RUN_ID, &m, err, sizeof err) == 1 && m.h.type == MSG_TYPE_WELCOME);
        zmsg_close(&m);
    }
    ps_client_t *w = client(ctx, 0, eps, 1);
    pull_and_hold(r, 1, 0);

    push(w, 1, g1, 0, 1, 0);
    pull(w, 0, got);  // after g1 (the pull waits behind the push on the same socket)
    memcpy(want, w0, N * sizeof *want);
    sgd_update_cpu(N, c.lr, g1, want);
    check_bits(got, want, N, "worker's pull after a push applied while a reply was lent");

    uint64_t v = 99;
    read_held(r, got, N, &v);
    CHECK(v == 0);
    check_bits(got, w0, N, "a lent reply after a push was applied behind it");

    push(w, 1, g2, 1, 1, 0);
    pull(w, 0, got);
    sgd_update_cpu(N, c.lr, g2, want);
    check_bits(got, want, N, "worker's pull after the second push");
    char err[256];
    CHECK_OK(ps_client_bye(w, err, sizeof err), err);
    ps_client_destroy(&w);
    zmq_close(r);
    ps_stats_t s;
    server_finish(&st, &s);
    // R's reply lent; g1 moved (R held the values); W's first reply copied (the
    // other buffer was still lent); g2 in place; W's second reply lent.
    CHECK(s.writes_moved == 1);
    CHECK(s.replies_copied == 1);
    CHECK(s.replies_lent == 2);
    CHECK(s.version == 2);
    zmq_ctx_term(ctx);
    free(w0), free(g1), free(g2), free(want), free(got);
    // By reference, without a copy: the two lent replies (R's and W's
    // second) and W's two pushes, filled in their slots.
    CHECK(payloads_without_copy() - lent_before == (shm ? 4u : 0u));
    if (shm) shm_frames_disable();
    printf(
        "asp%s: a push applied while a reply was lent moved the values; the reply held w0 and the model is the serial "
        "one, bit for bit\n",
        shm ? " (payloads in shared memory)" : "");
}

#define ROUNDS 4

static void test_bsp(void) {
    void *ctx = zmq_ctx_new();
    CHECK(ctx != NULL);
    ps_config_t c = config(2, 2, SYNC_MODE_BSP);
    float *w0 = malloc(N * sizeof *w0), *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    float *held = malloc(N * sizeof *held), *sum = malloc(N * sizeof *sum);
    float *g[2] = {malloc(N * sizeof(float)), malloc(N * sizeof(float))};
    CHECK(w0 && want && got && held && sum && g[0] && g[1]);
    fill(w0, N, 11);
    server_thread_t st[2];
    const char *eps[2] = {"inproc://ps-reply-bsp-0", "inproc://ps-reply-bsp-1"};
    for (size_t k = 0; k < 2; k++) server_start(&st[k], ctx, c, k, w0, eps[k]);
    ps_client_t *w[2] = {client(ctx, 0, eps, 2), client(ctx, 1, eps, 2)};
    void *obs = raw_dealer(ctx, eps[1]);
    memcpy(want, w0, N * sizeof *want);
    size_t b1, e1;
    shard_range(N, 2, 1, &b1, &e1);
    const uint32_t examples[2] = {3, 5};
    for (uint64_t r = 0; r < ROUNDS; r++) {
        // The observer holds a reply of shard 1 across this round.
        pull_and_hold(obs, WIRE_NO_ID, 1);
        for (int k = 0; k < 2; k++) {
            fill(g[k], N, 100 + 10 * r + (uint64_t)k);
            push(w[k], 2, g[k], r, examples[k], 1);
        }
        for (int k = 0; k < 2; k++) {
            pull(w[k], r + 1, got);
            if (k == 0) {
                // The servers' rule: the weighted sum in worker order, applied once.
                memset(sum, 0, N * sizeof *sum);
                for (int j = 0; j < 2; j++) axpy_cpu(N, (float)examples[j] / 8.0f, g[j], sum);
                memcpy(held, want, N * sizeof *held);  // the model before the round
                sgd_update_cpu(N, c.lr, sum, want);
            }
            check_bits(got, want, N, "bsp round's model");
        }
        uint64_t v = 99;
        read_held(obs, got, e1 - b1, &v);
        CHECK(v == r);
        check_bits(got, held + b1, e1 - b1, "observer's reply held across a round");
    }
    char err[256];
    for (int k = 0; k < 2; k++) {
        CHECK_OK(ps_client_bye(w[k], err, sizeof err), err);
        ps_client_destroy(&w[k]);
    }
    zmq_close(obs);
    ps_stats_t s[2];
    for (size_t k = 0; k < 2; k++) server_finish(&st[k], &s[k]);
    CHECK(s[1].writes_moved == ROUNDS);  // every round's apply found the observer's reply holding the values
    CHECK(s[0].writes_moved == 0);  // nobody held shard 0's
    CHECK(s[0].version == ROUNDS && s[1].version == ROUNDS);
    zmq_ctx_term(ctx);
    free(w0), free(want), free(got), free(held), free(sum), free(g[0]), free(g[1]);
    printf(
        "bsp: %d rounds on 2 shards bit for bit the serial weighted sums; an observer's reply held across each round "
        "kept the round's starting values\n",
        ROUNDS);
}

int main(void) {
    test_asp(0);
    test_asp(1);
    test_bsp();
    printf("test_ps_reply: ok\n");
    return 0;
}
