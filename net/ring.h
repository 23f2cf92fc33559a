#ifndef ASGD_NET_RING_H
#define ASGD_NET_RING_H
// Ring allreduce among n processes over libzmq (docs/allreduce.md).
//
// Each rank binds a PULL socket that its previous rank (rank - 1 mod n)
// connects to, and connects a PUSH socket to the next rank's. An allreduce
// cuts the array into n chunks and runs a reduce-scatter (n - 1 steps: the
// partial sum of a chunk travels once around the ring, each rank adding its
// own values) then an allgather (n - 1 steps: the finished sums travel around
// once more). Chunks are cut into sub-chunks that move independently, so a
// rank forwards a sub-chunk as soon as it has added into it, while libzmq's
// I/O thread is still moving the next ones.
//
// Messages are MSG_TYPE_RING_CHUNK with a DENSE payload (the sub-chunk's
// floats); header fields: sender = rank, clock = the call's sequence number
// (1 for the first allreduce on this ring, then 2, ...), offset = the first
// element index, count = elements, aux = step (0 .. 2n-3), param_version = the
// allreduce's total element count (so ranks that disagree on it fail at once).
//
// Each payload's checksum (wire.h) is verified in the same pass that adds or
// copies it, and the checksum of what a rank forwards is computed in that pass
// too, so a byte is read once on its way through a rank; an expected
// sub-chunk that fails its checksum fails the call, naming its sender.
//
// A ring is used by one thread at a time. Every rank must make the same
// sequence of calls with the same counts.
#include <stddef.h>
#include <stdint.h>

typedef struct ring ring_t;

// The longest ipc:// socket path (the kernel's sun_path, less its NUL).
#define RING_IPC_PATH_MAX 107

// Rank `rank` of n (rank < n, n >= 1). Binds its receiving socket right away on
// tcp://<bind_host>:* (an ephemeral port), or (same host only) with bind_host
// "ipc://PATH" on that socket file, or with "ipc" on a file in a fresh
// directory under $TMPDIR (else /tmp). ring_destroy removes the file (and that
// directory); a process killed before then leaves them, so a caller with a
// directory of its own for the run gives a PATH there. It takes frames of at
// most what a call of max_count values can send (zmsg_max_frame: a larger one
// costs its sender the connection). The context is the caller's and must
// outlive the ring. Returns NULL with err filled.
ring_t *ring_new(void *zmq_ctx, size_t rank, size_t n, uint64_t run_id, size_t max_count, const char *bind_host,
                 char *err, size_t err_len);

// The endpoint actually bound, e.g. "tcp://127.0.0.1:40213", for the rendezvous.
// Owned by the ring. After a wildcard bind ("*", "0.0.0.0") it names the
// wildcard: advertise a host the other machines can reach, with this port.
const char *ring_endpoint(const ring_t *r);

// Connects to the next rank, (rank + 1) % n, at the endpoint it reported.
// Returns 0 or -1.
int ring_connect(ring_t *r, const char *next_endpoint, char *err, size_t err_len);

// In place: data[0..count) becomes the elementwise sum over all ranks
// (count <= the ring's max_count). Every
// rank ends with bit-identical results: chunk c's sum is accumulated in one
// fixed order (rank c's values, plus rank c+1's, ...) and the finished sum is
// copied around unchanged. count may be anything (0, less than n, not
// divisible by n). timeout_ms > 0 bounds how long the call waits without any
// progress (a neighbour gone, a peer that never calls): it then fails naming
// the neighbour it was waiting on; timeout_ms <= 0 waits forever.
// On return every message this rank sent has left libzmq for the kernel, so
// the caller may overwrite data, or destroy the ring and exit, at once.
// Returns 0, or -1 with err filled. After a failure the ring's neighbours may
// be mid-call; the run should rebuild its rings rather than call again.
int ring_allreduce_sum(ring_t *r, float *data, size_t count, int timeout_ms, char *err, size_t err_len);

// ring_allreduce_sum with data[0..fp16_count) on the wire as fp16 (sub-chunks
// are cut at fp16_count; those before it travel as ENCODED fp16 payloads,
// the others as float32): every partial sum is rounded to fp16 when
// it is sent and added in float32 when it arrives, and each finished sum is
// rounded to fp16 by the rank that completed it before it goes round, so every
// rank still ends with the same bits. Elements from fp16_count on (e.g. an
// example count that must stay exact) travel as float32. Every rank must pass
// the same fp16_count; a rank that sends the other form is reported as such.
int ring_allreduce_sum_fp16(ring_t *r, float *data, size_t count, size_t fp16_count, int timeout_ms, char *err,
                            size_t err_len);

// Allgather of one encoded vector (net/compress.h) per rank, each of `count`
// values, e.g. compressed gradients that cannot be summed on the way (topk,
// qsgd). blobs holds n slots of cap bytes; before the call, slot `rank` holds
// this rank's encoding, lens[rank] its length and weights[rank] a number that
// travels with it (the examples behind a gradient). On return every slot,
// length and weight is filled, identically on every rank. Each received
// encoding is checked (compress_check): an unknown encoding, a malformed one or
// one longer than cap fails the call with an error naming the rank it came
// from. Messages are MSG_TYPE_RING_GATHER with an ENCODED payload: sender =
// rank, clock = the call's sequence number (shared with allreduce calls),
// offset = the rank whose vector it is, count = values, aux = its weight.
// timeout_ms as in ring_allreduce_sum. Returns 0, or -1 with err filled.
int ring_allgather_encoded(ring_t *r, uint8_t *blobs, size_t cap, size_t *lens, uint32_t *weights, size_t count,
                           int timeout_ms, char *err, size_t err_len);

// Payload bytes this rank sends in a float32 ring_allreduce_sum of count
// values (2(n-1) chunks of about count/n each): the reference a compressed
// exchange is measured against.
uint64_t ring_allreduce_bytes_sent(const ring_t *r, size_t count);

void ring_destroy(ring_t **r);  // accepts NULL and nulls the pointer

// ---- tuning and counters (optional) ----------------------------------------

// Sub-chunk size in floats (default RING_SUB_CHUNK_DEFAULT: 1 MiB) and whether
// sub-chunks of 16 KiB and more are sent straight from the caller's array
// instead of from a copy (default RING_ZERO_COPY_DEFAULT: yes); the measurements
// behind both are in docs/allreduce.md. Every rank must use the same sub_chunk.
// Returns 0, or -1 when sub_chunk is 0 or does not fit a header's 32-bit count.
#define RING_SUB_CHUNK_DEFAULT ((size_t)1 << 18)
#define RING_ZERO_COPY_DEFAULT 1
int ring_tune(ring_t *r, size_t sub_chunk, int zero_copy, char *err, size_t err_len);

typedef struct ring_stats {
    uint64_t calls;  // allreduces started
    uint64_t msgs_sent, msgs_recv;
    uint64_t bytes_sent, bytes_recv;  // payload bytes
    uint64_t dropped;  // messages refused: invalid, foreign, or of another call/offset
} ring_stats_t;

void ring_get_stats(const ring_t *r, ring_stats_t *out);

#endif
