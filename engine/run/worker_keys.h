#ifndef ASGD_ENGINE_RUN_WORKER_KEYS_H
#define ASGD_ENGINE_RUN_WORKER_KEYS_H
// A worker that holds its working set, not the model (docs/distributed.md,
// "Models larger than a worker"): a worker of a model whose sparse block has a
// row per feature, moving keys with the servers (asp, ssp, bsp), renumbers its
// data's features to the ones the data uses and builds its model over those;
// the servers hold every feature, and the worker's client translates its keys
// (net/ps_key_map.h).
#include <stddef.h>
#include <stdint.h>

#include "engine/core/model.h"
#include "engine/data/data_source.h"
#include "engine/run/dist.h"
#include "engine/run/train_args.h"
#include "net/ps_key_map.h"

typedef struct worker_keys {
    ps_key_map_t map;
    uint32_t *rows;  // the map's rows (owned)
    int held;  // 1: the worker holds only the rows in the map; 0: the whole model
} worker_keys_t;

// Loads the data and builds the worker's model: over the features the data
// uses where that applies (k->held), else over all of them, as
// train_args_build does. Returns 0, or -1 with err filled.
int worker_keys_build(const train_args_t *t, const dist_args_t *d, data_bundle_t *data, model_t **model,
                      worker_keys_t *k, char *err, size_t err_len);

void worker_keys_free(worker_keys_t *k);

// The global evaluator's model (engine/replica/global_eval.h) over the
// features its test examples read, for the same models: the servers hold
// every feature, and the evaluator pulls the rows its examples read and the
// dense tail (map), never a whole-model array. The model evaluates the same
// bits as the whole model on those examples (the numbering keeps each row's
// order).
typedef struct eval_keys {
    ps_key_map_t map;
    uint32_t *rows;  // the map's rows (owned)
    sparse_dataset_t test;  // the test examples evaluated, renumbered (owned; the model's data)
    model_t *model;  // over `test`; NULL: the evaluator reads the whole model
} eval_keys_t;

// Builds it from the server's data and whole model m where the run moves keys
// (as a worker of the model would) and the test set's features are fewer than
// the model's; else leaves k->model NULL. Returns 0, or -1 with err filled.
int eval_keys_build(const train_args_t *t, const dist_args_t *d, const data_bundle_t *data, const model_t *m,
                    eval_keys_t *k, char *err, size_t err_len);
void eval_keys_free(eval_keys_t *k);

#endif
