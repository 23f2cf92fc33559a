#ifndef ASGD_ENGINE_CORE_HOGWILD_REPLICA_H
#define ASGD_ENGINE_CORE_HOGWILD_REPLICA_H
// A Hogwild! thread's replica of the shared parameters (the replicas variant,
// trainer.h): the thread's steps read and write the replica alone, and a merge
// adds what they changed since the last merge to the shared parameters, then
// re-reads the replica from them.
//
// The shared parameters are read and written through params_read and
// params_write only (params.h: relaxed atomics, or asm vector accesses that
// stand for them), so a merge is defined behaviour whatever runs beside it.
// Two merges into the same parameters must not overlap, or one's additions can
// overwrite the other's: the caller serialises them (the trainer's merge turn,
// an acquire/release pair around each merge and each hogwild_replica_start).
#include <stddef.h>

#include "engine/core/params.h"

typedef struct hogwild_replica {
    size_t n;
    // The replica: a dense model's parameter copy (values: plain floats its
    // steps compute on and write; borrowed), else parameters its steps read
    // and write through param_t (params, owned). Exactly one is set.
    float *values;
    param_t *params;
    float *base;  // the shared values at the last merge (owned)
} hogwild_replica_t;

// values: the thread's parameter copy, or NULL for a replica of its own.
// 0, or -1 and err when out of memory (then nothing to free).
int hogwild_replica_init(hogwild_replica_t *r, size_t n, float *values, char *err, size_t err_len);
void hogwild_replica_free(hogwild_replica_t *r);

// The replica and its base become the shared parameters.
void hogwild_replica_start(hogwild_replica_t *r, const param_t *shared);

// For every parameter, with s its shared value, l its replica value and b its
// base: s + (l - b), or l exactly where s == b (nobody else changed it since
// the last merge, where the sum would round l; it is l in exact arithmetic
// either way); the result goes to the shared parameter, the replica and the
// base. Lines of 16 floats (a cache line) where the replica equals its base
// are not written to the shared parameters (the replica and base take the
// shared values), so a merge dirties only the lines the thread's steps wrote.
void hogwild_replica_merge(hogwild_replica_t *r, param_t *shared);

#endif
