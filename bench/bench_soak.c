// Soak: many workers pushing to a few parameter-server shards as fast as they
// can, for a bounded time, to see whether the servers hold their rate, how
// long a push waits for its acknowledgement, whether memory stays flat, and
// whether every push is applied exactly once.
//
// Servers: `--shards` ps_servers (ASP, SGD, lr 1), each in its own thread and
// zmq context on tcp://127.0.0.1:*. Workers: `--workers` threads, each with its
// own ps_client (one shared zmq context for the workers), pushing dense
// updates of the whole model (`--params` floats) in a loop: commit, wait for
// the acknowledgements, again. Every update holds 2^-10 in every element, so a
// shard that applied P pushes holds exactly -P * 2^-10 everywhere: comparing
// that with the pushes the workers were acknowledged shows any push lost or
// applied twice, independently of the servers' own counters.
//
// Reported: pushes/s per one-second window after the first (median, min,
// max: "held" means the min stays near the median), the push latency (commit
// to acknowledgement: p50, p99, max), the process's resident memory sampled
// every second (flat means no growth over the second half of the run: the
// first seconds fill each thread's stack and malloc arena), and the checks.
// Not part of the test suite.
//
//   bench_soak [--workers 32] [--shards 2] [--params 16384] [--seconds 30] [--io-threads 1]
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "bench/bench_support.h"
#include "kernels/foundation/partition.h"
#include "net/ps_client.h"
#include "net/ps_server.h"

#define RUN 0x50a50a50a50a0001ull
#define MAX_SHARDS 16
#define MAX_WORKERS 1024
#define MAX_SECONDS 3600
#define GRAD_VALUE (1.0f / 1024.0f)
// Latency histogram: 16 bins per power of two from 1 us to 2^26 us (67 s).
#define LAT_SUB 16
#define LAT_OCTAVES 26
#define LAT_BINS (LAT_SUB * LAT_OCTAVES)

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_soak: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

typedef struct opts {
    size_t workers, shards, params, seconds;
    int io_threads;
} opts_t;

typedef struct server {
    void *ctx;
    ps_server_t *s;
    pthread_t tid;
    int rc;
    char err[512];
} server_t;

typedef struct worker {
    const opts_t *o;
    void *ctx;
    const char *const *endpoints;
    uint32_t id;
    double deadline;
    _Atomic uint64_t *pushed;  // pushes acknowledged, all workers (for the per-second rate)
    uint64_t pushes;  // pushes this worker made (each to every shard), all acknowledged
    uint64_t acked;  // push messages acknowledged (one per shard per push)
    uint64_t retries;
    uint64_t hist[LAT_BINS];
    double max_latency_s;
    char err[512];
    int failed;
    pthread_t tid;
} worker_t;

static atomic_int stop_servers;

static void *serve(void *arg) {
    server_t *sv = arg;
    sv->rc = ps_server_run(sv->s, &stop_servers, sv->err, sizeof sv->err);
    return NULL;
}

static size_t latency_bin(double s) {
    double us = s * 1e6;
    if (us < 1.0) return 0;
    double octave = floor(log2(us));
    size_t sub = (size_t)((us / exp2(octave) - 1.0) * LAT_SUB);
    size_t bin = (size_t)octave * LAT_SUB + (sub < LAT_SUB ? sub : LAT_SUB - 1);
    return bin < LAT_BINS ? bin : LAT_BINS - 1;
}

static double bin_upper_s(size_t bin) {
    double octave = (double)(bin / LAT_SUB), sub = (double)(bin % LAT_SUB);
    return exp2(octave) * (1.0 + (sub + 1.0) / LAT_SUB) * 1e-6;
}

static void *work(void *arg) {
    worker_t *w = arg;
    const opts_t *o = w->o;
    ps_client_t *c =
        ps_client_new(w->ctx, RUN, w->id, w->endpoints, o->shards, o->params, 0, 60000, w->err, sizeof w->err);
    if (!c) {
        w->failed = 1;
        return NULL;
    }
    uint64_t clock = 0;
    while (bench_now_s() < w->deadline) {
        double t0 = bench_now_s();
        float *const *frames = ps_client_push_frames(c, w->err, sizeof w->err);
        if (!frames) goto fail;
        for (size_t k = 0; k < o->shards; k++) {
            size_t begin, end;
            shard_range(o->params, o->shards, k, &begin, &end);
            for (size_t j = 0; j < end - begin; j++) frames[k][j] = GRAD_VALUE;
        }
        if (ps_client_push_commit(c, clock++, 1, 0, w->err, sizeof w->err) != 0 ||
            ps_client_wait_acks(c, w->err, sizeof w->err) != 0)
            goto fail;
        double dt = bench_now_s() - t0;
        w->hist[latency_bin(dt)]++;
        if (dt > w->max_latency_s) w->max_latency_s = dt;
        atomic_fetch_add_explicit(w->pushed, 1, memory_order_relaxed);
        w->pushes++;
    }
    if (ps_client_bye(c, w->err, sizeof w->err) != 0) goto fail;
    ps_client_stats_t st;
    ps_client_get_stats(c, &st);
    w->acked = st.pushes_acked;
    w->retries = st.retries;
    ps_client_destroy(&c);
    return NULL;
fail:
    w->failed = 1;
    ps_client_destroy(&c);
    return NULL;
}

// Resident set size in MiB (/proc/self/statm), or NaN.
static double rss_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, resident;
    int ok = f && fscanf(f, "%llu %llu", &size, &resident) == 2;
    if (f) fclose(f);
    return ok ? (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0) : NAN;
}

static size_t parse_size(const char *flag, const char *v, size_t lo, size_t hi) {
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "bench_soak: %s %s: expected an integer in %zu..%zu\n", flag, v, lo, hi);
        exit(2);
    }
    return (size_t)x;
}

int main(int argc, char **argv) {
    opts_t o = {32, 2, 16384, 30, 1};
    for (int i = 1; i < argc; i += 2) {  // flag, value
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_soak: %s needs a value (usage: see the top of bench/bench_soak.c)\n", a);
            return 2;
        }
        if (strcmp(a, "--workers") == 0)
            o.workers = parse_size(a, v, 1, MAX_WORKERS);
        else if (strcmp(a, "--shards") == 0)
            o.shards = parse_size(a, v, 1, MAX_SHARDS);
        else if (strcmp(a, "--params") == 0)
            o.params = parse_size(a, v, 1, 1u << 28);
        else if (strcmp(a, "--seconds") == 0)
            o.seconds = parse_size(a, v, 3, MAX_SECONDS);
        else if (strcmp(a, "--io-threads") == 0)
            o.io_threads = (int)parse_size(a, v, 1, 64);
        else {
            fprintf(stderr, "bench_soak: unknown flag %s\n", a);
            return 2;
        }
    }
    char err[512];
    server_t servers[MAX_SHARDS];
    char endpoint[MAX_SHARDS][256];
    const char *endpoints[MAX_SHARDS];
    float *zeros = calloc(o.params, sizeof *zeros);
    worker_t *workers = calloc(o.workers, sizeof *workers);
    if (!zeros || !workers) die("out of memory", NULL);
    atomic_init(&stop_servers, 0);
    for (size_t k = 0; k < o.shards; k++) {
        ps_config_t c;
        memset(&c, 0, sizeof c);
        c.run_id = RUN;
        c.shard = k;
        c.n_shards = o.shards;
        c.n_params = o.params;
        c.n_workers = o.workers;
        c.mode = SYNC_MODE_ASP;
        c.lr = 1.0f;
        c.memory_allowance = SIZE_MAX;  // no memory guard: the soak's workers share the process
        c.quiet = 1;
        servers[k].ctx = zmq_ctx_new();
        if (!servers[k].ctx) die("zmq_ctx_new", zmq_strerror(errno));
        size_t begin, end;
        shard_range(o.params, o.shards, k, &begin, &end);
        servers[k].s = ps_server_new(servers[k].ctx, &c, "tcp://127.0.0.1:*", zeros + begin, err, sizeof err);
        if (!servers[k].s) die("ps_server_new", err);
        snprintf(endpoint[k], sizeof endpoint[k], "%s", ps_server_endpoint(servers[k].s));
        endpoints[k] = endpoint[k];
        if (pthread_create(&servers[k].tid, NULL, serve, &servers[k]) != 0) die("pthread_create", NULL);
    }
    void *wctx = zmq_ctx_new();
    if (!wctx || zmq_ctx_set(wctx, ZMQ_IO_THREADS, o.io_threads) != 0) die("zmq_ctx_new", zmq_strerror(errno));
    _Atomic uint64_t pushed;
    atomic_init(&pushed, 0);
    double start = bench_now_s(), deadline = start + (double)o.seconds;
    for (size_t i = 0; i < o.workers; i++) {
        worker_t *w = &workers[i];
        w->o = &o;
        w->ctx = wctx;
        w->endpoints = endpoints;
        w->id = (uint32_t)i;
        w->deadline = deadline;
        w->pushed = &pushed;
        if (pthread_create(&w->tid, NULL, work, w) != 0) die("pthread_create", NULL);
    }
    // One sample a second: pushes acknowledged in that second, and memory.
    double rate[MAX_SECONDS], rss[MAX_SECONDS + 1];
    size_t n_samples = 0;
    uint64_t last = 0;
    rss[0] = rss_mib();
    for (double next = start + 1.0; next <= deadline + 1e-9 && n_samples < MAX_SECONDS; next += 1.0) {
        double now = bench_now_s();
        if (next > now) usleep((useconds_t)((next - now) * 1e6));
        uint64_t total = atomic_load(&pushed);
        rate[n_samples] = (double)(total - last);
        last = total;
        rss[++n_samples] = rss_mib();
    }
    uint64_t pushes = 0, acked = 0, retries = 0, hist[LAT_BINS] = {0};
    double max_latency = 0;
    int failed = 0;
    for (size_t i = 0; i < o.workers; i++) {
        worker_t *w = &workers[i];
        pthread_join(w->tid, NULL);
        if (w->failed) {
            fprintf(stderr, "bench_soak: worker %zu: %s\n", i, w->err);
            failed = 1;
        }
        pushes += w->pushes;
        acked += w->acked;
        retries += w->retries;
        for (size_t b = 0; b < LAT_BINS; b++) hist[b] += w->hist[b];
        if (w->max_latency_s > max_latency) max_latency = w->max_latency_s;
    }
    double wall = bench_now_s() - start;
    if (failed) {
        atomic_store(&stop_servers, 1);
        for (size_t k = 0; k < o.shards; k++) pthread_join(servers[k].tid, NULL);
        return 1;
    }
    // Every worker said goodbye: the shards end by themselves.
    uint64_t applied_total = 0, duplicates = 0;
    int values_ok = 1;
    for (size_t k = 0; k < o.shards; k++) {
        pthread_join(servers[k].tid, NULL);
        if (servers[k].rc != 0) die("ps_server_run", servers[k].err);
        ps_stats_t st;
        ps_server_stats(servers[k].s, &st);
        applied_total += st.pushes_applied;
        duplicates += st.duplicates;
        size_t begin, end;
        shard_range(o.params, o.shards, k, &begin, &end);
        // Every push the workers were acknowledged, applied once: -pushes * 2^-10 everywhere.
        float want = -(float)pushes / 1024.0f;
        const float *v = ps_server_values(servers[k].s);
        for (size_t j = 0; j < end - begin; j++) values_ok &= v[j] == want;
    }
    // Quantiles from the histogram (each reported as its bin's upper edge).
    uint64_t count = 0;
    for (size_t b = 0; b < LAT_BINS; b++) count += hist[b];
    double q[2] = {0.5, 0.99}, qv[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        uint64_t seen = 0, need = (uint64_t)ceil(q[i] * (double)count);
        for (size_t b = 0; b < LAT_BINS; b++) {
            seen += hist[b];
            if (seen >= need) {
                qv[i] = bin_upper_s(b);
                break;
            }
        }
    }
    // The first second is the warm-up (connections, first allocations).
    double sorted[MAX_SECONDS];
    size_t n_rates = n_samples > 1 ? n_samples - 1 : n_samples;
    memcpy(sorted, rate + (n_samples - n_rates), n_rates * sizeof *sorted);
    double rmin = sorted[0], rmax = sorted[0];
    for (size_t i = 1; i < n_rates; i++) {
        if (sorted[i] < rmin) rmin = sorted[i];
        if (sorted[i] > rmax) rmax = sorted[i];
    }
    double rmed = bench_median(sorted, (int)n_rates);
    // Memory: warm-up first (each thread's stack and malloc arena fill up), so
    // flatness is judged over the second half of the run.
    double rss_first = rss[2 < n_samples ? 2 : n_samples], rss_half = rss[n_samples / 2], rss_last = rss[n_samples];
    double rss_peak = 0;
    for (size_t i = 0; i <= n_samples; i++)
        if (rss[i] > rss_peak) rss_peak = rss[i];
    printf(
        "bench_soak: %zu workers -> %zu shards, dense pushes of %zu floats (%.0f KiB per push, all shards), %zu s, "
        "%ld CPUs\n",
        o.workers, o.shards, o.params, (double)o.params * 4 / 1024, o.seconds, sysconf(_SC_NPROCESSORS_ONLN));
    printf("\n%-34s %14s\n", "figure", "value");
    printf("%-34s %14llu\n", "pushes acknowledged (all workers)", (unsigned long long)pushes);
    printf("%-34s %14.0f\n", "pushes/s, median 1-s window", rmed);
    printf("%-34s %14.0f\n", "pushes/s, slowest 1-s window", rmin);
    printf("%-34s %14.0f\n", "pushes/s, fastest 1-s window", rmax);
    printf("%-34s %14.2f\n", "slowest/median window", rmed > 0 ? rmin / rmed : NAN);
    printf("%-34s %14.3f\n", "push latency p50, ms (bin edge)", qv[0] * 1e3);
    printf("%-34s %14.3f\n", "push latency p99, ms (bin edge)", qv[1] * 1e3);
    printf("%-34s %14.3f\n", "push latency max, ms", max_latency * 1e3);
    printf("%-34s %14.1f\n", "RSS after 2 s, MiB", rss_first);
    printf("%-34s %14.1f\n", "RSS at half time, MiB", rss_half);
    printf("%-34s %14.1f\n", "RSS at the end, MiB", rss_last);
    printf("%-34s %14.1f\n", "RSS peak, MiB", rss_peak);
    printf("%-34s %+13.1f%%\n", "RSS growth, second half", 100.0 * (rss_last - rss_half) / rss_half);
    printf("%-34s %14llu\n", "requests resent (retries)", (unsigned long long)retries);
    printf("%-34s %14llu\n", "copies acknowledged again", (unsigned long long)duplicates);
    printf("%-34s %14llu\n", "push messages acknowledged", (unsigned long long)acked);
    printf("%-34s %14llu\n", "push messages applied (all shards)", (unsigned long long)applied_total);
    int counts_ok = applied_total == acked && acked == pushes * o.shards;
    printf("%-34s %14s\n", "lost or double-applied (counts)", counts_ok ? "none" : "MISMATCH");
    printf("%-34s %14s\n", "lost or double-applied (values)", values_ok ? "none" : "MISMATCH");
    printf("\nRSS every second, MiB:");
    for (size_t i = 0; i <= n_samples; i++) printf(" %.1f", rss[i]);
    printf("\npushes/s every second:");
    for (size_t i = 0; i < n_samples; i++) printf(" %.0f", rate[i]);
    printf("\n(%.1f s in all, workers included)\n", wall);
    for (size_t k = 0; k < o.shards; k++) {
        ps_server_destroy(&servers[k].s);
        zmq_ctx_term(servers[k].ctx);
    }
    zmq_ctx_term(wctx);
    free(zeros);
    free(workers);
    return counts_ok && values_ok ? 0 : 1;
}
