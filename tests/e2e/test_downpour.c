// Distributed runs end to end: `asgd launch` starting real server and worker
// processes that talk over 127.0.0.1. Checks that
//   - BSP through the parameter server gives the model single-process sync SGD
//     gives with the same global batch, seed and data order (dense and sparse);
//   - ring allreduce gives it too (to float rounding), and every replica ends equal;
//   - SSP keeps the measured staleness within its bound while a slowed worker
//     makes the fast ones wait (the server held some of their pulls), and
//     under ASP the server holds no pull;
//   - every push a worker was acknowledged for was applied exactly once;
//   - payloads through shared memory (--ps-transport shm, asgd launch's
//     default) give the model the sockets give, bit for bit, and every push
//     went by reference;
//   - a failing process is named and the others are stopped, and Ctrl-C stops all.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datasets/text_io.h"
#include "engine/data/data_source.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_downpour_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

static char *run_dir(const char *name) {
    static char path[8][300];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 300, "%s/%s", dir, name);
    return p;
}

static char *summary_of(const char *rd) {
    char path[400];
    snprintf(path, sizeof path, "%s/summary.json", rd);
    return launch_slurp(path);
}

// ---- BSP and allreduce equal single-process synchronous SGD ---------------------

// `servers`: "0" under allreduce, which refuses servers.
static void check_equivalent(const char *label, const char *const *model_args, const char *threads_single,
                             const char *workers, const char *threads_each, const char *sync, const char *servers,
                             double tolerance) {
    char single[300], dist[300], rd[300];
    snprintf(single, sizeof single, "%s/%s-single.bin", dir, label);
    snprintf(dist, sizeof dist, "%s/%s-%s.bin", dir, label, sync);
    snprintf(rd, sizeof rd, "%s/%s-%s", dir, label, sync);
    const char *a[60];
    int n = 0;
    a[n++] = "train";
    for (const char *const *m = model_args; *m; m++) a[n++] = *m;
    const char *tail1[] = {"--mode", "sync", "--threads", threads_single, "--quiet", "--save-model", single, NULL};
    for (const char *const *t = tail1; *t; t++) a[n++] = *t;
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    char *single_out = launch_output("stdout");  // asgd train's JSON summary
    double single_loss = launch_field(single_out, "final_test_loss");
    free(single_out);
    n = 0;
    a[n++] = "launch";
    for (const char *const *m = model_args; *m; m++) a[n++] = *m;
    const char *tail2[] = {"--sync",     sync,      "--servers",    servers, "--workers", workers, "--threads",
                           threads_each, "--quiet", "--save-model", dist,    "--run-dir", rd,      NULL};
    for (const char *const *t = tail2; *t; t++) a[n++] = *t;
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    double diff = launch_model_diff(single, dist);
    printf("%-10s %-9s %s workers x %s threads vs %s threads: largest relative difference %.3g (tolerance %.3g)\n",
           label, sync, workers, threads_each, threads_single, diff, tolerance);
    CHECK(diff <= tolerance);
    char *s = summary_of(rd);
    // The same model, evaluated by the servers' evaluator (which reads only
    // the rows its test examples read, where the model has a row per
    // feature): the same test loss, bit for bit.
    double global_loss = launch_field(s, "final_test_loss");
    printf("%-10s %-9s final test loss: global model %.9g, one process %.9g\n", label, sync, global_loss, single_loss);
    if (tolerance == 0.0) CHECK(global_loss == single_loss);
    if (strcmp(sync, "bsp") == 0) {
        CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
        CHECK(launch_field(launch_section(s, "staleness_clocks"), "max") == 0.0);
    }
    free(s);
}

// Every replica of an allreduce run ends with the same model, bit for bit.
static void check_replicas_agree(const char *rd, int workers) {
    char *first = launch_checksum(rd, 0);
    for (int k = 1; k < workers; k++) {
        char *other = launch_checksum(rd, k);
        if (strcmp(other, first) != 0) {
            fprintf(stderr, "%s: worker %d's parameters have checksum %s, worker 0's %s\n", rd, k, other, first);
            exit(1);
        }
        free(other);
    }
    printf("%s: %d replicas, one model (checksum %s)\n", rd, workers, first);
    free(first);
}

// ---- SSP, ASP and a straggler --------------------------------------------------

// What every run of a racy mode must beat the untrained model by, on both test
// accuracy and test loss.
#define LEARNED_MARGIN 0.1

// merged.csv's rows of worker k: at each point its pushes and pulls so far,
// never fewer than at the point before nor more than its record counts in all
// (the last push follows its last point), and the periods they make: updates
// over pushes and over pulls, exactly (integers, through 9 printed digits).
static void check_merged_periods(const char *rd, int k, double pushes_in_all, double pulls_in_all) {
    char path[400], process[32];
    snprintf(path, sizeof path, "%s/merged.csv", rd);
    snprintf(process, sizeof process, "worker-%d,", k);
    char *merged = launch_slurp(path);
    CHECK(strstr(merged, ",wait_s,pushes,pulls,steps_per_push,steps_per_pull\n"));
    double last_pushes = 0, last_pulls = 0;
    int rows = 0;
    for (const char *line = strstr(merged, process); line; line = strstr(line + 1, process)) {
        if (line[-1] != '\n') continue;
        double v[20];
        int n = 0;
        for (const char *f = strchr(line, ',') + 1; n < 20; n++) {
            v[n] = (*f == ',' || *f == '\n') ? NAN : strtod(f, NULL);
            f += strcspn(f, ",\n");
            if (*f != ',') break;
            f++;
        }
        CHECK(n + 1 == 19);  // fields: the curve's 15, then the four
        double updates = v[3], pushes = v[15], pulls = v[16], per_push = v[17], per_pull = v[18];
        CHECK(pushes >= last_pushes && pulls >= last_pulls);
        CHECK(pushes <= pushes_in_all && pulls <= pulls_in_all);
        CHECK(pushes > 0 ? fabs(per_push * pushes - updates) < 0.5 : isnan(per_push));
        CHECK(pulls > 0 ? fabs(per_pull * pulls - updates) < 0.5 : isnan(per_pull));
        last_pushes = pushes, last_pulls = pulls;
        rows++;
    }
    // The first and last points at least. The last point may come before any
    // push (the worker's last push follows the end of its training, and on a
    // loaded machine its communication thread may not have pushed before):
    // the pushes are in its record.
    CHECK(rows >= 2 && pushes_in_all > 0);
    free(merged);
}

// The periods the workers achieved (summary.json, worker-K.json) agree with
// what they counted: every step is in exactly one push, so a worker's mean
// steps per push times its pushes is its steps, and the run's mean is all
// workers' steps over all their pushes; the threads' wait is the bound's
// share plus the bytes'.
static void check_periods(const char *rd, const char *summary, int workers, double push_every, double fetch_every) {
    const char *push = launch_section(summary, "steps_per_push"), *pull = launch_section(summary, "steps_per_pull");
    CHECK(push && pull);
    // NaN: none asked for (asp's paced default), which the summary says as null.
    double asked_push = launch_field(push, "requested"), asked_pull = launch_field(pull, "requested");
    CHECK(isnan(push_every) ? isnan(asked_push) : asked_push == push_every);
    CHECK(isnan(fetch_every) ? isnan(asked_pull) : asked_pull == fetch_every);
    double steps = 0, pushes = 0, pulls = 0;
    for (int k = 0; k < workers; k++) {
        char path[400];
        snprintf(path, sizeof path, "%s/worker-%d.json", rd, k);
        char *w = launch_slurp(path);
        double updates = launch_field(w, "updates"), n = launch_field(w, "pushes");
        const char *wp = launch_section(w, "steps_per_push");
        CHECK(wp && fabs(launch_field(wp, "mean") * n - updates) < 0.5);  // integers, through 9 printed digits
        CHECK(launch_field(wp, "p99") >= 1);
        check_merged_periods(rd, k, n, launch_field(w, "pulls"));
        steps += updates, pushes += n, pulls += launch_field(w, "pulls");
        free(w);
    }
    CHECK(fabs(launch_field(push, "mean") * pushes - steps) < 0.5);
    // No pull at all (a loaded machine can end a short paced run before the
    // first): the mean is null, as the summary says of a period never achieved.
    double pull_mean = launch_field(pull, "mean");
    CHECK(pulls == 0 ? isnan(pull_mean) : fabs(pull_mean * pulls - steps) < 0.5);
    double bound = launch_field(summary, "worker_wait_for_bound_s"),
           bytes = launch_field(summary, "worker_wait_for_bytes_s");
    CHECK(bound >= 0 && bytes >= 0 && fabs(bound + bytes - launch_field(summary, "worker_wait_s")) <= 1e-6);
    printf(
        "     achieved: %.1f steps per push (p99 %g), %.1f per pull (p99 %g), requested %g; waited %.3f s for the "
        "bound, %.3f s for bytes\n",
        launch_field(push, "mean"), launch_field(push, "p99"), launch_field(pull, "mean"), launch_field(pull, "p99"),
        push_every, bound, bytes);
}

static void check_staleness(void) {
    // The servers average the three workers' deltas (--server-lr = lr / 3):
    // summed at the workers' own step (0.5), every mode's global model swings
    // (test loss 0.38 -> 0.88 -> 0.40 between evaluations, up to 2.5 under
    // asp), and a run's final iterate is a draw from that (docs/distributed.md,
    // "Summed deltas and the hot coordinates").
    const char *common[] = {"--model",        "logreg", "--data",       "gen:sparse:n=30000,dim=3000,nnz=20",
                            "--servers",      "1",      "--workers",    "3",
                            "--threads",      "1",      "--push-every", "10",
                            "--fetch-every",  "10",     "--server-lr",  "0.1667",
                            "--delay-worker", "0:0.05", "--quiet",      NULL};
    struct {
        const char *sync, *bound;
    } runs[] = {{"ssp", "2"}, {"ssp", "0"}, {"asp", NULL}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        char name[64];
        snprintf(name, sizeof name, "straggler-%s-%s", runs[r].sync, runs[r].bound ? runs[r].bound : "inf");
        char *rd = run_dir(name);
        const char *a[60];
        int n = 0;
        a[n++] = "launch";
        for (const char *const *c = common; *c; c++) a[n++] = *c;
        a[n++] = "--sync";
        a[n++] = runs[r].sync;
        if (runs[r].bound) {
            a[n++] = "--staleness";
            a[n++] = runs[r].bound;
        }
        a[n++] = "--run-dir";
        a[n++] = rd;
        a[n] = NULL;
        CHECK(launch_run(a) == 0);
        char *s = summary_of(rd);
        double max = launch_field(launch_section(s, "staleness_clocks"), "max");
        char path[400];
        snprintf(path, sizeof path, "%s/server-0.json", rd);
        char *server = launch_slurp(path);
        // Pulls the server could not answer at once: a worker asked for a
        // round the slowest worker had not pushed yet.
        double waited = launch_field(server, "pulls_waited"), answered = launch_field(server, "pulls_answered");
        double acc = launch_field(s, "final_test_accuracy"), loss = launch_field(s, "final_test_loss");
        printf(
            "%-4s bound %-3s: staleness max %g clocks, %g of %g pulls waited at the server, accuracy %.3f, test loss "
            "%.4f\n",
            runs[r].sync, runs[r].bound ? runs[r].bound : "inf", max, waited, answered, acc, loss);
        CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
        // It learned, on every run: the untrained model (all zeros) scores
        // 0.504 with loss ln 2 = 0.693 on this test set, and no constant
        // predictor does better. Measured with the averaging servers, beside
        // two busy loops on the 2 CPUs (3 runs of each mode): asp 0.856 / loss
        // 0.442-0.446, ssp bound 0 0.846-0.852 / 0.442-0.447, ssp bound 2
        // 0.844-0.851 / 0.441-0.448, and no evaluation of the later two thirds
        // of a run above loss 0.56.
        CHECK(acc >= 0.504 + LEARNED_MARGIN);
        CHECK(loss <= 0.693 - LEARNED_MARGIN);
        check_periods(rd, s, 3, 10, 10);
        const char *config = launch_section(s, "config");
        CHECK(launch_field(config, "train_examples") == 27000.0);  // 30,000 generated, 10% held out
        CHECK(strstr(config, runs[r].bound ? "\"staleness\":" : "\"staleness\":null"));
        if (runs[r].bound) CHECK(launch_field(config, "staleness") == atof(runs[r].bound));
        CHECK(answered > 0);
        if (runs[r].bound) {
            CHECK(max <= atof(runs[r].bound));
            CHECK(waited > 0);  // the straggler held the others back
        } else {
            CHECK(waited == 0);  // ASP pulls never ask for a round
            CHECK(max > 2.0);  // and its staleness is not bounded by anything but the straggler
        }
        free(server);
        free(s);
    }
}

// ---- a model read by key moves its working set ---------------------------------

// The distinct features of every example of a data spec (training and test
// sets together: what a worker loads).
static size_t features_used(const char *spec) {
    char err[256];
    data_options_t o = {.spec = spec, .test_fraction = 0.1, .seed = 1};
    data_bundle_t b;
    data_bundle_init(&b);
    CHECK(data_bundle_load(&o, DATA_KIND_SPARSE, &b, err, sizeof err) == 0);
    uint8_t *seen = calloc(b.sparse_train.dim, 1);
    CHECK(seen != NULL);
    size_t used = 0;
    const sparse_dataset_t *sets[] = {&b.sparse_train, &b.sparse_test};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->nnz; i++)
            if (!seen[sets[k]->col[i]]) seen[sets[k]->col[i]] = 1, used++;
    free(seen);
    data_bundle_free(&b);
    return used;
}

// logreg with a million weights (4 MB), 20 features per example: the workers
// pull the keys their next steps read and push the keys they wrote, and
// never the whole model: a fresh worker starts from the seeded model the
// servers started from, and the final evaluation pulls what the test set
// reads. ssp with bound 0 makes every round wait for a pull, so there are many.
// Each worker holds only the weights of the features its data uses.
static void check_working_set(void) {
    const double model_bytes = 4.0 * (1000000 + 1);
    char *rd = run_dir("working-set");
    const char *a[] = {"launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=4000,dim=1000000,nnz=20",
                       "--servers",
                       "2",
                       "--workers",
                       "2",
                       "--sync",
                       "ssp",
                       "--staleness",
                       "0",
                       "--push-every",
                       "10",
                       "--fetch-every",
                       "10",
                       "--quiet",
                       "--run-dir",
                       rd,
                       NULL};
    CHECK(launch_run(a) == 0);
    size_t used = features_used("gen:sparse:n=4000,dim=1000000,nnz=20");
    CHECK(used > 0 && used < 4000 * 20);
    char *s = summary_of(rd);
    CHECK(launch_field(launch_section(s, "staleness_clocks"), "max") == 0.0);
    CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
    check_periods(rd, s, 2, 10, 10);
    for (int k = 0; k < 2; k++) {
        char path[400];
        snprintf(path, sizeof path, "%s/worker-%d.json", rd, k);
        char *w = launch_slurp(path);
        double pulls = launch_field(w, "pulls"), in = launch_field(w, "bytes_in"), out = launch_field(w, "bytes_out");
        printf("working set: worker %d pulled %g times, %.0f bytes in, %.0f out (the model: %.0f)\n", k, pulls, in, out,
               model_bytes);
        CHECK(pulls >= 10);  // 90 rounds of 10 steps, each waiting for the one before it
        CHECK(in < 0.5 * model_bytes);  // no whole pull
        CHECK(out < 1.0 * model_bytes);  // the first push compares every key, but sends what changed
        // It holds the weights of the features its data uses and the bias, not the model.
        printf("working set: worker %d holds %g of the model's %g parameters (%zu features used)\n", k,
               launch_field(w, "params_held"), launch_field(w, "model_params"), used);
        CHECK(launch_field(w, "model_params") == 1000001.0);
        CHECK(launch_field(w, "params_held") == (double)(used + 1));
        free(w);
    }
    free(s);
}

// ---- the launch says when its workers mostly waited ----------------------------

// SSP with a bound of 2 steps (push and fetch every step) waits on a pull's
// round trip before nearly every step: the launch says so, naming the flags.
// ASP pushing every 50 steps waits for nothing: no such line.
// asp with neither period given paces its exchanges (comm_share 0.25, no
// period asked: null in the config and the periods); one period given is
// honoured as asked. Either way every step is in exactly one push and every
// acknowledged push was applied once.
static void check_paced_default(void) {
    const char *periods[][3] = {{NULL}, {"--push-every", "1", NULL}};
    for (int r = 0; r < 2; r++) {
        char *rd = run_dir(r == 0 ? "paced" : "push-every-1");
        const char *a[32] = {"launch", "--model",  "logreg",    "--data",  "gen:sparse:n=4000,dim=2000,nnz=20",
                             "--sync", "asp",      "--servers", "1",       "--workers",
                             "2",      "--epochs", "2",         "--quiet", "--run-dir",
                             rd};
        size_t n = 16;
        for (int k = 0; periods[r][k]; k++) a[n++] = periods[r][k];
        a[n] = NULL;
        CHECK(launch_run(a) == 0);
        char *s = summary_of(rd);
        const char *config = launch_section(s, "config");
        CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
        double samples = launch_field(s, "samples");
        CHECK(samples == 2 * 3600.0);  // 2 epochs of 3,600 training examples, shared by the workers
        CHECK(fabs(launch_field(s, "bytes_in_per_sample") * samples - launch_field(s, "bytes_in")) < 1.0);
        CHECK(fabs(launch_field(s, "bytes_out_per_sample") * samples - launch_field(s, "bytes_out")) < 1.0);
        if (r == 0) {
            CHECK(launch_field(config, "comm_share") == 0.25);
            CHECK(strstr(config, "\"push_every\":null") && strstr(config, "\"fetch_every\":null"));
            check_periods(rd, s, 2, NAN, NAN);
        } else {
            CHECK(launch_field(config, "comm_share") == 0.0);
            CHECK(launch_field(config, "push_every") == 1.0 && launch_field(config, "fetch_every") == 1.0);
            check_periods(rd, s, 2, 1, 1);
        }
        free(s);
    }
}

// The same BSP run three ways: its rounds through shared memory (a local
// launch's default: net/ps_local_round.h), its payloads through shared memory
// inside ZeroMQ messages (a run whose servers checkpoint keeps its rounds to
// the sockets), and inside the messages (tcp): the same model, bit for bit.
// With shared-memory rounds every push went through them, no message
// carried a reference, and the values came back by reference; by reference every push went so and every pull came
// back so (the worker's count also holds its final pull); under tcp neither.
static void check_transports(void) {
    const char *names[] = {"transport-rounds", "transport-refs", "transport-tcp"};
    char model[3][300];
    for (int k = 0; k < 3; k++) {
        char *rd = run_dir(names[k]);
        snprintf(model[k], sizeof model[k], "%s.bin", rd);
        const char *a[] = {"launch",
                           "--model",
                           "mlp",
                           "--hidden",
                           "64",
                           "--train-limit",
                           "2000",
                           "--test-limit",
                           "200",
                           "--batch",
                           "8",
                           "--sync",
                           "bsp",
                           "--servers",
                           "1",
                           "--workers",
                           "2",
                           "--ps-transport",
                           k < 2 ? "shm" : "tcp",
                           "--save-model",
                           model[k],
                           "--quiet",
                           "--run-dir",
                           rd,
                           k == 1 ? "--checkpoint-every" : NULL,
                           "3600",
                           NULL};
        CHECK(launch_run(a) == 0);
        for (int w = 0; w < 2; w++) {
            char name[32];
            snprintf(name, sizeof name, "worker-%d.json", w);
            char *j = launch_file(names[k], name);
            double pushes = launch_field(j, "pushes"), pulls = launch_field(j, "pulls");
            double rounds = launch_field(j, "local_rounds");
            double sent = launch_field(j, "messages_sent_by_reference");
            double came = launch_field(j, "messages_received_by_reference");
            printf(
                "%s: worker %d: %g pushes, %g pulls, %g rounds in shared memory; %g messages sent and %g received "
                "by reference\n",
                names[k], w, pushes, pulls, rounds, sent, came);
            CHECK(strstr(j, k < 2 ? "\"ps_transport\":\"shm\"" : "\"ps_transport\":\"tcp\""));
            CHECK(pushes == 125.0);  // 2,000 examples in batches of 8, shared by 2 workers
            CHECK(launch_field(j, "messages_inline_for_want_of_slot") == 0.0);
            if (k == 0) {
                CHECK(rounds == pushes && sent == 0.0);
                CHECK(came >= pulls);  // the round's values referred to where the shard keeps them
            } else if (k == 1) {
                CHECK(rounds == 0.0 && sent == pushes);
                CHECK(came >= pulls && pulls >= pushes);
            } else {
                CHECK(rounds == 0.0 && sent == 0.0 && came == 0.0);
            }
            free(j);
        }
        char *summary = launch_file(names[k], "summary.json");
        CHECK(launch_field(summary, "local_rounds") == (k == 0 ? launch_field(summary, "pushes") : 0.0));
        free(summary);
    }
    for (int k = 1; k < 3; k++) {
        double diff = launch_model_diff(model[0], model[k]);
        printf("bsp rounds in shared memory against %s: largest relative difference %.3g\n", names[k], diff);
        CHECK(diff == 0.0);
    }
}

static void check_wait_hint(void) {
    const char *ssp[] = {"launch",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=6000,dim=2000,nnz=20",
                         "--workers",
                         "2",
                         "--sync",
                         "ssp",
                         "--staleness",
                         "2",
                         "--run-dir",
                         run_dir("hint-ssp"),
                         NULL};
    CHECK(launch_run(ssp) == 0);
    char path[400];
    snprintf(path, sizeof path, "%s/stderr", dir);
    char *err = launch_slurp(path);
    const char *line = strstr(err, "asgd launch: the workers waited ");
    CHECK(line && strstr(line, "for pulls to come back; a larger --push-every and --fetch-every (now 1, 1)"));
    printf("wait hint: %.*s\n", (int)strcspn(line, "\n"), line);
    free(err);
    const char *asp[] = {"launch",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=6000,dim=2000,nnz=20",
                         "--workers",
                         "2",
                         "--sync",
                         "asp",
                         "--push-every",
                         "50",
                         "--fetch-every",
                         "50",
                         "--run-dir",
                         run_dir("hint-asp"),
                         NULL};
    CHECK(launch_run(asp) == 0);
    err = launch_slurp(path);
    CHECK(!strstr(err, "asgd launch: the workers waited "));
    // The periods: said exactly when a mean in the summary is more than twice the request.
    char *summary = launch_file("hint-asp", "summary.json");
    double push_mean = launch_field(launch_section(summary, "steps_per_push"), "mean"),
           pull_mean = launch_field(launch_section(summary, "steps_per_pull"), "mean");
    const char *said = strstr(err, "asgd launch: the workers pushed every ");
    CHECK(!said == !(push_mean > 100 || pull_mean > 100));
    if (said) {
        char want[160], pulled[48] = "did not pull";
        if (!isnan(pull_mean)) snprintf(pulled, sizeof pulled, "pulled every %.0f", pull_mean);
        snprintf(want, sizeof want,
                 "pushed every %.0f steps and %s on average (asked: --push-every 50, "
                 "--fetch-every 50)",
                 push_mean, pulled);
        CHECK(strstr(said, want));
    }
    printf("period hint (means %.0f, %.0f of 50): %s\n", push_mean, pull_mean, said ? "said" : "not said");
    free(summary);
    free(err);
}

// global.csv's test losses (column 8, dist_curve_columns) into out; returns how many.
static size_t global_losses(const char *name, double *out, size_t max) {
    char *csv = launch_file(name, "global.csv");
    size_t n = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1] && n < max; line = strchr(line + 1, '\n')) {
        const char *field = line + 1;
        for (int c = 0; c < 7; c++) field = strchr(field, ',') + 1;
        out[n++] = *field == ',' ? NAN : strtod(field, NULL);
    }
    free(csv);
    return n;
}

// The divergence line of the run `name`, whose stderr is err: the summary's
// untrained_test_loss is global.csv's first row and its peak_test_loss the
// highest row after it or the final row (the model after the last push,
// final_test_loss: the curve's last point), and the line is said, with
// `help`, exactly when the peak is above the untrained loss. Returns whether
// it was said. global.csv's last row is the final model too (the evaluator
// reads it once every worker has left); before that row it may hold the
// untrained one alone: these runs train for a few milliseconds, and the one
// point due after it (the epoch's end) is the end of training.
static int check_divergence_line(const char *name, const char *err, const char *help) {
    double loss[64];
    size_t n = global_losses(name, loss, 64);
    CHECK(n >= 1);
    char *summary = launch_file(name, "summary.json");
    double peak = launch_field(summary, "final_test_loss");
    for (size_t i = 1; i < n; i++)
        if (loss[i] > peak) peak = loss[i];
    CHECK(fabs(launch_field(summary, "untrained_test_loss") - loss[0]) < 1e-8 && fabs(loss[0] - log(2.0)) < 1e-6);
    CHECK(fabs(launch_field(summary, "peak_test_loss") - peak) <= 1e-6 * peak);
    free(summary);
    const char *said = strstr(err, "asgd launch: the global model's test loss rose above the untrained");
    CHECK(!said == !(peak > loss[0]));
    if (said) CHECK(strstr(said, help) && strchr(said, '\n') > strstr(said, help));
    printf("divergence line (%s, peak %.4g against %.4g): %.*s\n", name, peak, loss[0],
           said ? (int)strcspn(said, "\n") : 9, said ? said : "not said");
    return said != NULL;
}

// --hot-params. Auto: the asp run of check_wait_hint (logreg, default
// --server-lr) averages its bias; the straggler runs give --server-lr
// (averaging every parameter), so auto sums there. Asked for, each way, on
// workers slowed to make many pushes of 50 steps (--push-every 50, batch 1):
// average divides the bias of every push of 16 examples or more
// (pushes_hot_sized), the first among them, and of no other; sum divides
// none. How many pushes are smaller is the schedule's: the end's (the last
// steps, and a push whose steps changed nothing), and under load more (a CI
// run under ASan had 3 of 52; a push's steps are counted when it starts, and
// a thread that crosses a round's end meanwhile leaves the next push short).
static void check_hot_params(void) {
    static const struct {
        const char *run, *want;
    } runs[] = {{"hint-asp", "average"}, {"straggler-asp-inf", "sum"}, {"hot-average", "average"}, {"hot-sum", "sum"}};
    for (size_t r = 2; r < 4; r++) {
        const char *a[] = {"launch",
                           "--model",
                           "logreg",
                           "--data",
                           "gen:sparse:n=6000,dim=2000,nnz=20",
                           "--workers",
                           "2",
                           "--sync",
                           "asp",
                           "--push-every",
                           "50",
                           "--fetch-every",
                           "50",
                           "--server-lr",
                           "0.5",
                           "--delay-worker",
                           "0:0.05,1:0.05",
                           "--hot-params",
                           runs[r].want,
                           "--quiet",
                           "--run-dir",
                           run_dir(runs[r].run),
                           NULL};
        CHECK(launch_run(a) == 0);
    }
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        char *s = launch_file(runs[r].run, "summary.json");
        char want[64];
        snprintf(want, sizeof want, "\"hot_params\":\"%s\"", runs[r].want);
        CHECK(strstr(launch_section(s, "config"), want));
        free(s);
        for (int k = 0; k < 2; k++) {
            char name[32];
            snprintf(name, sizeof name, "worker-%d.json", k);
            char *w = launch_file(runs[r].run, name);
            double pushes = launch_field(w, "pushes"), averaged = launch_field(w, "pushes_hot_averaged");
            double sized = launch_field(w, "pushes_hot_sized");
            printf("hot params (%s, worker %d): %.0f of %.0f pushes averaged, %.0f of 16 examples or more\n",
                   runs[r].run, k, averaged, pushes, sized);
            CHECK(sized <= pushes);
            if (runs[r].want[0] == 's')
                CHECK(averaged == 0);
            else
                CHECK(averaged == sized && sized >= 1);
            free(w);
        }
    }
}

// The asp run of check_wait_hint (its stderr still in place) sums its two
// workers' pushes (--server-lr = --lr 0.5), so when the line is said there it
// names averaging; bsp is sync, so a step 400 times the default diverges on
// every run, and the line asks for a lower --lr.
static void check_divergence_hint(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/stderr", dir);
    char *err = launch_slurp(path);
    check_divergence_line("hint-asp", err, "--server-lr 0.25 (--lr over the 2 workers) averages them");
    free(err);
    const char *bsp[] = {"launch",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=6000,dim=2000,nnz=20",
                         "--workers",
                         "2",
                         "--sync",
                         "bsp",
                         "--lr",
                         "200",
                         "--eval-every",
                         "1000",
                         "--run-dir",
                         run_dir("diverge-bsp"),
                         NULL};
    CHECK(launch_run(bsp) == 0);
    err = launch_slurp(path);
    CHECK(check_divergence_line("diverge-bsp", err, "try a lower --lr (now 200)"));
    free(err);
}

// ---- a failing process --------------------------------------------------------

static void check_failure_named(void) {
    const char *a[] = {"launch",    "--model", "logreg",    "--data",        "/nonexistent/train.svm",
                       "--workers", "2",       "--run-dir", run_dir("fail"), NULL};
    CHECK(launch_run(a) == 1);
    char path[400];
    snprintf(path, sizeof path, "%s/stderr", dir);
    char *err = launch_slurp(path);
    printf("failure: %s", strstr(err, "asgd launch:") ? strstr(err, "asgd launch:") : err);
    CHECK(strstr(err, "failed: exit status 1"));
    CHECK(strstr(err, "/nonexistent/train.svm"));
    free(err);
}

// Ctrl-C stops every process of the run: the launcher exits 130 and no
// server or worker of that run is left behind.
static void check_interrupt(void) {
    char *rd = run_dir("interrupted");
    const char *argv[] = {
        ASGD_BINARY, "launch",    "--model",  "logreg", "--data",         "gen:sparse:n=20000,dim=2000,nnz=20",
        "--workers", "2",         "--epochs", "50",     "--delay-worker", "0:1,1:1",
        "--quiet",   "--run-dir", rd,         NULL};
    char err_path[256];
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    CHECK(posix_spawn(&pid, ASGD_BINARY, &fa, NULL, (char **)argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    // Wait until the workers are training (their CSV logs exist), then
    // interrupt: the event, however long a loaded machine takes to get there
    // (50 epochs at 1 ms a step outlast it); the launch ending first fails.
    char csv[400];
    snprintf(csv, sizeof csv, "%s/worker-1.csv", rd);
    int status;
    while (access(csv, F_OK) != 0) {
        CHECK(waitpid(pid, &status, WNOHANG) == 0);
        usleep(25000);
    }
    CHECK(kill(pid, SIGINT) == 0);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 130);
    char command[600];
    // "[-]" keeps the pattern from matching the shell that runs pgrep.
    snprintf(command, sizeof command, "pgrep -f -- '[-]-run-dir %s' > /dev/null", rd);
    int left = system(command);
    printf("interrupt: launcher exited 130, processes of the run left: %s\n", left == 0 ? "some" : "none");
    CHECK(left != 0);  // pgrep found nothing
}

// The models every exchange must give (bsp = sync, allreduce, the
// transports): bit for bit, or to float rounding.
static void equivalences(void) {
    // Sparse logistic regression on generated data always runs; the dense (MLP)
    // cases need Fashion-MNIST and are skipped, saying so, without it (a
    // failure under ASGD_REQUIRE_ALL=1).
    const char *sparse[] = {"--model", "logreg", "--data", "gen:sparse:n=3000,dim=2000,nnz=20", "--batch", "4",
                            "--lr",    "0.5",    NULL};
    check_equivalent("logreg", sparse, "3", "3", "1", "bsp", "2", 0.0);
    // Workers holding only the weights their data uses (about 21,000 of 200,000): the same model, bit for bit.
    const char *wide[] = {"--model", "logreg", "--data", "gen:sparse:n=3000,dim=200000,nnz=20", "--batch", "4",
                          "--lr",    "0.5",    NULL};
    check_equivalent("logreg-held", wide, "3", "3", "1", "bsp", "2", 0.0);
    // Its global evaluator read the rows its test examples use, not the model.
    char *s0 = launch_file("logreg-held-bsp", "server-0.json");
    double eval_params = launch_field(s0, "eval_params");
    printf("logreg-held: the evaluator read %.0f of 200001 parameters\n", eval_params);
    CHECK(eval_params > 1 && eval_params < 200001.0 / 10.0);
    free(s0);
    check_equivalent("logreg", sparse, "4", "2", "2", "bsp", "2", 1e-5);
    check_equivalent("logreg", sparse, "3", "3", "1", "allreduce", "0", 1e-5);
    check_replicas_agree(run_dir("logreg-allreduce"), 3);
    if (test_have_fashion_mnist("test_downpour: the dense (MLP) cases")) {
        const char *dense[] = {"--model", "mlp",     "--hidden", "16", "--train-limit", "1200", "--test-limit",
                               "200",     "--batch", "8",        NULL};
        check_equivalent("mlp", dense, "2", "2", "1", "bsp", "2", 0.0);
        // One server: each worker's trainer stores its average in the push's
        // frame itself, and the round's values come back into its copy.
        check_equivalent("mlp-1s", dense, "2", "2", "1", "bsp", "1", 0.0);
        check_equivalent("mlp", dense, "2", "2", "1", "allreduce", "0", 1e-5);
        check_replicas_agree(run_dir("mlp-allreduce"), 2);
        // Dense Downpour: pushes written and checksummed block by block, 2 shards.
        char *rd = run_dir("mlp-asp");
        const char *asp[] = {"launch", "--model",       "mlp",       "--hidden",
                             "16",     "--train-limit", "3000",      "--test-limit",
                             "500",    "--batch",       "8",         "--epochs",
                             "2",      "--sync",        "asp",       "--servers",
                             "2",      "--workers",     "2",         "--push-every",
                             "4",      "--fetch-every", "4",         "--server-lr",
                             "0.025",  "--quiet",       "--run-dir", rd,
                             NULL};
        CHECK(launch_run(asp) == 0);
        char *sum = summary_of(rd);
        printf("mlp asp: accuracy %.3f, pushes %g, acked pushes applied once: %s\n",
               launch_field(sum, "final_test_accuracy"), launch_field(sum, "pushes"),
               strstr(sum, "\"acked_pushes_applied_once\":true") ? "yes" : "no");
        CHECK(strstr(sum, "\"acked_pushes_applied_once\":true"));
        // 10 classes: a uniform guess's loss is ln 10 = 2.303 (the untrained
        // network's is no lower). asp's accuracy follows how the workers
        // interleave (test_compress_launch saw 0.59 to 0.74 for one run); that
        // it learned holds on every run. The MLP's learning is checked bit for
        // bit where it is deterministic: bsp against sync above.
        CHECK(launch_field(sum, "pushes") > 0);
        CHECK(launch_field(sum, "final_test_loss") <= log(10.0) - LEARNED_MARGIN);
        free(sum);
        check_transports();
    }
}

// Two parts, each its own ctest (tests/tests.cmake: PARTS), so that they run
// side by side: "equivalences" (above) and "async" (the staleness bounds, the
// working set, the periods, the hints, failures and Ctrl-C); no argument runs both.
int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const char *const parts[] = {"equivalences", "async"};
    int part = test_part(argc, argv, parts, 2), equal = part != 1, async = part != 0;
    CHECK(mkdtemp(dir));
    if (equal) equivalences();
    if (async) {
        check_staleness();
        check_working_set();
        check_paced_default();
        check_wait_hint();
        check_divergence_hint();
        check_hot_params();
        check_failure_named();
        check_interrupt();
    }
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
