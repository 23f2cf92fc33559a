// asgd launch and asgd merge: the command line of the run layer's launch (engine/run/launch.h).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cli/commands.h"
#include "engine/cli/train_help.h"
#include "engine/run/launch.h"
#include "engine/run/run_job.h"
#include "engine/run/run_merge.h"
#include "engine/run/run_record.h"
#include "net/launch_env.h"
#include "staleness/sync_mode.h"

#define ERR_LEN 512

static const char usage[] =
    "asgd launch [--servers M] [--workers N] [--threads T] [--sync " SYNC_MODE_CHOICES "] [train flags]";
static const char description[] =
    "Runs one model with N worker replicas (each T Hogwild threads) and M parameter-server shards.\n"
    "On its own it starts every process on this machine, shows their progress as one view, stops\n"
    "them all on Ctrl-C or when one fails (naming it), and merges their logs into --run-dir: a CSV\n"
    "and JSON per process, merged.csv, staleness.csv and summary.json. Under srun, mpirun or torchrun\n"
    "the same command runs as one rank: the first M ranks serve, the rest train, and rank 0 hosts the\n"
    "coordinator (--coordinator HOST:PORT; else torchrun's MASTER_ADDR at MASTER_PORT+1, or the first\n"
    "SLURM node, port 29517). Under a ps-lite tracker (DMLC_ROLE) the scheduler hosts it and merges\n"
    "the run directory, and servers and workers get their ids from it. See docs/launch.md.";

int cmd_launch_has_flag(const char *name) {
    run_job_t *j = malloc(sizeof *j);
    if (!j) return 0;
    run_job_init(j);
    int has = flags_find(j->flags, j->n_flags, name) != NULL;
    free(j);
    return has;
}

// The job's flags parsed and checked where it runs. Returns -1 to run it, else the exit status.
static int launch_prepare(run_job_t *j, launch_env_t *env, int argc, char **argv) {
    int parsed = train_args_command(&j->t, "asgd launch", usage, description, j->flags, j->n_flags, argc, argv);
    if (parsed >= 0) return parsed;
    // Under a launcher whose variables do not say what this process is, it
    // stops here: never a whole local run per process.
    char err[ERR_LEN];
    if (launch_env_detect(env, NULL, NULL, err, sizeof err) != 0 ||
        (env->kind == LAUNCHER_KIND_PSLITE &&
         run_launch_env_counts(env, &j->d, j->flags, j->n_flags, err, sizeof err) != 0)) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    int usage_status = run_job_check(j, "asgd launch", err, sizeof err);
    if (usage_status != 0) {
        fprintf(stderr, "%s\n", err);
        return usage_status;
    }
    if (run_launch_check(j, env, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    return -1;
}

int cmd_launch(int argc, char **argv) {
    run_job_t *j = malloc(sizeof *j);
    if (!j) {
        fprintf(stderr, "asgd launch: out of memory\n");
        return 1;
    }
    run_job_init(j);
    launch_env_t env;
    int status = launch_prepare(j, &env, argc, argv);
    if (status < 0) status = run_launch(j, &env);
    run_job_release(j);
    free(j);
    return status;
}

// ---- asgd merge RUN_DIR --------------------------------------------------------------

static const char merge_usage[] = "asgd merge RUN_DIR [--save-model FILE]";
static const char merge_description[] =
    "Merges the run directory of an asgd launch whose processes all wrote their results (a run\n"
    "stopped or disturbed before its launcher merged it, or one merged under srun by hand):\n"
    "staleness.csv, merged.csv and summary.json, as the launcher writes them, and the global model\n"
    "(--save-model FILE, else the run's own --save-model) from the servers' parts. The run's flags\n"
    "come from RUN_DIR/config; its summary says interrupted when a signal stopped its launcher.";

// The run's workers when its flags do not say (under srun or mpirun the
// ranks did): its workers' records, counted from 0.
static size_t workers_recorded(const char *dir) {
    size_t k = 0;
    for (;; k++) {
        char path[1100];
        run_record_path(path, sizeof path, dir, 0, k);
        if (access(path, F_OK) != 0) return k;
    }
}

// asgd merge's work once the run's flags are read from config into j.
static int merge_job(run_job_t *j, const char *dir, const char *config, char **words, const char *save_model) {
    char err[ERR_LEN];
    if (run_job_parse(j, "asgd merge", 2, words, err, sizeof err) != 0) {
        fprintf(stderr, "asgd merge: %s: %s\n", config, err);
        return 1;
    }
    if (!flags_find(j->flags, j->n_flags, "workers")->seen) j->d.workers = workers_recorded(dir);
    if (dist_apply_scaling(&j->d, &j->t, "asgd merge", err, sizeof err) != 0) {
        fprintf(stderr, "asgd merge: %s: %s\n", config, err);
        return 1;
    }
    j->d.run_dir = dir;
    if (!save_model) save_model = j->o.save_model;
    char missing[400];
    size_t absent = run_merge_missing(dir, &j->d, missing, sizeof missing);
    if (absent) {
        fprintf(stderr,
                "asgd merge: %s: %s wrote no result (%s still running, or stopped before the end): nothing "
                "to merge\n",
                dir, missing, absent == 1 ? "was it" : "were they");
        return 1;
    }
    run_merge_info_t info = {NAN, NULL, 0, run_merge_interrupted(dir)};
    if (run_merge_dir(dir, &j->t, &j->d, &info, NULL, err, sizeof err) != 0 ||
        run_merge_model(dir, &j->d, save_model, err, sizeof err) != 0) {
        fprintf(stderr, "asgd merge: %s\n", err);
        return 1;
    }
    return 0;
}

int cmd_merge(int argc, char **argv) {
    const char *dir = argc > 0 && strncmp(argv[0], "-", 1) != 0 ? argv[0] : NULL;
    const char *save_model = NULL;
    flag_spec_t own[] = {
        {"save-model", FLAG_TYPE_STRING, &save_model, "FILE",
         "write the run's global model to FILE (the run's own --save-model when not given)", 0, 0, NULL, 0},
    };
    int parsed = flags_command("asgd merge", merge_usage, merge_description, own, sizeof own / sizeof own[0],
                               argc - (dir != NULL), argv + (dir != NULL));
    if (parsed >= 0) return parsed;
    if (!dir) {
        fprintf(stderr, "asgd merge: expected the run directory (asgd merge RUN_DIR)\n");
        return 2;
    }
    char config[1100];
    snprintf(config, sizeof config, "%s/config", dir);
    if (access(config, R_OK) != 0) {
        fprintf(stderr, "asgd merge: %s: %s: not the run directory of an asgd launch (it writes its flags there)\n",
                config, strerror(errno));
        return 1;
    }
    run_job_t *j = malloc(sizeof *j);
    if (!j) {
        fprintf(stderr, "asgd merge: out of memory\n");
        return 1;
    }
    char *words[] = {"--config", config};
    int status = merge_job(j, dir, config, words, save_model);
    run_job_release(j);
    free(j);
    return status;
}
