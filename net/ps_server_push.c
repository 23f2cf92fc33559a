// A push to a parameter-server shard (ps_server_impl.h), from its first
// message to its acknowledgement: checked, admitted once (duplicates and
// implausible clocks answered here), its payload taken part by part into the
// update or the BSP round, counted once whole; and the answers to a push
// that asks for the values back (ECHO).
#include <stdio.h>
#include <string.h>

#include "net/compress.h"
#include "net/ps_server_impl.h"

// Range checks of a push's payload against this shard; fills a dense view.
static wire_status_t check_push(const ps_server_t *s, const wire_header_t *h, zmsg_t *m) {
    if (h->payload_kind == PAYLOAD_KIND_DENSE) {
        // The whole shard, or a part of it (a push in parts).
        if (h->offset == s->begin && h->count == s->n) return WIRE_STATUS_OK;
        if (h->offset < s->begin || h->count == 0 || h->offset + h->count > s->end) return WIRE_STATUS_BAD_RANGE;
        return WIRE_STATUS_OK;
    }
    if (h->payload_kind == PAYLOAD_KIND_ENCODED) {
        if (h->offset != s->begin || h->count != s->n) return WIRE_STATUS_BAD_RANGE;
        return WIRE_STATUS_OK;
    }
    if (h->payload_kind == PAYLOAD_KIND_SPARSE) {
        // Strictly ascending within the shard (docs/protocol.md), hence never
        // more pairs than the shard has parameters.
        const uint32_t *idx = zmsg_payload(m, 0);
        for (uint32_t k = 0; k < h->count; k++)
            if (idx[k] < s->begin || idx[k] >= s->end || (k > 0 && idx[k] <= idx[k - 1])) return WIRE_STATUS_BAD_RANGE;
        return WIRE_STATUS_OK;
    }
    return WIRE_STATUS_BAD_KIND;
}

// Ends worker k's push left unfinished between two parts (it rejoined, was
// evicted or left, or began another push): the parts taken stay applied.
void ps_push_end_unfinished(ps_server_t *s, uint32_t k) {
    push_parts_t *p = &s->parts[k];
    if (!p->open) return;
    p->open = 0;
    if (p->next > 0) s->stats.pushes_unfinished++;  // else its first message was refused
    if (s->cfg.mode != SYNC_MODE_BSP) s->parts_applying--;
}

// A push applied already, or a resent last part of one: acknowledged again.
static int acknowledge_again(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    ps_once_count_duplicate(s, m->h.sender);
    return ps_answer_push_ack(s, &m->identity, m->h.clock, err, err_len);
}

// A push's first message (its whole payload, or its first part): the
// decisions taken once per push. Returns 1 with s->parts[k] open to take
// it, 0 when it was answered (acknowledged as a duplicate, or refused), -1 on
// a socket error.
static int admit_push(ps_server_t *s, zmsg_t *m, int last, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    int sum = (h->flags & WIRE_FLAG_SUM) != 0;
    push_parts_t *p = &s->parts[k];
    if (p->open && p->clock == h->clock && !last) {
        // The first part of the push being taken, resent (a new client of
        // the worker says HELLO first, which ends that push).
        s->stats.parts_skipped++;
        return 0;
    }
    ps_push_end_unfinished(s, k);
    // A worker's pushes carry increasing clocks, and one is sent only once the
    // previous one was acknowledged, so a clock below the worker's is a retry of
    // a push applied already (its acknowledgement was lost): acknowledged again
    // (a push in parts at its last part). After a resume the worker's first
    // push may instead resend the push this shard applied last before the
    // crash, lost with it: applied again, it is no longer lost.
    int resent_lost = s->once.resend_clock[k] != 0 && h->clock + 1 == s->once.resend_clock[k];
    s->once.resend_clock[k] = 0;
    if (h->clock < s->members.clocks.clock[k]) {
        if (!last || h->count < s->n) s->stats.parts_skipped++;  // a resent first part
        if (!last) return 0;
        return acknowledge_again(s, m, err, err_len);
    }
    if (!sum && !ps_members_clock_plausible(s, k, h))
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    if (sum && s->resumed && h->clock > s->bsp.clock && ps_bsp_skip_to(s, h->clock, err, err_len) != 0) return -1;
    // Late (backup workers): its round was applied without it. Taken (a retry
    // of it is a duplicate) and dropped; the worker's pull of the next round
    // is answered from the model as it is now.
    int late = sum && s->cfg.backup_workers > 0 && h->clock == s->members.clocks.clock[k] && h->clock < s->bsp.clock;
    // BSP: one gradient per worker per clock, for the clock being aggregated.
    if (sum && !late && (h->clock != s->members.clocks.clock[k] || h->clock != s->bsp.clock))
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    *p = (push_parts_t){.clock = h->clock, .open = 1, .late = (uint8_t)late, .resent_lost = (uint8_t)resent_lost};
    if (sum && !late) ps_bsp_release(s, k);
    if (!sum) s->parts_applying++;
    return 1;
}

// A later part of a push in parts: 1 to take it (the part due next), 0 when
// it was answered or dropped, -1 on a socket error.
static int admit_part(ps_server_t *s, zmsg_t *m, size_t from, int last, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    push_parts_t *p = &s->parts[k];
    if (p->open && p->clock == h->clock) {
        if (from == p->next) return 1;
        if (from < p->next)
            s->stats.parts_skipped++;  // resent, taken already
        else
            s->stats.parts_out_of_order++;  // one before it was lost: the retry resends all
        return 0;
    }
    if (h->clock < s->members.clocks.clock[k]) {
        // A resent part of a push taken whole already: its last part is acknowledged.
        s->stats.parts_skipped++;
        if (!last) return 0;
        return acknowledge_again(s, m, err, err_len);
    }
    s->stats.parts_out_of_order++;  // its push's first part never came, or was refused
    return 0;
}

// A frame for the answer to an ECHO part of `count` values, in s->echo_frame:
// its data, or NULL with err filled.
static float *echo_frame(ps_server_t *s, size_t count, char *err, size_t err_len) {
    size_t bytes = count * sizeof(float);
    if (!s->echo_pool && !(s->echo_pool = buffer_pool_new(bytes, 64))) {
        snprintf(err, err_len, "server: out of memory");
        return NULL;
    }
    if (bytes > buffer_pool_bytes(s->echo_pool)) {  // a part larger than the first: a frame of its own
        if (zmsg_frame_alloc(&s->echo_frame, bytes, err, err_len) != 0) return NULL;
        return zmq_msg_data(&s->echo_frame);
    }
    float *data = buffer_pool_frame(s->echo_pool, bytes, &s->echo_frame);
    if (!data) snprintf(err, err_len, "server: out of memory for an answer of %zu bytes", bytes);
    return data;
}

// Whether push m's values can be applied: an encoded one is decoded (into
// upd.decoded: its decoder refuses values that are not finite along with
// everything malformed), a plain one holds no NaN or Inf. 1: they can;
// else the push was refused: 0, or -1 on a socket error.
static int payload_accepted(ps_server_t *s, zmsg_t *m, size_t from, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    if (h->payload_kind == PAYLOAD_KIND_ENCODED) {
        char detail[256];
        if (compress_decode(zmsg_payload(m, 0), zmq_msg_size(&m->frames[0]), s->n, s->upd.decoded, detail,
                            sizeof detail) == 0)
            return 1;
        if (!s->cfg.quiet && !s->warned[WIRE_STATUS_BAD_ENCODING])
            fprintf(stderr,
                    "asgd server %zu: refused a push from worker %u: %s (further ones are counted, not shown)\n",
                    s->cfg.shard, k, detail);
        s->warned[WIRE_STATUS_BAD_ENCODING] = 1;
        ps_push_end_unfinished(s, k);
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_ENCODING, h, err, err_len);
    }
    if (ps_update_push_finite(s, m)) return 1;
    ps_update_mark_diverged(s, h, from);
    s->upd.told_diverged[k] = 1;
    ps_push_end_unfinished(s, k);
    return ps_answer_reject(s, &m->identity, WIRE_STATUS_NOT_FINITE, h, err, err_len);
}

// Takes the payload of a push admitted for worker k, [from, from + count) of
// the shard (a dense part), or the whole of a sparse or encoded one. Returns
// 1, or 0 when it was refused (not finite, not decodable), -1 on a socket error.
static int take_payload(ps_server_t *s, zmsg_t *m, size_t from, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    push_parts_t *p = &s->parts[k];
    if (p->late) {
        if (from > 0 || h->count < s->n) s->stats.parts_taken++;
        return 1;  // dropped, unread
    }
    int accepted = payload_accepted(s, m, from, err, err_len);
    if (accepted != 1) return accepted;
    // A dense update: as sent, or decoded; NULL: a sparse one.
    const float *dense = h->payload_kind == PAYLOAD_KIND_DENSE     ? zmsg_payload(m, 0)
                         : h->payload_kind == PAYLOAD_KIND_ENCODED ? s->upd.decoded
                                                                   : NULL;
    s->stats.bytes_in += h->payload_kind == PAYLOAD_KIND_ENCODED
                             ? zmq_msg_size(&m->frames[0])
                             : h->count * (h->payload_kind == PAYLOAD_KIND_SPARSE ? 8u : 4u);  // accepted pushes only
    if (from > 0 || (dense && h->count < s->n)) s->stats.parts_taken++;
    if (h->flags & WIRE_FLAG_SUM) {
        ps_bsp_take(s, m, from, dense);
        return 1;
    }
    if (from == 0) p->lr = ps_update_push_step(s, k, h);
    size_t count = h->payload_kind == PAYLOAD_KIND_DENSE ? h->count : s->n;
    float *copy = NULL;
    if (dense && count != s->n && (h->flags & WIRE_FLAG_ECHO) && !(copy = echo_frame(s, count, err, err_len)))
        return -1;
    s->echo_sum = ps_update_apply(s, m, from, dense, p->lr, copy);
    return 1;
}

// Worker k's push is all taken: it counts (one version, one clock), and is acknowledged.
static int finish_push(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    push_parts_t *p = &s->parts[k];
    int sum = (h->flags & WIRE_FLAG_SUM) != 0;
    p->open = 0;
    if (!sum) s->parts_applying--;
    // A gradient that asks for the round's values (ECHO) is also the worker's
    // pull of the next clock: queued before its round can complete, so that
    // it is answered as the round is applied.
    if (sum && (h->flags & WIRE_FLAG_ECHO) &&
        ps_pulls_queue(s, &m->identity, k, h->clock + 1, NULL, 0, 0, err, err_len) != 0)
        return -1;
    if (p->late) {
        s->once.late_by[k]++;
        s->stats.late_dropped++;
        ps_once_count_applied(s, k, h->clock, p->resent_lost);
    } else if (sum) {
        s->bsp.examples[k] = h->aux;
        s->bsp.version[k] = h->param_version;
        ps_once_count_applied(s, k, h->clock, p->resent_lost);
        if (ps_bsp_maybe_apply(s, err, err_len) != 0) return -1;
    } else {
        s->stats.version++;
        s->samples += s->cfg.samples_per_step ? (uint64_t)h->aux * s->cfg.samples_per_step : h->aux;
        ps_once_count_applied(s, k, h->clock, p->resent_lost);
    }
    if (ps_answer_push_ack(s, &m->identity, h->clock, err, err_len) != 0) return -1;
    return ps_pulls_serve(s, err, err_len);
}

// Answers a part taken from a push that asked for its values back
// (WIRE_FLAG_ECHO): its range as it stood once the part was applied (copied
// and checksummed in the pass that applied it), named with the version the
// push makes once whole. The last part's
// answer completes the worker's pull.
static int echo_range(ps_server_t *s, zmsg_t *m, size_t from, int last, char *err, size_t err_len) {
    uint32_t k = m->h.sender, count = m->h.count;
    wire_header_t h = ps_answer_header(s, MSG_TYPE_PARAMS);
    h.param_version = s->stats.version + 1;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.offset = s->begin + from;
    h.count = count;
    h.checksum = s->echo_sum;  // of s->echo_frame, filled as the part was applied
    ps_update_remember_sent(s, k, from, count);
    s->stats.bytes_out += 4u * count;
    if (last) {
        s->stats.pulls_answered++;
        ps_members_note_sent(s, k, h.param_version, h.clock);
    }
    return ps_send_sealed(s, &m->identity, &h, &s->echo_frame, 1, err, err_len);
}

// A push: in one message, or one part of a push in parts (a dense range that
// is not the whole shard; parts come in order, docs/protocol.md).
int ps_push_handle(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    wire_status_t why = check_push(s, h, m);
    if (why != WIRE_STATUS_OK) return ps_answer_reject(s, &m->identity, why, h, err, err_len);
    int sum = (h->flags & WIRE_FLAG_SUM) != 0, dense = h->payload_kind == PAYLOAD_KIND_DENSE;
    int echo = (h->flags & WIRE_FLAG_ECHO) != 0;
    if (sum != (s->cfg.mode == SYNC_MODE_BSP) || (echo && !sum && !dense))
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_KIND, h, err, err_len);
    size_t from = dense ? h->offset - s->begin : 0;
    int last = !dense || from + h->count == s->n, whole = from == 0 && last;
    int rc = from > 0 ? admit_part(s, m, from, last, err, err_len) : admit_push(s, m, last, err, err_len);
    if (rc != 1) return rc;
    if ((rc = take_payload(s, m, from, err, err_len)) != 1) return rc;
    s->parts[h->sender].next = from + (dense ? h->count : s->n);
    if (echo && !sum && !whole && echo_range(s, m, from, last, err, err_len) != 0) return -1;
    if (!last) return 0;
    if (finish_push(s, m, err, err_len) != 0) return -1;
    return echo && !sum && whole ? ps_answer_params(s, &m->identity, h->sender, NULL, 0, 0, 0.0, err, err_len) : 0;
}
