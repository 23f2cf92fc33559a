// --test-data FILE (docs/cli.md), on files this test writes, with the asgd
// binary:
//   a) libsvm: the training file is used whole and the test set is exactly the
//      test file (the summary's counts; --train-limit/--test-limit cut them);
//      the final test accuracy and loss equal `asgd eval` of the saved model on
//      that file; a narrower test file is read at the training width; a wider
//      one is refused at its file:line; a bad line is refused at its file:line;
//   b) --test-frac: 0 without --test-data, a split leaving no test example and
//      a non-zero --test-frac beside --test-data are refused with a message;
//   c) ratings: the test file's ids are the training file's (the same ratings
//      in reverse order score exactly as in order; read apart they would not);
//   d) dense: a directory of t10k IDX files is the test set; an image size
//      other than the training set's is refused.
#include <math.h>
#include <sys/stat.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_test_data_XXXXXX";
#include "tests/support/launch_support.h"

static const char *path_of(const char *name) {
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

// n libsvm lines over features 1..dim (each line 4 of them), labels from a
// planted sign pattern so that a linear model learns it; line `bad` (1-based,
// 0: none) is garbage.
static void write_svm(const char *name, size_t n, size_t dim, uint64_t seed, size_t bad) {
    FILE *f = fopen(path_of(name), "w");
    CHECK(f);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 == bad) {
            fprintf(f, "+1 3:abc\n");
            continue;
        }
        size_t idx[4];
        double dot = 0.0;
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            idx[k] = (size_t)((s >> 33) % (dim / 4)) + 1 + (size_t)k * (dim / 4);  // strictly increasing
            dot += (idx[k] % 2 ? 1.0 : -1.0);
        }
        fprintf(f, "%s", dot >= 0 ? "+1" : "-1");
        for (int k = 0; k < 4; k++) fprintf(f, " %zu:1", idx[k]);
        fputc('\n', f);
    }
    fclose(f);
}

static char *stdout_text(void) { return launch_slurp(path_of("stdout")); }

static void expect_failure(const char *const *args, int status, const char *needle, const char *needle2) {
    CHECK(launch_run(args) == status);
    char *e = launch_stderr();
    printf("refused (%d): %s", status, e);
    CHECK(strstr(e, needle));
    CHECK(!needle2 || strstr(e, needle2));
    free(e);
}

static void part_libsvm(void) {
    write_svm("train.svm", 400, 40, 1, 0);
    write_svm("test.svm", 77, 40, 2, 0);
    const char *summary = path_of("s.json"), *model = path_of("m.bin");
    const char *train[] = {"train",
                           "--model",
                           "logreg",
                           "--data",
                           path_of("train.svm"),
                           "--test-data",
                           path_of("test.svm"),
                           "--epochs",
                           "3",
                           "--quiet",
                           "--summary",
                           summary,
                           "--save-model",
                           model,
                           NULL};
    CHECK(launch_run(train) == 0);
    char *s = launch_slurp(summary);
    CHECK(launch_field(s, "train_examples") == 400.0);
    CHECK(launch_field(s, "test_examples") == 77.0);
    double acc = launch_field(s, "final_test_accuracy"), loss = launch_field(s, "final_test_loss");
    printf("a) libsvm: 400 train / 77 test, test accuracy %.4f loss %.6f\n", acc, loss);
    CHECK(acc > 0.8);  // the planted pattern is learned and measured on the test file
    free(s);
    const char *eval[] = {"eval", "--model-file", model, "--data", path_of("test.svm"), "--split", "all", NULL};
    CHECK(launch_run(eval) == 0);
    char *e = stdout_text();
    CHECK(launch_field(e, "examples") == 77.0);
    CHECK(fabs(launch_field(e, "test_accuracy") - acc) < 1e-9);
    CHECK(fabs(launch_field(e, "test_loss") - loss) < 1e-6 * fmax(1.0, loss));
    free(e);

    // Limits cut the files from their first line.
    const char *limited[] = {"train",
                             "--model",
                             "logreg",
                             "--data",
                             path_of("train.svm"),
                             "--test-data",
                             path_of("test.svm"),
                             "--train-limit",
                             "100",
                             "--test-limit",
                             "10",
                             "--quiet",
                             NULL};
    CHECK(launch_run(limited) == 0);
    s = stdout_text();
    CHECK(launch_field(s, "train_examples") == 100.0 && launch_field(s, "test_examples") == 10.0);
    free(s);

    // A narrower test file (indices up to 20) is read at the training width.
    write_svm("narrow.svm", 30, 20, 3, 0);
    const char *narrow[] = {
        "train",   "--model", "logreg", "--data", path_of("train.svm"), "--test-data", path_of("narrow.svm"),
        "--quiet", NULL};
    CHECK(launch_run(narrow) == 0);
    s = stdout_text();
    CHECK(launch_field(s, "test_examples") == 30.0 && launch_field(s, "params") == 41.0);
    free(s);

    // A wider one is refused where the first index beyond the training width stands.
    FILE *f = fopen(path_of("wide.svm"), "w");
    fprintf(f, "+1 1:1 2:1\n# a comment\n-1 3:1 41:1\n");
    fclose(f);
    char where[600];
    snprintf(where, sizeof where, "%s:3:", path_of("wide.svm"));
    const char *wide[] = {"train",       "--model",           "logreg",  "--data", path_of("train.svm"),
                          "--test-data", path_of("wide.svm"), "--quiet", NULL};
    expect_failure(wide, 1, where, "beyond dim 40");

    write_svm("bad.svm", 10, 40, 4, 6);
    snprintf(where, sizeof where, "--test-data %s:6:", path_of("bad.svm"));
    const char *bad[] = {"train",       "--model",          "logreg",  "--data", path_of("train.svm"),
                         "--test-data", path_of("bad.svm"), "--quiet", NULL};
    expect_failure(bad, 1, where, NULL);

    // The same file through asgd launch (a worker reads it the same way).
    const char *launch[] = {"launch",
                            "--servers",
                            "1",
                            "--workers",
                            "1",
                            "--sync",
                            "asp",
                            "--model",
                            "logreg",
                            "--data",
                            path_of("train.svm"),
                            "--test-data",
                            path_of("test.svm"),
                            "--quiet",
                            "--run-dir",
                            path_of("run"),
                            NULL};
    CHECK(launch_run(launch) == 0);
    s = launch_file("run", "worker-0.json");
    CHECK(launch_field(s, "train_examples") == 400.0);
    free(s);
}

static void part_test_frac(void) {
    const char *zero[] = {"train",       "--model", "logreg",  "--data", path_of("train.svm"),
                          "--test-frac", "0",       "--quiet", NULL};
    expect_failure(zero, 1, "--test-frac 0", "--test-data");
    write_svm("tiny.svm", 4, 40, 5, 0);  // 10% of 4 rounds to no example
    const char *tiny[] = {"train", "--model", "logreg", "--data", path_of("tiny.svm"), "--quiet", NULL};
    expect_failure(tiny, 1, "leaves no test example", "--test-data");
    const char *both[] = {"train",       "--model",           "logreg",      "--data", path_of("train.svm"),
                          "--test-data", path_of("test.svm"), "--test-frac", "0.2",    "--quiet",
                          NULL};
    expect_failure(both, 2, "--test-frac", "--test-data");
    const char *ok[] = {"train",       "--model",           "logreg",      "--data", path_of("train.svm"),
                        "--test-data", path_of("test.svm"), "--test-frac", "0",      "--quiet",
                        NULL};
    CHECK(launch_run(ok) == 0);
}

// The test RMSE of mf trained on train.csv and tested on `test`.
static double mf_rmse(const char *test) {
    const char *args[] = {"train",       "--model",     "mf",       "--data", path_of("train.csv"),
                          "--test-data", path_of(test), "--epochs", "5",      "--quiet",
                          NULL};
    CHECK(launch_run(args) == 0);
    char *s = stdout_text();
    CHECK(launch_field(s, "test_examples") == 300.0);
    double rmse = launch_field(s, "final_test_rmse");
    free(s);
    return rmse;
}

static void part_ratings(void) {
    // User ids 100.., item ids 500..: the reversed copy meets them in another order.
    char *lines[300];
    for (int i = 0; i < 300; i++) {
        int u = (i * 7) % 20, it = (i * 11) % 15;
        lines[i] = malloc(64);
        snprintf(lines[i], 64, "%d,%d,%.1f\n", 100 + u, 500 + it, 1.0 + (double)((u % 4) * (it % 3)) / 2.0);
    }
    FILE *in_order = fopen(path_of("train.csv"), "w"), *copy = fopen(path_of("same.csv"), "w"),
         *reversed = fopen(path_of("reversed.csv"), "w");
    for (int i = 0; i < 300; i++) {
        fputs(lines[i], in_order);
        fputs(lines[i], copy);
        fputs(lines[299 - i], reversed);
    }
    fclose(in_order), fclose(copy), fclose(reversed);
    for (int i = 0; i < 300; i++) free(lines[i]);
    double same = mf_rmse("same.csv"), rev = mf_rmse("reversed.csv");
    printf("c) ratings: test RMSE %.6f in order, %.6f reversed\n", same, rev);
    CHECK(fabs(same - rev) < 1e-5);

    FILE *f = fopen(path_of("bad.csv"), "w");
    fprintf(f, "1,2,3\n1,x,3\n");
    fclose(f);
    char where[600];
    snprintf(where, sizeof where, "--test-data %s:2:", path_of("bad.csv"));
    const char *bad[] = {"train",       "--model",          "mf",      "--data", path_of("train.csv"),
                         "--test-data", path_of("bad.csv"), "--quiet", NULL};
    expect_failure(bad, 1, where, NULL);
}

static void put_be32(FILE *f, uint32_t v) {
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    fwrite(b, 1, 4, f);
}

static void write_idx(const char *sub, const char *split, uint32_t n, uint32_t side) {
    char d[512], p[700];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    mkdir(d, 0755);
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", d, split);
    FILE *f = fopen(p, "wb");
    put_be32(f, 0x803), put_be32(f, n), put_be32(f, side), put_be32(f, side);
    for (uint32_t i = 0; i < n * side * side; i++) fputc((int)((i * 37) % 256), f);
    fclose(f);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", d, split);
    f = fopen(p, "wb");
    put_be32(f, 0x801), put_be32(f, n);
    for (uint32_t i = 0; i < n; i++) fputc((int)(i % 10), f);
    fclose(f);
}

static void part_dense(void) {
    write_idx("imgs", "train", 40, 4);
    write_idx("imgs_test", "t10k", 12, 4);
    write_idx("imgs_other", "t10k", 12, 5);
    const char *args[] = {
        "train",   "--model", "softmax", "--data-dir", path_of("imgs"), "--test-data", path_of("imgs_test"),
        "--quiet", NULL};
    CHECK(launch_run(args) == 0);
    char *s = stdout_text();
    CHECK(launch_field(s, "train_examples") == 40.0 && launch_field(s, "test_examples") == 12.0);
    free(s);
    const char *other[] = {
        "train",   "--model", "softmax", "--data-dir", path_of("imgs"), "--test-data", path_of("imgs_other"),
        "--quiet", NULL};
    expect_failure(other, 1, "25", "16");
    const char *missing[] = {"train",       "--model",       "softmax", "--data-dir", path_of("imgs"),
                             "--test-data", path_of("imgs"), "--quiet", NULL};
    expect_failure(missing, 1, "--test-data", "t10k-images-idx3-ubyte");
}

int main(void) {
    CHECK(mkdtemp(dir));
    part_libsvm();
    part_test_frac();
    part_ratings();
    part_dense();
    CHECK(test_remove_tree(dir) == 0);
    printf("test_test_data: ok\n");
    return 0;
}
