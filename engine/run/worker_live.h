#ifndef ASGD_ENGINE_RUN_WORKER_LIVE_H
#define ASGD_ENGINE_RUN_WORKER_LIVE_H
// A worker's live counts for asgd launch's progress line: RUN_DIR/worker-K.live
// holds one line — samples trained, samples/s, training seconds, the
// replica's steps, its pushes and pulls so far — rewritten in
// place at every progress tick of the worker's trainer (every 0.5 s) and at
// every evaluation. Its curve (worker-K.csv) has rows at evaluations only,
// which --worker-eval off leaves at the start and the end; this file is
// current in every mode. Written and read here only.
#include <stddef.h>

#include "engine/core/trainer.h"
#include "engine/replica/replica.h"

typedef struct worker_live {
    int fd;  // -1: not written
    train_callbacks_t next;  // the callbacks each point goes on to
    const replica_live_t *exchanges;  // the replica's pushes and pulls (replica_config_t.live)
} worker_live_t;

// The counts worker K last wrote.
typedef struct worker_live_counts {
    double samples, samples_per_s, wall_s;
    double steps, pushes, pulls;  // the replica's steps (all threads), its pushes and pulls
} worker_live_counts_t;

// Opens dir/worker-K.live (dir NULL: nothing is written) and returns the
// callbacks that write each point there, with the pushes and pulls
// `exchanges` counts, then call next's. Returns 0, or -1 with err.
int worker_live_open(worker_live_t *l, const char *dir, size_t worker, const replica_live_t *exchanges,
                     train_callbacks_t next, train_callbacks_t *out, char *err, size_t err_len);
void worker_live_close(worker_live_t *l);

// dir/worker-K.live.
void worker_live_path(char *out, size_t len, const char *dir, size_t worker);

// The last counts worker K wrote in dir; 0 when there are none (yet).
int worker_live_read(const char *dir, size_t worker, worker_live_counts_t *c);

#endif
