#ifndef ASGD_NET_PS_REPLY_H
#define ASGD_NET_PS_REPLY_H
// A shard's values, lent to PARAMS replies without a copy (docs/protocol.md,
// "Zero-copy replies").
//
// A whole-shard reply is a zero-copy frame (zmq_msg_init_data) over the
// current values, with a free callback that counts it back in. The values are
// held in two buffers: a write to values a reply still references goes to the
// other buffer (copied over block by block with the write), which becomes the
// current one, so a reply always carries exactly the values of the version it
// names. A reply is lent only while the other buffer is free; otherwise it is
// copied (the old way), so a write always finds a buffer it may change.
//
// The checksum of the current values is kept per write: a dense update
// computes it block by block in the same pass (ps_values_apply); after any
// other write it is computed once, by the first reply that needs it.
//
// Used by the shard's serving thread only; the free callbacks run on libzmq's
// I/O threads and touch nothing but atomic counts. The memory outlives the
// owner's release until the last lent reply is freed.
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "net/zmsg.h"

typedef struct ps_values ps_values_t;

// n values, zero. NULL when out of memory.
ps_values_t *ps_values_new(size_t n);
// Drops the owner's reference (*v becomes NULL).
void ps_values_release(ps_values_t **v);

// The current values, to read.
float *ps_values_get(const ps_values_t *v);
// The current values, to write in place: moved to the other buffer first
// when a reply still references them. The pointer holds until the next call.
float *ps_values_write(ps_values_t *v);
// A dense update of every value: w -= lr * g (SGD), or Adagrad's with its
// squared-gradient sums h (h non-NULL), fused with the move (when the values
// are lent) and the new values' checksum; the same arithmetic as
// sgd_update_cpu / adagrad_update_cpu.
void ps_values_apply(ps_values_t *v, const float *g, float lr, float *h, float eps);
// The same update with g = sum_k weight[k] * g[k] over the count gradients
// (a NULL g[k] is skipped), summed block by block in the same pass, in k
// order: the same values as summing the whole gradients first with axpy_cpu.
void ps_values_apply_sum(ps_values_t *v, const float *const *g, const float *weight, size_t count, float lr, float *h,
                         float eps);

// The same update of values [from, from + n) only, in place: a push taken in
// parts (ps_server.h). A push's ranges applied in order from 0 with no other
// write between them leave the checksum of the whole, kept as ps_values_apply
// keeps it; otherwise the first reply computes it. from + n <= the count; h
// (Adagrad's sums, or NULL) covers every value. With copy non-NULL, the new
// values of the range are also copied to copy[0..n) in the same pass, and
// their checksum (wire_checksum of copy) is returned (0 without).
uint32_t ps_values_apply_range(ps_values_t *v, size_t from, size_t n, const float *g, float lr, float *h, float eps,
                               float *copy);

// ps_values_apply_sum that calls done(ctx, from, n, checksum) as soon as each
// range of `range` floats (rounded up to a multiple of the pass's block; the
// last range shorter) has its new values, with their checksum: a round's
// values can go out range by range while the rest is still being summed
// (ps_values_reply_range, from done only). done's first non-zero answer is
// returned, and done is not called again; the update itself always completes.
typedef int (*ps_range_done_fn)(void *ctx, size_t from, size_t n, uint32_t checksum);
int ps_values_apply_sum_in_ranges(ps_values_t *v, const float *const *g, const float *weight, size_t count, float lr,
                                  float *h, float eps, size_t range, ps_range_done_fn done, void *ctx);
// A frame holding values [from, from + n) as ps_values_apply_sum_in_ranges
// has just written them (called from its done): lent without a copy when it
// can be (the rule of ps_values_reply), else copied. Returns 0, or -1 with err.
int ps_values_reply_range(ps_values_t *v, size_t from, size_t n, zmq_msg_t *frame, char *err, size_t err_len);

// A frame holding the current values for a reply, and their checksum: lent
// (zero-copy) when it can be, else a copy. Returns 0, or -1 with err filled.
int ps_values_reply(ps_values_t *v, zmq_msg_t *frame, uint32_t *checksum, char *err, size_t err_len);

// A dense PUSH received with its checksum deferred (zmsg_recv_deferred): the
// checksum checked and the values tested for NaN and Inf (all_finite_cpu) in
// one pass. Returns 0 with *finite set, or -1 with m->status BAD_CHECKSUM.
int ps_push_verify_finite(zmsg_t *m, int *finite);

typedef struct ps_values_counts {
    uint64_t lent;  // replies sent zero-copy
    uint64_t copied;  // replies copied (the other buffer was still referenced)
    uint64_t moved;  // writes that went to the other buffer (a reply held the values)
} ps_values_counts_t;
void ps_values_counts(const ps_values_t *v, ps_values_counts_t *out);

#endif
