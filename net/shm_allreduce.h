#ifndef ASGD_NET_SHM_ALLREDUCE_H
#define ASGD_NET_SHM_ALLREDUCE_H
// Allreduce among n processes on one host through a shared-memory segment
// (docs/allreduce.md, "Shared memory"): the same contract as ring.h's
// ring_allreduce_sum, without sockets.
//
// The segment (POSIX shared memory, /dev/shm/asgd-ar-<uid>-<run id>) holds one
// input area of max_count floats per rank and one result area. A call is a
// reduce-scatter and an allgather by plain loads and stores: each rank copies
// its array into its input area, sums its own slice of every rank's input
// (shard_range: slice r belongs to rank r) into the result area in fixed rank
// order, x_0 + x_1 + ... + x_{n-1}, and copies every other rank's finished
// slice out. Each rank announces each step by raising its own counter (C11
// atomics, one cache line per rank); a waiter spins, then yields, then sleeps
// on the counter's futex, so a call makes no system call while its peers are
// on time.
//
// Each attached rank holds an open-file-description lock on its byte of the
// segment, which the kernel drops when the process dies: a waiter that finds
// a peer's lock gone fails at once, naming the peer, instead of waiting for
// its timeout. The same locks decide what a leftover segment is (see
// shm_allreduce_new) and who removes the name.
//
// One object is used by one thread at a time. Every rank must make the same
// sequence of calls with the same counts.
#include <stddef.h>
#include <stdint.h>

typedef struct shm_allreduce shm_allreduce_t;

// The segment's name for a run ("/asgd-ar-<uid>-<run id in hex>"; under
// /dev/shm without the slash). Returns 0, or -1 when len is too small.
int shm_allreduce_name(uint64_t run_id, char *out, size_t len);

// Attaches rank `rank` of n (rank < n, n >= 1) to the run's segment, sized
// for calls of at most max_count values. The first rank to arrive creates it;
// a segment of that name that no live rank holds (left by a run that was
// killed before all its ranks attached) is reset and reused. Fails, with err
// naming what differs, when live ranks hold a segment made for another n or
// max_count, or when a live process already attached as this rank. The last
// of the n ranks to attach removes the name (the mapping stays), so a run
// that dies after that leaves nothing in /dev/shm. Does not wait for the
// other ranks: the first call does. Returns NULL with err filled.
shm_allreduce_t *shm_allreduce_new(uint64_t run_id, size_t rank, size_t n, size_t max_count, char *err, size_t err_len);

// In place: data[0..count) becomes the elementwise sum over all ranks
// (count <= max_count; any count, 0 and counts below n included). Element i
// is summed once, by the rank whose slice holds it, as
// ((x_0[i] + x_1[i]) + x_2[i]) + ... + x_{n-1}[i], and copied to the others:
// every rank ends with the same bits, those of the serial sum in rank order.
// timeout_ms > 0 bounds each wait for one peer's next step (a peer that is
// alive but does not call): the call then fails naming the peer; <= 0 waits
// for ever. A peer that has exited fails the call within about 10 ms whatever
// the timeout, naming it and its pid. A rank that fails marks the segment
// failed, so its peers fail too instead of waiting; after a failure every
// later call fails, and the run should rebuild its groups. A rank whose counts
// disagree with its peers' fails the call on every rank.
// On return the caller may overwrite data, or destroy and exit, at once.
// Returns 0, or -1 with err filled.
int shm_allreduce_sum(shm_allreduce_t *s, float *data, size_t count, int timeout_ms, char *err, size_t err_len);

// The two halves of shm_allreduce_sum, for a caller that works on its slice
// in between (net/hier_allreduce.h). Rank r's slice of a call of count values
// is [begin, end) of shm_allreduce_slice(count, n, r, ...).
// reduce_scatter: on return data's slice holds the sum over all ranks (the
// same bits shm_allreduce_sum gives there); the rest of data is left alone.
// allgather: each rank's data holds its own slice on entry; on return data
// holds every rank's slice. Only the slices move: nothing is added.
// Waits, timeouts and failures as in shm_allreduce_sum; the three calls share
// one sequence and may follow each other in any order (all ranks alike).
int shm_allreduce_reduce_scatter(shm_allreduce_t *s, float *data, size_t count, int timeout_ms, char *err,
                                 size_t err_len);
int shm_allreduce_allgather(shm_allreduce_t *s, float *data, size_t count, int timeout_ms, char *err, size_t err_len);
void shm_allreduce_slice(size_t count, size_t n, size_t rank, size_t *begin, size_t *end);

// A sum that ends in something else: each rank's slice of the sum is handed
// to `map` block by block, values[0..n) for elements [offset, offset + n), and
// map writes in their place what every rank is to end with there (a step of
// the parameters by that sum, say: no rank then makes a pass over the whole
// sum of its own). Besides the values, each rank passes a weight (the
// examples behind its input); *total gets their sum, in rank order as the
// values are, before the first map on any rank. On return out[0..count) holds
// every slice's mapped values (out is not the input area; map may read
// out's old values, its own block's, which it replaces). When the weights sum
// to 0 or less, nothing is mapped and out is left alone, on every rank. Waits,
// timeouts, failures and the sequence of calls as in shm_allreduce_sum.
typedef void (*shm_map_fn)(void *ctx, size_t offset, float *values, size_t n);
int shm_allreduce_sum_map(shm_allreduce_t *s, float *data, size_t count, float weight, float *total, shm_map_fn map,
                          void *ctx, float *out, int timeout_ms, char *err, size_t err_len);

// This rank's input area in the segment (max_count floats). A caller that
// keeps its array there (passes it as data) saves the copy into the segment;
// any other array works too. Valid until shm_allreduce_destroy.
float *shm_allreduce_buffer(shm_allreduce_t *s);

// Seconds this rank has spent waiting for its peers' steps (their inputs in
// place, their slices summed) over every call so far: the time its calls
// were held by slower ranks, apart from its own copying and summing.
double shm_allreduce_waited_s(const shm_allreduce_t *s);

// Detaches (unmaps, drops the rank's lock). The last rank to leave removes
// the name if it is still there. Accepts NULL and nulls the pointer.
void shm_allreduce_destroy(shm_allreduce_t **s);

#endif
