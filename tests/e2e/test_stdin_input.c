// Data from "-" (standard input) and from pipes (datasets/data_input.h):
//   a) the readers take "-": libsvm, CSV and compressed bytes through a pipe
//      read as the file does; a bad line is named "stdin:LINE:COLUMN";
//   b) asgd train and asgd predict with --data - (stdin a file, or a pipe
//      fed while they read) and --data FIFO give the results of the file;
//      their errors name stdin; --data - with --test-data - is refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_stdin_XXXXXX";

#include "datasets/csv.h"
#include "datasets/libsvm.h"
#include "tests/support/input_support.h"
#include "tests/support/launch_support.h"

static const char *path_of(const char *name) { return input_path(dir, name); }

// Runs a reader with the file `from` fed to this process's stdin through a pipe.
typedef int (*reader_fn)(sparse_dataset_t *d, char *err, size_t err_len);
static int read_stdin_fed(const char *from, reader_fn read, sparse_dataset_t *d, char *err, size_t err_len) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    int saved = dup(0);
    CHECK(saved >= 0 && dup2(fds[0], 0) == 0);
    close(fds[0]);
    pid_t w = input_feed(fds[1], NULL, from);
    close(fds[1]);
    int rc = read(d, err, err_len);
    CHECK(dup2(saved, 0) == 0);
    close(saved);
    input_fed(w, 1);
    return rc;
}

static int read_libsvm(sparse_dataset_t *d, char *err, size_t err_len) { return libsvm_load("-", 0, d, err, err_len); }
static int read_csv(sparse_dataset_t *d, char *err, size_t err_len) {
    csv_options_t o = {"y", 0, NULL, 0, NULL};
    return csv_load("-", &o, d, err, err_len);
}

static void gzip_copy(const char *from, const char *to) {
    size_t len;
    char *bytes = input_slurp(from, &len);
    gzFile g = gzopen(to, "wb6");
    CHECK(g && gzwrite(g, bytes, (unsigned)len) == (int)len && gzclose(g) == Z_OK);
    free(bytes);
}

// ---- a) the readers ----

static void readers(void) {
    printf("a) the readers on stdin\n");
    char err[512];
    sparse_dataset_t orig, file, in;
    make_sparse(&orig, 8000, 900, 15, 4);  // ~1.6 MB: more than one block, more than a pipe's buffer
    CHECK_OK(sparse_dataset_set_classes(&orig, (const int32_t[]){-1, 1}, 2, err, sizeof err), err);
    for (size_t i = 0; i < orig.n; i++) orig.cls[i] = orig.y[i] > 0;
    CHECK_OK(libsvm_write(path_of("data.svm"), &orig, err, sizeof err), err);
    CHECK_OK(libsvm_load(path_of("data.svm"), 0, &file, err, sizeof err), err);
    CHECK_OK(read_stdin_fed(path_of("data.svm"), read_libsvm, &in, err, sizeof err), err);
    input_same_sparse(&file, &in);
    sparse_dataset_free(&in);
    gzip_copy(path_of("data.svm"), path_of("data.svm.gz"));
    CHECK_OK(read_stdin_fed(path_of("data.svm.gz"), read_libsvm, &in, err, sizeof err), err);
    input_same_sparse(&file, &in);
    sparse_dataset_free(&in);
    printf("  libsvm, plain and gzip, through a pipe: %zu examples as from the file\n", file.n);

    FILE *f = fopen(path_of("data.csv"), "w");
    CHECK(f);
    fprintf(f, "x,y,z\n");
    for (int i = 0; i < 30000; i++) fprintf(f, "%d.25,%s,%d\n", i % 9, i % 2 ? "\"on, yes\"" : "off", i % 5);
    CHECK(fclose(f) == 0);
    csv_options_t o = {"y", 0, NULL, 0, NULL};
    sparse_dataset_t cf;
    CHECK_OK(csv_load(path_of("data.csv"), &o, &cf, err, sizeof err), err);
    CHECK_OK(read_stdin_fed(path_of("data.csv"), read_csv, &in, err, sizeof err), err);
    input_same_sparse(&cf, &in);
    CHECK(in.label_text && strcmp(in.label_text, "off") == 0);
    sparse_dataset_free(&in);
    sparse_dataset_free(&cf);
    printf("  CSV of string labels through a pipe: as from the file\n");

    test_write_file(dir, "bad.svm", "1 1:1\n-1 2:1\n1 3:x\n", 19);
    CHECK(read_stdin_fed(path_of("bad.svm"), read_libsvm, &in, err, sizeof err) == -1);
    printf("  refused: %s\n", err);
    CHECK(strcmp(err, "stdin:3:5: expected a number after '3:', got 'x'") == 0);
    sparse_dataset_free(&file);
    sparse_dataset_free(&orig);
}

// ---- b) through the program ----

// Runs asgd args with stdin from the file `in` (pipe: fed through a pipe while
// it runs, else opened as its stdin); stdout and stderr to dir. Its exit status.
static int run_with_stdin(const char *const *args, const char *in, int pipe_it) {
    const char *argv[64] = {ASGD_BINARY};
    int n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int fds[2] = {-1, -1};
    if (pipe_it) {
        CHECK(pipe(fds) == 0);
        posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
        posix_spawn_file_actions_addclose(&fa, fds[1]);
    } else {
        posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
    }
    posix_spawn_file_actions_addopen(&fa, 1, path_of("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, path_of("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid, writer = -1;
    CHECK(posix_spawn(&pid, ASGD_BINARY, &fa, NULL, (char **)argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    if (pipe_it) {
        close(fds[0]);
        writer = input_feed(fds[1], NULL, in);
        close(fds[1]);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    if (writer > 0) input_fed(writer, 1);
    return WEXITSTATUS(status);
}

static void program(void) {
    printf("b) asgd train and predict on stdin and FIFOs\n");
    const char *from_file[] = {"train",  "--model", "logreg",  "--data",       path_of("data.svm"),   "--epochs", "2",
                               "--seed", "3",       "--quiet", "--save-model", path_of("file.model"), NULL};
    CHECK(launch_run(from_file) == 0);
    char *want = launch_slurp(path_of("stdout"));
    double acc = launch_field(want, "final_test_accuracy");
    // The same run from stdin, then from a pipe: the same data, split and model.
    const char *from_stdin[] = {"train",
                                "--model",
                                "logreg",
                                "--data",
                                "-",
                                "--epochs",
                                "2",
                                "--seed",
                                "3",
                                "--quiet",
                                "--save-model",
                                path_of("stdin.model"),
                                NULL};
    for (int pipe_it = 0; pipe_it <= 1; pipe_it++) {
        CHECK(run_with_stdin(from_stdin, path_of("data.svm"), pipe_it) == 0);
        char *got = launch_slurp(path_of("stdout"));
        CHECK(launch_field(got, "final_test_accuracy") == acc && strstr(got, "\"data\":\"stdin (libsvm)"));
        free(got);
        CHECK(launch_model_diff(path_of("file.model"), path_of("stdin.model")) == 0.0);
    }
    printf("  train --data - (stdin a file, then a pipe): accuracy %.6f and the model, as from the file\n", acc);
    free(want);

    // predict from a pipe and from a FIFO prints what it prints for the file.
    const char *pf[] = {"predict", "--model-file", path_of("file.model"), "--data", path_of("data.svm"), NULL};
    CHECK(launch_run(pf) == 0);
    want = launch_slurp(path_of("stdout"));
    const char *ps[] = {"predict", "--model-file", path_of("file.model"), "--data", "-", NULL};
    CHECK(run_with_stdin(ps, path_of("data.svm.gz"), 1) == 0);
    char *got = launch_slurp(path_of("stdout"));
    CHECK(strcmp(got, want) == 0 && strlen(got) > 8000);
    free(got);
    CHECK(mkfifo(path_of("fifo"), 0600) == 0);
    pid_t w = input_feed(-1, path_of("fifo"), path_of("data.svm"));
    const char *pfifo[] = {"predict", "--model-file", path_of("file.model"), "--data", path_of("fifo"), NULL};
    CHECK(launch_run(pfifo) == 0);
    input_fed(w, 1);
    got = launch_slurp(path_of("stdout"));
    CHECK(strcmp(got, want) == 0);
    free(got);
    free(want);
    printf("  predict --data - (a pipe of gzip) and --data FIFO: the file's predictions\n");

    // CSV from stdin, errors naming stdin, stdin twice.
    const char *csv[] = {"train", "--model", "logreg", "--data", "csv:-", "--label-column", "y", "--quiet", NULL};
    CHECK(run_with_stdin(csv, path_of("data.csv"), 1) == 0);
    got = launch_slurp(path_of("stdout"));
    CHECK(strstr(got, "\"data\":\"stdin (csv)") && strstr(got, "\"train_examples\":27000"));
    free(got);
    const char *bad[] = {"train", "--model", "logreg", "--data", "-", "--quiet", NULL};
    CHECK(run_with_stdin(bad, path_of("bad.svm"), 1) == 1);
    char *e = launch_stderr();
    printf("  refused: %s", e);
    CHECK(strstr(e, "asgd train: stdin:3:5: expected a number after '3:', got 'x'"));
    free(e);
    const char *twice[] = {"train", "--model", "logreg", "--data", "-", "--test-data", "-", "--quiet", NULL};
    CHECK(run_with_stdin(twice, path_of("data.svm"), 0) == 1);
    e = launch_stderr();
    printf("  refused: %s", e);
    CHECK(strstr(e, "--data - and --test-data -: both are stdin, which can be read once; give one of them as a file"));
    free(e);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    readers();
    program();
    CHECK(test_remove_tree(dir) == 0);
    printf("stdin input tests passed\n");
    return 0;
}
