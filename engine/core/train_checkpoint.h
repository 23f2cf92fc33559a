#ifndef ASGD_ENGINE_CORE_TRAIN_CHECKPOINT_H
#define ASGD_ENGINE_CORE_TRAIN_CHECKPOINT_H
// Checkpoints of a single-node training run (asgd train --checkpoint-every,
// --resume): the parameters, the optimizer's state and the run's position
// (per-thread steps, samples and loss sums, training time), in a checkpoint
// file (datasets/storage/checkpoint_file.h). A run resumed from one continues as the
// uninterrupted run would have: bit for bit where the run itself is
// deterministic (one thread, or sync mode; docs/reliability.md).
#include <stddef.h>
#include <stdint.h>

#include "engine/core/optimizer.h"
#include "engine/core/params.h"
#include "engine/core/trainer.h"

// What must match between a checkpoint and the run resuming it.
typedef struct train_identity {
    uint64_t model;  // the CLI's model number
    uint64_t n_params, n_train;
    uint64_t mode, threads, batch, seed;
    uint64_t optimizer;  // optimizer_kind_t
    uint64_t momentum;  // 1 if the optimizer keeps a velocity
} train_identity_t;

typedef struct train_checkpoint {
    char path[1024];
    train_identity_t id;
} train_checkpoint_t;

// The train_checkpoint_fn that writes ctx (a train_checkpoint_t)'s file.
int train_checkpoint_save(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt, char *err,
                          size_t err_len);

// Reads path, checks it against id, and restores w, opt and *at (whose
// arrays are allocated here for id->threads threads; free with
// train_position_free). Returns 0, or -1 with err naming the file and the problem.
// The name of a model number (train_identity_t.model) for messages, or NULL.
typedef const char *(*train_model_name_fn)(uint64_t model);
// A mismatch names the field and both values (models by name_model when not
// NULL, modes and optimizers by name).
int train_checkpoint_load(const char *path, const train_identity_t *id, train_model_name_fn name_model, param_t *w,
                          optimizer_t *opt, train_position_t *at, char *err, size_t err_len);
void train_position_free(train_position_t *at);

#endif
