#ifndef ASGD_ENGINE_REPLICA_GLOBAL_EVAL_H
#define ASGD_ENGINE_REPLICA_GLOBAL_EVAL_H
// The run's global-model evaluator: a thread in the process that serves shard
// 0, beside the serving thread. At every evaluation point it reads the model
// the servers hold — every shard, through an observer pull (ps_client.h) — and
// evaluates it on the test set, so that a distributed run's curve is of the
// model that matters, not of one worker's local copy.
//
// Evaluation points are the same as a single process's: every `every_samples`
// training examples summed over all workers (shard 0's count of the examples
// behind the updates it applied) and/or every `every_s` seconds since the
// evaluator started. The pull names the slowest worker's clock as shard 0
// saw it, so no shard is read before it has every worker's updates up to
// that clock (under BSP: exactly the rounds applied; under ASP and SSP a shard
// may hold later pushes too).
//
// Evaluation is off the clock, as `asgd train`'s is: at each point the pulled
// model is kept as a snapshot, and the snapshots are evaluated after training
// (global_eval_stop), when nothing competes with the workers for the cores.
// Snapshots beyond `snapshot_budget_bytes` are evaluated at once instead, on
// this thread while the workers train; such rows say so (during_training).
//
// The last point is the end of training: the shards, configured for it
// (ps_config_t.observer_linger_ms), serve on once every worker has left and
// say so in shard 0's progress; the evaluator then reads the final model,
// keeps it whatever the budget (training is over), and says BYE to every
// shard, which lets them end.
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/model.h"
#include "net/ps_key_map.h"
#include "net/ps_server.h"

typedef struct global_eval global_eval_t;

typedef struct global_eval_row {
    double wall_s;  // seconds since the evaluator started, when the pulled model had come
    uint64_t samples;  // examples behind the updates shard 0 had applied then (all workers): at
        // least those the model holds
    uint64_t updates;  // shard 0's version then
    double test_loss, test_metric;
    double wait_s;  // workers' conditional pulls at shard 0 so far (SSP, BSP)
    // Staleness of the updates shard 0 applied so far (NaN: none yet).
    double staleness_versions_mean, staleness_versions_max, staleness_clocks_mean, staleness_clocks_max;
    double eval_s;  // the pull and evaluation's own time (not a training cost)
    int during_training;  // evaluated while the workers trained (the snapshot budget was spent)
} global_eval_row_t;

typedef struct global_eval_config {
    void *zmq_ctx;
    uint64_t run_id;
    const char *const *servers;  // (n_servers) shard endpoints
    size_t n_servers;
    size_t n_params;  // parameters the model evaluated holds: the servers', or with keys its own
    const model_t *model;
    // NULL: the servers' whole model is read. Else the model holds only some
    // of the servers' keys (net/ps_key_map.h: those its test examples read),
    // and only those are pulled; n_params is their count. Borrowed.
    const ps_key_map_t *keys;
    size_t eval_limit;  // test examples per evaluation; 0: all
    uint64_t every_samples;  // 0: by time only
    double every_s;  // 0: by samples only
    ps_server_t *shard;  // shard 0, served by another thread of this process (borrowed; its progress is waited on)
    size_t snapshot_budget_bytes;  // models kept for evaluation after training; beyond it, evaluated at once
    int timeout_ms;  // longest wait for a shard's answer
    // Called on the evaluator's thread with each row as it is made (NULL: none),
    // e.g. to show the run's progress while it trains.
    void (*on_row)(const global_eval_row_t *row, void *ctx);
    void *on_row_ctx;
} global_eval_config_t;

// Starts the evaluator thread; its first row is the model as the run starts.
// The config and what it points to must outlive global_eval_stop.
// Returns NULL with err filled.
global_eval_t *global_eval_start(const global_eval_config_t *c, char *err, size_t err_len);

// Stops it (a pull in flight is abandoned: a shard may be gone already),
// joins the thread, then evaluates the snapshots it kept, in order (on_row is
// called for each). Returns 0, or -1 with err when an evaluation failed.
int global_eval_stop(global_eval_t *g, char *err, size_t err_len);

// The rows so far (valid until destroy); call after global_eval_stop.
const global_eval_row_t *global_eval_rows(const global_eval_t *g, size_t *n);

// The parameters it reads at each point: the servers' model's, or with keys
// (global_eval_config_t.keys) those its test examples read.
size_t global_eval_params(const global_eval_t *g);

// Raised once the first point (the model as the run starts) is taken, or the
// evaluator stopped or failed before it: shard 0 holds the workers' HELLOs
// until then (ps_server_hold_hellos), so that no push is applied anywhere
// before the untrained model is read.
const atomic_int *global_eval_first_taken(const global_eval_t *g);

void global_eval_destroy(global_eval_t **g);

#endif
