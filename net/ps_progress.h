#ifndef ASGD_NET_PS_PROGRESS_H
#define ASGD_NET_PS_PROGRESS_H
// A shard's progress as other threads see it (ps_server_progress): the
// serving thread publishes its figures after each message it handles, and a
// reader on another thread takes the figures of one publication (a sequence
// lock), never half of one and half of the next.
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct ps_progress {
    uint64_t samples;  // training examples behind the updates applied (see samples_per_step)
    uint64_t version;  // updates applied
    uint64_t min_clock;  // the slowest live worker's clock
    double wait_s;  // time workers' conditional pulls (SSP, BSP) waited here, summed
    // Staleness of the updates applied so far (docs/distributed.md), in
    // versions and in clocks: mean = sum / count (BSP: one per gradient of a round).
    uint64_t staleness_count;
    uint64_t staleness_versions_sum, staleness_versions_max;
    uint64_t staleness_clocks_sum, staleness_clocks_max;
    // Every worker has left and the shard serves on for its observer
    // (ps_config_t.observer_linger_ms): the model is final.
    int workers_gone;
} ps_progress_t;

// Where the figures are published: seq is odd while a publication is being
// written. Caller-allocated; one writer thread, any number of readers.
typedef struct ps_progress_board {
    _Atomic uint64_t seq, samples, version, min_clock, wait_ns;
    _Atomic uint64_t stale_count, stale_v_sum, stale_v_max, stale_c_sum, stale_c_max, workers_gone;
    // A reader asleep until the samples reach wake_at (UINT64_MAX: nobody
    // waits), so that it need not poll: the writer wakes it as it publishes.
    _Atomic uint64_t wake_at;
    atomic_int woken;  // ps_progress_board_wake: the sleeper returns at once
    pthread_mutex_t lock;  // the sleep and the wake-up
    pthread_cond_t moved;
} ps_progress_board_t;

void ps_progress_board_init(ps_progress_board_t *b);
void ps_progress_board_free(ps_progress_board_t *b);
// The writer: publishes p (wait_s to the nanosecond).
void ps_progress_board_publish(ps_progress_board_t *b, const ps_progress_t *p);
// Any thread: the figures of the last whole publication.
void ps_progress_board_read(const ps_progress_board_t *b, ps_progress_t *out);
// One reader thread at a time: returns once samples >= at_least has been
// published, timeout_s has passed, or ps_progress_board_wake was called
// (since the last wait), whichever is first. The writer then pays a lock and
// a signal once; while nobody waits, a publication costs one more load.
void ps_progress_board_wait(ps_progress_board_t *b, uint64_t at_least, double timeout_s);
// Any thread: the waiter (now or next) returns at once.
void ps_progress_board_wake(ps_progress_board_t *b);

#endif
