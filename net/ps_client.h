#ifndef ASGD_NET_PS_CLIENT_H
#define ASGD_NET_PS_CLIENT_H
// A worker's connection to every shard of the parameter server: one DEALER per
// shard, with the worker's id as its identity. Used by one thread only (the
// worker's communication thread).
//
// Pushes do not wait: their acknowledgements are collected whenever the client
// next receives (or by ps_client_wait_acks). Pulls block until every shard has
// answered, so a pull that names a clock is how SSP and BSP workers wait.
//
// Messages can be lost (a connection that breaks loses what was in flight), so
// every request still unanswered after the retry interval is sent again, the
// interval doubling up to 8 times itself while the shard stays silent. A retry
// is harmless: one push per shard is in flight at a time and each carries the
// worker's clock, which the shard uses to acknowledge a repeated push without
// applying it again; a pull that names a clock also resends the last push, in
// case a restarted shard lost it. Replies to requests already answered are
// dropped. A shard that stays silent for timeout_ms while a request waits is
// an error (docs/reliability.md).
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "net/ps_key_map.h"
#include "net/wire.h"

typedef struct ps_client ps_client_t;

typedef struct ps_client_stats {
    uint64_t pushes_sent, pushes_acked, pulls;
    uint64_t pulls_cancelled;  // pulls given up unanswered (ps_client_pull_cancel)
    uint64_t rejects;  // requests a server refused
    uint64_t retries;  // requests sent again for want of an answer
    uint64_t stale;  // replies to requests answered already (after a retry)
    uint64_t bytes_out, bytes_in;  // payload bytes (first sends only)
    uint64_t dropped;  // invalid messages received
    double pull_wait_s;  // time spent blocked in pulls
    double pull_flight_s;  // time pulls were in flight, from sent to answered (blocked or not)
    double pull_held_s;  // of it, time the shards held pulls until slower workers caught up
} ps_client_stats_t;

// Connects to every shard (endpoints[k] serves shard k), says hello, and checks
// each shard's range against the layout both sides derive (shard_range).
// timeout_ms bounds every wait for a reply. A worker the shards have seen
// before rejoins: they tell it the clock to continue from, which the client
// makes every shard agree on (ps_client_join_clock). Returns NULL with err filled.
ps_client_t *ps_client_new(void *zmq_ctx, uint64_t run_id, uint32_t worker, const char *const *endpoints,
                           size_t n_shards, size_t n_params, int heartbeat_ms, int timeout_ms, char *err,
                           size_t err_len);
// ps_client_new for a worker joining a running run (asgd worker --join): its
// HELLOs carry WIRE_FLAG_JOIN and join_nonce (non-zero, this process's own), so
// that a shard refuses it when another worker holds the id live
// (WIRE_STATUS_ID_LIVE) and takes its retries as retries.
ps_client_t *ps_client_new_joiner(void *zmq_ctx, uint64_t run_id, uint32_t worker, uint32_t join_nonce,
                                  const char *const *endpoints, size_t n_shards, size_t n_params, int heartbeat_ms,
                                  int timeout_ms, char *err, size_t err_len);
void ps_client_destroy(ps_client_t **c);

// A reader of the global model (the run's evaluator), not a worker: it says no
// hello and may only pull (ps_client_pull); the shards answer it without
// changing any worker's state (ps_server.h, observers).
ps_client_t *ps_client_new_observer(void *zmq_ctx, uint64_t run_id, const char *const *endpoints, size_t n_shards,
                                    size_t n_params, int timeout_ms, char *err, size_t err_len);

// Every later wait ends with an error ("stopped while ...") once *abort is
// non-zero (checked at least every 50 ms): for a thread that must be able to
// stop while a shard may already be gone. NULL: never.
void ps_client_set_abort(ps_client_t *c, const atomic_int *abort);

// The worker holds only its working set (ps_key_map.h): from now on every key
// it names (pushes by key, pulls by key) is one of its own, translated to the
// servers' keys on the way out, and a whole pull (ps_client_pull) brings every
// key it holds, in its order. Pushes of the whole model are refused. The map
// must outlive the client and agree with the servers' key count. Returns 0, or
// -1 with err filled (a map that is not ascending or does not fit).
int ps_client_set_key_map(ps_client_t *c, const ps_key_map_t *map, char *err, size_t err_len);

// The clock this worker continues from: 0 on a first join, on a rejoin what
// the shards gave it (docs/reliability.md).
uint64_t ps_client_join_clock(const ps_client_t *c);

// How long an unanswered request waits before it is sent again (default: a
// quarter of timeout_ms, at most 1000 ms).
void ps_client_set_retry_ms(ps_client_t *c, int retry_ms);

// A dense push to a shard holding more than `floats` parameters goes in
// parts: messages of `floats` consecutive values (rounded up to a multiple of
// 8; the last part holds the rest), sent in order, so that the shard applies
// one while the next is still on the wire (docs/protocol.md, "Pushes in
// parts"). The push is still one push: one clock, one acknowledgement, one
// version. Default 262,144 (1 MiB); 0 sends every push whole. Called before
// the first push; returns 0, or -1 with err filled.
int ps_client_set_push_part(ps_client_t *c, size_t floats, char *err, size_t err_len);
// The parts a dense push to shard k is cut into (1: sent whole).
size_t ps_client_push_parts(const ps_client_t *c, size_t shard);

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
// What a push announced before its frames are written is, and how it is committed.
typedef enum ps_push_kind {
    PS_PUSH_UPDATE = 0,  // ASP/SSP: ps_client_push_commit(bsp = 0)
    PS_PUSH_GRADIENT = 1,  // BSP: ps_client_push_commit(bsp = 1)
    PS_PUSH_UPDATE_PULL = 2,  // ASP/SSP: ps_client_push_commit_pull(bsp = 0)
    PS_PUSH_GRADIENT_PULL = 3,  // BSP: ps_client_push_commit_pull(bsp = 1)
} ps_push_kind_t;
// Optional, between ps_client_push_frames and writing the frames: names the
// push (its clock, examples and kind, as the commit will), so that each part
// of it goes out as soon as ps_client_push_block_written reports it written,
// while the rest is still being computed (a shard larger than a part; under
// BSP too, then the shard copies each part as it comes). Waits for the
// previous push's acknowledgement first. The commit sends what is left, and
// fails when it names another push. Returns 0, or -1 with err filled.
int ps_client_push_announce(ps_client_t *c, uint64_t clock, uint32_t examples, ps_push_kind_t kind, char *err,
                            size_t err_len);
// Sends the filled frames, once every earlier push is acknowledged. clock: the
// worker's push rounds done before this one; it must exceed the last push's.
// bsp: a gradient to aggregate (examples: how many examples it averages over).
int ps_client_push_commit(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, char *err, size_t err_len);
// ps_client_push_commit with the whole model back in out[0..n_params), asked
// for with the push (WIRE_FLAG_ECHO) instead of by a pull after it. ASP/SSP
// (bsp 0): as it stands once the push is applied, each part's range as soon
// as that part is applied, so the values travel back while the rest of the
// push is still on its way. BSP (bsp 1): the model after the round this
// gradient belongs to, as ps_client_pull(clock + 1) would give it, without
// the pull's message (docs/protocol.md, "Values back with a push"). Waits
// for the values and the acknowledgements. Returns 0 or -1.
int ps_client_push_commit_pull(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, float *out, char *err,
                               size_t err_len);
// The two halves of ps_client_push_commit_pull, for a caller that times the
// push apart from the wait: the push sent, asking for the values into out
// (kept until the wait); then the wait for them and the acknowledgements,
// with the smallest min clock the shards reported in *min_clock (may be NULL).
int ps_client_push_commit_ask(ps_client_t *c, uint64_t clock, uint32_t examples, int bsp, float *out, char *err,
                              size_t err_len);
int ps_client_await_values(ps_client_t *c, uint64_t *min_clock, char *err, size_t err_len);
// Encoded push (PAYLOAD_KIND_ENCODED): like ps_client_push_frames, but frame k
// is bytes[k] bytes for the caller to fill with an encoding (net/compress.h)
// of shard k's whole range; ps_client_push_commit then sends them. Returns
// one buffer per shard, or NULL with err filled.
uint8_t *const *ps_client_push_encoded_frames(ps_client_t *c, const size_t *bytes, char *err, size_t err_len);
// Sparse push: nnz (index, value) pairs, indices strictly ascending.
int ps_client_push_sparse(ps_client_t *c, const uint32_t *idx, const float *val, size_t nnz, uint64_t clock,
                          uint32_t examples, int bsp, char *err, size_t err_len);

// The shard versions of the parameters this client received last
// (versions[0..n_shards)).
void ps_client_pulled_versions(const ps_client_t *c, uint64_t *versions);
// The versions the next push (only) carries as computed-from, one per shard:
// the oldest parameters any step it sums read (docs/distributed.md, "Staleness,
// measured"). Without this call a push carries the versions received last.
void ps_client_carry_versions(ps_client_t *c, const uint64_t *versions);

// Pulls the whole model into out[0..n_params), answered once every live worker
// has pushed `need_clock` rounds (0: at once). Returns 0 or -1.
// *min_clock (may be NULL) receives the smallest min clock the shards reported.
int ps_client_pull(ps_client_t *c, uint64_t need_clock, float *out, uint64_t *min_clock, char *err, size_t err_len);
// A pull in the background, for a caller that computes meanwhile: started
// (the whole model into out, answered once every live worker has pushed
// need_clock rounds), then looked at now and then without blocking
// (ps_client_pull_poll: *done once every shard has answered, *min_clock as
// ps_client_pull's), or waited for (ps_client_pull_finish). While it is in
// flight pushes may be committed (their acknowledgements and its answers are
// received together), but no other pull started; out is written as the
// answers come, and is the caller's again once the pull is done. Each
// returns 0, or -1 with err filled.
int ps_client_pull_start(ps_client_t *c, uint64_t need_clock, float *out, char *err, size_t err_len);
int ps_client_pull_poll(ps_client_t *c, int *done, uint64_t *min_clock, char *err, size_t err_len);
int ps_client_pull_finish(ps_client_t *c, uint64_t *min_clock, char *err, size_t err_len);
// 1 while a pull started with ps_client_pull_start is in flight.
int ps_client_pull_pending(const ps_client_t *c);
// Gives up the pull in flight unanswered, for a caller that knows it never
// will be: it names a clock above the rounds this worker pushed, and the
// worker pushes no more (the shards count its clock while it is live). The
// client takes another request at once; its buffer is the caller's again. A
// late answer is dropped, or taken by a later pull whose clock it satisfies.
// The shard drops the pull when this worker says goodbye. No pull in flight:
// nothing happens.
void ps_client_pull_cancel(ps_client_t *c);

// Pulls the values at n keys (strictly ascending) into values[0..n).
int ps_client_pull_keys(ps_client_t *c, const uint32_t *keys, size_t n, float *values, char *err, size_t err_len);
// The same, answered once every live worker has pushed `need_clock` rounds
// (0: at once), as ps_client_pull: how a worker reading sparse rows waits
// under SSP.
int ps_client_pull_keys_at(ps_client_t *c, uint64_t need_clock, const uint32_t *keys, size_t n, float *values,
                           char *err, size_t err_len);
// The same in the background, as ps_client_pull_start: looked at with
// ps_client_pull_poll, waited for with ps_client_pull_finish (whose *min_clock
// is what the values stand for). keys and values are the caller's again once
// it is done.
int ps_client_pull_keys_start(ps_client_t *c, uint64_t need_clock, const uint32_t *keys, size_t n, float *values,
                              char *err, size_t err_len);

// Waits until every push sent has been acknowledged.
int ps_client_wait_acks(ps_client_t *c, char *err, size_t err_len);
// Says goodbye to every shard (after waiting for acks) and waits for the answers.
int ps_client_bye(ps_client_t *c, char *err, size_t err_len);

// Why a shard last refused a request (WIRE_STATUS_OK: none did): after a
// failed call, WIRE_STATUS_EVICTED means this worker must rejoin (a new
// client), WIRE_STATUS_NOT_FINITE that the run diverged.
wire_status_t ps_client_refusal(const ps_client_t *c);

void ps_client_get_stats(const ps_client_t *c, ps_client_stats_t *out);

// What a worker knows of its pushes to one shard, for the run's exactly-once
// check (docs/reliability.md): distinct push messages sent (counted before the
// first send, so a process killed at once has counted it) and acknowledged (at
// the first acknowledgement; a retry's or a late copy's is not counted again).
// sent - acked are the pushes whose fate this worker never learned.
typedef struct ps_push_count {
    uint64_t sent, acked;
} ps_push_count_t;
// From now on adds this client's pushes to counts[0..n_shards) (which may live
// in a counter_file.h mapping, so that they survive a SIGKILL); NULL stops.
// The caller keeps counts alive while the client lives.
void ps_client_count_pushes(ps_client_t *c, ps_push_count_t *counts);

// A BSP round that went through shared memory instead of this client
// (net/ps_local_round.h), counted as the push and the pull it stands for:
// shard k's push of `values` values sent (before it is posted, as a push is
// counted before it is sent), then answered with values of `version`; the
// round's pull done after waited_s. ps_client_shard_version: the version a
// push to shard k names (as computed on). ps_client_local_refusal: shard k
// refused the post: counted and said as a REJECT would be; returns -1.
void ps_client_local_push_sent(ps_client_t *c, size_t k, size_t values);
void ps_client_local_push_answered(ps_client_t *c, size_t k, uint64_t version, size_t values);
void ps_client_local_round_done(ps_client_t *c, double waited_s);
uint64_t ps_client_shard_version(const ps_client_t *c, size_t k);
int ps_client_local_refusal(ps_client_t *c, size_t k, wire_status_t why, char *err, size_t err_len);

#endif
