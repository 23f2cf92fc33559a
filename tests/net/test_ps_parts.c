// Pushes in parts and values back with a push (docs/protocol.md), over real
// sockets on 127.0.0.1, each shard serving in a thread of the test:
//
//   a) ASP, SGD and Adagrad, two shards of an odd-sized model: pushes cut
//      into parts (the last one shorter), some announced and sent part by
//      part as written, leave the shards bit for bit as the same pushes
//      sent whole; each push counts once (version, pushes applied) and every
//      part is taken once; ps_client_push_commit_pull returns exactly what a
//      pull after a whole push returns, and the same versions.
//   b) the protocol at the shard, from raw DEALERs: a part whose earlier part
//      never came is dropped; a pull from another worker waits while a push
//      is half applied and is answered with the whole push in; parts resent
//      after their push was taken are skipped and acknowledged once, as a
//      duplicate; a new client (HELLO) ends its unfinished push, whose parts
//      taken stay applied, and the waiting pull is answered.
//   c) a shard saved with a push half taken and resumed from that file takes
//      the rest when the worker resends every part: the push is applied once.
//   d) replication: a backup fed the parts by its primary holds the same bits,
//      and the primary waits for its answer once per push, not per part.
//   e) BSP gradients announced before they are written go out in parts as
//      they are written and sum to the bits of whole ones; a commit naming
//      another push than the one announced fails with a reason.
//   f) a BSP gradient that asks for its round's values (push_commit_pull)
//      completes the round and gets them in ranges, sent as the sum is
//      applied: the bits of a pull after whole pushes, the round's version.
//   g) a client whose push in parts is not acknowledged sends every part
//      again, the same headers and bytes (a shard played by the test).
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <zmq.h>

#include "kernels/foundation/partition.h"
#include "kernels/update.h"
#include "net/ps_replica.h"
#include "net/ps_client.h"
#include "net/ps_server.h"
#include "net/wire.h"
#include "net/zmsg.h"
#include "tests/support/server_thread.h"
#include "tests/support/test_support.h"

#define RUN_ID 0x7e57000051ad0002ull
#define TIMEOUT_MS 5000  // every wait; only reached when something is broken

// A worker's client that resends nothing before TIMEOUT_MS: the counts this
// file checks (pulls answered, bytes) are exact only without retries, and
// under a loaded machine a request can wait past the default retry interval
// (a quarter of the timeout, at most 1 s) and be answered twice.
static ps_client_t *client_new(void *ctx, uint32_t worker, const char *const *endpoints, size_t n_shards,
                               size_t n_params, char *err, size_t err_len) {
    ps_client_t *c = ps_client_new(ctx, RUN_ID, worker, endpoints, n_shards, n_params, 0, TIMEOUT_MS, err, err_len);
    if (c) ps_client_set_retry_ms(c, TIMEOUT_MS);
    return c;
}

static ps_config_t config(size_t n_shards, size_t shard, size_t n_params, size_t n_workers) {
    ps_config_t c = server_test_config(RUN_ID, n_shards, n_params, n_workers);
    c.shard = shard;
    return c;
}

static void random_values(float *v, size_t n, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, 1);
    for (size_t i = 0; i < n; i++) v[i] = (float)rng_uniform(&r) - 0.5f;
}

static void start_shards(void *ctx, const ps_config_t *base, const float *init, server_thread_t *st,
                         const char **endpoints) {
    char err[256];
    for (size_t k = 0; k < base->n_shards; k++) {
        ps_config_t c = *base;
        c.shard = k;
        size_t begin, end;
        shard_range(c.n_params, c.n_shards, k, &begin, &end);
        st[k].s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init + begin, err, sizeof err);
        if (!st[k].s) {
            fprintf(stderr, "ps_server_new: %s\n", err);
            exit(1);
        }
        endpoints[k] = ps_server_endpoint(st[k].s);
        server_thread_start(&st[k]);
    }
}

// ---- a) parts against whole pushes, and values back with the push ----

enum { A_N = 10007, A_SHARDS = 2, A_PUSHES = 5, A_PART = 1000 };

// Fills c's push frames with g; announced (ps_client_push_announce) with
// clock and kind when announce is set, so that parts go out as written.
static void fill_announced(ps_client_t *c, const float *g, int blockwise, int announce, uint64_t clock,
                           ps_push_kind_t kind) {
    char err[256];
    float *const *frames = ps_client_push_frames(c, err, sizeof err);
    if (!frames) {
        fprintf(stderr, "ps_client_push_frames: %s\n", err);
        exit(1);
    }
    if (announce) CHECK_OK(ps_client_push_announce(c, clock, 1, kind, err, sizeof err), err);
    for (size_t k = 0; k < A_SHARDS; k++) {
        size_t begin, end;
        shard_range(A_N, A_SHARDS, k, &begin, &end);
        // Half the pushes report blocks of 96 floats as written (a block may
        // straddle two parts); the others leave the checksums to the commit.
        for (size_t from = 0; from < end - begin; from += 96) {
            size_t len = end - begin - from < 96 ? end - begin - from : 96;
            memcpy(frames[k] + from, g + begin + from, len * sizeof(float));
            if (blockwise) ps_client_push_block_written(c, k, from, len);
        }
    }
}

static void fill(ps_client_t *c, const float *g, int blockwise) {
    fill_announced(c, g, blockwise, 0, 0, PS_PUSH_UPDATE);
}

static void test_parts_match_whole(void *ctx, optimizer_kind_t opt) {
    char err[256];
    static float init[A_N], g[A_PUSHES][A_N], whole[A_N], echoed[A_N];
    random_values(init, A_N, 31);
    for (int r = 0; r < A_PUSHES; r++) random_values(g[r], A_N, 40 + (uint64_t)r);
    ps_config_t cfg = config(A_SHARDS, 0, A_N, 1);
    cfg.optimizer = opt;
    server_thread_t parted[A_SHARDS], plain[A_SHARDS];
    const char *ep_parted[A_SHARDS], *ep_plain[A_SHARDS];
    start_shards(ctx, &cfg, init, parted, ep_parted);
    start_shards(ctx, &cfg, init, plain, ep_plain);
    ps_client_t *cp = client_new(ctx, 0, ep_parted, A_SHARDS, A_N, err, sizeof err);
    ps_client_t *cw = client_new(ctx, 0, ep_plain, A_SHARDS, A_N, err, sizeof err);
    CHECK(cp && cw);
    CHECK_OK(ps_client_set_push_part(cp, A_PART, err, sizeof err), err);
    CHECK_OK(ps_client_set_push_part(cw, 0, err, sizeof err), err);
    // 5004 and 5003 parameters: five parts of 1000, then one of 4 or 3.
    CHECK(ps_client_push_parts(cp, 0) == 6 && ps_client_push_parts(cp, 1) == 6);
    CHECK(ps_client_push_parts(cw, 0) == 1);
    for (int r = 0; r < A_PUSHES; r++) {
        // Pushes 1 and 3 announced and reported block by block: their parts
        // go out while the frames are written.
        fill_announced(cp, g[r], r % 2, r % 2, (uint64_t)r, PS_PUSH_UPDATE_PULL);
        CHECK_OK(ps_client_push_commit_pull(cp, (uint64_t)r, 1, 0, echoed, err, sizeof err), err);
        fill(cw, g[r], r % 2);
        CHECK_OK(ps_client_push_commit(cw, (uint64_t)r, 1, 0, err, sizeof err), err);
        CHECK_OK(ps_client_pull(cw, 0, whole, NULL, err, sizeof err), err);
        CHECK(memcmp(echoed, whole, sizeof whole) == 0);
        uint64_t vp[A_SHARDS], vw[A_SHARDS];
        ps_client_pulled_versions(cp, vp);
        ps_client_pulled_versions(cw, vw);
        for (size_t k = 0; k < A_SHARDS; k++) CHECK(vp[k] == (uint64_t)r + 1 && vw[k] == vp[k]);
    }
    // A plain pull after pushes answered part by part: its checksum is the
    // one each shard kept while it applied the parts (each part's sums joined
    // to the shard's), not summed again.
    CHECK_OK(ps_client_pull(cp, 0, echoed, NULL, err, sizeof err), err);
    CHECK_OK(ps_client_pull(cw, 0, whole, NULL, err, sizeof err), err);
    CHECK(memcmp(echoed, whole, sizeof whole) == 0);
    CHECK_OK(ps_client_bye(cp, err, sizeof err), err);
    CHECK_OK(ps_client_bye(cw, err, sizeof err), err);
    ps_client_destroy(&cp);
    ps_client_destroy(&cw);
    for (size_t k = 0; k < A_SHARDS; k++) {
        server_thread_join(&parted[k]);
        server_thread_join(&plain[k]);
        size_t begin, end;
        ps_server_range(parted[k].s, &begin, &end);
        CHECK(memcmp(ps_server_values(parted[k].s), ps_server_values(plain[k].s), (end - begin) * sizeof(float)) == 0);
        ps_stats_t sp, sw;
        ps_server_stats(parted[k].s, &sp);
        ps_server_stats(plain[k].s, &sw);
        CHECK(sp.version == A_PUSHES && sp.pushes_applied == A_PUSHES && sw.version == A_PUSHES);
        CHECK(sp.parts_taken == A_PUSHES * 6 && sw.parts_taken == 0);
        CHECK(sp.parts_skipped == 0 && sp.parts_out_of_order == 0 && sp.pushes_unfinished == 0 && sp.duplicates == 0);
        CHECK(sp.pulls_answered == A_PUSHES + 1 && sp.bytes_in == sw.bytes_in && sp.bytes_out == sw.bytes_out);
        ps_server_destroy(&parted[k].s);
        ps_server_destroy(&plain[k].s);
    }
    // Not the same as doing nothing: the values moved from init by the pushes.
    CHECK(memcmp(whole, init, sizeof init) != 0);
    printf("parts (%s): %d pushes in 6 parts per shard, bit for bit the whole pushes', answered with the push\n",
           optimizer_kind_name(opt), A_PUSHES);
}

// ---- e) BSP gradients announced, so sent in parts; and a commit that is not the push announced ----

static void test_bsp_parts(void *ctx) {
    enum { N = 6001, W = 2, ROUNDS = 3 };
    char err[256];
    static float init[N], g[W][N], a[N], b[N];
    random_values(init, N, 91);
    ps_config_t cfg = config(1, 0, N, W);
    cfg.mode = SYNC_MODE_BSP;
    server_thread_t parted, plain;
    const char *ep_parted, *ep_plain;
    start_shards(ctx, &cfg, init, &parted, &ep_parted);
    start_shards(ctx, &cfg, init, &plain, &ep_plain);
    ps_client_t *cp[W], *cw[W];
    for (uint32_t w = 0; w < W; w++) {
        cp[w] = client_new(ctx, w, &ep_parted, 1, N, err, sizeof err);
        cw[w] = client_new(ctx, w, &ep_plain, 1, N, err, sizeof err);
        CHECK(cp[w] && cw[w]);
        CHECK_OK(ps_client_set_push_part(cp[w], 1000, err, sizeof err), err);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (uint32_t w = 0; w < W; w++) {
            random_values(g[w], N, 100 + (uint64_t)(r * W) + w);
            float *const *frames = ps_client_push_frames(cp[w], err, sizeof err);
            CHECK(frames != NULL);
            CHECK_OK(ps_client_push_announce(cp[w], (uint64_t)r, 1 + w, PS_PUSH_GRADIENT, err, sizeof err), err);
            for (size_t from = 0; from < N; from += 500) {
                size_t len = N - from < 500 ? N - from : 500;
                memcpy(frames[0] + from, g[w] + from, len * sizeof(float));
                ps_client_push_block_written(cp[w], 0, from, len);
            }
            CHECK_OK(ps_client_push_commit(cp[w], (uint64_t)r, 1 + w, 1, err, sizeof err), err);
            frames = ps_client_push_frames(cw[w], err, sizeof err);
            CHECK(frames != NULL);
            memcpy(frames[0], g[w], sizeof g[w]);
            CHECK_OK(ps_client_push_commit(cw[w], (uint64_t)r, 1 + w, 1, err, sizeof err), err);
        }
        for (uint32_t w = 0; w < W; w++) {
            CHECK_OK(ps_client_pull(cp[w], (uint64_t)r + 1, a, NULL, err, sizeof err), err);
            CHECK_OK(ps_client_pull(cw[w], (uint64_t)r + 1, b, NULL, err, sizeof err), err);
            CHECK(memcmp(a, b, sizeof a) == 0);
        }
    }
    // A commit that names another push than the one announced fails, and says so.
    CHECK(ps_client_push_frames(cp[0], err, sizeof err) != NULL);
    CHECK_OK(ps_client_push_announce(cp[0], ROUNDS, 1, PS_PUSH_GRADIENT, err, sizeof err), err);
    err[0] = '\0';
    CHECK(ps_client_push_commit(cp[0], ROUNDS + 1, 1, 1, err, sizeof err) != 0);
    CHECK(strstr(err, "not the one announced") != NULL);
    for (uint32_t w = 0; w < W; w++) {
        CHECK_OK(ps_client_bye(cp[w], err, sizeof err), err);
        CHECK_OK(ps_client_bye(cw[w], err, sizeof err), err);
        ps_client_destroy(&cp[w]);
        ps_client_destroy(&cw[w]);
    }
    server_thread_join(&parted);
    server_thread_join(&plain);
    CHECK(memcmp(ps_server_values(parted.s), ps_server_values(plain.s), sizeof init) == 0);
    CHECK(memcmp(ps_server_values(parted.s), init, sizeof init) != 0);
    ps_stats_t sp, sw;
    ps_server_stats(parted.s, &sp);
    ps_server_stats(plain.s, &sw);
    CHECK(sp.version == ROUNDS && sw.version == ROUNDS && sp.pushes_applied == W * ROUNDS);
    CHECK(sp.parts_taken == W * ROUNDS * 7 && sw.parts_taken == 0);  // 6001 floats: 6 parts of 1000 and one of 1
    ps_server_destroy(&parted.s);
    ps_server_destroy(&plain.s);
    printf("bsp: gradients announced and sent in parts as written sum to the bits of whole ones\n");
}

// ---- f) a BSP round's values in ranges, and gradients that ask for them ----

static void test_bsp_round_in_ranges(void *ctx) {
    enum { N = 600000, W = 2, ROUNDS = 3 };  // 3 ranges of the round: 2^18, 2^18 and the rest
    char err[256];
    static float init[N], g[N], a[N], b[N];
    random_values(init, N, 111);
    ps_config_t cfg = config(1, 0, N, W);
    cfg.mode = SYNC_MODE_BSP;
    server_thread_t ranged, plain;
    const char *ep_ranged, *ep_plain;
    start_shards(ctx, &cfg, init, &ranged, &ep_ranged);
    start_shards(ctx, &cfg, init, &plain, &ep_plain);
    ps_client_t *cr[W], *cw[W];
    for (uint32_t w = 0; w < W; w++) {
        cr[w] = client_new(ctx, w, &ep_ranged, 1, N, err, sizeof err);
        cw[w] = client_new(ctx, w, &ep_plain, 1, N, err, sizeof err);
        CHECK(cr[w] && cw[w]);
    }
    for (int r = 0; r < ROUNDS; r++) {
        // Worker 1 first; worker 0's gradient completes the round and asks for
        // its values with it: its pull is waiting as the sum is applied.
        for (uint32_t i = 0; i < W; i++) {
            uint32_t w = W - 1 - i;
            random_values(g, N, 120 + (uint64_t)(r * W) + w);
            float *const *frames = ps_client_push_frames(cr[w], err, sizeof err);
            CHECK(frames != NULL);
            memcpy(frames[0], g, sizeof g);
            if (w == 0)
                CHECK_OK(ps_client_push_commit_pull(cr[w], (uint64_t)r, 3, 1, a, err, sizeof err), err);
            else
                CHECK_OK(ps_client_push_commit(cr[w], (uint64_t)r, 5, 1, err, sizeof err), err);
            frames = ps_client_push_frames(cw[w], err, sizeof err);
            CHECK(frames != NULL);
            memcpy(frames[0], g, sizeof g);
            CHECK_OK(ps_client_push_commit(cw[w], (uint64_t)r, w == 0 ? 3 : 5, 1, err, sizeof err), err);
        }
        CHECK_OK(ps_client_pull(cw[0], (uint64_t)r + 1, b, NULL, err, sizeof err), err);
        CHECK(memcmp(a, b, sizeof a) == 0);
        uint64_t v;
        ps_client_pulled_versions(cr[0], &v);
        CHECK(v == (uint64_t)r + 1);
        CHECK_OK(ps_client_pull(cr[1], (uint64_t)r + 1, a, NULL, err, sizeof err), err);
        CHECK_OK(ps_client_pull(cw[1], (uint64_t)r + 1, b, NULL, err, sizeof err), err);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    for (uint32_t w = 0; w < W; w++) {
        CHECK_OK(ps_client_bye(cr[w], err, sizeof err), err);
        CHECK_OK(ps_client_bye(cw[w], err, sizeof err), err);
        ps_client_destroy(&cr[w]);
        ps_client_destroy(&cw[w]);
    }
    server_thread_join(&ranged);
    server_thread_join(&plain);
    CHECK(memcmp(ps_server_values(ranged.s), ps_server_values(plain.s), sizeof init) == 0);
    ps_stats_t sr, sw;
    ps_server_stats(ranged.s, &sr);
    ps_server_stats(plain.s, &sw);
    CHECK(sr.version == ROUNDS && sr.pulls_in_ranges == ROUNDS && sw.pulls_in_ranges == 0);
    CHECK(sr.pulls_answered == W * ROUNDS && sr.bytes_out == sw.bytes_out);
    ps_server_destroy(&ranged.s);
    ps_server_destroy(&plain.s);
    printf("bsp: a round's values go out in ranges as its sum is applied, to a gradient that asked for them\n");
}

// ---- b), c) the shard's side, from raw DEALERs ----

enum { B_N = 40, B_PART = 10 };

static void *raw_dealer(void *ctx, const char *endpoint) { return server_test_dealer(ctx, endpoint, TIMEOUT_MS); }

static void raw_send(void *d, wire_header_t h, const float *payload) {
    uint8_t bytes[WIRE_HEADER_SIZE];
    size_t len = h.count * sizeof(float);
    if (payload) h.checksum = wire_checksum(payload, len, 0);
    wire_header_encode(&h, bytes);
    CHECK(zmq_send(d, bytes, sizeof bytes, payload ? ZMQ_SNDMORE : 0) == (int)sizeof bytes);
    if (payload) CHECK(zmq_send(d, payload, len, 0) == (int)len);
}

// The next message: of this type, its values (PARAMS) copied to values + its offset.
static wire_header_t raw_expect(void *d, uint16_t type, float *values) {
    char err[256];
    zmsg_t m;
    int got = zmsg_recv(d, 0, RUN_ID, &m, err, sizeof err);
    if (got != 1 || m.h.type != type) {
        fprintf(stderr, "raw dealer: want %s, got %s\n", msg_type_name(type),
                got == 1  ? msg_type_name(m.h.type)
                : got < 0 ? err
                          : "an invalid message");
        exit(1);
    }
    wire_header_t h = m.h;
    if (type == MSG_TYPE_PARAMS && values) memcpy(values + h.offset, zmsg_payload(&m, 0), h.count * sizeof(float));
    zmsg_close(&m);
    return h;
}

static wire_header_t header(uint16_t type, uint32_t worker) {
    wire_header_t h = zmsg_header(type, RUN_ID);
    h.sender = worker;
    h.shard = 0;
    return h;
}

static void hello(void *d, uint32_t worker, uint32_t nonce) {
    wire_header_t h = header(MSG_TYPE_HELLO, worker);
    h.offset = B_N;
    h.aux = nonce;
    raw_send(d, h, NULL);
    raw_expect(d, MSG_TYPE_WELCOME, NULL);
}

// Part i (of B_PART floats) of worker's push of `clock` with gradient g.
static void send_part(void *d, uint32_t worker, uint64_t clock, const float *g, size_t i, uint16_t flags) {
    wire_header_t h = header(MSG_TYPE_PUSH, worker);
    h.clock = clock;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.offset = i * B_PART;
    h.count = B_PART;
    h.aux = 1;
    h.flags = flags;
    raw_send(d, h, g + i * B_PART);
}

static void send_pull(void *d, uint32_t worker) { raw_send(d, header(MSG_TYPE_PULL, worker), NULL); }

// w -= lr * g over [from, from + n), with the shard's own kernel.
static void apply(float *w, const float *g, size_t from, size_t n) { sgd_update_cpu(n, 0.5f, g + from, w + from); }

static void test_protocol(void *ctx) {
    float init[B_N], g0[B_N], g1[B_N], g2[B_N], want[B_N], got[B_N];
    random_values(init, B_N, 51);
    random_values(g0, B_N, 52);
    random_values(g1, B_N, 53);
    random_values(g2, B_N, 54);
    memcpy(want, init, sizeof want);
    ps_config_t cfg = config(1, 0, B_N, 2);
    server_thread_t st;
    const char *ep;
    start_shards(ctx, &cfg, init, &st, &ep);
    void *d0 = raw_dealer(ctx, ep), *d1 = raw_dealer(ctx, ep);
    hello(d0, 0, 7);
    hello(d1, 1, 8);
    // Part 1 before part 0: dropped. Parts 0 and 1, answered with their ranges.
    send_part(d0, 0, 0, g0, 1, 0);
    send_part(d0, 0, 0, g0, 0, WIRE_FLAG_ECHO);
    send_part(d0, 0, 0, g0, 1, WIRE_FLAG_ECHO);
    apply(want, g0, 0, 2 * B_PART);
    wire_header_t h = raw_expect(d0, MSG_TYPE_PARAMS, got);
    CHECK(h.offset == 0 && h.count == B_PART && h.param_version == 1);
    h = raw_expect(d0, MSG_TYPE_PARAMS, got);
    CHECK(h.offset == B_PART && h.count == B_PART);
    CHECK(memcmp(got, want, 2 * B_PART * sizeof(float)) == 0);
    // Worker 1 pulls (it waits: worker 0's push is half in), then pushes whole:
    // the acknowledgement comes first.
    send_pull(d1, 1);
    wire_header_t w1 = header(MSG_TYPE_PUSH, 1);
    w1.payload_kind = PAYLOAD_KIND_DENSE;
    w1.count = B_N;
    w1.aux = 1;
    raw_send(d1, w1, g1);
    apply(want, g1, 0, B_N);
    raw_expect(d1, MSG_TYPE_PUSH_ACK, NULL);
    // The rest of worker 0's push: its last part's answer, its acknowledgement,
    // and then worker 1's pull, with both pushes in.
    send_part(d0, 0, 0, g0, 2, WIRE_FLAG_ECHO);
    send_part(d0, 0, 0, g0, 3, WIRE_FLAG_ECHO);
    apply(want, g0, 2 * B_PART, 2 * B_PART);
    raw_expect(d0, MSG_TYPE_PARAMS, got);
    h = raw_expect(d0, MSG_TYPE_PARAMS, got);
    CHECK(h.offset == 3 * B_PART && h.param_version == 2);
    h = raw_expect(d0, MSG_TYPE_PUSH_ACK, NULL);
    CHECK(h.offset == 0 && h.param_version == 2);
    CHECK(memcmp(got + 2 * B_PART, want + 2 * B_PART, 2 * B_PART * sizeof(float)) == 0);
    h = raw_expect(d1, MSG_TYPE_PARAMS, got);
    CHECK(h.offset == 0 && h.count == B_N && h.param_version == 2);
    CHECK(memcmp(got, want, sizeof want) == 0);
    // Worker 0 resends every part (its acknowledgement lost, say): skipped, acknowledged once.
    for (size_t i = 0; i < 4; i++) send_part(d0, 0, 0, g0, i, 0);
    h = raw_expect(d0, MSG_TYPE_PUSH_ACK, NULL);
    CHECK(h.offset == 0 && h.param_version == 2);
    // Its next push's first part, then a new client of worker 0: the push ends
    // unfinished (its part stays applied) and worker 1's waiting pull is answered.
    send_part(d0, 0, 1, g2, 0, WIRE_FLAG_ECHO);
    apply(want, g2, 0, B_PART);
    raw_expect(d0, MSG_TYPE_PARAMS, NULL);
    send_pull(d1, 1);
    hello(d0, 0, 9);
    h = raw_expect(d1, MSG_TYPE_PARAMS, got);
    CHECK(h.param_version == 2);
    CHECK(memcmp(got, want, sizeof want) == 0);
    raw_send(d0, header(MSG_TYPE_BYE, 0), NULL);
    raw_expect(d0, MSG_TYPE_BYE_ACK, NULL);
    raw_send(d1, header(MSG_TYPE_BYE, 1), NULL);
    raw_expect(d1, MSG_TYPE_BYE_ACK, NULL);
    server_thread_join(&st);
    ps_stats_t s;
    ps_server_stats(st.s, &s);
    CHECK(s.version == 2 && s.pushes_applied == 2 && s.duplicates == 1);
    CHECK(s.parts_taken == 5 && s.parts_out_of_order == 1 && s.parts_skipped == 4 && s.pushes_unfinished == 1);
    CHECK(memcmp(ps_server_values(st.s), want, sizeof want) == 0);
    ps_server_destroy(&st.s);
    zmq_close(d0);
    zmq_close(d1);
    printf(
        "protocol: out-of-order part dropped, pull held while half applied, resent parts skipped, unfinished push "
        "ended\n");
}

static void test_resume_mid_push(void *ctx) {
    char err[512], dir[] = "/tmp/asgd-parts-XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/shard.ckpt", dir);
    float init[B_N], g[B_N], want[B_N], got[B_N];
    random_values(init, B_N, 61);
    random_values(g, B_N, 62);
    memcpy(want, init, sizeof want);
    apply(want, g, 0, B_N);
    ps_config_t cfg = config(1, 0, B_N, 1);
    server_thread_t st;
    const char *ep;
    start_shards(ctx, &cfg, init, &st, &ep);
    void *d = raw_dealer(ctx, ep);
    hello(d, 0, 7);
    send_part(d, 0, 0, g, 0, WIRE_FLAG_ECHO);
    send_part(d, 0, 0, g, 1, WIRE_FLAG_ECHO);
    raw_expect(d, MSG_TYPE_PARAMS, NULL);
    raw_expect(d, MSG_TYPE_PARAMS, NULL);  // both parts taken
    atomic_store(&st.stop, 1);
    server_thread_join(&st);
    CHECK_OK(ps_server_save(st.s, path, err, sizeof err), err);
    ps_server_destroy(&st.s);
    st.s = ps_server_resume(ctx, &cfg, NULL, path, err, sizeof err);  // at the same endpoint
    if (!st.s) {
        fprintf(stderr, "ps_server_resume: %s\n", err);
        exit(1);
    }
    server_thread_start(&st);
    // A new connection (what was sent on the old one before it was seen to
    // break could be lost: a worker's client would resend it after its retry interval).
    zmq_close(d);
    d = raw_dealer(ctx, ps_server_endpoint(st.s));
    for (size_t i = 0; i < 4; i++) send_part(d, 0, 0, g, i, 0);
    raw_expect(d, MSG_TYPE_PUSH_ACK, NULL);
    send_pull(d, 0);
    wire_header_t h = raw_expect(d, MSG_TYPE_PARAMS, got);
    CHECK(h.param_version == 1);
    CHECK(memcmp(got, want, sizeof want) == 0);  // applied once, not 1.5 times
    raw_send(d, header(MSG_TYPE_BYE, 0), NULL);
    raw_expect(d, MSG_TYPE_BYE_ACK, NULL);
    server_thread_join(&st);
    ps_stats_t s;
    ps_server_stats(st.s, &s);
    CHECK(s.version == 1 && s.pushes_applied == 1 && s.parts_skipped == 2 && s.parts_taken == 2);
    ps_server_destroy(&st.s);
    zmq_close(d);
    CHECK(test_remove_tree(dir) == 0);
    printf("resume: a push half taken before the checkpoint is finished once by the resent parts\n");
}

// ---- g) the client resends every part of an unacknowledged push ----

enum { G_N = 2500, G_PART = 1000, G_PARTS = 3 };

// A shard played by the test on a ROUTER, in a thread: it welcomes the
// worker, answers its push only once every part came a second time (the
// client's retry), then answers its BYE. It records the two batches.
typedef struct fake_shard {
    void *r;
    pthread_t tid;
    wire_header_t first[G_PARTS], again[G_PARTS];
    float payload[2][G_N];
} fake_shard_t;

// The next message: its sender's identity into id, its header, its payload into payload.
static wire_header_t router_recv(void *r, zmq_msg_t *id, float *payload) {
    zmq_msg_t part;
    zmq_msg_init(&part);
    CHECK(zmq_msg_recv(&part, r, 0) >= 0 && zmq_msg_more(&part));
    zmq_msg_copy(id, &part);
    CHECK(zmq_msg_recv(&part, r, 0) == WIRE_HEADER_SIZE);
    wire_header_t h;
    wire_header_decode(zmq_msg_data(&part), &h);
    if (zmq_msg_more(&part)) {
        CHECK(zmq_msg_recv(&part, r, 0) >= 0 && !zmq_msg_more(&part));
        CHECK(h.offset + zmq_msg_size(&part) / sizeof(float) <= G_N);
        memcpy(payload + h.offset, zmq_msg_data(&part), zmq_msg_size(&part));
    }
    zmq_msg_close(&part);
    return h;
}

static void router_send(void *r, zmq_msg_t *id, wire_header_t h) {
    zmq_msg_t to;
    zmq_msg_init(&to);
    zmq_msg_copy(&to, id);
    CHECK(zmq_msg_send(&to, r, ZMQ_SNDMORE) >= 0);
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(&h, bytes);
    CHECK(zmq_send(r, bytes, sizeof bytes, 0) == (int)sizeof bytes);
}

static void *fake_shard_main(void *arg) {
    fake_shard_t *f = arg;
    zmq_msg_t id;
    zmq_msg_init(&id);
    wire_header_t h = router_recv(f->r, &id, NULL);
    CHECK(h.type == MSG_TYPE_HELLO);
    wire_header_t welcome = zmsg_header(MSG_TYPE_WELCOME, RUN_ID);
    welcome.aux = G_N;
    router_send(f->r, &id, welcome);
    for (size_t i = 0; i < G_PARTS; i++) f->first[i] = router_recv(f->r, &id, f->payload[0]);
    for (size_t i = 0; i < G_PARTS; i++) f->again[i] = router_recv(f->r, &id, f->payload[1]);
    wire_header_t ack = zmsg_header(MSG_TYPE_PUSH_ACK, RUN_ID);
    ack.offset = f->first[0].clock;
    router_send(f->r, &id, ack);
    float scratch[G_N];
    do h = router_recv(f->r, &id, scratch);  // more copies may be on their way before the acknowledgement lands
    while (h.type == MSG_TYPE_PUSH);
    CHECK(h.type == MSG_TYPE_BYE);
    router_send(f->r, &id, zmsg_header(MSG_TYPE_BYE_ACK, RUN_ID));
    zmq_msg_close(&id);
    return NULL;
}

static void test_client_resends_parts(void *ctx) {
    char err[256];
    static fake_shard_t f;
    float g[G_N];
    random_values(g, G_N, 131);
    f.r = zmq_socket(ctx, ZMQ_ROUTER);
    int timeout = TIMEOUT_MS;
    CHECK(f.r && zmq_setsockopt(f.r, ZMQ_RCVTIMEO, &timeout, sizeof timeout) == 0);
    CHECK(zmq_bind(f.r, "tcp://127.0.0.1:*") == 0);
    char ep[256];
    size_t len = sizeof ep;
    CHECK(zmq_getsockopt(f.r, ZMQ_LAST_ENDPOINT, ep, &len) == 0);
    CHECK(pthread_create(&f.tid, NULL, fake_shard_main, &f) == 0);
    const char *eps[1] = {ep};
    ps_client_t *c = client_new(ctx, 0, eps, 1, G_N, err, sizeof err);
    if (!c) {
        fprintf(stderr, "ps_client_new: %s\n", err);
        exit(1);
    }
    ps_client_set_retry_ms(c, 10);
    CHECK_OK(ps_client_set_push_part(c, G_PART, err, sizeof err), err);
    float *const *frames = ps_client_push_frames(c, err, sizeof err);
    CHECK(frames != NULL);
    memcpy(frames[0], g, sizeof g);
    CHECK_OK(ps_client_push_commit(c, 0, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);  // answered only after the retry
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_stats_t st;
    ps_client_get_stats(c, &st);
    ps_client_destroy(&c);
    CHECK(pthread_join(f.tid, NULL) == 0);
    zmq_close(f.r);
    CHECK(st.pushes_sent == 1 && st.pushes_acked == 1 && st.retries >= 1);
    for (size_t i = 0; i < G_PARTS; i++) {
        const wire_header_t *a = &f.first[i], *b = &f.again[i];
        CHECK(a->type == MSG_TYPE_PUSH && a->offset == i * G_PART && a->count == (i + 1 < G_PARTS ? G_PART : 500));
        CHECK(b->type == a->type && b->offset == a->offset && b->count == a->count && b->clock == a->clock &&
              b->checksum == a->checksum);
        CHECK(a->checksum == wire_checksum(g + a->offset, a->count * sizeof(float), 0));
    }
    CHECK(memcmp(f.payload[0], g, sizeof g) == 0 && memcmp(f.payload[1], g, sizeof g) == 0);
    printf("client retry: every part of an unacknowledged push sent again, the same bytes and headers\n");
}

// ---- d) replication ----

typedef struct backup_thread {
    ps_replica_t *r;
    ps_server_t *s;
    atomic_int stop;
    pthread_t tid;
    int rc;
    char err[512];
} backup_thread_t;

static void *backup_main(void *arg) {
    backup_thread_t *b = arg;
    b->rc = ps_replica_join(b->r, b->s, b->err, sizeof b->err);
    if (b->rc == 0) b->rc = ps_server_run(b->s, &b->stop, b->err, sizeof b->err);
    return NULL;
}

static ps_replica_t *replica(void *ctx, const char *dir, size_t index) {
    char err[512];
    ps_replica_config_t rc = {.state_dir = dir,
                              .shard = 0,
                              .replica = index,
                              .run_id = RUN_ID,
                              .n_workers = 1,
                              .ack_timeout_ms = TIMEOUT_MS,
                              .join_timeout_ms = TIMEOUT_MS,
                              .quiet = 1};
    ps_replica_t *r = ps_replica_new(ctx, &rc, err, sizeof err);
    if (!r) {
        fprintf(stderr, "ps_replica_new: %s\n", err);
        exit(1);
    }
    return r;
}

static void test_replicated(void *ctx) {
    enum { N = 5000, PART = 1000, PUSHES = 4 };
    char err[512], dir[] = "/tmp/asgd-parts-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static float init[N], g[N], out[N];
    random_values(init, N, 71);
    ps_config_t cfg = config(1, 0, N, 1);
    server_thread_t primary;
    primary.s = ps_server_new(ctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK(primary.s != NULL);
    ps_replica_t *rp = replica(ctx, dir, 0);
    CHECK_OK(ps_replica_lead(rp, primary.s, err, sizeof err), err);
    void *bctx = zmq_ctx_new();
    backup_thread_t b = {.r = replica(bctx, dir, 1)};
    b.s = ps_server_new(bctx, &cfg, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK(b.s != NULL);
    atomic_init(&b.stop, 0);
    CHECK(pthread_create(&b.tid, NULL, backup_main, &b) == 0);
    CHECK_OK(ps_replica_await_backup(rp, primary.s, err, sizeof err), err);
    server_thread_start(&primary);
    const char *ep = ps_server_endpoint(primary.s);
    ps_client_t *c = client_new(ctx, 0, &ep, 1, N, err, sizeof err);
    CHECK(c != NULL);
    CHECK_OK(ps_client_set_push_part(c, PART, err, sizeof err), err);
    for (int r = 0; r < PUSHES; r++) {
        random_values(g, N, 80 + (uint64_t)r);
        float *const *frames = ps_client_push_frames(c, err, sizeof err);
        CHECK(frames != NULL);
        memcpy(frames[0], g, sizeof g);
        CHECK_OK(ps_client_push_commit_pull(c, (uint64_t)r, 1, 0, out, err, sizeof err), err);
    }
    CHECK_OK(ps_client_bye(c, err, sizeof err), err);
    ps_client_destroy(&c);
    server_thread_join(&primary);
    atomic_store(&b.stop, 1);
    CHECK(pthread_join(b.tid, NULL) == 0);
    CHECK_OK(b.rc, b.err);
    CHECK(memcmp(ps_server_values(primary.s), out, sizeof out) == 0);
    CHECK(memcmp(ps_server_values(b.s), out, sizeof out) == 0);
    ps_stats_t sb;
    ps_server_stats(b.s, &sb);
    CHECK(sb.version == PUSHES && sb.parts_taken == PUSHES * (N / PART) && sb.pulls_answered == 0);
    ps_replica_stats_t rs;
    ps_replica_stats(rp, &rs);
    CHECK(rs.forwarded == 1 + PUSHES + 1 && rs.dropped == 0);  // HELLO, each push's last part, BYE
    ps_replica_destroy(&rp);
    ps_replica_destroy(&b.r);
    ps_server_destroy(&primary.s);
    ps_server_destroy(&b.s);
    zmq_ctx_term(bctx);
    CHECK(test_remove_tree(dir) == 0);
    printf("replicated: the backup holds the primary's bits after %d pushes in %d parts\n", PUSHES, N / PART);
}

int main(void) {
    void *ctx = zmq_ctx_new();
    CHECK(ctx != NULL);
    test_parts_match_whole(ctx, OPTIMIZER_KIND_SGD);
    test_parts_match_whole(ctx, OPTIMIZER_KIND_ADAGRAD);
    test_bsp_parts(ctx);
    test_bsp_round_in_ranges(ctx);
    test_protocol(ctx);
    test_resume_mid_push(ctx);
    test_replicated(ctx);
    test_client_resends_parts(ctx);
    zmq_ctx_term(ctx);
    return 0;
}
