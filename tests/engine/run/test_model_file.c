// Model files (engine/run/model_file.h, docs/model_file.md): the format read back
// exactly and bad files refused by name; `asgd eval` of a saved model gives the
// numbers `asgd train` reported for it, `asgd predict` agrees with it; and a
// distributed run's --save-model is its global model (ASP: the servers' final
// shards; allreduce: worker 0's replica; hybrid: the servers' sparse part).
// The split record: files without one read as before; eval takes the
// record's split flags when none are given, and says on stderr when flags or
// data differ from it. predict reads unlabelled lines and unknown labels,
// ignores (and counts) features past the model's width with the same
// predictions, and prints every class's probability with --probabilities.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/idx.h"
#include "engine/run/model_file.h"
#include "engine/models/model_registry.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_model_file_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

static const char *path_of(const char *name) {
    static char p[8][400];
    static int next;
    char *s = p[next++ % 8];
    snprintf(s, 400, "%s/%s", dir, name);
    return s;
}

// The last run's stdout (caller frees).
static char *run_stdout(void) { return launch_slurp(path_of("stdout")); }

// ---- the format ---------------------------------------------------------------

static void write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, len, f) == len && fclose(f) == 0);
}

// Reading path fails with a message that names it and says `problem`.
static void expect_refused(const char *path, const char *problem) {
    model_file_t f;
    char err[768] = "";
    int rc = model_file_read(path, &f, err, sizeof err);
    if (rc == 0 || !strstr(err, path) || !strstr(err, problem)) {
        fprintf(stderr, "reading %s: want an error naming it with \"%s\", got %s\n", path, problem,
                rc == 0 ? "success" : err);
        exit(1);
    }
    printf("refused: %s\n", err);
}

static void test_format(void) {
    char err[768];
    model_file_info_t *info = calloc(1, sizeof *info);
    CHECK(info);
    info->model = model_registry_find("mlp");
    info->dim = 6;
    info->n_hidden = 2;
    info->hidden[0] = 5;
    info->hidden[1] = 4;
    info->classes = 3;
    for (int c = 0; c < 3; c++) info->labels[c] = c;
    info->n_params = 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3;
    info->count = info->n_params;
    float w[74];
    CHECK(info->n_params == 74);
    for (int j = 0; j < 74; j++) w[j] = (float)(j * 0.37 - 11.0);
    const char *whole = path_of("whole.model");
    CHECK_OK(model_file_write(whole, "--save-model", info, w, err, sizeof err), err);
    model_file_t f;
    CHECK_OK(model_file_read(whole, &f, err, sizeof err), err);
    CHECK(f.info.model == model_registry_find("mlp") && f.info.n_params == 74 && f.info.first == 0 &&
          f.info.count == 74);
    CHECK(f.info.dim == 6 && f.info.n_hidden == 2 && f.info.hidden[1] == 4 && f.info.classes == 3);
    CHECK(f.info.labels[2] == 2 && memcmp(f.params, w, sizeof w) == 0);
    CHECK(f.info.split.recorded == 0);  // zeros where a split record goes: a file of an older build
    model_file_free(&f);
    // A split record comes back field for field.
    info->split = (model_file_split_t){1, 0, 0.25, 77, 1000, 200, 0x0123456789abcdefull, 0xfedcba9876543210ull};
    CHECK_OK(model_file_write(path_of("split.model"), "--save-model", info, w, err, sizeof err), err);
    CHECK_OK(model_file_read(path_of("split.model"), &f, err, sizeof err), err);
    CHECK(memcmp(&f.info.split, &info->split, sizeof info->split) == 0);
    model_file_free(&f);
    info->split = (model_file_split_t){0};
    // The size is the header, the labels, the values and the CRC.
    FILE *fp = fopen(whole, "rb");
    CHECK(fp);
    uint8_t bytes[1024];
    size_t len = fread(bytes, 1, sizeof bytes, fp);
    fclose(fp);
    CHECK(len == MODEL_FILE_HEADER_BYTES + 3 * 4 + 74 * 4 + 4);
    CHECK(memcmp(bytes, "ASGDMODL", 8) == 0 && bytes[8] == 1 && memcmp(bytes + 16, "mlp\0", 4) == 0);

    // Two parts (as two servers write them) join into the whole.
    info->first = 0, info->count = 40;
    CHECK_OK(model_file_write(path_of("part0.model"), "--save-model", info, w, err, sizeof err), err);
    info->first = 40, info->count = 34;
    CHECK_OK(model_file_write(path_of("part1.model"), "--save-model", info, w + 40, err, sizeof err), err);
    const char *parts[] = {path_of("part0.model"), path_of("part1.model")};
    CHECK_OK(model_file_join(parts, 2, &f, err, sizeof err), err);
    CHECK(f.info.first == 0 && f.info.count == 74 && memcmp(f.params, w, sizeof w) == 0);
    model_file_free(&f);
    CHECK(model_file_join(parts, 1, &f, err, sizeof err) != 0 && strstr(err, "parameter 40 of 74 is in none"));
    printf("refused: %s\n", err);

    // Refused: a raw float32 dump (the old format), a foreign file, a truncated
    // one, one with extra bytes, another version, a flipped bit.
    write_bytes(path_of("raw.bin"), w, sizeof w);
    expect_refused(path_of("raw.bin"), "not an asgd model file");
    write_bytes(path_of("ckpt.bin"), "ASGDCKPT\1\0\0\0\0\0\0\0", 16);
    expect_refused(path_of("ckpt.bin"), "not an asgd model file");
    write_bytes(path_of("short.model"), bytes, 100);
    expect_refused(path_of("short.model"), "truncated");
    write_bytes(path_of("cut.model"), bytes, len - 8);
    expect_refused(path_of("cut.model"), "truncated");
    bytes[len] = 0;
    write_bytes(path_of("long.model"), bytes, len + 1);
    expect_refused(path_of("long.model"), "wrong size");
    bytes[8] = 3;  // version 2 is a file with class names (string labels): 3 is unknown
    write_bytes(path_of("v3.model"), bytes, len);
    expect_refused(path_of("v3.model"), "format version 3");
    bytes[8] = 1;
    bytes[MODEL_FILE_HEADER_BYTES + 12 + 50] ^= 0x10;
    write_bytes(path_of("flip.model"), bytes, len);
    expect_refused(path_of("flip.model"), "checksum mismatch");
    expect_refused(path_of("none.model"), "cannot open");
    free(info);
}

// ---- through the CLI: eval equals train, predict agrees -------------------------

// The value of "key": exactly as printed.
static double field(const char *json, const char *key) { return launch_field(json, key); }

// Trains with --save-model, evaluates the file on the same held-out data, and
// requires the same printed numbers. train/eval: NULL-terminated extra flags.
static void check_eval_equals_train(const char *label, const char *metric, const char *const *train,
                                    const char *const *eval, double examples) {
    const char *a[64];
    int n = 0;
    a[n++] = "train";
    for (const char *const *t = train; *t; t++) a[n++] = *t;
    a[n++] = "--quiet";
    a[n++] = "--save-model";
    a[n++] = path_of(label);
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    char *tr = run_stdout();
    n = 0;
    a[n++] = "eval";
    a[n++] = "--model-file";
    a[n++] = path_of(label);
    for (const char *const *t = eval; *t; t++) a[n++] = *t;
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    char *ev = run_stdout();
    char final_metric[64], test_metric[64];
    snprintf(final_metric, sizeof final_metric, "final_test_%s", metric);
    snprintf(test_metric, sizeof test_metric, "test_%s", metric);
    printf("%-8s train: loss %.9g %s %.9g | eval of the saved model: loss %.9g %s %.9g (%g examples)\n", label,
           field(tr, "final_test_loss"), metric, field(tr, final_metric), field(ev, "test_loss"), metric,
           field(ev, test_metric), field(ev, "examples"));
    CHECK(field(ev, "test_loss") == field(tr, "final_test_loss"));
    CHECK(field(ev, test_metric) == field(tr, final_metric));
    CHECK(field(ev, "examples") == examples);
    free(tr);
    free(ev);
}

// The first token of every non-empty line of a text file (labels, ratings).
static double *column(const char *path, int col, size_t *n) {
    char *text = launch_slurp(path);
    size_t cap = 1024;
    double *v = malloc(cap * sizeof *v);
    *n = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!*line) continue;
        char *p = line;
        for (int c = 0; c < col; c++) p = strpbrk(p, " ,") + 1;
        if (*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = strtod(p, NULL);
    }
    free(text);
    return v;
}

static void test_cli(int have_fashion) {
    const char *gen_s[] = {"gen",    "sparse", "--n",   "3000",           "--dim", "400",
                           "--seed", "3",      "--out", path_of("s.svm"), NULL};
    CHECK(launch_run(gen_s) == 0);
    const char *gen_r[] = {"gen",  "ratings", "--users",        "60", "--items", "50", "--ratings",
                           "2000", "--out",   path_of("r.csv"), NULL};
    CHECK(launch_run(gen_r) == 0);

    // Held out by --test-frac and --seed; 3 threads evaluate in 3 slices.
    const char *lt[] = {"--model", "logreg",    "--data", path_of("s.svm"), "--test-frac", "0.2", "--seed",
                        "5",       "--threads", "3",      "--epochs",       "2",           NULL};
    const char *le[] = {"--data", path_of("s.svm"), "--split", "test", "--test-frac", "0.2", "--seed",
                        "5",      "--threads",      "3",       NULL};
    check_eval_equals_train("logreg", "accuracy", lt, le, 600);
    const char *et[] = {"--model", "embmlp", "--data", path_of("s.svm"), "--seed", "9", "--eval-limit", "150", NULL};
    const char *ee[] = {"--data", path_of("s.svm"), "--split", "test", "--seed", "9", "--eval-limit", "150", NULL};
    check_eval_equals_train("embmlp", "accuracy", et, ee, 150);
    const char *mt[] = {"--model", "mf", "--data", path_of("r.csv"), "--rank", "4", "--epochs", "3", NULL};
    const char *me[] = {"--data", path_of("r.csv"), "--split", "test", NULL};
    check_eval_equals_train("mf", "rmse", mt, me, 200);
    if (have_fashion) {
        // The official test split, a batch above the evaluation block of 256.
        const char *ft[] = {
            "--model", "mlp",       "--hidden", "32", "--train-limit", "3000", "--test-limit", "700", "--batch",
            "300",     "--threads", "2",        NULL};
        const char *fe[] = {"--test-limit", "700", "--batch", "300", "--threads", "2", NULL};
        check_eval_equals_train("mlp", "accuracy", ft, fe, 700);
        const char *pf[] = {"predict", "--model-file", path_of("mlp"), "--test-limit", "5", NULL};
        CHECK(launch_run(pf) == 0);
        size_t lines;
        double *labels = column(path_of("stdout"), 0, &lines);
        double *probs = column(path_of("stdout"), 1, &lines);
        CHECK(lines == 5);
        for (size_t i = 0; i < lines; i++) CHECK(labels[i] >= 0 && labels[i] <= 9 && probs[i] > 0.1 && probs[i] <= 1);
        free(labels);
        free(probs);
    }

    // predict on every example: its labels give eval's accuracy (the same file, --split all).
    const char *pl[] = {"predict",        "--model-file", path_of("logreg"),   "--data",
                        path_of("s.svm"), "--out",        path_of("pred.txt"), NULL};
    CHECK(launch_run(pl) == 0);
    const char *el[] = {"eval", "--model-file", path_of("logreg"), "--data", path_of("s.svm"), NULL};
    CHECK(launch_run(el) == 0);
    char *ev = run_stdout();
    size_t np, nt;
    double *pred = column(path_of("pred.txt"), 0, &np), *prob = column(path_of("pred.txt"), 1, &np);
    double *truth = column(path_of("s.svm"), 0, &nt);
    CHECK(np == 3000 && nt == 3000 && field(ev, "examples") == 3000);
    size_t right = 0;
    for (size_t i = 0; i < np; i++) {
        CHECK((pred[i] == 1 || pred[i] == -1) && prob[i] >= 0.5 && prob[i] <= 1.0);
        right += pred[i] == (truth[i] > 0 ? 1 : -1);
    }
    printf("predict logreg: %zu of %zu right = %.9g; eval --split all: accuracy %.9g\n", right, np,
           (double)right / (double)np, field(ev, "test_accuracy"));
    CHECK_NEAR((double)right / (double)np, field(ev, "test_accuracy"), 1e-9);
    free(pred), free(prob), free(truth), free(ev);

    // mf: the predicted ratings' RMSE against the file's is eval's (to their printing).
    const char *pm[] = {"predict",        "--model-file", path_of("mf"),          "--data",
                        path_of("r.csv"), "--out",        path_of("pred-mf.txt"), NULL};
    CHECK(launch_run(pm) == 0);
    const char *em[] = {"eval", "--model-file", path_of("mf"), "--data", path_of("r.csv"), NULL};
    CHECK(launch_run(em) == 0);
    ev = run_stdout();
    pred = column(path_of("pred-mf.txt"), 0, &np);
    truth = column(path_of("r.csv"), 2, &nt);
    CHECK(np == 2000 && nt == 2000);
    double sq = 0;
    for (size_t i = 0; i < np; i++) sq += (pred[i] - truth[i]) * (pred[i] - truth[i]);
    printf("predict mf: RMSE %.9g; eval --split all: %.9g\n", sqrt(sq / (double)np), field(ev, "test_rmse"));
    CHECK_NEAR(sqrt(sq / (double)np), field(ev, "test_rmse"), 1e-6);
    free(pred), free(truth), free(ev);

    // Refused with one line: data wider than the model, the wrong kind, an old raw file.
    const char *gen_w[] = {"gen", "sparse", "--n", "50", "--dim", "900", "--out", path_of("wide.svm"), NULL};
    CHECK(launch_run(gen_w) == 0);
    const char *bad[][8] = {
        {"eval", "--model-file", path_of("logreg"), "--data", path_of("seven.svm"), NULL},
        {"eval", "--model-file", path_of("mf"), "--data", path_of("s.svm"), NULL},
        {"eval", "--model-file", path_of("raw.bin"), "--data", path_of("s.svm"), NULL},
        {"eval", "--model-file", path_of("part0.model"), "--data", "fashion-mnist", NULL},
    };
    FILE *seven = fopen(path_of("seven.svm"), "w");
    CHECK(seven && fputs("1 1:1\n7 2:1\n", seven) >= 0 && fclose(seven) == 0);
    const char *want[] = {"seven.svm:2:1: label 7 is not among the training data's labels", "s.svm",
                          "not an asgd model file", "give every part"};
    for (size_t k = 0; k < 4; k++) {
        CHECK(launch_run(bad[k]) != 0);
        char *e = launch_stderr();
        printf("refused: %s", e);
        CHECK(strstr(e, want[k]) && strchr(e, '\n') == e + strlen(e) - 1);
        free(e);
    }
}

// ---- the split record and new data ------------------------------------------------

// eval of the logreg saved by test_cli (trained with --test-frac 0.2 --seed 5
// --threads 3): without split flags it scores the rows the run held out, as
// the run did; flags or data that differ from the record are said on stderr.
static void test_split_record(void) {
    const char *a[] = {"eval",    "--model-file", path_of("logreg"), "--data", path_of("s.svm"),
                       "--split", "test",         "--threads",       "3",      NULL};
    CHECK(launch_run(a) == 0);
    char *ev = run_stdout(), *e = launch_stderr();
    const char *withflags[] = {
        "eval",        "--model-file", path_of("logreg"), "--data", path_of("s.svm"), "--split", "test",
        "--test-frac", "0.2",          "--seed",          "5",      "--threads",      "3",       NULL};
    CHECK(launch_run(withflags) == 0);
    char *ev2 = run_stdout();
    printf("eval --split test without the split flags: loss %.9g on %g examples; with them: %.9g on %g\n",
           field(ev, "test_loss"), field(ev, "examples"), field(ev2, "test_loss"), field(ev2, "examples"));
    CHECK(field(ev, "examples") == 600 && field(ev, "test_loss") == field(ev2, "test_loss"));
    CHECK(field(ev, "test_accuracy") == field(ev2, "test_accuracy"));
    CHECK(e[0] == '\0');  // the same data and split: nothing to say
    free(ev), free(ev2), free(e);

    const char *other_frac[] = {"eval",    "--model-file", path_of("logreg"), "--data", path_of("s.svm"),
                                "--split", "test",         "--test-frac",     "0.1",    NULL};
    CHECK(launch_run(other_frac) == 0);
    e = launch_stderr();
    printf("--test-frac 0.1: %s", e);
    CHECK(strstr(e, "--test-frac 0.1 is not the training run's (0.2") && strchr(e, '\n') == e + strlen(e) - 1);
    free(e);
    const char *gen[] = {"gen",   "sparse",          "--n", "3000", "--dim", "400", "--seed", "4",
                         "--out", path_of("s4.svm"), NULL};
    CHECK(launch_run(gen) == 0);
    const char *other_data[] = {
        "eval", "--model-file", path_of("logreg"), "--data", path_of("s4.svm"), "--split", "test", NULL};
    CHECK(launch_run(other_data) == 0);
    e = launch_stderr();
    printf("other data: %s", e);
    CHECK(strstr(e, "is not the data the model was trained on") && strchr(e, '\n') == e + strlen(e) - 1);
    free(e);
}

// Writes the first `lines` lines of s.svm to name, each changed by how:
// 0 as they are; 1 without the label, with a feature past the width (401:5)
// and a second line's label 7 (unknown to the model).
static void rewrite_lines(const char *name, size_t lines, int how) {
    char *text = launch_slurp(path_of("s.svm"));
    FILE *f = fopen(path_of(name), "w");
    CHECK(f);
    char *line = text;
    for (size_t i = 0; i < lines; i++) {
        char *end = strchr(line, '\n');
        CHECK(end);
        *end = '\0';
        if (how == 0)
            fprintf(f, "%s\n", line);
        else if (i % 2)
            fprintf(f, "7%s 401:5\n", strchr(line, ' '));
        else
            fprintf(f, "%s 401:5\n", strchr(line, ' ') + 1);
        line = end + 1;
    }
    CHECK(fclose(f) == 0);
    free(text);
}

static void test_predict_new_data(void) {
    rewrite_lines("labelled.svm", 40, 0);
    rewrite_lines("unlabelled.svm", 40, 1);
    const char *pa[] = {"predict", "--model-file", path_of("logreg"), "--data", path_of("labelled.svm"), NULL};
    CHECK(launch_run(pa) == 0);
    char *want = run_stdout(), *e = launch_stderr();
    CHECK(e[0] == '\0');
    free(e);
    const char *pb[] = {"predict", "--model-file", path_of("logreg"), "--data", path_of("unlabelled.svm"), NULL};
    CHECK(launch_run(pb) == 0);
    char *got = run_stdout();
    e = launch_stderr();
    printf("unlabelled lines, label 7, a feature past the width: %s", e);
    CHECK(strcmp(got, want) == 0);  // the same predictions, line for line
    CHECK(strstr(e, "40 feature values past the model's width (400 features) ignored") &&
          strchr(e, '\n') == e + strlen(e) - 1);
    free(got), free(e);

    // --probabilities: the labels, then each class's probability; the predicted one is the plain line's.
    const char *pp[] = {
        "predict", "--model-file", path_of("logreg"), "--data", path_of("labelled.svm"), "--probabilities", NULL};
    CHECK(launch_run(pp) == 0);
    char *probs = run_stdout();
    CHECK(strncmp(probs, "labels -1 1\n", 12) == 0);
    size_t n = 0;
    for (char *p = strchr(probs, '\n') + 1, *w = want; *p; n++) {
        int label, plain_label;
        double p0, p1, plain;
        CHECK(sscanf(p, "%d %lf %lf", &label, &p0, &p1) == 3 && sscanf(w, "%d %lf", &plain_label, &plain) == 2);
        CHECK(label == plain_label && fabs(p0 + p1 - 1.0) <= 2e-6);
        CHECK(fabs((label == 1 ? p1 : p0) - plain) <= 1e-6 && (label == 1) == (p1 >= 0.5));
        p = strchr(p, '\n') + 1;
        w = strchr(w, '\n') + 1;
    }
    printf("--probabilities: %zu lines after the labels, each matching the plain prediction\n", n);
    CHECK(n == 40);
    free(probs), free(want);
}

// ---- distributed runs ----------------------------------------------------------

// A 2-worker launch of the generated set with --save-model; more: extra flags.
static void run_launch(const char *kind, const char *sync, const char *servers, const char *rd, const char *model,
                       const char *const *more) {
    const char *a[64] = {"launch",    "--model", kind,        "--data", path_of("s.svm"), "--epochs", "2",
                         "--threads", "1",       "--workers", "2",      "--quiet",        "--sync",   sync,
                         "--servers", servers,   "--run-dir", rd,       "--save-model",   model};
    int n = 20;
    for (const char *const *c = more; *c; c++) a[n++] = *c;
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
}

static char *eval_file(const char *model) {
    const char *a[] = {"eval", "--model-file", model, "--data", path_of("s.svm"), "--split", "test", NULL};
    CHECK(launch_run(a) == 0);
    return run_stdout();
}

static void test_asp(void) {
    char rd[400], model[400];  // path_of's buffers are reused
    snprintf(rd, sizeof rd, "%s", path_of("asp"));
    snprintf(model, sizeof model, "%s", path_of("asp.model"));
    const char *none[] = {NULL};
    run_launch("logreg", "asp", "2", rd, model, none);
    // The file is the servers' final shards, in order, bit for bit.
    size_t n, n0, n1;
    float *w = launch_load_model(model, &n);
    model_file_t p0, p1;
    char err[768];
    CHECK_OK(model_file_read(path_of("asp/server-0.model"), &p0, err, sizeof err), err);
    CHECK_OK(model_file_read(path_of("asp/server-1.model"), &p1, err, sizeof err), err);
    n0 = p0.info.count, n1 = p1.info.count;
    CHECK(n == 401 && p0.info.first == 0 && p1.info.first == n0 && n0 + n1 == n);
    CHECK(memcmp(w, p0.params, n0 * 4) == 0 && memcmp(w + n0, p1.params, n1 * 4) == 0);
    model_file_free(&p0), model_file_free(&p1), free(w);
    // Its evaluation: the final pull of the worker that pulled last saw every
    // push (each worker's were acknowledged before its own final pull), so it
    // was the servers' final model: one worker's global figures are exactly
    // the file's, and summary.json's last global row is that worker's (the
    // final pull that saw the most shard versions).
    char *ev = eval_file(model);
    char *s = launch_slurp(path_of("asp/summary.json"));
    int matched = 0;
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "asp/worker-%d.json", k);
        char *wj = launch_slurp(path_of(name));
        int same = field(wj, "global_test_loss") == field(ev, "test_loss") &&
                   field(wj, "global_test_accuracy") == field(ev, "test_accuracy");
        printf("asp worker %d's final pull: loss %.9g accuracy %.9g%s\n", k, field(wj, "global_test_loss"),
               field(wj, "global_test_accuracy"), same ? " = the saved model's" : "");
        matched += same;
        free(wj);
    }
    int summary_same = field(s, "final_test_loss") == field(ev, "test_loss") &&
                       field(s, "final_test_accuracy") == field(ev, "test_accuracy");
    printf("asp eval of --save-model: loss %.9g accuracy %.9g; summary.json's last global row: %.9g %.9g (%s)\n",
           field(ev, "test_loss"), field(ev, "test_accuracy"), field(s, "final_test_loss"),
           field(s, "final_test_accuracy"), summary_same ? "equal" : "another worker's last pull");
    CHECK(matched >= 1 && summary_same);
    free(ev);
    free(s);
    // The parts by hand, comma-separated, give the same evaluation.
    char parts[900];
    snprintf(parts, sizeof parts, "%s,%s", path_of("asp/server-0.model"), path_of("asp/server-1.model"));
    char *a = eval_file(model), *b = eval_file(parts);
    CHECK(field(a, "test_loss") == field(b, "test_loss"));
    free(a);
    free(b);
}

static void test_allreduce(void) {
    char rd[400], model[400];  // path_of's buffers are reused
    snprintf(rd, sizeof rd, "%s", path_of("ar"));
    snprintf(model, sizeof model, "%s", path_of("ar.model"));
    const char *none[] = {NULL};
    run_launch("logreg", "allreduce", "0", rd, model, none);
    char *ev = eval_file(model);
    char *s = launch_slurp(path_of("ar/summary.json"));
    printf("allreduce eval of --save-model: loss %.9g accuracy %.9g; summary.json: %.9g %.9g\n", field(ev, "test_loss"),
           field(ev, "test_accuracy"), field(s, "final_test_loss"), field(s, "final_test_accuracy"));
    CHECK(field(ev, "test_loss") == field(s, "final_test_loss"));
    CHECK(field(ev, "test_accuracy") == field(s, "final_test_accuracy"));
    free(ev);
    free(s);
}

static void test_hybrid(void) {
    char rd[400], model[400];  // path_of's buffers are reused
    snprintf(rd, sizeof rd, "%s", path_of("hy"));
    snprintf(model, sizeof model, "%s", path_of("hy.model"));
    const char *more[] = {"--batch", "8", NULL};
    run_launch("embmlp", "hybrid", "2", rd, model, more);
    model_file_t whole, w0, p0, p1;
    char err[768];
    CHECK_OK(model_file_read(model, &whole, err, sizeof err), err);
    CHECK_OK(model_file_read(path_of("hy/worker-0.model"), &w0, err, sizeof err), err);
    CHECK_OK(model_file_read(path_of("hy/server-0.model"), &p0, err, sizeof err), err);
    CHECK_OK(model_file_read(path_of("hy/server-1.model"), &p1, err, sizeof err), err);
    size_t S = p0.info.count + p1.info.count, n = whole.info.n_params;
    CHECK(whole.info.model == model_registry_find("embmlp") && p0.info.first == 0 && p1.info.first == p0.info.count &&
          S < n);
    CHECK(S == whole.info.dim * whole.info.embed_dim);  // the embedding: the sparse part
    // Sparse part: the servers'; dense part: worker 0's replica.
    CHECK(memcmp(whole.params, p0.params, p0.info.count * 4) == 0);
    CHECK(memcmp(whole.params + p0.info.count, p1.params, p1.info.count * 4) == 0);
    CHECK(memcmp(whole.params + S, w0.params + S, (n - S) * 4) == 0);
    size_t differ = 0;
    for (size_t j = 0; j < S; j++) differ += whole.params[j] != w0.params[j];
    printf(
        "hybrid: %zu sparse parameters from the servers (%zu differ from worker 0's last pull), %zu dense from "
        "worker 0\n",
        S, differ, n - S);
    model_file_free(&whole), model_file_free(&w0), model_file_free(&p0), model_file_free(&p1);
}

int main(void) {
    CHECK(mkdtemp(dir));
    test_format();
    char err[512];
    dense_dataset_t probe;
    int have_fashion = fashion_mnist_load(NULL, 0, 1, &probe, err, sizeof err) == 0;
    if (have_fashion)
        dense_dataset_free(&probe);
    else if (getenv("ASGD_REQUIRE_ALL") && strcmp(getenv("ASGD_REQUIRE_ALL"), "1") == 0) {
        fprintf(stderr, "FAIL: fashion-mnist is required (ASGD_REQUIRE_ALL=1): %s\n", err);
        return 1;
    } else {
        fprintf(stderr, "note: the mlp check is skipped: %s\n", err);
    }
    test_cli(have_fashion);
    test_split_record();
    test_predict_new_data();
    test_asp();
    test_allreduce();
    test_hybrid();
    CHECK(test_remove_tree(dir) == 0);
    printf("model file tests passed\n");
    return 0;
}
