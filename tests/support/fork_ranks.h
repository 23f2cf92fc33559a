#ifndef ASGD_TESTS_FORK_RANKS_H
#define ASGD_TESTS_FORK_RANKS_H
// Helpers for collective tests whose ranks are forked children: seeded data
// that is never zero (a sum missing a rank shows), memory the children share
// with the parent for their results, and the forks with pipes that relay
// endpoints.
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/foundation/rng.h"
#include "tests/support/test_support.h"

// Rank `rank`'s values of a call seeded `seed`, in [0.5, 1.5).
static inline void fork_ranks_fill(float *x, size_t count, uint64_t seed, size_t rank) {
    rng_t g;
    rng_seed(&g, seed, 1 + rank);
    for (size_t i = 0; i < count; i++) x[i] = (float)(0.5 + rng_uniform(&g));
}

// Anonymous memory that survives fork shared, for the children's results.
static inline void *fork_ranks_shared(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

static inline void fork_ranks_write(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        CHECK(w > 0);
        c += w, n -= (size_t)w;
    }
}

// Returns 0 at end of file (the other side is gone) before all n bytes, else 1.
static inline int fork_ranks_read(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        c += r, n -= (size_t)r;
    }
    return 1;
}

// Forks rank i with a pipe each way: up[i] (the child writes, the parent
// reads) and down[i] (the parent writes, the child reads). Returns the
// child's pid in the parent, which keeps up[i][0] and down[i][1]; returns 0
// in the child, which keeps up[i][1] and down[i][0] and none of the parent's
// ends of ranks 0 .. i-1.
static inline pid_t fork_ranks_spawn(size_t i, int (*up)[2], int (*down)[2]) {
    CHECK(pipe(up[i]) == 0 && pipe(down[i]) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (size_t k = 0; k < i; k++) close(up[k][0]), close(down[k][1]);
        close(up[i][0]);
        close(down[i][1]);
        return 0;
    }
    close(up[i][1]);
    close(down[i][0]);
    return pid;
}

// Reads every rank's endpoint (len bytes from up[i]) and sends each rank its
// next rank's, (i + 1) % n, on down[i]: how ranks of a ring meet.
static inline void fork_ranks_relay_next(size_t n, int (*up)[2], int (*down)[2], size_t len) {
    char *eps = malloc(n * len);
    CHECK(eps);
    for (size_t i = 0; i < n; i++) CHECK(fork_ranks_read(up[i][0], eps + i * len, len));
    for (size_t i = 0; i < n; i++) fork_ranks_write(down[i][1], eps + ((i + 1) % n) * len, len);
    free(eps);
}

#endif
