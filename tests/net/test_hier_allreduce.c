// Hierarchical allreduce (net/hier_allreduce.h) among real processes: H
// pretend hosts of L forked ranks each (2x2, 3x2, 2x1, 1x3), cross rings on
// ipc:// ZeroMQ sockets, and again (2x2, 3x2) with stream rings across (plain
// TCP on 127.0.0.1, endpoints relayed through shared memory), a sequence of calls of 0, 1, 3, 1001 and 235,146 values
// (940,584 bytes). Every rank checks its result bit for bit against the sum
// the header promises, computed serially: each host's sum in local rank order,
// then, for the part of local slice j in cross-ring chunk c, the host sums
// from host c on round the ring. The data mix magnitudes so that another
// order gives other bits (checked: the flat rank-order sum differs).
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "kernels/foundation/partition.h"
#include "net/hier_allreduce.h"
#include "tests/support/proc_support.h"
#include "tests/support/test_support.h"

#define MAX_RANKS 6
#define BIG 235146
#define CALL_TIMEOUT_MS 30000
#define HANG_S 120.0

static const size_t counts[] = {0, 1, 3, 1001, BIG, 7};
#define N_CALLS (sizeof counts / sizeof counts[0])
static char dir[] = "/tmp/asgd_hier_XXXXXX";

static void fill(float *x, size_t count, size_t call, size_t rank) {
    rng_t g;
    rng_seed(&g, 2000 + call, rank);
    for (size_t i = 0; i < count; i++) {
        double m = ldexp(0.5 + rng_uniform(&g), (int)rng_below(&g, 41) - 20);
        x[i] = (float)(rng_below(&g, 2) ? m : -m);
    }
}

// The promised sum of call `call` over H hosts of L ranks (rank h * L + j).
static void expected(float *want, size_t count, size_t call, size_t H, size_t L) {
    float *host = calloc(H * (count ? count : 1), sizeof *host), *tmp = malloc((count ? count : 1) * sizeof *tmp);
    CHECK(host && tmp);
    for (size_t h = 0; h < H; h++)
        for (size_t j = 0; j < L; j++) {
            fill(tmp, count, call, h * L + j);
            for (size_t i = 0; i < count; i++) host[h * count + i] = j == 0 ? tmp[i] : host[h * count + i] + tmp[i];
        }
    for (size_t j = 0; j < L; j++) {
        size_t b, e;
        shard_range(count, L, j, &b, &e);
        for (size_t c = 0; c < H; c++) {
            size_t cb, ce;
            shard_range(e - b, H, c, &cb, &ce);
            for (size_t i = b + cb; i < b + ce; i++) {
                float s = host[c * count + i];
                for (size_t k = 1; k < H; k++) s += host[((c + k) % H) * count + i];
                want[i] = s;
            }
        }
    }
    free(host);
    free(tmp);
}

static void cross_path(char *out, size_t len, size_t h, size_t j) {
    snprintf(out, len, "ipc://%s/x-%zu-%zu", dir, h, j);
}

// Stream rings' endpoints (ephemeral ports), relayed through memory shared
// by the forked ranks: each writes its own, then waits for its next host's.
typedef struct relay {
    char endpoint[MAX_RANKS][300];
    atomic_int posted;
} relay_t;

static void relay_next(relay_t *rl, size_t H, size_t L, size_t g, const char *mine, char *next, size_t len) {
    snprintf(rl->endpoint[g], sizeof rl->endpoint[g], "%s", mine);
    atomic_fetch_add(&rl->posted, 1);
    while (atomic_load(&rl->posted) < (int)(H * L)) {  // the parent's deadline bounds the wait
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    snprintf(next, len, "%s", rl->endpoint[((g / L + 1) % H) * L + g % L]);
}

static int rank_main(size_t H, size_t L, size_t g, uint64_t run, relay_t *rl) {
    size_t h = g / L, j = g % L;
    void *ctx = rl ? NULL : zmq_ctx_new();
    char err[512], bind[300], next[300];
    cross_path(bind, sizeof bind, h, j);
    cross_path(next, sizeof next, (h + 1) % H, j);
    hier_allreduce_t *x =
        hier_allreduce_new(ctx, rl != NULL, run, h, H, j, L, BIG, rl ? "127.0.0.1" : bind, err, sizeof err);
    if (x && rl) {
        CHECK(hier_allreduce_uses_stream(x));
        relay_next(rl, H, L, g, hier_allreduce_endpoint(x), next, sizeof next);
    }
    if (!x || hier_allreduce_connect(x, next, CALL_TIMEOUT_MS, err, sizeof err) != 0) {
        fprintf(stderr, "rank %zu: %s\n", g, err);
        return 1;
    }
    float *data = malloc(BIG * sizeof *data), *want = malloc(BIG * sizeof *want);
    int bad = 0;
    for (size_t c = 0; c < N_CALLS && !bad; c++) {
        fill(data, counts[c], c, g);
        if (hier_allreduce_sum(x, data, counts[c], CALL_TIMEOUT_MS, err, sizeof err) != 0) {
            fprintf(stderr, "rank %zu, call %zu: %s\n", g, c, err);
            bad = 1;
            break;
        }
        expected(want, counts[c], c, H, L);
        if (counts[c] && memcmp(data, want, counts[c] * sizeof *data) != 0) {
            size_t i = 0;
            while (memcmp(&data[i], &want[i], sizeof *data) == 0) i++;
            fprintf(stderr, "rank %zu, call %zu of %zu values: element %zu is %.9g, expected %.9g\n", g, c, counts[c],
                    i, data[i], want[i]);
            bad = 1;
        }
    }
    free(data);
    free(want);
    hier_allreduce_destroy(&x);
    if (ctx) zmq_ctx_term(ctx);
    return bad;
}

static void run_layout(size_t H, size_t L, uint64_t run, int stream) {
    pid_t pid[MAX_RANKS];
    relay_t *rl = NULL;
    if (stream) {
        rl = mmap(NULL, sizeof *rl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(rl != MAP_FAILED);
        atomic_init(&rl->posted, 0);
    }
    fflush(stdout);
    fflush(stderr);
    for (size_t g = 0; g < H * L; g++) {
        pid[g] = fork();
        CHECK(pid[g] >= 0);
        if (pid[g] == 0) _exit(rank_main(H, L, g, run, rl));
    }
    for (size_t g = 0; g < H * L; g++) CHECK(proc_wait(pid[g], HANG_S) == 0);
    printf("%zu hosts x %zu ranks, %s cross rings: every rank's %zu sums equal the promised order bit for bit\n", H, L,
           stream ? "stream" : "ZeroMQ", N_CALLS);
    if (rl) munmap(rl, sizeof *rl);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    // The promised order is not the flat one: the check could tell them apart.
    float want[1001], flat[1001], tmp[1001];
    expected(want, 1001, 3, 2, 2);
    for (size_t g = 0; g < 4; g++) {
        fill(tmp, 1001, 3, g);
        for (size_t i = 0; i < 1001; i++) flat[i] = g == 0 ? tmp[i] : flat[i] + tmp[i];
    }
    CHECK(memcmp(want, flat, sizeof want) != 0);
    uint64_t run = 0x6869657200000000ull ^ ((uint64_t)getpid() << 8);
    run_layout(2, 2, run + 1, 0);
    run_layout(3, 2, run + 2, 0);
    run_layout(2, 1, run + 3, 0);
    run_layout(1, 3, run + 4, 0);
    run_layout(2, 2, run + 5, 1);
    run_layout(3, 2, run + 6, 1);
    CHECK(test_remove_tree(dir) == 0);
    printf("hier allreduce tests passed\n");
    return 0;
}
