// custom_model: trains a model asgd does not ship ("sqhinge",
// sqhinge_model.c) with Hogwild! threads, then as a distributed run of one
// parameter server and two workers under ASP, and prints both results.
//
//   custom_model              both runs, a table on stdout
//   custom_model train ...    the asgd command line, with sqhinge among --model
#include <asgd/asgd.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sqhinge_model.h"

static void print_row(const char *how, const asgd_result_t *r) {
    printf("%-22s %9.3f %10.4f %12llu %12.0f\n", how, r->final.test_metric, r->final.test_loss,
           (unsigned long long)r->samples, r->samples_per_s);
}

int main(int argc, char **argv) {
    char err[512];
    // First, before anything reads the registry; the distributed run starts
    // this program again as its servers and workers, which need it too.
    if (sqhinge_register(err, sizeof err) != 0) {
        fprintf(stderr, "custom_model: %s\n", err);
        return 1;
    }
    int status;
    if (asgd_run_role(argc, argv, &status)) return status;
    if (argc > 1) return asgd_main(argc, argv);

    // The job's common flags, typed (a misspelt field does not compile);
    // the model's own flag by name.
    asgd_job_config_t common;
    asgd_job_config_init(&common);
    common.model = "sqhinge";
    common.data = "gen:sparse:n=6000,dim=2000,nnz=20,seed=3";
    common.epochs = 3;
    common.lr = 0.05;
    common.seed = 1;
    asgd_job_config_t hogwild = common;
    hogwild.threads = 2;
    hogwild.mode = "hogwild";
    // The server averages the two workers' deltas (its step is lr / 2): each
    // push carries hundreds of this cheap model's steps, and summed at the
    // workers' step they overshoot (docs/distributed.md, "Summed deltas and
    // the hot coordinates").
    asgd_job_config_t downpour = common;
    downpour.servers = 1;
    downpour.workers = 2;
    downpour.threads = 1;
    downpour.sync = "asp";
    downpour.server_lr = 0.025;

    asgd_result_t local = {0}, dist = {0};
    asgd_job_t *job = asgd_job_new(err, sizeof err);
    int ok = job && asgd_job_configure(job, &hogwild, err, sizeof err) == 0 &&
             asgd_job_set(job, "margin", "1", err, sizeof err) == 0 && asgd_train(job, &local, err, sizeof err) == 0;
    asgd_job_destroy(&job);
    if (ok) {
        job = asgd_job_new(err, sizeof err);
        ok = job && asgd_job_configure(job, &downpour, err, sizeof err) == 0 &&
             asgd_job_set(job, "margin", "1", err, sizeof err) == 0 && asgd_launch(job, &dist, err, sizeof err) == 0;
        asgd_job_destroy(&job);
    }
    if (!ok) {
        fprintf(stderr, "custom_model: %s\n", err);
        asgd_result_free(&local);
        return 1;
    }
    printf("asgd %s, model %s\n", asgd_version(), local.model);
    printf("%-22s %9s %10s %12s %12s\n", "run", local.metric, "test loss", "samples", "samples/s");
    print_row("hogwild, 2 threads", &local);
    print_row("asp, 1 server 2 workers", &dist);
    asgd_result_free(&local);
    asgd_result_free(&dist);
    return 0;
}
