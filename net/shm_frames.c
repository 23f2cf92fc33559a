// Parameter payloads through shared memory (shm_frames.h).
#include "net/shm_frames.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// An arena: a header page, then slots carved one after another as needed.
// The file is as large as ARENA_BYTES from the start but sparse: tmpfs takes
// pages only where a slot has been carved (posix_fallocate, which fails
// cleanly where a store into a hole would raise SIGBUS).
#define ARENA_BYTES ((size_t)1 << 30)
#define ARENA_HEADER_BYTES ((size_t)4096)
#define ARENA_SLOTS 64
#define SLOT_HEADER_BYTES ((size_t)64)
#define SLOT_MIN_CAPACITY ((size_t)64 * 1024)
#define ARENA_MAGIC 0x414e455241445341ull  // "ASDARENA"
#define MAPPED_MAX 64  // peers' arenas mapped at once by one process

enum { SLOT_FREE = 0 };  // else the state counts the frames over the slot that receivers hold

typedef struct arena_header {
    uint64_t magic, run_id, token, bytes;
} arena_header_t;

// In the arena, just before a slot's (or a lent buffer's) bytes; state is
// the only word both sides write.
typedef struct slot_header {
    _Atomic uint32_t state;
    uint32_t unused;
    uint64_t capacity, len;
} slot_header_t;

_Static_assert(sizeof(shm_ref_t) == 48, "a reference is 48 bytes");
_Static_assert(sizeof(slot_header_t) <= SLOT_HEADER_BYTES, "a slot header fits before its bytes");

// A sending thread's arena (the thread alone carves and fills its slots).
typedef struct arena {
    int fd;
    uint8_t *base;
    uint64_t token;
    uint32_t index;
    size_t carved;  // bytes from the start in use by the header and slots
    size_t n_slots;
    size_t slot_at[ARENA_SLOTS];  // each slot's header offset
    // A slot handed out as a frame to fill (shm_frames_frame): held by the
    // sender until its last frame over it closes, whatever receivers do.
    _Atomic int reserved[ARENA_SLOTS];
    struct arena *next;  // every arena of this process
    int owned;  // a live thread sends through it
    uint64_t generation;  // g.generation when made: an arena of an earlier enable is not used again
} arena_t;

// A peer's arena mapped for reading.
typedef struct mapped {
    uint32_t pid, index;
    uint64_t token;
    uint8_t *base;
    size_t bytes;
    _Atomic uint64_t frames;  // frames over it not closed yet (it is unmapped only at 0)
} mapped_t;

static struct {
    pthread_mutex_t lock;  // arenas and mapped
    _Atomic int on;
    uint64_t run_id;
    _Atomic uint64_t generation;  // one per enable
    uint32_t next_index;
    arena_t *arenas;
    mapped_t mapped[MAPPED_MAX];
    _Atomic uint64_t packed, inline_for_want_of_slot, slots, unpacked, without_copy;
    struct shm_lend *lends;  // every lent buffer of this process
    _Atomic int n_lends;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

// A lent buffer: carved from an arena like a slot, but never one of its slots.
struct shm_lend {
    arena_t *arena;
    size_t at;  // its header's offset in the arena
    uint8_t *data;
    size_t bytes;
    struct shm_lend *next;
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_arena_key;
static _Thread_local arena_t *thread_arena;

// What every arena name of a run begins with in /dev/shm (shm_open's name without its '/').
static int run_prefix(char *out, size_t len, uint64_t run_id) {
    return snprintf(out, len, "asgd-pf-%u-%016llx-", (unsigned)getuid(), (unsigned long long)run_id);
}

static void arena_name(char *out, size_t len, uint64_t run_id, uint32_t pid, uint32_t index) {
    char prefix[64];
    run_prefix(prefix, sizeof prefix, run_id);
    snprintf(out, len, "/%s%u-%u", prefix, pid, index);
}

// A thread that ends leaves its arena to the next thread that sends: its
// slots still held by receivers come back to whoever owns it then.
static void thread_ends(void *a) {
    pthread_mutex_lock(&g.lock);
    ((arena_t *)a)->owned = 0;
    pthread_mutex_unlock(&g.lock);
}

static void make_key(void) { pthread_key_create(&thread_arena_key, thread_ends); }

static arena_t *arena_create_locked(void) {
    arena_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->index = g.next_index++;
    a->generation = atomic_load(&g.generation);
    char name[96];
    arena_name(name, sizeof name, g.run_id, (uint32_t)getpid(), a->index);
    a->fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (a->fd < 0) goto fail;
    if (ftruncate(a->fd, (off_t)ARENA_BYTES) != 0 || posix_fallocate(a->fd, 0, (off_t)ARENA_HEADER_BYTES) != 0)
        goto unlink;
    a->base = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
    if (a->base == MAP_FAILED) goto unlink;
    a->token = wire_fresh_id(a);
    arena_header_t *h = (arena_header_t *)a->base;
    *h = (arena_header_t){.magic = ARENA_MAGIC, .run_id = g.run_id, .token = a->token, .bytes = ARENA_BYTES};
    a->carved = ARENA_HEADER_BYTES;
    a->next = g.arenas;
    g.arenas = a;
    return a;
unlink:
    shm_unlink(name);
    close(a->fd);
fail:
    free(a);
    return NULL;
}

// The calling thread's arena: its own, one a finished thread left, or a new one.
static arena_t *my_arena(void) {
    uint64_t now = atomic_load(&g.generation);
    if (thread_arena && thread_arena->generation == now) return thread_arena;
    pthread_once(&key_once, make_key);
    pthread_mutex_lock(&g.lock);
    if (thread_arena) thread_arena->owned = 0;
    arena_t *a = g.arenas;
    while (a && (a->owned || a->generation != now)) a = a->next;
    if (!a) a = arena_create_locked();
    if (a) a->owned = 1;
    pthread_mutex_unlock(&g.lock);
    if (a) {
        thread_arena = a;
        pthread_setspecific(thread_arena_key, a);
    }
    return a;
}

static slot_header_t *slot_header(const arena_t *a, size_t i) { return (slot_header_t *)(a->base + a->slot_at[i]); }

static size_t capacity_for(size_t n) {
    size_t c = SLOT_MIN_CAPACITY;
    while (c < n && c <= ARENA_BYTES) c <<= 1;
    return c;
}

// Room for a header and cap bytes (a multiple of 64) carved from the end of
// what a uses, its header written (free, len bytes given); the header's
// offset, or SIZE_MAX when the arena or /dev/shm has no room.
static size_t carve(arena_t *a, size_t cap, size_t len) {
    size_t at = a->carved;
    if (cap > ARENA_BYTES || at + SLOT_HEADER_BYTES + cap > ARENA_BYTES) return SIZE_MAX;
    if (posix_fallocate(a->fd, (off_t)at, (off_t)(SLOT_HEADER_BYTES + cap)) != 0) return SIZE_MAX;
    slot_header_t *s = (slot_header_t *)(a->base + at);
    s->capacity = cap;
    s->len = len;
    atomic_store_explicit(&s->state, SLOT_FREE, memory_order_relaxed);
    a->carved = at + SLOT_HEADER_BYTES + cap;
    return at;
}

// A free slot of at least n bytes not in taken[0..n_taken): the smallest
// carved one, else a new one. SIZE_MAX when there is none.
static size_t take_slot(arena_t *a, size_t n, const size_t *taken, size_t n_taken) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < a->n_slots; i++) {
        slot_header_t *s = slot_header(a, i);
        int busy = atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FREE ||
                   atomic_load_explicit(&a->reserved[i], memory_order_acquire);
        for (size_t t = 0; t < n_taken && !busy; t++) busy = taken[t] == i;
        if (!busy && s->capacity >= n && (best == SIZE_MAX || s->capacity < slot_header(a, best)->capacity)) best = i;
    }
    if (best != SIZE_MAX || a->n_slots == ARENA_SLOTS) return best;
    size_t at = carve(a, capacity_for(n), 0);
    if (at == SIZE_MAX) return SIZE_MAX;
    a->slot_at[a->n_slots] = at;
    atomic_fetch_add_explicit(&g.slots, 1, memory_order_relaxed);
    return a->n_slots++;
}

// The last frame over a slot handed out to fill has closed (release: its
// holder's reads and writes come before the slot's next use).
static void unreserve(void *data, void *hint) {
    (void)data;
    atomic_store_explicit((_Atomic int *)hint, 0, memory_order_release);
}

int shm_frames_frame(size_t bytes, zmq_msg_t *frame) {
    if (!atomic_load_explicit(&g.on, memory_order_relaxed) || bytes < SHM_FRAMES_MIN_BYTES) return -1;
    arena_t *a = my_arena();
    size_t i = a ? take_slot(a, bytes, NULL, 0) : SIZE_MAX;
    if (i == SIZE_MAX) return -1;
    slot_header_t *s = slot_header(a, i);
    s->len = bytes;  // written once, before any receiver can read the slot
    atomic_store_explicit(&a->reserved[i], 1, memory_order_relaxed);
    if (zmq_msg_init_data(frame, (uint8_t *)s + SLOT_HEADER_BYTES, bytes, unreserve, &a->reserved[i]) != 0) {
        atomic_store_explicit(&a->reserved[i], 0, memory_order_relaxed);
        return -1;
    }
    return 0;
}

// The slot of the calling thread's arena that a frame handed out by
// shm_frames_frame lies in, whole; SIZE_MAX when it is none.
static size_t reserved_slot(const arena_t *a, const zmq_msg_t *frame) {
    const uint8_t *data = zmq_msg_data((zmq_msg_t *)frame);
    size_t len = zmq_msg_size((zmq_msg_t *)frame);
    for (size_t i = 0; a && i < a->n_slots; i++)
        if (a->base + a->slot_at[i] + SLOT_HEADER_BYTES == data &&
            atomic_load_explicit(&a->reserved[i], memory_order_relaxed) && slot_header((arena_t *)a, i)->len == len)
            return i;
    return SIZE_MAX;
}

void *shm_frames_lend_new(size_t bytes, shm_lend_t **out) {
    *out = NULL;
    if (!atomic_load_explicit(&g.on, memory_order_relaxed) || bytes == 0) return NULL;
    arena_t *a = my_arena();
    shm_lend_t *l = a ? calloc(1, sizeof *l) : NULL;
    if (!l) return NULL;
    size_t cap = (bytes + SLOT_HEADER_BYTES - 1) / SLOT_HEADER_BYTES * SLOT_HEADER_BYTES;
    pthread_mutex_lock(&g.lock);
    size_t at = carve(a, cap, bytes);
    int ok = at != SIZE_MAX;
    if (ok) {
        *l = (shm_lend_t){a, at, a->base + at + SLOT_HEADER_BYTES, bytes, g.lends};
        g.lends = l;
        atomic_fetch_add(&g.n_lends, 1);
    }
    pthread_mutex_unlock(&g.lock);
    if (!ok) {
        free(l);
        return NULL;
    }
    *out = l;
    return l->data;
}

uint32_t shm_frames_lend_readers(const shm_lend_t *l) {
    const slot_header_t *h = (const slot_header_t *)(l->arena->base + l->at);
    return atomic_load_explicit((_Atomic uint32_t *)&h->state, memory_order_acquire);
}

void shm_frames_lend_destroy(shm_lend_t **lp) {
    if (!lp || !*lp) return;
    pthread_mutex_lock(&g.lock);
    for (shm_lend_t **p = &g.lends; *p; p = &(*p)->next)
        if (*p == *lp) {
            *p = (*lp)->next;
            atomic_fetch_sub(&g.n_lends, 1);
            break;
        }
    pthread_mutex_unlock(&g.lock);
    free(*lp);
    *lp = NULL;
}

// A reader counted on a lent buffer that will not read after all.
static void lend_unread(shm_lend_t *l) {
    atomic_fetch_sub_explicit(&((slot_header_t *)(l->arena->base + l->at))->state, 1, memory_order_relaxed);
}

// The lent buffer a frame covers exactly, with one
// more reader counted on it (release: the caller's writes of its bytes come
// before the receiver's reads); NULL when none.
static shm_lend_t *lend_for(const zmq_msg_t *frame) {
    if (atomic_load_explicit(&g.n_lends, memory_order_relaxed) == 0) return NULL;
    const uint8_t *data = zmq_msg_data((zmq_msg_t *)frame);
    size_t len = zmq_msg_size((zmq_msg_t *)frame);
    pthread_mutex_lock(&g.lock);
    shm_lend_t *l = g.lends;
    while (l && !(l->data == data && l->bytes == len && l->arena->generation == atomic_load(&g.generation)))
        l = l->next;
    if (l) atomic_fetch_add_explicit(&((slot_header_t *)(l->arena->base + l->at))->state, 1, memory_order_release);
    pthread_mutex_unlock(&g.lock);
    return l;
}

int shm_frames_enable(uint64_t run_id) {
    pthread_mutex_lock(&g.lock);
    g.run_id = run_id;
    atomic_fetch_add(&g.generation, 1);
    atomic_store(&g.on, 1);
    pthread_mutex_unlock(&g.lock);
    return 0;
}

void shm_frames_disable(void) {
    pthread_mutex_lock(&g.lock);
    atomic_store(&g.on, 0);
    for (arena_t *a = g.arenas; a; a = a->next) {
        if (a->generation != atomic_load(&g.generation)) continue;  // unlinked at an earlier disable
        char name[96];
        arena_name(name, sizeof name, g.run_id, (uint32_t)getpid(), a->index);
        shm_unlink(name);
    }
    pthread_mutex_unlock(&g.lock);
}

size_t shm_frames_remove_run(uint64_t run_id) {
    char prefix[64];
    size_t prefix_len = (size_t)run_prefix(prefix, sizeof prefix, run_id);
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    size_t removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, prefix_len) != 0) continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        removed += shm_unlink(name) == 0;
    }
    closedir(d);
    return removed;
}

int shm_frames_segment_name(uint64_t run_id, const char *what, char *out, size_t len) {
    char prefix[64];
    run_prefix(prefix, sizeof prefix, run_id);
    int w = snprintf(out, len, "/%s%s", prefix, what);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

int shm_frames_pack(const wire_header_t *h, zmq_msg_t *frames, size_t n) {
    if (!atomic_load_explicit(&g.on, memory_order_relaxed) || n == 0 || n > 2) return 0;
    if (h->type != MSG_TYPE_PUSH && h->type != MSG_TYPE_PARAMS) return 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += zmq_msg_size(&frames[i]);
    if (total < SHM_FRAMES_MIN_BYTES) return 0;
    arena_t *a = my_arena();
    size_t slot[2];
    shm_lend_t *lend[2] = {NULL, NULL};
    zmq_msg_t ref[2];
    size_t ready = 0;  // frames with a reference made (and a slot, or a reader counted on a lent buffer)
    int filled[2] = {0, 0};  // the frame is a slot handed out to fill: sent without a copy
    for (; ready < n; ready++) {
        size_t i = ready;
        lend[i] = lend_for(&frames[i]);
        slot[i] = lend[i] ? SIZE_MAX : reserved_slot(a, &frames[i]);
        filled[i] = slot[i] != SIZE_MAX;
        if (!lend[i] && !filled[i]) slot[i] = a ? take_slot(a, zmq_msg_size(&frames[i]), slot, i) : SIZE_MAX;
        if (!lend[i] && slot[i] == SIZE_MAX) break;
        if (zmq_msg_init_size(&ref[i], sizeof(shm_ref_t)) != 0) {
            if (lend[i]) lend_unread(lend[i]);
            break;
        }
    }
    if (ready < n) {
        for (size_t j = 0; j < ready; j++) {
            if (lend[j]) lend_unread(lend[j]);
            zmq_msg_close(&ref[j]);
        }
        atomic_fetch_add_explicit(&g.inline_for_want_of_slot, 1, memory_order_relaxed);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = zmq_msg_size(&frames[i]);
        const arena_t *from = a;
        size_t header_at;
        if (lend[i]) {  // the bytes are there already, and the reader counted
            from = lend[i]->arena;
            header_at = lend[i]->at;
            atomic_fetch_add_explicit(&g.without_copy, 1, memory_order_relaxed);
        } else if (filled[i]) {  // the bytes are there already: one more reader
            header_at = a->slot_at[slot[i]];
            atomic_fetch_add_explicit(&slot_header(a, slot[i])->state, 1, memory_order_release);
            atomic_fetch_add_explicit(&g.without_copy, 1, memory_order_relaxed);
        } else {
            header_at = a->slot_at[slot[i]];
            slot_header_t *s = slot_header(a, slot[i]);
            memcpy((uint8_t *)s + SLOT_HEADER_BYTES, zmq_msg_data(&frames[i]), len);
            s->len = len;
            atomic_store_explicit(&s->state, 1, memory_order_release);  // one reader
        }
        shm_ref_t r = {.magic = SHM_REF_MAGIC,
                       .run_id = g.run_id,
                       .token = from->token,
                       .pid = (uint32_t)getpid(),
                       .index = from->index,
                       .offset = header_at + SLOT_HEADER_BYTES,
                       .len = len};
        memcpy(zmq_msg_data(&ref[i]), &r, sizeof r);
        zmq_msg_move(&frames[i], &ref[i]);  // the payload frame let go
        zmq_msg_close(&ref[i]);
    }
    atomic_fetch_add_explicit(&g.packed, 1, memory_order_relaxed);
    return 1;
}

void shm_frames_drop_unsent(zmq_msg_t *frame) {
    shm_ref_t r;
    if (zmq_msg_size(frame) == sizeof r) {
        memcpy(&r, zmq_msg_data(frame), sizeof r);
        // This thread's arena (a slot), or the arena of a lent buffer.
        pthread_mutex_lock(&g.lock);
        arena_t *a = g.arenas;
        while (a && a->token != r.token) a = a->next;
        pthread_mutex_unlock(&g.lock);
        if (r.magic == SHM_REF_MAGIC && a && r.offset >= SLOT_HEADER_BYTES && r.offset <= a->carved) {
            slot_header_t *s = (slot_header_t *)(a->base + r.offset - SLOT_HEADER_BYTES);
            atomic_fetch_sub_explicit(&s->state, 1, memory_order_relaxed);  // the reader that never was
        }
    }
    zmq_msg_close(frame);
}

// ---- receiving ----------------------------------------------------------------

// Maps the peer's arena named by r, checking that its header is the one r
// names. 0, or -1 when it cannot be opened (another machine, gone) or is not it.
static int map_peer(const shm_ref_t *r, mapped_t *m) {
    char name[96];
    arena_name(name, sizeof name, r->run_id, r->pid, r->index);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct stat st;
    void *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= ARENA_HEADER_BYTES)
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return -1;
    const arena_header_t *h = base;
    if (h->magic != ARENA_MAGIC || h->run_id != r->run_id || h->token != r->token || h->bytes != (uint64_t)st.st_size) {
        munmap(base, (size_t)st.st_size);
        return -1;
    }
    m->pid = r->pid;
    m->index = r->index;
    m->token = r->token;
    m->base = base;
    m->bytes = (size_t)st.st_size;
    return 0;
}

// The mapping r refers into, with one more frame counted on it; NULL when
// none can be had (every entry in use by frames not closed yet, or the arena
// cannot be mapped).
static mapped_t *mapping_for(const shm_ref_t *r) {
    pthread_mutex_lock(&g.lock);
    mapped_t *found = NULL, *empty = NULL, *idle = NULL;
    for (size_t i = 0; i < MAPPED_MAX && !found; i++) {
        mapped_t *m = &g.mapped[i];
        if (m->base && m->pid == r->pid && m->index == r->index && m->token == r->token)
            found = m;
        else if (!m->base && !empty)
            empty = m;
        else if (m->base && !idle && atomic_load(&m->frames) == 0)
            idle = m;
    }
    mapped_t *spare = empty ? empty : idle;
    if (!found && spare) {
        if (spare->base) munmap(spare->base, spare->bytes);
        spare->base = NULL;
        if (map_peer(r, spare) == 0) found = spare;
    }
    if (found) atomic_fetch_add(&found->frames, 1);
    pthread_mutex_unlock(&g.lock);
    return found;
}

// A received frame over a peer's slot closed: the slot back to its sender.
static void release_slot(void *data, void *hint) {
    slot_header_t *s = (slot_header_t *)((uint8_t *)data - SLOT_HEADER_BYTES);
    atomic_fetch_sub_explicit(&s->state, 1, memory_order_release);
    atomic_fetch_sub(&((mapped_t *)hint)->frames, 1);
}

// Frame f (a reference) replaced by a frame over the bytes it refers to.
static int unpack_one(uint64_t run_id, zmq_msg_t *f) {
    shm_ref_t r;
    if (zmq_msg_size(f) != sizeof r) return -1;
    memcpy(&r, zmq_msg_data(f), sizeof r);
    if (r.magic != SHM_REF_MAGIC || r.run_id != run_id || r.offset % SLOT_HEADER_BYTES != 0 ||
        r.offset < ARENA_HEADER_BYTES + SLOT_HEADER_BYTES)
        return -1;
    mapped_t *m = mapping_for(&r);
    if (!m) return -1;
    int ok = r.offset <= m->bytes && r.len <= m->bytes - r.offset;
    slot_header_t *s = ok ? (slot_header_t *)(m->base + r.offset - SLOT_HEADER_BYTES) : NULL;
    ok = ok && atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FREE && s->len == r.len &&
         s->capacity >= r.len && s->capacity <= m->bytes - r.offset;
    zmq_msg_t over;
    if (!ok || zmq_msg_init_data(&over, m->base + r.offset, r.len, release_slot, m) != 0) {
        atomic_fetch_sub(&m->frames, 1);
        return -1;
    }
    zmq_msg_move(f, &over);  // the reference let go
    zmq_msg_close(&over);
    return 0;
}

wire_status_t shm_frames_unpack(uint64_t run_id, zmq_msg_t *frames, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (unpack_one(run_id, &frames[i]) != 0) return WIRE_STATUS_BAD_SHM;
    atomic_fetch_add_explicit(&g.unpacked, 1, memory_order_relaxed);
    return WIRE_STATUS_OK;
}

void shm_frames_counts(shm_frames_counts_t *out) {
    out->packed = atomic_load(&g.packed);
    out->without_copy = atomic_load(&g.without_copy);
    out->inline_for_want_of_slot = atomic_load(&g.inline_for_want_of_slot);
    out->slots = atomic_load(&g.slots);
    out->unpacked = atomic_load(&g.unpacked);
}
