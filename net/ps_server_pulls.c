// The pulls a parameter-server shard holds until the clock allows them
// (ps_server_impl.h): queued, answered once their condition holds, dropped
// with their worker.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/mono_clock.h"
#include "net/ps_server_impl.h"

void ps_pulls_free(ps_server_t *s) {
    for (size_t i = 0; i < s->n_pending; i++) {
        zmq_msg_close(&s->pending[i].identity);
        free(s->pending[i].keys);
    }
    free(s->pending);
}

// Answers every waiting pull whose clock condition now holds.
int ps_pulls_serve(ps_server_t *s, char *err, size_t err_len) {
    if (s->parts_applying > 0) return 0;  // a push in parts is half applied: answered once it is whole
    uint64_t min = ps_members_ready_clock(s);
    size_t kept = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_pending; i++) {
        pending_pull_t *p = &s->pending[i];
        if (ssp_gate(p->need, min, 0).proceed && rc == 0) {
            double held = mono_clock_s() - p->since;
            if (p->worker != WIRE_NO_ID) s->wait_s += held;
            rc = ps_answer_params(s, &p->identity, p->worker, p->keys, p->n_keys, p->tag, held, err, err_len);
            zmq_msg_close(&p->identity);
            free(p->keys);
        } else {
            s->pending[kept++] = *p;
        }
    }
    s->n_pending = kept;
    return rc;
}

// The queue's entry for worker's pull: the one it waits on already (its
// identity and keys let go), or a new one. NULL: out of memory.
static pending_pull_t *pull_slot(ps_server_t *s, uint32_t worker) {
    for (size_t i = 0; i < s->n_pending; i++) {
        if (s->pending[i].worker != worker) continue;
        pending_pull_t *p = &s->pending[i];
        zmq_msg_close(&p->identity);
        free(p->keys);
        return p;
    }
    if (s->n_pending == s->cap_pending) {
        size_t cap = s->cap_pending ? 2 * s->cap_pending : 8;
        pending_pull_t *grown = realloc(s->pending, cap * sizeof *grown);
        if (!grown) return NULL;
        s->pending = grown;
        s->cap_pending = cap;
    }
    pending_pull_t *p = &s->pending[s->n_pending++];
    p->since = mono_clock_s();
    if (worker != WIRE_NO_ID) s->stats.pulls_waited++;
    return p;
}

// Queues worker's pull until the min clock reaches `need` (keys NULL: the
// whole shard). A worker waits on one pull at a time: a second one is its
// retry, and replaces the first.
int ps_pulls_queue(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, uint64_t need, const uint32_t *keys,
                   uint32_t n_keys, uint64_t tag, char *err, size_t err_len) {
    pending_pull_t *p = pull_slot(s, worker);
    if (!p) {
        snprintf(err, err_len, "server: out of memory queueing a pull");
        return -1;
    }
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, identity);
    p->worker = worker;
    p->need = need;
    p->keys = NULL;
    p->n_keys = 0;
    p->tag = tag;
    if (keys) {
        p->keys = malloc((n_keys ? n_keys : 1) * sizeof *p->keys);
        if (!p->keys) {
            // Keep the entry well-formed (a whole-shard pull) before failing.
            snprintf(err, err_len, "server: out of memory queueing a pull");
            return -1;
        }
        memcpy(p->keys, keys, n_keys * sizeof *keys);
        p->n_keys = n_keys;
    }
    return 0;
}

// Drops the pulls queued for worker k (it was evicted, or it left: nobody waits for them).
void ps_pulls_drop_of(ps_server_t *s, uint32_t k) {
    size_t kept = 0;
    for (size_t i = 0; i < s->n_pending; i++) {
        pending_pull_t *p = &s->pending[i];
        if (p->worker == k) {
            zmq_msg_close(&p->identity);
            free(p->keys);
        } else {
            s->pending[kept++] = *p;
        }
    }
    s->n_pending = kept;
}

// The pulls at which[0..n) (ascending indices into the queue) were answered
// range by range as a BSP round was applied, with `version` and min clock
// `clock`: out of the queue, counted as a whole reply is.
void ps_pulls_answered_in_ranges(ps_server_t *s, const size_t *which, size_t n, uint64_t version, uint64_t clock) {
    size_t kept = 0, next = 0;
    for (size_t i = 0; i < s->n_pending; i++) {
        pending_pull_t *p = &s->pending[i];
        if (next < n && which[next] == i) {
            next++;
            s->wait_s += mono_clock_s() - p->since;
            s->stats.pulls_answered++;
            s->stats.pulls_in_ranges++;
            ps_members_note_sent(s, p->worker, version, clock);
            zmq_msg_close(&p->identity);
        } else {
            s->pending[kept++] = *p;
        }
    }
    s->n_pending = kept;
}
