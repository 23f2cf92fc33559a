#ifndef ASGD_NET_PS_LOCAL_ROUND_H
#define ASGD_NET_PS_LOCAL_ROUND_H
// BSP rounds between a shard and the workers on its machine through shared
// memory (docs/protocol.md, "BSP rounds in shared memory").
//
// Over ZeroMQ a round's two messages (the gradient that asks for the
// round's values, and the values) each cross the sender's and the
// receiver's I/O threads: on two vCPUs shared by the workers and the
// server, those hand-offs were most of a round's wait (docs/benchmarks.md).
// Here a shard offers one segment (a file in /dev/shm) with a gradient area
// and an answer word per worker slot and one values area. A worker writes
// its gradient where the shard will read it, raises its slot's counter and
// rings the shard's doorbell (an abstract Unix datagram socket the shard's
// serving loop polls beside its ZeroMQ socket); the shard takes the
// gradient through the same code as a PUSH (ps_server_local.c: the same
// checks, counts, exactly-once ledger and round), and writes its answers
// (the acknowledgement, a refusal, the round's values: a reference to its
// own buffer, net/shm_frames.h, or a copy in the values area) into the
// segment, waking the worker on a futex only when it sleeps. Everything else (joins,
// heartbeats, the evaluator's pulls, BYE) still goes through ZeroMQ.
//
// Orders: a worker writes its gradient and its post's fields, then raises
// `posted` with release; the shard loads it with acquire before reading
// them, and reads the gradient until the round is applied, which cannot
// happen before every worker has posted, after which the worker writes
// nothing until the values come back. The shard writes an answer's fields,
// then raises `answered` with release; the worker loads it with acquire. The
// values area is written by the shard only while applying a round, which
// needs every live worker's next gradient, so no worker that takes part is
// reading it then; a sequence number around each write (odd while writing)
// lets a reader that fell out of the round (evicted) see a torn copy and
// drop it.
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "net/wire.h"

typedef struct ps_local_round ps_local_round_t;

// ---- the shard's side ------------------------------------------------------

// Creates the segment and the doorbell of `shard` of run_id, for n_workers
// slots of n values. Returns NULL with err filled (the shard then serves
// through ZeroMQ alone).
ps_local_round_t *ps_local_round_create(uint64_t run_id, size_t shard, size_t n_workers, size_t n, char *err,
                                        size_t err_len);
// Unlinks the segment's name and closes everything; accepts NULL, nulls *l.
void ps_local_round_destroy(ps_local_round_t **l);
// The doorbell's descriptor, readable when a worker posted.
int ps_local_round_fd(const ps_local_round_t *l);
// Empties the doorbell (its bytes carry nothing: the slots say what came).
void ps_local_round_quiet(ps_local_round_t *l);

// One gradient posted by a worker.
typedef struct ps_local_post {
    uint64_t clock;  // the round it is for
    uint64_t param_version;  // of the values it was computed on
    uint32_t examples;
    int finite;  // 1: the worker found every value finite as it wrote them; 0: not checked, or not finite
    const float *values;  // n values in the segment, readable until the round is applied
} ps_local_post_t;

// Worker k's next post, if it made one not taken yet: 1 with *post filled, 0.
int ps_local_round_take(ps_local_round_t *l, uint32_t k, ps_local_post_t *post);

// Answers to worker k. The acknowledgement of its push of `clock`:
void ps_local_round_ack(ps_local_round_t *l, uint32_t k, uint64_t clock);
// Values [from, from + count) of the shard as of version `version`, standing
// for clock `clock`; `complete` when they end the answer (the whole shard is
// written).
void ps_local_round_values(ps_local_round_t *l, uint32_t k, const float *values, size_t from, size_t count,
                           uint64_t version, uint64_t clock, int complete);
// The whole shard's values of `version` for `clock`, as a reference to the
// shard's own buffer (len bytes, shm_frames_pack's), which the worker maps
// and copies from: no copy into the values area. Returns 0, or -1 when the
// reference does not fit in the slot (nothing answered).
int ps_local_round_values_ref(ps_local_round_t *l, uint32_t k, const void *ref, size_t len, uint64_t version,
                              uint64_t clock);
// A refusal (a REJECT's status) of the worker's last post.
void ps_local_round_refuse(ps_local_round_t *l, uint32_t k, wire_status_t why);
// Worker k left or was evicted: the others no longer count on its post to
// ring the doorbell (ps_local_round_post rings only at a round's last post;
// a slot counts from the shard's first take of a post from it).
void ps_local_round_out(ps_local_round_t *l, uint32_t k);

// The ROUTER identity that stands for worker k's local slot in the shard's
// answers (ps_server_local.c): six bytes beginning with a zero byte, which
// no ZeroMQ peer can have (libzmq's own are five bytes, and a peer's chosen
// one may not begin with zero).
void ps_local_round_identity(uint32_t k, zmq_msg_t *identity);
// Whether identity is one of those, with its worker in *k.
int ps_local_round_is_local(zmq_msg_t *identity, uint32_t *k);

// ---- a worker's side -------------------------------------------------------

// Attaches worker k to the segment of `shard` of run_id, made for n values.
// Returns NULL with err filled when there is none (a shard on another
// machine, or a run that does not offer it): the worker goes through ZeroMQ.
ps_local_round_t *ps_local_round_attach(uint64_t run_id, size_t shard, uint32_t k, size_t n, char *err, size_t err_len);
// Where this worker writes its next gradient (n values).
float *ps_local_round_gradient(ps_local_round_t *l);
// Posts the gradient written there for round `clock`; finite: 1 when the
// writer checked every value finite as it wrote them (the shard then does not
// read them for that), else 0. Rings the doorbell when every other worker
// taking part here has posted for the round: the shard is woken once a round.
// Returns 0, or -1 with err filled (the doorbell is gone: the shard has
// stopped; noticed by a post that rings, or by the wait).
int ps_local_round_post(ps_local_round_t *l, uint64_t clock, uint64_t param_version, uint32_t examples, int finite,
                        char *err, size_t err_len);

// What came back for a post.
typedef struct ps_local_answer {
    wire_status_t refused;  // WIRE_STATUS_OK, or why the shard refused the post
    uint64_t version, clock;  // of the values
} ps_local_answer_t;

// Waits for the answer to the post of round `clock`: its acknowledgement and
// values for a clock after it, copied into out[0..n). Spins while the shard
// is quick, then sleeps. Returns 0 with *a filled (a->refused set: nothing
// was copied), or -1 with err filled when the shard's process has exited,
// *stop was raised, or the values changed while being copied: the caller
// then goes through ZeroMQ.
int ps_local_round_await(ps_local_round_t *l, uint64_t clock, float *out, const atomic_int *stop, ps_local_answer_t *a,
                         char *err, size_t err_len);

#endif
