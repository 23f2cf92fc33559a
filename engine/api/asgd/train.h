#ifndef ASGD_TRAIN_H
#define ASGD_TRAIN_H
// Training jobs and their results.
#include <stddef.h>
#include <stdint.h>

#include "asgd/export.h"

// A training job, described by the flags `asgd train` and `asgd launch` take
// (`asgd train --help`, `asgd launch --help`): the model, its data, the mode,
// threads, optimizer, evaluation, and for a distributed run the servers,
// workers and sync mode. A flag's value is checked when the job runs, with
// the command line's own rules and messages.
typedef struct asgd_job asgd_job_t;

ASGD_API asgd_job_t *asgd_job_new(char *err, size_t err_len);
ASGD_API void asgd_job_destroy(asgd_job_t **job);
// Sets --flag to value (NULL for a switch such as "stop-at-target"); flag is
// given without the dashes. A later call for the same flag replaces it.
ASGD_API int asgd_job_set(asgd_job_t *job, const char *flag, const char *value, char *err, size_t err_len);

// The flags most jobs set, typed: a misspelt field does not compile, where
// a misspelt flag given to asgd_job_set fails only when the job runs.
// asgd_job_config_init leaves every field unset (a NULL string, a NaN
// double, ASGD_JOB_UNSET for a count); asgd_job_configure sets the flags of
// the fields that are set, as asgd_job_set would, and leaves the rest of
// the job as it was. Values are checked when the job runs, as flags are;
// the choices (mode, sync, optimizer) are their flags' words ("hogwild",
// "ssp", "adagrad"). Flags without a field here go through asgd_job_set.
#define ASGD_JOB_UNSET UINT64_MAX

typedef struct asgd_job_config {
    // the model and its data
    const char *model;  // --model
    const char *data;  // --data
    const char *test_data;  // --test-data
    double test_frac;  // --test-frac
    uint64_t seed;  // --seed
    // training
    const char *mode;  // --mode: hogwild, locked or sync
    uint64_t threads;  // --threads
    uint64_t epochs;  // --epochs
    uint64_t batch;  // --batch
    double lr;  // --lr
    double l2;  // --l2
    const char *optimizer;  // --optimizer
    double momentum;  // --momentum
    double time_limit;  // --time-limit, seconds
    // evaluation and output
    uint64_t eval_every;  // --eval-every, samples
    double target_acc;  // --target-acc
    double target_rmse;  // --target-rmse
    const char *log;  // --log FILE
    const char *save_model;  // --save-model FILE
    // a distributed run (asgd_launch)
    uint64_t servers;  // --servers
    uint64_t workers;  // --workers
    const char *sync;  // --sync: asp, ssp, bsp, ...
    uint64_t staleness;  // --staleness
    double server_lr;  // --server-lr
} asgd_job_config_t;

ASGD_API void asgd_job_config_init(asgd_job_config_t *config);
// All or nothing: on failure (-1, err) the job is as it was.
ASGD_API int asgd_job_configure(asgd_job_t *job, const asgd_job_config_t *config, char *err, size_t err_len);

// One evaluation of the model a result is about.
typedef struct asgd_point {
    double wall_s;  // training seconds since the start, evaluations excluded
    double epoch;  // samples / training-set size
    uint64_t samples;  // training examples processed (all threads, all workers)
    double train_loss;  // mean training objective since the previous point (NaN where unknown)
    double test_loss;  // mean test loss
    double test_metric;  // accuracy, or RMSE for rating models (see asgd_result_t.metric)
} asgd_point_t;

typedef struct asgd_result {
    char model[160];  // the model as built, e.g. "mlp 784-64-10"
    const char *metric;  // "accuracy" or "rmse"
    double wall_s;  // training seconds, evaluations excluded
    uint64_t samples;  // training examples processed
    uint64_t updates;  // updates applied to the model
    double samples_per_s;
    double time_to_target_s;  // NaN: no target set, or not reached
    uint64_t samples_to_target;
    asgd_point_t final;  // the last evaluation
    size_t n_points;  // the curve, in order; final is points[n_points - 1]
    asgd_point_t *points;
} asgd_result_t;

// Frees the curve; the struct may be reused.
ASGD_API void asgd_result_free(asgd_result_t *r);

// Trains on this machine (`asgd train`'s job: --mode hogwild, locked or sync,
// or the staleness simulator with --simulate-workers / --delay) and fills
// out. Nothing is printed or written unless the job's flags ask for files.
ASGD_API int asgd_train(const asgd_job_t *job, asgd_result_t *out, char *err, size_t err_len);

// A distributed run on this machine (`asgd launch`'s job: --servers,
// --workers, --sync, --staleness, ...). The servers and workers are this
// program started again with a role as its first argument, so main() must
// begin with asgd_run_role. out describes the global model on the servers
// (or, under allreduce, worker 0's copy, which is the global model there),
// evaluated off the clock.
ASGD_API int asgd_launch(const asgd_job_t *job, asgd_result_t *out, char *err, size_t err_len);

// If argv asks for a role of a distributed run (argv[1] is "server" or
// "worker"), runs it, stores its exit status in *status and returns 1;
// otherwise returns 0 and does nothing.
ASGD_API int asgd_run_role(int argc, char **argv, int *status);

#endif
