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

#include "kernels/rng.h"
#include "kernels/partition.h"  // defines: shard_range
#include "engine/core/spin_barrier.h"  // defines: spin_barrier_t, spin_barrier_wait
#include "kernels/blas_runtime.h"  // defines: blas_set_threads, blas_get_threads

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

typedef struct worker {
    trainer_t *tr;
    size_t id;
    pthread_t thread;
    model_ws_t *ws;
    grad_t grad;
    size_t shard_begin, shard_end;  // hogwild/locked: this thread's part of tr->order
} worker_t;

struct trainer {
    const model_t *model;
    optimizer_t *opt;
    param_t *w;
    train_config_t cfg;
    size_t n_train;
    size_t n_params;
    uint32_t *order;         // (n_train) data order
    worker_t *workers;       // (threads)
    worker_stats_t *stats;   // (threads)
    pthread_mutex_t update_lock;  // locked mode only

    // Pause/resume between the main thread and the workers.
    _Atomic int pause_requested;
    _Atomic int stop_requested;
    pthread_mutex_t mu;
    pthread_cond_t cv_parked;
    pthread_cond_t cv_resume;
    size_t parked, finished;
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
    grad_t sum;               // the averaged gradient of a round (dense; sparse with a link)
    grad_t *sum_part;         // (threads) sparse: sum's values and flags, each thread's own touched list
    int keep_copies;          // dense, no link: the model lives in the threads' copies between parks
    float **copies;           // (threads) keep_copies: each thread's parameter copy
    int round_park;           // thread 0's reading of pause_requested for this round
    int round_stop;           // distributed: thread 0 saw the link fail; every thread stops
    // The same, as the exchange saw it (written by thread 0 between a round's
    // barriers B and the exchange's; read after the exchange's barrier, before
    // the next round's barrier A, while thread 0 may already write round_stop).
    int exchange_stop;
    int round_applied;        // distributed: the link applied this round's update itself

    // A device (--device cuda): its table, the device the steps run on, and
    // the first failure of the thread driving it.
    const train_device_ops_t *dev_ops;
    void *dev;
    char gpu_err[512];
    train_position_t position;  // filled for each checkpoint
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
        snprintf(err, err_len, "--device cuda: checkpoints, resuming and rejoining a run are not built for the GPU "
                               "path yet; use the CPU");
        return -1;
    }
    if (!(c->clip_grad_norm >= 0) || (c->device && c->clip_grad_norm > 0)) {
        snprintf(err, err_len, "--clip-grad-norm: %g; expected a positive norm, and the CPU (the GPU steps do not clip)",
                 c->clip_grad_norm);
        return -1;
    }
    if (c->device && (c->threads != 1 || c->mode != TRAIN_MODE_HOGWILD)) {
        snprintf(err, err_len, "--device cuda: one host thread drives the GPU (--threads 1, --mode hogwild); the "
                               "parallelism is the GPU's own");
        return -1;
    }
    size_t shard = c->link ? n_train / c->link->ranks : n_train;
    if (c->mode != TRAIN_MODE_SYNC && c->threads > shard) {
        if (c->link) {
            snprintf(err, err_len, "--threads: %zu threads but this worker's data shard has only %zu examples", c->threads,
                     shard);
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

// ---- pause protocol (off the hot path: taken only when the main thread asks) ----

static void park(trainer_t *tr) {
    pthread_mutex_lock(&tr->mu);
    uint64_t generation = tr->resume_generation;
    tr->parked++;
    pthread_cond_signal(&tr->cv_parked);
    while (generation == tr->resume_generation) pthread_cond_wait(&tr->cv_resume, &tr->mu);
    tr->parked--;
    pthread_mutex_unlock(&tr->mu);
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
static uint64_t start_updates(const trainer_t *tr, size_t id) {
    return tr->cfg.start ? tr->cfg.start->updates[id] : 0;
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
    if (ms > 0) sleep_ms(ms);
}

// A distributed replica's thread waits here while the link holds it back (the
// staleness bound). Returns 1 if the run is stopping.
static int wait_for_allowance(trainer_t *tr, size_t id, uint64_t my_steps) {
    const train_link_t *link = tr->cfg.link;
    if (my_steps < atomic_load_explicit(link->step_allowance, memory_order_acquire)) return 0;
    double t0 = now_s();
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
    uint64_t waited = (uint64_t)((now_s() - t0) * 1e9);
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

static void *async_worker(void *arg) {
    worker_t *wk = arg;
    trainer_t *tr = wk->tr;
    const train_config_t *c = &tr->cfg;
    uint32_t *shard = tr->order + wk->shard_begin;
    size_t len = wk->shard_end - wk->shard_begin;
    int locked = c->mode == TRAIN_MODE_LOCKED;
    // Dense models hand their gradient over in cache-sized blocks that go straight
    // into the shared model (no model-sized gradient buffer). Under Hogwild! the
    // thread's private parameter copy is refreshed during that write instead of
    // being re-read at the next step: it then holds every other thread's updates
    // up to that write, as fresh as a re-read a moment later would be. Locked
    // mode re-reads it (other threads' steps come between this thread's) to stay
    // serialisable.
    // Clipping needs the whole gradient before any of it is applied: the fused
    // paths below, which apply it as it is computed, are for unclipped steps.
    int clip = c->clip_grad_norm > 0;
    float *copy = !clip && wk->grad.dense && model_has_loss_grad_apply(tr->model) ? model_ws_param_copy(wk->ws) : NULL;
    // One-example plain-SGD steps skip the gradient buffer (bit-identical result).
    int direct = !clip && c->batch == 1 && optimizer_is_plain_sgd(tr->opt) && model_has_sgd_step_one(tr->model);
    rng_t rng;
    rng_seed(&rng, c->seed, STREAM_SHUFFLE + wk->id);
    rng_t delay_rng;
    step_delay_seed(&delay_rng, c, wk->id);
    uint64_t my_updates = start_updates(tr, wk->id);
    uint64_t my_samples = atomic_load_explicit(&tr->stats[wk->id].samples, memory_order_relaxed);
    uint64_t next_check = my_samples + c->eval_every / c->threads;
    // A resumed thread skips the steps it took before: whole epochs (their
    // shuffles still drawn, so the order continues as it was), then the
    // minibatches of the epoch it was in.
    size_t steps_per_epoch = (len + c->batch - 1) / c->batch;
    size_t skip_epochs = steps_per_epoch ? (size_t)(my_updates / steps_per_epoch) : c->epochs;
    size_t skip_pos = steps_per_epoch ? (size_t)(my_updates % steps_per_epoch) * c->batch : 0;
    if (wait_at_gate(tr)) goto done;
    for (size_t epoch = 0; epoch < c->epochs; epoch++) {
        rng_shuffle_u32(&rng, shard, len);
        if (epoch < skip_epochs) continue;
        for (size_t pos = epoch == skip_epochs ? skip_pos : 0; pos < len; pos += c->batch) {
            if (check_pause(tr)) goto done;
            if (c->link && wait_for_allowance(tr, wk->id, my_updates)) goto done;
            note_step_start(c->link, wk->id, my_updates);
            size_t count = len - pos < c->batch ? len - pos : c->batch;
            // Step-size schedules count global updates; each thread sees about 1/T of them.
            float lr = optimizer_lr(tr->opt, (double)my_updates * (double)c->threads, epoch);
            if (locked) pthread_mutex_lock(&tr->update_lock);
            double loss;
            if (direct) {
                loss = model_sgd_step_one(tr->model, tr->w, shard[pos], lr);
            } else if (copy) {
                block_apply_t sink = {tr->opt, tr->w, lr, copy};
                loss = model_loss_grad_apply(tr->model, tr->w, shard + pos, count, wk->ws, apply_block, &sink);
                if (!locked) model_ws_mark_copy_current(wk->ws);
            } else {
                loss = model_loss_grad(tr->model, tr->w, shard + pos, count, &wk->grad, wk->ws);
                if (clip) grad_clip_norm(&wk->grad, c->clip_grad_norm);
                optimizer_apply_and_clear(tr->opt, tr->w, &wk->grad, lr);
            }
            if (locked) pthread_mutex_unlock(&tr->update_lock);
            if (check_diverged(tr, wk->id, my_updates, loss)) goto done;
            my_updates++;
            my_samples += count;
            publish(&tr->stats[wk->id], count, loss, lr, 1);
            if (c->link) {
                atomic_store_explicit(&c->link->progress[wk->id].steps, my_updates, memory_order_relaxed);
                step_delay_sleep(c->link, &delay_rng);
            }
            if (my_samples >= next_check) next_check = maybe_request_eval(tr, my_samples);
        }
    }
done:
    if (c->link) atomic_store_explicit(&c->link->progress[wk->id].finished, 1, memory_order_release);
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

// The async worker's loop for one thread driving the GPU: the same data order,
// evaluation pauses, link (allowance, progress, delays) and counters. Sparse
// models under Hogwild! take a chunk of examples per step, each example one
// update; the chunk ends at the link's allowance.
static void *gpu_worker(void *arg) {
    worker_t *wk = arg;
    trainer_t *tr = wk->tr;
    const train_config_t *c = &tr->cfg;
    const train_link_t *link = c->link;
    worker_stats_t *stats = &tr->stats[wk->id];
    uint32_t *shard = tr->order + wk->shard_begin;
    size_t len = wk->shard_end - wk->shard_begin;
    char err[512];
    int ok = tr->dev_ops->bind_thread(tr->dev, err, sizeof err) == 0;
    int hogwild = tr->dev_ops->is_hogwild(tr->dev);
    size_t step_max = hogwild ? tr->dev_ops->hogwild_chunk(tr->dev) : c->batch;
    rng_t rng, delay_rng;
    rng_seed(&rng, c->seed, STREAM_SHUFFLE + wk->id);
    step_delay_seed(&delay_rng, c, wk->id);
    uint64_t my_updates = 0, my_samples = 0, next_check = c->eval_every, unsynced = 0;
    if (!ok || wait_at_gate(tr)) goto done;
    for (size_t epoch = 0; epoch < c->epochs; epoch++) {
        rng_shuffle_u32(&rng, shard, len);
        if (!(ok = tr->dev_ops->set_order(tr->dev, shard, len, err, sizeof err) == 0)) goto done;
        size_t count;
        for (size_t pos = 0; pos < len; pos += count) {
            if (link && atomic_load_explicit(link->abort, memory_order_relaxed)) {
                atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
                goto done;
            }
            // The main thread evaluates tr->w once this thread has parked: bring it up to date first.
            if (atomic_load_explicit(&tr->pause_requested, memory_order_acquire)) {
                if (!(ok = gpu_sync(tr, stats, 1, err, sizeof err) == 0)) goto done;
                unsynced = 0;
                if (check_pause(tr)) goto done;
            }
            if (link && wait_for_allowance(tr, wk->id, my_updates)) goto done;
            count = len - pos < step_max ? len - pos : step_max;
            if (hogwild && link) {
                uint64_t allowed = atomic_load_explicit(link->step_allowance, memory_order_acquire);
                if (allowed > my_updates && allowed - my_updates < count) count = (size_t)(allowed - my_updates);
            }
            float lr = optimizer_lr(tr->opt, (double)my_updates, epoch);
            note_step_start(link, wk->id, my_updates);
            if (!(ok = tr->dev_ops->step(tr->dev, pos, count, lr, err, sizeof err) == 0)) goto done;
            uint64_t updates = hogwild ? count : 1;
            my_updates += updates;
            my_samples += count;
            publish(stats, count, 0.0, lr, updates);  // the loss comes with the next sync
            if (++unsynced >= GPU_LOSS_EVERY) {
                if (!(ok = gpu_sync(tr, stats, 0, err, sizeof err) == 0)) goto done;
                unsynced = 0;
            }
            if (link) {
                atomic_store_explicit(&link->progress[wk->id].steps, my_updates, memory_order_relaxed);
                step_delay_sleep(link, &delay_rng);
            }
            if (my_samples >= next_check) next_check = maybe_request_eval(tr, my_samples);
        }
    }
done:
    if (ok) ok = gpu_sync(tr, stats, 1, err, sizeof err) == 0;
    if (!ok) gpu_fail(tr, err);
    if (link) atomic_store_explicit(&link->progress[wk->id].finished, 1, memory_order_release);
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

// Where a dense model's step puts its gradient in sync mode: stored block by
// block into the thread's buffer. The blocks cover every coordinate once, so
// the buffer is never cleared.
static void store_block(void *ctx, size_t offset, const float *g, size_t n) {
    memcpy((float *)ctx + offset, g, n * sizeof *g);
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
        } else if (!c->link) {
            optimizer_apply_range(tr->opt, tr->w, tr->sum.value, off, off + n, lr);
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
    if (!c->link) optimizer_apply_and_clear(tr->opt, tr->w, part, lr);
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
    const float *copy = tr->copies[id];
    for (size_t i = begin; i < end; i++) param_set(&tr->w[i], copy[i]);
}

// Distributed, after the reduce: thread 0 hands the replica's average to the
// exchange, and the global update is applied (dense: by every thread to its
// range; sparse: by thread 0, while the others go on to the next round's
// barrier). Returns 1 if the run stops.
static int sync_exchange(trainer_t *tr, size_t id, size_t total, uint64_t rounds, float lr) {
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
        if (!atomic_load_explicit(link->abort, memory_order_relaxed) &&
            link->exchange(link->ctx, sum, total, lr, tr->w, &applied) != 0)
            atomic_store_explicit(link->abort, 1, memory_order_relaxed);
        tr->round_applied = applied;
        tr->exchange_stop = atomic_load_explicit(link->abort, memory_order_relaxed);
        if (!dense && !tr->exchange_stop) {
            if (!applied) optimizer_apply_and_clear(tr->opt, tr->w, sum, lr);
            else grad_clear(sum);
        }
    }
    if (dense) spin_barrier_wait(&tr->barrier);  // the global gradient (or model) is here, and exchange_stop
    if (dense && tr->exchange_stop) return 1;
    if (dense && !tr->round_applied) {
        size_t begin, end;
        sync_range(tr, id, &begin, &end);
        optimizer_apply_range(tr->opt, tr->w, tr->sum.value, begin, end, lr);
    }
    if (id == 0 && !tr->exchange_stop)
        atomic_store_explicit(&link->progress[0].steps, rounds + 1, memory_order_relaxed);
    // A prepare writes w, which the other threads may still be updating (dense).
    if (dense && link->prepare) spin_barrier_wait(&tr->barrier);
    return 0;
}

static void *sync_worker(void *arg) {
    worker_t *wk = arg;
    trainer_t *tr = wk->tr;
    const train_config_t *c = &tr->cfg;
    const train_link_t *link = c->link;
    size_t T = c->threads, id = wk->id, n = tr->n_train;
    size_t rank = link ? link->rank : 0, ranks = link ? link->ranks : 1;
    size_t replica_size = T * c->batch, round_size = ranks * replica_size;
    int dense = tr->sum.dense, store = dense && model_has_loss_grad_apply(tr->model);
    int unflushed = 0;  // keep_copies: w is behind this thread's copy in its range
    int behind = 0;     // keep_copies: the other threads' ranges of this thread's copy are a round behind
    rng_t rng;
    rng_seed(&rng, c->seed, STREAM_SHUFFLE);  // only thread 0 draws from it
    rng_t delay_rng;  // only thread 0 sleeps
    step_delay_seed(&delay_rng, c, id);
    uint64_t rounds = start_updates(tr, 0), samples = 0;
    for (size_t t = 0; t < T; t++) samples += atomic_load_explicit(&tr->stats[t].samples, memory_order_relaxed);
    // A resumed run skips the rounds done before, replaying the epochs' shuffles.
    size_t rounds_per_epoch = (n + round_size - 1) / round_size;
    size_t skip_epochs = (size_t)(rounds / rounds_per_epoch);
    size_t skip_base = (size_t)(rounds % rounds_per_epoch) * round_size;
    if (wait_at_gate(tr)) goto done;
    // Every copy starts as w; from then on each round's reduce and pull keep it current.
    if (tr->keep_copies) params_read(tr->w, tr->n_params, tr->copies[id]);
    for (size_t epoch = 0; epoch < c->epochs; epoch++) {
        if (id == 0) rng_shuffle_u32(&rng, tr->order, n);
        if (epoch < skip_epochs) continue;
        for (size_t base = epoch == skip_epochs ? skip_base : 0; base < n; base += round_size) {
            if (id == 0) {
                // Thread 0 knows the exact count at a round boundary.
                if (samples >= atomic_load_explicit(&tr->next_eval_samples, memory_order_acquire))
                    atomic_store_explicit(&tr->pause_requested, 1, memory_order_release);
                tr->round_park = atomic_load_explicit(&tr->pause_requested, memory_order_acquire);
                if (link && link->prepare && !atomic_load_explicit(link->abort, memory_order_relaxed)) {
                    size_t round_examples = n - base < round_size ? n - base : round_size, from = rank * replica_size;
                    size_t mine = from < round_examples ? round_examples - from : 0;
                    if (mine > replica_size) mine = replica_size;
                    if (mine && link->prepare(link->ctx, tr->order + base + from, mine, tr->w) != 0)
                        atomic_store_explicit(link->abort, 1, memory_order_relaxed);
                }
                tr->round_stop = link && atomic_load_explicit(link->abort, memory_order_relaxed);
                if (tr->round_stop) atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
            }
            spin_barrier_wait(&tr->barrier);  // A
            if (tr->round_stop) goto done;
            if (tr->round_park) {
                if (unflushed) sync_flush(tr, id);
                unflushed = 0;
                park(tr);
                if (atomic_load_explicit(&tr->stop_requested, memory_order_acquire)) goto done;
            }
            // This replica's part of the round: [mine, mine + total) of the order.
            size_t round_total = n - base < round_size ? n - base : round_size;
            size_t mine = rank * replica_size, total = 0;
            if (mine < round_total) total = round_total - mine < replica_size ? round_total - mine : replica_size;
            size_t count = sync_count(total, c->batch, id);
            double loss = 0.0;
            if (count) {
                const uint32_t *idx = tr->order + base + mine + id * c->batch;
                if (store) {
                    if (behind) sync_pull(tr, id);
                    behind = 0;
                    if (tr->keep_copies) model_ws_mark_copy_current(wk->ws);
                    loss = model_loss_grad_apply(tr->model, tr->w, idx, count, wk->ws, store_block, wk->grad.value);
                } else {
                    grad_clear(&wk->grad);  // the reduce only read it
                    loss = model_loss_grad(tr->model, tr->w, idx, count, &wk->grad, wk->ws);
                }
                // Each thread's part is clipped; their weighted mean is then no longer either.
                if (c->clip_grad_norm > 0) grad_clip_norm(&wk->grad, c->clip_grad_norm);
                // The round goes on (every thread must meet at its barriers); the
                // threads park and stop at the next round boundary.
                check_diverged(tr, id, rounds, loss);
            }
            float lr = optimizer_lr(tr->opt, (double)rounds, epoch);
            if (id == 0) step_delay_sleep(link, &delay_rng);
            spin_barrier_wait(&tr->barrier);  // B
            if (dense) sync_reduce_dense(tr, id, total, lr);
            else sync_reduce_sparse(tr, id, total, lr);
            unflushed = behind = tr->keep_copies;
            if (link && sync_exchange(tr, id, total, rounds, lr)) {
                atomic_store_explicit(&tr->stop_requested, 1, memory_order_release);
                goto done;
            }
            rounds++;
            samples += total;
            publish(&tr->stats[id], count, loss, lr, id == 0 ? 1 : 0);
        }
    }
done:
    if (unflushed) sync_flush(tr, id);
    mark_finished(tr);
    return NULL;
}

// ---- main thread ----

typedef struct eval_slice {
    const trainer_t *tr;
    model_ws_t *ws;
    size_t begin, end;
    eval_sums_t sums;
} eval_slice_t;

static void *eval_slice_run(void *arg) {
    eval_slice_t *e = arg;
    model_evaluate(e->tr->model, e->tr->w, e->begin, e->end, e->ws, &e->sums);
    return NULL;
}

// Evaluates the test set on T threads of our own, one slice each (OpenBLAS stays
// single-threaded: its idle pool threads spin in sched_yield and would take
// cores from the workers after every evaluation).
static void evaluate(trainer_t *tr, model_ws_t **ws, train_point_t *p) {
    size_t T = tr->cfg.threads;
    size_t limit = tr->cfg.eval_limit ? tr->cfg.eval_limit : model_num_test(tr->model);
    if (limit > model_num_test(tr->model)) limit = model_num_test(tr->model);
    eval_slice_t slices[EVAL_THREADS_MAX];
    pthread_t threads[EVAL_THREADS_MAX];
    int started[EVAL_THREADS_MAX] = {0};
    size_t n = T < EVAL_THREADS_MAX ? T : EVAL_THREADS_MAX;
    for (size_t i = 0; i < n; i++) {
        slices[i] = (eval_slice_t){tr, ws[i], limit * i / n, limit * (i + 1) / n, {0.0, 0.0, 0}};
        // A slice whose thread cannot start is evaluated here instead.
        if (i > 0) started[i] = pthread_create(&threads[i], NULL, eval_slice_run, &slices[i]) == 0;
    }
    eval_slice_run(&slices[0]);
    eval_sums_t sums = {0.0, 0.0, 0};
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && started[i]) pthread_join(threads[i], NULL);
        else if (i > 0) eval_slice_run(&slices[i]);
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
        }
    }
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
        for (size_t i = 0; i < T; i++) tr->keep_copies &= (tr->copies[i] = model_ws_param_copy(tr->workers[i].ws)) != NULL;
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
    for (size_t i = 0; i < tr->n_train; i++) tr->order[i] = (uint32_t)i;
    rng_t rng;
    rng_seed(&rng, tr->cfg.seed, STREAM_ORDER);
    rng_shuffle_u32(&rng, tr->order, tr->n_train);
    for (size_t i = 0; i < T; i++) {
        worker_t *wk = &tr->workers[i];
        wk->tr = tr;
        wk->id = i;
        size_t lo = 0, hi = tr->n_train;
        if (tr->cfg.link) shard_range(tr->n_train, tr->cfg.link->ranks, tr->cfg.link->rank, &lo, &hi);
        shard_range(hi - lo, T, i, &wk->shard_begin, &wk->shard_end);
        wk->shard_begin += lo;
        wk->shard_end += lo;
        wk->ws = model_ws_new(tr->model, tr->cfg.batch, err, err_len);
        if (!wk->ws || grad_init(&wk->grad, tr->n_params, dense, err, err_len) != 0) return -1;
    }
    if (tr->cfg.mode == TRAIN_MODE_SYNC) return prepare_sync(tr, dense, err, err_len);
    return 0;
}

static int start_threads(trainer_t *tr, size_t *started, char *err, size_t err_len) {
    void *(*entry)(void *) = tr->dev ? gpu_worker : tr->cfg.mode == TRAIN_MODE_SYNC ? sync_worker : async_worker;
    long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpus < 1) n_cpus = 1;
    for (size_t i = 0; i < tr->cfg.threads; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (tr->cfg.pin) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET((int)(i % (size_t)n_cpus), &set);
            int rc = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
            if (rc != 0) {
                snprintf(err, err_len, "trainer: pinning thread %zu to CPU %zu: %s", i, i % (size_t)n_cpus, strerror(rc));
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
    tr->resume_generation++;
    pthread_cond_broadcast(&tr->cv_resume);
}

typedef struct clock_state {
    double start;
    double paused;       // seconds spent in evaluation pauses
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

// One evaluation point, taken with workers parked (or finished).
static int eval_point(trainer_t *tr, model_ws_t **ws, clock_state_t *clk, const train_callbacks_t *cb,
                      train_result_t *res) {
    double pause_begin = now_s();
    const train_link_t *link = tr->cfg.link;
    if (link && link->refresh && !atomic_load_explicit(link->abort, memory_order_relaxed) &&
        link->refresh(link->ctx, tr->w) != 0)
        atomic_store_explicit(link->abort, 1, memory_order_relaxed);
    totals_t t = read_totals(tr);
    train_point_t p = point_at(tr, clk, &t, pause_begin);
    evaluate(tr, ws, &p);
    clk->at_last_eval = t;
    res->n_evals++;
    atomic_store_explicit(&tr->next_eval_samples, (t.samples / tr->cfg.eval_every + 1) * tr->cfg.eval_every,
                          memory_order_release);
    res->last = p;
    int reached = target_met(tr, p.test_metric);
    if (reached && isnan(res->time_to_target_s)) {
        res->time_to_target_s = p.wall_s;
        res->samples_to_target = p.samples;
    }
    if (cb && cb->on_eval) cb->on_eval(&p, cb->ctx);
    clk->paused += now_s() - pause_begin;
    return reached && tr->cfg.stop_at_target;
}

// With every thread parked: the run's position, handed to the checkpoint
// callback unless a parameter is no longer finite (a checkpoint is only ever
// of a good state). Counted as paused time.
static int take_checkpoint(trainer_t *tr, clock_state_t *clk, train_result_t *out, char *err, size_t err_len) {
    double begin = now_s();
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
    clk->paused += now_s() - begin;
    return rc;
}

int train_run(const model_t *m, optimizer_t *opt, param_t *w, const train_config_t *c,
              const train_callbacks_t *cb, train_result_t *out, char *err, size_t err_len) {
    if (train_config_check(c, model_num_train(m), err, err_len) != 0) return -1;
    trainer_t tr;
    memset(&tr, 0, sizeof tr);
    tr.model = m;
    tr.opt = opt;
    tr.w = w;
    tr.cfg = *c;
    tr.n_train = model_num_train(m);
    tr.n_params = model_num_params(m);
    if (tr.cfg.eval_every == 0) tr.cfg.eval_every = c->link ? tr.n_train / c->link->ranks : tr.n_train;
    if (tr.cfg.eval_every == 0) tr.cfg.eval_every = 1;
    model_ws_t *eval_ws[EVAL_THREADS_MAX] = {NULL};
    size_t n_eval_ws = c->threads < EVAL_THREADS_MAX ? c->threads : EVAL_THREADS_MAX;
    void *own_dev = NULL;
    tr.dev_ops = c->device;
    tr.dev = c->device ? c->device_handle : NULL;
    if (c->device && !tr.dev &&
        !(tr.dev = own_dev = c->device->create(c->device_options, m, optimizer_config(opt), c->batch, err, err_len)))
        return -1;
    int prepared = !tr.dev || (tr.dev_ops->bind_thread(tr.dev, err, err_len) == 0 &&
                               tr.dev_ops->set_params(tr.dev, w, err, err_len) == 0);
    prepared = prepared && prepare(&tr, err, err_len) == 0;
    for (size_t i = 0; prepared && i < n_eval_ws; i++) prepared = (eval_ws[i] = model_ws_new(m, c->batch, err, err_len)) != NULL;
    if (!prepared) {
        for (size_t i = 0; i < n_eval_ws; i++) model_ws_destroy(&eval_ws[i]);
        free_trainer(&tr);
        if (own_dev) c->device->destroy(own_dev);
        return -1;
    }
    pthread_mutex_init(&tr.update_lock, NULL);
    pthread_mutex_init(&tr.mu, NULL);
    // The main thread's timed waits use the same monotonic clock as now_s().
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&tr.cv_parked, &monotonic);
    pthread_condattr_destroy(&monotonic);
    pthread_cond_init(&tr.cv_resume, NULL);
    long online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int oversubscribed = online_cpus > 0 && c->threads > (size_t)online_cpus;
    spin_barrier_init(&tr.barrier, (unsigned)c->threads, oversubscribed ? 0 : SPIN_BARRIER_SPINS);
    atomic_init(&tr.pause_requested, 0);
    atomic_init(&tr.stop_requested, 0);
    atomic_init(&tr.next_eval_samples, tr.cfg.eval_every);
    atomic_init(&tr.diverged, 0);

    memset(out, 0, sizeof *out);
    out->time_to_target_s = NAN;
    clock_state_t clk;
    memset(&clk, 0, sizeof clk);
    clk.start = now_s() - (c->start ? c->start->wall_s : 0.0);
    // Checkpoints are due by training time (evaluation and checkpoint pauses excluded).
    double checkpoint_at = c->checkpoint_every_s > 0 ? (c->start ? c->start->wall_s : 0.0) + c->checkpoint_every_s
                                                     : INFINITY;
    int checkpoint_due = 0;
    // Evaluations by training time too (--eval-every-s), on a fixed grid.
    double eval_at = c->eval_every_s > 0 ? (c->start ? c->start->wall_s : 0.0) + c->eval_every_s : INFINITY;
    int eval_due = 0;
    // The starting point, so every curve begins at the initial parameters.
    int stop = eval_point(&tr, eval_ws, &clk, cb, out);

    // Our threads are the parallelism; OpenBLAS threads inside them would oversubscribe the cores.
    int saved_blas_threads = blas_get_threads();
    blas_set_threads(1);
    size_t started = 0;
    int rc = stop ? 0 : start_threads(&tr, &started, err, err_len);
    open_gate(&tr, rc != 0);
    // Sleep until a worker asks for an evaluation, all finish, or progress is due.
    double progress_every = c->progress_interval_s > 0 ? c->progress_interval_s : 0.25;
    double next_progress = now_s() + progress_every;
    pthread_mutex_lock(&tr.mu);
    while (tr.finished < started) {
        if (atomic_load_explicit(&tr.pause_requested, memory_order_acquire)) {
            while (tr.parked + tr.finished < started) pthread_cond_wait(&tr.cv_parked, &tr.mu);
            pthread_mutex_unlock(&tr.mu);
            int stop_now = atomic_load(&tr.diverged);
            if (!stop_now && checkpoint_due) {
                checkpoint_due = 0;
                if (take_checkpoint(&tr, &clk, out, err, err_len) != 0) {
                    rc = -1;
                    stop_now = 1;
                }
                checkpoint_at = tr.position.wall_s + c->checkpoint_every_s;
            }
            // An evaluation when one is due (the pause may have been only for a checkpoint).
            if (!stop_now && (read_totals(&tr).samples >= atomic_load(&tr.next_eval_samples) || eval_due ||
                              out->stopped_at_time_limit)) {
                eval_due = 0;
                int at_target = eval_point(&tr, eval_ws, &clk, cb, out);
                while (eval_at <= out->last.wall_s) eval_at += c->eval_every_s;
                out->stopped_at_target |= at_target;
                stop_now = at_target || out->stopped_at_time_limit;
            }
            stop_now |= out->interrupted;
            pthread_mutex_lock(&tr.mu);
            resume_workers_locked(&tr, stop_now);
            continue;
        }
        double now = now_s();
        if (!checkpoint_due && now - clk.start - clk.paused >= checkpoint_at) {
            checkpoint_due = 1;
            atomic_store_explicit(&tr.pause_requested, 1, memory_order_release);
            continue;
        }
        if (!eval_due && now - clk.start - clk.paused >= eval_at) {
            eval_due = 1;
            atomic_store_explicit(&tr.pause_requested, 1, memory_order_release);
            continue;
        }
        if (c->interrupt && !out->interrupted && atomic_load(c->interrupt)) {
            // Asked to stop: park everyone at the next step boundary and end there.
            out->interrupted = 1;
            atomic_store_explicit(&tr.pause_requested, 1, memory_order_release);
            continue;
        }
        if (c->time_limit_s > 0 && !out->stopped_at_time_limit && now - clk.start - clk.paused >= c->time_limit_s) {
            // Out of time: a last evaluation at the next step boundary, then stop.
            out->stopped_at_time_limit = 1;
            atomic_store_explicit(&tr.pause_requested, 1, memory_order_release);
            continue;
        }
        if (now >= next_progress) {
            next_progress = now + progress_every;
            if (cb && cb->on_progress && c->progress_interval_s > 0) {
                pthread_mutex_unlock(&tr.mu);
                totals_t t = read_totals(&tr);
                train_point_t p = point_at(&tr, &clk, &t, now);
                double remaining = (double)tr.n_train * (double)c->epochs - (double)t.samples;
                cb->on_progress(&p, p.samples_per_s > 0 ? remaining / p.samples_per_s : NAN, cb->ctx);
                pthread_mutex_lock(&tr.mu);
            }
            continue;
        }
        struct timespec deadline;
        double wake = next_progress;
        if (clk.start + clk.paused + checkpoint_at < wake) wake = clk.start + clk.paused + checkpoint_at;
        if (clk.start + clk.paused + eval_at < wake) wake = clk.start + clk.paused + eval_at;
        if (c->time_limit_s > 0 && !out->stopped_at_time_limit) {
            double limit_at = clk.start + clk.paused + c->time_limit_s;
            if (limit_at < wake) wake = limit_at;
        }
        deadline.tv_sec = (time_t)wake;
        deadline.tv_nsec = (long)((wake - (double)deadline.tv_sec) * 1e9);
        pthread_cond_timedwait(&tr.cv_parked, &tr.mu, &deadline);
    }
    pthread_mutex_unlock(&tr.mu);
    for (size_t i = 0; i < started; i++) pthread_join(tr.workers[i].thread, NULL);
    blas_set_threads(saved_blas_threads);
    if (rc == 0 && tr.gpu_err[0]) {
        snprintf(err, err_len, "%s", tr.gpu_err);
        rc = -1;
    }
    if (rc == 0 && atomic_load(&tr.diverged)) {
        totals_t t = read_totals(&tr);
        snprintf(err, err_len,
                 "training diverged: thread %zu's minibatch loss was %s at its step %llu (after %llu samples in all); "
                 "stopped without saving the parameters (a smaller --lr may help)",
                 tr.diverged_thread, isnan(tr.diverged_loss) ? "NaN" : tr.diverged_loss > 0 ? "+Inf" : "-Inf",
                 (unsigned long long)tr.diverged_step,
                 (unsigned long long)t.samples);
        rc = -1;
    }
    if (rc == 0 && c->link && atomic_load_explicit(c->link->abort, memory_order_relaxed)) {
        snprintf(err, err_len, "training stopped: this worker lost its connection to the run");
        rc = -1;
    }

    if (rc == 0) {
        totals_t t = read_totals(&tr);
        if (t.samples != out->last.samples) eval_point(&tr, eval_ws, &clk, cb, out);
        out->wall_s = out->last.wall_s;
        out->eval_s = clk.paused;
        out->samples = t.samples;
        out->updates = t.updates;
        out->samples_per_s = out->wall_s > 0 ? (double)t.samples / out->wall_s : 0.0;
        out->updates_per_s = out->wall_s > 0 ? (double)t.updates / out->wall_s : 0.0;
        // The end is a checkpoint too: resuming a finished run has nothing left to do.
        if (c->checkpoint_every_s > 0 && take_checkpoint(&tr, &clk, out, err, err_len) != 0) rc = -1;
    }
    pthread_cond_destroy(&tr.cv_resume);
    pthread_cond_destroy(&tr.cv_parked);
    pthread_mutex_destroy(&tr.mu);
    pthread_mutex_destroy(&tr.update_lock);
    for (size_t i = 0; i < n_eval_ws; i++) model_ws_destroy(&eval_ws[i]);
    free_trainer(&tr);
    if (own_dev) c->device->destroy(own_dev);
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
