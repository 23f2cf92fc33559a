// A distributed job parsed once into one typed struct (run_job.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run/run_job.h"

#include "engine/core/flags_file.h"

// The launcher's own flags.
static size_t launch_opts_flags(launch_opts_t *o, flag_spec_t *flags) {
    memset(o, 0, sizeof *o);
    const flag_spec_t table[] = {
        {"save-model", FLAG_TYPE_STRING, &o->save_model, "FILE",
         "write the run's global model to FILE (the servers' final values; allreduce: worker 0's replica; "
         "docs/model_file.md)",
         0, 0, NULL, 0},
        {"progress-every", FLAG_TYPE_DOUBLE, &o->progress_every, "S",
         "a local run's progress line on stderr every S seconds (when not given: 0.5 on a terminal, rewritten in "
         "place; else 5)",
         0.001, 1e6, NULL, 0},
        {"restart-workers", FLAG_TYPE_SIZE, &o->restart_workers, "N",
         "start a worker that dies again (it rejoins the run; asp/ssp with --checkpoint-every: from its last "
         "checkpoint), at most N times in all (0: a failure stops the run)",
         0, 1e6, NULL, 0},
        {"restart-servers", FLAG_TYPE_SIZE, &o->restart_servers, "N",
         "start a server that dies again from its last checkpoint (needs --checkpoint-every; asp, ssp, bsp), at most N "
         "times in all; the pushes it applied after that checkpoint are lost and counted (0: a failure stops the run)",
         0, 1e6, NULL, 0},
        {"verbose", FLAG_TYPE_BOOL, &o->verbose, NULL,
         "show every line of every process, their JSON summaries too (they are in --run-dir either way)", 0, 0, NULL,
         0},
    };
    _Static_assert(sizeof table / sizeof table[0] == LAUNCH_OPTS_N_FLAGS, "LAUNCH_OPTS_N_FLAGS is the table's length");
    memcpy(flags, table, sizeof table);
    return LAUNCH_OPTS_N_FLAGS;
}

void run_job_init(run_job_t *j) {
    j->process_flags = NULL;
    train_args_defaults(&j->t);
    dist_args_defaults(&j->d);
    size_t n = train_args_flags(&j->t, j->flags, 0);
    n += dist_args_flags(&j->d, j->flags + n);
    n += launch_opts_flags(&j->o, j->flags + n);
    j->n_flags = n;
}

// --log: every process's curve goes into the run directory. Returns 0, or 2 with err.
static int launch_refuse_log(const train_args_t *t, char *err, size_t err_len) {
    if (!t->log) return 0;
    snprintf(err, err_len,
             "asgd launch: --log: a launch writes each worker's CSV into --run-dir (worker-K.csv, and "
             "global.csv, merged.csv); drop --log");
    return 2;
}

// The flags a process of the run does not read from the job: the launcher's
// own, the flag file already read, and those each process is given for itself
// (its run directory, coordinator, run id and timeline).
static const char *const not_for_processes[] = {
    "save-model", "progress-every", "restart-workers", "restart-servers", "verbose", "config",
    "run-dir",    "coordinator",    "run-id",          "trace",           NULL};

int run_job_check(run_job_t *j, const char *command, char *err, size_t err_len) {
    // As given, before the checks fill in defaults and scaling changes --batch and --lr.
    free(j->process_flags);
    char why[256];
    if (!(j->process_flags = flags_file_format(j->flags, j->n_flags, not_for_processes, why, sizeof why))) {
        snprintf(err, err_len, "%s: %s", command, why);
        return 2;
    }
    int usage = train_args_finish(&j->t, j->flags, j->n_flags, command, err, err_len);
    if (usage == 0) usage = dist_args_finish(&j->d, &j->t, j->flags, j->n_flags, command, err, err_len);
    if (usage == 0) usage = launch_refuse_log(&j->t, err, err_len);
    return usage;
}

int run_job_parse(run_job_t *j, const char *command, int argc, char **argv, char *err, size_t err_len) {
    run_job_init(j);
    flags_status_t parsed = train_args_parse(&j->t, command, j->flags, j->n_flags, argc, argv, err, err_len);
    if (parsed == FLAGS_STATUS_HELP) snprintf(err, err_len, "%s: --help is not a job's flag", command);
    if (parsed != FLAGS_STATUS_OK) return -1;
    return run_job_check(j, command, err, err_len) != 0 ? -1 : 0;
}

void run_job_release(run_job_t *j) {
    train_args_release(&j->t);
    free(j->process_flags);
    j->process_flags = NULL;
}

int run_job_write_process_file(const run_job_t *j, const char *dir, char *path, size_t path_len, char *err,
                               size_t err_len) {
    snprintf(path, path_len, "%s/%s", dir, RUN_JOB_PROCESS_FILE);
    char comment[160];
    snprintf(comment, sizeof comment,
             "asgd launch %s: the job every server and worker of this run reads (their --config)", ASGD_VERSION);
    return train_args_write_flag_file(path, comment, j->process_flags, err, err_len);
}
