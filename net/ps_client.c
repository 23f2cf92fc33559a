// A worker's side of the parameter-server protocol (ps_client.h).
#include "net/ps_client.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "datasets/split.h"  // defines: shard_range
#include "net/zmsg.h"        // defines: zmsg_send, zmsg_recv, ZMQ_FAIL

typedef struct shard_conn {
    void *sock;
    size_t begin, end;
    uint64_t version;     // of the parameters last pulled from it
    uint64_t unacked;     // pushes sent, not yet acknowledged
    int answered;         // the current pull (or hello, or bye) got its answer
    size_t key_begin;     // keyed pull: where this shard's keys start in the caller's array
    size_t key_count;     // keyed pull: how many of them this shard was asked for
    uint64_t min_clock;   // the min worker clock it reported last
    wire_checksum_stream_t sum;  // the push frame's checksum, block by block
    size_t summed;               // floats of the push frame summed so far; SIZE_MAX: given up
} shard_conn_t;

struct ps_client {
    uint64_t run_id;
    uint32_t worker;
    size_t n_shards, n_params;
    int timeout_ms;
    shard_conn_t *shards;
    zmq_pollitem_t *items;
    zmq_msg_t *frames;   // (n_shards) dense push frames being filled
    float **frame_data;  // (n_shards) their data
    int frames_ready;
    // The pull in progress.
    float *pull_out;
    float *pull_values;
    ps_client_stats_t stats;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

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
    s->min_clock = h->clock;
    switch (h->type) {
    case MSG_TYPE_WELCOME:
        if (h->offset != s->begin || h->aux != s->end - s->begin) {
            snprintf(err, err_len,
                     "server shard %zu holds parameters [%llu, %llu) but this worker expects [%zu, %zu): do all "
                     "processes run the same model and --servers?",
                     k, (unsigned long long)h->offset, (unsigned long long)(h->offset + h->aux), s->begin, s->end);
            return -1;
        }
        s->version = h->param_version;
        s->answered = 1;
        return 0;
    case MSG_TYPE_PUSH_ACK:
        if (s->unacked) s->unacked--;
        c->stats.pushes_acked++;
        return 0;
    case MSG_TYPE_PARAMS:
        if (h->payload_kind == PAYLOAD_KIND_DENSE && c->pull_out && h->offset == s->begin &&
            h->count == s->end - s->begin) {
            // Verified while copied: one pass over the payload instead of two.
            if (zmsg_copy_verified(m, c->pull_out + s->begin) != 0) {
                snprintf(err, err_len, "worker %u: parameters from server shard %zu failed their checksum", c->worker,
                         k);
                return -1;
            }
        } else if (zmsg_verify(m) != 0) {
            note_dropped(c, k, m->status);
            return 0;
        } else if (h->payload_kind == PAYLOAD_KIND_SPARSE && c->pull_values && h->count == s->key_count) {
            memcpy(c->pull_values + s->key_begin, zmsg_payload(m, 1), h->count * sizeof(float));
        } else {
            note_dropped(c, k, m->status);
            return 0;
        }
        c->stats.bytes_in += h->count * (h->payload_kind == PAYLOAD_KIND_SPARSE ? 8u : 4u);
        s->version = h->param_version;
        s->answered = 1;
        return 0;
    case MSG_TYPE_BYE_ACK:
        s->answered = 1;
        return 0;
    case MSG_TYPE_REJECT:
        c->stats.rejects++;
        snprintf(err, err_len, "server shard %zu refused a request from worker %u: %s", k, c->worker,
                 wire_status_name((wire_status_t)h->aux));
        return -1;
    default:
        note_dropped(c, k, m->status);
        return 0;
    }
}

// Receives until done(c) holds, failing after timeout_ms without progress.
static int pump(ps_client_t *c, int (*done)(const ps_client_t *), const char *what, char *err, size_t err_len) {
    double last = now_s();
    while (!done(c)) {
        int rc = zmq_poll(c->items, (int)c->n_shards, 100);
        if (rc < 0) {
            if (errno == EINTR) continue;
            return ZMQ_FAIL("worker: zmq_poll", err, err_len);
        }
        if (rc == 0) {
            if (c->timeout_ms > 0 && (now_s() - last) * 1000.0 > c->timeout_ms) {
                snprintf(err, err_len, "worker %u: no answer from the parameter server within %d ms while %s",
                         c->worker, c->timeout_ms, what);
                return -1;
            }
            continue;
        }
        last = now_s();
        for (size_t k = 0; k < c->n_shards; k++) {
            if (!(c->items[k].revents & ZMQ_POLLIN)) continue;
            zmsg_t m;
            int got = zmsg_recv_deferred(c->shards[k].sock, 0, c->run_id, &m, err, err_len);
            if (got < 0) {
                if (errno == EAGAIN) continue;
                return -1;
            }
            int drc = 0;
            if (got == 0) note_dropped(c, k, m.status);
            else drc = dispatch(c, k, &m, err, err_len);
            zmsg_close(&m);
            if (drc != 0) return -1;
        }
    }
    return 0;
}

static int all_answered(const ps_client_t *c) {
    for (size_t k = 0; k < c->n_shards; k++)
        if (!c->shards[k].answered) return 0;
    return 1;
}

static int all_acked(const ps_client_t *c) {
    for (size_t k = 0; k < c->n_shards; k++)
        if (c->shards[k].unacked) return 0;
    return 1;
}

static void clear_answered(ps_client_t *c) {
    for (size_t k = 0; k < c->n_shards; k++) c->shards[k].answered = 0;
}

ps_client_t *ps_client_new(void *zmq_ctx, uint64_t run_id, uint32_t worker, const char *const *endpoints,
                           size_t n_shards, size_t n_params, int heartbeat_ms, int timeout_ms, char *err,
                           size_t err_len) {
    ps_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "worker: out of memory");
        return NULL;
    }
    c->run_id = run_id;
    c->worker = worker;
    c->n_shards = n_shards;
    c->n_params = n_params;
    c->timeout_ms = timeout_ms;
    c->shards = calloc(n_shards, sizeof *c->shards);
    c->items = calloc(n_shards, sizeof *c->items);
    c->frames = calloc(n_shards, sizeof *c->frames);
    c->frame_data = calloc(n_shards, sizeof *c->frame_data);
    if (!c->shards || !c->items || !c->frames || !c->frame_data) {
        snprintf(err, err_len, "worker: out of memory");
        ps_client_destroy(&c);
        return NULL;
    }
    char identity[32];
    int id_len = snprintf(identity, sizeof identity, "w%u", worker);
    for (size_t k = 0; k < n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        shard_range(n_params, n_shards, k, &s->begin, &s->end);
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
        if (zmq_connect(s->sock, endpoints[k]) != 0) {
            char what[300];
            snprintf(what, sizeof what, "worker: zmq_connect(%s)", endpoints[k]);
            ZMQ_FAIL(what, err, err_len);
            ps_client_destroy(&c);
            return NULL;
        }
        c->items[k].socket = s->sock;
        c->items[k].events = ZMQ_POLLIN;
    }
    for (size_t k = 0; k < n_shards; k++) {
        wire_header_t h = request(c, MSG_TYPE_HELLO, k);
        h.offset = n_params;
        if (zmsg_send(c->shards[k].sock, NULL, &h, NULL, 0, 0, err, err_len) != 0) {
            ps_client_destroy(&c);
            return NULL;
        }
    }
    clear_answered(c);
    if (pump(c, all_answered, "joining", err, err_len) != 0) {
        ps_client_destroy(&c);
        return NULL;
    }
    return c;
}

void ps_client_destroy(ps_client_t **cp) {
    if (!cp || !*cp) return;
    ps_client_t *c = *cp;
    if (c->frames_ready)
        for (size_t k = 0; k < c->n_shards; k++) zmq_msg_close(&c->frames[k]);
    if (c->shards)
        for (size_t k = 0; k < c->n_shards; k++)
            if (c->shards[k].sock) zmq_close(c->shards[k].sock);
    free(c->shards);
    free(c->items);
    free(c->frames);
    free(c->frame_data);
    free(c);
    *cp = NULL;
}

float *const *ps_client_push_frames(ps_client_t *c, char *err, size_t err_len) {
    if (!c->frames_ready) {
        for (size_t k = 0; k < c->n_shards; k++) {
            size_t n = c->shards[k].end - c->shards[k].begin;
            if (zmsg_frame_alloc(&c->frames[k], n * sizeof(float), err, err_len) != 0) {
                for (size_t j = 0; j < k; j++) zmq_msg_close(&c->frames[j]);
                return NULL;
            }
            c->frame_data[k] = zmq_msg_data(&c->frames[k]);
            wire_checksum_begin(&c->shards[k].sum, 0);
            c->shards[k].summed = 0;
        }
        c->frames_ready = 1;
    }
    return c->frame_data;
}

void ps_client_push_block_written(ps_client_t *c, size_t shard, size_t from, size_t n) {
    shard_conn_t *s = &c->shards[shard];
    if (!c->frames_ready || s->summed != from || s->sum.closed) {
        s->summed = SIZE_MAX;  // out of order: the commit checksums the frame itself
        return;
    }
    wire_checksum_update(&s->sum, c->frame_data[shard] + from, n * sizeof(float));
    s->summed += n;
}

int ps_client_push_commit(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, char *err, size_t err_len) {
    if (!c->frames_ready) {
        snprintf(err, err_len, "worker: push committed without frames");
        return -1;
    }
    c->frames_ready = 0;
    int rc = 0;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        wire_header_t h = request(c, MSG_TYPE_PUSH, k);
        h.clock = clock;
        h.param_version = s->version;
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.offset = s->begin;
        h.count = (uint32_t)(s->end - s->begin);
        h.aux = examples;
        h.flags = bsp ? WIRE_FLAG_SUM : 0;
        if (rc == 0) {
            if (s->summed == s->end - s->begin) {
                h.checksum = wire_checksum_end(&s->sum);
                rc = zmsg_send_sealed(s->sock, NULL, &h, &c->frames[k], 1, 0, err, err_len);
            } else {
                rc = zmsg_send(s->sock, NULL, &h, &c->frames[k], 1, 0, err, err_len);
            }
            if (rc == 0) {
                s->unacked++;
                c->stats.pushes_sent++;
                c->stats.bytes_out += 4u * h.count;
            }
        } else {
            zmq_msg_close(&c->frames[k]);
        }
    }
    return rc;
}

// Indices must be ascending (repeats allowed) and below n_params; checked
// before anything is sent, so a bad set reaches no shard.
static int check_indices(const ps_client_t *c, const uint32_t *idx, size_t n, const char *what, char *err,
                         size_t err_len) {
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= c->n_params || (i > 0 && idx[i] < idx[i - 1])) {
            snprintf(err, err_len, "worker: %s %u is not ascending or not below %zu", what, idx[i], c->n_params);
            return -1;
        }
    }
    return 0;
}

int ps_client_push_sparse(ps_client_t *c, const uint32_t *idx, const float *val, size_t nnz, uint64_t clock,
                          uint32_t examples, int bsp, char *err, size_t err_len) {
    if (check_indices(c, idx, nnz, "sparse push index", err, err_len) != 0) return -1;
    size_t pos = 0;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        size_t first = pos;
        while (pos < nnz && idx[pos] < s->end) pos++;
        size_t n = pos - first;
        wire_header_t h = request(c, MSG_TYPE_PUSH, k);
        h.clock = clock;
        h.param_version = s->version;
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
        memcpy(zmq_msg_data(&frames[0]), idx + first, n * sizeof(uint32_t));
        memcpy(zmq_msg_data(&frames[1]), val + first, n * sizeof(float));
        if (zmsg_send(s->sock, NULL, &h, frames, 2, 0, err, err_len) != 0) return -1;
        s->unacked++;
        c->stats.pushes_sent++;
        c->stats.bytes_out += 8u * n;
    }
    if (pos != nnz) {
        snprintf(err, err_len, "worker: sparse push index %u is not ascending or not below %zu", idx[pos], c->n_params);
        return -1;
    }
    return 0;
}

int ps_client_pull(ps_client_t *c, uint64_t need_clock, float *out, uint64_t *min_clock, char *err, size_t err_len) {
    double t0 = now_s();
    for (size_t k = 0; k < c->n_shards; k++) {
        wire_header_t h = request(c, MSG_TYPE_PULL, k);
        h.clock = need_clock;
        if (zmsg_send(c->shards[k].sock, NULL, &h, NULL, 0, 0, err, err_len) != 0) return -1;
    }
    clear_answered(c);
    c->pull_out = out;
    int rc = pump(c, all_answered, "pulling parameters", err, err_len);
    c->pull_out = NULL;
    c->stats.pulls++;
    c->stats.pull_wait_s += now_s() - t0;
    if (min_clock) {
        *min_clock = UINT64_MAX;
        for (size_t k = 0; k < c->n_shards; k++)
            if (c->shards[k].min_clock < *min_clock) *min_clock = c->shards[k].min_clock;
    }
    return rc;
}

int ps_client_pull_keys(ps_client_t *c, const uint32_t *keys, size_t n, float *values, char *err, size_t err_len) {
    if (check_indices(c, keys, n, "pull key", err, err_len) != 0) return -1;
    size_t pos = 0;
    for (size_t k = 0; k < c->n_shards; k++) {
        shard_conn_t *s = &c->shards[k];
        size_t first = pos;
        while (pos < n && keys[pos] < s->end) pos++;
        s->key_begin = first;
        s->key_count = pos - first;
        wire_header_t h = request(c, MSG_TYPE_PULL, k);
        h.payload_kind = PAYLOAD_KIND_KEYS;
        h.count = (uint32_t)(pos - first);
        zmq_msg_t frame;
        if (zmsg_frame_alloc(&frame, (pos - first) * sizeof(uint32_t), err, err_len) != 0) return -1;
        memcpy(zmq_msg_data(&frame), keys + first, (pos - first) * sizeof(uint32_t));
        if (zmsg_send(s->sock, NULL, &h, &frame, 1, 0, err, err_len) != 0) return -1;
    }
    if (pos != n) {
        snprintf(err, err_len, "worker: pull key %u is not ascending or not below %zu", keys[pos], c->n_params);
        return -1;
    }
    clear_answered(c);
    c->pull_values = values;
    int rc = pump(c, all_answered, "pulling keys", err, err_len);
    c->pull_values = NULL;
    c->stats.pulls++;
    return rc;
}

int ps_client_wait_acks(ps_client_t *c, char *err, size_t err_len) {
    return pump(c, all_acked, "waiting for push acknowledgements", err, err_len);
}

int ps_client_bye(ps_client_t *c, char *err, size_t err_len) {
    if (ps_client_wait_acks(c, err, err_len) != 0) return -1;
    for (size_t k = 0; k < c->n_shards; k++) {
        wire_header_t h = request(c, MSG_TYPE_BYE, k);
        if (zmsg_send(c->shards[k].sock, NULL, &h, NULL, 0, 0, err, err_len) != 0) return -1;
    }
    clear_answered(c);
    return pump(c, all_answered, "leaving", err, err_len);
}

void ps_client_get_stats(const ps_client_t *c, ps_client_stats_t *out) { *out = c->stats; }
