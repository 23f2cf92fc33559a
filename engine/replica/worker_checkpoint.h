#ifndef ASGD_ENGINE_REPLICA_WORKER_CHECKPOINT_H
#define ASGD_ENGINE_REPLICA_WORKER_CHECKPOINT_H
// Checkpoints of a distributed worker (asp and ssp: asgd worker
// --checkpoint-every S, then --resume DIR; docs/reliability.md).
//
// DIR/worker-K.ckpt (datasets/storage/checkpoint_file.h) holds the run's
// identity, the checkpoint's sequence number, the worker's clock, where each
// of its threads is in its data (steps, samples, loss sums, training time),
// the pending update (the local copy's change since its last push, which the
// servers do not have) and what earlier restarts counted. It is written with
// the training threads parked and every push acknowledged, so "pending" is
// exactly what no shard holds.
//
// DIR/worker-K.progress (datasets/storage/counter_file.h, mapped) holds the
// threads' step counters themselves (the trainer's train_thread_progress_t,
// stored by plain stores), so that after a SIGKILL the next incarnation knows
// how far the dead one had trained: the samples trained again are counted
// exactly. It also carries the counts of earlier restarts.
#include <stddef.h>
#include <stdint.h>

#include "datasets/storage/counter_file.h"
#include "engine/core/trainer.h"

// What must match between a worker's checkpoint and the worker resuming it.
typedef struct worker_ckpt_identity {
    uint64_t worker, workers, servers;
    uint64_t mode, staleness;  // sync_mode_t, SSP bound
    uint64_t seed, threads, batch, push_every;
    uint64_t n_params, n_train, n_test;
    uint64_t data;  // a fingerprint of where the data came from (the command's: a CRC of its flags)
    char model[64];  // model_describe(): the model and its layout
} worker_ckpt_identity_t;

// A worker's checkpointing, set by the command (replica_config_t.ckpt).
typedef struct worker_ckpt_config {
    char path[1024];  // DIR/worker-K.ckpt
    char progress_path[1024];  // DIR/worker-K.progress
    double every_s;  // training seconds between checkpoints (0: none; resume only)
    int resume;  // load `path` before training
    worker_ckpt_identity_t id;
    // A checkpoint that could not be written (a full disk): told here, and
    // training goes on with the previous checkpoint in place. NULL: silent.
    void (*on_failure)(void *ctx, const char *err);
    void *failure_ctx;
} worker_ckpt_config_t;

// What a checkpoint holds (worker_ckpt_load).
typedef struct worker_ckpt {
    uint64_t seq;  // 1 for the first checkpoint the worker's run wrote, and so on
    uint64_t clock;  // the worker's next push clock (every earlier one acknowledged)
    uint64_t retrained, skipped;  // samples_retrained / samples_skipped carried from earlier restarts
    train_position_t at;  // its threads' position
    float *pending;  // (n_params) local copy minus the last pushed state
    // The steps (all threads) summed in pending: taken, not yet claimed by a
    // push. The push that sends pending claims them (the servers bound a
    // push's clock by the steps claimed: clock_plausible).
    uint64_t unpushed_steps;
} worker_ckpt_t;

// Writes cfg->path. Returns 0, or -1 with err naming the file.
int worker_ckpt_save(const worker_ckpt_config_t *cfg, const worker_ckpt_t *c, char *err, size_t err_len);
// Reads path and checks it against id (a mismatch: one line naming the file,
// the field and both values). Returns 0, or -1 with err.
int worker_ckpt_load(const char *path, const worker_ckpt_identity_t *id, worker_ckpt_t *out, char *err, size_t err_len);
void worker_ckpt_free(worker_ckpt_t *c);

// The progress file. Creates (replaces) path for `threads` threads, with the
// carried counts; *progress points into the mapping (64-byte aligned,
// counters zero). Returns 0, or -1 with err naming the file.
int worker_progress_create(const char *path, size_t threads, uint64_t retrained, uint64_t skipped, counter_file_t *f,
                           train_thread_progress_t **progress, char *err, size_t err_len);
// Reads a (dead) incarnation's file: each thread's steps (steps[threads]) and
// the carried counts. Returns 0, or -1 (missing, another layout).
int worker_progress_read(const char *path, size_t threads, uint64_t *steps, uint64_t *retrained, uint64_t *skipped,
                         char *err, size_t err_len);

// The samples a thread whose slice of the data has `len` examples takes in
// its first `steps` steps of `batch` (the trainer's order: each epoch every
// example once, the last step of an epoch short).
uint64_t worker_steps_samples(size_t len, size_t batch, uint64_t steps);
// The length of thread t's slice: replica `rank` of `ranks`, thread t of `threads`.
size_t worker_thread_len(size_t n_train, size_t ranks, size_t rank, size_t threads, size_t t);

#endif
