// CSV as users write it (datasets/csv.h):
//   a) RFC 4180 quoting: the delimiter and doubled quotes inside quoted
//      cells, blanks around the quotes, quoted numbers and header names; a
//      quote that does not close on its line, text after a closing quote;
//   b) string class labels: detected from the first data line (with a header
//      or without), ordered by their bytes, kept as the set's names; integer
//      files as before; the errors of mixing them, of empty and long labels,
//      of too many; a second file read with the first's names;
//   c) through the program: train on string labels, the model file keeps
//      them (format version 2), predict prints them and eval scores them;
//      --test-data CSV, predict's unknown labels and libsvm data refused.
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_csv_XXXXXX";

#include "datasets/csv.h"
#include "tests/support/input_support.h"
#include "tests/support/launch_support.h"

static const char *put(const char *name, const char *text) { return test_write_file(dir, name, text, strlen(text)); }

static const char *path_of(const char *name) { return input_path(dir, name); }

static void load_ok(const char *name, const char *text, const csv_options_t *o, sparse_dataset_t *d) {
    char err[512];
    CHECK_OK(csv_load(put(name, text), o, d, err, sizeof err), err);
}

static void expect_error(const char *name, const char *text, const csv_options_t *o, const char *want) {
    char err[512];
    sparse_dataset_t d;
    CHECK(csv_load(put(name, text), o, &d, err, sizeof err) == -1);
    printf("  refused: %s\n", err);
    if (!strstr(err, want) || strchr(err, '\n')) {
        fprintf(stderr, "want: %s\n", want);
        exit(1);
    }
    CHECK(d.n == 0 && d.row_ptr == NULL && d.cls == NULL && d.label_text == NULL);
}

static void check_row(const sparse_dataset_t *d, size_t i, int32_t cls, size_t nnz, const uint32_t *col,
                      const float *val) {
    CHECK(d->cls[i] == cls);
    CHECK(d->row_ptr[i + 1] - d->row_ptr[i] == nnz);
    for (size_t k = 0; k < nnz; k++) CHECK(d->col[d->row_ptr[i] + k] == col[k] && d->val[d->row_ptr[i] + k] == val[k]);
}

static void check_names(const sparse_dataset_t *d, size_t k, const char *const *want) {
    CHECK(d->n_classes == k && d->label_text);
    const char *names[16];
    dataset_label_names(d->label_text, k, names);
    for (size_t i = 0; i < k; i++) {
        if (strcmp(names[i], want[i]) != 0) {
            fprintf(stderr, "class %zu: '%s', want '%s'\n", i, names[i], want[i]);
            exit(1);
        }
        CHECK(d->labels[i] == (int32_t)i);
    }
}

// ---- a) quoting ----

static void quoting(void) {
    printf("a) RFC 4180 quoting\n");
    csv_options_t o = {"label, class", 0, NULL, 0, NULL};
    sparse_dataset_t d;
    // A header name with the delimiter and a doubled quote; quoted numbers; blanks around quotes.
    load_ok("q.csv",
            "\"a \"\"x\"\"\",\"label, class\",b\n"
            "\"1.5\", 7 ,\"0\"\n"
            " \"2\" ,\"-1\",  3\r\n",
            &o, &d);
    CHECK(d.n == 2 && d.dim == 2 && d.n_classes == 2 && !d.label_text && d.labels[0] == -1 && d.labels[1] == 7);
    check_row(&d, 0, 1, 1, (uint32_t[]){0}, (float[]){1.5f});
    check_row(&d, 1, 0, 2, (uint32_t[]){0, 1}, (float[]){2.0f, 3.0f});
    sparse_dataset_free(&d);
    // Tabs: a quoted tab is not a delimiter.
    o = (csv_options_t){NULL, 0, NULL, 0, NULL};
    load_ok("q.tsv", "y\t\"x\t1\"\tx2\n1\t2\t3\n0\t\"4\"\t5\n", &o, &d);
    CHECK(d.n == 2 && d.dim == 2);
    check_row(&d, 1, 0, 2, (uint32_t[]){0, 1}, (float[]){4.0f, 5.0f});
    sparse_dataset_free(&d);
    // A quoted cell of a number with the delimiter inside is one cell, not a number.
    expect_error("q_bad_number.csv", "y,x1,x2\n1,\"1,5\",2\n", &o,
                 "q_bad_number.csv:2:4: column 1 ('x1'): expected a number, got '1,5'");
    expect_error(
        "q_open.csv", "y,x\n1,2\n0,\"3\n", &o,
        "q_open.csv:3:3: a quoted cell opens here and is not closed on its line (expected a closing '\"'; newlines "
        "inside quotes are not read)");
    expect_error("q_newline.csv", "y,x\n\"a\nb\",2\n", &o,
                 "q_newline.csv:2:1: a quoted cell opens here and is not closed");
    expect_error("q_after.csv", "y,x\n1,\"2\"3\n", &o,
                 "q_after.csv:2:6: expected the delimiter or the end of the line after a quoted cell, got '3'");
    expect_error("q_header.csv", "\"y,x\n1,2\n", &o, "q_header.csv:1:1: a quoted cell opens here");
    // A NUL byte before the first line: no column is known, nothing is parsed.
    char nul[] = "  \0x\n1,2\n3,4\n";
    sparse_dataset_t nd;
    char err[512];
    CHECK(csv_load(test_write_file(dir, "nul.csv", nul, sizeof nul - 1), &o, &nd, err, sizeof err) == -1);
    printf("  refused: %s\n", err);
    CHECK(strstr(err, "nul.csv:1:3: NUL byte in a text file (is it binary?)"));
    // An unquoted cell is taken as written, quotes included.
    expect_error("q_inner.csv", "y,x\n1,2\"\n", &o, "q_inner.csv:2:3: column 1 ('x'): expected a number, got '2\"'");
}

// ---- b) string labels ----

static void string_labels(void) {
    printf("b) string labels\n");
    csv_options_t o = {NULL, 0, NULL, 0, NULL};
    sparse_dataset_t d;
    // No header: the first line's label is not a number, the next line's neither.
    load_ok("iris.csv", "setosa,5.1,3.5\nvirginica,6.3,3.3\nversicolor,7,3.2\nsetosa,4.9,3\n", &o, &d);
    check_names(&d, 3, (const char *const[]){"setosa", "versicolor", "virginica"});
    CHECK(d.n == 4 && d.dim == 2 && d.cls[0] == 0 && d.cls[1] == 2 && d.cls[2] == 1 && d.cls[3] == 0);
    check_row(&d, 2, 1, 2, (uint32_t[]){0, 1}, (float[]){7.0f, 3.2f});
    sparse_dataset_free(&d);
    // A header, the label last by name, quoted labels with commas; a number among strings is a string.
    o.label_column = "species";
    load_ok("iris_h.csv",
            "sepal,petal,species\n1,2,\"Iris, setosa\"\n3,4,Iris-virginica\n5,0,\"Iris, setosa\"\n0,1,10\n", &o, &d);
    check_names(&d, 3, (const char *const[]){"10", "Iris, setosa", "Iris-virginica"});
    CHECK(d.cls[0] == 1 && d.cls[1] == 2 && d.cls[2] == 1 && d.cls[3] == 0);
    sparse_dataset_free(&d);
    // Two string labels: the binary view, the lower name -1.
    o.label_column = "2";
    load_ok("two.csv", "0.5,1,yes\n1,0,no\n", &o, &d);
    check_names(&d, 2, (const char *const[]){"no", "yes"});
    CHECK(d.y[0] == 1.0f && d.y[1] == -1.0f);
    sparse_dataset_free(&d);
    // Only the label cell of the first line is not a number, and the next line's is: a header.
    o.label_column = NULL;
    load_ok("named.csv", "species,1,2\n7,0.5,1\n3,1,0\n", &o, &d);
    CHECK(d.n == 2 && !d.label_text && d.labels[0] == 3 && d.labels[1] == 7);
    sparse_dataset_free(&d);
    // A header over string labels; one line of string label and no header.
    load_ok("hdr.csv", "y,a,b\ncat,1,2\ndog,3,4\n", &o, &d);
    check_names(&d, 2, (const char *const[]){"cat", "dog"});
    sparse_dataset_free(&d);
    load_ok("one.csv", "cat,1,2\n", &o, &d);
    check_names(&d, 1, (const char *const[]){"cat"});
    sparse_dataset_free(&d);

    // Errors.
    expect_error(
        "mixed.csv", "y,a\n1,2\ncat,3\n", &o,
        "mixed.csv:3:1: column 0 ('y'): expected a number, got 'cat' (the first data line's label is a number: "
        "every label must be one)");
    expect_error("empty_label.csv", "cat,1\n,2\n", &o, "empty_label.csv:2:1: column 0: empty cell (expected a label)");
    char long_label[200];
    snprintf(long_label, sizeof long_label, "cat,1\n%070d,2\n", 1);
    long_label[6] = 'x';
    expect_error("long.csv", long_label, &o, "long.csv:2:1: column 0: label 'x0000");
    expect_error("long.csv", long_label, &o, "...' of 70 bytes; at most 64 are read");
    FILE *f = fopen(path_of("many.csv"), "w");
    CHECK(f);
    for (int i = 0; i < 1100; i++) fprintf(f, "class%04d,%d\n", i, i);
    CHECK(fclose(f) == 0);
    char err[512];
    CHECK(csv_load(path_of("many.csv"), &o, &d, err, sizeof err) == -1);
    printf("  refused: %.160s...\n", err);
    CHECK(strstr(err, "many.csv: more than 1024 distinct labels ('class0000', 'class0001'"));

    // A second file with the first's names.
    load_ok("train.csv", "b,1\na,2\nc,3\n", &o, &d);
    const csv_options_t with = {NULL, 0, d.labels, d.n_classes, d.label_text};
    sparse_dataset_t t;
    load_ok("test.csv", "c,1\n\"a\",2\n", &with, &t);
    check_names(&t, 3, (const char *const[]){"a", "b", "c"});
    CHECK(t.n == 2 && t.cls[0] == 2 && t.cls[1] == 0);
    sparse_dataset_free(&t);
    // Its first line's label is a number, and still a name.
    load_ok("test2.csv", "b,1\n", &with, &t);
    CHECK(t.cls[0] == 1);
    sparse_dataset_free(&t);
    expect_error("unknown.csv", "a,1\nd,2\n", &with,
                 "unknown.csv:2:1: column 0: label 'd' is not among the training data's labels ('a', 'b', 'c')");
    // Integer classes given: a string label is refused.
    const int32_t ints[2] = {0, 1};
    const csv_options_t with_ints = {NULL, 0, ints, 2, NULL};
    expect_error("ints.csv", "1,1\ncat,2\n", &with_ints, "ints.csv:2:1: column 0: expected a number, got 'cat'");
    sparse_dataset_free(&d);
}

// ---- c) through the program ----

// Two clusters (or three) of points labelled by names.
static void write_blobs(const char *name, const char *const *labels, int k, int n, uint64_t seed) {
    FILE *f = fopen(path_of(name), "w");
    CHECK(f);
    fprintf(f, "x1,x2,x3,\"the class\"\n");
    rng_t r;
    rng_seed(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        int c = (int)rng_below(&r, (uint64_t)k);
        fprintf(f, "%.4f,%.4f,%.4f,%s\n", 3.0 * c + 0.5 * rng_normal(&r), -2.0 * c + 0.5 * rng_normal(&r),
                0.5 * rng_normal(&r), labels[c]);
    }
    CHECK(fclose(f) == 0);
}

static void through_the_program(void) {
    printf("c) train -> model file -> predict\n");
    const char *two[] = {"\"no, never\"", "yes"}, *three[] = {"setosa", "versicolor", "virginica"};
    write_blobs("two.csv", two, 2, 2000, 1);
    write_blobs("three.csv", three, 3, 3000, 2);
    const char *tr[] = {"train",     "--model",  "logreg", "--data",  path_of("two.csv"), "--label-column",
                        "the class", "--epochs", "2",      "--quiet", "--save-model",     path_of("two.model"),
                        NULL};
    CHECK(launch_run(tr) == 0);
    model_file_t mf;
    char err[512];
    CHECK_OK(model_file_read(path_of("two.model"), &mf, err, sizeof err), err);
    CHECK(mf.info.classes == 2 && mf.info.label_text_bytes == strlen("no, never") + 1 + strlen("yes") + 1);
    CHECK(strcmp(mf.info.label_text, "no, never") == 0 && strcmp(mf.info.label_text + 10, "yes") == 0);
    model_file_free(&mf);
    unsigned char head[12];
    FILE *f = fopen(path_of("two.model"), "rb");
    CHECK(f && fread(head, 1, 12, f) == 12 && fclose(f) == 0);
    CHECK(memcmp(head, "ASGDMODL\2\0\0\0", 12) == 0);  // version 2: names follow the labels

    // predict prints the names, right as often as the data says.
    const char *pr[] = {
        "predict",   "--model-file", path_of("two.model"), "--data", path_of("two.csv"), "--label-column",
        "the class", "--out",        path_of("two.pred"),  NULL};
    CHECK(launch_run(pr) == 0);
    char *pred = launch_slurp(path_of("two.pred")), *truth = launch_slurp(path_of("two.csv"));
    size_t lines = 0, right = 0;
    const char *t = strchr(truth, '\n') + 1;
    for (const char *p = pred; *p; lines++) {
        const char *nl = strchr(t, '\n');
        int truth_no = memchr(t, '"', (size_t)(nl - t)) != NULL;  // the quoted name
        int is_no = strncmp(p, "no, never ", 10) == 0, is_yes = strncmp(p, "yes ", 4) == 0;
        CHECK(is_no || is_yes);
        right += is_no == truth_no;
        p = strchr(p, '\n') + 1;
        t = nl + 1;
    }
    printf("  logreg on 'no, never' / 'yes': predict printed %zu names, %zu right\n", lines, right);
    CHECK(lines == 2000 && right >= 1900);
    free(pred);
    free(truth);

    // softmax on three names; eval scores the saved model on its split as train did.
    const char *tr3[] = {"train",
                         "--model",
                         "softmax",
                         "--data",
                         path_of("three.csv"),
                         "--label-column",
                         "3",
                         "--epochs",
                         "3",
                         "--lr",
                         "0.3",
                         "--seed",
                         "5",
                         "--quiet",
                         "--save-model",
                         path_of("three.model"),
                         NULL};
    CHECK(launch_run(tr3) == 0);
    char *train_out = launch_slurp(path_of("stdout"));
    const char *ev[] = {"eval",
                        "--model-file",
                        path_of("three.model"),
                        "--data",
                        path_of("three.csv"),
                        "--label-column",
                        "3",
                        "--split",
                        "test",
                        "--seed",
                        "5",
                        NULL};
    CHECK(launch_run(ev) == 0);
    char *eval_out = launch_slurp(path_of("stdout"));
    printf("  softmax on three names: train %.6f, eval of the saved model %.6f\n",
           launch_field(train_out, "final_test_accuracy"), launch_field(eval_out, "test_accuracy"));
    CHECK(launch_field(eval_out, "test_accuracy") == launch_field(train_out, "final_test_accuracy"));
    CHECK(launch_field(eval_out, "test_accuracy") >= 0.9);
    free(train_out);
    free(eval_out);
    const char *pr3[] = {"predict",
                         "--model-file",
                         path_of("three.model"),
                         "--data",
                         path_of("three.csv"),
                         "--label-column",
                         "3",
                         "--split",
                         "test",
                         "--seed",
                         "5",
                         "--out",
                         path_of("three.pred"),
                         NULL};
    CHECK(launch_run(pr3) == 0);
    pred = launch_slurp(path_of("three.pred"));
    size_t named = 0;
    for (const char *p = pred; *p; p = strchr(p, '\n') + 1, named++)
        CHECK(strncmp(p, "setosa ", 7) == 0 || strncmp(p, "versicolor ", 11) == 0 || strncmp(p, "virginica ", 10) == 0);
    CHECK(named == 300);
    free(pred);

    // --test-data in CSV with the training file's names.
    write_blobs("three_test.csv", three, 3, 500, 3);
    const char *td[] = {"train",
                        "--model",
                        "softmax",
                        "--data",
                        path_of("three.csv"),
                        "--test-data",
                        path_of("three_test.csv"),
                        "--label-column",
                        "3",
                        "--epochs",
                        "2",
                        "--quiet",
                        NULL};
    CHECK(launch_run(td) == 0);
    train_out = launch_slurp(path_of("stdout"));
    CHECK(launch_field(train_out, "final_test_accuracy") >= 0.9);
    free(train_out);

    // A name the model does not know: predict reads any label (it is not
    // used) and prints the model's names; eval, which scores the labels, refuses it.
    put("unknown.csv", "x1,x2,x3,the class\n1,2,3,setosa\n1,2,3,iris\n");
    const char *unk_predict[] = {
        "predict", "--model-file", path_of("three.model"),  "--data", path_of("unknown.csv"), "--label-column",
        "3",       "--out",        path_of("unknown.pred"), NULL};
    CHECK(launch_run(unk_predict) == 0);
    char *unk_out = launch_slurp(path_of("unknown.pred"));
    CHECK(strchr(unk_out, '\n') && strchr(strchr(unk_out, '\n') + 1, '\n') &&
          (strncmp(unk_out, "setosa ", 7) == 0 || strncmp(unk_out, "versicolor ", 11) == 0 ||
           strncmp(unk_out, "virginica ", 10) == 0));
    free(unk_out);
    const char *unk[] = {
        "eval", "--model-file", path_of("three.model"), "--data", path_of("unknown.csv"), "--label-column", "3", NULL};
    CHECK(launch_run(unk) == 1);
    char *e = launch_stderr();
    printf("  refused: %s", e);
    CHECK(strstr(e,
                 "unknown.csv:3:7: column 3 ('the class'): label 'iris' is not among the training data's labels "
                 "('setosa', 'versicolor', 'virginica')"));
    free(e);
    put("ints.svm", "1 1:1\n");
    const char *svm[] = {"eval", "--model-file", path_of("three.model"), "--data", path_of("ints.svm"), NULL};
    CHECK(launch_run(svm) == 1);
    e = launch_stderr();
    printf("  refused: %s", e);
    CHECK(strstr(e,
                 "ints.svm: a libsvm file's labels are integers, and the training data's are strings ('setosa', "
                 "'versicolor', 'virginica'): give the examples as CSV"));
    free(e);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    quoting();
    string_labels();
    through_the_program();
    CHECK(test_remove_tree(dir) == 0);
    printf("csv tests passed\n");
    return 0;
}
