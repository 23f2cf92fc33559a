// A parameter-server shard (ps_server.h).
#include "net/ps_server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/partition.h"
#include "kernels/finite.h"
#include "kernels/update.h"
#include "kernels/foundation/trace.h"
#include "net/compress.h"
#include "net/memory_guard.h"
#include "net/ps_progress.h"
#include "net/ps_reply.h"
#include "net/zmsg.h"
#include "staleness/clock_table.h"
#include "net/buffer_pool.h"

// Versions remembered per worker: more than the rebases a worker's push can
// reach back over (replica.c keeps its own history of 64 rebases).
#define SENT_HISTORY 128

// A dense push sent in parts (range messages of one push, in order from the
// shard's first parameter: docs/protocol.md, "Pushes in parts"), while its
// parts are being taken. The push counts once, at its last part: one version,
// one clock, one ledger entry.
typedef struct push_parts {
    uint64_t clock;  // the push's
    uint64_t next;  // where (within the shard) its next part starts
    float lr;  // ASP/SSP: the step its parts are applied with, fixed at its first part
    uint8_t open;  // a push is being taken
    uint8_t late;  // BSP with backup workers: its round went without it; its parts are dropped
    uint8_t resent_lost;  // it resends the push a crash lost (count_applied)
} push_parts_t;

typedef struct pending_pull {
    zmq_msg_t identity;
    uint32_t worker;
    uint64_t need;  // answer once the min clock reaches this
    uint32_t *keys;  // NULL: the whole shard
    uint32_t n_keys;
    double since;  // when it started waiting
} pending_pull_t;

// Membership and clocks: who is in the run, how far each worker got, and
// what each was sent.
typedef struct ps_members {
    clock_table_t clocks;
    uint64_t *read_min_clock;  // (n_workers) min clock when the worker last pulled
    // What was sent to each worker: (version, min clock) of its last SENT_HISTORY
    // distinct versions, oldest first from sent_head, so that a push's clock
    // staleness is measured from the min clock that came with the version it carries.
    uint64_t *sent_version, *sent_clock;  // (n_workers, SENT_HISTORY)
    uint32_t *sent_head, *sent_len;  // (n_workers)
    double *last_heard;  // (n_workers) when a message last came from each worker
    double quiet_since;  // when the last live worker left or was evicted
} ps_members_t;

// Update application: the values, the optimizer's state, DC-ASGD's backups,
// the scratch a push is applied from, and divergence.
typedef struct ps_update {
    float *w;  // (n) the current values: ps_values_get(values), refreshed after each write
    ps_values_t *values;  // the values, lent to replies without a copy (ps_reply.h)
    float *h;  // (n) Adagrad's squared-gradient sums, or NULL
    float *backup;  // (n_workers, n) DC-ASGD: the shard as each worker last pulled it
    float *scratch_g;  // (n) a push's values after delay compensation
    float *decoded;  // (n) an ENCODED push, decoded
    uint32_t *scratch_idx;  // (n) a sparse push's indices, shifted into the shard
    int diverged;  // a push held NaN or Inf: every request is refused from now on
    int push_finite;  // the message being handled: a dense push's values are finite (1) or not (0); -1: not known
    double diverged_at;
    uint8_t *told_diverged;  // (n_workers) refused with NOT_FINITE at least once
    char diverged_msg[256];
} ps_update_t;

// BSP: each worker's gradient for the current clock, summed once all arrived.
// A dense gradient is kept as received (held[k], not copied); a sparse one,
// or one restored from a checkpoint, is written into grad.
typedef struct ps_bsp_round {
    float *grad;  // (n_workers, n)
    zmq_msg_t *held;  // (n_workers) empty when worker k's gradient is in grad
    uint32_t *examples;  // (n_workers) 0 = no gradient yet this clock
    uint64_t *version;  // (n_workers) version each gradient was computed from
    float *weight;  // (n_workers) each gradient's share of the round's examples
    const float **terms;  // (n_workers) the gradients summed in a round; NULL: none from that worker
    uint64_t clock;  // the clock being aggregated
} ps_bsp_round_t;

// The exactly-once record (docs/reliability.md), per worker, over the whole
// run, with what keeps it exact: clock claims and HELLO de-duplication.
typedef struct ps_once {
    uint64_t *duplicates_by;  // (n_workers) pushes acknowledged again and not applied
    uint64_t *lost_by;  // (n_workers) applied, then lost with a crash (after the checkpoint resumed from)
    uint64_t *resumed_by;  // (n_workers) its pushes the checkpoint held at the last resume
    uint64_t *late_by;  // (n_workers) BSP with backup workers: gradients dropped for coming late
    // What a worker's clock can plausibly be (docs/security.md): its clock
    // counts rounds, and a round is at least one step, so a push's clock is at
    // most the clock it joined at plus the steps its pushes since reported.
    // After a resume the first push re-anchors it (the steps the crash lost
    // are unknown).
    struct clock_claim {
        uint64_t base, steps;
        uint8_t unanchored;
    } * claim;  // (n_workers)
    uint32_t *join_nonce;  // (n_workers) the nonce of the joiner holding the slot (0: none)
    // The last HELLO handled from each worker: its client's nonce, the clock it
    // proposed and the clock its WELCOME gave. A copy resent while the WELCOME
    // was on its way is answered with that clock again: taken as a rejoin, it
    // could move the worker's clock past the one the worker went on from, and
    // its next pushes would be acknowledged as duplicates without being applied.
    struct hello_seen {
        uint64_t nonce, proposed, welcomed;
    } * hello;  // (n_workers)
    uint64_t *resend_clock;  // (n_workers) after a resume: 1 + the clock of the last push applied before the
        // crash and lost, until the worker's next push or HELLO; 0: none
    // Per worker: applications ever (2k, never rolled back) and 1 + the clock
    // of the last one (2k + 1): mapped from CHECKPOINT.ledger when the shard
    // checkpoints, so that a resume knows what the crash lost; else own_ledger.
    uint64_t *ledger;
    uint64_t *own_ledger;
    counter_file_t ledger_file;
} ps_once_t;

// The shard: its configuration and range, the four parts above, and the
// serving loop's own state (socket, pulls waiting, pushes in parts, the
// progress it publishes, replication hooks).
struct ps_server {
    ps_config_t cfg;
    size_t begin, end, n;  // shard range, n = end - begin
    ps_members_t members;
    ps_update_t upd;
    ps_bsp_round_t bsp;
    ps_once_t once;
    int resumed;  // restored from a checkpoint: BSP rounds may have been lost
    double next_checkpoint;
    // The serving loop.
    void *sock;
    memory_guard_t *guard;  // NULL: none (ps_config.memory_allowance SIZE_MAX)
    char endpoint[256];
    pending_pull_t *pending;
    size_t n_pending, cap_pending;
    ps_stats_t stats;
    int warned[WIRE_STATUS_COUNT_];
    int warned_clock;
    // Progress, kept by the serving thread and published for ps_server_progress.
    uint64_t samples;  // examples behind the updates applied
    double wait_s;  // workers' conditional pulls, time waited
    ps_progress_board_t board;
    ps_server_hooks_t hooks;  // replication (net/ps_replica.h); zeros: none
    push_parts_t *parts;  // (n_workers) the push each worker is sending in parts
    // The answer to the part being taken from an ECHO push: its range's new
    // values, copied while they are written, in a buffer of echo_pool
    // (made at the first such part, of its size) or a frame of its own.
    zmq_msg_t echo_frame;
    uint32_t echo_sum;
    buffer_pool_t *echo_pool;
    // ASP/SSP pushes with parts applied and more to come: pulls wait until
    // none is, so that a reply carries exactly the version it names.
    size_t parts_applying;
};

// The shard's spans in a --trace timeline (docs/trace.md), all on its one thread.
static const trace_kind_t TK_APPLY = {"apply", "server", "worker"};  // asp/ssp: one push applied
static const trace_kind_t TK_BUFFER = {"buffer", "server", "worker"};  // bsp: one gradient taken into its round
static const trace_kind_t TK_BSP_ROUND = {"bsp_round", "server", "clock"};  // bsp: a round's sum applied
static const trace_kind_t TK_SERVE = {"serve_pull", "server", "worker"};  // a pull answered
static const trace_kind_t TK_EVICT = {"evict", "server", "worker"};
static const trace_kind_t TK_REJOIN = {"rejoin", "server", "worker"};
static const trace_kind_t TK_CHECKPOINT = {"checkpoint", "io", NULL};

// A shard with its state allocated and initialised from shard_init (NULL:
// zeros, for a shard about to be restored), not yet bound.
static ps_server_t *server_alloc(const ps_config_t *c, const float *shard_init, char *err, size_t err_len) {
    if (c->n_shards == 0 || c->shard >= c->n_shards || c->n_workers == 0 || c->n_params == 0) {
        snprintf(err, err_len, "server: shard %zu of %zu, %zu workers, %zu parameters is not a valid layout", c->shard,
                 c->n_shards, c->n_workers, c->n_params);
        return NULL;
    }
    if (c->mode == SYNC_MODE_BSP && (c->stale.staleness_aware || c->stale.dc_lambda > 0 || c->stale.delay_adaptive)) {
        snprintf(err, err_len,
                 "server: staleness-aware and delay-adaptive steps and DC-ASGD apply to asp and ssp; bsp updates are "
                 "never stale");
        return NULL;
    }
    char why[160];
    if (stale_update_config_check(&c->stale, why, sizeof why) != 0) {
        snprintf(err, err_len, "server: %s", why);
        return NULL;
    }
    if (c->mode == SYNC_MODE_ALLREDUCE) {
        snprintf(err, err_len, "server: --sync allreduce runs without parameter servers");
        return NULL;
    }
    if (c->n_start_workers > c->n_workers) {
        snprintf(err, err_len, "server: %zu workers to start with, but room for %zu", c->n_start_workers, c->n_workers);
        return NULL;
    }
    if (c->backup_workers > 0 && c->n_start_workers && c->n_start_workers < c->n_workers) {
        snprintf(err, err_len, "server: --backup-workers and --max-workers above --workers do not combine");
        return NULL;
    }
    if (c->backup_workers > 0 && (c->mode != SYNC_MODE_BSP || c->backup_workers >= c->n_workers)) {
        snprintf(err, err_len, "server: --backup-workers %zu: applies to bsp, and must be below the %zu workers",
                 c->backup_workers, c->n_workers);
        return NULL;
    }
    ps_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "server: out of memory");
        return NULL;
    }
    s->cfg = *c;
    shard_range(c->n_params, c->n_shards, c->shard, &s->begin, &s->end);
    s->n = s->end - s->begin;
    size_t nw = c->n_workers, n = s->n ? s->n : 1;
    s->upd.values = ps_values_new(s->n);
    if (s->upd.values) s->upd.w = ps_values_get(s->upd.values);
    s->members.read_min_clock = calloc(nw, sizeof *s->members.read_min_clock);
    s->members.sent_version = malloc(nw * SENT_HISTORY * sizeof *s->members.sent_version);
    s->members.sent_clock = malloc(nw * SENT_HISTORY * sizeof *s->members.sent_clock);
    s->members.sent_head = calloc(nw, sizeof *s->members.sent_head);
    s->members.sent_len = calloc(nw, sizeof *s->members.sent_len);
    s->members.last_heard = calloc(nw, sizeof *s->members.last_heard);
    s->upd.told_diverged = calloc(nw, 1);
    s->once.duplicates_by = calloc(nw, sizeof *s->once.duplicates_by);
    s->once.lost_by = calloc(nw, sizeof *s->once.lost_by);
    s->once.resumed_by = calloc(nw, sizeof *s->once.resumed_by);
    s->once.late_by = calloc(nw, sizeof *s->once.late_by);
    s->once.resend_clock = calloc(nw, sizeof *s->once.resend_clock);
    s->once.claim = calloc(nw, sizeof *s->once.claim);
    s->once.join_nonce = calloc(nw, sizeof *s->once.join_nonce);
    s->once.hello = calloc(nw, sizeof *s->once.hello);
    s->parts = calloc(nw, sizeof *s->parts);
    s->once.ledger = s->once.own_ledger = calloc(2 * nw, sizeof *s->once.own_ledger);
    s->upd.scratch_idx = malloc(n * sizeof *s->upd.scratch_idx);
    s->upd.scratch_g = malloc(n * sizeof *s->upd.scratch_g);
    s->upd.decoded = malloc(n * sizeof *s->upd.decoded);
    if (c->stale.dc_lambda > 0) s->upd.backup = malloc(nw * n * sizeof *s->upd.backup);
    if (c->optimizer == OPTIMIZER_KIND_ADAGRAD) s->upd.h = calloc(n, sizeof *s->upd.h);
    if (c->mode == SYNC_MODE_BSP) {
        s->bsp.grad = calloc(nw * n, sizeof *s->bsp.grad);
        s->bsp.held = malloc(nw * sizeof *s->bsp.held);
        for (size_t k = 0; s->bsp.held && k < nw; k++) zmq_msg_init(&s->bsp.held[k]);
        s->bsp.examples = calloc(nw, sizeof *s->bsp.examples);
        s->bsp.version = calloc(nw, sizeof *s->bsp.version);
        s->bsp.weight = calloc(nw, sizeof *s->bsp.weight);
        s->bsp.terms = calloc(nw, sizeof *s->bsp.terms);
    }
    if (!s->upd.w || !s->members.read_min_clock || !s->members.sent_version || !s->members.sent_clock ||
        !s->members.sent_head || !s->members.sent_len || !s->members.last_heard || !s->upd.told_diverged ||
        !s->once.duplicates_by || !s->once.lost_by || !s->once.resumed_by || !s->once.late_by ||
        !s->once.resend_clock || !s->once.claim || !s->once.join_nonce || !s->once.hello || !s->parts ||
        !s->once.own_ledger || !s->upd.scratch_idx || !s->upd.scratch_g || !s->upd.decoded ||
        (c->stale.dc_lambda > 0 && !s->upd.backup) || (c->optimizer == OPTIMIZER_KIND_ADAGRAD && !s->upd.h) ||
        (c->mode == SYNC_MODE_BSP &&
         (!s->bsp.grad || !s->bsp.held || !s->bsp.examples || !s->bsp.version || !s->bsp.weight || !s->bsp.terms))) {
        snprintf(err, err_len, "server: out of memory for a shard of %zu parameters and %zu workers", s->n, nw);
        ps_server_destroy(&s);
        return NULL;
    }
    if (clock_table_init(&s->members.clocks, nw, err, err_len) != 0) {
        ps_server_destroy(&s);
        return NULL;
    }
    clock_table_set_start(&s->members.clocks, c->n_start_workers ? c->n_start_workers : nw);
    if (shard_init)
        memcpy(s->upd.w, shard_init, s->n * sizeof *s->upd.w);
    else
        memset(s->upd.w, 0, s->n * sizeof *s->upd.w);
    for (size_t k = 0; s->upd.backup && k < nw; k++) memcpy(s->upd.backup + k * n, s->upd.w, s->n * sizeof *s->upd.w);
    staleness_hist_init(&s->stats.staleness_clocks);
    staleness_hist_init(&s->stats.staleness_updates);
    ps_progress_board_init(&s->board);
    return s;
}

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

// busy_wait_s: how long to keep trying an address still in use (a restarted
// shard's previous socket may still be closing).
static int server_bind(ps_server_t *s, void *zmq_ctx, const char *endpoint, double busy_wait_s, char *err,
                       size_t err_len) {
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

static const char ledger_magic[8] = {'A', 'S', 'G', 'D', 'A', 'P', 'P', 'L'};

static void ledger_path(char *out, size_t len, const char *checkpoint_path) {
    snprintf(out, len, "%s.ledger", checkpoint_path);
}

// With checkpoints, the ledger moves into CHECKPOINT.ledger, holding `values`
// (2 n_workers counters).
static int ledger_open(ps_server_t *s, const uint64_t *values, char *err, size_t err_len) {
    if (!s->cfg.checkpoint_path) return 0;
    char path[1100];
    ledger_path(path, sizeof path, s->cfg.checkpoint_path);
    size_t n = 2 * s->cfg.n_workers;
    char why[1200];
    if (counter_file_create(&s->once.ledger_file, path, ledger_magic, n, 0, why, sizeof why) != 0) {
        snprintf(err, err_len, "server: %s", why);
        return -1;
    }
    memcpy(s->once.ledger_file.v, values, n * sizeof *values);
    s->once.ledger = s->once.ledger_file.v;
    return 0;
}

ps_server_t *ps_server_new(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const float *shard_init,
                           char *err, size_t err_len) {
    ps_server_t *s = server_alloc(c, shard_init, err, err_len);
    if (s && ledger_open(s, s->once.own_ledger, err, err_len) != 0) ps_server_destroy(&s);
    if (s && server_bind(s, zmq_ctx, endpoint, 0.0, err, err_len) != 0) ps_server_destroy(&s);
    return s;
}

// ---- checkpoints -------------------------------------------------------------------

// What identifies the run and the shard's layout; a checkpoint is resumed only
// into the same. (The step size may change on a resume.)
enum { ID_RUN, ID_SHARD, ID_SHARDS, ID_PARAMS, ID_WORKERS, ID_MODE, ID_OPTIMIZER, ID_BACKUP, ID_COUNT_ };
static const char *const id_names[ID_COUNT_] = {"run id",  "shard",     "shards",    "parameters",
                                                "workers", "sync mode", "optimizer", "DC-ASGD"};

static void identity_of(const ps_server_t *s, uint64_t id[ID_COUNT_]) {
    id[ID_RUN] = s->cfg.run_id;
    id[ID_SHARD] = s->cfg.shard;
    id[ID_SHARDS] = s->cfg.n_shards;
    id[ID_PARAMS] = s->cfg.n_params;
    id[ID_WORKERS] = s->cfg.n_workers;
    id[ID_MODE] = (uint64_t)s->cfg.mode;
    id[ID_OPTIMIZER] = (uint64_t)s->cfg.optimizer;
    id[ID_BACKUP] = s->upd.backup != NULL;
}

// An identity field's value as the flags say it: modes and optimizers by name.
static void identity_value(int field, uint64_t v, char *out, size_t len) {
    if (field == ID_MODE)
        snprintf(out, len, "%s", sync_mode_name((sync_mode_t)v));
    else if (field == ID_OPTIMIZER)
        snprintf(out, len, "%s", optimizer_kind_name((optimizer_kind_t)v));
    else if (field == ID_BACKUP)
        snprintf(out, len, "%s", v ? "on" : "off");
    else
        snprintf(out, len, "%llu", (unsigned long long)v);
}

// Worker k's gradient for the round being aggregated (meaningful while
// bsp.examples[k] > 0): as received, or in bsp.grad.
static const float *bsp_gradient(const ps_server_t *s, size_t k) {
    zmq_msg_t *held = &s->bsp.held[k];
    return zmq_msg_size(held) > 0 ? zmq_msg_data(held) : s->bsp.grad + k * s->n;
}

// Lets go of worker k's received gradient (its round was applied, or it is replaced).
static void bsp_release(ps_server_t *s, size_t k) {
    if (zmq_msg_size(&s->bsp.held[k]) == 0) return;
    zmq_msg_close(&s->bsp.held[k]);
    zmq_msg_init(&s->bsp.held[k]);
}

// The pushes being taken in parts, four numbers per worker: flags (open,
// late, resent_lost), clock, next, the step's bits. A shard that adopts or
// resumes this state skips the parts it took and takes the rest.
enum { PARTS_FIELDS = 4 };

static int save_parts(const ps_server_t *s, ckpt_writer_t *w, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    uint64_t *v = malloc(PARTS_FIELDS * nw * sizeof *v);
    if (!v) {
        ckpt_writer_abort(&w);
        snprintf(err, err_len, "server: out of memory writing a checkpoint");
        return -1;
    }
    for (size_t k = 0; k < nw; k++) {
        const push_parts_t *p = &s->parts[k];
        uint32_t lr_bits;
        memcpy(&lr_bits, &p->lr, sizeof lr_bits);
        v[PARTS_FIELDS * k] = (uint64_t)p->open | (uint64_t)p->late << 1 | (uint64_t)p->resent_lost << 2;
        v[PARTS_FIELDS * k + 1] = p->clock;
        v[PARTS_FIELDS * k + 2] = p->next;
        v[PARTS_FIELDS * k + 3] = lr_bits;
    }
    ckpt_writer_section(w, "ps.parts", v, PARTS_FIELDS * nw * sizeof *v);
    free(v);
    return 0;
}

// A checkpoint written before pushes came in parts has no such section: none is open.
static int restore_parts(ps_server_t *s, const ckpt_file_t *f, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers, size = 0;
    const uint64_t *v = ckpt_file_section(f, "ps.parts", &size);
    memset(s->parts, 0, nw * sizeof *s->parts);
    s->parts_applying = 0;
    if (!v) return 0;
    if (size != PARTS_FIELDS * nw * sizeof *v) {
        snprintf(err, err_len, "%s: section 'ps.parts' holds %zu bytes, not %zu", ckpt_file_path(f), size,
                 PARTS_FIELDS * nw * sizeof *v);
        return -1;
    }
    for (size_t k = 0; k < nw; k++) {
        push_parts_t *p = &s->parts[k];
        uint32_t lr_bits = (uint32_t)v[PARTS_FIELDS * k + 3];
        p->open = v[PARTS_FIELDS * k] & 1, p->late = (v[PARTS_FIELDS * k] >> 1) & 1;
        p->resent_lost = (v[PARTS_FIELDS * k] >> 2) & 1;
        p->clock = v[PARTS_FIELDS * k + 1];
        p->next = v[PARTS_FIELDS * k + 2];
        memcpy(&p->lr, &lr_bits, sizeof p->lr);
        if (p->next > s->n) {
            snprintf(err, err_len,
                     "%s: section 'ps.parts': worker %zu's push resumes at %llu, beyond the shard's %zu "
                     "parameters",
                     ckpt_file_path(f), k, (unsigned long long)p->next, s->n);
            return -1;
        }
        if (p->open && s->cfg.mode != SYNC_MODE_BSP) s->parts_applying++;
    }
    return 0;
}

// The counters kept across a restart.
enum {
    CT_VERSION,
    CT_APPLIED,
    CT_ANSWERED,
    CT_WAITED,
    CT_BYTES_IN,
    CT_BYTES_OUT,
    CT_REJECTED,
    CT_DUPLICATES,
    CT_EVICTIONS,
    CT_REJOINS,
    CT_SKIPPED,
    CT_BSP_CLOCK,
    CT_COUNT_
};

int ps_server_save(const ps_server_t *s, const char *path, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers, n = s->n;
    uint64_t id[ID_COUNT_],
        counters[CT_COUNT_] = {s->stats.version,      s->stats.pushes_applied, s->stats.pulls_answered,
                               s->stats.pulls_waited, s->stats.bytes_in,       s->stats.bytes_out,
                               s->stats.rejected,     s->stats.duplicates,     s->stats.evictions,
                               s->stats.rejoins,      s->stats.rounds_skipped, s->bsp.clock};
    identity_of(s, id);
    ckpt_writer_t *w = ckpt_writer_open(path, err, err_len);
    if (!w) return -1;
    ckpt_writer_section(w, "ps.identity", id, sizeof id);
    ckpt_writer_section(w, "ps.endpoint", s->endpoint, strlen(s->endpoint));
    ckpt_writer_section(w, "ps.counters", counters, sizeof counters);
    ckpt_writer_section(w, "ps.values", s->upd.w, n * sizeof *s->upd.w);
    if (s->upd.h) ckpt_writer_section(w, "ps.adagrad", s->upd.h, n * sizeof *s->upd.h);
    ckpt_writer_section(w, "ps.clock", s->members.clocks.clock, nw * sizeof *s->members.clocks.clock);
    ckpt_writer_section(w, "ps.joined", s->members.clocks.joined, nw);
    ckpt_writer_section(w, "ps.left", s->members.clocks.left, nw);
    ckpt_writer_section(w, "ps.evicted", s->members.clocks.evicted, nw);
    ckpt_writer_section(w, "ps.pushes", s->members.clocks.pushes, nw * sizeof *s->members.clocks.pushes);
    ckpt_writer_section(w, "ps.pushes_total", s->members.clocks.pushes_total,
                        nw * sizeof *s->members.clocks.pushes_total);
    ckpt_writer_section(w, "ps.read_min", s->members.read_min_clock, nw * sizeof *s->members.read_min_clock);
    ckpt_writer_section(w, "ps.duplicates", s->once.duplicates_by, nw * sizeof *s->once.duplicates_by);
    // What each worker's pushes have claimed (clock_plausible): a backup that
    // adopts this state judges the next push as the primary does.
    uint64_t *claims = malloc(2 * nw * sizeof *claims);
    if (!claims) {
        ckpt_writer_abort(&w);
        snprintf(err, err_len, "server: out of memory writing a checkpoint");
        return -1;
    }
    for (size_t k = 0; k < nw; k++) claims[2 * k] = s->once.claim[k].base, claims[2 * k + 1] = s->once.claim[k].steps;
    ckpt_writer_section(w, "ps.claims", claims, 2 * nw * sizeof *claims);
    free(claims);
    // The HELLOs answered, so that a backup answers a resent one as the primary does.
    ckpt_writer_section(w, "ps.hellos", s->once.hello, nw * sizeof *s->once.hello);
    ckpt_writer_section(w, "ps.lost", s->once.lost_by, nw * sizeof *s->once.lost_by);
    ckpt_writer_section(w, "ps.resend", s->once.resend_clock, nw * sizeof *s->once.resend_clock);
    ckpt_writer_section(w, "ps.ledger", s->once.ledger, 2 * nw * sizeof *s->once.ledger);
    if (save_parts(s, w, err, err_len) != 0) return -1;
    ckpt_writer_section(w, "ps.stale_clocks", &s->stats.staleness_clocks, sizeof s->stats.staleness_clocks);
    ckpt_writer_section(w, "ps.stale_vers", &s->stats.staleness_updates, sizeof s->stats.staleness_updates);
    if (s->bsp.grad) {
        const void **parts = malloc(nw * sizeof *parts);
        size_t *sizes = malloc(nw * sizeof *sizes);
        if (!parts || !sizes) {
            free(parts), free(sizes);
            ckpt_writer_abort(&w);
            snprintf(err, err_len, "server: out of memory writing a checkpoint");
            return -1;
        }
        for (size_t k = 0; k < nw; k++) parts[k] = bsp_gradient(s, k), sizes[k] = n * sizeof *s->bsp.grad;
        ckpt_writer_section_parts(w, "bsp.grad", parts, sizes, nw);
        free(parts), free(sizes);
        ckpt_writer_section(w, "bsp.examples", s->bsp.examples, nw * sizeof *s->bsp.examples);
        ckpt_writer_section(w, "bsp.version", s->bsp.version, nw * sizeof *s->bsp.version);
    }
    if (s->upd.backup) ckpt_writer_section(w, "dc.backup", s->upd.backup, nw * n * sizeof *s->upd.backup);
    return ckpt_writer_commit(&w, err, err_len);
}

// ledger_at_checkpoint (2 n_workers) receives the ledger as the checkpoint saw it.
static int restore(ps_server_t *s, const ckpt_file_t *f, char *endpoint, size_t endpoint_len,
                   uint64_t *ledger_at_checkpoint, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers, n = s->n;
    uint64_t want[ID_COUNT_], have[ID_COUNT_], counters[CT_COUNT_];
    identity_of(s, want);
    if (ckpt_file_get(f, "ps.identity", have, sizeof have, err, err_len) != 0) return -1;
    for (int i = 0; i < ID_COUNT_; i++) {
        if (have[i] == want[i]) continue;
        char its[48], ours[48];
        identity_value(i, have[i], its, sizeof its);
        identity_value(i, want[i], ours, sizeof ours);
        snprintf(err, err_len, "%s: a checkpoint of another run or layout: its %s is %s, this server's %s",
                 ckpt_file_path(f), id_names[i], its, ours);
        return -1;
    }
    size_t len = 0;
    const char *ep = ckpt_file_section(f, "ps.endpoint", &len);
    if (!ep || len == 0 || len >= endpoint_len) {
        snprintf(err, err_len, "%s: no valid section 'ps.endpoint'", ckpt_file_path(f));
        return -1;
    }
    memcpy(endpoint, ep, len);
    endpoint[len] = '\0';
    if (ckpt_file_get(f, "ps.counters", counters, sizeof counters, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.values", ps_values_write(s->upd.values), n * sizeof *s->upd.w, err, err_len) != 0 ||
        (s->upd.h && ckpt_file_get(f, "ps.adagrad", s->upd.h, n * sizeof *s->upd.h, err, err_len) != 0) ||
        ckpt_file_get(f, "ps.clock", s->members.clocks.clock, nw * sizeof *s->members.clocks.clock, err, err_len) !=
            0 ||
        ckpt_file_get(f, "ps.joined", s->members.clocks.joined, nw, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.left", s->members.clocks.left, nw, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.evicted", s->members.clocks.evicted, nw, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.pushes", s->members.clocks.pushes, nw * sizeof *s->members.clocks.pushes, err, err_len) !=
            0 ||
        ckpt_file_get(f, "ps.pushes_total", s->members.clocks.pushes_total, nw * sizeof *s->members.clocks.pushes_total,
                      err, err_len) != 0 ||
        ckpt_file_get(f, "ps.read_min", s->members.read_min_clock, nw * sizeof *s->members.read_min_clock, err,
                      err_len) != 0 ||
        ckpt_file_get(f, "ps.duplicates", s->once.duplicates_by, nw * sizeof *s->once.duplicates_by, err, err_len) !=
            0 ||
        ckpt_file_get(f, "ps.lost", s->once.lost_by, nw * sizeof *s->once.lost_by, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.resend", s->once.resend_clock, nw * sizeof *s->once.resend_clock, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.ledger", ledger_at_checkpoint, 2 * nw * sizeof *ledger_at_checkpoint, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.stale_clocks", &s->stats.staleness_clocks, sizeof s->stats.staleness_clocks, err,
                      err_len) != 0 ||
        ckpt_file_get(f, "ps.stale_vers", &s->stats.staleness_updates, sizeof s->stats.staleness_updates, err,
                      err_len) != 0 ||
        restore_parts(s, f, err, err_len) != 0)
        return -1;
    if (s->bsp.grad &&
        (ckpt_file_get(f, "bsp.grad", s->bsp.grad, nw * n * sizeof *s->bsp.grad, err, err_len) != 0 ||
         ckpt_file_get(f, "bsp.examples", s->bsp.examples, nw * sizeof *s->bsp.examples, err, err_len) != 0 ||
         ckpt_file_get(f, "bsp.version", s->bsp.version, nw * sizeof *s->bsp.version, err, err_len) != 0))
        return -1;
    for (size_t k = 0; s->bsp.grad && k < nw; k++) bsp_release(s, k);  // the checkpoint's gradients are in bsp.grad now
    if (s->upd.backup &&
        ckpt_file_get(f, "dc.backup", s->upd.backup, nw * n * sizeof *s->upd.backup, err, err_len) != 0)
        return -1;
    s->stats.version = counters[CT_VERSION];
    s->stats.pushes_applied = counters[CT_APPLIED];
    s->stats.pulls_answered = counters[CT_ANSWERED];
    s->stats.pulls_waited = counters[CT_WAITED];
    s->stats.bytes_in = counters[CT_BYTES_IN];
    s->stats.bytes_out = counters[CT_BYTES_OUT];
    s->stats.rejected = counters[CT_REJECTED];
    s->stats.duplicates = counters[CT_DUPLICATES];
    s->stats.evictions = counters[CT_EVICTIONS];
    s->stats.rejoins = counters[CT_REJOINS];
    s->stats.rounds_skipped = counters[CT_SKIPPED];
    s->bsp.clock = counters[CT_BSP_CLOCK];
    s->stats.resumed_version = s->stats.version;
    s->resumed = 1;
    for (size_t k = 0; k < s->cfg.n_workers; k++) s->once.claim[k].unanchored = 1;
    return 0;
}

// What the crash lost: the ledger the previous shard kept until it stopped
// (PATH.ledger, beside the checkpoint resumed from) counts every push it
// applied; those beyond the checkpoint's count are lost. The last of them may
// come again (its acknowledgement lost with the shard): resend_clock knows it.
static void count_lost(ps_server_t *s, const char *path, uint64_t *at_checkpoint) {
    size_t nw = s->cfg.n_workers;
    char lpath[1100], why[1200];
    ledger_path(lpath, sizeof lpath, path);
    uint64_t *now = s->once.own_ledger;  // the ledger at the crash, read into own memory
    size_t held = 0;
    int known = counter_file_read(lpath, ledger_magic, 2 * nw, now, &held, why, sizeof why) == 0;
    if (known && held != 2 * nw) {
        snprintf(why, sizeof why, "%s: holds %zu counters, not %zu", lpath, held, 2 * nw);
        known = 0;
    }
    for (size_t k = 0; known && k < nw; k++) known = now[2 * k] >= at_checkpoint[2 * k];
    if (!known) {
        s->stats.lost_unknown = 1;
        if (!s->cfg.quiet)
            fprintf(stderr,
                    "asgd server %zu: %s; the pushes applied after the checkpoint and lost cannot be "
                    "counted\n",
                    s->cfg.shard, known ? "its ledger is of another run" : why);
        memcpy(now, at_checkpoint, 2 * nw * sizeof *now);
    }
    for (size_t k = 0; k < nw; k++) {
        uint64_t after = now[2 * k] - at_checkpoint[2 * k];
        s->once.lost_by[k] += after;
        if (after > 0) s->once.resend_clock[k] = now[2 * k + 1];
        s->once.resumed_by[k] = s->members.clocks.pushes_total[k];
    }
}

ps_server_t *ps_server_resume(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const char *path, char *err,
                              size_t err_len) {
    ckpt_file_t *f = ckpt_file_read(path, err, err_len);
    if (!f) return NULL;
    ps_server_t *s = server_alloc(c, NULL, err, err_len);
    uint64_t *at_checkpoint = calloc(2 * c->n_workers + 1, sizeof *at_checkpoint);
    char saved[256];
    if (s && !at_checkpoint) {
        snprintf(err, err_len, "server: out of memory");
        ps_server_destroy(&s);
    }
    if (s && restore(s, f, saved, sizeof saved, at_checkpoint, err, err_len) != 0) ps_server_destroy(&s);
    ckpt_file_free(&f);
    if (s) count_lost(s, path, at_checkpoint);
    free(at_checkpoint);
    if (s && ledger_open(s, s->once.own_ledger, err, err_len) != 0) ps_server_destroy(&s);
    if (s && server_bind(s, zmq_ctx, endpoint ? endpoint : saved, 5.0, err, err_len) != 0) ps_server_destroy(&s);
    return s;
}

int ps_server_adopt(ps_server_t *s, const char *path, char *err, size_t err_len) {
    ckpt_file_t *f = ckpt_file_read(path, err, err_len);
    if (!f) return -1;
    char saved[256];
    uint64_t resumed_version = s->stats.resumed_version;
    int rc = restore(s, f, saved, sizeof saved, s->once.ledger, err, err_len);
    if (rc == 0) {
        s->resumed = 0;  // a copy of a live shard: nothing was lost
        // Its claims too, so that the backup refuses exactly the pushes the
        // primary refuses (a crash-resume instead re-anchors on the next push).
        size_t nw = s->cfg.n_workers, size = 0;
        const uint64_t *claims = ckpt_file_section(f, "ps.claims", &size);
        if (claims && size == 2 * nw * sizeof *claims)
            for (size_t k = 0; k < nw; k++)
                s->once.claim[k] = (struct clock_claim){.base = claims[2 * k], .steps = claims[2 * k + 1]};
        const void *hellos = ckpt_file_section(f, "ps.hellos", &size);
        if (hellos && size == nw * sizeof *s->once.hello) memcpy(s->once.hello, hellos, size);
        s->stats.resumed_version = resumed_version;
    }
    ckpt_file_free(&f);
    return rc;
}

void ps_server_set_hooks(ps_server_t *s, const ps_server_hooks_t *h) { s->hooks = *h; }
void *ps_server_socket(ps_server_t *s) { return s->sock; }

void ps_server_set_worker_timeout(ps_server_t *s, int worker_timeout_ms) {
    double now = mono_clock_s();
    s->cfg.worker_timeout_ms = worker_timeout_ms;
    for (size_t k = 0; k < s->cfg.n_workers; k++) s->members.last_heard[k] = now;
    s->members.quiet_since = now;
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

void ps_server_destroy(ps_server_t **sp) {
    if (!sp || !*sp) return;
    ps_server_t *s = *sp;
    for (size_t i = 0; i < s->n_pending; i++) {
        zmq_msg_close(&s->pending[i].identity);
        free(s->pending[i].keys);
    }
    free(s->pending);
    memory_guard_destroy(&s->guard);
    if (s->sock) zmq_close(s->sock);
    clock_table_free(&s->members.clocks);
    ps_values_release(&s->upd.values);
    free(s->upd.h);
    free(s->members.read_min_clock);
    free(s->members.sent_version);
    free(s->members.sent_clock);
    free(s->members.sent_head);
    free(s->members.sent_len);
    free(s->members.last_heard);
    free(s->upd.told_diverged);
    free(s->once.duplicates_by);
    free(s->once.lost_by);
    free(s->once.resumed_by);
    free(s->once.late_by);
    free(s->once.resend_clock);
    free(s->once.claim);
    free(s->once.join_nonce);
    free(s->once.hello);
    free(s->parts);
    buffer_pool_release(&s->echo_pool);
    free(s->once.own_ledger);
    counter_file_close(&s->once.ledger_file);
    free(s->bsp.grad);
    for (size_t k = 0; s->bsp.held && k < s->cfg.n_workers; k++) zmq_msg_close(&s->bsp.held[k]);
    free(s->bsp.held);
    free(s->bsp.examples);
    free(s->bsp.version);
    free(s->bsp.weight);
    free(s->bsp.terms);
    free(s->upd.scratch_idx);
    free(s->upd.scratch_g);
    free(s->upd.decoded);
    free(s->upd.backup);
    free(s);
    *sp = NULL;
}

const char *ps_server_endpoint(const ps_server_t *s) { return s->endpoint; }
void ps_server_range(const ps_server_t *s, size_t *begin, size_t *end) {
    *begin = s->begin;
    *end = s->end;
}
const uint64_t *ps_server_pushes_per_worker(const ps_server_t *s) { return s->members.clocks.pushes; }
const uint64_t *ps_server_pushes_total_per_worker(const ps_server_t *s) { return s->members.clocks.pushes_total; }
const uint64_t *ps_server_clocks(const ps_server_t *s) { return s->members.clocks.clock; }
const uint64_t *ps_server_duplicates_per_worker(const ps_server_t *s) { return s->once.duplicates_by; }
const uint64_t *ps_server_lost_per_worker(const ps_server_t *s) { return s->once.lost_by; }
const uint64_t *ps_server_resumed_pushes_per_worker(const ps_server_t *s) { return s->once.resumed_by; }
const uint64_t *ps_server_late_per_worker(const ps_server_t *s) { return s->once.late_by; }

// The clock conditional pulls wait on: the slowest live worker's; under BSP
// with backup workers, the rounds applied (a round completes without the late).
static uint64_t ready_clock(const ps_server_t *s) {
    if (s->cfg.backup_workers > 0) return s->bsp.clock;
    return clock_table_min(&s->members.clocks);
}
const float *ps_server_values(const ps_server_t *s) { return s->upd.w; }

// Single writer (the serving thread); readers see the figures of one
// publication, a state the shard was in after some message.
static void publish_progress(ps_server_t *s) {
    const staleness_hist_t *hv = &s->stats.staleness_updates, *hc = &s->stats.staleness_clocks;
    ps_progress_t p = {
        .samples = s->samples,
        .version = s->stats.version,
        .min_clock = ready_clock(s),
        .wait_s = s->wait_s,
        .staleness_count = hc->count,
        .staleness_versions_sum = (uint64_t)hv->sum,
        .staleness_versions_max = hv->max,
        .staleness_clocks_sum = (uint64_t)hc->sum,
        .staleness_clocks_max = hc->max,
    };
    ps_progress_board_publish(&s->board, &p);
}

void ps_server_progress(const ps_server_t *s, ps_progress_t *out) { ps_progress_board_read(&s->board, out); }

void ps_server_stats(const ps_server_t *s, ps_stats_t *out) {
    *out = s->stats;
    ps_values_counts_t vc;
    ps_values_counts(s->upd.values, &vc);
    out->replies_lent = vc.lent;
    out->replies_copied = vc.copied;
    out->writes_moved = vc.moved;
    out->min_clock = clock_table_min(&s->members.clocks);
    out->max_clock = clock_table_max(&s->members.clocks);
}

// ---- replies -----------------------------------------------------------------

static wire_header_t reply_header(const ps_server_t *s, uint16_t type) {
    wire_header_t h = zmsg_header(type, s->cfg.run_id);
    h.sender = (uint32_t)s->cfg.shard;
    h.shard = (uint32_t)s->cfg.shard;
    h.clock = ready_clock(s);
    h.param_version = s->stats.version;
    return h;
}

static int send_simple(ps_server_t *s, zmq_msg_t *identity, uint16_t type, uint32_t aux, char *err, size_t err_len) {
    wire_header_t h = reply_header(s, type);
    h.aux = aux;
    return zmsg_send(s->sock, identity, &h, NULL, 0, 0, err, err_len);
}

// WELCOME: the shard's range (its length travels in aux: a WELCOME has no
// payload) and the clock the worker is to continue from.
static int send_welcome(ps_server_t *s, zmq_msg_t *identity, uint64_t clock, char *err, size_t err_len) {
    wire_header_t h = reply_header(s, MSG_TYPE_WELCOME);
    h.offset = s->begin;
    h.aux = (uint32_t)s->n;
    h.clock = clock;
    return zmsg_send(s->sock, identity, &h, NULL, 0, 0, err, err_len);
}

// PUSH_ACK names the push it acknowledges by its clock, so that a worker that
// retried a push can tell the acknowledgement of a retry from a later one's.
static int send_push_ack(ps_server_t *s, zmq_msg_t *identity, uint64_t push_clock, char *err, size_t err_len) {
    wire_header_t h = reply_header(s, MSG_TYPE_PUSH_ACK);
    h.offset = push_clock;
    return zmsg_send(s->sock, identity, &h, NULL, 0, 0, err, err_len);
}

static int reject(ps_server_t *s, zmq_msg_t *identity, wire_status_t why, const wire_header_t *req, char *err,
                  size_t err_len) {
    s->stats.rejected++;
    if (!s->cfg.quiet && !s->warned[why]) {
        fprintf(stderr, "asgd server %zu: refused a %s from worker %u: %s (further ones are counted, not shown)\n",
                s->cfg.shard, msg_type_name(req->type), req->sender, wire_status_name(why));
        s->warned[why] = 1;
    }
    return send_simple(s, identity, MSG_TYPE_REJECT, why, err, err_len);
}

// Worker k was sent parameters of `version` with min clock `min_clock`. A
// version sent again keeps the clock it was first sent with (the min clock can
// rise without an update only when a worker leaves, is evicted or rejoins).
static void note_sent(ps_server_t *s, uint32_t worker, uint64_t version, uint64_t min_clock) {
    s->members.read_min_clock[worker] = min_clock;
    uint64_t *v = s->members.sent_version + (size_t)worker * SENT_HISTORY,
             *c = s->members.sent_clock + (size_t)worker * SENT_HISTORY;
    uint32_t head = s->members.sent_head[worker], len = s->members.sent_len[worker];
    if (len > 0 && v[(head + len - 1) % SENT_HISTORY] == version) return;
    if (len == SENT_HISTORY)
        head = s->members.sent_head[worker] = (head + 1) % SENT_HISTORY;
    else
        s->members.sent_len[worker] = ++len;
    v[(head + len - 1) % SENT_HISTORY] = version;
    c[(head + len - 1) % SENT_HISTORY] = min_clock;
}

// The min clock this shard reported with version `version` when it sent it to
// `worker`: that of the latest version sent at or below it; when every version
// remembered is newer, the oldest one's; when none is (a shard restored from a
// checkpoint), the one reported with the worker's last pull.
static uint64_t read_clock_of(const ps_server_t *s, uint32_t worker, uint64_t version) {
    const uint64_t *v = s->members.sent_version + (size_t)worker * SENT_HISTORY,
                   *c = s->members.sent_clock + (size_t)worker * SENT_HISTORY;
    uint32_t head = s->members.sent_head[worker], len = s->members.sent_len[worker];
    if (len == 0) return s->members.read_min_clock[worker];
    for (uint32_t i = len; i-- > 0;)
        if (v[(head + i) % SENT_HISTORY] <= version) return c[(head + i) % SENT_HISTORY];
    return c[head];
}

// Sends parameters: the whole shard, or the values at `keys` (global
// indices), to a pull this shard held for held_s seconds (the answer's aux, in
// microseconds: how long the bound kept the worker waiting here).
static int send_params_now(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, const uint32_t *keys, uint32_t n_keys,
                           double held_s, char *err, size_t err_len) {
    wire_header_t h = reply_header(s, MSG_TYPE_PARAMS);
    h.aux = held_s <= 0.0 ? 0 : held_s >= 4294.0 ? UINT32_MAX : (uint32_t)(held_s * 1e6);
    zmq_msg_t frames[2];
    size_t n_frames;
    if (!keys) {
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.offset = s->begin;
        h.count = (uint32_t)s->n;
        // Lent without a copy; a push applied while libzmq still holds it
        // writes the other buffer (ps_reply.h).
        if (ps_values_reply(s->upd.values, &frames[0], &h.checksum, err, err_len) != 0) return -1;
        if (worker == WIRE_NO_ID) {
            s->stats.observer_pulls++;  // a reader of the global model: no worker's state changes
        } else {
            if (s->upd.backup) memcpy(s->upd.backup + (size_t)worker * s->n, s->upd.w, s->n * sizeof(float));
            s->stats.bytes_out += 4u * h.count;
            s->stats.pulls_answered++;
            note_sent(s, worker, h.param_version, h.clock);
        }
        return zmsg_send_sealed(s->sock, identity, &h, frames, 1, 0, err, err_len);
    } else {
        h.payload_kind = PAYLOAD_KIND_SPARSE;
        h.count = n_keys;
        if (zmsg_frame_alloc(&frames[0], n_keys * sizeof(uint32_t), err, err_len) != 0) return -1;
        if (zmsg_frame_alloc(&frames[1], n_keys * sizeof(float), err, err_len) != 0) {
            zmq_msg_close(&frames[0]);
            return -1;
        }
        memcpy(zmq_msg_data(&frames[0]), keys, n_keys * sizeof(uint32_t));
        float *v = zmq_msg_data(&frames[1]);
        for (uint32_t k = 0; k < n_keys; k++) v[k] = s->upd.w[keys[k] - s->begin];
        n_frames = 2;
    }
    s->stats.bytes_out += h.count * (n_frames == 2 ? 8u : 4u);
    s->stats.pulls_answered++;
    note_sent(s, worker, h.param_version, h.clock);
    return zmsg_send(s->sock, identity, &h, frames, n_frames, 0, err, err_len);
}

static int send_params(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, const uint32_t *keys, uint32_t n_keys,
                       double held_s, char *err, size_t err_len) {
    uint64_t span = TRACE_BEGIN();
    int rc = send_params_now(s, identity, worker, keys, n_keys, held_s, err, err_len);
    TRACE_END(&TK_SERVE, span, worker);
    return rc;
}

// Answers every waiting pull whose clock condition now holds.
static int serve_pending(ps_server_t *s, char *err, size_t err_len) {
    if (s->parts_applying > 0) return 0;  // a push in parts is half applied: answered once it is whole
    uint64_t min = ready_clock(s);
    size_t kept = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_pending; i++) {
        pending_pull_t *p = &s->pending[i];
        if (ssp_gate(p->need, min, 0).proceed && rc == 0) {
            double held = mono_clock_s() - p->since;
            if (p->worker != WIRE_NO_ID) s->wait_s += held;
            rc = send_params(s, &p->identity, p->worker, p->keys, p->n_keys, held, err, err_len);
            zmq_msg_close(&p->identity);
            free(p->keys);
        } else {
            s->pending[kept++] = *p;
        }
    }
    s->n_pending = kept;
    return rc;
}

// Queues worker's pull until the min clock reaches `need` (keys NULL: the
// whole shard). A worker waits on one pull at a time: a second one is its
// retry, and replaces the first.
static int queue_pull(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, uint64_t need, const uint32_t *keys,
                      uint32_t n_keys, char *err, size_t err_len) {
    pending_pull_t *p = NULL;
    for (size_t i = 0; i < s->n_pending && !p; i++) {
        if (s->pending[i].worker != worker) continue;
        p = &s->pending[i];
        zmq_msg_close(&p->identity);
        free(p->keys);
    }
    if (!p) {
        if (s->n_pending == s->cap_pending) {
            size_t cap = s->cap_pending ? 2 * s->cap_pending : 8;
            pending_pull_t *grown = realloc(s->pending, cap * sizeof *grown);
            if (!grown) {
                snprintf(err, err_len, "server: out of memory queueing a pull");
                return -1;
            }
            s->pending = grown;
            s->cap_pending = cap;
        }
        p = &s->pending[s->n_pending++];
        p->since = mono_clock_s();
        if (worker != WIRE_NO_ID) s->stats.pulls_waited++;
    }
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, identity);
    p->worker = worker;
    p->need = need;
    p->keys = NULL;
    p->n_keys = 0;
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

// ---- updates -----------------------------------------------------------------

// Records an update's staleness (docs/distributed.md, "Staleness, measured"):
// in clocks, `round` (the first round the update covers: the rounds its worker
// had pushed before it) minus the min clock this shard reported with the
// oldest parameters the update was computed from, version `version`; in
// versions, this shard's version now minus `version`.
static void record_staleness(ps_server_t *s, uint32_t worker, uint64_t round, uint64_t version) {
    uint64_t read = read_clock_of(s, worker, version), v = s->stats.version;
    uint64_t in_clocks = round > read ? round - read : 0, in_versions = v > version ? v - version : 0;
    staleness_hist_add(&s->stats.staleness_clocks, in_clocks);
    staleness_hist_add(&s->stats.staleness_updates, in_versions);
}

// The step for the next update: lr, or during warm-up lr * (version + 1) / warmup.
static float warmed_up_lr(const ps_server_t *s) {
    uint64_t w = s->cfg.warmup, v = s->stats.version;
    if (w == 0 || v + 1 >= w) return s->cfg.lr;
    return (float)((double)s->cfg.lr * (double)(v + 1) / (double)w);
}

static void apply_dense(ps_server_t *s, const float *g, float lr) {
    ps_values_apply(s->upd.values, g, lr, s->upd.h, s->cfg.adagrad_eps);
    s->upd.w = ps_values_get(s->upd.values);
}

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

// The pulls a BSP round answers as its sum is applied, range by range
// (docs/protocol.md, "A round's values in ranges").
#define ROUND_RANGE ((size_t)1 << 18)

typedef struct round_answers {
    ps_server_t *s;
    size_t *which;  // indices into s->pending: whole-shard pulls the round makes ready
    size_t n;
    wire_header_t h;  // PARAMS as it will stand after the round
    char *err;
    size_t err_len;
} round_answers_t;

// ps_range_done_fn: values [from, from + n) of the round are written; each
// waiting pull gets them now (lent, as whole replies are).
static int send_round_range(void *ctx, size_t from, size_t n, uint32_t checksum) {
    round_answers_t *r = ctx;
    ps_server_t *s = r->s;
    for (size_t i = 0; i < r->n; i++) {
        zmq_msg_t frame;
        if (ps_values_reply_range(s->upd.values, from, n, &frame, r->err, r->err_len) != 0) return -1;
        wire_header_t h = r->h;
        h.offset = s->begin + from;
        h.count = (uint32_t)n;
        h.checksum = checksum;
        if (zmsg_send_sealed(s->sock, &s->pending[r->which[i]].identity, &h, &frame, 1, 0, r->err, r->err_len) != 0)
            return -1;
        s->stats.bytes_out += 4u * n;
    }
    return 0;
}

// The clock conditional pulls wait on once the round being applied is (as
// ready_clock: with backup workers the rounds applied, else the min clock,
// which the round's last gradient already raised).
static uint64_t round_ready_clock(const ps_server_t *s) {
    return s->cfg.backup_workers > 0 ? s->bsp.clock + 1 : clock_table_min(&s->members.clocks);
}

// The whole-shard pulls of workers that this round (complete, about to be
// applied) lets through: answered in ranges as it is applied. Their indices
// go to which[]; returns how many.
static size_t pulls_for_round(const ps_server_t *s, size_t *which) {
    uint64_t after = round_ready_clock(s);
    size_t n = 0;
    for (size_t i = 0; i < s->n_pending; i++)
        if (!s->pending[i].keys && s->pending[i].worker != WIRE_NO_ID && ssp_gate(s->pending[i].need, after, 0).proceed)
            which[n++] = i;
    return n;
}

// The round's sum, applied in one pass over the shard (ps_values_apply_sum),
// range by range when pulls wait for it: each range goes to them as soon as
// it is written, so the answers travel while the rest is summed. Returns 0,
// or -1 with err (a send failed; the round is applied all the same).
static int bsp_sum_and_answer(ps_server_t *s, int answer, char *err, size_t err_len) {
    size_t which[64];
    size_t n = answer && s->n_pending <= 64 ? pulls_for_round(s, which) : 0;
    if (n == 0 || s->n < 2 * ROUND_RANGE) {
        ps_values_apply_sum(s->upd.values, s->bsp.terms, s->bsp.weight, s->cfg.n_workers, warmed_up_lr(s), s->upd.h,
                            s->cfg.adagrad_eps);
        return 0;
    }
    round_answers_t r = {
        .s = s, .which = which, .n = n, .h = reply_header(s, MSG_TYPE_PARAMS), .err = err, .err_len = err_len};
    r.h.param_version = s->stats.version + 1;
    r.h.clock = round_ready_clock(s);
    r.h.payload_kind = PAYLOAD_KIND_DENSE;
    int rc =
        ps_values_apply_sum_in_ranges(s->upd.values, s->bsp.terms, s->bsp.weight, s->cfg.n_workers, warmed_up_lr(s),
                                      s->upd.h, s->cfg.adagrad_eps, ROUND_RANGE, send_round_range, &r);
    // Answered: out of the queue, counted as a whole reply is.
    size_t kept = 0, next = 0;
    for (size_t i = 0; i < s->n_pending; i++) {
        pending_pull_t *p = &s->pending[i];
        if (next < n && which[next] == i) {
            next++;
            s->wait_s += mono_clock_s() - p->since;
            s->stats.pulls_answered++;
            s->stats.pulls_in_ranges++;
            note_sent(s, p->worker, r.h.param_version, r.h.clock);
            zmq_msg_close(&p->identity);
        } else {
            s->pending[kept++] = *p;
        }
    }
    s->n_pending = kept;
    return rc;
}

// BSP: the weighted sum of the gradients buffered for the current clock, in
// worker order, applied once (answering the pulls it lets through on the way
// when `answer`); then the next clock is aggregated.
static int bsp_apply_round(ps_server_t *s, int answer, char *err, size_t err_len) {
    uint64_t span = TRACE_BEGIN();
    uint32_t total = 0;
    int rc = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) total += s->bsp.examples[k];
    if (total > 0) {
        for (size_t k = 0; k < s->cfg.n_workers; k++) {
            s->bsp.terms[k] = s->bsp.examples[k] ? bsp_gradient(s, k) : NULL;
            s->bsp.weight[k] = (float)s->bsp.examples[k] / (float)total;
            if (s->bsp.examples[k]) record_staleness(s, (uint32_t)k, s->bsp.clock, s->bsp.version[k]);
        }
        rc = bsp_sum_and_answer(s, answer, err, err_len);
        s->upd.w = ps_values_get(s->upd.values);
        s->stats.version++;
        s->samples += total;
    }
    memset(s->bsp.examples, 0, s->cfg.n_workers * sizeof *s->bsp.examples);
    for (size_t k = 0; k < s->cfg.n_workers; k++) bsp_release(s, k);
    TRACE_END(&TK_BSP_ROUND, span, s->bsp.clock);
    s->bsp.clock++;
    return rc;
}

// Whether the round being aggregated is complete: every live worker has pushed
// it (evicted workers are not waited for; a gradient one of them pushed before
// it went silent still counts: it was acknowledged), or, with b backup workers,
// N - b workers have.
static int bsp_round_complete(const ps_server_t *s) {
    if (clock_table_live(&s->members.clocks) == 0) return 0;
    if (clock_table_min(&s->members.clocks) > s->bsp.clock) return 1;
    if (s->cfg.backup_workers == 0) return 0;
    size_t in = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) in += s->members.clocks.clock[k] > s->bsp.clock;
    return in >= s->cfg.n_workers - s->cfg.backup_workers;
}

static int bsp_maybe_apply(ps_server_t *s, char *err, size_t err_len) {
    if (s->cfg.mode != SYNC_MODE_BSP) return 0;
    while (bsp_round_complete(s))
        if (bsp_apply_round(s, 1, err, err_len) != 0) return -1;
    return 0;
}

// A resumed shard restored round r from its checkpoint, but before it stopped
// it had applied rounds up to c - 1 as well, and the workers have moved on to
// c: those rounds are lost with it. The gradients buffered for round r (pushed
// before the checkpoint) are applied as they are, and every clock moves to c.
static int bsp_skip_to(ps_server_t *s, uint64_t c, char *err, size_t err_len) {
    // Rounds [bsp.clock, c) as the workers saw them are lost; the restored
    // round is among them (applied here with only the gradients that were in
    // the checkpoint).
    if (!s->cfg.quiet)
        fprintf(stderr,
                "asgd server %zu: resumed at round %llu but the workers are at round %llu: rounds applied "
                "after the checkpoint were lost\n",
                s->cfg.shard, (unsigned long long)s->bsp.clock, (unsigned long long)c);
    s->stats.rounds_skipped += c - s->bsp.clock;
    int buffered = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) buffered |= s->bsp.examples[k] != 0;
    if (buffered && bsp_apply_round(s, 0, err, err_len) != 0) return -1;
    s->bsp.clock = c;
    for (size_t k = 0; k < s->cfg.n_workers; k++)
        if (s->members.clocks.clock[k] < c) s->members.clocks.clock[k] = c;
    return 0;
}

// The run has diverged: NaN or Inf reached an update. The shard keeps its
// parameters as they were before that push and refuses everything from now on.
// `from`: where the refused part starts (0: the push's first message), as
// the parts before it were applied.
static void mark_diverged(ps_server_t *s, const wire_header_t *h, size_t from) {
    if (s->upd.diverged) return;
    s->upd.diverged = 1;
    s->upd.diverged_at = mono_clock_s();
    char kept[96];
    if (from == 0)
        snprintf(kept, sizeof kept, "from before that push");
    else
        snprintf(kept, sizeof kept, "with that push applied to its first %zu parameters only", from);
    snprintf(s->upd.diverged_msg, sizeof s->upd.diverged_msg,
             "worker %u pushed an update holding NaN or Inf (its clock %llu): the run diverged; the shard kept its "
             "parameters %s (lower --lr or --server-lr)",
             h->sender, (unsigned long long)h->clock, kept);
    if (!s->cfg.quiet) fprintf(stderr, "asgd server %zu: %s\n", s->cfg.shard, s->upd.diverged_msg);
}

static int push_is_finite(const ps_server_t *s, zmsg_t *m) {
    if (s->upd.push_finite >= 0) return s->upd.push_finite;  // found with the checksum
    const wire_header_t *h = &m->h;
    const void *values = zmsg_payload(m, h->payload_kind == PAYLOAD_KIND_SPARSE ? 1 : 0);
    return all_finite_cpu(values, h->count);
}

// Worker k's push of `clock` was applied (under BSP: buffered for its round).
static void count_applied(ps_server_t *s, uint32_t k, uint64_t clock, int resent_lost) {
    s->members.clocks.clock[k] = clock + 1;
    s->members.clocks.pushes[k]++;
    s->members.clocks.pushes_total[k]++;
    s->stats.pushes_applied++;
    s->once.ledger[2 * k]++;  // a store into the mapped ledger: it survives a crash
    s->once.ledger[2 * k + 1] = clock + 1;
    if (resent_lost && s->once.lost_by[k] > 0) s->once.lost_by[k]--;
}

// Whether a push's clock is one its worker's steps can have reached; a
// plausible push's steps are added to what the worker has claimed.
static int clock_plausible(ps_server_t *s, uint32_t k, const wire_header_t *h) {
    struct clock_claim *c = &s->once.claim[k];
    if (c->unanchored) *c = (struct clock_claim){.base = h->clock};
    uint64_t limit = c->base + c->steps + h->aux;
    if (limit < c->base) limit = UINT64_MAX;  // saturate
    if (h->clock > limit) {
        if (!s->cfg.quiet && !s->warned_clock)
            fprintf(stderr,
                    "asgd server %zu: refused a push from worker %u: its clock %llu is beyond the %llu its "
                    "steps allow (further ones are counted, not shown)\n",
                    s->cfg.shard, k, (unsigned long long)h->clock, (unsigned long long)limit);
        s->warned_clock = 1;
        return 0;
    }
    c->steps += h->aux;
    return 1;
}

// Ends worker k's push left unfinished between two parts (it rejoined, was
// evicted or left, or began another push): the parts taken stay applied.
static void end_unfinished(ps_server_t *s, uint32_t k) {
    push_parts_t *p = &s->parts[k];
    if (!p->open) return;
    p->open = 0;
    if (p->next > 0) s->stats.pushes_unfinished++;  // else its first message was refused
    if (s->cfg.mode != SYNC_MODE_BSP) s->parts_applying--;
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
    end_unfinished(s, k);
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
        s->stats.duplicates++;
        s->once.duplicates_by[k]++;
        return send_push_ack(s, &m->identity, h->clock, err, err_len);
    }
    if (!sum && !clock_plausible(s, k, h)) return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    if (sum && s->resumed && h->clock > s->bsp.clock && bsp_skip_to(s, h->clock, err, err_len) != 0) return -1;
    // Late (backup workers): its round was applied without it. Taken (a retry
    // of it is a duplicate) and dropped; the worker's pull of the next round
    // is answered from the model as it is now.
    int late = sum && s->cfg.backup_workers > 0 && h->clock == s->members.clocks.clock[k] && h->clock < s->bsp.clock;
    // BSP: one gradient per worker per clock, for the clock being aggregated.
    if (sum && !late && (h->clock != s->members.clocks.clock[k] || h->clock != s->bsp.clock))
        return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    *p = (push_parts_t){.clock = h->clock, .open = 1, .late = (uint8_t)late, .resent_lost = (uint8_t)resent_lost};
    if (sum && !late) bsp_release(s, k);
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
        s->stats.duplicates++;
        s->once.duplicates_by[k]++;
        return send_push_ack(s, &m->identity, h->clock, err, err_len);
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

// Takes the payload of a push admitted for worker k, [from, from + count) of
// the shard (a dense part), or the whole of a sparse or encoded one. Returns
// 1, or 0 when it was refused (not finite, not decodable), -1 on a socket error.
static int take_payload(ps_server_t *s, zmsg_t *m, size_t from, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    push_parts_t *p = &s->parts[k];
    int sum = (h->flags & WIRE_FLAG_SUM) != 0;
    if (p->late) {
        if (from > 0 || h->count < s->n) s->stats.parts_taken++;
        return 1;  // dropped, unread
    }
    // A dense update: as sent, or decoded (a compressed push, whose decoder
    // refuses values that are not finite along with everything malformed).
    const float *dense = h->payload_kind == PAYLOAD_KIND_DENSE ? zmsg_payload(m, 0) : NULL;
    if (h->payload_kind == PAYLOAD_KIND_ENCODED) {
        char detail[256];
        if (compress_decode(zmsg_payload(m, 0), zmq_msg_size(&m->frames[0]), s->n, s->upd.decoded, detail,
                            sizeof detail) != 0) {
            if (!s->cfg.quiet && !s->warned[WIRE_STATUS_BAD_ENCODING])
                fprintf(stderr,
                        "asgd server %zu: refused a push from worker %u: %s (further ones are counted, not shown)\n",
                        s->cfg.shard, k, detail);
            s->warned[WIRE_STATUS_BAD_ENCODING] = 1;
            end_unfinished(s, k);
            return reject(s, &m->identity, WIRE_STATUS_BAD_ENCODING, h, err, err_len);
        }
        dense = s->upd.decoded;
    } else if (!push_is_finite(s, m)) {
        mark_diverged(s, h, from);
        s->upd.told_diverged[k] = 1;
        end_unfinished(s, k);
        return reject(s, &m->identity, WIRE_STATUS_NOT_FINITE, h, err, err_len);
    }
    s->stats.bytes_in += h->payload_kind == PAYLOAD_KIND_ENCODED
                             ? zmq_msg_size(&m->frames[0])
                             : h->count * (h->payload_kind == PAYLOAD_KIND_SPARSE ? 8u : 4u);  // accepted pushes only
    if (from > 0 || (dense && h->count < s->n)) s->stats.parts_taken++;
    if (!sum && from == 0) {
        record_staleness(s, k, s->members.clocks.clock[k], h->param_version);
        uint64_t tau = s->stats.version > h->param_version ? s->stats.version - h->param_version : 0;
        p->lr = stale_update_lr(&s->cfg.stale, warmed_up_lr(s), tau);
    }
    uint64_t span = TRACE_BEGIN();
    if (sum) {
        float *g = s->bsp.grad + (size_t)k * s->n;
        if (h->payload_kind == PAYLOAD_KIND_DENSE && h->count == s->n) {
            zmq_msg_move(&s->bsp.held[k], &m->frames[0]);  // kept, not copied: read once, when the round is applied
        } else if (dense) {
            memcpy(g + from, dense, (h->payload_kind == PAYLOAD_KIND_DENSE ? h->count : s->n) * sizeof *g);
        } else {
            memset(g, 0, s->n * sizeof *g);
            const uint32_t *idx = zmsg_payload(m, 0);
            const float *v = zmsg_payload(m, 1);
            for (uint32_t j = 0; j < h->count; j++) g[idx[j] - s->begin] += v[j];
        }
        TRACE_END(&TK_BUFFER, span, k);
        return 1;
    }
    // An ASP/SSP push sums the gradients of aux local steps (at least 1):
    // the compensation, made for one gradient, is spread over them.
    float lambda = (float)(s->cfg.stale.dc_lambda / (double)(h->aux ? h->aux : 1));
    const float *backup = s->upd.backup ? s->upd.backup + (size_t)k * s->n : NULL;
    if (dense) {
        size_t count = h->payload_kind == PAYLOAD_KIND_DENSE ? h->count : s->n;
        const float *g = dense;
        if (backup) {
            memcpy(s->upd.scratch_g, g, count * sizeof *g);
            dc_asgd_compensate(s->upd.scratch_g, s->upd.w + from, backup + from, count, lambda);
            g = s->upd.scratch_g;
        }
        if (count == s->n) {
            apply_dense(s, g, p->lr);
        } else {
            float *copy = NULL;
            if ((h->flags & WIRE_FLAG_ECHO) && !(copy = echo_frame(s, count, err, err_len))) return -1;
            s->echo_sum =
                ps_values_apply_range(s->upd.values, from, count, g, p->lr, s->upd.h, s->cfg.adagrad_eps, copy);
            s->upd.w = ps_values_get(s->upd.values);
        }
    } else {
        // The kernels index by parameter; shift the indices into the shard.
        const uint32_t *idx = zmsg_payload(m, 0);
        const float *v = zmsg_payload(m, 1);
        uint32_t *local = s->upd.scratch_idx;
        for (uint32_t j = 0; j < h->count; j++) local[j] = idx[j] - (uint32_t)s->begin;
        if (backup) {
            for (uint32_t j = 0; j < h->count; j++) {
                float g = v[j];
                s->upd.scratch_g[j] = g + lambda * g * g * (s->upd.w[local[j]] - backup[local[j]]);
            }
            v = s->upd.scratch_g;
        }
        s->upd.w = ps_values_write(s->upd.values);
        if (s->upd.h)
            adagrad_update_sparse_cpu(h->count, p->lr, s->cfg.adagrad_eps, local, v, s->upd.h, s->upd.w);
        else
            sgd_update_sparse_cpu(h->count, p->lr, local, v, s->upd.w);
    }
    TRACE_END(&TK_APPLY, span, k);
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
    if (sum && (h->flags & WIRE_FLAG_ECHO) && queue_pull(s, &m->identity, k, h->clock + 1, NULL, 0, err, err_len) != 0)
        return -1;
    if (p->late) {
        s->once.late_by[k]++;
        s->stats.late_dropped++;
        count_applied(s, k, h->clock, p->resent_lost);
    } else if (sum) {
        s->bsp.examples[k] = h->aux;
        s->bsp.version[k] = h->param_version;
        count_applied(s, k, h->clock, p->resent_lost);
        if (bsp_maybe_apply(s, err, err_len) != 0) return -1;
    } else {
        s->stats.version++;
        s->samples += s->cfg.samples_per_step ? (uint64_t)h->aux * s->cfg.samples_per_step : h->aux;
        count_applied(s, k, h->clock, p->resent_lost);
    }
    if (send_push_ack(s, &m->identity, h->clock, err, err_len) != 0) return -1;
    return serve_pending(s, err, err_len);
}

// Answers a part taken from a push that asked for its values back
// (WIRE_FLAG_ECHO): its range as it stood once the part was applied (copied
// and checksummed in the pass that applied it), named with the version the
// push makes once whole. The last part's
// answer completes the worker's pull.
static int echo_range(ps_server_t *s, zmsg_t *m, size_t from, int last, char *err, size_t err_len) {
    uint32_t k = m->h.sender, count = m->h.count;
    wire_header_t h = reply_header(s, MSG_TYPE_PARAMS);
    h.param_version = s->stats.version + 1;
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.offset = s->begin + from;
    h.count = count;
    h.checksum = s->echo_sum;  // of s->echo_frame, filled as the part was applied
    if (s->upd.backup) memcpy(s->upd.backup + (size_t)k * s->n + from, s->upd.w + from, count * sizeof(float));
    s->stats.bytes_out += 4u * count;
    if (last) {
        s->stats.pulls_answered++;
        note_sent(s, k, h.param_version, h.clock);
    }
    return zmsg_send_sealed(s->sock, &m->identity, &h, &s->echo_frame, 1, 0, err, err_len);
}

// A push: in one message, or one part of a push in parts (a dense range that
// is not the whole shard; parts come in order, docs/protocol.md).
static int handle_push(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    wire_status_t why = check_push(s, h, m);
    if (why != WIRE_STATUS_OK) return reject(s, &m->identity, why, h, err, err_len);
    int sum = (h->flags & WIRE_FLAG_SUM) != 0, dense = h->payload_kind == PAYLOAD_KIND_DENSE;
    int echo = (h->flags & WIRE_FLAG_ECHO) != 0;
    if (sum != (s->cfg.mode == SYNC_MODE_BSP) || (echo && !sum && !dense))
        return reject(s, &m->identity, WIRE_STATUS_BAD_KIND, h, err, err_len);
    size_t from = dense ? h->offset - s->begin : 0;
    int last = !dense || from + h->count == s->n, whole = from == 0 && last;
    int rc = from > 0 ? admit_part(s, m, from, last, err, err_len) : admit_push(s, m, last, err, err_len);
    if (rc != 1) return rc;
    if ((rc = take_payload(s, m, from, err, err_len)) != 1) return rc;
    s->parts[h->sender].next = from + (dense ? h->count : s->n);
    if (echo && !sum && !whole && echo_range(s, m, from, last, err, err_len) != 0) return -1;
    if (!last) return 0;
    if (finish_push(s, m, err, err_len) != 0) return -1;
    return echo && !sum && whole ? send_params(s, &m->identity, h->sender, NULL, 0, 0.0, err, err_len) : 0;
}

static int handle_pull(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    const uint32_t *keys = NULL;
    if (h->payload_kind == PAYLOAD_KIND_KEYS) {
        keys = zmsg_payload(m, 0);
        for (uint32_t j = 0; j < h->count; j++)
            if (keys[j] < s->begin || keys[j] >= s->end || (j > 0 && keys[j] <= keys[j - 1]))
                return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    } else if (h->payload_kind != PAYLOAD_KIND_NONE) {
        return reject(s, &m->identity, WIRE_STATUS_BAD_KIND, h, err, err_len);
    }
    // The worker took the staleness bound off the clock it names (ssp_gate's pull_clock).
    if (s->parts_applying == 0 && ssp_gate(h->clock, ready_clock(s), 0).proceed)
        return send_params(s, &m->identity, h->sender, keys, h->count, 0.0, err, err_len);
    return queue_pull(s, &m->identity, h->sender, h->clock, keys, h->count, err, err_len);
}

// Drops the pulls worker k is waiting on (it was evicted: nobody is there to answer).
static void drop_pending_of(ps_server_t *s, uint32_t k) {
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

// Done when every worker has joined and left (joiners' slots nobody took do
// not count); with a worker timeout, also once
// none is live and a further timeout passed without a rejoin.
static int run_finished(const ps_server_t *s, double now) {
    int all_left = 1, none_live = 1;
    for (size_t k = 0; k < s->cfg.n_workers; k++) {
        if (!s->members.clocks.joined[k] && k >= s->members.clocks.n_start) continue;  // a joiner's slot nobody took
        if (!s->members.clocks.joined[k]) return 0;
        all_left &= s->members.clocks.left[k];
        none_live &= !clock_table_is_live(&s->members.clocks, k);
    }
    if (all_left) return 1;
    return s->cfg.worker_timeout_ms > 0 && none_live &&
           (now - s->members.quiet_since) * 1000.0 >= s->cfg.worker_timeout_ms;
}

static void note_not_live(ps_server_t *s, double now) {
    if (clock_table_live(&s->members.clocks) == 0) s->members.quiet_since = now;
}

// Evicts every joined, live worker silent for longer than the worker timeout:
// the minimum clock no longer counts it, so SSP waits and BSP rounds go on.
static void evict(ps_server_t *s, uint32_t k, double now) {
    uint64_t span = TRACE_BEGIN();
    s->members.clocks.evicted[k] = 1;
    s->stats.evictions++;
    end_unfinished(s, k);
    drop_pending_of(s, k);
    note_not_live(s, now);
    TRACE_END(&TK_EVICT, span, k);
}

int ps_server_evict(ps_server_t *s, uint32_t k, char *err, size_t err_len) {
    if (k >= s->cfg.n_workers || !s->members.clocks.joined[k] || !clock_table_is_live(&s->members.clocks, k)) return 0;
    evict(s, k, mono_clock_s());
    if (bsp_maybe_apply(s, err, err_len) != 0) return -1;
    return serve_pending(s, err, err_len);
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
    if (bsp_maybe_apply(s, err, err_len) != 0) return -1;
    return serve_pending(s, err, err_len);
}

// HELLO from a worker that joined before (a restarted process, or one that was
// evicted) is a rejoin: it continues from the latest of its own clock, the
// clock it proposes (what another shard told it) and the slowest live worker's,
// so it neither holds the others back nor repeats rounds; its count of pushes
// since joining starts again.
static void rejoin(ps_server_t *s, uint32_t k, uint64_t proposed) {
    uint64_t span = TRACE_BEGIN();
    uint64_t c = s->members.clocks.clock[k];
    if (proposed > c) c = proposed;
    uint64_t others = clock_table_min_others(&s->members.clocks, k);
    if (others != UINT64_MAX && others > c) c = others;
    if (s->cfg.mode == SYNC_MODE_BSP && s->bsp.clock > c) c = s->bsp.clock;
    if (!s->cfg.quiet)
        fprintf(stderr, "asgd server %zu: worker %u rejoined%s at clock %llu (it had pushed %llu rounds)\n",
                s->cfg.shard, k, s->members.clocks.evicted[k] ? " after eviction" : "", (unsigned long long)c,
                (unsigned long long)s->members.clocks.clock[k]);
    s->members.clocks.clock[k] = c;
    s->members.clocks.evicted[k] = 0;
    s->members.clocks.left[k] = 0;
    s->members.clocks.pushes[k] = 0;
    s->stats.rejoins++;
    TRACE_END(&TK_REJOIN, span, k);
}

// A joiner's HELLO (asgd worker --join) is admitted unless its slot is live
// under another joiner: a retry (or a later HELLO round) carries the same
// nonce. Nonces are not checkpointed: a resumed shard (nonce 0) takes the
// live joiner's HELLO back.
static int admit_joiner(ps_server_t *s, uint32_t k, uint32_t nonce) {
    if (s->members.clocks.joined[k] && clock_table_is_live(&s->members.clocks, k) && s->once.join_nonce[k] != 0 &&
        s->once.join_nonce[k] != nonce)
        return 0;
    s->once.join_nonce[k] = nonce;
    return 1;
}

// The first HELLO of a joiner's slot: it enters at the slowest live member's
// clock (or the one it proposes, what another shard told it, if later); under
// BSP at the round after the one being aggregated, which completes without it.
static void enter(ps_server_t *s, uint32_t k, uint64_t proposed) {
    uint64_t c = clock_table_entry_clock(&s->members.clocks, k);
    if (s->cfg.mode == SYNC_MODE_BSP && c < s->bsp.clock + 1) c = s->bsp.clock + 1;
    if (proposed > c) c = proposed;
    s->members.clocks.clock[k] = c;
    if (!s->cfg.quiet)
        fprintf(stderr, "asgd server %zu: worker %u joined the run at clock %llu\n", s->cfg.shard, k,
                (unsigned long long)c);
}

// A copy of the last HELLO handled from worker k: the same client (nonce,
// never 0 from ps_client) proposing the same clock. A later HELLO round of
// the same client proposes a later clock, and is handled.
static int hello_resent(const ps_server_t *s, uint32_t k, const wire_header_t *h) {
    const struct hello_seen *seen = &s->once.hello[k];
    return s->members.clocks.joined[k] && h->aux != 0 && seen->nonce == h->aux && seen->proposed == h->clock;
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
    // An observer reads the model and nothing else (ps_server.h).
    if (h->sender == WIRE_NO_ID && h->type == MSG_TYPE_PULL && h->shard == s->cfg.shard &&
        h->payload_kind == PAYLOAD_KIND_NONE)
        return handle_pull(s, m, err, err_len);
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
        return reject(s, &m->identity, WIRE_STATUS_NOT_FINITE, h, err, err_len);
    }
    switch (h->type) {
        case MSG_TYPE_HELLO:
            if (h->count != 0 || h->offset != s->cfg.n_params)
                return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
            if ((h->flags & WIRE_FLAG_JOIN) && !admit_joiner(s, k, h->aux))
                return reject(s, &m->identity, WIRE_STATUS_ID_LIVE, h, err, err_len);
            if (hello_resent(s, k, h)) {
                s->stats.hellos_resent++;
                s->members.last_heard[k] = now;
                return send_welcome(s, &m->identity, s->once.hello[k].welcomed, err, err_len);
            }
            end_unfinished(s, k);  // a new client sends its pushes anew
            if (s->members.clocks.joined[k])
                rejoin(s, k, h->clock);
            else if (k >= s->members.clocks.n_start)
                enter(s, k, h->clock);
            s->once.resend_clock[k] = 0;  // a new client: the lost push is not resent
            s->once.claim[k] = (struct clock_claim){.base = s->members.clocks.clock[k]};
            s->members.clocks.joined[k] = 1;
            s->members.last_heard[k] = now;
            s->once.hello[k] = (struct hello_seen){h->aux, h->clock, s->members.clocks.clock[k]};
            if (send_welcome(s, &m->identity, s->members.clocks.clock[k], err, err_len) != 0) return -1;
            // A raised clock can complete a round or answer a waiting pull.
            if (bsp_maybe_apply(s, err, err_len) != 0) return -1;
            return serve_pending(s, err, err_len);
        case MSG_TYPE_PUSH:
            if (!s->members.clocks.joined[k] || s->members.clocks.left[k])
                return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
            if (s->members.clocks.evicted[k]) return reject(s, &m->identity, WIRE_STATUS_EVICTED, h, err, err_len);
            s->members.last_heard[k] = now;
            return handle_push(s, m, err, err_len);
        case MSG_TYPE_PULL:
            if (!s->members.clocks.joined[k]) return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
            if (s->members.clocks.evicted[k]) return reject(s, &m->identity, WIRE_STATUS_EVICTED, h, err, err_len);
            s->members.last_heard[k] = now;
            return handle_pull(s, m, err, err_len);
        case MSG_TYPE_BYE:
            // Idempotent: a retried BYE is answered again.
            s->members.clocks.left[k] = 1;
            end_unfinished(s, k);
            note_not_live(s, now);
            if (send_simple(s, &m->identity, MSG_TYPE_BYE_ACK, 0, err, err_len) != 0) return -1;
            if (bsp_maybe_apply(s, err, err_len) != 0) return -1;
            return serve_pending(s, err, err_len);
        default:
            count_dropped(s, WIRE_STATUS_BAD_TYPE);
            return 0;
    }
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

int ps_server_run(ps_server_t *s, atomic_int *stop, char *err, size_t err_len) {
    zmq_pollitem_t item = {.socket = s->sock, .events = ZMQ_POLLIN};
    double now = mono_clock_s();
    // Eviction counts silence from when this shard started serving (a resumed
    // shard's workers get a full timeout to reach it).
    for (size_t k = 0; k < s->cfg.n_workers; k++) s->members.last_heard[k] = now;
    s->members.quiet_since = now;
    s->next_checkpoint = now + s->cfg.checkpoint_every_s;
    publish_progress(s);  // a resumed shard's counts
    double turn_end = now;
    while (!(stop && atomic_load(stop))) {
        int rc = zmq_poll(&item, 1, 100);
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
            double gap = now - turn_end;
            for (size_t k = 0; k < s->cfg.n_workers; k++)
                s->members.last_heard[k] = s->members.last_heard[k] + gap < now ? s->members.last_heard[k] + gap : now;
            s->members.quiet_since = s->members.quiet_since + gap < now ? s->members.quiet_since + gap : now;
            s->stats.stalls++;
        }
        turn_end = now;
        // Drain what is queued before polling again.
        while (rc > 0) {
            int events = 0;
            size_t len = sizeof events;
            if (zmq_getsockopt(s->sock, ZMQ_EVENTS, &events, &len) != 0)
                return ZMQ_FAIL("server: zmq_getsockopt(ZMQ_EVENTS)", err, err_len);
            if (!(events & ZMQ_POLLIN)) break;
            zmsg_t m;
            int got = zmsg_recv_deferred(s->sock, 1, s->cfg.run_id, &m, err, err_len);
            if (got < 0) {
                if (errno == EAGAIN) break;
                return -1;
            }
            int hrc = 0;
            if (got == 0)
                count_dropped(s, m.status);
            else if (s->hooks.on_message && (hrc = s->hooks.on_message(s->hooks.ctx, s, &m, err, err_len)) != 0)
                hrc = hrc < 0 ? -1 : 0;  // 1: taken by the hook
            else
                hrc = handle(s, &m, now, err, err_len);
            zmsg_close(&m);
            publish_progress(s);
            if (hrc != 0) return -1;
            if (run_finished(s, now) && !s->upd.diverged) return 0;
        }
        if (s->upd.diverged) {
            if (diverged_done(s, now)) {
                snprintf(err, err_len, "%s", s->upd.diverged_msg);
                return -1;
            }
            continue;
        }
        if (evict_silent(s, now, err, err_len) != 0) return -1;
        publish_progress(s);  // an eviction can complete a BSP round
        maybe_checkpoint(s, now);
        if (guard_memory(s, now, err, err_len) != 0) return -1;
        if (run_finished(s, now)) return 0;
        if (s->hooks.on_turn) {
            int t = s->hooks.on_turn(s->hooks.ctx, s, err, err_len);
            if (t != 0) return t < 0 ? -1 : 0;
        }
    }
    return 0;
}

size_t ps_server_bytes_per_param(const ps_config_t *c) {
    // The values and the buffer they move to while a reply holds them; the
    // scratch of a sparse or encoded push (an index, a gradient, a decoded value).
    size_t bytes = 2 * sizeof(float) + sizeof(uint32_t) + 2 * sizeof(float);
    if (c->optimizer == OPTIMIZER_KIND_ADAGRAD) bytes += sizeof(float);
    if (c->stale.dc_lambda > 0) bytes += c->n_workers * sizeof(float);  // each worker's backup
    if (c->mode == SYNC_MODE_BSP) bytes += c->n_workers * sizeof(float);  // each worker's gradient of the round
    return bytes;
}
