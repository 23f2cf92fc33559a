// BSP with backup workers (Chen et al. 2016) end to end: `asgd launch --sync bsp
// --backup-workers 1`, 3 workers (one slowed by --delay-worker), 2 server shards.
//   - each shard applies every round of the run (its version equals the rounds
//     the run has), most of them without the slow worker, whose late gradients
//     are acknowledged, counted per worker and dropped; the run finishes and
//     every acknowledged push was taken exactly once;
//   - the global model learns: its final accuracy is well above the untrained
//     model's (the first row of global.csv);
//   - with --backup-workers 0 the same run drops nothing (today's BSP);
//   - the flag is refused outside bsp and when it is not below --workers.
#include <math.h>
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_backup_workers_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define WORKERS 3
#define SERVERS 2
#define N_TRAIN 5400  // n=6000 with the default 10% held out for testing
#define BATCH 8
#define EPOCHS 2
// Every round is WORKERS x 1 thread x BATCH examples of the run's order.
#define ROUNDS (EPOCHS * ((N_TRAIN + WORKERS * BATCH - 1) / (WORKERS * BATCH)))

// The accuracy in the first data row of a CSV with our curve columns (test_accuracy is column 9).
static double first_row_accuracy(const char *csv) {
    const char *line = strchr(csv, '\n');
    CHECK(line);
    line++;
    for (int field = 0; field < 8; field++) {
        line = strchr(line, ',');
        CHECK(line);
        line++;
    }
    return strtod(line, NULL);
}

static void run(const char *name, const char *backups, double *late_slow, double *late_total) {
    char rd[300];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    const char *a[] = {"launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=6000,dim=1000,nnz=20",
                       "--batch",
                       "8",
                       "--lr",
                       "0.5",
                       "--epochs",
                       "2",
                       "--sync",
                       "bsp",
                       "--backup-workers",
                       backups,
                       "--servers",
                       "2",
                       "--workers",
                       "3",
                       "--threads",
                       "1",
                       "--delay-worker",
                       "2:2",
                       "--worker-eval",
                       "off",
                       "--quiet",
                       "--run-dir",
                       rd,
                       NULL};
    CHECK(launch_run(a) == 0);
    char *s = launch_file(name, "summary.json");
    CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
    CHECK(launch_field(launch_section(s, "config"), "backup_workers") == atof(backups));
    *late_total = launch_field(s, "late_gradients_dropped");
    *late_slow = launch_field(launch_section(s, "late_gradients_dropped_by_worker"), "2");
    double fast_late = 0;
    for (int k = 0; k < SERVERS; k++) {
        char file[32];
        snprintf(file, sizeof file, "server-%d.json", k);
        char *sv = launch_file(name, file);
        double applied = launch_field(sv, "rounds_applied");
        const char *by = launch_section(sv, "late_gradients_dropped");
        double slow = launch_field(by, "2");
        fast_late += launch_field(by, "0") + launch_field(by, "1");
        printf("  %s shard %d: %.0f rounds applied of %d, slow worker's gradients dropped in %.0f\n", name, k, applied,
               ROUNDS, slow);
        CHECK(applied == ROUNDS);
        if (atoi(backups) > 0) CHECK(slow > ROUNDS / 2);  // late in most rounds
        free(sv);
    }
    char *g = launch_file(name, "global.csv");
    double untrained = first_row_accuracy(g), acc = launch_field(s, "final_test_accuracy");
    printf(
        "%s (--backup-workers %s): late gradients dropped %.0f (slow worker %.0f, the others %.0f), global accuracy "
        "%.3f vs %.3f untrained (margin %.3f)\n",
        name, backups, *late_total, *late_slow, fast_late, acc, untrained, acc - untrained);
    CHECK(untrained > 0.3 && untrained < 0.7);  // two balanced classes
    CHECK(acc > untrained + 0.15);  // measured: 0.77 vs 0.49
    free(g);
    free(s);
}

static void check_refused(void) {
    struct {
        const char *sync, *backups, *needle;
    } bad[] = {{"bsp", "3", "--backup-workers 3"}, {"asp", "1", "--backup-workers 1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[] = {"launch",       "--model",   "logreg",    "--data", "gen:sparse:n=600,dim=100,nnz=5",
                           "--sync",       bad[i].sync, "--workers", "3",      "--backup-workers",
                           bad[i].backups, NULL};
        launch_expect_refusal(a, bad[i].needle);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    double slow1, total1, slow0, total0;
    run("backup1", "1", &slow1, &total1);
    CHECK(slow1 > 0 && total1 >= slow1);
    run("backup0", "0", &slow0, &total0);
    CHECK(total0 == 0 && slow0 == 0);
    check_refused();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
