#include "engine/sim/simulate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/rng.h"

// The trainer's rng streams (engine/core/trainer.c): the initial data order, then
// thread 0's per-epoch shuffles. Using the same ones makes fixed:0 replay
// `--mode hogwild --threads 1` exactly.
#define STREAM_ORDER 0x4f524452u
#define STREAM_SHUFFLE 0x53485546u
#define CLOCK_CHECK_EVERY 64  // step boundaries between looks at the clock

// One gradient in flight.
typedef struct pending {
    uint64_t due;  // step (per-gradient delays) or virtual time (straggler) it is applied at
    uint64_t seq;  // read order: breaks ties in `due`
    uint64_t read_version;  // updates applied when its parameters were read
    size_t epoch;  // the epoch its minibatch came from (for epoch-decay schedules)
    uint64_t worker;  // straggler: the worker that computed it
    int scaled;  // sparse: the gradient is `scale` times `example` (model_grad_one_scale), n is 0
    uint32_t example;
    float scale;
    size_t n, cap;  // sparse: entries used and allocated
    uint32_t *idx;  // (cap) touched coordinates; NULL when dense
    float *g;  // (cap) gradient values, or (n_params) when dense
    float *w_then;  // same shape as g: parameters at read time (DC-ASGD only, else NULL)
    struct pending *next;  // the next record due in the same step (the ring's buckets)
} pending_t;

typedef struct sim {
    const model_t *model;
    optimizer_t *opt;
    param_t *w;
    simulate_config_t cfg;
    size_t n_train, n_params;
    int dense, dc;
    model_ws_t *ws, *eval_ws;
    grad_t grad;  // scratch: a sparse gradient is computed into it at a read
    float *w_now;  // (now_cap) DC-ASGD: current parameters gathered at an apply
    size_t now_cap;
    // Fused steps for a gradient applied as soon as it is read (as the trainer
    // takes them, engine/core/trainer.c): one-example plain-SGD steps, or a
    // dense model's gradient applied block by block as it is computed.
    int step_one;  // model_sgd_step_one applies
    float *copy;  // dense: the workspace's parameter copy (NULL without loss_grad_apply)
    int fuse_dense;  // dense: fresh gradients go to w block by block (copy, no clipping)
    int pairs;  // sparse: a one-example gradient is written as pairs (model_grad_one_pairs, no clipping)
    int scaled;  // sparse: ... or kept as a scale of the example (plain SGD, no clipping, no DC-ASGD)
    int copy_current;  // dense: every write to w since the copy was refreshed also went to it

    // The data stream, in the order of one hogwild thread.
    uint32_t *order;  // (n_train)
    rng_t shuffle;
    size_t epoch, pos;
    int exhausted;

    // Gradients in flight, in (due, seq) order: a binary min-heap, or, for
    // per-gradient delays bounded by D, a ring of D + 1 buckets (see
    // ring_push); and a pool of records.
    pending_t **heap;  // (cap_in_flight)
    size_t heap_n;
    pending_t **ring_head, **ring_tail;  // (ring_len) or NULL: the heap is used
    size_t ring_len, ring_n;  // buckets; records in them
    pending_t **pool;  // (cap_in_flight) every record allocated so far
    size_t pool_n;
    pending_t **spare;  // (cap_in_flight) records not in flight
    size_t spare_n;
    size_t cap_in_flight;

    uint64_t seq;  // gradients read
    uint64_t max_in_flight;  // most gradients pending at once, the one being read included
    uint64_t version;  // updates applied
    uint64_t samples;
    double loss_sum;
    float lr;  // the schedule's step size at the last update (before staleness scaling)
    staleness_hist_t *hist;
} sim_t;

void simulate_config_default(simulate_config_t *c) {
    memset(c, 0, sizeof *c);
    train_config_default(&c->train);
    c->delay.kind = DELAY_KIND_FIXED;
}

int simulate_config_check(const simulate_config_t *c, size_t n_train, char *err, size_t err_len) {
    if (c->train.threads != 1) {
        snprintf(err, err_len, "simulate: runs on one thread (threads %zu)", c->train.threads);
        return -1;
    }
    if (c->train.mode != TRAIN_MODE_HOGWILD || c->train.link) {
        snprintf(err, err_len, "simulate: replaces the training mode; use hogwild with no distributed link");
        return -1;
    }
    if (train_config_check(&c->train, n_train, err, err_len) != 0) return -1;
    if (delay_model_check(&c->delay, err, err_len) != 0) return -1;
    return stale_update_config_check(&c->update, err, err_len);
}

// ---- the gradients in flight ----

static int before(const pending_t *a, const pending_t *b) {
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_push(sim_t *s, pending_t *p) {
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(p, s->heap[parent])) break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = p;
}

static pending_t *heap_pop(sim_t *s) {
    pending_t *top = s->heap[0], *last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && before(s->heap[child + 1], s->heap[child])) child++;
        if (!before(s->heap[child], last)) break;
        s->heap[i] = s->heap[child];
        i = child;
    }
    if (n) s->heap[i] = last;
    return top;
}

// With per-gradient delays at most D, a gradient read at step t is due in
// [t, t + D], and run_steps applies everything due at t before step t + 1.
// So the records in flight are due in D + 1 consecutive steps, and bucket
// due mod (D + 1) holds those of one step, appended in read order: the heap's
// (due, seq) order at O(1) a record instead of O(log in-flight).
static void ring_push(sim_t *s, pending_t *p) {
    size_t b = (size_t)(p->due % s->ring_len);
    p->next = NULL;
    if (s->ring_tail[b])
        s->ring_tail[b]->next = p;
    else
        s->ring_head[b] = p;
    s->ring_tail[b] = p;
    s->ring_n++;
}

// Takes the first record of step t's bucket (one must be there).
static pending_t *ring_pop(sim_t *s, uint64_t t) {
    size_t b = (size_t)(t % s->ring_len);
    pending_t *p = s->ring_head[b];
    s->ring_head[b] = p->next;
    if (!p->next) s->ring_tail[b] = NULL;
    s->ring_n--;
    return p;
}

static size_t in_flight(const sim_t *s) { return s->heap_n + s->ring_n; }

// Per-gradient delays: schedules a record, whichever structure the run uses.
static void schedule(sim_t *s, pending_t *p) {
    if (s->ring_head)
        ring_push(s, p);
    else
        heap_push(s, p);
}

// The next record due at or before step t, left in place; NULL when none is.
static pending_t *first_due(const sim_t *s, uint64_t t) {
    pending_t *p = s->ring_head ? s->ring_head[t % s->ring_len] : s->heap_n ? s->heap[0] : NULL;
    return p && p->due <= t ? p : NULL;
}

// The same record, taken out.
static pending_t *take_due(sim_t *s, uint64_t t) {
    if (!first_due(s, t)) return NULL;
    return s->ring_head ? ring_pop(s, t) : heap_pop(s);
}

static void free_record(pending_t *p) {
    if (!p) return;
    free(p->idx);
    free(p->g);
    free(p->w_then);
    free(p);
}

// A record to read into: a spare one, or a new one while fewer than the bound
// exist (allocation happens only until the peak number in flight is reached).
static pending_t *take_record(sim_t *s, char *err, size_t err_len) {
    if (s->spare_n) return s->spare[--s->spare_n];
    pending_t *p = calloc(1, sizeof *p);
    if (p && s->dense) {
        p->g = calloc(s->n_params, sizeof *p->g);
        if (p->g && s->dc) p->w_then = calloc(s->n_params, sizeof *p->w_then);
        if (!p->g || (s->dc && !p->w_then)) {
            free_record(p);
            p = NULL;
        }
    }
    if (!p || s->pool_n == s->cap_in_flight) {
        snprintf(err, err_len, "simulate: out of memory for gradient %zu in flight (%zu parameters each): %s",
                 s->pool_n + 1, s->n_params, strerror(errno ? errno : ENOMEM));
        free_record(p);
        return NULL;
    }
    s->pool[s->pool_n++] = p;
    return p;
}

static int reserve_sparse(pending_t *p, size_t n, int dc) {
    if (n <= p->cap) return 0;
    size_t cap = p->cap ? p->cap : 16;
    while (cap < n) cap *= 2;
    uint32_t *idx = realloc(p->idx, cap * sizeof *idx);
    if (idx) p->idx = idx;
    float *g = realloc(p->g, cap * sizeof *g);
    if (g) p->g = g;
    float *wt = dc ? realloc(p->w_then, cap * sizeof *wt) : NULL;
    if (wt) p->w_then = wt;
    if (!idx || !g || (dc && !wt)) return -1;
    p->cap = cap;
    return 0;
}

// ---- reading: the next minibatch, its gradient on the current parameters ----

// The next minibatch of the hogwild order, or 0 when every epoch is done.
static int next_batch(sim_t *s, const uint32_t **idx, size_t *count) {
    if (s->exhausted) return 0;
    if (s->pos >= s->n_train) {
        if (++s->epoch == s->cfg.train.epochs) {
            s->exhausted = 1;
            return 0;
        }
        rng_shuffle_u32(&s->shuffle, s->order, s->n_train);
        s->pos = 0;
    }
    size_t b = s->cfg.train.batch;
    *idx = s->order + s->pos;
    *count = s->n_train - s->pos < b ? s->n_train - s->pos : b;
    s->pos += *count;
    if (s->pos >= s->n_train && s->epoch + 1 == s->cfg.train.epochs) s->exhausted = 1;
    return 1;
}

// Where a dense gradient goes block by block at a read: into its record.
// 0 + g, not g: the arithmetic of model_loss_grad on a clear gradient, signed
// zeros included.
static void store_block(void *ctx, size_t offset, const float *g, size_t n) {
    float *dst = (float *)ctx + offset;
    for (size_t i = 0; i < n; i++) dst[i] = 0.0f + g[i];
}

// Where a dense gradient goes block by block in a fused step: straight into w,
// and into the workspace's copy of it (as the trainer's Hogwild! step).
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

// Before a dense model's gradient is computed: its workspace copy of w needs
// no refresh when every write since the last one also went to the copy.
static void before_dense_read(sim_t *s) {
    if (s->copy && s->copy_current) model_ws_mark_copy_current(s->ws);
}

// After it: the copy holds w (the model refreshed it, or it already did).
static void after_dense_read(sim_t *s) { s->copy_current = s->copy != NULL; }

// Counts a gradient read: its minibatch, its loss, its place in the read order.
static void count_read(sim_t *s, size_t count, double loss) {
    s->seq++;
    s->samples += count;
    s->loss_sum += loss * (double)count;
    if (in_flight(s) + 1 > s->max_in_flight) s->max_in_flight = in_flight(s) + 1;
}

// One example's sparse gradient written as pairs straight into the record
// (model_grad_one_pairs: the same values as the scatter below, without it).
static int read_pairs(sim_t *s, uint32_t example, pending_t *p, double *loss) {
    size_t n = model_grad_one_pairs(s->model, s->w, example, p->idx, p->g, p->cap, loss);
    if (n > p->cap) {
        if (reserve_sparse(p, n, s->dc) != 0) return -1;
        n = model_grad_one_pairs(s->model, s->w, example, p->idx, p->g, p->cap, loss);
    }
    p->n = n;
    for (size_t k = 0; s->dc && k < n; k++) p->w_then[k] = param_get(&s->w[p->idx[k]]);
    return 0;
}

// Reads the parameters and computes the next gradient into a record (not yet
// scheduled). *out is NULL when the data is used up. Returns 0, or -1 on error.
static int read_gradient(sim_t *s, uint64_t worker, pending_t **out, char *err, size_t err_len) {
    *out = NULL;
    const uint32_t *idx;
    size_t count;
    if (!next_batch(s, &idx, &count)) return 0;
    size_t epoch = s->epoch;
    pending_t *p = take_record(s, err, err_len);
    if (!p) return -1;
    double loss;
    if (s->dense) {
        if (s->dc) params_read(s->w, s->n_params, p->w_then);
        if (s->copy) {
            // The blocks go straight into the record; it need not be clear.
            before_dense_read(s);
            loss = model_loss_grad_apply(s->model, s->w, idx, count, s->ws, store_block, p->g);
            after_dense_read(s);
        } else {
            // Hand the gradient's buffer to the record and take the record's (clear) one.
            loss = model_loss_grad(s->model, s->w, idx, count, &s->grad, s->ws);
            float *clear = p->g;
            p->g = s->grad.value;
            s->grad.value = clear;
        }
        if (s->cfg.train.clip_grad_norm > 0) {
            grad_t whole = {s->n_params, 1, p->g, NULL, 0, NULL};
            grad_clip_norm(&whole, s->cfg.train.clip_grad_norm);
        }
    } else if (count == 1 && s->scaled) {
        loss = model_grad_one_scale(s->model, s->w, idx[0], &p->scale);
        p->example = idx[0];
        p->scaled = 1;
    } else if (count == 1 && s->pairs) {
        if (read_pairs(s, idx[0], p, &loss) != 0) {
            snprintf(err, err_len, "simulate: out of memory for a gradient's coordinates");
            s->spare[s->spare_n++] = p;
            return -1;
        }
    } else {
        loss = model_loss_grad(s->model, s->w, idx, count, &s->grad, s->ws);
        if (s->cfg.train.clip_grad_norm > 0) grad_clip_norm(&s->grad, s->cfg.train.clip_grad_norm);
        if (reserve_sparse(p, s->grad.n_touched, s->dc) != 0) {
            snprintf(err, err_len, "simulate: out of memory for a gradient of %zu coordinates", s->grad.n_touched);
            s->spare[s->spare_n++] = p;
            return -1;
        }
        p->n = s->grad.n_touched;
        for (size_t k = 0; k < p->n; k++) {
            uint32_t i = s->grad.touched[k];
            p->idx[k] = i;
            p->g[k] = s->grad.value[i];
            if (s->dc) p->w_then[k] = param_get(&s->w[i]);
        }
        grad_clear(&s->grad);
    }
    p->seq = s->seq;
    p->read_version = s->version;
    p->epoch = epoch;
    p->worker = worker;
    count_read(s, count, loss);
    *out = p;
    return 0;
}

// A gradient applied as soon as it is read, with no other update due before
// it: staleness 0, so neither stale-update rule changes it, and it takes the
// trainer's path (engine/core/trainer.c), bit for bit: a fused one-example
// SGD step, a dense gradient applied block by block as it is computed, or
// the gradient computed and applied at once. The data must not be used up.
static void fresh_step(sim_t *s) {
    const uint32_t *idx;
    size_t count;
    if (!next_batch(s, &idx, &count)) return;
    staleness_hist_add(s->hist, 0);
    s->lr = optimizer_lr(s->opt, (double)s->version, s->epoch);
    double loss;
    if (s->step_one && count == 1) {
        loss = model_sgd_step_one(s->model, s->w, idx[0], s->lr);
    } else if (s->fuse_dense) {
        block_apply_t sink = {s->opt, s->w, s->lr, s->copy};
        before_dense_read(s);
        loss = model_loss_grad_apply(s->model, s->w, idx, count, s->ws, apply_block, &sink);
        s->copy_current = 1;
    } else {
        loss = model_loss_grad(s->model, s->w, idx, count, &s->grad, s->ws);
        if (s->cfg.train.clip_grad_norm > 0) grad_clip_norm(&s->grad, s->cfg.train.clip_grad_norm);
        optimizer_apply_and_clear(s->opt, s->w, &s->grad, s->lr);
        s->copy_current = 0;
    }
    count_read(s, count, loss);
    s->version++;
}

// ---- applying: the update rule for a stale gradient, then the optimizer ----

static int apply_gradient(sim_t *s, pending_t *p, char *err, size_t err_len) {
    uint64_t staleness = s->version - p->read_version;
    staleness_hist_add(s->hist, staleness);
    s->lr = optimizer_lr(s->opt, (double)s->version, p->epoch);
    float lr = stale_update_lr(&s->cfg.update, s->lr, staleness);
    float lambda = (float)s->cfg.update.dc_lambda;
    if (s->dense) {
        if (s->dc) {
            if (s->copy && s->copy_current)
                memcpy(s->w_now, s->copy, s->n_params * sizeof *s->w_now);
            else
                params_read(s->w, s->n_params, s->w_now);
            dc_asgd_compensate(p->g, s->w_now, p->w_then, s->n_params, lambda);
        }
        if (s->copy) {
            // The update goes to w and to the workspace's copy, which then
            // holds w and needs no refresh before the next read.
            optimizer_apply_block(s->opt, s->w, 0, p->g, s->n_params, lr, s->copy);
            s->copy_current = 1;
        } else {
            // The record's gradient becomes the scratch gradient; the applied
            // one (cleared by the optimizer) goes back to the record.
            float *clear = s->grad.value;
            s->grad.value = p->g;
            p->g = clear;
            optimizer_apply_and_clear(s->opt, s->w, &s->grad, lr);
        }
    } else {
        if (s->dc) {
            if (p->n > s->now_cap) {
                size_t cap = p->cap;
                float *now = realloc(s->w_now, cap * sizeof *now);
                if (!now) {
                    snprintf(err, err_len, "simulate: out of memory for %zu coordinates", cap);
                    return -1;
                }
                s->w_now = now;
                s->now_cap = cap;
            }
            for (size_t k = 0; k < p->n; k++) s->w_now[k] = param_get(&s->w[p->idx[k]]);
            dc_asgd_compensate(p->g, s->w_now, p->w_then, p->n, lambda);
        }
        // optimizer_apply_and_clear's arithmetic over the record's coordinates
        // (each listed once), without scattering them into a gradient first.
        if (p->scaled) {
            model_sgd_apply_one_scale(s->model, s->w, p->example, p->scale, lr);
            p->scaled = 0;
        } else if (optimizer_is_plain_sgd(s->opt)) {
            // Locals, not fields: the compiler reloads fields after every
            // atomic store, one extra load per coordinate.
            param_t *w = s->w;
            const uint32_t *idx = p->idx;
            const float *g = p->g;
            for (size_t k = 0, n = p->n; k < n; k++) {
                param_t *wi = &w[idx[k]];
                param_set(wi, param_get(wi) - lr * g[k]);
            }
        } else {
            for (size_t k = 0; k < p->n; k++) {
                param_t *wi = &s->w[p->idx[k]];
                float value = param_get(wi);
                optimizer_step_values(s->opt, p->idx[k], 1, &value, &p->g[k], lr);
                param_set(wi, p->g[k]);
            }
        }
        p->n = 0;
    }
    s->version++;
    s->spare[s->spare_n++] = p;
    return 0;
}

// ---- evaluation and the clock (as the trainer reports them) ----

typedef struct sim_clock {
    double start, paused;
    uint64_t samples_at_eval, updates_at_eval;
    double loss_at_eval;
    double train_loss;  // the last point's train loss (NaN before the first read)
    uint64_t next_eval;
    double next_progress;
    unsigned ticks;
} sim_clock_t;

static train_point_t point_now(const sim_t *s, const sim_clock_t *clk, double now) {
    train_point_t p;
    p.wall_s = now - clk->start - clk->paused;
    p.samples = s->samples;
    p.updates = s->version;
    p.epoch = (double)s->samples / (double)s->n_train;
    p.samples_per_s = p.wall_s > 0 ? (double)s->samples / p.wall_s : 0.0;
    p.lr = s->lr;
    uint64_t ds = s->samples - clk->samples_at_eval;
    p.train_loss = ds ? (s->loss_sum - clk->loss_at_eval) / (double)ds : clk->train_loss;
    p.test_loss = p.test_metric = NAN;
    return p;
}

static int target_met(const sim_t *s, double metric) {
    double target = s->cfg.train.target;
    if (isnan(target) || isnan(metric)) return 0;
    return model_metric(s->model) == METRIC_KIND_ACCURACY ? metric >= target : metric <= target;
}

// One evaluation point, off the clock. Returns 1 when the run should stop at the target.
static int eval_point(sim_t *s, sim_clock_t *clk, const train_callbacks_t *cb, train_result_t *res) {
    double begin = mono_clock_s();
    train_point_t p = point_now(s, clk, begin);
    size_t limit = s->cfg.train.eval_limit ? s->cfg.train.eval_limit : model_num_test(s->model);
    if (limit > model_num_test(s->model)) limit = model_num_test(s->model);
    eval_sums_t sums = {0.0, 0.0, 0};
    model_evaluate(s->model, s->w, 0, limit, s->eval_ws, &sums);
    p.test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
    p.test_metric = eval_metric_value(model_metric(s->model), &sums);
    clk->samples_at_eval = s->samples;
    clk->updates_at_eval = s->version;
    clk->loss_at_eval = s->loss_sum;
    clk->train_loss = p.train_loss;
    clk->next_eval = (s->samples / s->cfg.train.eval_every + 1) * s->cfg.train.eval_every;
    res->n_evals++;
    res->last = p;
    int reached = target_met(s, p.test_metric);
    if (reached && isnan(res->time_to_target_s)) {
        res->time_to_target_s = p.wall_s;
        res->samples_to_target = p.samples;
    }
    if (cb && cb->on_eval) cb->on_eval(&p, cb->ctx);
    clk->paused += mono_clock_s() - begin;
    return reached && s->cfg.train.stop_at_target;
}

// At a step boundary: evaluation when due, the time limit, progress. Returns 1 to stop.
static int step_boundary(sim_t *s, sim_clock_t *clk, const train_callbacks_t *cb, train_result_t *res) {
    if (s->samples >= clk->next_eval && eval_point(s, clk, cb, res)) {
        res->stopped_at_target = 1;
        return 1;
    }
    if (++clk->ticks % CLOCK_CHECK_EVERY) return 0;
    const train_config_t *c = &s->cfg.train;
    if (c->time_limit_s <= 0 && !(cb && cb->on_progress && c->progress_interval_s > 0)) return 0;
    double now = mono_clock_s();
    if (c->time_limit_s > 0 && now - clk->start - clk->paused >= c->time_limit_s) {
        res->stopped_at_time_limit = 1;
        return 1;
    }
    if (cb && cb->on_progress && c->progress_interval_s > 0 && now >= clk->next_progress) {
        clk->next_progress = now + c->progress_interval_s;
        train_point_t p = point_now(s, clk, now);
        double remaining = (double)s->n_train * (double)c->epochs - (double)s->samples;
        cb->on_progress(&p, p.samples_per_s > 0 ? remaining / p.samples_per_s : NAN, cb->ctx);
    }
    return 0;
}

// ---- the two drivers ----

// Per-gradient delays: step t reads one gradient, schedules it for t + delay,
// then applies everything due at t.
static int run_steps(sim_t *s, sim_clock_t *clk, const train_callbacks_t *cb, train_result_t *res, char *err,
                     size_t err_len) {
    delay_sampler_t sampler;
    delay_sampler_init(&sampler, &s->cfg.delay, s->cfg.train.seed);
    // Without delay compensation a gradient due at once, with nothing else
    // due before it, is applied as it is computed (fresh_step).
    int fuse = !s->dc;
    for (uint64_t t = 0;; t++) {
        if (!s->exhausted) {
            uint64_t delay = delay_sampler_next(&sampler);
            if (fuse && delay == 0 && !first_due(s, t)) {
                fresh_step(s);
            } else {
                pending_t *p;
                if (read_gradient(s, 0, &p, err, err_len) != 0) return -1;
                if (p) {
                    p->due = t + delay;
                    schedule(s, p);
                }
            }
        }
        for (pending_t *p; (p = take_due(s, t));)
            if (apply_gradient(s, p, err, err_len) != 0) return -1;
        if (s->exhausted && !in_flight(s)) return 0;
        if (step_boundary(s, clk, cb, res)) return 0;
    }
}

// Straggler: W workers in virtual time; each applies its gradient when its
// duration has passed, then reads again at once.
static int run_workers(sim_t *s, sim_clock_t *clk, const train_callbacks_t *cb, train_result_t *res, char *err,
                       size_t err_len) {
    const delay_model_t *m = &s->cfg.delay;
    for (uint64_t k = 0; k < m->workers; k++) {
        pending_t *p;
        if (read_gradient(s, k, &p, err, err_len) != 0) return -1;
        if (!p) break;
        p->due = delay_model_duration(m, k);
        heap_push(s, p);
    }
    while (s->heap_n) {
        pending_t *done = heap_pop(s);
        uint64_t now = done->due, worker = done->worker;
        if (apply_gradient(s, done, err, err_len) != 0) return -1;
        pending_t *p;
        if (read_gradient(s, worker, &p, err, err_len) != 0) return -1;
        if (p) {
            p->due = now + delay_model_duration(m, worker);
            heap_push(s, p);
        }
        if (step_boundary(s, clk, cb, res)) return 0;
    }
    return 0;
}

static void free_sim(sim_t *s) {
    for (size_t i = 0; i < s->pool_n; i++) free_record(s->pool[i]);
    free(s->pool);
    free(s->spare);
    free(s->heap);
    free(s->ring_head);
    free(s->ring_tail);
    free(s->order);
    free(s->w_now);
    grad_free(&s->grad);
    model_ws_destroy(&s->ws);
    model_ws_destroy(&s->eval_ws);
}

static int prepare(sim_t *s, char *err, size_t err_len) {
    // Bound on gradients in flight: the delay bound + 1 (or the workers), and
    // never more than the run's gradients.
    const train_config_t *c = &s->cfg.train;
    uint64_t steps_per_epoch = (s->n_train + c->batch - 1) / c->batch;
    uint64_t total = steps_per_epoch * (uint64_t)c->epochs;
    uint64_t bound = delay_model_max_in_flight(&s->cfg.delay) + (s->cfg.delay.kind == DELAY_KIND_STRAGGLER ? 0 : 1);
    s->cap_in_flight = (size_t)(bound < total ? bound : total);
    if (s->cap_in_flight == 0) s->cap_in_flight = 1;
    s->heap = malloc(s->cap_in_flight * sizeof *s->heap);
    s->pool = malloc(s->cap_in_flight * sizeof *s->pool);
    s->spare = malloc(s->cap_in_flight * sizeof *s->spare);
    s->order = malloc(s->n_train * sizeof *s->order);
    if (s->dense && s->dc) s->w_now = malloc(s->n_params * sizeof *s->w_now);
    int clip = c->clip_grad_norm > 0;
    // The ring when its D + 1 buckets are no more than the records it can hold.
    if (s->cfg.delay.kind != DELAY_KIND_STRAGGLER && bound <= s->cap_in_flight) {
        s->ring_len = (size_t)bound;
        s->ring_head = calloc(s->ring_len, sizeof *s->ring_head);
        s->ring_tail = calloc(s->ring_len, sizeof *s->ring_tail);
    }
    if (!s->heap || !s->pool || !s->spare || !s->order || (s->dense && s->dc && !s->w_now) ||
        (s->ring_len && (!s->ring_head || !s->ring_tail))) {
        snprintf(err, err_len, "simulate: allocating state for %zu gradients in flight: %s", s->cap_in_flight,
                 strerror(errno));
        return -1;
    }
    if (!(s->ws = model_ws_new(s->model, c->batch, err, err_len))) return -1;
    if (!(s->eval_ws = model_ws_new(s->model, c->batch, err, err_len))) return -1;
    if (grad_init(&s->grad, s->n_params, s->dense, err, err_len) != 0) return -1;
    // The trainer's conditions for its fused steps (engine/core/trainer.c).
    s->step_one = !clip && c->batch == 1 && optimizer_is_plain_sgd(s->opt) && model_has_sgd_step_one(s->model);
    s->copy = s->dense && model_has_loss_grad_apply(s->model) ? model_ws_param_copy(s->ws) : NULL;
    s->fuse_dense = s->copy && !clip;
    s->pairs = !s->dense && !clip && model_has_grad_one_pairs(s->model);
    // A scale instead of pairs: the same update without writing the pairs and
    // reading them back (the example's features are read again instead).
    s->scaled = !s->dense && !clip && !s->dc && optimizer_is_plain_sgd(s->opt) && model_has_grad_one_scale(s->model);
    // The order of `--mode hogwild --threads 1`: one seeded permutation, then
    // the thread's own shuffle at the start of every epoch.
    for (size_t i = 0; i < s->n_train; i++) s->order[i] = (uint32_t)i;
    rng_t r;
    rng_seed(&r, c->seed, STREAM_ORDER);
    rng_shuffle_u32(&r, s->order, s->n_train);
    rng_seed(&s->shuffle, c->seed, STREAM_SHUFFLE + 0);
    rng_shuffle_u32(&s->shuffle, s->order, s->n_train);
    return 0;
}

int simulate_run(const model_t *m, optimizer_t *opt, param_t *w, const simulate_config_t *c,
                 const train_callbacks_t *cb, simulate_result_t *out, char *err, size_t err_len) {
    if (simulate_config_check(c, model_num_train(m), err, err_len) != 0) return -1;
    sim_t s;
    memset(&s, 0, sizeof s);
    s.model = m;
    s.opt = opt;
    s.w = w;
    s.cfg = *c;
    s.n_train = model_num_train(m);
    s.n_params = model_num_params(m);
    s.dense = model_grad_is_dense(m);
    s.dc = c->update.dc_lambda > 0.0;
    if (s.cfg.train.eval_every == 0) s.cfg.train.eval_every = s.n_train;
    memset(out, 0, sizeof *out);
    staleness_hist_init(&out->staleness);
    out->workers = c->delay.workers;
    out->time_model = out->workers ? SIMULATE_TIME_WORKERS : SIMULATE_TIME_PER_GRADIENT;
    s.hist = &out->staleness;
    train_result_t *res = &out->train;
    res->time_to_target_s = NAN;
    if (prepare(&s, err, err_len) != 0) {
        free_sim(&s);
        return -1;
    }
    s.lr = optimizer_lr(opt, 0.0, 0);
    sim_clock_t clk;
    memset(&clk, 0, sizeof clk);
    clk.train_loss = NAN;
    clk.start = mono_clock_s();
    clk.next_progress = clk.start + c->train.progress_interval_s;
    int rc = 0;
    if (!eval_point(&s, &clk, cb, res)) {
        rc = c->delay.kind == DELAY_KIND_STRAGGLER ? run_workers(&s, &clk, cb, res, err, err_len)
                                                   : run_steps(&s, &clk, cb, res, err, err_len);
    } else {
        res->stopped_at_target = 1;
    }
    if (rc == 0) {
        // Updates still in flight when a run stops early are dropped, not applied.
        if (s.samples != clk.samples_at_eval || s.version != clk.updates_at_eval) eval_point(&s, &clk, cb, res);
        res->wall_s = res->last.wall_s;
        res->eval_s = clk.paused;
        res->samples = s.samples;
        res->updates = s.version;
        res->samples_per_s = res->wall_s > 0 ? (double)s.samples / res->wall_s : 0.0;
        res->updates_per_s = res->wall_s > 0 ? (double)s.version / res->wall_s : 0.0;
        out->max_in_flight = s.max_in_flight;
    }
    free_sim(&s);
    return rc;
}

typedef struct simulate_job {
    const model_t *m;
    const simulate_config_t *c;
    const train_callbacks_t *cb;
    simulate_result_t *out;
} simulate_job_t;

static int run_simulate_job(void *ctx, optimizer_t *opt, param_t *w, char *err, size_t err_len) {
    simulate_job_t *j = ctx;
    return simulate_run(j->m, opt, w, j->c, j->cb, j->out, err, err_len);
}

int simulate_fresh(const model_t *m, const optimizer_config_t *oc, const simulate_config_t *c, uint64_t init_seed,
                   const train_callbacks_t *cb, simulate_result_t *out, float *final_w, char *err, size_t err_len) {
    simulate_job_t job = {m, c, cb, out};
    return run_on_fresh_params(m, oc, init_seed, final_w, run_simulate_job, &job, err, err_len);
}
