#ifndef ASGD_ENGINE_RUN_RUN_MERGE_H
#define ASGD_ENGINE_RUN_RUN_MERGE_H
// A distributed run's directory merged into the run's own results, from the
// result records every process wrote there (run_record.h): staleness.csv,
// merged.csv (launch_curve.h), summary.json and the global model
// (--save-model). asgd launch does it when its processes have ended (also
// after a stop signal: docs/reliability.md, "Signals"), rank 0 under srun or
// mpirun, the ps-lite scheduler, and asgd merge RUN_DIR afterwards.
#include <stddef.h>

#include "engine/run/dist.h"
#include "engine/run/launch_job.h"
#include "engine/run/train_args.h"

// What summary.json says that no record holds: the launcher's own figures.
typedef struct run_merge_info {
    double launch_wall_s;  // NaN: unknown (asgd merge)
    const size_t *server_restarts;  // [d->servers] by the local launcher, or NULL: none
    size_t replica_restarts;  // --server-replicas: dead replicas started again
    int interrupted;  // the signal that stopped the run (its launcher's), or 0
} run_merge_info_t;

// staleness.csv, merged.csv and summary.json in dir, from every process's
// record; without outcome the summary goes to stdout too, else its figures and
// curve into outcome. Returns 0, or -1 with err naming the record that is
// missing or refused; also -1 when an acknowledged push was not applied
// exactly once (the summary says so first).
int run_merge_dir(const char *dir, const train_args_t *t, const dist_args_t *d, const run_merge_info_t *info,
                  launch_job_outcome_t *outcome, char *err, size_t err_len);

// Where process (role, id) writes its part of the run's model under
// --save-model, or NULL: each server its final shard, in the run directory;
// worker 0 the user's file under allreduce (every replica holds the global
// model), or under hybrid its replica in the run directory (whose sparse part
// the servers' shards then replace). buf holds the path when it is one of the run directory's.
const char *run_merge_part_path(dist_role_t role, size_t id, const dist_args_t *d, const char *dir,
                                const char *save_model, char *buf, size_t len);

// --save-model FILE after the run: the parts joined in order into FILE (under
// allreduce and local worker 0 wrote FILE itself). Returns 0 or -1 with err.
int run_merge_model(const char *dir, const dist_args_t *d, const char *save_model, char *err, size_t err_len);

// The processes that wrote no result record in dir, named into names ("server
// 0, worker 2"); returns how many.
size_t run_merge_missing(const char *dir, const dist_args_t *d, char *names, size_t len);

// Removes what an earlier run left in dir that would speak for this one:
// its processes' result records and live counts, and the mark below (a
// launch starting in a directory used before).
void run_merge_clear(const char *dir, const dist_args_t *d);

// The launcher's mark that a signal stopped the run (RUN_DIR/interrupted,
// holding the signal's number), so that asgd merge reports it as launch did.
#define RUN_MERGE_INTERRUPTED "interrupted"
int run_merge_mark_interrupted(const char *dir, int sig, char *err, size_t err_len);
// The mark's signal, or 0 when there is none.
int run_merge_interrupted(const char *dir);

#endif
