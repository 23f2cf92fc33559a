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

#endif
