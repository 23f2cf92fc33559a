#ifndef ASGD_ENGINE_RUN_RUN_RECORD_H
#define ASGD_ENGINE_RUN_RUN_RECORD_H
// Result records: what each process of a distributed run hands to whoever
// merges the run directory (asgd launch, rank 0 under a cluster launcher, the
// ps-lite scheduler). Beside its JSON for people, each process writes
// DIR/worker-K.result or DIR/server-K.result (written last: its presence says
// the process is done); the merge reads those, never the JSON. The format is
// written and read here only.
//
// Format, version RUN_RECORD_VERSION; every integer little-endian:
//   header  8 bytes magic "ASGDRSLT", u32 version, u32 kind (1 worker,
//           2 server), u32 field count, u32 0, u64 bytes of fields after it
//   field   u16 index, u8 type, u8 0, then by type:
//           1 u64 | 2 f64 (its bits) | 3 u64 n, n x u64 (one per worker) |
//           4 staleness histogram: u64 count, u64 max, f64 sum, u64 bins, bins x u64
// The fields of each kind come in one fixed order (run_record.c's tables); a
// reader refuses another version, kind, field count, order or type, a short
// file and trailing bytes, with one line naming the file.
#include <stddef.h>
#include <stdint.h>

#include "staleness/histogram.h"

#define RUN_RECORD_VERSION 4u

// A worker's run (one incarnation: the last to finish under --restart-workers).
typedef struct worker_result {
    uint64_t id;
    uint64_t metric_rmse;  // 1: the model is scored by RMSE, 0: by accuracy
    uint64_t samples, updates;  // its own
    uint64_t train_examples;  // of the whole run (it trains on its share)
    uint64_t pushes;
    uint64_t local_rounds;  // bsp: rounds through shared memory (net/ps_local_round.h)
    uint64_t left;  // 1: it left the run on a stop signal (SIGTERM, SIGINT) before its share was done
    uint64_t global_versions;  // the shard versions its final pull saw, summed
    uint64_t samples_to_target;  // meaningful when time_to_target_s is not NaN
    uint64_t bytes_out, bytes_in, bytes_out_uncompressed;
    double wall_s, samples_per_s, wait_s;
    double final_test_loss, final_test_metric;  // its own copy's last evaluation
    double time_to_target_s;  // NaN: not reached
    double global_test_loss, global_test_metric;  // the servers' model after its last push; NaN: none
    // A worker resumed from its checkpoint, over its restarts: samples trained
    // twice, and samples no incarnation trained (docs/reliability.md).
    uint64_t samples_retrained, samples_skipped;
    // asp/ssp: pulls made, the achieved periods' 99th percentiles (replica
    // steps between pushes, between pulls), and the time the shards held its
    // pulls until slower workers caught up.
    uint64_t pulls, steps_per_push_p99, steps_per_pull_p99;
    double pull_held_s;
    // 1: the servers had evicted it (silent past --worker-timeout) and
    // finished the run without it; its samples count, its last pushes were
    // never applied (docs/reliability.md).
    uint64_t evicted;
} worker_result_t;

// A parameter-server shard's run.
typedef struct server_result {
    uint64_t id;
    uint64_t run_id;  // what the workers' push ledgers are matched by
    uint64_t lost_known;  // 0: resumed without its ledger, the pushes its crash lost are unknown
    uint64_t workers;  // the length of each array below
    uint64_t *pushes_total;  // applied from each worker over the whole run
    uint64_t *pushes_lost;  // applied, then lost with a restart from a checkpoint
    uint64_t *late_dropped;  // bsp with backup workers: late gradients dropped (else zeros)
    staleness_hist_t staleness_clocks, staleness_updates;
} server_result_t;

// DIR/worker-K.result and DIR/server-K.result, K the id.
void run_record_path(char *out, size_t len, const char *dir, int server, size_t id);

// Write the record of r into dir (under a temporary name, then renamed).
// Return 0, or -1 with err naming the file.
int run_record_write_worker(const char *dir, const worker_result_t *r, char *err, size_t err_len);
int run_record_write_server(const char *dir, const server_result_t *r, char *err, size_t err_len);

// Read the record of worker / shard id from dir into *r (a server's arrays
// are allocated: server_result_free). Return 0, or -1 with err, one line
// naming the file: missing, not a result record, another version or kind, cut
// short, or malformed.
int run_record_read_worker(const char *dir, size_t id, worker_result_t *r, char *err, size_t err_len);
int run_record_read_server(const char *dir, size_t id, server_result_t *r, char *err, size_t err_len);

// Allocates r's arrays for `workers` workers, zeroed (the writer's side).
// Returns 0, or -1 with err.
int server_result_alloc(server_result_t *r, size_t workers, char *err, size_t err_len);
void server_result_free(server_result_t *r);

#endif
