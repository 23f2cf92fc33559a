#ifndef ASGD_NET_PS_HEARTBEAT_H
#define ASGD_NET_PS_HEARTBEAT_H
// A worker's heartbeat: a thread that tells every server shard, every
// interval, that the worker is alive, so that a shard can tell a worker that
// is busy (training, evaluating, waiting in a pull) from one that died or is
// cut off, and evict only the latter (ps_server.h, --worker-timeout).
//
// It has its own DEALER per shard (a ps_client is one thread's), without an
// identity: the shard never answers a HEARTBEAT. Sends never block: with the
// shard unreachable, at most two heartbeats wait in the queue, the rest are
// dropped.
#include <stddef.h>
#include <stdint.h>

typedef struct ps_heartbeat ps_heartbeat_t;

// Connects to every shard and starts the thread. Returns NULL with err filled.
ps_heartbeat_t *ps_heartbeat_start(void *zmq_ctx, uint64_t run_id, uint32_t worker, const char *const *endpoints,
                                   size_t n_shards, int interval_ms, char *err, size_t err_len);
// Stops the thread and closes its sockets; accepts NULL and nulls *hb.
void ps_heartbeat_stop(ps_heartbeat_t **hb);

#endif
