// Rendezvous coordinator and joiner over ZeroMQ (rendezvous.h).
#include "net/rendezvous.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "kernels/foundation/mono_clock.h"
#include "net/curve_auth.h"
#include "net/stop_signal.h"
#include "net/zmsg.h"

// One line of text is at most two uint32s, three blanks, an endpoint, a name and '\n'.
#define RDV_LINE_MAX (10 + 1 + 10 + 1 + RDV_ENDPOINT_MAX + 1 + RDV_NAME_MAX + 1)
#define RDV_RESEND_MS 1000
#define RDV_FLUSH_MS 500  // how long a stopping coordinator lets queued tables drain

static int64_t now_ms(void) { return (int64_t)mono_clock_ms(); }

// zmq_poll, retried on EINTR with the time that is left.
static int poll_retry(zmq_pollitem_t *items, int n, int timeout_ms) {
    int64_t end = timeout_ms < 0 ? 0 : now_ms() + timeout_ms;
    for (;;) {
        int rc = zmq_poll(items, n, timeout_ms);
        if (rc >= 0 || errno != EINTR) return rc;
        if (timeout_ms >= 0) {
            int64_t left = end - now_ms();
            timeout_ms = left > 0 ? (int)left : 0;
        }
    }
}

// poll_retry for a process's own wait, in slices of at most 100 ms: a stop
// signal (net/stop_signal.h) ends it, -1 with errno EINTR.
static int poll_or_stop(zmq_pollitem_t *items, int n, int timeout_ms) {
    int64_t end = timeout_ms < 0 ? 0 : now_ms() + timeout_ms;
    for (;;) {
        if (stop_signal_received()) {
            errno = EINTR;
            return -1;
        }
        int left = timeout_ms < 0 ? 100 : (int)(end - now_ms());
        int rc = poll_retry(items, n, left < 0 ? 0 : left > 100 ? 100 : left);
        if (rc != 0 || (timeout_ms >= 0 && left <= 100)) return rc;
    }
}

// ---- the text format ---------------------------------------------------------

static int parse_u32(const char **pp, const char *end, uint32_t *out) {
    const char *p = *pp;
    uint64_t v = 0;
    if (p == end || *p < '0' || *p > '9') return -1;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT32_MAX) return -1;
        p++;
    }
    *pp = p;
    *out = (uint32_t)v;
    return 0;
}

// One word of visible ASCII characters at *pp, shorter than max, into out.
static int parse_word(const char **pp, const char *end, char *out, size_t max) {
    const char *p = *pp, *w = p;
    while (p<end && * p> ' ' && *p < 0x7f) p++;
    size_t len = (size_t)(p - w);
    if (len == 0 || len >= max) return -1;
    memcpy(out, w, len);
    out[len] = '\0';
    *pp = p;
    return 0;
}

// Parses "RANK ROLE ENDPOINT[ NAME]\n" at *pp, strictly: one blank between
// fields, words of visible ASCII characters. With any_ok, RANK may be "*" (a
// join for any rank of the role, which must carry a NAME): *any is then set
// and e->rank is WIRE_NO_ID. Moves *pp past the newline.
static int parse_entry_any(const char **pp, const char *end, rdv_entry_t *e, int any_ok, int *any) {
    const char *p = *pp;
    *any = 0;
    if (any_ok && end - p >= 2 && p[0] == '*' && p[1] == ' ') {
        *any = 1;
        e->rank = WIRE_NO_ID;
        p += 2;
    } else if (parse_u32(&p, end, &e->rank) != 0 || p == end || *p++ != ' ') {
        return -1;
    }
    if (parse_u32(&p, end, &e->role) != 0 || p == end || *p++ != ' ') return -1;
    if (parse_word(&p, end, e->endpoint, RDV_ENDPOINT_MAX) != 0 || p == end) return -1;
    e->name[0] = '\0';
    if (*p == ' ') {
        p++;
        if (parse_word(&p, end, e->name, RDV_NAME_MAX) != 0 || p == end) return -1;
    }
    if (*p != '\n' || (*any && !e->name[0])) return -1;
    *pp = p + 1;
    return 0;
}

static int parse_entry(const char **pp, const char *end, rdv_entry_t *e) {
    int any;
    return parse_entry_any(pp, end, e, 0, &any);
}

static size_t format_entry(const rdv_entry_t *e, char *out) {
    if (e->name[0])
        return (size_t)snprintf(out, RDV_LINE_MAX + 1, "%u %u %s %s\n", e->rank, e->role, e->endpoint, e->name);
    return (size_t)snprintf(out, RDV_LINE_MAX + 1, "%u %u %s\n", e->rank, e->role, e->endpoint);
}

// An endpoint (or a name) goes into one line as one word.
static int word_ok(const char *w, size_t max) {
    size_t n = strnlen(w, max);
    if (n == 0 || n >= max) return 0;
    for (size_t i = 0; i < n; i++)
        if (w[i] <= ' ' || w[i] >= 0x7f) return 0;
    return 1;
}

static int endpoint_ok(const char *ep) { return word_ok(ep, RDV_ENDPOINT_MAX); }

// Sends a text payload as one protocol message (to `identity` when routing).
static int send_text(void *sock, zmq_msg_t *identity, wire_header_t *h, const char *text, size_t len, char *err,
                     size_t err_len) {
    zmq_msg_t frame;
    if (zmsg_frame_alloc(&frame, len, err, err_len) != 0) return -1;
    memcpy(zmq_msg_data(&frame), text, len);
    h->payload_kind = PAYLOAD_KIND_TEXT;
    h->count = (uint32_t)len;
    return zmsg_send(sock, identity, h, &frame, 1, 1, err, err_len);
}

// ---- the coordinator ---------------------------------------------------------

// Why a message was dropped, beyond what wire_validate says.
typedef enum rdv_drop {
    RDV_DROP_TYPE = WIRE_STATUS_COUNT_,  // valid, but not a join
    RDV_DROP_BODY,  // the text does not parse or disagrees with the header
    RDV_DROP_RANK,  // rank >= n_ranks
    RDV_DROP_SIZE,  // the joiner expects another number of ranks
    RDV_DROP_CONFLICT,  // the rank was taken by another endpoint, role or name
    RDV_DROP_RECV,  // the socket failed mid-message
    RDV_DROP_ROLE,  // a role the layout does not have, or not the rank's
    RDV_DROP_FULL,  // an any-rank join when every rank of its role is taken
    RDV_DROP_COUNT_,
} rdv_drop_t;

struct rdv_server {
    void *ctx;
    void *pipe;  // caller's end of the inproc pair to the actor
    void *actor_pipe;  // the actor's end (created here, used only by the actor)
    pthread_t thread;
    size_t n_ranks;
    size_t n_required;  // the table goes out once ranks [0, n_required) have joined (rdv_server_new_elastic)
    size_t n_required_in;  // the actor's count of those present
    uint64_t run_id;
    size_t n_roles;  // 0: no layout (any-rank joins are dropped)
    size_t *role_first;  // (n_roles) role r owns ranks [role_first[r], role_first[r] + role_count[r])
    size_t *role_count;
    char bind_to[256];  // as asked
    char endpoint[256];  // as bound: the caller's copy, from the actor's ready message
    int done;  // the caller saw the actor's "done"
    atomic_size_t dropped;
    atomic_size_t joined;
    atomic_uchar *present;  // (n_ranks) rank has joined
    atomic_size_t *answers;  // (n_ranks) tables sent to the rank (rdv_server_answers)
    // The actor's own state.
    char bound[256];  // the actor's copy of the bound endpoint (for its log lines)
    rdv_entry_t *table;  // (n_ranks) sorted by rank as it fills
    zmq_msg_t *who;  // (n_ranks) identity of each rank's latest join
    unsigned char *has_who;  // (n_ranks)
    unsigned char *answered;  // (n_ranks) the table went to this rank's identity
    size_t n_answered;
    int complete, signalled;
    unsigned char reported[RDV_DROP_COUNT_];
};

static void drop(rdv_server_t *s, int reason, const char *detail) {
    atomic_fetch_add(&s->dropped, 1);
    if (s->reported[reason]) return;
    s->reported[reason] = 1;
    static const char *const why[RDV_DROP_COUNT_ - WIRE_STATUS_COUNT_] = {
        "not a join",
        "malformed join text",
        "rank out of range",
        "wrong rank count",
        "rank already joined with another endpoint, role or name",
        "receive failed",
        "role unknown to this coordinator or not the rank's",
        "no rank of the role left"};
    const char *name =
        reason < WIRE_STATUS_COUNT_ ? wire_status_name((wire_status_t)reason) : why[reason - WIRE_STATUS_COUNT_];
    fprintf(stderr, "rendezvous %s: dropped a message (%s%s%s); further ones like it are only counted\n", s->bound,
            name, detail ? ": " : "", detail ? detail : "");
}

static char *table_text(const rdv_server_t *s, size_t *len) {
    char *text = malloc(s->n_ranks * (RDV_LINE_MAX + 1) + 1);
    if (!text) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < s->n_ranks; i++) at += format_entry(&s->table[i], text + at);
    *len = at;
    return text;
}

// Sends the table to rank r's latest identity. A failed send is not an error:
// the joiner has gone or reconnected, and its next retry asks again.
static void answer(rdv_server_t *s, void *router, size_t r, const char *text, size_t len) {
    if (!s->has_who[r]) return;
    wire_header_t h = zmsg_header(MSG_TYPE_RDV_TABLE, s->run_id);
    h.aux = (uint32_t)s->n_ranks;
    h.sender = (uint32_t)r;  // the rank this answer is for: how an any-rank joiner learns its own
    char err[256];
    if (send_text(router, &s->who[r], &h, text, len, err, sizeof err) != 0) return;
    atomic_fetch_add(&s->answers[r], 1);
    if (!s->answered[r]) {
        s->answered[r] = 1;
        if (r < s->n_required) s->n_answered++;
    }
}

static void on_join(rdv_server_t *s, void *router, zmsg_t *m) {
    if (m->h.type != MSG_TYPE_RDV_JOIN) {
        drop(s, RDV_DROP_TYPE, msg_type_name(m->h.type));
        return;
    }
    if (m->h.aux != s->n_ranks) {
        char d[96];
        snprintf(d, sizeof d, "rank %u expects %u ranks, this run has %zu", m->h.sender, m->h.aux, s->n_ranks);
        drop(s, RDV_DROP_SIZE, d);
        return;
    }
    rdv_entry_t e;
    int any;
    const char *p = zmsg_payload(m, 0), *end = p ? p + m->h.count : NULL;
    if (m->h.payload_kind != PAYLOAD_KIND_TEXT || !p || parse_entry_any(&p, end, &e, 1, &any) != 0 || p != end ||
        e.rank != m->h.sender) {
        drop(s, RDV_DROP_BODY, NULL);
        return;
    }
    if (s->n_roles && (e.role >= s->n_roles ||
                       (!any && e.rank < s->n_ranks &&
                        (e.rank < s->role_first[e.role] || e.rank - s->role_first[e.role] >= s->role_count[e.role])))) {
        char d[96];
        if (any)
            snprintf(d, sizeof d, "role %u for any rank", e.role);
        else
            snprintf(d, sizeof d, "role %u for rank %u", e.role, e.rank);
        drop(s, RDV_DROP_ROLE, d);
        return;
    }
    if (any) {
        // The same name again is a retry; else the role's first free rank.
        if (!s->n_roles) {
            drop(s, RDV_DROP_ROLE, "an any-rank join, but this coordinator has no role layout");
            return;
        }
        size_t found = s->n_ranks;
        for (size_t i = 0; i < s->n_ranks && found == s->n_ranks; i++)
            if (atomic_load(&s->present[i]) && strcmp(s->table[i].name, e.name) == 0) found = i;
        for (size_t i = 0; i < s->role_count[e.role] && found == s->n_ranks; i++)
            if (!atomic_load(&s->present[s->role_first[e.role] + i])) found = s->role_first[e.role] + i;
        if (found == s->n_ranks) {
            char d[RDV_NAME_MAX + 64];
            snprintf(d, sizeof d, "%s asks for role %u, whose %zu ranks are taken", e.name, e.role,
                     s->role_count[e.role]);
            drop(s, RDV_DROP_FULL, d);
            return;
        }
        e.rank = (uint32_t)found;
    }
    if (e.rank >= s->n_ranks) {
        char d[64];
        snprintf(d, sizeof d, "rank %u of %zu", e.rank, s->n_ranks);
        drop(s, RDV_DROP_RANK, d);
        return;
    }
    size_t r = e.rank;
    if (atomic_load(&s->present[r])) {
        if (strcmp(s->table[r].endpoint, e.endpoint) != 0 || s->table[r].role != e.role ||
            strcmp(s->table[r].name, e.name) != 0) {
            char d[2 * (RDV_ENDPOINT_MAX + RDV_NAME_MAX) + 64];
            snprintf(d, sizeof d, "rank %zu is role %u at %s%s%s, not role %u at %s%s%s", r, s->table[r].role,
                     s->table[r].endpoint, s->table[r].name[0] ? " named " : "", s->table[r].name, e.role, e.endpoint,
                     e.name[0] ? " named " : "", e.name);
            drop(s, RDV_DROP_CONFLICT, d);
            return;
        }
    } else {
        s->table[r] = e;
        atomic_store(&s->present[r], 1);
        atomic_fetch_add(&s->joined, 1);
        if (r < s->n_required) s->n_required_in++;
    }
    // A retry may come over a new connection: answer the latest identity.
    if (s->has_who[r]) zmq_msg_close(&s->who[r]);
    zmq_msg_init(&s->who[r]);
    zmq_msg_copy(&s->who[r], &m->identity);
    s->has_who[r] = 1;

    if (s->n_required_in < s->n_required) return;
    size_t len;
    char *text = table_text(s, &len);
    if (!text) {
        fprintf(stderr, "rendezvous %s: out of memory for the table; waiting for retries\n", s->bound);
        return;
    }
    if (!s->complete) {
        s->complete = 1;
        for (size_t i = 0; i < s->n_ranks; i++)
            if (atomic_load(&s->present[i])) answer(s, router, i, text, len);
    } else {
        answer(s, router, r, text, len);
    }
    free(text);
}

static void *actor(void *arg) {
    rdv_server_t *s = arg;
    void *pipe = s->actor_pipe;
    char err[256] = "";
    void *router = zmq_socket(s->ctx, ZMQ_ROUTER);
    if (!router) ZMQ_FAIL("zmq_socket(ZMQ_ROUTER)", err, sizeof err);
    int one = 1;
    if (router && !err[0]) {
        if (zmsg_socket_defaults(router, 0, err, sizeof err) == 0 &&
            zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof one) != 0)
            ZMQ_FAIL("zmq_setsockopt(ZMQ_ROUTER_MANDATORY)", err, sizeof err);
    }
    // A join is one line of text: nothing longer is taken from anyone.
    if (router && !err[0]) zmsg_bind(router, s->bind_to, RDV_LINE_MAX, err, sizeof err);
    size_t len = sizeof s->bound;
    if (router && !err[0] && zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, s->bound, &len) != 0)
        ZMQ_FAIL("zmq_getsockopt(ZMQ_LAST_ENDPOINT)", err, sizeof err);
    // The first message on the pipe is "+endpoint" when ready, else "-error";
    // passing the endpoint as a message keeps the two threads' memory apart.
    char ready[300];
    int n = snprintf(ready, sizeof ready, "%c%s", err[0] ? '-' : '+', err[0] ? err : s->bound);
    zmq_send(pipe, ready, (size_t)n < sizeof ready ? (size_t)n : sizeof ready - 1, 0);
    if (err[0]) {
        if (router) zmq_close(router);
        zmq_close(pipe);
        return NULL;
    }

    zmq_pollitem_t items[2] = {{pipe, 0, ZMQ_POLLIN, 0}, {router, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (poll_retry(items, 2, -1) < 0) {
            if (errno == ETERM) break;
            // Tell a waiting caller, who would otherwise wait for "done" in vain.
            char msg[200];
            int m = snprintf(msg, sizeof msg, "-zmq_poll failed in the coordinator thread: %s", zmq_strerror(errno));
            zmq_send(pipe, msg, (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1, ZMQ_DONTWAIT);
            fprintf(stderr, "rendezvous %s: %s\n", s->bound, msg + 1);
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) break;  // the only command is "stop"
        if (items[1].revents & ZMQ_POLLIN) {
            zmsg_t m;
            int rc = zmsg_recv(router, 1, s->run_id, &m, err, sizeof err);
            if (rc < 0) {
                if (errno == ETERM) break;
                drop(s, RDV_DROP_RECV, err);
                continue;
            }
            if (rc == 0)
                drop(s, m.status, NULL);
            else
                on_join(s, router, &m);
            zmsg_close(&m);
            if (s->complete && s->n_answered == s->n_required && !s->signalled) {
                s->signalled = 1;
                zmq_send(pipe, "done", 4, 0);
            }
        }
    }
    // Tables handed to libzmq just before a stop may still be queued: give
    // them a moment to leave, or their joiners would wait for nothing.
    int flush_ms = RDV_FLUSH_MS;
    zmq_setsockopt(router, ZMQ_LINGER, &flush_ms, sizeof flush_ms);
    zmq_close(router);
    zmq_close(pipe);
    return NULL;
}

static void server_free(rdv_server_t *s) {
    if (s->who)
        for (size_t i = 0; i < s->n_ranks; i++)
            if (s->has_who[i]) zmq_msg_close(&s->who[i]);
    if (s->pipe) zmq_close(s->pipe);
    free(s->present);
    free(s->answers);
    free(s->table);
    free(s->who);
    free(s->has_who);
    free(s->answered);
    free(s->role_first);
    free(s->role_count);
    free(s);
}

static rdv_server_t *server_new(void *zmq_ctx, const char *endpoint, size_t n_ranks, size_t n_required, uint64_t run_id,
                                const size_t *role_counts, size_t n_roles, char *err, size_t err_len) {
    if (n_ranks == 0 || n_ranks > UINT32_MAX) {
        snprintf(err, err_len, "rdv_server_new: n_ranks %zu is not in 1..%u", n_ranks, UINT32_MAX);
        return NULL;
    }
    if (!endpoint || strlen(endpoint) >= sizeof((rdv_server_t *)0)->bind_to) {
        snprintf(err, err_len, "rdv_server_new: endpoint missing or too long");
        return NULL;
    }
    rdv_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "rdv_server_new: out of memory");
        return NULL;
    }
    s->ctx = zmq_ctx;
    s->n_ranks = n_ranks;
    s->n_required = n_required >= 1 && n_required <= n_ranks ? n_required : n_ranks;
    s->run_id = run_id;
    if (n_roles) {
        s->role_first = malloc(n_roles * sizeof *s->role_first);
        s->role_count = malloc(n_roles * sizeof *s->role_count);
        if (!s->role_first || !s->role_count) {
            snprintf(err, err_len, "rdv_server_new: out of memory for %zu roles", n_roles);
            server_free(s);
            return NULL;
        }
        s->n_roles = n_roles;
        for (size_t r = 0, first = 0; r < n_roles; first += role_counts[r++]) {
            s->role_first[r] = first;
            s->role_count[r] = role_counts[r];
        }
    }
    snprintf(s->bind_to, sizeof s->bind_to, "%s", endpoint);
    atomic_init(&s->dropped, 0);
    atomic_init(&s->joined, 0);
    s->present = malloc(n_ranks * sizeof *s->present);
    s->answers = malloc(n_ranks * sizeof *s->answers);
    s->table = calloc(n_ranks, sizeof *s->table);
    s->who = calloc(n_ranks, sizeof *s->who);
    s->has_who = calloc(n_ranks, 1);
    s->answered = calloc(n_ranks, 1);
    if (!s->present || !s->answers || !s->table || !s->who || !s->has_who || !s->answered) {
        snprintf(err, err_len, "rdv_server_new: out of memory for %zu ranks", n_ranks);
        server_free(s);
        return NULL;
    }
    for (size_t i = 0; i < n_ranks; i++) {
        atomic_init(&s->present[i], 0);
        atomic_init(&s->answers[i], 0);
        // What the table says of an optional rank nobody has taken.
        s->table[i].rank = (uint32_t)i;
        snprintf(s->table[i].endpoint, sizeof s->table[i].endpoint, "-");
    }

    // The pipe's two ends are made here so that a failure is reported here;
    // thread creation is the memory barrier that hands the actor its end.
    // A name never used before in this process: libzmq frees a closed inproc
    // endpoint's name asynchronously, so a coordinator made right after
    // another was destroyed (often at the same address) could find it taken.
    static atomic_uint_least64_t pipes_made;
    char name[64];
    snprintf(name, sizeof name, "inproc://rendezvous-%llu", (unsigned long long)atomic_fetch_add(&pipes_made, 1));
    s->pipe = zmq_socket(zmq_ctx, ZMQ_PAIR);
    if (!s->pipe) {
        ZMQ_FAIL("zmq_socket(ZMQ_PAIR)", err, err_len);
        server_free(s);
        return NULL;
    }
    s->actor_pipe = zmq_socket(zmq_ctx, ZMQ_PAIR);
    int zero = 0;
    if (!s->actor_pipe || zmq_setsockopt(s->pipe, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(s->pipe, name) != 0 || zmq_connect(s->actor_pipe, name) != 0) {
        ZMQ_FAIL("rendezvous actor pipe", err, err_len);
        if (s->actor_pipe) zmq_close(s->actor_pipe);
        server_free(s);
        return NULL;
    }
    int prc = pthread_create(&s->thread, NULL, actor, s);
    if (prc != 0) {
        snprintf(err, err_len, "coordinator: cannot start its thread: %s", strerror(prc));
        zmq_close(s->actor_pipe);
        server_free(s);
        return NULL;
    }
    char ready[300];
    int n;
    do n = zmq_recv(s->pipe, ready, sizeof ready - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n > (int)sizeof ready - 1) n = (int)sizeof ready - 1;
    if (n > 1 && ready[0] == '+' && n - 1 < (int)sizeof s->endpoint) {
        memcpy(s->endpoint, ready + 1, (size_t)n - 1);
        s->endpoint[n - 1] = '\0';
        return s;
    }
    if (n < 0) {
        ZMQ_FAIL("zmq_recv (rendezvous actor pipe)", err, err_len);
        zmq_send(s->pipe, "stop", 4, ZMQ_DONTWAIT);
    } else {
        snprintf(err, err_len, "rendezvous coordinator at %s: %.*s", s->bind_to, n > 0 ? n - 1 : 0, ready + 1);
    }
    pthread_join(s->thread, NULL);
    server_free(s);
    return NULL;
}

rdv_server_t *rdv_server_new(void *zmq_ctx, const char *endpoint, size_t n_ranks, uint64_t run_id, char *err,
                             size_t err_len) {
    return server_new(zmq_ctx, endpoint, n_ranks, n_ranks, run_id, NULL, 0, err, err_len);
}

rdv_server_t *rdv_server_new_elastic(void *zmq_ctx, const char *endpoint, size_t n_ranks, size_t n_required,
                                     uint64_t run_id, char *err, size_t err_len) {
    if (n_required == 0 || n_required > n_ranks) {
        snprintf(err, err_len, "rdv_server_new_elastic: %zu required ranks of %zu", n_required, n_ranks);
        return NULL;
    }
    return server_new(zmq_ctx, endpoint, n_ranks, n_required, run_id, NULL, 0, err, err_len);
}

rdv_server_t *rdv_server_new_roles(void *zmq_ctx, const char *endpoint, const size_t *role_counts, size_t n_roles,
                                   uint64_t run_id, char *err, size_t err_len) {
    size_t n = 0;
    for (size_t r = 0; r < n_roles; r++) {
        if (role_counts[r] > UINT32_MAX - n) {
            snprintf(err, err_len, "rdv_server_new_roles: more than %u ranks", UINT32_MAX);
            return NULL;
        }
        n += role_counts[r];
    }
    if (n_roles == 0 || n_roles > UINT32_MAX) {
        snprintf(err, err_len, "rdv_server_new_roles: no roles");
        return NULL;
    }
    return server_new(zmq_ctx, endpoint, n, n, run_id, role_counts, n_roles, err, err_len);
}

const char *rdv_server_endpoint(const rdv_server_t *s) { return s->endpoint; }

size_t rdv_server_dropped(const rdv_server_t *s) { return atomic_load(&((rdv_server_t *)s)->dropped); }

size_t rdv_server_answers(const rdv_server_t *s, size_t rank) {
    return rank < s->n_ranks ? atomic_load(&s->answers[rank]) : 0;
}

int rdv_server_wait(rdv_server_t *s, int timeout_ms, char *err, size_t err_len) {
    if (s->done) return 0;
    int64_t end = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        int left = -1;
        if (timeout_ms >= 0) {
            int64_t l = end - now_ms();
            left = l > 0 ? (int)l : 0;
        }
        zmq_pollitem_t item = {s->pipe, 0, ZMQ_POLLIN, 0};
        int rc = poll_or_stop(&item, 1, left);
        if (rc < 0) return ZMQ_FAIL("zmq_poll (rendezvous actor pipe)", err, err_len);
        if (rc > 0) {
            char msg[200];
            int n = zmq_recv(s->pipe, msg, sizeof msg - 1, ZMQ_DONTWAIT);
            if (n == 4 && memcmp(msg, "done", 4) == 0) {
                s->done = 1;
                return 0;
            }
            if (n > 1 && msg[0] == '-') {
                msg[n < (int)sizeof msg - 1 ? n : (int)sizeof msg - 1] = '\0';
                snprintf(err, err_len, "rendezvous %s: %s", s->endpoint, msg + 1);
                return -1;
            }
            continue;
        }
        if (left == 0) break;
    }
    size_t joined = atomic_load(&s->joined);
    int at = snprintf(err, err_len, "rendezvous %s: %zu of %zu ranks joined within %d ms", s->endpoint, joined,
                      s->n_ranks, timeout_ms);
    if (joined == s->n_ranks) {
        snprintf(err + at, err_len - (size_t)at, "; the table has not reached every rank yet");
        return -1;
    }
    const char *sep = "; missing:";
    size_t listed = 0;
    for (size_t i = 0; i < s->n_required && at > 0 && (size_t)at < err_len; i++) {
        if (atomic_load(&s->present[i])) continue;
        if (listed++ == 8) {
            at += snprintf(err + at, err_len - (size_t)at, " ...");
            break;
        }
        at += snprintf(err + at, err_len - (size_t)at, "%s %zu", sep, i);
        sep = "";
    }
    return -1;
}

void rdv_server_destroy(rdv_server_t **sp) {
    if (!sp || !*sp) return;
    rdv_server_t *s = *sp;
    *sp = NULL;
    int rc;
    do rc = zmq_send(s->pipe, "stop", 4, ZMQ_DONTWAIT);
    while (rc < 0 && errno == EINTR);
    pthread_join(s->thread, NULL);
    server_free(s);
}

// ---- a process joining -------------------------------------------------------

int rdv_table_parse(const char *text, size_t len, size_t n, rdv_entry_t *out, char *why, size_t why_len) {
    const char *p = text, *end = text + len;
    for (size_t i = 0; i < n; i++) {
        if (parse_entry(&p, end, &out[i]) != 0) {
            snprintf(why, why_len, "line %zu does not parse", i + 1);
            return -1;
        }
        if (out[i].rank != i) {
            snprintf(why, why_len, "line %zu has rank %u, expected %zu", i + 1, out[i].rank, i);
            return -1;
        }
    }
    if (p != end) {
        snprintf(why, why_len, "%zu bytes after the %zu entries", (size_t)(end - p), n);
        return -1;
    }
    return 0;
}

// Is the table's entry `got` the one this process sent (its rank aside)?
static int entry_is_mine(const rdv_entry_t *got, const rdv_entry_t *me) {
    return got->role == me->role && strcmp(got->endpoint, me->endpoint) == 0 && strcmp(got->name, me->name) == 0;
}

// rdv_join and rdv_join_any: `any` asks for any rank of me->role and sets *rank.
// ---- what became of a CURVE join's connections ----
//
// Under CURVE a coordinator that refuses this process's key (not on its
// --curve-allow list, or another server key here) answers nothing: to a
// joiner that looks like a coordinator that is not there. A monitor of the
// join's socket tells the two apart: a connection whose handshake failed, or
// that closed without one succeeding, was refused; none at all, or one that
// succeeded, was not (the message then does not send the user after keys).

typedef struct join_watch {
    void *monitor;  // PAIR socket receiving the join socket's events; NULL: not watched
    int connected, handshake_ok, handshake_failed, disconnected;
} join_watch_t;

static void join_watch_start(join_watch_t *w, void *zmq_ctx, void *sock) {
    memset(w, 0, sizeof w[0]);
    if (!net_security_get()->curve) return;
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://rdv-join-watch-%p", sock);
    int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(sock, endpoint, events) != 0) return;  // unwatched: the message stays general
    w->monitor = zmq_socket(zmq_ctx, ZMQ_PAIR);
    int zero = 0;
    if (w->monitor &&
        (zmq_setsockopt(w->monitor, ZMQ_LINGER, &zero, sizeof zero) != 0 || zmq_connect(w->monitor, endpoint) != 0)) {
        zmq_close(w->monitor);
        w->monitor = NULL;
    }
}

// Takes the events that came so far.
static void join_watch_poll(join_watch_t *w) {
    while (w->monitor) {
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, w->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frame);
            return;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&frame) >= 2) memcpy(&event, zmq_msg_data(&frame), 2);
        int more = zmq_msg_more(&frame);
        zmq_msg_close(&frame);
        while (more) {  // the event's endpoint
            zmq_msg_init(&frame);
            if (zmq_msg_recv(&frame, w->monitor, 0) < 0)
                more = 0;
            else
                more = zmq_msg_more(&frame);
            zmq_msg_close(&frame);
        }
        w->connected |= event == ZMQ_EVENT_CONNECTED;
        w->disconnected |= event == ZMQ_EVENT_DISCONNECTED;
        w->handshake_ok |= event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
        w->handshake_failed |= event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
                               event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    }
}

static int join_watch_refused(join_watch_t *w) {
    join_watch_poll(w);
    return w->handshake_failed || (w->connected && w->disconnected && !w->handshake_ok);
}

static void join_watch_stop(join_watch_t *w, void *sock) {
    if (!w->monitor) return;
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(w->monitor);
    w->monitor = NULL;
}

static int join(void *zmq_ctx, const char *coordinator, uint64_t run_id, const rdv_entry_t *me, int any, size_t n_ranks,
                rdv_entry_t **table, uint32_t *rank, int timeout_ms, char *err, size_t err_len) {
    *table = NULL;
    if (n_ranks == 0 || n_ranks > UINT32_MAX || (!any && me->rank >= n_ranks)) {
        snprintf(err, err_len, "rdv_join: rank %u is not below n_ranks %zu", me->rank, n_ranks);
        return -1;
    }
    if (!endpoint_ok(me->endpoint)) {
        snprintf(err, err_len, "rdv_join: rank %u's endpoint is empty, too long or contains blanks", me->rank);
        return -1;
    }
    if (any ? !word_ok(me->name, RDV_NAME_MAX) : (me->name[0] && !word_ok(me->name, RDV_NAME_MAX))) {
        snprintf(err, err_len, "rdv_join: the joiner's name is %s, too long or contains blanks",
                 any ? "empty" : "not empty but");
        return -1;
    }
    rdv_entry_t *out = malloc(n_ranks * sizeof *out);
    if (!out) {
        snprintf(err, err_len, "rdv_join: out of memory for %zu entries", n_ranks);
        return -1;
    }
    void *sock = zmq_socket(zmq_ctx, ZMQ_DEALER);
    if (!sock) {
        free(out);
        return ZMQ_FAIL("zmq_socket(ZMQ_DEALER)", err, err_len);
    }
    int rc = -1;
    join_watch_t watch;
    join_watch_start(&watch, zmq_ctx, sock);
    if (zmsg_socket_defaults(sock, 0, err, err_len) != 0) goto done;
    // The table is n_ranks lines: nothing longer is taken from the coordinator.
    if (zmsg_connect(sock, coordinator, n_ranks * RDV_LINE_MAX, err, err_len) != 0) goto done;
    char line[RDV_LINE_MAX + 1];
    size_t line_len = any ? (size_t)snprintf(line, sizeof line, "* %u %s %s\n", me->role, me->endpoint, me->name)
                          : format_entry(me, line);

    int64_t start = now_ms(), end = start + (timeout_ms < 0 ? 0 : timeout_ms), next_send = start;
    unsigned sends = 0;
    for (;;) {
        int64_t now = now_ms();
        if (now >= next_send) {
            // Until the coordinator is up libzmq queues these on the
            // connecting pipe; a full queue (EAGAIN) just skips one retry.
            wire_header_t h = zmsg_header(MSG_TYPE_RDV_JOIN, run_id);
            h.sender = any ? WIRE_NO_ID : me->rank;
            h.aux = (uint32_t)n_ranks;
            char serr[256];
            if (send_text(sock, NULL, &h, line, line_len, serr, sizeof serr) != 0 && errno != EAGAIN) {
                snprintf(err, err_len, "rdv_join to %s: %s", coordinator, serr);
                goto done;
            }
            sends++;
            next_send = now + RDV_RESEND_MS;
        }
        int64_t until = next_send;
        if (timeout_ms >= 0 && end < until) until = end;
        int wait = until > now ? (int)(until - now) : 0;
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        int prc = poll_or_stop(&item, 1, wait);
        if (prc < 0) {
            ZMQ_FAIL("zmq_poll (rendezvous join)", err, err_len);
            goto done;
        }
        if (prc > 0) {
            zmsg_t m;
            char rerr[256];
            int r = zmsg_recv(sock, 0, run_id, &m, rerr, sizeof rerr);
            if (r < 0) {
                if (errno == EAGAIN) continue;
                snprintf(err, err_len, "rdv_join from %s: %s", coordinator, rerr);
                goto done;
            }
            // Anything but a valid table of this run is not for us.
            if (r == 1 && m.h.type == MSG_TYPE_RDV_TABLE) {
                char why[128];
                const char *text = zmsg_payload(&m, 0);
                if (m.h.payload_kind != PAYLOAD_KIND_TEXT || m.h.aux != n_ranks || !text) {
                    snprintf(err, err_len, "rdv_join: the table from %s is for %u ranks, not %zu", coordinator, m.h.aux,
                             n_ranks);
                    zmsg_close(&m);
                    goto done;
                }
                if (rdv_table_parse(text, m.h.count, n_ranks, out, why, sizeof why) != 0) {
                    snprintf(err, err_len, "rdv_join: malformed table from %s: %s", coordinator, why);
                    zmsg_close(&m);
                    goto done;
                }
                uint32_t at = any ? m.h.sender : me->rank;
                zmsg_close(&m);
                // An any-rank joiner finds itself by its name, once, at the rank the answer is for.
                size_t named = 0;
                for (size_t i = 0; any && i < n_ranks; i++) named += strcmp(out[i].name, me->name) == 0;
                if (at >= n_ranks || (any && named != 1) || !entry_is_mine(&out[at], me)) {
                    snprintf(err, err_len,
                             "rdv_join: the table from %s does not hold this process (rank %s%u, role %u at %s%s%s) "
                             "as it joined (two processes with one rank or name?)",
                             coordinator, any ? "assigned " : "", at, me->role, me->endpoint,
                             me->name[0] ? " named " : "", me->name);
                    goto done;
                }
                if (rank) *rank = at;
                rc = 0;
                goto done;
            }
            zmsg_close(&m);
        }
        if (timeout_ms >= 0 && now_ms() >= end) {
            snprintf(err, err_len,
                     "rdv_join: no table from the coordinator %s within %d ms (%s %u sent %u joins): is rank 0 "
                     "(or the scheduler) running it there, for the same run id %016llx and %zu ranks, and have all "
                     "ranks started?%s",
                     coordinator, timeout_ms, any ? "a joiner of role" : "rank", any ? me->role : me->rank, sends,
                     (unsigned long long)run_id, n_ranks,
                     join_watch_refused(&watch) ? " With CURVE a refused key looks like this too: is this process's "
                                                  "public key on the coordinator's --curve-allow list, and does "
                                                  "--curve-server-key name the run's server key?"
                                                : "");
            goto done;
        }
        join_watch_poll(&watch);
    }
done:
    join_watch_stop(&watch, sock);
    zmq_close(sock);
    if (rc == 0)
        *table = out;
    else
        free(out);
    return rc;
}

int rdv_join(void *zmq_ctx, const char *coordinator, uint64_t run_id, const rdv_entry_t *me, size_t n_ranks,
             rdv_entry_t **table, int timeout_ms, char *err, size_t err_len) {
    return join(zmq_ctx, coordinator, run_id, me, 0, n_ranks, table, NULL, timeout_ms, err, err_len);
}

int rdv_join_any(void *zmq_ctx, const char *coordinator, uint64_t run_id, const rdv_entry_t *me, size_t n_ranks,
                 rdv_entry_t **table, uint32_t *rank, int timeout_ms, char *err, size_t err_len) {
    return join(zmq_ctx, coordinator, run_id, me, 1, n_ranks, table, rank, timeout_ms, err, err_len);
}

// ---- endpoints -----------------------------------------------------------------

int net_bind_ephemeral(void *sock, const char *host, char *endpoint_out, size_t len, char *err, size_t err_len) {
    char ep[300];
    int w = snprintf(ep, sizeof ep, "tcp://%s:*", host);
    if (w < 0 || (size_t)w >= sizeof ep) {
        snprintf(err, err_len, "net_bind_ephemeral: host \"%s\" is too long", host);
        return -1;
    }
    if (zmsg_bind(sock, ep, 0, err, err_len) != 0) return -1;  // the caller sets what it takes
    char got[256];
    size_t got_len = sizeof got;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, got, &got_len) != 0)
        return ZMQ_FAIL("zmq_getsockopt(ZMQ_LAST_ENDPOINT)", err, err_len);
    if (strlen(got) >= len) {
        snprintf(err, err_len, "net_bind_ephemeral: endpoint %s does not fit in %zu bytes", got, len);
        return -1;
    }
    memcpy(endpoint_out, got, strlen(got) + 1);
    return 0;
}
