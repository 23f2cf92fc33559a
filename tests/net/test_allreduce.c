// Ring allreduce (net/ring.h) among real processes on tcp://127.0.0.1:*: for
// N = 1..5 ranks, forked children exchange endpoints through pipes, fill their
// arrays from seeded streams and run a sequence of allreduces on one ring
// (sizes 1, N-1, 1001, 3,000,001, several in a row, small and copied or
// zero-copy sub-chunks). The parent checks every rank's result against a
// serial sum and that all ranks' results are bit-identical. Messages from a
// foreign run or of a stale call are dropped and counted. Last, one rank exits
// before the call: the others must fail by their timeout (the message says
// which wait ran out), naming a rank. No check depends on elapsed time.
// Compressed exchanges: fp16 on the wire (ring_allreduce_sum_fp16) stays
// within fp16's rounding of the serial sum with an exact float32 tail, and an
// allgather of qsgd encodings sums to exactly what each rank encoded; both
// bit-identical on every rank. A rank that sends an encoding the others do not
// know, or fp16 where they expect float32, fails their call with a clear error,
// and so does a payload whose checksum is wrong.
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "tests/support/fork_ranks.h"
#include "net/compress.h"
#include "net/ring.h"
#include "net/zmsg.h"
#include "tests/support/test_support.h"

#define RUN 0x7269e60000000001ull
#define MAX_RANKS 5
#define EP_LEN 256
#define CALL_TIMEOUT_MS 10000
#define DEAD_TIMEOUT_MS 300
#define ODD_TIMEOUT_MS 2000

typedef enum call_kind {
    CALL_KIND_SUM = 0,  // ring_allreduce_sum
    CALL_KIND_FP16,  // ring_allreduce_sum_fp16, the last element in float32
    CALL_KIND_GATHER,  // ring_allgather_encoded of qsgd:4 encodings, decoded and summed in rank order
} call_kind_t;

typedef struct call {
    size_t count;
    size_t sub;  // floats per sub-chunk
    int zero_copy;
    call_kind_t kind;
    int rank0_odd;  // rank 0 sends what the others refuse: encoding 99 (gather) or fp16 where they expect float32
} call_t;

#define GATHER_SPEC "qsgd:4"
#define GATHER_SEED 555

// The allgather call: this rank's qsgd encoding of x goes round; x becomes the
// rank-order sum of every rank's decoded vector. Returns the ring's answer.
static int gather_call(ring_t *r, size_t rank, size_t n, float *x, size_t count, int odd, int timeout_ms, char *err,
                       size_t err_len) {
    compress_spec_t spec;
    CHECK_OK(compress_spec_parse(GATHER_SPEC, &spec, err, err_len), err);
    compressor_t *c = compressor_new(&spec, count, GATHER_SEED, rank, err, err_len);
    CHECK(c);
    size_t cap = compress_encoded_bytes(&spec, count);
    uint8_t *blobs = malloc(n * cap);
    size_t lens[MAX_RANKS];
    uint32_t weights[MAX_RANKS];
    CHECK(blobs);
    CHECK_OK(compress_encode(c, x, count, NULL, NULL, blobs + rank * cap, cap, err, err_len), err);
    lens[rank] = cap;
    weights[rank] = (uint32_t)(rank + 1);
    if (odd && rank == 0) blobs[0] = 99;
    int rc = ring_allgather_encoded(r, blobs, cap, lens, weights, count, timeout_ms, err, err_len);
    if (rc == 0 && !(odd && rank == 0)) {
        memset(x, 0, count * sizeof *x);
        for (size_t k = 0; k < n; k++) {
            CHECK(weights[k] == k + 1 && lens[k] == cap);
            CHECK_OK(compress_decode_add(blobs + k * cap, lens[k], count, x, err, err_len), err);
        }
    }
    free(blobs);
    compressor_destroy(&c);
    return rc;
}

// What a child reports besides its results (in memory shared with the parent).
typedef struct child_report {
    int rc;  // of the failing call in the dead-rank test
    double ms;  // how long that call took (printed only)
    uint64_t dropped;  // messages its ring refused
    char err[512];
} child_report_t;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

// Sends the messages a rank must refuse: one of another run, one of call 0
// (a call that never happens, as a stale message would look).
static void send_intruders(void *ctx, const char *endpoint, void **sock_out) {
    char err[256];
    void *s = zmq_socket(ctx, ZMQ_PUSH);
    CHECK(s);
    CHECK_OK(zmsg_socket_defaults(s, 0, err, sizeof err), err);
    CHECK(zmq_connect(s, endpoint) == 0);
    for (int k = 0; k < 2; k++) {
        wire_header_t h = zmsg_header(MSG_TYPE_RING_CHUNK, k == 0 ? RUN + 1 : RUN);
        h.sender = 0;
        h.clock = 0;
        h.count = 4;
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.param_version = 4;
        zmq_msg_t f;
        CHECK_OK(zmsg_frame_alloc(&f, 4 * sizeof(float), err, sizeof err), err);
        memset(zmq_msg_data(&f), 0x3f, 4 * sizeof(float));
        CHECK_OK(zmsg_send(s, NULL, &h, &f, 1, 0, err, sizeof err), err);
    }
    *sock_out = s;  // kept open: closing with linger 0 could drop them unsent
}

// One rank: rendezvous, then the calls; results go to out (shared memory).
// dead: this rank leaves right after connecting; expect_fail: the call must fail.
static void child_main(size_t rank, size_t n, int up, int down, const call_t *calls, size_t n_calls, float *out,
                       child_report_t *rep, int dead, int expect_fail) {
    alarm(60);  // a hang is a failure, never a stuck test run
    char err[512] = "";
    void *ctx = zmq_ctx_new();
    CHECK(ctx);
    size_t max_count = 0;
    for (size_t j = 0; j < n_calls; j++)
        if (calls[j].count > max_count) max_count = calls[j].count;
    ring_t *r = ring_new(ctx, rank, n, RUN, max_count, "127.0.0.1", err, sizeof err);
    CHECK_OK(r == NULL, err);
    char ep[EP_LEN] = {0};
    snprintf(ep, sizeof ep, "%s", ring_endpoint(r));
    CHECK(strncmp(ep, "tcp://127.0.0.1:", 16) == 0);
    fork_ranks_write(up, ep, sizeof ep);
    CHECK(fork_ranks_read(down, ep, sizeof ep));
    CHECK_OK(ring_connect(r, ep, err, sizeof err), err);
    void *intruder = NULL;
    if (dead) goto done;
    if (rank == 0 && n >= 2 && !expect_fail) send_intruders(ctx, ep, &intruder);

    size_t off = 0;
    for (size_t j = 0; j < n_calls; j++) {
        float *x = out + off;
        fork_ranks_fill(x, calls[j].count, 1000 + j, rank);
        CHECK_OK(ring_tune(r, calls[j].sub, calls[j].zero_copy, err, sizeof err), err);
        double t0 = now_ms();
        // A refused call (odd) ends by the refusal; a rank whose neighbour
        // gave up first (dropping what it had queued) ends by its timeout.
        int odd = calls[j].rank0_odd;
        int timeout = odd ? ODD_TIMEOUT_MS : expect_fail ? DEAD_TIMEOUT_MS : CALL_TIMEOUT_MS;
        int rc;
        if (calls[j].kind == CALL_KIND_GATHER)
            rc = gather_call(r, rank, n, x, calls[j].count, odd, timeout, err, sizeof err);
        else if (calls[j].kind == CALL_KIND_FP16 && !(odd && rank > 0))
            rc = ring_allreduce_sum_fp16(r, x, calls[j].count, calls[j].count - 1, timeout, err, sizeof err);
        else
            rc = ring_allreduce_sum(r, x, calls[j].count, timeout, err, sizeof err);
        rep->ms = now_ms() - t0;
        rep->rc = rc;
        snprintf(rep->err, sizeof rep->err, "%s", rc ? err : "");
        if (!expect_fail) CHECK_OK(rc, err);
        off += calls[j].count;
    }
    ring_stats_t st;
    ring_get_stats(r, &st);
    rep->dropped = st.dropped;
    CHECK(st.calls == n_calls);
done:
    if (intruder) zmq_close(intruder);
    ring_destroy(&r);
    CHECK(r == NULL);
    zmq_ctx_term(ctx);
    close(up);
    close(down);
    exit(0);
}

// Forks n ranks, relays endpoints, waits for all of them. Returns when every
// child exited 0 (anything else fails the test).
static void run_ring(size_t n, const call_t *calls, size_t n_calls, float *out, size_t per_rank, child_report_t *reps,
                     long dead_rank, int expect_fail) {
    int up[MAX_RANKS][2], down[MAX_RANKS][2];
    pid_t pid[MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (size_t i = 0; i < n; i++)
        if ((pid[i] = fork_ranks_spawn(i, up, down)) == 0)
            child_main(i, n, up[i][1], down[i][0], calls, n_calls, out + i * per_rank, &reps[i], (long)i == dead_rank,
                       expect_fail);
    fork_ranks_relay_next(n, up, down, EP_LEN);
    double deadline = now_ms() + 60000;
    size_t left = n;
    int status_ok = 1;
    while (left) {
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w == 0) {
            if (now_ms() > deadline) {
                for (size_t i = 0; i < n; i++) kill(pid[i], SIGKILL);
                fprintf(stderr, "ring of %zu: children still running after 60 s\n", n);
                exit(1);
            }
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
            continue;
        }
        CHECK(w > 0);
        left--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "ring of %zu: child %d ended with status 0x%x\n", n, (int)w, status);
            status_ok = 0;
        }
    }
    for (size_t i = 0; i < n; i++) close(up[i][0]), close(down[i][1]);
    CHECK(status_ok);
}

static void test_ring(size_t n) {
    const size_t D = RING_SUB_CHUNK_DEFAULT, S = 1 << 16;
    // Copied sends first, then zero-copy ones; the last call is a large one, so
    // that ranks close their rings and exit right after sending many frames.
    const call_t calls[] = {
        {1, D, 0, CALL_KIND_SUM, 0},       {n - 1, D, 0, CALL_KIND_SUM, 0},
        {1001, D, 0, CALL_KIND_SUM, 0},    {3000001, S, 0, CALL_KIND_SUM, 0},  // the sizes asked for
        {1001, D, 0, CALL_KIND_SUM, 0},    {1001, D, 0, CALL_KIND_SUM, 0},
        {1001, D, 0, CALL_KIND_SUM, 0},    {5, D, 0, CALL_KIND_SUM, 0},  // back to back
        {1001, 97, 0, CALL_KIND_SUM, 0},   {5000, 97, 0, CALL_KIND_SUM, 0},  // many small sub-chunks
        {1001, D, 1, CALL_KIND_SUM, 0},    {2, D, 1, CALL_KIND_SUM, 0},  // zero-copy sends
        {1001, D, 1, CALL_KIND_FP16, 0},   {5000, 97, 1, CALL_KIND_FP16, 0},  // fp16 on the wire
        {1001, D, 1, CALL_KIND_GATHER, 0}, {3, D, 1, CALL_KIND_GATHER, 0},  // allgather of qsgd encodings
        {3000001, D, 1, CALL_KIND_SUM, 0},
    };
    size_t n_calls = sizeof calls / sizeof calls[0], per_rank = 0;
    for (size_t j = 0; j < n_calls; j++) per_rank += calls[j].count;
    float *out = fork_ranks_shared(n * per_rank * sizeof(float));
    child_report_t *reps = fork_ranks_shared(n * sizeof *reps);
    double t0 = now_ms();
    run_ring(n, calls, n_calls, out, per_rank, reps, -1, 0);
    double ms = now_ms() - t0;

    // Serial reference: the same streams, summed in double.
    size_t max_count = 0;
    for (size_t j = 0; j < n_calls; j++)
        if (calls[j].count > max_count) max_count = calls[j].count;
    double *sum = malloc(max_count * sizeof *sum);
    float *x = malloc(max_count * sizeof *x);
    CHECK(sum && x);
    size_t off = 0;
    for (size_t j = 0; j < n_calls; j++) {
        size_t c = calls[j].count;
        memset(sum, 0, c * sizeof *sum);
        for (size_t r = 0; r < n; r++) {
            fork_ranks_fill(x, c, 1000 + j, r);
            for (size_t i = 0; i < c; i++) sum[i] += x[i];
        }
        const float *r0 = out + off;
        if (calls[j].kind == CALL_KIND_GATHER) {
            // Exactly the rank-order sum of what each rank encoded.
            char err[256];
            compress_spec_t spec;
            CHECK_OK(compress_spec_parse(GATHER_SPEC, &spec, err, sizeof err), err);
            float *want = calloc(c, sizeof *want);
            size_t cap = compress_encoded_bytes(&spec, c);
            uint8_t *enc = malloc(cap);
            CHECK(want && enc);
            for (size_t r = 0; r < n; r++) {
                compressor_t *cr = compressor_new(&spec, c, GATHER_SEED, r, err, sizeof err);
                CHECK(cr);
                fork_ranks_fill(x, c, 1000 + j, r);
                CHECK_OK(compress_encode(cr, x, c, NULL, NULL, enc, cap, err, sizeof err), err);
                CHECK_OK(compress_decode_add(enc, cap, c, want, err, sizeof err), err);
                compressor_destroy(&cr);
            }
            CHECK(memcmp(want, r0, c * sizeof *want) == 0);
            free(want);
            free(enc);
        }
        // fp16: each hop rounds a partial sum (relative 2^-11), the last element is exact.
        double tol = calls[j].kind == CALL_KIND_FP16     ? (double)n * 0x1p-11
                     : calls[j].kind == CALL_KIND_GATHER ? 0.5
                                                         : 1e-5;
        for (size_t i = 0; i < c; i++) {
            double t = calls[j].kind == CALL_KIND_FP16 && i + 1 == c ? 1e-5 : tol;
            if (!(fabs(r0[i] - sum[i]) <= t * fabs(sum[i]))) {
                fprintf(stderr, "ring of %zu, call %zu (count %zu): element %zu is %.9g, serial sum %.9g\n", n, j, c, i,
                        r0[i], sum[i]);
                exit(1);
            }
        }
        for (size_t r = 1; r < n; r++) {
            if (memcmp(r0, out + r * per_rank + off, c * sizeof(float)) != 0) {
                fprintf(stderr, "ring of %zu, call %zu (count %zu): rank %zu's result differs from rank 0's\n", n, j, c,
                        r);
                exit(1);
            }
        }
        off += c;
    }
    // Rank 1 got the two intruding messages (rank 0 sent them), nobody else any.
    for (size_t r = 0; r < n; r++) {
        uint64_t want = (n >= 2 && r == 1) ? 2 : 0;
        if (reps[r].dropped != want) {
            fprintf(stderr, "ring of %zu: rank %zu dropped %llu messages, expected %llu\n", n, r,
                    (unsigned long long)reps[r].dropped, (unsigned long long)want);
            exit(1);
        }
    }
    printf("ring of %zu: %zu calls (%zu floats per rank) correct and bit-identical on every rank in %.0f ms\n", n,
           n_calls, per_rank, ms);
    free(sum);
    free(x);
    munmap(out, n * per_rank * sizeof(float));
    munmap(reps, n * sizeof *reps);
}

// Rank `dead` leaves after connecting; every other rank's call must fail by
// its timeout (not by anything else: the message names the wait that ran
// out), and the one after the gap must name the gone rank.
// With zero-copy sends, the rank before the gap has frames queued for the gone
// rank that point into its array: they must be dropped before the call returns.
static void test_dead_neighbour(size_t n, size_t dead, int zero_copy) {
    const call_t calls[] = {{100000, RING_SUB_CHUNK_DEFAULT, zero_copy, CALL_KIND_SUM, 0}};
    float *out = fork_ranks_shared(n * calls[0].count * sizeof(float));
    child_report_t *reps = fork_ranks_shared(n * sizeof *reps);
    run_ring(n, calls, 1, out, calls[0].count, reps, (long)dead, 1);
    for (size_t r = 0; r < n; r++) {
        if (r == dead) continue;
        printf("ring of %zu without rank %zu%s: rank %zu failed after %.0f ms: %s\n", n, dead,
               zero_copy ? " (zero-copy)" : "", r, reps[r].ms, reps[r].err);
        CHECK(reps[r].rc == -1);
        CHECK(strstr(reps[r].err, "for 300 ms") != NULL);
        CHECK(strstr(reps[r].err, "nothing from rank") || strstr(reps[r].err, "accepted nothing"));
    }
    char want[64];
    snprintf(want, sizeof want, "nothing from rank %zu (previous)", dead);
    CHECK(strstr(reps[(dead + 1) % n].err, want) != NULL);
    munmap(out, n * calls[0].count * sizeof(float));
    munmap(reps, n * sizeof *reps);
}

// Rank 0 sends what rank 1 cannot take. A rank that sees it fails at once
// with an error naming the other rank and what is wrong. Under fp16 both
// ranks see it (each expects the other form), and the first to fail drops
// what it had not sent yet (linger 0), so either may be the one to report it;
// an unknown encoding only rank 1 can see.
static void test_refused(call_kind_t kind, const char *want) {
    const call_t calls[] = {{1001, 97, 1, kind, 1}};
    float *out = fork_ranks_shared(2 * calls[0].count * sizeof(float));
    child_report_t *reps = fork_ranks_shared(2 * sizeof *reps);
    run_ring(2, calls, 1, out, calls[0].count, reps, -1, 1);
    int seen = 0;
    for (int r = 0; r < 2; r++) {
        const char *other = r == 0 ? "rank 1" : "rank 0";
        int here = reps[r].rc == -1 && strstr(reps[r].err, want) && strstr(reps[r].err, other) &&
                   !strstr(reps[r].err, "is it gone");
        if (here)
            printf("ring of 2, rank 0 odd (%s): rank %d refused it after %.0f ms: %s\n",
                   kind == CALL_KIND_FP16 ? "fp16" : "gather", r, reps[r].ms, reps[r].err);
        seen |= here;
    }
    CHECK(seen);
    if (kind == CALL_KIND_GATHER) CHECK(reps[1].rc == -1 && strstr(reps[1].err, want));
    munmap(out, 2 * calls[0].count * sizeof(float));
    munmap(reps, 2 * sizeof *reps);
}

// A payload damaged on the way (its header intact, its checksum wrong) fails
// the call at once, naming the sender, instead of being added: the fake rank 0
// of a ring of 2 sends rank 1 exactly the sub-chunk it waits for.
static void test_bad_checksum(void) {
    char err[512] = "";
    void *ctx = zmq_ctx_new();
    CHECK(ctx);
    void *fake_pull = zmq_socket(ctx, ZMQ_PULL), *fake_push = zmq_socket(ctx, ZMQ_PUSH);
    CHECK(fake_pull && fake_push);
    char fake_ep[EP_LEN];
    size_t len = sizeof fake_ep;
    CHECK(zmq_bind(fake_pull, "tcp://127.0.0.1:*") == 0);
    CHECK(zmq_getsockopt(fake_pull, ZMQ_LAST_ENDPOINT, fake_ep, &len) == 0);
    ring_t *r = ring_new(ctx, 1, 2, RUN, 8, "127.0.0.1", err, sizeof err);
    CHECK_OK(r ? 0 : -1, err);
    CHECK_OK(ring_connect(r, fake_ep, err, sizeof err), err);
    CHECK_OK(zmsg_socket_defaults(fake_push, 0, err, sizeof err), err);
    CHECK(zmq_connect(fake_push, ring_endpoint(r)) == 0);
    wire_header_t h = zmsg_header(MSG_TYPE_RING_CHUNK, RUN);
    h.sender = 0;
    h.shard = WIRE_NO_ID;
    h.clock = 1;
    h.param_version = 8;
    h.offset = 0;
    h.count = 4;
    h.aux = 0;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    zmq_msg_t f;
    CHECK_OK(zmsg_frame_alloc(&f, 4 * sizeof(float), err, sizeof err), err);
    float v[4] = {1, 2, 3, 4};
    memcpy(zmq_msg_data(&f), v, sizeof v);
    h.checksum = wire_checksum(v, sizeof v, 0) ^ 1u;
    CHECK_OK(zmsg_send_sealed(fake_push, NULL, &h, &f, 1, 0, err, sizeof err), err);
    float data[8] = {0};
    CHECK(ring_allreduce_sum(r, data, 8, ODD_TIMEOUT_MS, err, sizeof err) == -1);
    printf("ring of 2, a damaged payload from rank 0: %s\n", err);
    CHECK(strstr(err, "from rank 0") && strstr(err, "fail their checksum") && !strstr(err, "is it gone"));
    ring_destroy(&r);
    int zero = 0;
    zmq_setsockopt(fake_push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(fake_pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(fake_push);
    zmq_close(fake_pull);
    zmq_ctx_term(ctx);
}

static void test_bad_arguments(void) {
    char err[256];
    void *ctx = zmq_ctx_new();
    CHECK(ctx);
    CHECK(ring_new(ctx, 3, 3, RUN, 4, "127.0.0.1", err, sizeof err) == NULL);
    CHECK(strstr(err, "rank") != NULL);
    CHECK(ring_new(ctx, 0, 0, RUN, 4, "127.0.0.1", err, sizeof err) == NULL);
    CHECK(ring_new(ctx, 0, 2, RUN, 4, "not a host", err, sizeof err) == NULL);
    CHECK(strstr(err, "not a host") != NULL);
    ring_t *r = ring_new(ctx, 0, 2, RUN, 4, "127.0.0.1", err, sizeof err);
    CHECK_OK(r == NULL, err);
    CHECK(ring_tune(r, 0, 0, err, sizeof err) == -1);
    float x[4] = {1, 2, 3, 4};
    CHECK(ring_allreduce_sum(r, x, 4, 100, err, sizeof err) == -1);  // not connected yet
    CHECK(strstr(err, "ring_connect") != NULL);
    ring_destroy(&r);
    CHECK(r == NULL);
    ring_destroy(&r);
    ring_destroy(NULL);
    // The ipc transport binds a fresh path.
    r = ring_new(ctx, 0, 1, RUN, 4, "ipc", err, sizeof err);
    CHECK_OK(r == NULL, err);
    CHECK(strncmp(ring_endpoint(r), "ipc://", 6) == 0);
    CHECK_OK(ring_connect(r, ring_endpoint(r), err, sizeof err), err);
    CHECK_OK(ring_allreduce_sum(r, x, 4, 100, err, sizeof err), err);  // one rank: unchanged
    CHECK(x[0] == 1 && x[3] == 4);
    ring_destroy(&r);
    zmq_ctx_term(ctx);
}

int main(void) {
    double t0 = now_ms();
    test_bad_arguments();
    test_bad_checksum();
    for (size_t n = 1; n <= MAX_RANKS; n++) test_ring(n);
    test_dead_neighbour(4, 2, 1);
    test_dead_neighbour(2, 0, 0);
    test_refused(CALL_KIND_GATHER, "unknown gradient encoding 99");
    test_refused(CALL_KIND_FP16, "do all ranks use the same --compress?");
    printf("test_allreduce: ok (%.1f s)\n", (now_ms() - t0) / 1e3);
    return 0;
}
