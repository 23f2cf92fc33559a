// asgd train: one single-node training run (engine/run/train_job.h), its help and messages.
#include <stdio.h>
#include <string.h>

#include "engine/cli/commands.h"
#include "engine/cli/train_help.h"
#include "engine/run/train_job.h"
#include "net/stop_signal.h"

#define ERR_LEN 512

static const char usage[] = "asgd train [--model M] [--data SPEC] [--mode hogwild|locked|sync] [--threads T] ...";
static const char description[] =
    "Trains one model on one machine with T threads and reports loss and accuracy (or RMSE)\n"
    "over time. --data SPEC is one of: fashion-mnist (dense images); gen:sparse[:n=,dim=,nnz=,\n"
    "zipf=,noise=,seed=]; gen:ratings[:users=,items=,rank=,n=,noise=,seed=]; or a file: libsvm\n"
    "or dense CSV (NAME.csv, NAME.tsv or csv:PATH; --label-column, --csv-header) for models on\n"
    "sparse features (softmax and mlp too: any --data but fashion-mnist), ratings (CSV/TSV/\n"
    "MovieLens ::) for models on ratings. Labels are integer class ids, kept in model files. Each\n"
    "model's data, defaults (--data, --lr, --batch, --l2) and own flags are listed below.\n"
    "Prints a startup line and progress on stderr, and a one-line JSON summary on stdout.\n"
    "--delay or --simulate-workers runs the deterministic staleness simulator instead (one thread;\n"
    "docs/simulation.md): --delay fixed:K | uniform:A,B | geometric:P[,max=M] | trace:FILE | straggler:slow=F[,n=S].";

int cmd_train_has_flag(const char *name) {
    train_job_t *c = train_job_new();
    if (!c) return 0;
    size_t n;
    const flag_spec_t *flags = train_job_flags(c, &n);
    int has = flags_find(flags, n, name) != NULL;
    train_job_destroy(&c);
    return has;
}

// The flags and their checks. Returns -1 to go on, else the exit status (0
// after --help, 2 after a usage error).
static int train_cmd_parse(train_job_t *c, int argc, char **argv) {
    size_t n_flags;
    flag_spec_t *flags = train_job_flags(c, &n_flags);
    int parsed = train_args_command(train_job_args(c), "asgd train", usage, description, flags, n_flags, argc, argv);
    if (parsed >= 0) return parsed;
    char err[ERR_LEN];
    int usage_status = train_job_check(c, err, sizeof err);
    if (usage_status != 0) fprintf(stderr, "%s\n", err);
    return usage_status != 0 ? usage_status : -1;
}

// The exit status of a run that ended with status (0 or 1) and err, said on stderr.
static int train_cmd_outcome(const train_job_t *c, int status, char *err, size_t err_len) {
    int sig = stop_signal_received();
    const train_result_t *r = train_job_result(c);
    if (status == 0 && r->interrupted) {
        fprintf(stderr, "asgd train: stopped by signal %d (%s) after %llu samples\n", sig, strsignal(sig),
                (unsigned long long)r->samples);
        return 128 + sig;
    }
    if (status == 1) {
        if (sig && !strstr(err, "signal")) {
            size_t len = strlen(err);
            snprintf(err + len, err_len - len, " (after signal %d, %s)", sig, strsignal(sig));
        }
        fprintf(stderr, "asgd train: %s\n", err);
    }
    return status;
}

int cmd_train(int argc, char **argv) {
    train_job_t *c = train_job_new();
    if (!c) {
        fprintf(stderr, "asgd train: out of memory\n");
        return 1;
    }
    int status = train_cmd_parse(c, argc, argv);
    if (status < 0) {
        // SIGTERM, SIGINT, SIGHUP: training stops at the next step boundary and the
        // summary is written, marked interrupted; a second signal kills.
        stop_signal_install();
        char err[ERR_LEN] = "";
        status = train_job_execute(c, err, sizeof err) == 0 ? 0 : 1;
        status = train_cmd_outcome(c, status, err, sizeof err);
    }
    train_job_destroy(&c);
    return status;
}
