// A shard's published progress, behind a sequence lock (ps_progress.h).
#include "net/ps_progress.h"

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
    atomic_store_explicit(&b->seq, seq + 2, memory_order_release);
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
        atomic_thread_fence(memory_order_acquire);
        after = atomic_load_explicit(&m->seq, memory_order_relaxed);
    } while ((before & 1) || before != after);
}
