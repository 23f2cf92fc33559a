// What asgd says when something is wrong, and how much it says otherwise:
//   a) an unknown flag names the nearest flag, or the command that takes it;
//   b) an output path that cannot be written fails the run before anything is
//      trained (no CSV rows, no run-directory files), naming the flag;
//   c) a checkpoint of another run names models, modes and optimizers;
//   d) flags the run would ignore are refused; data without a test example too;
//   e) --quiet prints the summary only (train and launch); the startup line
//      says "no GPU" without a GPU unless ASGD_CUDA_DETAILS=1;
//   f) asgd launch shows progress lines naming samples/s and the global
//      model's metric (at least the final one), and none under --quiet.
#include <sys/stat.h>

#include "engine/gpu/gpu_module.h"
#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_messages_XXXXXX";

#define HANG_S 120.0
#define DATA "gen:sparse:n=3000,dim=200,nnz=5"

static int add_args(const char **a, int n, const char *const *more) {
    for (; *more; more++) a[n++] = *more;
    return n;
}

// Runs asgd with args; its stdout and stderr in *out and *err (caller frees). Returns the exit status.
static int run(const char *name, const char *const *args, char **out, char **err) {
    const char *a[64] = {ASGD_BINARY};
    int n = add_args(a, 1, args);
    a[n] = NULL;
    const char *out_path = proc_path(dir, "%s.out", name), *err_path = proc_path(dir, "%s.err", name);
    int st = proc_wait(proc_start(a, out_path, err_path), HANG_S);
    *out = proc_slurp(out_path);
    *err = proc_slurp(err_path);
    printf("%s: exit %d: %s%s", name, st, *err, **err && (*err)[strlen(*err) - 1] != '\n' ? "\n" : "");
    return st;
}

static void expect(const char *text, const char *needle) {
    if (!strstr(text, needle)) {
        fprintf(stderr, "expected \"%s\" in:\n%s\n", needle, text);
        exit(1);
    }
}

static size_t lines_of(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

// Lines that start with `prefix` and hold `needle`.
static size_t lines_with(const char *s, const char *prefix, const char *needle) {
    size_t n = 0;
    while (*s) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), s);
        n += strncmp(line, prefix, strlen(prefix)) == 0 && strstr(line, needle);
        s += len + (end != NULL);
    }
    return n;
}

// Runs args, which must fail with `code` and one line on stderr holding needle.
static void expect_failure(const char *name, const char *const *args, int code, const char *needle) {
    char *out, *err;
    CHECK(run(name, args, &out, &err) == code);
    expect(err, needle);
    CHECK(lines_of(err) == 1);
    CHECK(out[0] == '\0');  // no summary
    free(out);
    free(err);
}

static void unknown_flags(void) {
    const char *a[] = {"train", "--epoch", "2", NULL};
    expect_failure("a-epoch", a, 2, "unknown flag --epoch; did you mean --epochs?");
    const char *b[] = {"train", "--workers", "2", NULL};
    expect_failure("a-workers", b, 2, "--workers is a flag of asgd launch");
    const char *c[] = {"launch", "--mode", "sync", NULL};
    expect_failure("a-mode", c, 2, "--mode is a flag of asgd train");
    const char *d[] = {"train", "--zzzzqq", NULL};
    expect_failure("a-nothing-near", d, 2, "unknown flag --zzzzqq (see asgd train --help)");
}

static void unwritable_outputs(void) {
    char log[400], rd[400], model[400], missing[400];
    snprintf(log, sizeof log, "%s/b.csv", dir);
    snprintf(missing, sizeof missing, "%s/no-such-dir/m.model", dir);
    const char *t[] = {"train", "--model", "logreg",       "--data", DATA,      "--epochs", "5",
                       "--log", log,       "--save-model", missing,  "--quiet", NULL};
    expect_failure("b-train-save-model", t, 1, "--save-model");
    CHECK(access(log, F_OK) != 0);  // nothing trained: not even the CSV's header
    const char *s[] = {"train", "--model", "logreg", "--data", DATA, "--summary", dir, "--quiet", NULL};
    expect_failure("b-train-summary", s, 1, "--summary");
    snprintf(rd, sizeof rd, "%s/b-launch", dir);
    const char *l[] = {"launch", "--model",   "logreg", "--data",  DATA, "--save-model",
                       missing,  "--run-dir", rd,       "--quiet", NULL};
    char *out, *err;
    CHECK(run("b-launch-save-model", l, &out, &err) == 1);
    expect(err, "--save-model");
    char csv[500];
    snprintf(csv, sizeof csv, "%s/worker-0.csv", rd);
    CHECK(access(csv, F_OK) != 0);  // no process was started
    free(out);
    free(err);
    snprintf(model, sizeof model, "%s/b-file", dir);
    CHECK(fclose(fopen(model, "w")) == 0);
    const char *r[] = {"launch", "--model", "logreg", "--data", DATA, "--run-dir", model, "--quiet", NULL};
    CHECK(run("b-launch-run-dir", r, &out, &err) == 1);
    expect(err, "--run-dir");
    free(out);
    free(err);
}

static void checkpoint_names(void) {
    char ck[400];
    snprintf(ck, sizeof ck, "%s/c-ckpt", dir);
    const char *t[] = {
        "train",    "--model", "logreg", "--data", DATA, "--epochs", "2", "--checkpoint-dir", ck, "--checkpoint-every",
        "0.000001", "--quiet", NULL};
    char *out, *err;
    CHECK(run("c-train", t, &out, &err) == 0);
    free(out);
    free(err);
    const char *m[] = {"train", "--model", "svm", "--data", DATA, "--resume", ck, "--quiet", NULL};
    expect_failure("c-model", m, 1, "the checkpointed run's model was logreg, this run's is svm");
    const char *o[] = {"train", "--model",     "logreg",  "--data",  DATA, "--resume",
                       ck,      "--optimizer", "adagrad", "--quiet", NULL};
    expect_failure("c-optimizer", o, 1, "optimizer was sgd, this run's is adagrad");
    const char *d[] = {"train", "--model", "logreg", "--data",  DATA, "--resume",
                       ck,      "--mode",  "locked", "--quiet", NULL};
    expect_failure("c-mode", d, 1, "mode was hogwild, this run's is locked");
}

static void ignored_flags(void) {
    const char *a[] = {"train", "--model", "logreg", "--data", DATA, "--data-dir", dir, NULL};
    expect_failure("d-data-dir", a, 2, "--data-dir: logreg reads sparse features");
    const char *b[] = {"launch", "--model", "logreg", "--data", DATA, "--sync", "asp", "--staleness", "3", NULL};
    expect_failure("d-staleness", b, 2, "--staleness: bounds --sync ssp");
    const char *c[] = {"launch", "--model", "logreg", "--data", DATA, "--sync", "allreduce", "--servers", "2", NULL};
    expect_failure("d-servers", c, 2, "--servers 2: --sync allreduce runs without parameter servers");
    const char *d[] = {"launch", "--model", "logreg", "--data", DATA, "--coordinator", "10.0.0.1:29517", NULL};
    expect_failure("d-coordinator", d, 2, "--coordinator 10.0.0.1:29517: a local launch hosts the coordinator");
    const char *l[] = {"launch", "--model",           "logreg", "--data", DATA, "--sync", "local", "--local-steps",
                       "4",      "--restart-workers", "1",      NULL};
    expect_failure("d-restart-local", l, 2,
                   "--restart-workers: the ring of --sync local cannot take a restarted worker");
    const char *e[] = {"launch", "--model", "logreg", "--data", DATA, "--summary", "x.json", NULL};
    expect_failure("d-summary", e, 2, "--summary: a distributed run writes summary.json");
    char two[400];
    snprintf(two, sizeof two, "%s/two.svm", dir);
    FILE *f = fopen(two, "w");
    CHECK(f && fputs("1 1:1\n-1 2:1\n", f) >= 0 && fclose(f) == 0);
    const char *g[] = {"train", "--model", "logreg", "--data", two, "--quiet", NULL};
    expect_failure("d-empty-test", g, 1, "--test-frac 0.1 of 2 examples leaves no test example");
}

static void quiet_and_banner(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/e-launch", dir);
    const char *l[] = {"launch", "--model",          "logreg", "--data",  DATA, "--run-dir",
                       rd,       "--progress-every", "0.01",   "--quiet", NULL};
    char *out, *err;
    CHECK(run("e-launch-quiet", l, &out, &err) == 0);
    CHECK(err[0] == '\0');  // no worker JSON, no progress
    CHECK(lines_of(out) == 1);  // the summary
    expect(out, "\"command\":\"launch\"");
    free(out);
    free(err);
    const char *t[] = {"train", "--model", "logreg", "--data", DATA, "--quiet", NULL};
    CHECK(run("e-train-quiet", t, &out, &err) == 0);
    CHECK(err[0] == '\0' && lines_of(out) == 1);
    free(out);
    free(err);
    char summary[256];
    int devices = gpu_device_summary(summary, sizeof summary);
    const char *v[] = {"train", "--model", "logreg", "--data", DATA, NULL};
    CHECK(run("e-banner", v, &out, &err) == 0);
    if (devices == 0) {
        expect(err, "| no GPU");
        CHECK(!strstr(err, summary));  // not the driver's (or the build's) words
    }
    free(out);
    free(err);
    setenv("ASGD_CUDA_DETAILS", "1", 1);
    CHECK(run("e-banner-details", v, &out, &err) == 0);
    unsetenv("ASGD_CUDA_DETAILS");
    expect(err, summary);
    free(out);
    free(err);
}

static void launch_progress(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/f-launch", dir);
    const char *l[] = {"launch", "--model",   "logreg", "--data",           DATA,   "--epochs",
                       "2",      "--run-dir", rd,       "--progress-every", "0.01", NULL};
    char *out, *err;
    CHECK(run("f-launch", l, &out, &err) == 0);
    size_t progress = lines_with(err, "asgd launch: ", "samples/s over 2 workers, global test_acc 0.");
    printf("f) %zu progress lines\n", progress);
    CHECK(progress >= 1);  // at least the final one
    CHECK(lines_with(err, "asgd launch: ", "staleness") >= 1);  // asp: the servers' figures
    free(out);
    free(err);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    unknown_flags();
    unwritable_outputs();
    checkpoint_names();
    ignored_flags();
    quiet_and_banner();
    launch_progress();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
