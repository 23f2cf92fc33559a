#include "engine/core/trainer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/update.h"
#include "kernels/finite.h"
#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/rng.h"
#include "kernels/foundation/partition.h"
#include "engine/core/spin_barrier.h"
#include "engine/core/cpu_pin.h"
#include "kernels/blas_runtime.h"
#include "kernels/foundation/trace.h"
#include "engine/core/hogwild_replica.h"

// rng streams: one for the initial data order, then one per thread for its shuffles.
#define STREAM_ORDER 0x4f524452u
#define STREAM_SHUFFLE 0x53485546u
#define STREAM_DELAY 0x444c4159u  // injected straggler delays: + rank * threads + thread
#define EVAL_THREADS_MAX 64
#define GPU_LOSS_EVERY 64  // GPU steps between reads of their loss (each read waits for the queue)

// Counters one worker publishes for the main thread. Only the owner writes
// (load + store, no read-modify-write needed); each sits on its own cache line
// so that Hogwild! threads do not slow each other through false sharing.
typedef struct worker_stats {
    _Alignas(64) _Atomic uint64_t samples;
    _Atomic uint64_t updates;
    _Atomic double loss_sum;  // sum over steps of (minibatch objective x examples)
    _Atomic float lr;
} worker_stats_t;

typedef struct trainer trainer_t;

// An evaluation point kept for after training (train_config_t.defer_eval_bytes).
typedef struct deferred_eval {
    float *values;  // (n_params) the parameters at the point
    train_point_t point;  // its figures, the test ones still to come
} deferred_eval_t;

typedef struct worker {
    trainer_t *tr;
    size_t id;
    pthread_t thread;
    model_ws_t *ws;
    grad_t grad;
    size_t shard_begin, shard_end;  // hogwild/locked: this thread's part of tr->order
    hogwild_replica_t replica;  // hogwild, replicas variant: the thread's (a dense model's parameter copy, or its own)
    uint64_t merge_gap_max;  // replicas: the most steps it took between two of its merges
} worker_t;

struct trainer {
    const model_t *model;
    optimizer_t *opt;
    param_t *w;
    train_config_t cfg;
    size_t n_train;
    size_t n_params;
    uint32_t *order;  // (n_train) data order
    worker_t *workers;  // (threads)
    worker_stats_t *stats;  // (threads)
    pthread_mutex_t update_lock;  // locked mode only
    int replicas;  // hogwild with the replicas variant
    size_t merge_every;  // replicas: a thread's steps between merges
    hogwild_hot_t hot;  // replicas, two threads or more: the parameters merges average
    _Atomic int merge_turn;  // replicas: 1 while a thread merges or starts its replica

    // Pause/resume between the main thread and the workers.
    _Atomic int pause_requested;
    _Atomic int stop_requested;
    pthread_mutex_t mu;
    pthread_cond_t cv_parked;
    pthread_cond_t cv_resume;
    size_t parked;  // workers parked since the last resume (see park())
    size_t finished;
    uint64_t resume_generation;
    int gate_open;  // workers start only once every thread exists
    _Atomic uint64_t next_eval_samples;  // the next evaluation is due at this many samples
    // A step's loss was NaN or Inf: the first thread to see it records where.
    _Atomic int diverged;
    size_t diverged_thread;
    uint64_t diverged_step;
    double diverged_loss;

    // Sync mode.
    spin_barrier_t barrier;
    grad_t sum;  // the averaged gradient of a round (dense; sparse with a link)
    grad_t *sum_part;  // (threads) sparse: sum's values and flags, each thread's own touched list
    int keep_copies;  // dense, no link: the model lives in the threads' copies between parks
    float **copies;  // (threads) keep_copies: each thread's parameter copy
    int round_park;  // thread 0's reading of pause_requested for this round
    int round_stop;  // distributed: thread 0 saw the link fail; every thread stops
    // The same, as the exchange saw it (written by thread 0 between a round's
    // barriers B and the exchange's; read after the exchange's barrier, before
    // the next round's barrier A, while thread 0 may already write round_stop).
    int exchange_stop;
    int round_applied;  // distributed: the link applied this round's update itself

    // A device (--device cuda): its table, the device the steps run on, and
    // the first failure of the thread driving it.
    const train_device_ops_t *dev_ops;
    void *dev;
    char gpu_err[512];
    void *own_dev;  // the device train_run made (not a borrowed one)
    train_position_t position;  // filled for each checkpoint
    model_ws_t *eval_ws[EVAL_THREADS_MAX];  // the evaluation threads' workspaces
    size_t n_eval_ws;
    // Evaluation points deferred to the end of the run (defer_eval_bytes), in order.
    deferred_eval_t *deferred;
    size_t n_deferred, cap_deferred, deferred_bytes;
    param_t *deferred_w;  // (n_params) where a deferred point's parameters are evaluated
    int sync_inited;  // mu, the condition variables and update_lock exist
};

// The trainer's spans in a --trace timeline (docs/trace.md).
static const trace_kind_t TK_STEP = {"step", "compute", "examples"};  // hogwild/locked/device: one update
static const trace_kind_t TK_MERGE = {"merge", "sync", "steps"};  // hogwild replicas: a replica merged
static const trace_kind_t TK_ROUND = {"round", "compute", "examples"};  // sync: one round, every thread
static const trace_kind_t TK_COMPUTE = {"gradient", "compute", "examples"};  // sync: a thread's sub-batch
static const trace_kind_t TK_REDUCE = {"reduce", "compute", NULL};  // sync: a thread's coordinate slice
static const trace_kind_t TK_BARRIER = {"barrier", "sync", NULL};  // sync: waiting for the other threads
static const trace_kind_t TK_EXCHANGE = {"exchange", "sync", "examples"};  // sync, distributed: the link's round
static const trace_kind_t TK_WAIT_BOUND = {"wait_bound", "sync", "step"};  // held by the link's allowance (SSP/BSP)
static const trace_kind_t TK_PARKED = {"parked", "sync", NULL};  // parked for an evaluation or checkpoint
static const trace_kind_t TK_DELAY = {"injected_delay", "sync", NULL};  // --delay-worker
static const trace_kind_t TK_EVAL = {"evaluate", "eval", "samples"};  // one evaluation point
static const trace_kind_t TK_CHECKPOINT = {"checkpoint", "io", NULL};

void train_config_default(train_config_t *c) {
    memset(c, 0, sizeof *c);
    c->mode = TRAIN_MODE_HOGWILD;
    c->threads = 1;
    c->epochs = 1;
    c->batch = 1;
    c->seed = 1;
    c->target = NAN;
}

int train_config_check(const train_config_t *c, size_t n_train, char *err, size_t err_len) {
    if (c->threads < 1 || c->threads > 1024) {
        snprintf(err, err_len, "--threads: %zu; expected 1..1024", c->threads);
        return -1;
    }
    if (c->epochs < 1) {
        snprintf(err, err_len, "--epochs: %zu; expected at least 1", c->epochs);
        return -1;
    }
    if (c->batch < 1 || c->batch > 1u << 20) {
        snprintf(err, err_len, "--batch: %zu; expected 1..1048576", c->batch);
        return -1;
    }
    if (n_train == 0 || n_train > UINT32_MAX) {
        snprintf(err, err_len, "training set has %zu examples; expected 1..%u", n_train, UINT32_MAX);
        return -1;
    }
    if (c->start && c->start->threads != c->threads) {
        snprintf(err, err_len, "--threads: %zu; the run being resumed had %zu", c->threads, c->start->threads);
        return -1;
    }
    if (c->checkpoint_every_s > 0 && !c->checkpoint) {
        snprintf(err, err_len, "trainer: checkpoints every %g s but nothing to write them", c->checkpoint_every_s);
        return -1;
    }
    if (c->link && (c->link->ranks == 0 || c->link->rank >= c->link->ranks)) {
        snprintf(err, err_len, "trainer: replica %zu of %zu", c->link->rank, c->link->ranks);
        return -1;
    }
    if (c->device && (c->start || c->checkpoint_every_s > 0)) {
        snprintf(err, err_len,
                 "--device cuda: checkpoints, resuming and rejoining a run are not built for the GPU "
                 "path yet; use the CPU");
        return -1;
    }
    if (!(c->clip_grad_norm >= 0) || (c->device && c->clip_grad_norm > 0)) {
        snprintf(err, err_len,
                 "--clip-grad-norm: %g; expected a positive norm, and the CPU (the GPU steps do not clip)",
                 c->clip_grad_norm);
        return -1;
    }
    if (c->device && (c->threads != 1 || c->mode != TRAIN_MODE_HOGWILD)) {
        snprintf(err, err_len,
                 "--device cuda: one host thread drives the GPU (--threads 1, --mode hogwild); the "
                 "parallelism is the GPU's own");
        return -1;
    }
    if (c->hogwild_variant == HOGWILD_VARIANT_REPLICAS && c->mode != TRAIN_MODE_HOGWILD) {
        snprintf(err, err_len, "--hogwild-variant replicas: applies to --mode hogwild, not --mode %s",
                 train_mode_name(c->mode));
        return -1;
    }
    if (c->hogwild_variant == HOGWILD_VARIANT_REPLICAS && (c->link || c->device)) {
        snprintf(err, err_len, "--hogwild-variant replicas: for training in one process on the CPU, not %s",
                 c->link ? "a distributed run's workers" : "--device cuda");
        return -1;
    }
    size_t shard = c->link ? n_train / c->link->ranks : n_train;
    if (c->mode != TRAIN_MODE_SYNC && c->threads > shard) {
        if (c->link) {
            snprintf(err, err_len, "--threads: %zu threads but this worker's data shard has only %zu examples",
                     c->threads, shard);
            return -1;
        }
        snprintf(err, err_len, "--threads: %zu threads but only %zu training examples to shard", c->threads, n_train);
        return -1;
    }
    return 0;
}

const char *train_mode_name(train_mode_t mode) {
    switch (mode) {
        case TRAIN_MODE_LOCKED:
            return "locked";
        case TRAIN_MODE_SYNC:
            return "sync";
        case TRAIN_MODE_HOGWILD:
            break;
    }
    return "hogwild";
}

const char *hogwild_variant_name(hogwild_variant_t v) { return v == HOGWILD_VARIANT_REPLICAS ? "replicas" : "plain"; }

size_t train_merge_every_default(const model_t *m, size_t batch) {
    double walk = TRAIN_MERGE_WALK_RATIO * (double)model_num_params(m) / hogwild_touches_per_example(m);
    double examples = walk > TRAIN_MERGE_EXAMPLES ? walk : TRAIN_MERGE_EXAMPLES;
    double steps = ceil(examples / (double)(batch ? batch : 1));
    return steps < 1.0 ? 1 : steps > 1e15 ? (size_t)1e15 : (size_t)steps;
}

// ---- pause protocol (off the hot path: taken only when the main thread asks) ----

static void park(trainer_t *tr) {
    uint64_t span = TRACE_BEGIN();
    pthread_mutex_lock(&tr->mu);
    uint64_t generation = tr->resume_generation;
    tr->parked++;
    pthread_cond_signal(&tr->cv_parked);
    // Not counted down on waking: the resume zeroes the count, so a pause asked
    // for before this thread has woken waits for it to park anew.
    while (generation == tr->resume_generation) pthread_cond_wait(&tr->cv_resume, &tr->mu);
    pthread_mutex_unlock(&tr->mu);
    TRACE_END(&TK_PARKED, span, 0);
}

static void mark_finished(trainer_t *tr) {
    pthread_mutex_lock(&tr->mu);
    tr->finished++;
    pthread_cond_signal(&tr->cv_parked);
    pthread_mutex_unlock(&tr->mu);
}

// Holds a worker until the main thread has created all of them, so that a
// failed pthread_create never leaves the others waiting at a barrier. Returns 1
// if the run was abandoned.
static int wait_at_gate(trainer_t *tr) {
    pthread_mutex_lock(&tr->mu);
    while (!tr->gate_open) pthread_cond_wait(&tr->cv_resume, &tr->mu);
    pthread_mutex_unlock(&tr->mu);
    return atomic_load_explicit(&tr->stop_requested, memory_order_acquire);
}

static void open_gate(trainer_t *tr, int abandon) {
    pthread_mutex_lock(&tr->mu);
    if (abandon) atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
    tr->gate_open = 1;
    pthread_cond_broadcast(&tr->cv_resume);
    pthread_mutex_unlock(&tr->mu);
}

// Returns 1 if the worker must stop.
static int check_pause(trainer_t *tr) {
    const train_link_t *link = tr->cfg.link;
    if (link && atomic_load_explicit(link->abort, memory_order_relaxed)) {
        atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
        return 1;
    }
    if (!atomic_load_explicit(&tr->pause_requested, memory_order_acquire)) return 0;
    park(tr);
    return atomic_load_explicit(&tr->stop_requested, memory_order_acquire);
}

typedef struct totals {
    uint64_t samples, updates;
    double loss_sum;
    float lr;
} totals_t;

static totals_t read_totals(const trainer_t *tr) {
    totals_t t = {0, 0, 0.0, 0.0f};
    for (size_t i = 0; i < tr->cfg.threads; i++) {
        worker_stats_t *s = &tr->stats[i];
        t.samples += atomic_load_explicit(&s->samples, memory_order_relaxed);
        t.updates += atomic_load_explicit(&s->updates, memory_order_relaxed);
        t.loss_sum += atomic_load_explicit(&s->loss_sum, memory_order_relaxed);
    }
    t.lr = atomic_load_explicit(&tr->stats[0].lr, memory_order_relaxed);
    return t;
}

// Asks for an evaluation once all threads together reach the next evaluation
// point. Reading every thread's counter costs T cache misses, so a thread only
// looks when its own count says the point may be near; returns the local sample
// count at which to look again.
static uint64_t maybe_request_eval(trainer_t *tr, uint64_t my_samples) {
    uint64_t target = atomic_load_explicit(&tr->next_eval_samples, memory_order_acquire);
    uint64_t total = read_totals(tr).samples;
    if (total >= target) {
        atomic_store_explicit(&tr->pause_requested, 1, memory_order_release);
        return my_samples + tr->cfg.eval_every / tr->cfg.threads;
    }
    uint64_t step = (target - total) / tr->cfg.threads;
    return my_samples + (step > tr->cfg.batch ? step : tr->cfg.batch);
}

static void publish(worker_stats_t *s, size_t count, double loss, float lr, uint64_t updates) {
    uint64_t samples = atomic_load_explicit(&s->samples, memory_order_relaxed);
    atomic_store_explicit(&s->samples, samples + count, memory_order_relaxed);
    uint64_t u = atomic_load_explicit(&s->updates, memory_order_relaxed);
    atomic_store_explicit(&s->updates, u + updates, memory_order_relaxed);
    double l = atomic_load_explicit(&s->loss_sum, memory_order_relaxed);
    atomic_store_explicit(&s->loss_sum, l + loss * (double)count, memory_order_relaxed);
    atomic_store_explicit(&s->lr, lr, memory_order_relaxed);
}

// A non-finite loss means the run has diverged (the parameters hold or are
// about to hold NaN/Inf): the first thread to see it records where, and every
// thread stops at its next step boundary. The loss is computed anyway, so the
// check costs nothing in the hot loop.
static int check_diverged(trainer_t *tr, size_t id, uint64_t step, double loss) {
    if (isfinite(loss)) return 0;
    int expected = 0;
    if (atomic_compare_exchange_strong(&tr->diverged, &expected, 1)) {
        tr->diverged_thread = id;
        tr->diverged_step = step;
        tr->diverged_loss = loss;
    }
    atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
    atomic_store_explicit(&tr->pause_requested, 1, memory_order_release);
    return 1;
}

// Where thread id starts: the steps it took before (a resumed run), else 0.
static uint64_t start_updates(const trainer_t *tr, size_t id) { return tr->cfg.start ? tr->cfg.start->updates[id] : 0; }

// ---- the data order ----

// The run's order of the training examples: a permutation of 0..n-1 drawn
// from the seed (every replica of a distributed run draws the same one).
static void run_order(uint32_t *order, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    rng_t rng;
    rng_seed(&rng, seed, STREAM_ORDER);
    rng_shuffle_u32(&rng, order, n);
}

// Thread `thread`'s positions [begin, end) in the run's order: its share of
// its replica's share (a distributed run's rank among ranks).
static void thread_shard(const train_config_t *c, size_t n_train, size_t thread, size_t *begin, size_t *end) {
    size_t lo = 0, hi = n_train;
    if (c->link) shard_range(n_train, c->link->ranks, c->link->rank, &lo, &hi);
    shard_range(hi - lo, c->threads, thread, begin, end);
    *begin += lo;
    *end += lo;
}

// A thread's shuffles: its own stream, drawn once per epoch (shuffle_shard).
static void thread_shuffle_seed(rng_t *r, const train_config_t *c, size_t thread) {
    rng_seed(r, c->seed, STREAM_SHUFFLE + thread);
}

int train_order_init(train_order_t *o, const train_config_t *c, size_t n_train, size_t thread, char *err,
                     size_t err_len) {
    memset(o, 0, sizeof *o);
    uint32_t *all = malloc((n_train ? n_train : 1) * sizeof *all);
    size_t begin, end;
    thread_shard(c, n_train, thread, &begin, &end);
    o->len = end - begin;
    o->data = malloc((o->len ? o->len : 1) * sizeof *o->data);
    o->prev = malloc((o->len ? o->len : 1) * sizeof *o->prev);
    if (!all || !o->data || !o->prev) {
        free(all);
        train_order_free(o);
        snprintf(err, err_len, "trainer: out of memory for a thread's order of %zu examples", n_train);
        return -1;
    }
    run_order(all, n_train, c->seed);
    memcpy(o->data, all + begin, o->len * sizeof *o->data);
    free(all);
    o->batch = c->batch ? c->batch : 1;
    o->per_epoch = (o->len + o->batch - 1) / o->batch;
    o->epoch = UINT64_MAX;
    thread_shuffle_seed(&o->rng, c, thread);
    return 0;
}

void train_order_free(train_order_t *o) {
    free(o->data);
    free(o->prev);
    o->data = o->prev = NULL;
}

const uint32_t *train_order_step(train_order_t *o, uint64_t step, size_t *count) {
    *count = 0;
    if (o->per_epoch == 0) return NULL;
    uint64_t epoch = step / o->per_epoch;
    int behind = o->epoch != UINT64_MAX && o->epoch > 0 && epoch == o->epoch - 1;
    if (o->epoch != UINT64_MAX && epoch < o->epoch && !behind) return NULL;
    while (o->epoch == UINT64_MAX || o->epoch < epoch) {
        memcpy(o->prev, o->data, o->len * sizeof *o->data);
        rng_shuffle_u32(&o->rng, o->data, o->len);  // what the thread's epoch_begin draws
        o->epoch = o->epoch == UINT64_MAX ? 0 : o->epoch + 1;
    }
    size_t pos = (size_t)(step % o->per_epoch) * o->batch;
    *count = o->len - pos < o->batch ? o->len - pos : o->batch;
    return (behind ? o->prev : o->data) + pos;
}

// ---- hogwild and locked ----

// Where a dense Hogwild! step sends its gradient blocks: straight into the
// shared model, refreshing the thread's private copy on the way.
typedef struct block_apply {
    optimizer_t *opt;
    param_t *w;
    float lr;
    float *copy;
} block_apply_t;

static void apply_block(void *ctx, size_t offset, const float *g, size_t n) {
    block_apply_t *b = ctx;
    optimizer_apply_block(b->opt, b->w, offset, g, n, b->lr, b->copy);
}

// The replicas variant's: into the copy alone, which is the thread's replica.
static void apply_block_to_copy(void *ctx, size_t offset, const float *g, size_t n) {
    block_apply_t *b = ctx;
    optimizer_apply_values(b->opt, offset, g, n, b->lr, b->copy + offset);
}

static void sleep_ms(double ms) {
    struct timespec t = {(time_t)(ms / 1000.0), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

// ---- injected straggler delay (distributed runs: --delay-worker) ----

// Each thread draws its delays from its own stream of (seed, rank, thread).
static void step_delay_seed(rng_t *r, const train_config_t *c, size_t thread) {
    size_t rank = c->link ? c->link->rank : 0;
    rng_seed(r, c->seed, STREAM_DELAY + (uint64_t)rank * c->threads + thread);
}

static void step_delay_sleep(const train_link_t *link, rng_t *r) {
    if (!link || !step_delay_active(&link->step_delay)) return;
    double ms = step_delay_draw(&link->step_delay, r);
    uint64_t span = TRACE_BEGIN();
    if (ms > 0) sleep_ms(ms);
    TRACE_END(&TK_DELAY, span, 0);
}

// A distributed replica's thread waits here while the link holds it back (the
// staleness bound). Returns 1 if the run is stopping.
static int wait_for_allowance(trainer_t *tr, size_t id, uint64_t my_steps) {
    const train_link_t *link = tr->cfg.link;
    if (my_steps < atomic_load_explicit(link->step_allowance, memory_order_acquire)) return 0;
    double t0 = mono_clock_s();
    uint64_t span = TRACE_BEGIN();
    int spins = 0, stopping = 0;
    while (my_steps >= atomic_load_explicit(link->step_allowance, memory_order_acquire)) {
        if (check_pause(tr)) {
            stopping = 1;
            break;
        }
        if (++spins < 64) {
            sched_yield();
        } else {
            struct timespec nap = {0, 20000};
            nanosleep(&nap, NULL);
        }
    }
    TRACE_END(&TK_WAIT_BOUND, span, my_steps);
    uint64_t waited = (uint64_t)((mono_clock_s() - t0) * 1e9);
    uint64_t total = atomic_load_explicit(&link->progress[id].wait_ns, memory_order_relaxed);
    atomic_store_explicit(&link->progress[id].wait_ns, total + waited, memory_order_relaxed);
    return stopping;
}

// A step starts: it records the link generation it reads (see train_link_t).
static inline void note_step_start(const train_link_t *link, size_t id, uint64_t step) {
    if (!link || !link->generation) return;
    uint64_t g = atomic_load_explicit(link->generation, memory_order_acquire);
    atomic_store_explicit(&link->progress[id].read_gen, g << 32 | (uint32_t)step, memory_order_release);
}

// ---- the worker skeleton ----
//
// Every worker thread runs one skeleton (run_epochs): the epochs, each begun
// by the mode's epoch_begin (its shuffle, drawn for the epochs a resumed run
// skips too, so that the order goes on as it was), then the epoch's steps from
// where the run stands, one call of the mode's step function each:
//   hogwild/locked  hogwild_step: a minibatch of this thread's shard
//   a device        device_step: a chunk of the shard queued to the device
//   sync            sync_round: a round, every thread at its barriers
// Threads that step alone (the first two) share the step's frame: the pause
// check and the link's allowance before it (solo_step_gate), the counters, the
// link's progress, the injected delay and the evaluation check after it
// (solo_step_done). What a thread keeps from step to step is in its loop_t
// (inside the mode's own struct), on its stack: the skeleton adds no
// allocation, lock or system call to a step, only the call of the mode's step.

typedef struct loop loop_t;

typedef struct loop_mode {
    // The start of an epoch: 0, or -1 to stop.
    int (*epoch_begin)(loop_t *L, size_t epoch);
    // One step at position pos of the epoch: returns the positions it took, 0 to stop.
    size_t (*step)(loop_t *L, size_t epoch, size_t pos);
} loop_mode_t;

struct loop {
    worker_t *wk;
    trainer_t *tr;
    const train_config_t *c;
    const train_link_t *link;
    size_t id;
    uint32_t *data;  // what an epoch runs over: this thread's shard, or (sync) the whole order
    size_t len;  // its positions
    size_t stride;  // the positions of a whole step (sync: round)
    uint64_t done;  // steps (sync: rounds) taken before this run, which it skips
    uint64_t updates;  // steps (sync: rounds) so far, those skipped included
    uint64_t samples;  // examples so far (sync: all threads')
    uint64_t next_check;  // the sample count at which to look whether an evaluation is due
    rng_t rng;  // the epochs' shuffles
    rng_t delay_rng;  // injected delays
};

static void loop_init(loop_t *L, worker_t *wk, uint32_t *data, size_t len, size_t stride, uint64_t done) {
    trainer_t *tr = wk->tr;
    L->wk = wk;
    L->tr = tr;
    L->c = &tr->cfg;
    L->link = tr->cfg.link;
    L->id = wk->id;
    L->data = data;
    L->len = len;
    L->stride = stride;
    L->done = L->updates = done;
    L->samples = atomic_load_explicit(&tr->stats[wk->id].samples, memory_order_relaxed);
    L->next_check = L->samples + tr->cfg.eval_every / tr->cfg.threads;
    thread_shuffle_seed(&L->rng, &tr->cfg, wk->id);
    step_delay_seed(&L->delay_rng, &tr->cfg, wk->id);
}

// The epochs, from where the run stands (L->done whole steps in), until they
// are done or a step says stop.
static void run_epochs(loop_t *L, const loop_mode_t *mode) {
    size_t per_epoch = (L->len + L->stride - 1) / L->stride;
    size_t skip_epochs = per_epoch ? (size_t)(L->done / per_epoch) : L->c->epochs;
    size_t skip_pos = per_epoch ? (size_t)(L->done % per_epoch) * L->stride : 0;
    for (size_t epoch = 0; epoch < L->c->epochs; epoch++) {
        if (mode->epoch_begin(L, epoch) != 0) return;
        if (epoch < skip_epochs) continue;
        for (size_t pos = epoch == skip_epochs ? skip_pos : 0; pos < L->len;) {
            size_t took = mode->step(L, epoch, pos);
            if (took == 0) return;
            pos += took;
        }
    }
}

// A thread stepping alone shuffles its shard.
static int shuffle_shard(loop_t *L, size_t epoch) {
    (void)epoch;
    rng_shuffle_u32(&L->rng, L->data, L->len);
    return 0;
}

// Before a step of a thread stepping alone: the pause check, then the link's
// allowance. Returns 1 if the thread must stop.
static int solo_step_gate(loop_t *L) {
    if (check_pause(L->tr)) return 1;
    return L->link && wait_for_allowance(L->tr, L->id, L->updates);
}

// After it: the counters, the link's progress and delay, and whether an
// evaluation is due.
static void solo_step_done(loop_t *L, size_t count, double loss, float lr, uint64_t updates) {
    L->updates += updates;
    L->samples += count;
    publish(&L->tr->stats[L->id], count, loss, lr, updates);
    if (L->link) {
        // Release: a link that reads this count (acquire) sees the step's writes
        // (a replica moving keys pushes a step's keys until it sees it done).
        atomic_store_explicit(&L->link->progress[L->id].steps, L->updates, memory_order_release);
        step_delay_sleep(L->link, &L->delay_rng);
    }
    if (L->samples >= L->next_check) L->next_check = maybe_request_eval(L->tr, L->samples);
}

// A thread stepping alone is done (its epochs, or stopped).
static void solo_finished(loop_t *L) {
    if (L->link) atomic_store_explicit(&L->link->progress[L->id].finished, 1, memory_order_release);
}

// ---- hogwild and locked: the steps ----

typedef struct hogwild_loop {
    loop_t loop;
    int locked;
    int clip;
    float *copy;  // fused dense steps: the thread's parameter copy (see async_worker)
    int direct;  // one-example plain-SGD steps without the gradient buffer
    param_t *w;  // the parameters the steps read and write: the shared ones, or (replicas) the thread's
    size_t since_merge;  // replicas: steps since the thread's last merge
} hogwild_loop_t;

// One minibatch's gradient, applied to the model (shared, or the thread's
// replica). Returns its loss.
static double hogwild_apply(hogwild_loop_t *H, const uint32_t *idx, size_t count, float lr) {
    trainer_t *tr = H->loop.tr;
    worker_t *wk = H->loop.wk;
    if (H->direct) return model_sgd_step_one(tr->model, H->w, idx[0], lr);
    if (H->copy) {
        block_apply_t sink = {tr->opt, tr->w, lr, H->copy};
        double loss = model_loss_grad_apply(tr->model, tr->w, idx, count, wk->ws,
                                            tr->replicas ? apply_block_to_copy : apply_block, &sink);
        if (!H->locked) model_ws_mark_copy_current(wk->ws);
        return loss;
    }
    double loss = model_loss_grad(tr->model, H->w, idx, count, &wk->grad, wk->ws);
    if (H->clip) grad_clip_norm(&wk->grad, H->loop.c->clip_grad_norm);
    optimizer_apply_and_clear(tr->opt, H->w, &wk->grad, lr);
    return loss;
}

// ---- hogwild, replicas variant ----
//
// The shared parameters are written by merges only, and read by merges, by
// replica starts and, with every thread parked or finished, by the main
// thread's evaluations and checkpoints. Merges and starts take the turn
// (merge_turn: an exchange with acquire, a store with release), so no two
// overlap and each sees every merge before it whole; the main thread's reads
// are ordered after the workers' merges by the park mutex. The replica and its
// base are the thread's own. (The optimizer's state, momentum or Adagrad
// sums, stays shared and raced over as in the plain variant.)

static void take_merge_turn(trainer_t *tr) {
    while (atomic_exchange_explicit(&tr->merge_turn, 1, memory_order_acquire)) sched_yield();
}

static void give_merge_turn(trainer_t *tr) { atomic_store_explicit(&tr->merge_turn, 0, memory_order_release); }

// The thread's replica merged into the shared parameters (hogwild_replica_merge).
// With `wait` 0 a thread that finds another merging does not wait but goes
// on stepping, and merges at a later step. Returns whether it merged.
static int merge_replica(hogwild_loop_t *H, int wait) {
    trainer_t *tr = H->loop.tr;
    if (wait)
        take_merge_turn(tr);
    else if (atomic_exchange_explicit(&tr->merge_turn, 1, memory_order_acquire))
        return 0;
    uint64_t span = TRACE_BEGIN();
    hogwild_replica_merge(&H->loop.wk->replica, tr->w, tr->hot.hot ? &tr->hot : NULL);
    TRACE_END(&TK_MERGE, span, H->since_merge);
    give_merge_turn(tr);
    if (H->since_merge > H->loop.wk->merge_gap_max) H->loop.wk->merge_gap_max = H->since_merge;
    H->since_merge = 0;
    return 1;
}

// The replica starts as the shared parameters (a resumed run's included).
static void start_replica(hogwild_loop_t *H) {
    trainer_t *tr = H->loop.tr;
    take_merge_turn(tr);
    hogwild_replica_start(&H->loop.wk->replica, tr->w);
    give_merge_turn(tr);
    if (H->copy) model_ws_mark_copy_current(H->loop.wk->ws);
}

// Before a step: the pause check, with the replica merged before the thread
// parks, so that an evaluation or checkpoint reads every step taken. (The
// flag, once seen, stays up until every thread has parked.) Returns 1 if the
// thread must stop.
static int replica_step_gate(hogwild_loop_t *H) {
    trainer_t *tr = H->loop.tr;
    if (!atomic_load_explicit(&tr->pause_requested, memory_order_acquire)) return 0;
    merge_replica(H, 1);
    return check_pause(tr);
}

static size_t hogwild_step(loop_t *L, size_t epoch, size_t pos) {
    hogwild_loop_t *H = (hogwild_loop_t *)L;
    trainer_t *tr = L->tr;
    const train_config_t *c = L->c;
    if (tr->replicas ? replica_step_gate(H) : solo_step_gate(L)) return 0;
    uint64_t span = TRACE_BEGIN();
    note_step_start(L->link, L->id, L->updates);
    size_t count = L->len - pos < c->batch ? L->len - pos : c->batch;
    // Step-size schedules count global updates; each thread sees about 1/T of them.
    float lr = optimizer_lr(tr->opt, (double)L->updates * (double)c->threads, epoch);
    if (H->locked) pthread_mutex_lock(&tr->update_lock);
    double loss = hogwild_apply(H, L->data + pos, count, lr);
    if (H->locked) pthread_mutex_unlock(&tr->update_lock);
    if (check_diverged(tr, L->id, L->updates, loss)) return 0;
    TRACE_END(&TK_STEP, span, count);
    // A thread that finds another merging goes on and tries again at its next
    // step, but not past two intervals: then it waits for its turn, so that
    // whatever the contention another thread's steps arrive within about two
    // intervals, and no replica corrects a hot coordinate alone for longer.
    if (tr->replicas && ++H->since_merge >= tr->merge_every) merge_replica(H, H->since_merge >= 2 * tr->merge_every);
    solo_step_done(L, count, loss, lr, 1);
    return count;
}

static const loop_mode_t hogwild_mode = {shuffle_shard, hogwild_step};

// Dense models hand a hogwild/locked step's gradient over in blocks that go
// straight into the model (see async_worker): the thread's parameter copy
// they compute on, or NULL where steps build the whole gradient.
static float *fused_copy(const trainer_t *tr, worker_t *wk) {
    int fused = tr->cfg.clip_grad_norm <= 0 && wk->grad.dense && model_has_loss_grad_apply(tr->model);
    return fused ? model_ws_param_copy(wk->ws) : NULL;
}

static void *async_worker(void *arg) {
    worker_t *wk = arg;
    trainer_t *tr = wk->tr;
    const train_config_t *c = &tr->cfg;
    hogwild_loop_t H;
    // A resumed thread skips the steps it took before.
    loop_init(&H.loop, wk, tr->order + wk->shard_begin, wk->shard_end - wk->shard_begin, c->batch,
              start_updates(tr, wk->id));
    H.locked = c->mode == TRAIN_MODE_LOCKED;
    // Dense models hand their gradient over in cache-sized blocks that go straight
    // into the shared model (no model-sized gradient buffer). Under Hogwild! the
    // thread's private parameter copy is refreshed during that write instead of
    // being re-read at the next step: it then holds every other thread's updates
    // up to that write, as fresh as a re-read a moment later would be. Locked
    // mode re-reads it (other threads' steps come between this thread's) to stay
    // serialisable.
    // Clipping needs the whole gradient before any of it is applied: the fused
    // paths, which apply it as it is computed, are for unclipped steps.
    H.clip = c->clip_grad_norm > 0;
    H.copy = fused_copy(tr, wk);
    // One-example plain-SGD steps skip the gradient buffer (bit-identical result).
    H.direct = !H.clip && c->batch == 1 && optimizer_is_plain_sgd(tr->opt) && model_has_sgd_step_one(tr->model);
    H.w = wk->replica.params ? wk->replica.params : tr->w;
    H.since_merge = 0;
    trace_thread_name("trainer", (int)wk->id);
    if (!wait_at_gate(tr)) {
        if (tr->replicas) start_replica(&H);
        run_epochs(&H.loop, &hogwild_mode);
        if (tr->replicas) merge_replica(&H, 1);
    }
    solo_finished(&H.loop);
    mark_finished(tr);
    return NULL;
}

// ---- a device: one host thread queues the steps (engine/core/train_device.h) ----

static void gpu_fail(trainer_t *tr, const char *message) {
    snprintf(tr->gpu_err, sizeof tr->gpu_err, "%s", message);
    atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
}

// Waits for the queued steps and adds their loss to the counters; with
// `params`, also copies the parameters into tr->w (for an evaluation, or the end).
static int gpu_sync(trainer_t *tr, worker_stats_t *s, int params, char *err, size_t err_len) {
    double loss;
    if (tr->dev_ops->take_loss(tr->dev, &loss, err, err_len) != 0) return -1;
    check_diverged(tr, 0, atomic_load_explicit(&s->updates, memory_order_relaxed), loss);
    double l = atomic_load_explicit(&s->loss_sum, memory_order_relaxed);
    atomic_store_explicit(&s->loss_sum, l + loss, memory_order_relaxed);
    return params ? tr->dev_ops->get_params(tr->dev, tr->w, err, err_len) : 0;
}

typedef struct device_loop {
    loop_t loop;
    worker_stats_t *stats;
    int hogwild;  // sparse models under Hogwild!: a step is a chunk of examples, each one update
    size_t step_max;  // examples per step
    uint64_t unsynced;  // steps since the last read of their loss
    int ok;  // no failure yet (else err says what)
    char err[512];
} device_loop_t;

static int device_epoch_begin(loop_t *L, size_t epoch) {
    device_loop_t *D = (device_loop_t *)L;
    shuffle_shard(L, epoch);
    D->ok = L->tr->dev_ops->set_order(L->tr->dev, L->data, L->len, D->err, sizeof D->err) == 0;
    return D->ok ? 0 : -1;
}

// One step queued to the device: the same data order, evaluation pauses,
// link (allowance, progress, delays) and counters as hogwild_step; a chunk
// ends at the link's allowance.
static size_t device_step(loop_t *L, size_t epoch, size_t pos) {
    device_loop_t *D = (device_loop_t *)L;
    trainer_t *tr = L->tr;
    const train_link_t *link = L->link;
    // The main thread evaluates tr->w once this thread has parked: bring it up to date first.
    if (!(link && atomic_load_explicit(link->abort, memory_order_relaxed)) &&
        atomic_load_explicit(&tr->pause_requested, memory_order_acquire)) {
        if (!(D->ok = gpu_sync(tr, D->stats, 1, D->err, sizeof D->err) == 0)) return 0;
        D->unsynced = 0;
    }
    if (solo_step_gate(L)) return 0;
    size_t count = L->len - pos < D->step_max ? L->len - pos : D->step_max;
    if (D->hogwild && link) {
        uint64_t allowed = atomic_load_explicit(link->step_allowance, memory_order_acquire);
        if (allowed > L->updates && allowed - L->updates < count) count = (size_t)(allowed - L->updates);
    }
    float lr = optimizer_lr(tr->opt, (double)L->updates, epoch);
    uint64_t span = TRACE_BEGIN();
    note_step_start(link, L->id, L->updates);
    if (!(D->ok = tr->dev_ops->step(tr->dev, pos, count, lr, D->err, sizeof D->err) == 0)) return 0;
    TRACE_END(&TK_STEP, span, count);
    solo_step_done(L, count, 0.0, lr, D->hogwild ? count : 1);  // the loss comes with the next sync
    if (++D->unsynced >= GPU_LOSS_EVERY) {
        if (!(D->ok = gpu_sync(tr, D->stats, 0, D->err, sizeof D->err) == 0)) return 0;
        D->unsynced = 0;
    }
    return count;
}

static const loop_mode_t device_mode = {device_epoch_begin, device_step};

// The thread driving the device.
static void *gpu_worker(void *arg) {
    worker_t *wk = arg;
    trainer_t *tr = wk->tr;
    device_loop_t D;
    trace_thread_name("trainer (device)", (int)wk->id);
    D.stats = &tr->stats[wk->id];
    D.ok = tr->dev_ops->bind_thread(tr->dev, D.err, sizeof D.err) == 0;
    D.hogwild = tr->dev_ops->is_hogwild(tr->dev);
    D.step_max = D.hogwild ? tr->dev_ops->hogwild_chunk(tr->dev) : tr->cfg.batch;
    D.unsynced = 0;
    loop_init(&D.loop, wk, tr->order + wk->shard_begin, wk->shard_end - wk->shard_begin, D.step_max, 0);
    if (D.ok && !wait_at_gate(tr)) run_epochs(&D.loop, &device_mode);
    if (D.ok) D.ok = gpu_sync(tr, D.stats, 1, D.err, sizeof D.err) == 0;
    if (!D.ok) gpu_fail(tr, D.err);
    solo_finished(&D.loop);
    tr->dev_ops->unbind_thread();
    mark_finished(tr);
    return NULL;
}

// ---- sync ----
//
// A round takes two barriers. Thread 0 first decides for everyone whether the
// round parks or stops (and, distributed, prepares the parameters); then
//   barrier A: the previous round's update is in place and its gradients have
//              been read; the decision and the (reshuffled) order are visible;
//   compute:   each thread its sub-batch's gradient, into its own buffer;
//   barrier B: every gradient of the round is ready;
//   reduce:    each thread sums every thread's gradient over its own slice of
//              the coordinates and applies the result (a reduce-scatter; no
//              serial phase).
// Dense models without a link keep the model in the threads' parameter
// copies, which they compute on: the reduce writes the new values of a
// thread's coordinates into its own copy, each thread copies the other
// threads' coordinates from theirs before its next step (after barrier A), and
// w is written from the copies when the threads park or finish (nothing reads
// w in between). With a link, the replica's average goes to the exchange
// (thread 0) and the update to w, which the steps then read.

#define SYNC_CHUNK 1024  // coordinates a thread sums and applies at a time (4 KB, in L1)

// Thread t's share of a round of `total` examples (this replica's): examples
// [t * batch, t * batch + count) of it.
static size_t sync_count(size_t total, size_t batch, size_t t) {
    size_t begin = t * batch;
    if (begin >= total) return 0;
    return total - begin < batch ? total - begin : batch;
}

// The threads with examples in a round of `total`: 0 .. sync_active - 1.
static size_t sync_active(size_t total, size_t batch, size_t threads) {
    size_t active = (total + batch - 1) / batch;
    return active < threads ? active : threads;
}

static void add_scaled(float *restrict s, const float *restrict g, float weight, size_t n) {
    for (size_t i = 0; i < n; i++) s[i] += weight * g[i];
}

// This thread's coordinates of the model.
static void sync_range(const trainer_t *tr, size_t id, size_t *begin, size_t *end) {
    *begin = tr->n_params * id / tr->cfg.threads;
    *end = tr->n_params * (id + 1) / tr->cfg.threads;
}

// Dense: this thread's coordinates of the round's averaged gradient, the
// threads' gradients weighted by their share of the round's examples and
// summed in thread order from 0.0f (the order single-process sync and the
// replicas' BSP/allreduce rely on), one cache-resident chunk at a time. Then
// either the update goes into this thread's copy (tr->keep_copies), or the
// average is left in tr->sum (a link exchanges it) or applied to w.
static void sync_reduce_dense(trainer_t *tr, size_t id, size_t total, float lr) {
    const train_config_t *c = &tr->cfg;
    size_t T = c->threads, active = sync_active(total, c->batch, T), begin, end;
    sync_range(tr, id, &begin, &end);
    float chunk[SYNC_CHUNK];
    for (size_t off = begin; off < end; off += SYNC_CHUNK) {
        size_t n = end - off < SYNC_CHUNK ? end - off : SYNC_CHUNK;
        float *s = tr->keep_copies ? chunk : tr->sum.value + off;
        for (size_t i = 0; i < n; i++) s[i] = 0.0f;
        for (size_t t = 0; t < active; t++)
            add_scaled(s, tr->workers[t].grad.value + off, (float)sync_count(total, c->batch, t) / (float)total, n);
        if (tr->keep_copies) {
            float *copy = tr->copies[id] + off;
            optimizer_step_values(tr->opt, off, n, copy, s, lr);
            memcpy(copy, s, n * sizeof *s);
        } else if (!c->link || c->link->update_before_exchange) {
            optimizer_apply_range(tr->opt, tr->w, tr->sum.value, off, off + n, lr);
        }
    }
}

// ---- sync, one thread ----
//
// With one thread the round's average is that thread's gradient (weight
// count / total = 1): a dense model's step does sync_reduce_dense's
// arithmetic block by block as it hands its gradient over (solo_block), so
// there is no gradient buffer and no second pass over it. Where the round
// applies its update (no link: into the copy; a link that averages models:
// onto w and the copy together, as a Hogwild! step does) that happens in the
// same pass; otherwise the average goes into tr->sum for the exchange, and the
// update that comes back is applied to w and the copy together, so the next
// step computes on the copy without reading w again.

typedef struct solo_round {
    trainer_t *tr;
    float *copy;  // (n_params) the thread's parameter copy
    float weight, lr;
    int to_sum;  // the average is left in `sum` for the link's exchange
    float *sum;  // where: tr->sum's values, or the link's sum_buffer (weight: the examples)
    int plain_to_w;  // plain SGD applied to w and the copy (params_sgd_weighted)
    int plain_to_copy;  // plain SGD applied to the copy alone (w behind it: sync_loop_t.w_behind)
    int *finite;  // to_sum: cleared when a value stored in `sum` is not finite (train_link_t.sum_finite); NULL
} solo_round_t;

static void solo_block(void *ctx, size_t offset, const float *g, size_t n) {
    const solo_round_t *R = ctx;
    trainer_t *tr = R->tr;
    if (R->plain_to_w) {  // the hot case: one pass, in vector lanes
        params_sgd_weighted(tr->w + offset, n, g, R->weight, R->lr, R->copy + offset);
        return;
    }
    if (R->plain_to_copy) {  // the same bits, the copy alone
        sgd_weighted_update_cpu(n, R->lr, R->weight, g, R->copy + offset);
        return;
    }
    float chunk[SYNC_CHUNK];
    for (size_t done = 0; done < n; done += SYNC_CHUNK) {
        size_t m = n - done < SYNC_CHUNK ? n - done : SYNC_CHUNK, off = offset + done;
        float *restrict s = R->to_sum ? R->sum + off : chunk;
        const float *restrict gb = g + done;
        // sync_reduce_dense's sum of one, tested for NaN and Inf as it is stored
        if (!weighted_store_finite_cpu(s, gb, R->weight, m) && R->finite) *R->finite = 0;
        if (tr->keep_copies) {
            optimizer_step_values(tr->opt, off, m, R->copy + off, s, R->lr);
            memcpy(R->copy + off, s, m * sizeof *s);
        } else if (!R->to_sum) {
            optimizer_apply_block(tr->opt, tr->w, off, s, m, R->lr, R->copy);
        }
    }
}

// Sparse: the same sums over the touched coordinates in this thread's range,
// into its part of tr->sum (tr->sum's values and flags, its own touched
// list); without a link applied (and cleared) at once.
static void sync_reduce_sparse(trainer_t *tr, size_t id, size_t total, float lr) {
    const train_config_t *c = &tr->cfg;
    size_t active = sync_active(total, c->batch, c->threads), begin, end;
    sync_range(tr, id, &begin, &end);
    grad_t *part = &tr->sum_part[id];
    for (size_t t = 0; t < active; t++) {
        const grad_t *g = &tr->workers[t].grad;
        float weight = (float)sync_count(total, c->batch, t) / (float)total;
        for (size_t k = 0; k < g->n_touched; k++) {
            uint32_t i = g->touched[k];
            if (i >= begin && i < end) grad_add(part, i, weight * g->value[i]);
        }
    }
    if (!c->link || c->link->update_before_exchange) optimizer_apply_and_clear(tr->opt, tr->w, part, lr);
}

// keep_copies: brings this thread's copy up to date from the other threads'
// copies, each the owner of its coordinates (read, not written, across cores).
static void sync_pull(trainer_t *tr, size_t id) {
    for (size_t t = 0; t < tr->cfg.threads; t++) {
        size_t begin, end;
        sync_range(tr, t, &begin, &end);
        if (t != id) memcpy(tr->copies[id] + begin, tr->copies[t] + begin, (end - begin) * sizeof(float));
    }
}

// Writes this thread's coordinates of the model from its copy to w (keep_copies).
static void sync_flush(trainer_t *tr, size_t id) {
    size_t begin, end;
    sync_range(tr, id, &begin, &end);
    params_write(tr->w + begin, end - begin, tr->copies[id] + begin);
}

// Distributed, after the reduce: thread 0 hands the replica's average to the
// exchange, and the global update is applied (dense: by every thread to its
// range; sparse: by thread 0, while the others go on to the next round's
// barrier; with update_before_exchange the reduce applied it already).
// `copy`: a lone thread's parameter copy, which a dense update the trainer
// applies here is written to as well (NULL: none). Returns 1 if the run stops.
static int sync_exchange(trainer_t *tr, size_t id, size_t total, uint64_t rounds, float lr, float *copy) {
    const train_link_t *link = tr->cfg.link;
    int dense = tr->sum.dense;
    spin_barrier_wait(&tr->barrier);  // the replica's averaged gradient is complete
    if (id == 0) {
        grad_t *sum = &tr->sum;
        if (!dense) {
            // The parts' touched lists become the sum's (their values and flags are the sum's already).
            sum->n_touched = 0;
            for (size_t t = 0; t < tr->cfg.threads; t++) {
                grad_t *part = &tr->sum_part[t];
                memcpy(sum->touched + sum->n_touched, part->touched, part->n_touched * sizeof *part->touched);
                sum->n_touched += part->n_touched;
                part->n_touched = 0;
            }
        }
        int applied = 0;
        uint64_t span = TRACE_BEGIN();
        if (!atomic_load_explicit(link->abort, memory_order_relaxed) &&
            link->exchange(link->ctx, sum, total, lr, tr->w, &applied) != 0)
            atomic_store_explicit(link->abort, 1, memory_order_relaxed);
        TRACE_END(&TK_EXCHANGE, span, total);
        tr->round_applied = applied;
        tr->exchange_stop = atomic_load_explicit(link->abort, memory_order_relaxed);
        if (!dense && !tr->exchange_stop) {
            if (!applied && !link->update_before_exchange)
                optimizer_apply_and_clear(tr->opt, tr->w, sum, lr);
            else
                grad_clear(sum);
        }
    }
    if (dense) spin_barrier_wait(&tr->barrier);  // the global gradient (or model) is here, and exchange_stop
    if (dense && tr->exchange_stop) return 1;
    if (dense && !tr->round_applied && !link->update_before_exchange) {
        if (copy) {
            optimizer_apply_block(tr->opt, tr->w, 0, tr->sum.value, tr->n_params, lr, copy);
        } else {
            size_t begin, end;
            sync_range(tr, id, &begin, &end);
            optimizer_apply_range(tr->opt, tr->w, tr->sum.value, begin, end, lr);
        }
    }
    if (id == 0 && !tr->exchange_stop)
        atomic_store_explicit(&link->progress[0].steps, rounds + 1, memory_order_relaxed);
    // A prepare writes w, which the other threads may still be updating (dense).
    if (dense && link->prepare) spin_barrier_wait(&tr->barrier);
    return 0;
}

// Distributed, one thread summing in place (train_link_t.exchange_step): the
// replicas' sum comes back as a step of the thread's copy, and w falls behind
// it (written at the next park or the end: sync_loop_t.w_behind). Returns 1
// if the run stops.
static int sync_exchange_in_place(trainer_t *tr, size_t total, uint64_t rounds, float lr, float *copy) {
    const train_link_t *link = tr->cfg.link;
    int stepped = 0;
    uint64_t span = TRACE_BEGIN();
    if (!atomic_load_explicit(link->abort, memory_order_relaxed) &&
        link->exchange_step(link->ctx, total, lr, copy, &stepped) != 0)
        atomic_store_explicit(link->abort, 1, memory_order_relaxed);
    TRACE_END(&TK_EXCHANGE, span, total);
    tr->exchange_stop = atomic_load_explicit(link->abort, memory_order_relaxed);
    if (tr->exchange_stop) return 1;
    tr->round_applied = !stepped;
    atomic_store_explicit(&link->progress[0].steps, rounds + 1, memory_order_relaxed);
    return 0;
}

typedef struct sync_loop {
    loop_t loop;
    size_t rank, replica_size;  // this replica's slice of a round: [rank * replica_size, + replica_size)
    int dense, store;  // store: a dense model's step stores its gradient block by block
    int solo;  // one thread, storing, unclipped: the step reduces block by block (solo_block)
    int in_place;  // solo, plain SGD, with a link that steps the copy (train_link_t.exchange_step)
    int sum_in_place;  // in place, the round's gradient summed in the link's sum_buffer (not local SGD)
    int w_behind;  // in place: w is behind the thread's copy, which holds the parameters
    int copy_fresh;  // solo, with a link: the copy holds w's values after the last round
    int unflushed;  // keep_copies: w is behind this thread's copy in its range
    int behind;  // keep_copies: the other threads' ranges of this thread's copy are a round behind
} sync_loop_t;

// w written from the thread's copy where it is behind (keep_copies: the
// thread's range; in place: all of it), before a park and at the end.
static void sync_write_back(sync_loop_t *S) {
    trainer_t *tr = S->loop.tr;
    if (S->unflushed) sync_flush(tr, S->loop.id);
    if (S->w_behind) params_write(tr->w, tr->n_params, model_ws_param_copy(S->loop.wk->ws));
    S->unflushed = S->w_behind = 0;
}

// Thread 0 shuffles the whole order (the others wait for it at barrier A).
static int sync_epoch_begin(loop_t *L, size_t epoch) {
    (void)epoch;
    if (L->id == 0) rng_shuffle_u32(&L->rng, L->data, L->len);
    return 0;
}

// Thread 0, before barrier A: whether the round parks or stops (it knows the
// exact count at a round boundary) and, distributed, the link's preparation
// of the parameters the replica's examples of the round read.
static void sync_round_decide(sync_loop_t *S, size_t base) {
    trainer_t *tr = S->loop.tr;
    const train_link_t *link = S->loop.link;
    size_t n = S->loop.len, round_size = S->loop.stride;
    if (S->loop.samples >= atomic_load_explicit(&tr->next_eval_samples, memory_order_acquire))
        atomic_store_explicit(&tr->pause_requested, 1, memory_order_release);
    tr->round_park = atomic_load_explicit(&tr->pause_requested, memory_order_acquire);
    if (link && link->prepare && !atomic_load_explicit(link->abort, memory_order_relaxed)) {
        size_t round_examples = n - base < round_size ? n - base : round_size, from = S->rank * S->replica_size;
        size_t mine = from < round_examples ? round_examples - from : 0;
        if (mine > S->replica_size) mine = S->replica_size;
        if (mine && link->prepare(link->ctx, tr->order + base + from, mine, tr->w) != 0)
            atomic_store_explicit(link->abort, 1, memory_order_relaxed);
    }
    tr->round_stop = link && atomic_load_explicit(link->abort, memory_order_relaxed);
    if (tr->round_stop) atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
}

// This thread's gradient of its `count` examples idx (of the replica's
// `total` in the round), into its own buffer; solo, the round's average and
// its update at step size lr (solo_block). Returns its loss.
static double sync_compute(sync_loop_t *S, const uint32_t *idx, size_t count, size_t total, float lr) {
    trainer_t *tr = S->loop.tr;
    worker_t *wk = S->loop.wk;
    const train_link_t *link = S->loop.link;
    double loss;
    if (S->store) {
        if (S->behind) sync_pull(tr, S->loop.id);
        S->behind = 0;
        if (tr->keep_copies || S->copy_fresh) model_ws_mark_copy_current(wk->ws);
        if (S->solo) {
            int to_sum = link && !link->update_before_exchange;
            // In place, the link sums the replicas' gradients times their
            // examples: the bits of the exchange's own weighting of the
            // average (count = total: 0.0f + 1.0f * g, then times total);
            // a link whose sum is the average takes what `exchange` would.
            int plain = link && !to_sum && optimizer_is_plain_sgd(tr->opt);
            solo_round_t R = {tr,
                              model_ws_param_copy(wk->ws),
                              S->sum_in_place && !link->sum_is_average ? (float)count : (float)count / (float)total,
                              lr,
                              to_sum,
                              S->sum_in_place ? link->sum_buffer : tr->sum.value,
                              plain && !S->in_place,
                              plain && S->in_place,
                              to_sum && S->sum_in_place ? link->sum_finite : NULL};
            if (R.finite) *R.finite = 1;
            loss = model_loss_grad_apply(tr->model, tr->w, idx, count, wk->ws, solo_block, &R);
        } else {
            // Stored block by block into the thread's buffer (computed there:
            // grad_block_store). The blocks cover every coordinate once, so
            // the buffer is never cleared.
            loss = model_loss_grad_apply(tr->model, tr->w, idx, count, wk->ws, grad_block_store, wk->grad.value);
        }
    } else {
        grad_clear(&wk->grad);  // the reduce only read it
        loss = model_loss_grad(tr->model, tr->w, idx, count, &wk->grad, wk->ws);
    }
    // Each thread's part is clipped; their weighted mean is then no longer either.
    if (S->loop.c->clip_grad_norm > 0) grad_clip_norm(&wk->grad, S->loop.c->clip_grad_norm);
    // The round goes on (every thread must meet at its barriers); the
    // threads park and stop at the next round boundary.
    check_diverged(tr, S->loop.id, S->loop.updates, loss);
    return loss;
}

// One round starting at position `base` of the order.
static size_t sync_round(loop_t *L, size_t epoch, size_t base) {
    sync_loop_t *S = (sync_loop_t *)L;
    trainer_t *tr = L->tr;
    const train_config_t *c = L->c;
    size_t id = L->id;
    uint64_t round_span = TRACE_BEGIN();
    if (id == 0) sync_round_decide(S, base);
    uint64_t span = TRACE_BEGIN();
    spin_barrier_wait(&tr->barrier);  // A
    TRACE_END(&TK_BARRIER, span, 0);
    if (tr->round_stop) return 0;
    if (tr->round_park) {
        sync_write_back(S);
        S->copy_fresh = 0;  // a link's refresh may write w while the threads are parked
        park(tr);
        if (atomic_load_explicit(&tr->stop_requested, memory_order_acquire)) return 0;
    }
    // This replica's part of the round: [mine, mine + total) of the order.
    size_t round_total = L->len - base < L->stride ? L->len - base : L->stride;
    size_t mine = S->rank * S->replica_size, total = 0;
    if (mine < round_total) total = round_total - mine < S->replica_size ? round_total - mine : S->replica_size;
    size_t count = sync_count(total, c->batch, id);
    float lr = optimizer_lr(tr->opt, (double)L->updates, epoch);
    span = TRACE_BEGIN();
    double loss = count ? sync_compute(S, tr->order + base + mine + id * c->batch, count, total, lr) : 0.0;
    TRACE_END(&TK_COMPUTE, span, count);
    if (id == 0) step_delay_sleep(L->link, &L->delay_rng);
    span = TRACE_BEGIN();
    spin_barrier_wait(&tr->barrier);  // B
    TRACE_END(&TK_BARRIER, span, 0);
    if (S->in_place && !count) {
        // No example here: nothing to add, nothing to step; the exchange
        // reads the copy, which no step refreshed from w this round.
        if (S->sum_in_place) memset(L->link->sum_buffer, 0, tr->n_params * sizeof(float));
        if (!S->copy_fresh) params_read(tr->w, tr->n_params, model_ws_param_copy(L->wk->ws));
    } else if (!(S->solo && count)) {  // a lone thread's step did the reduce
        span = TRACE_BEGIN();
        if (S->dense)
            sync_reduce_dense(tr, id, total, lr);
        else
            sync_reduce_sparse(tr, id, total, lr);
        TRACE_END(&TK_REDUCE, span, 0);
    }
    S->unflushed = S->behind = tr->keep_copies;
    float *copy = S->solo ? model_ws_param_copy(L->wk->ws) : NULL;
    if (L->link && (S->in_place ? sync_exchange_in_place(tr, total, L->updates, lr, copy)
                                : sync_exchange(tr, id, total, L->updates, lr, copy))) {
        atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
        return 0;
    }
    // Solo with a link, the copy is w's values unless the exchange (or a
    // prepare before the next round) rewrote w, or this round had no step;
    // in place, the copy holds the parameters whatever the round did.
    S->copy_fresh = S->in_place || (copy && L->link && count && !tr->round_applied && !L->link->prepare);
    S->w_behind |= S->in_place;
    L->updates++;
    L->samples += total;
    publish(&tr->stats[id], count, loss, lr, id == 0 ? 1 : 0);
    TRACE_END(&TK_ROUND, round_span, count);
    return L->stride;
}

static const loop_mode_t sync_mode = {sync_epoch_begin, sync_round};

static void *sync_worker(void *arg) {
    worker_t *wk = arg;
    trainer_t *tr = wk->tr;
    const train_config_t *c = &tr->cfg;
    const train_link_t *link = c->link;
    sync_loop_t S;
    S.rank = link ? link->rank : 0;
    S.replica_size = c->threads * c->batch;
    // A resumed run skips the rounds done before (thread 0's count), replaying the epochs' shuffles.
    size_t round_size = (link ? link->ranks : 1) * S.replica_size;
    loop_init(&S.loop, wk, tr->order, tr->n_train, round_size, start_updates(tr, 0));
    S.loop.samples = 0;
    for (size_t t = 0; t < c->threads; t++)
        S.loop.samples += atomic_load_explicit(&tr->stats[t].samples, memory_order_relaxed);
    S.dense = tr->sum.dense;
    S.store = S.dense && model_has_loss_grad_apply(tr->model);
    S.solo = S.store && c->threads == 1 && c->clip_grad_norm <= 0 && model_ws_param_copy(wk->ws);
    S.in_place =
        S.solo && link && link->exchange_step && !link->prepare && !tr->keep_copies && optimizer_is_plain_sgd(tr->opt);
    S.sum_in_place = S.in_place && !link->update_before_exchange;
    if (S.sum_in_place && !link->sum_buffer) S.in_place = S.sum_in_place = 0;
    S.unflushed = S.behind = S.copy_fresh = S.w_behind = 0;
    trace_thread_name("trainer", (int)wk->id);
    if (!wait_at_gate(tr)) {
        // Every copy starts as w; from then on each round's reduce and pull keep it current.
        if (tr->keep_copies) params_read(tr->w, tr->n_params, tr->copies[wk->id]);
        run_epochs(&S.loop, &sync_mode);
    }
    sync_write_back(&S);
    mark_finished(tr);
    return NULL;
}

// ---- main thread ----

typedef struct eval_slice {
    const trainer_t *tr;
    const param_t *w;
    model_ws_t *ws;
    size_t begin, end;
    eval_sums_t sums;
} eval_slice_t;

static void *eval_slice_run(void *arg) {
    eval_slice_t *e = arg;
    model_evaluate(e->tr->model, e->w, e->begin, e->end, e->ws, &e->sums);
    return NULL;
}

// Evaluates parameters w on the test set on T threads of our own, one slice
// each (OpenBLAS stays single-threaded: its idle pool threads spin in
// sched_yield and would take cores from the workers after every evaluation).
static void evaluate(trainer_t *tr, const param_t *w, model_ws_t **ws, train_point_t *p) {
    size_t T = tr->cfg.threads;
    size_t limit = tr->cfg.eval_limit ? tr->cfg.eval_limit : model_num_test(tr->model);
    if (limit > model_num_test(tr->model)) limit = model_num_test(tr->model);
    eval_slice_t slices[EVAL_THREADS_MAX];
    pthread_t threads[EVAL_THREADS_MAX];
    int started[EVAL_THREADS_MAX] = {0};
    size_t n = T < EVAL_THREADS_MAX ? T : EVAL_THREADS_MAX;
    for (size_t i = 0; i < n; i++) {
        // At multiples of MODEL_EVAL_ROWS: every row in the same block as the global evaluator's (model.h).
        slices[i] = (eval_slice_t){
            tr, w, ws[i], model_eval_slice(limit, i, n), model_eval_slice(limit, i + 1, n), {0.0, 0.0, 0}};
        // A slice whose thread cannot start is evaluated here instead.
        if (i > 0) started[i] = pthread_create(&threads[i], NULL, eval_slice_run, &slices[i]) == 0;
    }
    eval_slice_run(&slices[0]);
    eval_sums_t sums = {0.0, 0.0, 0};
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && started[i])
            pthread_join(threads[i], NULL);
        else if (i > 0)
            eval_slice_run(&slices[i]);
        sums.loss_sum += slices[i].sums.loss_sum;
        sums.metric_sum += slices[i].sums.metric_sum;
        sums.count += slices[i].sums.count;
    }
    p->test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
    p->test_metric = eval_metric_value(model_metric(tr->model), &sums);
}

static int target_met(const trainer_t *tr, double metric) {
    if (isnan(tr->cfg.target) || isnan(metric)) return 0;
    return model_metric(tr->model) == METRIC_KIND_ACCURACY ? metric >= tr->cfg.target : metric <= tr->cfg.target;
}

static void free_trainer(trainer_t *tr) {
    if (tr->workers) {
        for (size_t i = 0; i < tr->cfg.threads; i++) {
            model_ws_destroy(&tr->workers[i].ws);
            grad_free(&tr->workers[i].grad);
            hogwild_replica_free(&tr->workers[i].replica);
        }
    }
    hogwild_hot_free(&tr->hot);
    for (size_t i = 0; tr->sum_part && i < tr->cfg.threads; i++) free(tr->sum_part[i].touched);
    free(tr->sum_part);
    free(tr->copies);
    grad_free(&tr->sum);
    free(tr->workers);
    free(tr->stats);
    free(tr->order);
    free(tr->position.samples);
    free(tr->position.updates);
    free(tr->position.loss_sum);
}

static int prepare_sync(trainer_t *tr, int dense, char *err, size_t err_len) {
    size_t T = tr->cfg.threads;
    if (grad_init(&tr->sum, tr->n_params, dense, err, err_len) != 0) return -1;
    tr->keep_copies = dense && !tr->cfg.link && model_has_loss_grad_apply(tr->model);
    if (tr->keep_copies) {
        if (!(tr->copies = calloc(T, sizeof *tr->copies))) goto oom;
        for (size_t i = 0; i < T; i++)
            tr->keep_copies &= (tr->copies[i] = model_ws_param_copy(tr->workers[i].ws)) != NULL;
    }
    if (!dense) {
        if (!(tr->sum_part = calloc(T, sizeof *tr->sum_part))) goto oom;
        for (size_t i = 0; i < T; i++) {
            grad_t *part = &tr->sum_part[i];
            size_t begin, end;
            sync_range(tr, i, &begin, &end);
            *part = tr->sum;
            part->n_touched = 0;
            if (!(part->touched = malloc((end > begin ? end - begin : 1) * sizeof *part->touched))) goto oom;
        }
    }
    return 0;
oom:
    snprintf(err, err_len, "trainer: allocating the sync state for %zu threads: %s", T, strerror(errno));
    return -1;
}

static int prepare(trainer_t *tr, char *err, size_t err_len) {
    size_t T = tr->cfg.threads;
    int dense = model_grad_is_dense(tr->model);
    tr->order = malloc(tr->n_train * sizeof *tr->order);
    tr->workers = calloc(T, sizeof *tr->workers);
    tr->stats = aligned_alloc(64, T * sizeof *tr->stats);
    tr->position.samples = calloc(T, sizeof *tr->position.samples);
    tr->position.updates = calloc(T, sizeof *tr->position.updates);
    tr->position.loss_sum = calloc(T, sizeof *tr->position.loss_sum);
    if (!tr->order || !tr->workers || !tr->stats || !tr->position.samples || !tr->position.updates ||
        !tr->position.loss_sum) {
        snprintf(err, err_len, "trainer: allocating state for %zu threads: %s", T, strerror(errno));
        return -1;
    }
    const train_position_t *at = tr->cfg.start;
    for (size_t i = 0; i < T; i++) {
        atomic_init(&tr->stats[i].samples, at ? at->samples[i] : 0);
        atomic_init(&tr->stats[i].updates, at ? at->updates[i] : 0);
        atomic_init(&tr->stats[i].loss_sum, at ? at->loss_sum[i] : 0.0);
        atomic_init(&tr->stats[i].lr, 0.0f);
    }
    run_order(tr->order, tr->n_train, tr->cfg.seed);
    for (size_t i = 0; i < T; i++) {
        worker_t *wk = &tr->workers[i];
        wk->tr = tr;
        wk->id = i;
        thread_shard(&tr->cfg, tr->n_train, i, &wk->shard_begin, &wk->shard_end);
        wk->ws = model_ws_new(tr->model, tr->cfg.batch, err, err_len);
        if (!wk->ws || grad_init(&wk->grad, tr->n_params, dense, err, err_len) != 0) return -1;
        if (tr->replicas && hogwild_replica_init(&wk->replica, tr->n_params, fused_copy(tr, wk), err, err_len) != 0)
            return -1;
    }
    // One thread's merges find nobody else's changes: no parameter is averaged.
    double interval_examples = (double)tr->merge_every * (double)tr->cfg.batch;
    if (tr->replicas && T > 1 && hogwild_hot_init(&tr->hot, tr->model, T, interval_examples, err, err_len) != 0)
        return -1;
    if (tr->cfg.mode == TRAIN_MODE_SYNC) return prepare_sync(tr, dense, err, err_len);
    return 0;
}

static int start_threads(trainer_t *tr, size_t *started, char *err, size_t err_len) {
    void *(*entry)(void *) = tr->dev ? gpu_worker : tr->cfg.mode == TRAIN_MODE_SYNC ? sync_worker : async_worker;
    for (size_t i = 0; i < tr->cfg.threads; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (tr->cfg.pin) {
            int cpu;
            if (cpu_pin_choose(tr->cfg.pin_first + i, &cpu, err, err_len) != 0) {
                pthread_attr_destroy(&attr);
                return -1;
            }
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            int rc = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
            if (rc != 0) {
                snprintf(err, err_len, "--pin: pinning thread %zu to CPU %d: %s", i, cpu, strerror(rc));
                pthread_attr_destroy(&attr);
                return -1;
            }
        }
        int rc = pthread_create(&tr->workers[i].thread, &attr, entry, &tr->workers[i]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            snprintf(err, err_len, "trainer: starting thread %zu: %s", i, strerror(rc));
            return -1;
        }
        (*started)++;
    }
    return 0;
}

// Called with tr->mu held once every worker is parked or finished.
static void resume_workers_locked(trainer_t *tr, int stop) {
    if (stop) atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
    atomic_store_explicit(&tr->pause_requested, 0, memory_order_release);
    tr->parked = 0;  // see park(): a released worker no longer counts as parked
    tr->resume_generation++;
    pthread_cond_broadcast(&tr->cv_resume);
}

typedef struct clock_state {
    double start;
    double paused;  // seconds spent in evaluation pauses
    totals_t at_last_eval;
} clock_state_t;

// The counters at time `now` as a point; test fields NaN.
static train_point_t point_at(const trainer_t *tr, const clock_state_t *clk, const totals_t *t, double now) {
    train_point_t p;
    p.wall_s = now - clk->start - clk->paused;
    p.samples = t->samples;
    p.updates = t->updates;
    // A replica's samples are its share: scaled by the number of replicas, an
    // epoch is still one pass of the whole run over the training set.
    double ranks = tr->cfg.link ? (double)tr->cfg.link->ranks : 1.0;
    p.epoch = (double)t->samples * ranks / (double)tr->n_train;
    p.samples_per_s = p.wall_s > 0 ? (double)t->samples / p.wall_s : 0.0;
    p.lr = t->lr;
    uint64_t ds = t->samples - clk->at_last_eval.samples;
    p.train_loss = ds ? (t->loss_sum - clk->at_last_eval.loss_sum) / (double)ds : NAN;
    p.test_loss = p.test_metric = NAN;
    return p;
}

// A point with its test figures: whether it meets the target (the first time
// is the result's time to target), and the callback. Returns 1 when the run
// stops at it.
static int note_point(trainer_t *tr, const train_point_t *p, const train_callbacks_t *cb, train_result_t *res) {
    if (p->samples == 0) {
        res->untrained_test_loss = p->test_loss;
    } else if (!isnan(p->test_loss) && !(p->test_loss <= res->peak_test_loss)) {
        res->peak_test_loss = p->test_loss;
        res->peak_test_loss_epoch = p->epoch;
    }
    int reached = target_met(tr, p->test_metric);
    if (reached && isnan(res->time_to_target_s)) {
        res->time_to_target_s = p->wall_s;
        res->samples_to_target = p->samples;
    }
    if (cb && cb->on_eval) cb->on_eval(p, cb->ctx);
    return reached && tr->cfg.stop_at_target;
}

// Evaluates the deferred points, in order, each noted as it would have been
// at its time; the last becomes res->last.
static void evaluate_deferred(trainer_t *tr, const train_callbacks_t *cb, train_result_t *res) {
    for (size_t i = 0; i < tr->n_deferred; i++) {
        deferred_eval_t *d = &tr->deferred[i];
        for (size_t j = 0; j < tr->n_params; j++) param_set(&tr->deferred_w[j], d->values[j]);
        evaluate(tr, tr->deferred_w, tr->eval_ws, &d->point);
        note_point(tr, &d->point, cb, res);
        if (d->point.samples == res->last.samples) res->last = d->point;
        free(d->values);
    }
    tr->n_deferred = 0;
    tr->deferred_bytes = 0;
}

// Keeps the parameters at point p for evaluation after training, when the
// run defers its evaluations and the budget allows. Returns 1 when kept.
static int defer_point(trainer_t *tr, const train_point_t *p) {
    size_t bytes = tr->n_params * sizeof(float);
    const train_config_t *c = &tr->cfg;
    if (!c->defer_eval_bytes || c->stop_at_target || tr->deferred_bytes + bytes > c->defer_eval_bytes) return 0;
    if (!tr->deferred_w && !(tr->deferred_w = params_new(tr->n_params, NULL, 0))) return 0;
    if (tr->n_deferred == tr->cap_deferred) {
        size_t cap = tr->cap_deferred ? 2 * tr->cap_deferred : 16;
        deferred_eval_t *grown = realloc(tr->deferred, cap * sizeof *grown);
        if (!grown) return 0;
        tr->deferred = grown;
        tr->cap_deferred = cap;
    }
    float *values = malloc(bytes);
    if (!values) return 0;  // evaluated at once instead
    params_read(tr->w, tr->n_params, values);
    tr->deferred[tr->n_deferred++] = (deferred_eval_t){values, *p};
    tr->deferred_bytes += bytes;
    return 1;
}

// One evaluation point, taken with workers parked (or finished): evaluated
// now, or kept for after training (defer_eval_bytes). A point evaluated now
// comes after the deferred ones before it, which are evaluated first.
static int eval_point(trainer_t *tr, model_ws_t **ws, clock_state_t *clk, const train_callbacks_t *cb,
                      train_result_t *res) {
    double pause_begin = mono_clock_s();
    uint64_t span = TRACE_BEGIN();
    const train_link_t *link = tr->cfg.link;
    if (link && link->refresh && !atomic_load_explicit(link->abort, memory_order_relaxed) &&
        link->refresh(link->ctx, tr->w) != 0)
        atomic_store_explicit(link->abort, 1, memory_order_relaxed);
    totals_t t = read_totals(tr);
    train_point_t p = point_at(tr, clk, &t, pause_begin);
    int deferred = defer_point(tr, &p);
    if (!deferred) {
        evaluate_deferred(tr, cb, res);
        evaluate(tr, tr->w, ws, &p);
    }
    clk->at_last_eval = t;
    res->n_evals++;
    atomic_store_explicit(&tr->next_eval_samples, (t.samples / tr->cfg.eval_every + 1) * tr->cfg.eval_every,
                          memory_order_release);
    res->last = p;
    int stop = deferred ? 0 : note_point(tr, &p, cb, res);
    TRACE_END(&TK_EVAL, span, p.samples);
    clk->paused += mono_clock_s() - pause_begin;
    return stop;
}

// With every thread parked: the run's position, handed to the checkpoint
// callback unless a parameter is no longer finite (a checkpoint is only ever
// of a good state). Counted as paused time.
// Whether a thread took a step since the last checkpoint (or since the start).
static int stepped_since_checkpoint(const trainer_t *tr) {
    for (size_t i = 0; i < tr->cfg.threads; i++) {
        uint64_t now = atomic_load_explicit(&tr->stats[i].samples, memory_order_relaxed);
        if (now != (i < tr->position.threads ? tr->position.samples[i] : 0)) return 1;
    }
    return 0;
}

static int take_checkpoint(trainer_t *tr, clock_state_t *clk, train_result_t *out, char *err, size_t err_len) {
    double begin = mono_clock_s();
    uint64_t span = TRACE_BEGIN();
    for (size_t j = 0; j < tr->n_params; j++) {
        float v = param_get(&tr->w[j]);
        if (!isfinite(v)) {
            atomic_store(&tr->diverged, 1);
            tr->diverged_loss = v;
            snprintf(err, err_len, "training diverged: parameter %zu is %g; no checkpoint written", j, (double)v);
            return -1;
        }
    }
    size_t T = tr->cfg.threads;
    for (size_t i = 0; i < T; i++) {
        tr->position.samples[i] = atomic_load_explicit(&tr->stats[i].samples, memory_order_relaxed);
        tr->position.updates[i] = atomic_load_explicit(&tr->stats[i].updates, memory_order_relaxed);
        tr->position.loss_sum[i] = atomic_load_explicit(&tr->stats[i].loss_sum, memory_order_relaxed);
    }
    tr->position.threads = T;
    tr->position.wall_s = begin - clk->start - clk->paused;
    int rc = tr->cfg.checkpoint(tr->cfg.checkpoint_ctx, &tr->position, tr->w, tr->opt, err, err_len);
    if (rc == 0) out->checkpoints++;
    TRACE_END(&TK_CHECKPOINT, span, 0);
    clk->paused += mono_clock_s() - begin;
    return rc;
}

// ---- train_run's phases ----

// Everything made before the threads start: the trainer's state, the device
// (made or borrowed) holding w, the evaluation workspaces, and the locks. A
// failure leaves w untouched. Returns 0, or -1 with err filled.
static int trainer_open(trainer_t *tr, const model_t *m, optimizer_t *opt, param_t *w, const train_config_t *c,
                        char *err, size_t err_len) {
    memset(tr, 0, sizeof *tr);
    tr->model = m;
    tr->opt = opt;
    tr->w = w;
    tr->cfg = *c;
    tr->n_train = model_num_train(m);
    tr->n_params = model_num_params(m);
    if (tr->cfg.eval_every == 0) tr->cfg.eval_every = c->link ? tr->n_train / c->link->ranks : tr->n_train;
    if (tr->cfg.eval_every == 0) tr->cfg.eval_every = 1;
    tr->replicas = c->hogwild_variant == HOGWILD_VARIANT_REPLICAS && c->mode == TRAIN_MODE_HOGWILD;
    tr->merge_every = !tr->replicas ? 0 : c->merge_every ? c->merge_every : train_merge_every_default(m, c->batch);
    tr->n_eval_ws = c->threads < EVAL_THREADS_MAX ? c->threads : EVAL_THREADS_MAX;
    tr->dev_ops = c->device;
    tr->dev = c->device ? c->device_handle : NULL;
    if (c->device && !tr->dev) {
        tr->dev = tr->own_dev = c->device->create(c->device_options, m, optimizer_config(opt), c->batch, err, err_len);
        if (!tr->dev) return -1;
    }
    int prepared = !tr->dev || (tr->dev_ops->bind_thread(tr->dev, err, err_len) == 0 &&
                                tr->dev_ops->set_params(tr->dev, w, err, err_len) == 0);
    prepared = prepared && prepare(tr, err, err_len) == 0;
    for (size_t i = 0; prepared && i < tr->n_eval_ws; i++)
        prepared = (tr->eval_ws[i] = model_ws_new(m, c->batch, err, err_len)) != NULL;
    if (!prepared) return -1;
    pthread_mutex_init(&tr->update_lock, NULL);
    pthread_mutex_init(&tr->mu, NULL);
    // The main thread's timed waits use the same monotonic clock as mono_clock_s().
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&tr->cv_parked, &monotonic);
    pthread_condattr_destroy(&monotonic);
    pthread_cond_init(&tr->cv_resume, NULL);
    tr->sync_inited = 1;
    long online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int oversubscribed = online_cpus > 0 && c->threads > (size_t)online_cpus;
    spin_barrier_init(&tr->barrier, (unsigned)c->threads, oversubscribed ? 0 : SPIN_BARRIER_SPINS);
    atomic_init(&tr->pause_requested, 0);
    atomic_init(&tr->stop_requested, 0);
    atomic_init(&tr->next_eval_samples, tr->cfg.eval_every);
    atomic_init(&tr->diverged, 0);
    atomic_init(&tr->merge_turn, 0);
    return 0;
}

static void trainer_close(trainer_t *tr) {
    if (tr->sync_inited) {
        pthread_cond_destroy(&tr->cv_resume);
        pthread_cond_destroy(&tr->cv_parked);
        pthread_mutex_destroy(&tr->mu);
        pthread_mutex_destroy(&tr->update_lock);
    }
    for (size_t i = 0; i < tr->n_eval_ws; i++) model_ws_destroy(&tr->eval_ws[i]);
    for (size_t i = 0; i < tr->n_deferred; i++) free(tr->deferred[i].values);
    free(tr->deferred);
    params_free(&tr->deferred_w);
    free_trainer(tr);
    if (tr->own_dev) tr->cfg.device->destroy(tr->own_dev);
}

// The main thread's schedule: training time (evaluation and checkpoint
// pauses excluded), and when the next checkpoint, timed evaluation (on a
// fixed grid) and progress report fall due.
typedef struct schedule {
    clock_state_t clk;
    double checkpoint_at;
    int checkpoint_due;
    double eval_at;
    int eval_due;
    double progress_every, next_progress;
} schedule_t;

static void schedule_init(schedule_t *sc, const train_config_t *c) {
    memset(sc, 0, sizeof *sc);
    double resumed_s = c->start ? c->start->wall_s : 0.0;
    sc->clk.start = mono_clock_s() - resumed_s;
    sc->checkpoint_at = c->checkpoint_every_s > 0 ? resumed_s + c->checkpoint_every_s : INFINITY;
    sc->eval_at = c->eval_every_s > 0 ? resumed_s + c->eval_every_s : INFINITY;
    sc->progress_every = c->progress_interval_s > 0 ? c->progress_interval_s : 0.25;
}

// With every worker parked (or finished): the checkpoint and the evaluation
// that are due (the pause may have been for either). Returns whether the run
// stops; a failed checkpoint sets *rc.
static int at_pause(trainer_t *tr, schedule_t *sc, const train_callbacks_t *cb, train_result_t *out, int *rc, char *err,
                    size_t err_len) {
    const train_config_t *c = &tr->cfg;
    int stop = atomic_load(&tr->diverged);
    if (!stop && sc->checkpoint_due) {
        sc->checkpoint_due = 0;
        // A checkpoint with no step since the last one would repeat it (the first: the start).
        if (stepped_since_checkpoint(tr) && take_checkpoint(tr, &sc->clk, out, err, err_len) != 0) {
            *rc = -1;
            stop = 1;
        }
        sc->checkpoint_at = tr->position.wall_s + c->checkpoint_every_s;
    }
    if (!stop && (read_totals(tr).samples >= atomic_load(&tr->next_eval_samples) || sc->eval_due ||
                  out->stopped_at_time_limit)) {
        sc->eval_due = 0;
        int at_target = eval_point(tr, tr->eval_ws, &sc->clk, cb, out);
        while (sc->eval_at <= out->last.wall_s) sc->eval_at += c->eval_every_s;
        out->stopped_at_target |= at_target;
        stop = at_target || out->stopped_at_time_limit;
    }
    return stop || out->interrupted;
}

// Asks the workers to park when a checkpoint or a timed evaluation falls
// due, the run is interrupted (it ends at the next step boundary), or it is
// out of time (a last evaluation, then the end). Returns 1 if it asked.
static int ask_pause_if_due(trainer_t *tr, schedule_t *sc, train_result_t *out, double now) {
    const train_config_t *c = &tr->cfg;
    double trained = now - sc->clk.start - sc->clk.paused;
    if (!sc->checkpoint_due && trained >= sc->checkpoint_at)
        sc->checkpoint_due = 1;
    else if (!sc->eval_due && trained >= sc->eval_at)
        sc->eval_due = 1;
    else if (c->interrupt && !out->interrupted && atomic_load(c->interrupt))
        out->interrupted = 1;
    else if (c->time_limit_s > 0 && !out->stopped_at_time_limit && trained >= c->time_limit_s)
        out->stopped_at_time_limit = 1;
    else
        return 0;
    atomic_store_explicit(&tr->pause_requested, 1, memory_order_release);
    return 1;
}

static void report_progress(trainer_t *tr, const schedule_t *sc, const train_callbacks_t *cb, double now) {
    totals_t t = read_totals(tr);
    train_point_t p = point_at(tr, &sc->clk, &t, now);
    double remaining = (double)tr->n_train * (double)tr->cfg.epochs - (double)t.samples;
    cb->on_progress(&p, p.samples_per_s > 0 ? remaining / p.samples_per_s : NAN, cb->ctx);
}

// Sleeps (tr->mu held) until a worker signals or the next thing falls due.
static void sleep_until_due(trainer_t *tr, const schedule_t *sc, const train_result_t *out) {
    const clock_state_t *clk = &sc->clk;
    double wake = sc->next_progress;
    if (clk->start + clk->paused + sc->checkpoint_at < wake) wake = clk->start + clk->paused + sc->checkpoint_at;
    if (clk->start + clk->paused + sc->eval_at < wake) wake = clk->start + clk->paused + sc->eval_at;
    if (tr->cfg.time_limit_s > 0 && !out->stopped_at_time_limit) {
        double limit_at = clk->start + clk->paused + tr->cfg.time_limit_s;
        if (limit_at < wake) wake = limit_at;
    }
    struct timespec deadline = mono_clock_timespec(wake);
    pthread_cond_timedwait(&tr->cv_parked, &tr->mu, &deadline);
}

// The main thread while the `started` workers run: it sleeps until a worker
// asks for a pause (an evaluation, or a stop), all finish, or something
// falls due, and serves each pause. Returns rc, or -1 if a checkpoint failed.
static int supervise(trainer_t *tr, schedule_t *sc, size_t started, const train_callbacks_t *cb, train_result_t *out,
                     int rc, char *err, size_t err_len) {
    sc->next_progress = mono_clock_s() + sc->progress_every;
    pthread_mutex_lock(&tr->mu);
    while (tr->finished < started) {
        if (atomic_load_explicit(&tr->pause_requested, memory_order_acquire)) {
            while (tr->parked + tr->finished < started) pthread_cond_wait(&tr->cv_parked, &tr->mu);
            pthread_mutex_unlock(&tr->mu);
            int stop = at_pause(tr, sc, cb, out, &rc, err, err_len);
            pthread_mutex_lock(&tr->mu);
            resume_workers_locked(tr, stop);
            continue;
        }
        double now = mono_clock_s();
        if (ask_pause_if_due(tr, sc, out, now)) continue;
        if (now >= sc->next_progress) {
            sc->next_progress = now + sc->progress_every;
            if (cb && cb->on_progress && tr->cfg.progress_interval_s > 0) {
                pthread_mutex_unlock(&tr->mu);
                report_progress(tr, sc, cb, now);
                pthread_mutex_lock(&tr->mu);
            }
            continue;
        }
        sleep_until_due(tr, sc, out);
    }
    pthread_mutex_unlock(&tr->mu);
    return rc;
}

// Once the workers are joined: whether the run failed (the device, a
// divergence, the link). Returns rc, or -1 with err filled.
static int run_outcome(trainer_t *tr, int rc, char *err, size_t err_len) {
    if (rc == 0 && tr->gpu_err[0]) {
        snprintf(err, err_len, "%s", tr->gpu_err);
        rc = -1;
    }
    if (rc == 0 && atomic_load(&tr->diverged)) {
        totals_t t = read_totals(tr);
        snprintf(err, err_len,
                 "training diverged: thread %zu's minibatch loss was %s at its step %llu (after %llu samples in all); "
                 "stopped without saving the parameters (a smaller --lr may help)",
                 tr->diverged_thread,
                 isnan(tr->diverged_loss) ? "NaN"
                 : tr->diverged_loss > 0  ? "+Inf"
                                          : "-Inf",
                 (unsigned long long)tr->diverged_step, (unsigned long long)t.samples);
        rc = -1;
    }
    if (rc == 0 && tr->cfg.link && atomic_load_explicit(tr->cfg.link->abort, memory_order_relaxed)) {
        snprintf(err, err_len, "training stopped: this worker lost its connection to the run");
        rc = -1;
    }
    return rc;
}

// A good run's end: a last evaluation (unless the last point is of the final
// parameters already), the result's figures, and the final checkpoint.
static int finish_result(trainer_t *tr, schedule_t *sc, const train_callbacks_t *cb, train_result_t *out, char *err,
                         size_t err_len) {
    totals_t t = read_totals(tr);
    if (t.samples != out->last.samples) eval_point(tr, tr->eval_ws, &sc->clk, cb, out);
    double deferred_from = mono_clock_s();
    evaluate_deferred(tr, cb, out);
    out->wall_s = out->last.wall_s;
    out->eval_s = sc->clk.paused + (mono_clock_s() - deferred_from);
    out->samples = t.samples;
    out->updates = t.updates;
    out->samples_per_s = out->wall_s > 0 ? (double)t.samples / out->wall_s : 0.0;
    out->updates_per_s = out->wall_s > 0 ? (double)t.updates / out->wall_s : 0.0;
    for (size_t i = 0; i < tr->cfg.threads; i++)
        if (tr->workers[i].merge_gap_max > out->merge_gap_max) out->merge_gap_max = tr->workers[i].merge_gap_max;
    out->merge_every = tr->merge_every;
    out->merge_hot_params = tr->hot.n_hot;
    // The end is a checkpoint too: resuming a finished run has nothing left to do.
    if (tr->cfg.checkpoint_every_s > 0 && take_checkpoint(tr, &sc->clk, out, err, err_len) != 0) return -1;
    return 0;
}

int train_run(const model_t *m, optimizer_t *opt, param_t *w, const train_config_t *c, const train_callbacks_t *cb,
              train_result_t *out, char *err, size_t err_len) {
    if (train_config_check(c, model_num_train(m), err, err_len) != 0) return -1;
    trainer_t tr;
    if (trainer_open(&tr, m, opt, w, c, err, err_len) != 0) {
        trainer_close(&tr);
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->time_to_target_s = NAN;
    out->untrained_test_loss = out->peak_test_loss = out->peak_test_loss_epoch = NAN;
    schedule_t sc;
    schedule_init(&sc, c);
    // The starting point, so every curve begins at the initial parameters.
    int stop = eval_point(&tr, tr.eval_ws, &sc.clk, cb, out);
    // Our threads are the parallelism; OpenBLAS threads inside them would oversubscribe the cores.
    int saved_blas_threads = blas_get_threads();
    blas_set_threads(1);
    size_t started = 0;
    int rc = stop ? 0 : start_threads(&tr, &started, err, err_len);
    open_gate(&tr, rc != 0);
    rc = supervise(&tr, &sc, started, cb, out, rc, err, err_len);
    for (size_t i = 0; i < started; i++) pthread_join(tr.workers[i].thread, NULL);
    blas_set_threads(saved_blas_threads);
    rc = run_outcome(&tr, rc, err, err_len);
    if (rc == 0) {
        rc = finish_result(&tr, &sc, cb, out, err, err_len);
    } else {
        // What was done before it failed (a worker cut off from its run reports it).
        totals_t t = read_totals(&tr);
        out->samples = t.samples;
        out->updates = t.updates;
    }
    trainer_close(&tr);
    return rc;
}

int run_on_fresh_params(const model_t *m, const optimizer_config_t *oc, uint64_t init_seed, float *final_w,
                        fresh_run_fn run, void *ctx, char *err, size_t err_len) {
    size_t n = model_num_params(m);
    param_t *w = params_new(n, err, err_len);
    optimizer_t *opt = w ? optimizer_new(oc, n, err, err_len) : NULL;
    int rc = -1;
    if (opt) {
        model_init_params(m, w, init_seed);
        rc = run(ctx, opt, w, err, err_len);
        if (rc == 0 && final_w) params_read(w, n, final_w);
    }
    optimizer_destroy(&opt);
    params_free(&w);
    return rc;
}

typedef struct train_job {
    const model_t *m;
    const train_config_t *c;
    const train_callbacks_t *cb;
    train_result_t *out;
} train_job_t;

static int run_train_job(void *ctx, optimizer_t *opt, param_t *w, char *err, size_t err_len) {
    train_job_t *j = ctx;
    return train_run(j->m, opt, w, j->c, j->cb, j->out, err, err_len);
}

int train_fresh(const model_t *m, const optimizer_config_t *oc, const train_config_t *c, uint64_t init_seed,
                const train_callbacks_t *cb, train_result_t *out, float *final_w, char *err, size_t err_len) {
    train_job_t job = {m, c, cb, out};
    return run_on_fresh_params(m, oc, init_seed, final_w, run_train_job, &job, err, err_len);
}
