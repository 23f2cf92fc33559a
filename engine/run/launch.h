#ifndef ASGD_ENGINE_RUN_LAUNCH_H
#define ASGD_ENGINE_RUN_LAUNCH_H
// Every process of a distributed run: on this machine (the coordinator here,
// every process a child of this one, supervised and restarted), or as one rank
// under srun, mpirun or torchrun, or as one member of a ps-lite tracker's run.
// What it says goes to the process's sink (run_output.h).
#include <stddef.h>

#include "engine/run/run_job.h"
#include "net/launch_env.h"

// Under ps-lite: sizes the run from DMLC_NUM_SERVER / DMLC_NUM_WORKER before
// the flags are checked; an explicit --servers or --workers must agree.
// Returns 0, or 2 with err.
int run_launch_env_counts(const launch_env_t *env, dist_args_t *d, const flag_spec_t *flags, size_t n_flags, char *err,
                          size_t err_len);
// The checks of a parsed and checked job against where it runs (no --resume;
// --server-replicas and --restart-servers only where the launch starts every
// process). Sets the job's --save-model. Returns 0, or 2 with err.
int run_launch_check(run_job_t *j, const launch_env_t *env, char *err, size_t err_len);
// Runs the job where env says. Returns the exit status (0 ok, 1 failure, 2
// usage error, 128 + a signal).
int run_launch(run_job_t *j, const launch_env_t *env);

#endif
