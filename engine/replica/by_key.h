#ifndef ASGD_ENGINE_REPLICA_BY_KEY_H
#define ASGD_ENGINE_REPLICA_BY_KEY_H
// A model read by key moves its working set only (working_set.h). What the
// strategies that exchange such a model with the servers (asp/ssp, bsp) hold
// for it, each in its own state; the global evaluation (replica_shared.c)
// reaches it through the strategy's by_key (sync_strategy.h).
#include <stdint.h>

#include "engine/replica/working_set.h"

typedef struct by_key {
    int on;  // the model moves by key
    working_set_t ws;
    uint32_t *pull_keys;  // (n) the keys of a pull
} by_key_t;

// Frees what k holds (a zeroed k holds nothing).
void by_key_free(by_key_t *k);

#endif
