#ifndef ASGD_ENGINE_RUN_LAUNCH_JOB_H
#define ASGD_ENGINE_RUN_LAUNCH_JOB_H
// `asgd launch` on this machine for a program: the same flags, processes and
// run directory, without output on stdout or stderr (the children's lines are
// not shown; the first failure is the error), and the global model's figures
// and curve as structs (the public API's asgd_launch is this). The children
// are this program started again with a role first (asgd_run_role).
#include <stddef.h>
#include <stdint.h>

#include "engine/run/launch_curve.h"

typedef struct launch_job_outcome {
    char model[64];  // --model
    int rmse;  // the metric is RMSE (else accuracy)
    char run_dir[512];
    double wall_s;  // the longest worker's training time
    uint64_t samples;  // all workers'
    uint64_t pushes;  // updates the workers sent
    double samples_per_s;
    double time_to_target_s;  // NaN: no target, or not reached (global model)
    uint64_t samples_to_target;
    curve_point_t *points;  // the global model's curve (dist_curve_columns), in order
    size_t n_points;
} launch_job_outcome_t;

// argv: the flags after `asgd launch` (argc of them). Returns 0, or -1 with err.
int launch_job_run(int argc, char **argv, launch_job_outcome_t *out, char *err, size_t err_len);
void launch_job_outcome_free(launch_job_outcome_t *o);

#endif
