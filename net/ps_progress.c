// A shard's published progress, behind a sequence lock (ps_progress.h).
#include "net/ps_progress.h"

#include "kernels/foundation/mono_clock.h"

void ps_progress_board_init(ps_progress_board_t *b) {
    atomic_init(&b->seq, 0);
    atomic_init(&b->samples, 0);
    atomic_init(&b->version, 0);
    atomic_init(&b->min_clock, 0);
    atomic_init(&b->wait_ns, 0);
    atomic_init(&b->stale_count, 0);
    atomic_init(&b->stale_v_sum, 0);
    atomic_init(&b->stale_v_max, 0);
    atomic_init(&b->stale_c_sum, 0);
    atomic_init(&b->stale_c_max, 0);
    atomic_init(&b->workers_gone, 0);
    atomic_init(&b->wake_at, UINT64_MAX);
    atomic_init(&b->woken, 0);
    pthread_mutex_init(&b->lock, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);  // a timeout that a clock change cannot stretch
    pthread_cond_init(&b->moved, &a);
    pthread_condattr_destroy(&a);
}

void ps_progress_board_free(ps_progress_board_t *b) {
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->moved);
}

// The writer has published `samples`, at or past the threshold it read.
// Under the lock the threshold is read again: the sleeper it was read for
// may have returned (having seen the samples itself) and a new wait set a
// higher one, which this publication must leave armed.
static void wake_sleeper(ps_progress_board_t *b, uint64_t samples) {
    pthread_mutex_lock(&b->lock);
    if (samples >= atomic_load_explicit(&b->wake_at, memory_order_relaxed)) {
        atomic_store_explicit(&b->wake_at, UINT64_MAX, memory_order_relaxed);
        pthread_cond_broadcast(&b->moved);
    }
    pthread_mutex_unlock(&b->lock);
}

void ps_progress_board_publish(ps_progress_board_t *b, const ps_progress_t *p) {
    uint64_t seq = atomic_load_explicit(&b->seq, memory_order_relaxed);
    atomic_store_explicit(&b->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&b->samples, p->samples, memory_order_relaxed);
    atomic_store_explicit(&b->version, p->version, memory_order_relaxed);
    atomic_store_explicit(&b->min_clock, p->min_clock, memory_order_relaxed);
    atomic_store_explicit(&b->wait_ns, (uint64_t)(p->wait_s * 1e9), memory_order_relaxed);
    atomic_store_explicit(&b->stale_count, p->staleness_count, memory_order_relaxed);
    atomic_store_explicit(&b->stale_v_sum, p->staleness_versions_sum, memory_order_relaxed);
    atomic_store_explicit(&b->stale_v_max, p->staleness_versions_max, memory_order_relaxed);
    atomic_store_explicit(&b->stale_c_sum, p->staleness_clocks_sum, memory_order_relaxed);
    atomic_store_explicit(&b->stale_c_max, p->staleness_clocks_max, memory_order_relaxed);
    atomic_store_explicit(&b->workers_gone, (uint64_t)p->workers_gone, memory_order_relaxed);
    atomic_store_explicit(&b->seq, seq + 2, memory_order_release);
    // The samples stored, then the threshold read; the sleeper stores its
    // threshold, then reads the samples: with a full fence on both sides at
    // least one of them sees the other's store, so no wake-up is lost.
    atomic_thread_fence(memory_order_seq_cst);
    if (p->samples >= atomic_load_explicit(&b->wake_at, memory_order_relaxed)) wake_sleeper(b, p->samples);
}

void ps_progress_board_wake(ps_progress_board_t *b) {
    atomic_store(&b->woken, 1);
    pthread_mutex_lock(&b->lock);
    pthread_cond_broadcast(&b->moved);
    pthread_mutex_unlock(&b->lock);
}

void ps_progress_board_wait(ps_progress_board_t *b, uint64_t at_least, double timeout_s) {
    double s = timeout_s > 0 ? timeout_s : 0;
    struct timespec until = mono_clock_timespec(mono_clock_s() + (s < 3600 ? s : 3600));
    pthread_mutex_lock(&b->lock);
    atomic_store_explicit(&b->wake_at, at_least, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    int rc = 0;
    while (rc == 0 && !atomic_exchange(&b->woken, 0) &&
           atomic_load_explicit(&b->samples, memory_order_relaxed) < at_least)
        rc = pthread_cond_timedwait(&b->moved, &b->lock, &until);
    atomic_store_explicit(&b->wake_at, UINT64_MAX, memory_order_relaxed);
    pthread_mutex_unlock(&b->lock);
}

void ps_progress_board_read(const ps_progress_board_t *b, ps_progress_t *out) {
    ps_progress_board_t *m = (ps_progress_board_t *)b;  // atomic loads take non-const pointers in C11
    uint64_t before, after;
    do {
        before = atomic_load_explicit(&m->seq, memory_order_acquire);
        out->samples = atomic_load_explicit(&m->samples, memory_order_relaxed);
        out->version = atomic_load_explicit(&m->version, memory_order_relaxed);
        out->min_clock = atomic_load_explicit(&m->min_clock, memory_order_relaxed);
        out->wait_s = 1e-9 * (double)atomic_load_explicit(&m->wait_ns, memory_order_relaxed);
        out->staleness_count = atomic_load_explicit(&m->stale_count, memory_order_relaxed);
        out->staleness_versions_sum = atomic_load_explicit(&m->stale_v_sum, memory_order_relaxed);
        out->staleness_versions_max = atomic_load_explicit(&m->stale_v_max, memory_order_relaxed);
        out->staleness_clocks_sum = atomic_load_explicit(&m->stale_c_sum, memory_order_relaxed);
        out->staleness_clocks_max = atomic_load_explicit(&m->stale_c_max, memory_order_relaxed);
        out->workers_gone = (int)atomic_load_explicit(&m->workers_gone, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        after = atomic_load_explicit(&m->seq, memory_order_relaxed);
    } while ((before & 1) || before != after);
}
