// Parameter-server throughput (net/ps_server.h, net/ps_client.h) against raw
// libzmq moving the same bytes over the same transport in the same run.
//
// PS: one ps_server per shard (ASP, SGD), each in its own pthread with its own
// zmq context (as if a process of its own) on tcp://127.0.0.1:*, and one
// ps_client. A round is a dense push of the whole model (ps_client_push_frames,
// announced with ps_client_push_announce so that each 1 MiB part goes out as
// soon as it is written, filled with memcpy from a gradient buffer as a worker
// writes its update) that asks for the model back with it
// (ps_client_push_commit_pull): the shard answers each part with its range's
// new values. --separate-pull makes it ps_client_push_commit then
// ps_client_pull, --no-announce sends the parts at the commit. The figure is
// payload bytes moved (push + pull) per second of the median round.
//
// Raw: the same number of ROUTER echo peers, each in its own pthread and
// context, and one DEALER per peer on the client; a round sends each peer its
// part of the model and waits for it to come back (one request outstanding per
// peer, the PS's pattern). Two variants: the ordinary API (zmq_send and
// zmq_recv, which copy the bytes in and out) and the best case (zero-copy
// zmq_msg_init_data sends, replies read in place). Peers echo the received
// message itself (no copy).
//
// Then, for each size on one shard, where the PS's time goes: each extra step
// timed alone (wire_checksum, memcpy, sgd_update_cpu, a fresh message buffer),
// and the PS's exact message pattern replayed over raw libzmq with its work
// switched on and off (checksums, copies, update), to confirm the breakdown,
// and a design not built: the push cut into --pipe-blocks range messages, each
// answered at once with its range's updated values, so that the server applies
// one range while the next arrives. Not part of the test suite.
//
// BSP rounds: --bsp-workers (2) workers, each in its own pthread and context,
// each round computing for --compute-ms (a busy loop of dependent float
// multiply-adds, calibrated at the start to take that long on one idle core)
// and then pushing its gradient (flag SUM) and asking for the round's model
// with it (ps_client_push_commit_pull; --separate-pull: a pull after the
// push) from ps_servers under BSP, which answer in ranges as the round's sum
// is applied: a round is over for a worker when every worker's gradient is
// applied. --bsp-parts announces the gradients, so they go in parts. Against it, in the same run: the same workers each
// computing as long and then sending the same bytes to echo peers (one
// ROUTER per shard, shared by the workers, as the shards are) with
// zmq_send/zmq_recv. The figure is worker 0's median round. A third variant
// holds the echoes until every worker's bytes are in (BSP's barrier without
// a server's work), to tell the barrier's cost from the server's.
//
// Each figure is the best of --trials medians (a shared machine's other
// tenants only ever slow a trial down), the trials interleaved across variants.
//
//   bench_ps [--sizes-m 1,4] [--shards 1,2] [--warmup 3] [--rounds 20] [--trials 5] [--io-threads K] [--no-profile] [--replicas 2]
//            [--pipe-blocks 8] [--part-floats N] [--separate-pull] [--no-announce] [--bsp-parts]
//            [--bsp-workers 2] [--compute-ms 5] [--no-bsp] [--only ps|raw]
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench/bench_support.h"
#include "kernels/foundation/partition.h"
#include "kernels/update.h"
#include "net/ps_client.h"
#include "net/ps_server.h"
#include "net/ps_replica.h"
#include "net/wire.h"

#define RUN 0xbe9c500000000001ull
#define MAX_LIST 8
#define MAX_SHARDS 8
#define ERR_LEN 512
#define PUSH_BLOCK 2048  // floats per block a worker writes (as engine/replica/replica.c does)
#define TIMEOUT_MS 60000
// Gradient entries and lr chosen so that every value the server computes is
// exact in float: after r pushes each parameter is -r * GRAD_VALUE.
#define GRAD_VALUE (1.0f / 1024.0f)

enum { ONLY_PS = 1, ONLY_RAW = 2 };

typedef struct opts {
    size_t mfloats[MAX_LIST], n_sizes;  // model sizes in units of 2^20 floats
    size_t shards[MAX_LIST], n_shards;
    int warmup, rounds;
    int trials;  // each figure is the best of this many medians, trials interleaved across variants
    int io_threads;
    int profile;
    int bsp;  // the BSP round rows
    size_t bsp_workers;
    double compute_ms;
    int replicas;  // 2: also each shard as a primary and a backup (--server-replicas 2)
    size_t pipe_blocks;  // the pipelined design's range messages per push
    long part_floats;  // ps_client_set_push_part (-1: the client's default)
    int separate_pull;  // the PS round as push, then pull (not ps_client_push_commit_pull)
    int announce;  // pushes announced (ps_client_push_announce): parts go out as they are written
    int bsp_parts;  // BSP gradients announced too, so sent in parts as they are written
    int only;  // ONLY_PS or ONLY_RAW: run that variant alone (for perf record); 0: both
    char state_dir[64];
} opts_t;

// Keeps checksums that only feed the timing from being optimised away. The
// echo threads and the client both add to it: an atomic, so that is no race.
static _Atomic uint32_t sink;
static void keep(uint32_t v) { atomic_fetch_add_explicit(&sink, v, memory_order_relaxed); }

static double fastest(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_ps: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

// What the timed rounds cost: the median round's wall time, and per round the
// whole process's CPU time (every thread: client, servers, libzmq's I/O
// threads) and minor page faults, which a busy shared machine disturbs less.
typedef struct round_cost {
    double sec;  // median wall time of a round
    double user_s, sys_s;  // CPU seconds per round, all threads
    double faults;  // minor page faults per round
} round_cost_t;

typedef struct meter {
    struct rusage ru;
} meter_t;

static void meter_start(meter_t *m) { getrusage(RUSAGE_SELF, &m->ru); }

static void meter_stop(const meter_t *m, int rounds, double *times, round_cost_t *out) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double u = (double)(ru.ru_utime.tv_sec - m->ru.ru_utime.tv_sec) +
               1e-6 * (double)(ru.ru_utime.tv_usec - m->ru.ru_utime.tv_usec);
    double k = (double)(ru.ru_stime.tv_sec - m->ru.ru_stime.tv_sec) +
               1e-6 * (double)(ru.ru_stime.tv_usec - m->ru.ru_stime.tv_usec);
    out->user_s = u / rounds;
    out->sys_s = k / rounds;
    out->faults = (double)(ru.ru_minflt - m->ru.ru_minflt) / rounds;
    out->sec = bench_median(times, rounds);
}

// Keeps, field by field, the least disturbed of several trials.
static void keep_best(round_cost_t *best, const round_cost_t *c, int first) {
    if (first) {
        *best = *c;
        return;
    }
    if (c->sec < best->sec) best->sec = c->sec;
    if (c->user_s < best->user_s) best->user_s = c->user_s;
    if (c->sys_s < best->sys_s) best->sys_s = c->sys_s;
    if (c->faults < best->faults) best->faults = c->faults;
}

#define ZCHECK(expr)                                                                                               \
    do {                                                                                                           \
        if ((expr) < 0) {                                                                                          \
            fprintf(stderr, "bench_ps: %s failed at %s:%d: %s\n", #expr, __FILE__, __LINE__, zmq_strerror(errno)); \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static void *new_ctx(int io_threads) {
    void *ctx = zmq_ctx_new();
    if (!ctx || zmq_ctx_set(ctx, ZMQ_IO_THREADS, io_threads) != 0) die("zmq_ctx_new", zmq_strerror(errno));
    return ctx;
}

static void *new_socket(void *ctx, int type) {
    void *s = zmq_socket(ctx, type);
    if (!s) die("zmq_socket", zmq_strerror(errno));
    int zero = 0;
    ZCHECK(zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero));
    ZCHECK(zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero));
    ZCHECK(zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero));
    return s;
}

// ---- the parameter server ------------------------------------------------------

typedef struct ps_thread {
    void *ctx;
    ps_server_t *server;
    ps_replica_t *replica;  // NULL: not replicated
    atomic_int stop;
    int rc;
    char err[ERR_LEN];
    pthread_t thread;
} ps_thread_t;

// A shard on a context of its own (each shard, as in a real run, its own
// process and I/O thread), not yet serving.
static void shard_thread_init(ps_thread_t *t, const ps_config_t *c, const float *init, const opts_t *o) {
    char err[ERR_LEN];
    t->ctx = new_ctx(o->io_threads);
    t->server = ps_server_new(t->ctx, c, "tcp://127.0.0.1:*", init, err, sizeof err);
    if (!t->server) die("ps_server_new", err);
    t->replica = NULL;
    atomic_init(&t->stop, 0);
    t->rc = 0;
    t->err[0] = '\0';
}

static void *ps_thread_main(void *arg) {
    ps_thread_t *p = arg;
    p->rc = ps_server_run(p->server, &p->stop, p->err, sizeof p->err);
    return NULL;
}

// A backup: joins its primary (copying its state), then serves.
static void *backup_thread_main(void *arg) {
    ps_thread_t *p = arg;
    p->rc = ps_replica_join(p->replica, p->server, p->err, sizeof p->err);
    if (p->rc == 0) p->rc = ps_server_run(p->server, &p->stop, p->err, sizeof p->err);
    return NULL;
}

static ps_replica_t *bench_replica(void *ctx, const opts_t *o, size_t shard, size_t replica) {
    char err[ERR_LEN];
    ps_replica_config_t rc = {.state_dir = o->state_dir,
                              .shard = shard,
                              .replica = replica,
                              .run_id = RUN,
                              .n_workers = 1,
                              .ack_timeout_ms = TIMEOUT_MS,
                              .join_timeout_ms = TIMEOUT_MS,
                              .quiet = 1};
    ps_replica_t *r = ps_replica_new(ctx, &rc, err, sizeof err);
    if (!r) die("ps_replica_new", err);
    return r;
}

// Cost of a push+pull round of an n-float model on n_shards shards, each
// with `replicas` replicas (1, or 2: a primary and a backup).
static round_cost_t run_ps(size_t n, size_t n_shards, const opts_t *o, int replicas) {
    ps_thread_t bk[MAX_SHARDS];
    char err[ERR_LEN] = "";
    ps_thread_t th[MAX_SHARDS];
    const char *endpoints[MAX_SHARDS];
    float *zeros = calloc(n, sizeof *zeros), *grad = malloc(n * sizeof *grad), *out = malloc(n * sizeof *out);
    double *t = calloc((size_t)o->rounds, sizeof *t);
    if (!zeros || !grad || !out || !t) die("out of memory", NULL);
    for (size_t i = 0; i < n; i++) grad[i] = GRAD_VALUE;
    for (size_t k = 0; k < n_shards; k++) {
        // No memory guard: the bench's clients and echo peers share the process.
        ps_config_t c = {.run_id = RUN,
                         .shard = k,
                         .n_shards = n_shards,
                         .n_params = n,
                         .n_workers = 1,
                         .mode = SYNC_MODE_ASP,
                         .optimizer = OPTIMIZER_KIND_SGD,
                         .lr = 1.0f,
                         .memory_allowance = SIZE_MAX,
                         .quiet = 1};
        size_t begin, end;
        shard_range(n, n_shards, k, &begin, &end);
        shard_thread_init(&th[k], &c, zeros + begin, o);
        endpoints[k] = ps_server_endpoint(th[k].server);
        if (replicas > 1) {
            th[k].replica = bench_replica(th[k].ctx, o, k, 0);
            if (ps_replica_lead(th[k].replica, th[k].server, err, sizeof err) != 0) die("ps_replica_lead", err);
            shard_thread_init(&bk[k], &c, zeros + begin, o);
            bk[k].replica = bench_replica(bk[k].ctx, o, k, 1);
            if (pthread_create(&bk[k].thread, NULL, backup_thread_main, &bk[k]) != 0)
                die("pthread_create", strerror(errno));
            if (ps_replica_await_backup(th[k].replica, th[k].server, err, sizeof err) != 0)
                die("ps_replica_await_backup", err);
        }
        if (pthread_create(&th[k].thread, NULL, ps_thread_main, &th[k]) != 0) die("pthread_create", strerror(errno));
    }
    void *ctx = new_ctx(o->io_threads);
    ps_client_t *cl = ps_client_new(ctx, RUN, 0, endpoints, n_shards, n, 0, TIMEOUT_MS, err, sizeof err);
    if (!cl) die("ps_client_new", err);
    if (o->part_floats >= 0 && ps_client_set_push_part(cl, (size_t)o->part_floats, err, sizeof err) != 0)
        die("ps_client_set_push_part", err);
    size_t begin[MAX_SHARDS], end[MAX_SHARDS];
    for (size_t k = 0; k < n_shards; k++) shard_range(n, n_shards, k, &begin[k], &end[k]);
    int total = o->warmup + o->rounds;
    meter_t meter;
    for (int r = 0; r < total; r++) {
        if (r == o->warmup) meter_start(&meter);
        double t0 = bench_now_s();
        float *const *frames = ps_client_push_frames(cl, err, sizeof err);
        if (!frames) die("ps_client_push_frames", err);
        ps_push_kind_t kind = o->separate_pull ? PS_PUSH_UPDATE : PS_PUSH_UPDATE_PULL;
        if (o->announce && ps_client_push_announce(cl, (uint64_t)r, 1, kind, err, sizeof err) != 0)
            die("ps_client_push_announce", err);
        // Written block by block as a worker writes its update, each block
        // handed to the checksum while still in cache.
        for (size_t k = 0; k < n_shards; k++) {
            for (size_t from = 0; from < end[k] - begin[k]; from += PUSH_BLOCK) {
                size_t len = end[k] - begin[k] - from < PUSH_BLOCK ? end[k] - begin[k] - from : PUSH_BLOCK;
                memcpy(frames[k] + from, grad + begin[k] + from, len * sizeof(float));
                ps_client_push_block_written(cl, k, from, len);
            }
        }
        if (o->separate_pull) {
            if (ps_client_push_commit(cl, (uint64_t)r, 1, 0, err, sizeof err) != 0) die("ps_client_push_commit", err);
            if (ps_client_pull(cl, 0, out, NULL, err, sizeof err) != 0) die("ps_client_pull", err);
        } else if (ps_client_push_commit_pull(cl, (uint64_t)r, 1, 0, out, err, sizeof err) != 0) {
            die("ps_client_push_commit_pull", err);
        }
        if (r >= o->warmup) t[r - o->warmup] = bench_now_s() - t0;
    }
    round_cost_t cost;
    meter_stop(&meter, o->rounds, t, &cost);
    // Every push was applied before the pull behind it was answered.
    float want = -(float)total * GRAD_VALUE;
    for (size_t i = 0; i < n; i++)
        if (out[i] != want) die("the last pull did not return every push applied", NULL);
    if (ps_client_bye(cl, err, sizeof err) != 0) die("ps_client_bye", err);
    ps_client_destroy(&cl);
    for (size_t k = 0; k < n_shards; k++) {
        pthread_join(th[k].thread, NULL);
        if (th[k].rc != 0) die("ps_server_run", th[k].err);
        if (replicas > 1) {
            if (ps_replica_finish(th[k].replica, err, sizeof err) != 0) die("ps_replica_finish", err);
            pthread_join(bk[k].thread, NULL);
            if (bk[k].rc != 0) die("backup", bk[k].err);
            // The backup applied every push too, to the bit.
            size_t b, e;
            ps_server_range(th[k].server, &b, &e);
            if (memcmp(ps_server_values(th[k].server), ps_server_values(bk[k].server), (e - b) * sizeof(float)) != 0)
                die("the backup's values differ from the primary's", NULL);
            ps_server_destroy(&bk[k].server);
            ps_replica_destroy(&bk[k].replica);
            ps_replica_destroy(&th[k].replica);
            zmq_ctx_term(bk[k].ctx);
        }
        ps_server_destroy(&th[k].server);
        zmq_ctx_term(th[k].ctx);
    }
    zmq_ctx_term(ctx);
    free(zeros), free(grad), free(out), free(t);
    return cost;
}

// ---- raw libzmq: echo peers and the PS's message pattern replayed ----------------

// What a round does besides moving bytes. RAW_COPY and RAW_ZC are plain echoes;
// EMUL replays the PS's messages with the WORK_* steps that are switched on.
typedef enum raw_kind {
    RAW_KIND_COPY,  // zmq_send / zmq_recv: one copy in, one copy out
    RAW_KIND_ZC,  // zmq_msg_init_data sends, replies read in place
    RAW_KIND_EMUL,  // PS messages: [header, payload] push, ack, [header] pull, [header, payload] params
    RAW_KIND_PIPE,  // a design not built: the push cut into --pipe-blocks range messages [header, payload],
    // each answered at once with its range's updated values [header, payload]
} raw_kind_t;

#define WORK_CSUM 0x1u  // a checksum over each payload by its sender and its receiver (4 per round)
#define WORK_CLIENT_COPY 0x2u  // client fills a fresh push frame by memcpy, copies the params out
#define WORK_SERVER_COPY 0x4u  // server copies its shard into a fresh reply frame
#define WORK_UPDATE 0x8u  // server applies sgd_update_cpu with the pushed values
#define WORK_ALL (WORK_CSUM | WORK_CLIENT_COPY | WORK_SERVER_COPY | WORK_UPDATE)

#define MAX_WORKERS 8

typedef struct echo_peer {
    void *ctx, *sock;
    char endpoint[256];
    raw_kind_t kind;
    unsigned work;
    float *shard;  // (n) EMUL: the values the peer keeps and sends back
    size_t n;
    size_t barrier;  // COPY: echo once this many messages are held (BSP's barrier), all at once; 0/1: each at once
    zmq_msg_t held_id[MAX_WORKERS], held[MAX_WORKERS];
    size_t n_held;
    pthread_t thread;
} echo_peer_t;

static void free_nothing(void *data, void *hint) { (void)data, (void)hint; }

static int recv_part(void *sock, zmq_msg_t *m) {
    int rc;
    do rc = zmq_msg_recv(m, sock, 0);
    while (rc < 0 && errno == EINTR);
    return rc;
}

static int has_more(void *sock) {
    int more = 0;
    size_t len = sizeof more;
    ZCHECK(zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len));
    return more;
}

static void send_part(void *sock, zmq_msg_t *m, int flags) {
    int rc;
    do rc = zmq_msg_send(m, sock, flags);
    while (rc < 0 && errno == EINTR);
    ZCHECK(rc);
}

static void send_bytes(void *sock, const void *p, size_t n, int flags) {
    int rc;
    do rc = zmq_send(sock, p, n, flags);
    while (rc < 0 && errno == EINTR);
    ZCHECK(rc);
}

// A message of n bytes from p: copied into a fresh buffer, or pointing at p.
static void msg_from(zmq_msg_t *m, const void *p, size_t n, int copy) {
    if (copy) {
        ZCHECK(zmq_msg_init_size(m, n));
        memcpy(zmq_msg_data(m), p, n);
    } else {
        ZCHECK(zmq_msg_init_data(m, (void *)p, n, free_nothing, NULL));
    }
}

// BSP's barrier with no server work: the messages are held until one from
// every worker is in, then all echoed.
static void hold(echo_peer_t *e, zmq_msg_t *id, zmq_msg_t *f0) {
    zmq_msg_init(&e->held_id[e->n_held]);
    zmq_msg_init(&e->held[e->n_held]);
    zmq_msg_move(&e->held_id[e->n_held], id);
    zmq_msg_move(&e->held[e->n_held], f0);
    zmq_msg_close(id);
    zmq_msg_close(f0);
    if (++e->n_held < e->barrier) return;
    for (size_t i = 0; i < e->n_held; i++) {
        send_part(e->sock, &e->held_id[i], ZMQ_SNDMORE);
        send_part(e->sock, &e->held[i], 0);
    }
    e->n_held = 0;
}

// Serves until a message with an empty first frame arrives.
static void *echo_main(void *arg) {
    echo_peer_t *e = arg;
    uint8_t header[WIRE_HEADER_SIZE] = {0};
    for (;;) {
        zmq_msg_t id, f0, f1;
        zmq_msg_init(&id);
        zmq_msg_init(&f0);
        ZCHECK(recv_part(e->sock, &id));
        ZCHECK(recv_part(e->sock, &f0));
        if (zmq_msg_size(&f0) == 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&f0);
            break;
        }
        if (e->kind == RAW_KIND_PIPE) {  // a range push [header: first value, count], answered with the range
            zmq_msg_init(&f1);
            ZCHECK(recv_part(e->sock, &f1));
            uint64_t range[2];
            memcpy(range, zmq_msg_data(&f0), sizeof range);
            if (zmq_msg_size(&f1) != range[1] * sizeof(float) || range[0] + range[1] > e->n)
                die("pipelined push of the wrong range", NULL);
            if (e->work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&f1), zmq_msg_size(&f1), 0));
            float *at = e->shard + range[0];
            if (e->work & WORK_UPDATE) sgd_update_cpu(range[1], 1.0f, zmq_msg_data(&f1), at);
            zmq_msg_close(&f1);
            zmq_msg_t reply;
            msg_from(&reply, at, range[1] * sizeof(float), (e->work & WORK_SERVER_COPY) != 0);
            if (e->work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&reply), zmq_msg_size(&reply), 0));
            send_part(e->sock, &id, ZMQ_SNDMORE);
            send_part(e->sock, &f0, ZMQ_SNDMORE);
            send_part(e->sock, &reply, 0);
            continue;
        }
        if (e->kind != RAW_KIND_EMUL) {  // echo the message itself
            if (e->barrier > 1) {
                hold(e, &id, &f0);
                continue;
            }
            send_part(e->sock, &id, ZMQ_SNDMORE);
            send_part(e->sock, &f0, 0);
            continue;
        }
        if (has_more(e->sock)) {  // a push: [header, payload]; answered with an ack
            zmq_msg_init(&f1);
            ZCHECK(recv_part(e->sock, &f1));
            if (zmq_msg_size(&f1) != e->n * sizeof(float)) die("emulated push of the wrong size", NULL);
            if (e->work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&f1), zmq_msg_size(&f1), 0));
            if (e->work & WORK_UPDATE) sgd_update_cpu(e->n, 1.0f, zmq_msg_data(&f1), e->shard);
            zmq_msg_close(&f1);
            zmq_msg_close(&f0);
            send_part(e->sock, &id, ZMQ_SNDMORE);
            send_bytes(e->sock, header, sizeof header, 0);
        } else {  // a pull: [header]; answered with [header, shard]
            zmq_msg_close(&f0);
            zmq_msg_t reply;
            msg_from(&reply, e->shard, e->n * sizeof(float), (e->work & WORK_SERVER_COPY) != 0);
            if (e->work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&reply), zmq_msg_size(&reply), 0));
            send_part(e->sock, &id, ZMQ_SNDMORE);
            send_bytes(e->sock, header, sizeof header, ZMQ_SNDMORE);
            send_part(e->sock, &reply, 0);
        }
    }
    return NULL;
}

// Cost of a round moving an n-float model to and from n_peers peers.
static round_cost_t run_raw(size_t n, size_t n_peers, raw_kind_t kind, unsigned work, const opts_t *o) {
    echo_peer_t peers[MAX_SHARDS];
    void *ctx = new_ctx(o->io_threads);
    void *socks[MAX_SHARDS];
    size_t begin[MAX_SHARDS], end[MAX_SHARDS];
    float *grad = malloc(n * sizeof *grad), *out = malloc(n * sizeof *out);
    double *t = calloc((size_t)o->rounds, sizeof *t);
    if (!grad || !out || !t) die("out of memory", NULL);
    for (size_t i = 0; i < n; i++) grad[i] = GRAD_VALUE;
    for (size_t k = 0; k < n_peers; k++) {
        echo_peer_t *e = &peers[k];
        shard_range(n, n_peers, k, &begin[k], &end[k]);
        e->kind = kind;
        e->work = work;
        e->barrier = 0;
        e->n_held = 0;
        e->n = end[k] - begin[k];
        e->shard = calloc(e->n ? e->n : 1, sizeof *e->shard);
        if (!e->shard) die("out of memory", NULL);
        e->ctx = new_ctx(o->io_threads);
        e->sock = new_socket(e->ctx, ZMQ_ROUTER);
        ZCHECK(zmq_bind(e->sock, "tcp://127.0.0.1:*"));
        size_t len = sizeof e->endpoint;
        ZCHECK(zmq_getsockopt(e->sock, ZMQ_LAST_ENDPOINT, e->endpoint, &len));
        socks[k] = new_socket(ctx, ZMQ_DEALER);
        ZCHECK(zmq_connect(socks[k], e->endpoint));
        if (pthread_create(&e->thread, NULL, echo_main, e) != 0) die("pthread_create", strerror(errno));
    }
    uint8_t header[WIRE_HEADER_SIZE] = {0};
    int total = o->warmup + o->rounds;
    meter_t meter;
    for (int r = 0; r < total; r++) {
        if (r == o->warmup) meter_start(&meter);
        double t0 = bench_now_s();
        for (size_t k = 0; k < n_peers; k++) {
            const float *p = grad + begin[k];
            size_t bytes = (end[k] - begin[k]) * sizeof(float);
            if (kind == RAW_KIND_COPY) {
                send_bytes(socks[k], p, bytes, 0);
            } else if (kind == RAW_KIND_ZC) {
                zmq_msg_t m;
                msg_from(&m, p, bytes, 0);
                send_part(socks[k], &m, 0);
            } else if (kind == RAW_KIND_PIPE) {
                size_t len = end[k] - begin[k];
                for (size_t b = 0; b < o->pipe_blocks; b++) {
                    uint64_t range[WIRE_HEADER_SIZE / sizeof(uint64_t)] = {0};
                    size_t lo, hi;
                    shard_range(len, o->pipe_blocks, b, &lo, &hi);
                    range[0] = lo, range[1] = hi - lo;
                    zmq_msg_t m;
                    msg_from(&m, p + lo, (hi - lo) * sizeof(float), (work & WORK_CLIENT_COPY) != 0);
                    if (work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&m), zmq_msg_size(&m), 0));
                    send_bytes(socks[k], range, sizeof range, ZMQ_SNDMORE);
                    send_part(socks[k], &m, 0);
                }
            } else {
                zmq_msg_t m;
                msg_from(&m, p, bytes, (work & WORK_CLIENT_COPY) != 0);
                if (work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&m), bytes, 0));
                send_bytes(socks[k], header, sizeof header, ZMQ_SNDMORE);
                send_part(socks[k], &m, 0);
                send_bytes(socks[k], header, sizeof header, 0);  // the pull
            }
        }
        for (size_t k = 0; k < n_peers; k++) {
            float *p = out + begin[k];
            size_t bytes = (end[k] - begin[k]) * sizeof(float);
            if (kind == RAW_KIND_COPY) {
                int got;
                do got = zmq_recv(socks[k], p, bytes, 0);
                while (got < 0 && errno == EINTR);
                ZCHECK(got);
                if ((size_t)got != bytes) die("echo of the wrong size", NULL);
                continue;
            }
            zmq_msg_t m;
            if (kind == RAW_KIND_PIPE) {  // each range's [header, values], in order
                for (size_t b = 0; b < o->pipe_blocks; b++) {
                    uint64_t range[2];
                    zmq_msg_init(&m);
                    ZCHECK(recv_part(socks[k], &m));
                    memcpy(range, zmq_msg_data(&m), sizeof range);
                    zmq_msg_close(&m);
                    zmq_msg_init(&m);
                    ZCHECK(recv_part(socks[k], &m));
                    if (zmq_msg_size(&m) != range[1] * sizeof(float)) die("pipelined reply of the wrong size", NULL);
                    if (work & WORK_CSUM) keep(wire_checksum(zmq_msg_data(&m), zmq_msg_size(&m), 0));
                    if (work & WORK_CLIENT_COPY) memcpy(p + range[0], zmq_msg_data(&m), zmq_msg_size(&m));
                    zmq_msg_close(&m);
                }
                continue;
            }
            if (kind == RAW_KIND_EMUL) {  // the ack, then the params' header
                for (int part = 0; part < 2; part++) {
                    zmq_msg_init(&m);
                    ZCHECK(recv_part(socks[k], &m));
                    zmq_msg_close(&m);
                }
            }
            zmq_msg_init(&m);
            ZCHECK(recv_part(socks[k], &m));
            if (zmq_msg_size(&m) != bytes) die("echo of the wrong size", NULL);
            if (kind == RAW_KIND_EMUL && (work & WORK_CSUM)) keep(wire_checksum(zmq_msg_data(&m), bytes, 0));
            if (kind == RAW_KIND_EMUL && (work & WORK_CLIENT_COPY))
                memcpy(p, zmq_msg_data(&m), bytes);
            else
                keep(((const uint8_t *)zmq_msg_data(&m))[bytes - 1]);  // read in place
            zmq_msg_close(&m);
        }
        if (r >= o->warmup) t[r - o->warmup] = bench_now_s() - t0;
    }
    round_cost_t cost;
    meter_stop(&meter, o->rounds, t, &cost);
    if (kind == RAW_KIND_COPY)
        for (size_t i = 0; i < n; i++)
            if (out[i] != GRAD_VALUE) die("the echo changed the bytes", NULL);
    for (size_t k = 0; k < n_peers; k++) {
        send_bytes(socks[k], "", 0, 0);  // stop
        pthread_join(peers[k].thread, NULL);
        zmq_close(socks[k]);
        zmq_close(peers[k].sock);
        zmq_ctx_term(peers[k].ctx);
        free(peers[k].shard);
    }
    zmq_ctx_term(ctx);
    free(grad), free(out), free(t);
    return cost;
}

// ---- BSP rounds: compute, then push + pull under BSP, against compute + raw bytes ----

// The stand-in for a minibatch's gradient: iters dependent multiply-adds
// (a chain no core runs faster than one per few cycles, and no compiler removes).
static float busy(long iters) {
    float x = 1.0f;
    for (long i = 0; i < iters; i++) x = x * 0.999999f + 1e-7f;
    return x;
}

// Iterations of busy() that take ms milliseconds here (the fastest of 5 timings).
static long calibrate(double ms) {
    const long probe = 2000000;
    double t[5];
    for (int i = 0; i < 5; i++) {
        double t0 = bench_now_s();
        keep((uint32_t)busy(probe));
        t[i] = bench_now_s() - t0;
    }
    return (long)((double)probe * ms * 1e-3 / fastest(t, 5));
}

typedef struct bsp_worker {
    uint32_t id;
    int raw;  // compute + zmq_send/zmq_recv to echo peers, not the PS
    size_t n, n_shards;
    const char *const *endpoints;
    long iters;
    const opts_t *o;
    double *t;  // (rounds) each timed round
    float last;  // PS: a value of the last model pulled (every round applied: checked)
    pthread_t thread;
} bsp_worker_t;

static void *bsp_worker_main(void *arg) {
    bsp_worker_t *w = arg;
    char err[ERR_LEN] = "";
    void *ctx = new_ctx(w->o->io_threads);
    size_t begin[MAX_SHARDS], end[MAX_SHARDS];
    for (size_t k = 0; k < w->n_shards; k++) shard_range(w->n, w->n_shards, k, &begin[k], &end[k]);
    float *grad = malloc(w->n * sizeof *grad), *out = malloc(w->n * sizeof *out);
    if (!grad || !out) die("out of memory", NULL);
    for (size_t i = 0; i < w->n; i++) grad[i] = GRAD_VALUE;
    ps_client_t *cl = NULL;
    void *socks[MAX_SHARDS];
    if (w->raw) {
        for (size_t k = 0; k < w->n_shards; k++) {
            socks[k] = new_socket(ctx, ZMQ_DEALER);
            ZCHECK(zmq_connect(socks[k], w->endpoints[k]));
        }
    } else {
        cl = ps_client_new(ctx, RUN, w->id, w->endpoints, w->n_shards, w->n, 0, TIMEOUT_MS, err, sizeof err);
        if (!cl) die("ps_client_new", err);
        if (w->o->part_floats >= 0 && ps_client_set_push_part(cl, (size_t)w->o->part_floats, err, sizeof err) != 0)
            die("ps_client_set_push_part", err);
    }
    int total = w->o->warmup + w->o->rounds;
    for (int r = 0; r < total; r++) {
        double t0 = bench_now_s();
        keep((uint32_t)busy(w->iters));
        if (w->raw) {
            for (size_t k = 0; k < w->n_shards; k++)
                send_bytes(socks[k], grad + begin[k], (end[k] - begin[k]) * sizeof(float), 0);
            for (size_t k = 0; k < w->n_shards; k++) {
                size_t bytes = (end[k] - begin[k]) * sizeof(float);
                int got;
                do got = zmq_recv(socks[k], out + begin[k], bytes, 0);
                while (got < 0 && errno == EINTR);
                ZCHECK(got);
                if ((size_t)got != bytes) die("echo of the wrong size", NULL);
            }
        } else {
            float *const *frames = ps_client_push_frames(cl, err, sizeof err);
            if (!frames) die("ps_client_push_frames", err);
            ps_push_kind_t kind = w->o->separate_pull ? PS_PUSH_GRADIENT : PS_PUSH_GRADIENT_PULL;
            if (w->o->bsp_parts && ps_client_push_announce(cl, (uint64_t)r, 1, kind, err, sizeof err) != 0)
                die("ps_client_push_announce", err);
            for (size_t k = 0; k < w->n_shards; k++) {
                for (size_t from = 0; from < end[k] - begin[k]; from += PUSH_BLOCK) {
                    size_t len = end[k] - begin[k] - from < PUSH_BLOCK ? end[k] - begin[k] - from : PUSH_BLOCK;
                    memcpy(frames[k] + from, grad + begin[k] + from, len * sizeof(float));
                    ps_client_push_block_written(cl, k, from, len);
                }
            }
            if (w->o->separate_pull) {
                if (ps_client_push_commit(cl, (uint64_t)r, 1, 1, err, sizeof err) != 0)
                    die("ps_client_push_commit", err);
                if (ps_client_pull(cl, (uint64_t)r + 1, out, NULL, err, sizeof err) != 0) die("ps_client_pull", err);
            } else if (ps_client_push_commit_pull(cl, (uint64_t)r, 1, 1, out, err, sizeof err) != 0) {
                die("ps_client_push_commit_pull", err);
            }
        }
        if (r >= w->o->warmup) w->t[r - w->o->warmup] = bench_now_s() - t0;
    }
    w->last = out[w->n - 1];
    if (w->raw) {
        for (size_t k = 0; k < w->n_shards; k++) zmq_close(socks[k]);
    } else {
        if (ps_client_bye(cl, err, sizeof err) != 0) die("ps_client_bye", err);
        ps_client_destroy(&cl);
    }
    zmq_ctx_term(ctx);
    free(grad), free(out);
    return NULL;
}

// Worker 0's median round: n_workers workers computing `iters` each round,
// then moving the model through BSP ps_servers (raw 0), to echo peers (raw 1),
// or to echo peers that answer once every worker's bytes are in (raw 2).
static double run_bsp(size_t n, size_t n_shards, long iters, int raw, const opts_t *o) {
    size_t nw = o->bsp_workers;
    ps_thread_t th[MAX_SHARDS];
    echo_peer_t peers[MAX_SHARDS];
    const char *endpoints[MAX_SHARDS];
    float *zeros = calloc(n, sizeof *zeros);
    if (!zeros) die("out of memory", NULL);
    for (size_t k = 0; k < n_shards; k++) {
        size_t begin, end;
        shard_range(n, n_shards, k, &begin, &end);
        if (raw) {
            echo_peer_t *e = &peers[k];
            e->kind = RAW_KIND_COPY;
            e->work = 0;
            e->barrier = raw == 2 ? nw : 0;
            e->n_held = 0;
            e->n = end - begin;
            e->shard = NULL;
            e->ctx = new_ctx(o->io_threads);
            e->sock = new_socket(e->ctx, ZMQ_ROUTER);
            ZCHECK(zmq_bind(e->sock, "tcp://127.0.0.1:*"));
            size_t len = sizeof e->endpoint;
            ZCHECK(zmq_getsockopt(e->sock, ZMQ_LAST_ENDPOINT, e->endpoint, &len));
            endpoints[k] = e->endpoint;
            if (pthread_create(&e->thread, NULL, echo_main, e) != 0) die("pthread_create", strerror(errno));
            continue;
        }
        ps_config_t c = {.run_id = RUN,
                         .shard = k,
                         .n_shards = n_shards,
                         .n_params = n,
                         .n_workers = nw,
                         .mode = SYNC_MODE_BSP,
                         .optimizer = OPTIMIZER_KIND_SGD,
                         .lr = 1.0f,
                         .memory_allowance = SIZE_MAX,
                         .quiet = 1};  // no memory guard, as above
        shard_thread_init(&th[k], &c, zeros + begin, o);
        endpoints[k] = ps_server_endpoint(th[k].server);
        if (pthread_create(&th[k].thread, NULL, ps_thread_main, &th[k]) != 0) die("pthread_create", strerror(errno));
    }
    bsp_worker_t w[MAX_WORKERS];
    for (size_t i = 0; i < nw; i++) {
        w[i] = (bsp_worker_t){.id = (uint32_t)i,
                              .raw = raw != 0,
                              .n = n,
                              .n_shards = n_shards,
                              .endpoints = endpoints,
                              .iters = iters,
                              .o = o,
                              .t = calloc((size_t)o->rounds, sizeof(double))};
        if (!w[i].t) die("out of memory", NULL);
        if (pthread_create(&w[i].thread, NULL, bsp_worker_main, &w[i]) != 0) die("pthread_create", strerror(errno));
    }
    for (size_t i = 0; i < nw; i++) pthread_join(w[i].thread, NULL);
    double sec = bench_median(w[0].t, o->rounds);
    // Every worker's gradient of every round applied, once (lr 1, examples 1
    // each: a round's average is GRAD_VALUE).
    float want = -(float)(o->warmup + o->rounds) * GRAD_VALUE;
    for (size_t i = 0; !raw && i < nw; i++)
        if (w[i].last != want) die("a bsp worker's last pull did not hold every round applied", NULL);
    for (size_t i = 0; i < nw; i++) free(w[i].t);
    for (size_t k = 0; k < n_shards; k++) {
        if (raw) {
            void *ctx = new_ctx(1), *d = new_socket(ctx, ZMQ_DEALER);
            ZCHECK(zmq_connect(d, peers[k].endpoint));
            send_bytes(d, "", 0, 0);  // stop
            pthread_join(peers[k].thread, NULL);
            zmq_close(d);
            zmq_ctx_term(ctx);
            zmq_close(peers[k].sock);
            zmq_ctx_term(peers[k].ctx);
            continue;
        }
        pthread_join(th[k].thread, NULL);
        if (th[k].rc != 0) die("ps_server_run", th[k].err);
        ps_server_destroy(&th[k].server);
        zmq_ctx_term(th[k].ctx);
    }
    free(zeros);
    return sec;
}

static void bsp_rows(const opts_t *o) {
    long iters = calibrate(o->compute_ms);
    printf(
        "\nBSP rounds: %zu workers, each computing %.1f ms (a calibrated busy loop: %ld dependent multiply-adds)\n"
        "then pushing its gradient and pulling the round's model through BSP ps_servers; against the same\n"
        "compute + the same bytes over raw zmq_send/zmq_recv echoes; worker 0's median round, best of %d trials.\n"
        "raw with a barrier: the same, the echo answering once every worker's bytes are in (BSP's barrier,\n"
        "no server work): what BSP costs by its semantics alone\n",
        o->bsp_workers, o->compute_ms, iters, o->trials);
    printf("%-8s %6s %11s %15s %18s %10s %22s\n", "floats", "shards", "compute ms", "BSP round ms", "compute+raw ms",
           "BSP/raw", "raw with a barrier ms");
    for (size_t i = 0; i < o->n_sizes; i++) {
        size_t n = o->mfloats[i] << 20;
        for (size_t s = 0; s < o->n_shards; s++) {
            size_t k = o->shards[s];
            double ps = 0, raw = 0, barrier = 0, comp = 0;
            for (int t = 0; t < o->trials; t++) {
                double a = run_bsp(n, k, iters, 0, o), b = run_bsp(n, k, iters, 1, o);
                double d = run_bsp(n, k, iters, 2, o);
                double c0 = bench_now_s();  // the compute alone, between trials
                keep((uint32_t)busy(iters));
                double c = bench_now_s() - c0;
                if (t == 0 || a < ps) ps = a;
                if (t == 0 || b < raw) raw = b;
                if (t == 0 || d < barrier) barrier = d;
                if (t == 0 || c < comp) comp = c;
            }
            char label[32];
            snprintf(label, sizeof label, "%zuM", o->mfloats[i]);
            printf("%-8s %6zu %11.2f %15.2f %18.2f %9.2fx %22.2f  %s\n", label, k, 1e3 * comp, 1e3 * ps, 1e3 * raw,
                   ps / raw, 1e3 * barrier, ps / raw <= 1.25 ? "met (<= 1.25)" : "missed (> 1.25)");
            fflush(stdout);
        }
    }
}

// ---- where the time goes ---------------------------------------------------------

typedef struct op_times {
    double csum, copy, update, fresh;  // seconds per call on one buffer of the model's size
} op_times_t;

// Each step the PS adds to the bytes' trip, alone, on a buffer of n floats:
// the fastest of `reps` calls (what the step costs when nothing disturbs it).
static op_times_t time_ops(size_t n, int reps) {
    size_t bytes = n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!a || !b || !t) die("out of memory", NULL);
    for (size_t i = 0; i < n; i++) a[i] = GRAD_VALUE, b[i] = 0.0f;
    op_times_t r;
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_s();
        keep(wire_checksum(a, bytes, 0));
        t[i] = bench_now_s() - t0;
    }
    r.csum = fastest(t, reps);
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_s();
        memcpy(b, a, bytes);
        t[i] = bench_now_s() - t0;
        keep(((uint8_t *)b)[i]);
    }
    r.copy = fastest(t, reps);
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_s();
        sgd_update_cpu(n, 1e-3f, a, b);
        t[i] = bench_now_s() - t0;
    }
    r.update = fastest(t, reps);
    // A fresh message buffer (what every push frame and reply is), written
    // once, against writing a buffer that is already mapped.
    for (int i = 0; i < reps; i++) {
        zmq_msg_t m;
        double t0 = bench_now_s();
        ZCHECK(zmq_msg_init_size(&m, bytes));
        memcpy(zmq_msg_data(&m), a, bytes);
        zmq_msg_close(&m);
        t[i] = bench_now_s() - t0;
    }
    r.fresh = fastest(t, reps);
    free(a), free(b), free(t);
    return r;
}

static double mbs(size_t bytes, double sec) { return sec > 0 ? (double)bytes / sec / 1e6 : 0.0; }

static void print_cost(const char *what, const round_cost_t *c, size_t bytes, const round_cost_t *ps) {
    printf("  %-50s %8.2f %7.0f %6.2fx %8.2f %7.2f %8.0f\n", what, 1e3 * c->sec, mbs(bytes, c->sec), ps->sec / c->sec,
           1e3 * c->user_s, 1e3 * c->sys_s, c->faults);
}

static void profile(size_t m, const opts_t *o) {
    size_t n = m << 20, bytes = n * sizeof(float);
    static const struct {
        unsigned work;
        const char *what;
    } rows[] = {
        {WORK_ALL, "  all: 4 checksums, 3 copies, update"},
        {WORK_ALL & ~WORK_CSUM, "  all but the 4 checksums"},
        {WORK_ALL & ~WORK_SERVER_COPY, "  all but the server's copy into its reply"},
        {WORK_ALL & ~(WORK_CSUM | WORK_SERVER_COPY), "  all but checksums and the server's copy"},
        {WORK_UPDATE, "  update only (no checksums, no copies)"},
        {0, "  messages only"},
    };
    enum { N_ROWS = sizeof rows / sizeof rows[0] };
    round_cost_t ps = {0}, cp = {0}, zc = {0}, emul[N_ROWS] = {{0}}, pipe = {0}, c;
    const unsigned pipe_work = WORK_ALL & ~WORK_SERVER_COPY;  // what the PS does (its replies are zero-copy)
    for (int t = 0; t < o->trials; t++) {
        c = run_ps(n, 1, o, 1);
        keep_best(&ps, &c, t == 0);
        c = run_raw(n, 1, RAW_KIND_COPY, 0, o);
        keep_best(&cp, &c, t == 0);
        c = run_raw(n, 1, RAW_KIND_ZC, 0, o);
        keep_best(&zc, &c, t == 0);
        for (size_t i = 0; i < N_ROWS; i++) {
            c = run_raw(n, 1, RAW_KIND_EMUL, rows[i].work, o);
            keep_best(&emul[i], &c, t == 0);
        }
        c = run_raw(n, 1, RAW_KIND_PIPE, pipe_work, o);
        keep_best(&pipe, &c, t == 0);
    }
    printf(
        "\nwhere a round's time goes: %zuM floats (%zu MiB each way), 1 shard; per round: median wall ms, MB/s,\n"
        "PS wall / this wall, CPU ms of the whole process (every thread, user and sys), minor page faults;\n"
        "each the best of %d trials\n",
        m, bytes >> 20, o->trials);
    printf("  %-50s %8s %7s %7s %8s %7s %8s\n", "variant", "wall ms", "MB/s", "PS/this", "user ms", "sys ms", "faults");
    print_cost("PS (announce, parts as written, values back)", &ps, 2 * bytes, &ps);
    print_cost("raw zmq_send/zmq_recv", &cp, 2 * bytes, &ps);
    print_cost("raw zero-copy", &zc, 2 * bytes, &ps);
    printf(
        "  the PS's messages over raw libzmq (push [header, payload], ack, pull [header],\n"
        "  params [header, payload]) with the PS's work switched on and off:\n");
    for (size_t i = 0; i < N_ROWS; i++) print_cost(rows[i].what, &emul[i], 2 * bytes, &ps);
    char what[96];
    snprintf(what, sizeof what, "  not built: the push in %zu ranges, each answered", o->pipe_blocks);
    printf("  a design not built, the PS's work but the server's copy, pipelined within the shard:\n");
    print_cost(what, &pipe, 2 * bytes, &ps);
    op_times_t op = time_ops(n, 15);
    printf(
        "  each step alone on %zu MiB (one thread, mapped buffers, fastest of 15): wire_checksum %.2f ms (%.1f GB/s),\n"
        "  memcpy %.2f ms (%.1f GB/s), sgd_update_cpu %.2f ms, memcpy into a fresh zmq_msg_init_size buffer %.2f ms\n",
        bytes >> 20, 1e3 * op.csum, bytes / op.csum / 1e9, 1e3 * op.copy, bytes / op.copy / 1e9, 1e3 * op.update,
        1e3 * op.fresh);
    printf(
        "  a PS round adds in series to a zmq_send/zmq_recv echo: 4 checksums (push: client, server; params:\n"
        "  server, client), the server's copy of its shard into a fresh reply, the update: %.2f ms at these speeds\n",
        1e3 * (4 * op.csum + op.fresh + op.update));
}

int main(int argc, char **argv) {
    opts_t o = {.n_sizes = 2,
                .mfloats = {1, 4},
                .n_shards = 2,
                .shards = {1, 2},
                .warmup = 3,
                .rounds = 20,
                .trials = 5,
                .io_threads = 1,
                .profile = 1,
                .bsp = 1,
                .bsp_workers = 2,
                .compute_ms = 5.0,
                .replicas = 1,
                .pipe_blocks = 8,
                .part_floats = -1,
                .announce = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--sizes-m") == 0 && v)
            o.n_sizes = bench_parse_list("bench_ps", v, o.mfloats, MAX_LIST), i++;
        else if (strcmp(a, "--shards") == 0 && v)
            o.n_shards = bench_parse_list("bench_ps", v, o.shards, MAX_LIST), i++;
        else if (strcmp(a, "--warmup") == 0 && v)
            o.warmup = atoi(v), i++;
        else if (strcmp(a, "--rounds") == 0 && v)
            o.rounds = atoi(v), i++;
        else if (strcmp(a, "--trials") == 0 && v)
            o.trials = atoi(v), i++;
        else if (strcmp(a, "--io-threads") == 0 && v)
            o.io_threads = atoi(v), i++;
        else if (strcmp(a, "--no-profile") == 0)
            o.profile = 0;
        else if (strcmp(a, "--replicas") == 0 && v)
            o.replicas = atoi(v), i++;
        else if (strcmp(a, "--no-bsp") == 0)
            o.bsp = 0;
        else if (strcmp(a, "--pipe-blocks") == 0 && v)
            o.pipe_blocks = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--part-floats") == 0 && v)
            o.part_floats = strtol(v, NULL, 10), i++;
        else if (strcmp(a, "--separate-pull") == 0)
            o.separate_pull = 1;
        else if (strcmp(a, "--no-announce") == 0)
            o.announce = 0;
        else if (strcmp(a, "--bsp-parts") == 0)
            o.bsp_parts = 1;
        else if (strcmp(a, "--only") == 0 && v && strcmp(v, "ps") == 0)
            o.only = ONLY_PS, i++;
        else if (strcmp(a, "--only") == 0 && v && strcmp(v, "raw") == 0)
            o.only = ONLY_RAW, i++;
        else if (strcmp(a, "--bsp-workers") == 0 && v)
            o.bsp_workers = (size_t)atoi(v), i++;
        else if (strcmp(a, "--compute-ms") == 0 && v)
            o.compute_ms = atof(v), i++;
        else {
            fprintf(stderr,
                    "usage: bench_ps [--sizes-m 1,4] [--shards 1,2] [--warmup 3] [--rounds 20] [--trials 5] "
                    "[--io-threads K] [--no-profile] [--bsp-workers 2] [--compute-ms 5] [--no-bsp] [--replicas 2]\n"
                    "       [--pipe-blocks 8] [--part-floats N] [--separate-pull] [--no-announce] [--bsp-parts]\n"
                    "       [--only ps|raw]\n");
            return strcmp(a, "--help") == 0 ? 0 : 2;
        }
    }
    if (o.rounds < 1 || o.warmup < 0 || o.trials < 1 || o.io_threads < 1)
        die("--rounds, --trials and --io-threads >= 1, --warmup >= 0", NULL);
    if (o.bsp_workers < 1 || o.bsp_workers > MAX_WORKERS || o.compute_ms < 0)
        die("--bsp-workers 1..8, --compute-ms >= 0", NULL);
    if (o.replicas < 1 || o.replicas > 2) die("--replicas 1 or 2", NULL);
    if (o.pipe_blocks < 1 || o.pipe_blocks > 1024) die("--pipe-blocks 1..1024", NULL);
    snprintf(o.state_dir, sizeof o.state_dir, "/tmp/bench_ps_XXXXXX");
    if (o.replicas > 1 && !mkdtemp(o.state_dir)) die("mkdtemp", strerror(errno));
    for (size_t s = 0; s < o.n_shards; s++)
        if (o.shards[s] > MAX_SHARDS) die("at most 8 shards", NULL);
    int major, minor, patch;
    zmq_version(&major, &minor, &patch);
    printf(
        "bench_ps | libzmq %d.%d.%d, %d I/O thread(s) per context | %ld CPUs | tcp://127.0.0.1 | best of %d trials,\n"
        "each the median of %d rounds after %d warm-ups, trials interleaved across variants\n",
        major, minor, patch, o.io_threads, sysconf(_SC_NPROCESSORS_ONLN), o.trials, o.rounds, o.warmup);
    printf(
        "a round moves the whole model both ways (PS: dense push + pull; raw: send + echo), one request\n"
        "outstanding per shard; MB/s = (bytes sent + bytes received) / round time, MB = 10^6 bytes;\n"
        "1M floats = 2^20 floats = 4 MiB each way\n\n");
    printf("%-8s %6s %10s %10s %14s %10s %10s\n", "floats", "shards", "PS MB/s", "raw MB/s", "raw ZC MB/s", "PS/raw",
           "PS/raw ZC");
    for (size_t i = 0; i < o.n_sizes; i++) {
        size_t n = o.mfloats[i] << 20, bytes = 2 * n * sizeof(float);
        for (size_t s = 0; s < o.n_shards; s++) {
            size_t k = o.shards[s];
            double ps = 0, cp = 0, zc = 0, r2 = 0;
            for (int t = 0; t < o.trials; t++) {
                double a = o.only != ONLY_RAW ? run_ps(n, k, &o, 1).sec : 1,
                       b = o.only != ONLY_PS ? run_raw(n, k, RAW_KIND_COPY, 0, &o).sec : 1,
                       c = o.only != ONLY_PS ? run_raw(n, k, RAW_KIND_ZC, 0, &o).sec : 1;
                double d = o.replicas > 1 ? run_ps(n, k, &o, 2).sec : 0;
                if (t == 0 || d < r2) r2 = d;
                if (t == 0 || a < ps) ps = a;
                if (t == 0 || b < cp) cp = b;
                if (t == 0 || c < zc) zc = c;
            }
            char label[32];
            snprintf(label, sizeof label, "%zuM", o.mfloats[i]);
            printf("%-8s %6zu %10.0f %10.0f %14.0f %9.2fx %9.2fx  %s\n", label, k, mbs(bytes, ps), mbs(bytes, cp),
                   mbs(bytes, zc), cp / ps, zc / ps, cp / ps >= 0.9 ? "met (PS/raw >= 0.9)" : "missed (PS/raw < 0.9)");
            if (o.replicas > 1)
                printf("%-8s %6zu %10.0f   PS with a backup per shard (--server-replicas 2): %.2fx of R=1\n", label, k,
                       mbs(bytes, r2), ps / r2);
            fflush(stdout);
        }
    }
    printf(
        "raw = zmq_send/zmq_recv (copies in and out); raw ZC = zero-copy sends (zmq_msg_init_data), replies read\n"
        "in place; target PS/raw >= 0.9\n");
    if (o.bsp) bsp_rows(&o);
    if (o.profile)
        for (size_t i = 0; i < o.n_sizes; i++) profile(o.mfloats[i], &o);
    if (o.replicas > 1) {
        char rm[128];
        snprintf(rm, sizeof rm, "rm -rf %s", o.state_dir);
        if (system(rm) != 0) die("removing", o.state_dir);
    }
    return 0;
}
