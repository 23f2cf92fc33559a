// The global model's curve of a distributed run (engine/replica/global_eval.c,
// engine/run/launch_curve.c), through real `asgd launch` runs on 127.0.0.1:
//   - asp: merged.csv's global rows come from the servers' model (they exist
//     while --worker-eval off leaves the workers only their first and last
//     evaluation), start at the initial model, count every worker's samples,
//     and summary.json's target and final figures are exactly those rows';
//   - bsp: the evaluator reads whole rounds (samples a multiple of the round's
//     examples), and the final global row is the model every worker holds;
//   - allreduce: the global rows are worker 0's replica's, samples scaled by
//     the workers;
//   - --eval-every-s: evaluations by time are at least S seconds apart (train
//     and launch);
//   - evaluation off the clock: the evaluator keeps snapshots and evaluates
//     them after training (none counted as during training), or, with
//     --eval-snapshot-mb 0, every one at once while the workers train (all
//     counted so); global.csv marks each row;
//   - global.csv's last row is the servers' final model, read by the
//     evaluator (the whole model, or its keys) once every worker has left,
//     while the shards serve on for it: equal to what the last worker's
//     final pull read, with one shard and with two.
#include <math.h>
#include <sys/stat.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_global_eval_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define MAX_ROWS 4096
#define N_COLS 16  // process + the 15 curve columns

typedef struct rows {
    double v[MAX_ROWS][N_COLS - 1];  // wall_s .. wait_s; NaN where empty
    size_t n;
} rows_t;

enum {
    WALL,
    EPOCH,
    SAMPLES,
    UPDATES,
    RATE,
    LR,
    TRAIN_LOSS,
    TEST_LOSS,
    ACC,
    RMSE,
    SV_MEAN,
    SV_MAX,
    SC_MEAN,
    SC_MAX,
    WAIT
};

// The rows of one process ("global", "worker-0", ...) of a merged.csv text.
static void rows_of(const char *csv, const char *process, rows_t *out) {
    out->n = 0;
    const char *line = csv;
    int header = 1;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (header) {
            CHECK(strncmp(line,
                          "process,wall_s,epoch,samples,updates,samples_per_s,lr,train_loss,test_loss,test_accuracy,"
                          "test_rmse,staleness_versions_mean,staleness_versions_max,staleness_clocks_mean,"
                          "staleness_clocks_max,wait_s,pushes,pulls,steps_per_push,steps_per_pull",
                          len) == 0);
            header = 0;
        } else if (strncmp(line, process, strlen(process)) == 0 && line[strlen(process)] == ',') {
            CHECK(out->n < MAX_ROWS);
            double *v = out->v[out->n++];
            const char *p = line + strlen(process) + 1;
            for (int c = 0; c < N_COLS - 1; c++) {
                const char *stop = p + strcspn(p, ",\n");
                v[c] = stop > p ? strtod(p, NULL) : NAN;
                p = *stop == ',' ? stop + 1 : stop;
            }
        }
        if (!end) break;
        line = end + 1;
    }
}

static char *rd(const char *name) {
    static char path[8][300];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 300, "%s/%s", dir, name);
    return p;
}

#define DATA "gen:sparse:n=12000,dim=2000,nnz=20,seed=3"

// Every row of run `name`'s global.csv says during_training = `expected`,
// but the last, which says `last`. Returns the rows.
static size_t check_during_training_column(const char *name, int expected, int last) {
    char *csv = launch_file(name, "global.csv");
    const char *header_end = strchr(csv, '\n');
    CHECK(header_end && strstr(csv, ",eval_s,during_training\n") == header_end - strlen(",eval_s,during_training"));
    size_t rows = 0;
    for (const char *line = header_end + 1; *line; rows++) {
        const char *end = strchr(line, '\n');
        CHECK(end && end - line >= 2 && end[-2] == ',');
        CHECK(end[-1] == '0' + (end[1] ? expected : last));
        line = end + 1;
    }
    CHECK(rows >= 2);
    free(csv);
    return rows;
}

// The largest global_versions of run `name`'s workers (those of the last
// pull after the last push), and that worker's global_test_loss.
static double last_pull_loss(const char *name, size_t workers) {
    double versions = -1.0, loss = NAN;
    for (size_t k = 0; k < workers; k++) {
        char file[32];
        snprintf(file, sizeof file, "worker-%zu.json", k);
        char *w = launch_file(name, file);
        if (launch_field(w, "global_versions") > versions) {
            versions = launch_field(w, "global_versions");
            loss = launch_field(w, "global_test_loss");
        }
        free(w);
    }
    return loss;
}

// With no room for snapshots the evaluator evaluates at once, while the
// workers train, and the summary counts every evaluation as such, but for
// the last: the servers' final model, read once every worker has left (so
// not during training). It counts every sample, holds what the last
// worker's final pull read, and is the merged curve's last global row (no
// second final row after it).
static void test_live(void) {
    const char *args[] = {
        "launch", "--servers",     "1",      "--workers",      "2",        "--threads",    "1",    "--sync",
        "asp",    "--model",       "logreg", "--data",         DATA,       "--epochs",     "1",    "--batch",
        "20",     "--lr",          "2",      "--delay-worker", "0:1,1:1",  "--eval-every", "2000", "--eval-snapshot-mb",
        "0",      "--worker-eval", "off",    "--run-dir",      rd("live"), "--quiet",      NULL};
    CHECK(launch_run(args) == 0);
    char *summary = launch_file("live", "summary.json"), *merged = launch_file("live", "merged.csv");
    double evals = launch_field(summary, "global_evaluations");
    printf("live: %g evaluations, %g during training (%.3f s)\n", evals,
           launch_field(summary, "global_evaluations_during_training"),
           launch_field(summary, "global_eval_during_training_s"));
    size_t rows = check_during_training_column("live", 1, 0);
    CHECK(evals == (double)rows && launch_field(summary, "global_evaluations_during_training") == evals - 1);
    CHECK(launch_field(summary, "global_eval_during_training_s") > 0.0);
    static rows_t g;
    rows_of(merged, "global", &g);
    CHECK(g.n == rows);
    const double *end = g.v[g.n - 1];
    CHECK(end[SAMPLES] == launch_field(summary, "samples") && end[SAMPLES] >= g.v[g.n - 2][SAMPLES]);
    double pulled = last_pull_loss("live", 2);
    CHECK(fabs(end[TEST_LOSS] - pulled) <= 1e-8 * pulled);  // both printed to 9 digits
    CHECK(launch_field(summary, "final_test_loss") == end[TEST_LOSS]);
    printf("live: the final row, %.0f samples, test loss %.9g (the last worker's final pull: %.9g)\n", end[SAMPLES],
           end[TEST_LOSS], pulled);
    free(merged);
    free(summary);
}

// The same final row where the evaluator reads only the keys its test
// examples read (engine/run/worker_keys.h): it gives what the last worker's
// final pull gave.
#define KEYED_DATA "gen:sparse:n=3000,dim=100000,nnz=20,seed=3"  // the test set reads ~3% of the features
static void test_final_by_key(void) {
    const char *args[] = {"launch",   "--servers", "1",          "--workers",    "2",      "--threads",
                          "1",        "--sync",    "asp",        "--model",      "logreg", "--data",
                          KEYED_DATA, "--epochs",  "1",          "--eval-every", "1000",   "--worker-eval",
                          "off",      "--run-dir", rd("by-key"), "--quiet",      NULL};
    CHECK(launch_run(args) == 0);
    char *server = launch_file("by-key", "server-0.json"), *summary = launch_file("by-key", "summary.json");
    char *merged = launch_file("by-key", "merged.csv");
    double read = launch_field(server, "eval_params");
    CHECK(read > 0 && read < 100001);  // the evaluator's keys, not the model
    static rows_t g;
    rows_of(merged, "global", &g);
    CHECK(g.n >= 2);
    const double *end = g.v[g.n - 1];
    CHECK(end[SAMPLES] == launch_field(summary, "samples"));
    double pulled = last_pull_loss("by-key", 2);
    CHECK(fabs(end[TEST_LOSS] - pulled) <= 1e-8 * pulled);
    printf("by key: the evaluator reads %.0f of 100001 parameters; final row %.9g (the last final pull: %.9g)\n", read,
           end[TEST_LOSS], pulled);
    free(merged);
    free(summary);
    free(server);
}

static void test_asp(void) {
    // 3 ms after each 20-example step: about 150 ms between evaluation points,
    // so the evaluator (polling every 2 ms) reaches most of them. A step's
    // delay longer than a pull's round trip also keeps the workers' staleness
    // near 1 on a slow build: at 1 ms, under TSan, pulls in the background
    // took ~3 steps each, the servers saw staleness 6-12, and at lr 2 the
    // summed deltas made the global model oscillate below 0.75 all run
    // (asynchrony's real cost, not a bookkeeping fault).
    const char *args[] = {
        "launch", "--servers",     "2",      "--workers",      "2",       "--threads",    "1",    "--sync",
        "asp",    "--model",       "logreg", "--data",         DATA,      "--epochs",     "2",    "--batch",
        "20",     "--lr",          "2",      "--delay-worker", "0:3,1:3", "--eval-every", "2000", "--target-acc",
        "0.75",   "--worker-eval", "off",    "--run-dir",      rd("asp"), "--quiet",      NULL};
    CHECK(launch_run(args) == 0);
    char *merged = launch_file("asp", "merged.csv"), *summary = launch_file("asp", "summary.json");
    static rows_t g, w0;
    rows_of(merged, "global", &g);
    rows_of(merged, "worker-0", &w0);
    // The workers evaluated twice each (start, end); the servers' model at
    // the evaluation points: 10 in 2 epochs of 10,800 examples (split between
    // the workers), plus the start and the final rows (the evaluator folds
    // points it reaches late into one, so fewer on a loaded machine).
    CHECK(w0.n == 2);
    CHECK(g.n >= 5 && g.n <= 12);
    double total = launch_field(summary, "samples"), train = launch_field(summary, "train_examples");
    CHECK(total == 2 * train);
    // The first row is the model as the run starts (logreg's w = 0: loss ln 2).
    CHECK(g.v[0][SAMPLES] < 2000);
    if (g.v[0][SAMPLES] == 0) CHECK(fabs(g.v[0][TEST_LOSS] - log(2.0)) < 1e-6);
    for (size_t i = 1; i < g.n; i++) {
        CHECK(g.v[i][SAMPLES] >= g.v[i - 1][SAMPLES] && g.v[i][WALL] >= g.v[i - 1][WALL]);
        CHECK(fabs(g.v[i][EPOCH] - g.v[i][SAMPLES] / train) < 1e-5);
    }
    CHECK(g.v[g.n - 1][SAMPLES] == total);
    // Staleness so far: running maxima, present once updates were applied; the
    // last row's are the run's (summary.json).
    for (size_t i = 2; i < g.n; i++)
        CHECK(g.v[i][SV_MAX] >= g.v[i - 1][SV_MAX] && g.v[i][SC_MAX] >= g.v[i - 1][SC_MAX]);
    CHECK(g.v[g.n - 1][SV_MAX] == launch_field(launch_section(summary, "staleness_updates"), "max"));
    CHECK(g.v[g.n - 1][SC_MAX] == launch_field(launch_section(summary, "staleness_clocks"), "max"));
    // Summary figures are the global rows': the first row at the target (none
    // when no row reached it: how far asp learns here depends on the
    // staleness the machine's speed makes, so both cases are checked), the last row.
    size_t hit = 0;
    while (hit < g.n && !(g.v[hit][ACC] >= 0.75)) hit++;
    if (hit < g.n) {
        CHECK(fabs(launch_field(summary, "time_to_target_s") - g.v[hit][WALL]) < 1e-5);
        CHECK(launch_field(summary, "samples_to_target") == g.v[hit][SAMPLES]);
        CHECK(fabs(launch_field(summary, "epochs_to_target") - g.v[hit][EPOCH]) < 1e-5);
    } else {
        CHECK(isnan(launch_field(summary, "time_to_target_s")) && isnan(launch_field(summary, "samples_to_target")) &&
              isnan(launch_field(summary, "epochs_to_target")));
    }
    CHECK(launch_field(summary, "final_test_accuracy") == g.v[g.n - 1][ACC]);
    // Every row is the evaluator's, the last too: the shards served on until
    // it had read the final model (what the last worker's final pull read).
    CHECK(launch_field(summary, "global_evaluations") == (double)g.n);
    double pulled = last_pull_loss("asp", 2);
    CHECK(fabs(g.v[g.n - 1][TEST_LOSS] - pulled) <= 1e-8 * pulled);
    // Every evaluation was made after training, from a snapshot.
    CHECK(launch_field(summary, "global_evaluations_during_training") == 0.0);
    CHECK(launch_field(summary, "global_eval_during_training_s") == 0.0);
    check_during_training_column("asp", 0, 0);
    // Worker 0's own figures are named as such (here: only its final evaluation).
    CHECK(launch_field(summary, "worker0_test_accuracy") == w0.v[1][ACC]);
    if (hit < g.n)
        printf("asp: %zu global rows; target 0.75 at %.0f samples (%.3f s), final %.4f (worker 0's copy: %.4f)\n", g.n,
               g.v[hit][SAMPLES], g.v[hit][WALL], g.v[g.n - 1][ACC], w0.v[1][ACC]);
    else
        printf("asp: %zu global rows; target 0.75 not reached (summary: null), final %.4f (worker 0's copy: %.4f)\n",
               g.n, g.v[g.n - 1][ACC], w0.v[1][ACC]);
    free(merged);
    free(summary);
}

static void test_bsp(void) {
    const char *args[] = {"launch", "--servers",    "2",      "--workers", "2",       "--threads", "1", "--sync",
                          "bsp",    "--model",      "logreg", "--data",    DATA,      "--epochs",  "1", "--batch",
                          "10",     "--eval-every", "1000",   "--run-dir", rd("bsp"), "--quiet",   NULL};
    CHECK(launch_run(args) == 0);
    char *merged = launch_file("bsp", "merged.csv");
    static rows_t g, w0, w1;
    rows_of(merged, "global", &g);
    rows_of(merged, "worker-0", &w0);
    rows_of(merged, "worker-1", &w1);
    CHECK(g.n >= 6);
    // A round is 2 workers x 10 examples; the shards count whole rounds.
    for (size_t i = 0; i < g.n; i++) {
        CHECK(fmod(g.v[i][SAMPLES], 20.0) == 0.0);
        if (i + 1 < g.n) CHECK(g.v[i][UPDATES] == g.v[i][SAMPLES] / 20.0);
    }
    // The servers' final model is the one both replicas hold.
    CHECK(g.v[g.n - 1][ACC] == w0.v[w0.n - 1][ACC] && g.v[g.n - 1][ACC] == w1.v[w1.n - 1][ACC]);
    CHECK(g.v[g.n - 1][TEST_LOSS] == w0.v[w0.n - 1][TEST_LOSS]);
    // BSP updates are never stale; the workers waited for each other.
    CHECK(g.v[g.n - 1][SV_MAX] == 0 && g.v[g.n - 1][SC_MAX] == 0);
    CHECK(g.v[g.n - 2][WAIT] > 0);
    printf("bsp: %zu global rows of whole rounds; final %.4f on the servers and both replicas\n", g.n,
           g.v[g.n - 1][ACC]);
    free(merged);
}

static void test_allreduce(void) {
    const char *args[] = {"launch",
                          "--servers",
                          "0",
                          "--workers",
                          "2",
                          "--threads",
                          "1",
                          "--sync",
                          "allreduce",
                          "--model",
                          "logreg",
                          "--data",
                          DATA,
                          "--epochs",
                          "1",
                          "--batch",
                          "10",
                          "--eval-every",
                          "2000",
                          "--target-acc",
                          "0.6",
                          "--run-dir",
                          rd("allreduce"),
                          "--quiet",
                          NULL};
    CHECK(launch_run(args) == 0);
    char *merged = launch_file("allreduce", "merged.csv"), *summary = launch_file("allreduce", "summary.json");
    static rows_t g, w0;
    rows_of(merged, "global", &g);
    rows_of(merged, "worker-0", &w0);
    CHECK(g.n == w0.n && g.n >= 5);
    for (size_t i = 0; i < g.n; i++) {
        CHECK(g.v[i][SAMPLES] == 2 * w0.v[i][SAMPLES]);
        CHECK(g.v[i][ACC] == w0.v[i][ACC] && g.v[i][WALL] == w0.v[i][WALL]);
    }
    // --eval-every 2000 counts both workers: worker 0 evaluated every 1,000 of its own.
    CHECK(w0.v[1][SAMPLES] == 1000);
    CHECK(launch_field(summary, "global_evaluations") == 0);
    printf("allreduce: %zu global rows, worker 0's replica with samples of both workers\n", g.n);
    free(merged);
    free(summary);
}

// Evaluations by training time follow a grid of S seconds, each at or after
// a grid point later than the one before (points passed meanwhile are
// skipped): row i, after the starting row 0, is at S*i or later, however
// loaded the machine is. Rows [0, to) are checked; at least 3 must be there.
static void check_on_grid(const rows_t *r, size_t to, double s) {
    CHECK(to >= 3);
    for (size_t i = 1; i < to; i++) CHECK(r->v[i][WALL] >= s * (double)i - 1e-4);
}

static void test_eval_every_s(void) {
    // asgd train: its own CSV (the same columns as a worker's).
    char log[300];
    snprintf(log, sizeof log, "%s/train.csv", dir);
    // 0.4 s of training, however fast the machine: 100 epochs once took under
    // 0.15 s here, too few grid points to check.
    const char *train[] = {"train",      "--model",        "logreg", "--data",       DATA,  "--threads",
                           "2",          "--epochs",       "100000", "--time-limit", "0.4", "--eval-every",
                           "1000000000", "--eval-every-s", "0.05",   "--eval-limit", "200", "--log",
                           log,          "--quiet",        NULL};
    CHECK(launch_run(train) == 0);
    char *csv = launch_slurp(log);
    // Re-read as "worker" rows: prefix each line so rows_of can parse it.
    size_t len = strlen(csv);
    char *tagged = malloc(2 * len + 4096);
    CHECK(tagged);
    char *o = tagged;
    o += sprintf(o,
                 "process,wall_s,epoch,samples,updates,samples_per_s,lr,train_loss,test_loss,test_accuracy,"
                 "test_rmse,staleness_versions_mean,staleness_versions_max,staleness_clocks_mean,"
                 "staleness_clocks_max,wait_s\n");
    const char *line = strchr(csv, '\n');
    while (line && line[1]) {
        const char *end = strchr(line + 1, '\n');
        o += sprintf(o, "t,%.*s\n", (int)(end ? end - line - 1 : (long)strlen(line + 1)), line + 1);
        line = end;
    }
    static rows_t t;
    rows_of(tagged, "t", &t);
    // The start, the time grid, and the final evaluation (which may come sooner).
    check_on_grid(&t, t.n - 1, 0.05);
    printf("train --eval-every-s 0.05: %zu evaluations on a 0.05 s grid of training time\n", t.n);
    free(tagged);
    free(csv);

    const char *launch[] = {
        "launch", "--servers",      "1",       "--workers",    "2",           "--threads",      "1",    "--sync",
        "asp",    "--model",        "logreg",  "--data",       DATA,          "--epochs",       "2",    "--batch",
        "20",     "--delay-worker", "0:1,1:1", "--eval-every", "1000000000",  "--eval-every-s", "0.05", "--eval-limit",
        "200",    "--worker-eval",  "off",     "--run-dir",    rd("by-time"), "--quiet",        NULL};
    CHECK(launch_run(launch) == 0);
    char *merged = launch_file("by-time", "merged.csv");
    static rows_t g;
    rows_of(merged, "global", &g);
    check_on_grid(&g, g.n - 1, 0.05);  // the last row is the final model, at the run's end
    printf("launch --eval-every-s 0.05: %zu global evaluations on a 0.05 s grid\n", g.n);
    free(merged);
}

int main(void) {
    CHECK(mkdtemp(dir));
    test_asp();
    test_live();
    test_final_by_key();
    test_bsp();
    test_allreduce();
    test_eval_every_s();
    CHECK(test_remove_tree(dir) == 0);
    printf("global evaluation tests passed\n");
    return 0;
}
