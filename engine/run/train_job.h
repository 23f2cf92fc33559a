#ifndef ASGD_ENGINE_RUN_TRAIN_JOB_H
#define ASGD_ENGINE_RUN_TRAIN_JOB_H
// `asgd train`'s job, typed: its flags parsed once into a train_job_t, then
// run. train_job_run runs one for a program: the same flags, checks and run,
// without output on stdout or stderr; the result and the curve as structs (the
// public API's asgd_train is this). Files the flags ask for (--log, --summary,
// --save-model, checkpoints) are written as the command writes them.
#include <stddef.h>

#include "engine/core/model.h"
#include "engine/core/flags.h"
#include "engine/core/trainer.h"
#include "engine/run/train_args.h"

#define SIM_N_FLAGS 5
#define TRAIN_JOB_MAX_FLAGS (TRAIN_ARGS_N_FLAGS + 1 + SIM_N_FLAGS)

typedef struct train_job_outcome {
    char model[160];  // model_describe
    metric_kind_t metric;
    train_result_t result;
    train_point_t *points;  // every evaluation, in order
    size_t n_points, cap_points;
    int points_lost;  // internal: a point could not be kept
} train_job_outcome_t;

// The typed job of `asgd train`: the training flags, --save-model and the
// staleness simulation's, parsed once into it through its own flag table.
typedef struct train_job train_job_t;
// A job with every flag at its default. Returns NULL when out of memory.
train_job_t *train_job_new(void);
void train_job_destroy(train_job_t **p);
// The job's training flags, to parse into (train_args_parse; string flags point into its words).
train_args_t *train_job_args(train_job_t *c);
// The job's flag table (pointing into it); *n gets its length.
flag_spec_t *train_job_flags(train_job_t *c, size_t *n);
// After the parse: the checks across flags. Returns 0, or 2 with the usage error in err.
int train_job_check(train_job_t *c, char *err, size_t err_len);
// Loads the data, builds the model, trains (or simulates) and writes what the
// flags ask for; the startup lines go to the run layer's sink (run_output.h),
// the summary to its results. The caller installs the stop signals first.
// Returns 0, or -1 with err.
int train_job_execute(train_job_t *c, char *err, size_t err_len);
// The run's result (after train_job_execute).
const train_result_t *train_job_result(const train_job_t *c);

// argv: the flags after `asgd train` (argc of them). Returns 0, or -1 with err.
int train_job_run(int argc, char **argv, train_job_outcome_t *out, char *err, size_t err_len);
void train_job_outcome_free(train_job_outcome_t *o);

#endif
