#ifndef ASGD_BENCH_SUPPORT_H
#define ASGD_BENCH_SUPPORT_H
// Timing and argument helpers shared by the benchmarks. (The MPI reference
// program is built without the project's _GNU_SOURCE and includes this first.)
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median resists the other tenants of a shared machine better than the
// mean. Sorts v in place.
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A comma-separated list of positive integers ("1,16,64") into out[0..max);
// returns the count. A malformed list ends the program with a message naming `prog`.
static inline size_t bench_parse_list(const char *prog, const char *s, size_t *out, size_t max) {
    const char *list = s;
    size_t n = 0;
    char *end;
    while (*s && n < max) {
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || v == 0 || (*end && *end != ',')) {
            fprintf(stderr, "%s: bad list '%s' (positive integers, comma-separated)\n", prog, list);
            exit(2);
        }
        out[n++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

#endif
