#ifndef ASGD_ENGINE_CORE_SPIN_BARRIER_H
#define ASGD_ENGINE_CORE_SPIN_BARRIER_H
// A sense-reversing barrier for threads that each own a core. Synchronous
// training meets at a barrier several times per minibatch; a futex-based
// pthread_barrier_wait costs tens of microseconds per crossing (the kernel puts
// waiters to sleep and wakes them), a spinning one well under one. Waiters spin
// with the CPU's pause hint, then fall back to sched_yield. With more threads
// than cores the thread being waited for may not even be running, so spinning
// only delays it: such runs pass spin_limit 0 and yield at once.
#include <sched.h>
#include <stdatomic.h>

typedef struct spin_barrier {
    _Atomic unsigned arrived;
    _Atomic unsigned generation;
    unsigned count;
    unsigned spin_limit;  // pause-spins before a waiter starts yielding
} spin_barrier_t;

#define SPIN_BARRIER_SPINS 20000  // well under a millisecond

static inline void spin_barrier_init(spin_barrier_t *b, unsigned count, unsigned spin_limit) {
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    b->count = count;
    b->spin_limit = spin_limit;
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
        if (spins < b->spin_limit)
            spin_pause();
        else
            sched_yield();
    }
}

#endif
