#ifndef ASGD_NET_PS_SERVER_H
#define ASGD_NET_PS_SERVER_H
// One shard of a parameter server (Downpour): it holds a contiguous range of
// the model's parameters, applies the updates workers push with its own
// optimizer, answers pulls, and enforces the run's staleness bound.
//
// Under ASP and SSP each push is applied on arrival. Under BSP (pushes flagged
// WIRE_FLAG_SUM) the server keeps every worker's gradient of the current clock
// and, once all live workers have pushed it, sums them in worker order weighted
// by their example counts and applies the sum once. A pull that names a clock
// c is answered only when every live worker has pushed c rounds, which is how
// SSP and BSP workers wait. With backup workers b > 0 (Chen et al. 2016) a BSP
// round is applied once the first N - b of its gradients are in (or every live
// worker's); a gradient arriving after its round was applied is late: it is
// acknowledged, counted (ps_server_late_per_worker) and dropped, and a pull
// naming clock c is answered once round c - 1 is applied.
//
// Observers: a PULL whose sender is WIRE_NO_ID comes from a reader of the
// global model (the run's evaluator), not a worker: the whole shard, or the
// values at some keys. It needs no HELLO, may
// name a clock like a worker's pull, and changes nothing: no worker's read
// clock, no DC-ASGD backup, no worker counters (it is counted in
// observer_pulls).
//
// Failures (docs/reliability.md): a worker silent (no message, no heartbeat)
// for longer than worker_timeout_ms is evicted — it no longer holds anyone back
// — and a HELLO from a worker that joined before is a rejoin: it continues from
// the slowest live worker's clock (or its own, if later). A push whose clock is
// below the worker's clock here was applied already (a retry): it is
// acknowledged again and not applied, so a retried push is applied once. A
// push holding NaN or Inf is refused and the shard stops: the run diverged.
//
// The server is single-threaded: ps_server_run is its whole life, and it owns
// its ROUTER socket; only ps_server_progress may be called from other threads
// while it runs.
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "staleness/histogram.h"
#include "staleness/stale_update.h"
#include "staleness/sync_mode.h"
#include "net/ps_progress.h"
#include "net/wire.h"
#include "kernels/optimizer_kind.h"

typedef struct ps_config {
    uint64_t run_id;
    size_t shard, n_shards;
    size_t n_params;  // the whole model's
    size_t n_workers;  // slots: the most workers the run may have (--max-workers)
    // Workers the run starts with (--workers), 0: n_workers. Slots from here on
    // are for joiners (HELLO with WIRE_FLAG_JOIN): they hold nobody back until
    // they join, and enter at the slowest live member's clock (docs/reliability.md).
    size_t n_start_workers;
    sync_mode_t mode;  // BSP, SSP or ASP (allreduce runs have no server)
    uint64_t staleness;  // SSP bound (sync_mode_bound gives the effective one)
    optimizer_kind_t optimizer;
    float lr;
    uint64_t warmup;  // > 0: the step grows linearly over the first `warmup` updates applied (--warmup)
    float adagrad_eps;
    int heartbeat_ms;  // ZMTP heartbeats on the server socket; 0 = off
    int worker_timeout_ms;  // evict a joined worker silent this long; 0 = never
    // Every checkpoint_every_s seconds (> 0) the shard writes its whole state
    // to checkpoint_path (ps_server_save), which ps_server_resume restores.
    const char *checkpoint_path;
    double checkpoint_every_s;
    // ASP/SSP: what is done to a stale update before it is applied: the step
    // divided by its staleness in versions, and/or DC-ASGD's compensation
    // against the shard as the worker last pulled it whole.
    stale_update_config_t stale;
    // Examples one local step of an ASP/SSP worker takes (its --batch): a push's
    // aux counts steps, so the shard's count of samples applied is aux times this.
    // 0: aux counts examples (BSP gradients, hybrid's sparse pushes).
    size_t samples_per_step;
    // BSP: a round is applied once n_workers - backup_workers gradients of it
    // arrived (0: every live worker's, the classic rule); < n_workers.
    size_t backup_workers;
    // Bytes the process may grow beyond its size when the shard started
    // before the shard shuts every connection down (net/memory_guard.h: a peer
    // that never ends a message); 0: automatic, 256 MiB plus 8 pushes per
    // worker slot; SIZE_MAX: no guard.
    size_t memory_allowance;
    int quiet;  // no per-message warnings on stderr
    // BSP: offer the workers on this machine their rounds through shared
    // memory (net/ps_local_round.h; --ps-transport shm); 0: the socket only.
    int local_rounds;
    // > 0: the run's global-model evaluator (an observer) reads this shard.
    // Once every worker has left, the shard says so in its progress
    // (ps_progress_t.workers_gone) and serves on until the observer's BYE
    // (it has read the final model), or for this long at most.
    int observer_linger_ms;
} ps_config_t;

typedef struct ps_stats {
    uint64_t version;  // updates applied to this shard
    uint64_t pushes_applied;  // all workers
    uint64_t pulls_answered;
    uint64_t pulls_waited;  // pulls that had to wait for slower workers
    uint64_t observer_pulls;  // pulls answered to observers (the global-model evaluator)
    uint64_t bytes_in, bytes_out;  // payload bytes
    uint64_t dropped[WIRE_STATUS_COUNT_];  // invalid messages, by reason
    uint64_t dropped_total;
    uint64_t rejected;  // valid on the wire but refused (REJECT sent)
    uint64_t duplicates;  // retried pushes acknowledged again, not applied
    uint64_t evictions, rejoins;  // workers evicted for silence; HELLOs from workers seen before
    uint64_t hellos_resent;  // copies of a HELLO answered already: its WELCOME sent again
    uint64_t memory_trips;  // times the memory guard shut every connection down
    uint64_t connections_dropped;  // connections it shut down
    uint64_t stalls;  // gaps > 0.5 s between serving turns, not counted as workers' silence
    uint64_t rounds_skipped;  // BSP rounds a resumed shard had lost (applied after its checkpoint)
    uint64_t late_dropped;  // BSP with backup workers: gradients that came after their round
    uint64_t local_posts;  // BSP gradients taken from shared memory (net/ps_local_round.h)
    // Dense pushes sent in parts (range messages, docs/protocol.md "Pushes in
    // parts"): parts taken; parts of a push taken already, or of the part
    // being taken, resent and skipped; parts dropped because an earlier one
    // of their push never came (the worker's retry sends them all again);
    // pushes left unfinished (their worker rejoined, was evicted or left
    // between two parts: the parts taken stay applied).
    uint64_t parts_taken, parts_skipped, parts_out_of_order, pushes_unfinished;
    // BSP: pulls answered range by range while their round's sum was applied
    // (a shard of at least 2^19 parameters; docs/protocol.md).
    uint64_t pulls_in_ranges;
    // Whole-shard replies (net/ps_reply.h): sent zero-copy, copied (the other
    // buffer still lent), and updates written to the other buffer because a
    // reply still held the values.
    uint64_t replies_lent, replies_copied, writes_moved;
    uint64_t checkpoints, checkpoint_failures;
    uint64_t resumed_version;  // the version a resumed shard was restored at (0: not resumed)
    uint64_t lost_unknown;  // 1: resumed without the ledger of what the crash lost
    uint64_t min_clock, max_clock;
    // Per update (docs/distributed.md, "Staleness, measured"): in clocks, the
    // first round it covers minus the min clock reported with the oldest
    // parameters it read; in versions, the shard's version at apply minus that
    // of the oldest parameters it read. BSP: 0 and 0.
    staleness_hist_t staleness_clocks;
    staleness_hist_t staleness_updates;
} ps_stats_t;

typedef struct ps_server ps_server_t;
struct zmsg;

// Replication (net/ps_replica.h) hooks into the serving loop. on_message sees
// every valid message before the shard handles it: it returns 0 to let the
// shard handle it, 1 when it took the message, -1 (err filled) to fail.
// on_turn runs at every turn of the loop (at least every 100 ms): 0 goes on,
// 1 ends ps_server_run with 0, -1 fails it. on_evict runs before the shard
// evicts worker k for silence: 0 goes on, -1 fails.
typedef struct ps_server_hooks {
    int (*on_message)(void *ctx, ps_server_t *s, struct zmsg *m, char *err, size_t err_len);
    int (*on_turn)(void *ctx, ps_server_t *s, char *err, size_t err_len);
    int (*on_evict)(void *ctx, ps_server_t *s, uint32_t worker, char *err, size_t err_len);
    void *ctx;
} ps_server_hooks_t;

// Binds the server's ROUTER to `endpoint` ("tcp://127.0.0.1:*" picks a free
// port) and takes a copy of the shard's initial values init[0..range).
// Returns NULL with err filled.
ps_server_t *ps_server_new(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const float *shard_init,
                           char *err, size_t err_len);
void ps_server_destroy(ps_server_t **s);

// Writes the shard's whole state — parameters, optimizer state, every
// worker's clock, liveness and push counts, BSP's buffered gradients, the
// counters, the ledger as it stands and the bound endpoint — to path
// atomically (a checkpoint file, datasets/storage/checkpoint_file.h). Returns 0, or
// -1 with err. A shard configured with checkpoint_path keeps its ledger
// (every push applied, per worker) in CHECKPOINT_PATH.ledger, updated at each
// push, so that a resume counts what the crash lost.
int ps_server_save(const ps_server_t *s, const char *path, char *err, size_t err_len);
// A shard restored from a checkpoint ps_server_save wrote for the same run
// (run id, layout, mode and optimizer are checked). It binds `endpoint`, or
// when NULL the endpoint it had, so that its workers' connections find it
// again. Updates it applied after that checkpoint are lost, and counted per
// worker from the ledger PATH.ledger the crashed shard left
// (ps_server_lost_per_worker; docs/reliability.md).
ps_server_t *ps_server_resume(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const char *path, char *err,
                              size_t err_len);

// Replaces the whole state of s (not yet serving) with the one ps_server_save
// wrote at path from a live replica of the same shard: parameters, optimizer
// state, clocks and dedup table, counters. Nothing counts as lost or resumed.
int ps_server_adopt(ps_server_t *s, const char *path, char *err, size_t err_len);
void ps_server_set_hooks(ps_server_t *s, const ps_server_hooks_t *h);
// Holds the workers' HELLOs unanswered until *open is raised (before
// ps_server_run; *open must outlive the run): shard 0 waits so for its global
// evaluator's first point, the model as the run starts, since no worker
// pushes anywhere before shard 0 has welcomed it. Returns 0, or -1 with err
// (out of memory).
int ps_server_hold_hellos(ps_server_t *s, const atomic_int *open, char *err, size_t err_len);
// The shard's ROUTER socket, for the hooks (the serving thread only).
void *ps_server_socket(ps_server_t *s);
// Evicts worker k as a silence would (a backup, told by its primary): a BSP
// round may complete and waiting pulls be answered. Returns 0, or -1 with err.
int ps_server_evict(ps_server_t *s, uint32_t k, char *err, size_t err_len);
// Sets the eviction timeout (0: never) and restarts every worker's silence
// from now: a promoted backup's workers get a full timeout to reach it.
void ps_server_set_worker_timeout(ps_server_t *s, int worker_timeout_ms);

// The bound endpoint with the port resolved, e.g. "tcp://127.0.0.1:40123".
const char *ps_server_endpoint(const ps_server_t *s);
// The shard's range of parameters, [begin, end).
void ps_server_range(const ps_server_t *s, size_t *begin, size_t *end);

// Serves until every worker has joined and left, or *stop becomes non-zero
// (checked at least every 100 ms), or the socket fails. With a worker timeout,
// it also ends once every worker has left or been evicted and one more timeout
// has passed without a rejoin. Returns 0, or -1 with err (also when a worker
// pushed NaN or Inf: the run diverged).
int ps_server_run(ps_server_t *s, atomic_int *stop, char *err, size_t err_len);

void ps_server_stats(const ps_server_t *s, ps_stats_t *out);
// Where the shard stands, for another thread of the same process (the run's
// global-model evaluator, engine/replica/global_eval.h): published by the serving
// thread after every message it handles, read as one publication
// (net/ps_progress.h). Safe to call from any thread while ps_server_run serves.
void ps_server_progress(const ps_server_t *s, ps_progress_t *out);
// One thread at a time, while ps_server_run serves: sleeps until the shard
// has published `samples` (or more), timeout_s has passed, or another thread
// called ps_server_progress_wake (ps_progress_board_wait): a reader that
// waits for an evaluation point without polling.
void ps_server_progress_wait(ps_server_t *s, uint64_t samples, double timeout_s);
void ps_server_progress_wake(ps_server_t *s);
// Per-worker counters (n_workers entries each): pushes applied since the
// worker last joined, pushes applied over all its joins, and final clocks.
const uint64_t *ps_server_pushes_per_worker(const ps_server_t *s);
const uint64_t *ps_server_pushes_total_per_worker(const ps_server_t *s);
const uint64_t *ps_server_clocks(const ps_server_t *s);
// Per worker, over the whole run (kept in checkpoints): retried pushes
// acknowledged again and not applied; pushes applied and then lost with a
// crash (applied after the checkpoint a resume restored, and not applied
// again since); and the pushes the checkpoint held at the last resume.
// pushes_total_per_worker + lost_per_worker is every push the shard applied
// once (docs/reliability.md).
const uint64_t *ps_server_duplicates_per_worker(const ps_server_t *s);
const uint64_t *ps_server_lost_per_worker(const ps_server_t *s);
const uint64_t *ps_server_resumed_pushes_per_worker(const ps_server_t *s);
// BSP with backup workers, per worker: gradients that arrived after their round
// had been applied without them (acknowledged and dropped; they are among the
// pushes counted above). Since the shard started (not kept in checkpoints).
const uint64_t *ps_server_late_per_worker(const ps_server_t *s);
// The bytes a shard of config c holds per parameter it serves (values, their
// second buffer, push scratch, optimizer state, per-worker buffers), for a
// server to say before it starts whether the machine can hold its shard.
size_t ps_server_bytes_per_param(const ps_config_t *c);

// The shard's current values (range entries).
const float *ps_server_values(const ps_server_t *s);

#endif
