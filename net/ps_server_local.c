// A shard's side of BSP rounds in shared memory (net/ps_local_round.h,
// ps_server_impl.h): each worker's post taken as the PUSH it stands for, so
// that the same checks, counts, exactly-once ledger and round apply to it as
// to one that came through the socket; and every answer, sent through
// ps_send, written into the segment when it is for a local slot.
#include <stdio.h>

#include "net/ps_local_round.h"
#include "net/ps_server_impl.h"
#include "net/shm_frames.h"

void ps_local_open(ps_server_t *s) {
    const ps_config_t *c = &s->cfg;
    // Backup workers read the values area while a round they were late for is
    // applied, and replication sees messages only (hooks.on_message): both
    // keep to the socket (as do models with a sparse block: role_server.c
    // does not ask for local rounds).
    if (s->local || !c->local_rounds || c->mode != SYNC_MODE_BSP || c->backup_workers > 0 || s->hooks.on_message)
        return;
    char why[256];
    s->local = ps_local_round_create(c->run_id, c->shard, c->n_workers, s->n, why, sizeof why);
    if (!s->local && !c->quiet)
        fprintf(stderr, "asgd server %zu: %s; the workers' rounds go through the socket\n", c->shard, why);
}

int ps_local_next(ps_server_t *s, uint32_t k, zmsg_t *m) {
    ps_local_post_t post;
    if (!ps_local_round_take(s->local, k, &post)) return 0;
    *m = (zmsg_t){.has_identity = 1, .n_frames = 1, .status = WIRE_STATUS_OK, .payload_finite = post.finite};
    ps_local_round_identity(k, &m->identity);
    wire_header_t *h = &m->h;
    *h = zmsg_header(MSG_TYPE_PUSH, s->cfg.run_id);
    h->flags = WIRE_FLAG_SUM | WIRE_FLAG_ECHO;  // a BSP gradient asking for its round's values
    h->sender = k;
    h->shard = (uint32_t)s->cfg.shard;
    h->clock = post.clock;
    h->param_version = post.param_version;
    h->aux = post.examples;
    h->payload_kind = PAYLOAD_KIND_DENSE;
    h->offset = s->begin;
    h->count = (uint32_t)s->n;
    // Read where the worker wrote it, until its round is applied (no free function: the segment's).
    zmq_msg_init_data(&m->frames[0], (void *)post.values, s->n * sizeof(float), NULL, NULL);
    s->stats.local_posts++;
    return 1;
}

// An answer for worker k's local slot: what the worker waits for, written
// into the segment (frames consumed).
static void answer_locally(ps_server_t *s, uint32_t k, const wire_header_t *h, zmq_msg_t *frames, size_t n_frames) {
    if (h->type == MSG_TYPE_PUSH_ACK) {
        ps_local_round_ack(s->local, k, h->offset);
    } else if (h->type == MSG_TYPE_REJECT) {
        ps_local_round_refuse(s->local, k, (wire_status_t)h->aux);
    } else if (h->type == MSG_TYPE_PARAMS && h->payload_kind == PAYLOAD_KIND_DENSE && n_frames == 1) {
        size_t from = h->offset - s->begin;
        // The whole shard, lent (ps_reply.h) from a buffer in this process's
        // arena: referred to, not copied (the worker counts as its reader).
        if (from == 0 && h->count == s->n && shm_frames_pack(h, frames, 1) == 1) {
            if (ps_local_round_values_ref(s->local, k, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]),
                                          h->param_version, h->clock) != 0)
                ps_local_round_refuse(s->local, k, WIRE_STATUS_BAD_SHM);
        } else {
            ps_local_round_values(s->local, k, zmq_msg_data(&frames[0]), from, h->count, h->param_version, h->clock,
                                  from + h->count == s->n);
        }
    } else {
        // A local slot only posts BSP gradients, which are answered by the
        // three above; anything else is refused, so that it cannot wait.
        ps_local_round_refuse(s->local, k, WIRE_STATUS_BAD_KIND);
    }
    for (size_t i = 0; i < n_frames; i++) zmq_msg_close(&frames[i]);
}

int ps_send(ps_server_t *s, zmq_msg_t *identity, wire_header_t *h, zmq_msg_t *frames, size_t n_frames, char *err,
            size_t err_len) {
    uint32_t k;
    if (s->local && ps_local_round_is_local(identity, &k)) {
        answer_locally(s, k, h, frames, n_frames);
        return 0;
    }
    return zmsg_send(s->sock, identity, h, frames, n_frames, 0, err, err_len);
}

int ps_send_sealed(ps_server_t *s, zmq_msg_t *identity, const wire_header_t *h, zmq_msg_t *frames, size_t n_frames,
                   char *err, size_t err_len) {
    uint32_t k;
    if (s->local && ps_local_round_is_local(identity, &k)) {
        answer_locally(s, k, h, frames, n_frames);
        return 0;
    }
    return zmsg_send_sealed(s->sock, identity, h, frames, n_frames, 0, err, err_len);
}
