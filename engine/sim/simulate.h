#ifndef ASGD_ENGINE_SIM_SIMULATE_H
#define ASGD_ENGINE_SIM_SIMULATE_H
// Deterministic staleness simulation: one process, one thread, and every
// gradient applied a chosen number of updates after the parameters it was
// computed on were read. Separates statistical efficiency (loss against
// updates at a given staleness) from hardware efficiency, and lets one machine
// study thousands of simulated workers. Same seed, same run, bit for bit.
//
// The simulator keeps the gradients in flight in a min-heap keyed by the step
// (or virtual time) at which each is due:
//
//   per-gradient delays (fixed, uniform, geometric; staleness/delay_model.h):
//     at step t it reads w, computes g_t on the next minibatch, draws tau_t and
//     schedules g_t for step t + tau_t; then it applies every gradient due at
//     step t, oldest read first. When the data is used up it keeps stepping,
//     reading nothing, until every gradient has been applied.
//   straggler (W workers in virtual time):
//     every worker reads w, computes for its duration, and its gradient is
//     applied when that time has passed; it then reads again at once. With all
//     durations equal this is a round-robin and equals fixed:W-1 bit for bit.
//
// The staleness of an update is measured, not assumed: the number of updates
// applied between its read and its write. fixed:K gives exactly K, except for
// the first K updates (0, 1, ..., K-1: fewer updates existed to be missed).
//
// Minibatches are taken in exactly the order of `asgd train --mode hogwild
// --threads 1` (same seed, same batch), and each update has the arithmetic of
// model_loss_grad then optimizer_apply_and_clear; a gradient applied as soon
// as it is read, with no other update due before it, takes the trainer's own
// fused step (the same arithmetic, cheaper), so fixed:0 reproduces that run
// bit for bit at its speed. Dense gradients are stored as the model hands
// them over (model_loss_grad_apply) and applied with the workspace's copy of
// the parameters kept current; sparse ones as (index, value) pairs.
// Evaluation happens every eval_every samples, off the clock, through the
// trainer's train_point_t / train_callbacks_t, so run_report works unchanged.
// A point's train_loss is the mean loss of the minibatches read since the
// previous point; the last point, after the gradients still in flight when the
// data ran out were applied, read none and repeats the previous point's.
#include <stddef.h>
#include <stdint.h>

#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "engine/core/trainer.h"
#include "staleness/delay_model.h"
#include "staleness/histogram.h"
#include "staleness/stale_update.h"

typedef struct simulate_config {
    // epochs, batch, seed, eval_every, eval_limit, target, stop_at_target,
    // time_limit_s and progress_interval_s are used; threads must be 1, mode
    // hogwild, link NULL; pin is ignored.
    train_config_t train;
    delay_model_t delay;  // checked with delay_model_check
    stale_update_config_t update;  // staleness-aware steps, delay compensation
} simulate_config_t;

typedef struct simulate_result {
    train_result_t train;  // as train_run reports it; updates == gradients computed
    staleness_hist_t staleness;  // measured staleness of every applied update
    uint64_t max_in_flight;  // most gradients pending at once
    // The model of time: SIMULATE_TIME_WORKERS with `workers` simulated workers
    // (straggler, or round-robin workers given as fixed:W-1 with delay.workers
    // = W), or SIMULATE_TIME_PER_GRADIENT (fixed, uniform, geometric: each
    // update's delay is drawn, there are no workers; `workers` is 0).
    const char *time_model;
    uint64_t workers;
} simulate_result_t;

#define SIMULATE_TIME_WORKERS "workers"
#define SIMULATE_TIME_PER_GRADIENT "per-gradient"

void simulate_config_default(simulate_config_t *c);
int simulate_config_check(const simulate_config_t *c, size_t n_train, char *err, size_t err_len);

// Trains w in place with optimizer opt. Returns 0, or -1 with err filled.
int simulate_run(const model_t *m, optimizer_t *opt, param_t *w, const simulate_config_t *c,
                 const train_callbacks_t *cb, simulate_result_t *out, char *err, size_t err_len);

// simulate_run on parameters initialised with init_seed and a new optimizer
// from oc (as train_fresh). final_w, if not NULL, receives the parameters.
int simulate_fresh(const model_t *m, const optimizer_config_t *oc, const simulate_config_t *c, uint64_t init_seed,
                   const train_callbacks_t *cb, simulate_result_t *out, float *final_w, char *err, size_t err_len);

#endif
