// Local SGD end to end (`asgd launch --sync local --local-steps H`, 3 workers):
//   - H = 1 is synchronous allreduce training: the final models of
//     `--sync local --local-steps 1` and `--sync allreduce` agree within float
//     rounding, while H = 4 (fewer averages) differs from allreduce by far more
//     than that tolerance, so the comparison can tell;
//   - the last step is always followed by an average, so every replica ends
//     with the same bits (equal dense_params_checksum), and the averages are
//     counted: one every H steps, and one after the last;
//   - the global curve (worker 0's rows) holds only averaged models: every row
//     between the first and the last is at a step count that is a multiple of H;
//   - the model learns;
//   - --pin puts worker K's threads on the CPUs after workers 0..K-1's (of
//     those the test may use, in turn), as one process's threads would be,
//     and changes no number: H = 1 runs pinned, allreduce not;
//   - a worker held by a straggler counts the time its sums waited (wait_s,
//     through shared memory: worker 1 sleeps 10 ms a round, so worker 0
//     waits most of its time and more than worker 1), and the launch says
//     so in one line naming the flag that would help;
//   - --sync local without --local-steps, --local-steps without --sync local,
//     and momentum are refused.
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_local_sgd_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define WORKERS 3
#define TOLERANCE 1e-5

static const char *path_of(const char *name) {
    static char p[8][400];
    static int next;
    char *s = p[next++ % 8];
    snprintf(s, 400, "%s/%s", dir, name);
    return s;
}

// One run: model_args, then --sync sync (local_steps unless NULL), saving the model as name.model.
static void run(const char *name, const char *const *model_args, const char *sync, const char *local_steps, int pin) {
    const char *a[64];
    int n = 0;
    a[n++] = "launch";
    for (const char *const *m = model_args; *m; m++) a[n++] = *m;
    const char *tail[] = {"--sync",        sync,  "--workers", "3",           "--quiet",
                          "--worker-eval", "off", "--run-dir", path_of(name), NULL};
    for (const char *const *t = tail; *t; t++) a[n++] = *t;
    char model[64];
    snprintf(model, sizeof model, "%s.model", name);
    a[n++] = "--save-model";
    a[n++] = path_of(model);
    if (local_steps) {
        a[n++] = "--local-steps";
        a[n++] = local_steps;
    }
    if (pin) a[n++] = "--pin";
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    // Every replica holds the same model at the end.
    char *c0 = launch_checksum(path_of(name), 0);
    for (int k = 1; k < WORKERS; k++) {
        char *ck = launch_checksum(path_of(name), k);
        CHECK(strcmp(ck, c0) == 0);
        free(ck);
    }
    free(c0);
}

// Each worker's record of its pinned threads: worker k's thread i on the
// (k * threads + i)-th CPU; null when not pinned.
static void check_pinned(const char *name, int pinned) {
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    for (int k = 0; k < WORKERS; k++) {
        char file[32];
        snprintf(file, sizeof file, "worker-%d.json", k);
        char *w = launch_file(name, file);
        size_t threads = (size_t)launch_field(w, "threads");
        const char *cpus = launch_section(w, "pinned_cpus");
        if (!pinned) CHECK(strncmp(cpus, "\"pinned_cpus\":null", 18) == 0);
        for (size_t i = 0; pinned && i < threads; i++) {
            char thread[24];
            snprintf(thread, sizeof thread, "%zu", i);
            CHECK(launch_field(cpus, thread) == test_nth_cpu(&allowed, (size_t)k * threads + i));
        }
        free(w);
    }
}

// Worker 0's rows: each between the first and the last is right after an
// average (its update count a multiple of h); returns how many there are.
static int check_rows_at_averages(const char *name, long h, long rounds) {
    char *csv = launch_file(name, "worker-0.csv");
    const char *line = strchr(csv, '\n');
    CHECK(line);
    int rows = 0;
    long last = -1;
    for (line++; *line; line = strchr(line, '\n') + 1) {
        // wall_s,epoch,samples,updates,...
        const char *p = line;
        for (int f = 0; f < 3; f++) p = strchr(p, ',') + 1;
        long updates = strtol(p, NULL, 10);
        CHECK(updates % h == 0 || updates == rounds);
        CHECK(updates > last);
        last = updates;
        rows++;
        if (!strchr(line, '\n')) break;
    }
    CHECK(last == rounds);
    free(csv);
    return rows;
}

// accuracy: H=4's final test accuracy, measured (with one thread per worker
// the run is deterministic: the same under every OpenBLAS kernel set tried,
// Prescott, Haswell and SkylakeX, run after run), within band.
static void check_equivalence(const char *label, const char *const *model_args, long rounds, double accuracy,
                              double band) {
    char r1[64], ra[64], r4[64], m1[80], ma[80], m4[80];
    snprintf(r1, sizeof r1, "%s-local1", label);
    snprintf(ra, sizeof ra, "%s-allreduce", label);
    snprintf(r4, sizeof r4, "%s-local4", label);
    run(r1, model_args, "local", "1", 1);
    run(ra, model_args, "allreduce", NULL, 0);
    run(r4, model_args, "local", "4", 0);
    check_pinned(r1, 1);
    check_pinned(ra, 0);
    snprintf(m1, sizeof m1, "%s.model", r1);
    snprintf(ma, sizeof ma, "%s.model", ra);
    snprintf(m4, sizeof m4, "%s.model", r4);
    double d1 = launch_model_diff(path_of(ma), path_of(m1)), d4 = launch_model_diff(path_of(ma), path_of(m4));
    char *s1 = launch_file(r1, "summary.json"), *s4 = launch_file(r4, "summary.json");
    char *w4 = launch_file(r4, "worker-0.json");
    double averages = launch_field(w4, "pushes"), acc = launch_field(s4, "final_test_accuracy");
    int rows = check_rows_at_averages(r4, 4, rounds);
    printf(
        "%s: local H=1 vs allreduce: largest relative difference %.3g (tolerance %.1g); local H=4 vs allreduce "
        "%.3g; H=4: %.0f averages in %ld steps, %d curve rows all at averages, accuracy %.3f (H=1: %.3f)\n",
        label, d1, TOLERANCE, d4, averages, rounds, rows, acc, launch_field(s1, "final_test_accuracy"));
    CHECK(d1 <= TOLERANCE);
    CHECK(d4 > 100 * TOLERANCE);  // fewer averages move the model far beyond the tolerance
    CHECK(averages == (double)((rounds + 3) / 4));  // every 4 steps, and after the last
    CHECK(rows >= 3);
    CHECK_NEAR(acc, accuracy, band);
    CHECK(launch_field(launch_section(s4, "config"), "local_steps") == 4);
    CHECK(strstr(s4, "\"global_curve\":\"worker 0's replica\""));
    free(w4);
    free(s1);
    free(s4);
}

static void check_wait_counted(const char *sync, const char *local_steps, const char *hint) {
    char name[32];
    snprintf(name, sizeof name, "straggler-%s", sync);
    const char *a[32] = {"launch",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=600,dim=100,nnz=5",
                         "--batch",
                         "8",
                         "--epochs",
                         "1",
                         "--sync",
                         sync,
                         "--workers",
                         "2",
                         "--collective",
                         "shm",
                         "--delay-worker",
                         "1:10",
                         "--worker-eval",
                         "off",
                         "--run-dir",
                         path_of(name)};
    int n = 21;
    if (local_steps) {
        a[n++] = "--local-steps";
        a[n++] = local_steps;
    }
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    char *w0 = launch_file(name, "worker-0.json"), *w1 = launch_file(name, "worker-1.json");
    double wait0 = launch_field(w0, "wait_s"), wall0 = launch_field(w0, "wall_s"), wait1 = launch_field(w1, "wait_s");
    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    char *err = launch_slurp(err_path);
    const char *line = strstr(err, "asgd launch: the workers waited ");
    printf("%s, worker 1 sleeping 10 ms a round: worker 0 waited %.3f of %.3f s, worker 1 %.3f s; %.*s\n", sync, wait0,
           wall0, wait1, line ? (int)strcspn(line, "\n") : 0, line ? line : "");
    CHECK(wait0 > 0.5 * wall0);  // every round waits for worker 1's sleep
    CHECK(wait1 < wait0);
    CHECK(line && strstr(line, hint));
    free(err);
    free(w0);
    free(w1);
}

static void check_refused(void) {
    struct {
        const char *args[8];
        const char *needle;
    } bad[] = {
        {{"--sync", "local", NULL}, "--local-steps H"},
        {{"--sync", "bsp", "--local-steps", "2", NULL}, "--local-steps applies to --sync local"},
        {{"--sync", "local", "--local-steps", "2", "--momentum", "0.9", NULL}, "plain SGD"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[16] = {"launch", "--model", "logreg", "--data", "gen:sparse:n=600,dim=100,nnz=5"};
        int n = 5;
        for (const char *const *p = bad[i].args; *p; p++) a[n++] = *p;
        a[n] = NULL;
        launch_expect_refusal(a, bad[i].needle);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    // 5400 training examples, rounds of 3 workers x 1 thread x 8: 225 per epoch.
    const char *sparse[] = {"--model",      "logreg", "--data",    "gen:sparse:n=6000,dim=1000,nnz=20",
                            "--batch",      "8",      "--lr",      "0.5",
                            "--epochs",     "2",      "--threads", "1",
                            "--eval-every", "1000",   NULL};
    check_equivalence("logreg", sparse, 450, 0.788, 0.002);  // two balanced classes: 0.49 untrained
    if (access(ASGD_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0) {
        // 1200 examples, rounds of 3 workers x 2 threads x 8: 25 per epoch.
        const char *dense[] = {"--model", "mlp", "--hidden",  "16", "--train-limit", "1200", "--test-limit", "200",
                               "--batch", "8",   "--threads", "2",  "--epochs",      "2",    "--eval-every", "300",
                               NULL};
        check_equivalence("mlp", dense, 50, 0.450, 0.01);  // 10 classes: 0.1 by chance
    } else {
        printf("Fashion-MNIST not installed: the dense (MLP) case is skipped\n");
    }
    check_wait_counted("allreduce", NULL, "--sync local --local-steps H averages");
    check_wait_counted("local", "2", "a larger --local-steps (now 2)");
    check_refused();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
