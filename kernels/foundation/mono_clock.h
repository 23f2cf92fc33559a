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

// The CLOCK_MONOTONIC time at_s (seconds, as mono_clock_s gives them) as a
// timespec: a deadline for pthread_cond_timedwait on a condition variable
// made with that clock.
static inline struct timespec mono_clock_timespec(double at_s) {
    struct timespec t;
    t.tv_sec = (time_t)at_s;
    t.tv_nsec = (long)((at_s - (double)t.tv_sec) * 1e9);
    if (t.tv_nsec >= 1000000000L) {  // rounding up to a whole second
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

#endif
