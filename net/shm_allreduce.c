// Allreduce through a shared-memory segment (shm_allreduce.h, docs/allreduce.md).
// F_OFD_SETLK and F_OFD_GETLK need _GNU_SOURCE, which the build defines.
#include "net/shm_allreduce.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/partition.h"
#include "net/futex_word.h"

#define SHM_MAGIC 0x6173676473686d31ull  // "asgdshm1"
#define SHM_VERSION 1u
#define SHM_LINE 128  // one rank's counters: their own pair of cache lines
#define SHM_PAGE 4096
#define SHM_BLOCK 2048  // floats summed per pass: the partial sums stay in L1
#define SHM_SPINS 4000  // pause-spins before a waiter yields (when ranks <= CPUs)
#define SHM_YIELDS 64  // sched_yields before it sleeps on the futex
#define SHM_SLEEP_MS 10  // futex sleeps between checks of the peer's lock, the failure mark, the timeout
#define LOCK_SETUP 0  // lock bytes: 0 serialises attach and detach, 1 + r is held by rank r

typedef struct shm_header {
    uint64_t magic;
    uint32_t version, n;
    uint64_t max_count;
    uint64_t run_id;
    uint64_t bytes;  // the segment's size
    // 0, or the first failure: (1 + the rank that found it) | (1 + the rank
    // at fault) << 24 | why << 48 (fail_why_t).
    _Atomic uint64_t failed;
} shm_header_t;

typedef enum fail_why { FAIL_EXITED = 1, FAIL_STUCK, FAIL_ABSENT, FAIL_COUNT } fail_why_t;
static const char *const fail_text[] = {"", "has exited", "did not take its next step in time", "never attached",
                                        "passed another count"};
#define SHM_MAX_RANKS ((1u << 24) - 2)

// Rank r's line. Written only by rank r, except sleepers.
typedef struct shm_slot {
    _Atomic uint32_t step;  // 2c - 1: call c's input is in place; 2c: call c's slice is summed
    _Atomic uint32_t sleepers;  // peers asleep on step's futex: the poster wakes them
    _Atomic int32_t pid;  // set when the rank attaches (0: never attached)
    _Atomic int32_t cpu;  // the CPU the rank ran on when it last posted a step
    uint64_t count;  // the current call's count, for the peers to compare
    float weight;  // shm_allreduce_sum_map: the current call's weight
} shm_slot_t;

struct shm_allreduce {
    size_t rank, n, max_count;
    int fd;
    char name[64];
    unsigned char *base;
    size_t bytes;
    shm_header_t *hdr;
    float *input0, *result;  // rank 0's input area (the others follow, `area` floats apart), the result area
    size_t area;
    uint64_t seq;  // calls started
    unsigned spins;
    int avx;  // sum with AVX
    const float **srcs;  // n: where a call's slice of each rank's input is
    double waited_s;  // in wait_step past its first look, over every call
};

_Static_assert(sizeof(shm_header_t) <= SHM_LINE, "header fits its line");
_Static_assert(sizeof(shm_slot_t) <= SHM_LINE, "slot fits its line");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "lock-free atomics: they are shared between processes");

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static shm_slot_t *slot(const shm_allreduce_t *s, size_t r) { return (shm_slot_t *)(s->base + SHM_LINE * (1 + r)); }
static float *input(const shm_allreduce_t *s, size_t r) { return s->input0 + r * s->area; }

// Layout for n ranks of max_count values: header line, n slot lines, then
// page-aligned areas (n inputs and the result). Returns 0, or -1 on overflow.
static int layout(size_t n, size_t max_count, size_t *data_off, size_t *area, size_t *bytes) {
    if (n > (SIZE_MAX / SHM_LINE) - 2 || max_count > (SIZE_MAX - SHM_PAGE) / sizeof(float)) return -1;
    *data_off = round_up(SHM_LINE * (1 + n), SHM_PAGE);
    size_t area_bytes = round_up(max_count * sizeof(float), SHM_PAGE);
    if (area_bytes && n + 1 > (SIZE_MAX - *data_off) / area_bytes) return -1;
    *area = area_bytes / sizeof(float);
    *bytes = *data_off + (n + 1) * area_bytes;
    return 0;
}

// ---- locks (open-file-description locks: per open file, dropped when the holder dies) ----

static int lock_byte(int fd, off_t at, off_t len, short type, int wait) {
    struct flock l = {.l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = len};
    int rc;
    while ((rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &l)) != 0 && errno == EINTR) {
    }
    return rc;
}

// 1 when another open file holds a lock on [at, at + len) (len 0: to the end), 0 when not, -1 on error.
static int lock_held(int fd, off_t at, off_t len) {
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = len};
    if (fcntl(fd, F_OFD_GETLK, &l) != 0) return -1;
    return l.l_type != F_UNLCK;
}

static int rank_alive(const shm_allreduce_t *s, size_t r) { return lock_held(s->fd, 1 + (off_t)r, 1) != 0; }

// 1 when fd is the file the name now refers to.
static int name_is(const char *name, int fd) {
    struct stat a, b;
    int other = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (other < 0) return 0;
    int same = fstat(other, &a) == 0 && fstat(fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
    close(other);
    return same;
}

int shm_allreduce_name(uint64_t run_id, char *out, size_t len) {
    int w = snprintf(out, len, "/asgd-ar-%u-%016llx", (unsigned)getuid(), (unsigned long long)run_id);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

// ---- attach / detach ----------------------------------------------------------

// Under the setup lock: the segment is either held by live ranks (check that it
// is ours and for the same group) or by nobody (reset it, whatever it holds).
static int attach_locked(shm_allreduce_t *s, uint64_t run_id, char *err, size_t err_len) {
    size_t data_off, bytes;
    if (layout(s->n, s->max_count, &data_off, &s->area, &bytes) != 0) {
        snprintf(err, err_len, "shm allreduce: %zu ranks of %zu values do not fit in memory", s->n, s->max_count);
        return -1;
    }
    int live = lock_held(s->fd, 1, 0);
    struct stat st;
    if (live < 0 || fstat(s->fd, &st) != 0) {
        snprintf(err, err_len, "shm allreduce: /dev/shm%s: %s", s->name, strerror(errno));
        return -1;
    }
    if (!live) {
        // Fresh, or left by ranks that are all gone: start from zeros.
        if (ftruncate(s->fd, 0) != 0 || ftruncate(s->fd, (off_t)bytes) != 0) {
            snprintf(err, err_len, "shm allreduce: cannot size /dev/shm%s to %zu bytes: %s", s->name, bytes,
                     strerror(errno));
            return -1;
        }
    } else if ((size_t)st.st_size != bytes) {
        snprintf(err, err_len,
                 "shm allreduce: rank %zu: /dev/shm%s is in use by live ranks with another layout (%lld bytes, "
                 "not %zu): is another run using run id %016llx with other ranks or counts?",
                 s->rank, s->name, (long long)st.st_size, bytes, (unsigned long long)run_id);
        return -1;
    }
    s->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (s->base == MAP_FAILED) {
        s->base = NULL;
        snprintf(err, err_len, "shm allreduce: cannot map /dev/shm%s (%zu bytes): %s", s->name, bytes, strerror(errno));
        return -1;
    }
    s->bytes = bytes;
    s->hdr = (shm_header_t *)s->base;
    s->input0 = (float *)(s->base + data_off);
    s->result = input(s, s->n);
    if (!live) {
        s->hdr->version = SHM_VERSION;
        s->hdr->n = (uint32_t)s->n;
        s->hdr->max_count = s->max_count;
        s->hdr->run_id = run_id;
        s->hdr->bytes = bytes;
        s->hdr->magic = SHM_MAGIC;
    } else if (s->hdr->magic != SHM_MAGIC || s->hdr->version != SHM_VERSION || s->hdr->n != s->n ||
               s->hdr->max_count != s->max_count || s->hdr->run_id != run_id) {
        snprintf(err, err_len,
                 "shm allreduce: rank %zu: /dev/shm%s is in use by live ranks of another group (%u ranks of "
                 "%llu values, not %zu of %zu)",
                 s->rank, s->name, s->hdr->n, (unsigned long long)s->hdr->max_count, s->n, s->max_count);
        return -1;
    } else if (atomic_load(&s->hdr->failed) != 0) {
        snprintf(err, err_len, "shm allreduce: rank %zu: the group on /dev/shm%s has failed; start a new run", s->rank,
                 s->name);
        return -1;
    } else if (atomic_load(&slot(s, s->rank)->pid) != 0) {
        int held = rank_alive(s, s->rank);
        snprintf(err, err_len, "shm allreduce: rank %zu %s (pid %d) on /dev/shm%s", s->rank,
                 held ? "is already attached" : "attached before and has exited",
                 (int)atomic_load(&slot(s, s->rank)->pid), s->name);
        return -1;
    }
    if (lock_byte(s->fd, 1 + (off_t)s->rank, 1, F_WRLCK, 0) != 0) {
        snprintf(err, err_len, "shm allreduce: rank %zu: cannot lock /dev/shm%s: %s", s->rank, s->name,
                 strerror(errno));
        return -1;
    }
    atomic_store(&slot(s, s->rank)->pid, (int32_t)getpid());
    // The last rank in removes the name: the mappings keep the memory, and a
    // run that dies from here on leaves nothing behind.
    size_t attached = 0;
    for (size_t r = 0; r < s->n; r++) attached += r == s->rank || lock_held(s->fd, 1 + (off_t)r, 1) == 1;
    if (attached == s->n) shm_unlink(s->name);
    return 0;
}

static void detach(shm_allreduce_t *s) {
    if (s->base) munmap(s->base, s->bytes);
    s->base = NULL;
    if (s->fd >= 0) close(s->fd);  // drops this file's locks
    s->fd = -1;
}

shm_allreduce_t *shm_allreduce_new(uint64_t run_id, size_t rank, size_t n, size_t max_count, char *err,
                                   size_t err_len) {
    if (n == 0 || rank >= n || n > SHM_MAX_RANKS) {
        snprintf(err, err_len, "shm allreduce: rank %zu of %zu ranks is not a rank", rank, n);
        return NULL;
    }
    shm_allreduce_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "shm allreduce: out of memory");
        return NULL;
    }
    s->rank = rank;
    s->n = n;
    s->max_count = max_count;
    s->fd = -1;
    s->srcs = calloc(n, sizeof *s->srcs);
    if (!s->srcs) {
        snprintf(err, err_len, "shm allreduce: out of memory");
        free(s);
        return NULL;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    // With more ranks than CPUs the peer being waited for may not be running:
    // spinning would only delay it.
    s->spins = cpus > 0 && (long)n <= cpus ? SHM_SPINS : 0;
#if defined(__x86_64__)
    s->avx = __builtin_cpu_supports("avx");
#endif
    if (shm_allreduce_name(run_id, s->name, sizeof s->name) != 0) abort();
    for (int tries = 0;; tries++) {
        s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (s->fd < 0) {
            snprintf(err, err_len, "shm allreduce: cannot open /dev/shm%s: %s", s->name, strerror(errno));
            break;
        }
        if (lock_byte(s->fd, LOCK_SETUP, 1, F_WRLCK, 1) != 0) {
            snprintf(err, err_len, "shm allreduce: cannot lock /dev/shm%s: %s", s->name, strerror(errno));
            break;
        }
        // The name may have been removed (the last rank of a finished group
        // left) or replaced while this rank waited for the lock: start over.
        if (!name_is(s->name, s->fd)) {
            close(s->fd);
            s->fd = -1;
            if (tries < 100) continue;
            snprintf(err, err_len, "shm allreduce: /dev/shm%s keeps being replaced", s->name);
            break;
        }
        int rc = attach_locked(s, run_id, err, err_len);
        lock_byte(s->fd, LOCK_SETUP, 1, F_UNLCK, 0);
        if (rc == 0) return s;
        break;
    }
    detach(s);
    free(s->srcs);
    free(s);
    return NULL;
}

void shm_allreduce_destroy(shm_allreduce_t **sp) {
    shm_allreduce_t *s = sp ? *sp : NULL;
    if (!s) return;
    *sp = NULL;
    if (s->fd >= 0 && lock_byte(s->fd, LOCK_SETUP, 1, F_WRLCK, 1) == 0) {
        lock_byte(s->fd, 1 + (off_t)s->rank, 1, F_UNLCK, 0);
        // The last one out removes the name if no rank did (some never came).
        if (lock_held(s->fd, 1, 0) == 0 && name_is(s->name, s->fd)) shm_unlink(s->name);
        lock_byte(s->fd, LOCK_SETUP, 1, F_UNLCK, 0);
    }
    detach(s);
    free(s->srcs);
    free(s);
}

float *shm_allreduce_buffer(shm_allreduce_t *s) { return input(s, s->rank); }

// ---- steps -------------------------------------------------------------------

static int reached(uint32_t have, uint32_t want) { return (int32_t)(have - want) >= 0; }

// Raises this rank's step counter and wakes peers asleep on it. The store and
// the load of sleepers are sequentially consistent, as are the sleeper's
// increment and its re-check in wait_step: either the sleeper sees the new
// step or this rank sees the sleeper.
static void post_step(shm_allreduce_t *s, uint32_t step) {
    shm_slot_t *me = slot(s, s->rank);
    atomic_store_explicit(&me->cpu, (int32_t)sched_getcpu(), memory_order_relaxed);
    atomic_store(&me->step, step);
    if (atomic_load(&me->sleepers) != 0) futex_word_wake(&me->step);
}

// Marks the group failed (the first failure wins) and wakes every sleeper.
static void mark_failed(shm_allreduce_t *s, size_t culprit, fail_why_t why) {
    uint64_t none = 0, mark = (uint64_t)(s->rank + 1) | (uint64_t)(culprit + 1) << 24 | (uint64_t)why << 48;
    atomic_compare_exchange_strong(&s->hdr->failed, &none, mark);
    for (size_t r = 0; r < s->n; r++) futex_word_wake(&slot(s, r)->step);
}

// The error of a rank that finds the group failed by another.
static int report_failed(const shm_allreduce_t *s, uint64_t mark, char *err, size_t err_len) {
    size_t by = (size_t)(mark & 0xffffff) - 1, culprit = (size_t)(mark >> 24 & 0xffffff) - 1;
    unsigned why = (unsigned)(mark >> 48 & 0xff);
    snprintf(err, err_len, "shm allreduce: rank %zu: call %llu failed: rank %zu found that rank %zu (pid %d) %s",
             s->rank, (unsigned long long)s->seq, by, culprit, (int)atomic_load(&slot(s, culprit)->pid),
             why < sizeof fail_text / sizeof *fail_text ? fail_text[why] : "failed");
    return -1;
}

static const char *const step_names[] = {"", "its input", "its slice's sum"};

// wait_step once rank j's counter was seen short of want.
static int wait_step_slow(shm_allreduce_t *s, size_t j, uint32_t want, int kind, size_t count, int timeout_ms,
                          char *err, size_t err_len) {
    shm_slot_t *peer = slot(s, j);
    // A peer last seen on this CPU is not running while this rank spins.
    unsigned spins = atomic_load_explicit(&peer->cpu, memory_order_relaxed) == sched_getcpu() ? 0 : s->spins;
    for (unsigned i = 0; i < spins; i++) {
        cpu_pause();
        if (reached(atomic_load_explicit(&peer->step, memory_order_acquire), want)) return 0;
    }
    for (int i = 0; i < SHM_YIELDS; i++) {
        sched_yield();
        if (reached(atomic_load_explicit(&peer->step, memory_order_acquire), want)) return 0;
    }
    double start = mono_clock_ms();
    for (;;) {
        uint64_t failed = atomic_load(&s->hdr->failed);
        if (failed != 0) return report_failed(s, failed, err, err_len);
        int32_t pid = atomic_load(&peer->pid);
        if (pid != 0 && !rank_alive(s, j)) {
            // It may have done its part just before it left.
            if (reached(atomic_load_explicit(&peer->step, memory_order_acquire), want)) return 0;
            snprintf(err, err_len,
                     "shm allreduce: rank %zu: rank %zu (pid %d) has exited; call %llu of %zu floats "
                     "was waiting for %s",
                     s->rank, j, (int)pid, (unsigned long long)s->seq, count, step_names[kind]);
            mark_failed(s, j, FAIL_EXITED);
            return -1;
        }
        double waited = mono_clock_ms() - start;
        if (timeout_ms > 0 && waited >= timeout_ms) {
            if (pid == 0)
                snprintf(err, err_len,
                         "shm allreduce: rank %zu: rank %zu has not attached to /dev/shm%s after %d ms: "
                         "is it running?",
                         s->rank, j, s->name, timeout_ms);
            else
                snprintf(err, err_len,
                         "shm allreduce: rank %zu: nothing from rank %zu (pid %d) for %d ms in call "
                         "%llu of %zu floats (waiting for %s): is it stuck or not calling?",
                         s->rank, j, (int)pid, timeout_ms, (unsigned long long)s->seq, count, step_names[kind]);
            mark_failed(s, j, pid == 0 ? FAIL_ABSENT : FAIL_STUCK);
            return -1;
        }
        int ms = SHM_SLEEP_MS;
        if (timeout_ms > 0 && timeout_ms - waited < ms) ms = (int)(timeout_ms - waited) + 1;
        atomic_fetch_add(&peer->sleepers, 1);
        uint32_t seen = atomic_load(&peer->step);
        if (!reached(seen, want)) futex_word_wait(&peer->step, seen, ms);
        atomic_fetch_sub(&peer->sleepers, 1);
        if (reached(atomic_load_explicit(&peer->step, memory_order_acquire), want)) return 0;
    }
}

// Waits until rank j's counter reaches want (step kind 1 or 2 of the current
// call). A step already reached costs one load; a wait is timed (waited_s).
static int wait_step(shm_allreduce_t *s, size_t j, uint32_t want, int kind, size_t count, int timeout_ms, char *err,
                     size_t err_len) {
    if (reached(atomic_load_explicit(&slot(s, j)->step, memory_order_acquire), want)) return 0;
    double start = mono_clock_s();
    int rc = wait_step_slow(s, j, want, kind, count, timeout_ms, err, err_len);
    s->waited_s += mono_clock_s() - start;
    return rc;
}

// Called with each block of a slice's sum once it is final (sum_slice):
// `at` is the block's place in the slice, `block` its m sums (in dst).
typedef void (*block_done_fn)(void *ctx, size_t at, float *block, size_t m);

// dst[0..len) = ((src[0] + src[1]) + src[2]) + ... + src[k-1], and copy[0..len)
// too unless copy is NULL, in blocks whose partial sums stay in L1; the last
// addition stores both; done (unless NULL) is handed each block when final.
// Only additions, each element's in the same order whatever the vector width:
// the AVX build gives the same bits as the baseline one.
static inline __attribute__((always_inline)) void sum_slice_body(float *restrict dst, float *restrict copy,
                                                                 const float *const *src, size_t k, size_t len,
                                                                 block_done_fn done, void *ctx) {
    for (size_t b = 0; b < len; b += SHM_BLOCK) {
        size_t m = len - b < SHM_BLOCK ? len - b : SHM_BLOCK;
        float *restrict d = dst + b, *restrict c = copy ? copy + b : NULL;
        const float *restrict x0 = src[0] + b;
        if (k == 1) {
            memcpy(d, x0, m * sizeof *d);
            if (c) memcpy(c, x0, m * sizeof *c);
        } else if (k == 2) {
            const float *restrict x1 = src[1] + b;
            if (c)
                for (size_t i = 0; i < m; i++) d[i] = c[i] = x0[i] + x1[i];
            else
                for (size_t i = 0; i < m; i++) d[i] = x0[i] + x1[i];
        } else {
            const float *restrict x1 = src[1] + b;
            for (size_t i = 0; i < m; i++) d[i] = x0[i] + x1[i];
            for (size_t q = 2; q + 1 < k; q++) {
                const float *restrict xq = src[q] + b;
                for (size_t i = 0; i < m; i++) d[i] += xq[i];
            }
            const float *restrict xl = src[k - 1] + b;
            if (c)
                for (size_t i = 0; i < m; i++) d[i] = c[i] = d[i] + xl[i];
            else
                for (size_t i = 0; i < m; i++) d[i] = d[i] + xl[i];
        }
        if (done) done(ctx, b, d, m);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx"))) static void sum_slice_avx(float *restrict dst, float *restrict copy,
                                                         const float *const *src, size_t k, size_t len,
                                                         block_done_fn done, void *ctx) {
    sum_slice_body(dst, copy, src, k, len, done, ctx);
}
#endif

static void sum_slice(float *restrict dst, float *restrict copy, const float *const *src, size_t k, size_t len, int avx,
                      block_done_fn done, void *ctx) {
#if defined(__x86_64__)
    if (avx) {
        sum_slice_avx(dst, copy, src, k, len, done, ctx);
        return;
    }
#else
    (void)avx;
#endif
    sum_slice_body(dst, copy, src, k, len, done, ctx);
}

// shm_allreduce_sum_map's part of a call: the map, the weights' sum, where
// every rank's result goes.
typedef struct shm_map_call {
    shm_map_fn map;
    void *ctx;
    float weight, *total, *out;
} shm_map_call_t;

// The weights of every rank, summed in rank order as the values are.
static float total_weight(const shm_allreduce_t *s) {
    float t = slot(s, 0)->weight;
    for (size_t j = 1; j < s->n; j++) t = t + slot(s, j)->weight;
    return t;
}

// A block of this rank's slice, starting at element `from` + at, mapped while
// it is in L1 and copied to the caller's out.
typedef struct map_slice {
    const shm_map_call_t *mc;
    size_t from;
} map_slice_t;

static void map_block(void *ctx, size_t at, float *block, size_t m) {
    const map_slice_t *ms = ctx;
    ms->mc->map(ms->mc->ctx, ms->from + at, block, m);
    memcpy(ms->mc->out + ms->from + at, block, m * sizeof *block);
}

// What a call does with the slices: all three keep the same steps and waits,
// so calls of different kinds may follow each other in any order.
typedef enum shm_op { SHM_OP_SUM, SHM_OP_REDUCE_SCATTER, SHM_OP_ALLGATHER, SHM_OP_SUM_MAP } shm_op_t;

static int shm_call(shm_allreduce_t *s, shm_op_t op, float *data, size_t count, const shm_map_call_t *mc,
                    int timeout_ms, char *err, size_t err_len) {
    if (count > s->max_count) {
        snprintf(err, err_len, "shm allreduce: rank %zu: %zu values exceed the %zu the group was made for", s->rank,
                 count, s->max_count);
        return -1;
    }
    s->seq++;
    uint64_t failed = atomic_load(&s->hdr->failed);
    if (failed != 0) return report_failed(s, failed, err, err_len);
    uint32_t in_step = (uint32_t)(2 * s->seq - 1), sum_step = (uint32_t)(2 * s->seq);
    size_t n = s->n, me = s->rank, b, e;
    shard_range(count, n, me, &b, &e);
    // 1. Input: everything but this rank's own slice, which only it reads.
    // Safe to overwrite: every peer finished reading this area in the last call
    // before it posted that call's sum step, which this rank waited for.
    float *mine = input(s, me);
    if (op != SHM_OP_ALLGATHER && data != mine && count > 0) {
        memcpy(mine, data, b * sizeof *data);
        memcpy(mine + e, data + e, (count - e) * sizeof *data);
    }
    slot(s, me)->count = count;
    slot(s, me)->weight = mc ? mc->weight : 0.0f;
    post_step(s, in_step);
    // 2. Reduce-scatter: sum this rank's slice of every input in rank order.
    // The result area's slice may still be being read by a peer finishing the
    // last call; not once that peer has posted this call's input.
    const float **srcs = s->srcs;
    int rc = 0;
    for (size_t k = 1; k < n && rc == 0; k++) {
        size_t j = (me + k) % n;
        rc = wait_step(s, j, in_step, 1, count, timeout_ms, err, err_len);
        if (rc == 0 && slot(s, j)->count != count) {
            snprintf(err, err_len, "shm allreduce: rank %zu: rank %zu passed %llu values to call %llu, this rank %zu",
                     me, j, (unsigned long long)slot(s, j)->count, (unsigned long long)s->seq, count);
            mark_failed(s, j, FAIL_COUNT);
            rc = -1;
        }
    }
    // A map call whose weights sum to nothing maps and gathers nothing (every rank alike).
    int gather = op != SHM_OP_REDUCE_SCATTER;
    if (rc == 0 && mc) {
        *mc->total = total_weight(s);
        gather = *mc->total > 0.0f;
    }
    if (rc == 0) {
        if (mc) {
            for (size_t j = 0; j < n; j++) srcs[j] = (j == me ? data : input(s, j)) + b;
            map_slice_t ms = {mc, b};
            if (gather) sum_slice(s->result + b, NULL, srcs, n, e - b, s->avx, map_block, &ms);
        } else if (op == SHM_OP_ALLGATHER) {
            if (e > b) memcpy(s->result + b, data + b, (e - b) * sizeof *data);
        } else {
            for (size_t j = 0; j < n; j++) srcs[j] = (j == me ? data : input(s, j)) + b;
            sum_slice(s->result + b, data + b, srcs, n, e - b, s->avx, NULL, NULL);
        }
        post_step(s, sum_step);
    }
    // 3. Allgather: copy every other rank's finished slice.
    for (size_t k = 1; k < n && rc == 0; k++) {
        size_t j = (me + k) % n, jb, je;
        rc = wait_step(s, j, sum_step, 2, count, timeout_ms, err, err_len);
        shard_range(count, n, j, &jb, &je);
        if (rc == 0 && je > jb && gather) memcpy((mc ? mc->out : data) + jb, s->result + jb, (je - jb) * sizeof *data);
    }
    return rc;
}

int shm_allreduce_sum(shm_allreduce_t *s, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    return shm_call(s, SHM_OP_SUM, data, count, NULL, timeout_ms, err, err_len);
}

int shm_allreduce_reduce_scatter(shm_allreduce_t *s, float *data, size_t count, int timeout_ms, char *err,
                                 size_t err_len) {
    return shm_call(s, SHM_OP_REDUCE_SCATTER, data, count, NULL, timeout_ms, err, err_len);
}

int shm_allreduce_allgather(shm_allreduce_t *s, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    return shm_call(s, SHM_OP_ALLGATHER, data, count, NULL, timeout_ms, err, err_len);
}

int shm_allreduce_sum_map(shm_allreduce_t *s, float *data, size_t count, float weight, float *total, shm_map_fn map,
                          void *ctx, float *out, int timeout_ms, char *err, size_t err_len) {
    shm_map_call_t mc = {map, ctx, weight, total, out};
    return shm_call(s, SHM_OP_SUM_MAP, data, count, &mc, timeout_ms, err, err_len);
}

double shm_allreduce_waited_s(const shm_allreduce_t *s) { return s->waited_s; }

void shm_allreduce_slice(size_t count, size_t n, size_t rank, size_t *begin, size_t *end) {
    shard_range(count, n, rank, begin, end);
}
