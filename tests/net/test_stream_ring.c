// The stream ring (net/stream_ring.h) among real processes on 127.0.0.1: for
// n = 1..5 forked ranks (endpoints relayed through pipes), a sequence of
// allreduces (sizes 0, 1, n-1, 1001, 3,000,001, 5,000 in sub-chunks of 97
// floats, back to back) must give every rank, bit for bit, the sum in the
// ring's fixed order: chunk c is ((x_c + x_{c+1}) + ...) + x_{c-1} in float,
// the libzmq ring's order too. The counters must say exactly how many
// messages and bytes moved. Rank 0 first gets a connection from a stranger
// (another run's hello), which it must turn away before taking the real one.
// Failures must be prompt and named, decided by events, not by the clock:
// a rank on another sub-chunk size fails its neighbour's call naming the
// size, a rank that disagrees on the count is named as such, and a rank that
// exits after connecting makes the others fail because it closed its
// connection; in each case every rank's call fails, and none by a timeout.
// Last, the listener keeps the security rule: beyond loopback only when
// insecure, and never in a run that uses CURVE.
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/foundation/partition.h"
#include "net/curve_auth.h"
#include "net/stream_ring.h"
#include "net/tcp_link.h"
#include "net/wire.h"
#include "tests/support/fork_ranks.h"
#include "tests/support/test_support.h"

#define RUN 0x5712ea0000000001ull
#define MAX_RANKS 5
#define EP_LEN 300
#define CALL_TIMEOUT_MS 20000  // far beyond any call here: reaching it is a failure

typedef struct call {
    size_t count, sub;
} call_t;

typedef enum fault {
    FAULT_NONE = 0,
    FAULT_SUB,  // rank 0 uses another sub-chunk size
    FAULT_COUNT,  // rank 0 passes one value more
    FAULT_DEAD,  // the last rank exits right after connecting
} fault_t;

typedef struct report {
    int rc;
    ring_stats_t stats;
    char err[600];
} report_t;

// A connection to rank 0 that says it is rank n-1 of another run.
static int stranger(const char *endpoint, size_t n) {
    char err[300];
    int fd = tcp_link_dial(endpoint, 0, err, sizeof err);
    CHECK_OK(fd < 0, err);
    wire_header_t h = {.magic = WIRE_MAGIC,
                       .version = WIRE_VERSION,
                       .type = MSG_TYPE_RING_CHUNK,
                       .run_id = RUN + 1,
                       .sender = (uint32_t)(n - 1),
                       .shard = (uint32_t)n};
    uint8_t b[WIRE_HEADER_SIZE];
    wire_header_encode(&h, b);
    CHECK_OK(tcp_link_send_all(fd, b, sizeof b, 0, err, sizeof err), err);
    return fd;
}

static void child(size_t rank, size_t n, int up, int down, const call_t *calls, size_t n_calls, float *out,
                  report_t *rep, fault_t fault) {
    alarm(120);  // a hang is a failure, never a stuck test run
    char err[600] = "";
    size_t max_count = 1;
    for (size_t j = 0; j < n_calls; j++) max_count = calls[j].count + 1 > max_count ? calls[j].count + 1 : max_count;
    stream_ring_t *r = stream_ring_new(rank, n, RUN, max_count, "127.0.0.1", err, sizeof err);
    CHECK_OK(r == NULL, err);
    char ep[EP_LEN] = {0};
    snprintf(ep, sizeof ep, "%s", stream_ring_endpoint(r));
    CHECK(strncmp(ep, "tcp://127.0.0.1:", 16) == 0);
    int strange = rank == 0 && n >= 2 && fault == FAULT_NONE ? stranger(ep, n) : -1;
    fork_ranks_write(up, ep, sizeof ep);
    CHECK(fork_ranks_read(down, ep, sizeof ep));
    CHECK_OK(stream_ring_connect(r, ep, CALL_TIMEOUT_MS, err, sizeof err), err);
    if (fault == FAULT_DEAD && rank == n - 1) {
        stream_ring_destroy(&r);
        _exit(0);
    }
    size_t off = 0;
    rep->rc = 0;
    for (size_t j = 0; j < n_calls && rep->rc == 0; j++) {
        float *x = out + off;
        fork_ranks_fill(x, calls[j].count + 1, 1000 + j, rank);
        size_t sub = fault == FAULT_SUB && rank == 0 ? calls[j].sub + 1 : calls[j].sub;
        size_t count = fault == FAULT_COUNT && rank == 0 ? calls[j].count + 1 : calls[j].count;
        CHECK_OK(stream_ring_tune(r, sub, err, sizeof err), err);
        rep->rc = stream_ring_allreduce_sum(r, x, count, CALL_TIMEOUT_MS, err, sizeof err);
        snprintf(rep->err, sizeof rep->err, "%s", rep->rc ? err : "");
        off += calls[j].count;
    }
    stream_ring_get_stats(r, &rep->stats);
    if (strange >= 0) close(strange);
    stream_ring_destroy(&r);
    CHECK(r == NULL);
    _exit(0);
}

static void run_ring(size_t n, const call_t *calls, size_t n_calls, float *out, size_t per_rank, report_t *reps,
                     fault_t fault) {
    int up[MAX_RANKS][2], down[MAX_RANKS][2];
    pid_t pid[MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (size_t i = 0; i < n; i++)
        if ((pid[i] = fork_ranks_spawn(i, up, down)) == 0)
            child(i, n, up[i][1], down[i][0], calls, n_calls, out + i * per_rank, &reps[i], fault);
    fork_ranks_relay_next(n, up, down, EP_LEN);
    for (size_t i = 0; i < n; i++) {
        int status;
        CHECK(waitpid(pid[i], &status, 0) == pid[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "ring of %zu, fault %d: rank %zu ended with status 0x%x\n", n, (int)fault, i, status);
            exit(1);
        }
        close(up[i][0]);
        close(down[i][1]);
    }
}

// Element i of chunk c summed as the ring sums it: rank c's value, then c+1's, ...
static void ring_order_sum(size_t n, size_t count, uint64_t seed, float *want, float *x) {
    for (size_t c = 0; c < n; c++) {
        size_t b, e;
        shard_range(count, n, c, &b, &e);
        for (size_t j = 0; j < n; j++) {
            fork_ranks_fill(x, count + 1, seed, (c + j) % n);
            for (size_t i = b; i < e; i++) want[i] = j == 0 ? x[i] : want[i] + x[i];
        }
    }
}

static void test_sums(size_t n) {
    const size_t D = STREAM_RING_SUB_CHUNK_DEFAULT;
    const call_t calls[] = {{0, D}, {1, D}, {n - 1, D}, {1001, D}, {3000001, D}, {5000, 97}, {1001, D}, {1001, 1}};
    size_t n_calls = sizeof calls / sizeof calls[0], per_rank = 1;
    for (size_t j = 0; j < n_calls; j++) per_rank += calls[j].count;
    float *out = fork_ranks_shared(n * per_rank * sizeof(float));
    report_t *reps = fork_ranks_shared(n * sizeof *reps);
    run_ring(n, calls, n_calls, out, per_rank, reps, FAULT_NONE);

    float *want = malloc(3000002 * sizeof *want), *x = malloc(3000002 * sizeof *x);
    CHECK(want && x);
    // What rank r sends and receives: at step s, chunk (r - s) mod n out and (r - s - 1) mod n in, each in
    // sub-chunks of at most `sub`.
    uint64_t msgs[2][MAX_RANKS] = {{0}}, bytes[2][MAX_RANKS] = {{0}};
    size_t off = 0;
    for (size_t j = 0; j < n_calls; j++) {
        size_t c = calls[j].count;
        if (n == 1)
            fork_ranks_fill(want, c + 1, 1000 + j, 0);
        else
            ring_order_sum(n, c, 1000 + j, want, x);
        for (size_t r = 0; r < n; r++) {
            CHECK_OK(reps[r].rc, reps[r].err);
            if (memcmp(out + r * per_rank + off, want, c * sizeof *want) != 0) {
                fprintf(stderr, "ring of %zu, call %zu (%zu floats): rank %zu's sum is not the ring-order sum\n", n, j,
                        c, r);
                exit(1);
            }
            for (size_t s = 0; n > 1 && s < 2 * n - 2; s++)
                for (int in = 0; in < 2; in++) {
                    size_t b, e;
                    shard_range(c, n, (r + 2 * n - s - (size_t)in) % n, &b, &e);
                    msgs[in][r] += (e - b + calls[j].sub - 1) / calls[j].sub;
                    bytes[in][r] += (e - b) * sizeof(float);
                }
        }
        off += c;
    }
    for (size_t r = 0; r < n; r++) {
        const ring_stats_t *st = &reps[r].stats;
        CHECK(st->calls == n_calls && st->msgs_sent == msgs[0][r] && st->msgs_recv == msgs[1][r] &&
              st->bytes_sent == bytes[0][r] && st->bytes_recv == bytes[1][r] && st->dropped == 0);
    }
    printf("ring of %zu: %zu calls bit-identical to the ring-order sum on every rank, rank 0 sent %llu messages\n", n,
           n_calls, (unsigned long long)msgs[0][0]);
    free(want);
    free(x);
    munmap(out, n * per_rank * sizeof(float));
    munmap(reps, n * sizeof *reps);
}

static void test_fault(size_t n, fault_t fault, const char *first_says) {
    const call_t calls[] = {{100000, 4096}};
    size_t per_rank = calls[0].count + 1;
    float *out = fork_ranks_shared(n * per_rank * sizeof(float));
    report_t *reps = fork_ranks_shared(n * sizeof *reps);
    run_ring(n, calls, 1, out, per_rank, reps, fault);
    size_t live = fault == FAULT_DEAD ? n - 1 : n, told = 0;
    for (size_t r = 0; r < live; r++) {
        CHECK(reps[r].rc != 0);
        CHECK(strstr(reps[r].err, " ms in allreduce") == NULL);  // not by a timeout
        told += strstr(reps[r].err, first_says) != NULL;
        printf("  fault %d, rank %zu: %s\n", (int)fault, r, reps[r].err);
    }
    CHECK(told >= 1);
    munmap(out, n * per_rank * sizeof(float));
    munmap(reps, n * sizeof *reps);
}

static void test_security_rule(void) {
    char err[600];
    CHECK(stream_ring_new(0, 2, RUN, 10, "0.0.0.0", err, sizeof err) == NULL);
    CHECK(strstr(err, "refusing to listen beyond this machine without CURVE") && strstr(err, "--insecure"));
    printf("refused: %s\n", err);
    net_security_t sec = {.curve = 1};
    CHECK_OK(curve_keypair_new(&sec.server_public, &sec.server_secret, err, sizeof err), err);
    CHECK_OK(curve_keypair_new(&sec.client_public, &sec.client_secret, err, sizeof err), err);
    CHECK_OK(net_security_set(&sec, err, sizeof err), err);
    CHECK(stream_ring_new(0, 2, RUN, 10, "127.0.0.1", err, sizeof err) == NULL && strstr(err, "uses CURVE"));
    printf("refused: %s\n", err);
}

int main(void) {
    for (size_t n = 1; n <= MAX_RANKS; n++) test_sums(n);
    for (size_t n = 2; n <= 4; n++) {
        test_fault(n, FAULT_SUB, "do all ranks use the same sub-chunk size?");
        test_fault(n, FAULT_COUNT, "every rank must make the same calls with the same counts");
        test_fault(n, FAULT_DEAD, "closed its connection");
    }
    test_security_rule();  // last: it leaves the process's security set to CURVE
    printf("test_stream_ring: OK\n");
    return 0;
}
