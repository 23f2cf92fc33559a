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
#include <stdint.h>

#include "engine/core/model.h"
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

// The parameters a merge averages instead of summing: the hot ones.
//
// Adding up the replicas' changes is what plain Hogwild! does, step by step,
// and is right where a parameter moves little within an interval. Where each
// replica corrects a parameter's error within one interval on its own (a bias:
// every step of every thread pulls it to the same value), the sum counts that
// one correction once per thread. With two threads taking turns the shared
// value then cycles instead of settling (errors e, 0, -e, -e, 0, e: the
// recurrence x[k] = x[k-1] - x[k-2], marginally stable, which the steps'
// noise drives away), and with three or more it grows. Adding 1/T of the
// change instead (the replicas' average, as local SGD does) makes that
// recurrence contract for any T (x[k] = x[k-1] - x[k-T]/T), but on a parameter
// a replica moves little it throws (T-1)/T of the threads' progress away.
// Which parameters are corrected within an interval depends on the loss and
// the step size; what the data says before the run is which ones every
// example touches, and an interval's many touches at a full feature value are
// what corrects a parameter alone. So a parameter is hot when every training
// example touches it (a model's dense part: a linear model's bias, every
// parameter of a dense model; and a feature every example holds) and an
// interval holds HOGWILD_HOT_TOUCHES examples or more. Features touched by
// most examples but not all stay summed: on gen:sparse, counting the
// features a thread's interval touches 16 times or more as hot left 10-epoch
// runs 0.016 below one thread, where the bias alone stayed within 0.004
// (docs/benchmarks.md).
#define HOGWILD_HOT_TOUCHES 16

typedef struct hogwild_hot {
    size_t n;
    uint8_t *hot;  // (n) 1 where a merge adds 1/threads of the replica's change
    size_t n_hot;
    float share;  // 1 / threads
} hogwild_hot_t;

// From the model's training set (one pass over its examples' keys):
// examples_per_interval is one thread's examples between two of its merges.
// 0, or -1 and err when out of memory (then nothing to free).
int hogwild_hot_init(hogwild_hot_t *h, const model_t *m, size_t threads, double examples_per_interval, char *err,
                     size_t err_len);
void hogwild_hot_free(hogwild_hot_t *h);

// The parameters one training example's step touches, on average: its
// sparse keys (from up to HOGWILD_TOUCH_SAMPLE examples spread over the
// training set) plus the model's dense part; a dense model's every parameter.
// What sets the default merge interval (trainer.h): a merge walks the whole
// model, a step what it touches.
#define HOGWILD_TOUCH_SAMPLE 4096
double hogwild_touches_per_example(const model_t *m);

// For every parameter, with s its shared value, l its replica value and b its
// base: s + (l - b), s + (l - b) / threads where the parameter is hot, or l
// exactly where s == b (nobody else changed it since the last merge: the
// replica's change is the only one, and the sum would round l; it is l in
// exact arithmetic either way, so one thread's run stays bit-identical to
// plain); the result goes to the shared parameter, the replica and the base.
// hot NULL: no parameter is hot. Lines of 16 floats (a cache line) where the
// replica equals its base are not written to the shared parameters (the
// replica and base take the shared values), so a merge dirties only the
// lines the thread's steps wrote.
void hogwild_replica_merge(hogwild_replica_t *r, param_t *shared, const hogwild_hot_t *hot);

#endif
