#ifndef ASGD_NET_BUFFER_POOL_H
#define ASGD_NET_BUFFER_POOL_H
// Buffers of one size for messages libzmq sends without a copy, taken back
// when libzmq and the taker have let go of them, so that a sender writes into
// memory already mapped instead of a fresh allocation per message: a fresh
// multi-megabyte buffer is new pages, and faulting them in cost a 4 MiB push
// 1.7 ms on this project's 2-vCPU machine (docs/benchmarks.md).
//
// Taken, put into messages and dropped by one thread (the owner's); the
// messages' release callbacks run on libzmq's I/O threads and give buffers
// back under the pool's lock. The pool's memory outlives the owner's release
// until the last message over one of its buffers is let go.
#include <stddef.h>
#include <zmq.h>

typedef struct buffer_pool buffer_pool_t;

// Buffers of `bytes` (64-byte aligned); at most `keep` free ones are kept,
// more are freed as they come back. NULL when out of memory.
buffer_pool_t *buffer_pool_new(size_t bytes, size_t keep);
// Drops the owner's reference (*p becomes NULL).
void buffer_pool_release(buffer_pool_t **p);
size_t buffer_pool_bytes(const buffer_pool_t *p);

// A buffer, held by the caller until buffer_pool_drop. NULL when out of memory.
void *buffer_pool_take(buffer_pool_t *p);
// A message over data[offset, offset + len) of a buffer taken from a pool:
// the buffer is held while the message (and its copies) live. Returns 0, or
// -1 (errno from zmq_msg_init_data).
int buffer_pool_message(void *data, size_t offset, size_t len, zmq_msg_t *msg);
// A message of `bytes` (at most the pool's size) over a buffer of the pool,
// which the message alone holds: what a sender fills and sends. Returns the
// buffer's data, or NULL when out of memory (msg then untouched).
void *buffer_pool_frame(buffer_pool_t *p, size_t bytes, zmq_msg_t *msg);
// The caller's hold on a taken buffer let go: back to its pool once no
// message holds it either.
void buffer_pool_drop(void *data);

typedef struct buffer_pool_counts {
    size_t allocated;  // buffers allocated (a reused one is not counted again)
    size_t taken;  // buffers handed out
} buffer_pool_counts_t;
void buffer_pool_counts(buffer_pool_t *p, buffer_pool_counts_t *out);

#endif
