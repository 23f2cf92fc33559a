// Ring allreduce over libzmq PUSH/PULL sockets (ring.h, docs/allreduce.md).
#include "net/ring.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "datasets/split.h"  // defines: shard_range
#include "net/zmsg.h"        // defines: zmsg_t, zmsg_send, zmsg_recv, zmsg_close, zmsg_header, ZMQ_FAIL

// Messages queued per direction before a send waits: with 1 MiB sub-chunks,
// 16 MiB on each side of the pipe, so that a rank that is descheduled for a
// while does not stall its neighbours at once (4 MiB measured slower;
// docs/allreduce.md has the measurements). Zero-copy frames are pointers into
// the caller's array, so the queue costs no memory then. Overridable at build
// time for tuning.
#ifndef RING_HWM
#define RING_HWM 16
#endif
// Smaller sub-chunks are copied even in zero-copy mode: the copy is cheap,
// and it leaves the caller's array alone sooner.
#define RING_ZERO_COPY_MIN_BYTES 16384

struct ring {
    void *ctx;
    size_t rank, n;
    uint64_t run_id;
    void *pull;  // bound; the previous rank's PUSH connects here
    void *push;  // connected to the next rank's PULL
    char endpoint[256];
    char next_endpoint[256];
    size_t sub;  // floats per sub-chunk
    int zero_copy;
    uint64_t seq;  // calls started: the clock of the current call's messages
    ring_stats_t stats;
    // Payload frames handed to libzmq and not yet released by it (it releases
    // a frame once the whole frame is in the kernel's socket buffer). A call
    // returns only when this is back to zero: zero-copy frames point into the
    // caller's array, and a frame still in libzmq's queue would be lost if the
    // process then closed the ring (linger 0) and left, hanging the next rank.
    atomic_size_t in_flight;
};

// Where one direction of a call stands: step (0 .. 2n-3), sub-chunk k of that
// step's chunk [begin, end).
typedef struct cursor {
    size_t step, k;
    size_t begin, end, n_subs;
} cursor_t;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static size_t prev_rank(const ring_t *r) { return (r->rank + r->n - 1) % r->n; }
static size_t next_rank(const ring_t *r) { return (r->rank + 1) % r->n; }
static size_t n_steps(const ring_t *r) { return 2 * r->n - 2; }

// At step s a rank sends chunk (rank - s) mod n and receives chunk
// (rank - s - 1) mod n, so what it receives at step s is what it sends at s + 1.
static void cursor_load(const ring_t *r, size_t count, int recv, cursor_t *c) {
    for (; c->step < n_steps(r); c->step++) {
        size_t chunk = (r->rank + 2 * r->n - c->step - (recv ? 1 : 0)) % r->n;
        shard_range(count, r->n, chunk, &c->begin, &c->end);
        c->n_subs = (c->end - c->begin + r->sub - 1) / r->sub;
        if (c->n_subs) return;  // an empty chunk (count < n) has no messages
    }
}

static void cursor_init(const ring_t *r, size_t count, int recv, cursor_t *c) {
    memset(c, 0, sizeof *c);
    cursor_load(r, count, recv, c);
}

static int cursor_done(const ring_t *r, const cursor_t *c) { return c->step >= n_steps(r); }

static void cursor_next(const ring_t *r, size_t count, int recv, cursor_t *c) {
    if (++c->k < c->n_subs) return;
    c->k = 0;
    c->step++;
    cursor_load(r, count, recv, c);
}

static size_t cursor_offset(const ring_t *r, const cursor_t *c) { return c->begin + c->k * r->sub; }
static size_t cursor_len(const ring_t *r, const cursor_t *c) {
    size_t a = cursor_offset(r, c);
    return (c->end - a < r->sub) ? c->end - a : r->sub;
}

// A send at step s >= 1 forwards what arrived at step s - 1 (same chunk, same
// sub-chunk), so it waits until that sub-chunk has been received.
static int send_ready(const cursor_t *s, const cursor_t *rc) {
    if (s->step == 0) return 1;
    return rc->step > s->step - 1 || (rc->step == s->step - 1 && rc->k > s->k);
}

// libzmq calls these from its I/O thread.
static void release_borrowed(void *data, void *hint) {
    (void)data;
    ring_t *r = hint;
    atomic_fetch_sub_explicit(&r->in_flight, 1, memory_order_release);
}

static void release_copy(void *data, void *hint) {
    free(data);
    release_borrowed(NULL, hint);
}

// Waits (politely) until libzmq has let go of every frame sent.
static int wait_released(ring_t *r, int timeout_ms) {
    double t0 = now_ms();
    while (atomic_load_explicit(&r->in_flight, memory_order_acquire) > 0) {
        if (timeout_ms > 0 && now_ms() - t0 > timeout_ms) return -1;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void *push_socket(ring_t *r, char *err, size_t err_len) {
    void *s = zmq_socket(r->ctx, ZMQ_PUSH);
    if (!s) {
        ZMQ_FAIL("ring: zmq_socket(PUSH)", err, err_len);
        return NULL;
    }
    int hwm = RING_HWM;
    if (zmsg_socket_defaults(s, 0, err, err_len) != 0) {
        zmq_close(s);
        return NULL;
    }
    if (zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0) {
        ZMQ_FAIL("ring: zmq_setsockopt(PUSH, ZMQ_SNDHWM)", err, err_len);
        zmq_close(s);
        return NULL;
    }
    return s;
}

// After a failed call with frames still queued: closing the PUSH socket
// (linger 0) makes libzmq drop them, and the call may return only once it has,
// since zero-copy ones point into the caller's array. A fresh socket is then
// connected so that the ring object stays usable.
static void abandon_sends(ring_t *r) {
    if (atomic_load(&r->in_flight) == 0) return;
    zmq_close(r->push);
    r->push = NULL;
    wait_released(r, 0);
    char ignored[256];
    r->push = push_socket(r, ignored, sizeof ignored);
    if (r->push && r->next_endpoint[0]) zmq_connect(r->push, r->next_endpoint);
}

ring_t *ring_new(void *zmq_ctx, size_t rank, size_t n, uint64_t run_id, const char *bind_host, char *err,
                 size_t err_len) {
    if (n == 0 || rank >= n || n > WIRE_NO_ID || !zmq_ctx || !bind_host || !bind_host[0]) {
        snprintf(err, err_len, "ring_new: need rank < n, 1 <= n < 2^32, a context and a bind host (rank %zu, n %zu)",
                 rank, n);
        return NULL;
    }
    ring_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, err_len, "ring_new: out of memory");
        return NULL;
    }
    r->ctx = zmq_ctx;
    r->rank = rank;
    r->n = n;
    r->run_id = run_id;
    r->sub = RING_SUB_CHUNK_DEFAULT;
    r->zero_copy = RING_ZERO_COPY_DEFAULT;
    atomic_init(&r->in_flight, 0);

    r->pull = zmq_socket(zmq_ctx, ZMQ_PULL);
    if (!r->pull) {
        ZMQ_FAIL("ring_new: zmq_socket(PULL)", err, err_len);
        ring_destroy(&r);
        return NULL;
    }
    // Receives never block inside zmsg_recv: the call polls, so that it can
    // keep sending while nothing arrives and notice a silent neighbour.
    int hwm = RING_HWM, zero = 0;
    if (zmsg_socket_defaults(r->pull, 0, err, err_len) != 0) {
        ring_destroy(&r);
        return NULL;
    }
    if (zmq_setsockopt(r->pull, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(r->pull, ZMQ_RCVTIMEO, &zero, sizeof zero) != 0) {
        ZMQ_FAIL("ring_new: zmq_setsockopt(PULL, ZMQ_RCVHWM/ZMQ_RCVTIMEO)", err, err_len);
        ring_destroy(&r);
        return NULL;
    }
    char bind_ep[300];
    if (strcmp(bind_host, "ipc") == 0) snprintf(bind_ep, sizeof bind_ep, "ipc://*");
    else snprintf(bind_ep, sizeof bind_ep, "tcp://%s:*", bind_host);
    if (zmq_bind(r->pull, bind_ep) != 0) {
        char what[360];
        snprintf(what, sizeof what, "ring_new: rank %zu: zmq_bind(%s)", rank, bind_ep);
        ZMQ_FAIL(what, err, err_len);
        ring_destroy(&r);
        return NULL;
    }
    size_t len = sizeof r->endpoint;
    if (zmq_getsockopt(r->pull, ZMQ_LAST_ENDPOINT, r->endpoint, &len) != 0) {
        ZMQ_FAIL("ring_new: zmq_getsockopt(ZMQ_LAST_ENDPOINT)", err, err_len);
        ring_destroy(&r);
        return NULL;
    }
    r->push = push_socket(r, err, err_len);
    if (!r->push) {
        ring_destroy(&r);
        return NULL;
    }
    return r;
}

const char *ring_endpoint(const ring_t *r) { return r->endpoint; }

int ring_connect(ring_t *r, const char *next_endpoint, char *err, size_t err_len) {
    // A second peer would make PUSH deal messages round-robin between them.
    if (r->next_endpoint[0]) {
        snprintf(err, err_len, "ring_connect: rank %zu is already connected to rank %zu at %s", r->rank,
                 next_rank(r), r->next_endpoint);
        return -1;
    }
    if (!next_endpoint || strlen(next_endpoint) >= sizeof r->next_endpoint) {
        snprintf(err, err_len, "ring_connect: rank %zu: missing or overlong endpoint for rank %zu", r->rank,
                 next_rank(r));
        return -1;
    }
    if (zmq_connect(r->push, next_endpoint) != 0) {
        char what[360];
        snprintf(what, sizeof what, "ring_connect: rank %zu: zmq_connect(%s) to rank %zu", r->rank, next_endpoint,
                 next_rank(r));
        return ZMQ_FAIL(what, err, err_len);
    }
    snprintf(r->next_endpoint, sizeof r->next_endpoint, "%s", next_endpoint);
    return 0;
}

int ring_tune(ring_t *r, size_t sub_chunk, int zero_copy, char *err, size_t err_len) {
    if (sub_chunk == 0 || sub_chunk > UINT32_MAX / sizeof(float)) {
        snprintf(err, err_len, "ring_tune: sub-chunk of %zu floats: need 1 .. %zu", sub_chunk,
                 (size_t)(UINT32_MAX / sizeof(float)));
        return -1;
    }
    r->sub = sub_chunk;
    r->zero_copy = zero_copy ? 1 : 0;
    return 0;
}

void ring_get_stats(const ring_t *r, ring_stats_t *out) { *out = r->stats; }

void ring_destroy(ring_t **rp) {
    if (!rp || !*rp) return;
    ring_t *r = *rp;
    if (r->push) zmq_close(r->push);
    // Closing dropped whatever zero-copy frames were queued; their release
    // callbacks name this object, so it must outlive them.
    wait_released(r, 0);
    if (r->pull) zmq_close(r->pull);
    free(r);
    *rp = NULL;
}

// Sends sub-chunk [a, a + len) of the step. Returns 0, 1 when the socket would
// block (nothing was sent), or -1.
static int send_sub(ring_t *r, const float *data, size_t count, const cursor_t *c, char *err, size_t err_len) {
    size_t a = cursor_offset(r, c), len = cursor_len(r, c), bytes = len * sizeof(float);
    zmq_msg_t frame;
    // Frames are the ring's own buffers (not zmsg_frame_alloc's) so that
    // libzmq tells us when it is done with each one.
    void *buf;
    void (*release)(void *, void *);
    if (r->zero_copy && bytes >= RING_ZERO_COPY_MIN_BYTES) {
        // Safe because nothing writes this range again before the next rank
        // has received it (docs/allreduce.md), and the call waits for the
        // release of every frame before it returns.
        buf = (void *)(data + a);
        release = release_borrowed;
    } else {
        buf = malloc(bytes ? bytes : 1);
        if (!buf) {
            snprintf(err, err_len, "ring: rank %zu: out of memory for a %zu-byte frame", r->rank, bytes);
            return -1;
        }
        memcpy(buf, data + a, bytes);
        release = release_copy;
    }
    atomic_fetch_add_explicit(&r->in_flight, 1, memory_order_relaxed);
    if (zmq_msg_init_data(&frame, buf, bytes, release, r) != 0) {
        int e = errno;
        release(buf, r);
        errno = e;
        return ZMQ_FAIL("ring: zmq_msg_init_data", err, err_len);
    }
    wire_header_t h = zmsg_header(MSG_TYPE_RING_CHUNK, r->run_id);
    h.sender = (uint32_t)r->rank;
    h.shard = WIRE_NO_ID;
    h.clock = r->seq;
    h.param_version = count;
    h.offset = a;
    h.count = (uint32_t)len;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.aux = (uint32_t)c->step;
    if (zmsg_send(r->push, NULL, &h, &frame, 1, 1, err, err_len) != 0) {
        if (errno == EAGAIN) return 1;
        return -1;
    }
    r->stats.msgs_sent++;
    r->stats.bytes_sent += bytes;
    return 0;
}

// Unaligned loads: a received payload may start anywhere in libzmq's buffer.
// Floats travel in host order, which is little-endian on every asgd target.
static void add_into(float *restrict dst, const unsigned char *restrict src, size_t len) {
    for (size_t i = 0; i < len; i++) {
        float v;
        memcpy(&v, src + i * sizeof v, sizeof v);
        dst[i] += v;
    }
}

typedef struct mismatch {
    uint64_t n;          // this call's messages dropped for a wrong step/offset/size
    wire_header_t first; // the first of them
} mismatch_t;

// Handles one received message. Returns 1 when it was the expected sub-chunk
// (applied), 0 when dropped, -1 on a fatal disagreement (err filled).
static int take(ring_t *r, zmsg_t *m, float *data, size_t count, const cursor_t *c, mismatch_t *mm, char *err,
                size_t err_len) {
    const wire_header_t *h = &m->h;
    if (h->type != MSG_TYPE_RING_CHUNK || h->payload_kind != PAYLOAD_KIND_DENSE || h->sender != prev_rank(r) ||
        h->clock != r->seq) {
        r->stats.dropped++;
        return 0;
    }
    if (h->param_version != count) {
        snprintf(err, err_len,
                 "ring: rank %zu: rank %u allreduces %llu floats in call %llu but this rank %zu: every rank must "
                 "pass the same count",
                 r->rank, h->sender, (unsigned long long)h->param_version, (unsigned long long)r->seq, count);
        return -1;
    }
    size_t a = cursor_offset(r, c), len = cursor_len(r, c);
    if (h->aux != c->step || h->offset != a || h->count != len) {
        if (mm->n++ == 0) mm->first = *h;
        r->stats.dropped++;
        return 0;
    }
    const unsigned char *p = zmsg_payload(m, 0);
    if (c->step + 1 < r->n) add_into(data + a, p, len);  // reduce-scatter: add our values
    else memcpy(data + a, p, len * sizeof(float));       // allgather: a finished sum
    r->stats.msgs_recv++;
    r->stats.bytes_recv += len * sizeof(float);
    return 1;
}

static int timeout_error(ring_t *r, const cursor_t *sc, const cursor_t *rc, size_t count, int send_blocked,
                         int timeout_ms, const mismatch_t *mm, char *err, size_t err_len) {
    int at;
    if (send_blocked && !cursor_done(r, rc))
        at = snprintf(err, err_len,
                      "ring: rank %zu: nothing from rank %zu (previous) and nothing accepted by rank %zu (next) "
                      "for %d ms",
                      r->rank, prev_rank(r), next_rank(r), timeout_ms);
    else if (send_blocked)
        at = snprintf(err, err_len, "ring: rank %zu: rank %zu (next) accepted nothing for %d ms", r->rank,
                      next_rank(r), timeout_ms);
    else
        at = snprintf(err, err_len, "ring: rank %zu: nothing from rank %zu (previous) for %d ms", r->rank,
                      prev_rank(r), timeout_ms);
    if (at < 0 || (size_t)at >= err_len) return -1;
    at += snprintf(err + at, err_len - (size_t)at,
                   " in allreduce call %llu of %zu floats (sending step %zu, receiving step %zu of %zu): is it "
                   "gone or not calling?",
                   (unsigned long long)r->seq, count, sc->step, rc->step, n_steps(r));
    if (mm->n && at > 0 && (size_t)at < err_len)
        snprintf(err + at, err_len - (size_t)at,
                 " (%llu of its messages did not fit, the first step %u offset %llu count %u where step %zu offset "
                 "%zu count %zu was due: do all ranks use the same sub-chunk size?)",
                 (unsigned long long)mm->n, mm->first.aux, (unsigned long long)mm->first.offset, mm->first.count,
                 rc->step, cursor_offset(r, rc), cursor_len(r, rc));
    return -1;
}

static int allreduce(ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    cursor_t sc, rc;
    cursor_init(r, count, 0, &sc);
    cursor_init(r, count, 1, &rc);
    mismatch_t mm = {0};
    double last = now_ms();
    zmq_pollitem_t items[2];
    while (!cursor_done(r, &sc) || !cursor_done(r, &rc)) {
        int progressed = 0, send_blocked = 0;
        // Forward everything that is ready first: the next rank's progress
        // depends on it, ours only on what arrives.
        while (!cursor_done(r, &sc) && send_ready(&sc, &rc)) {
            int events = 0;
            size_t elen = sizeof events;
            if (zmq_getsockopt(r->push, ZMQ_EVENTS, &events, &elen) != 0)
                return ZMQ_FAIL("ring: zmq_getsockopt(PUSH, ZMQ_EVENTS)", err, err_len);
            if (!(events & ZMQ_POLLOUT)) {
                send_blocked = 1;
                break;
            }
            int s = send_sub(r, data, count, &sc, err, err_len);
            if (s < 0) return -1;
            if (s > 0) {
                send_blocked = 1;
                break;
            }
            cursor_next(r, count, 0, &sc);
            progressed = 1;
        }
        int drained = 0;
        if (!cursor_done(r, &rc)) {
            zmsg_t m;
            int got = zmsg_recv(r->pull, 0, r->run_id, &m, err, err_len);
            if (got < 0) {
                if (errno != EAGAIN) return -1;
                err[0] = '\0';
            } else {
                int t = got == 0 ? 0 : take(r, &m, data, count, &rc, &mm, err, err_len);
                if (got == 0) r->stats.dropped++;
                zmsg_close(&m);
                if (t < 0) return -1;
                if (t > 0) {
                    cursor_next(r, count, 1, &rc);
                    progressed = 1;
                } else {
                    drained = 1;  // look again before sleeping, but it is no progress
                }
            }
        }
        double t = now_ms();
        if (progressed) {
            last = t;
            continue;
        }
        if (timeout_ms > 0 && t - last >= timeout_ms)
            return timeout_error(r, &sc, &rc, count, send_blocked, timeout_ms, &mm, err, err_len);
        if (drained) continue;
        int n_items = 0;
        if (!cursor_done(r, &rc)) items[n_items++] = (zmq_pollitem_t){r->pull, 0, ZMQ_POLLIN, 0};
        if (send_blocked) items[n_items++] = (zmq_pollitem_t){r->push, 0, ZMQ_POLLOUT, 0};
        long wait = timeout_ms > 0 ? (long)(timeout_ms - (t - last)) + 1 : -1;
        if (zmq_poll(items, n_items, wait) < 0 && errno != EINTR)
            return ZMQ_FAIL("ring: zmq_poll", err, err_len);
    }
    return 0;
}

int ring_allreduce_sum(ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    r->seq++;
    r->stats.calls++;
    if (r->n == 1 || count == 0) return 0;
    if (!r->next_endpoint[0]) {
        snprintf(err, err_len, "ring_allreduce_sum: rank %zu is not connected to rank %zu (call ring_connect first)",
                 r->rank, next_rank(r));
        return -1;
    }
    if (!r->push) {
        snprintf(err, err_len, "ring_allreduce_sum: rank %zu has no socket to rank %zu after an earlier failure",
                 r->rank, next_rank(r));
        return -1;
    }
    int rc = allreduce(r, data, count, timeout_ms, err, err_len);
    // Every frame must have left libzmq's queue: then the caller may reuse its
    // array, or close the ring and exit, and the next rank still gets them all.
    if (rc == 0 && wait_released(r, timeout_ms) != 0) {
        snprintf(err, err_len,
                 "ring: rank %zu: rank %zu (next) did not take the last sub-chunks of allreduce call %llu within %d ms",
                 r->rank, next_rank(r), (unsigned long long)r->seq, timeout_ms);
        rc = -1;
    }
    if (rc != 0) abandon_sends(r);
    return rc;
}
