// Ring allreduce over libzmq PUSH/PULL sockets (ring.h, docs/allreduce.md).
#include "net/ring.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/partition.h"
#include "net/compress.h"
#include "net/ring_schedule.h"
#include "net/zmsg.h"

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
// Received payloads are verified, added and (when they go on) checksummed
// for the next send block by block, so that each block is read from memory
// once (docs/allreduce.md, "Per-message costs"). A multiple of 32 bytes
// (wire_checksum_update's pieces).
#define RING_BLOCK_FLOATS 2048
// Checksums of sub-chunks this rank will forward, computed while receiving
// them: slots looked up by (call, step, sub-chunk); a miss is computed anew.
#define RING_SEALED 64

typedef struct sealed {
    uint64_t seq;
    size_t step, k;
    uint32_t sum;
} sealed_t;

struct ring {
    void *ctx;
    size_t rank, n;
    uint64_t run_id;
    void *pull;  // bound; the previous rank's PUSH connects here
    void *push;  // connected to the next rank's PULL
    char endpoint[256];
    char next_endpoint[256];
    char ipc_file[256];  // the ipc:// socket file bound, removed by ring_destroy ("" for tcp)
    char ipc_dir[256];  // the directory made for it (bind host "ipc"), removed too
    size_t sub;  // floats per sub-chunk
    size_t max_count;  // the most values a call may have: the receiving socket takes no more
    int zero_copy;
    uint64_t seq;  // calls started: the clock of the current call's messages
    ring_schedule_t sched;  // this call's (count, fp16_count: elements [0, fp16_count) travel as fp16)
    ring_stats_t stats;
    sealed_t sealed[RING_SEALED];
    // Payload frames handed to libzmq and not yet released by it (it releases
    // a frame once the whole frame is in the kernel's socket buffer). A call
    // returns only when this is back to zero: zero-copy frames point into the
    // caller's array, and a frame still in libzmq's queue would be lost if the
    // process then closed the ring (linger 0) and left, hanging the next rank.
    atomic_size_t in_flight;
};

static size_t prev_rank(const ring_t *r) { return (r->rank + r->n - 1) % r->n; }
static size_t next_rank(const ring_t *r) { return (r->rank + 1) % r->n; }
static size_t n_steps(const ring_t *r) { return 2 * r->n - 2; }

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
    double t0 = mono_clock_ms();
    while (atomic_load_explicit(&r->in_flight, memory_order_acquire) > 0) {
        if (timeout_ms > 0 && mono_clock_ms() - t0 > timeout_ms) return -1;
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
    if (r->push && r->next_endpoint[0])
        zmsg_connect(r->push, r->next_endpoint, WIRE_HEADER_SIZE, ignored, sizeof ignored);
}

// The socket file of an ipc:// ring: bind host "ipc://PATH" is PATH; "ipc" a
// file in a fresh directory under $TMPDIR (else /tmp), made here rather than
// by libzmq's "ipc://*", which makes it in the working directory when TMPDIR
// is unset and leaves it there when the process is killed. Returns 0 (nothing
// to do for tcp), or -1 with err.
static int ipc_path(ring_t *r, const char *bind_host, char *err, size_t err_len) {
    if (strncmp(bind_host, "ipc://", 6) == 0) {
        if (strlen(bind_host + 6) >= RING_IPC_PATH_MAX) {
            snprintf(err, err_len, "ring_new: rank %zu: ipc path %s is longer than %d bytes", r->rank, bind_host + 6,
                     RING_IPC_PATH_MAX - 1);
            return -1;
        }
        snprintf(r->ipc_file, sizeof r->ipc_file, "%s", bind_host + 6);
        return 0;
    }
    if (strcmp(bind_host, "ipc") != 0) return 0;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || strlen(tmp) > RING_IPC_PATH_MAX - 32) tmp = "/tmp";
    char dir[RING_IPC_PATH_MAX - 6];  // room for "/socket"
    snprintf(dir, sizeof dir, "%s/asgd-ring-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        snprintf(err, err_len, "ring_new: rank %zu: cannot make a directory for its ipc socket (%s): %s", r->rank, dir,
                 strerror(errno));
        return -1;
    }
    snprintf(r->ipc_dir, sizeof r->ipc_dir, "%s", dir);
    snprintf(r->ipc_file, sizeof r->ipc_file, "%s/socket", dir);
    return 0;
}

ring_t *ring_new(void *zmq_ctx, size_t rank, size_t n, uint64_t run_id, size_t max_count, const char *bind_host,
                 char *err, size_t err_len) {
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
    r->max_count = max_count;
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
    if (ipc_path(r, bind_host, err, err_len) != 0) {
        ring_destroy(&r);
        return NULL;
    }
    if (r->ipc_file[0])
        snprintf(bind_ep, sizeof bind_ep, "ipc://%s", r->ipc_file);
    else
        snprintf(bind_ep, sizeof bind_ep, "tcp://%s:*", bind_host);
    // Whatever the sub-chunk size, no legitimate frame is larger than a whole
    // call's values (a RING_GATHER carries one rank's encoded vector).
    char why[400];
    if (zmsg_bind(r->pull, bind_ep, zmsg_max_frame(max_count), why, sizeof why) != 0) {
        snprintf(err, err_len, "ring_new: rank %zu: %s", rank, why);
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
        snprintf(err, err_len, "ring_connect: rank %zu is already connected to rank %zu at %s", r->rank, next_rank(r),
                 r->next_endpoint);
        return -1;
    }
    if (!next_endpoint || strlen(next_endpoint) >= sizeof r->next_endpoint) {
        snprintf(err, err_len, "ring_connect: rank %zu: missing or overlong endpoint for rank %zu", r->rank,
                 next_rank(r));
        return -1;
    }
    char why[400];  // a PUSH socket receives nothing: no frame of the peer's is legitimate
    if (zmsg_connect(r->push, next_endpoint, WIRE_HEADER_SIZE, why, sizeof why) != 0) {
        snprintf(err, err_len, "ring_connect: rank %zu, to rank %zu: %s", r->rank, next_rank(r), why);
        return -1;
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
    if (r->ipc_file[0]) unlink(r->ipc_file);
    if (r->ipc_dir[0]) rmdir(r->ipc_dir);
    free(r);
    *rp = NULL;
}

static sealed_t *sealed_slot(ring_t *r, size_t step, size_t k) { return &r->sealed[(step * 31 + k) % RING_SEALED]; }

// Remembers the checksum of sub-chunk k of `step`'s send (its bytes are final).
static void seal(ring_t *r, size_t step, size_t k, uint32_t sum) {
    *sealed_slot(r, step, k) = (sealed_t){.seq = r->seq, .step = step, .k = k, .sum = sum};
}

// Sends one payload frame that libzmq borrows (buf, released through `release`
// once libzmq is done with it; in_flight counts it until then) behind header h,
// without blocking. Returns 0, 1 when the socket would block (nothing was
// sent, buf released), or -1.
static int send_frame(ring_t *r, wire_header_t *h, void *buf, size_t bytes, void (*release)(void *, void *), int sealed,
                      char *err, size_t err_len) {
    zmq_msg_t frame;
    atomic_fetch_add_explicit(&r->in_flight, 1, memory_order_relaxed);
    if (zmq_msg_init_data(&frame, buf, bytes, release, r) != 0) {
        int e = errno;
        release(buf, r);
        errno = e;
        return ZMQ_FAIL("ring: zmq_msg_init_data", err, err_len);
    }
    int rc = sealed ? zmsg_send_sealed(r->push, NULL, h, &frame, 1, 1, err, err_len)
                    : zmsg_send(r->push, NULL, h, &frame, 1, 1, err, err_len);
    if (rc != 0) return errno == EAGAIN ? 1 : -1;
    r->stats.msgs_sent++;
    r->stats.bytes_sent += bytes;
    return 0;
}

// Whether the sub-chunk [a, a + len) travels as fp16 in this call.
static int sub_is_fp16(const ring_t *r, size_t a, size_t len) { return a + len <= r->sched.fp16_count; }

static int send_sub(ring_t *r, float *data, size_t count, const ring_cursor_t *c, char *err, size_t err_len) {
    size_t a = ring_cursor_offset(&r->sched, c), len = ring_cursor_len(&r->sched, c), bytes = len * sizeof(float);
    int half = sub_is_fp16(r, a, len);
    // Frames are the ring's own buffers (not zmsg_frame_alloc's) so that
    // libzmq tells us when it is done with each one.
    void *buf;
    void (*release)(void *, void *);
    if (half) {
        // The first allgather step sends the sum this rank just finished: it
        // keeps what the others will decode, so that every rank holds the same bits.
        if (c->step == r->n - 1) compress_round_fp16(data + a, len);
        bytes = COMPRESS_DESCRIPTOR_BYTES + 2 * len;
        buf = malloc(bytes);
        if (!buf) {
            snprintf(err, err_len, "ring: rank %zu: out of memory for a %zu-byte frame", r->rank, bytes);
            return -1;
        }
        compress_encode_fp16(data + a, len, buf);
        release = release_copy;
    } else if (r->zero_copy && bytes >= RING_ZERO_COPY_MIN_BYTES) {
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
    wire_header_t h = zmsg_header(MSG_TYPE_RING_CHUNK, r->run_id);
    h.sender = (uint32_t)r->rank;
    h.shard = WIRE_NO_ID;
    h.clock = r->seq;
    h.param_version = count;
    h.offset = a;
    h.count = (uint32_t)len;
    h.payload_kind = half ? PAYLOAD_KIND_ENCODED : PAYLOAD_KIND_DENSE;
    h.aux = (uint32_t)c->step;
    // Its checksum was computed as it arrived, unless it is this rank's own
    // (step 0) or fp16.
    const sealed_t *sl = sealed_slot(r, c->step, c->k);
    int sealed = !half && sl->seq == r->seq && sl->step == c->step && sl->k == c->k;
    if (sealed) h.checksum = sl->sum;
    return send_frame(r, &h, buf, bytes, release, sealed, err, err_len);
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

static int bad_checksum(ring_t *r, const wire_header_t *h, size_t a, size_t len, char *err, size_t err_len) {
    snprintf(err, err_len,
             "ring: rank %zu: elements [%zu, %zu) from rank %u in call %llu fail their checksum (corrupted on the way)",
             r->rank, a, a + len, h->sender, (unsigned long long)r->seq);
    return -1;
}

typedef struct mismatch {
    uint64_t n;  // this call's messages dropped for a wrong step/offset/size
    wire_header_t first;  // the first of them
} mismatch_t;

// Handles one received message. Returns 1 when it was the expected sub-chunk
// (applied), 0 when dropped, -1 on a fatal disagreement (err filled).
static int take(ring_t *r, zmsg_t *m, float *data, size_t count, const ring_cursor_t *c, mismatch_t *mm, char *err,
                size_t err_len) {
    const wire_header_t *h = &m->h;
    if (h->type != MSG_TYPE_RING_CHUNK ||
        (h->payload_kind != PAYLOAD_KIND_DENSE && h->payload_kind != PAYLOAD_KIND_ENCODED) ||
        h->sender != prev_rank(r) || h->clock != r->seq) {
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
    size_t a = ring_cursor_offset(&r->sched, c), len = ring_cursor_len(&r->sched, c);
    if (h->aux != c->step || h->offset != a || h->count != len) {
        if (mm->n++ == 0) mm->first = *h;
        r->stats.dropped++;
        return 0;
    }
    int half = sub_is_fp16(r, a, len);
    if ((h->payload_kind == PAYLOAD_KIND_ENCODED) != half) {
        snprintf(err, err_len,
                 "ring: rank %zu: rank %u sent elements [%zu, %zu) of call %llu as %s but this rank expects %s: do all "
                 "ranks use the same --compress?",
                 r->rank, h->sender, a, a + len, (unsigned long long)r->seq, half ? "float32" : "an encoding",
                 half ? "fp16" : "float32");
        return -1;
    }
    const unsigned char *p = zmsg_payload(m, 0);
    size_t plen = zmq_msg_size(&m->frames[0]);
    if (half) {
        char why[256];
        if (zmsg_verify(m) != 0) return bad_checksum(r, h, a, len, err, err_len);
        if (compress_check(p, plen, len, why, sizeof why) != 0) {
            snprintf(err, err_len, "ring: rank %zu: a chunk from rank %u in call %llu: %s", r->rank, h->sender,
                     (unsigned long long)r->seq, why);
            return -1;
        }
        if (p[0] != COMPRESS_KIND_FP16) {
            snprintf(err, err_len,
                     "ring: rank %zu: rank %u sent a %s chunk in call %llu; an allreduce carries fp16 or float32 only",
                     r->rank, h->sender, compress_kind_name((compress_kind_t)p[0]), (unsigned long long)r->seq);
            return -1;
        }
        if (c->step + 1 < r->n)
            compress_decode_add(p, plen, len, data + a, why, sizeof why);
        else
            compress_decode(p, plen, len, data + a, why, sizeof why);
    } else if (c->step + 1 < r->n) {
        // Reduce-scatter: add our values, checking the payload and
        // checksumming the sum (sent on at the next step) block by block.
        wire_checksum_stream_t in, out;
        wire_checksum_begin(&in, 0);
        wire_checksum_begin(&out, 0);
        for (size_t i = 0; i < len; i += RING_BLOCK_FLOATS) {
            size_t b = len - i < RING_BLOCK_FLOATS ? len - i : RING_BLOCK_FLOATS;
            wire_checksum_update(&in, p + i * sizeof(float), b * sizeof(float));
            add_into(data + a + i, p + i * sizeof(float), b);
            wire_checksum_update(&out, data + a + i, b * sizeof(float));
        }
        // The sum is in data already: a call that fails here leaves data
        // undefined, as any failed call does.
        if (wire_checksum_end(&in) != h->checksum) return bad_checksum(r, h, a, len, err, err_len);
        seal(r, c->step + 1, c->k, wire_checksum_end(&out));
    } else {
        // Allgather: a finished sum, checked while it is copied; the same bytes go on.
        uint32_t sum = wire_checksum_copy(data + a, p, len * sizeof(float), 0);
        if (sum != h->checksum) return bad_checksum(r, h, a, len, err, err_len);
        if (c->step + 1 < n_steps(r)) seal(r, c->step + 1, c->k, sum);
    }
    r->stats.msgs_recv++;
    r->stats.bytes_recv += plen;
    return 1;
}

static int timeout_error(ring_t *r, const ring_cursor_t *sc, const ring_cursor_t *rc, size_t count, int send_blocked,
                         int timeout_ms, const mismatch_t *mm, char *err, size_t err_len) {
    int at;
    if (send_blocked && !ring_cursor_done(&r->sched, rc))
        at = snprintf(err, err_len,
                      "ring: rank %zu: nothing from rank %zu (previous) and nothing accepted by rank %zu (next) "
                      "for %d ms",
                      r->rank, prev_rank(r), next_rank(r), timeout_ms);
    else if (send_blocked)
        at = snprintf(err, err_len, "ring: rank %zu: rank %zu (next) accepted nothing for %d ms", r->rank, next_rank(r),
                      timeout_ms);
    else
        at = snprintf(err, err_len, "ring: rank %zu: nothing from rank %zu (previous) for %d ms", r->rank, prev_rank(r),
                      timeout_ms);
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
                 rc->step, ring_cursor_offset(&r->sched, rc), ring_cursor_len(&r->sched, rc));
    return -1;
}

static int allreduce(ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    ring_cursor_t sc, rc;
    ring_cursor_init(&r->sched, 0, &sc);
    ring_cursor_init(&r->sched, 1, &rc);
    mismatch_t mm = {0};
    double last = mono_clock_ms();
    zmq_pollitem_t items[2];
    while (!ring_cursor_done(&r->sched, &sc) || !ring_cursor_done(&r->sched, &rc)) {
        int progressed = 0, send_blocked = 0;
        // Forward everything that is ready first: the next rank's progress
        // depends on it, ours only on what arrives.
        while (!ring_cursor_done(&r->sched, &sc) && ring_cursor_send_ready(&sc, &rc)) {
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
            ring_cursor_next(&r->sched, 0, &sc);
            progressed = 1;
        }
        int drained = 0;
        if (!ring_cursor_done(&r->sched, &rc)) {
            zmsg_t m;
            // take() verifies the payload as it uses it.
            int got = zmsg_recv_deferred(r->pull, 0, r->run_id, &m, err, err_len);
            if (got < 0) {
                if (errno != EAGAIN) return -1;
                err[0] = '\0';
            } else {
                int t = got == 0 ? 0 : take(r, &m, data, count, &rc, &mm, err, err_len);
                if (got == 0) r->stats.dropped++;
                zmsg_close(&m);
                if (t < 0) return -1;
                if (t > 0) {
                    ring_cursor_next(&r->sched, 1, &rc);
                    progressed = 1;
                } else {
                    drained = 1;  // look again before sleeping, but it is no progress
                }
            }
        }
        double t = mono_clock_ms();
        if (progressed) {
            last = t;
            continue;
        }
        if (timeout_ms > 0 && t - last >= timeout_ms)
            return timeout_error(r, &sc, &rc, count, send_blocked, timeout_ms, &mm, err, err_len);
        if (drained) continue;
        int n_items = 0;
        if (!ring_cursor_done(&r->sched, &rc)) items[n_items++] = (zmq_pollitem_t){r->pull, 0, ZMQ_POLLIN, 0};
        if (send_blocked) items[n_items++] = (zmq_pollitem_t){r->push, 0, ZMQ_POLLOUT, 0};
        long wait = timeout_ms > 0 ? (long)(timeout_ms - (t - last)) + 1 : -1;
        if (zmq_poll(items, n_items, wait) < 0 && errno != EINTR) return ZMQ_FAIL("ring: zmq_poll", err, err_len);
    }
    return 0;
}

int ring_allreduce_sum(ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    return ring_allreduce_sum_fp16(r, data, count, 0, timeout_ms, err, err_len);
}

int ring_allreduce_sum_fp16(ring_t *r, float *data, size_t count, size_t fp16_count, int timeout_ms, char *err,
                            size_t err_len) {
    r->seq++;
    r->stats.calls++;
    r->sched = (ring_schedule_t){.rank = r->rank,
                                 .n = r->n,
                                 .sub = r->sub,
                                 .count = count,
                                 .fp16_count = fp16_count < count ? fp16_count : count};
    if (count > r->max_count) {
        snprintf(err, err_len, "ring_allreduce_sum: rank %zu: %zu values, but the ring was made for at most %zu",
                 r->rank, count, r->max_count);
        return -1;
    }
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

// ---- allgather of encoded vectors ------------------------------------------------------

uint64_t ring_allreduce_bytes_sent(const ring_t *r, size_t count) {
    if (r->n == 1) return 0;
    uint64_t bytes = 0;
    for (size_t step = 0; step < n_steps(r); step++) {
        size_t begin, end;
        shard_range(count, r->n, (r->rank + 2 * r->n - step) % r->n, &begin, &end);
        bytes += (end - begin) * sizeof(float);
    }
    return bytes;
}

typedef struct gather_call {
    uint8_t *blobs;
    size_t cap, count;
    size_t *lens;
    uint32_t *weights;
} gather_call_t;

// At step s a rank forwards the vector of rank (rank - s) mod n and receives
// that of rank (rank - s - 1) mod n: its own first, then what just arrived.
static size_t gather_origin(const ring_t *r, size_t step, int recv) {
    return (r->rank + 2 * r->n - step - (recv ? 1 : 0)) % r->n;
}

// Sends one vector straight from its slot (nothing writes a slot once it is
// filled, and the call waits for every frame's release). 0, 1 = would block, -1.
static int gather_send(ring_t *r, const gather_call_t *g, size_t origin, char *err, size_t err_len) {
    wire_header_t h = zmsg_header(MSG_TYPE_RING_GATHER, r->run_id);
    h.sender = (uint32_t)r->rank;
    h.shard = WIRE_NO_ID;
    h.clock = r->seq;
    h.offset = origin;
    h.count = (uint32_t)g->count;
    h.payload_kind = PAYLOAD_KIND_ENCODED;
    h.aux = g->weights[origin];
    return send_frame(r, &h, g->blobs + origin * g->cap, g->lens[origin], release_borrowed, 0, err, err_len);
}

// 1: the vector due (stored), 0: dropped (another call, another sender), -1: fatal.
static int gather_take(ring_t *r, zmsg_t *m, const gather_call_t *g, size_t origin, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    if (h->type != MSG_TYPE_RING_GATHER || h->sender != prev_rank(r) || h->clock != r->seq) {
        r->stats.dropped++;
        return 0;
    }
    if (h->payload_kind != PAYLOAD_KIND_ENCODED || h->offset != origin || h->count != g->count) {
        snprintf(
            err, err_len,
            "ring: rank %zu: rank %u sent rank %llu's vector of %u values (payload kind %u) in allgather call %llu "
            "where rank %zu's encoded vector of %zu values was due: do all ranks make the same calls?",
            r->rank, h->sender, (unsigned long long)h->offset, h->count, h->payload_kind, (unsigned long long)r->seq,
            origin, g->count);
        return -1;
    }
    const uint8_t *p = zmsg_payload(m, 0);
    size_t len = zmq_msg_size(&m->frames[0]);
    char why[256];
    if (len > g->cap) {
        snprintf(err, err_len,
                 "ring: rank %zu: rank %zu's encoded vector (from rank %u) has %zu bytes, more than the %zu this rank "
                 "expects: do all ranks use the same --compress?",
                 r->rank, origin, h->sender, len, g->cap);
        return -1;
    }
    if (compress_check(p, len, g->count, why, sizeof why) != 0) {
        snprintf(err, err_len, "ring: rank %zu: rank %zu's vector (from rank %u) in allgather call %llu: %s", r->rank,
                 origin, h->sender, (unsigned long long)r->seq, why);
        return -1;
    }
    memcpy(g->blobs + origin * g->cap, p, len);
    g->lens[origin] = len;
    g->weights[origin] = h->aux;
    r->stats.msgs_recv++;
    r->stats.bytes_recv += len;
    return 1;
}

static int allgather(ring_t *r, const gather_call_t *g, int timeout_ms, char *err, size_t err_len) {
    size_t steps = r->n - 1, sent = 0, got = 0;
    double last = mono_clock_ms();
    while (sent < steps || got < steps) {
        int progressed = 0, send_blocked = 0, drained = 0;
        // Step s forwards what arrived at step s - 1.
        while (sent < steps && sent <= got) {
            int events = 0;
            size_t elen = sizeof events;
            if (zmq_getsockopt(r->push, ZMQ_EVENTS, &events, &elen) != 0)
                return ZMQ_FAIL("ring: zmq_getsockopt(PUSH, ZMQ_EVENTS)", err, err_len);
            int s = (events & ZMQ_POLLOUT) ? gather_send(r, g, gather_origin(r, sent, 0), err, err_len) : 1;
            if (s < 0) return -1;
            if (s > 0) {
                send_blocked = 1;
                break;
            }
            sent++;
            progressed = 1;
        }
        if (got < steps) {
            zmsg_t m;
            int rc = zmsg_recv(r->pull, 0, r->run_id, &m, err, err_len);
            if (rc < 0) {
                if (errno != EAGAIN) return -1;
                err[0] = '\0';
            } else {
                int t = rc == 0 ? 0 : gather_take(r, &m, g, gather_origin(r, got, 1), err, err_len);
                if (rc == 0) r->stats.dropped++;
                zmsg_close(&m);
                if (t < 0) return -1;
                if (t > 0) {
                    got++;
                    progressed = 1;
                } else {
                    drained = 1;
                }
            }
        }
        double t = mono_clock_ms();
        if (progressed) {
            last = t;
            continue;
        }
        if (timeout_ms > 0 && t - last >= timeout_ms) {
            snprintf(err, err_len,
                     "ring: rank %zu: %s rank %zu (%s) for %d ms in allgather call %llu (sent %zu of %zu, received %zu "
                     "of %zu): is it gone or not calling?",
                     r->rank, send_blocked ? "nothing accepted by" : "nothing from",
                     send_blocked ? next_rank(r) : prev_rank(r), send_blocked ? "next" : "previous", timeout_ms,
                     (unsigned long long)r->seq, sent, steps, got, steps);
            return -1;
        }
        if (drained) continue;
        zmq_pollitem_t items[2];
        int n_items = 0;
        if (got < steps) items[n_items++] = (zmq_pollitem_t){r->pull, 0, ZMQ_POLLIN, 0};
        if (send_blocked) items[n_items++] = (zmq_pollitem_t){r->push, 0, ZMQ_POLLOUT, 0};
        long wait = timeout_ms > 0 ? (long)(timeout_ms - (t - last)) + 1 : -1;
        if (zmq_poll(items, n_items, wait) < 0 && errno != EINTR) return ZMQ_FAIL("ring: zmq_poll", err, err_len);
    }
    return 0;
}

int ring_allgather_encoded(ring_t *r, uint8_t *blobs, size_t cap, size_t *lens, uint32_t *weights, size_t count,
                           int timeout_ms, char *err, size_t err_len) {
    r->seq++;
    r->stats.calls++;
    if (count > UINT32_MAX || count > r->max_count || lens[r->rank] > cap ||
        lens[r->rank] < COMPRESS_DESCRIPTOR_BYTES) {
        snprintf(err, err_len, "ring_allgather_encoded: rank %zu: a vector of %zu values in %zu bytes (slots of %zu)",
                 r->rank, count, lens[r->rank], cap);
        return -1;
    }
    if (r->n == 1) return 0;
    if (!r->next_endpoint[0] || !r->push) {
        snprintf(err, err_len, "ring_allgather_encoded: rank %zu is not connected to rank %zu", r->rank, next_rank(r));
        return -1;
    }
    gather_call_t g = {blobs, cap, count, lens, weights};
    int rc = allgather(r, &g, timeout_ms, err, err_len);
    if (rc == 0 && wait_released(r, timeout_ms) != 0) {
        snprintf(err, err_len,
                 "ring: rank %zu: rank %zu (next) did not take the last vectors of allgather call %llu "
                 "within %d ms",
                 r->rank, next_rank(r), (unsigned long long)r->seq, timeout_ms);
        rc = -1;
    }
    if (rc != 0) abandon_sends(r);
    return rc;
}
