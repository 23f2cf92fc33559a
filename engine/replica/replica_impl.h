#ifndef ASGD_ENGINE_REPLICA_REPLICA_IMPL_H
#define ASGD_ENGINE_REPLICA_REPLICA_IMPL_H
// Inside a replica: the state every sync mode shares, read by replica.c and
// the sync strategies (sync_strategy.h; each keeps its mode's own state,
// reached through `mode`), and the helpers more than one strategy uses.
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/replica/collective.h"
#include "engine/replica/replica.h"
#include "engine/replica/sync_strategy.h"
#include "datasets/storage/counter_file.h"
#include "engine/replica/worker_checkpoint.h"
#include "net/compress.h"
#include "net/ps_client.h"
#include "net/ps_heartbeat.h"
#include "kernels/foundation/trace.h"

#define REPLICA_ERR_LEN 512

struct replica {
    const replica_config_t *rc;
    const sync_strategy_t *strategy;  // the sync mode's
    const model_t *model;
    size_t n, threads;
    size_t batch;  // examples a thread's step takes
    int sparse;
    size_t eval_limit;  // test examples of the final evaluations (0: all)
    ps_client_t *client;
    ps_heartbeat_t *heartbeat;
    param_t *w;
    optimizer_t *opt;  // the replica's optimizer
    gpu_model_t *gpu;  // --device cuda: the local copy lives here, not in w, while training
    float *base;  // (n) asp/ssp: the local copy as of the last push or rebase
    float *pulled;  // (n) the last pulled model
    uint32_t *idx;  // (n) sparse push scratch
    float *val;  // (n)
    float *ring_buf;  // (n + 1) ring modes: gradient (or model) times examples, then the example count
        // (the collective's input area, collective_buffer: not ours to free)
    float lr;  // the local step size, to turn a change of the model into a gradient
    size_t ps_n;  // parameters the servers hold: n, or under hybrid the sparse part [0, ps_n)
    uint64_t quota;  // asp/ssp: per-thread steps per round (push_every over the threads, at least 1)
    // The staleness bound on what the replica reads from the servers (ssp_gate):
    // asp/ssp's threads, hybrid's sparse rows; infinite under asp.
    uint64_t read_bound;
    // Compressed exchanges (rc->compress not none); all sized once.
    compressor_t *comp;
    ef_residual_t resid;  // error feedback over the whole vector sent (n), or empty
    size_t *enc_bytes;  // (n_servers) encoded push frame sizes
    uint64_t raw_out;  // bytes the compressed exchanges would have sent as float32
    train_thread_progress_t *progress;
    train_link_t link;
    _Atomic uint64_t allowance;
    _Atomic int abort;
    uint64_t clock;  // push rounds done
    uint64_t g_read;  // min worker clock when the local copy was last rebased
    int keep_model;  // the caller keeps the final model (final_w): pulled whole at the end
    // The mode's own state, its strategy's (sync_strategy.h: alloc makes it,
    // free frees it); NULL before alloc.
    void *mode;
    // Worker checkpoints (replica_checkpoint.c; asp/ssp). The communication
    // thread holds ckpt_mu over each of its passes, so that a checkpoint (taken
    // with the training threads parked) sees no push or rebase half done.
    pthread_mutex_t ckpt_mu;
    int ckpt_mu_ready;
    counter_file_t progress_file;  // the threads' progress lives in it (r->progress points there)
    worker_ckpt_t resume;  // the checkpoint being resumed (loaded before the join)
    uint64_t *dead_steps;  // (threads) how far the dead incarnation's threads had stepped
    uint64_t carry_retrained, carry_skipped;  // what earlier restarts counted
    uint64_t ckpt_seq;  // the last checkpoint written (or resumed)
    uint64_t freeze_at_samples;  // test only: no checkpoint, push or pull after one with this many samples
    _Atomic int frozen;
    replica_stats_t stats;
    char err[REPLICA_ERR_LEN];
};

double replica_now_s(void);
// One push (an average, under local SGD) or one pull more: in the stats, and
// in rc->live for readers on other threads.
void replica_count_push(replica_t *r);
void replica_count_pull(replica_t *r);

// ---- worker checkpoints (replica_checkpoint.c) ----
// Before the buffers: loads the checkpoint being resumed and what the dead
// incarnation's progress file says. Returns 0, or -1 with err.
int replica_ckpt_prepare(replica_t *r, char *err, size_t err_len);
// The threads' progress counters, in the progress file. Returns 0, or -1.
int replica_ckpt_progress(replica_t *r, char *err, size_t err_len);
// After the join: the start position, clock and pending update of a resumed
// worker, and its counts (stats). Returns 0, or -1 with err.
int replica_ckpt_resume(replica_t *r, train_config_t *tc, train_position_t *start, replica_stats_t *stats, char *err,
                        size_t err_len);
// The trainer's checkpoint callback (train_checkpoint_fn), ctx the replica.
int replica_ckpt_save(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt, char *err,
                      size_t err_len);
void replica_ckpt_free(replica_t *r);

// "worker: out of memory for a replica of n parameters"; returns -1.
int replica_out_of_memory(const replica_t *r, char *err, size_t err_len);

// Sorts uint32 keys (qsort).
int replica_cmp_u32(const void *a, const void *b);

// A dense update g (the whole model) pushed to every shard as its range's
// encoding, with error feedback when the run asks for it; `aux` and `bsp` as
// ps_client_push_commit takes them, at clock r->clock.
int replica_push_encoded(replica_t *r, const float *g, uint32_t aux, int bsp);

// Sums buf[0..m) (this replica's gradient or model times its examples) over
// the workers through the run's collective (rc->collective), compressed as
// the run asks; the examples travel with it (buf has room for m + 1). On return buf[0..m) is the sum and *total the examples behind it,
// the same bits on every replica.
int replica_ring_sum(replica_t *r, float *buf, size_t m, size_t examples, float *total);
// The same over the whole model with the sum ending in what map makes of it
// (collective_sum_map: buf[0..n) and the examples summed, out[0..n) the
// mapped values; a compressed exchange sums round the ring and maps the
// whole: collective_map_all), a span of a --trace timeline too. Returns 0,
// or -1 with r->err.
int replica_ring_sum_map(replica_t *r, float *buf, size_t examples, float *total, collective_map_fn map, void *ctx,
                         float *out);

// Pulls the global model and evaluates it on one thread (it happens once):
// stats' global figures and the shards' versions. A strategy's `global`.
int replica_evaluate_global(replica_t *r, const train_result_t *out, replica_stats_t *stats, char *err, size_t err_len);

#endif
