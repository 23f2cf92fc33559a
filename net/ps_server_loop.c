// A parameter-server shard's serving loop (ps_server_impl.h): its socket,
// each message checked and handed to the concern it is for, evictions,
// checkpoints when due, the memory guard, the progress it publishes and the
// replication hooks.
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <zmq.h>

#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/trace.h"
#include "net/ps_local_round.h"
#include "net/ps_server_impl.h"

static const trace_kind_t TK_EVICT = {"evict", "server", "worker"};
static const trace_kind_t TK_CHECKPOINT = {"checkpoint", "io", NULL};

// What the process may grow by before the memory guard acts: the configured
// allowance, or 256 MiB plus 8 whole-shard messages per worker slot (a
// worker has at most a push and a request in flight per shard; the rest is
// room for retries and replies queued behind a slow peer).
// An AddressSanitizer build keeps freed memory in its quarantine (256 MiB by
// default) instead of handing it back, so its process grows by that much with
// no peer at fault: the automatic allowance leaves it room (a CI run's server
// grew 260 MiB and dropped its backup's connection without it).
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_SLACK ((size_t)512 << 20)
#else
#define SANITIZER_SLACK ((size_t)0)
#endif

static size_t memory_allowance(const ps_config_t *c, size_t n) {
    if (c->memory_allowance) return c->memory_allowance;
    return ((size_t)256 << 20) + 8 * c->n_workers * n * sizeof(float) + SANITIZER_SLACK;
}

int ps_loop_bind(ps_server_t *s, void *zmq_ctx, const char *endpoint, double busy_wait_s, char *err, size_t err_len) {
    const ps_config_t *c = &s->cfg;
    s->sock = zmq_socket(zmq_ctx, ZMQ_ROUTER);
    if (!s->sock) return ZMQ_FAIL("server: zmq_socket(ROUTER)", err, err_len);
    int hwm = 0;  // never drop a reply: the peers bound what they have in flight
    int handover = 1;  // a restarted worker reclaims its identity at once
    if (zmsg_socket_defaults(s->sock, c->heartbeat_ms, err, err_len) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_ROUTER_HANDOVER, &handover, sizeof handover) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0) {
        if (!err[0]) ZMQ_FAIL("server: zmq_setsockopt(HWM)", err, err_len);
        return -1;
    }
    // Watching before the bind, so that every connection accepted is known.
    if (c->memory_allowance != SIZE_MAX &&
        !(s->guard = memory_guard_new(zmq_ctx, s->sock, memory_allowance(c, s->n), err, err_len)))
        return -1;
    // No legitimate request is larger than the shard's values (sparse indices
    // are strictly ascending), so no peer can make the shard allocate more.
    double give_up = mono_clock_s() + busy_wait_s;
    char why[400];
    int rc;
    while ((rc = zmsg_bind(s->sock, endpoint, zmsg_max_frame(s->n), why, sizeof why)) != 0 && errno == EADDRINUSE &&
           mono_clock_s() < give_up) {
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
    }
    if (rc != 0) {
        snprintf(err, err_len, "server: %s", why);
        return -1;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0)
        return ZMQ_FAIL("server: zmq_getsockopt(ZMQ_LAST_ENDPOINT)", err, err_len);
    return 0;
}

// Writes a checkpoint when one is due. A failure (a full disk) is reported and
// the shard goes on serving; the previous checkpoint stays as it was.
static void maybe_checkpoint(ps_server_t *s, double now) {
    if (s->cfg.checkpoint_every_s <= 0 || !s->cfg.checkpoint_path || now < s->next_checkpoint) return;
    char err[512];
    uint64_t span = TRACE_BEGIN();
    int saved = ps_server_save(s, s->cfg.checkpoint_path, err, sizeof err);
    TRACE_END(&TK_CHECKPOINT, span, 0);
    if (saved == 0) {
        s->stats.checkpoints++;
    } else {
        s->stats.checkpoint_failures++;
        fprintf(stderr, "asgd server %zu: checkpoint not written: %s\n", s->cfg.shard, err);
    }
    s->next_checkpoint = mono_clock_s() + s->cfg.checkpoint_every_s;
}

// Single writer (the serving thread); readers see the figures of one
// publication, a state the shard was in after some message.
static void publish_progress(ps_server_t *s) {
    const staleness_hist_t *hv = &s->stats.staleness_updates, *hc = &s->stats.staleness_clocks;
    ps_progress_t p = {
        .samples = s->samples,
        .version = s->stats.version,
        .min_clock = ps_members_ready_clock(s),
        .wait_s = s->wait_s,
        .staleness_count = hc->count,
        .staleness_versions_sum = (uint64_t)hv->sum,
        .staleness_versions_max = hv->max,
        .staleness_clocks_sum = (uint64_t)hc->sum,
        .staleness_clocks_max = hc->max,
        .workers_gone = s->workers_gone_at > 0.0,
    };
    ps_progress_board_publish(&s->board, &p);
}

static void count_dropped(ps_server_t *s, wire_status_t why) {
    s->stats.dropped[why]++;
    s->stats.dropped_total++;
    if (!s->cfg.quiet && !s->warned[why]) {
        fprintf(stderr, "asgd server %zu: dropped an invalid message: %s (further ones are counted, not shown)\n",
                s->cfg.shard, wire_status_name(why));
        s->warned[why] = 1;
    }
}

// A raised clock, or one live worker fewer, can complete a BSP round or let
// a waiting pull through.
static int clocks_moved(ps_server_t *s, char *err, size_t err_len) {
    if (ps_bsp_maybe_apply(s, err, err_len) != 0) return -1;
    return ps_pulls_serve(s, err, err_len);
}

static int handle_pull(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    const uint32_t *keys = NULL;
    if (h->payload_kind == PAYLOAD_KIND_KEYS) {
        keys = zmsg_payload(m, 0);
        for (uint32_t j = 0; j < h->count; j++)
            if (keys[j] < s->begin || keys[j] >= s->end || (j > 0 && keys[j] <= keys[j - 1]))
                return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    } else if (h->payload_kind != PAYLOAD_KIND_NONE) {
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_KIND, h, err, err_len);
    }
    // The worker took the staleness bound off the clock it names (ssp_gate's pull_clock).
    if (s->parts_applying == 0 && ssp_gate(h->clock, ps_members_ready_clock(s), 0).proceed)
        return ps_answer_params(s, &m->identity, h->sender, keys, h->count, h->offset, 0.0, err, err_len);
    return ps_pulls_queue(s, &m->identity, h->sender, h->clock, keys, h->count, h->offset, err, err_len);
}

// Evicts worker k, silent for longer than the worker timeout (or evicted by
// the replication hooks): its push in parts ends, nobody is there to answer
// its pulls.
static void evict(ps_server_t *s, uint32_t k, double now) {
    uint64_t span = TRACE_BEGIN();
    ps_members_evict(s, k, now);
    ps_push_end_unfinished(s, k);
    ps_pulls_drop_of(s, k);
    TRACE_END(&TK_EVICT, span, k);
}

int ps_server_evict(ps_server_t *s, uint32_t k, char *err, size_t err_len) {
    if (k >= s->cfg.n_workers || !s->members.clocks.joined[k] || !clock_table_is_live(&s->members.clocks, k)) return 0;
    evict(s, k, mono_clock_s());
    return clocks_moved(s, err, err_len);
}

static int evict_silent(ps_server_t *s, double now, char *err, size_t err_len) {
    if (s->cfg.worker_timeout_ms <= 0) return 0;
    int evicted = 0;
    for (uint32_t k = 0; k < s->cfg.n_workers; k++) {
        if (!s->members.clocks.joined[k] || !clock_table_is_live(&s->members.clocks, k)) continue;
        double silent = now - s->members.last_heard[k];
        if (silent * 1000.0 <= s->cfg.worker_timeout_ms) continue;
        // Replicas evict together, in the primary's order (net/ps_replica.h).
        if (s->hooks.on_evict && s->hooks.on_evict(s->hooks.ctx, s, k, err, err_len) != 0) return -1;
        evict(s, k, now);
        evicted = 1;
        if (!s->cfg.quiet)
            fprintf(stderr,
                    "asgd server %zu: worker %u silent for %.1f s (--worker-timeout %d ms): evicted at clock %llu; "
                    "the others no longer wait for it, and it may rejoin\n",
                    s->cfg.shard, k, silent, s->cfg.worker_timeout_ms, (unsigned long long)s->members.clocks.clock[k]);
    }
    if (!evicted) return 0;
    return clocks_moved(s, err, err_len);
}

static int handle_hello(ps_server_t *s, zmsg_t *m, double now, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    if (h->count != 0 || h->offset != s->cfg.n_params)
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    if ((h->flags & WIRE_FLAG_JOIN) && !ps_members_admit_joiner(s, k, h->aux))
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_ID_LIVE, h, err, err_len);
    if (ps_members_hello_resent(s, k, h)) {
        s->stats.hellos_resent++;
        s->members.last_heard[k] = now;
        return ps_answer_welcome(s, &m->identity, s->members.hello[k].welcomed, err, err_len);
    }
    ps_push_end_unfinished(s, k);  // a new client sends its pushes anew
    ps_members_hello(s, k, h, now);
    s->once.resend_clock[k] = 0;  // a new client: the lost push is not resent
    if (ps_answer_welcome(s, &m->identity, s->members.clocks.clock[k], err, err_len) != 0) return -1;
    return clocks_moved(s, err, err_len);
}

// Idempotent: a retried BYE is answered again. A pull of the worker's still
// held waits for nothing now (one it gave up: ps_client_pull_cancel): dropped.
static int handle_bye(ps_server_t *s, zmsg_t *m, double now, char *err, size_t err_len) {
    uint32_t k = m->h.sender;
    ps_members_leave(s, k, now);
    ps_push_end_unfinished(s, k);
    ps_pulls_drop_of(s, k);
    if (ps_answer_simple(s, &m->identity, MSG_TYPE_BYE_ACK, 0, err, err_len) != 0) return -1;
    return clocks_moved(s, err, err_len);
}

// A worker's PUSH or PULL: from a member of the run (a push also from one
// that has not left), and not from an evicted one.
static int handle_request(ps_server_t *s, zmsg_t *m, double now, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    int push = h->type == MSG_TYPE_PUSH;
    if (!s->members.clocks.joined[k] || (push && s->members.clocks.left[k]))
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    if (s->members.clocks.evicted[k]) return ps_answer_reject(s, &m->identity, WIRE_STATUS_EVICTED, h, err, err_len);
    s->members.last_heard[k] = now;
    return push ? ps_push_handle(s, m, err, err_len) : handle_pull(s, m, err, err_len);
}

static int handle(ps_server_t *s, zmsg_t *m, double now, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    // Received with the checksum deferred: checked here, before anything, and
    // for a dense push in the same pass as the test for NaN and Inf.
    s->upd.push_finite = -1;
    int ok = h->type == MSG_TYPE_PUSH && h->payload_kind == PAYLOAD_KIND_DENSE
                 ? ps_push_verify_finite(m, &s->upd.push_finite) == 0
                 : zmsg_verify(m) == 0;
    if (!ok) {
        count_dropped(s, m->status);
        return 0;
    }
    // An observer reads the model, or some of its keys, and nothing else
    // (ps_server.h); its BYE says it has read the final model.
    if (h->sender == WIRE_NO_ID && h->type == MSG_TYPE_PULL && h->shard == s->cfg.shard &&
        (h->payload_kind == PAYLOAD_KIND_NONE || h->payload_kind == PAYLOAD_KIND_KEYS))
        return handle_pull(s, m, err, err_len);
    if (h->sender == WIRE_NO_ID && h->type == MSG_TYPE_BYE && h->shard == s->cfg.shard) {
        s->observer_left = 1;
        return ps_answer_simple(s, &m->identity, MSG_TYPE_BYE_ACK, 0, err, err_len);
    }
    // A message for another shard, or from no worker of this run, is not ours to answer.
    if (h->sender >= s->cfg.n_workers || h->shard != s->cfg.shard) {
        count_dropped(s, WIRE_STATUS_BAD_RANGE);
        return 0;
    }
    uint32_t k = h->sender;
    if (h->type == MSG_TYPE_HEARTBEAT) {
        if (s->members.clocks.joined[k] && clock_table_is_live(&s->members.clocks, k)) s->members.last_heard[k] = now;
        return 0;
    }
    if (s->upd.diverged && h->type != MSG_TYPE_BYE) {
        s->upd.told_diverged[k] = 1;
        return ps_answer_reject(s, &m->identity, WIRE_STATUS_NOT_FINITE, h, err, err_len);
    }
    switch (h->type) {
        case MSG_TYPE_HELLO:
            return handle_hello(s, m, now, err, err_len);
        case MSG_TYPE_PUSH:
        case MSG_TYPE_PULL:
            return handle_request(s, m, now, err, err_len);
        case MSG_TYPE_BYE:
            return handle_bye(s, m, now, err, err_len);
        default:
            count_dropped(s, WIRE_STATUS_BAD_TYPE);
            return 0;
    }
}

// A message through the replication hook (which may take it), then to its
// handler. Returns 0, or -1 on an error.
static int take_message(ps_server_t *s, zmsg_t *m, double now, char *err, size_t err_len) {
    int hrc = s->hooks.on_message ? s->hooks.on_message(s->hooks.ctx, s, m, err, err_len) : 0;
    if (hrc != 0) return hrc < 0 ? -1 : 0;  // 1: taken by the hook
    return handle(s, m, now, err, err_len);
}

// A worker's HELLO while they are held (ps_server_hold_hellos): kept, the
// latest of each worker (a client resends its HELLO until it is answered),
// before anything sees it, the replication hook included: it happens when it
// is let through, for the backups as for this shard. Returns 1 when kept.
static int hold_hello(ps_server_t *s, zmsg_t *m) {
    if (!s->hellos_open || m->h.type != MSG_TYPE_HELLO || m->h.sender >= s->cfg.n_workers || m->h.shard != s->cfg.shard)
        return 0;
    zmsg_t *held = &s->held_hellos[m->h.sender];
    if (held->has_identity) zmsg_close(held);
    *held = (zmsg_t){.h = m->h, .has_identity = 1, .status = WIRE_STATUS_OK, .checksum_pending = m->checksum_pending};
    zmq_msg_init(&held->identity);
    zmq_msg_move(&held->identity, &m->identity);
    return 1;
}

// The held HELLOs answered, once *hellos_open is raised; from then on every
// HELLO is. Returns 0, or -1 on a socket error.
static int release_hellos(ps_server_t *s, double now, char *err, size_t err_len) {
    if (!s->hellos_open || !atomic_load(s->hellos_open)) return 0;
    s->hellos_open = NULL;
    int rc = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) {
        zmsg_t *held = &s->held_hellos[k];
        if (!held->has_identity) continue;
        if (rc == 0) rc = take_message(s, held, now, err, err_len);
        zmsg_close(held);
    }
    return rc;
}

// After a divergence the shard goes on refusing for a moment, so that every
// live worker learns why the run stops instead of timing out, then fails.
static int diverged_done(const ps_server_t *s, double now) {
    if (now - s->upd.diverged_at > 2.0) return 1;
    for (size_t k = 0; k < s->cfg.n_workers; k++)
        if (clock_table_is_live(&s->members.clocks, k) && s->members.clocks.joined[k] && !s->upd.told_diverged[k])
            return 0;
    return 1;
}

// The memory guard's turn (net/memory_guard.h): when the process has grown
// past its allowance, every connection is shut down; the workers reconnect
// and resend what was unanswered, which the exactly-once rules make safe.
static int guard_memory(ps_server_t *s, double now, char *err, size_t err_len) {
    memory_guard_trip_t trip;
    int tripped = s->guard ? memory_guard_check(s->guard, now, &trip, err, err_len) : 0;
    if (tripped <= 0) return tripped;
    s->stats.memory_trips++;
    s->stats.connections_dropped += trip.connections;
    if (!s->cfg.quiet)
        fprintf(stderr,
                "asgd server %zu: the process grew by %zu MiB, past its allowance of %zu MiB "
                "(--server-memory-allowance): a peer may be sending a message that never ends; shut down "
                "all %zu connections (workers reconnect and resend)\n",
                s->cfg.shard, trip.grown >> 20, memory_allowance(&s->cfg, s->n) >> 20, trip.connections);
    return 0;
}

#define STALL_S 0.5  // a gap between the serving loop's turns longer than this is the shard's own stall

// Every worker has left: whether to serve on for the observer, which reads
// the final model once it learns so (the progress it watches, woken), then
// says BYE; at most cfg.observer_linger_ms.
static int linger_for_observer(ps_server_t *s, double now) {
    if (s->cfg.observer_linger_ms <= 0 || s->observer_left) return 0;
    if (s->workers_gone_at <= 0.0) {
        s->workers_gone_at = now;
        publish_progress(s);
        ps_progress_board_wake(&s->board);
    }
    return (now - s->workers_gone_at) * 1000.0 < s->cfg.observer_linger_ms;
}

// The run is over for this shard: every worker has left, and the observer,
// if one reads it, has read the final model or is given up on.
static int run_over(ps_server_t *s, double now) {
    return ps_members_run_finished(s, now) && !linger_for_observer(s, now);
}

// Handles what is queued on the socket, until it is empty: 0, 1 when the run
// is over, -1 on an error.
static int drain(ps_server_t *s, double now, char *err, size_t err_len) {
    for (;;) {
        int events = 0;
        size_t len = sizeof events;
        if (zmq_getsockopt(s->sock, ZMQ_EVENTS, &events, &len) != 0)
            return ZMQ_FAIL("server: zmq_getsockopt(ZMQ_EVENTS)", err, err_len);
        if (!(events & ZMQ_POLLIN)) return 0;
        zmsg_t m;
        int got = zmsg_recv_deferred(s->sock, 1, s->cfg.run_id, &m, err, err_len);
        if (got < 0) return errno == EAGAIN ? 0 : -1;
        int hrc = 0;
        if (got == 0) {
            count_dropped(s, m.status);
            // A peer of ours (its header checked) whose payload this process
            // cannot map: told, so that it stops with the reason instead of
            // resending until its timeout.
            if (m.status == WIRE_STATUS_BAD_SHM && m.has_identity)
                hrc = ps_answer_reject(s, &m.identity, WIRE_STATUS_BAD_SHM, &m.h, err, err_len) != 0 ? -1 : 0;
        } else if (!hold_hello(s, &m)) {
            hrc = take_message(s, &m, now, err, err_len);
        }
        zmsg_close(&m);
        publish_progress(s);
        if (hrc != 0) return -1;
        if (run_over(s, now) && !s->upd.diverged) return 1;
    }
}

// Handles the gradients workers on this machine posted in shared memory
// (ps_server_local.c), each as the PUSH it stands for: 0, 1 when the run is
// over, -1 on an error. The doorbell is emptied first, so a post made after
// the look rings it again.
static int drain_local(ps_server_t *s, double now, char *err, size_t err_len) {
    ps_local_round_quiet(s->local);
    for (uint32_t k = 0; k < s->cfg.n_workers; k++) {
        zmsg_t m;
        if (!ps_local_next(s, k, &m)) continue;
        int hrc = handle(s, &m, now, err, err_len);
        zmsg_close(&m);
        publish_progress(s);
        if (hrc != 0) return -1;
        if (run_over(s, now) && !s->upd.diverged) return 1;
    }
    return 0;
}

// The rest of a turn, once the socket is drained: 0 to go on, 1 when the run
// is over, -1 on an error.
static int end_turn(ps_server_t *s, double now, char *err, size_t err_len) {
    if (s->upd.diverged) {
        if (!diverged_done(s, now)) return 0;
        snprintf(err, err_len, "%s", s->upd.diverged_msg);
        return -1;
    }
    if (evict_silent(s, now, err, err_len) != 0) return -1;
    publish_progress(s);  // an eviction can complete a BSP round
    maybe_checkpoint(s, now);
    if (guard_memory(s, now, err, err_len) != 0) return -1;
    if (run_over(s, now)) return 1;
    if (!s->hooks.on_turn) return 0;
    int t = s->hooks.on_turn(s->hooks.ctx, s, err, err_len);
    return t < 0 ? -1 : t != 0;
}

int ps_server_run(ps_server_t *s, atomic_int *stop, char *err, size_t err_len) {
    ps_local_open(s);
    zmq_pollitem_t items[2] = {{.socket = s->sock, .events = ZMQ_POLLIN}};
    int n_items = 1;
    if (s->local) items[n_items++] = (zmq_pollitem_t){.fd = ps_local_round_fd(s->local), .events = ZMQ_POLLIN};
    double now = mono_clock_s();
    // Eviction counts silence from when this shard started serving (a resumed
    // shard's workers get a full timeout to reach it).
    ps_members_heard_all(s, now);
    s->next_checkpoint = now + s->cfg.checkpoint_every_s;
    publish_progress(s);  // a resumed shard's counts
    double turn_end = now;
    while (!(stop && atomic_load(stop))) {
        // While HELLOs are held, a short turn: the flag that lets them through is not on a socket.
        int rc = zmq_poll(items, n_items, s->hellos_open ? 2 : 100);
        if (rc < 0) {
            if (errno == EINTR) continue;
            return ZMQ_FAIL("server: zmq_poll", err, err_len);
        }
        now = mono_clock_s();
        // A turn of this loop waits at most 100 ms. A longer gap is the shard's
        // own stall (SIGSTOP, a host swapping, a long turn): its workers'
        // messages of that time are still on their way in, so the gap does not
        // count as their silence (docs/reliability.md).
        if (now - turn_end > STALL_S) {
            ps_members_forgive_stall(s, now - turn_end, now);
            s->stats.stalls++;
        }
        turn_end = now;
        int done = rc > 0 ? drain(s, now, err, err_len) : 0;
        if (done == 0 && s->local) done = drain_local(s, now, err, err_len);
        if (done == 0 && s->hellos_open) done = release_hellos(s, now, err, err_len);
        if (done == 0) done = end_turn(s, now, err, err_len);
        if (done != 0) return done < 0 ? -1 : 0;
    }
    return 0;
}
