#ifndef ASGD_ENGINE_CORE_TRAINER_H
#define ASGD_ENGINE_CORE_TRAINER_H
// Single-node training with T pthreads in one of three modes.
//
//   hogwild  each thread owns a disjoint shard of the data and updates the one
//            shared model without locks (relaxed atomics; see params.h).
//   locked   the same, but every step (read parameters, compute the gradient,
//            write the update) holds one mutex over the whole model, so the run
//            is serialisable: the consistent baseline of the Hogwild! paper.
//   sync     every round, the T threads split one global minibatch of T*batch
//            examples, compute gradients on the same parameters, meet at a
//            barrier, and one averaged update is applied (in parallel, each
//            thread its own coordinate range). Equal to single-thread SGD with
//            batch T*batch on the same data order.
//
// Evaluation runs off the training clock: the main thread watches per-thread
// counters, and at each evaluation point it asks the workers to park at their
// next step boundary, evaluates the test set on T threads (one slice each),
// then resumes them. Reported wall time excludes those pauses.
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "engine/core/train_device.h"
#include "kernels/foundation/rng.h"
#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "staleness/delay.h"

typedef enum train_mode {
    TRAIN_MODE_HOGWILD,
    TRAIN_MODE_LOCKED,
    TRAIN_MODE_SYNC,
} train_mode_t;

// How hogwild threads share the model.
//   plain     every step reads and writes the shared parameters, as in the
//             Hogwild! paper: updates are seen at once, and racing ones may be lost.
//   replicas  each thread steps on its own replica of the parameters and merges
//             what it changed into the shared ones every merge_every steps
//             (engine/core/hogwild_replica.h), the threads taking turns (a thread that
//             finds another merging goes on and tries at its next step, and
//             waits for its turn once two intervals have passed), as
//             Hogwild++ keeps one replica per cluster of cores: a merge adds
//             what the replica changed, or 1/threads of it on a hot parameter
//             (one every example touches, which every replica corrects on its
//             own: hogwild_replica.h), so no update of a summed parameter is
//             lost; another thread's are seen after up to about two merge
//             intervals, and between merges no parameter's cache line is
//             written by two cores (an optimizer's state, momentum or Adagrad
//             sums, stays shared as in plain). The threads merge before every
//             evaluation or checkpoint and at the end, so the shared parameters
//             hold every step taken then; a resumed run's replicas start from
//             them. With one thread the merged value of a parameter is exactly
//             its replica's, so the run is bit-identical to plain's at any
//             merge_every. Single-node runs only (no link, no device).
typedef enum hogwild_variant {
    HOGWILD_VARIANT_PLAIN,
    HOGWILD_VARIANT_REPLICAS,
} hogwild_variant_t;

// Per-thread counters a distributed run's link reads, one cache line each.
typedef struct train_thread_progress {
    _Alignas(64) _Atomic uint64_t steps;  // steps this thread has taken
    _Atomic uint64_t wait_ns;  // time it spent held by step_allowance
    _Atomic int finished;  // it has finished its epochs (or stopped)
    // With a link generation: (generation << 32) | (step index mod 2^32) of the
    // step this thread started last, stored (release) once per step at its start.
    _Atomic uint64_t read_gen;
} train_thread_progress_t;

// How one replica of a distributed run (engine/replica/replica.h) hooks into the
// trainer. Single-node runs leave train_config.link NULL.
typedef struct train_link {
    // Which replica this is, of how many. hogwild/locked: the replica trains on
    // shard `rank` of the data order, split again over its threads. sync: every
    // round is ranks*threads*batch examples of the (shared) order, and this
    // replica takes slice `rank` of it, so N replicas of T threads see exactly
    // what one process of N*T threads would.
    size_t rank, ranks;
    // hogwild/locked: a thread takes its k-th step (k from 0, per thread) only
    // while k < *step_allowance; the link raises it (SSP/BSP waiting).
    _Atomic uint64_t *step_allowance;
    train_thread_progress_t *progress;  // (threads)
    // Optional, hogwild: a counter the link raises each time it rewrites the
    // shared parameters (a rebase); every step records the value it read at its
    // start in progress[thread].read_gen, so the link knows how old the
    // parameters were that each step it sends on had read.
    _Atomic uint64_t *generation;
    // sync: called by thread 0 once per round, when `sum` holds this replica's
    // averaged gradient over `examples` examples (possibly 0). Either the
    // global update has been applied to w (a parameter server did it: set
    // *applied), or sum now holds the global average for the trainer to apply.
    // Returns 0, or -1 to stop the run.
    int (*exchange)(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied);
    // Optional, sync: the same round summed in place and stepped, for a dense
    // model trained by one thread with plain SGD. The trainer stores the
    // replica's gradient times its examples in sum_buffer (the link's own
    // array of the model's size, e.g. a collective's, so that nothing is
    // copied into it) and calls exchange_step instead of exchange, with
    // `params` the thread's copy of the parameters; on return params holds
    // them stepped by lr times the replicas' summed gradient over their
    // examples (p - lr * (sum / examples), the bits of forming the average
    // first), or unchanged with *stepped 0 when no replica had an example. w
    // is not written: the trainer writes it from params when its threads park
    // or end, so a round makes no pass of its own for the weighting, the
    // average or w. Returns 0, or -1 to stop the run.
    // The link may point sum_buffer elsewhere in exchange_step (the trainer
    // reads it anew each round).
    float *sum_buffer;
    int (*exchange_step)(void *ctx, size_t examples, float lr, float *params, int *stepped);
    // With exchange_step: sum_buffer holds the replica's average instead, the
    // gradient weighted by its examples over the round's (the bits `exchange`
    // is given in `sum`), for a link whose servers weight the replicas'
    // averages themselves (bsp); params then come back as the servers' values.
    int sum_is_average;
    // Optional, with exchange_step: where the trainer says, before each
    // exchange_step, whether every value it stored in sum_buffer this round is
    // finite (1) or not (0), checked block by block as it stored them, while
    // they were in cache: a link that must refuse a gradient holding NaN or
    // Inf need not read it again. NULL: not wanted.
    int *sum_finite;
    // sync: set by a link whose exchange averages models, not gradients
    // (local SGD). The trainer then applies every round's update to w itself,
    // before the exchange, which does not read `sum` and sets *applied only
    // when it rewrote w.
    int update_before_exchange;
    // Optional, sync: called by thread 0 before a round's gradients are
    // computed, with the examples this replica takes in it (its threads'
    // slices, in order), so that the link can bring the parameters they read
    // up to date in w (sparse rows held by servers). Returns 0, or -1 to stop.
    int (*prepare)(void *ctx, const uint32_t *examples, size_t count, param_t *w);
    // Optional: called before every evaluation, by the evaluating thread while
    // the training threads are parked (or not yet started, or finished), so
    // that the link can bring all of w up to date. Returns 0, or -1 to stop.
    int (*refresh)(void *ctx, param_t *w);
    void *ctx;
    // Set by the link when its communication failed: every thread stops.
    _Atomic int *abort;
    // Injected delay after every step (hogwild/locked) or round (sync): a straggler.
    // Fixed, or drawn per step from a per-thread RNG seeded by (seed, rank, thread).
    step_delay_t step_delay;
} train_link_t;

// Where a run stands: per-thread counters and the training time so far. A
// checkpoint records it; a resumed run (or a worker that rejoins a
// distributed run) starts from it: hogwild/locked thread t skips its first
// updates[t] steps and sync the first updates[0] rounds, replaying the data
// order's shuffles on the way, so the rest of the run sees the examples it
// would have seen.
typedef struct train_position {
    size_t threads;
    uint64_t *samples;  // (threads) examples each thread processed
    uint64_t *updates;  // (threads) hogwild/locked: steps each thread took; sync: updates[0] = rounds done
    double *loss_sum;  // (threads) sum over steps of minibatch objective x examples
    double wall_s;  // training seconds so far
} train_position_t;

// Called with every thread parked at a step (sync: round) boundary; returns 0,
// or -1 with err filled to stop the run.
typedef int (*train_checkpoint_fn)(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt,
                                   char *err, size_t err_len);

typedef struct train_config {
    train_mode_t mode;
    size_t threads;
    size_t epochs;
    size_t batch;  // examples per step, per thread
    uint64_t seed;  // data order (initial permutation and per-epoch shuffles)
    size_t eval_every;  // training samples between evaluations; 0 = once per epoch
    double eval_every_s;  // > 0: also evaluate every this many training seconds (a fixed grid)
    size_t eval_limit;  // test examples per evaluation; 0 = the whole test set
    double target;  // NaN: none; else accuracy >= target, or RMSE <= target
    int stop_at_target;  // end the run at the first evaluation that meets the target
    // > 0: evaluations are deferred (a distributed replica, whose pause for an
    // evaluation would hold the other ranks back): at each point the
    // parameters are copied, and the copies evaluated in order once training
    // is done, up to this many bytes of copies; a point past that budget is
    // evaluated at once, after those before it. Never with stop_at_target,
    // which needs each point's figures as it comes. 0: every point at once.
    size_t defer_eval_bytes;
    double time_limit_s;  // > 0: stop after this many training seconds (evaluation excluded)
    // Not NULL: once *interrupt is non-zero (a stop signal, net/stop_signal.h)
    // the run stops at the next step boundary, as at a time limit, and the
    // result says interrupted. Looked at every progress_interval_s (0.25 s when 0).
    const atomic_int *interrupt;
    // Pin thread t to the (pin_first + t)-th CPU this process may run on
    // (mod their count: engine/core/cpu_pin.h). pin_first: the threads of the
    // distributed workers before this one on the machine; 0 for asgd train.
    int pin;
    size_t pin_first;
    double progress_interval_s;  // 0: no progress callbacks
    double clip_grad_norm;  // > 0: each thread's minibatch gradient is scaled down to this L2 norm when
        // longer (grad_clip_norm), before it is applied or averaged; CPU only
    hogwild_variant_t hogwild_variant;  // mode hogwild: see above
    size_t merge_every;  // replicas: a thread's steps between its merges; 0: train_merge_every_default
    const train_link_t *link;  // distributed runs only (borrowed); NULL otherwise
    // Where the steps run. NULL: on the CPU threads. Else on a device (--device
    // cuda: engine/gpu/gpu_device.h): one host thread (threads = 1, mode
    // hogwild) queues its steps, and the device holds the parameters while
    // training; w receives them at every evaluation and at the end. train_run
    // makes the device from device_options unless device_handle names one
    // already made (a replica's, borrowed).
    const train_device_ops_t *device;
    const void *device_options;
    void *device_handle;
    const train_position_t *start;  // NULL: from the beginning; else threads must match
    // > 0: every this many training seconds the threads park and checkpoint()
    // is called (and once more at the end of the run).
    double checkpoint_every_s;
    train_checkpoint_fn checkpoint;
    void *checkpoint_ctx;
} train_config_t;

// One evaluation point (or, for progress callbacks, a snapshot with test fields NaN).
typedef struct train_point {
    double wall_s;  // training seconds since start, evaluation pauses excluded
    double epoch;  // samples / training-set size (times the replicas of a distributed run)
    uint64_t samples;  // training examples processed, all threads
    uint64_t updates;  // updates applied to the shared model
    double samples_per_s;  // samples / wall_s
    float lr;  // current step size (thread 0's view)
    double train_loss;  // mean minibatch objective since the previous point
    double test_loss;  // mean test loss (no regulariser)
    double test_metric;  // accuracy or RMSE, see model_metric()
} train_point_t;

typedef struct train_callbacks {
    // Called from the main thread while workers are parked (off the clock).
    void (*on_eval)(const train_point_t *p, void *ctx);
    // Called from the main thread while workers run; eta_s is NaN when unknown.
    void (*on_progress)(const train_point_t *p, double eta_s, void *ctx);
    void *ctx;
} train_callbacks_t;

typedef struct train_result {
    double wall_s;  // training time, evaluation excluded
    double eval_s;  // time spent in evaluation pauses
    uint64_t samples;
    uint64_t updates;
    double samples_per_s;
    double updates_per_s;
    double time_to_target_s;  // NaN if the target was not reached (or none was set)
    uint64_t samples_to_target;
    size_t n_evals;
    int stopped_at_target;
    int stopped_at_time_limit;
    int interrupted;  // stopped early by train_config.interrupt
    uint64_t checkpoints;  // written (train_config.checkpoint), the final one included
    uint64_t merge_gap_max;  // hogwild replicas: the most steps a thread took between two of its merges (0: plain)
    size_t
        merge_every;  // hogwild replicas: the steps between a thread's merges the run asked for (its default resolved)
    size_t merge_hot_params;  // hogwild replicas, 2+ threads: the parameters merges average (hogwild_replica.h)
    train_point_t last;  // the final evaluation
    // The untrained model's test loss (the evaluation at 0 samples) and the
    // highest test loss after it, with its epoch: a run that got worse than
    // where it started says so. NaN when there was no such evaluation.
    double untrained_test_loss, peak_test_loss, peak_test_loss_epoch;
} train_result_t;

void train_config_default(train_config_t *c);
int train_config_check(const train_config_t *c, size_t n_train, char *err, size_t err_len);

// Trains w in place. Allocates everything before starting threads, so a failure
// leaves w untouched; returns 0, or -1 with err filled (out then holds the
// samples and updates done, and the last evaluation). A step whose loss is
// NaN or Inf stops the run (-1, err saying where): it diverged, and no
// checkpoint is written after that.
int train_run(const model_t *m, optimizer_t *opt, param_t *w, const train_config_t *c, const train_callbacks_t *cb,
              train_result_t *out, char *err, size_t err_len);

// Runs `run` on freshly initialised parameters (model_init_params with
// init_seed) and a new optimizer built from oc, both freed afterwards; final_w
// (if not NULL) receives the parameters when run succeeds. The shared set-up
// of train_fresh and simulate_fresh.
typedef int (*fresh_run_fn)(void *ctx, optimizer_t *opt, param_t *w, char *err, size_t err_len);
int run_on_fresh_params(const model_t *m, const optimizer_config_t *oc, uint64_t init_seed, float *final_w,
                        fresh_run_fn run, void *ctx, char *err, size_t err_len);

// train_run on freshly initialised parameters (model_init_params with init_seed)
// and a new optimizer built from oc; both are freed before returning. If final_w
// is not NULL it receives the trained parameters (model_num_params floats).
int train_fresh(const model_t *m, const optimizer_config_t *oc, const train_config_t *c, uint64_t init_seed,
                const train_callbacks_t *cb, train_result_t *out, float *final_w, char *err, size_t err_len);

const char *train_mode_name(train_mode_t mode);
const char *hogwild_variant_name(hogwild_variant_t v);

// The replicas variant's merge interval when train_config.merge_every is 0,
// in steps of `batch` examples (at least one). A merge walks the whole model
// (the shared values, the replica and its base), a step only the parameters
// its examples touch (hogwild_touches_per_example): a thread merges once its
// examples' touches add up to TRAIN_MERGE_WALK_RATIO times the model's size,
// and never sooner than TRAIN_MERGE_EXAMPLES examples. On sparse logistic
// regression over 100,000 features (61 touches an example), merges every 8192
// examples took 7.9% of the trainers' time and two threads ran 1.50-1.81x one
// plain thread; every 32807 (this rule), 1.5% and 1.75-2.07x, at the same
// accuracy (docs/benchmarks.md). A dense model touches all of itself every
// step: TRAIN_MERGE_EXAMPLES. Counts the touches (a pass over up to
// HOGWILD_TOUCH_SAMPLE examples' keys).
#define TRAIN_MERGE_EXAMPLES 8192
#define TRAIN_MERGE_WALK_RATIO 20
size_t train_merge_every_default(const model_t *m, size_t batch);

// The examples a hogwild or locked thread steps through, in its order,
// reproduced away from the thread: for a distributed replica's communication
// thread, which parameters a window of the thread's steps reads (the steps
// since its last push; the next ones, to pull). The same order train_run
// gives thread `thread` under config c (its seed, threads, batch and link's
// rank among ranks) on n_train examples. Returns 0, or -1 with err filled.
typedef struct train_order {
    uint32_t *data;  // (len) the thread's examples in the order of epoch `epoch`
    uint32_t *prev;  // (len) and in the order of the epoch before it (if any)
    size_t len, batch, per_epoch;
    uint64_t epoch;  // the epoch data is in; UINT64_MAX before the first
    rng_t rng;  // the thread's shuffles, as its loop draws them
} train_order_t;
int train_order_init(train_order_t *o, const train_config_t *c, size_t n_train, size_t thread, char *err,
                     size_t err_len);
void train_order_free(train_order_t *o);
// The examples of the thread's step `step` (counted from the run's start,
// earlier epochs' steps included): *count of them, at a pointer valid until
// the next call. The order goes forward, keeping one epoch behind: a step in
// an epoch before the one before the last asked for is not available (NULL,
// *count 0).
const uint32_t *train_order_step(train_order_t *o, uint64_t step, size_t *count);

#endif
