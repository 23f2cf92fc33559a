#ifndef ASGD_ENGINE_RUN_DIST_ROLES_H
#define ASGD_ENGINE_RUN_DIST_ROLES_H
// The two roles of a run's process, as dist_run_role runs them once the data,
// the model, the security and the coordinator are set up. Inside the run layer.
#include <stddef.h>
#include <stdint.h>

#include "engine/core/json_writer.h"  // defines: json_writer_t
#include "engine/run/dist.h"
#include "engine/run/model_file.h"
#include "engine/run/worker_keys.h"
#include "net/ps_key_map.h"

// A parameter-server shard (or, with --server-replicas, one replica of it):
// meets the others, serves until the run ends, writes its result files.
// eval_keys: shard 0's global evaluator's model over the features its test
// examples read (worker_keys.h), or NULL (it reads the whole model m).
// Returns 0, or -1 with err.
int dist_run_server(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                    const eval_keys_t *eval_keys, const model_file_split_t *split, const char *coordinator,
                    uint64_t run_id, char *err, size_t err_len);
// A worker replica: meets the others, trains (rejoining after an eviction),
// writes its JSON result and files. key_map: its model holds only those of
// the servers' keys (worker_keys.h), or NULL. Returns 0, or -1 with err.
int dist_run_worker(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                    const ps_key_map_t *key_map, const model_file_split_t *split, const char *coordinator,
                    uint64_t run_id, char *err, size_t err_len);

// This process's peak resident memory so far, in bytes (0 if unknown): what
// a server or worker reports as peak_rss_bytes.
uint64_t dist_peak_rss_bytes(void);
// A server's or worker's JSON: how its parameter payloads travelled
// (ps_transport, resolved: auto is tcp for a process started by hand) and,
// through shared memory, how many messages went and came by reference and
// how many went inline for want of a free slot (net/shm_frames.h).
void dist_json_transport(json_writer_t *j, const dist_args_t *d);

// The endpoint others should dial: a wildcard bind is advertised under this host's name.
void dist_advertise(const char *bound, char *out, size_t out_len);

// --save-model: parameters [first, first + count) of model m (all of them, or
// a server's shard) as a model file (model_file.h), with the run's split.
// Returns 0, or -1 with err.
int dist_save_model(const char *path, const model_t *m, const model_file_split_t *split, size_t first, size_t count,
                    const float *values, char *err, size_t err_len);

#endif
