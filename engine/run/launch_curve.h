#ifndef ASGD_ENGINE_RUN_LAUNCH_CURVE_H
#define ASGD_ENGINE_RUN_LAUNCH_CURVE_H
// The global model's curve of a finished distributed run, assembled by
// `asgd launch` from its run directory, and merged.csv written from it.
//
//   asp, ssp, bsp     global.csv, the evaluator's rows (global_eval.h). Where
//                     the last counts every sample (the evaluator read the
//                     final model: the usual case), its staleness becomes
//                     the run's (every shard's, not shard 0's); else one
//                     final row follows: the servers' model after the last
//                     push, evaluated by the last worker to finish.
//   allreduce, hybrid worker 0's rows: every replica holds the global model
//                     (hybrid: its sparse part pulled whole before each
//                     evaluation); samples counted over all workers.
#include <stddef.h>

#include "engine/run/dist.h"

typedef struct curve_point {
    double v[CURVE_N_COLUMNS];  // dist_curve_columns; NaN: empty
} curve_point_t;

// The run's last point of the global model (from the workers' summaries).
typedef struct curve_final {
    double wall_s;  // the longest worker's training time
    double samples;  // all workers'
    double test_loss, test_metric;  // NaN: none (then no final row is added)
    double staleness_versions_mean, staleness_versions_max, staleness_clocks_mean, staleness_clocks_max;
} curve_final_t;

typedef struct global_curve {
    curve_point_t *points;
    size_t n;
    size_t evals;  // evaluations the evaluator beside shard 0 made (0 for allreduce, hybrid)
    double eval_s;  // their time, summed
    size_t evals_during_training;  // of them, made while the workers trained (past the snapshot budget)
    double eval_during_training_s;  // and their time
    const char *source;  // "servers" or "worker 0's replica"
} global_curve_t;

// Reads the curve; train_examples scales samples to epochs. Returns 0 or -1 with err.
int global_curve_load(const char *dir, const dist_args_t *d, double train_examples, const curve_final_t *final,
                      int rmse, global_curve_t *out, char *err, size_t err_len);
void global_curve_free(global_curve_t *c);

// The first point whose test metric meets target (accuracy >= target, RMSE
// <= target); NULL when none does or target is NaN.
const curve_point_t *global_curve_at_target(const global_curve_t *c, double target, int rmse);
// The last point with a test metric, or NULL.
const curve_point_t *global_curve_last(const global_curve_t *c);
// The untrained model's point (the curve's first, at 0 samples), or NULL.
const curve_point_t *global_curve_untrained(const global_curve_t *c);
// Of the points after the untrained one, the one with the highest test loss,
// or NULL (no untrained point, no later loss).
const curve_point_t *global_curve_peak_loss(const global_curve_t *c);

// merged.csv: `process`, dist_curve_columns, then pushes, pulls,
// steps_per_push and steps_per_pull (a worker's so far: its replica's updates
// over its pushes and pulls); the global rows first (process "global", the
// workers' columns empty), then each worker's own rows ("worker-K", the
// staleness and wait empty).
int global_curve_write_merged(const char *dir, const global_curve_t *c, size_t workers, char *err, size_t err_len);

#endif
