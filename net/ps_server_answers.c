// What a parameter-server shard sends (ps_server_impl.h): every answer's
// header, WELCOME, PUSH_ACK, REJECT, and parameters to a pull, the whole
// shard (lent without a copy) or the values at its keys.
#include <stdio.h>
#include <string.h>

#include "kernels/foundation/trace.h"
#include "net/ps_server_impl.h"

static const trace_kind_t TK_SERVE = {"serve_pull", "server", "worker"};  // a pull answered

wire_header_t ps_answer_header(const ps_server_t *s, uint16_t type) {
    wire_header_t h = zmsg_header(type, s->cfg.run_id);
    h.sender = (uint32_t)s->cfg.shard;
    h.shard = (uint32_t)s->cfg.shard;
    h.clock = ps_members_ready_clock(s);
    h.param_version = s->stats.version;
    return h;
}

int ps_answer_simple(ps_server_t *s, zmq_msg_t *identity, uint16_t type, uint32_t aux, char *err, size_t err_len) {
    wire_header_t h = ps_answer_header(s, type);
    h.aux = aux;
    return ps_send(s, identity, &h, NULL, 0, err, err_len);
}

// WELCOME: the shard's range (its length travels in aux: a WELCOME has no
// payload) and the clock the worker is to continue from.
int ps_answer_welcome(ps_server_t *s, zmq_msg_t *identity, uint64_t clock, char *err, size_t err_len) {
    wire_header_t h = ps_answer_header(s, MSG_TYPE_WELCOME);
    h.offset = s->begin;
    h.aux = (uint32_t)s->n;
    h.clock = clock;
    return ps_send(s, identity, &h, NULL, 0, err, err_len);
}

// PUSH_ACK names the push it acknowledges by its clock, so that a worker that
// retried a push can tell the acknowledgement of a retry from a later one's.
int ps_answer_push_ack(ps_server_t *s, zmq_msg_t *identity, uint64_t push_clock, char *err, size_t err_len) {
    wire_header_t h = ps_answer_header(s, MSG_TYPE_PUSH_ACK);
    h.offset = push_clock;
    return ps_send(s, identity, &h, NULL, 0, err, err_len);
}

int ps_answer_reject(ps_server_t *s, zmq_msg_t *identity, wire_status_t why, const wire_header_t *req, char *err,
                     size_t err_len) {
    s->stats.rejected++;
    if (!s->cfg.quiet && !s->warned[why]) {
        fprintf(stderr, "asgd server %zu: refused a %s from worker %u: %s (further ones are counted, not shown)\n",
                s->cfg.shard, msg_type_name(req->type), req->sender, wire_status_name(why));
        s->warned[why] = 1;
    }
    return ps_answer_simple(s, identity, MSG_TYPE_REJECT, why, err, err_len);
}

// Counts an answer of h.count values to `worker`: an observer's (a reader
// of the global model) changes no worker's state; a worker's is its pull
// answered, what it was sent (a whole shard: every value's version).
static void count_params_sent(ps_server_t *s, uint32_t worker, const wire_header_t *h, int whole) {
    if (worker == WIRE_NO_ID) {
        s->stats.observer_pulls++;
        return;
    }
    if (whole) ps_update_remember_sent(s, worker, 0, s->n);
    s->stats.bytes_out += 4u * h->count;
    s->stats.pulls_answered++;
    ps_members_note_sent(s, worker, h->param_version, h->clock);
}

// Sends parameters: the whole shard, or the values at `keys` (global
// indices) of the pull tagged `tag` (the keys are the worker's: the answer
// names its pull by the tag, not by repeating them), to a pull this shard
// held for held_s seconds (the answer's aux, in microseconds: how long the
// bound kept the worker waiting here).
static int send_params_now(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, const uint32_t *keys, uint32_t n_keys,
                           uint64_t tag, double held_s, char *err, size_t err_len) {
    wire_header_t h = ps_answer_header(s, MSG_TYPE_PARAMS);
    h.aux = held_s <= 0.0 ? 0 : held_s >= 4294.0 ? UINT32_MAX : (uint32_t)(held_s * 1e6);
    zmq_msg_t frame;
    if (!keys) {
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.offset = s->begin;
        h.count = (uint32_t)s->n;
        // Lent without a copy; a push applied while libzmq still holds it
        // writes the other buffer (ps_reply.h).
        if (ps_values_reply(s->upd.values, &frame, &h.checksum, err, err_len) != 0) return -1;
        count_params_sent(s, worker, &h, 1);
        return ps_send_sealed(s, identity, &h, &frame, 1, err, err_len);
    }
    h.payload_kind = PAYLOAD_KIND_VALUES;
    h.offset = tag;
    h.count = n_keys;
    if (zmsg_frame_alloc(&frame, n_keys * sizeof(float), err, err_len) != 0) return -1;
    float *v = zmq_msg_data(&frame);
    for (uint32_t k = 0; k < n_keys; k++) v[k] = s->upd.w[keys[k] - s->begin];
    count_params_sent(s, worker, &h, 0);
    return ps_send(s, identity, &h, &frame, 1, err, err_len);
}

int ps_answer_params(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, const uint32_t *keys, uint32_t n_keys,
                     uint64_t tag, double held_s, char *err, size_t err_len) {
    uint64_t span = TRACE_BEGIN();
    int rc = send_params_now(s, identity, worker, keys, n_keys, tag, held_s, err, err_len);
    TRACE_END(&TK_SERVE, span, worker);
    return rc;
}
