// A worker replica of a distributed run (replica.h).
#include "engine/dist/replica.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/partition.h"  // defines: shard_range
#include "net/compress.h"   // defines: compressor_new, compress_encode, compress_decode_add, ef_residual_t
#include "net/ps_client.h"  // defines: ps_client_new, ps_client_push_*, ps_client_pull
#include "net/ps_heartbeat.h"  // defines: ps_heartbeat_start, ps_heartbeat_stop
#include "net/ring.h"       // defines: ring_allreduce_sum
#include "net/wire.h"       // defines: wire_checksum

#define ERR_LEN 512
#define PUSH_BLOCK 2048  // floats: 8 KiB, well inside L1
#define GEN_RING 64      // rebases whose shard versions a push may still carry

// asp/ssp: the steps one thread's next push will carry, from `first`, the
// first step not complete at the last cut, and the rebase generation that
// step read: exact once seen (known), until then the generation current when
// it was last seen not started (it reads that one or a later one).
typedef struct step_window {
    uint64_t first, gen;
    int known;
} step_window_t;

// Local SGD: evaluations of the averaged model, by a thread beside training.
typedef struct avg_eval {
    pthread_t thread;
    int inited, started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;            // a snapshot is waiting or being evaluated
    int stop;
    param_t *snap;       // (n) the averaged model to evaluate
    model_ws_t *ws;
    train_point_t point; // its point; test fields filled by the thread
    size_t limit;        // test examples per evaluation
    uint64_t every, next;       // this replica's examples between points, and the next point
    double every_s, next_s;     // > 0: points by training time too
    double t0;           // when training started (the trainer's first evaluation ended)
    const train_callbacks_t *user;  // forwarded to, one call at a time
} avg_eval_t;

typedef struct replica {
    const replica_config_t *rc;
    const model_t *model;
    size_t n, threads;
    int sparse;
    ps_client_t *client;
    ps_heartbeat_t *heartbeat;
    param_t *w;
    gpu_model_t *gpu;  // --device cuda: the local copy lives here, not in w, while training
    float *base;      // (n) asp/ssp: the local copy as of the last push or rebase
    float *pulled;    // (n) the last pulled model
    uint32_t *idx;    // (n) sparse push scratch
    float *val;       // (n)
    float *ring_buf;  // (n + 1) allreduce: gradient times examples, then the example count
    float lr;         // the local step size, to turn a change of the model into a gradient
    size_t ps_n;      // parameters the servers hold: n, or under hybrid the sparse part [0, ps_n)
    uint32_t *keys;   // (ps_n) hybrid: the sparse rows a round reads
    uint8_t *mark;    // (ps_n) hybrid: scratch for model_sparse_keys
    uint64_t sparse_bound;  // hybrid: the staleness bound on sparse reads (asp: infinite)
    // Compressed exchanges (rc->compress not none); all sized once.
    compressor_t *comp;
    ef_residual_t resid;   // error feedback over the whole vector sent (n), or empty
    size_t *enc_bytes;     // (n_servers) encoded push frame sizes
    uint8_t *blobs;        // allreduce allgather: (n_workers, blob_cap) encodings
    size_t blob_cap;
    size_t *blob_lens;     // (n_workers)
    uint32_t *blob_weights;  // (n_workers) examples behind each
    uint64_t raw_out;      // bytes the compressed exchanges would have sent as float32
    train_thread_progress_t *progress;
    train_link_t link;
    _Atomic uint64_t allowance;
    _Atomic int abort;
    _Atomic int training_done;
    uint64_t clock;   // push rounds done
    uint64_t g_read;  // min worker clock when the local copy was last rebased
    uint64_t steps_pushed;  // replica steps covered by the pushes so far
    uint64_t gate_bound;    // asp/ssp: the bound the threads are held to (infinite under asp)
    // asp/ssp: which parameters the steps a push sums had read. The
    // communication thread raises `generation` at every rebase; each step
    // records the value it read (train_link_t.generation).
    _Atomic uint64_t generation;
    uint64_t *gen_versions;  // (GEN_RING, n_servers) shard versions rebase g installed, at g % GEN_RING
    step_window_t *win;      // (threads)
    // Local SGD.
    optimizer_t *opt;         // the replica's optimizer (applies the averaging round's own step)
    uint64_t last_round;      // rounds the run has: the last one is always followed by an average
    uint64_t since_avg;       // examples this replica took since the last average
    uint64_t samples;         // examples this replica took
    avg_eval_t ae;
    replica_stats_t stats;
    char err[ERR_LEN];
} replica_t;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// ---- asp / ssp: the communication thread ----------------------------------------

// Pushes what the replica learned since its last push: (base - w) / lr per
// coordinate, the sum of the gradients its SGD steps applied.
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

// Notes the first step of each window that has started since last seen.
static void windows_observe(replica_t *r) {
    uint64_t now = atomic_load_explicit(&r->generation, memory_order_relaxed);
    for (size_t t = 0; t < r->threads; t++) {
        step_window_t *w = &r->win[t];
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
    windows_observe(r);
    uint64_t now = atomic_load_explicit(&r->generation, memory_order_relaxed), oldest = UINT64_MAX;
    for (size_t t = 0; t < r->threads; t++) {
        step_window_t *w = &r->win[t];
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
    uint64_t now = atomic_load_explicit(&r->generation, memory_order_relaxed), oldest = now;
    for (size_t t = 0; t < r->threads; t++)
        if (r->win[t].gen < oldest) oldest = r->win[t].gen;
    return now + 1 - oldest < GEN_RING;
}

// The shard versions generation g read (the oldest kept, should g have left the ring).
static const uint64_t *gen_versions_of(const replica_t *r, uint64_t g) {
    uint64_t now = atomic_load_explicit(&r->generation, memory_order_relaxed);
    if (now - g >= GEN_RING) g = now - GEN_RING + 1;
    return r->gen_versions + (g % GEN_RING) * r->rc->n_servers;
}

// A dense update g (the whole model) pushed to every shard as its range's
// encoding, with error feedback when the run asks for it.
static int push_encoded(replica_t *r, const float *g, uint32_t aux, int bsp) {
    const compress_spec_t *spec = compressor_spec(r->comp);
    size_t S = r->rc->n_servers;
    for (size_t k = 0; k < S; k++) {
        size_t begin, end;
        shard_range(r->n, S, k, &begin, &end);
        r->enc_bytes[k] = compress_encoded_bytes(spec, end - begin);
    }
    uint8_t *const *frames = ps_client_push_encoded_frames(r->client, r->enc_bytes, r->err, sizeof r->err);
    if (!frames) return -1;
    for (size_t k = 0; k < S; k++) {
        size_t begin, end;
        shard_range(r->n, S, k, &begin, &end);
        float *residual = r->resid.e ? r->resid.e + begin : NULL;
        if (compress_encode(r->comp, g + begin, end - begin, residual, NULL, frames[k], r->enc_bytes[k], r->err,
                            sizeof r->err) != 0)
            return -1;
    }
    r->raw_out += 4u * r->n;
    return ps_client_push_commit(r->client, r->clock, aux, bsp, r->err, sizeof r->err);
}

static int push_delta(replica_t *r, int skip_if_empty) {
    // How many steps the push sums (read before the delta, so it never
    // overstates): the server's delay compensation scales by it.
    uint64_t steps_now = replica_steps(r);
    uint64_t steps = steps_now - r->steps_pushed;
    // It carries, per shard, the version of the oldest parameters its steps read.
    ps_client_carry_versions(r->client, gen_versions_of(r, windows_cut(r)));
    uint32_t steps_aux = steps > UINT32_MAX ? UINT32_MAX : (uint32_t)steps;
    float inv_lr = 1.0f / r->lr;
    const float *snap = NULL;  // the GPU's parameters, copied to the host
    if (r->gpu && !(snap = gpu_model_snapshot(r->gpu, r->err, sizeof r->err))) return -1;
    if (!r->sparse && r->comp) {
        int changed = 0;
        for (size_t j = 0; j < r->n; j++) {
            float cur = snap ? snap[j] : param_get(&r->w[j]);
            r->val[j] = (r->base[j] - cur) * inv_lr;
            changed |= cur != r->base[j];
            r->base[j] = cur;
        }
        if (skip_if_empty && !changed) return 0;
        if (push_encoded(r, r->val, steps_aux, 0) != 0) return -1;
    } else if (!r->sparse) {
        float *const *frames = ps_client_push_frames(r->client, r->err, sizeof r->err);
        if (!frames) return -1;
        int changed = 0;
        for (size_t k = 0; k < r->rc->n_servers; k++) {
            size_t begin, end;
            shard_range(r->n, r->rc->n_servers, k, &begin, &end);
            float *frame = frames[k];
            // In blocks that stay in cache until the client has checksummed them.
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
        // The frames stay allocated for the next push when this one is skipped.
        if (skip_if_empty && !changed) return 0;
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
        if (skip_if_empty && nnz == 0) return 0;
        if (ps_client_push_sparse(r->client, r->idx, r->val, nnz, r->clock, steps_aux, 0, r->err, sizeof r->err) != 0)
            return -1;
    }
    r->clock++;
    r->stats.pushes++;
    r->steps_pushed = steps_now;
    return 0;
}

// Pulls the global model (answered once every live worker has pushed `need`
// rounds) and rebases the local copy on it, keeping local changes not yet pushed.
static int pull_and_rebase(replica_t *r, uint64_t need) {
    uint64_t min_clock = 0;
    if (ps_client_pull(r->client, need, r->pulled, &min_clock, r->err, sizeof r->err) != 0) return -1;
    if (r->gpu) {
        // The same rebase as a delta for the device: w + (pulled - base).
        float *delta = gpu_model_delta_buffer(r->gpu);
        for (size_t j = 0; j < r->n; j++) {
            delta[j] = r->pulled[j] - r->base[j];
            r->base[j] = r->pulled[j];
        }
        if (gpu_model_add_delta(r->gpu, r->err, sizeof r->err) != 0) return -1;
    } else {
        for (size_t j = 0; j < r->n; j++) {
            float cur = param_get(&r->w[j]);
            param_set(&r->w[j], r->pulled[j] + (cur - r->base[j]));
            r->base[j] = r->pulled[j];
        }
    }
    r->g_read = min_clock;
    r->stats.pulls++;
    // A new generation: steps that start from now on read at least these parameters.
    uint64_t g = atomic_load_explicit(&r->generation, memory_order_relaxed) + 1;
    ps_client_pulled_versions(r->client, r->gen_versions + (g % GEN_RING) * r->rc->n_servers);
    atomic_store_explicit(&r->generation, g, memory_order_release);
    windows_observe(r);
    return 0;
}

static void *comm_main(void *arg) {
    replica_t *r = arg;
    const replica_config_t *rc = r->rc;
    uint64_t bound = r->gate_bound;
    uint64_t quota = (rc->push_every + r->threads - 1) / r->threads;  // per-thread steps per round
    if (quota == 0) quota = 1;
    uint64_t next_fetch = rc->fetch_every;
    double busy = 0.0;
    if (r->gpu && gpu_model_bind_thread(r->gpu, r->err, sizeof r->err) != 0) goto fail;
    for (;;) {
        int done = atomic_load_explicit(&r->training_done, memory_order_acquire);
        // Rounds are complete when every thread still training has done its
        // share; a thread that finished its epochs holds nobody back.
        uint64_t min_steps = UINT64_MAX, total = 0;
        for (size_t t = 0; t < r->threads; t++) {
            uint64_t s = atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
            total += s;
            if (atomic_load_explicit(&r->progress[t].finished, memory_order_acquire)) continue;
            if (s < min_steps) min_steps = s;
        }
        if (done || min_steps == UINT64_MAX) break;
        windows_observe(r);
        double t0 = now_s();
        int worked = 0;
        if (min_steps >= (r->clock + 1) * quota) {
            // One push covers every round the threads completed since the last
            // one: when they outrun this thread the clock still counts rounds,
            // and a fetch is not starved by a push that is always due.
            r->clock = min_steps / quota - 1;
            if (push_delta(r, 0) != 0) goto fail;
            worked = 1;
        }
        uint64_t allowed = atomic_load_explicit(&r->allowance, memory_order_relaxed);
        if (allowed != UINT64_MAX && min_steps >= allowed) {
            // The threads are held at the start of round allowed / quota: the pull that lets it start.
            if (pull_and_rebase(r, ssp_gate(allowed / quota, r->g_read, bound).pull_clock) != 0) goto fail;
            worked = 1;
        } else if (total >= next_fetch && gen_ring_has_room(r)) {
            if (pull_and_rebase(r, 0) != 0) goto fail;
            while (next_fetch <= total) next_fetch += rc->fetch_every;
            worked = 1;
        }
        // The slowest worker had pushed g_read rounds when the local copy was last rebased.
        if (bound != STALENESS_INFINITE)
            atomic_store_explicit(&r->allowance, allowance_for(r->g_read, bound, quota), memory_order_release);
        if (worked) {
            busy += now_s() - t0;
        } else {
            struct timespec nap = {0, 50000};
            nanosleep(&nap, NULL);
        }
    }
    // What was learned after the last push, as the last round any thread reached
    // (nothing is sent if no step came after the last push).
    uint64_t last_steps = 0;
    for (size_t t = 0; t < r->threads; t++) {
        uint64_t s = atomic_load_explicit(&r->progress[t].steps, memory_order_relaxed);
        if (s > last_steps) last_steps = s;
    }
    uint64_t last_round = last_steps ? (last_steps - 1) / quota : 0;
    if (last_round > r->clock) r->clock = last_round;
    if (push_delta(r, 1) != 0) goto fail;
    if (ps_client_wait_acks(r->client, r->err, sizeof r->err) != 0) goto fail;
    r->stats.comm_s = busy;
    if (r->gpu) gpu_model_unbind_thread();
    return NULL;
fail:
    r->stats.comm_s = busy;
    if (r->gpu) gpu_model_unbind_thread();
    atomic_store_explicit(&r->abort, 1, memory_order_relaxed);
    // Release threads held by the bound so that they see the abort.
    atomic_store_explicit(&r->allowance, UINT64_MAX, memory_order_release);
    return NULL;
}

// ---- bsp and allreduce: the trainer's per-round exchange ------------------------

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int exchange_bsp(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    replica_t *r = ctx;
    double t0 = now_s();
    if (sum->dense && r->comp) {
        if (push_encoded(r, sum->value, (uint32_t)examples, 1) != 0) return -1;
    } else if (sum->dense) {
        float *const *frames = ps_client_push_frames(r->client, r->err, sizeof r->err);
        if (!frames) return -1;
        size_t begin = 0, end = 0;
        for (size_t k = 0; k < r->rc->n_servers; k++) {
            shard_range(r->n, r->rc->n_servers, k, &begin, &end);
            memcpy(frames[k], sum->value + begin, (end - begin) * sizeof(float));
        }
        if (ps_client_push_commit(r->client, r->clock, (uint32_t)examples, 1, r->err, sizeof r->err) != 0) return -1;
    } else {
        memcpy(r->idx, sum->touched, sum->n_touched * sizeof *r->idx);
        qsort(r->idx, sum->n_touched, sizeof *r->idx, cmp_u32);
        for (size_t k = 0; k < sum->n_touched; k++) r->val[k] = sum->value[r->idx[k]];
        if (ps_client_push_sparse(r->client, r->idx, r->val, sum->n_touched, r->clock, (uint32_t)examples, 1, r->err,
                                  sizeof r->err) != 0)
            return -1;
    }
    r->clock++;
    r->stats.pushes++;
    uint64_t min_clock;
    double wait_from = now_s();
    if (ps_client_pull(r->client, ssp_gate(r->clock, 0, 0).pull_clock, r->pulled, &min_clock, r->err, sizeof r->err) != 0)
        return -1;
    r->stats.wait_s += now_s() - wait_from;  // the round ends when the slowest worker's gradient is in
    r->stats.pulls++;
    for (size_t j = 0; j < r->n; j++) param_set(&w[j], r->pulled[j]);
    *applied = 1;
    r->stats.comm_s += now_s() - t0;
    return 0;
}

// Sums buf[0..m) (this replica's gradient times its examples) over the
// workers by ring allreduce, compressed as the run asks; the examples travel
// with it (buf[m] holds this replica's on entry). On return buf[0..m) is the
// sum and *total the examples behind it, the same bits on every replica.
static int ring_sum_weighted(replica_t *r, float *buf, size_t m, size_t examples, float *total) {
    buf[m] = (float)examples;
    if (!r->comp) {
        if (ring_allreduce_sum(r->rc->ring, buf, m + 1, r->rc->timeout_ms, r->err, sizeof r->err) != 0) return -1;
        *total = buf[m];
    } else if (compressor_spec(r->comp)->kind == COMPRESS_KIND_FP16) {
        // fp16 partial sums on the wire, added in float32; the count stays exact.
        if (ring_allreduce_sum_fp16(r->rc->ring, buf, m + 1, m, r->rc->timeout_ms, r->err, sizeof r->err) != 0)
            return -1;
        *total = buf[m];
        r->raw_out += ring_allreduce_bytes_sent(r->rc->ring, m + 1);
    } else {
        // Encodings that cannot be added on the way: every worker's goes round
        // (an allgather), and every replica adds them up in rank order, so all
        // apply the same bits.
        size_t me = r->rc->id;
        r->blob_lens[me] = compress_encoded_bytes(compressor_spec(r->comp), m);
        r->blob_weights[me] = (uint32_t)examples;
        if (compress_encode(r->comp, buf, m, r->resid.e, NULL, r->blobs + me * r->blob_cap, r->blob_cap, r->err,
                            sizeof r->err) != 0 ||
            ring_allgather_encoded(r->rc->ring, r->blobs, r->blob_cap, r->blob_lens, r->blob_weights, m,
                                   r->rc->timeout_ms, r->err, sizeof r->err) != 0)
            return -1;
        memset(buf, 0, m * sizeof *buf);
        uint64_t examples_all = 0;
        for (size_t k = 0; k < r->rc->n_workers; k++) {
            if (compress_decode_add(r->blobs + k * r->blob_cap, r->blob_lens[k], m, buf, r->err, sizeof r->err) != 0)
                return -1;
            examples_all += r->blob_weights[k];
        }
        *total = (float)examples_all;
        r->raw_out += ring_allreduce_bytes_sent(r->rc->ring, m + 1);
    }
    return 0;
}

static int exchange_allreduce(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    (void)w;
    replica_t *r = ctx;
    double t0 = now_s();
    float *buf = r->ring_buf;
    float ex = (float)examples;
    if (sum->dense) {
        for (size_t j = 0; j < r->n; j++) buf[j] = sum->value[j] * ex;
    } else {
        memset(buf, 0, r->n * sizeof *buf);
        for (size_t k = 0; k < sum->n_touched; k++) buf[sum->touched[k]] = sum->value[sum->touched[k]] * ex;
    }
    float total;
    if (ring_sum_weighted(r, buf, r->n, examples, &total) != 0) return -1;
    r->clock++;
    r->stats.pushes++;
    if (total <= 0.0f) {
        if (!sum->dense) grad_clear(sum);
        *applied = 1;  // no example anywhere this round: nothing to apply
    } else if (sum->dense) {
        for (size_t j = 0; j < r->n; j++) sum->value[j] = buf[j] / total;
    } else {
        grad_clear(sum);
        for (size_t j = 0; j < r->n; j++)
            if (buf[j] != 0.0f) grad_add(sum, (uint32_t)j, buf[j] / total);
    }
    r->stats.comm_s += now_s() - t0;
    return 0;
}

// ---- local SGD: models averaged every H steps ------------------------------------

static void *avg_eval_main(void *arg) {
    replica_t *r = arg;
    avg_eval_t *e = &r->ae;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->busy && !e->stop) pthread_cond_wait(&e->cv, &e->mu);
        if (!e->busy) break;
        pthread_mutex_unlock(&e->mu);
        eval_sums_t sums = {0.0, 0.0, 0};
        model_evaluate(r->model, e->snap, 0, e->limit, e->ws, &sums);
        e->point.test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
        e->point.test_metric = eval_metric_value(model_metric(r->model), &sums);
        pthread_mutex_lock(&e->mu);
        if (e->user && e->user->on_eval) e->user->on_eval(&e->point, e->user->ctx);
        e->busy = 0;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

// The trainer's callbacks, forwarded one at a time (the evaluator thread
// reports too); its own evaluations (the first and the last) wait for the
// evaluator to finish, so rows stay in order.
static void avg_eval_on_eval(const train_point_t *p, void *ctx) {
    replica_t *r = ctx;
    avg_eval_t *e = &r->ae;
    pthread_mutex_lock(&e->mu);
    while (e->busy) pthread_cond_wait(&e->cv, &e->mu);
    if (e->user && e->user->on_eval) e->user->on_eval(p, e->user->ctx);
    pthread_mutex_unlock(&e->mu);
    if (e->t0 == 0.0) e->t0 = now_s();  // the first evaluation is done: training starts
}

static void avg_eval_on_progress(const train_point_t *p, double eta_s, void *ctx) {
    replica_t *r = ctx;
    avg_eval_t *e = &r->ae;
    pthread_mutex_lock(&e->mu);
    if (e->user && e->user->on_progress) e->user->on_progress(p, eta_s, e->user->ctx);
    pthread_mutex_unlock(&e->mu);
}

// Right after an average (thread 0, the other threads at the round's barrier):
// hands the averaged model to the evaluator when a point is due and it is free.
static void avg_eval_offer(replica_t *r, const param_t *w, float lr) {
    avg_eval_t *e = &r->ae;
    if (!e->started || r->clock == r->last_round) return;  // the trainer's last evaluation is of this average
    double now = now_s(), wall = now - e->t0;
    int due = r->samples >= e->next || (e->every_s > 0 && wall >= e->next_s);
    if (!due) return;
    pthread_mutex_lock(&e->mu);
    if (!e->busy) {
        for (size_t j = 0; j < r->n; j++) param_set(&e->snap[j], param_get(&w[j]));
        train_point_t *p = &e->point;
        p->wall_s = wall;
        p->samples = r->samples;
        p->updates = r->clock;
        p->epoch = (double)r->samples * (double)r->rc->n_workers / (double)model_num_train(r->model);
        p->samples_per_s = wall > 0 ? (double)r->samples / wall : 0.0;
        p->lr = lr;
        p->train_loss = NAN;  // the threads' losses are the trainer's
        p->test_loss = p->test_metric = NAN;
        e->busy = 1;
        while (e->next <= r->samples) e->next = (r->samples / e->every + 1) * e->every;
        while (e->every_s > 0 && e->next_s <= wall) e->next_s += e->every_s;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

// Takes over the trainer's evaluation points (tc: the trainer's config, which
// keeps only its first and last) and starts the evaluator. Returns 0, or -1.
static int avg_eval_start(replica_t *r, train_config_t *tc, const train_callbacks_t *user, train_callbacks_t *wrapped,
                          char *err, size_t err_len) {
    avg_eval_t *e = &r->ae;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->inited = 1;
    size_t every = tc->eval_every ? tc->eval_every : model_num_train(r->model) / r->rc->n_workers;
    e->every = every ? every : 1;
    e->next = e->every;
    e->every_s = tc->eval_every_s;
    e->next_s = e->every_s;
    e->user = user;
    size_t limit = model_num_test(r->model);
    if (tc->eval_limit && tc->eval_limit < limit) limit = tc->eval_limit;
    e->limit = limit;
    tc->eval_every = (size_t)1 << 62;  // the trainer evaluates at its start and end only
    tc->eval_every_s = 0;
    *wrapped = (train_callbacks_t){avg_eval_on_eval, avg_eval_on_progress, r};
    if (e->every >= ((uint64_t)1 << 62) && e->every_s <= 0) return 0;  // no point in between
    e->snap = params_new(r->n, err, err_len);
    if (!e->snap || !(e->ws = model_ws_new(r->model, 1, err, err_len))) return -1;
    int prc = pthread_create(&e->thread, NULL, avg_eval_main, r);
    if (prc != 0) {
        snprintf(err, err_len, "worker: starting the evaluator thread: %s", strerror(prc));
        return -1;
    }
    e->started = 1;
    return 0;
}

static void avg_eval_stop(replica_t *r) {
    avg_eval_t *e = &r->ae;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        e->started = 0;
    }
    model_ws_destroy(&e->ws);
    params_free(&e->snap);
    if (e->inited) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        e->inited = 0;
    }
}

// A round of local SGD. Between averages the trainer applies this replica's
// own averaged gradient (its step alone). Every local_steps rounds, and after
// the run's last, the replica applies its step here and the replicas average
// their models: each sends its parameters times the examples it took since the
// last average, the ring sums them with those counts, and every replica
// divides, so all hold the same bits.
static int exchange_local(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    replica_t *r = ctx;
    r->clock++;
    r->since_avg += examples;
    r->samples += examples;
    if (r->clock % r->rc->local_steps != 0 && r->clock != r->last_round) return 0;
    double t0 = now_s();
    if (sum->dense) optimizer_apply_range(r->opt, w, sum->value, 0, r->n, lr);
    else optimizer_apply_and_clear(r->opt, w, sum, lr);
    *applied = 1;
    float *buf = r->ring_buf, ex = (float)r->since_avg, total;
    for (size_t j = 0; j < r->n; j++) buf[j] = param_get(&w[j]) * ex;
    if (ring_sum_weighted(r, buf, r->n, r->since_avg, &total) != 0) return -1;
    if (total > 0.0f)
        for (size_t j = 0; j < r->n; j++) param_set(&w[j], buf[j] / total);
    r->since_avg = 0;
    r->stats.pushes++;  // averages
    r->stats.comm_s += now_s() - t0;
    avg_eval_offer(r, w, lr);
    return 0;
}

// ---- hybrid: sparse rows through the servers, the dense part by allreduce ------------

// Before a round: the embedding rows its examples read, pulled from the
// servers (under SSP once every worker has pushed the rounds the bound asks).
static int prepare_hybrid(void *ctx, const uint32_t *examples, size_t count, param_t *w) {
    replica_t *r = ctx;
    double t0 = now_s();
    size_t nk = model_sparse_keys(r->model, examples, count, r->mark, r->keys);
    qsort(r->keys, nk, sizeof *r->keys, cmp_u32);
    uint64_t need = ssp_gate(r->clock, 0, r->sparse_bound).pull_clock;
    if (ps_client_pull_keys_at(r->client, need, r->keys, nk, r->pulled, r->err, sizeof r->err) != 0) return -1;
    for (size_t k = 0; k < nk; k++) param_set(&w[r->keys[k]], r->pulled[k]);
    r->stats.pulls++;
    double dt = now_s() - t0;
    if (need > 0) r->stats.wait_s += dt;
    r->stats.comm_s += dt;
    return 0;
}

// After a round: the dense part's gradient is summed by allreduce (every
// replica then applies the same average with its own optimizer), and this
// replica's share of the sparse part's average, (its examples / all) times its
// gradient, is pushed to the servers, which apply it with their rule.
static int exchange_hybrid(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    (void)w;
    (void)applied;
    replica_t *r = ctx;
    double t0 = now_s();
    size_t S = r->ps_n, D = r->n - S;
    float *buf = r->ring_buf, ex = (float)examples, total;
    for (size_t j = 0; j < D; j++) buf[j] = sum->value[S + j] * ex;  // zero where untouched
    if (ring_sum_weighted(r, buf, D, examples, &total) != 0) return -1;
    size_t nnz = 0;
    for (size_t k = 0; k < sum->n_touched; k++)
        if (sum->touched[k] < S) r->idx[nnz++] = sum->touched[k];
    qsort(r->idx, nnz, sizeof *r->idx, cmp_u32);
    float share = total > 0.0f ? ex / total : 0.0f;
    for (size_t k = 0; k < nnz; k++) r->val[k] = sum->value[r->idx[k]] * share;
    if (ps_client_push_sparse(r->client, r->idx, r->val, nnz, r->clock, (uint32_t)examples, 0, r->err,
                              sizeof r->err) != 0)
        return -1;
    // What the trainer applies: the dense part's global average only.
    grad_clear(sum);
    if (total > 0.0f)
        for (size_t j = 0; j < D; j++)
            if (buf[j] != 0.0f) grad_add(sum, (uint32_t)(S + j), buf[j] / total);
    r->clock++;
    r->stats.pushes++;
    r->stats.comm_s += now_s() - t0;
    return 0;
}

// Before an evaluation: every sparse row as the servers hold it now.
static int refresh_hybrid(void *ctx, param_t *w) {
    replica_t *r = ctx;
    uint64_t min_clock;
    if (ps_client_pull(r->client, 0, r->pulled, &min_clock, r->err, sizeof r->err) != 0) return -1;
    for (size_t j = 0; j < r->ps_n; j++) param_set(&w[j], r->pulled[j]);
    r->stats.pulls++;
    return 0;
}

// ---- the replica ---------------------------------------------------------------

// Pulls the global model and evaluates it (on one thread: this happens once).
static int evaluate_global(replica_t *r, size_t eval_limit, replica_stats_t *stats, char *err, size_t err_len) {
    uint64_t min_clock;
    if (ps_client_pull(r->client, 0, r->pulled, &min_clock, err, err_len) != 0) return -1;
    param_t *global = params_new(r->n, err, err_len);
    model_ws_t *ws = global ? model_ws_new(r->model, 1, err, err_len) : NULL;
    if (!ws) {
        params_free(&global);
        return -1;
    }
    for (size_t j = 0; j < r->n; j++) param_set(&global[j], r->pulled[j]);
    size_t limit = model_num_test(r->model);
    if (eval_limit && eval_limit < limit) limit = eval_limit;
    eval_sums_t sums = {0.0, 0.0, 0};
    model_evaluate(r->model, global, 0, limit, ws, &sums);
    stats->global_test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
    stats->global_test_metric = eval_metric_value(model_metric(r->model), &sums);
    // Of several workers' final pulls, the one that saw the most shard
    // versions (they only grow) came last.
    uint64_t *versions = calloc(r->rc->n_servers, sizeof *versions);
    if (!versions) {
        snprintf(err, err_len, "worker: out of memory");
        model_ws_destroy(&ws);
        params_free(&global);
        return -1;
    }
    ps_client_pulled_versions(r->client, versions);
    stats->global_versions = 0;
    for (size_t k = 0; k < r->rc->n_servers; k++) stats->global_versions += versions[k];
    free(versions);
    model_ws_destroy(&ws);
    params_free(&global);
    return 0;
}

static void replica_free(replica_t *r) {
    gpu_model_destroy(&r->gpu);
    ps_heartbeat_stop(&r->heartbeat);
    ps_client_destroy(&r->client);
    params_free(&r->w);
    free(r->base);
    free(r->pulled);
    free(r->idx);
    free(r->val);
    free(r->ring_buf);
    free(r->progress);
    free(r->gen_versions);
    free(r->win);
    compressor_destroy(&r->comp);
    ef_residual_free(&r->resid);
    free(r->enc_bytes);
    free(r->blobs);
    free(r->blob_lens);
    free(r->blob_weights);
    free(r->keys);
    free(r->mark);
}

// The compressor and buffers a compressed run needs, sized once.
static int compression_setup(replica_t *r, int server_mode, char *err, size_t err_len) {
    const replica_config_t *rc = r->rc;
    if (rc->compress.kind == COMPRESS_KIND_NONE) return 0;
    int hybrid = rc->mode == SYNC_MODE_HYBRID;
    if (server_mode && r->sparse && !hybrid) {
        snprintf(err, err_len,
                 "--compress %s: this model's pushes are already (index, value) pairs of the touched parameters; "
                 "compression applies to dense models (mlp, softmax) and to allreduce",
                 compress_kind_name(rc->compress.kind));
        return -1;
    }
    size_t max_n = r->n;
    if (server_mode && !hybrid) {
        size_t begin, end;
        shard_range(r->n, rc->n_servers, 0, &begin, &end);  // shard 0 is the longest
        max_n = end - begin;
        r->enc_bytes = calloc(rc->n_servers, sizeof *r->enc_bytes);
        if (!r->enc_bytes) goto oom;
    } else if (rc->compress.kind != COMPRESS_KIND_FP16) {
        r->blob_cap = compress_encoded_bytes(&rc->compress, r->n);
        r->blobs = malloc(rc->n_workers * r->blob_cap);
        r->blob_lens = calloc(rc->n_workers, sizeof *r->blob_lens);
        r->blob_weights = calloc(rc->n_workers, sizeof *r->blob_weights);
        if (!r->blobs || !r->blob_lens || !r->blob_weights) goto oom;
    }
    r->comp = compressor_new(&rc->compress, max_n, rc->compress_seed, 0x434f4d50u + rc->id, err, err_len);
    if (!r->comp) return -1;
    if (rc->error_feedback && ef_residual_init(&r->resid, r->n, err, err_len) != 0) return -1;
    return 0;
oom:
    snprintf(err, err_len, "worker: out of memory for compression buffers");
    return -1;
}

int replica_train(void *zmq_ctx, const replica_config_t *rc, const model_t *m, const optimizer_config_t *oc,
                  const train_config_t *tc_in, uint64_t init_seed, const train_callbacks_t *cb, train_result_t *out,
                  replica_stats_t *stats, float *final_w, char *err, size_t err_len) {
    replica_t r;
    memset(&r, 0, sizeof r);
    r.rc = rc;
    r.model = m;
    r.n = model_num_params(m);
    r.threads = tc_in->threads;
    r.sparse = !model_grad_is_dense(m);
    r.lr = (float)oc->lr;
    memset(stats, 0, sizeof *stats);
    train_config_t tc = *tc_in;
    int local = rc->mode == SYNC_MODE_LOCAL;
    int server_mode = rc->mode != SYNC_MODE_ALLREDUCE && !local;
    int async = rc->mode == SYNC_MODE_ASP || rc->mode == SYNC_MODE_SSP;
    int hybrid = rc->mode == SYNC_MODE_HYBRID;
    r.ps_n = hybrid ? model_num_sparse_params(m) : r.n;
    r.sparse_bound = rc->hybrid_ssp ? rc->staleness : STALENESS_INFINITE;
    r.gate_bound = sync_mode_bound(rc->mode, rc->staleness);
    // Test only (tests/test_ssp_bound.c): ASGD_TEST_SSP_GATE_OFF=1 lets the
    // threads run as under asp while the run stays ssp, so that a test can
    // show the bound it checks is one the gate enforces.
    const char *gate_off = getenv("ASGD_TEST_SSP_GATE_OFF");
    if (gate_off && strcmp(gate_off, "1") == 0) r.gate_bound = r.sparse_bound = STALENESS_INFINITE;
    if (hybrid && (r.ps_n == 0 || r.ps_n >= r.n)) {
        char desc[160];
        model_describe(m, desc, sizeof desc);
        snprintf(err, err_len, "--sync hybrid needs a model with a sparse and a dense part (--model embmlp), not %s",
                 desc);
        return -1;
    }
    tc.mode = async ? TRAIN_MODE_HOGWILD : TRAIN_MODE_SYNC;
    if (async && (oc->kind != OPTIMIZER_KIND_SGD || oc->momentum > 0.0 || oc->schedule != LR_SCHEDULE_CONSTANT)) {
        snprintf(err, err_len,
                 "--sync %s: workers push their accumulated gradients, which needs plain SGD with a constant step "
                 "locally; choose the update rule on the servers with --server-optimizer",
                 sync_mode_name(rc->mode));
        return -1;
    }
    if (local && (rc->local_steps == 0 || oc->kind != OPTIMIZER_KIND_SGD || oc->momentum > 0.0)) {
        snprintf(err, err_len, "--sync local: needs --local-steps H >= 1 and plain SGD (no momentum) on the workers");
        return -1;
    }
    if (rc->gpu && !async) {
        snprintf(err, err_len, "--device cuda: GPU replicas run --sync asp and ssp (Downpour); bsp and allreduce "
                               "replicas run on the CPU");
        return -1;
    }
    optimizer_t *opt = NULL;
    int rc_status = -1;
    train_position_t start = {0, NULL, NULL, NULL, 0.0};
    pthread_t comm;
    int comm_started = 0;
    r.w = params_new(r.n, err, err_len);
    r.base = malloc(r.n * sizeof *r.base);
    r.pulled = malloc(r.n * sizeof *r.pulled);
    r.idx = malloc(r.n * sizeof *r.idx);
    r.val = malloc(r.n * sizeof *r.val);
    r.progress = aligned_alloc(64, ((r.threads * sizeof *r.progress + 63) / 64) * 64);
    if (!rc->ring && (!server_mode || hybrid)) {
        snprintf(err, err_len, "--sync %s needs a ring of workers", sync_mode_name(rc->mode));
        goto out;
    }
    if (!server_mode || hybrid) r.ring_buf = malloc((r.n + 1) * sizeof *r.ring_buf);
    if (hybrid) {
        r.keys = malloc(r.ps_n * sizeof *r.keys);
        r.mark = calloc(r.ps_n, 1);
    }
    if (async) {
        r.gen_versions = calloc(GEN_RING * rc->n_servers, sizeof *r.gen_versions);
        r.win = calloc(r.threads, sizeof *r.win);
    }
    if (!r.w || !r.base || !r.pulled || !r.idx || !r.val || !r.progress || ((!server_mode || hybrid) && !r.ring_buf) ||
        (hybrid && (!r.keys || !r.mark)) || (async && (!r.gen_versions || !r.win))) {
        if (r.w) snprintf(err, err_len, "worker: out of memory for a replica of %zu parameters", r.n);
        goto out;
    }
    for (size_t t = 0; t < r.threads; t++) {
        atomic_init(&r.progress[t].steps, 0);
        atomic_init(&r.progress[t].wait_ns, 0);
        atomic_init(&r.progress[t].finished, 0);
        atomic_init(&r.progress[t].read_gen, 0);
    }
    atomic_init(&r.abort, 0);
    atomic_init(&r.training_done, 0);
    atomic_init(&r.generation, 0);
    uint64_t quota = (rc->push_every + r.threads - 1) / r.threads;
    if (quota == 0) quota = 1;
    atomic_init(&r.allowance, async ? allowance_for(0, r.gate_bound, quota) : UINT64_MAX);

    if (server_mode) {
        r.client = ps_client_new(zmq_ctx, rc->run_id, (uint32_t)rc->id, rc->servers, rc->n_servers, r.ps_n,
                                 rc->heartbeat_ms, rc->timeout_ms, err, err_len);
        if (!r.client) goto out;
        ps_client_count_pushes(r.client, rc->push_counts);
        if (rc->retry_ms > 0) ps_client_set_retry_ms(r.client, rc->retry_ms);
        if (rc->heartbeat_ms > 0) {
            r.heartbeat = ps_heartbeat_start(zmq_ctx, rc->run_id, (uint32_t)rc->id, rc->servers, rc->n_servers,
                                             rc->heartbeat_ms, err, err_len);
            if (!r.heartbeat) goto out;
        }
        uint64_t min_clock;
        if (ps_client_pull(r.client, 0, r.pulled, &min_clock, err, err_len) != 0) goto out;
        // Hybrid: the dense part starts where every replica's does, from the seed.
        if (hybrid) model_init_params(m, r.w, init_seed);
        for (size_t j = 0; j < r.ps_n; j++) param_set(&r.w[j], r.pulled[j]);
        memcpy(r.base, r.pulled, r.ps_n * sizeof *r.base);
        r.g_read = min_clock;
        if (async) ps_client_pulled_versions(r.client, r.gen_versions);  // generation 0
        // A rejoining worker takes the clock the servers gave it, and its
        // threads start where that clock puts them in the data order.
        r.clock = ps_client_join_clock(r.client);
        stats->start_clock = r.clock;
        if (r.clock > 0) {
            start.threads = r.threads;
            start.samples = calloc(r.threads, sizeof *start.samples);
            start.updates = calloc(r.threads, sizeof *start.updates);
            start.loss_sum = calloc(r.threads, sizeof *start.loss_sum);
            if (!start.samples || !start.updates || !start.loss_sum) {
                snprintf(err, err_len, "worker: out of memory");
                goto out;
            }
            for (size_t t = 0; t < r.threads; t++) {
                start.updates[t] = async ? r.clock * quota : (t == 0 ? r.clock : 0);
                if (async) atomic_store(&r.progress[t].steps, start.updates[t]);
            }
            r.steps_pushed = replica_steps(&r);
            tc.start = &start;
        }
        if (async) atomic_store(&r.allowance, allowance_for(r.g_read, r.gate_bound, quota));
        // Each thread's first window starts at its first step; none has started.
        for (size_t t = 0; async && t < r.threads; t++) {
            r.win[t].first = atomic_load(&r.progress[t].steps);
            atomic_store(&r.progress[t].read_gen, (uint32_t)(r.win[t].first - 1));
        }
    } else {
        model_init_params(m, r.w, init_seed);
    }
    if (compression_setup(&r, server_mode, err, err_len) != 0) goto out;
    // Under asp/ssp the servers warm up their step (--warmup); a push is the
    // change of the local copy divided by a local step that must stay constant.
    optimizer_config_t local_oc = *oc;
    if (async) local_oc.warmup = 0;
    opt = optimizer_new(&local_oc, r.n, err, err_len);
    if (!opt) goto out;
    r.opt = opt;
    train_callbacks_t local_cb;
    if (local) {
        // Rounds of the run: every replica runs all of them (no time limit, no
        // early stop under local SGD), and the last is followed by an average.
        size_t n_train = model_num_train(m), round_size = rc->n_workers * r.threads * tc.batch;
        r.last_round = (uint64_t)tc.epochs * ((n_train + round_size - 1) / round_size);
        if (avg_eval_start(&r, &tc, cb, &local_cb, err, err_len) != 0) goto out;
        cb = &local_cb;
    }
    if (rc->gpu) {
        if (!(r.gpu = gpu_model_new(m, &local_oc, rc->gpu, tc.batch, err, err_len))) goto out;
        tc.device = &gpu_device_ops;
        tc.device_handle = r.gpu;
    }

    r.link.rank = rc->id;
    r.link.ranks = rc->n_workers;
    r.link.step_allowance = &r.allowance;
    r.link.progress = r.progress;
    r.link.generation = async ? &r.generation : NULL;
    r.link.abort = &r.abort;
    r.link.ctx = &r;
    r.link.exchange = rc->mode == SYNC_MODE_BSP ? exchange_bsp
                      : hybrid                  ? exchange_hybrid
                      : local                   ? exchange_local
                                                : exchange_allreduce;
    if (hybrid) {
        r.link.prepare = prepare_hybrid;
        r.link.refresh = refresh_hybrid;
    }
    r.link.step_delay = rc->delay;
    tc.link = &r.link;

    if (async) {
        int prc = pthread_create(&comm, NULL, comm_main, &r);
        if (prc != 0) {
            snprintf(err, err_len, "worker: starting the communication thread: %s", strerror(prc));
            goto out;
        }
        comm_started = 1;
    }
    int train_rc = train_run(m, opt, r.w, &tc, cb, out, err, err_len);
    if (comm_started) {
        atomic_store_explicit(&r.training_done, 1, memory_order_release);
        pthread_join(comm, NULL);
    }
    if (r.err[0] && atomic_load(&r.abort)) {
        snprintf(err, err_len, "%s", r.err);
        goto out;
    }
    if (train_rc != 0) goto out;
    stats->global_test_loss = stats->global_test_metric = NAN;
    if (server_mode) {
        if (ps_client_wait_acks(r.client, err, err_len) != 0) goto out;
        if (hybrid) {
            // The last evaluation read every sparse row from the servers, and
            // the dense part is every replica's: it was the global model.
            stats->global_test_loss = out->last.test_loss;
            stats->global_test_metric = out->last.test_metric;
        } else if (evaluate_global(&r, tc_in->eval_limit, stats, err, err_len) != 0) {
            goto out;
        }
        if (ps_client_bye(r.client, err, err_len) != 0) goto out;
    }
    // The model that matters: under asp/ssp the servers' (as evaluate_global
    // pulled it after this replica's last push), not the local copy; under
    // bsp, allreduce and hybrid the replica holds the global model.
    if (final_w && async) memcpy(final_w, r.pulled, r.n * sizeof *final_w);
    else if (final_w) params_read(r.w, r.n, final_w);
    {
        // The dense part's bits (the whole model when it has no sparse part):
        // replicas that apply the same updates report the same checksum.
        size_t S = model_num_sparse_params(m);
        for (size_t j = S; j < r.n; j++) r.pulled[j - S] = param_get(&r.w[j]);
        stats->dense_checksum = wire_checksum(r.pulled, (r.n - S) * sizeof(float), 0);
    }
    rc_status = 0;
out:
    stats->wait_s = r.stats.wait_s;
    if (r.progress && async)
        for (size_t t = 0; t < r.threads; t++)
            stats->wait_s += 1e-9 * (double)atomic_load_explicit(&r.progress[t].wait_ns, memory_order_relaxed);
    stats->clock = r.clock;
    stats->pushes = r.stats.pushes;
    stats->pulls = r.stats.pulls;
    stats->comm_s = r.stats.comm_s;
    if (r.client) {
        ps_client_stats_t cs;
        ps_client_get_stats(r.client, &cs);
        wire_status_t why = ps_client_refusal(r.client);
        stats->evicted = rc_status != 0 && why == WIRE_STATUS_EVICTED;
        stats->diverged = rc_status != 0 && why == WIRE_STATUS_NOT_FINITE;
        stats->retries = cs.retries;
        stats->pushes_acked = cs.pushes_acked;
        stats->pull_wait_s = cs.pull_wait_s;
        stats->bytes_out = cs.bytes_out;
        stats->bytes_in = cs.bytes_in;
    }
    if (rc->ring) {
        ring_stats_t rs;
        ring_get_stats(rc->ring, &rs);
        stats->bytes_out += rs.bytes_sent;
        stats->bytes_in += rs.bytes_recv;
    }
    // Uncompressed exchanges send what they would send.
    stats->bytes_out_raw = r.comp ? r.raw_out : stats->bytes_out;
    stats->residual_norm = r.resid.e ? ef_residual_norm(&r.resid) : 0.0;
    free(start.samples);
    free(start.updates);
    free(start.loss_sum);
    avg_eval_stop(&r);
    optimizer_destroy(&opt);
    replica_free(&r);
    return rc_status;
}
