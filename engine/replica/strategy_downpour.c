// asp and ssp (Downpour): Hogwild! threads train the local copy, and a
// communication thread pushes what they learned and rebases the copy on the
// servers' model, holding the threads to the SSP gate (sync_strategy.h).
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/hogwild_replica.h"
#include "engine/core/test_hooks.h"
#include "engine/replica/by_key.h"
#include "engine/replica/replica_impl.h"
#include "kernels/foundation/partition.h"
#include "net/ps_client.h"
#include "staleness/histogram.h"

#define PUSH_BLOCK 2048  // floats: 8 KiB, well inside L1
#define GEN_RING 64  // rebases whose shard versions a push may still carry
#define PACE_MAX_S 1.0  // the longest an operation counts for a paced exchange's rest

// The steps one thread's next push will carry, from `first`, the first step
// not complete at the last cut, and the rebase generation that step read:
// exact once seen (known), until then the generation current when it was
// last seen not started (it reads that one or a later one).
typedef struct step_window {
    uint64_t first, gen;
    int known;
} step_window_t;

// The mode's state (r->mode): the communication thread's.
typedef struct downpour {
    pthread_t comm;
    _Atomic int training_done;
    uint64_t steps_pushed;  // replica steps covered by the pushes so far
    uint64_t pushes_hot_averaged;  // pushes whose dense part went averaged (average_hot)
    uint64_t pushes_hot_sized;  // pushes of HOGWILD_HOT_TOUCHES examples or more (what average_hot needs)
    uint64_t resumed_unpushed;  // a resume from a checkpoint: the steps its pending update sums
    // Which parameters the steps a push sums had read. The communication
    // thread raises `generation` at every rebase; each step records the value
    // it read (train_link_t.generation).
    _Atomic uint64_t generation;
    uint64_t *gen_versions;  // (GEN_RING, n_servers) shard versions rebase g installed, at g % GEN_RING
    step_window_t *win;  // (threads)
    // The pull in flight (ps_client_pull_start) and what pulls took.
    uint64_t pull_need;  // the clock it asked for
    uint64_t pull_span;  // its trace span
    double pull_sent_s;  // when it went out
    double pull_rtt_s;  // round trips measured so far, averaged (0: none yet)
    double started_s;  // when the communication thread started
    uint64_t pulled_at_steps;  // the replica's steps when the last pull was answered
    // The periods achieved: steps (all threads') between pushes and between pulls.
    staleness_hist_t steps_per_push, steps_per_pull;
    // A model read by key moves its working set only (working_set.h): pushes
    // send the keys the steps wrote, pulls bring the keys the next steps read.
    by_key_t by_key;  // pull_keys: the keys of the pull in flight, pull_n of them
    uint32_t *push_keys;  // (n) the keys a push compares
    size_t pull_n;
    uint64_t window_sent;  // the step (per thread) the pull in flight's keys reach
    uint64_t keys_allowance;  // ssp: the steps whose keys were pulled at a clock the bound accepts
    int scanned_once;  // the first push compares every key (a resumed update may hold any)
    // Paced exchanges (rc->comm_share > 0): after a push, and after a pull's
    // round trip and rebase, no push or pull starts for (1 / share - 1) times
    // as long, so that exchanging (this thread, the servers' work for it and
    // the bytes' way through the kernel, all of which the round trip
    // contains) takes at most `share` of the time and leaves the rest to
    // training. A pull in flight never holds a push back, and one held up
    // for long (a stopped process) earns at most PACE_MAX_S of rest.
    double rest_until_s;  // no push or pull starts before (the monotonic clock)
    double rest_s, last_rest_s;  // the rests earned since the last pull was answered, and in the cycle before
} downpour_t;

// Steps the replica's threads have taken, all together.
static uint64_t replica_steps(const replica_t *r) {
    uint64_t total = 0;
    for (size_t t = 0; t < r->threads; t++) total += atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
    return total;
}

// The threads' step allowance when the local copy was read at min clock g:
// every step of the rounds up to the gate's last round for g.
static uint64_t allowance_for(uint64_t g, uint64_t bound, uint64_t quota) {
    uint64_t last = ssp_gate(0, g, bound).last_round;
    if (last == UINT64_MAX || last + 1 > UINT64_MAX / quota) return UINT64_MAX;
    return (last + 1) * quota;
}

// ---- which parameters a push's steps read ----------------------------------------

// Notes the first step of each window that has started since last seen.
static void windows_observe(replica_t *r) {
    downpour_t *d = r->mode;
    uint64_t now = atomic_load_explicit(&d->generation, memory_order_relaxed);
    for (size_t t = 0; t < r->threads; t++) {
        step_window_t *w = &d->win[t];
        if (w->known) continue;
        uint64_t x = atomic_load_explicit(&r->progress[t].read_gen, memory_order_acquire);
        uint32_t ahead = (uint32_t)x - (uint32_t)w->first;  // the last step started, past the window's first
        if (ahead == 0) {
            w->gen = x >> 32;
            w->known = 1;
        } else if (ahead < 0x80000000u) {
            w->known = 1;  // started and passed unseen: its generation is the bound held
        } else {
            w->gen = now;  // not started yet
        }
    }
}

// Cuts the push being made: returns the oldest generation read by a step
// whose writes it may carry, and starts each thread's next window. A step in
// flight at the cut has written part of its update: it belongs to this push
// and to the next. A thread with no step since the last cut keeps its window.
static uint64_t windows_cut(replica_t *r) {
    downpour_t *d = r->mode;
    windows_observe(r);
    uint64_t now = atomic_load_explicit(&d->generation, memory_order_relaxed), oldest = UINT64_MAX;
    for (size_t t = 0; t < r->threads; t++) {
        step_window_t *w = &d->win[t];
        // read_gen (acquire) first: the count read after it covers every step before that one.
        uint64_t x = atomic_load_explicit(&r->progress[t].read_gen, memory_order_acquire);
        uint64_t c = atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
        if (!w->known && (uint32_t)x == (uint32_t)w->first) {
            w->gen = x >> 32;
            w->known = 1;
        }
        if (!w->known && c == w->first) continue;
        if (w->gen < oldest) oldest = w->gen;
        w->first = c;
        w->known = (uint32_t)x == (uint32_t)c;  // step c in flight
        w->gen = w->known ? x >> 32 : now;
    }
    return oldest == UINT64_MAX ? now : oldest;
}

// Whether one more rebase keeps every generation a push may still carry.
static int gen_ring_has_room(const replica_t *r) {
    const downpour_t *d = r->mode;
    uint64_t now = atomic_load_explicit(&d->generation, memory_order_relaxed), oldest = now;
    for (size_t t = 0; t < r->threads; t++)
        if (d->win[t].gen < oldest) oldest = d->win[t].gen;
    return now + 1 - oldest < GEN_RING;
}

// The shard versions generation g read (the oldest kept, should g have left the ring).
static const uint64_t *gen_versions_of(const replica_t *r, uint64_t g) {
    const downpour_t *d = r->mode;
    uint64_t now = atomic_load_explicit(&d->generation, memory_order_relaxed);
    if (now - g >= GEN_RING) g = now - GEN_RING + 1;
    return d->gen_versions + (g % GEN_RING) * r->rc->n_servers;
}

// ---- push and pull -------------------------------------------------------------

// Dense, uncompressed: the change of each shard's range written into its
// frame, in blocks that stay in cache until the client has checksummed them.
// Returns whether anything changed, or -1.
static int write_dense_frames(replica_t *r, const float *snap, float inv_lr) {
    float *const *frames = ps_client_push_frames(r->client, r->err, sizeof r->err);
    if (!frames) return -1;
    int changed = 0;
    for (size_t k = 0; k < r->rc->n_servers; k++) {
        size_t begin, end;
        shard_range(r->n, r->rc->n_servers, k, &begin, &end);
        float *frame = frames[k];
        for (size_t block = begin; block < end; block += PUSH_BLOCK) {
            size_t stop = end - block < PUSH_BLOCK ? end : block + PUSH_BLOCK;
            for (size_t j = block; j < stop; j++) {
                float cur = snap ? snap[j] : param_get(&r->w[j]);
                frame[j - begin] = (r->base[j] - cur) * inv_lr;
                changed |= cur != r->base[j];
                r->base[j] = cur;
            }
            ps_client_push_block_written(r->client, k, block - begin, stop - block);
        }
    }
    return changed;
}

// By key: the change at each key the steps since the last push may have
// written (the first push compares every key), into r->idx / r->val in key
// order. Returns how many changed.
static size_t push_by_key(replica_t *r, float inv_lr) {
    downpour_t *d = r->mode;
    size_t nk = working_set_pushed(&d->by_key.ws, d->push_keys);
    const uint32_t *keys = d->push_keys;
    if (!d->scanned_once) {
        for (size_t j = 0; j < r->n; j++) d->push_keys[j] = (uint32_t)j;
        nk = r->n;
        d->scanned_once = 1;
    }
    size_t nnz = 0;
    for (size_t i = 0; i < nk; i++) {
        uint32_t j = keys[i];
        float cur = param_get(&r->w[j]);
        if (cur != r->base[j]) {
            r->idx[nnz] = j;
            r->val[nnz++] = (r->base[j] - cur) * inv_lr;
            r->base[j] = cur;
        }
    }
    return nnz;
}

// Pushes what the replica learned since its last push: (base - w) / lr per
// coordinate, the sum of the gradients its SGD steps applied. With
// skip_if_empty, nothing is sent when no step came after the last push (a
// push whose steps changed nothing still goes: the last push may have
// carried a step in flight whole, and its steps are counted here). Returns
// 1 when it pushed, 0 when it skipped, -1 on error.
// The communication thread's spans in a --trace timeline (docs/trace.md).
static const trace_kind_t TK_PUSH = {"push", "net", "clock"};
static const trace_kind_t TK_PULL = {"pull", "net", "need"};  // need > 0: the gate's pull (waits for the bound)
static const trace_kind_t TK_ACKS = {"wait_acks", "net", NULL};

// Whether a push of `steps` local steps holds HOGWILD_HOT_TOUCHES examples
// or more: the size average_hot needs (and pushes_hot_sized counts).
static int hot_sized(const replica_t *r, uint64_t steps) {
    return (double)steps * (double)r->batch >= HOGWILD_HOT_TOUCHES;
}

// The hot parameters of a push of idx/val (nnz entries): a model's dense
// part, [model_num_sparse_params, n), which every step moves. Summed over N
// workers, a change each worker made from nearly the same base counts N times
// there, and the servers' value swings past where every worker's steps were
// taking it and back (docs/distributed.md, "Summed deltas and the hot
// coordinates"); times hot_share = 1/N (N the run's --workers), the servers'
// sum is the workers' average. Only a push of HOGWILD_HOT_TOUCHES examples or
// more: the rule (and the reason) of the Hogwild! replicas' merges
// (engine/core/hogwild_replica.h), where a change over fewer examples is
// still a sum of small steps. Returns whether it divided.
static int average_hot(replica_t *r, size_t nnz, uint64_t steps) {
    size_t sparse = model_num_sparse_params(r->model);
    float share = r->rc->hot_share;
    if (!(share > 0.0f && share < 1.0f) || sparse == 0 || !hot_sized(r, steps)) return 0;
    for (size_t i = 0; i < nnz; i++)
        if (r->idx[i] >= sparse) r->val[i] *= share;
    return 1;
}

static int push_delta(replica_t *r, int skip_if_empty) {
    downpour_t *d = r->mode;
    uint64_t span = TRACE_BEGIN();
    // How many steps the push sums (read before the delta, so it never
    // overstates): the server's delay compensation scales by it.
    uint64_t steps_now = replica_steps(r);
    uint64_t steps = steps_now - d->steps_pushed;
    // It carries, per shard, the version of the oldest parameters its steps read.
    ps_client_carry_versions(r->client, gen_versions_of(r, windows_cut(r)));
    uint32_t steps_aux = steps > UINT32_MAX ? UINT32_MAX : (uint32_t)steps;
    float inv_lr = 1.0f / r->lr;
    const float *snap = NULL;  // the GPU's parameters, copied to the host
    if (r->gpu && !(snap = gpu_model_snapshot(r->gpu, r->err, sizeof r->err))) return -1;
    int averaged = 0;
    if (d->by_key.on) {
        size_t nnz = push_by_key(r, inv_lr);
        if (skip_if_empty && steps == 0) return 0;
        averaged = average_hot(r, nnz, steps);
        if (ps_client_push_sparse(r->client, r->idx, r->val, nnz, r->clock, steps_aux, 0, r->err, sizeof r->err) != 0)
            return -1;
    } else if (!r->sparse && r->comp) {
        for (size_t j = 0; j < r->n; j++) {
            float cur = snap ? snap[j] : param_get(&r->w[j]);
            r->val[j] = (r->base[j] - cur) * inv_lr;
            r->base[j] = cur;
        }
        if (skip_if_empty && steps == 0) return 0;
        if (replica_push_encoded(r, r->val, steps_aux, 0) != 0) return -1;
    } else if (!r->sparse) {
        if (write_dense_frames(r, snap, inv_lr) < 0) return -1;
        // The frames stay allocated for the next push when this one is skipped.
        if (skip_if_empty && steps == 0) return 0;
        if (ps_client_push_commit(r->client, r->clock, steps_aux, 0, r->err, sizeof r->err) != 0) return -1;
    } else {
        size_t nnz = 0;
        for (size_t j = 0; j < r->n; j++) {
            float cur = snap ? snap[j] : param_get(&r->w[j]);
            if (cur != r->base[j]) {
                r->idx[nnz] = (uint32_t)j;
                r->val[nnz++] = (r->base[j] - cur) * inv_lr;
                r->base[j] = cur;
            }
        }
        if (skip_if_empty && steps == 0) return 0;
        averaged = average_hot(r, nnz, steps);
        if (ps_client_push_sparse(r->client, r->idx, r->val, nnz, r->clock, steps_aux, 0, r->err, sizeof r->err) != 0)
            return -1;
    }
    r->clock++;
    replica_count_push(r);
    staleness_hist_add(&d->steps_per_push, steps);
    d->pushes_hot_averaged += (uint64_t)averaged;
    d->pushes_hot_sized += (uint64_t)hot_sized(r, steps);
    d->steps_pushed = steps_now;
    TRACE_END(&TK_PUSH, span, r->clock);
    return 1;
}

// Rebases the local copy on the model a pull just brought into r->pulled
// (answered once every live worker had pushed `need` rounds, min_clock as the
// shards reported it), keeping the local changes not yet pushed.
static int rebase(replica_t *r, uint64_t need, uint64_t min_clock, uint64_t span) {
    downpour_t *d = r->mode;
    if (r->gpu) {
        // The same rebase as a delta for the device: w + (pulled - base).
        float *delta = gpu_model_delta_buffer(r->gpu);
        for (size_t j = 0; j < r->n; j++) {
            delta[j] = r->pulled[j] - r->base[j];
            r->base[j] = r->pulled[j];
        }
        if (gpu_model_add_delta(r->gpu, r->err, sizeof r->err) != 0) return -1;
    } else if (d->by_key.on && d->pull_n != SIZE_MAX) {
        for (size_t i = 0; i < d->pull_n; i++) {
            uint32_t j = d->by_key.pull_keys[i];
            float cur = param_get(&r->w[j]);
            param_set(&r->w[j], r->pulled[i] + (cur - r->base[j]));
            r->base[j] = r->pulled[i];
        }
    } else {
        for (size_t j = 0; j < r->n; j++) {
            float cur = param_get(&r->w[j]);
            param_set(&r->w[j], r->pulled[j] + (cur - r->base[j]));
            r->base[j] = r->pulled[j];
        }
    }
    if (d->by_key.on) {
        // The steps up to the window (every step, for a whole pull) read keys
        // as new as min_clock; those past it, keys an earlier pull brought.
        uint64_t allowed = allowance_for(min_clock, r->read_bound, r->quota);
        if (allowed > d->window_sent) allowed = d->window_sent;
        if (allowed > d->keys_allowance) d->keys_allowance = allowed;
    }
    r->g_read = min_clock;
    replica_count_pull(r);
    // A new generation: steps that start from now on read at least these parameters.
    uint64_t g = atomic_load_explicit(&d->generation, memory_order_relaxed) + 1;
    ps_client_pulled_versions(r->client, d->gen_versions + (g % GEN_RING) * r->rc->n_servers);
    atomic_store_explicit(&d->generation, g, memory_order_release);
    windows_observe(r);
    TRACE_END(&TK_PULL, span, need);
    return 0;
}

static uint64_t gate_lead(const replica_t *r, uint64_t min_steps);
static uint64_t rest_lead(const replica_t *r, uint64_t min_steps);
static void threads_progress(const replica_t *r, uint64_t *min_steps, uint64_t *total);

// By key: the keys the threads' next steps read, from each one's step now to
// a common end: past the steps this pull's answer allows (ssp), and ahead by
// the steps a round trip takes plus a fetch period, so that the threads find
// their keys fresh when they get there.
static int pull_keys_send(replica_t *r, uint64_t need) {
    downpour_t *d = r->mode;
    uint64_t min_steps, total, max_steps = 0;
    threads_progress(r, &min_steps, &total);
    for (size_t t = 0; t < r->threads; t++) {
        uint64_t s = atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
        if (s > max_steps) max_steps = s;
    }
    uint64_t fetch = r->rc->fetch_every / r->threads;
    if (fetch == 0) fetch = 1;
    uint64_t slowest = min_steps == UINT64_MAX ? max_steps : min_steps;
    uint64_t end = max_steps + gate_lead(r, slowest) + fetch + rest_lead(r, slowest);
    if (r->read_bound != STALENESS_INFINITE) {
        uint64_t allowed = allowance_for(need, r->read_bound, r->quota);
        if (allowed != UINT64_MAX && allowed > end) end = allowed;
    }
    d->pull_n = working_set_window(&d->by_key.ws, end, d->by_key.pull_keys, &d->window_sent);
    if (d->pull_n == SIZE_MAX) return ps_client_pull_start(r->client, need, r->pulled, r->err, sizeof r->err);
    return ps_client_pull_keys_start(r->client, need, d->by_key.pull_keys, d->pull_n, r->pulled, r->err, sizeof r->err);
}

// Sends a pull in the background (ps_client_pull_start): the global model,
// answered once every live worker has pushed `need` rounds. The threads
// train on while it is in flight; pull_landed rebases on its answer.
static int pull_send(replica_t *r, uint64_t need) {
    downpour_t *d = r->mode;
    if (d->by_key.on ? pull_keys_send(r, need) != 0
                     : ps_client_pull_start(r->client, need, r->pulled, r->err, sizeof r->err) != 0)
        return -1;
    d->pull_need = need;
    d->pull_span = TRACE_BEGIN();
    d->pull_sent_s = replica_now_s();
    return 0;
}

// The pull in flight, answered: its round trip and the steps the threads took
// meanwhile (what the gate's pull must be sent ahead by), and the rebase.
static int pull_landed(replica_t *r, uint64_t min_clock) {
    downpour_t *d = r->mode;
    double rtt = replica_now_s() - d->pull_sent_s;
    d->pull_rtt_s = d->pull_rtt_s > 0.0 ? 0.75 * d->pull_rtt_s + 0.25 * rtt : rtt;
    uint64_t steps = replica_steps(r);
    staleness_hist_add(&d->steps_per_pull, steps - d->pulled_at_steps);
    d->pulled_at_steps = steps;
    d->last_rest_s = d->rest_s;
    d->rest_s = 0.0;
    return rebase(r, d->pull_need, min_clock, d->pull_span);
}

static int paced(const replica_t *r) { return r->rc->comm_share > 0.0; }

// Paced: the rest an operation that took `took_s` earns, after any still due.
static void pace_rest(replica_t *r, double took_s) {
    if (!paced(r)) return;
    downpour_t *d = r->mode;
    if (took_s > PACE_MAX_S) took_s = PACE_MAX_S;
    double rest = took_s * (1.0 / r->rc->comm_share - 1.0), now = replica_now_s();
    if (d->rest_until_s < now) d->rest_until_s = now;
    d->rest_until_s += rest;
    d->rest_s += rest;
}

// Whether a push or a pull may start now: unpaced, always; paced, once the rest is over.
static int pace_allows(const replica_t *r) {
    const downpour_t *d = r->mode;
    return !paced(r) || replica_now_s() >= d->rest_until_s;
}

// Waits for the pull in flight, if any, and rebases on it.
static int pull_wait(replica_t *r) {
    if (!ps_client_pull_pending(r->client)) return 0;
    uint64_t min_clock;
    if (ps_client_pull_finish(r->client, &min_clock, r->err, sizeof r->err) != 0) return -1;
    return pull_landed(r, min_clock);
}

// ---- the communication thread -----------------------------------------------------

// Rounds are complete when every thread still training has done its share; a
// thread that finished its epochs holds nobody back. *min_steps: the slowest
// such thread's steps (UINT64_MAX when none is training); *total: all steps.
static void threads_progress(const replica_t *r, uint64_t *min_steps, uint64_t *total) {
    *min_steps = UINT64_MAX;
    *total = 0;
    for (size_t t = 0; t < r->threads; t++) {
        uint64_t s = atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
        *total += s;
        if (atomic_load_explicit(&r->progress[t].finished, memory_order_acquire)) continue;
        if (s < *min_steps) *min_steps = s;
    }
}

// The slowest thread's steps per second since the communication thread
// started, from its min_steps now.
static double slowest_rate(const replica_t *r, uint64_t min_steps) {
    const downpour_t *d = r->mode;
    double elapsed = replica_now_s() - d->started_s;
    return elapsed > 0.0 ? (double)min_steps / elapsed : 0.0;
}

// How far ahead of the allowance the gate's pull goes out: the steps the
// slowest thread takes while a pull makes its round trip (twice what was
// measured, and at least a round), so that its answer is back when the
// threads get there unless the bound itself holds them.
static uint64_t gate_lead(const replica_t *r, uint64_t min_steps) {
    const downpour_t *d = r->mode;
    double lead = 2.0 * slowest_rate(r, min_steps) * d->pull_rtt_s;
    return lead > (double)r->quota ? (uint64_t)lead : r->quota;
}

// Paced: the steps a thread takes while the communication thread rests
// after an exchange as long as the last, which the next pull's window covers
// too, so that a key is not read staler than the pacing makes it. 0 unpaced.
static uint64_t rest_lead(const replica_t *r, uint64_t min_steps) {
    const downpour_t *d = r->mode;
    if (!paced(r)) return 0;
    return (uint64_t)(slowest_rate(r, min_steps) * d->last_rest_s);
}

// One pass: the push that is due; the pull in flight looked at (and the local
// copy rebased once it is answered); else the gate's pull when the threads
// near their allowance, or the periodic fetch; then the threads' allowance.
// No pull blocks: the threads train while one is in flight, and wait only
// where the allowance (the bound) holds them. Returns 1 if it did anything, 0
// if not, -1.
static int comm_pass(replica_t *r, uint64_t min_steps, uint64_t total, uint64_t *next_fetch) {
    downpour_t *d = r->mode;
    uint64_t quota = r->quota;
    int worked = 0, may_start = pace_allows(r);
    if (may_start && min_steps >= (r->clock + 1) * quota) {
        // One push covers every round the threads completed since the last
        // one: when they outrun this thread the clock still counts rounds,
        // and a fetch is not starved by a push that is always due.
        r->clock = min_steps / quota - 1;
        double started = replica_now_s();
        if (push_delta(r, 0) < 0) return -1;
        pace_rest(r, replica_now_s() - started);
        worked = 1;
    }
    if (ps_client_pull_pending(r->client)) {
        int done;
        uint64_t min_clock;
        if (ps_client_pull_poll(r->client, &done, &min_clock, r->err, sizeof r->err) != 0) return -1;
        if (done && pull_landed(r, min_clock) != 0) return -1;
        if (done) pace_rest(r, replica_now_s() - d->pull_sent_s);  // the round trip and the rebase
        worked |= done;
    }
    if (!ps_client_pull_pending(r->client)) {
        uint64_t allowed = atomic_load_explicit(&r->allowance, memory_order_relaxed);
        if (allowed != UINT64_MAX && min_steps + gate_lead(r, min_steps) >= allowed) {
            // The pull that lets round allowed / quota start, sent before the threads get there.
            if (pull_send(r, ssp_gate(allowed / quota, r->g_read, r->read_bound).pull_clock) != 0) return -1;
            worked = 1;
        } else if (may_start && total >= *next_fetch && gen_ring_has_room(r)) {
            if (pull_send(r, 0) != 0) return -1;
            while (*next_fetch <= total) *next_fetch += r->rc->fetch_every;
            worked = 1;
        }
    }
    // The slowest worker had pushed g_read rounds when the local copy was last rebased.
    if (r->read_bound != STALENESS_INFINITE) {
        uint64_t allowed = d->by_key.on ? d->keys_allowance : allowance_for(r->g_read, r->read_bound, quota);
        atomic_store_explicit(&r->allowance, allowed, memory_order_release);
    }
    return worked;
}

// Whether a pull in flight names more rounds than the `pushed` this worker
// pushed: one no shard answers while this worker is live.
static int pull_past_pushed(const replica_t *r, uint64_t pushed) {
    const downpour_t *d = r->mode;
    return ps_client_pull_pending(r->client) && d->pull_need > pushed;
}

// The pull in flight once training has ended and this worker's last push
// (`pushed`: the rounds the shards count for it) is sent, settled before the
// client takes another request. One naming at most `pushed` rounds is
// waited for: it may wait for that very push (this worker the slowest), and
// the others reach its clock or leave. One naming more never comes back
// while this worker is live, as it pushes no more: the gate's pull sent
// ahead for a round its threads did not reach (they ended on a round's
// boundary as the pull for that round came back). It is given up.
static int pull_settle(replica_t *r, uint64_t pushed) {
    if (pull_past_pushed(r, pushed)) {
        ps_client_pull_cancel(r->client);
        return 0;
    }
    return pull_wait(r);
}

// Test build only (tests/e2e/test_ssp_end.c): the end the gate's race makes
// now and then, every time: once the last push is sent, a pull in flight
// names the round after this worker's last (unless one naming more rounds
// than it pushed is in flight already).
static int pull_past_end(replica_t *r, uint64_t pushed) {
    if (pull_past_pushed(r, pushed)) return 0;
    if (pull_wait(r) != 0) return -1;
    return pull_send(r, pushed + 1);
}

// What was learned after the last push, as the last round any thread reached;
// the pull in flight settled; then every push acknowledged. Nothing is sent
// when no step came after the last push and the shards count every round the
// threads reached. A push's clock counts the rounds its threads had completed
// when comm_pass looked, and the delta it carries is read after: threads that
// cross a round's end in between put that round's steps into it under the
// earlier clock. When that push was the last, an empty push (no step, a zero
// delta) brings the shards' count of this worker to the rounds it trained.
static int push_last(replica_t *r) {
    // Test build only (tests/e2e/test_ssp_end.c): that race every time, the
    // steps not pushed yet pushed under the clock as it stands.
    if (test_hook_value(TEST_HOOK_PUSH_AFTER_END) && push_delta(r, 1) < 0) return -1;
    uint64_t last_steps = 0;
    for (size_t t = 0; t < r->threads; t++) {
        uint64_t s = atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
        if (s > last_steps) last_steps = s;
    }
    uint64_t pushed = r->clock;  // the rounds the shards count for this worker: its clock after its last push
    uint64_t last_round = last_steps ? (last_steps - 1) / r->quota : 0;
    if (last_round > r->clock) r->clock = last_round;
    int uncounted = last_steps > 0 && r->clock <= last_round;  // the shards count fewer rounds than it trained
    int sent = push_delta(r, !uncounted);
    if (sent < 0) return -1;
    if (sent) pushed = r->clock;
    if (test_hook_value(TEST_HOOK_PULL_PAST_END) && pull_past_end(r, pushed) != 0) return -1;
    if (pull_settle(r, pushed) != 0) return -1;
    uint64_t span = TRACE_BEGIN();
    int rc = ps_client_wait_acks(r->client, r->err, sizeof r->err);
    TRACE_END(&TK_ACKS, span, 0);
    return rc;
}

// Nothing to do: a short nap, or while a paced thread rests, the rest (at
// most a millisecond at a time, so that the end of training is seen soon).
static void nap_until_due(const replica_t *r) {
    const downpour_t *d = r->mode;
    long ns = 50000;
    if (paced(r)) {
        double rest = d->rest_until_s - replica_now_s();
        if (rest > 1e-3) rest = 1e-3;
        if (rest * 1e9 > (double)ns) ns = (long)(rest * 1e9);
    }
    struct timespec nap = {0, ns};
    nanosleep(&nap, NULL);
}

static void *comm_main(void *arg) {
    replica_t *r = arg;
    downpour_t *d = r->mode;
    uint64_t next_fetch = r->rc->fetch_every;
    double busy = 0.0;
    d->started_s = replica_now_s();
    d->pulled_at_steps = replica_steps(r);
    trace_thread_name("comm", -1);
    int rc = r->gpu ? gpu_model_bind_thread(r->gpu, r->err, sizeof r->err) : 0;
    while (rc == 0) {
        int done = atomic_load_explicit(&d->training_done, memory_order_acquire);
        uint64_t min_steps, total;
        threads_progress(r, &min_steps, &total);
        if (done || min_steps == UINT64_MAX) break;
        // A checkpoint (taken with the threads parked) sees no pass half done.
        pthread_mutex_lock(&r->ckpt_mu);
        if (atomic_load_explicit(&r->frozen, memory_order_acquire)) {  // test only (replica_checkpoint.c)
            pthread_mutex_unlock(&r->ckpt_mu);
            struct timespec nap = {0, 1000000};
            nanosleep(&nap, NULL);
            continue;
        }
        windows_observe(r);
        double t0 = replica_now_s();
        int worked = comm_pass(r, min_steps, total, &next_fetch);
        pthread_mutex_unlock(&r->ckpt_mu);
        if (worked < 0) {
            rc = -1;
        } else if (worked) {
            busy += replica_now_s() - t0;
        } else {
            nap_until_due(r);
        }
    }
    if (rc == 0) {
        pthread_mutex_lock(&r->ckpt_mu);
        rc = push_last(r);
        pthread_mutex_unlock(&r->ckpt_mu);
    }
    r->stats.comm_s = busy;
    if (r->gpu) gpu_model_unbind_thread();
    if (rc != 0) {
        atomic_store_explicit(&r->abort, 1, memory_order_relaxed);
        // Release threads held by the bound so that they see the abort.
        atomic_store_explicit(&r->allowance, UINT64_MAX, memory_order_release);
    }
    return NULL;
}

// ---- the strategy ---------------------------------------------------------------

static int downpour_check(replica_t *r, const optimizer_config_t *oc, char *err, size_t err_len) {
    if (oc->kind != OPTIMIZER_KIND_SGD || oc->momentum > 0.0 || oc->schedule != LR_SCHEDULE_CONSTANT) {
        snprintf(err, err_len,
                 "--sync %s: workers push their accumulated gradients, which needs plain SGD with a constant step "
                 "locally; choose the update rule on the servers with --server-optimizer",
                 sync_mode_name(r->rc->mode));
        return -1;
    }
    r->read_bound = sync_mode_bound(r->rc->mode, r->rc->staleness);
    return 0;
}

static int downpour_alloc(replica_t *r, char *err, size_t err_len) {
    downpour_t *d = r->mode = calloc(1, sizeof *d);
    if (!d) return replica_out_of_memory(r, err, err_len);
    atomic_init(&d->training_done, 0);
    atomic_init(&d->generation, 0);
    d->gen_versions = calloc(GEN_RING * r->rc->n_servers, sizeof *d->gen_versions);
    d->win = calloc(r->threads, sizeof *d->win);
    if (!d->gen_versions || !d->win) return replica_out_of_memory(r, err, err_len);
    staleness_hist_init(&d->steps_per_push);
    staleness_hist_init(&d->steps_per_pull);
    return 0;
}

static void downpour_free(replica_t *r) {
    downpour_t *d = r->mode;
    by_key_free(&d->by_key);
    free(d->push_keys);
    free(d->gen_versions);
    free(d->win);
    free(d);
    r->mode = NULL;
}

// Whether the model moves by key (a sparse block, on the CPU, its updates
// not compressed as a dense vector), and its working set if so; every key
// is as new as the join's pull.
static int by_key_begin(replica_t *r, const train_config_t *tc, char *err, size_t err_len) {
    downpour_t *d = r->mode;
    d->by_key.on = working_set_by_key(r->model, r->rc->mode, r->gpu != NULL, r->comp != NULL);
    if (!d->by_key.on) return 0;
    d->push_keys = malloc(r->n * sizeof *d->push_keys);
    d->by_key.pull_keys = malloc(r->n * sizeof *d->by_key.pull_keys);
    if (!d->push_keys || !d->by_key.pull_keys) return replica_out_of_memory(r, err, err_len);
    if (working_set_init(&d->by_key.ws, r->model, tc, r->progress, err, err_len) != 0) return -1;
    d->keys_allowance = allowance_for(r->g_read, r->read_bound, r->quota);
    return 0;
}

static int downpour_begin(replica_t *r, train_config_t *tc, const train_callbacks_t **cb, char *err, size_t err_len) {
    downpour_t *d = r->mode;
    (void)cb;
    ps_client_pulled_versions(r->client, d->gen_versions);  // generation 0: what joining pulled
    // A rejoining or resumed replica's threads start at the steps its position stands for.
    for (size_t t = 0; tc->start && t < r->threads; t++) atomic_store(&r->progress[t].steps, tc->start->updates[t]);
    // A resumed replica's pending update sums steps no push has claimed yet.
    uint64_t steps = replica_steps(r);
    d->steps_pushed = steps > d->resumed_unpushed ? steps - d->resumed_unpushed : 0;
    atomic_store(&r->allowance, allowance_for(r->g_read, r->read_bound, r->quota));
    if (by_key_begin(r, tc, err, err_len) != 0) return -1;
    // Each thread's first window starts at its first step; none has started.
    for (size_t t = 0; t < r->threads; t++) {
        d->win[t].first = atomic_load(&r->progress[t].steps);
        atomic_store(&r->progress[t].read_gen, (uint32_t)(d->win[t].first - 1));
    }
    r->link.generation = &d->generation;
    int prc = pthread_create(&d->comm, NULL, comm_main, r);
    if (prc != 0) {
        snprintf(err, err_len, "worker: starting the communication thread: %s", strerror(prc));
        return -1;
    }
    return 0;
}

static void downpour_end(replica_t *r) {
    downpour_t *d = r->mode;
    atomic_store_explicit(&d->training_done, 1, memory_order_release);
    pthread_join(d->comm, NULL);
}

// The periods the pushes and pulls achieved.
static void downpour_report(const replica_t *r, replica_stats_t *stats) {
    const downpour_t *d = r->mode;
    stats->steps_per_push_mean = staleness_hist_mean(&d->steps_per_push);
    stats->steps_per_pull_mean = staleness_hist_mean(&d->steps_per_pull);
    stats->steps_per_push_p99 = staleness_hist_quantile(&d->steps_per_push, 0.99);
    stats->steps_per_pull_p99 = staleness_hist_quantile(&d->steps_per_pull, 0.99);
    stats->pushes_hot_averaged = d->pushes_hot_averaged;
    stats->pushes_hot_sized = d->pushes_hot_sized;
}

static by_key_t *downpour_by_key(replica_t *r) {
    downpour_t *d = r->mode;
    return d->by_key.on ? &d->by_key : NULL;
}

// A checkpoint's pending update sums the steps no push has claimed yet.
static uint64_t downpour_unpushed_steps(const replica_t *r, uint64_t steps) {
    const downpour_t *d = r->mode;
    return steps > d->steps_pushed ? steps - d->steps_pushed : 0;
}

static void downpour_resume_unpushed(replica_t *r, uint64_t steps) {
    downpour_t *d = r->mode;
    d->resumed_unpushed = steps;  // the first push claims them (downpour_begin)
}

const sync_strategy_t sync_strategy_downpour = {
    .family = "downpour",
    .train_mode = TRAIN_MODE_HOGWILD,
    .servers = 1,
    .gpu = 1,
    .constant_local_step = 1,
    .check = downpour_check,
    .alloc = downpour_alloc,
    .free = downpour_free,
    .begin = downpour_begin,
    .end = downpour_end,
    .report = downpour_report,
    .by_key = downpour_by_key,
    .unpushed_steps = downpour_unpushed_steps,
    .resume_unpushed = downpour_resume_unpushed,
    .global = replica_evaluate_global,
    .final_from_servers = 1,
};
