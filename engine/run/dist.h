#ifndef ASGD_ENGINE_RUN_DIST_H
#define ASGD_ENGINE_RUN_DIST_H
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

#include "engine/core/flags.h"
#include "engine/core/json_writer.h"
#include "staleness/histogram.h"
#include "engine/run/train_args.h"
#include "net/compress.h"
#include "staleness/sync_mode.h"

#define DIST_N_FLAGS 40
#define DIST_DEFAULT_PORT 29517

// The columns of a run's global.csv (the global model's curve, written by the
// process serving shard 0) and, after a `process` column, of merged.csv.
// Staleness and wait are totals so far; a worker's rows leave them empty.
extern const char dist_curve_columns[];
enum {
    CURVE_WALL_S,
    CURVE_EPOCH,
    CURVE_SAMPLES,
    CURVE_UPDATES,
    CURVE_SAMPLES_PER_S,
    CURVE_LR,
    CURVE_TRAIN_LOSS,
    CURVE_TEST_LOSS,
    CURVE_TEST_ACCURACY,
    CURVE_TEST_RMSE,
    CURVE_STALENESS_VERSIONS_MEAN,
    CURVE_STALENESS_VERSIONS_MAX,
    CURVE_STALENESS_CLOCKS_MEAN,
    CURVE_STALENESS_CLOCKS_MAX,
    CURVE_WAIT_S,
    CURVE_N_COLUMNS,
};

// Whether a mode's global model lives on the servers (asp, ssp, bsp: read by
// the evaluator beside shard 0) or in every replica (allreduce, hybrid: worker
// 0's evaluations are of the global model).
int dist_global_on_servers(int sync);
// Of the time a worker's `threads` threads were held by the staleness bound
// (wait_s, summed over them), the part the bound itself caused: while the
// shards held the pull that would release them (held_s) for slower workers,
// every thread waits; the rest of wait_s went on the pull's bytes and the
// exchange. min(wait_s, threads * held_s).
double dist_wait_for_bound(double wait_s, double held_s, size_t threads);
// Whether a mode's workers form a ring (allreduce, hybrid, local), and whether
// it runs with no server at all (allreduce, local).
int dist_uses_ring(int sync);
int dist_without_servers(int sync);

// asp's default pacing: exchanges fill at most a quarter of the
// communication thread's time (docs/distributed.md, "Periods by default").
#define DIST_DEFAULT_COMM_SHARE 0.25

// How the parameter server's payloads travel (--ps-transport; net/shm_frames.h).
typedef enum ps_transport {
    PS_TRANSPORT_AUTO = 0,  // asgd launch: shm (it starts every process on this machine); a role started by hand: tcp
    PS_TRANSPORT_TCP,  // inside the messages, through the sockets
    PS_TRANSPORT_SHM,  // large payloads through shared memory, the sockets carrying references
} ps_transport_t;
const char *dist_ps_transport_name(int ps_transport);

// What asp and ssp pushes do with a sparse model's hot parameters, its dense
// part (a linear model's bias, the dense layers of embmlp and the sparse mlp),
// which every step of every worker moves (--hot-params; docs/distributed.md,
// "Summed deltas and the hot coordinates"): add them up on the servers as
// every other parameter (Downpour as published), or add each worker's
// change divided by the workers, their average. Auto: average where the
// servers step by plain SGD at the workers' own --lr, else sum.
typedef enum hot_params {
    HOT_PARAMS_AUTO = 0,
    HOT_PARAMS_AVERAGE,
    HOT_PARAMS_SUM,
} hot_params_t;
#define HOT_PARAMS_CHOICES "auto|average|sum"
const char *dist_hot_params_name(int hot_params);

typedef struct dist_args {
    size_t servers, workers;
    size_t max_workers;  // --max-workers: room for joiners (0 until dist_args_finish: --workers)
    int join;  // asgd worker --join: this worker joins a running run
    int sync;  // sync_mode_t
    size_t staleness;
    size_t push_every, fetch_every;
    // asp with neither period given: the share of a worker's communication
    // thread's time that exchanges may take (replica_config_t.comm_share);
    // 0 otherwise.
    double comm_share;
    int server_optimizer;  // optimizer_kind_t
    double server_lr;  // NaN: the workers' --lr
    int hot_params;  // hot_params_t: --hot-params (HOT_PARAMS_AUTO until dist_args_finish)
    int server_staleness_aware;
    double server_dc_lambda;
    size_t server_delay_adaptive;  // tau_C of the delay-adaptive step; 0: off
    const char *delay_worker;
    const char *coordinator;  // "host:port" or "tcp://host:port"
    uint64_t run_id;  // 0: derived from the coordinator's address
    const char *run_dir;
    const char *bind_host;
    int ring_ipc;  // allreduce over ipc:// (one machine) instead of tcp
    int ps_transport;  // ps_transport_t: --ps-transport auto|tcp|shm
    int collective;  // collective_choice_t (engine/replica/collective.h): --collective auto|shm|ring|mpi
    size_t timeout_ms;
    size_t heartbeat_ms;
    size_t worker_timeout_ms;  // servers evict a worker silent this long; 0 = never
    size_t server_memory_mib;  // --server-memory-allowance; 0: automatic (ps_config.memory_allowance)
    size_t retry_ms;  // workers resend an unanswered request after this long
    const char *save_model;
    // Transport security (net/curve_auth.h, docs/security.md).
    const char *curve_server_key;  // the run's server key: .key where this process listens, else .pub
    const char *curve_key;  // this process's own key pair (.key) for connecting
    const char *curve_allow;  // client public keys admitted by this process's listeners
    int insecure;  // listen beyond loopback without CURVE
    // A local launch's throwaway server key pair (Z85), which every process of
    // that run holds and alone admits; NULL: none (dist_args_from_launcher).
    const char *run_key_public, *run_key_secret;
    const char *compress;  // --compress METHOD (parsed into compress_spec)
    int error_feedback;  // --error-feedback off|on
    compress_spec_t compress_spec;  // filled by dist_args_finish
    int scaling;  // dist_scaling_t
    int lr_scaling;  // dist_lr_scaling_t
    int hybrid_sparse;  // --sync hybrid: the sparse part under 0 asp, 1 ssp (--staleness)
    int worker_eval;  // workers evaluate their own copies at every evaluation point (else at start and end)
    size_t eval_snapshot_mb;  // the global evaluator's snapshots, evaluated after training, up to this many MiB
    size_t backup_workers;  // --sync bsp: a round is applied once workers - backup_workers gradients are in
    size_t local_steps;  // --sync local: steps between model averages (0: not given)
    size_t server_replicas;  // --server-replicas R: each shard a primary and R - 1 backups (net/ps_replica.h)
    size_t replica;  // server: this process's replica of its shard (--replica, given by asgd launch)
    int replica_backup;  // server: start as a backup joining the shard's primary (--replica-backup)
    // Filled by dist_apply_scaling: the flags as given, before scaling.
    size_t requested_batch;
    double requested_lr;
    int scaling_applied;
} dist_args_t;

typedef enum dist_scaling {
    DIST_SCALING_WEAK = 0,  // --batch per worker: the total grows with the workers
    DIST_SCALING_STRONG = 1,  // --batch is the total: each worker takes --batch / workers
} dist_scaling_t;

typedef enum dist_lr_scaling {
    DIST_LR_SCALING_NONE = 0,
    DIST_LR_SCALING_LINEAR = 1,  // lr * workers
    DIST_LR_SCALING_SQRT = 2,  // lr * sqrt(workers)
} dist_lr_scaling_t;

void dist_args_defaults(dist_args_t *d);
// The workers the run has room for: --max-workers, or --workers without it.
size_t dist_slots(const dist_args_t *d);
size_t dist_args_flags(dist_args_t *d, flag_spec_t *specs);
// Checks across flags (after parsing; specs: the parsed table, for the flags
// given that the mode would ignore): 0, or 2 with the usage error in err.
int dist_args_finish(dist_args_t *d, const train_args_t *t, const flag_spec_t *specs, size_t n_specs,
                     const char *command, char *err, size_t err_len);

// --scaling and --lr-scaling, once the number of workers is final: strong
// scaling divides --batch (the total) by the workers (it must divide evenly),
// weak keeps it per worker; --lr and --server-lr are multiplied by workers
// (linear) or its square root (sqrt). Applied once (later calls do nothing);
// returns 0, or 2 with the usage error in err.
int dist_apply_scaling(dist_args_t *d, train_args_t *t, const char *command, char *err, size_t err_len);
const char *dist_lr_scaling_name(int lr_scaling);

// What a local `asgd launch` gives its children in the environment rather than
// on the command line (which every user of the machine can read in
// /proc/PID/cmdline): the run id and the run's throwaway CURVE key pair.
#define DIST_ENV_RUN_ID "ASGD_LAUNCH_RUN_ID"
#define DIST_ENV_KEY_PUBLIC "ASGD_LAUNCH_CURVE_PUBLIC"
#define DIST_ENV_KEY_SECRET "ASGD_LAUNCH_CURVE_SECRET"
// Takes them from this process's environment: the run id where --run-id was
// not given, the key pair where neither --curve-server-key nor --insecure was.
void dist_args_from_launcher(dist_args_t *d);

// Applies the --curve-*/--insecure flags (or the launcher's key pair) to this process (net_security_set)
// and, when an allow list is given, starts the ZAP handler of zmq_ctx (the
// caller destroys *zap after the context's last socket). Returns 0, or -1 with
// err naming the flag or file that is wrong.
struct zap_handler;
int dist_security_start(const dist_args_t *d, void *zmq_ctx, struct zap_handler **zap, char *err, size_t err_len);

typedef enum dist_role {
    DIST_ROLE_SERVER = 0,
    DIST_ROLE_WORKER = 1,
} dist_role_t;

// The command line of `asgd server` / `asgd worker`: the training flags, the
// distributed ones and the role's own (--id, --host-coordinator, --save-model).
typedef struct dist_role_args {
    train_args_t t;
    dist_args_t d;
    size_t id;
    const char *host;  // --host-coordinator ENDPOINT, or NULL
} dist_role_args_t;
#define DIST_ROLE_OWN_N_FLAGS 6  // --id, --join, --replica, --replica-backup, --host-coordinator, --save-model
#define DIST_ROLE_N_FLAGS (TRAIN_ARGS_N_FLAGS + DIST_N_FLAGS + DIST_ROLE_OWN_N_FLAGS)
// Sets the defaults and writes the flag table into specs[0..DIST_ROLE_N_FLAGS); returns its length.
size_t dist_role_flags(dist_role_args_t *a, flag_spec_t *specs);
// After flags_parse: the checks across flags (training, distributed, scaling).
// Returns 0, or 2 with the usage error, prefixed with command, in err.
int dist_role_check(dist_role_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command, char *err,
                    size_t err_len);

// Runs one process of the run: loads the data, builds the model, meets the
// others at the coordinator (first hosting it, bound at host_bind, when that is
// not NULL), and serves or trains until the run ends. Returns the exit status.
int dist_run_role(dist_role_t role, size_t id, const train_args_t *t, const dist_args_t *d, const char *host_bind);

// What a joiner (--join --run-dir DIR, no --coordinator) reads from DIR/join,
// which asgd launch writes (owner-only: it may hold the run's secret key).
typedef struct dist_join_file {
    char coordinator[300], pub[64], sec[64];
} dist_join_file_t;
// Fills d's coordinator, run id and launch keys from DIR/join (jf holds the
// strings). Returns 0, or 2 with err naming --join --run-dir and the file.
int dist_join_file_read(dist_args_t *d, dist_join_file_t *jf, char *err, size_t err_len);

// Creates a run directory and any missing parents (like mkdir -p). Returns 0,
// or -1 with err naming the directory that could not be made.
int dist_make_run_dir(const char *dir, char *err, size_t err_len);

// Creates dir as dist_make_run_dir does, then makes and removes a file there:
// a directory no checkpoint could be written to is refused before training,
// err naming `flag` and dir. Returns 0 or -1.
int dist_check_writable_dir(const char *dir, const char *flag, char *err, size_t err_len);

// Whether the file an output flag names (--save-model, --summary, --log) can
// be written, checked before any training: the file is created and removed (or,
// when it exists, opened for writing without being truncated). Returns 0 (path
// NULL included), or -1 with err naming `flag`, path and why.
int dist_check_writable_file(const char *path, const char *flag, char *err, size_t err_len);

// A file of the run directory, written under a temporary name and renamed when
// closed, so whoever merges the directory (rank 0, the launcher, a script)
// never reads half a file. Both return NULL / -1 with err naming the path.
FILE *dist_file_open(const char *dir, const char *name, char *err, size_t err_len);
int dist_file_close(FILE *f, const char *dir, const char *name, char *err, size_t err_len);

// Writes a staleness histogram's summary (updates, mean, p50, p99, max) as object `key`.
void dist_json_staleness(json_writer_t *j, const char *key, const staleness_hist_t *h);

// The run id every process derives from the coordinator's address when none is given.
uint64_t dist_default_run_id(const char *coordinator);

// ---- every acknowledged push applied exactly once (docs/reliability.md) ----------
// Each process started as worker K (each incarnation) counts its pushes to
// every shard (ps_push_count_t: sent, acknowledged) in its own file
// DIR/worker-K.pushes.N, N the first number not taken (0, 1, ...), mapped so
// that the counts survive the process being killed, with the run's id. Opens
// the next one for n_shards shards, its counts zero; *incarnation gets N.
// Returns 0, or -1 with err.
struct counter_file;
struct ps_push_count;
int dist_push_ledger_open(const char *dir, uint64_t run_id, size_t worker, size_t n_shards, struct counter_file *f,
                          size_t *incarnation, char *err, size_t err_len);
// The pushes counted in f (n_shards entries): a view into its mapping.
struct ps_push_count *dist_push_ledger_counts(const struct counter_file *f);
// Sums the counts of every incarnation of worker K in run run_id (ledgers of
// other runs in DIR are passed over) into sums[0..n_shards); *incarnations
// gets how many there were. Returns 0, or -1 with err (none found, or one
// unreadable).
int dist_push_ledger_sum(const char *dir, uint64_t run_id, size_t worker, size_t n_shards, struct ps_push_count *sums,
                         size_t *incarnations, char *err, size_t err_len);
// The run's check, from the shards' result records server-S.result (run_record.h; server 0's names the run)
// and the workers' push ledgers of that run: for every worker K and shard S, the pushes K was
// acknowledged for, over all its incarnations, are at most the pushes S
// applied from K over the whole run plus those it applied and then lost with
// a restart from a checkpoint, which are at most the pushes K sent it (the
// difference: pushes whose acknowledgement K never received, e.g. in flight
// when it was killed). Returns 0 when it holds, 1 with why naming the worker,
// the shard and the counts when it does not, -1 with why when a file is
// missing or unreadable.
int dist_check_pushes_applied_once(const char *dir, size_t servers, size_t workers, char *why, size_t why_len);

// The memory this machine has available for a new allocation, in bytes
// (MemAvailable; 0 if unknown).
uint64_t dist_memory_available(void);

// Whether this machine's available memory holds a model of `params`
// parameters trained by `threads` threads; refused, with the bytes it needs,
// before anything is allocated. Returns 0, or -1 with err filled.
int dist_model_fits(size_t params, size_t threads, char *err, size_t err_len);

#endif
