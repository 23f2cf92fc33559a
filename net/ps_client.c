// A worker's side of the parameter-server protocol (ps_client.h).
#include "net/ps_client.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/partition.h"
#include "net/buffer_pool.h"
#include "net/shm_frames.h"
#include "net/zmsg.h"

#define RETRY_BACKOFF_MAX 8  // a silent shard is retried at most every 8 retry intervals
#define JOIN_ROUNDS_MAX 8  // HELLO rounds to make the shards agree on a rejoin clock
// A dense push larger than this goes in parts of this many floats (1 MiB):
// the shard applies one while the next is on the wire (docs/protocol.md).
#define PART_FLOATS_DEFAULT ((size_t)1 << 18)

// A request kept until answered, so that it can be sent again.
typedef enum request_kind {
    REQUEST_NONE,
    REQUEST_HELLO,
    REQUEST_PULL,
    REQUEST_BYE,
} request_kind_t;

typedef struct shard_conn {
    void *sock;
    const char *endpoint;
    size_t begin, end;
    uint64_t version;  // of the parameters last pulled from it
    uint64_t carry_version;  // the next push's computed-from version, when the client carries set ones
    uint64_t min_clock;  // the min worker clock it reported last
    uint64_t welcome_clock;  // the clock its WELCOME said this worker continues from
    // The last push (a copy of its frames shares their buffers), until the next
    // one replaces it: resent while unacknowledged, and with a retried pull.
    // A push in parts keeps its parts' messages and checksums instead.
    wire_header_t push_h;
    zmq_msg_t push_frames[2];
    size_t push_n_frames;  // 0: no push yet, or one in parts
    zmq_msg_t *push_parts;  // (n_parts) a push in parts
    uint32_t *push_sums;  // (n_parts) its parts' checksums
    size_t push_n_parts;  // 0: no push in parts
    int push_acked;
    // The request waiting for its answer.
    request_kind_t req;
    wire_header_t req_h;
    zmq_msg_t req_keys;  // a keyed pull's key frame (copy)
    int req_has_keys;
    int answered;
    size_t key_begin;  // keyed pull: where this shard's keys start in the caller's array
    size_t key_count;  // keyed pull: how many of them this shard was asked for
    // A pull answered with the push (ps_client_push_commit_pull): the floats
    // of the shard received so far, in order, and the oldest version among them.
    size_t echo_next;
    uint64_t echo_version;
    double held_s;  // how long it held the last pull it answered, waiting for slower workers
    uint64_t answer_min_clock;  // the min clock its answer to the last pull reported (what the values stand for)
    // Retries: when something was last sent, the current interval, when the shard last spoke.
    double sent_at, retry_s, heard_at;
    // The frame being filled: its parts' checksums, block by block.
    size_t n_parts;  // parts a dense push to this shard is cut into (1: sent whole)
    wire_checksum_stream_t sum;  // the checksum of the part being summed
    wire_checksum_stream_t whole;  // with parts, the whole frame's too (a BSP push goes whole)
    uint32_t *fill_sums;  // (n_parts) those of the parts summed
    size_t summed;  // floats of the push frame summed so far; SIZE_MAX: given up
    int stream_begun;  // an announced push's first part was sent while the frame was written
} shard_conn_t;

struct ps_client {
    uint64_t run_id;
    uint32_t worker;
    uint32_t join_nonce;  // a joiner's (asgd worker --join); 0: an original worker
    // This client's own number, never 0, sent with every HELLO (a joiner's is
    // its join nonce): a shard tells a resent HELLO from a new client's by it.
    uint32_t nonce;
    size_t n_shards, n_params;
    // The worker holds only its working set (ps_client_set_key_map): its keys,
    // translated at every message; NULL: it holds the servers' keys.
    const ps_key_map_t *map;
    size_t n_keys;  // the keys the caller names: n_params, or the map's local keys
    // The last keyed pull's tag (wire.h: its offset, repeated by the VALUES
    // answering it), so that an answer to an earlier pull of as many keys is
    // told apart without sending the keys back.
    uint64_t pull_tag;
    int timeout_ms;
    double retry_s;
    shard_conn_t *shards;
    zmq_pollitem_t *items;
    zmq_msg_t *frames;  // (n_shards) dense push frames being filled
    float **frame_data;  // (n_shards) their data
    buffer_pool_t *pool;  // dense push frames' buffers, reused (the largest shard's size)
    uint8_t **encoded;  // (n_shards) the same frames' bytes when they hold encodings
    int frames_ready;
    int frames_encoded;  // the frames being filled are ENCODED, not DENSE
    int carry;  // the next push carries shards[k].carry_version (ps_client_carry_versions)
    // The push announced for the frames being filled (ps_client_push_announce):
    // its parts go out as they are written.
    int announced;
    wire_header_t announce_h;  // its header, but for the shard, the version and the range
    int stream_rc;  // a part's send failed while streaming (reported by the commit)
    char stream_err[256];
    size_t part_floats;  // a dense push's parts hold this many floats (a multiple of 8; 0: sent whole)
    // The pull in progress.
    float *pull_out;
    double pull_started;  // > 0: a pull is in flight since then (ps_client_pull_start)
    float *pull_values;
    wire_status_t refusal;
    ps_client_stats_t stats;
    const atomic_int *abort;  // a wait ends early once it is non-zero (NULL: never)
    double ask_started;  // when the push that asked for values began (ps_client_push_commit_ask)
    ps_push_count_t *counts;  // (n_shards) the caller's, or NULL
};

static wire_header_t request(const ps_client_t *c, uint16_t type, size_t shard) {
    wire_header_t h = zmsg_header(type, c->run_id);
    h.sender = c->worker;
    h.shard = (uint32_t)shard;
    return h;
}

// Counts a message dropped from shard k, and says so the first time.
static void note_dropped(ps_client_t *c, size_t k, wire_status_t why) {
    if (c->stats.dropped++ == 0)
        fprintf(stderr, "asgd worker %u: dropped a message from server shard %zu: %s (further ones are counted)\n",
                c->worker, k, why == WIRE_STATUS_OK ? "not expected now" : wire_status_name(why));
}

// ---- sending and resending ------------------------------------------------------

static void sent_now(ps_client_t *c, shard_conn_t *s) {
    s->sent_at = mono_clock_s();
    s->retry_s = c->retry_s;
}

// The header of part i of shard k's kept push.
static wire_header_t part_header(const ps_client_t *c, const shard_conn_t *s, size_t i) {
    wire_header_t h = s->push_h;
    size_t from = i * c->part_floats, n = s->end - s->begin;
    h.offset = s->begin + from;
    h.count = (uint32_t)(i + 1 == s->n_parts ? n - from : c->part_floats);
    h.checksum = s->push_sums[i];
    return h;
}

// Sends part i of shard k's kept push (a copy of its message, sharing the buffer).
static int send_kept_part(ps_client_t *c, size_t k, size_t i, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    zmq_msg_t part;
    zmq_msg_init(&part);
    zmq_msg_copy(&part, &s->push_parts[i]);
    wire_header_t h = part_header(c, s, i);
    return zmsg_send_sealed(s->sock, NULL, &h, &part, 1, 0, err, err_len);
}

// Sends shard k's kept push again (its frames are shared, not copied).
static int resend_push(ps_client_t *c, size_t k, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    for (size_t i = 0; i < s->push_n_parts; i++)
        if (send_kept_part(c, k, i, err, err_len) != 0) return -1;
    if (s->push_n_parts) return 0;
    zmq_msg_t frames[2];
    for (size_t i = 0; i < s->push_n_frames; i++) {
        zmq_msg_init(&frames[i]);
        zmq_msg_copy(&frames[i], &s->push_frames[i]);
    }
    return zmsg_send_sealed(s->sock, NULL, &s->push_h, frames, s->push_n_frames, 0, err, err_len);
}

// Sends shard k's waiting request (again).
static int send_request(ps_client_t *c, size_t k, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    if (!s->req_has_keys) return zmsg_send(s->sock, NULL, &s->req_h, NULL, 0, 0, err, err_len);
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    zmq_msg_copy(&frame, &s->req_keys);
    return zmsg_send(s->sock, NULL, &s->req_h, &frame, 1, 0, err, err_len);
}

// Makes h (with an optional key frame, consumed) shard k's waiting request and sends it.
static int start_request(ps_client_t *c, size_t k, request_kind_t kind, wire_header_t h, zmq_msg_t *keys, char *err,
                         size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    if (s->req_has_keys) zmq_msg_close(&s->req_keys);
    s->req_has_keys = 0;
    s->req = kind;
    s->req_h = h;
    s->answered = 0;
    if (keys) {
        zmq_msg_init(&s->req_keys);
        zmq_msg_move(&s->req_keys, keys);
        s->req_has_keys = 1;
    }
    sent_now(c, s);
    return send_request(c, k, err, err_len);
}

static int has_push(const shard_conn_t *s) { return s->push_n_frames || s->push_n_parts; }
static int push_outstanding(const shard_conn_t *s) { return has_push(s) && !s->push_acked; }
static int request_outstanding(const shard_conn_t *s) { return s->req != REQUEST_NONE && !s->answered; }

// Resends what shard k has left unanswered for its retry interval: the push,
// and the request (a pull that names a clock with the last push before it: a
// shard restarted from a checkpoint may have lost it, and may be waiting on
// this worker's clock).
static int retry_shard(ps_client_t *c, size_t k, double now, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    int push = push_outstanding(s), req = request_outstanding(s);
    if (!push && !req) return 0;
    if (now - s->sent_at < s->retry_s) return 0;
    if (push || (req && s->req == REQUEST_PULL && s->req_h.clock > 0 && has_push(s))) {
        if (resend_push(c, k, err, err_len) != 0) return -1;
    }
    if (req && send_request(c, k, err, err_len) != 0) return -1;
    c->stats.retries++;
    s->sent_at = now;
    if (s->retry_s < RETRY_BACKOFF_MAX * c->retry_s) s->retry_s *= 2;
    return 0;
}

// ---- receiving --------------------------------------------------------------------

static void note_stale(ps_client_t *c) { c->stats.stale++; }

// Does a sparse PARAMS answer the keyed pull waiting on shard k (same keys)?
static int answers_keys(const shard_conn_t *s, const wire_header_t *h) {
    return s->req_has_keys && h->count == s->key_count && h->offset == s->req_h.offset;
}

// A range of shard k's values answering the push in flight part by part
// (WIRE_FLAG_ECHO): copied out in order; the pull is answered with the last.
static int take_echo(ps_client_t *c, size_t k, zmsg_t *m, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    const wire_header_t *h = &m->h;
    if (h->offset == s->begin) s->echo_next = 0, s->echo_version = UINT64_MAX;  // the first range (again)
    if (h->offset != s->begin + s->echo_next || h->count > s->end - h->offset) {
        note_stale(c);  // out of line: a retry's whole answer completes the pull
        return 0;
    }
    if (zmsg_copy_verified(m, c->pull_out + h->offset) != 0) {
        snprintf(err, err_len, "worker %u: parameters from server shard %zu failed their checksum", c->worker, k);
        return -1;
    }
    c->stats.bytes_in += 4u * h->count;
    s->echo_next += h->count;
    if (h->param_version < s->echo_version) s->echo_version = h->param_version;
    if (s->echo_next == s->end - s->begin) {
        s->version = s->echo_version;
        s->answer_min_clock = h->clock;
        s->answered = 1;
    }
    return 0;
}

// What a worker and a shard that cannot read each other's shared memory
// (WIRE_STATUS_BAD_SHM, either way) are told to do about it.
#define SHM_APART_ADVICE "(--ps-transport shm needs every process on one machine; --ps-transport tcp does not)"

// Shard k refused a request: counted, kept for ps_client_refusal, and said
// in err. Returns -1.
static int refused(ps_client_t *c, size_t k, wire_status_t why, char *err, size_t err_len) {
    c->stats.rejects++;
    c->refusal = why;
    if (why == WIRE_STATUS_EVICTED)
        snprintf(err, err_len,
                 "server shard %zu evicted worker %u: it was silent for longer than --worker-timeout; it must "
                 "rejoin",
                 k, c->worker);
    else if (why == WIRE_STATUS_ID_LIVE)
        snprintf(err, err_len, "--join --id %u: worker %u is live in the run (server shard %zu); pick a free id",
                 c->worker, c->worker, k);
    else if (why == WIRE_STATUS_BAD_SHM)
        snprintf(err, err_len, "server shard %zu cannot read worker %u's payloads in shared memory %s", k, c->worker,
                 SHM_APART_ADVICE);
    else if (why == WIRE_STATUS_NOT_FINITE)
        snprintf(err, err_len,
                 "server shard %zu refused a request from worker %u: the run diverged (an update held NaN or Inf)", k,
                 c->worker);
    else
        snprintf(err, err_len, "server shard %zu refused a request from worker %u: %s", k, c->worker,
                 wire_status_name(why));
    return -1;
}

// Handles one message from shard k.
static int dispatch(ps_client_t *c, size_t k, zmsg_t *m, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    const wire_header_t *h = &m->h;
    if (h->shard != k) {
        note_dropped(c, k, m->status);
        return 0;
    }
    if (h->type != MSG_TYPE_PARAMS && zmsg_verify(m) != 0) {
        note_dropped(c, k, m->status);
        return 0;
    }
    s->heard_at = mono_clock_s();
    s->min_clock = h->clock;
    switch (h->type) {
        case MSG_TYPE_WELCOME:
            if (s->req != REQUEST_HELLO || s->answered) {
                note_stale(c);
                return 0;
            }
            if (h->offset != s->begin || h->aux != s->end - s->begin) {
                snprintf(err, err_len,
                         "server shard %zu holds parameters [%llu, %llu) but this worker expects [%zu, %zu): do all "
                         "processes run the same model and --servers?",
                         k, (unsigned long long)h->offset, (unsigned long long)(h->offset + h->aux), s->begin, s->end);
                return -1;
            }
            s->version = h->param_version;
            s->welcome_clock = h->clock;
            s->answered = 1;
            return 0;
        case MSG_TYPE_PUSH_ACK:
            // The acknowledgement names its push: one of an earlier retry is stale.
            if (!push_outstanding(s) || h->offset != s->push_h.clock) {
                note_stale(c);
                return 0;
            }
            s->push_acked = 1;
            c->stats.pushes_acked++;
            if (c->counts) c->counts[k].acked++;
            return 0;
        case MSG_TYPE_PARAMS:
            if (s->req != REQUEST_PULL || s->answered || h->clock < s->req_h.clock) {
                note_stale(c);  // a retried pull's second answer, or one for an earlier pull
                return 0;
            }
            if (h->payload_kind == PAYLOAD_KIND_DENSE && c->pull_out && h->count < s->end - s->begin)
                return take_echo(c, k, m, err, err_len);
            if (h->payload_kind == PAYLOAD_KIND_DENSE && c->pull_out && h->offset == s->begin &&
                h->count == s->end - s->begin) {
                // Verified while copied: one pass over the payload instead of two.
                if (zmsg_copy_verified(m, c->pull_out + s->begin) != 0) {
                    snprintf(err, err_len, "worker %u: parameters from server shard %zu failed their checksum",
                             c->worker, k);
                    return -1;
                }
            } else if (zmsg_verify(m) != 0) {
                note_dropped(c, k, m->status);
                return 0;
            } else if (h->payload_kind == PAYLOAD_KIND_VALUES && c->pull_values && answers_keys(s, h)) {
                memcpy(c->pull_values + s->key_begin, zmsg_payload(m, 0), h->count * sizeof(float));
            } else {
                note_stale(c);
                return 0;
            }
            c->stats.bytes_in += 4u * h->count;
            s->version = h->param_version;
            s->held_s = 1e-6 * h->aux;
            s->answer_min_clock = h->clock;
            s->answered = 1;
            return 0;
        case MSG_TYPE_BYE_ACK:
            if (s->req != REQUEST_BYE || s->answered) {
                note_stale(c);
                return 0;
            }
            s->answered = 1;
            return 0;
        case MSG_TYPE_REJECT:
            // The refusal ends the push in flight (the oldest request): nothing waits for it now.
            if (push_outstanding(s)) s->push_acked = -1;
            return refused(c, k, (wire_status_t)h->aux, err, err_len);
        default:
            note_dropped(c, k, m->status);
            return 0;
    }
}

// The shards whose answer is missing, for an error message: "0 (tcp://...), 2 (tcp://...)".
static void list_silent(const ps_client_t *c, double started, double now, char *out, size_t len) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < c->n_shards && used + 1 < len; k++) {
        const shard_conn_t *s = &c->shards[k];
        if (!push_outstanding(s) && !request_outstanding(s)) continue;
        double quiet_from = s->heard_at > started ? s->heard_at : started;
        if ((now - quiet_from) * 1000.0 <= c->timeout_ms) continue;
        int n = snprintf(out + used, len - used, "%s%zu (%s)", used ? ", " : "", k, s->endpoint);
        if (n < 0) break;
        used += (size_t)n;
    }
}

// One round of receiving: waits up to wait_ms for messages and handles every
// one that came, then resends what stays unanswered, failing once a shard
// with something outstanding has been silent for timeout_ms (counted from
// `started`, the wait's start, or the shard's last message if later).
static int pump_round(ps_client_t *c, int wait_ms, double started, const char *what, char *err, size_t err_len) {
    int rc = zmq_poll(c->items, (int)c->n_shards, wait_ms);
    if (rc < 0) {
        if (errno == EINTR) return 0;
        return ZMQ_FAIL("worker: zmq_poll", err, err_len);
    }
    for (size_t k = 0; rc > 0 && k < c->n_shards; k++) {
        if (!(c->items[k].revents & ZMQ_POLLIN)) continue;
        // Drain the shard: one poll may stand for several messages.
        for (;;) {
            zmsg_t m;
            int got = zmsg_recv_deferred(c->shards[k].sock, 0, c->run_id, &m, err, err_len);
            if (got < 0) {
                if (errno == EAGAIN) break;
                return -1;
            }
            int drc = 0;
            if (got == 0 && m.status == WIRE_STATUS_BAD_SHM) {
                snprintf(err, err_len, "worker %u cannot read server shard %zu's values in shared memory %s", c->worker,
                         k, SHM_APART_ADVICE);
                drc = -1;
            } else if (got == 0)
                note_dropped(c, k, m.status);
            else
                drc = dispatch(c, k, &m, err, err_len);
            zmsg_close(&m);
            if (drc != 0) return -1;
            int events = 0;
            size_t len = sizeof events;
            if (zmq_getsockopt(c->shards[k].sock, ZMQ_EVENTS, &events, &len) != 0 || !(events & ZMQ_POLLIN)) break;
        }
    }
    double now = mono_clock_s();
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        if (!push_outstanding(s) && !request_outstanding(s)) continue;
        double quiet_from = s->heard_at > started ? s->heard_at : started;
        if (c->timeout_ms > 0 && (now - quiet_from) * 1000.0 > c->timeout_ms) {
            char silent[512];
            list_silent(c, started, now, silent, sizeof silent);
            snprintf(err, err_len,
                     "worker %u: no answer from the parameter server within %d ms while %s (silent shards: %s)",
                     c->worker, c->timeout_ms, what, silent);
            return -1;
        }
        if (retry_shard(c, k, now, err, err_len) != 0) return -1;
    }
    return 0;
}

// Receives until done(c) holds, resending what stays unanswered, and failing
// once a shard with something outstanding has been silent for timeout_ms.
static int pump(ps_client_t *c, int (*done)(const ps_client_t *), const char *what, char *err, size_t err_len) {
    double started = mono_clock_s();
    while (!done(c)) {
        if (c->abort && atomic_load_explicit(c->abort, memory_order_relaxed)) {
            snprintf(err, err_len, "stopped while %s", what);
            return -1;
        }
        if (pump_round(c, 50, started, what, err, err_len) != 0) return -1;
    }
    return 0;
}

static int all_answered(const ps_client_t *c) {
    for (size_t k = 0; k < c->n_shards; k++)
        if (request_outstanding(&c->shards[k])) return 0;
    return 1;
}

static int all_acked(const ps_client_t *c) {
    for (size_t k = 0; k < c->n_shards; k++)
        if (push_outstanding(&c->shards[k])) return 0;
    return 1;
}

static void finish_requests(ps_client_t *c) {
    for (size_t k = 0; k < c->n_shards; k++) c->shards[k].req = REQUEST_NONE;
}

// ---- joining ------------------------------------------------------------------------

static int hello(ps_client_t *c, size_t k, uint64_t proposed, char *err, size_t err_len) {
    wire_header_t h = request(c, MSG_TYPE_HELLO, k);
    h.offset = c->n_params;
    h.clock = proposed;
    h.aux = c->nonce;
    if (c->join_nonce) h.flags |= WIRE_FLAG_JOIN;
    return start_request(c, k, REQUEST_HELLO, h, NULL, err, err_len);
}

static uint64_t max_welcome_clock(const ps_client_t *c) {
    uint64_t m = 0;
    for (size_t k = 0; k < c->n_shards; k++)
        if (c->shards[k].welcome_clock > m) m = c->shards[k].welcome_clock;
    return m;
}

// HELLO to every shard. On a rejoin each shard names the clock to continue
// from, and they may differ by a round (one saw the others' latest pushes
// before another); the ones behind are told the latest, which they adopt, so
// that every shard expects the same next push.
static int join(ps_client_t *c, char *err, size_t err_len) {
    for (size_t k = 0; k < c->n_shards; k++)
        if (hello(c, k, 0, err, err_len) != 0) return -1;
    if (pump(c, all_answered, "joining", err, err_len) != 0) return -1;
    for (int round = 0; round < JOIN_ROUNDS_MAX; round++) {
        uint64_t latest = max_welcome_clock(c);
        int behind = 0;
        for (size_t k = 0; k < c->n_shards; k++) {
            if (c->shards[k].welcome_clock == latest) continue;
            behind = 1;
            if (hello(c, k, latest, err, err_len) != 0) return -1;
        }
        if (!behind) break;
        if (pump(c, all_answered, "rejoining", err, err_len) != 0) return -1;
    }
    finish_requests(c);
    return 0;
}

// Cuts every shard's dense pushes into parts of part_floats (rounded up to a
// multiple of 8, the checksum's pieces; 0: whole), with room for their checksums.
static int layout_parts(ps_client_t *c, size_t part_floats, char *err, size_t err_len) {
    part_floats = (part_floats + 7) / 8 * 8;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        size_t n = s->end - s->begin;
        s->n_parts = part_floats && n > part_floats ? (n + part_floats - 1) / part_floats : 1;
        free(s->fill_sums), free(s->push_sums), free(s->push_parts);
        s->fill_sums = calloc(s->n_parts, sizeof *s->fill_sums);
        s->push_sums = calloc(s->n_parts, sizeof *s->push_sums);
        s->push_parts = calloc(s->n_parts, sizeof *s->push_parts);
        if (!s->fill_sums || !s->push_sums || !s->push_parts) {
            snprintf(err, err_len, "worker: out of memory");
            return -1;
        }
    }
    c->part_floats = part_floats;
    return 0;
}

int ps_client_set_push_part(ps_client_t *c, size_t floats, char *err, size_t err_len) {
    if (c->frames_ready || c->stats.pushes_sent > 0) {
        snprintf(err, err_len, "worker: the size of a push's parts is set before the first push");
        return -1;
    }
    return layout_parts(c, floats, err, err_len);
}

size_t ps_client_push_parts(const ps_client_t *c, size_t shard) { return c->shards[shard].n_parts; }

// Connects a DEALER to every shard; the caller then joins (a worker) or not (an observer).
static ps_client_t *client_connect(void *zmq_ctx, uint64_t run_id, uint32_t worker, uint32_t join_nonce,
                                   const char *const *endpoints, size_t n_shards, size_t n_params, int heartbeat_ms,
                                   int timeout_ms, char *err, size_t err_len) {
    ps_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "worker: out of memory");
        return NULL;
    }
    c->run_id = run_id;
    c->worker = worker;
    c->join_nonce = join_nonce;
    if (!(c->nonce = join_nonce) && !(c->nonce = (uint32_t)wire_fresh_id(c))) c->nonce = 1;
    c->n_shards = n_shards;
    c->n_params = n_params;
    c->n_keys = n_params;
    c->timeout_ms = timeout_ms;
    ps_client_set_retry_ms(c, timeout_ms > 0 && timeout_ms < 4000 ? timeout_ms / 4 : 1000);
    c->shards = calloc(n_shards, sizeof *c->shards);
    c->items = calloc(n_shards, sizeof *c->items);
    c->frames = calloc(n_shards, sizeof *c->frames);
    c->frame_data = calloc(n_shards, sizeof *c->frame_data);
    c->encoded = calloc(n_shards, sizeof *c->encoded);
    if (!c->shards || !c->items || !c->frames || !c->frame_data || !c->encoded) {
        snprintf(err, err_len, "worker: out of memory");
        ps_client_destroy(&c);
        return NULL;
    }
    char identity[32];
    // A joiner's identity carries its nonce: a second joiner with a live id
    // (refused) must not take the live one's routing over (ROUTER_HANDOVER).
    int id_len = worker == WIRE_NO_ID ? snprintf(identity, sizeof identity, "observer")
                 : join_nonce         ? snprintf(identity, sizeof identity, "w%u.%08x", worker, join_nonce)
                                      : snprintf(identity, sizeof identity, "w%u", worker);
    double now = mono_clock_s();
    for (size_t k = 0; k < n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        shard_range(n_params, n_shards, k, &s->begin, &s->end);
        s->endpoint = endpoints[k];
        s->heard_at = now;
        s->sock = zmq_socket(zmq_ctx, ZMQ_DEALER);
        if (!s->sock) {
            ZMQ_FAIL("worker: zmq_socket(DEALER)", err, err_len);
            ps_client_destroy(&c);
            return NULL;
        }
        int hwm = 0;
        if (zmsg_socket_defaults(s->sock, heartbeat_ms, err, err_len) != 0 ||
            zmq_setsockopt(s->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
            zmq_setsockopt(s->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
            zmq_setsockopt(s->sock, ZMQ_ROUTING_ID, identity, (size_t)id_len) != 0) {
            if (!err[0]) ZMQ_FAIL("worker: zmq_setsockopt", err, err_len);
            ps_client_destroy(&c);
            return NULL;
        }
        char why[400];  // replies hold at most the shard's values
        if (zmsg_connect(s->sock, endpoints[k], zmsg_max_frame(s->end - s->begin), why, sizeof why) != 0) {
            snprintf(err, err_len, "worker: %s", why);
            ps_client_destroy(&c);
            return NULL;
        }
        c->items[k].socket = s->sock;
        c->items[k].events = ZMQ_POLLIN;
    }
    size_t largest = 0;
    for (size_t k = 0; k < n_shards; k++)
        if (c->shards[k].end - c->shards[k].begin > largest) largest = c->shards[k].end - c->shards[k].begin;
    // A push being filled, the last one kept for resending and one on its
    // way out per shard: the buffers in use at most, kept for reuse.
    if (!(c->pool = buffer_pool_new(largest * sizeof(float), 3 * n_shards))) {
        snprintf(err, err_len, "worker: out of memory");
        ps_client_destroy(&c);
        return NULL;
    }
    if (layout_parts(c, PART_FLOATS_DEFAULT, err, err_len) != 0) ps_client_destroy(&c);
    return c;
}

ps_client_t *ps_client_new(void *zmq_ctx, uint64_t run_id, uint32_t worker, const char *const *endpoints,
                           size_t n_shards, size_t n_params, int heartbeat_ms, int timeout_ms, char *err,
                           size_t err_len) {
    ps_client_t *c = client_connect(zmq_ctx, run_id, worker, 0, endpoints, n_shards, n_params, heartbeat_ms, timeout_ms,
                                    err, err_len);
    if (c && join(c, err, err_len) != 0) ps_client_destroy(&c);
    return c;
}

ps_client_t *ps_client_new_joiner(void *zmq_ctx, uint64_t run_id, uint32_t worker, uint32_t join_nonce,
                                  const char *const *endpoints, size_t n_shards, size_t n_params, int heartbeat_ms,
                                  int timeout_ms, char *err, size_t err_len) {
    ps_client_t *c = client_connect(zmq_ctx, run_id, worker, join_nonce, endpoints, n_shards, n_params, heartbeat_ms,
                                    timeout_ms, err, err_len);
    if (c && join(c, err, err_len) != 0) ps_client_destroy(&c);
    return c;
}

ps_client_t *ps_client_new_observer(void *zmq_ctx, uint64_t run_id, const char *const *endpoints, size_t n_shards,
                                    size_t n_params, int timeout_ms, char *err, size_t err_len) {
    return client_connect(zmq_ctx, run_id, WIRE_NO_ID, 0, endpoints, n_shards, n_params, 0, timeout_ms, err, err_len);
}

void ps_client_set_abort(ps_client_t *c, const atomic_int *abort) { c->abort = abort; }

void ps_client_destroy(ps_client_t **cp) {
    if (!cp || !*cp) return;
    ps_client_t *c = *cp;
    if (c->frames_ready)
        for (size_t k = 0; k < c->n_shards; k++) zmq_msg_close(&c->frames[k]);
    if (c->shards) {
        for (size_t k = 0; k < c->n_shards; k++) {
            shard_conn_t *s = &c->shards[k];
            for (size_t i = 0; i < s->push_n_frames; i++) zmq_msg_close(&s->push_frames[i]);
            for (size_t i = 0; i < s->push_n_parts; i++) zmq_msg_close(&s->push_parts[i]);
            free(s->push_parts), free(s->push_sums), free(s->fill_sums);
            if (s->req_has_keys) zmq_msg_close(&s->req_keys);
            if (s->sock) zmq_close(s->sock);
        }
    }
    free(c->shards);
    free(c->items);
    free(c->frames);
    free(c->frame_data);
    buffer_pool_release(&c->pool);
    free(c->encoded);
    free(c);
    *cp = NULL;
}

uint64_t ps_client_join_clock(const ps_client_t *c) { return max_welcome_clock(c); }

void ps_client_set_retry_ms(ps_client_t *c, int retry_ms) { c->retry_s = 1e-3 * (retry_ms > 10 ? retry_ms : 10); }

wire_status_t ps_client_refusal(const ps_client_t *c) { return c->refusal; }

// ---- pushes -------------------------------------------------------------------------

static void drop_frames(ps_client_t *c) {
    for (size_t k = 0; c->frames_ready && k < c->n_shards; k++) zmq_msg_close(&c->frames[k]);
    c->frames_ready = 0;
}

// A worker that holds only its working set cannot fill the servers' ranges.
static int refuse_whole(const ps_client_t *c, const char *what, char *err, size_t err_len) {
    if (!c->map) return 0;
    snprintf(err, err_len, "worker %u: %s of the whole model from a worker that holds only its working set", c->worker,
             what);
    return -1;
}

uint8_t *const *ps_client_push_encoded_frames(ps_client_t *c, const size_t *bytes, char *err, size_t err_len) {
    if (refuse_whole(c, "an encoded push", err, err_len) != 0) return NULL;
    drop_frames(c);  // sizes may differ from the last ones
    for (size_t k = 0; k < c->n_shards; k++) {
        if (zmsg_frame_alloc(&c->frames[k], bytes[k], err, err_len) != 0) {
            for (size_t j = 0; j < k; j++) zmq_msg_close(&c->frames[j]);
            return NULL;
        }
        c->encoded[k] = zmq_msg_data(&c->frames[k]);
        c->shards[k].summed = SIZE_MAX;  // checksummed when committed
    }
    c->frames_ready = 1;
    c->frames_encoded = 1;
    return c->encoded;
}

// A dense push frame of `bytes`: with payloads in shared memory, a slot of
// this thread's arena, which goes by reference without a copy; else a
// buffer of the client's pool (memory written before, not fresh pages to
// fault in). A push in parts sends parts over its pool buffer.
static int push_frame(ps_client_t *c, zmq_msg_t *frame, size_t bytes, int whole, char *err, size_t err_len) {
    if (whole && shm_frames_frame(bytes, frame) == 0) return 0;
    if (buffer_pool_frame(c->pool, bytes, frame)) return 0;
    snprintf(err, err_len, "worker: out of memory for a push of %zu bytes", bytes);
    return -1;
}

float *const *ps_client_push_frames(ps_client_t *c, char *err, size_t err_len) {
    if (refuse_whole(c, "a dense push", err, err_len) != 0) return NULL;
    if (c->frames_encoded) {
        drop_frames(c);
        c->frames_encoded = 0;
    }
    if (!c->frames_ready) {
        for (size_t k = 0; k < c->n_shards; k++) {
            size_t n = c->shards[k].end - c->shards[k].begin;
            if (push_frame(c, &c->frames[k], n * sizeof(float), c->shards[k].n_parts == 1, err, err_len) != 0) {
                for (size_t j = 0; j < k; j++) zmq_msg_close(&c->frames[j]);
                return NULL;
            }
            c->frame_data[k] = zmq_msg_data(&c->frames[k]);
            wire_checksum_begin(&c->shards[k].sum, 0);
            wire_checksum_begin(&c->shards[k].whole, 0);
            c->shards[k].summed = 0;
        }
        c->frames_ready = 1;
    }
    return c->frame_data;
}

static void begin_parts(ps_client_t *c, size_t k, const wire_header_t *h);
static int send_parts_upto(ps_client_t *c, size_t k, size_t upto, char *err, size_t err_len);
static uint64_t pushed_version(const ps_client_t *c, const shard_conn_t *s);
static int wait_previous_push(ps_client_t *c, char *err, size_t err_len);

// The header of shard k's push as announced.
static wire_header_t announced_header(const ps_client_t *c, size_t k) {
    const shard_conn_t *s = &c->shards[k];
    wire_header_t h = c->announce_h;
    h.shard = (uint32_t)k;
    h.param_version = pushed_version(c, s);
    h.offset = s->begin;
    h.count = (uint32_t)(s->end - s->begin);
    return h;
}

// Sends part i of shard k's announced push, written and summed just now.
static void stream_part(ps_client_t *c, size_t k, size_t i) {
    shard_conn_t *s = &c->shards[k];
    size_t due = s->stream_begun ? s->push_n_parts : 0;  // parts complete in order
    if (c->stream_rc != 0 || i != due) return;
    if (!s->stream_begun) {
        wire_header_t h = announced_header(c, k);
        begin_parts(c, k, &h);
        s->stream_begun = 1;
    }
    if (send_parts_upto(c, k, i + 1, c->stream_err, sizeof c->stream_err) != 0) c->stream_rc = -1;
}

int ps_client_push_announce(ps_client_t *c, uint64_t clock, uint32_t examples, ps_push_kind_t kind, char *err,
                            size_t err_len) {
    if (!c->frames_ready || c->frames_encoded) {
        snprintf(err, err_len,
                 "worker: a push is announced after ps_client_push_frames, before its frames are written");
        return -1;
    }
    if (wait_previous_push(c, err, err_len) != 0) return -1;
    wire_header_t h = request(c, MSG_TYPE_PUSH, 0);
    h.clock = clock;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.aux = examples;
    h.flags = kind == PS_PUSH_GRADIENT        ? WIRE_FLAG_SUM
              : kind == PS_PUSH_GRADIENT_PULL ? WIRE_FLAG_SUM | WIRE_FLAG_ECHO
              : kind == PS_PUSH_UPDATE_PULL   ? WIRE_FLAG_ECHO
                                              : 0;
    c->announce_h = h;
    c->announced = 1;
    c->stream_rc = 0;
    for (size_t k = 0; k < c->n_shards; k++) c->shards[k].stream_begun = 0;
    return 0;
}

void ps_client_push_block_written(ps_client_t *c, size_t shard, size_t from, size_t n) {
    shard_conn_t *s = &c->shards[shard];
    if (!c->frames_ready || c->frames_encoded || s->summed != from || s->sum.closed) {
        s->summed = SIZE_MAX;  // out of order: the commit checksums the frame itself
        return;
    }
    size_t size = s->end - s->begin;
    const float *p = c->frame_data[shard] + from;
    // A block may end one part and begin the next: each part has its own checksum.
    while (n > 0 && s->summed < size) {
        size_t part = s->n_parts > 1 ? s->summed / c->part_floats : 0;
        size_t part_end = s->n_parts > 1 && part + 1 < s->n_parts ? (part + 1) * c->part_floats : size;
        size_t take = n < part_end - s->summed ? n : part_end - s->summed;
        wire_checksum_update(&s->sum, p, take * sizeof(float));
        // The whole frame's checksum is only for a push that may go whole:
        // an announced one goes in parts.
        if (s->n_parts > 1 && !c->announced) wire_checksum_update(&s->whole, p, take * sizeof(float));
        s->summed += take, p += take, n -= take;
        if (s->summed == part_end) {
            s->fill_sums[part] = wire_checksum_end(&s->sum);
            wire_checksum_begin(&s->sum, 0);
            if (c->announced && s->n_parts > 1) stream_part(c, shard, part);
        } else if (s->sum.closed) {
            s->summed = SIZE_MAX;
            return;
        }
    }
}

// Lets go of shard k's kept push.
static void drop_kept_push(shard_conn_t *s) {
    for (size_t i = 0; i < s->push_n_frames; i++) zmq_msg_close(&s->push_frames[i]);
    for (size_t i = 0; i < s->push_n_parts; i++) zmq_msg_close(&s->push_parts[i]);
    s->push_n_frames = s->push_n_parts = 0;
}

// Starts shard k's push in parts (header h): kept for resending from now on,
// and counted as sent before any part can arrive anywhere.
static void begin_parts(ps_client_t *c, size_t k, const wire_header_t *h) {
    shard_conn_t *s = &c->shards[k];
    drop_kept_push(s);
    s->push_h = *h;
    s->push_acked = 0;
    sent_now(c, s);
    if (c->counts) c->counts[k].sent++;
    c->stats.pushes_sent++;
}

// Sends the parts of shard k's frame from the first not sent yet up to
// `upto`: each a message over the frame's pool buffer, kept for resending,
// with the checksum summed as it was written (or computed here).
static int send_parts_upto(ps_client_t *c, size_t k, size_t upto, char *err, size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    size_t n = s->end - s->begin;
    float *data = c->frame_data[k];
    for (size_t i = s->push_n_parts; i < upto; i++) {
        size_t from = i * c->part_floats, len = i + 1 == s->n_parts ? n - from : c->part_floats;
        int summed = s->summed != SIZE_MAX && s->summed >= from + len;
        s->push_sums[i] = summed ? s->fill_sums[i] : wire_checksum(data + from, len * sizeof(float), 0);
        if (buffer_pool_message(data, from * sizeof(float), len * sizeof(float), &s->push_parts[i]) != 0)
            return ZMQ_FAIL("worker: zmq_msg_init_data", err, err_len);
        s->push_n_parts = i + 1;
        if (send_kept_part(c, k, i, err, err_len) != 0) return -1;
    }
    return 0;
}

// Sends a push to shard k (frames consumed) and keeps it for resending.
// h->checksum must be set already.
static int send_push(ps_client_t *c, size_t k, const wire_header_t *h, zmq_msg_t *frames, size_t n_frames, char *err,
                     size_t err_len) {
    shard_conn_t *s = &c->shards[k];
    drop_kept_push(s);
    for (size_t i = 0; i < n_frames; i++) {
        zmq_msg_init(&s->push_frames[i]);
        zmq_msg_copy(&s->push_frames[i], &frames[i]);
    }
    s->push_n_frames = n_frames;
    s->push_h = *h;
    s->push_acked = 0;
    sent_now(c, s);
    if (c->counts) c->counts[k].sent++;  // before it can arrive anywhere
    if (zmsg_send_sealed(s->sock, NULL, h, frames, n_frames, 0, err, err_len) != 0) return -1;
    c->stats.pushes_sent++;
    return 0;
}

void ps_client_pulled_versions(const ps_client_t *c, uint64_t *versions) {
    for (size_t k = 0; k < c->n_shards; k++) versions[k] = c->shards[k].version;
}

void ps_client_carry_versions(ps_client_t *c, const uint64_t *versions) {
    for (size_t k = 0; k < c->n_shards; k++) c->shards[k].carry_version = versions[k];
    c->carry = 1;
}

// The version a push to shard s says it was computed from.
static uint64_t pushed_version(const ps_client_t *c, const shard_conn_t *s) {
    return c->carry ? s->carry_version : s->version;
}

// A push waits for the previous one's acknowledgement: with one in flight per
// shard, a clock below the shard's record can only be a retry.
static int wait_previous_push(ps_client_t *c, char *err, size_t err_len) {
    if (all_acked(c)) return 0;
    return pump(c, all_acked, "waiting for the previous push's acknowledgement", err, err_len);
}

// An announced push must be committed as announced; its parts sent while the
// frames were written must all have gone out.
static int check_announced(ps_client_t *c, uint64_t clock, uint32_t examples, uint16_t flags, char *err,
                           size_t err_len) {
    const wire_header_t *a = &c->announce_h;
    if (clock != a->clock || examples != a->aux || flags != a->flags) {
        snprintf(err, err_len,
                 "worker: the push committed (clock %llu, %u examples, flags %u) is not the one "
                 "announced (clock %llu, %u examples, flags %u)",
                 (unsigned long long)clock, examples, flags, (unsigned long long)a->clock, a->aux, a->flags);
        return -1;
    }
    if (c->stream_rc != 0) {
        snprintf(err, err_len, "%s", c->stream_err);
        return -1;
    }
    return 0;
}

static int commit(ps_client_t *c, uint64_t clock, uint32_t examples, uint16_t flags, char *err, size_t err_len) {
    if (!c->frames_ready) {
        snprintf(err, err_len, "worker: push committed without frames");
        return -1;
    }
    // An announced push waited for the previous one's acknowledgement already.
    int rc =
        c->announced ? check_announced(c, clock, examples, flags, err, err_len) : wait_previous_push(c, err, err_len);
    c->frames_ready = 0;
    int encoded = c->frames_encoded;
    c->frames_encoded = 0;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        if (rc != 0) {
            zmq_msg_close(&c->frames[k]);
            continue;
        }
        wire_header_t h = request(c, MSG_TYPE_PUSH, k);
        h.clock = clock;
        h.param_version = pushed_version(c, s);
        h.payload_kind = encoded ? PAYLOAD_KIND_ENCODED : PAYLOAD_KIND_DENSE;
        h.offset = s->begin;
        h.count = (uint32_t)(s->end - s->begin);
        h.aux = examples;
        h.flags = flags;
        size_t frame_bytes = zmq_msg_size(&c->frames[k]);
        // A BSP gradient goes whole: the shard keeps it as received until its
        // round is applied, where parts would be copied (docs/protocol.md).
        if (!encoded && s->n_parts > 1 && (!(flags & WIRE_FLAG_SUM) || c->announced)) {
            if (!c->announced || !s->stream_begun) begin_parts(c, k, &h);  // else streamed from its first part
            rc = send_parts_upto(c, k, s->n_parts, err, err_len);
            zmq_msg_close(&c->frames[k]);  // the parts hold its buffer
        } else {
            if (!encoded && s->summed == s->end - s->begin && s->summed > 0)
                h.checksum = s->n_parts > 1 ? wire_checksum_end(&s->whole) : s->fill_sums[0];
            else
                wire_seal(&h, zmq_msg_data(&c->frames[k]), frame_bytes, NULL, 0);
            rc = send_push(c, k, &h, &c->frames[k], 1, err, err_len);
        }
        if (rc == 0) c->stats.bytes_out += frame_bytes;
    }
    c->carry = 0;
    c->announced = 0;
    return rc;
}

int ps_client_push_commit(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, char *err, size_t err_len) {
    return commit(c, clock, examples, bsp ? WIRE_FLAG_SUM : 0, err, err_len);
}

static int answered_and_acked(const ps_client_t *c) { return all_answered(c) && all_acked(c); }

int ps_client_push_commit_ask(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, float *out, char *err,
                              size_t err_len) {
    if (c->frames_encoded) {
        snprintf(err, err_len, "worker: an encoded push is not answered with values");
        return -1;
    }
    if (refuse_whole(c, "a push answered with values", err, err_len) != 0) return -1;
    c->ask_started = mono_clock_s();
    if (!c->announced && wait_previous_push(c, err, err_len) != 0) return -1;
    // Each shard's pull waits unsent: the answers come with the push. A
    // retry sends it as a plain pull, whose whole answer completes it.
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        if (s->req_has_keys) zmq_msg_close(&s->req_keys);
        s->req_has_keys = 0;
        s->req = REQUEST_PULL;
        s->req_h = request(c, MSG_TYPE_PULL, k);
        s->req_h.clock = bsp ? clock + 1 : 0;  // BSP: the round this gradient completes
        s->answered = 0;
        s->echo_next = 0;
        s->echo_version = UINT64_MAX;
    }
    c->pull_out = out;
    int rc = commit(c, clock, examples, (uint16_t)(WIRE_FLAG_ECHO | (bsp ? WIRE_FLAG_SUM : 0)), err, err_len);
    if (rc != 0) {
        c->pull_out = NULL;
        finish_requests(c);
    }
    return rc;
}

// The smallest min clock the shards' answers to the last pull reported: what
// the values it brought stand for. (A shard's later messages, push
// acknowledgements, report later clocks; a pull's answer read after one of
// them must not claim it.)
static uint64_t answered_min_clock(const ps_client_t *c) {
    uint64_t min = UINT64_MAX;
    for (size_t k = 0; k < c->n_shards; k++)
        if (c->shards[k].answer_min_clock < min) min = c->shards[k].answer_min_clock;
    return min;
}

int ps_client_await_values(ps_client_t *c, uint64_t *min_clock, char *err, size_t err_len) {
    if (!c->pull_out) {
        snprintf(err, err_len, "worker: no push asked for values");
        return -1;
    }
    int rc = pump(c, answered_and_acked, "waiting for the values asked for with a push", err, err_len);
    c->pull_out = NULL;
    finish_requests(c);
    c->stats.pulls++;
    c->stats.pull_wait_s += mono_clock_s() - c->ask_started;
    if (min_clock) *min_clock = answered_min_clock(c);
    return rc;
}

int ps_client_push_commit_pull(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, float *out, char *err,
                               size_t err_len) {
    if (ps_client_push_commit_ask(c, clock, examples, bsp, out, err, err_len) != 0) return -1;
    return ps_client_await_values(c, NULL, err, err_len);
}

// Indices must be strictly ascending (each once, as the protocol says) and
// below the caller's key count; checked before anything is sent, so a bad set
// reaches no shard.
static int check_indices(const ps_client_t *c, const uint32_t *idx, size_t n, const char *what, char *err,
                         size_t err_len) {
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= c->n_keys || (i > 0 && idx[i] <= idx[i - 1])) {
            snprintf(err, err_len, "worker: %s %u is not strictly ascending or not below %zu", what, idx[i], c->n_keys);
            return -1;
        }
    }
    return 0;
}

// The servers' key of the caller's i-th key (keys NULL: the caller's key i).
static uint32_t global_key(const ps_client_t *c, const uint32_t *keys, size_t i) {
    uint32_t local = keys ? keys[i] : (uint32_t)i;
    return c->map ? ps_key_map_global(c->map, local) : local;
}

// Shard s's keys from pos on: how many of keys[pos..n) (translated) lie below its end.
static size_t keys_in_shard(const ps_client_t *c, const shard_conn_t *s, const uint32_t *keys, size_t pos, size_t n) {
    size_t first = pos;
    while (pos < n && global_key(c, keys, pos) < s->end) pos++;
    return pos - first;
}

// Writes the servers' keys of keys[first..first+n) into out.
static void copy_keys(const ps_client_t *c, uint32_t *out, const uint32_t *keys, size_t first, size_t n) {
    if (!c->map && keys) {
        memcpy(out, keys + first, n * sizeof *out);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = global_key(c, keys, first + i);
}

int ps_client_set_key_map(ps_client_t *c, const ps_key_map_t *map, char *err, size_t err_len) {
    if (map->n_global != c->n_params || map->width == 0 || map->global_rows * map->width > map->n_global ||
        map->n_rows > map->global_rows || ps_key_map_local_keys(map) > UINT32_MAX) {
        snprintf(err, err_len, "worker %u: a key map of %zu of %zu rows (width %zu, %zu keys) for servers of %zu keys",
                 c->worker, map->n_rows, map->global_rows, map->width, map->n_global, c->n_params);
        return -1;
    }
    for (size_t r = 0; r < map->n_rows; r++) {
        if (map->rows[r] >= map->global_rows || (r > 0 && map->rows[r] <= map->rows[r - 1])) {
            snprintf(err, err_len, "worker %u: key map row %zu (%u) is not strictly ascending or not below %zu",
                     c->worker, r, map->rows[r], map->global_rows);
            return -1;
        }
    }
    c->map = map;
    c->n_keys = ps_key_map_local_keys(map);
    return 0;
}

int ps_client_push_sparse(ps_client_t *c, const uint32_t *idx, const float *val, size_t nnz, uint64_t clock,
                          uint32_t examples, int bsp, char *err, size_t err_len) {
    if (check_indices(c, idx, nnz, "sparse push index", err, err_len) != 0) return -1;
    if (wait_previous_push(c, err, err_len) != 0) return -1;
    size_t pos = 0;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        size_t first = pos, n = keys_in_shard(c, s, idx, pos, nnz);
        pos += n;
        wire_header_t h = request(c, MSG_TYPE_PUSH, k);
        h.clock = clock;
        h.param_version = pushed_version(c, s);
        h.payload_kind = PAYLOAD_KIND_SPARSE;
        h.count = (uint32_t)n;
        h.aux = examples;
        h.flags = bsp ? WIRE_FLAG_SUM : 0;
        zmq_msg_t frames[2];
        if (zmsg_frame_alloc(&frames[0], n * sizeof(uint32_t), err, err_len) != 0) return -1;
        if (zmsg_frame_alloc(&frames[1], n * sizeof(float), err, err_len) != 0) {
            zmq_msg_close(&frames[0]);
            return -1;
        }
        copy_keys(c, zmq_msg_data(&frames[0]), idx, first, n);
        memcpy(zmq_msg_data(&frames[1]), val + first, n * sizeof(float));
        wire_seal(&h, zmq_msg_data(&frames[0]), n * sizeof(uint32_t), zmq_msg_data(&frames[1]), n * sizeof(float));
        if (send_push(c, k, &h, frames, 2, err, err_len) != 0) return -1;
        c->stats.bytes_out += 8u * n;
    }
    c->carry = 0;
    if (pos != nnz) {
        snprintf(err, err_len, "worker: sparse push index %u is not strictly ascending or not below %zu", idx[pos],
                 c->n_keys);
        return -1;
    }
    return 0;
}

// ---- pulls and leaving ----------------------------------------------------------------

static int pull_keys_start(ps_client_t *c, uint64_t need_clock, const uint32_t *keys, size_t n, float *values,
                           char *err, size_t err_len);

int ps_client_pull_start(ps_client_t *c, uint64_t need_clock, float *out, char *err, size_t err_len) {
    // The whole model of a worker that holds only its working set is every key it holds.
    if (c->map) return pull_keys_start(c, need_clock, NULL, c->n_keys, out, err, err_len);
    if (c->pull_started > 0.0) {
        snprintf(err, err_len, "worker %u: a pull was started while another was in flight", c->worker);
        return -1;
    }
    for (size_t k = 0; k < c->n_shards; k++) {
        wire_header_t h = request(c, MSG_TYPE_PULL, k);
        h.clock = need_clock;
        c->shards[k].echo_next = 0;  // a BSP round may answer in ranges (docs/protocol.md)
        c->shards[k].echo_version = UINT64_MAX;
        if (start_request(c, k, REQUEST_PULL, h, NULL, err, err_len) != 0) return -1;
    }
    c->pull_out = out;
    c->pull_started = mono_clock_s();
    return 0;
}

int ps_client_pull_pending(const ps_client_t *c) { return c->pull_started > 0.0; }

// The pull in flight over, answered or given up: the client free for another
// request. Returns how long the shard that held it longest held it back.
static double pull_release(ps_client_t *c) {
    c->pull_out = NULL;
    c->pull_values = NULL;
    finish_requests(c);
    c->pull_started = 0.0;
    double held = 0.0;
    for (size_t k = 0; k < c->n_shards; k++) {
        if (c->shards[k].held_s > held) held = c->shards[k].held_s;
        c->shards[k].held_s = 0.0;
    }
    return held;
}

// The pull in flight is answered: its counts, and the client free for another.
static void pull_done(ps_client_t *c, uint64_t *min_clock) {
    c->stats.pulls++;
    c->stats.pull_flight_s += mono_clock_s() - c->pull_started;
    c->stats.pull_held_s += pull_release(c);
    if (min_clock) *min_clock = answered_min_clock(c);
}

void ps_client_pull_cancel(ps_client_t *c) {
    if (c->pull_started <= 0.0) return;
    pull_release(c);
    c->stats.pulls_cancelled++;
}

int ps_client_pull_poll(ps_client_t *c, int *done, uint64_t *min_clock, char *err, size_t err_len) {
    *done = 0;
    if (c->pull_started <= 0.0) {
        snprintf(err, err_len, "worker %u: no pull in flight to look at", c->worker);
        return -1;
    }
    if (!all_answered(c) && pump_round(c, 0, c->pull_started, "pulling parameters", err, err_len) != 0) return -1;
    if (!all_answered(c)) return 0;
    pull_done(c, min_clock);
    *done = 1;
    return 0;
}

int ps_client_pull_finish(ps_client_t *c, uint64_t *min_clock, char *err, size_t err_len) {
    if (c->pull_started <= 0.0) {
        snprintf(err, err_len, "worker %u: no pull in flight to wait for", c->worker);
        return -1;
    }
    double t0 = mono_clock_s();
    int rc = pump(c, all_answered, "pulling parameters", err, err_len);
    c->stats.pull_wait_s += mono_clock_s() - t0;
    if (rc != 0) return -1;
    pull_done(c, min_clock);
    return 0;
}

int ps_client_pull(ps_client_t *c, uint64_t need_clock, float *out, uint64_t *min_clock, char *err, size_t err_len) {
    if (ps_client_pull_start(c, need_clock, out, err, err_len) != 0) return -1;
    return ps_client_pull_finish(c, min_clock, err, err_len);
}

int ps_client_pull_keys(ps_client_t *c, const uint32_t *keys, size_t n, float *values, char *err, size_t err_len) {
    return ps_client_pull_keys_at(c, 0, keys, n, values, err, err_len);
}

int ps_client_pull_keys_start(ps_client_t *c, uint64_t need_clock, const uint32_t *keys, size_t n, float *values,
                              char *err, size_t err_len) {
    if (check_indices(c, keys, n, "pull key", err, err_len) != 0) return -1;
    return pull_keys_start(c, need_clock, keys, n, values, err, err_len);
}

// keys: checked, or NULL for all of the caller's n keys.
static int pull_keys_start(ps_client_t *c, uint64_t need_clock, const uint32_t *keys, size_t n, float *values,
                           char *err, size_t err_len) {
    if (c->pull_started > 0.0) {
        snprintf(err, err_len, "worker %u: a pull was started while another was in flight", c->worker);
        return -1;
    }
    size_t pos = 0;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        size_t first = pos, count = keys_in_shard(c, s, keys, pos, n);
        pos += count;
        s->key_begin = first;
        s->key_count = count;
        wire_header_t h = request(c, MSG_TYPE_PULL, k);
        h.payload_kind = PAYLOAD_KIND_KEYS;
        h.clock = need_clock;
        h.count = (uint32_t)count;
        h.offset = c->pull_tag + 1;  // one tag for the pull, whichever shard (a retry resends it)
        zmq_msg_t frame;
        if (zmsg_frame_alloc(&frame, count * sizeof(uint32_t), err, err_len) != 0) return -1;
        copy_keys(c, zmq_msg_data(&frame), keys, first, count);
        if (start_request(c, k, REQUEST_PULL, h, &frame, err, err_len) != 0) return -1;
    }
    c->pull_tag++;
    c->pull_values = values;
    c->pull_started = mono_clock_s();
    return 0;
}

int ps_client_pull_keys_at(ps_client_t *c, uint64_t need_clock, const uint32_t *keys, size_t n, float *values,
                           char *err, size_t err_len) {
    if (ps_client_pull_keys_start(c, need_clock, keys, n, values, err, err_len) != 0) return -1;
    return ps_client_pull_finish(c, NULL, err, err_len);
}

int ps_client_wait_acks(ps_client_t *c, char *err, size_t err_len) {
    return pump(c, all_acked, "waiting for push acknowledgements", err, err_len);
}

int ps_client_bye(ps_client_t *c, char *err, size_t err_len) {
    if (ps_client_wait_acks(c, err, err_len) != 0) return -1;
    for (size_t k = 0; k < c->n_shards; k++)
        if (start_request(c, k, REQUEST_BYE, request(c, MSG_TYPE_BYE, k), NULL, err, err_len) != 0) return -1;
    int rc = pump(c, all_answered, "leaving", err, err_len);
    finish_requests(c);
    return rc;
}

void ps_client_get_stats(const ps_client_t *c, ps_client_stats_t *out) { *out = c->stats; }

void ps_client_count_pushes(ps_client_t *c, ps_push_count_t *counts) { c->counts = counts; }

void ps_client_local_push_sent(ps_client_t *c, size_t k, size_t values) {
    if (c->counts) c->counts[k].sent++;  // before it can arrive anywhere
    c->stats.pushes_sent++;
    c->stats.bytes_out += 4u * values;
}

void ps_client_local_push_answered(ps_client_t *c, size_t k, uint64_t version, size_t values) {
    if (c->counts) c->counts[k].acked++;
    c->stats.pushes_acked++;
    c->stats.bytes_in += 4u * values;
    c->shards[k].version = version;
}

void ps_client_local_round_done(ps_client_t *c, double waited_s) {
    c->stats.pulls++;
    c->stats.pull_wait_s += waited_s;
    c->stats.pull_flight_s += waited_s;
}

uint64_t ps_client_shard_version(const ps_client_t *c, size_t k) { return pushed_version(c, &c->shards[k]); }

int ps_client_local_refusal(ps_client_t *c, size_t k, wire_status_t why, char *err, size_t err_len) {
    return refused(c, k, why, err, err_len);
}
