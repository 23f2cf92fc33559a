// Parameter-server shards over real sockets on 127.0.0.1: each server runs
// ps_server_run in its own thread, the workers are ps_clients (and, for
// malformed input, a raw DEALER) in the test. The server threads and the test
// share only the atomic stop flag (and a "returned" flag); everything else the
// test reads from a server it reads after joining its thread.
//
//   a) ASP sums: dense and sparse pushes and keyed pulls over two shards of an
//      odd-sized model give exactly w - lr*g (SGD) or the Adagrad formula.
//   b) exactly once: 3 workers x K pushes are each applied once and acked once
//      per shard; the shards stop by themselves once everyone has left.
//   c) BSP: a pull for clock 1 waits for both workers; the example-weighted sum
//      is applied once; a push for the wrong clock is refused; a worker's BYE
//      completes a round.
//   d) SSP at the server: a pull for clock 2 waits until the slow worker has
//      pushed 2 rounds; clock staleness stays within the bound.
//   e) malformed input is dropped and counted per reason, requests the shard
//      cannot serve are refused, and a normal worker is served afterwards.
//   f) failures: no server, another model, another shard layout, bad configs.
//   g) a resent HELLO (the same nonce and proposed clock) is answered with the
//      same WELCOME and moves nothing, so the worker's next push is applied.
//   i) BSP rounds through shared memory (net/ps_local_round.h), two shards:
//      worker 0 posts while worker 1 pushes through its socket, and both get
//      the same round's values, bit for bit those of the weighted sum; a post
//      for the wrong clock is refused through the segment, naming the shard;
//      a post holding NaN that its writer did not vouch for is refused as
//      not finite.
//   h) HELLOs held (ps_server_hold_hellos, shard 0 with its evaluator): an
//      observer's pull sent after a worker's HELLO is answered while the
//      HELLO is not; once the flag is raised the worker is welcomed.
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <zmq.h>

#include "kernels/foundation/rng.h"
#include "kernels/foundation/partition.h"
#include "net/compress.h"
#include "net/ps_client.h"
#include "net/ps_local_round.h"
#include "net/ps_server.h"
#include "net/wire.h"
#include "net/zmsg.h"
#include "tests/support/test_support.h"

#define RUN_ID 0x7e57000051ad0001ull
#define TIMEOUT_MS 5000  // every wait a client makes; only reached when something is broken
#define MAX_SHARDS 2

static void sleep_ms(int ms) {
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Exact float comparison, reporting the first mismatch.
static void check_bits(const float *got, const float *want, size_t n, const char *what, int line) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            fprintf(stderr, "%s:%d: %s: element %zu is %.9g, want %.9g (bitwise)\n", __FILE__, line, what, i,
                    (double)got[i], (double)want[i]);
            exit(1);
        }
    }
}
#define CHECK_BITS(got, want, n, what) check_bits((got), (want), (n), (what), __LINE__)

// Seeded values in [-1, 1), never zero.
static void random_values(float *v, size_t n, uint64_t seed, uint64_t stream) {
    rng_t r;
    rng_seed(&r, seed, stream);
    for (size_t i = 0; i < n; i++) {
        v[i] = (float)(2.0 * rng_uniform(&r) - 1.0);
        if (v[i] == 0.0f) v[i] = 0.375f;
    }
}

// ---- servers in threads -----------------------------------------------------------

typedef struct server_thread {
    ps_server_t *s;
    atomic_int *stop;
    atomic_int returned;  // set when ps_server_run has returned
    pthread_t tid;
    int rc;  // read after join
    char err[256];
} server_thread_t;

static void *server_main(void *arg) {
    server_thread_t *st = arg;
    st->rc = ps_server_run(st->s, st->stop, st->err, sizeof st->err);
    atomic_store(&st->returned, 1);
    return NULL;
}

typedef struct cluster {
    size_t n_shards;
    server_thread_t st[MAX_SHARDS];
    char endpoint[MAX_SHARDS][256];
    const char *endpoints[MAX_SHARDS];
    atomic_int stop;
} cluster_t;

static ps_config_t config(size_t n_shards, size_t n_params, size_t n_workers, sync_mode_t mode) {
    ps_config_t c;
    memset(&c, 0, sizeof c);
    c.run_id = RUN_ID;
    c.n_shards = n_shards;
    c.n_params = n_params;
    c.n_workers = n_workers;
    c.mode = mode;
    c.staleness = 0;
    c.optimizer = OPTIMIZER_KIND_SGD;
    c.lr = 0.5f;
    c.adagrad_eps = 1e-8f;
    c.heartbeat_ms = 0;
    c.quiet = 1;
    return c;
}

// One server per shard, each holding its part of init (the whole model), each
// in its thread; with hold, each holds its HELLOs until *hold is raised.
static void cluster_start_held(cluster_t *cl, void *ctx, const ps_config_t *base, const float *init,
                               const atomic_int *hold) {
    char err[256];
    CHECK(base->n_shards <= MAX_SHARDS);
    memset(cl, 0, sizeof *cl);
    cl->n_shards = base->n_shards;
    atomic_init(&cl->stop, 0);
    for (size_t k = 0; k < cl->n_shards; k++) {
        ps_config_t c = *base;
        c.shard = k;
        size_t begin, end;
        shard_range(c.n_params, c.n_shards, k, &begin, &end);
        server_thread_t *st = &cl->st[k];
        st->s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init + begin, err, sizeof err);
        if (!st->s) {
            fprintf(stderr, "ps_server_new: %s\n", err);
            exit(1);
        }
        size_t b2, e2;
        ps_server_range(st->s, &b2, &e2);
        CHECK(b2 == begin && e2 == end);
        const char *ep = ps_server_endpoint(st->s);
        CHECK(strncmp(ep, "tcp://127.0.0.1:", 16) == 0 && atoi(ep + 16) > 0);
        snprintf(cl->endpoint[k], sizeof cl->endpoint[k], "%s", ep);
        cl->endpoints[k] = cl->endpoint[k];
        st->stop = &cl->stop;
        atomic_init(&st->returned, 0);
        if (hold) CHECK_OK(ps_server_hold_hellos(st->s, hold, err, sizeof err), err);
        CHECK(pthread_create(&st->tid, NULL, server_main, st) == 0);
    }
}

static void cluster_start(cluster_t *cl, void *ctx, const ps_config_t *base, const float *init) {
    cluster_start_held(cl, ctx, base, init, NULL);
}

// Waits for every server to return by itself (every worker has joined and
// left); a server still running after 5 s is a failure, not a hang.
static void cluster_join_returned(cluster_t *cl) {
    for (size_t k = 0; k < cl->n_shards; k++) {
        for (int i = 0; i < 500 && !atomic_load(&cl->st[k].returned); i++) sleep_ms(10);
        if (!atomic_load(&cl->st[k].returned)) {
            fprintf(stderr, "server %zu did not return after every worker left\n", k);
            atomic_store(&cl->stop, 1);
            pthread_join(cl->st[k].tid, NULL);
            exit(1);
        }
        CHECK(pthread_join(cl->st[k].tid, NULL) == 0);
        CHECK_OK(cl->st[k].rc, cl->st[k].err);
    }
}

// Stops every server with the flag, then joins.
static void cluster_stop(cluster_t *cl) {
    atomic_store(&cl->stop, 1);
    for (size_t k = 0; k < cl->n_shards; k++) {
        CHECK(pthread_join(cl->st[k].tid, NULL) == 0);
        CHECK_OK(cl->st[k].rc, cl->st[k].err);
    }
}

static void cluster_destroy(cluster_t *cl) {
    for (size_t k = 0; k < cl->n_shards; k++) {
        ps_server_destroy(&cl->st[k].s);
        CHECK(cl->st[k].s == NULL);
    }
}

static ps_client_t *client(void *ctx, uint32_t worker, const cluster_t *cl, size_t n_params) {
    char err[256];
    ps_client_t *c =
        ps_client_new(ctx, RUN_ID, worker, cl->endpoints, cl->n_shards, n_params, 0, TIMEOUT_MS, err, sizeof err);
    if (!c) {
        fprintf(stderr, "ps_client_new(worker %u): %s\n", worker, err);
        exit(1);
    }
    return c;
}

// A dense push of g (the whole model) through the client's frames.
static void push_dense(ps_client_t *c, const cluster_t *cl, size_t n_params, const float *g, uint64_t clock,
                       uint32_t examples, int bsp) {
    char err[256];
    float *const *frames = ps_client_push_frames(c, err, sizeof err);
    if (!frames) {
        fprintf(stderr, "ps_client_push_frames: %s\n", err);
        exit(1);
    }
    CHECK(ps_client_push_frames(c, err, sizeof err) == frames);  // the same frames until committed
    for (size_t k = 0; k < cl->n_shards; k++) {
        size_t begin, end;
        shard_range(n_params, cl->n_shards, k, &begin, &end);
        for (size_t j = begin; j < end; j++) frames[k][j - begin] = g[j];
    }
    CHECK_OK(ps_client_push_commit(c, clock, examples, bsp, err, sizeof err), err);
}

// A pull in another thread, to show that it waits.
typedef struct pull_job {
    ps_client_t *c;
    uint64_t need;
    float *out;
    uint64_t min_clock;
    int rc;
    char err[256];
    atomic_int done;
    pthread_t tid;
} pull_job_t;

static void *pull_main(void *arg) {
    pull_job_t *p = arg;
    p->rc = ps_client_pull(p->c, p->need, p->out, &p->min_clock, p->err, sizeof p->err);
    atomic_store(&p->done, 1);
    return NULL;
}

static void pull_start(pull_job_t *p, ps_client_t *c, uint64_t need, float *out) {
    p->c = c;
    p->need = need;
    p->out = out;
    p->rc = -1;
    p->err[0] = '\0';
    atomic_init(&p->done, 0);
    CHECK(pthread_create(&p->tid, NULL, pull_main, p) == 0);
}

static void pull_finish(pull_job_t *p) {
    CHECK(pthread_join(p->tid, NULL) == 0);
    CHECK_OK(p->rc, p->err);
}

static int hist_all_zero(const staleness_hist_t *h, uint64_t count) {
    return h->count == count && h->bins[0] == count && h->max == 0 && h->sum == 0.0;
}

// ---- a) ASP: exact SGD and Adagrad over two shards ----------------------------------

#define A_N 1001  // not divisible by 2: shard 0 holds [0, 501), shard 1 [501, 1001)

static void test_asp_sgd(void *ctx) {
    char err[256];
    const float lr = 0.5f;
    float init[A_N], want[A_N], got[A_N], g[A_N];
    random_values(init, A_N, 11, 1);
    memcpy(want, init, sizeof want);

    ps_config_t cfg = config(2, A_N, 1, SYNC_MODE_ASP);
    cfg.lr = lr;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c = client(ctx, 0, &cl, A_N);

    // The first pull is the initial values, bit for bit.
    uint64_t min_clock = 99;
    CHECK_OK(ps_client_pull(c, 0, got, &min_clock, err, sizeof err), err);
    CHECK(min_clock == 0);
    CHECK_BITS(got, init, A_N, "first pull");

    // Dense push: w - lr*g exactly.
    random_values(g, A_N, 11, 2);
    push_dense(c, &cl, A_N, g, 0, 1, 0);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t j = 0; j < A_N; j++) want[j] = want[j] - lr * g[j];
    CHECK_OK(ps_client_pull(c, 0, got, &min_clock, err, sizeof err), err);
    CHECK(min_clock == 1);
    CHECK_BITS(got, want, A_N, "after a dense push");

    // Sparse push over both shards, including both shards' first and last indices.
    static const uint32_t idx[] = {0, 7, 250, 499, 500, 501, 502, 777, 999, 1000};
    enum { NNZ = sizeof idx / sizeof idx[0] };
    float val[NNZ];
    random_values(val, NNZ, 11, 3);
    CHECK_OK(ps_client_push_sparse(c, idx, val, NNZ, 1, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t k = 0; k < NNZ; k++) want[idx[k]] = want[idx[k]] - lr * val[k];

    // A second sparse push, over both shards' interiors.
    static const uint32_t dup[] = {10, 11, 600, 601, 602};
    static const float dval[] = {0.75f, -0.125f, 0.5f, 0.25f, -1.5f};
    CHECK_OK(ps_client_push_sparse(c, dup, dval, 5, 2, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t k = 0; k < 5; k++) want[dup[k]] = want[dup[k]] - lr * dval[k];

    // Keyed pulls: spanning both shards, only shard 0, only shard 1, none.
    static const uint32_t keys[] = {0, 3, 10, 500, 501, 600, 1000};
    float kv[7];
    CHECK_OK(ps_client_pull_keys(c, keys, 7, kv, err, sizeof err), err);
    for (size_t k = 0; k < 7; k++) CHECK(memcmp(&kv[k], &want[keys[k]], sizeof(float)) == 0);
    static const uint32_t keys0[] = {1, 2, 499, 500};
    CHECK_OK(ps_client_pull_keys(c, keys0, 4, kv, err, sizeof err), err);
    for (size_t k = 0; k < 4; k++) CHECK(memcmp(&kv[k], &want[keys0[k]], sizeof(float)) == 0);
    static const uint32_t keys1[] = {501, 502, 1000};
    CHECK_OK(ps_client_pull_keys(c, keys1, 3, kv, err, sizeof err), err);
    for (size_t k = 0; k < 3; k++) CHECK(memcmp(&kv[k], &want[keys1[k]], sizeof(float)) == 0);
    CHECK_OK(ps_client_pull_keys(c, keys1, 0, kv, err, sizeof err), err);

    // A key set that is not ascending or runs past the model is refused by the
    // client before anything is sent, and the next keyed pull is still right.
    static const uint32_t bad_keys[] = {1, 2, 3, 5000};
    CHECK(ps_client_pull_keys(c, bad_keys, 4, kv, err, sizeof err) == -1);
    CHECK(strstr(err, "5000") != NULL);
    static const uint32_t unordered[] = {600, 5};
    CHECK(ps_client_pull_keys(c, unordered, 2, kv, err, sizeof err) == -1);
    CHECK(strstr(err, "not strictly ascending") != NULL);
    static const uint32_t repeated[] = {5, 5};  // each index once: a repeat is refused too
    CHECK(ps_client_pull_keys(c, repeated, 2, kv, err, sizeof err) == -1);
    CHECK(strstr(err, "not strictly ascending") != NULL);
    static const uint32_t one_key[] = {3};
    float one = 0.0f;
    CHECK_OK(ps_client_pull_keys(c, one_key, 1, &one, err, sizeof err), err);
    CHECK(memcmp(&one, &want[3], sizeof one) == 0);
    // Likewise a sparse push: nothing reaches any shard.
    static const uint32_t bad_idx[] = {5, 2000};
    static const float bad_val[] = {1.0f, 1.0f};
    CHECK(ps_client_push_sparse(c, bad_idx, bad_val, 2, 3, 1, 0, err, sizeof err) == -1);
    CHECK(strstr(err, "2000") != NULL);
    CHECK(ps_client_push_sparse(c, unordered, bad_val, 2, 3, 1, 0, err, sizeof err) == -1);
    CHECK(ps_client_push_sparse(c, repeated, bad_val, 2, 3, 1, 0, err, sizeof err) == -1);

    // The whole model.
    CHECK_OK(ps_client_pull(c, 0, got, &min_clock, err, sizeof err), err);
    CHECK_BITS(got, want, A_N, "after the sparse pushes");
    CHECK(min_clock == 3);

    ps_client_stats_t cs;
    ps_client_get_stats(c, &cs);
    CHECK(cs.pushes_sent == 6 && cs.pushes_acked == 6);  // 3 pushes x 2 shards
    CHECK(cs.rejects == 0 && cs.dropped == 0);
    CHECK(cs.pulls == 8);
    CHECK(cs.bytes_out == 4u * A_N + 8u * NNZ + 8u * 5);
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    CHECK(c == NULL);
    ps_client_destroy(&c);  // NULL is fine

    cluster_join_returned(&cl);
    for (size_t k = 0; k < 2; k++) {
        size_t begin, end;
        ps_server_range(cl.st[k].s, &begin, &end);
        CHECK(begin == (k ? 501u : 0u) && end == (k ? 1001u : 501u));
        CHECK_BITS(ps_server_values(cl.st[k].s), want + begin, end - begin, "server values");
        ps_stats_t st;
        ps_server_stats(cl.st[k].s, &st);
        CHECK(st.version == 3 && st.pushes_applied == 3);
        CHECK(st.pulls_answered == 8 && st.pulls_waited == 0);
        CHECK(st.dropped_total == 0 && st.rejected == 0);
        size_t nnz_here = 0, dup_here = 0;
        for (size_t i = 0; i < NNZ; i++) nnz_here += idx[i] >= begin && idx[i] < end;
        for (size_t i = 0; i < 5; i++) dup_here += dup[i] >= begin && dup[i] < end;
        CHECK(st.bytes_in == 4u * (end - begin) + 8u * nnz_here + 8u * dup_here);
        CHECK(st.min_clock == 3 && st.max_clock == 3);
        CHECK(ps_server_clocks(cl.st[k].s)[0] == 3);
        CHECK(ps_server_pushes_per_worker(cl.st[k].s)[0] == 3);
        CHECK(st.staleness_clocks.count == 3 && st.staleness_updates.count == 3);
    }
    cluster_destroy(&cl);
}

// A keyed pull in the background: answered with the values the servers held
// when they answered it, with a push sent while it is in flight (applied
// once, seen by the next pull); one pull at a time.
static void test_keys_in_background(void *ctx) {
    char err[256];
    float init[A_N], want[A_N];
    random_values(init, A_N, 13, 1);
    memcpy(want, init, sizeof want);
    ps_config_t cfg = config(2, A_N, 1, SYNC_MODE_ASP);
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c = client(ctx, 0, &cl, A_N);
    static const uint32_t keys[] = {0, 3, 10, 500, 501, 600, 999, 1000};
    enum { NK = sizeof keys / sizeof keys[0] };
    float kv[NK];
    uint64_t min_clock = 99;
    CHECK_OK(ps_client_pull_keys_start(c, 0, keys, NK, kv, err, sizeof err), err);
    CHECK(ps_client_pull_pending(c));
    static const uint32_t idx[] = {3, 999};
    static const float val[] = {2.0f, -0.5f};
    CHECK_OK(ps_client_push_sparse(c, idx, val, 2, 0, 1, 0, err, sizeof err), err);
    CHECK(ps_client_pull_keys_start(c, 0, keys, NK, kv, err, sizeof err) == -1);
    CHECK(strstr(err, "another was in flight") != NULL);
    CHECK_OK(ps_client_pull_finish(c, &min_clock, err, sizeof err), err);
    CHECK(!ps_client_pull_pending(c) && min_clock == 0);
    for (size_t k = 0; k < NK; k++) CHECK(memcmp(&kv[k], &want[keys[k]], sizeof(float)) == 0);  // before the push
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t k = 0; k < 2; k++) want[idx[k]] = want[idx[k]] - cfg.lr * val[k];
    CHECK_OK(ps_client_pull_keys_start(c, 1, keys, NK, kv, err, sizeof err), err);
    int done = 0;
    while (!done) CHECK_OK(ps_client_pull_poll(c, &done, &min_clock, err, sizeof err), err);
    CHECK(min_clock == 1);
    for (size_t k = 0; k < NK; k++) CHECK(memcmp(&kv[k], &want[keys[k]], sizeof(float)) == 0);
    ps_client_stats_t cs;
    ps_client_get_stats(c, &cs);
    CHECK(cs.pulls == 2 && cs.pushes_acked == 2);
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    cluster_join_returned(&cl);
    CHECK_BITS(ps_server_values(cl.st[0].s), want, 501, "shard 0 after the push");
    cluster_destroy(&cl);
    printf("keyed pull in the background: ok\n");
}

// A worker that holds only its working set: rows of 2 keys (a feature's
// weights), 4 of the servers' 500 rows plus the dense tail (key 1000), the
// rows on both sides of the shards' boundary (501). Every message names the
// servers' keys: a whole pull brings exactly the rows held, a push by the
// worker's keys lands on the servers' keys, and what cannot be done by key
// (a dense push) or does not fit (a key past the map, a map out of order) is
// refused.
static void test_key_map(void *ctx) {
    char err[256];
    float init[A_N], want[A_N];
    random_values(init, A_N, 14, 1);
    memcpy(want, init, sizeof want);
    ps_config_t cfg = config(2, A_N, 1, SYNC_MODE_ASP);
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c = client(ctx, 0, &cl, A_N);
    static const uint32_t bad_rows[] = {1, 1};
    ps_key_map_t bad = {bad_rows, 2, 2, 500, A_N};
    CHECK(ps_client_set_key_map(c, &bad, err, sizeof err) == -1 && strstr(err, "not strictly ascending"));
    static const uint32_t rows[] = {1, 249, 250, 400};
    ps_key_map_t map = {rows, 4, 2, 500, A_N};
    CHECK_OK(ps_client_set_key_map(c, &map, err, sizeof err), err);
    enum { HELD = 9 };
    static const uint32_t global[HELD] = {2, 3, 498, 499, 500, 501, 800, 801, 1000};
    CHECK(ps_key_map_local_keys(&map) == HELD);
    for (uint32_t k = 0; k < HELD; k++) CHECK(ps_key_map_global(&map, k) == global[k]);
    float held[HELD];
    uint64_t min_clock;
    CHECK_OK(ps_client_pull(c, 0, held, &min_clock, err, sizeof err), err);
    for (size_t k = 0; k < HELD; k++) CHECK(memcmp(&held[k], &init[global[k]], sizeof(float)) == 0);
    static const uint32_t idx[] = {1, 5, 8};  // the servers' 3, 501 and 1000
    static const float val[] = {1.0f, -2.0f, 0.25f};
    CHECK_OK(ps_client_push_sparse(c, idx, val, 3, 0, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t k = 0; k < 3; k++) want[global[idx[k]]] -= cfg.lr * val[k];
    static const uint32_t keys[] = {0, 1, 5, 8};
    float kv[4];
    CHECK_OK(ps_client_pull_keys_at(c, 1, keys, 4, kv, err, sizeof err), err);
    for (size_t k = 0; k < 4; k++) CHECK(memcmp(&kv[k], &want[global[keys[k]]], sizeof(float)) == 0);
    static const uint32_t past[] = {HELD};
    CHECK(ps_client_push_sparse(c, past, val, 1, 1, 1, 0, err, sizeof err) == -1 && strstr(err, "not below 9"));
    CHECK(ps_client_push_frames(c, err, sizeof err) == NULL && strstr(err, "holds only its working set"));
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    cluster_join_returned(&cl);
    CHECK_BITS(ps_server_values(cl.st[0].s), want, 501, "shard 0 after the push by the worker's keys");
    CHECK_BITS(ps_server_values(cl.st[1].s), want + 501, 500, "shard 1 after the push by the worker's keys");
    cluster_destroy(&cl);
    printf("a worker holding its working set: ok\n");
}

static void test_asp_adagrad(void *ctx) {
    char err[256];
    const float lr = 0.5f, eps = 1e-6f;
    float init[A_N], w[A_N], h[A_N], got[A_N], g1[A_N], g2[A_N];
    random_values(init, A_N, 12, 1);
    random_values(g1, A_N, 12, 2);
    random_values(g2, A_N, 12, 3);
    for (size_t j = 0; j < A_N; j += 7) g2[j] = 0.0f;  // a zero gradient leaves h and w alone
    memcpy(w, init, sizeof w);
    memset(h, 0, sizeof h);

    ps_config_t cfg = config(2, A_N, 1, SYNC_MODE_ASP);
    cfg.optimizer = OPTIMIZER_KIND_ADAGRAD;
    cfg.lr = lr;
    cfg.adagrad_eps = eps;
    CHECK(strcmp(optimizer_kind_name(cfg.optimizer), "adagrad") == 0);
    CHECK(strcmp(optimizer_kind_name(OPTIMIZER_KIND_SGD), "sgd") == 0);
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c = client(ctx, 0, &cl, A_N);

    // The documented rule: h += g*g; w -= lr*g / (sqrt(h) + eps).
    const float *gs[2] = {g1, g2};
    for (int r = 0; r < 2; r++) {
        push_dense(c, &cl, A_N, gs[r], (uint64_t)r, 1, 0);
        for (size_t j = 0; j < A_N; j++) {
            h[j] = h[j] + gs[r][j] * gs[r][j];
            w[j] = w[j] - lr * gs[r][j] / (sqrtf(h[j]) + eps);
        }
    }
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    CHECK_OK(ps_client_pull(c, 0, got, NULL, err, sizeof err), err);
    CHECK_BITS(got, w, A_N, "adagrad after two dense pushes");
    CHECK(got[0] != init[0]);

    // Sparse Adagrad over both shards, their first and last indices included.
    static const uint32_t idx[] = {0, 1, 400, 500, 501, 999, 1000};
    static const float val[] = {0.5f, -0.25f, 2.0f, 1e-3f, -3.0f, 0.125f, 0.125f};
    CHECK_OK(ps_client_push_sparse(c, idx, val, 7, 2, 1, 0, err, sizeof err), err);
    for (size_t k = 0; k < 7; k++) {
        uint32_t j = idx[k];
        h[j] = h[j] + val[k] * val[k];
        w[j] = w[j] - lr * val[k] / (sqrtf(h[j]) + eps);
    }
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    CHECK_OK(ps_client_pull(c, 0, got, NULL, err, sizeof err), err);
    CHECK_BITS(got, w, A_N, "adagrad after a sparse push");
    float kv[3];
    static const uint32_t keys[] = {0, 500, 1000};
    CHECK_OK(ps_client_pull_keys(c, keys, 3, kv, err, sizeof err), err);
    for (size_t k = 0; k < 3; k++) CHECK(memcmp(&kv[k], &w[keys[k]], sizeof(float)) == 0);

    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    cluster_join_returned(&cl);
    for (size_t k = 0; k < 2; k++) {
        size_t begin, end;
        ps_server_range(cl.st[k].s, &begin, &end);
        CHECK_BITS(ps_server_values(cl.st[k].s), w + begin, end - begin, "adagrad server values");
        ps_stats_t st;
        ps_server_stats(cl.st[k].s, &st);
        CHECK(st.version == 3);
    }
    cluster_destroy(&cl);
}

// ---- b) exactly once ------------------------------------------------------------

#define B_WORKERS 3
#define B_K 50

// Values whose every partial sum is exact in float (multiples of 1/32 below
// 64), so the result is independent of the order the pushes arrive in.
static float b_grad(size_t j, uint32_t worker, uint64_t round) {
    return (float)((int)((j * 3 + worker * 5 + round) % 7) - 3) * 0.0625f;
}

static void test_exactly_once(void *ctx) {
    char err[256];
    const float lr = 0.5f;
    float init[A_N], want[A_N], got[A_N], g[A_N];
    rng_t r;
    rng_seed(&r, 13, 1);
    for (size_t j = 0; j < A_N; j++) init[j] = (float)(rng_below(&r, 64) + 1) * 0.25f;  // 0.25 .. 16, never 0
    memcpy(want, init, sizeof want);

    ps_config_t cfg = config(2, A_N, B_WORKERS, SYNC_MODE_ASP);
    cfg.lr = lr;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c[B_WORKERS];
    for (uint32_t w = 0; w < B_WORKERS; w++) c[w] = client(ctx, w, &cl, A_N);

    // Every worker pushes K rounds without waiting in between.
    for (uint64_t round = 0; round < B_K; round++) {
        for (uint32_t w = 0; w < B_WORKERS; w++) {
            for (size_t j = 0; j < A_N; j++) {
                g[j] = b_grad(j, w, round);
                want[j] = want[j] - lr * g[j];
            }
            push_dense(c[w], &cl, A_N, g, round, 1, 0);
        }
    }
    for (uint32_t w = 0; w < B_WORKERS; w++) {
        CHECK_OK(ps_client_wait_acks(c[w], err, sizeof err), err);
        ps_client_stats_t cs;
        ps_client_get_stats(c[w], &cs);
        CHECK(cs.pushes_sent == B_K * 2);
        CHECK(cs.pushes_acked == B_K * 2);
        CHECK(cs.rejects == 0 && cs.dropped == 0);
    }
    uint64_t min_clock = 0;
    CHECK_OK(ps_client_pull(c[1], B_K, got, &min_clock, err, sizeof err), err);  // everyone has done K rounds
    CHECK(min_clock == B_K);
    CHECK_BITS(got, want, A_N, "after every push");
    for (uint32_t w = 0; w < B_WORKERS; w++) {
        CHECK_OK(ps_client_bye(c[w], err, sizeof err), err);
        ps_client_stats_t cs;
        ps_client_get_stats(c[w], &cs);
        CHECK(cs.pushes_acked == B_K * 2);  // no acknowledgement twice
        ps_client_destroy(&c[w]);
    }

    cluster_join_returned(&cl);  // by themselves: the stop flag was never set
    CHECK(atomic_load(&cl.stop) == 0);
    for (size_t k = 0; k < 2; k++) {
        const ps_server_t *s = cl.st[k].s;
        ps_stats_t st;
        ps_server_stats(s, &st);
        CHECK(st.version == B_WORKERS * B_K);
        CHECK(st.pushes_applied == B_WORKERS * B_K);
        CHECK(st.rejected == 0 && st.dropped_total == 0);
        CHECK(st.staleness_updates.count == B_WORKERS * B_K);
        CHECK(st.staleness_clocks.count == B_WORKERS * B_K);
        for (uint32_t w = 0; w < B_WORKERS; w++) {
            CHECK(ps_server_pushes_per_worker(s)[w] == B_K);
            CHECK(ps_server_clocks(s)[w] == B_K);
        }
        size_t begin, end;
        ps_server_range(s, &begin, &end);
        CHECK_BITS(ps_server_values(s), want + begin, end - begin, "server values");
    }
    cluster_destroy(&cl);
}

// ---- c) BSP ---------------------------------------------------------------------

// A BSP round of two workers over two shards: the initial model and the two
// gradients drawn from seed, and the model the round must give (3 examples
// from worker 0, 5 from worker 1: their weighted sum in worker order).
typedef struct bsp_case {
    float init[A_N], g0[A_N], g1[A_N], want[A_N];
    ps_config_t cfg;
} bsp_case_t;

static void bsp_case(bsp_case_t *b, uint64_t seed, float lr) {
    random_values(b->init, A_N, seed, 1);
    random_values(b->g0, A_N, seed, 2);
    random_values(b->g1, A_N, seed, 3);
    const float wt0 = (float)3 / (float)8, wt1 = (float)5 / (float)8;
    for (size_t j = 0; j < A_N; j++) {
        float sum = 0.0f;
        sum += wt0 * b->g0[j];
        sum += wt1 * b->g1[j];
        b->want[j] = b->init[j] - lr * sum;
    }
    b->cfg = config(2, A_N, 2, SYNC_MODE_BSP);
    b->cfg.lr = lr;
}

static void test_bsp(void *ctx) {
    char err[256];
    static bsp_case_t b;
    bsp_case(&b, 14, 0.5f);
    const float *init = b.init, *g0 = b.g0, *g1 = b.g1, *want = b.want;
    float got0[A_N], got1[A_N];
    ps_config_t cfg = b.cfg;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c0 = client(ctx, 0, &cl, A_N);
    ps_client_t *c1 = client(ctx, 1, &cl, A_N);
    CHECK_OK(ps_client_pull(c0, 0, got0, NULL, err, sizeof err), err);
    CHECK_OK(ps_client_pull(c1, 0, got1, NULL, err, sizeof err), err);
    CHECK_BITS(got0, init, A_N, "worker 0's first pull");
    CHECK_BITS(got1, init, A_N, "worker 1's first pull");

    // Worker 0 pushes round 0 (3 examples) and waits for the round in another thread.
    push_dense(c0, &cl, A_N, g0, 0, 3, 1);
    pull_job_t job;
    pull_start(&job, c0, 1, got0);
    sleep_ms(200);
    CHECK(!atomic_load(&job.done));  // it cannot be answered before worker 1 pushes
    push_dense(c1, &cl, A_N, g1, 0, 5, 1);
    CHECK_OK(ps_client_wait_acks(c1, err, sizeof err), err);
    uint64_t min1 = 0;
    CHECK_OK(ps_client_pull(c1, 1, got1, &min1, err, sizeof err), err);
    pull_finish(&job);
    CHECK(job.min_clock == 1 && min1 == 1);

    // The example-weighted sum in worker order, applied once.
    CHECK_BITS(got0, want, A_N, "worker 0's pull of round 0");
    CHECK_BITS(got1, want, A_N, "worker 1's pull of round 0");

    // A gradient for the wrong clock is refused by each shard, and each refusal
    // names its shard (one per call: a REJECT ends the wait).
    CHECK_OK(ps_client_wait_acks(c0, err, sizeof err), err);
    push_dense(c0, &cl, A_N, g0, 5, 3, 1);
    int named[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        err[0] = '\0';
        CHECK(ps_client_wait_acks(c0, err, sizeof err) == -1);
        if (!strstr(err, "refused a request from worker 0: bad range")) {
            fprintf(stderr, "unexpected refusal text: %s\n", err);
            exit(1);
        }
        if (strstr(err, "server shard 0 ")) named[0]++;
        if (strstr(err, "server shard 1 ")) named[1]++;
    }
    CHECK(named[0] == 1 && named[1] == 1);
    ps_client_stats_t cs;
    ps_client_get_stats(c0, &cs);
    CHECK(cs.rejects == 2 && cs.pushes_acked == 2);

    // The server goes on: worker 1 is served, and nothing changed.
    CHECK_OK(ps_client_pull(c1, 1, got1, NULL, err, sizeof err), err);
    CHECK_BITS(got1, want, A_N, "after the refused push");
    // A push without the SUM flag is refused under BSP as well.
    push_dense(c1, &cl, A_N, g1, 1, 5, 0);
    for (int i = 0; i < 2; i++) {  // both shards' refusals
        CHECK(ps_client_wait_acks(c1, err, sizeof err) == -1);
        CHECK(strstr(err, "refused a request from worker 1: bad payload kind") != NULL);
    }

    ps_client_destroy(&c0);
    ps_client_destroy(&c1);
    cluster_stop(&cl);  // the refused workers cannot say goodbye cleanly
    for (size_t k = 0; k < 2; k++) {
        const ps_server_t *s = cl.st[k].s;
        ps_stats_t st;
        ps_server_stats(s, &st);
        CHECK(st.version == 1);
        CHECK(st.pushes_applied == 2);
        CHECK(st.rejected == 2);  // the wrong clock and the missing SUM
        CHECK(st.dropped_total == 0);
        CHECK(hist_all_zero(&st.staleness_clocks, 2));
        CHECK(hist_all_zero(&st.staleness_updates, 2));
        CHECK(ps_server_clocks(s)[0] == 1 && ps_server_clocks(s)[1] == 1);
        CHECK(ps_server_pushes_per_worker(s)[0] == 1 && ps_server_pushes_per_worker(s)[1] == 1);
        size_t begin, end;
        ps_server_range(s, &begin, &end);
        CHECK(st.bytes_in == 2 * 4u * (end - begin));  // refused pushes are not counted
        CHECK_BITS(ps_server_values(s), want + begin, end - begin, "BSP server values");
    }
    cluster_destroy(&cl);
}

static void test_bsp_local(void *ctx) {
    char err[256];
    static bsp_case_t b;
    bsp_case(&b, 15, 0.5f);
    const float *init = b.init, *g0 = b.g0, *g1 = b.g1, *want = b.want;
    float got0[A_N], got1[A_N];
    ps_config_t cfg = b.cfg;
    cfg.local_rounds = 1;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c0 = client(ctx, 0, &cl, A_N);  // joined: the shards serve, their segments are made
    ps_client_t *c1 = client(ctx, 1, &cl, A_N);
    ps_local_round_t *seg[2];
    for (size_t k = 0; k < 2; k++) {
        size_t begin, end;
        shard_range(A_N, 2, k, &begin, &end);
        CHECK((seg[k] = ps_local_round_attach(RUN_ID, k, 0, end - begin, err, sizeof err)));
        memcpy(ps_local_round_gradient(seg[k]), g0 + begin, (end - begin) * sizeof(float));
        CHECK_OK(ps_local_round_post(seg[k], 0, 0, 3, k == 0, err, sizeof err), err);
    }
    push_dense(c1, &cl, A_N, g1, 0, 5, 1);
    CHECK_OK(ps_client_wait_acks(c1, err, sizeof err), err);
    CHECK_OK(ps_client_pull(c1, 1, got1, NULL, err, sizeof err), err);
    for (size_t k = 0; k < 2; k++) {
        size_t begin, end;
        shard_range(A_N, 2, k, &begin, &end);
        ps_local_answer_t a;
        CHECK_OK(ps_local_round_await(seg[k], 0, got0 + begin, NULL, &a, err, sizeof err), err);
        CHECK(a.refused == WIRE_STATUS_OK && a.version == 1 && a.clock == 1);
    }
    CHECK_BITS(got0, want, A_N, "worker 0's values through shared memory");
    CHECK_BITS(got1, want, A_N, "worker 1's pull beside it");
    // The wrong clock: refused through the segment.
    ps_local_answer_t a;
    CHECK_OK(ps_local_round_post(seg[1], 5, 1, 3, 1, err, sizeof err), err);
    CHECK_OK(ps_local_round_await(seg[1], 5, got0, NULL, &a, err, sizeof err), err);
    CHECK(a.refused == WIRE_STATUS_BAD_RANGE);
    CHECK(ps_client_local_refusal(c0, 1, a.refused, err, sizeof err) == -1);
    CHECK(strstr(err, "server shard 1 refused a request from worker 0: bad range"));
    // Round 1 on shard 0, with a NaN its writer did not vouch for: checked, refused.
    float *g = ps_local_round_gradient(seg[0]);
    g[7] = NAN;
    CHECK_OK(ps_local_round_post(seg[0], 1, 1, 3, 0, err, sizeof err), err);
    CHECK_OK(ps_local_round_await(seg[0], 1, got0, NULL, &a, err, sizeof err), err);
    CHECK(a.refused == WIRE_STATUS_NOT_FINITE);
    printf(
        "bsp in shared memory: the round's values bit for bit beside a socket worker's; a wrong clock and a NaN "
        "refused through the segment\n");
    for (size_t k = 0; k < 2; k++) ps_local_round_destroy(&seg[k]);
    ps_client_destroy(&c0);
    ps_client_destroy(&c1);
    cluster_stop(&cl);  // the refused worker cannot say goodbye cleanly
    for (size_t k = 0; k < 2; k++) {
        ps_stats_t st;
        ps_server_stats(cl.st[k].s, &st);
        CHECK(st.local_posts == 2 && st.version == 1 && st.rejected == 1);  // round 0, then the refused post
    }
    cluster_destroy(&cl);
}

// A worker's BYE completes a BSP round: the other worker's gradient is applied alone.
static void test_bsp_bye_completes_round(void *ctx) {
    char err[256];
    const float lr = 0.25f;
    enum { N = 37 };
    float init[N], g0[N], want[N], got[N];
    random_values(init, N, 15, 1);
    random_values(g0, N, 15, 2);

    ps_config_t cfg = config(2, N, 2, SYNC_MODE_BSP);
    cfg.lr = lr;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c0 = client(ctx, 0, &cl, N);
    ps_client_t *c1 = client(ctx, 1, &cl, N);
    push_dense(c0, &cl, N, g0, 0, 4, 1);
    CHECK_OK(ps_client_wait_acks(c0, err, sizeof err), err);
    pull_job_t job;
    pull_start(&job, c0, 1, got);
    sleep_ms(100);
    CHECK(!atomic_load(&job.done));
    CHECK_OK(ps_client_bye(c1, err, sizeof err), err);
    pull_finish(&job);
    for (size_t j = 0; j < N; j++) {
        float sum = 0.0f;
        sum += ((float)4 / (float)4) * g0[j];
        want[j] = init[j] - lr * sum;
    }
    CHECK_BITS(got, want, N, "round completed by a goodbye");
    CHECK_OK(ps_client_bye(c0, err, sizeof err), err);
    ps_client_destroy(&c0);
    ps_client_destroy(&c1);
    cluster_join_returned(&cl);
    for (size_t k = 0; k < 2; k++) {
        ps_stats_t st;
        ps_server_stats(cl.st[k].s, &st);
        CHECK(st.version == 1 && st.pushes_applied == 1 && st.rejected == 0);
    }
    cluster_destroy(&cl);
}

// ---- d) SSP ---------------------------------------------------------------------

static void test_ssp(void *ctx) {
    char err[256];
    enum { N = 64 };
    const float lr = 0.5f;
    float init[N], ga[2][N], gb[2][N], want[N], got[N];
    random_values(init, N, 16, 1);
    random_values(ga[0], N, 16, 2);
    random_values(ga[1], N, 16, 3);
    random_values(gb[0], N, 16, 4);
    random_values(gb[1], N, 16, 5);

    ps_config_t cfg = config(1, N, 2, SYNC_MODE_SSP);
    cfg.staleness = 1;
    cfg.lr = lr;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *a = client(ctx, 0, &cl, N);
    ps_client_t *b = client(ctx, 1, &cl, N);
    CHECK_OK(ps_client_pull(a, 0, got, NULL, err, sizeof err), err);
    CHECK_OK(ps_client_pull(b, 0, got, NULL, err, sizeof err), err);

    // A runs two rounds ahead, then asks for clock 2.
    push_dense(a, &cl, N, ga[0], 0, 1, 0);
    push_dense(a, &cl, N, ga[1], 1, 1, 0);
    CHECK_OK(ps_client_wait_acks(a, err, sizeof err), err);
    pull_job_t job;
    pull_start(&job, a, 2, got);
    sleep_ms(150);
    CHECK(!atomic_load(&job.done));
    push_dense(b, &cl, N, gb[0], 0, 1, 0);
    CHECK_OK(ps_client_wait_acks(b, err, sizeof err), err);
    sleep_ms(150);
    CHECK(!atomic_load(&job.done));  // B has done 1 round: the minimum is 1 < 2
    push_dense(b, &cl, N, gb[1], 1, 1, 0);
    CHECK_OK(ps_client_wait_acks(b, err, sizeof err), err);
    pull_finish(&job);
    CHECK(job.min_clock == 2);

    // Applied on arrival, in the order A0 A1 B0 B1.
    memcpy(want, init, sizeof want);
    const float *order[4] = {ga[0], ga[1], gb[0], gb[1]};
    for (int u = 0; u < 4; u++)
        for (size_t j = 0; j < N; j++) want[j] = want[j] - lr * order[u][j];
    CHECK_BITS(got, want, N, "SSP pull at clock 2");

    CHECK_OK(ps_client_bye(a, err, sizeof err), err);
    CHECK_OK(ps_client_bye(b, err, sizeof err), err);
    ps_client_destroy(&a);
    ps_client_destroy(&b);
    cluster_join_returned(&cl);
    ps_stats_t st;
    ps_server_stats(cl.st[0].s, &st);
    CHECK(st.version == 4);
    CHECK(st.min_clock == 2 && st.max_clock == 2);
    // Clock staleness within the bound: rounds 0 and 1 of each worker, both read at min clock 0.
    CHECK(st.staleness_clocks.count == 4);
    CHECK(st.staleness_clocks.max <= 1);
    CHECK(st.staleness_clocks.bins[0] == 2 && st.staleness_clocks.bins[1] == 2);
    // In versions: A0 0, A1 1, B0 2, B1 3 updates behind what they were computed from.
    CHECK(st.staleness_updates.count == 4 && st.staleness_updates.max == 3);
    for (int v = 0; v < 4; v++) CHECK(st.staleness_updates.bins[v] == 1);
    CHECK(st.pulls_waited <= 1);
    CHECK_BITS(ps_server_values(cl.st[0].s), want, N, "SSP server values");
    cluster_destroy(&cl);
}

// ---- e) malformed input ----------------------------------------------------------

#define E_N 101  // shard 0 [0, 51), shard 1 [51, 101)

static void *raw_dealer(void *ctx, const char *endpoint) {
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    CHECK(d != NULL);
    int zero = 0, timeout = TIMEOUT_MS;
    CHECK(zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero) == 0);
    CHECK(zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout, sizeof timeout) == 0);
    CHECK(zmq_connect(d, endpoint) == 0);
    return d;
}

// Sends a header exactly as given (no checksum computed) and n raw payload frames.
static void raw_send(void *d, const wire_header_t *h, const void *const *frames, const size_t *lens, size_t n) {
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(h, bytes);
    CHECK(zmq_send(d, bytes, sizeof bytes, n ? ZMQ_SNDMORE : 0) == (int)sizeof bytes);
    for (size_t i = 0; i < n; i++) CHECK(zmq_send(d, frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0) == (int)lens[i]);
}

// Receives the next reply and checks its type (and aux, for a REJECT).
static wire_header_t raw_expect(void *d, uint16_t type, uint32_t aux, uint32_t shard) {
    char err[256];
    zmsg_t m;
    int got = zmsg_recv(d, 0, RUN_ID, &m, err, sizeof err);
    if (got != 1) {
        fprintf(stderr, "raw dealer: no valid reply (want %s): %s\n", msg_type_name(type), got < 0 ? err : "invalid");
        exit(1);
    }
    wire_header_t h = m.h;
    zmsg_close(&m);
    if (h.type != type || (type == MSG_TYPE_REJECT && h.aux != aux)) {
        fprintf(stderr, "raw dealer: got %s (aux %u), want %s (aux %u)\n", msg_type_name(h.type), h.aux,
                msg_type_name(type), aux);
        exit(1);
    }
    CHECK(h.shard == shard && h.sender == shard);
    return h;
}

static wire_header_t req(uint16_t type, uint32_t sender, uint32_t shard) {
    wire_header_t h = zmsg_header(type, RUN_ID);
    h.sender = sender;
    h.shard = shard;
    return h;
}

// Sends a message of this type from worker 1 carrying two keys (sealed, so
// only what the message means can be wrong).
static void send_two_keys(void *d, uint16_t type, uint32_t shard, const uint32_t keys[2]) {
    wire_header_t h = req(type, 1, shard);
    h.payload_kind = PAYLOAD_KIND_KEYS;
    h.count = 2;
    wire_seal(&h, keys, 2 * sizeof *keys, NULL, 0);
    raw_send(d, &h, (const void *[]){keys}, (size_t[]){2 * sizeof *keys}, 1);
}

static void test_malformed(void *ctx) {
    char err[256];
    const float lr = 0.5f;
    float init[E_N], want[E_N], got[E_N], g[E_N], gd[50];
    random_values(init, E_N, 17, 1);
    random_values(g, E_N, 17, 2);
    random_values(gd, 50, 17, 3);
    memcpy(want, init, sizeof want);

    ps_config_t cfg = config(2, E_N, 2, SYNC_MODE_ASP);
    cfg.lr = lr;
    cfg.quiet = 0;  // the first message of each kind is logged once
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    // Worker 1 is a raw DEALER: d1 talks to shard 1 (the one attacked), d0 only joins and leaves shard 0.
    void *d1 = raw_dealer(ctx, cl.endpoints[1]);
    void *d0 = raw_dealer(ctx, cl.endpoints[0]);
    uint64_t dropped[WIRE_STATUS_COUNT_] = {0};
    uint64_t rejected = 0;
    const uint32_t S = 1;  // the shard d1 talks to

    // A HELLO for another model, and a push before any HELLO: refused.
    wire_header_t h = req(MSG_TYPE_HELLO, 1, S);
    h.offset = E_N - 1;
    raw_send(d1, &h, NULL, NULL, 0);
    raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
    rejected++;
    wire_header_t push = req(MSG_TYPE_PUSH, 1, S);  // a valid dense push for shard 1
    push.payload_kind = PAYLOAD_KIND_DENSE;
    push.offset = 51;
    push.count = 50;
    wire_seal(&push, gd, sizeof gd, NULL, 0);
    const void *pf[3] = {gd, gd, gd};
    size_t pl[3] = {sizeof gd, sizeof gd, sizeof gd};
    raw_send(d1, &push, pf, pl, 1);
    raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
    rejected++;

    // Join properly.
    h = req(MSG_TYPE_HELLO, 1, S);
    h.offset = E_N;
    raw_send(d1, &h, NULL, NULL, 0);
    wire_header_t welcome = raw_expect(d1, MSG_TYPE_WELCOME, 0, S);
    CHECK(welcome.offset == 51 && welcome.aux == 50 && welcome.count == 0);
    h.shard = 0;
    raw_send(d0, &h, NULL, NULL, 0);
    welcome = raw_expect(d0, MSG_TYPE_WELCOME, 0, 0);
    CHECK(welcome.offset == 0 && welcome.aux == 51);

    // ---- invalid messages: dropped, counted, never answered ----
    CHECK(zmq_send(d1, "0123456789", 10, 0) == 10);  // not a header
    dropped[WIRE_STATUS_BAD_SIZE]++;
    CHECK(zmq_send(d1, "", 0, 0) == 0);  // an empty frame
    dropped[WIRE_STATUS_BAD_SIZE]++;
    h = req(MSG_TYPE_PULL, 1, S);
    h.magic = 0x44475342u;
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_MAGIC]++;
    h = req(MSG_TYPE_PULL, 1, S);
    h.version = WIRE_VERSION + 1;
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_VERSION]++;
    h = req(0, 1, S);
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_TYPE]++;
    h = req(MSG_TYPE_MAX_, 1, S);
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_TYPE]++;
    h = req(MSG_TYPE_PULL, 1, S);
    h.run_id = RUN_ID + 1;  // another run
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_RUN]++;
    h = req(MSG_TYPE_PULL, 1, S);
    h.payload_kind = PAYLOAD_KIND_MAX_;
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_KIND]++;
    h = req(MSG_TYPE_PULL, 1, S);
    h.count = 3;  // NONE with a count
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_SIZE]++;
    h = push;
    h.checksum ^= 0x100u;  // a checksum that does not cover the payload
    raw_send(d1, &h, pf, pl, 1);
    dropped[WIRE_STATUS_BAD_CHECKSUM]++;
    h = push;  // right checksum, one byte of the payload changed on the way
    {
        float bent[50];
        memcpy(bent, gd, sizeof bent);
        ((uint8_t *)bent)[77] ^= 0x10u;
        const void *bf[1] = {bent};
        raw_send(d1, &h, bf, pl, 1);
        dropped[WIRE_STATUS_BAD_CHECKSUM]++;
    }
    raw_send(d1, &push, pf, pl, 3);  // three payload frames
    dropped[WIRE_STATUS_BAD_SIZE]++;
    raw_send(d1, &push, pf, pl, 2);  // DENSE with two frames
    dropped[WIRE_STATUS_BAD_SIZE]++;
    raw_send(d1, &push, NULL, NULL, 0);  // DENSE with none
    dropped[WIRE_STATUS_BAD_SIZE]++;
    {
        size_t short_len[1] = {sizeof gd - 4};  // count says 50 floats, the frame holds 49
        h = push;
        wire_seal(&h, gd, short_len[0], NULL, 0);
        raw_send(d1, &h, pf, short_len, 1);
        dropped[WIRE_STATUS_BAD_SIZE]++;
    }
    h = push;
    h.payload_kind = PAYLOAD_KIND_SPARSE;  // two frames announced, one sent
    h.count = 2;
    raw_send(d1, &h, pf, (size_t[]){8}, 1);
    dropped[WIRE_STATUS_BAD_SIZE]++;
    // Valid on the wire, but from a sender that is not a worker of this run.
    h = push;
    h.sender = 2;
    raw_send(d1, &h, pf, pl, 1);
    dropped[WIRE_STATUS_BAD_RANGE]++;
    h = push;
    h.sender = WIRE_NO_ID;
    raw_send(d1, &h, pf, pl, 1);
    dropped[WIRE_STATUS_BAD_RANGE]++;
    h = req(MSG_TYPE_HELLO, 7, S);  // even a HELLO
    h.offset = E_N;
    raw_send(d1, &h, NULL, NULL, 0);
    dropped[WIRE_STATUS_BAD_RANGE]++;
    h = push;  // from a worker of the run, but addressed to another shard
    h.shard = S + 1;
    raw_send(d1, &h, pf, pl, 1);
    dropped[WIRE_STATUS_BAD_RANGE]++;
    // Valid, but of a type a server does not take.
    static const uint16_t not_for_servers[] = {MSG_TYPE_WELCOME, MSG_TYPE_PUSH_ACK, MSG_TYPE_PARAMS,
                                               MSG_TYPE_BYE_ACK, MSG_TYPE_REJECT,   MSG_TYPE_RING_CHUNK};
    for (size_t i = 0; i < sizeof not_for_servers / sizeof not_for_servers[0]; i++) {
        h = req(not_for_servers[i], 1, S);
        if (wire_kind_allowed(h.type, PAYLOAD_KIND_NONE)) {
            raw_send(d1, &h, NULL, NULL, 0);
        } else {  // PARAMS, RING_CHUNK: with the values they carry
            h.payload_kind = PAYLOAD_KIND_DENSE;
            h.offset = 51;
            h.count = 50;
            wire_seal(&h, gd, sizeof gd, NULL, 0);
            raw_send(d1, &h, pf, pl, 1);
        }
        dropped[WIRE_STATUS_BAD_TYPE]++;
    }

    // ---- valid on the wire, refused by the shard: each answered by a REJECT ----
    // (the first answer after all the above proves none of it was answered).
    h = push;  // shard 0's range sent to shard 1
    h.offset = 0;
    h.count = 51;
    float g51[51];
    memcpy(g51, g, sizeof g51);
    wire_seal(&h, g51, sizeof g51, NULL, 0);
    raw_send(d1, &h, (const void *[]){g51}, (size_t[]){sizeof g51}, 1);
    raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
    rejected++;
    h = push;  // the shard's size, one element on: past its end (a shorter range would be a part)
    h.offset++;
    wire_seal(&h, gd, 50 * 4, NULL, 0);
    raw_send(d1, &h, pf, (size_t[]){50 * 4}, 1);
    raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
    rejected++;
    {
        uint32_t sidx[2] = {60, 3};  // index 3 is shard 0's
        float sval[2] = {1.0f, 2.0f};
        h = req(MSG_TYPE_PUSH, 1, S);
        h.payload_kind = PAYLOAD_KIND_SPARSE;
        h.count = 2;
        wire_seal(&h, sidx, sizeof sidx, sval, sizeof sval);
        raw_send(d1, &h, (const void *[]){sidx, sval}, (size_t[]){8, 8}, 2);
        raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
        rejected++;
        sidx[1] = E_N;  // past the model
        wire_seal(&h, sidx, sizeof sidx, sval, sizeof sval);
        raw_send(d1, &h, (const void *[]){sidx, sval}, (size_t[]){8, 8}, 2);
        raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
        rejected++;
        // Indices are strictly ascending: a repeat or a step back is refused,
        // whatever else is right about the push.
        static const uint32_t not_ascending[2][2] = {{60, 60}, {61, 60}};
        for (int i = 0; i < 2; i++) {
            wire_seal(&h, not_ascending[i], 8, sval, sizeof sval);
            raw_send(d1, &h, (const void *[]){not_ascending[i], sval}, (size_t[]){8, 8}, 2);
            raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
            rejected++;
        }
        // More pairs than the shard has parameters cannot be ascending.
        uint32_t many_idx[51];
        float many_val[51];
        for (int i = 0; i < 51; i++) many_idx[i] = 51 + (uint32_t)(i < 50 ? i : 49), many_val[i] = 1.0f;
        h.count = 51;
        wire_seal(&h, many_idx, sizeof many_idx, many_val, sizeof many_val);
        raw_send(d1, &h, (const void *[]){many_idx, many_val}, (size_t[]){sizeof many_idx, sizeof many_val}, 2);
        raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
        rejected++;
        uint32_t repeated_keys[2] = {70, 70};  // a keyed pull with a repeat
        send_two_keys(d1, MSG_TYPE_PULL, S, repeated_keys);
        raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
        rejected++;
    }
    // A clock its steps cannot have reached: a round is at least one step, so
    // a worker that joined at clock 0 and reports 1 step can push clock 1 at
    // most (docs/security.md). 2^40 is the clock a forged push once took.
    static const uint64_t implausible[2] = {2, 1ull << 40};
    for (int i = 0; i < 2; i++) {
        h = push;
        h.clock = implausible[i];
        h.aux = 1;
        wire_seal(&h, gd, sizeof gd, NULL, 0);
        raw_send(d1, &h, pf, pl, 1);
        raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
        rejected++;
    }
    h = push;  // a BSP gradient under ASP
    h.flags = WIRE_FLAG_SUM;
    h.aux = 4;
    raw_send(d1, &h, pf, pl, 1);
    raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_KIND, S);
    rejected++;
    {
        // A payload kind the message type does not carry is invalid on the
        // wire (wire_kind_allowed): dropped and counted, not answered.
        uint32_t keys[2] = {60, 61};
        send_two_keys(d1, MSG_TYPE_PUSH, S, keys);  // a push of keys
        dropped[WIRE_STATUS_BAD_KIND]++;
        h = req(MSG_TYPE_PUSH, 1, S);  // a push of nothing
        raw_send(d1, &h, NULL, NULL, 0);
        dropped[WIRE_STATUS_BAD_KIND]++;
        h = req(MSG_TYPE_PULL, 1, S);  // a pull carrying values
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.offset = 51;
        h.count = 50;
        wire_seal(&h, gd, sizeof gd, NULL, 0);
        raw_send(d1, &h, pf, pl, 1);
        dropped[WIRE_STATUS_BAD_KIND]++;
        h = req(MSG_TYPE_HELLO, 1, S);  // a hello with a payload
        h.offset = E_N;
        h.payload_kind = PAYLOAD_KIND_TEXT;
        raw_send(d1, &h, (const void *[]){""}, (size_t[]){0}, 1);
        dropped[WIRE_STATUS_BAD_KIND]++;
        send_two_keys(d1, MSG_TYPE_BYE, S, keys);  // a goodbye with one
        dropped[WIRE_STATUS_BAD_KIND]++;
        keys[0] = 10;  // a keyed pull of shard 0's keys
        send_two_keys(d1, MSG_TYPE_PULL, S, keys);
        raw_expect(d1, MSG_TYPE_REJECT, WIRE_STATUS_BAD_RANGE, S);
        rejected++;
    }

    // ---- and then real work from the raw worker ----
    raw_send(d1, &push, pf, pl, 1);
    wire_header_t ack = raw_expect(d1, MSG_TYPE_PUSH_ACK, 0, S);
    CHECK(ack.param_version == 1);
    for (size_t j = 0; j < 50; j++) want[51 + j] = want[51 + j] - lr * gd[j];
    h = req(MSG_TYPE_PULL, 1, S);
    raw_send(d1, &h, NULL, NULL, 0);
    {
        zmsg_t m;
        CHECK(zmsg_recv(d1, 0, RUN_ID, &m, err, sizeof err) == 1);
        CHECK(m.h.type == MSG_TYPE_PARAMS && m.h.payload_kind == PAYLOAD_KIND_DENSE);
        CHECK(m.h.offset == 51 && m.h.count == 50 && m.h.param_version == 1);
        CHECK(m.n_frames == 1 && zmq_msg_size(&m.frames[0]) == 200);
        float vals[50];
        memcpy(vals, zmsg_payload(&m, 0), sizeof vals);
        CHECK_BITS(vals, want + 51, 50, "raw pull");
        zmsg_close(&m);
    }
    // Keyed pulls: each answer is the values alone, in the keys' order, and
    // names its pull by the tag the pull carried (the keys do not come back).
    for (uint64_t tag = 9; tag <= 10; tag++) {
        const uint32_t keys2[2] = {52, (uint32_t)(90 + tag)};
        h = req(MSG_TYPE_PULL, 1, S);
        h.payload_kind = PAYLOAD_KIND_KEYS;
        h.count = 2;
        h.offset = tag;
        wire_seal(&h, keys2, sizeof keys2, NULL, 0);
        raw_send(d1, &h, (const void *[]){keys2}, (size_t[]){sizeof keys2}, 1);
        zmsg_t m;
        CHECK(zmsg_recv(d1, 0, RUN_ID, &m, err, sizeof err) == 1);
        CHECK(m.h.type == MSG_TYPE_PARAMS && m.h.payload_kind == PAYLOAD_KIND_VALUES);
        CHECK(m.h.offset == tag && m.h.count == 2 && m.n_frames == 1 && zmq_msg_size(&m.frames[0]) == 8);
        float vals[2], expect[2] = {want[52], want[90 + tag]};
        memcpy(vals, zmsg_payload(&m, 0), sizeof vals);
        CHECK_BITS(vals, expect, 2, "raw keyed pull");
        zmsg_close(&m);
    }
    h = req(MSG_TYPE_BYE, 1, S);
    raw_send(d1, &h, NULL, NULL, 0);
    raw_expect(d1, MSG_TYPE_BYE_ACK, 0, S);
    h.shard = 0;
    raw_send(d0, &h, NULL, NULL, 0);
    raw_expect(d0, MSG_TYPE_BYE_ACK, 0, 0);
    // Nothing else was ever sent back.
    uint8_t extra[64];
    CHECK(zmq_recv(d1, extra, sizeof extra, ZMQ_DONTWAIT) == -1 && errno == EAGAIN);
    CHECK(zmq_recv(d0, extra, sizeof extra, ZMQ_DONTWAIT) == -1 && errno == EAGAIN);

    // ---- a normal worker is served as if nothing had happened ----
    ps_client_t *c = client(ctx, 0, &cl, E_N);
    CHECK_OK(ps_client_pull(c, 0, got, NULL, err, sizeof err), err);
    CHECK_BITS(got, want, E_N, "normal pull after the garbage");
    push_dense(c, &cl, E_N, g, 0, 1, 0);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t j = 0; j < E_N; j++) want[j] = want[j] - lr * g[j];
    CHECK_OK(ps_client_pull(c, 0, got, NULL, err, sizeof err), err);
    CHECK_BITS(got, want, E_N, "normal pull after a push");
    ps_client_stats_t cs;
    ps_client_get_stats(c, &cs);
    CHECK(cs.rejects == 0 && cs.dropped == 0 && cs.pushes_acked == 2);
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    zmq_close(d0);
    zmq_close(d1);

    cluster_join_returned(&cl);  // both workers joined and left
    ps_stats_t st;
    ps_server_stats(cl.st[1].s, &st);
    uint64_t total = 0;
    for (int r = 0; r < WIRE_STATUS_COUNT_; r++) {
        if (st.dropped[r] != dropped[r]) {
            fprintf(stderr, "shard 1 dropped %llu messages as '%s', want %llu\n", (unsigned long long)st.dropped[r],
                    wire_status_name((wire_status_t)r), (unsigned long long)dropped[r]);
            exit(1);
        }
        total += dropped[r];
    }
    CHECK(st.dropped[WIRE_STATUS_OK] == 0);
    CHECK(st.dropped_total == total);
    CHECK(st.rejected == rejected);
    CHECK(st.version == 2 && st.pushes_applied == 2);
    CHECK(st.bytes_in == 2 * 200u);
    CHECK(ps_server_pushes_per_worker(cl.st[1].s)[0] == 1 && ps_server_pushes_per_worker(cl.st[1].s)[1] == 1);
    CHECK_BITS(ps_server_values(cl.st[1].s), want + 51, 50, "shard 1 values");
    ps_server_stats(cl.st[0].s, &st);
    CHECK(st.dropped_total == 0 && st.rejected == 0 && st.version == 1);
    CHECK_BITS(ps_server_values(cl.st[0].s), want, 51, "shard 0 values");
    cluster_destroy(&cl);
}

// ---- f) failures ------------------------------------------------------------------

static void test_failures(void *ctx) {
    char err[256];

    // No server: ps_client_new gives up after its timeout, naming the parameter server.
    {
        void *probe = zmq_socket(ctx, ZMQ_ROUTER);
        int zero = 0;
        CHECK(zmq_setsockopt(probe, ZMQ_LINGER, &zero, sizeof zero) == 0);
        CHECK(zmq_bind(probe, "tcp://127.0.0.1:*") == 0);
        char ep[256];
        size_t len = sizeof ep;
        CHECK(zmq_getsockopt(probe, ZMQ_LAST_ENDPOINT, ep, &len) == 0);
        CHECK(zmq_close(probe) == 0);  // nobody listens there any more
        const char *eps[1] = {ep};
        double t0 = now_s();
        err[0] = '\0';
        ps_client_t *c = ps_client_new(ctx, RUN_ID, 0, eps, 1, 10, 0, 300, err, sizeof err);
        double waited = now_s() - t0;
        CHECK(c == NULL);
        if (!strstr(err, "parameter server") || !strstr(err, "300 ms")) {
            fprintf(stderr, "unexpected error text: %s\n", err);
            exit(1);
        }
        CHECK(waited >= 0.3);  // it did wait for the server (an upper bound is ctest's timeout)
    }

    // Bad endpoint.
    {
        const char *eps[1] = {"tcp://127.0.0.1"};  // no port
        err[0] = '\0';
        CHECK(ps_client_new(ctx, RUN_ID, 0, eps, 1, 10, 0, 300, err, sizeof err) == NULL);
        CHECK(strstr(err, "zmq_connect(tcp://127.0.0.1)") != NULL);
    }

    // A server of another model refuses the HELLO; one of another layout is detected by the client.
    {
        enum { N = 20 };
        float init[N];
        random_values(init, N, 18, 1);
        ps_config_t cfg = config(2, N, 2, SYNC_MODE_ASP);
        cluster_t cl;
        cluster_start(&cl, ctx, &cfg, init);
        err[0] = '\0';
        ps_client_t *c = ps_client_new(ctx, RUN_ID, 0, cl.endpoints, 2, N + 1, 0, TIMEOUT_MS, err, sizeof err);
        CHECK(c == NULL);
        if (!strstr(err, "server shard ") || !strstr(err, "refused a request from worker 0: bad range")) {
            fprintf(stderr, "unexpected error text: %s\n", err);
            exit(1);
        }
        // One shard where there are two: shard 0 holds [0, 10), not the whole model.
        // (Another worker id: the ROUTER would hold a second "w0" connection back
        // while the first one's is still open.)
        err[0] = '\0';
        c = ps_client_new(ctx, RUN_ID, 1, cl.endpoints, 1, N, 0, TIMEOUT_MS, err, sizeof err);
        CHECK(c == NULL);
        if (!strstr(err, "server shard 0 holds parameters [0, 10) but this worker expects [0, 20)")) {
            fprintf(stderr, "unexpected error text: %s\n", err);
            exit(1);
        }
        cluster_stop(&cl);
        // The client gave up at the first REJECT and closed its sockets (LINGER 0),
        // so its HELLO may or may not have reached the other shard.
        ps_stats_t st0, st1;
        ps_server_stats(cl.st[0].s, &st0);
        ps_server_stats(cl.st[1].s, &st1);
        CHECK(st0.rejected <= 1 && st1.rejected <= 1 && st0.rejected + st1.rejected >= 1);
        CHECK(st0.dropped_total == 0 && st1.dropped_total == 0);
        cluster_destroy(&cl);
    }

    // A shard with no parameters (more shards than parameters) still serves.
    {
        float init[1] = {0.75f}, got[1] = {0}, g[1] = {0.5f};
        ps_config_t cfg = config(2, 1, 1, SYNC_MODE_ASP);
        cluster_t cl;
        cluster_start(&cl, ctx, &cfg, init);
        size_t b, e;
        ps_server_range(cl.st[1].s, &b, &e);
        CHECK(b == 1 && e == 1);
        ps_client_t *c = client(ctx, 0, &cl, 1);
        push_dense(c, &cl, 1, g, 0, 1, 0);
        CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
        CHECK_OK(ps_client_pull(c, 0, got, NULL, err, sizeof err), err);
        CHECK(got[0] == 0.75f - 0.5f * 0.5f);
        CHECK_OK(ps_client_bye(c, err, sizeof err), err);
        ps_client_destroy(&c);
        cluster_join_returned(&cl);
        cluster_destroy(&cl);
    }

    // Configurations a server refuses.
    {
        float init[4] = {1, 2, 3, 4};
        ps_config_t cfg = config(2, 4, 1, SYNC_MODE_ASP);
        cfg.shard = 2;
        CHECK(ps_server_new(ctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
        CHECK(strstr(err, "not a valid layout") != NULL);
        cfg = config(2, 4, 0, SYNC_MODE_ASP);
        CHECK(ps_server_new(ctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
        CHECK(strstr(err, "not a valid layout") != NULL);
        cfg = config(0, 4, 1, SYNC_MODE_ASP);
        CHECK(ps_server_new(ctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
        cfg = config(1, 0, 1, SYNC_MODE_ASP);
        CHECK(ps_server_new(ctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
        cfg = config(1, 4, 1, SYNC_MODE_ALLREDUCE);
        CHECK(ps_server_new(ctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
        CHECK(strstr(err, "allreduce") != NULL);
        cfg = config(1, 4, 1, SYNC_MODE_ASP);
        CHECK(ps_server_new(ctx, &cfg, "tcp://127.0.0.300:*", init, err, sizeof err) == NULL);
        CHECK(strstr(err, "zmq_bind(tcp://127.0.0.300:*)") != NULL);
        // Beyond loopback without CURVE or --insecure: refused before binding.
        CHECK(ps_server_new(ctx, &cfg, "tcp://not-an-address:*", init, err, sizeof err) == NULL);
        CHECK(strstr(err, "tcp://not-an-address:*: refusing to listen beyond this machine") != NULL);
        ps_server_destroy(NULL);
        ps_server_t *none = NULL;
        ps_server_destroy(&none);
    }
}

// Stale updates under ASP: worker 0 pulls (version 0), worker 1 pushes twice,
// then worker 0 pushes g computed from version 0 — two versions stale.
// Staleness-aware: applied with lr / 2. DC-ASGD with lambda L over a push of
// m steps: g + (L / m) g^2 (w_now - w_then), w_then being what worker 0 pulled.
// Delay-adaptive with tau_C = 1: lr * 1 / 2; with tau_C = 2: the full lr.
static void test_stale_rules(void *ctx) {
    enum { N = 37 };
    float init[N], g0[N], g1[N], pulled[N], want[N], got[N];
    random_values(init, N, 21, 1);
    random_values(g0, N, 21, 2);
    random_values(g1, N, 21, 3);
    for (int variant = 0; variant < 4; variant++) {
        ps_config_t c = config(2, N, 2, SYNC_MODE_ASP);
        if (variant == 0)
            c.stale.staleness_aware = 1;
        else if (variant == 1)
            c.stale.dc_lambda = 0.75;
        else
            c.stale.delay_adaptive = (uint64_t)variant - 1;  // tau_C 1, then 2
        cluster_t cl;
        cluster_start(&cl, ctx, &c, init);
        ps_client_t *a = client(ctx, 0, &cl, N), *b = client(ctx, 1, &cl, N);
        char err[256];
        CHECK_OK(ps_client_pull(a, 0, pulled, NULL, err, sizeof err), err);
        CHECK_OK(ps_client_pull(b, 0, pulled, NULL, err, sizeof err), err);
        push_dense(b, &cl, N, g1, 0, 1, 0);
        push_dense(b, &cl, N, g1, 1, 1, 0);
        CHECK_OK(ps_client_wait_acks(b, err, sizeof err), err);
        const uint32_t steps = 4;
        push_dense(a, &cl, N, g0, 0, steps, 0);
        CHECK_OK(ps_client_wait_acks(a, err, sizeof err), err);
        CHECK_OK(ps_client_pull(a, 0, got, NULL, err, sizeof err), err);
        for (int j = 0; j < N; j++) {
            float w = init[j];
            w = w - c.lr * g1[j];  // worker 1's first push: fresh, applied as it is
            if (variant != 1) {
                w = w - c.lr * g1[j];  // its second: one version stale, and lr / max(1, 1) = lr (also <= tau_C)
            } else {
                float g = g1[j] + (float)c.stale.dc_lambda * g1[j] * g1[j] * (w - init[j]);  // 1 step, read at init
                w = w - c.lr * g;
            }
            if (variant == 0 || variant == 2) {
                want[j] = w - (c.lr / 2.0f) * g0[j];  // 2 versions stale: lr / 2 = lr * tau_C / 2 at tau_C 1
            } else if (variant == 3) {
                want[j] = w - c.lr * g0[j];  // 2 <= tau_C: the full step
            } else {
                float lambda = (float)(c.stale.dc_lambda / (double)steps);
                float g = g0[j] + lambda * g0[j] * g0[j] * (w - init[j]);
                want[j] = w - c.lr * g;
            }
        }
        const char *what[] = {"staleness-aware step", "DC-ASGD", "delay-adaptive step, tau_C 1",
                              "delay-adaptive step, tau_C 2"};
        check_bits(got, want, N, what[variant], __LINE__);
        CHECK_OK(ps_client_bye(a, err, sizeof err), err);
        CHECK_OK(ps_client_bye(b, err, sizeof err), err);
        cluster_join_returned(&cl);
        ps_client_destroy(&a);
        ps_client_destroy(&b);
        cluster_destroy(&cl);
    }
    // BSP updates are never stale: the rules are refused there.
    ps_config_t c = config(1, N, 2, SYNC_MODE_BSP);
    c.stale.staleness_aware = 1;
    char err[256];
    CHECK(ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL && strstr(err, "bsp"));
    c.stale.staleness_aware = 0;
    c.stale.delay_adaptive = 4;
    CHECK(ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL && strstr(err, "bsp"));
    // The staleness-aware and delay-adaptive steps exclude each other.
    c = config(1, N, 2, SYNC_MODE_ASP);
    c.stale.staleness_aware = 1;
    c.stale.delay_adaptive = 4;
    CHECK(ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL &&
          strstr(err, "--delay-adaptive 4: replaces the staleness-aware step"));
    printf("stale rules: staleness-aware, DC-ASGD and delay-adaptive updates exact\n");
}

// ---- g) compressed pushes ----------------------------------------------------------------

// Encodes g's shard ranges with `spec` into the client's ENCODED frames and
// commits; dec receives what the servers should decode. corrupt_shard >= 0:
// that shard's frame names encoding 99.
static void push_encoded(ps_client_t *c, const cluster_t *cl, size_t n_params, const float *g, const char *spec_text,
                         uint64_t clock, float *dec, long corrupt_shard, size_t *bytes_total) {
    char err[256];
    compress_spec_t spec;
    CHECK_OK(compress_spec_parse(spec_text, &spec, err, sizeof err), err);
    compressor_t *z = compressor_new(&spec, n_params, 3, 4, err, sizeof err);
    CHECK(z);
    size_t bytes[MAX_SHARDS];
    for (size_t k = 0; k < cl->n_shards; k++) {
        size_t begin, end;
        shard_range(n_params, cl->n_shards, k, &begin, &end);
        bytes[k] = compress_encoded_bytes(&spec, end - begin);
    }
    uint8_t *const *frames = ps_client_push_encoded_frames(c, bytes, err, sizeof err);
    CHECK_OK(frames == NULL, err);
    *bytes_total = 0;
    for (size_t k = 0; k < cl->n_shards; k++) {
        size_t begin, end;
        shard_range(n_params, cl->n_shards, k, &begin, &end);
        CHECK_OK(compress_encode(z, g + begin, end - begin, NULL, dec + begin, frames[k], bytes[k], err, sizeof err),
                 err);
        if ((long)k == corrupt_shard) frames[k][0] = 99;
        *bytes_total += bytes[k];
    }
    CHECK_OK(ps_client_push_commit(c, clock, 1, 0, err, sizeof err), err);
    compressor_destroy(&z);
}

static void test_encoded_push(void *ctx) {
    char err[256];
    const float lr = 0.5f;
    float init[A_N], want[A_N], got[A_N], g[A_N], dec[A_N];
    random_values(init, A_N, 12, 1);
    memcpy(want, init, sizeof want);
    ps_config_t cfg = config(2, A_N, 1, SYNC_MODE_ASP);
    cfg.lr = lr;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c = client(ctx, 0, &cl, A_N);
    // Every encoding is decoded and applied as the dense update it stands for.
    const char *specs[] = {"fp16", "qsgd:4", "topk:0.05", "randk:0.1"};
    size_t sent = 0, bytes;
    for (size_t i = 0; i < 4; i++) {
        random_values(g, A_N, 12, 2 + i);
        push_encoded(c, &cl, A_N, g, specs[i], i, dec, -1, &bytes);
        sent += bytes;
        CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
        for (size_t j = 0; j < A_N; j++) want[j] = want[j] - lr * dec[j];
        CHECK_OK(ps_client_pull(c, 0, got, NULL, err, sizeof err), err);
        CHECK_BITS(got, want, A_N, specs[i]);
    }
    // A dense push after encoded ones still works (frames change kind).
    random_values(g, A_N, 12, 9);
    push_dense(c, &cl, A_N, g, 4, 1, 0);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
    for (size_t j = 0; j < A_N; j++) want[j] = want[j] - lr * g[j];
    ps_client_stats_t cs;
    ps_client_get_stats(c, &cs);
    CHECK(cs.bytes_out == sent + 4u * A_N);
    // Shard 1 gets an encoding it does not know: refused, nothing applied there.
    push_encoded(c, &cl, A_N, g, "qsgd:4", 5, dec, 1, &bytes);
    CHECK(ps_client_wait_acks(c, err, sizeof err) == -1);
    printf("encoded push with an unknown encoding: %s\n", err);
    CHECK(strstr(err, "server shard 1 refused") && strstr(err, "bad gradient encoding"));
    for (size_t j = 0; j < 501; j++) want[j] = want[j] - lr * dec[j];
    atomic_store(&cl.stop, 1);
    for (size_t k = 0; k < 2; k++) {
        CHECK(pthread_join(cl.st[k].tid, NULL) == 0);
        CHECK_OK(cl.st[k].rc, cl.st[k].err);
        size_t begin, end;
        ps_server_range(cl.st[k].s, &begin, &end);
        CHECK_BITS(ps_server_values(cl.st[k].s), want + begin, end - begin, "after the refused push");
        ps_stats_t st;
        ps_server_stats(cl.st[k].s, &st);
        CHECK(st.rejected == (k == 1 ? 1u : 0u) && st.pushes_applied == (k == 1 ? 5u : 6u));
    }
    ps_client_destroy(&c);
    cluster_destroy(&cl);
    printf("encoded pushes (fp16, qsgd, topk, randk) applied as decoded, bit for bit; an unknown encoding refused\n");
}

// ---- g) a resent HELLO ----------------------------------------------------------

// Worker 1 (a raw DEALER) says HELLO; worker 0 pushes 3 rounds; worker 1's
// HELLO comes again, as a retry sent before the first WELCOME arrived would.
// Taken as a rejoin it would put worker 1 at clock 3 (the slowest other
// worker's), and its push of clock 0, made from the first WELCOME, would be
// acknowledged as a duplicate and never applied.
static void test_hello_resent(void *ctx) {
    char err[256];
    float init[E_N], g[E_N];
    random_values(init, E_N, 29, 1);
    random_values(g, E_N, 29, 2);
    ps_config_t cfg = config(1, E_N, 2, SYNC_MODE_ASP);
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    void *d1 = raw_dealer(ctx, cl.endpoints[0]);
    wire_header_t hello = req(MSG_TYPE_HELLO, 1, 0);
    hello.offset = E_N;
    hello.aux = 0x5eed;  // worker 1's client nonce
    raw_send(d1, &hello, NULL, NULL, 0);
    CHECK(raw_expect(d1, MSG_TYPE_WELCOME, 0, 0).clock == 0);
    ps_client_t *c0 = client(ctx, 0, &cl, E_N);
    for (uint64_t round = 0; round < 3; round++) push_dense(c0, &cl, E_N, g, round, 1, 0);
    CHECK_OK(ps_client_wait_acks(c0, err, sizeof err), err);

    raw_send(d1, &hello, NULL, NULL, 0);  // the copy: the same WELCOME
    CHECK(raw_expect(d1, MSG_TYPE_WELCOME, 0, 0).clock == 0);
    wire_header_t push = req(MSG_TYPE_PUSH, 1, 0);
    push.payload_kind = PAYLOAD_KIND_DENSE;
    push.offset = 0;
    push.count = E_N;
    push.aux = 1;  // one local step
    wire_seal(&push, g, sizeof g, NULL, 0);
    raw_send(d1, &push, (const void *[]){g}, (size_t[]){sizeof g}, 1);
    CHECK(raw_expect(d1, MSG_TYPE_PUSH_ACK, 0, 0).offset == 0);

    // A later HELLO round of the same client (a later proposed clock) is
    // handled: the clock it proposes is taken.
    hello.clock = 5;
    raw_send(d1, &hello, NULL, NULL, 0);
    CHECK(raw_expect(d1, MSG_TYPE_WELCOME, 0, 0).clock == 5);
    // A new client of worker 1 (another nonce) rejoins: its own clock, 5.
    hello.aux = 0x5eee;
    hello.clock = 0;
    raw_send(d1, &hello, NULL, NULL, 0);
    CHECK(raw_expect(d1, MSG_TYPE_WELCOME, 0, 0).clock == 5);

    wire_header_t bye = req(MSG_TYPE_BYE, 1, 0);
    raw_send(d1, &bye, NULL, NULL, 0);
    raw_expect(d1, MSG_TYPE_BYE_ACK, 0, 0);
    CHECK_OK(ps_client_bye(c0, err, sizeof err), err);
    ps_client_destroy(&c0);
    cluster_join_returned(&cl);
    ps_stats_t st;
    ps_server_stats(cl.st[0].s, &st);
    printf(
        "resent HELLO: answered again %llu time(s); worker 1's push applied %llu time(s), %llu duplicate(s); "
        "%llu rejoins\n",
        (unsigned long long)st.hellos_resent, (unsigned long long)ps_server_pushes_total_per_worker(cl.st[0].s)[1],
        (unsigned long long)st.duplicates, (unsigned long long)st.rejoins);
    CHECK(st.hellos_resent == 1 && st.duplicates == 0 && st.rejoins == 2);
    CHECK(ps_server_pushes_total_per_worker(cl.st[0].s)[1] == 1 && st.pushes_applied == 4);
    CHECK(zmq_close(d1) == 0);
    cluster_destroy(&cl);
}

static void test_hellos_held(void *ctx) {
    float init[E_N];
    random_values(init, E_N, 31, 1);
    ps_config_t cfg = config(1, E_N, 1, SYNC_MODE_ASP);
    atomic_int open;
    atomic_init(&open, 0);
    cluster_t cl;
    cluster_start_held(&cl, ctx, &cfg, init, &open);
    void *d = raw_dealer(ctx, cl.endpoints[0]);
    wire_header_t hello = req(MSG_TYPE_HELLO, 0, 0);
    hello.offset = E_N;
    hello.aux = 0x5eed;
    raw_send(d, &hello, NULL, NULL, 0);
    // The shard takes one connection's messages in order: the pull's answer
    // comes after the HELLO was handled, and it is the first reply.
    wire_header_t pull = req(MSG_TYPE_PULL, WIRE_NO_ID, 0);
    raw_send(d, &pull, NULL, NULL, 0);
    wire_header_t got = raw_expect(d, MSG_TYPE_PARAMS, 0, 0);
    CHECK(got.count == E_N && got.param_version == 0);
    zmq_pollitem_t item = {.socket = d, .events = ZMQ_POLLIN};
    CHECK(zmq_poll(&item, 1, 0) == 0);  // the HELLO is held: no WELCOME yet
    atomic_store(&open, 1);
    CHECK(raw_expect(d, MSG_TYPE_WELCOME, 0, 0).clock == 0);
    wire_header_t bye = req(MSG_TYPE_BYE, 0, 0);
    raw_send(d, &bye, NULL, NULL, 0);
    raw_expect(d, MSG_TYPE_BYE_ACK, 0, 0);
    cluster_join_returned(&cl);
    printf("held HELLOs: the observer's pull answered first, the WELCOME once let through\n");
    CHECK(zmq_close(d) == 0);
    cluster_destroy(&cl);
}

// A shard read by an observer (ps_config_t.observer_linger_ms): once its
// worker has left, shard 0 says so in its progress and both serve on; the
// observer's pull reads the final model, and its BYE ends them. The linger
// is far longer than the test may take, so only the BYE can have ended them.
static void test_observer_linger(void *ctx) {
    char err[256];
    float init[A_N], want[A_N], got[A_N];
    random_values(init, A_N, 41, 1);
    memcpy(want, init, sizeof want);
    ps_config_t cfg = config(2, A_N, 1, SYNC_MODE_ASP);
    cfg.observer_linger_ms = 600000;
    cluster_t cl;
    cluster_start(&cl, ctx, &cfg, init);
    ps_client_t *c = client(ctx, 0, &cl, A_N);
    static const uint32_t idx[] = {3, 999};
    static const float val[] = {2.0f, -0.5f};
    CHECK_OK(ps_client_push_sparse(c, idx, val, 2, 0, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    for (size_t k = 0; k < 2; k++) want[idx[k]] = want[idx[k]] - cfg.lr * val[k];
    ps_progress_t at = {0};
    for (int i = 0; i < 500 && !at.workers_gone; i++) {
        ps_server_progress_wait(cl.st[0].s, UINT64_MAX, 0.01);
        ps_server_progress(cl.st[0].s, &at);
    }
    CHECK(at.workers_gone && at.version == 1);
    CHECK(!atomic_load(&cl.st[0].returned) && !atomic_load(&cl.st[1].returned));
    ps_client_t *o = ps_client_new_observer(ctx, RUN_ID, cl.endpoints, cl.n_shards, A_N, TIMEOUT_MS, err, sizeof err);
    CHECK_OK(o ? 0 : -1, err);
    uint64_t min_clock;
    CHECK_OK(ps_client_pull(o, 0, got, &min_clock, err, sizeof err), err);
    CHECK_BITS(got, want, A_N, "the final model, read after the worker left");
    CHECK_OK(ps_client_bye(o, err, sizeof err), err);
    ps_client_destroy(&o);
    cluster_join_returned(&cl);
    cluster_destroy(&cl);
    printf(
        "observer linger: the shards served on after their worker left until the observer read the final model "
        "and said BYE\n");
}

int main(void) {
    void *ctx = zmq_ctx_new();
    CHECK(ctx != NULL);
    test_asp_sgd(ctx);
    test_asp_adagrad(ctx);
    test_keys_in_background(ctx);
    test_key_map(ctx);
    test_exactly_once(ctx);
    test_bsp(ctx);
    test_bsp_bye_completes_round(ctx);
    test_bsp_local(ctx);
    test_ssp(ctx);
    test_stale_rules(ctx);
    test_malformed(ctx);
    test_failures(ctx);
    test_encoded_push(ctx);
    test_hello_resent(ctx);
    test_hellos_held(ctx);
    test_observer_linger(ctx);
    CHECK(zmq_ctx_term(ctx) == 0);
    printf("test_ps_server: ok\n");
    return 0;
}
