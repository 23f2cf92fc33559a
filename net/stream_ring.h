#ifndef ASGD_NET_STREAM_RING_H
#define ASGD_NET_STREAM_RING_H
// Ring allreduce over plain TCP connections, read and written by the calling
// thread (docs/allreduce.md, "The stream ring").
//
// The same algorithm, schedule (ring_schedule.h), message headers
// (MSG_TYPE_RING_CHUNK, wire.h) and checksums as the libzmq ring (ring.h),
// without libzmq: each rank listens on a TCP port, connects to the next rank's
// and accepts the previous rank's connection. A call moves its sub-chunks with
// non-blocking sendmsg/readv from the calling thread, straight from and (in
// the allgather) into the caller's array, and adds each received block while
// it is still in cache. Nothing is handed to another thread, so a message
// costs its system calls and no wake-up; that is what the libzmq ring pays
// per message at 1 MiB and below (docs/allreduce.md, "Per-message costs").
//
// It carries float32 sums only: compressed exchanges (fp16 on the wire, the
// allgather of encodings) stay on the libzmq ring.
//
// Links are byte streams, so a message that is not the one due (another
// count, another sub-chunk size, another call) fails the call at once, as
// does a neighbour that closes its connection; a failed call closes this
// rank's connections, so that its neighbours fail at once too rather than
// wait for their timeout, and the ring cannot be used again (rebuild it).
// A ring is used by one thread at a time; every rank must make the same
// sequence of calls with the same counts.
#include <stddef.h>
#include <stdint.h>

#include "net/ring.h"

typedef struct stream_ring stream_ring_t;

// Rank `rank` of n (rank < n, n >= 1): listens on bind_host (a name or
// address; "*" or "0.0.0.0" for every interface) at an ephemeral port, right
// away, for the previous rank. The process's security rule applies
// (net_security_listen_plain): never under CURVE, and beyond loopback only
// when insecure. Calls of at most max_count values. Returns
// NULL with err filled.
stream_ring_t *stream_ring_new(size_t rank, size_t n, uint64_t run_id, size_t max_count, const char *bind_host,
                               char *err, size_t err_len);

// "tcp://HOST:PORT" as bound (a wildcard bind names the wildcard: advertise a
// host the others can reach, with this port). Owned by the ring.
const char *stream_ring_endpoint(const stream_ring_t *r);

// Connects to the next rank, (rank + 1) % n, at the endpoint it reported
// ("tcp://HOST:PORT"), then accepts the previous rank's connection; every rank
// calls it, in any order. A connection that does not introduce itself as the
// previous rank of this run and ring size is closed and the wait goes on.
// timeout_ms > 0 bounds the whole call (the next rank refusing, the previous
// one never connecting); <= 0 waits forever. Returns 0, or -1 with err naming
// the rank and endpoint.
int stream_ring_connect(stream_ring_t *r, const char *next_endpoint, int timeout_ms, char *err, size_t err_len);

// In place: data[0..count) becomes the elementwise sum over all ranks
// (count <= max_count), bit-identical on every rank and to the libzmq ring's
// result for the same sub-chunk size (the same additions in the same order).
// timeout_ms > 0 bounds how long the call waits without any progress, then
// fails naming the neighbour it waited on; <= 0 waits forever. On return every
// byte this rank sent is in the kernel's hands, so the caller may overwrite
// data, or destroy the ring and exit, at once. Returns 0, or -1 with err.
int stream_ring_allreduce_sum(stream_ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len);

// Sub-chunk size in floats (default STREAM_RING_SUB_CHUNK_DEFAULT; every rank
// must use the same). Returns 0, or -1 when it is 0, does not fit a header's
// 32-bit count or its buffer cannot be had.
#define STREAM_RING_SUB_CHUNK_DEFAULT ((size_t)1 << 18)
int stream_ring_tune(stream_ring_t *r, size_t sub_chunk, char *err, size_t err_len);

// Counters as ring_get_stats gives them (dropped stays 0: a stream drops nothing).
void stream_ring_get_stats(const stream_ring_t *r, ring_stats_t *out);

void stream_ring_destroy(stream_ring_t **r);  // accepts NULL and nulls the pointer

#endif
