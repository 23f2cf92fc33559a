// Multiclass data on files the test writes: softmax and mlp learn a 4-class
// libsvm set in 1,000 sparse dimensions in every mode (through the same data
// path as the CLI); CSV files read exactly (header or not, the label column
// anywhere, tabs) and bad ones refused at their line and column; and through
// the CLI a saved multiclass model evaluates as it trained, `asgd predict`
// prints the file's own labels and refuses a label training never saw.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/csv.h"
#include "engine/data/data_source.h"
#include "engine/models/model_registry.h"
#include "kernels/foundation/rng.h"
#include "tests/support/learning_support.h"

static char dir[] = "/tmp/asgd_multiclass_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

static const int32_t class_labels[4] = {3, 7, 10, 42};

static const char *path_of(const char *name) {
    static char p[8][400];
    static int next;
    char *s = p[next++ % 8];
    snprintf(s, 400, "%s/%s", dir, name);
    return s;
}

// n examples of 4 classes in 1,000 dimensions: each class has 40 features of
// its own; an example holds up to 4 of its class's and 16 noise features
// anywhere, with Gaussian values around 1 (about 3% of them look like another
// class).
static void write_clusters(const char *path, size_t n, uint64_t seed) {
    FILE *f = fopen(path, "w");
    CHECK(f);
    rng_t r;
    rng_seed(&r, seed, 0);
    for (size_t i = 0; i < n; i++) {
        int k = (int)(rng_next(&r) % 4);
        uint8_t on[1000] = {0};
        for (int j = 0; j < 4; j++) on[(size_t)k * 200 + rng_next(&r) % 40] = 1;  // 200k .. 200k+39
        for (int j = 0; j < 16; j++) on[rng_next(&r) % 1000] = 1;
        fprintf(f, "%d", class_labels[k]);
        for (size_t j = 0; j < 1000; j++)
            if (on[j]) fprintf(f, " %zu:%.4f", j + 1, 1.0 + 0.3 * rng_normal(&r));
        fputc('\n', f);
    }
    CHECK(fclose(f) == 0);
}

// Classes of a model over labelled data: the majority class's share, for "beats chance".
static double majority_share(const sparse_dataset_t *d) {
    size_t count[4] = {0};
    for (size_t i = 0; i < d->n; i++) count[d->cls[i]]++;
    size_t best = 0;
    for (int k = 0; k < 4; k++) best = count[k] > best ? count[k] : best;
    return (double)best / (double)d->n;
}

static void sparse_models_learn(void) {
    char err[512];
    write_clusters(path_of("clusters.svm"), 6000, 5);
    const model_descriptor_t *soft = model_registry_find("softmax"), *mlp = model_registry_find("mlp");
    CHECK(soft && mlp);
    data_kind_t kind = data_spec_kind(path_of("clusters.svm"), soft->data, soft->create_sparse != NULL);
    CHECK(kind == DATA_KIND_SPARSE);
    CHECK(data_spec_kind("fashion-mnist", soft->data, 1) == DATA_KIND_DENSE);
    data_options_t o = {path_of("clusters.svm"), NULL, 0, 0, 0.2, 3, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, kind, &d, err, sizeof err), err);
    CHECK(d.sparse_train.dim == 1000 && d.sparse_train.n_classes == 4 && d.sparse_test.n_classes == 4);
    CHECK(memcmp(d.sparse_test.labels, class_labels, sizeof class_labels) == 0);
    double chance = majority_share(&d.sparse_test);

    // softmax through the registry, as the CLI builds it; mlp with one hidden layer of 32.
    model_options_t opts;
    flag_spec_t specs[MODEL_MAX_FLAGS];
    model_options_init(soft, &opts, specs);
    model_t *ms = model_create(soft, kind, &d.sparse_train, &d.sparse_test, &opts, 1e-4, 1, err, sizeof err);
    CHECK(ms);
    CHECK(strcmp(model_name(ms), "softmax") == 0 && model_num_params(ms) == 1000 * 4 + 4);
    size_t hidden[1] = {32};
    model_t *mm = model_new_mlp_sparse(&d.sparse_train, &d.sparse_test, hidden, 1, 1e-4, err, sizeof err);
    CHECK(mm);
    for (size_t i = 0; i < 3; i++) {
        double before;
        train_result_t r = train(ms, modes[i], 2, 8, 3, 0.2, 0.0, &before);
        printf("softmax sparse %-8s 2 threads: accuracy %.4f -> %.4f (majority class %.4f)\n",
               train_mode_name(modes[i]), before, r.last.test_metric, chance);
        CHECK(r.last.test_metric >= 0.95 && r.last.test_metric >= chance + 0.5);
        r = train(mm, modes[i], 2, 8, 3, 0.1, 0.0, &before);
        printf("mlp sparse 1000-32-4 %-8s 2 threads: accuracy %.4f -> %.4f\n", train_mode_name(modes[i]), before,
               r.last.test_metric);
        CHECK(r.last.test_metric >= 0.95);
    }
    model_destroy(&ms);
    model_destroy(&mm);

    // A binary model refuses four classes, naming them.
    const model_descriptor_t *logreg = model_registry_find("logreg");
    model_options_init(logreg, &opts, specs);
    CHECK(model_create(logreg, DATA_KIND_SPARSE, &d.sparse_train, &d.sparse_test, &opts, 0, 1, err, sizeof err) ==
          NULL);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "4 labels (3, 7, 10, 42)") && strstr(err, "binary"));
    data_bundle_free(&d);
}

// ---- CSV ----

static const char *put(const char *name, const char *text) { return test_write_file(dir, name, text, strlen(text)); }

static void check_example(const sparse_dataset_t *d, size_t i, int32_t label, size_t nnz, const uint32_t *col,
                          const float *val) {
    CHECK(d->labels[d->cls[i]] == label);
    CHECK(d->row_ptr[i + 1] - d->row_ptr[i] == nnz);
    for (size_t k = 0; k < nnz; k++) {
        CHECK(d->col[d->row_ptr[i] + k] == col[k]);
        CHECK(d->val[d->row_ptr[i] + k] == val[k]);
    }
}

static void expect_csv_error(const char *name, const char *text, const csv_options_t *o, const char *want) {
    char err[512];
    sparse_dataset_t d;
    CHECK(csv_load(put(name, text), o, &d, err, sizeof err) == -1);
    printf("refused: %s\n", err);
    CHECK(strstr(err, want) && strchr(err, '\n') == NULL);
    CHECK(d.n == 0 && d.row_ptr == NULL && d.cls == NULL);
}

static void csv_files(void) {
    char err[512];
    sparse_dataset_t d;
    csv_options_t o = {NULL, 0, NULL, 0, NULL};

    // No header: the label first, zeros dropped, CRLF and blanks.
    CHECK_OK(csv_load(put("plain.csv", "1,0.5,0,2\r\n0, 0 ,1.5e1,-3\n\n1,0,0,0\n"), &o, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 3 && d.nnz == 4 && d.n_classes == 2);
    check_example(&d, 0, 1, 2, (uint32_t[]){0, 2}, (float[]){0.5f, 2.0f});
    check_example(&d, 1, 0, 2, (uint32_t[]){1, 2}, (float[]){15.0f, -3.0f});
    check_example(&d, 2, 1, 0, NULL, NULL);
    CHECK(d.y[0] == 1.0f && d.y[1] == -1.0f);  // two labels: the binary view
    sparse_dataset_free(&d);

    // A header (detected), the label column in the middle, by name and by position.
    const char *mid = put("mid.csv", "a,\"class\",b\n0.25,7,1\n2,-1,0\n0,7,3\n");
    o.label_column = "class";
    CHECK_OK(csv_load(mid, &o, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 2 && d.n_classes == 2 && d.labels[0] == -1 && d.labels[1] == 7);
    check_example(&d, 0, 7, 2, (uint32_t[]){0, 1}, (float[]){0.25f, 1.0f});
    check_example(&d, 1, -1, 1, (uint32_t[]){0}, (float[]){2.0f});
    check_example(&d, 2, 7, 1, (uint32_t[]){1}, (float[]){3.0f});
    sparse_dataset_free(&d);
    o.label_column = "1";
    CHECK_OK(csv_load(mid, &o, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 2 && d.labels[1] == 7);
    sparse_dataset_free(&d);

    // Tabs, a numeric header forced by --csv-header, three classes.
    o = (csv_options_t){"2", 1, NULL, 0, NULL};
    CHECK_OK(csv_load(put("t.tsv", "1\t2\t3\n0.5\t1\t5\n1\t0\t9\n0\t0\t5\n"), &o, &d, err, sizeof err), err);
    CHECK(d.n == 3 && d.dim == 2 && d.n_classes == 2 && d.labels[0] == 5 && d.labels[1] == 9);
    check_example(&d, 0, 5, 2, (uint32_t[]){0, 1}, (float[]){0.5f, 1.0f});
    sparse_dataset_free(&d);

    // A second file read with the first's classes.
    const int32_t known[3] = {0, 4, 9};
    o = (csv_options_t){NULL, 0, known, 3, NULL};
    CHECK_OK(csv_load(put("known.csv", "9,1\n0,2\n"), &o, &d, err, sizeof err), err);
    CHECK(d.n_classes == 3 && d.cls[0] == 2 && d.cls[1] == 0);
    sparse_dataset_free(&d);
    expect_csv_error("unseen.csv", "9,1\n5,2\n", &o,
                     "unseen.csv:2:1: column 0: label 5 is not among the training "
                     "data's labels (0, 4, 9)");

    // Bad files: each refused at its line and column, the column named.
    o = (csv_options_t){"y", 0, NULL, 0, NULL};
    expect_csv_error("bad_cell.csv", "x1,y,x2\n1,0,2\n3,1,abc\n", &o,
                     "bad_cell.csv:3:5: column 2 ('x2'): expected a "
                     "number, got 'abc'");
    expect_csv_error("bad_label.csv", "x1,y,x2\n1,0.5,2\n", &o,
                     "bad_label.csv:2:3: column 1 ('y'): label '0.5' is "
                     "not an integer");
    expect_csv_error("short.csv", "x1,y,x2\n1,0,2\n1,0\n", &o, "short.csv:3:4: 2 cells; the first line has 3");
    expect_csv_error("empty_cell.csv", "x1,y,x2\n1,,2\n", &o, "empty_cell.csv:2:3: column 1 ('y'): empty cell");
    expect_csv_error("inf.csv", "x1,y,x2\n1,0,inf\n", &o, "inf.csv:2:5: column 2 ('x2'): value 'inf' is not finite");
    expect_csv_error("no_name.csv", "x1,z,x2\n1,0,2\n", &o, "--label-column y: ");
    o.label_column = "7";
    expect_csv_error("far.csv", "1,0,2\n", &o, "--label-column 7: ");
    o.label_column = "y";
    expect_csv_error("no_header.csv", "1,0,2\n", &o, "has no header line");
    o.label_column = NULL;
    expect_csv_error("header_only.csv", "a,b\n", &o, "header_only.csv: no examples");
    expect_csv_error("one_col.csv", "1\n2\n", &o, "one_col.csv:1: one column");
}

// CSV through the data path: logreg on two labels, softmax on three.
static void csv_models_learn(void) {
    char err[512];
    FILE *f = fopen(path_of("blobs.csv"), "w");
    CHECK(f);
    fprintf(f, "f0,f1,label,f2\n");
    rng_t r;
    rng_seed(&r, 11, 0);
    for (int i = 0; i < 3000; i++) {
        int k = i % 3;
        double cx = k == 0 ? 0 : k == 1 ? 3 : -3, cy = k == 2 ? 3 : -1;
        fprintf(f, "%.4f,%.4f,%d,%.4f\n", cx + rng_normal(&r), cy + rng_normal(&r), 10 * k, rng_normal(&r));
    }
    CHECK(fclose(f) == 0);
    data_options_t o = {path_of("blobs.csv"), NULL, 0, 0, 0.2, 3, NULL, "label", 0};
    data_bundle_t d;
    CHECK(data_spec_kind(o.spec, DATA_KIND_DENSE, 1) == DATA_KIND_SPARSE);
    CHECK_OK(data_bundle_load(&o, DATA_KIND_SPARSE, &d, err, sizeof err), err);
    CHECK(d.sparse_train.dim == 3 && d.sparse_train.n_classes == 3 && strstr(d.description, "(csv)"));
    model_t *m = model_new_mlp_sparse(&d.sparse_train, &d.sparse_test, NULL, 0, 0.0, err, sizeof err);
    CHECK(m);
    double before;
    train_result_t res = train(m, TRAIN_MODE_HOGWILD, 2, 4, 5, 0.1, 0.0, &before);
    printf("softmax on CSV (3 blobs): accuracy %.4f -> %.4f\n", before, res.last.test_metric);
    CHECK(res.last.test_metric >= 0.85);
    model_destroy(&m);
    data_bundle_free(&d);

    // Two of the blobs, labelled 0 and 20, for logistic regression; "csv:" names a file of any name.
    f = fopen(path_of("two.txt"), "w");
    CHECK(f);
    for (int i = 0; i < 2000; i++) {
        int k = i % 2;
        fprintf(f, "%d,%.4f,%.4f\n", 20 * k, (k ? 3 : 0) + rng_normal(&r), (k ? 3 : -1) + rng_normal(&r));
    }
    CHECK(fclose(f) == 0);
    char spec[512];
    snprintf(spec, sizeof spec, "csv:%s", path_of("two.txt"));
    o = (data_options_t){spec, NULL, 0, 0, 0.2, 3, NULL, NULL, 0};
    CHECK_OK(data_bundle_load(&o, DATA_KIND_SPARSE, &d, err, sizeof err), err);
    CHECK(d.sparse_train.n_classes == 2 && d.sparse_train.labels[1] == 20);
    m = model_new_linear(LINEAR_LOSS_LOGISTIC, &d.sparse_train, &d.sparse_test, 0.0, err, sizeof err);
    CHECK(m);
    res = train(m, TRAIN_MODE_HOGWILD, 2, 1, 3, 0.1, 0.0, NULL);
    printf("logreg on CSV (2 blobs, labels 0 and 20): accuracy %.4f\n", res.last.test_metric);
    CHECK(res.last.test_metric >= 0.9);
    model_destroy(&m);
    data_bundle_free(&d);
}

// ---- through the CLI ----

static void cli(void) {
    write_clusters(path_of("small.svm"), 1500, 9);
    const char *tr[] = {"train",    "--model", "mlp",    "--hidden", "16",      "--data",       path_of("small.svm"),
                        "--epochs", "3",       "--seed", "4",        "--quiet", "--save-model", path_of("mlp.model"),
                        NULL};
    CHECK(launch_run(tr) == 0);
    char *train_out = launch_slurp(path_of("stdout"));
    model_file_t mf;
    char err[512];
    CHECK_OK(model_file_read(path_of("mlp.model"), &mf, err, sizeof err), err);
    CHECK(mf.info.sparse_input == 1 && mf.info.classes == 4 && mf.info.dim == 1000);
    CHECK(memcmp(mf.info.labels, class_labels, sizeof class_labels) == 0);
    model_file_free(&mf);
    const char *ev[] = {
        "eval", "--model-file", path_of("mlp.model"), "--data", path_of("small.svm"), "--split", "test", "--seed", "4",
        NULL};
    CHECK(launch_run(ev) == 0);
    char *eval_out = launch_slurp(path_of("stdout"));
    printf("mlp on small.svm: train accuracy %.9g, eval of the saved model %.9g\n",
           launch_field(train_out, "final_test_accuracy"), launch_field(eval_out, "test_accuracy"));
    CHECK(launch_field(eval_out, "test_accuracy") == launch_field(train_out, "final_test_accuracy"));
    CHECK(launch_field(eval_out, "test_accuracy") >= 0.9);
    free(train_out), free(eval_out);

    // predict prints the file's labels, right as often as eval says.
    const char *pr[] = {
        "predict", "--model-file", path_of("mlp.model"), "--data", path_of("small.svm"), "--out", path_of("pred.txt"),
        NULL};
    CHECK(launch_run(pr) == 0);
    char *pred = launch_slurp(path_of("pred.txt")), *truth = launch_slurp(path_of("small.svm"));
    size_t lines = 0, right = 0;
    for (char *p = pred, *t = truth; *p && *t; lines++) {
        long lp = strtol(p, NULL, 10), lt = strtol(t, NULL, 10);
        CHECK(lp == 3 || lp == 7 || lp == 10 || lp == 42);
        right += lp == lt;
        p = strchr(p, '\n') + 1;
        t = strchr(t, '\n') + 1;
    }
    printf("predict: %zu of %zu right\n", right, lines);
    CHECK(lines == 1500 && right >= 1350);
    free(pred), free(truth);

    // A label the model never saw: predicted like any other line, refused by eval (it cannot be scored).
    FILE *f = fopen(path_of("unseen.svm"), "w");
    CHECK(f);
    fprintf(f, "3 1:1\n5 2:1\n");
    CHECK(fclose(f) == 0);
    const char *any[] = {"predict", "--model-file", path_of("mlp.model"), "--data", path_of("unseen.svm"), NULL};
    CHECK(launch_run(any) == 0);
    char *two = launch_slurp(path_of("stdout"));
    CHECK(strchr(two, '\n') && strchr(strchr(two, '\n') + 1, '\n'));  // two predictions
    free(two);
    const char *bad[] = {"eval", "--model-file", path_of("mlp.model"), "--data", path_of("unseen.svm"), NULL};
    CHECK(launch_run(bad) == 1);
    char *e = launch_stderr();
    printf("refused: %s", e);
    CHECK(strstr(e, "unseen.svm:2:1: label 5 is not among the training data's labels (3, 7, 10, 42)"));
    free(e);
    // logreg refuses the four classes up front, naming the file and the labels.
    const char *lr[] = {"train", "--model", "logreg", "--data", path_of("small.svm"), "--quiet", NULL};
    CHECK(launch_run(lr) == 1);
    e = launch_stderr();
    printf("refused: %s", e);
    CHECK(strstr(e, "small.svm: 4 labels (3, 7, 10, 42); logreg is a binary classifier"));
    free(e);
    // The GPU steps take dense images only.
    const char *gpu[] = {"train", "--model", "softmax", "--data", path_of("small.svm"), "--device", "cuda", NULL};
    launch_expect_refusal(gpu, "over dense images only");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    sparse_models_learn();
    csv_files();
    csv_models_learn();
    cli();
    CHECK(test_remove_tree(dir) == 0);
    printf("multiclass tests passed\n");
    return 0;
}
