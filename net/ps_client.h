#ifndef ASGD_NET_PS_CLIENT_H
#define ASGD_NET_PS_CLIENT_H
// A worker's connection to every shard of the parameter server: one DEALER per
// shard, with the worker's id as its identity. Used by one thread only (the
// worker's communication thread).
//
// Pushes do not wait: their acknowledgements are collected whenever the client
// next receives (or by ps_client_wait_acks). Pulls block until every shard has
// answered, so a pull that names a clock is how SSP and BSP workers wait.
#include <stddef.h>
#include <stdint.h>

typedef struct ps_client ps_client_t;

typedef struct ps_client_stats {
    uint64_t pushes_sent, pushes_acked, pulls;
    uint64_t rejects;                   // requests a server refused
    uint64_t bytes_out, bytes_in;       // payload bytes
    uint64_t dropped;                   // invalid messages received
    double pull_wait_s;                 // time spent blocked in pulls
} ps_client_stats_t;

// Connects to every shard (endpoints[k] serves shard k), says hello, and checks
// each shard's range against the layout both sides derive (shard_range).
// timeout_ms bounds every wait for a reply. Returns NULL with err filled.
ps_client_t *ps_client_new(void *zmq_ctx, uint64_t run_id, uint32_t worker, const char *const *endpoints,
                           size_t n_shards, size_t n_params, int heartbeat_ms, int timeout_ms, char *err,
                           size_t err_len);
void ps_client_destroy(ps_client_t **c);

// Dense push in place: ps_client_push_frames returns one buffer per shard; the
// caller writes the update for parameter j of shard k's range [begin, end) at
// frames[k][j - begin], then commits. The buffers are the messages sent (no copy).
float *const *ps_client_push_frames(ps_client_t *c, char *err, size_t err_len);
// Optional: a caller that fills frame k block by block, in order from the
// start, reports each block [from, from + n) just after writing it, while it
// is still in cache; the checksum is then computed on the way and the commit
// sends that frame without another pass over it. n must be a multiple of 8
// (floats) except for a frame's last block; otherwise the commit checksums.
void ps_client_push_block_written(ps_client_t *c, size_t shard, size_t from, size_t n);
// Sends the filled frames. clock: the worker's push rounds done before this one.
// bsp: a gradient to aggregate (examples: how many examples it averages over).
int ps_client_push_commit(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, char *err, size_t err_len);
// Sparse push: nnz (index, value) pairs, indices ascending.
int ps_client_push_sparse(ps_client_t *c, const uint32_t *idx, const float *val, size_t nnz, uint64_t clock,
                          uint32_t examples, int bsp, char *err, size_t err_len);

// Pulls the whole model into out[0..n_params), answered once every live worker
// has pushed `need_clock` rounds (0: at once). Returns 0 or -1.
// *min_clock (may be NULL) receives the smallest min clock the shards reported.
int ps_client_pull(ps_client_t *c, uint64_t need_clock, float *out, uint64_t *min_clock, char *err, size_t err_len);
// Pulls the values at n keys (ascending) into values[0..n).
int ps_client_pull_keys(ps_client_t *c, const uint32_t *keys, size_t n, float *values, char *err, size_t err_len);

// Waits until every push sent has been acknowledged.
int ps_client_wait_acks(ps_client_t *c, char *err, size_t err_len);
// Says goodbye to every shard (after waiting for acks) and waits for the answers.
int ps_client_bye(ps_client_t *c, char *err, size_t err_len);

void ps_client_get_stats(const ps_client_t *c, ps_client_stats_t *out);

#endif
