// Shared-memory allreduce (net/shm_allreduce.h) among real processes: groups
// of 1 to 4 forked ranks make a sequence of calls of 0, 1, n - 1, 1001 and
// 235,146 values (940,584 bytes), back to back with changing counts, from the
// caller's array and from the rank's buffer in the segment. Every rank checks
// its result against the serial sum in rank order, bit for bit (the data mix
// magnitudes so that any other order gives other bits: checked too). A rank
// that exits or stops calling makes every other rank fail with an error
// naming it; ranks that disagree on a count fail. A segment left by a killed
// run, or a foreign file of that name, does not stop the next run; a segment
// held by live ranks of another group, or a rank attached twice, is refused;
// no run leaves its name behind. No check depends on elapsed time: the
// timeouts are the failure path of a wait, and the deadlines only stop a hang.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/shm_allreduce.h"
#include "tests/support/proc_support.h"
#include "tests/support/test_support.h"

#define RUN 0x73686d0000000001ull
#define MAX_RANKS 4
#define BIG 235146  // 940,584 bytes of floats
#define CALL_TIMEOUT_MS 30000
#define STUCK_TIMEOUT_MS 300
#define HANG_S 120.0

typedef struct call {
    size_t count;
    int in_segment;  // data is shm_allreduce_buffer()
} call_t;

// Rank r's input to call c: magnitudes from 2^-20 to 2^20 and both signs, so
// that the sum's bits depend on the order of the additions.
static void fill(float *x, size_t count, size_t call, size_t rank) {
    rng_t g;
    rng_seed(&g, 1000 + call, rank);
    for (size_t i = 0; i < count; i++) {
        double m = ldexp(0.5 + rng_uniform(&g), (int)rng_below(&g, 41) - 20);
        x[i] = (float)(rng_below(&g, 2) ? m : -m);
    }
}

// The serial sum in rank order, ((x_0 + x_1) + x_2) + ..., in float; reversed: ((x_{n-1} + x_{n-2}) + ...).
static void serial_sum(float *want, float *tmp, size_t count, size_t call, size_t n, int reversed) {
    memset(want, 0, count * sizeof *want);
    for (size_t k = 0; k < n; k++) {
        fill(tmp, count, call, reversed ? n - 1 - k : k);
        for (size_t i = 0; i < count; i++) want[i] = k == 0 ? tmp[i] : want[i] + tmp[i];
    }
}

static char *segment_path(uint64_t run) {
    static char path[128];
    char name[64];
    CHECK(shm_allreduce_name(run, name, sizeof name) == 0);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return path;
}

static int segment_exists(uint64_t run) { return access(segment_path(run), F_OK) == 0; }

// Forks n ranks running fn(rank, n, arg); returns each one's exit status
// (128 + signal when killed) in st. A rank still running after HANG_S is a hang: killed, and the test fails.
typedef int (*rank_fn)(size_t rank, size_t n, const void *arg);
static void run_group(size_t n, rank_fn fn, const void *arg, int *st) {
    pid_t pid[MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (size_t r = 0; r < n; r++) {
        pid[r] = fork();
        CHECK(pid[r] >= 0);
        if (pid[r] == 0) _exit(fn(r, n, arg));
    }
    for (size_t r = 0; r < n; r++) {
        st[r] = proc_wait(pid[r], HANG_S);
        if (st[r] < 0) fprintf(stderr, "rank %zu of %zu hung\n", r, n);
        CHECK(st[r] >= 0);
    }
}

// ---- correct sums -------------------------------------------------------------

typedef struct seq_arg {
    uint64_t run;
    const call_t *calls;
    size_t n_calls;
} seq_arg_t;

static int rank_sequence(size_t rank, size_t n, const void *argp) {
    const seq_arg_t *a = argp;
    char err[512];
    size_t max = 0;
    for (size_t c = 0; c < a->n_calls; c++) max = a->calls[c].count > max ? a->calls[c].count : max;
    shm_allreduce_t *s = shm_allreduce_new(a->run, rank, n, max, err, sizeof err);
    if (!s) {
        fprintf(stderr, "rank %zu: %s\n", rank, err);
        return 1;
    }
    float *own = malloc((max + 1) * sizeof *own), *want = malloc((max + 1) * sizeof *want),
          *tmp = malloc((max + 1) * sizeof *tmp);
    CHECK(own && want && tmp);
    for (size_t c = 0; c < a->n_calls; c++) {
        size_t count = a->calls[c].count;
        float *x = a->calls[c].in_segment ? shm_allreduce_buffer(s) : own;
        fill(x, count, c, rank);
        own[count] = 12345.0f;  // past the end: must stay
        if (shm_allreduce_sum(s, x, count, CALL_TIMEOUT_MS, err, sizeof err) != 0) {
            fprintf(stderr, "rank %zu: call %zu: %s\n", rank, c, err);
            return 1;
        }
        serial_sum(want, tmp, count, c, n, 0);
        if (memcmp(x, want, count * sizeof *x) != 0 || own[count] != 12345.0f) {
            size_t i = 0;
            while (i < count && memcmp(&x[i], &want[i], sizeof *x) == 0) i++;
            fprintf(stderr, "rank %zu of %zu: call %zu (%zu values): element %zu is %.9g, the serial sum %.9g\n", rank,
                    n, c, count, i, i < count ? x[i] : own[count], i < count ? want[i] : 12345.0);
            return 1;
        }
        // The data are such that another order gives other bits.
        if (n >= 3 && count >= 1001) {
            serial_sum(tmp, want, count, c, n, 1);
            if (memcmp(x, tmp, count * sizeof *x) == 0) {
                fprintf(stderr, "rank %zu: call %zu: the reverse order gives the same bits: the check is blind\n", rank,
                        c);
                return 1;
            }
        }
    }
    free(own);
    free(want);
    free(tmp);
    shm_allreduce_destroy(&s);
    return s == NULL ? 0 : 1;
}

static void test_sums(void) {
    for (size_t n = 1; n <= MAX_RANKS; n++) {
        const call_t calls[] = {{1, 0},    {n > 1 ? n - 1 : 0, 0},
                                {1001, 0}, {BIG, 0},
                                {BIG, 0},  {0, 0},
                                {7, 0},    {BIG, 1},
                                {1001, 1}, {BIG, 0},
                                {1, 1},    {1001, 0}};
        seq_arg_t a = {RUN + n, calls, sizeof calls / sizeof *calls};
        int st[MAX_RANKS];
        run_group(n, rank_sequence, &a, st);
        for (size_t r = 0; r < n; r++) {
            if (st[r] != 0) fprintf(stderr, "sums: rank %zu of %zu exited with %d\n", r, n, st[r]);
            CHECK(st[r] == 0);
        }
        CHECK(!segment_exists(a.run));  // the last rank in removed the name
    }
    printf("sums: 1-4 ranks, 12 calls each, bit for bit the serial sum in rank order\n");
}

// ---- sums mapped --------------------------------------------------------------

// The map of the checks below: a step of `out` by the average, the values'
// new place, recording which elements this rank mapped.
typedef struct step_ctx {
    const float *out, *total;
    size_t mapped, lo, hi;  // how many elements, the lowest and one past the highest
} step_ctx_t;

static void step_map(void *ctx, size_t offset, float *values, size_t n) {
    step_ctx_t *c = ctx;
    for (size_t i = 0; i < n; i++) values[i] = c->out[offset + i] - 0.25f * (values[i] / *c->total);
    c->mapped += n;
    if (offset < c->lo) c->lo = offset;
    if (offset + n > c->hi) c->hi = offset + n;
}

static float out_at(size_t i) { return (float)(i % 97) * 0.5f - 3.0f; }

// Calls of shm_allreduce_sum_map among plain sums: call c's weights are
// rank + c (all 0 in call 0: nothing mapped, out left alone).
static int rank_maps(size_t rank, size_t n, const void *argp) {
    const seq_arg_t *a = argp;
    char err[512];
    shm_allreduce_t *s = shm_allreduce_new(a->run, rank, n, BIG, err, sizeof err);
    if (!s) {
        fprintf(stderr, "rank %zu: %s\n", rank, err);
        return 1;
    }
    float *out = malloc(BIG * sizeof *out), *want = malloc(BIG * sizeof *want), *tmp = malloc(BIG * sizeof *tmp);
    CHECK(out && want && tmp);
    for (size_t c = 0; c < a->n_calls; c++) {
        size_t count = a->calls[c].count;
        float *x = shm_allreduce_buffer(s);
        fill(x, count, c, rank);
        if (c % 2 == 1) {  // a plain sum between the maps keeps its bits
            if (shm_allreduce_sum(s, x, count, CALL_TIMEOUT_MS, err, sizeof err) != 0) return 1;
            serial_sum(want, tmp, count, c, n, 0);
            if (memcmp(x, want, count * sizeof *x) != 0) return 1;
            continue;
        }
        for (size_t i = 0; i < count; i++) out[i] = out_at(i);
        float total = -1.0f, weight = c == 0 ? 0.0f : (float)(rank + c), want_total = 0.0f;
        for (size_t r = 0; r < n; r++) {
            float w = c == 0 ? 0.0f : (float)(r + c);
            want_total = r == 0 ? w : want_total + w;
        }
        step_ctx_t ctx = {out, &total, 0, count, 0};
        if (shm_allreduce_sum_map(s, x, count, weight, &total, step_map, &ctx, out, CALL_TIMEOUT_MS, err, sizeof err) !=
            0) {
            fprintf(stderr, "rank %zu: map call %zu: %s\n", rank, c, err);
            return 1;
        }
        size_t b, e;
        shm_allreduce_slice(count, n, rank, &b, &e);
        int mapped = want_total > 0.0f;
        if (total != want_total || ctx.mapped != (mapped ? e - b : 0) || (ctx.mapped && (ctx.lo != b || ctx.hi != e))) {
            fprintf(stderr,
                    "rank %zu of %zu: map call %zu: total %g (want %g), mapped %zu in [%zu, %zu) of [%zu, %zu)\n", rank,
                    n, c, total, want_total, ctx.mapped, ctx.lo, ctx.hi, b, e);
            return 1;
        }
        serial_sum(want, tmp, count, c, n, 0);
        for (size_t i = 0; i < count; i++) {
            float expect = mapped ? out_at(i) - 0.25f * (want[i] / want_total) : out_at(i);
            if (memcmp(&out[i], &expect, sizeof expect) != 0) {
                fprintf(stderr, "rank %zu of %zu: map call %zu: element %zu is %.9g, want %.9g\n", rank, n, c, i,
                        out[i], expect);
                return 1;
            }
        }
    }
    free(out);
    free(want);
    free(tmp);
    shm_allreduce_destroy(&s);
    return 0;
}

static void test_maps(void) {
    for (size_t n = 1; n <= MAX_RANKS; n++) {
        const call_t calls[] = {{BIG, 1}, {1001, 1}, {BIG, 1}, {7, 1}, {1001, 1}, {BIG, 1}, {0, 1}, {1, 1}, {n, 1}};
        seq_arg_t a = {RUN + 16 + n, calls, sizeof calls / sizeof *calls};
        int st[MAX_RANKS];
        run_group(n, rank_maps, &a, st);
        for (size_t r = 0; r < n; r++) CHECK(st[r] == 0);
        CHECK(!segment_exists(a.run));
    }
    printf(
        "maps: 1-4 ranks, each maps exactly its slice; out is the serial sum mapped, bit for bit, on every rank; "
        "weights summing to 0 map nothing; plain sums between keep their bits\n");
}

// ---- failures ---------------------------------------------------------------

enum { EXPECTED_FAILURE = 3 };

typedef struct fail_arg {
    uint64_t run;
    int mode;  // MODE_*
    size_t victim;  // the rank that exits, is killed, stops, or passes another count
    const char *needle;  // every other rank's error must hold it
    int gate;  // MODE_KILL_IN_CALL: the others read a byte from it before their second call
} fail_arg_t;

enum { MODE_EXIT, MODE_KILL_IN_CALL, MODE_STOP, MODE_COUNT };

static int rank_fails(size_t rank, size_t n, const void *argp) {
    const fail_arg_t *a = argp;
    char err[512];
    float x[1001];
    shm_allreduce_t *s = shm_allreduce_new(a->run, rank, n, 1001, err, sizeof err);
    if (!s) {
        fprintf(stderr, "rank %zu: %s\n", rank, err);
        return 1;
    }
    fill(x, 1001, 0, rank);
    if (shm_allreduce_sum(s, x, 1001, CALL_TIMEOUT_MS, err, sizeof err) != 0) {
        fprintf(stderr, "rank %zu: first call: %s\n", rank, err);
        return 1;
    }
    size_t count = 1001;
    if (rank == a->victim) {
        if (a->mode == MODE_EXIT) _exit(0);  // no destroy: the process just ends
        if (a->mode == MODE_STOP) pause();  // alive, never calls again; the parent kills it
        // Killed by the alarm while it waits inside the call for the others,
        // which the parent lets in only once it is dead: its input is posted,
        // its slice is never summed.
        if (a->mode == MODE_KILL_IN_CALL) alarm(1);
        if (a->mode == MODE_COUNT) count = 1000;
    } else if (a->mode == MODE_KILL_IN_CALL) {
        char go;
        if (read(a->gate, &go, 1) != 1) return 1;
    }
    int timeout = a->mode == MODE_STOP ? STUCK_TIMEOUT_MS : CALL_TIMEOUT_MS;
    int rc = shm_allreduce_sum(s, x, count, timeout, err, sizeof err);
    if (rank == a->victim && a->mode == MODE_KILL_IN_CALL) {
        fprintf(stderr, "rank %zu: the call returned %d before the alarm: %s\n", rank, rc, err);
        return 1;
    }
    if (rc == 0) {
        fprintf(stderr, "rank %zu: the call succeeded without rank %zu\n", rank, a->victim);
        return 1;
    }
    if ((rank != a->victim || a->mode == MODE_COUNT) && !strstr(err, a->needle)) {
        fprintf(stderr, "rank %zu: the error does not say \"%s\": %s\n", rank, a->needle, err);
        return 1;
    }
    fprintf(stderr, "  %s rank %zu of %zu: %s\n",
            a->mode == MODE_EXIT           ? "exit"
            : a->mode == MODE_KILL_IN_CALL ? "kill"
            : a->mode == MODE_STOP         ? "stop"
                                           : "count",
            rank, n, err);
    // Every later call fails at once.
    if (shm_allreduce_sum(s, x, count, timeout, err, sizeof err) == 0) {
        fprintf(stderr, "rank %zu: a call after the failure succeeded\n", rank);
        return 1;
    }
    shm_allreduce_destroy(&s);
    return EXPECTED_FAILURE;
}

static void test_failures(void) {
    // A rank exits between calls; one is killed while the others wait in a
    // call it has entered (its input posted, its slice never summed); one
    // stays alive but stops calling (the timeout); rank counts disagree.
    const struct {
        int mode;
        size_t n, victim;
        const char *what;  // in every other rank's error
    } cases[] = {{MODE_EXIT, 4, 2, "rank 2 (pid"},
                 {MODE_EXIT, 2, 0, "rank 0 (pid"},
                 {MODE_KILL_IN_CALL, 4, 1, "rank 1 (pid"},
                 {MODE_STOP, 4, 3, "rank 3 (pid"},
                 {MODE_COUNT, 2, 1, "passed"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int gate[2];
        CHECK(pipe(gate) == 0);
        size_t n = cases[c].n, victim = cases[c].victim;
        fail_arg_t a = {RUN + 100 + c, cases[c].mode, victim, cases[c].what, gate[0]};
        int st[MAX_RANKS];
        pid_t pid[MAX_RANKS];
        fflush(stdout);
        fflush(stderr);
        for (size_t r = 0; r < n; r++) {
            pid[r] = fork();
            CHECK(pid[r] >= 0);
            if (pid[r] == 0) _exit(rank_fails(r, n, &a));
        }
        if (cases[c].mode == MODE_KILL_IN_CALL) {
            st[victim] = proc_wait(pid[victim], HANG_S);
            for (size_t r = 1; r < n; r++) CHECK(write(gate[1], "g", 1) == 1);
        }
        for (size_t r = 0; r < n; r++)
            if (r != victim) st[r] = proc_wait(pid[r], HANG_S);
        if (cases[c].mode == MODE_STOP) kill(pid[victim], SIGKILL);  // it would wait for ever
        if (cases[c].mode != MODE_KILL_IN_CALL) st[victim] = proc_wait(pid[victim], HANG_S);
        close(gate[0]);
        close(gate[1]);
        for (size_t r = 0; r < cases[c].n; r++) {
            int want = r != cases[c].victim          ? EXPECTED_FAILURE
                       : cases[c].mode == MODE_EXIT  ? 0
                       : cases[c].mode == MODE_COUNT ? EXPECTED_FAILURE
                                                     : 128 + SIGKILL;
            if (cases[c].mode == MODE_KILL_IN_CALL && r == cases[c].victim) want = 128 + SIGALRM;
            if (st[r] != want)
                fprintf(stderr, "failures case %zu (%s): rank %zu exited with %d, not %d\n", c, cases[c].what, r, st[r],
                        want);
            CHECK(st[r] == want);
        }
        CHECK(!segment_exists(a.run));
    }
    printf("failures: a rank that exits, is killed in a call, or stops calling is named by every other rank\n");
}

// ---- leftovers and refusals ---------------------------------------------------

static int rank_attach_and_die(size_t rank, size_t n, const void *argp) {
    char err[512];
    shm_allreduce_t *s = shm_allreduce_new(*(const uint64_t *)argp, 0, 2, 100, err, sizeof err);
    if (!s) {
        fprintf(stderr, "attach: %s\n", err);
        return 1;
    }
    raise(SIGKILL);
    return 1;
}

static void test_leftovers(void) {
    uint64_t run = RUN + 200;
    const call_t calls[] = {{1001, 0}, {BIG, 0}, {3, 1}};
    seq_arg_t a = {run, calls, 3};
    int st[MAX_RANKS];
    // A run killed while its ranks gathered leaves its segment (for 2 ranks of 100 values) behind.
    run_group(1, rank_attach_and_die, &run, st);
    CHECK(st[0] == 128 + SIGKILL);
    CHECK(segment_exists(run));
    run_group(3, rank_sequence, &a, st);  // another layout: reset, not refused
    for (size_t r = 0; r < 3; r++) CHECK(st[r] == 0);
    CHECK(!segment_exists(run));
    // A foreign file of that name.
    int fd = open(segment_path(run), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "not a segment", 13) == 13);
    close(fd);
    run_group(2, rank_sequence, &a, st);
    for (size_t r = 0; r < 2; r++) CHECK(st[r] == 0);
    CHECK(!segment_exists(run));
    printf("leftovers: a killed run's segment and a foreign file are replaced; no run leaves its name\n");
}

static void test_refusals(void) {
    uint64_t run = RUN + 300;
    char err[512];
    CHECK(shm_allreduce_new(run, 2, 2, 10, err, sizeof err) == NULL);
    CHECK(strstr(err, "rank 2 of 2"));
    CHECK(!segment_exists(run));
    // Rank 0 of a group of 2 is attached (this process); the segment is held.
    shm_allreduce_t *s = shm_allreduce_new(run, 0, 2, 100, err, sizeof err);
    CHECK_OK(s == NULL, err);
    CHECK(segment_exists(run));
    CHECK(shm_allreduce_new(run, 1, 3, 100, err, sizeof err) == NULL);  // another group on the same run id
    CHECK(strstr(err, "another layout") || strstr(err, "another group"));
    CHECK(shm_allreduce_new(run, 1, 2, 50, err, sizeof err) == NULL);
    CHECK(strstr(err, "another layout") || strstr(err, "another group"));
    CHECK(shm_allreduce_new(run, 0, 2, 100, err, sizeof err) == NULL);  // rank 0 twice
    CHECK(strstr(err, "rank 0 is already attached"));
    float x[101];
    CHECK(shm_allreduce_sum(s, x, 101, 100, err, sizeof err) != 0);  // more than max_count
    CHECK(strstr(err, "101 values exceed the 100"));
    // Rank 1 never comes: the call fails by its timeout, naming it.
    CHECK(shm_allreduce_sum(s, x, 10, STUCK_TIMEOUT_MS, err, sizeof err) != 0);
    CHECK(strstr(err, "rank 1 has not attached"));
    shm_allreduce_destroy(&s);
    CHECK(s == NULL);
    CHECK(!segment_exists(run));  // the last one out removed it
    printf("refusals: bad ranks, another group on the same name, a rank twice, too many values, an absent rank\n");
}

int main(void) {
    if (access("/dev/shm", W_OK) != 0) return test_skip("/dev/shm is not writable here: %s", strerror(errno));
    test_refusals();
    test_sums();
    test_maps();
    test_failures();
    test_leftovers();
    return 0;
}
