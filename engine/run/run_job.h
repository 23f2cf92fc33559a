#ifndef ASGD_ENGINE_RUN_RUN_JOB_H
#define ASGD_ENGINE_RUN_RUN_JOB_H
// A distributed job, typed: the training flags, the distributed ones and the
// launcher's own, parsed once into one struct (with the flag table that filled
// it), which the run layer's launch takes (launch.h).
#include <stddef.h>

#include "engine/core/flags.h"
#include "engine/run/dist.h"
#include "engine/run/train_args.h"

// The launcher's own flags, beyond the training and distributed ones.
typedef struct launch_opts {
    const char *save_model;  // --save-model: the run's global model
    size_t restart_workers;  // --restart-workers N
    size_t restart_servers;  // --restart-servers N
    double progress_every;  // --progress-every S (0: the default for where stderr goes)
    int verbose;  // --verbose: every child's lines, their JSON summaries included
} launch_opts_t;

#define LAUNCH_OPTS_N_FLAGS 5
#define RUN_JOB_MAX_FLAGS (TRAIN_ARGS_N_FLAGS + DIST_N_FLAGS + LAUNCH_OPTS_N_FLAGS)

typedef struct run_job {
    train_args_t t;
    dist_args_t d;
    launch_opts_t o;
    flag_spec_t flags[RUN_JOB_MAX_FLAGS];  // point into t, d and o: a job is not copied
    size_t n_flags;
    // The job every process of a local launch reads back once (run_job_write_process_file):
    // the flags as given, as a flag file, less the launcher's own and those
    // each process gets for itself. Filled by run_job_check; NULL before.
    char *process_flags;
} run_job_t;

// The file of the run directory that holds a local launch's process_flags,
// which each server and worker reads as its --config.
#define RUN_JOB_PROCESS_FILE "job"

// Sets the defaults and fills j->flags: the training ones, the distributed
// ones and the launcher's.
void run_job_init(run_job_t *j);
// After flags_parse: the checks across flags (training, distributed, no
// --log). Returns 0, or 2 with the usage error, prefixed with command, in err.
int run_job_check(run_job_t *j, const char *command, char *err, size_t err_len);
// A job from words no user typed (a program's argv, a run directory's
// config): run_job_init, the parse and run_job_check; --help is no such word.
// Returns 0, or -1 with err prefixed with command.
int run_job_parse(run_job_t *j, const char *command, int argc, char **argv, char *err, size_t err_len);
// Frees what the parse kept (the words the string flags point into).
void run_job_release(run_job_t *j);
// Writes j->process_flags to DIR/RUN_JOB_PROCESS_FILE, its path into path.
// Returns 0, or -1 with err naming the file.
int run_job_write_process_file(const run_job_t *j, const char *dir, char *path, size_t path_len, char *err,
                               size_t err_len);

#endif
