// The distributed flags of a run (dist.h): defaults, the table, the checks across them, scaling.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/partition.h"
#include "kernels/optimizer_kind.h"
#include "engine/run/dist.h"
#include "engine/replica/collective.h"
#include "engine/replica/collective_mpi.h"
#include "engine/replica/global_eval.h"
#include "engine/core/json_writer.h"
#include "engine/core/test_hooks.h"
#include "engine/run/model_file.h"
#include "engine/run/run_record.h"
#include "engine/run/servers_watch.h"
#include "engine/run/worker_live.h"
#include "engine/replica/replica.h"
#include "engine/replica/worker_checkpoint.h"
#include "engine/core/run_report.h"
#include "net/ps_client.h"
#include "net/curve_auth.h"
#include "kernels/foundation/trace.h"
#include "net/ps_server.h"
#include "net/ps_replica.h"
#include "net/rendezvous.h"
#include "net/stop_signal.h"
#include "net/ring.h"
#include "net/wire.h"
#include "staleness/delay.h"
#include "staleness/histogram.h"

#define ERR_LEN 512

static const char sync_choices[] = SYNC_MODE_CHOICES;

void dist_args_defaults(dist_args_t *d) {
    memset(d, 0, sizeof *d);
    d->servers = 1;
    d->workers = 2;
    d->sync = SYNC_MODE_ASP;
    d->staleness = 4;
    d->push_every = 1;
    d->fetch_every = 1;
    d->server_lr = NAN;
    d->bind_host = "127.0.0.1";
    d->timeout_ms = 60000;
    d->heartbeat_ms = 1000;
    d->worker_timeout_ms = 10000;
    d->server_replicas = 1;
    d->retry_ms = 1000;
    d->compress = "none";
    d->worker_eval = 1;
    d->eval_snapshot_mb = 1024;
}

const char dist_curve_columns[] =
    "wall_s,epoch,samples,updates,samples_per_s,lr,train_loss,test_loss,test_accuracy,test_rmse,"
    "staleness_versions_mean,staleness_versions_max,staleness_clocks_mean,staleness_clocks_max,wait_s";

double dist_wait_for_bound(double wait_s, double held_s, size_t threads) {
    double bound = (double)threads * held_s;
    return bound < wait_s ? bound : wait_s;
}

int dist_global_on_servers(int sync) { return sync == SYNC_MODE_ASP || sync == SYNC_MODE_SSP || sync == SYNC_MODE_BSP; }

size_t dist_slots(const dist_args_t *d) { return d->max_workers > d->workers ? d->max_workers : d->workers; }

int dist_uses_ring(int sync) {
    return sync == SYNC_MODE_ALLREDUCE || sync == SYNC_MODE_HYBRID || sync == SYNC_MODE_LOCAL;
}

int dist_without_servers(int sync) { return sync == SYNC_MODE_ALLREDUCE || sync == SYNC_MODE_LOCAL; }

size_t dist_args_flags(dist_args_t *d, flag_spec_t *specs) {
    const flag_spec_t table[] = {
        {"servers", FLAG_TYPE_SIZE, &d->servers, "M", "parameter-server shards (0 with --sync allreduce and local)", 0,
         1024, NULL, 0},
        {"workers", FLAG_TYPE_SIZE, &d->workers, "N", "worker replicas", 1, 4096, NULL, 0},
        {"max-workers", FLAG_TYPE_SIZE, &d->max_workers, "M",
         "asp, ssp, bsp: room for M workers; ids from --workers to M - 1 may join the running run (asgd worker --join; "
         "--workers when not given)",
         1, 4096, NULL, 0},
        {"server-replicas", FLAG_TYPE_SIZE, &d->server_replicas, "R",
         "asp, ssp, bsp, hybrid: each shard runs as a primary and R - 1 backups that apply every push before it is "
         "acknowledged; a backup takes over when the primary dies (docs/reliability.md; at most 4)",
         1, PS_REPLICA_MAX, NULL, 0},
        {"sync", FLAG_TYPE_CHOICE, &d->sync, "MODE", "consistency model", 0, 0, sync_choices, 0},
        {"staleness", FLAG_TYPE_SIZE, &d->staleness, "S",
         "ssp: how many push rounds a worker may run ahead of the slowest", 0, 1e9, NULL, 0},
        {"push-every", FLAG_TYPE_SIZE, &d->push_every, "N",
         "asp/ssp: push accumulated updates every N steps of a replica (asp with neither period given: "
         "exchanges as often as a quarter of the communication thread's time allows)",
         1, 1e9, NULL, 0},
        {"fetch-every", FLAG_TYPE_SIZE, &d->fetch_every, "N",
         "asp/ssp: pull fresh parameters every N steps of a replica", 1, 1e9, NULL, 0},
        {"server-optimizer", FLAG_TYPE_CHOICE, &d->server_optimizer, "OPT", "update rule on the servers", 0, 0,
         OPTIMIZER_KIND_CHOICES, 0},
        {"server-lr", FLAG_TYPE_DOUBLE, &d->server_lr, "RATE", "servers' step size (--lr when not given)", 1e-12, 1e6,
         NULL, 0},
        {"hot-params", FLAG_TYPE_CHOICE, &d->hot_params, HOT_PARAMS_CHOICES,
         "asp/ssp, a sparse model's dense part (its bias, its dense layers): sum (the servers add every worker's "
         "change, Downpour as published) or average (each worker's change over the workers); auto: average when "
         "the servers step by sgd at --lr",
         0, 0, HOT_PARAMS_CHOICES, 0},
        {"server-staleness-aware", FLAG_TYPE_BOOL, &d->server_staleness_aware, NULL,
         "asp/ssp: servers divide the step by each update's staleness in versions", 0, 0, NULL, 0},
        {"server-dc-asgd", FLAG_TYPE_DOUBLE, &d->server_dc_lambda, "LAMBDA",
         "asp/ssp: servers compensate stale updates (DC-ASGD) with this lambda", 0, 1e6, NULL, 0},
        {"server-delay-adaptive", FLAG_TYPE_SIZE, &d->server_delay_adaptive, "TAU_C",
         "asp/ssp: servers take the full step for an update at most TAU_C versions stale, step * TAU_C / staleness "
         "above it (Koloskova et al. 2022)",
         1, 1e9, NULL, 0},
        {"delay-worker", FLAG_TYPE_STRING, &d->delay_worker, "ID:DELAY",
         "make worker ID sleep after every step (asp/ssp: each thread's step of --batch examples; bsp/allreduce: each "
         "round) — a straggler; DELAY is MS, uniform:A,B or exp:MEAN (ms, drawn per step from a stream seeded by "
         "--seed, worker and thread); comma-separated list",
         0, 0, NULL, 0},
        {"coordinator", FLAG_TYPE_STRING, &d->coordinator, "HOST:PORT",
         "where the processes meet (under srun: the first node, port 29517)", 0, 0, NULL, 0},
        {"run-id", FLAG_TYPE_U64, &d->run_id, "ID", "run id on the wire (0: derived from the coordinator)", 0, 0, NULL,
         0},
        {"run-dir", FLAG_TYPE_STRING, &d->run_dir, "DIR", "write this process's CSV and JSON files into DIR", 0, 0,
         NULL, 0},
        {"bind-host", FLAG_TYPE_STRING, &d->bind_host, "HOST", "address servers and rings listen on", 0, 0, NULL, 0},
        {"curve-server-key", FLAG_TYPE_STRING, &d->curve_server_key, "FILE",
         "encrypt and authenticate every connection with CURVE: the run's server key from asgd keygen (FILE.key where "
         "this process listens, FILE.pub elsewhere)",
         0, 0, NULL, 0},
        {"curve-key", FLAG_TYPE_STRING, &d->curve_key, "FILE",
         "this process's own key pair (asgd keygen's FILE.key) for connecting (the server key pair when not given)", 0,
         0, NULL, 0},
        {"curve-allow", FLAG_TYPE_STRING, &d->curve_allow, "FILE",
         "public keys that may connect to this process's sockets, one per line (e.g. the workers' .pub files "
         "concatenated)",
         0, 0, NULL, 0},
        {"insecure", FLAG_TYPE_BOOL, &d->insecure, NULL,
         "let servers, coordinator and rings listen beyond 127.0.0.1 without CURVE (anyone who reaches them can read "
         "and alter the run)",
         0, 0, NULL, 0},
        {"ring-ipc", FLAG_TYPE_BOOL, &d->ring_ipc, NULL,
         "allreduce over ipc:// sockets (all workers on one machine; asgd launch's default there)", 0, 0, NULL, 0},
        {"ps-transport", FLAG_TYPE_CHOICE, &d->ps_transport, "auto|tcp|shm",
         "asp, ssp, bsp, hybrid: how pushes and pulls carry their values between workers and servers: shm (large "
         "payloads through shared memory, the sockets carrying references; every process on one machine) or tcp "
         "(inside the messages); auto: shm under asgd launch, tcp for a server or worker started by hand",
         0, 0, "auto|tcp|shm", 0},
        {"collective", FLAG_TYPE_CHOICE, &d->collective, "auto|shm|ring|mpi|hier|stream",
         "allreduce, local, hybrid: sum through shared memory (every worker on this host), the ZeroMQ ring, hier "
         "(shared memory within each host, rings across hosts; hosts told apart by host name or ASGD_HOST_ID) or "
         "stream (a ring over plain TCP connections, without ZeroMQ's I/O thread or CURVE); auto: shared memory when "
         "the workers are all on one host, hier when several hosts have the same number (> 1) of workers each, else "
         "stream (the ZeroMQ ring under CURVE); compressed exchanges go round the ZeroMQ ring; mpi (allreduce, local; "
         "under mpirun, one rank per worker): MPI_Allreduce",
         0, 0, "auto|shm|ring|mpi|hier|stream", 0},
        {"timeout-ms", FLAG_TYPE_SIZE, &d->timeout_ms, "MS", "longest wait for a peer before giving up", 100, 1e9, NULL,
         0},
        {"heartbeat-ms", FLAG_TYPE_SIZE, &d->heartbeat_ms, "MS",
         "workers' heartbeats to the servers (and ZMTP's), 0 = off", 0, 1e6, NULL, 0},
        {"worker-timeout", FLAG_TYPE_SIZE, &d->worker_timeout_ms, "MS",
         "servers evict a worker silent this long, so ssp/bsp stop waiting for it; 0 = never", 0, 1e9, NULL, 0},
        {"server-memory-allowance", FLAG_TYPE_SIZE, &d->server_memory_mib, "MIB",
         "a server shuts every connection down (its workers reconnect and resend) once its process has grown this much "
         "past its size at start: what a peer that never ends a message can make it hold; 0 = automatic, 256 MiB plus "
         "8 pushes per worker",
         0, 1e9, NULL, 0},
        {"retry-ms", FLAG_TYPE_SIZE, &d->retry_ms, "MS",
         "workers resend a request unanswered this long, backing off to 8x", 10, 1e7, NULL, 0},
        {"compress", FLAG_TYPE_STRING, &d->compress, "METHOD",
         "compress gradients sent (pushes, allreduce; pulls stay float32): none, fp16, qsgd:BITS, topk:FRACTION or "
         "randk:FRACTION (docs/compression.md)",
         0, 0, NULL, 0},
        {"error-feedback", FLAG_TYPE_CHOICE, &d->error_feedback, "on|off",
         "add what compression left out to the next exchange", 0, 0, "off|on", 0},
        {"hybrid-sparse", FLAG_TYPE_CHOICE, &d->hybrid_sparse, "MODE",
         "--sync hybrid: the sparse parameters through the servers under asp, or ssp with --staleness", 0, 0, "asp|ssp",
         0},
        {"scaling", FLAG_TYPE_CHOICE, &d->scaling, "MODE",
         "weak: --batch is each worker's (the total grows with --workers); strong: --batch is the total, each worker "
         "takes --batch / workers",
         0, 0, "weak|strong", 0},
        {"worker-eval", FLAG_TYPE_CHOICE, &d->worker_eval, "on|off",
         "workers also evaluate their own local copies at every evaluation point, pausing their training "
         "(worker-K.csv); off: at start and end only (the global model is evaluated either way)",
         0, 0, "off|on", 0},
        {"eval-snapshot-mb", FLAG_TYPE_SIZE, &d->eval_snapshot_mb, "MIB",
         "the global model is evaluated off the clock: its snapshots at the evaluation points are kept and evaluated "
         "after training, in up to this much memory; evaluations past it run during training and are counted so in "
         "summary.json",
         0, 1e7, NULL, 0},
        {"backup-workers", FLAG_TYPE_SIZE, &d->backup_workers, "B",
         "--sync bsp: apply each round once the first workers - B gradients are in, dropping the late ones (Chen et "
         "al. 2016)",
         0, 4095, NULL, 0},
        {"local-steps", FLAG_TYPE_SIZE, &d->local_steps, "H",
         "--sync local: each worker takes H steps alone, then the workers average their models by ring allreduce "
         "(local SGD)",
         1, 1e9, NULL, 0},
        {"lr-scaling", FLAG_TYPE_CHOICE, &d->lr_scaling, "RULE",
         "multiply --lr and --server-lr by the workers (linear) or its square root (sqrt); with --warmup for large "
         "batches",
         0, 0, "none|linear|sqrt", 0},
    };
    _Static_assert(sizeof table / sizeof table[0] == DIST_N_FLAGS, "DIST_N_FLAGS is the table's length");
    memcpy(specs, table, sizeof table);
    return DIST_N_FLAGS;
}

static int has_split(const model_descriptor_t *m) { return m->split; }
static int on_dense_data(const model_descriptor_t *m) { return m->data == DATA_KIND_DENSE; }

// Flags given that a distributed run does not take. Returns 0, or 2 with the usage error in err.
static int finish_given(dist_args_t *d, const train_args_t *t, const flag_spec_t *specs, size_t n_specs,
                        const char *command, char *err, size_t err_len) {
    const flag_spec_t *servers = flags_find(specs, n_specs, "servers"),
                      *staleness = flags_find(specs, n_specs, "staleness");
    if (t->summary) {
        snprintf(err, err_len,
                 "%s: --summary: a distributed run writes summary.json into --run-dir (asgd launch) and "
                 "each process's JSON on stdout; drop --summary",
                 command);
        return 2;
    }
    if (dist_without_servers(d->sync) && servers && servers->seen && d->servers > 0) {
        snprintf(err, err_len, "%s: --servers %zu: --sync %s runs without parameter servers; drop --servers", command,
                 d->servers, sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if (staleness && staleness->seen && d->sync != SYNC_MODE_SSP &&
        !(d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse)) {
        snprintf(err, err_len,
                 "%s: --staleness: bounds --sync ssp (and hybrid with --hybrid-sparse ssp); --sync %s has "
                 "no such bound; drop --staleness",
                 command,
                 d->sync == SYNC_MODE_HYBRID ? "hybrid --hybrid-sparse asp" : sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    return 0;
}

// asp with neither --push-every nor --fetch-every paces its exchanges; a
// period given is honoured as asked (docs/distributed.md, "Periods by default").
static void finish_periods(dist_args_t *d, const flag_spec_t *specs, size_t n_specs) {
    const flag_spec_t *push = flags_find(specs, n_specs, "push-every"),
                      *fetch = flags_find(specs, n_specs, "fetch-every");
    int asked = (push && push->seen) || (fetch && fetch->seen);
    d->comm_share = d->sync == SYNC_MODE_ASP && !asked ? DIST_DEFAULT_COMM_SHARE : 0.0;
}

// CURVE and where the sockets listen. Returns 0, or 2 with the usage error in err.
static int finish_security(dist_args_t *d, const char *command, char *err, size_t err_len) {
    if ((d->curve_key || d->curve_allow) && !d->curve_server_key) {
        snprintf(err, err_len,
                 "%s: --curve-key/--curve-allow: CURVE is turned on by --curve-server-key FILE (the run's server key)",
                 command);
        return 2;
    }
    if (d->curve_server_key && d->insecure) {
        snprintf(err, err_len, "%s: --insecure and --curve-server-key: CURVE secures the run; drop --insecure",
                 command);
        return 2;
    }
    char bind_ep[300];
    snprintf(bind_ep, sizeof bind_ep, "tcp://%s:0", d->bind_host);
    if (!net_endpoint_is_local(bind_ep) && !d->curve_server_key && !d->insecure) {
        snprintf(err, err_len,
                 "%s: --bind-host %s: listening beyond this machine needs CURVE (--curve-server-key, --curve-key, "
                 "--curve-allow; keys from asgd keygen, see docs/security.md) or, on a network you trust, --insecure",
                 command, d->bind_host);
        return 2;
    }
    return 0;
}

// The servers, the workers, the periods of the exchange and who may join. Returns 0, or 2 with the usage error in err.
static int finish_membership(dist_args_t *d, const char *command, char *err, size_t err_len) {
    if (dist_without_servers(d->sync)) {
        d->servers = 0;
    } else if (d->servers == 0) {
        snprintf(err, err_len, "%s: --servers: --sync %s needs at least one parameter-server shard", command,
                 sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if (d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP) {
        if ((d->push_every != 1 || d->fetch_every != 1)) {
            snprintf(err, err_len,
                     "%s: --push-every/--fetch-every apply to asp and ssp; bsp, allreduce and hybrid exchange "
                     "every round, local every --local-steps",
                     command);
            return 2;
        }
    }
    if (d->backup_workers > 0 && (d->sync != SYNC_MODE_BSP || d->backup_workers >= d->workers)) {
        snprintf(err, err_len, "%s: --backup-workers %zu: applies to --sync bsp, and must be below --workers (%zu)",
                 command, d->backup_workers, d->workers);
        return 2;
    }
    if (d->max_workers == 0) d->max_workers = d->workers;
    if (d->max_workers < d->workers) {
        snprintf(err, err_len, "%s: --max-workers %zu: below --workers %zu", command, d->max_workers, d->workers);
        return 2;
    }
    if (dist_slots(d) > d->workers && (dist_uses_ring(d->sync) || d->backup_workers > 0)) {
        snprintf(err, err_len,
                 "%s: --max-workers %zu: workers join asp, ssp and bsp runs (without --backup-workers); "
                 "--sync %s%s has a fixed membership",
                 command, d->max_workers, sync_mode_name((sync_mode_t)d->sync),
                 d->backup_workers > 0 ? " --backup-workers" : "");
        return 2;
    }
    if ((d->sync == SYNC_MODE_LOCAL) != (d->local_steps > 0)) {
        snprintf(err, err_len, "%s: %s", command,
                 d->local_steps > 0 ? "--local-steps applies to --sync local"
                                    : "--sync local needs --local-steps H (the steps between model averages)");
        return 2;
    }
    return 0;
}

// What the sync mode asks of the model and the optimizer. Returns 0, or 2 with the usage error in err.
static int finish_mode(dist_args_t *d, const train_args_t *t, const char *command, char *err, size_t err_len) {
    if (d->sync == SYNC_MODE_LOCAL && (t->opt.kind != OPTIMIZER_KIND_SGD || t->opt.momentum > 0)) {
        snprintf(err, err_len,
                 "%s: --sync local: the workers step with plain SGD (no --momentum, --optimizer sgd); their "
                 "models are averaged, not their optimizer states",
                 command);
        return 2;
    }
    if (d->sync == SYNC_MODE_LOCAL && strcmp(d->compress, "none") != 0) {
        snprintf(err, err_len, "%s: --compress: --sync local averages models, sent as float32", command);
        return 2;
    }
    if (d->sync == SYNC_MODE_HYBRID && !train_args_model(t)->split) {
        char split[200];
        model_registry_names(split, sizeof split, ", ", has_split);
        snprintf(err, err_len,
                 "%s: --sync hybrid needs a model with a sparse and a dense part (--model %s); %s has no "
                 "such split (use asp/ssp/bsp or allreduce)",
                 command, split, train_args_model(t)->name);
        return 2;
    }
    if (d->sync == SYNC_MODE_BSP && t->schedule != LR_SCHEDULE_CONSTANT) {
        snprintf(err, err_len,
                 "%s: --lr-schedule: under bsp the servers apply the update with a constant step (--server-lr)",
                 command);
        return 2;
    }
    if (dist_uses_ring(d->sync) && (t->time_limit > 0 || t->stop_at_target)) {
        snprintf(err, err_len,
                 "%s: --time-limit/--stop-at-target: %s replicas must run the same rounds; "
                 "stop them by --epochs",
                 command, sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    return 0;
}

// The servers' update rules, their replicas and their eviction of silent workers. Returns 0, or 2 with the usage error in err.
static int finish_servers(dist_args_t *d, const train_args_t *t, const char *command, char *err, size_t err_len) {
    if ((d->server_staleness_aware || d->server_dc_lambda > 0 || d->server_delay_adaptive) &&
        d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP) {
        snprintf(err, err_len,
                 "%s: --server-staleness-aware/--server-dc-asgd/--server-delay-adaptive: only asp and ssp "
                 "updates are stale",
                 command);
        return 2;
    }
    if (d->server_delay_adaptive && d->server_staleness_aware) {
        snprintf(err, err_len, "%s: --server-delay-adaptive replaces --server-staleness-aware; give one of the two",
                 command);
        return 2;
    }
    if (d->server_replicas > 1 && dist_without_servers(d->sync)) {
        snprintf(err, err_len, "%s: --server-replicas %zu: --sync %s runs without parameter servers; drop the flag",
                 command, d->server_replicas, sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if (d->server_replicas > 1 && (t->checkpoint_every > 0 || d->server_dc_lambda > 0)) {
        snprintf(err, err_len, "%s: --server-replicas %zu: %s; drop one of the two", command, d->server_replicas,
                 t->checkpoint_every > 0 ? "the backups replace --checkpoint-every (a replica restarts from a live one)"
                                         : "--server-dc-asgd compensates with what each worker last pulled, which only "
                                           "the primary sees, so the replicas would differ");
        return 2;
    }
    if ((d->replica > 0 || d->replica_backup) && d->server_replicas < 2) {
        snprintf(err, err_len, "%s: --replica/--replica-backup: need --server-replicas 2 or more", command);
        return 2;
    }
    if (d->server_replicas > 1 && d->replica >= d->server_replicas) {
        snprintf(err, err_len, "%s: --replica %zu: --server-replicas %zu numbers the replicas 0 to %zu", command,
                 d->replica, d->server_replicas, d->server_replicas - 1);
        return 2;
    }
    if (d->worker_timeout_ms > 0 && !dist_without_servers(d->sync) &&
        (d->heartbeat_ms == 0 || d->worker_timeout_ms < 3 * d->heartbeat_ms)) {
        snprintf(err, err_len,
                 "%s: --worker-timeout %zu: needs heartbeats at least 3 times as often (--heartbeat-ms %zu), "
                 "or a busy worker is taken for a dead one; --worker-timeout 0 turns eviction off",
                 command, d->worker_timeout_ms, d->heartbeat_ms);
        return 2;
    }
    return 0;
}

// What goes over the wire: compression, the collective, error feedback. Returns 0, or 2 with the usage error in err.
static int finish_exchange(dist_args_t *d, const train_args_t *t, const char *command, char *err, size_t err_len) {
    char cerr[ERR_LEN];
    if (compress_spec_parse(d->compress, &d->compress_spec, cerr, sizeof cerr) != 0) {
        snprintf(err, err_len, "%s: %s", command, cerr);
        return 2;
    }
    if (d->ps_transport != PS_TRANSPORT_AUTO && dist_without_servers(d->sync)) {
        snprintf(err, err_len, "%s: --ps-transport %s: applies to --sync asp, ssp, bsp and hybrid (modes with servers)",
                 command, dist_ps_transport_name(d->ps_transport));
        return 2;
    }
    if (d->collective == COLLECTIVE_MPI && !dist_without_servers(d->sync)) {
        snprintf(err, err_len, "%s: --collective mpi: applies to --sync allreduce and local (every rank a worker)",
                 command);
        return 2;
    }
    if (d->collective != COLLECTIVE_AUTO && !dist_uses_ring(d->sync)) {
        snprintf(err, err_len, "%s: --collective %s: applies to --sync allreduce, local and hybrid", command,
                 collective_name((collective_choice_t)d->collective));
        return 2;
    }
    if ((d->collective == COLLECTIVE_SHM || d->collective == COLLECTIVE_MPI || d->collective == COLLECTIVE_HIER ||
         d->collective == COLLECTIVE_STREAM) &&
        d->compress_spec.kind != COMPRESS_KIND_NONE) {
        snprintf(err, err_len,
                 "%s: --collective %s: compressed exchanges (--compress %s) go round the ring; use "
                 "--collective ring or auto",
                 command, collective_name((collective_choice_t)d->collective), d->compress);
        return 2;
    }
    if (d->collective == COLLECTIVE_MPI && collective_mpi_usable(cerr, sizeof cerr) != 0) {
        snprintf(err, err_len, "%s: %s", command, cerr);
        return 2;
    }
    if (d->error_feedback && !compress_is_lossy(&d->compress_spec)) {
        snprintf(err, err_len, "%s: --error-feedback on: nothing to feed back without a lossy --compress", command);
        return 2;
    }
    if (d->error_feedback && (d->sync == SYNC_MODE_ALLREDUCE || d->sync == SYNC_MODE_HYBRID) &&
        d->compress_spec.kind == COMPRESS_KIND_FP16) {
        snprintf(err, err_len,
                 "%s: --error-feedback on: under allreduce fp16 rounds the ring's partial sums, which no worker "
                 "owns; feedback applies to qsgd, topk and randk there",
                 command);
        return 2;
    }
    // Models on sparse data or ratings push sparse gradients.
    int sparse_model = train_args_data_kind(t) != DATA_KIND_DENSE;
    if (compress_is_lossy(&d->compress_spec) && sparse_model && d->sync != SYNC_MODE_ALLREDUCE &&
        d->sync != SYNC_MODE_HYBRID) {
        char dense[200];
        model_registry_names(dense, sizeof dense, ", ", on_dense_data);
        snprintf(err, err_len,
                 "%s: --compress %s: %s pushes are already (index, value) pairs of the touched parameters; "
                 "compression applies to dense models (%s) and to --sync allreduce",
                 command, d->compress, train_args_model(t)->name, dense);
        return 2;
    }
    return 0;
}

// Values that follow from others: --server-lr, the parsed --delay-worker. Returns 0, or 2 with the usage error in err.
static int finish_fill(dist_args_t *d, const train_args_t *t, const char *command, char *err, size_t err_len) {
    // Auto averages the hot parameters only where the servers would sum them
    // at the workers' own step: a --server-lr or rule of the user's own
    // already says how pushes combine.
    if (d->hot_params == HOT_PARAMS_AUTO)
        d->hot_params =
            isnan(d->server_lr) && d->server_optimizer == OPTIMIZER_KIND_SGD ? HOT_PARAMS_AVERAGE : HOT_PARAMS_SUM;
    if (isnan(d->server_lr)) d->server_lr = t->lr;
    if (d->delay_worker) {
        step_delay_t *ms = calloc(dist_slots(d), sizeof *ms);
        char why[ERR_LEN] = "--delay-worker: out of memory";
        int rc = ms ? delay_spec_parse(d->delay_worker, dist_slots(d), ms, why, sizeof why) : -1;
        free(ms);
        if (rc != 0) {
            snprintf(err, err_len, "%s: %s", command, why);
            return 2;
        }
    }
    return 0;
}

int dist_args_finish(dist_args_t *d, const train_args_t *t, const flag_spec_t *specs, size_t n_specs,
                     const char *command, char *err, size_t err_len) {
    int usage = finish_given(d, t, specs, n_specs, command, err, err_len);
    finish_periods(d, specs, n_specs);
    if (usage == 0) usage = finish_security(d, command, err, err_len);
    if (usage == 0) usage = finish_membership(d, command, err, err_len);
    if (usage == 0) usage = finish_mode(d, t, command, err, err_len);
    if (usage == 0) usage = finish_servers(d, t, command, err, err_len);
    if (usage == 0) usage = finish_exchange(d, t, command, err, err_len);
    if (usage == 0) usage = finish_fill(d, t, command, err, err_len);
    return usage;
}

const char *dist_hot_params_name(int hot_params) {
    return hot_params == HOT_PARAMS_AVERAGE ? "average" : hot_params == HOT_PARAMS_SUM ? "sum" : "auto";
}

const char *dist_ps_transport_name(int ps_transport) {
    return ps_transport == PS_TRANSPORT_SHM ? "shm" : ps_transport == PS_TRANSPORT_TCP ? "tcp" : "auto";
}

const char *dist_lr_scaling_name(int lr_scaling) {
    return lr_scaling == DIST_LR_SCALING_LINEAR ? "linear" : lr_scaling == DIST_LR_SCALING_SQRT ? "sqrt" : "none";
}

int dist_apply_scaling(dist_args_t *d, train_args_t *t, const char *command, char *err, size_t err_len) {
    if (d->scaling_applied) return 0;
    size_t n = d->workers;
    d->requested_batch = t->batch;
    d->requested_lr = t->lr;
    if (d->scaling == DIST_SCALING_STRONG) {
        if (n == 0 || t->batch % n != 0) {
            snprintf(err, err_len,
                     "%s: --scaling strong: --batch %zu is the total, and it does not split evenly over %zu workers",
                     command, t->batch, n);
            return 2;
        }
        t->batch /= n;
    }
    double factor = d->lr_scaling == DIST_LR_SCALING_LINEAR ? (double)n
                    : d->lr_scaling == DIST_LR_SCALING_SQRT ? sqrt((double)n)
                                                            : 1.0;
    t->lr *= factor;
    t->opt.lr = t->lr;
    d->server_lr *= factor;
    d->scaling_applied = 1;
    return 0;
}
