#ifndef ASGD_NET_PS_SERVER_IMPL_H
#define ASGD_NET_PS_SERVER_IMPL_H
// The inside of a parameter-server shard (net/ps_server.h): its state, one
// struct per concern, and the functions each concern's file gives the others.
// Private to net/ps_server*.c; never installed, never included elsewhere.
//
// Each file owns one concern; calls point one way, from the top down:
//   ps_server.c             the shard's life: made, resumed, destroyed
//   ps_server_loop.c        the serving loop: socket, dispatch, progress, hooks
//   ps_server_push.c        a push, from its first part to its acknowledgement
//   ps_server_checkpoint.c  the shard's state to and from a checkpoint
//   ps_server_bsp.c         the BSP round
//   ps_server_pulls.c       the pulls waiting on the clock
//   ps_server_answers.c     what the shard sends: headers, refusals, parameters
//   ps_server_update.c      the values, the optimizer's state, DC-ASGD, divergence
//   ps_server_once.c        the exactly-once ledger
//   ps_server_members.c     membership and clocks
// A file calls only those below it in this list (.ci/check-cycles).
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"  // defines: ckpt_file_t
#include "datasets/storage/counter_file.h"  // defines: counter_file_t
#include "net/buffer_pool.h"  // defines: buffer_pool_t
#include "net/memory_guard.h"  // defines: memory_guard_t
#include "net/ps_progress.h"  // defines: ps_progress_board_t
#include "net/ps_reply.h"  // defines: ps_values_t
#include "net/ps_server.h"
#include "net/zmsg.h"  // defines: zmsg_t
#include "staleness/clock_table.h"  // defines: clock_table_t

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
    uint8_t resent_lost;  // it resends the push a crash lost (ps_once_count_applied)
} push_parts_t;

typedef struct pending_pull {
    zmq_msg_t identity;
    uint32_t worker;
    uint64_t need;  // answer once the min clock reaches this
    uint32_t *keys;  // NULL: the whole shard
    uint32_t n_keys;
    uint64_t tag;  // a keyed pull's tag (wire.h), repeated by its answer
    double since;  // when it started waiting
} pending_pull_t;

// Membership and clocks: who is in the run, how far each worker got, what
// each was sent, what its clock can plausibly be, and the HELLOs answered.
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
    zmq_msg_t *held;  // (n_workers) empty when worker k's gradient is in grad; else its values
    zmq_msg_t *held_keys;  // (n_workers) a sparse gradient's keys (its values in held); empty for a dense one
    uint32_t *merged_keys;  // (merged_cap) a sparse round's keys, shard-local, ascending
    float *merged_sum;  // (merged_cap) the round's weighted sum at each
    size_t merged_cap;
    struct ps_bsp_cursor *cursor;  // (n_workers) a sparse round's merge: where it is in each gradient
    uint32_t *examples;  // (n_workers) 0 = no gradient yet this clock
    uint64_t *version;  // (n_workers) version each gradient was computed from
    float *weight;  // (n_workers) each gradient's share of the round's examples
    const float **terms;  // (n_workers) the gradients summed in a round; NULL: none from that worker
    uint64_t clock;  // the clock being aggregated
} ps_bsp_round_t;

// The exactly-once record (docs/reliability.md), per worker, over the whole run.
typedef struct ps_once {
    uint64_t *duplicates_by;  // (n_workers) pushes acknowledged again and not applied
    uint64_t *lost_by;  // (n_workers) applied, then lost with a crash (after the checkpoint resumed from)
    uint64_t *resumed_by;  // (n_workers) its pushes the checkpoint held at the last resume
    uint64_t *late_by;  // (n_workers) BSP with backup workers: gradients dropped for coming late
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
    // BSP rounds with the workers on this machine through shared memory
    // (net/ps_local_round.h); NULL: none.
    struct ps_local_round *local;
    // Workers' HELLOs held unanswered until *hellos_open
    // (ps_server_hold_hellos): the latest of each worker, has_identity when
    // held; NULL once let through.
    const atomic_int *hellos_open;
    zmsg_t *held_hellos;
    // cfg.observer_linger_ms: when every worker had left (0: not yet), and
    // whether the observer has said BYE since.
    double workers_gone_at;
    int observer_left;
};

// ---- ps_server_loop.c ----------------------------------------------------------
// Makes the shard's ROUTER socket and binds it; busy_wait_s: how long to keep
// trying an address still in use (a restarted shard's previous socket may
// still be closing).
int ps_loop_bind(ps_server_t *s, void *zmq_ctx, const char *endpoint, double busy_wait_s, char *err, size_t err_len);

// ---- ps_server_local.c ---------------------------------------------------------
// Offers shared-memory rounds where the run asks for them and they apply
// (BSP, no backup workers, no replication); else, or when the segment cannot
// be made (said on stderr), the shard serves through its socket alone.
void ps_local_open(ps_server_t *s);
// Worker k's post not taken yet, as the PUSH it stands for (payload read in
// place): 1 with m filled (zmsg_close it), 0.
int ps_local_next(ps_server_t *s, uint32_t k, zmsg_t *m);
// Every answer a shard sends: zmsg_send / zmsg_send_sealed on its socket,
// or, to a local slot's identity, written into the segment.
int ps_send(ps_server_t *s, zmq_msg_t *identity, wire_header_t *h, zmq_msg_t *frames, size_t n_frames, char *err,
            size_t err_len);
int ps_send_sealed(ps_server_t *s, zmq_msg_t *identity, const wire_header_t *h, zmq_msg_t *frames, size_t n_frames,
                   char *err, size_t err_len);

// ---- ps_server_checkpoint.c ----------------------------------------------------
// Restores the state saved in f into s (made by ps_server_new's allocation,
// not bound): the endpoint it served on goes to endpoint, the ledger as the
// checkpoint saw it to ledger_at_checkpoint (2 n_workers).
int ps_checkpoint_restore(ps_server_t *s, const ckpt_file_t *f, char *endpoint, size_t endpoint_len,
                          uint64_t *ledger_at_checkpoint, char *err, size_t err_len);

// ---- ps_server_push.c ----------------------------------------------------------
// A push: in one message, or one part of a push in parts.
int ps_push_handle(ps_server_t *s, zmsg_t *m, char *err, size_t err_len);
// Ends worker k's push left unfinished between two parts (it rejoined, was
// evicted or left, or began another push): the parts taken stay applied.
void ps_push_end_unfinished(ps_server_t *s, uint32_t k);

// ---- ps_server_bsp.c -----------------------------------------------------------
int ps_bsp_init(ps_bsp_round_t *r, size_t n_workers, size_t n);
void ps_bsp_free(ps_bsp_round_t *r, size_t n_workers);
// Worker k's gradient for the round being aggregated (meaningful while
// bsp.examples[k] > 0): a sparse one as received (ps_bsp_sparse: its count of
// keys, ascending, and their values; 0 for a dense one), else dense, as
// received or in bsp.grad (ps_bsp_gradient).
size_t ps_bsp_sparse(const ps_server_t *s, size_t k, const uint32_t **keys, const float **values);
const float *ps_bsp_gradient(const ps_server_t *s, size_t k);
// A sparse gradient written out dense over the shard into out (n floats).
void ps_bsp_scatter(const ps_server_t *s, const uint32_t *keys, const float *values, size_t count, float *out);
// Lets go of worker k's received gradient (its round was applied, or it is replaced).
void ps_bsp_release(ps_server_t *s, size_t k);
// Takes the payload of worker k's gradient m into the round: [from, from +
// count) of a dense one (dense: its values, or an encoded one's decoded),
// or the whole of a sparse one.
void ps_bsp_take(ps_server_t *s, zmsg_t *m, size_t from, const float *dense);
// Applies every round that is complete, answering the pulls each lets through.
int ps_bsp_maybe_apply(ps_server_t *s, char *err, size_t err_len);
// A resumed shard whose workers are at round c: the rounds before it are lost.
int ps_bsp_skip_to(ps_server_t *s, uint64_t c, char *err, size_t err_len);

// ---- ps_server_pulls.c ---------------------------------------------------------
void ps_pulls_free(ps_server_t *s);
// Queues worker's pull until the min clock reaches `need` (keys NULL: the whole shard; tag: a keyed pull's).
int ps_pulls_queue(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, uint64_t need, const uint32_t *keys,
                   uint32_t n_keys, uint64_t tag, char *err, size_t err_len);
// Answers every waiting pull whose clock condition now holds.
int ps_pulls_serve(ps_server_t *s, char *err, size_t err_len);
// Drops the pulls queued for worker k (evicted, or left).
void ps_pulls_drop_of(ps_server_t *s, uint32_t k);
// The pulls at which[0..n) (ascending) were answered in ranges as a BSP
// round was applied, with `version` and min clock `clock`.
void ps_pulls_answered_in_ranges(ps_server_t *s, const size_t *which, size_t n, uint64_t version, uint64_t clock);

// ---- ps_server_answers.c -------------------------------------------------------
wire_header_t ps_answer_header(const ps_server_t *s, uint16_t type);
int ps_answer_simple(ps_server_t *s, zmq_msg_t *identity, uint16_t type, uint32_t aux, char *err, size_t err_len);
int ps_answer_welcome(ps_server_t *s, zmq_msg_t *identity, uint64_t clock, char *err, size_t err_len);
int ps_answer_push_ack(ps_server_t *s, zmq_msg_t *identity, uint64_t push_clock, char *err, size_t err_len);
int ps_answer_reject(ps_server_t *s, zmq_msg_t *identity, wire_status_t why, const wire_header_t *req, char *err,
                     size_t err_len);
// Parameters: the whole shard, or the values at `keys` (global indices) of
// the pull tagged `tag`, to a pull this shard held for held_s seconds.
int ps_answer_params(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, const uint32_t *keys, uint32_t n_keys,
                     uint64_t tag, double held_s, char *err, size_t err_len);

// ---- ps_server_update.c --------------------------------------------------------
int ps_update_init(ps_update_t *u, const ps_config_t *c, size_t n);
void ps_update_start(ps_update_t *u, const float *init, size_t n, size_t n_workers);
void ps_update_free(ps_update_t *u);
// The step for the next update: lr, or during warm-up lr * (version + 1) / warmup.
float ps_update_step(const ps_server_t *s);
// Records an update's staleness; worker's round and the version it read.
void ps_update_record_staleness(ps_server_t *s, uint32_t worker, uint64_t round, uint64_t version);
// The step worker k's ASP/SSP push m is applied with (its staleness recorded).
float ps_update_push_step(ps_server_t *s, uint32_t k, const wire_header_t *h);
// Applies worker k's ASP/SSP push m: [from, from + count) of a dense one
// (dense: its values, or an encoded one's decoded) or a sparse one, with step
// lr. copy (NULL: none) receives a range's new values; returns their checksum.
uint32_t ps_update_apply(ps_server_t *s, zmsg_t *m, size_t from, const float *dense, float lr, float *copy);
// Whether push m's values are all finite.
int ps_update_push_finite(const ps_server_t *s, zmsg_t *m);
// The run diverged at push h (from: where its refused part starts).
void ps_update_mark_diverged(ps_server_t *s, const wire_header_t *h, size_t from);
// DC-ASGD: worker k was sent [from, from + count) of the values as they are now.
void ps_update_remember_sent(ps_server_t *s, uint32_t k, size_t from, size_t count);

// ---- ps_server_once.c ----------------------------------------------------------
int ps_once_init(ps_once_t *o, size_t n_workers);
void ps_once_free(ps_once_t *o);
// With checkpoints, the ledger moves into CHECKPOINT.ledger, holding `values`
// (2 n_workers counters).
int ps_once_open_ledger(ps_server_t *s, const uint64_t *values, char *err, size_t err_len);
// Counts the pushes a crash lost, from the ledger beside the checkpoint at path.
void ps_once_count_lost(ps_server_t *s, const char *path, uint64_t *at_checkpoint);
// Worker k's push of `clock` was applied (under BSP: buffered for its round).
void ps_once_count_applied(ps_server_t *s, uint32_t k, uint64_t clock, int resent_lost);
// Worker k's push came again (applied already): acknowledged, not applied.
void ps_once_count_duplicate(ps_server_t *s, uint32_t k);

// ---- ps_server_members.c -------------------------------------------------------
int ps_members_init(ps_members_t *m, size_t n_workers);
void ps_members_free(ps_members_t *m);
// The clock conditional pulls wait on.
uint64_t ps_members_ready_clock(const ps_server_t *s);
// Worker was sent parameters of `version` with min clock `min_clock`.
void ps_members_note_sent(ps_server_t *s, uint32_t worker, uint64_t version, uint64_t min_clock);
// The min clock this shard reported with `version` when it sent it to worker.
uint64_t ps_members_read_clock(const ps_server_t *s, uint32_t worker, uint64_t version);
// Whether push h's clock is one worker k's steps can have reached.
int ps_members_clock_plausible(ps_server_t *s, uint32_t k, const wire_header_t *h);
// HELLO: whether a joiner's is admitted; whether it is a copy of the last one.
int ps_members_admit_joiner(ps_server_t *s, uint32_t k, uint32_t nonce);
int ps_members_hello_resent(const ps_server_t *s, uint32_t k, const wire_header_t *h);
// HELLO from worker k, not a copy: it joins, enters or rejoins.
void ps_members_hello(ps_server_t *s, uint32_t k, const wire_header_t *h, double now);
// Worker k left (BYE), or is evicted.
void ps_members_leave(ps_server_t *s, uint32_t k, double now);
void ps_members_evict(ps_server_t *s, uint32_t k, double now);
// Whether the run is over for this shard.
int ps_members_run_finished(const ps_server_t *s, double now);
// Every worker counts as heard from at `now`.
void ps_members_heard_all(ps_server_t *s, double now);
// The serving loop stalled `gap` seconds: not the workers' silence.
void ps_members_forgive_stall(ps_server_t *s, double gap, double now);

#endif
