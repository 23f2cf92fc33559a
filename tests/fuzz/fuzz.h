#ifndef ASGD_TESTS_FUZZ_FUZZ_H
#define ASGD_TESTS_FUZZ_FUZZ_H
// Fuzz harnesses: each feeds arbitrary bytes to one of asgd's parsers of
// untrusted input and checks what a parser must guarantee whatever it is fed:
// no crash, leak or undefined behaviour (the sanitizers' part), and either an
// accepted result that is internally consistent or a refusal with a one-line
// message. A violated invariant aborts, which libFuzzer and the regression
// test both report.
//
// Built two ways from the same files: with -DASGD_FUZZ=ON (clang) each file
// becomes a libFuzzer program; in every build tests/fuzz/test_fuzz_regressions.c
// replays the corpora under tests/fuzz/<name>/ through the same functions.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Returns 0 when the input was accepted, -1 when it was refused (err then
// holds the parser's message).
typedef int (*fuzz_harness_fn)(const uint8_t *data, size_t size, char *err, size_t err_len);

int fuzz_libsvm(const uint8_t *data, size_t size, char *err, size_t err_len);
int fuzz_ratings(const uint8_t *data, size_t size, char *err, size_t err_len);
int fuzz_csv(const uint8_t *data, size_t size, char *err, size_t err_len);
int fuzz_idx(const uint8_t *data, size_t size, char *err, size_t err_len);
int fuzz_gz(const uint8_t *data, size_t size, char *err, size_t err_len);
int fuzz_flags(const uint8_t *data, size_t size, char *err, size_t err_len);
int fuzz_wire(const uint8_t *data, size_t size, char *err, size_t err_len);

// An invariant of an accepted result does not hold: abort with where and what.
#define FUZZ_ASSERT(cond)                                                                     \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

// A refusal must say why, on one line.
static inline int fuzz_refused(int rc, const char *err) {
    if (rc != 0) {
        FUZZ_ASSERT(err[0] != '\0');
        FUZZ_ASSERT(strchr(err, '\n') == NULL);
    }
    return rc;
}

// Under -DASGD_LIBFUZZER a harness file also defines libFuzzer's entry point.
#ifdef ASGD_LIBFUZZER
#define FUZZ_ENTRY(harness)                                        \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { \
        char err[1024] = "";                                       \
        harness(data, size, err, sizeof err);                      \
        return 0;                                                  \
    }
#else
#define FUZZ_ENTRY(harness)
#endif

#endif
