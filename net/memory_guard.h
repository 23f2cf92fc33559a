#ifndef ASGD_NET_MEMORY_GUARD_H
#define ASGD_NET_MEMORY_GUARD_H
// Bounds the memory that peers can make a listening socket's process hold.
//
// libzmq keeps the frames of a multipart message until its last frame has
// arrived, and limits only each frame's size (ZMQ_MAXMSGSIZE), not their
// count: a peer that never ends a message of 1-byte frames makes the process
// hold 64 bytes per 3 bytes it sends, without bound. No message is handed to
// the application before it is whole, so the application cannot refuse it.
//
// The guard watches the process's resident size (/proc/self/statm, read at
// most every 0.1 s, off any hot path) and, once it has grown more than an
// allowance beyond its size when the guard started, shuts down every
// connection the socket has accepted. libzmq then frees what they held; the
// genuine peers reconnect by themselves and resend what was unanswered (the
// parameter server's retries make that safe: docs/reliability.md). After a
// trip the freed memory is handed back to the system (malloc_trim) and the
// size measured then becomes the new start.
#include <stddef.h>
#include <stdint.h>

typedef struct memory_guard memory_guard_t;

// What a trip did.
typedef struct memory_guard_trip {
    size_t grown;  // bytes beyond the start when it tripped
    size_t connections;  // connections shut down
} memory_guard_trip_t;

// Starts watching `sock` (a listening ZeroMQ socket the caller owns and has
// not yet bound or connected, so that every connection it accepts is seen),
// through a monitor socket in zmq_ctx. allowance: bytes the process may grow
// by, > 0. Returns NULL with err filled on failure.
memory_guard_t *memory_guard_new(void *zmq_ctx, void *sock, size_t allowance, char *err, size_t err_len);

// Called from the thread that serves `sock`, at every turn of its loop; acts
// at most every 0.1 s (now: seconds on a monotonic clock). Returns 1 if it
// shut the connections down now (*trip says what), 0 if not, -1 with err
// filled if the monitor failed.
int memory_guard_check(memory_guard_t *g, double now, memory_guard_trip_t *trip, char *err, size_t err_len);

// The process's resident size in bytes (0 if it cannot be read).
size_t memory_guard_resident_bytes(void);

// Stops watching (before the caller closes the socket). Accepts NULL.
void memory_guard_destroy(memory_guard_t **gp);

#endif
