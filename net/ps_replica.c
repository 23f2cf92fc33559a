// Primary-backup replication of a parameter-server shard (ps_replica.h).
#include "net/ps_replica.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "kernels/foundation/mono_clock.h"
#include "net/zmsg.h"

#define EP_MAX 256

// One backup in sync, as the primary sees it.
typedef struct backup {
    void *fwd;  // the primary's forwarding socket to it
    char ep[EP_MAX];
    size_t replica;
    int answered;  // while a forwarded message waits: its answer came
    // It answered a forwarded message, so it holds the state it was sent and
    // applies what follows: only then does the record list it (a replica still
    // adopting the state cannot take over).
    int synced;
    uint64_t nonce;  // the joining process's own number: a resent JOIN carries the same
} backup_t;

struct ps_replica {
    ps_replica_config_t cfg;
    char state_dir[1024];
    void *ctx;
    ps_server_t *s;
    int primary;
    int stale;  // a backup that found the run finished without it
    char public_ep[EP_MAX];  // P: the shard's endpoint in the rendezvous table
    char own_ep[EP_MAX];  // where this replica's server was bound first
    // The primary's backups in sync, in the order they joined.
    backup_t backups[PS_REPLICA_MAX - 1];
    size_t n_backups;
    double next_check;  // a backup: when it next reads the record
    int listed;  // a backup: the record has listed it (so, no longer listed, it was dropped)
    long joined_primary;  // a backup: the replica index of the primary it joined (-1: unknown)
    ps_replica_stats_t stats;
};

static void nap_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

// ---- the record: STATE_DIR/server-K.replicas ----------------------------------------

typedef struct record {
    char primary[EP_MAX];
    char backup[PS_REPLICA_MAX - 1][EP_MAX];  // in sync, in order
    size_t n_backups;
    long primary_replica;  // the "replicas" line's first index; -1: none
    int finished;
} record_t;

static void record_path(const ps_replica_t *r, char *out, size_t len) {
    snprintf(out, len, "%s/server-%zu.replicas", r->state_dir, r->cfg.shard);
}

// Rewritten whole and renamed into place: a reader sees one version or the next.
static int record_write(const ps_replica_t *r, int finished, char *err, size_t err_len) {
    char path[1100], tmp[1110];
    record_path(r, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, err_len, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    // primary P / backup B (one line each; "-": none) / replicas: the
    // primary's index, then its backups' / running or finished.
    fprintf(f, "primary %s\n", r->public_ep);
    size_t synced = 0;
    for (size_t i = 0; i < r->n_backups; i++) synced += r->backups[i].synced != 0;
    if (synced == 0) fprintf(f, "backup -\n");
    for (size_t i = 0; i < r->n_backups; i++)
        if (r->backups[i].synced) fprintf(f, "backup %s\n", r->backups[i].ep);
    fprintf(f, "replicas %zu", r->cfg.replica);
    for (size_t i = 0; i < r->n_backups; i++)
        if (r->backups[i].synced) fprintf(f, " %zu", r->backups[i].replica);
    fprintf(f, "\n%s\n", finished ? "finished" : "running");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

// 0 with *rec, or -1 when there is none (yet) or it does not parse.
static int record_read(const ps_replica_t *r, record_t *rec) {
    char path[1100], line[EP_MAX + 32], word[EP_MAX];
    record_path(r, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    memset(rec, 0, sizeof *rec);
    rec->primary_replica = -1;
    int primary = 0, state = 0;
    while (fgets(line, sizeof line, f)) {
        size_t idx;
        if (sscanf(line, "primary %255s", rec->primary) == 1)
            primary = 1;
        else if (sscanf(line, "replicas %zu", &idx) == 1)
            rec->primary_replica = (long)idx;
        else if (sscanf(line, "backup %255s", word) == 1) {
            if (strcmp(word, "-") != 0 && rec->n_backups < PS_REPLICA_MAX - 1)
                snprintf(rec->backup[rec->n_backups++], EP_MAX, "%s", word);
        } else if (strncmp(line, "running", 7) == 0 || strncmp(line, "finished", 8) == 0) {
            state = 1;
            rec->finished = line[0] == 'f';
        }
    }
    fclose(f);
    return primary && state ? 0 : -1;
}

// The record names ep among the backups in sync.
static int record_lists(const record_t *rec, const char *ep) {
    for (size_t i = 0; i < rec->n_backups; i++)
        if (strcmp(rec->backup[i], ep) == 0) return 1;
    return 0;
}

ps_replica_t *ps_replica_new(void *zmq_ctx, const ps_replica_config_t *c, char *err, size_t err_len) {
    if (!c->state_dir || c->n_workers == 0) {
        snprintf(err, err_len, "--server-replicas: needs the run directory (--run-dir) for the replicas' record");
        return NULL;
    }
    ps_replica_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    r->cfg = *c;
    r->joined_primary = -1;
    snprintf(r->state_dir, sizeof r->state_dir, "%s", c->state_dir);
    r->cfg.state_dir = r->state_dir;
    r->ctx = zmq_ctx;
    return r;
}

void ps_replica_destroy(ps_replica_t **rp) {
    if (!rp || !*rp) return;
    for (size_t i = 0; i < (*rp)->n_backups; i++) zmq_close((*rp)->backups[i].fwd);
    free(*rp);
    *rp = NULL;
}

int ps_replica_is_primary(const ps_replica_t *r) { return r->primary; }
int ps_replica_stale(const ps_replica_t *r) { return r->stale; }
void ps_replica_stats(const ps_replica_t *r, ps_replica_stats_t *out) { *out = r->stats; }

static size_t shard_values(ps_server_t *s) {
    size_t b, e;
    ps_server_range(s, &b, &e);
    return e - b;
}

static void state_path(const ps_replica_t *r, size_t replica, char *out, size_t len) {
    snprintf(out, len, "%s/server-%zu-replica-%zu.state", r->state_dir, r->cfg.shard, replica);
}

// ---- the primary ---------------------------------------------------------------------

static void drop_backup(ps_replica_t *r, size_t i, const char *why) {
    backup_t gone = r->backups[i];
    zmq_close(gone.fwd);
    memmove(&r->backups[i], &r->backups[i + 1], (r->n_backups - i - 1) * sizeof *r->backups);
    r->n_backups--;
    r->stats.dropped++;
    char err[512];
    if (record_write(r, 0, err, sizeof err) != 0 && !r->cfg.quiet)
        fprintf(stderr, "asgd server %zu: %s\n", r->cfg.shard, err);
    if (!r->cfg.quiet)
        fprintf(stderr, "asgd server %zu: backup at %s dropped (%s): %s\n", r->cfg.shard, gone.ep, why,
                r->n_backups ? "serving with the others in sync" : "serving alone until a backup joins");
}

// Waits for every backup's answer to what was just sent to them all (each
// has at most one message outstanding); a backup silent for ack_timeout_ms is
// dropped.
static int await_answers(ps_replica_t *r, char *err, size_t err_len) {
    double give_up = mono_clock_s() + r->cfg.ack_timeout_ms / 1000.0;
    for (size_t i = 0; i < r->n_backups; i++) r->backups[i].answered = 0;
    for (;;) {
        zmq_pollitem_t items[PS_REPLICA_MAX - 1];
        size_t waiting[PS_REPLICA_MAX - 1], n = 0;
        for (size_t i = 0; i < r->n_backups; i++)
            if (!r->backups[i].answered) {
                items[n] = (zmq_pollitem_t){.socket = r->backups[i].fwd, .events = ZMQ_POLLIN};
                waiting[n++] = i;
            }
        if (n == 0) return 0;
        double left = give_up - mono_clock_s();
        if (left <= 0) {
            for (size_t j = n; j-- > 0;) drop_backup(r, waiting[j], "no answer to a forwarded message");
            return 0;
        }
        int rc = zmq_poll(items, (int)n, (long)(left * 1000.0) + 1);
        if (rc < 0) {
            if (errno == EINTR) continue;
            return ZMQ_FAIL("server: zmq_poll(backup)", err, err_len);
        }
        for (size_t j = 0; rc > 0 && j < n; j++) {
            if (!(items[j].revents & ZMQ_POLLIN)) continue;
            zmsg_t a;
            int got = zmsg_recv(items[j].socket, 0, r->cfg.run_id, &a, err, err_len);
            if (got < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                return -1;
            }
            zmsg_close(&a);
            if (got == 0) continue;  // not an answer: keep waiting
            backup_t *b = &r->backups[waiting[j]];
            b->answered = 1;
            r->stats.forwarded++;
            if (!b->synced) {  // its first answer: from now on the record lists it
                b->synced = 1;
                if (record_write(r, 0, err, err_len) != 0) return -1;
            }
        }
    }
}

// A push's part that is not its last is answered by nobody (ps_server.h),
// unless a backup refuses it, as the primary then does too.
static int answered(const zmsg_t *m, size_t shard_end) {
    const wire_header_t *h = &m->h;
    return h->type != MSG_TYPE_PUSH || h->payload_kind != PAYLOAD_KIND_DENSE || h->offset + h->count == shard_end;
}

// Drops what backups answered to messages not waited for: refusals of a
// part (a refusal arriving later than this is taken for the next answer; the
// backup still takes every message in order).
static void drain_answers(ps_replica_t *r) {
    for (size_t i = 0; i < r->n_backups; i++) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        while (zmq_msg_recv(&part, r->backups[i].fwd, ZMQ_DONTWAIT) >= 0) {
        }
        zmq_msg_close(&part);
    }
}

// Sends m as received to every backup, then waits for all their answers (to
// a message that has one). Workers' requests for values back with their
// push (WIRE_FLAG_ECHO) are the primary's to answer: backups are not asked.
static int forward(ps_replica_t *r, ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    size_t begin, end;
    ps_server_range(s, &begin, &end);
    drain_answers(r);
    wire_header_t h = m->h;
    h.flags &= (uint16_t)~WIRE_FLAG_ECHO;
    for (size_t i = r->n_backups; i-- > 0;) {
        zmq_msg_t frames[2];
        for (size_t f = 0; f < m->n_frames; f++) {
            zmq_msg_init(&frames[f]);
            zmq_msg_copy(&frames[f], &m->frames[f]);
        }
        if (zmsg_send_sealed(r->backups[i].fwd, NULL, &h, frames, m->n_frames, 1, err, err_len) != 0) {
            err[0] = '\0';
            drop_backup(r, i, "its queue is full");
        }
    }
    return answered(m, end) ? await_answers(r, err, err_len) : 0;
}

// The primary evicts worker k: the backups first.
static int on_evict(void *ctx, ps_server_t *s, uint32_t k, char *err, size_t err_len) {
    ps_replica_t *r = ctx;
    (void)s;
    if (!r->primary || r->n_backups == 0) return 0;
    wire_header_t h = zmsg_header(MSG_TYPE_REPLICA_EVICT, r->cfg.run_id);
    h.sender = k;
    h.shard = (uint32_t)r->cfg.shard;
    for (size_t i = r->n_backups; i-- > 0;)
        if (zmsg_send(r->backups[i].fwd, NULL, &h, NULL, 0, 1, err, err_len) != 0) {
            err[0] = '\0';
            drop_backup(r, i, "its queue is full");
        }
    return await_answers(r, err, err_len);
}

// A backup told to evict a worker does, and answers in kind.
static int take_evict(ps_replica_t *r, ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    if (r->primary || m->h.shard != r->cfg.shard) return 1;
    if (ps_server_evict(s, m->h.sender, err, err_len) != 0) return -1;
    wire_header_t h = zmsg_header(MSG_TYPE_REPLICA_EVICT, r->cfg.run_id);
    h.sender = m->h.sender;
    h.shard = (uint32_t)r->cfg.shard;
    if (zmsg_send(ps_server_socket(s), &m->identity, &h, NULL, 0, 0, err, err_len) != 0) return -1;
    return 1;
}

// A backup asks to join: the state goes to a file, forwarding to it starts,
// and it is told to read the file.
static int take_join(ps_replica_t *r, ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    if (m->checksum_pending && zmsg_verify(m) != 0) return 1;  // a damaged join is dropped
    size_t len = m->h.count;
    const char *text = zmsg_payload(m, 0);
    if (!text || len == 0 || len >= EP_MAX || memchr(text, ' ', len) || memchr(text, '\n', len)) return 1;
    char ep[EP_MAX], path[1100];
    memcpy(ep, text, len);
    ep[len] = '\0';
    // A resent JOIN of a backup already joined (the joiner asks again while
    // a slow primary has not answered) is answered once, by the first; a
    // replica joining again (restarted: another number) replaces its old self.
    for (size_t i = r->n_backups; i-- > 0;) {
        if (r->backups[i].replica != m->h.aux && strcmp(r->backups[i].ep, ep) != 0) continue;
        if (r->backups[i].nonce == m->h.clock) return 1;
        drop_backup(r, i, "the replica joined again");
    }
    if (r->n_backups == PS_REPLICA_MAX - 1 || m->h.aux == r->cfg.replica) return 1;  // not one of R: ignored
    state_path(r, m->h.aux, path, sizeof path);
    if (ps_server_save(s, path, err, err_len) != 0) return -1;
    void *fwd = zmq_socket(r->ctx, ZMQ_DEALER);
    if (!fwd) return ZMQ_FAIL("server: zmq_socket(DEALER)", err, err_len);
    if (zmsg_socket_defaults(fwd, 0, err, err_len) != 0 ||
        zmsg_connect(fwd, ep, zmsg_max_frame(shard_values(s)), err, err_len) != 0) {
        zmq_close(fwd);
        return -1;
    }
    backup_t *b = &r->backups[r->n_backups++];
    b->fwd = fwd;
    b->synced = 0;  // listed in the record from its first answer on
    b->nonce = m->h.clock;
    b->replica = m->h.aux;
    snprintf(b->ep, sizeof b->ep, "%s", ep);
    r->stats.joins++;
    if (record_write(r, 0, err, err_len) != 0) return -1;
    if (!r->cfg.quiet)
        fprintf(stderr, "asgd server %zu: replica %u joined as a backup at %s\n", r->cfg.shard, (unsigned)m->h.aux, ep);
    wire_header_t h = zmsg_header(MSG_TYPE_REPLICA_STATE, r->cfg.run_id);
    h.shard = (uint32_t)r->cfg.shard;
    h.aux = m->h.aux;
    if (zmsg_send(ps_server_socket(s), &m->identity, &h, NULL, 0, 0, err, err_len) != 0) return -1;
    return 1;
}

static int is_state_change(const zmsg_t *m, size_t n_workers) {
    uint16_t t = m->h.type;
    return (t == MSG_TYPE_HELLO || t == MSG_TYPE_PUSH || t == MSG_TYPE_BYE) && m->h.sender < n_workers;
}

static int on_message(void *ctx, ps_server_t *s, struct zmsg *m, char *err, size_t err_len) {
    ps_replica_t *r = ctx;
    if (m->h.type == MSG_TYPE_REPLICA_JOIN) {
        if (m->h.shard != r->cfg.shard || !r->primary) return 1;  // not ours to answer
        return take_join(r, s, m, err, err_len);
    }
    if (m->h.type == MSG_TYPE_REPLICA_EVICT) return take_evict(r, s, m, err, err_len);
    if (r->primary && r->n_backups && m->h.shard == r->cfg.shard && is_state_change(m, r->cfg.n_workers))
        return forward(r, s, m, err, err_len);
    return 0;
}

// ---- the backup ----------------------------------------------------------------------

// The primary's endpoint is free: the primary is gone. Promoted when the
// record says this replica was in sync; else it gives the endpoint back.
static int on_turn(void *ctx, ps_server_t *s, char *err, size_t err_len) {
    ps_replica_t *r = ctx;
    if (r->primary) return 0;
    // A backup the record no longer lists (dropped, or another replica took
    // over as the primary) is out of sync: it leaves, and asgd launch starts
    // it again as a backup that copies the primary's state.
    double now = mono_clock_s();
    if (now >= r->next_check) {
        r->next_check = now + 0.1;
        record_t rec;
        int known = record_read(r, &rec) == 0;
        if (known && record_lists(&rec, r->own_ep)) r->listed = 1;
        // Out: dropped after being listed, or another replica took over (a
        // takeover may come before this backup ever saw itself listed).
        int took_over =
            known && r->joined_primary >= 0 && rec.primary_replica >= 0 && rec.primary_replica != r->joined_primary;
        if (known && (r->listed || took_over || rec.finished) && !record_lists(&rec, r->own_ep)) {
            if (rec.finished) {
                r->stale = 1;
                return 1;
            }
            snprintf(err, err_len,
                     "server %zu, replica %zu: no longer in sync with the primary at %s (dropped, or "
                     "another replica took over): it leaves, to join again as a backup",
                     r->cfg.shard, r->cfg.replica, r->public_ep);
            return -1;
        }
    }
    char why[512];
    if (zmsg_bind(ps_server_socket(s), r->public_ep, zmsg_max_frame(shard_values(s)), why, sizeof why) != 0)
        return 0;  // still held by the primary
    record_t rec;
    int known = record_read(r, &rec) == 0;
    if (known && rec.finished) {
        zmq_unbind(ps_server_socket(s), r->public_ep);
        r->stale = 1;
        return 1;
    }
    if (!known || !record_lists(&rec, r->own_ep)) {
        zmq_unbind(ps_server_socket(s), r->public_ep);
        snprintf(err, err_len,
                 "server %zu, replica %zu: the primary at %s is gone but this backup was not in sync "
                 "with it (%s): it cannot take over",
                 r->cfg.shard, r->cfg.replica, r->public_ep,
                 known ? "it had been dropped" : "no record of the replicas");
        return -1;
    }
    r->primary = 1;  // with no backups: the others in sync leave and join it again
    r->stats.promotions++;
    ps_server_set_worker_timeout(s, r->cfg.worker_timeout_ms);
    if (record_write(r, 0, err, err_len) != 0) return -1;
    if (!r->cfg.quiet)
        fprintf(stderr, "asgd server %zu: the primary at %s is gone: replica %zu took over as the primary\n",
                r->cfg.shard, r->public_ep, r->cfg.replica);
    if (r->cfg.on_promoted) r->cfg.on_promoted(r->cfg.on_promoted_ctx, s, r->public_ep);
    return 0;
}

static void install(ps_replica_t *r, ps_server_t *s) {
    ps_server_hooks_t h = {on_message, on_turn, on_evict, r};
    r->s = s;
    snprintf(r->own_ep, sizeof r->own_ep, "%s", ps_server_endpoint(s));
    ps_server_set_hooks(s, &h);
}

int ps_replica_lead(ps_replica_t *r, ps_server_t *s, char *err, size_t err_len) {
    install(r, s);
    r->primary = 1;
    snprintf(r->public_ep, sizeof r->public_ep, "%s", ps_server_endpoint(s));
    return record_write(r, 0, err, err_len);
}

int ps_replica_join(ps_replica_t *r, ps_server_t *s, char *err, size_t err_len) {
    double give_up = mono_clock_s() + r->cfg.join_timeout_ms / 1000.0;
    uint64_t nonce = wire_fresh_id(r);  // this process's number, the same in every JOIN it resends
    record_t rec;
    while (record_read(r, &rec) != 0) {
        if (mono_clock_s() > give_up) {
            snprintf(err, err_len,
                     "server %zu, replica %zu: no primary recorded in %s/server-%zu.replicas within "
                     "%d ms",
                     r->cfg.shard, r->cfg.replica, r->state_dir, r->cfg.shard, r->cfg.join_timeout_ms);
            return -1;
        }
        nap_ms(20);
    }
    if (rec.finished) return 1;
    snprintf(r->public_ep, sizeof r->public_ep, "%s", rec.primary);
    r->joined_primary = rec.primary_replica;
    install(r, s);
    void *sock = zmq_socket(r->ctx, ZMQ_DEALER);
    if (!sock) return ZMQ_FAIL("server: zmq_socket(DEALER)", err, err_len);
    int rc = -1;
    if (zmsg_socket_defaults(sock, 0, err, err_len) != 0 || zmsg_connect(sock, rec.primary, 4096, err, err_len) != 0)
        goto out;
    double resend_at = 0;
    for (;;) {
        double now = mono_clock_s();
        if (now > give_up) {
            snprintf(err, err_len, "server %zu, replica %zu: the primary at %s did not send its state within %d ms",
                     r->cfg.shard, r->cfg.replica, rec.primary, r->cfg.join_timeout_ms);
            goto out;
        }
        if (now >= resend_at) {  // a JOIN lost with a failing primary is asked again
            wire_header_t h = zmsg_header(MSG_TYPE_REPLICA_JOIN, r->cfg.run_id);
            h.sender = WIRE_NO_ID;
            h.shard = (uint32_t)r->cfg.shard;
            h.aux = (uint32_t)r->cfg.replica;
            h.clock = nonce;
            h.payload_kind = PAYLOAD_KIND_TEXT;
            h.count = (uint32_t)strlen(r->own_ep);
            zmq_msg_t frame;
            if (zmsg_frame_alloc(&frame, h.count, err, err_len) != 0) goto out;
            memcpy(zmq_msg_data(&frame), r->own_ep, h.count);
            if (zmsg_send(sock, NULL, &h, &frame, 1, 1, err, err_len) != 0 && errno != EAGAIN) goto out;
            err[0] = '\0';
            resend_at = now + 2.0;
        }
        zmq_pollitem_t item = {.socket = sock, .events = ZMQ_POLLIN};
        int got = zmq_poll(&item, 1, 100);
        if (got < 0 && errno != EINTR) {
            ZMQ_FAIL("server: zmq_poll(primary)", err, err_len);
            goto out;
        }
        if (got <= 0) {
            if (record_read(r, &rec) == 0 && rec.finished) {
                rc = 1;
                goto out;
            }
            continue;
        }
        zmsg_t m;
        int ok = zmsg_recv(sock, 0, r->cfg.run_id, &m, err, err_len);
        if (ok < 0) goto out;
        int state = ok == 1 && m.h.type == MSG_TYPE_REPLICA_STATE && m.h.aux == r->cfg.replica;
        zmsg_close(&m);
        if (!state) continue;
        char path[1100];
        state_path(r, r->cfg.replica, path, sizeof path);
        if (ps_server_adopt(s, path, err, err_len) != 0) goto out;
        unlink(path);
        // The primary that answered wrote the record before it did: the
        // index there is the one whose takeover would be news (the record read
        // before the JOIN may name a primary that was dying).
        record_t answered;
        if (record_read(r, &answered) == 0) r->joined_primary = answered.primary_replica;
        rc = 0;
        if (!r->cfg.quiet)
            fprintf(stderr,
                    "asgd server %zu: replica %zu copied the state of the primary at %s and serves as its "
                    "backup at %s\n",
                    r->cfg.shard, r->cfg.replica, rec.primary, r->own_ep);
        break;
    }
out:
    zmq_close(sock);
    return rc;
}

int ps_replica_await_backup(ps_replica_t *r, ps_server_t *s, char *err, size_t err_len) {
    double give_up = mono_clock_s() + r->cfg.join_timeout_ms / 1000.0;
    void *sock = ps_server_socket(s);
    while (r->n_backups == 0) {
        double left = give_up - mono_clock_s();
        if (left <= 0) {
            snprintf(err, err_len, "server %zu: no backup joined within %d ms", r->cfg.shard, r->cfg.join_timeout_ms);
            return -1;
        }
        zmq_pollitem_t item = {.socket = sock, .events = ZMQ_POLLIN};
        int rc = zmq_poll(&item, 1, left > 0.1 ? 100 : (long)(left * 1000.0) + 1);
        if (rc < 0 && errno != EINTR) return ZMQ_FAIL("server: zmq_poll", err, err_len);
        if (rc <= 0) continue;
        zmsg_t m;
        int got = zmsg_recv(sock, 1, r->cfg.run_id, &m, err, err_len);
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return -1;
        }
        int taken = got == 1 && m.h.type == MSG_TYPE_REPLICA_JOIN && m.h.shard == r->cfg.shard
                        ? take_join(r, s, &m, err, err_len)
                        : 1;
        zmsg_close(&m);
        if (taken < 0) return -1;
    }
    return 0;
}

int ps_replica_finish(ps_replica_t *r, char *err, size_t err_len) {
    if (!r->primary) return 0;
    return record_write(r, 1, err, err_len);
}
