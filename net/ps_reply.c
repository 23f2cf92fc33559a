// A shard's values lent to replies without a copy (ps_reply.h).
#include "net/ps_reply.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/finite.h"
#include "kernels/update.h"
#include "net/shm_frames.h"
#include "net/wire.h"
#include "net/zmsg.h"

// Floats per block of a fused pass: small enough that a block written is
// still in L1/L2 when it is checksummed; a multiple of 8 (the checksum's 32 bytes).
#define BLOCK 4096

typedef struct lend_slot {
    struct ps_values *owner;
    _Atomic int inflight;  // replies sent from this buffer that libzmq still holds
} lend_slot_t;

struct ps_values {
    size_t n;
    float *buf[2];
    // A buffer in shared memory (--ps-transport shm): a whole reply over it
    // goes to its receiver without a copy, however many receive it; NULL
    // where the buffer is the process's own memory.
    shm_lend_t *shm[2];
    lend_slot_t slot[2];
    int cur;  // the buffer holding the current values
    _Atomic int refs;  // the owner's, plus one per reply in flight
    int sum_valid;  // sum is the checksum of buf[cur]
    uint32_t sum;
    // A push applied range by range (ps_values_apply_range): the checksum of
    // values [0, summed_to) as they are now, while nothing else wrote there.
    wire_checksum_stream_t stream;
    size_t summed_to;  // SIZE_MAX: no stream
    size_t cur_written;  // during ps_values_apply_sum_in_ranges: the values written so far; else SIZE_MAX
    ps_values_counts_t counts;
};

static void values_free(ps_values_t *v) {
    for (int i = 0; i < 2; i++) {
        if (v->shm[i])
            shm_frames_lend_destroy(&v->shm[i]);  // its memory stays where a receiver may still read it
        else
            free(v->buf[i]);
    }
    free(v);
}

static void unref(ps_values_t *v) {
    if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1) values_free(v);
}

ps_values_t *ps_values_new(size_t n) {
    ps_values_t *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n = n;
    size_t alloc = (n ? n : 1) * sizeof(float);
    for (int i = 0; i < 2; i++) {
        v->buf[i] = n ? shm_frames_lend_new(alloc, &v->shm[i]) : NULL;
        if (!v->buf[i]) v->buf[i] = calloc(1, alloc);
    }
    if (!v->buf[0] || !v->buf[1]) {
        values_free(v);
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        v->slot[i].owner = v;
        atomic_init(&v->slot[i].inflight, 0);
    }
    atomic_init(&v->refs, 1);
    v->summed_to = SIZE_MAX;
    v->cur_written = SIZE_MAX;
    return v;
}

void ps_values_release(ps_values_t **vp) {
    if (!vp || !*vp) return;
    unref(*vp);
    *vp = NULL;
}

float *ps_values_get(const ps_values_t *v) { return v->buf[v->cur]; }

// Whether libzmq, or a receiver of a reply by reference, still holds a reply
// over buffer i (acquire: once they let go, their reads of the buffer
// happened before this thread's writes).
static int lent(const ps_values_t *v, int i) {
    return atomic_load_explicit(&((ps_values_t *)v)->slot[i].inflight, memory_order_acquire) > 0 ||
           (v->shm[i] && shm_frames_lend_readers(v->shm[i]) > 0);
}

// Makes the current buffer one no reply references (copying the values over
// to the other one when it is lent).
static void make_writable(ps_values_t *v) {
    if (lent(v, v->cur)) {
        // The other buffer is free: a reply is lent only while it is.
        int to = 1 - v->cur;
        memcpy(v->buf[to], v->buf[v->cur], v->n * sizeof(float));
        v->cur = to;
        v->counts.moved++;
    }
}

float *ps_values_write(ps_values_t *v) {
    v->sum_valid = 0;
    v->summed_to = SIZE_MAX;
    make_writable(v);
    return v->buf[v->cur];
}

// The buffer a dense write goes to: the current one, or the other when a
// reply still references the current one (which then becomes the other).
static float *write_target(ps_values_t *v, const float **src) {
    v->summed_to = SIZE_MAX;
    *src = v->buf[v->cur];
    if (!lent(v, v->cur)) return v->buf[v->cur];
    v->cur = 1 - v->cur;
    v->counts.moved++;
    return v->buf[v->cur];
}

static void reply_done(void *data, void *hint);

// Told of each range of the values as a pass finishes writing it (done NULL: nobody).
typedef struct range_watch {
    size_t range;  // floats per range, a multiple of BLOCK
    ps_range_done_fn done;
    void *ctx;
    int rc;  // the first non-zero answer of done; it is not called again
} range_watch_t;

// One blocked pass: dst = src, updated with g (SGD, or Adagrad when h is
// set), and the checksum of the result, each block while it is in cache.
// A round of one or two gradients (non-NULL in g): their indices into
// terms, and how many (1 or 2); 0 for none or more than two.
static size_t round_terms(const float *const *g, size_t count, size_t terms[2]) {
    size_t n = 0;
    for (size_t k = 0; k < count; k++)
        if (g[k]) {
            if (n == 2) return 0;
            terms[n++] = k;
        }
    return n;
}

static void update_blocks(ps_values_t *v, const float *src, float *dst, const float *const *g, const float *weight,
                          size_t count, float lr, float *h, float eps, range_watch_t *watch) {
    float sum[BLOCK];
    // Plain SGD by a round of one or two gradients: the sum is not formed
    // apart, each block is stepped in one pass (the same bits).
    size_t t[2] = {0, 0}, terms = weight && !h ? round_terms(g, count, t) : 0;
    wire_checksum_stream_t st, range_st;
    wire_checksum_begin(&st, 0);
    wire_checksum_begin(&range_st, 0);
    for (size_t off = 0; off < v->n; off += BLOCK) {
        size_t len = v->n - off < BLOCK ? v->n - off : BLOCK;
        const float *step = g[0] + off;
        if (weight && terms == 0) {
            // The same arithmetic, in the same order, as memset + axpy_cpu
            // per gradient over the whole shard.
            memset(sum, 0, len * sizeof *sum);
            for (size_t k = 0; k < count; k++)
                if (g[k]) axpy_cpu(len, weight[k], g[k] + off, sum);
            step = sum;
        }
        if (dst != src) memcpy(dst + off, src + off, len * sizeof(float));
        if (terms == 2)
            sgd_sum2_update_cpu(len, lr, weight[t[0]], g[t[0]] + off, weight[t[1]], g[t[1]] + off, dst + off);
        else if (terms == 1)
            sgd_weighted_update_cpu(len, lr, weight[t[0]], g[t[0]] + off, dst + off);
        else if (h)
            adagrad_update_cpu(len, lr, eps, step, h + off, dst + off);
        else
            sgd_update_cpu(len, lr, step, dst + off);
        wire_checksum_update(&st, dst + off, len * sizeof(float));
        if (!watch || watch->rc != 0) continue;
        wire_checksum_update(&range_st, dst + off, len * sizeof(float));
        size_t end = off + len;
        if (end % watch->range == 0 || end == v->n) {
            size_t from = (end - 1) / watch->range * watch->range;
            v->cur_written = end;
            watch->rc = watch->done(watch->ctx, from, end - from, wire_checksum_end(&range_st));
            wire_checksum_begin(&range_st, 0);
        }
    }
    v->sum = wire_checksum_end(&st);
    v->sum_valid = 1;
}

void ps_values_apply(ps_values_t *v, const float *g, float lr, float *h, float eps) {
    const float *src;
    float *dst = write_target(v, &src);
    update_blocks(v, src, dst, &g, NULL, 1, lr, h, eps, NULL);
}

void ps_values_apply_sum(ps_values_t *v, const float *const *g, const float *weight, size_t count, float lr, float *h,
                         float eps) {
    const float *src;
    float *dst = write_target(v, &src);
    update_blocks(v, src, dst, g, weight, count, lr, h, eps, NULL);
}

int ps_values_apply_sum_in_ranges(ps_values_t *v, const float *const *g, const float *weight, size_t count, float lr,
                                  float *h, float eps, size_t range, ps_range_done_fn done, void *ctx) {
    const float *src;
    float *dst = write_target(v, &src);
    range_watch_t watch = {.range = (range + BLOCK - 1) / BLOCK * BLOCK, .done = done, .ctx = ctx};
    update_blocks(v, src, dst, g, weight, count, lr, h, eps, &watch);
    v->cur_written = SIZE_MAX;
    return watch.rc;
}

// A frame over w[0..bytes) of the current buffer: lent (zero-copy) only
// while the other buffer is free, so that a write always finds a buffer it
// may change; else a copy. Lent over a whole buffer in shared memory, it
// goes on by reference without a copy (shm_frames_pack), and the buffer
// stays lent until every receiver has closed it.
static int reply_frame(ps_values_t *v, float *w, size_t bytes, zmq_msg_t *frame, char *err, size_t err_len) {
    if (bytes > 0 && !lent(v, 1 - v->cur)) {
        lend_slot_t *slot = &v->slot[v->cur];
        atomic_fetch_add_explicit(&slot->inflight, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
        if (zmq_msg_init_data(frame, w, bytes, reply_done, slot) == 0) {
            v->counts.lent++;
            return 0;
        }
        atomic_fetch_sub_explicit(&slot->inflight, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&v->refs, 1, memory_order_relaxed);
    }
    if (zmsg_frame_alloc(frame, bytes, err, err_len) != 0) return -1;
    memcpy(zmq_msg_data(frame), w, bytes);
    v->counts.copied++;
    return 0;
}

int ps_values_reply_range(ps_values_t *v, size_t from, size_t n, zmq_msg_t *frame, char *err, size_t err_len) {
    size_t bytes = n * sizeof(float);
    float *w = v->buf[v->cur] + from;
    if (from + n > v->cur_written) {
        snprintf(err, err_len, "server: values [%zu, %zu) asked for before they were written", from, from + n);
        return -1;
    }
    return reply_frame(v, w, bytes, frame, err, err_len);
}

uint32_t ps_values_apply_range(ps_values_t *v, size_t from, size_t n, const float *g, float lr, float *h, float eps,
                               float *copy) {
    make_writable(v);
    v->sum_valid = 0;
    if (from == 0) {
        wire_checksum_begin(&v->stream, 0);
        v->summed_to = 0;
    } else if (from != v->summed_to) {
        v->summed_to = SIZE_MAX;  // a range summed already changes, or one is skipped
    }
    float *w = v->buf[v->cur] + from;
    int streaming = v->summed_to != SIZE_MAX;
    wire_checksum_stream_t copied;
    wire_checksum_begin(&copied, 0);
    for (size_t off = 0; off < n; off += BLOCK) {
        size_t len = n - off < BLOCK ? n - off : BLOCK;
        if (h)
            adagrad_update_cpu(len, lr, eps, g + off, h + from + off, w + off);
        else
            sgd_update_cpu(len, lr, g + off, w + off);
        // A copied range is summed once: its sums join the shard's stream after.
        if (copy)
            wire_checksum_update_copy(&copied, copy + off, w + off, len * sizeof(float));
        else if (streaming)
            wire_checksum_update(&v->stream, w + off, len * sizeof(float));
    }
    if (copy && streaming) wire_checksum_join(&v->stream, &copied);
    uint32_t copy_sum = copy ? wire_checksum_end(&copied) : 0;
    if (!streaming) return copy_sum;
    v->summed_to = v->stream.closed && from + n < v->n ? SIZE_MAX : from + n;
    if (v->summed_to == v->n) {
        v->sum = wire_checksum_end(&v->stream);
        v->sum_valid = 1;
        v->summed_to = SIZE_MAX;
    }
    return copy_sum;
}

static void reply_done(void *data, void *hint) {
    (void)data;
    lend_slot_t *slot = hint;
    ps_values_t *v = slot->owner;
    atomic_fetch_sub_explicit(&slot->inflight, 1, memory_order_release);
    unref(v);
}

int ps_values_reply(ps_values_t *v, zmq_msg_t *frame, uint32_t *checksum, char *err, size_t err_len) {
    size_t bytes = v->n * sizeof(float);
    float *w = v->buf[v->cur];
    if (!v->sum_valid) {
        v->sum = wire_checksum(w, bytes, 0);
        v->sum_valid = 1;
    }
    *checksum = v->sum;
    return reply_frame(v, w, bytes, frame, err, err_len);
}

int ps_push_verify_finite(zmsg_t *m, int *finite) {
    if (!m->checksum_pending || m->n_frames != 1) {
        *finite = m->payload_finite ? 1 : -1;
        return zmsg_verify(m);
    }
    // wire_validate_payload held the frame to 4 * count bytes.
    const float *p = zmq_msg_data(&m->frames[0]);
    size_t n = zmq_msg_size(&m->frames[0]) / sizeof(float);
    wire_checksum_stream_t st;
    wire_checksum_begin(&st, 0);
    int ok = 1;
    for (size_t off = 0; off < n; off += BLOCK) {
        size_t len = n - off < BLOCK ? n - off : BLOCK;
        wire_checksum_update(&st, p + off, len * sizeof(float));
        ok &= all_finite_cpu(p + off, len);
    }
    m->checksum_pending = 0;
    if (wire_checksum_end(&st) != m->h.checksum) {
        m->status = WIRE_STATUS_BAD_CHECKSUM;
        return -1;
    }
    *finite = ok;
    return 0;
}

void ps_values_counts(const ps_values_t *v, ps_values_counts_t *out) { *out = v->counts; }
