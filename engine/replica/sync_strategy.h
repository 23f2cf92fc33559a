#ifndef ASGD_ENGINE_REPLICA_SYNC_STRATEGY_H
#define ASGD_ENGINE_REPLICA_SYNC_STRATEGY_H
// How a replica keeps in step with the others under its sync mode: one table
// per family of modes, chosen once from the mode (sync_strategy_for), which
// replica_train (replica.c) runs on one straight path:
//
//   check   the run's settings against the mode      (before anything is made)
//   alloc   the mode's own state (r->mode)           (after the common buffers)
//           ... the servers are joined (servers) or the model initialised,
//           compression, the optimizer and the device are made ...
//   begin   the mode's state and threads             (right before train_run)
//           ... train_run, its link calling exchange / prepare / refresh ...
//   end     stops what begin started                 (right after train_run)
//   global  the global model's test figures          (after a good run)
//   report  the mode's own figures                   (whatever became of the run)
//   free    frees the mode's state                   (last)
//
// Each strategy's state is its own: a struct in its file, which replica.c
// and the other strategies reach only through this table.
//
// The families, one file each:
//   strategy_downpour.c  asp, ssp   Hogwild! threads and a communication thread
//   strategy_bsp.c       bsp        rounds through the servers (backup workers
//                                   are the servers' business: the replica is the same)
//   strategy_ring.c      allreduce  rounds summed by ring allreduce
//   strategy_local.c     local      local SGD: models averaged every H rounds
//   strategy_hybrid.c    hybrid     sparse rows through the servers, dense part by allreduce
#include <stddef.h>
#include <stdint.h>

#include "engine/core/optimizer.h"
#include "engine/core/trainer.h"
#include "engine/replica/replica.h"
#include "staleness/sync_mode.h"

typedef struct replica replica_t;  // engine/replica/replica_impl.h
typedef struct by_key by_key_t;  // engine/replica/by_key.h

typedef struct sync_strategy {
    const char *family;  // "downpour", "bsp", "allreduce", "local", "hybrid"
    train_mode_t train_mode;  // hogwild: threads step alone within the link's allowance; sync: rounds
    int servers;  // joins the parameter servers (they hold the model, or its sparse part)
    int ring;  // needs the ring of workers
    int gpu;  // may train on a GPU (--device cuda)
    // Pushes are changes of the local copy divided by the local step, which
    // must stay constant: no warmup locally (the servers warm up theirs).
    int constant_local_step;
    // Checks the run's settings against the mode and sets what follows from
    // them (r->ps_n, r->read_bound). Returns 0, or -1 with err filled.
    int (*check)(replica_t *r, const optimizer_config_t *oc, char *err, size_t err_len);
    // Optional: the mode's own state into r->mode, its buffers sized once.
    // Returns 0, or -1 with err filled (free then frees what it made).
    int (*alloc)(replica_t *r, char *err, size_t err_len);
    // With alloc: frees r->mode (once alloc made it, whatever came after) and nulls it.
    void (*free)(replica_t *r);
    // Optional: right before train_run, with the model in r->w (or on r->gpu)
    // and the link's common fields set: the mode's state and threads; it may
    // take over tc's evaluation points and the callbacks (*cb), and change
    // the link's hooks (r->link) to what the model allows. On failure it
    // leaves nothing running. Returns 0, or -1 with err filled.
    int (*begin)(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len);
    // Optional: right after train_run, whatever it returned (once begin succeeded).
    void (*end)(replica_t *r);
    // The trainer's link hooks (train_link_t), sync modes; NULL where the mode has none.
    int (*exchange)(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied);
    // Optional: the round summed in place in the ring's buffer and stepped (train_link_t.exchange_step).
    int (*exchange_step)(void *ctx, size_t examples, float lr, float *params, int *stepped);
    int (*prepare)(void *ctx, const uint32_t *examples, size_t count, param_t *w);
    int (*refresh)(void *ctx, param_t *w);
    // With servers, after a good run (every push acknowledged, before the
    // goodbye): the global model's test figures into stats. NULL: they stay
    // NaN (the replica holds the global model itself).
    int (*global)(replica_t *r, const train_result_t *out, replica_stats_t *stats, char *err, size_t err_len);
    // Optional: the mode's own figures into stats (r->mode made), whatever
    // became of the run; without it they stay as none were measured.
    void (*report)(const replica_t *r, replica_stats_t *stats);
    // Optional: the working set of a model moved by key, which `global`
    // reads; NULL (as when absent) when the model moves whole.
    by_key_t *(*by_key)(replica_t *r);
    // Worker checkpoints (replica_checkpoint.c), under the modes that take
    // them: of the threads' `steps` at a checkpoint, how many no push has
    // claimed yet (its pending update sums them); and, on a resume before
    // begin, that the pending update sums `steps` no push has claimed.
    uint64_t (*unpushed_steps)(const replica_t *r, uint64_t steps);
    void (*resume_unpushed)(replica_t *r, uint64_t steps);
    // The final model is the servers' (the last pull, after this replica's
    // last push: `global` made it), not the replica's own.
    int final_from_servers;
} sync_strategy_t;

extern const sync_strategy_t sync_strategy_downpour, sync_strategy_bsp, sync_strategy_allreduce, sync_strategy_local,
    sync_strategy_hybrid;

// The table of a mode (downpour for asp and ssp); NULL for a value that is no mode.
const sync_strategy_t *sync_strategy_for(sync_mode_t mode);

#endif
