#ifndef ASGD_KERNELS_FOUNDATION_TRACE_H
#define ASGD_KERNELS_FOUNDATION_TRACE_H
// A timeline of what a process's threads did (--trace FILE; docs/trace.md):
// spans ("complete" events) written as Chrome trace-event JSON, which Perfetto
// and chrome://tracing open. It lives in the lowest layer so that every layer
// (the trainer, the strategies, the servers) can record into it.
//
// Off (the default), an event site costs one load of a global flag and a
// predictable branch: TRACE_BEGIN reads no clock, TRACE_END records nothing.
// On, a span costs two reads of CLOCK_MONOTONIC (vDSO, no system call) and a
// 32-byte store into the calling thread's own buffer: no lock, no allocation
// (a thread's buffer is allocated at its first event, or trace_thread_name),
// fixed in size; when it is full further events are counted as dropped.
// trace_write, at the end of the run, writes every thread's events.
//
// Timestamps are CLOCK_MONOTONIC in microseconds, so the files of processes on
// one host line up when `asgd launch` merges them (trace_merge).
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// What a span is: a static constant at the event site, recorded by address.
typedef struct trace_kind {
    const char *name;  // "step", "push", ...
    const char *cat;  // "compute", "sync", "net", "eval", "server"
    const char *arg;  // the name of the span's one number in args, or NULL for none
} trace_kind_t;

extern atomic_int trace_enabled_flag;

static inline int trace_on(void) {
    return __builtin_expect(atomic_load_explicit(&trace_enabled_flag, memory_order_relaxed), 0);
}

// CLOCK_MONOTONIC in nanoseconds (never 0). Out of line: an event site's
// code off the hot path stays a load, a compare and a call not taken.
uint64_t trace_clock_ns(void);

// Records a span [t0, now) of `kind` with its number `arg` on this thread.
void trace_record(const trace_kind_t *kind, uint64_t t0, uint64_t arg);

// uint64_t start = TRACE_BEGIN(); ... TRACE_END(&kind, start, arg);
// (0 when tracing is off: TRACE_END then does nothing.)
#define TRACE_BEGIN() (trace_on() ? trace_clock_ns() : (uint64_t)0)
#define TRACE_END(kind, start, arg)                                                            \
    do {                                                                                       \
        if (__builtin_expect((start) != 0, 0)) trace_record((kind), (start), (uint64_t)(arg)); \
    } while (0)

// Starts tracing this process, named `process` in the timeline ("train",
// "worker 1", "server 0"). Returns 0, or -1 with err filled (out of memory).
int trace_start(const char *process, char *err, size_t err_len);
// Names the calling thread: always its name in the system ("trainer-0": the
// role's first word, shown by `top -H`, perf and /proc/PID/task/TID/comm), and
// while tracing its track ("trainer", 0 -> "trainer 0"; index < 0: the role
// alone), claiming its buffer.
void trace_thread_name(const char *role, int index);
// Stops recording and writes every thread's spans to `path` (one event per
// line), then frees the buffers. Call once the traced threads are done.
// Returns 0, or -1 with err naming `flag` and the file.
int trace_write(const char *path, const char *flag, char *err, size_t err_len);
// Events dropped so far because a thread's buffer was full.
uint64_t trace_dropped(void);

// Merges the trace files paths[0..n) (as trace_write writes them) into one at
// `out`; a missing file is skipped and counted in *missing. Returns 0, or -1
// with err naming `flag`.
int trace_merge(const char *out, const char *const *paths, size_t n, size_t *missing, const char *flag, char *err,
                size_t err_len);

#endif
