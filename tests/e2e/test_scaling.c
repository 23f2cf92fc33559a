// Scaling modes (--scaling, --lr-scaling, --warmup):
//   - the warm-up schedule is lr * (u + 1) / W for the first W updates, then
//     the schedule's own (alone and on top of inverse-time);
//   - dist_apply_scaling: strong scaling splits the total batch over the
//     workers (and refuses a total that does not split), weak keeps it per
//     worker; linear and sqrt multiply --lr and --server-lr; applied once;
//   - end to end (`asgd launch`, allreduce): every worker reports the batch
//     and step the flags say, trains the number of rounds that batch makes,
//     and its logged step follows the scaled warm-up at every evaluation;
//   - BSP warms up on the servers: the same model, bit for bit, as
//     single-process sync SGD with the same --warmup.
#include <math.h>
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_scaling_XXXXXX";  // read by launch_support.h
#include "engine/run/dist.h"
#include "engine/core/optimizer.h"
#include "tests/support/launch_support.h"

static void test_warmup_schedule(void) {
    char err[256];
    optimizer_config_t c;
    optimizer_config_default(&c);
    c.lr = 0.4;
    c.warmup = 10;
    optimizer_t *o = optimizer_new(&c, 4, err, sizeof err);
    CHECK(o);
    for (int u = 0; u < 30; u++) {
        double want = u + 1 < 10 ? 0.4 * (u + 1) / 10.0 : 0.4;
        CHECK(optimizer_lr(o, u, 0) == (float)want);
    }
    optimizer_destroy(&o);
    c.schedule = LR_SCHEDULE_INVERSE_TIME;
    c.decay = 0.5;
    o = optimizer_new(&c, 4, err, sizeof err);
    CHECK(o);
    CHECK(optimizer_lr(o, 3, 0) == (float)(0.4 / 2.5 * 4 / 10.0));
    CHECK(optimizer_lr(o, 20, 0) == (float)(0.4 / 11.0));
    optimizer_destroy(&o);
    printf("warm-up: lr (u + 1) / W for u < W, then the schedule's step\n");
}

static void test_apply_scaling(void) {
    struct {
        int scaling, lr_scaling;
        size_t workers, batch;
        size_t want_batch;
        double want_factor;
    } cases[] = {
        {DIST_SCALING_WEAK, DIST_LR_SCALING_NONE, 4, 32, 32, 1.0},
        {DIST_SCALING_WEAK, DIST_LR_SCALING_LINEAR, 4, 32, 32, 4.0},
        {DIST_SCALING_STRONG, DIST_LR_SCALING_SQRT, 4, 32, 8, 2.0},
        {DIST_SCALING_STRONG, DIST_LR_SCALING_NONE, 1, 32, 32, 1.0},
        {DIST_SCALING_STRONG, DIST_LR_SCALING_LINEAR, 8, 64, 8, 8.0},
        {DIST_SCALING_WEAK, DIST_LR_SCALING_SQRT, 2, 16, 16, sqrt(2.0)},
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        train_args_t t;
        dist_args_t d;
        train_args_defaults(&t);
        dist_args_defaults(&d);
        t.batch = cases[i].batch;
        t.lr = t.opt.lr = 0.1;
        d.server_lr = 0.05;
        d.workers = cases[i].workers;
        d.scaling = cases[i].scaling;
        d.lr_scaling = cases[i].lr_scaling;
        CHECK(dist_apply_scaling(&d, &t, "test", err, sizeof err) == 0);
        CHECK(t.batch == cases[i].want_batch);
        CHECK(fabs(t.lr - 0.1 * cases[i].want_factor) < 1e-15 && t.opt.lr == t.lr);
        CHECK(fabs(d.server_lr - 0.05 * cases[i].want_factor) < 1e-15);
        CHECK(d.requested_batch == cases[i].batch && d.requested_lr == 0.1);
        // Once only: the launcher and its ranks may both call it.
        CHECK(dist_apply_scaling(&d, &t, "test", err, sizeof err) == 0);
        CHECK(t.batch == cases[i].want_batch && fabs(t.lr - 0.1 * cases[i].want_factor) < 1e-15);
    }
    train_args_t t;
    dist_args_t d;
    train_args_defaults(&t);
    dist_args_defaults(&d);
    t.batch = 32;
    d.workers = 3;
    d.scaling = DIST_SCALING_STRONG;
    CHECK(dist_apply_scaling(&d, &t, "test", err, sizeof err) == 2);
    CHECK(strstr(err, "--scaling strong") != NULL && strstr(err, "split evenly") != NULL);
    printf("scaling: %zu flag combinations give the batch and step they should; 32 over 3 workers refused\n",
           sizeof cases / sizeof cases[0]);
}

// Reads worker K's CSV and checks lr == peak * min(1, updates / warmup) on
// every row after the first; returns the rows checked.
static size_t check_logged_warmup(const char *name, int worker, double peak, double warmup) {
    char file[32];
    snprintf(file, sizeof file, "worker-%d.csv", worker);
    char *csv = launch_file(name, file);
    size_t rows = 0;
    char *save = NULL;
    int header = 1;
    for (char *line = strtok_r(csv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (header) {
            CHECK(strncmp(line, "wall_s,epoch,samples,updates,samples_per_s,lr,", 46) == 0);
            header = 0;
            continue;
        }
        double wall, epoch, samples, updates, rate, lr;
        CHECK(sscanf(line, "%lf,%lf,%lf,%lf,%lf,%lf", &wall, &epoch, &samples, &updates, &rate, &lr) == 6);
        if (updates == 0) continue;  // the initial point: no step taken yet
        // The row's step is the last round's: round `updates - 1`, (updates) / W of the peak.
        double want = peak * fmin(1.0, updates / warmup);
        if (fabs(lr - (double)(float)want) > 1e-7 * want) {
            fprintf(stderr, "%s worker %d: lr %.9g after %.0f updates, expected %.9g\n", name, worker, lr, updates,
                    want);
            exit(1);
        }
        rows++;
    }
    free(csv);
    return rows;
}

static void test_launch_allreduce(void) {
    // 4,000 examples, 10% held out: 3,600 to train on.
    struct {
        const char *name, *scaling, *lr_scaling;
        size_t want_batch, want_rounds;
        double want_lr;
    } runs[] = {
        {"strong-linear", "strong", "linear", 4, 3600 / 8, 0.5},  // total 8, lr 0.25 x 2
        {"weak-sqrt", "weak", "sqrt", 8, 3600 / 16, 0.25 * sqrt(2.0)},  // total 16
    };
    for (size_t i = 0; i < 2; i++) {
        char rd[300];
        snprintf(rd, sizeof rd, "%s/%s", dir, runs[i].name);
        const char *a[] = {"launch",
                           "--model",
                           "logreg",
                           "--data",
                           "gen:sparse:n=4000,dim=500,nnz=10",
                           "--batch",
                           "8",
                           "--lr",
                           "0.25",
                           "--workers",
                           "2",
                           "--sync",
                           "allreduce",
                           "--scaling",
                           runs[i].scaling,
                           "--lr-scaling",
                           runs[i].lr_scaling,
                           "--warmup",
                           "60",
                           "--eval-every",
                           "300",
                           "--quiet",
                           "--run-dir",
                           rd,
                           NULL};
        CHECK(launch_run(a) == 0);
        size_t rows = 0;
        for (int k = 0; k < 2; k++) {
            char file[32];
            snprintf(file, sizeof file, "worker-%d.json", k);
            char *w = launch_file(runs[i].name, file);
            CHECK(launch_field(w, "batch") == (double)runs[i].want_batch);
            CHECK(fabs(launch_field(w, "lr") - runs[i].want_lr) < 1e-9);
            CHECK(launch_field(w, "warmup") == 60.0);
            CHECK(launch_field(w, "updates") == (double)runs[i].want_rounds);
            free(w);
            rows += check_logged_warmup(runs[i].name, k, runs[i].want_lr, 60.0);
        }
        char *s = launch_file(runs[i].name, "summary.json");
        CHECK(launch_field(s, "total_batch") == 2.0 * (double)runs[i].want_batch);
        CHECK(launch_field(s, "batch_requested") == 8.0 && launch_field(s, "lr_requested") == 0.25);
        free(s);
        printf(
            "allreduce --scaling %s --lr-scaling %s: batch %zu per worker, lr %.4f, %zu rounds; the warm-up "
            "held on %zu logged points\n",
            runs[i].scaling, runs[i].lr_scaling, runs[i].want_batch, runs[i].want_lr, runs[i].want_rounds, rows);
        CHECK(rows >= 10);
    }
}

static void test_bsp_server_warmup(void) {
    char single[300], dist[300], rd[300];
    snprintf(single, sizeof single, "%s/single.bin", dir);
    snprintf(dist, sizeof dist, "%s/bsp.bin", dir);
    snprintf(rd, sizeof rd, "%s/bsp", dir);
    const char *a[] = {"train",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--batch",
                       "4",
                       "--lr",
                       "0.5",
                       "--warmup",
                       "100",
                       "--mode",
                       "sync",
                       "--threads",
                       "2",
                       "--quiet",
                       "--save-model",
                       single,
                       NULL};
    CHECK(launch_run(a) == 0);
    const char *b[] = {"launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--batch",
                       "4",
                       "--lr",
                       "0.5",
                       "--warmup",
                       "100",
                       "--sync",
                       "bsp",
                       "--workers",
                       "2",
                       "--quiet",
                       "--save-model",
                       dist,
                       "--run-dir",
                       rd,
                       NULL};
    CHECK(launch_run(b) == 0);
    size_t n1, n2;
    float *w1 = launch_load_model(single, &n1), *w2 = launch_load_model(dist, &n2);
    CHECK(n1 == n2 && memcmp(w1, w2, n1 * sizeof *w1) == 0);
    // And the warm-up did something: without it the model differs.
    const char *c[] = {"train",   "--model",   "logreg", "--data",  "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--batch", "4",         "--lr",   "0.5",     "--mode",
                       "sync",    "--threads", "2",      "--quiet", "--save-model",
                       single,    NULL};
    CHECK(launch_run(c) == 0);
    float *w3 = launch_load_model(single, &n1);
    CHECK(memcmp(w1, w3, n1 * sizeof *w1) != 0);
    printf("bsp --warmup 100 on the servers: bit-identical to sync SGD with the same warm-up (%zu parameters)\n", n1);
    free(w1);
    free(w2);
    free(w3);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    test_warmup_schedule();
    test_apply_scaling();
    test_launch_allreduce();
    test_bsp_server_warmup();
    CHECK(test_remove_tree(dir) == 0);
    printf("scaling tests passed\n");
    return 0;
}
