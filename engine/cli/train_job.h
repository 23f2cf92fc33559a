#ifndef ASGD_ENGINE_CLI_TRAIN_JOB_H
#define ASGD_ENGINE_CLI_TRAIN_JOB_H
// `asgd train` for a program: the same flags, checks and run, without output
// on stdout or stderr; the result and the curve as structs (the public API's
// asgd_train is this). Files the flags ask for (--log, --summary,
// --save-model, checkpoints) are written as the command writes them.
#include <stddef.h>

#include "engine/core/model.h"    // defines: metric_kind_t
#include "engine/core/trainer.h"  // defines: train_result_t, train_point_t

typedef struct train_job_outcome {
    char model[160];           // model_describe
    metric_kind_t metric;
    train_result_t result;
    train_point_t *points;     // every evaluation, in order
    size_t n_points, cap_points;
    int points_lost;           // internal: a point could not be kept
} train_job_outcome_t;

// argv: the flags after `asgd train` (argc of them). Returns 0, or -1 with err.
int train_job_run(int argc, char **argv, train_job_outcome_t *out, char *err, size_t err_len);
void train_job_outcome_free(train_job_outcome_t *o);

#endif
