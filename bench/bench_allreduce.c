// Ring allreduce (net/ring.h) and shared-memory allreduce (net/shm_allreduce.h)
// benchmark against Open MPI's MPI_Allreduce on the same machine in the same
// run. For R ranks (forked processes talking over tcp://127.0.0.1 or ipc://,
// or through a /dev/shm segment) and each size, a few warm-up calls, then timed
// calls; the figure is the slowest rank's median time per call, and the bus
// bandwidth is 2(R-1)/R * bytes / time (what each rank's link carries). The
// reference, bench/mpi/mpi_allreduce_bench.c, is timed the same way under
// mpirun, with Open MPI's default transports (shared memory on one node) and
// with its TCP transport over loopback. "asgd hier 2xR/2" (net/hier_allreduce.h)
// splits an even R >= 4 into 2 pretend hosts of R/2: shared memory within each,
// cross ZeroMQ rings over tcp://127.0.0.1; "asgd hier stream" the same with
// stream rings across. "asgd stream tcp" is the stream ring
// (net/stream_ring.h): plain TCP connections read and written by the calling
// thread. Prints a table. Not part of the tests.
//
//   bench_allreduce [--ranks 2,4] [--sizes-mb 1,16,64 | --sizes-bytes 940584,...]
//                   [--warmup 3] [--iters 10] [--transport tcp|ipc|both|none]
//                   [--zero-copy 0|1|both] [--sub FLOATS] [--io-threads K] [--rounds K]
//                   [--no-mpi] [--no-shm] [--no-hier] [--no-stream] [--stream-sub FLOATS]
// Default sizes: 940,584 bytes (the MLP's gradient, docs/benchmarks.md), 1, 16
// and 64 MiB.
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench/bench_support.h"
#include "net/hier_allreduce.h"
#include "net/ring.h"
#include "net/shm_allreduce.h"
#include "net/stream_ring.h"

#define RUN 0xbe9c400000000001ull
#define MAX_LIST 8
#define MAX_RANKS 64
#define EP_LEN 256
#define CALL_TIMEOUT_MS 60000

typedef struct opts {
    size_t ranks[MAX_LIST], n_ranks;
    size_t bytes[MAX_LIST], n_sizes;
    int warmup, iters;
    int tcp, ipc;  // transports to run
    int copy, zc;  // send modes to run
    size_t sub;
    int io_threads;
    int mpi;
    int shm;
    int hier;
    int stream;
    size_t stream_sub;
    int rounds;
} opts_t;

// What one forked rank runs: the ring over a transport, or the shared-memory
// allreduce from the rank's own array or from its buffer in the segment.
typedef struct impl_cfg {
    const char *transport;  // "tcp", "ipc", or NULL for shared memory
    int zero_copy;  // ring: zero-copy sends
    int in_segment;  // shm: the data live in shm_allreduce_buffer()
    uint64_t run;  // shm, hier: the segment's run id
    int hier;  // 2 pretend hosts: shm within, cross rings over tcp (1: ZeroMQ rings, 2: stream rings)
    int stream;  // the stream ring over tcp
} impl_cfg_t;

// The rank whose (ring or cross-ring) endpoint rank i connects to.
static size_t next_of(const impl_cfg_t *cfg, size_t i, size_t n) { return cfg->hier ? (i + n / 2) % n : (i + 1) % n; }

typedef struct record {
    double sec;  // median time of the timed calls; < 0 when the rank failed
    int ok;  // the checked call summed right
} record_t;

static void die(const char *what) {
    fprintf(stderr, "bench_allreduce: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write to pipe");
        c += w, n -= (size_t)w;
    }
}

static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

// One rank: rendezvous, then for every size warm-up, timed calls and one checked call.
static void rank_main(size_t rank, size_t n, const opts_t *o, const impl_cfg_t *cfg, int up, int down) {
    alarm(600);
    char err[512];
    size_t max_count = 0;
    for (size_t s = 0; s < o->n_sizes; s++)
        if (o->bytes[s] / sizeof(float) > max_count) max_count = o->bytes[s] / sizeof(float);
    void *ctx = NULL;
    ring_t *r = NULL;
    shm_allreduce_t *shm = NULL;
    hier_allreduce_t *hier = NULL;
    stream_ring_t *sr = NULL;
    char ep[EP_LEN] = {0};
    if (cfg->stream) {
        sr = stream_ring_new(rank, n, RUN, max_count, "127.0.0.1", err, sizeof err);
        if (!sr || stream_ring_tune(sr, o->stream_sub, err, sizeof err) != 0) {
            fprintf(stderr, "rank %zu: %s\n", rank, err);
            exit(1);
        }
        snprintf(ep, sizeof ep, "%s", stream_ring_endpoint(sr));
    } else if (cfg->hier) {
        ctx = zmq_ctx_new();
        if (!ctx || zmq_ctx_set(ctx, ZMQ_IO_THREADS, o->io_threads) != 0) die("zmq_ctx_new");
        size_t L = n / 2;
        hier = hier_allreduce_new(ctx, cfg->hier == 2, cfg->run, rank / L, 2, rank % L, L, max_count, "127.0.0.1", err,
                                  sizeof err);
        if (!hier) {
            fprintf(stderr, "rank %zu: %s\n", rank, err);
            exit(1);
        }
        snprintf(ep, sizeof ep, "%s", hier_allreduce_endpoint(hier));
    } else if (cfg->transport) {
        ctx = zmq_ctx_new();
        if (!ctx || zmq_ctx_set(ctx, ZMQ_IO_THREADS, o->io_threads) != 0) die("zmq_ctx_new");
        r = ring_new(ctx, rank, n, RUN, max_count, strcmp(cfg->transport, "ipc") == 0 ? "ipc" : "127.0.0.1", err,
                     sizeof err);
        if (!r || ring_tune(r, o->sub, cfg->zero_copy, err, sizeof err) != 0) {
            fprintf(stderr, "rank %zu: %s\n", rank, err);
            exit(1);
        }
        snprintf(ep, sizeof ep, "%s", ring_endpoint(r));
    } else {
        shm = shm_allreduce_new(cfg->run, rank, n, max_count, err, sizeof err);
        if (!shm) {
            fprintf(stderr, "rank %zu: %s\n", rank, err);
            exit(1);
        }
    }
    write_all(up, ep, sizeof ep);
    if (read_all(down, ep, sizeof ep) != 0) exit(1);
    if ((r && ring_connect(r, ep, err, sizeof err) != 0) ||
        (hier && hier_allreduce_connect(hier, ep, CALL_TIMEOUT_MS, err, sizeof err) != 0) ||
        (sr && stream_ring_connect(sr, ep, CALL_TIMEOUT_MS, err, sizeof err) != 0)) {
        fprintf(stderr, "rank %zu: %s\n", rank, err);
        exit(1);
    }
    double *times = calloc((size_t)o->iters, sizeof *times);
    if (!times) die("calloc");
    for (size_t s = 0; s < o->n_sizes; s++) {
        size_t count = o->bytes[s] / sizeof(float);
        // Zeros stay zeros however often they are summed (no overflow, no
        // denormals), as in the MPI reference.
        float *own = cfg->in_segment ? NULL : calloc(count ? count : 1, sizeof *own);
        float *x = cfg->in_segment ? shm_allreduce_buffer(shm) : own;
        if (!x) die("calloc");
        if (cfg->in_segment) memset(x, 0, count * sizeof *x);
        record_t rec = {-1.0, 0};
#define CALL()                                                                          \
    (sr     ? stream_ring_allreduce_sum(sr, x, count, CALL_TIMEOUT_MS, err, sizeof err) \
     : r    ? ring_allreduce_sum(r, x, count, CALL_TIMEOUT_MS, err, sizeof err)         \
     : hier ? hier_allreduce_sum(hier, x, count, CALL_TIMEOUT_MS, err, sizeof err)      \
            : shm_allreduce_sum(shm, x, count, CALL_TIMEOUT_MS, err, sizeof err))
        int rc = 0;
        for (int i = 0; i < o->warmup && rc == 0; i++) rc = CALL();
        for (int i = 0; i < o->iters && rc == 0; i++) {
            double t0 = bench_now_s();
            rc = CALL();
            times[i] = bench_now_s() - t0;
        }
        double t = bench_median(times, o->iters);
        for (size_t i = 0; i < count; i++) x[i] = (float)(rank + 1);
        if (rc == 0) rc = CALL();
#undef CALL
        if (rc == 0) {
            float want = (float)n * (float)(n + 1) / 2.0f;
            rec.ok = 1;
            for (size_t i = 0; i < count; i++) rec.ok &= x[i] == want;
            rec.sec = t;
        } else {
            fprintf(stderr, "rank %zu: %s\n", rank, err);
        }
        write_all(up, &rec, sizeof rec);
        free(own);
        if (rc != 0) break;
    }
    free(times);
    ring_destroy(&r);
    shm_allreduce_destroy(&shm);
    hier_allreduce_destroy(&hier);
    stream_ring_destroy(&sr);
    if (ctx) zmq_ctx_term(ctx);
    exit(0);
}

// Runs every size on a group of n ranks; sec[s] gets the slowest rank's time (< 0: failed).
static void run_ours(size_t n, const opts_t *o, const impl_cfg_t *cfg, double *sec) {
    int up[MAX_RANKS][2], down[MAX_RANKS][2];
    pid_t pid[MAX_RANKS];
    fflush(stdout);
    for (size_t i = 0; i < n; i++) {
        if (pipe(up[i]) != 0 || pipe(down[i]) != 0) die("pipe");
        pid[i] = fork();
        if (pid[i] < 0) die("fork");
        if (pid[i] == 0) {
            for (size_t k = 0; k < i; k++) close(up[k][0]), close(down[k][1]);
            close(up[i][0]);
            close(down[i][1]);
            rank_main(i, n, o, cfg, up[i][1], down[i][0]);
        }
        close(up[i][1]);
        close(down[i][0]);
    }
    char eps[MAX_RANKS][EP_LEN];
    int failed = 0;
    for (size_t i = 0; i < n; i++) failed |= read_all(up[i][0], eps[i], EP_LEN) != 0;
    for (size_t i = 0; i < n && !failed; i++) write_all(down[i][1], eps[next_of(cfg, i, n)], EP_LEN);
    for (size_t s = 0; s < o->n_sizes; s++) {
        sec[s] = 0;
        for (size_t i = 0; i < n; i++) {
            record_t rec;
            if (failed || read_all(up[i][0], &rec, sizeof rec) != 0 || rec.sec < 0 || !rec.ok) {
                sec[s] = -1;
                failed = 1;
                continue;
            }
            if (rec.sec > sec[s]) sec[s] = rec.sec;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (failed) kill(pid[i], SIGKILL);
        waitpid(pid[i], NULL, 0);
        close(up[i][0]);
        close(down[i][1]);
    }
}

// The reference binary: CMake's path when it built one, else next to this binary.
static int mpi_paths(char *bench, size_t bench_len, char *mpiexec, size_t mpiexec_len) {
#ifdef ASGD_MPI_BENCH
    snprintf(bench, bench_len, "%s", ASGD_MPI_BENCH);
    snprintf(mpiexec, mpiexec_len, "%s", ASGD_MPIEXEC);
#else
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return -1;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(bench, bench_len, "%s/mpi_allreduce_bench", self);
    snprintf(mpiexec, mpiexec_len, "mpirun");
#endif
    return access(bench, X_OK) == 0 ? 0 : -1;
}

// Runs the reference under mpirun; sec[s] as for run_ours.
static void run_mpi(size_t n, const opts_t *o, const char *bench, const char *mpiexec, const char *extra, double *sec) {
    char cmd[4096];
    int at = snprintf(cmd, sizeof cmd, "%s --oversubscribe --allow-run-as-root %s -n %zu %s %d %d", mpiexec, extra, n,
                      bench, o->warmup, o->iters);
    for (size_t s = 0; s < o->n_sizes; s++) {
        sec[s] = -1;
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " %zu", o->bytes[s]);
    }
    snprintf(cmd + at, sizeof cmd - (size_t)at, " 2>&1");
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        int ranks;
        size_t bytes;
        double t;
        char check[16];
        if (sscanf(line, "mpi_allreduce ranks=%d bytes=%zu seconds=%lf check=%15s", &ranks, &bytes, &t, check) == 4) {
            for (size_t s = 0; s < o->n_sizes; s++)
                if (bytes == o->bytes[s]) sec[s] = strcmp(check, "ok") == 0 ? t : -1;
        } else {
            fprintf(stderr, "mpirun: %s", line);
        }
    }
    pclose(p);
}

#define MAX_ROUNDS 16
enum {
    IMPL_TCP,
    IMPL_TCP_ZC,
    IMPL_IPC,
    IMPL_IPC_ZC,
    IMPL_STREAM,
    IMPL_SHM,
    IMPL_SHM_SEG,
    IMPL_HIER,
    IMPL_HIER_STREAM,
    IMPL_MPI_SM,
    IMPL_MPI_TCP,
    IMPL_COUNT_
};
static const char *const impl_names[IMPL_COUNT_] = {
    "asgd ring tcp",   "asgd ring tcp zc", "asgd ring ipc",    "asgd ring ipc zc", "asgd stream tcp", "asgd shm",
    "asgd shm in-seg", "asgd hier 2xR/2",  "asgd hier stream", "Open MPI sm",      "Open MPI tcp"};

// The median over rounds of one measurement (< 0 when any round failed);
// *lo and *hi get the fastest and slowest round.
static double over_rounds(const double *v, int rounds, double *lo, double *hi) {
    double tmp[MAX_ROUNDS];
    *lo = *hi = v[0];
    for (int i = 0; i < rounds; i++) {
        if (v[i] < 0) return -1;
        tmp[i] = v[i];
        if (v[i] < *lo) *lo = v[i];
        if (v[i] > *hi) *hi = v[i];
    }
    return bench_median(tmp, rounds);
}

static void row(size_t n, size_t bytes, const char *who, const double *v, int rounds, double mpi_sm, double mpi_tcp) {
    double lo, hi, sec = over_rounds(v, rounds, &lo, &hi);
    char size[32];
    if (bytes % (1u << 20) == 0)
        snprintf(size, sizeof size, "%zu MiB", bytes >> 20);
    else
        snprintf(size, sizeof size, "%zu B", bytes);
    if (sec < 0) {
        printf("| %5zu | %9s | %-16s | %9s | %17s | %8s | %7s | %8s |\n", n, size, who, "failed", "-", "-", "-", "-");
        return;
    }
    double bus = 2.0 * (double)(n - 1) / (double)n * (double)bytes / sec / 1e9;
    char r1[32] = "-", r2[32] = "-", range[48];
    if (mpi_sm > 0) snprintf(r1, sizeof r1, "%.2f", sec / mpi_sm);
    if (mpi_tcp > 0) snprintf(r2, sizeof r2, "%.2f", sec / mpi_tcp);
    snprintf(range, sizeof range, "%.2f-%.2f", lo * 1e3, hi * 1e3);
    printf("| %5zu | %9s | %-16s | %9.3f | %17s | %8.2f | %7s | %8s |\n", n, size, who, sec * 1e3, range, bus, r1, r2);
}

int main(int argc, char **argv) {
    opts_t o = {.ranks = {2, 4},
                .n_ranks = 2,
                .bytes = {940584, 1u << 20, 16u << 20, 64u << 20},
                .n_sizes = 4,
                .warmup = 3,
                .iters = 10,
                .tcp = 1,
                .ipc = 1,
                .copy = 1,
                .zc = 1,
                .sub = RING_SUB_CHUNK_DEFAULT,
                .io_threads = 1,
                .mpi = 1,
                .shm = 1,
                .hier = 1,
                .stream = 1,
                .stream_sub = STREAM_RING_SUB_CHUNK_DEFAULT,
                .rounds = 1};
    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : "";
        if (strcmp(argv[a], "--ranks") == 0)
            o.n_ranks = bench_parse_list("bench_allreduce", v, o.ranks, MAX_LIST), a++;
        else if (strcmp(argv[a], "--sizes-mb") == 0) {
            o.n_sizes = bench_parse_list("bench_allreduce", v, o.bytes, MAX_LIST), a++;
            for (size_t i = 0; i < o.n_sizes; i++) o.bytes[i] <<= 20;
        } else if (strcmp(argv[a], "--sizes-bytes") == 0) {
            o.n_sizes = bench_parse_list("bench_allreduce", v, o.bytes, MAX_LIST), a++;
        } else if (strcmp(argv[a], "--warmup") == 0)
            o.warmup = atoi(v), a++;
        else if (strcmp(argv[a], "--iters") == 0)
            o.iters = atoi(v), a++;
        else if (strcmp(argv[a], "--sub") == 0)
            o.sub = strtoull(v, NULL, 10), a++;
        else if (strcmp(argv[a], "--io-threads") == 0)
            o.io_threads = atoi(v), a++;
        else if (strcmp(argv[a], "--rounds") == 0)
            o.rounds = atoi(v), a++;
        else if (strcmp(argv[a], "--transport") == 0) {
            o.tcp = strcmp(v, "ipc") != 0 && strcmp(v, "none") != 0;
            o.ipc = strcmp(v, "tcp") != 0 && strcmp(v, "none") != 0;
            a++;
        } else if (strcmp(argv[a], "--zero-copy") == 0) {
            o.copy = strcmp(v, "1") != 0;
            o.zc = strcmp(v, "0") != 0;
            a++;
        } else if (strcmp(argv[a], "--no-mpi") == 0)
            o.mpi = 0;
        else if (strcmp(argv[a], "--no-shm") == 0)
            o.shm = 0;
        else if (strcmp(argv[a], "--no-hier") == 0)
            o.hier = 0;
        else if (strcmp(argv[a], "--no-stream") == 0)
            o.stream = 0;
        else if (strcmp(argv[a], "--stream-sub") == 0)
            o.stream_sub = strtoull(v, NULL, 10), a++;
        else {
            fprintf(stderr,
                    "usage: bench_allreduce [--ranks 2,4] [--sizes-mb 1,16,64 | --sizes-bytes 940584,...]\n"
                    "       [--warmup 3] [--iters 10] [--transport tcp|ipc|both|none] [--zero-copy 0|1|both]\n"
                    "       [--sub FLOATS] [--io-threads K] [--rounds K] [--no-mpi] [--no-shm] [--no-hier]\n"
                    "       [--no-stream] [--stream-sub FLOATS]\n");
            return 2;
        }
    }
    for (size_t i = 0; i < o.n_ranks; i++)
        if (o.ranks[i] > MAX_RANKS) {
            fprintf(stderr, "bench_allreduce: at most %d ranks\n", MAX_RANKS);
            return 2;
        }
    if (o.iters < 1 || o.warmup < 0 || o.io_threads < 1 || o.sub == 0 || o.stream_sub == 0 || o.rounds < 1 ||
        o.rounds > MAX_ROUNDS) {
        fprintf(stderr,
                "bench_allreduce: need --iters >= 1, --warmup >= 0, --io-threads >= 1, --sub and --stream-sub >= 1, "
                "--rounds 1..%d\n",
                MAX_ROUNDS);
        return 2;
    }
    char mpi_bench[PATH_MAX], mpiexec[PATH_MAX];
    int have_mpi = o.mpi && mpi_paths(mpi_bench, sizeof mpi_bench, mpiexec, sizeof mpiexec) == 0;
    int major, minor, patch;
    zmq_version(&major, &minor, &patch);
    printf(
        "bench_allreduce | %ld CPUs | libzmq %d.%d.%d, %d I/O thread(s) per rank | sub-chunk %zu floats | "
        "stream sub-chunk %zu floats | %d warm-up + %d timed calls, median per call of the slowest rank\n",
        sysconf(_SC_NPROCESSORS_ONLN), major, minor, patch, o.io_threads, o.sub, o.stream_sub, o.warmup, o.iters);
    if (have_mpi)
        printf(
            "reference: %s --oversubscribe --allow-run-as-root -n R %s (default transports: \"MPI sm\"; "
            "--mca btl self,tcp --mca btl_tcp_if_include lo: \"MPI tcp\")\n",
            mpiexec, mpi_bench);
    else if (o.mpi)
        printf("reference: no mpi_allreduce_bench found (configure with MPI installed to build it)\n");
    printf(
        "figures: median over %d round(s), the implementations taking turns in each; range: fastest and "
        "slowest round\nratio columns: our time / MPI's time (below 1: faster than MPI)\n\n",
        o.rounds);
    printf(
        "| ranks |      size | implementation   |   ms/call | range ms (rounds) | bus GB/s | /MPI sm | /MPI tcp |\n");
    printf(
        "|------:|----------:|------------------|----------:|------------------:|---------:|--------:|---------:|\n");

    // (implementation, ranks, size, round) -> seconds per call; < 0: failed.
    static double t[IMPL_COUNT_][MAX_LIST][MAX_LIST][MAX_ROUNDS];
    int ran[IMPL_COUNT_] = {0};
    for (int round = 0; round < o.rounds; round++) {
        for (size_t ri = 0; ri < o.n_ranks; ri++) {
            size_t n = o.ranks[ri];
            double sec[MAX_LIST];
            for (int k = 0; k < IMPL_COUNT_; k++) {
                int tr = k == IMPL_TCP || k == IMPL_TCP_ZC, zc = k == IMPL_TCP_ZC || k == IMPL_IPC_ZC;
                if (k == IMPL_MPI_SM || k == IMPL_MPI_TCP) {
                    if (!have_mpi) continue;
                    run_mpi(n, &o, mpi_bench, mpiexec,
                            k == IMPL_MPI_SM ? "" : "--mca btl self,tcp --mca btl_tcp_if_include lo", sec);
                } else if (k == IMPL_SHM || k == IMPL_SHM_SEG) {
                    if (!o.shm) continue;
                    // A run id of its own per group: no group meets another's segment.
                    impl_cfg_t cfg = {
                        NULL,
                        0,
                        k == IMPL_SHM_SEG,
                        RUN ^ ((uint64_t)getpid() << 16) ^ (uint64_t)((round * MAX_LIST + ri) * IMPL_COUNT_ + k),
                        0,
                        0};
                    run_ours(n, &o, &cfg, sec);
                } else if (k == IMPL_STREAM) {
                    if (!o.stream) continue;
                    impl_cfg_t cfg = {NULL, 0, 0, 0, 0, 1};
                    run_ours(n, &o, &cfg, sec);
                } else if (k == IMPL_HIER || k == IMPL_HIER_STREAM) {
                    if (!o.hier || n < 4 || n % 2 || (k == IMPL_HIER_STREAM && !o.stream)) continue;
                    impl_cfg_t cfg = {
                        NULL,
                        0,
                        0,
                        RUN ^ ((uint64_t)getpid() << 16) ^ (uint64_t)((round * MAX_LIST + ri) * IMPL_COUNT_ + k),
                        k == IMPL_HIER ? 1 : 2,
                        0};
                    run_ours(n, &o, &cfg, sec);
                } else {
                    if (!(tr ? o.tcp : o.ipc) || !(zc ? o.zc : o.copy)) continue;
                    impl_cfg_t cfg = {tr ? "tcp" : "ipc", zc, 0, 0, 0, 0};
                    run_ours(n, &o, &cfg, sec);
                }
                ran[k] = 1;
                for (size_t s = 0; s < o.n_sizes; s++) t[k][ri][s][round] = sec[s];
            }
        }
    }
    for (size_t ri = 0; ri < o.n_ranks; ri++) {
        for (size_t s = 0; s < o.n_sizes; s++) {
            double lo, hi, sm = -1, tcp = -1;
            if (ran[IMPL_MPI_SM]) sm = over_rounds(t[IMPL_MPI_SM][ri][s], o.rounds, &lo, &hi);
            if (ran[IMPL_MPI_TCP]) tcp = over_rounds(t[IMPL_MPI_TCP][ri][s], o.rounds, &lo, &hi);
            for (int k = 0; k < IMPL_COUNT_; k++)
                if (ran[k]) row(o.ranks[ri], o.bytes[s], impl_names[k], t[k][ri][s], o.rounds, sm, tcp);
        }
    }
    return 0;
}
