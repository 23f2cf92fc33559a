#ifndef ASGD_NET_PS_REPLICA_H
#define ASGD_NET_PS_REPLICA_H
// Replicated shards (--server-replicas R; docs/reliability.md): primary-backup
// replication of one parameter-server shard.
//
// The primary serves the workers. Before it handles a message that changes
// the shard's state (a worker's HELLO, PUSH or BYE) it forwards the message,
// as received, to every backup in sync (sent to all, then their answers
// awaited together), and waits until each has handled it (its reply:
// PUSH_ACK, WELCOME, BYE_ACK or REJECT). A backup is a ps_server like the
// primary, fed the same messages in the same order, so it computes
// bit-identical parameters, clocks and dedup table (BSP rounds included: it
// sums the same gradients in the same worker order). A worker's push is thus
// acknowledged only once every live replica applied it. Pulls are served by
// the primary alone.
//
// A backup joins by sending REPLICA_JOIN to the primary, which writes its
// whole state (ps_server_save) to STATE_DIR/server-K-replica-I.state between
// two messages and from then on forwards to it; the backup adopts that state
// (ps_server_adopt) before handling what was forwarded.
//
// Who is primary: the replica bound to the shard's public endpoint P (the one
// in the rendezvous table). A backup tries to bind P at every turn of its loop;
// the kernel grants it only once the primary's process is gone (one host: the
// port is the lease, so no two replicas serve P at once). A backup that gets P
// promotes itself if the record STATE_DIR/server-K.replicas, which the primary
// rewrites whenever a backup answers its first forwarded message (it holds the
// state and applies what follows: in sync) or is dropped, names it; a joiner
// still adopting the state is not named, so it cannot take over half-made; a
// stale one gives P back and fails. Workers need no new logic: their sockets
// reconnect to P, and they resend the push that was not acknowledged, which
// the new primary acknowledges again without applying it when it had it.
//
// A promoted backup starts with no backups: it rewrites the record so. The
// other backups that were in sync with the old primary may have applied a
// message it had not (or the reverse), so they do not carry on with it: a
// backup reads the record at most every 100 ms and, once the record no longer
// lists it after having listed it (dropped, or another replica took over), it
// fails; asgd launch
// starts it again as a joining backup, which copies the new primary's state.
//
// A backup that does not answer a forwarded message within ack_timeout_ms is
// dropped (the primary goes on with the others, or alone, and records it).
#include <stddef.h>
#include <stdint.h>

#include "net/ps_server.h"

// Replicas per shard, primary included, at most: every push waits for the
// slowest backup's answer, and the replicas share one host (the port is the
// lease), so more copies add latency and processes, not independent failures.
#define PS_REPLICA_MAX 4

typedef struct ps_replica_config {
    const char *state_dir;  // the record and state copies (the run directory: shared by the replicas)
    size_t shard, replica;  // replica: this process's index among the shard's R
    uint64_t run_id;
    size_t n_workers;
    int ack_timeout_ms;  // a backup silent this long with a message forwarded is dropped
    int worker_timeout_ms;  // evictions once promoted (a backup evicts nobody)
    int join_timeout_ms;  // a joining backup gives up after this long
    int quiet;
    // Called on the serving thread once this backup took over (NULL: nothing).
    void (*on_promoted)(void *ctx, ps_server_t *s, const char *endpoint);
    void *on_promoted_ctx;
} ps_replica_config_t;

typedef struct ps_replica_stats {
    uint64_t forwarded;  // answers of backups to forwarded messages
    uint64_t joins;  // backups that joined this replica as primary
    uint64_t dropped;  // backups dropped for silence
    uint64_t promotions;  // 1 when this replica was promoted from backup
} ps_replica_stats_t;

typedef struct ps_replica ps_replica_t;

ps_replica_t *ps_replica_new(void *zmq_ctx, const ps_replica_config_t *c, char *err, size_t err_len);
void ps_replica_destroy(ps_replica_t **r);

// s serves the shard as its primary at its bound endpoint: the record names
// it, and backups may join. Returns 0, or -1 with err.
int ps_replica_lead(ps_replica_t *r, ps_server_t *s, char *err, size_t err_len);
// Before a new primary meets the workers: waits (up to join_timeout_ms) until
// a first backup has joined, so that no push is acknowledged by one replica
// alone. Returns 0, or -1 with err.
int ps_replica_await_backup(ps_replica_t *r, ps_server_t *s, char *err, size_t err_len);
// s (new, bound, not yet serving) joins the shard's primary as a backup and
// adopts its state. Returns 0; 1 when the run had already finished (nothing
// to serve); -1 with err.
int ps_replica_join(ps_replica_t *r, ps_server_t *s, char *err, size_t err_len);
// After ps_server_run returned 0: the primary marks the run finished in the
// record (a backup that finds P free then stops instead of taking over).
int ps_replica_finish(ps_replica_t *r, char *err, size_t err_len);

int ps_replica_is_primary(const ps_replica_t *r);
// 1 when this backup stopped because the primary finished while it was not in
// sync (it holds no final state).
int ps_replica_stale(const ps_replica_t *r);
void ps_replica_stats(const ps_replica_t *r, ps_replica_stats_t *out);

#endif
