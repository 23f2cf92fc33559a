#ifndef ASGD_NET_RING_SCHEDULE_H
#define ASGD_NET_RING_SCHEDULE_H
// The order in which a ring allreduce moves its sub-chunks (docs/allreduce.md,
// "Algorithm"), shared by the libzmq ring (ring.h) and the stream ring
// (stream_ring.h): both ends of a link compute the same sequence from the same
// (rank, n, sub-chunk size, count), so a message's place in it says what it is.
//
// The array of `count` values is cut into n chunks (shard_range). At step s
// (0 .. 2n-3) rank r sends chunk (r - s) mod n and receives chunk
// (r - s - 1) mod n: steps 0 .. n-2 are the reduce-scatter, n-1 .. 2n-3 the
// allgather. Each chunk is cut into sub-chunks of at most `sub` values; a chunk
// that straddles fp16_count is also cut there, so that a prefix sent as fp16
// and a float32 tail never share a sub-chunk. Empty chunks have no sub-chunks.
#include <stddef.h>

typedef struct ring_schedule {
    size_t rank, n;
    size_t sub;  // values per sub-chunk (>= 1)
    size_t count;  // the call's values
    size_t fp16_count;  // values [0, fp16_count) travel as fp16 (0: none)
} ring_schedule_t;

// Where one direction of a call stands: sub-chunk k of step `step`'s chunk
// [begin, end), of which [begin, mid) is before fp16_count.
typedef struct ring_cursor {
    size_t step, k;
    size_t begin, mid, end, n_subs;
    size_t subs_before_mid;
} ring_cursor_t;

size_t ring_schedule_steps(const ring_schedule_t *s);  // 2n - 2

// recv = 0: the sends' sequence; 1: the receives'. init and next skip empty
// chunks; a cursor past the last step is done.
void ring_cursor_init(const ring_schedule_t *s, int recv, ring_cursor_t *c);
void ring_cursor_next(const ring_schedule_t *s, int recv, ring_cursor_t *c);
int ring_cursor_done(const ring_schedule_t *s, const ring_cursor_t *c);
size_t ring_cursor_offset(const ring_schedule_t *s, const ring_cursor_t *c);  // first value of the sub-chunk
size_t ring_cursor_len(const ring_schedule_t *s, const ring_cursor_t *c);  // its values

// A send at step s >= 1 forwards what arrived at step s - 1 (same chunk, same
// sub-chunk): whether the receives have got that far.
int ring_cursor_send_ready(const ring_cursor_t *send, const ring_cursor_t *recv);

#endif
