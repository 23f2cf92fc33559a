#ifndef ASGD_TESTS_INPUT_SUPPORT_H
#define ASGD_TESTS_INPUT_SUPPORT_H
// Helpers shared by the tests of data input (test_gz_input, test_compressed_input,
// test_stdin_input, test_csv, test_parse_blocks): paths in the test's
// directory, a file's bytes read with stdio alone (so that expectations do
// not go through the code under test), a pipe fed by a child, and two sparse
// sets compared byte for byte.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/test_support.h"

// folder/name in one of 32 rotating buffers: argument lists hold several at once.
static inline const char *input_path(const char *folder, const char *name) {
    static char paths[32][512];
    static int next;
    char *p = paths[next++ % 32];
    snprintf(p, 512, "%s/%s", folder, name);
    return p;
}

// The whole file (caller frees); *len its size.
static inline char *input_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    CHECK(buf);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) CHECK((buf = realloc(buf, cap *= 2)) != NULL);
    }
    CHECK(!ferror(f) && fclose(f) == 0);
    *len = n;
    return buf;
}

// A child that writes the file `from` to fd (a pipe's end, or a FIFO opened
// for writing when fd is -1 and fifo names it), then exits: 0 once it wrote
// it all, 1 when the reader stopped reading first. The caller closes its own fd.
static inline pid_t input_feed(int fd, const char *fifo, const char *from) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        size_t len, done = 0;
        char *bytes = input_slurp(from, &len);
        if (fd < 0) fd = open(fifo, O_WRONLY);
        while (fd >= 0 && done < len) {
            ssize_t w = write(fd, bytes + done, len - done);
            if (w <= 0) break;
            done += (size_t)w;
        }
        _exit(done == len ? 0 : 1);
    }
    return pid;
}

// Waits for a feeding child: it must have written everything when `whole`.
static inline void input_fed(pid_t child, int whole) {
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && (!whole || WEXITSTATUS(st) == 0));
}

// Two sets with the same examples, byte for byte (and the same binary view y).
static inline void input_same_examples(const sparse_dataset_t *a, const sparse_dataset_t *b) {
    CHECK(a->n == b->n && a->dim == b->dim && a->nnz == b->nnz);
    CHECK(memcmp(a->row_ptr, b->row_ptr, (a->n + 1) * sizeof *a->row_ptr) == 0);
    CHECK(memcmp(a->col, b->col, a->nnz * sizeof *a->col) == 0);
    CHECK(memcmp(a->val, b->val, a->nnz * sizeof *a->val) == 0);
    CHECK(memcmp(a->y, b->y, a->n * sizeof *a->y) == 0);
}

// Two sets equal byte for byte: examples, classes and their names.
static inline void input_same_sparse(const sparse_dataset_t *a, const sparse_dataset_t *b) {
    input_same_examples(a, b);
    CHECK(a->n_classes == b->n_classes && !a->cls == !b->cls && !a->label_text == !b->label_text);
    if (a->cls) {
        CHECK(memcmp(a->cls, b->cls, a->n * sizeof *a->cls) == 0);
        CHECK(memcmp(a->labels, b->labels, a->n_classes * sizeof *a->labels) == 0);
    }
    if (a->label_text)
        CHECK(memcmp(a->label_text, b->label_text, dataset_label_text_bytes(a->label_text, a->n_classes)) == 0);
}

#endif
