#ifndef ASGD_NET_HIER_ALLREDUCE_H
#define ASGD_NET_HIER_ALLREDUCE_H
// Hierarchical allreduce across hosts (docs/allreduce.md, "Hierarchical"):
// H hosts with L ranks each. Rank (host h, local index j) belongs to
//   - host h's shared-memory group (net/shm_allreduce.h), as its rank j, and
//   - cross ring j (net/stream_ring.h, or net/ring.h): rank j of every host,
//     as its rank h,
// and a call is NCCL's two-dimensional allreduce:
//   1. shm reduce-scatter: slice j of data (shm_allreduce_slice(count, L, j))
//      holds the host's sum;
//   2. cross ring j allreduces slice j among the H hosts;
//   3. shm allgather: every local rank gets every slice.
// Only 1/L of the array crosses the network per rank, and the L rings of a
// host run at once. Element i ends as the ring's sum over hosts of each
// host's sum in local rank order, and every rank holds the same bits.
//
// One object is used by one thread at a time. Every rank must make the same
// sequence of calls with the same counts.
#include <stddef.h>
#include <stdint.h>

typedef struct hier_allreduce hier_allreduce_t;

// Attaches local rank `local` of `local_n` on host `host` of `hosts` to that
// host's segment (named from run_id and host, so pretend hosts on one machine
// do not share one) and binds cross ring `local`'s receiving socket on
// bind_host: a stream ring (plain TCP, stream_ring_new; zmq_ctx unused, may
// be NULL) when `stream` is nonzero, else a ZeroMQ ring on zmq_ctx (ring_new:
// CURVE when the process's sockets use it). Calls of at most max_count
// values. Returns NULL with err filled.
hier_allreduce_t *hier_allreduce_new(void *zmq_ctx, int stream, uint64_t run_id, size_t host, size_t hosts,
                                     size_t local, size_t local_n, size_t max_count, const char *bind_host, char *err,
                                     size_t err_len);

// The cross ring's endpoint, for the next host's rank of the same local index.
const char *hier_allreduce_endpoint(const hier_allreduce_t *h);

// Connects the cross ring to the next host's rank of this local index
// (host + 1 mod hosts); a stream ring also waits for the previous host's to
// connect, up to timeout_ms (<= 0: forever). Returns 0, or -1 with err.
int hier_allreduce_connect(hier_allreduce_t *h, const char *next_endpoint, int timeout_ms, char *err, size_t err_len);

// In place: data[0..count) becomes the sum over all H * L ranks; every rank
// ends with the same bits. timeout_ms bounds each wait as in shm_allreduce_sum
// and ring_allreduce_sum (<= 0: none). Returns 0, or -1 with err filled; after
// a failure the object should not be used again.
int hier_allreduce_sum(hier_allreduce_t *h, float *data, size_t count, int timeout_ms, char *err, size_t err_len);

// Payload bytes this rank's cross ring has sent and received so far (what
// went over the network; shared memory moves no bytes on it).
void hier_allreduce_net_bytes(const hier_allreduce_t *h, uint64_t *sent, uint64_t *recv);

// Whether the cross ring is a stream ring (plain TCP).
int hier_allreduce_uses_stream(const hier_allreduce_t *h);

void hier_allreduce_destroy(hier_allreduce_t **h);  // accepts NULL and nulls the pointer

#endif
