#ifndef ASGD_ENGINE_DIST_H
#define ASGD_ENGINE_DIST_H
// The processes of a distributed run: their flags, and what one rank does.
//
// Every process gets the same training flags (train_args.h) and the same
// distributed flags below; its role (parameter-server shard or worker) and id
// come from `asgd server --id K` / `asgd worker --id K`, from asgd's own local
// launcher, or from a cluster launcher's rank (the first --servers ranks serve).
// All of them meet at the coordinator (rendezvous.h) to learn each other's
// endpoints, then talk directly.
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "engine/flags.h"       // defines: flag_spec_t
#include "engine/json_writer.h" // defines: json_writer_t
#include "staleness/histogram.h"  // defines: staleness_hist_t
#include "engine/train_args.h"  // defines: train_args_t
#include "staleness/sync_mode.h"  // defines: sync_mode_t

#define DIST_N_FLAGS 18
#define DIST_DEFAULT_PORT 29517

typedef struct dist_args {
    size_t servers, workers;
    int sync;                 // sync_mode_t
    size_t staleness;
    size_t push_every, fetch_every;
    int server_optimizer;     // server_optimizer_t
    double server_lr;         // NaN: the workers' --lr
    int server_staleness_aware;
    double server_dc_lambda;
    const char *delay_worker;
    const char *coordinator;  // "host:port" or "tcp://host:port"
    uint64_t run_id;          // 0: derived from the coordinator's address
    const char *run_dir;
    const char *bind_host;
    int ring_ipc;             // allreduce over ipc:// (one machine) instead of tcp
    size_t timeout_ms;
    size_t heartbeat_ms;
    const char *save_model;
} dist_args_t;

void dist_args_defaults(dist_args_t *d);
size_t dist_args_flags(dist_args_t *d, flag_spec_t *specs);
// Checks across flags (after parsing); prints a usage error and returns 2, or 0.
int dist_args_finish(dist_args_t *d, const train_args_t *t, const char *command);

typedef enum dist_role {
    DIST_ROLE_SERVER = 0,
    DIST_ROLE_WORKER = 1,
} dist_role_t;

// Runs one process of the run: loads the data, builds the model, meets the
// others at the coordinator (first hosting it, bound at host_bind, when that is
// not NULL), and serves or trains until the run ends. Returns the exit status.
int dist_run_role(dist_role_t role, size_t id, const train_args_t *t, const dist_args_t *d, const char *host_bind);

// Creates a run directory and any missing parents (like mkdir -p). Returns 0,
// or -1 with err naming the directory that could not be made.
int dist_make_run_dir(const char *dir, char *err, size_t err_len);

// A file of the run directory, written under a temporary name and renamed when
// closed, so whoever merges the directory (rank 0, the launcher, a script)
// never reads half a file. Both return NULL / -1 with err naming the path.
FILE *dist_file_open(const char *dir, const char *name, char *err, size_t err_len);
int dist_file_close(FILE *f, const char *dir, const char *name, char *err, size_t err_len);

// Writes a staleness histogram's summary (updates, mean, p50, p99, max) as object `key`.
void dist_json_staleness(json_writer_t *j, const char *key, const staleness_hist_t *h);

// The run id every process derives from the coordinator's address when none is given.
uint64_t dist_default_run_id(const char *coordinator);

#endif
