#include "net/ps_local_round.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "net/futex_word.h"
#include "net/shm_frames.h"

#define LOCAL_MAGIC 0x31444e5552434c41ull  // "ALCRUND1"
#define LINE ((size_t)64)
#define YIELDS 2000  // sched_yields a waiting worker makes before it sleeps (a round's wait here is ~400 us)
#define SLEEP_MS 10  // futex sleeps between checks that the shard is still there

typedef struct header {
    _Atomic uint64_t magic;  // written last, with release
    uint64_t run_id, n_workers, n;
    _Atomic uint64_t values_seq;  // odd while the shard writes the values area
    _Atomic uint64_t values_version;  // of what the values area holds
    _Atomic uint64_t values_filled;  // values of that version written so far (from the start)
} header_t;

// A worker slot: the worker's line, then the shard's.
typedef struct slot {
    _Atomic uint32_t posted;  // posts made (the worker's)
    _Atomic uint32_t examples;
    _Atomic uint64_t clock, param_version;
    _Atomic uint32_t finite;
    char pad_worker[LINE - 28];
    _Atomic uint32_t answered;  // the futex word: raised at every answer
    _Atomic uint32_t sleepers;  // the worker sleeps on answered
    _Atomic uint64_t acked;  // clock + 1 of the last push acknowledged
    _Atomic uint64_t values_clock, values_version;  // of the last whole values answer
    _Atomic uint64_t refusal;  // post number << 8 | status of the last refusal
    _Atomic uint32_t in_rounds;  // 1 from the shard's first take of a post here until the worker leaves
    char pad_shard[LINE - 44];
    // The last values answer's whereabouts: 0, the values area; else the
    // length of a reference to the shard's own values (net/shm_frames.h).
    _Atomic uint32_t ref_len;
    uint8_t ref[LINE - 4];
} slot_t;

struct ps_local_round {
    char name[128];
    int owner;  // the shard's side
    uint8_t *base;
    size_t bytes, n, n_workers, area_bytes;
    header_t *hdr;
    int bell;  // the shard's bound doorbell, or a worker's connected one
    uint32_t *taken;  // (the shard) posts taken, per worker
    uint32_t worker, posts;  // (a worker) its slot, its posts so far
    size_t shard;
};

static size_t round_up(size_t x) { return (x + LINE - 1) / LINE * LINE; }
static slot_t *slot_of(const ps_local_round_t *l, size_t k) { return (slot_t *)(l->base + LINE * 4) + k; }
static float *area_of(const ps_local_round_t *l, size_t k) {
    return (float *)(l->base + LINE * 4 + l->n_workers * sizeof(slot_t) + k * l->area_bytes);
}
// The values area comes after the n_workers gradient areas.
static float *values_area(const ps_local_round_t *l) { return area_of(l, l->n_workers); }

static int names(uint64_t run_id, size_t shard, char *seg, size_t seg_len, struct sockaddr_un *bell,
                 socklen_t *bell_len) {
    memset(bell, 0, sizeof *bell);
    bell->sun_family = AF_UNIX;
    // Abstract (a leading zero byte): nothing in the file system to remove.
    int w = snprintf(bell->sun_path + 1, sizeof bell->sun_path - 1, "asgd-round-%u-%016llx-%zu", (unsigned)getuid(),
                     (unsigned long long)run_id, shard);
    *bell_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)w);
    char what[48];
    snprintf(what, sizeof what, "round-%zu", shard);
    return shm_frames_segment_name(run_id, what, seg, seg_len);
}

static size_t segment_bytes(size_t n_workers, size_t n) {
    return LINE * 4 + n_workers * sizeof(slot_t) + (n_workers + 1) * round_up(n * sizeof(float));
}

static ps_local_round_t *fail(ps_local_round_t *l, const char *what, char *err, size_t err_len) {
    snprintf(err, err_len, "shared-memory rounds: %s %s: %s", what, l->name, strerror(errno));
    ps_local_round_destroy(&l);
    return NULL;
}

ps_local_round_t *ps_local_round_create(uint64_t run_id, size_t shard, size_t n_workers, size_t n, char *err,
                                        size_t err_len) {
    ps_local_round_t *l = calloc(1, sizeof *l);
    if (!l || !(l->taken = calloc(n_workers, sizeof *l->taken))) {
        free(l);
        snprintf(err, err_len, "shared-memory rounds: out of memory");
        return NULL;
    }
    l->owner = 1;
    l->bell = -1;
    l->n = n, l->n_workers = n_workers, l->area_bytes = round_up(n * sizeof(float));
    l->bytes = segment_bytes(n_workers, n);
    struct sockaddr_un addr;
    socklen_t addr_len;
    names(run_id, shard, l->name, sizeof l->name, &addr, &addr_len);
    shm_unlink(l->name);  // a restarted shard's predecessor's: its workers go through ZeroMQ now
    int fd = shm_open(l->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail(l, "cannot create", err, err_len);
    // Every page now: /dev/shm out of room fails here, not as a SIGBUS at a
    // worker's first store.
    int sized = ftruncate(fd, (off_t)l->bytes);
    if (sized == 0 && (sized = posix_fallocate(fd, 0, (off_t)l->bytes)) != 0) errno = sized;
    l->base = sized == 0 ? mmap(NULL, l->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (l->base == MAP_FAILED) {
        l->base = NULL;
        return fail(l, "cannot size (/dev/shm full?) or map", err, err_len);
    }
    l->hdr = (header_t *)l->base;
    l->hdr->run_id = run_id, l->hdr->n_workers = n_workers, l->hdr->n = n;
    l->bell = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->bell < 0 || bind(l->bell, (struct sockaddr *)&addr, addr_len) != 0)
        return fail(l, "cannot bind the doorbell of", err, err_len);
    atomic_store_explicit(&l->hdr->magic, LOCAL_MAGIC, memory_order_release);
    return l;
}

void ps_local_round_destroy(ps_local_round_t **lp) {
    ps_local_round_t *l = *lp;
    if (!l) return;
    if (l->owner && l->name[0]) shm_unlink(l->name);  // also one made but not sized
    if (l->base) munmap(l->base, l->bytes);
    if (l->bell >= 0) close(l->bell);
    free(l->taken);
    free(l);
    *lp = NULL;
}

int ps_local_round_fd(const ps_local_round_t *l) { return l->bell; }

void ps_local_round_quiet(ps_local_round_t *l) {
    char b[64];
    while (recv(l->bell, b, sizeof b, MSG_DONTWAIT) >= 0) {
    }
}

int ps_local_round_take(ps_local_round_t *l, uint32_t k, ps_local_post_t *post) {
    slot_t *s = slot_of(l, k);
    uint32_t posted = atomic_load_explicit(&s->posted, memory_order_acquire);
    if (posted == l->taken[k]) return 0;
    l->taken[k] = posted;  // a worker posts one at a time: the last is the only one
    atomic_store_explicit(&s->in_rounds, 1, memory_order_relaxed);
    post->clock = atomic_load_explicit(&s->clock, memory_order_relaxed);
    post->param_version = atomic_load_explicit(&s->param_version, memory_order_relaxed);
    post->examples = atomic_load_explicit(&s->examples, memory_order_relaxed);
    post->finite = atomic_load_explicit(&s->finite, memory_order_relaxed) == 1;
    post->values = area_of(l, k);
    return 1;
}

// An answer's fields are written: raised, and the worker woken if it sleeps.
// The raise and the load of sleepers are sequentially consistent, as are the
// sleeper's increment and its re-check (ps_local_round_await): either the
// worker sees the answer or the shard sees the sleeper.
static void answered(slot_t *s) {
    atomic_fetch_add(&s->answered, 1);
    if (atomic_load(&s->sleepers) != 0) futex_word_wake(&s->answered);
}

void ps_local_round_ack(ps_local_round_t *l, uint32_t k, uint64_t clock) {
    slot_t *s = slot_of(l, k);
    atomic_store_explicit(&s->acked, clock + 1, memory_order_release);
    answered(s);
}

// Writes [from, from + count) of version's values into the values area, once
// per version: the round's answers to every worker are the same values.
static void write_values(ps_local_round_t *l, const float *values, size_t from, size_t count, uint64_t version) {
    header_t *h = l->hdr;
    if (atomic_load_explicit(&h->values_version, memory_order_relaxed) != version ||
        atomic_load_explicit(&h->values_seq, memory_order_relaxed) % 2 == 0) {
        if (atomic_load_explicit(&h->values_version, memory_order_relaxed) == version &&
            atomic_load_explicit(&h->values_filled, memory_order_relaxed) == l->n)
            return;  // written whole already
        // Odd: being written. Acquire and release: no write of the values
        // below is seen before it (a fence would do, but TSan has none).
        atomic_fetch_add_explicit(&h->values_seq, 1, memory_order_acq_rel);
        atomic_store_explicit(&h->values_version, version, memory_order_relaxed);
        atomic_store_explicit(&h->values_filled, 0, memory_order_relaxed);
    }
    size_t filled = atomic_load_explicit(&h->values_filled, memory_order_relaxed);
    if (from + count <= filled) return;  // this range went in for another worker
    memcpy(values_area(l) + from, values, count * sizeof *values);
    atomic_store_explicit(&h->values_filled, from + count, memory_order_relaxed);
    if (from + count == l->n) atomic_fetch_add_explicit(&h->values_seq, 1, memory_order_release);  // even: whole
}

// Worker k's answer of `version` and `clock` is whole: said.
static void values_answered(slot_t *s, uint64_t version, uint64_t clock) {
    atomic_store_explicit(&s->values_version, version, memory_order_relaxed);
    atomic_store_explicit(&s->values_clock, clock, memory_order_release);
    answered(s);
}

void ps_local_round_values(ps_local_round_t *l, uint32_t k, const float *values, size_t from, size_t count,
                           uint64_t version, uint64_t clock, int complete) {
    write_values(l, values, from, count, version);
    if (!complete) return;
    slot_t *s = slot_of(l, k);
    atomic_store_explicit(&s->ref_len, 0, memory_order_relaxed);
    values_answered(s, version, clock);
}

int ps_local_round_values_ref(ps_local_round_t *l, uint32_t k, const void *ref, size_t len, uint64_t version,
                              uint64_t clock) {
    slot_t *s = slot_of(l, k);
    if (len == 0 || len > sizeof s->ref) return -1;
    memcpy(s->ref, ref, len);
    atomic_store_explicit(&s->ref_len, (uint32_t)len, memory_order_relaxed);
    values_answered(s, version, clock);
    return 0;
}

void ps_local_round_refuse(ps_local_round_t *l, uint32_t k, wire_status_t why) {
    slot_t *s = slot_of(l, k);
    atomic_store_explicit(&s->refusal, (uint64_t)l->taken[k] << 8 | (uint64_t)why, memory_order_release);
    answered(s);
}

void ps_local_round_identity(uint32_t k, zmq_msg_t *identity) {
    zmq_msg_init_size(identity, 6);
    uint8_t *b = zmq_msg_data(identity);
    b[0] = 0, b[1] = 'L';
    memcpy(b + 2, &k, sizeof k);
}

int ps_local_round_is_local(zmq_msg_t *identity, uint32_t *k) {
    const uint8_t *b = zmq_msg_data(identity);
    if (zmq_msg_size(identity) != 6 || b[0] != 0 || b[1] != 'L') return 0;
    memcpy(k, b + 2, sizeof *k);
    return 1;
}

// ---- a worker's side -------------------------------------------------------

ps_local_round_t *ps_local_round_attach(uint64_t run_id, size_t shard, uint32_t k, size_t n, char *err,
                                        size_t err_len) {
    ps_local_round_t *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, err_len, "shared-memory rounds: out of memory");
        return NULL;
    }
    l->bell = -1;
    struct sockaddr_un addr;
    socklen_t addr_len;
    names(run_id, shard, l->name, sizeof l->name, &addr, &addr_len);
    int fd = shm_open(l->name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return fail(l, "no segment", err, err_len);
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)(LINE * 4)) {
        close(fd);
        errno = EINVAL;
        return fail(l, "not a segment of this run:", err, err_len);
    }
    l->bytes = (size_t)st.st_size;
    l->base = mmap(NULL, l->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (l->base == MAP_FAILED) {
        l->base = NULL;
        return fail(l, "cannot map", err, err_len);
    }
    l->hdr = (header_t *)l->base;
    if (atomic_load_explicit(&l->hdr->magic, memory_order_acquire) != LOCAL_MAGIC) {
        errno = EAGAIN;
        return fail(l, "not ready yet:", err, err_len);
    }
    l->n = n, l->n_workers = l->hdr->n_workers, l->area_bytes = round_up(n * sizeof(float));
    if (l->hdr->run_id != run_id || l->hdr->n != n || k >= l->n_workers || l->bytes != segment_bytes(l->n_workers, n)) {
        errno = EINVAL;
        return fail(l, "not made for this worker and model:", err, err_len);
    }
    l->bell = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (l->bell < 0 || connect(l->bell, (struct sockaddr *)&addr, addr_len) != 0)
        return fail(l, "no doorbell for", err, err_len);
    l->worker = k;
    l->shard = shard;
    l->posts = atomic_load(&slot_of(l, k)->posted);  // a restarted worker goes on from its predecessor's count
    return l;
}

float *ps_local_round_gradient(ps_local_round_t *l) { return area_of(l, l->worker); }

void ps_local_round_out(ps_local_round_t *l, uint32_t k) {
    atomic_store_explicit(&slot_of(l, k)->in_rounds, 0, memory_order_relaxed);
}

// Whether every other worker that takes part in the rounds here has posted
// for `clock` (or is posting it). Called after this worker's own post, which
// is sequentially consistent, as is each load of another's `posted` here:
// of two workers posting at once, at least one sees the other's post (the
// total order puts one's store before the other's load), and with it (the
// load acquires) the clock it stored before. So the last of a round's posts
// always finds the others in, whatever the interleaving. A worker that left
// without its slot being marked out makes nobody ring; the shard's loop
// looks at every slot at each turn anyway (100 ms at most).
static int others_posted(const ps_local_round_t *l, uint64_t clock) {
    for (size_t j = 0; j < l->n_workers; j++) {
        const slot_t *o = slot_of(l, j);
        if (j == l->worker || !atomic_load_explicit(&o->in_rounds, memory_order_relaxed)) continue;
        (void)atomic_load(&o->posted);
        if (atomic_load_explicit(&o->clock, memory_order_relaxed) < clock) return 0;
    }
    return 1;
}

// Rings the shard's doorbell. A full queue has wake-ups waiting already.
static int ring(ps_local_round_t *l, char *err, size_t err_len) {
    if (send(l->bell, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 || errno == EAGAIN) return 0;
    snprintf(err, err_len, "server shard %zu has stopped: its shared-memory doorbell refuses (%s)", l->shard,
             strerror(errno));
    return -1;
}

int ps_local_round_post(ps_local_round_t *l, uint64_t clock, uint64_t param_version, uint32_t examples, int finite,
                        char *err, size_t err_len) {
    slot_t *s = slot_of(l, l->worker);
    atomic_store_explicit(&s->finite, finite == 1, memory_order_relaxed);
    atomic_store_explicit(&s->clock, clock, memory_order_relaxed);
    atomic_store_explicit(&s->param_version, param_version, memory_order_relaxed);
    atomic_store_explicit(&s->examples, examples, memory_order_relaxed);
    // Only the round's last post rings: a shard woken by an earlier one would
    // take the post and wait on, having preempted a worker still computing
    // on the core it ran on (docs/benchmarks.md). Sequentially consistent:
    // see others_posted.
    atomic_store(&s->posted, ++l->posts);
    return others_posted(l, clock) ? ring(l, err, err_len) : 0;
}

// The shard's refusal of this worker's last post, or WIRE_STATUS_OK.
static wire_status_t refusal_of(const ps_local_round_t *l, const slot_t *s) {
    uint64_t refusal = atomic_load_explicit(&s->refusal, memory_order_acquire);
    return refusal >> 8 == l->posts ? (wire_status_t)(refusal & 0xff) : WIRE_STATUS_OK;
}

// 1 once the answer to the post of `clock` is in: a refusal, or its
// acknowledgement and values for a later clock.
static int answer_in(const ps_local_round_t *l, const slot_t *s, uint64_t clock) {
    if (refusal_of(l, s) != WIRE_STATUS_OK) return 1;
    return atomic_load_explicit(&s->acked, memory_order_acquire) > clock &&
           atomic_load_explicit(&s->values_clock, memory_order_acquire) > clock;
}

// Copies the values area if it still holds `version` whole (a seqlock read).
static int copy_values(ps_local_round_t *l, uint64_t version, float *out) {
    header_t *h = l->hdr;
    uint64_t seq = atomic_load_explicit(&h->values_seq, memory_order_acquire);
    if (seq % 2 != 0 || atomic_load_explicit(&h->values_version, memory_order_relaxed) != version) return -1;
    memcpy(out, values_area(l), l->n * sizeof *out);
    // Read again by an add of nothing with release: the copy's reads come
    // before it (a load could be ordered before them).
    return atomic_fetch_add_explicit(&h->values_seq, 0, memory_order_acq_rel) == seq ? 0 : -1;
}

// Copies the shard's own values, referred to from the slot: the reference
// counts this worker as their reader until the frame over them is closed,
// so the shard writes its next values elsewhere meanwhile (shm_frames.h).
static int copy_referred(const ps_local_round_t *l, const slot_t *s, uint32_t ref_len, float *out, char *err,
                         size_t err_len) {
    zmq_msg_t frame;
    zmq_msg_init_size(&frame, ref_len);
    memcpy(zmq_msg_data(&frame), s->ref, ref_len);
    int ok =
        shm_frames_unpack(l->hdr->run_id, &frame, 1) == WIRE_STATUS_OK && zmq_msg_size(&frame) == l->n * sizeof *out;
    if (ok) memcpy(out, zmq_msg_data(&frame), l->n * sizeof *out);
    zmq_msg_close(&frame);
    if (!ok)
        snprintf(err, err_len, "server shard %zu: its values in shared memory cannot be read by this worker", l->shard);
    return ok ? 0 : -1;
}

static int take_answer(ps_local_round_t *l, slot_t *s, float *out, ps_local_answer_t *a, char *err, size_t err_len) {
    *a = (ps_local_answer_t){.refused = refusal_of(l, s)};
    if (a->refused != WIRE_STATUS_OK) return 0;
    a->version = atomic_load_explicit(&s->values_version, memory_order_relaxed);
    a->clock = atomic_load_explicit(&s->values_clock, memory_order_relaxed);
    uint32_t ref_len = atomic_load_explicit(&s->ref_len, memory_order_relaxed);
    if (ref_len > 0) return copy_referred(l, s, ref_len, out, err, err_len);
    if (copy_values(l, a->version, out) == 0) return 0;
    snprintf(err, err_len, "shared-memory rounds: %s: the values of version %llu were overwritten while read", l->name,
             (unsigned long long)a->version);
    return -1;
}

int ps_local_round_await(ps_local_round_t *l, uint64_t clock, float *out, const atomic_int *stop, ps_local_answer_t *a,
                         char *err, size_t err_len) {
    slot_t *s = slot_of(l, l->worker);
    for (int i = 0; i < YIELDS; i++) {
        if (answer_in(l, s, clock)) return take_answer(l, s, out, a, err, err_len);
        sched_yield();
    }
    for (;;) {
        atomic_fetch_add(&s->sleepers, 1);
        uint32_t seen = atomic_load(&s->answered);
        if (!answer_in(l, s, clock)) futex_word_wait(&s->answered, seen, SLEEP_MS);
        atomic_fetch_sub(&s->sleepers, 1);
        if (answer_in(l, s, clock)) return take_answer(l, s, out, a, err, err_len);
        if (stop && atomic_load(stop)) {
            snprintf(err, err_len, "shared-memory rounds: stopped while waiting for round %llu",
                     (unsigned long long)clock);
            return -1;
        }
        // A doorbell nobody holds any more: the shard's process has exited.
        if (ring(l, err, err_len) != 0) return -1;
    }
}
