#ifndef ASGD_ENGINE_REPLICA_REPLICA_H
#define ASGD_ENGINE_REPLICA_REPLICA_H
// One worker replica of a distributed run: T training threads on a local copy
// of the model, and one communication thread that keeps it in step with the
// others under the run's consistency model.
//
//   asp, ssp  Downpour. Hogwild! threads train the local copy over this
//             replica's shard of the data. Every push_every steps the
//             communication thread pushes what the replica learned since its
//             last push (the change of the local copy, divided by the local
//             step size: the accumulated gradient) to every server shard, and
//             every fetch_every steps it pulls the global model and rebases
//             the local copy on it, keeping local progress not yet pushed.
//             Under SSP the threads are held before round c until every live
//             worker has pushed c - s rounds and the replica holds parameters
//             that fresh.
//   bsp       a synchronous parameter server: each round the replica's threads
//             average one gradient, it is pushed, the server sums all workers'
//             and applies it once, and every replica pulls the result.
//   allreduce the same rounds without a server: the replicas sum their
//             gradients with a ring allreduce and apply the identical update.
//   local     local SGD: each replica's threads step alone (plain SGD, rounds
//             as in sync mode over its slice of the data), and every H steps
//             (and after the last) the replicas average their models by ring
//             allreduce, weighted by the examples each took since the last
//             average. Evaluations in between are of the model right after an
//             average (see replica_train).
//   hybrid    sparse rows through the servers (asp or ssp), the dense part by
//             ring allreduce.
// Each family of modes is one strategy (engine/replica/sync_strategy.h), chosen
// once from the mode; replica_train takes one path for all of them.
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "engine/core/trainer.h"
#include "engine/gpu/gpu_device.h"
#include "net/compress.h"
#include "staleness/sync_mode.h"

struct collective;
struct worker_ckpt_config;

typedef struct replica_config {
    uint64_t run_id;
    size_t id, n_workers;
    uint32_t join_nonce;  // asp/ssp/bsp: non-zero for a worker joining a running run (ps_client_new_joiner)
    sync_mode_t mode;
    uint64_t staleness;  // SSP bound
    size_t push_every, fetch_every;  // replica steps (asp/ssp)
    // asp: the most of its time the communication thread spends exchanging
    // (a push and its pull), resting between exchanges; 0: it exchanges as
    // often as the periods allow.
    double comm_share;
    const char *const *servers;  // (n_servers) endpoints, shard order
    size_t n_servers;
    // Ring modes (allreduce, local, hybrid): what sums the exchanges, chosen
    // and opened once (engine/replica/collective.h: the ZeroMQ ring, shared
    // memory, the stream ring, hier or MPI; compressed exchanges only on the
    // ZeroMQ ring). Borrowed; NULL in the other modes.
    struct collective *collective;
    int timeout_ms;  // longest wait for any peer
    int heartbeat_ms;  // ZMTP heartbeats, and this worker's heartbeats to the servers; 0 = off
    int retry_ms;  // resend an unanswered request after this long; 0 = the client's default
    step_delay_t delay;  // injected delay after every step (a straggler); {0} = none
    // --device cuda: the replica trains on a GPU (asp/ssp); its communication
    // thread copies parameters to and from the device while training goes on.
    const gpu_options_t *gpu;
    // How gradients travel (docs/compression.md): dense pushes (asp/ssp/bsp)
    // and allreduce rounds; pulls are never compressed. fp16 under allreduce
    // rides the ring's reduce-scatter; the other methods an allgather of every
    // worker's encoding. error_feedback keeps what was not sent for later.
    compress_spec_t compress;  // {COMPRESS_KIND_NONE}: as float32
    int error_feedback;
    uint64_t compress_seed;  // stochastic encodings draw from (seed, worker)
    int hybrid_ssp;  // hybrid: sparse reads under the SSP bound `staleness` (else asp)
    // asp/ssp, a model with a sparse block: a push carries its dense part
    // (the hot parameters) times hot_share, 1 / --workers under --hot-params
    // average, so that the servers' sum is the workers' average there
    // (strategy_downpour.c); 0: summed as every other parameter.
    float hot_share;
    size_t local_steps;  // local: steps (rounds) between model averages, H >= 1
    // (n_servers) where the client adds its pushes sent and acknowledged per
    // shard (ps_client_count_pushes); NULL: not counted.
    struct ps_push_count *push_counts;
    // asp/ssp: the worker's checkpoints and its resume (engine/replica/worker_checkpoint.h);
    // NULL: none (borrowed).
    const struct worker_ckpt_config *ckpt;
    // Raised by the caller once the servers have finished the run (their
    // results are written: a worker they evicted comes back to nobody):
    // every wait for a server then ends, and replica_train fails with
    // stats->servers_finished set. NULL: never (a silent server is waited
    // for timeout_ms).
    const atomic_int *servers_finished;
    // The model holds only these of the servers' keys (its working set:
    // net/ps_key_map.h), moved by key under asp, ssp and bsp; NULL: all of them.
    const struct ps_key_map *key_map;
    // Where the replica counts its pushes and pulls as they happen, for
    // readers on other threads (a worker's live line); NULL: not counted.
    struct replica_live *live;
} replica_config_t;

// The pushes and pulls so far (relaxed counters: a reader sees each one
// some time after it happened, never one that did not).
typedef struct replica_live {
    _Atomic uint64_t pushes, pulls;
} replica_live_t;

// Their values now, for a reader on another thread.
static inline void replica_live_read(const replica_live_t *l, uint64_t *pushes, uint64_t *pulls) {
    *pushes = atomic_load_explicit(&l->pushes, memory_order_relaxed);
    *pulls = atomic_load_explicit(&l->pulls, memory_order_relaxed);
}

typedef struct replica_stats {
    uint64_t pushes, pulls, pushes_acked;
    uint64_t clock;  // push rounds done
    double wait_s;  // asp/ssp: threads held by the staleness bound (summed over threads);
        // bsp: time the round's pull waited for the other workers; allreduce,
        // local and hybrid: time their sums waited for the other workers where
        // the collective tells it apart (shared memory; else 0, inside comm_s)
    double pull_wait_s;  // communication thread blocked in pulls
    // asp/ssp: the periods achieved, in the replica's steps (all threads):
    // between pushes and between pulls (mean NaN, p99 0 when there were none),
    // and the time the shards held this replica's pulls until slower workers
    // caught up (the bound's share of wait_s; the rest waited for bytes).
    double steps_per_push_mean, steps_per_pull_mean;
    uint64_t steps_per_push_p99, steps_per_pull_p99;
    uint64_t pushes_hot_averaged;  // asp/ssp: pushes whose dense part went as 1/n_workers of the change
    uint64_t pushes_hot_sized;  // asp/ssp: pushes of HOGWILD_HOT_TOUCHES examples or more (averaged when asked)
    uint64_t local_rounds;  // bsp: rounds that went through shared memory (net/ps_local_round.h)
    double pull_held_s;
    double comm_s;  // communication thread busy (pushing, pulling, merging)
    uint64_t bytes_out, bytes_in;  // payload bytes sent and received (servers and ring)
    uint64_t bytes_out_raw;  // what the same exchanges would have sent as float32
    double residual_norm;  // error feedback: |residual| at the end (0 without)
    uint32_t dense_checksum;  // wire_checksum of the final dense parameters (all of them without a sparse part)
    uint64_t retries;  // requests sent again for want of an answer
    uint64_t pulls_cancelled;  // asp/ssp: a pull in flight at the end that could not be answered, given up
    uint64_t start_clock;  // the clock it started from: 0, or where it rejoined a run in progress
    int evicted;  // it failed because the servers had evicted it: a new replica may rejoin
    int servers_finished;  // it failed because the servers had finished the run (rc->servers_finished)
    int diverged;  // it failed because the run diverged (NaN or Inf)
    // Ring modes: stopped by a stop signal (tc->interrupt) when its collective
    // failed — the peers, stopped by the same signal one round earlier, had
    // left it. No replica applied that round: final_w holds the parameters
    // of the last round all applied, as the peers' do.
    int stopped_with_peers;
    // The global model at the end (pulled from the servers after this replica's
    // last push; NaN for allreduce, whose replicas all hold the global model).
    double global_test_loss, global_test_metric;
    uint64_t global_versions;  // the shards' versions of that pull, summed (0 without servers)
    const char
        *collective;  // ring modes: "shm", "ring", "hier", "mpi" or "stream", what summed the exchanges; else NULL
    const char *cross_ring;  // hier: its rings across hosts, "stream" or "zeromq"; else NULL
    // A worker resumed from its checkpoint (rc->ckpt->resume): where it went on
    // from, and over all its restarts the samples trained twice (by a dead
    // incarnation after its checkpoint and again) and skipped (trained by none:
    // the servers' clock had moved past them).
    int resumed;
    uint64_t resumed_samples, resumed_clock;
    uint64_t samples_retrained, samples_skipped;
    uint64_t checkpoint_failures;  // worker checkpoints not written (training went on)
} replica_stats_t;

// Trains a fresh replica (parameters from the servers, or initialised with
// init_seed for allreduce) with train_run; tc->mode is set from the sync mode.
// A replica of a worker the servers have seen before rejoins: it starts at the
// clock they give it, skipping the steps (rounds) that clock stands for.
// final_w (may be NULL) receives the final global model: under asp/ssp the
// servers' parameters pulled after this replica's last push, else the replica's.
// Under local SGD the replica's evaluation points between its first and last
// (tc->eval_every, tc->eval_every_s) are taken at the first average at or
// after each point, of the averaged model, by a thread of the replica beside
// training (sharing the cores, not pausing the threads), and reported through
// cb->on_eval like the trainer's own; an average falling while the previous
// evaluation still runs passes the point to the next one.
int replica_train(void *zmq_ctx, const replica_config_t *rc, const model_t *m, const optimizer_config_t *oc,
                  const train_config_t *tc, uint64_t init_seed, const train_callbacks_t *cb, train_result_t *out,
                  replica_stats_t *stats, float *final_w, char *err, size_t err_len);

#endif
