#ifndef ASGD_ENGINE_SPIN_BARRIER_H
#define ASGD_ENGINE_SPIN_BARRIER_H
// A sense-reversing barrier for threads that each own a core. Synchronous
// training meets at a barrier several times per minibatch; a futex-based
// pthread_barrier_wait costs tens of microseconds per crossing (the kernel puts
// waiters to sleep and wakes them), a spinning one well under one. Waiters spin
// with the CPU's pause hint and fall back to sched_yield after a while, so that
// runs with more threads than cores still make progress.
#include <sched.h>
#include <stdatomic.h>

typedef struct spin_barrier {
    _Atomic unsigned arrived;
    _Atomic unsigned generation;
    unsigned count;
} spin_barrier_t;

static inline void spin_barrier_init(spin_barrier_t *b, unsigned count) {
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    b->count = count;
}

static inline void spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Everything a thread wrote before the barrier is visible to every thread after it.
static inline void spin_barrier_wait(spin_barrier_t *b) {
    unsigned generation = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->count - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
        return;
    }
    for (unsigned spins = 0; atomic_load_explicit(&b->generation, memory_order_acquire) == generation; spins++) {
        if (spins < 20000) spin_pause();
        else sched_yield();
    }
}

#endif
