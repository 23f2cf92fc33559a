#ifndef ASGD_ENGINE_REPLICA_WORKING_SET_H
#define ASGD_ENGINE_REPLICA_WORKING_SET_H
// The keys an asp/ssp replica's steps touch, so that a model read by key (its
// sparse block, model_num_sparse_params) moves only those: a push sends the
// keys the steps since the last push wrote, a pull asks for the keys of the
// steps the threads will take next. Which examples a thread's step takes is
// replayed from its order (train_order_t), so the communication thread knows
// the working set without the training threads telling it anything
// (docs/distributed.md, "Moving the working set").
//
// Used by the communication thread only.
#include <stddef.h>
#include <stdint.h>

#include "engine/core/trainer.h"
#include "engine/core/model.h"
#include "staleness/sync_mode.h"

typedef struct working_set {
    const model_t *model;
    size_t n, key_n;  // the model's parameters; its sparse block [0, key_n)
    size_t threads;
    train_thread_progress_t *progress;  // (threads) the training threads' counts
    train_order_t *push_order;  // (threads) replays for the pushes' steps
    train_order_t *pull_order;  // (threads) replays for the pulls' steps (ahead of the pushes')
    uint64_t *push_from;  // (threads) the first step whose keys the next push covers
    uint32_t *examples;  // (cap) the steps' examples, gathered
    size_t cap;  // WORKING_SET_EXAMPLES, or a step of every thread where that is more
    uint8_t *mark;  // (key_n) model_sparse_keys' scratch
    uint32_t *sort_tmp;  // (n) radix sort's other half
    // The sparse keys one training example reads, on average over the first
    // examples (working_set_init_keys): what listing a window's keys costs per
    // example, against key_n for moving the sparse block whole.
    double keys_per_example;
} working_set_t;

// The most examples one window gathers (all threads together); a window
// longer than that is cut short (working_set_window says where).
#define WORKING_SET_EXAMPLES 65536

// Whether model m is moved by key: it has a sparse block.
int working_set_applies(const model_t *m);
// Whether a replica of m under `mode` (asp, ssp or bsp) moves by key: m has a
// sparse block and its updates are not dense vectors sent whole (bsp: a dense
// gradient; asp and ssp: one on the GPU, or a dense one compressed). The one
// rule the strategies and a worker holding its working set (engine/run) apply.
int working_set_by_key(const model_t *m, sync_mode_t mode, int gpu, int compressed);
// Only for working_set_keys (examples a caller names): no orders, no
// threads. Returns 0, or -1 with err.
int working_set_init_keys(working_set_t *ws, const model_t *m, char *err, size_t err_len);
// The keys examples[0..count) read, ascending, into keys (room for n), with
// the dense part. Returns how many.
size_t working_set_keys(working_set_t *ws, const uint32_t *examples, size_t count, uint32_t *keys);
// The same without the dense part: the sparse block's keys only (hybrid,
// whose servers hold that block alone).
size_t working_set_sparse_keys(working_set_t *ws, const uint32_t *examples, size_t count, uint32_t *keys);
// The same for test examples: what evaluating them reads.
size_t working_set_test_keys(working_set_t *ws, const uint32_t *examples, size_t count, uint32_t *keys);
// For the threads of tc (whose link is set), whose steps and state
// progress[0..threads) counts (from the steps counted now). Returns 0, or -1
// with err.
int working_set_init(working_set_t *ws, const model_t *m, const train_config_t *tc, train_thread_progress_t *progress,
                     char *err, size_t err_len);
void working_set_free(working_set_t *ws);

// The keys the steps since the last call may have written, ascending, into
// keys (room for n): every thread's steps from push_from up to and including
// the one it counts now (the step in flight, if any, belongs to this push and
// the next), and the dense part [key_n, n). Where listing them would read
// more keys than the model has (working_set_whole_cheaper), every key.
// Returns how many.
size_t working_set_pushed(working_set_t *ws, uint32_t *keys);

// Whether listing the keys of `examples` examples would visit at least as
// many keys as the sparse block has: then moving the block whole costs less
// than finding the keys (a window at dim 20k reads most of the model).
int working_set_whole_cheaper(const working_set_t *ws, size_t examples);

// The keys the threads' steps from the one each counts now up to (not
// including) `end` read, ascending, into keys (room for n), with the dense
// part. A thread that has finished reads nothing. *covered: the step every
// thread's window reaches (end, or less where the gathering was cut short).
// Returns how many; SIZE_MAX, with *covered UINT64_MAX and nothing in keys,
// where the window reads so much that the whole model should move
// (working_set_whole_cheaper).
size_t working_set_window(working_set_t *ws, uint64_t end, uint32_t *keys, uint64_t *covered);

#endif
