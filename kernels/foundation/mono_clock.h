// Time on CLOCK_MONOTONIC, for durations and deadlines: it never jumps when
// the wall clock is set. A vDSO read, no system call.
#ifndef ASGD_KERNELS_FOUNDATION_MONO_CLOCK_H
#define ASGD_KERNELS_FOUNDATION_MONO_CLOCK_H

#include <time.h>

static inline double mono_clock_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double mono_clock_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

#endif
