// Ring allreduce over TCP connections driven by the calling thread
// (stream_ring.h, docs/allreduce.md "The stream ring").
#include "net/stream_ring.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/curve_auth.h"
#include "net/ring_schedule.h"
#include "net/tcp_link.h"
#include "net/wire.h"

// Received bytes are verified, added and checksummed for the next send block
// by block as they arrive, each block while it is still in cache (a multiple
// of 32 bytes: wire_checksum_update's pieces).
#define STREAM_BLOCK_BYTES 8192
// Checksums of sub-chunks this rank will forward, computed while receiving
// them, looked up by (call, step, sub-chunk); a miss is computed anew.
#define STREAM_SEALED 64

typedef struct sealed {
    uint64_t seq;
    size_t step, k;
    uint32_t sum;
} sealed_t;

struct stream_ring {
    size_t rank, n;
    uint64_t run_id;
    size_t max_count, sub;
    int listen_fd, next_fd, prev_fd;
    char endpoint[300];
    uint64_t seq;  // calls started: the clock of the current call's messages
    uint64_t broken;  // the call that failed (0: none): the streams are out of step
    float *stage;  // a reduce-scatter sub-chunk as it arrives (sub floats)
    ring_schedule_t sched;  // this call's
    ring_stats_t stats;
    sealed_t sealed[STREAM_SEALED];
};

// The message being written to the next rank: header, then payload straight
// from the caller's array.
typedef struct out_msg {
    int active;
    uint8_t header[WIRE_HEADER_SIZE];
    const uint8_t *payload;
    size_t len, done;  // of WIRE_HEADER_SIZE + payload bytes
} out_msg_t;

// The message being read from the previous rank: header, then payload into
// `dst` (the stage, or in the allgather the caller's array itself).
typedef struct in_msg {
    uint8_t header[WIRE_HEADER_SIZE];
    wire_header_t h;  // decoded once all of header is in
    uint8_t *dst;
    size_t a, values;  // the sub-chunk due: first value and count
    size_t got;  // bytes of header + payload read
    size_t processed;  // payload bytes verified (and added)
    int header_checked;
    wire_checksum_stream_t in, out;  // over the payload; over what goes on (reduce-scatter)
} in_msg_t;

static size_t prev_rank(const stream_ring_t *r) { return (r->rank + r->n - 1) % r->n; }
static size_t next_rank(const stream_ring_t *r) { return (r->rank + 1) % r->n; }

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

stream_ring_t *stream_ring_new(size_t rank, size_t n, uint64_t run_id, size_t max_count, const char *bind_host,
                               char *err, size_t err_len) {
    if (n == 0 || rank >= n || n > WIRE_NO_ID || !bind_host || !bind_host[0]) {
        snprintf(err, err_len, "stream ring: need rank < n, 1 <= n < 2^32 and a bind host (rank %zu, n %zu)", rank, n);
        return NULL;
    }
    stream_ring_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, err_len, "stream ring: out of memory");
        return NULL;
    }
    *r = (stream_ring_t){
        .rank = rank, .n = n, .run_id = run_id, .max_count = max_count, .listen_fd = -1, .next_fd = -1, .prev_fd = -1};
    char why[400];
    if (stream_ring_tune(r, STREAM_RING_SUB_CHUNK_DEFAULT, err, err_len) != 0) {
        stream_ring_destroy(&r);
        return NULL;
    }
    // Every asgd listener keeps the security rule (docs/security.md).
    char probe[300];
    snprintf(probe, sizeof probe, strchr(bind_host, ':') ? "tcp://[%s]:0" : "tcp://%s:0", bind_host);
    if (net_security_listen_plain(probe, why, sizeof why) != 0 ||
        tcp_link_listen(bind_host, &r->listen_fd, r->endpoint, sizeof r->endpoint, why, sizeof why) != 0) {
        snprintf(err, err_len, "stream ring: rank %zu: %s", rank, why);
        stream_ring_destroy(&r);
        return NULL;
    }
    return r;
}

const char *stream_ring_endpoint(const stream_ring_t *r) { return r->endpoint; }

int stream_ring_tune(stream_ring_t *r, size_t sub_chunk, char *err, size_t err_len) {
    if (sub_chunk == 0 || sub_chunk > UINT32_MAX / sizeof(float)) {
        snprintf(err, err_len, "stream ring: sub-chunk of %zu floats: need 1 .. %zu", sub_chunk,
                 (size_t)(UINT32_MAX / sizeof(float)));
        return -1;
    }
    float *stage = malloc(sub_chunk * sizeof *stage);
    if (!stage) {
        snprintf(err, err_len, "stream ring: out of memory for a sub-chunk of %zu floats", sub_chunk);
        return -1;
    }
    free(r->stage);
    r->stage = stage;
    r->sub = sub_chunk;
    return 0;
}

void stream_ring_get_stats(const stream_ring_t *r, ring_stats_t *out) { *out = r->stats; }

void stream_ring_destroy(stream_ring_t **rp) {
    if (!rp || !*rp) return;
    stream_ring_t *r = *rp;
    close_fd(&r->listen_fd);
    close_fd(&r->next_fd);
    close_fd(&r->prev_fd);
    free(r->stage);
    free(r);
    *rp = NULL;
}

// ---- connecting ------------------------------------------------------------------------

// The first message on a link: who is calling, for which run and ring size.
static void hello_header(const stream_ring_t *r, uint8_t out[WIRE_HEADER_SIZE]) {
    wire_header_t h = {.magic = WIRE_MAGIC,
                       .version = WIRE_VERSION,
                       .type = MSG_TYPE_RING_CHUNK,
                       .run_id = r->run_id,
                       .sender = (uint32_t)r->rank,
                       .shard = (uint32_t)r->n,
                       .payload_kind = PAYLOAD_KIND_NONE};
    wire_header_encode(&h, out);
}

static int is_hello_from_prev(const stream_ring_t *r, const uint8_t in[WIRE_HEADER_SIZE]) {
    wire_header_t h;
    wire_header_decode(in, &h);
    return h.magic == WIRE_MAGIC && h.version == WIRE_VERSION && h.type == MSG_TYPE_RING_CHUNK &&
           h.run_id == r->run_id && h.sender == prev_rank(r) && h.shard == r->n && h.payload_kind == PAYLOAD_KIND_NONE;
}

// Accepts connections until one introduces itself as the previous rank.
static int accept_prev(stream_ring_t *r, double deadline, char *err, size_t err_len) {
    char why[300];
    for (;;) {
        int s = tcp_link_accept(r->listen_fd, deadline, why, sizeof why);
        if (s < 0) {
            snprintf(err, err_len, "stream ring: rank %zu, waiting for rank %zu (previous) to connect to %s: %s",
                     r->rank, prev_rank(r), r->endpoint, why);
            return -1;
        }
        uint8_t hello[WIRE_HEADER_SIZE];
        // A stranger that sends nothing is given a second at most, within the deadline.
        double cut = tcp_link_now_ms() + 1000;
        if (tcp_link_recv_all(s, hello, sizeof hello, deadline > 0 && deadline < cut ? deadline : cut, why,
                              sizeof why) == 0 &&
            is_hello_from_prev(r, hello)) {
            r->prev_fd = s;
            return 0;
        }
        close(s);  // not our neighbour (another run, a port scan): keep waiting
    }
}

int stream_ring_connect(stream_ring_t *r, const char *next_endpoint, int timeout_ms, char *err, size_t err_len) {
    if (r->n == 1) return 0;
    if (r->next_fd >= 0) {
        snprintf(err, err_len, "stream ring: rank %zu is already connected to rank %zu", r->rank, next_rank(r));
        return -1;
    }
    double deadline = timeout_ms > 0 ? tcp_link_now_ms() + timeout_ms : 0;
    char why[400];
    uint8_t hello[WIRE_HEADER_SIZE];
    hello_header(r, hello);
    r->next_fd = tcp_link_dial(next_endpoint ? next_endpoint : "", deadline, why, sizeof why);
    if (r->next_fd < 0 || tcp_link_send_all(r->next_fd, hello, sizeof hello, deadline, why, sizeof why) != 0) {
        snprintf(err, err_len, "stream ring: rank %zu, to rank %zu (next): %s", r->rank, next_rank(r), why);
        close_fd(&r->next_fd);
        return -1;
    }
    if (accept_prev(r, deadline, err, err_len) != 0) {
        close_fd(&r->next_fd);
        return -1;
    }
    close_fd(&r->listen_fd);  // nobody else is expected
    return 0;
}

// ---- one call --------------------------------------------------------------------------

static sealed_t *sealed_slot(stream_ring_t *r, size_t step, size_t k) {
    return &r->sealed[(step * 31 + k) % STREAM_SEALED];
}

// Remembers the checksum of sub-chunk k of `step`'s send (its bytes are final).
static void seal(stream_ring_t *r, size_t step, size_t k, uint32_t sum) {
    *sealed_slot(r, step, k) = (sealed_t){.seq = r->seq, .step = step, .k = k, .sum = sum};
}

static int reduce_step(const stream_ring_t *r, size_t step) { return step + 1 < r->n; }

static void out_begin(stream_ring_t *r, const float *data, const ring_cursor_t *c, out_msg_t *o) {
    size_t a = ring_cursor_offset(&r->sched, c), len = ring_cursor_len(&r->sched, c), bytes = len * sizeof(float);
    wire_header_t h = {.magic = WIRE_MAGIC,
                       .version = WIRE_VERSION,
                       .type = MSG_TYPE_RING_CHUNK,
                       .run_id = r->run_id,
                       .sender = (uint32_t)r->rank,
                       .shard = WIRE_NO_ID,
                       .clock = r->seq,
                       .param_version = r->sched.count,
                       .offset = a,
                       .count = (uint32_t)len,
                       .payload_kind = PAYLOAD_KIND_DENSE,
                       .aux = (uint32_t)c->step};
    // Computed as it arrived, unless it is this rank's own (step 0) or the slot was reused.
    const sealed_t *sl = sealed_slot(r, c->step, c->k);
    if (sl->seq == r->seq && sl->step == c->step && sl->k == c->k)
        h.checksum = sl->sum;
    else
        h.checksum = wire_checksum(data + a, bytes, 0);
    *o = (out_msg_t){.active = 1, .payload = (const uint8_t *)(data + a), .len = WIRE_HEADER_SIZE + bytes};
    wire_header_encode(&h, o->header);
}

// Writes what the socket takes of the message. Returns 1 when all of it is
// written, 0 when the socket is full, -1 on error.
static int out_write(stream_ring_t *r, out_msg_t *o, char *err, size_t err_len) {
    while (o->done < o->len) {
        struct iovec iov[2];
        size_t k = 0, pdone = o->done > WIRE_HEADER_SIZE ? o->done - WIRE_HEADER_SIZE : 0;
        if (o->done < WIRE_HEADER_SIZE) iov[k++] = (struct iovec){o->header + o->done, WIRE_HEADER_SIZE - o->done};
        if (o->len - WIRE_HEADER_SIZE > pdone)
            iov[k++] = (struct iovec){(void *)(o->payload + pdone), o->len - WIRE_HEADER_SIZE - pdone};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = k};
        ssize_t w = sendmsg(r->next_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            o->done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        snprintf(err, err_len, "stream ring: rank %zu: sending to rank %zu (next) in allreduce call %llu failed: %s%s",
                 r->rank, next_rank(r), (unsigned long long)r->seq, strerror(errno),
                 errno == EPIPE || errno == ECONNRESET ? " (it closed its connection: did it fail or exit?)" : "");
        return -1;
    }
    return 1;
}

static void in_begin(stream_ring_t *r, float *data, const ring_cursor_t *c, in_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->a = ring_cursor_offset(&r->sched, c);
    m->values = ring_cursor_len(&r->sched, c);
    // Reduce-scatter payloads are added from the stage; allgather ones land where they belong.
    m->dst = reduce_step(r, c->step) ? (uint8_t *)r->stage : (uint8_t *)(data + m->a);
    wire_checksum_begin(&m->in, 0);
    wire_checksum_begin(&m->out, 0);
}

// Decodes the header into m->h and checks it is the sub-chunk due.
static int in_check_header(stream_ring_t *r, const ring_cursor_t *c, in_msg_t *m, char *err, size_t err_len) {
    wire_header_decode(m->header, &m->h);
    const wire_header_t *h = &m->h;
    if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION || h->type != MSG_TYPE_RING_CHUNK ||
        h->run_id != r->run_id || h->sender != prev_rank(r) || h->payload_kind != PAYLOAD_KIND_DENSE) {
        snprintf(err, err_len,
                 "stream ring: rank %zu: what rank %zu (previous) sent in allreduce call %llu is not a "
                 "float32 ring message of this run",
                 r->rank, prev_rank(r), (unsigned long long)r->seq);
        return -1;
    }
    if (h->clock != r->seq || h->param_version != r->sched.count) {
        snprintf(err, err_len,
                 "stream ring: rank %zu: rank %u sent call %llu of %llu floats where this rank makes call "
                 "%llu of %zu: every rank must make the same calls with the same counts",
                 r->rank, h->sender, (unsigned long long)h->clock, (unsigned long long)h->param_version,
                 (unsigned long long)r->seq, r->sched.count);
        return -1;
    }
    if (h->aux != c->step || h->offset != m->a || h->count != m->values) {
        snprintf(err, err_len,
                 "stream ring: rank %zu: rank %u sent step %u offset %llu count %u where step %zu offset "
                 "%zu count %zu was due: do all ranks use the same sub-chunk size?",
                 r->rank, h->sender, h->aux, (unsigned long long)h->offset, h->count, c->step, m->a, m->values);
        return -1;
    }
    return 0;
}

// Verifies, and in the reduce-scatter adds, the payload received so far in
// whole blocks (all of it once it is complete).
static void in_process(stream_ring_t *r, float *data, const ring_cursor_t *c, in_msg_t *m) {
    size_t have = m->got - WIRE_HEADER_SIZE, total = m->values * sizeof(float);
    int reduce = reduce_step(r, c->step);
    while (m->processed < have) {
        size_t b = have - m->processed;
        if (b > STREAM_BLOCK_BYTES)
            b = STREAM_BLOCK_BYTES;
        else if (have < total && b < STREAM_BLOCK_BYTES)
            return;  // wait for a whole block
        const uint8_t *src = m->dst + m->processed;
        wire_checksum_update(&m->in, src, b);
        if (reduce) {
            // The same additions in the same order as the libzmq ring: the same bits.
            float *restrict to = data + m->a + m->processed / sizeof(float);
            const float *restrict from = (const float *)src;
            for (size_t i = 0; i < b / sizeof(float); i++) to[i] += from[i];
            wire_checksum_update(&m->out, to, b);
        }
        m->processed += b;
    }
}

// Reads what has arrived of the message due. Returns 1 when it is complete and
// verified, 0 when nothing more is there yet, -1 on error.
static int in_read(stream_ring_t *r, float *data, const ring_cursor_t *c, in_msg_t *m, char *err, size_t err_len) {
    size_t total = WIRE_HEADER_SIZE + m->values * sizeof(float);
    while (m->got < total) {
        struct iovec iov[2];
        size_t k = 0, pgot = m->got > WIRE_HEADER_SIZE ? m->got - WIRE_HEADER_SIZE : 0;
        if (m->got < WIRE_HEADER_SIZE) iov[k++] = (struct iovec){m->header + m->got, WIRE_HEADER_SIZE - m->got};
        if (total - WIRE_HEADER_SIZE > pgot) iov[k++] = (struct iovec){m->dst + pgot, total - WIRE_HEADER_SIZE - pgot};
        ssize_t g = readv(r->prev_fd, iov, (int)k);
        if (g == 0) {
            snprintf(err, err_len,
                     "stream ring: rank %zu: rank %zu (previous) closed its connection during allreduce "
                     "call %llu (receiving step %zu of %zu): did it fail or exit?",
                     r->rank, prev_rank(r), (unsigned long long)r->seq, c->step, ring_schedule_steps(&r->sched));
            return -1;
        }
        if (g < 0 && errno == EINTR) continue;
        if (g < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (g < 0) {
            snprintf(err, err_len,
                     "stream ring: rank %zu: receiving from rank %zu (previous) in allreduce call %llu "
                     "failed: %s",
                     r->rank, prev_rank(r), (unsigned long long)r->seq, strerror(errno));
            return -1;
        }
        size_t before = m->got;
        m->got += (size_t)g;
        if (before < WIRE_HEADER_SIZE && m->got >= WIRE_HEADER_SIZE && in_check_header(r, c, m, err, err_len) != 0)
            return -1;
        if (m->got > WIRE_HEADER_SIZE) in_process(r, data, c, m);
    }
    if (wire_checksum_end(&m->in) != m->h.checksum) {
        snprintf(err, err_len,
                 "stream ring: rank %zu: elements [%zu, %zu) from rank %u in call %llu fail their checksum "
                 "(corrupted on the way)",
                 r->rank, m->a, m->a + m->values, m->h.sender, (unsigned long long)r->seq);
        return -1;
    }
    if (reduce_step(r, c->step))
        seal(r, c->step + 1, c->k, wire_checksum_end(&m->out));
    else if (c->step + 1 < ring_schedule_steps(&r->sched))
        seal(r, c->step + 1, c->k, m->h.checksum);
    r->stats.msgs_recv++;
    r->stats.bytes_recv += m->values * sizeof(float);
    return 1;
}

static int timeout_error(stream_ring_t *r, const ring_cursor_t *sc, const ring_cursor_t *rc, int send_blocked,
                         int timeout_ms, char *err, size_t err_len) {
    char who[96];
    if (send_blocked)
        snprintf(who, sizeof who, "rank %zu (next) took nothing", next_rank(r));
    else
        snprintf(who, sizeof who, "nothing came from rank %zu (previous)", prev_rank(r));
    snprintf(err, err_len,
             "stream ring: rank %zu: %s for %d ms in allreduce call %llu of %zu floats (sending step %zu, "
             "receiving step %zu of %zu): is it gone or not calling?",
             r->rank, who, timeout_ms, (unsigned long long)r->seq, r->sched.count, sc->step, rc->step,
             ring_schedule_steps(&r->sched));
    return -1;
}

static int run_call(stream_ring_t *r, float *data, int timeout_ms, char *err, size_t err_len) {
    const ring_schedule_t *s = &r->sched;
    ring_cursor_t sc, rc;
    ring_cursor_init(s, 0, &sc);
    ring_cursor_init(s, 1, &rc);
    out_msg_t o = {0};
    in_msg_t m;
    int in_open = 0;
    double last = tcp_link_now_ms();
    while (!ring_cursor_done(s, &sc) || o.active || !ring_cursor_done(s, &rc)) {
        int progressed = 0, send_blocked = 0;
        // Forward everything that is ready first: the next rank's progress
        // depends on it, ours only on what arrives.
        for (;;) {
            if (!o.active) {
                if (ring_cursor_done(s, &sc) || !ring_cursor_send_ready(&sc, &rc)) break;
                out_begin(r, data, &sc, &o);
            }
            size_t before = o.done;
            int w = out_write(r, &o, err, err_len);
            progressed |= o.done != before;
            if (w < 0) return -1;
            if (w == 0) {
                send_blocked = 1;
                break;
            }
            o.active = 0;
            r->stats.msgs_sent++;
            r->stats.bytes_sent += o.len - WIRE_HEADER_SIZE;
            ring_cursor_next(s, 0, &sc);
        }
        if (!ring_cursor_done(s, &rc)) {
            if (!in_open) in_begin(r, data, &rc, &m);
            in_open = 1;
            size_t before = m.got;
            int g = in_read(r, data, &rc, &m, err, err_len);
            progressed |= m.got != before;
            if (g < 0) return -1;
            if (g > 0) {
                in_open = 0;
                ring_cursor_next(s, 1, &rc);
            }
        }
        double t = tcp_link_now_ms();
        if (progressed) {
            last = t;
            continue;
        }
        if (timeout_ms > 0 && t - last >= timeout_ms)
            return timeout_error(r, &sc, &rc, send_blocked, timeout_ms, err, err_len);
        struct pollfd p[2];
        nfds_t np = 0;
        if (!ring_cursor_done(s, &rc)) p[np++] = (struct pollfd){r->prev_fd, POLLIN, 0};
        if (send_blocked) p[np++] = (struct pollfd){r->next_fd, POLLOUT, 0};
        if (poll(p, np, timeout_ms > 0 ? (int)(timeout_ms - (t - last)) + 1 : -1) < 0 && errno != EINTR) {
            snprintf(err, err_len, "stream ring: rank %zu: poll failed: %s", r->rank, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int stream_ring_allreduce_sum(stream_ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len) {
    r->seq++;
    r->stats.calls++;
    if (count > r->max_count) {
        snprintf(err, err_len, "stream ring: rank %zu: %zu values, but the ring was made for at most %zu", r->rank,
                 count, r->max_count);
        return -1;
    }
    if (r->n == 1 || count == 0) return 0;
    if (r->broken) {
        snprintf(err, err_len,
                 "stream ring: rank %zu: allreduce call %llu failed, so its connections are closed: "
                 "rebuild the ring",
                 r->rank, (unsigned long long)r->broken);
        return -1;
    }
    if (r->next_fd < 0 || r->prev_fd < 0) {
        snprintf(err, err_len, "stream ring: rank %zu is not connected (call stream_ring_connect first)", r->rank);
        return -1;
    }
    r->sched = (ring_schedule_t){.rank = r->rank, .n = r->n, .sub = r->sub, .count = count, .fp16_count = 0};
    if (run_call(r, data, timeout_ms, err, err_len) == 0) return 0;
    // The streams are out of step now; closing them fails the neighbours'
    // calls at once instead of by their timeout.
    r->broken = r->seq;
    close_fd(&r->next_fd);
    close_fd(&r->prev_fd);
    return -1;
}
