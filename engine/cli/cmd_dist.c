// One process of a distributed run: a parameter-server shard or a worker
// replica (dist.h), and the `asgd server` / `asgd worker` commands.
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

#include "datasets/storage/checkpoint_file.h"  // defines: ckpt_crc32
#include "datasets/storage/counter_file.h"  // defines: counter_file_create, counter_file_read
#include "kernels/partition.h"  // defines: shard_range
#include "engine/cli/commands.h"
#include "engine/cli/dist.h"
#include "engine/dist/collective.h"      // defines: collective_new, collective_kind, collective_name
#include "engine/dist/collective_mpi.h"  // defines: collective_mpi_usable
#include "engine/dist/global_eval.h"     // defines: global_eval_start, global_eval_rows
#include "engine/core/json_writer.h"     // defines: json_*
#include "engine/core/test_hooks.h"      // defines: test_hook_value, test_hook_name
#include "engine/cli/model_file.h"      // defines: model_file_info_of, model_file_write
#include "engine/cli/run_record.h"      // defines: worker_result_t, server_result_t, run_record_write_*
#include "engine/cli/servers_watch.h"   // defines: servers_watch_start, servers_watch_stop
#include "engine/cli/worker_live.h"     // defines: worker_live_open, worker_live_close
#include "engine/dist/replica.h"         // defines: replica_train
#include "engine/dist/worker_checkpoint.h"  // defines: worker_ckpt_config_t, worker_ckpt_load
#include "engine/core/run_report.h"      // defines: run_report_new
#include "net/ps_client.h"          // defines: ps_push_count_t
#include "net/curve_auth.h"         // defines: net_security_set, curve_key_load, zap_handler_new
#include "kernels/trace.h"           // defines: trace_start, trace_write
#include "net/ps_server.h"          // defines: ps_server_new, ps_server_run
#include "net/ps_replica.h"         // defines: ps_replica_new, ps_replica_lead, ps_replica_join
#include "net/rendezvous.h"         // defines: rdv_join, rdv_server_new
#include "net/stop_signal.h"        // defines: stop_signal_install, stop_signal_received
#include "net/ring.h"               // defines: ring_new, ring_connect, RING_IPC_PATH_MAX
#include "net/wire.h"               // defines: wire_fresh_id
#include "staleness/delay.h"        // defines: delay_spec_parse, step_delay_t, step_delay_active
#include "staleness/histogram.h"    // defines: staleness_hist_*

#define ERR_LEN 512
#define MAX_REJOINS 16  // evictions a worker process survives before it gives up

static const char sync_choices[] = "bsp|ssp|asp|allreduce|hybrid|local";

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

int dist_global_on_servers(int sync) {
    return sync == SYNC_MODE_ASP || sync == SYNC_MODE_SSP || sync == SYNC_MODE_BSP;
}

size_t dist_slots(const dist_args_t *d) { return d->max_workers > d->workers ? d->max_workers : d->workers; }

int dist_uses_ring(int sync) {
    return sync == SYNC_MODE_ALLREDUCE || sync == SYNC_MODE_HYBRID || sync == SYNC_MODE_LOCAL;
}

int dist_without_servers(int sync) { return sync == SYNC_MODE_ALLREDUCE || sync == SYNC_MODE_LOCAL; }

size_t dist_args_flags(dist_args_t *d, flag_spec_t *specs) {
    const flag_spec_t table[DIST_N_FLAGS] = {
        {"servers", FLAG_TYPE_SIZE, &d->servers, "M", "parameter-server shards (0 with --sync allreduce and local)", 0, 1024, NULL, 0},
        {"workers", FLAG_TYPE_SIZE, &d->workers, "N", "worker replicas", 1, 4096, NULL, 0},
        {"max-workers", FLAG_TYPE_SIZE, &d->max_workers, "M", "asp, ssp, bsp: room for M workers; ids from --workers to M - 1 may join the running run (asgd worker --join; --workers when not given)", 1, 4096, NULL, 0},
        {"server-replicas", FLAG_TYPE_SIZE, &d->server_replicas, "R", "asp, ssp, bsp, hybrid: each shard runs as a primary and R - 1 backups that apply every push before it is acknowledged; a backup takes over when the primary dies (docs/reliability.md; at most 4)", 1, PS_REPLICA_MAX, NULL, 0},
        {"sync", FLAG_TYPE_CHOICE, &d->sync, "MODE", "consistency model", 0, 0, sync_choices, 0},
        {"staleness", FLAG_TYPE_SIZE, &d->staleness, "S", "ssp: how many push rounds a worker may run ahead of the slowest", 0, 1e9, NULL, 0},
        {"push-every", FLAG_TYPE_SIZE, &d->push_every, "N", "asp/ssp: push accumulated updates every N steps of a replica", 1, 1e9, NULL, 0},
        {"fetch-every", FLAG_TYPE_SIZE, &d->fetch_every, "N", "asp/ssp: pull fresh parameters every N steps of a replica", 1, 1e9, NULL, 0},
        {"server-optimizer", FLAG_TYPE_CHOICE, &d->server_optimizer, "OPT", "update rule on the servers", 0, 0, "sgd|adagrad", 0},
        {"server-lr", FLAG_TYPE_DOUBLE, &d->server_lr, "RATE", "servers' step size (--lr when not given)", 1e-12, 1e6, NULL, 0},
        {"server-staleness-aware", FLAG_TYPE_BOOL, &d->server_staleness_aware, NULL, "asp/ssp: servers divide the step by each update's staleness in versions", 0, 0, NULL, 0},
        {"server-dc-asgd", FLAG_TYPE_DOUBLE, &d->server_dc_lambda, "LAMBDA", "asp/ssp: servers compensate stale updates (DC-ASGD) with this lambda", 0, 1e6, NULL, 0},
        {"server-delay-adaptive", FLAG_TYPE_SIZE, &d->server_delay_adaptive, "TAU_C", "asp/ssp: servers take the full step for an update at most TAU_C versions stale, step * TAU_C / staleness above it (Koloskova et al. 2022)", 1, 1e9, NULL, 0},
        {"delay-worker", FLAG_TYPE_STRING, &d->delay_worker, "ID:DELAY", "make worker ID sleep after every step (asp/ssp: each thread's step of --batch examples; bsp/allreduce: each round) — a straggler; DELAY is MS, uniform:A,B or exp:MEAN (ms, drawn per step from a stream seeded by --seed, worker and thread); comma-separated list", 0, 0, NULL, 0},
        {"coordinator", FLAG_TYPE_STRING, &d->coordinator, "HOST:PORT", "where the processes meet (under srun: the first node, port 29517)", 0, 0, NULL, 0},
        {"run-id", FLAG_TYPE_U64, &d->run_id, "ID", "run id on the wire (0: derived from the coordinator)", 0, 0, NULL, 0},
        {"run-dir", FLAG_TYPE_STRING, &d->run_dir, "DIR", "write this process's CSV and JSON files into DIR", 0, 0, NULL, 0},
        {"bind-host", FLAG_TYPE_STRING, &d->bind_host, "HOST", "address servers and rings listen on", 0, 0, NULL, 0},
        {"curve-server-key", FLAG_TYPE_STRING, &d->curve_server_key, "FILE", "encrypt and authenticate every connection with CURVE: the run's server key from asgd keygen (FILE.key where this process listens, FILE.pub elsewhere)", 0, 0, NULL, 0},
        {"curve-key", FLAG_TYPE_STRING, &d->curve_key, "FILE", "this process's own key pair (asgd keygen's FILE.key) for connecting (the server key pair when not given)", 0, 0, NULL, 0},
        {"curve-allow", FLAG_TYPE_STRING, &d->curve_allow, "FILE", "public keys that may connect to this process's sockets, one per line (e.g. the workers' .pub files concatenated)", 0, 0, NULL, 0},
        {"insecure", FLAG_TYPE_BOOL, &d->insecure, NULL, "let servers, coordinator and rings listen beyond 127.0.0.1 without CURVE (anyone who reaches them can read and alter the run)", 0, 0, NULL, 0},
        {"ring-ipc", FLAG_TYPE_BOOL, &d->ring_ipc, NULL, "allreduce over ipc:// sockets (all workers on one machine; asgd launch's default there)", 0, 0, NULL, 0},
        {"collective", FLAG_TYPE_CHOICE, &d->collective, "auto|shm|ring|mpi|hier|stream", "allreduce, local, hybrid: sum through shared memory (every worker on this host), the ZeroMQ ring, hier (shared memory within each host, rings across hosts; hosts told apart by host name or ASGD_HOST_ID) or stream (a ring over plain TCP connections, without ZeroMQ's I/O thread or CURVE); auto: shared memory when the workers are all on one host, hier when several hosts have the same number (> 1) of workers each, else stream (the ZeroMQ ring under CURVE); compressed exchanges go round the ZeroMQ ring; mpi (allreduce, local; under mpirun, one rank per worker): MPI_Allreduce", 0, 0, "auto|shm|ring|mpi|hier|stream", 0},
        {"timeout-ms", FLAG_TYPE_SIZE, &d->timeout_ms, "MS", "longest wait for a peer before giving up", 100, 1e9, NULL, 0},
        {"heartbeat-ms", FLAG_TYPE_SIZE, &d->heartbeat_ms, "MS", "workers' heartbeats to the servers (and ZMTP's), 0 = off", 0, 1e6, NULL, 0},
        {"worker-timeout", FLAG_TYPE_SIZE, &d->worker_timeout_ms, "MS", "servers evict a worker silent this long, so ssp/bsp stop waiting for it; 0 = never", 0, 1e9, NULL, 0},
        {"server-memory-allowance", FLAG_TYPE_SIZE, &d->server_memory_mib, "MIB", "a server shuts every connection down (its workers reconnect and resend) once its process has grown this much past its size at start: what a peer that never ends a message can make it hold; 0 = automatic, 256 MiB plus 8 pushes per worker", 0, 1e9, NULL, 0},
        {"retry-ms", FLAG_TYPE_SIZE, &d->retry_ms, "MS", "workers resend a request unanswered this long, backing off to 8x", 10, 1e7, NULL, 0},
        {"compress", FLAG_TYPE_STRING, &d->compress, "METHOD", "compress gradients sent (pushes, allreduce; pulls stay float32): none, fp16, qsgd:BITS, topk:FRACTION or randk:FRACTION (docs/compression.md)", 0, 0, NULL, 0},
        {"error-feedback", FLAG_TYPE_CHOICE, &d->error_feedback, "on|off", "add what compression left out to the next exchange", 0, 0, "off|on", 0},
        {"hybrid-sparse", FLAG_TYPE_CHOICE, &d->hybrid_sparse, "MODE", "--sync hybrid: the sparse parameters through the servers under asp, or ssp with --staleness", 0, 0, "asp|ssp", 0},
        {"scaling", FLAG_TYPE_CHOICE, &d->scaling, "MODE", "weak: --batch is each worker's (the total grows with --workers); strong: --batch is the total, each worker takes --batch / workers", 0, 0, "weak|strong", 0},
        {"worker-eval", FLAG_TYPE_CHOICE, &d->worker_eval, "on|off", "workers also evaluate their own local copies at every evaluation point, pausing their training (worker-K.csv); off: at start and end only (the global model is evaluated either way)", 0, 0, "off|on", 0},
        {"eval-snapshot-mb", FLAG_TYPE_SIZE, &d->eval_snapshot_mb, "MIB", "the global model is evaluated off the clock: its snapshots at the evaluation points are kept and evaluated after training, in up to this much memory; evaluations past it run during training and are counted so in summary.json", 0, 1e7, NULL, 0},
        {"backup-workers", FLAG_TYPE_SIZE, &d->backup_workers, "B", "--sync bsp: apply each round once the first workers - B gradients are in, dropping the late ones (Chen et al. 2016)", 0, 4095, NULL, 0},
        {"local-steps", FLAG_TYPE_SIZE, &d->local_steps, "H", "--sync local: each worker takes H steps alone, then the workers average their models by ring allreduce (local SGD)", 1, 1e9, NULL, 0},
        {"lr-scaling", FLAG_TYPE_CHOICE, &d->lr_scaling, "RULE", "multiply --lr and --server-lr by the workers (linear) or its square root (sqrt); with --warmup for large batches", 0, 0, "none|linear|sqrt", 0},
    };
    memcpy(specs, table, sizeof table);
    return DIST_N_FLAGS;
}

static int has_split(const model_descriptor_t *m) { return m->split; }
static int on_dense_data(const model_descriptor_t *m) { return m->data == DATA_KIND_DENSE; }

int dist_args_finish(dist_args_t *d, const train_args_t *t, const flag_spec_t *specs, size_t n_specs,
                     const char *command, char *err, size_t err_len) {
    const flag_spec_t *servers = flags_find(specs, n_specs, "servers"), *staleness = flags_find(specs, n_specs, "staleness");
    if (t->summary) {
        snprintf(err, err_len, "%s: --summary: a distributed run writes summary.json into --run-dir (asgd launch) and "
                 "each process's JSON on stdout; drop --summary", command);
        return 2;
    }
    if (dist_without_servers(d->sync) && servers && servers->seen && d->servers > 0) {
        snprintf(err, err_len, "%s: --servers %zu: --sync %s runs without parameter servers; drop --servers", command,
                 d->servers, sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if (staleness && staleness->seen && d->sync != SYNC_MODE_SSP && !(d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse)) {
        snprintf(err, err_len, "%s: --staleness: bounds --sync ssp (and hybrid with --hybrid-sparse ssp); --sync %s has "
                 "no such bound; drop --staleness", command,
                 d->sync == SYNC_MODE_HYBRID ? "hybrid --hybrid-sparse asp" : sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if ((d->curve_key || d->curve_allow) && !d->curve_server_key) {
        snprintf(err, err_len, "%s: --curve-key/--curve-allow: CURVE is turned on by --curve-server-key FILE (the run's server key)",
                command);
        return 2;
    }
    if (d->curve_server_key && d->insecure) {
        snprintf(err, err_len, "%s: --insecure and --curve-server-key: CURVE secures the run; drop --insecure", command);
        return 2;
    }
    char bind_ep[300];
    snprintf(bind_ep, sizeof bind_ep, "tcp://%s:0", d->bind_host);
    if (!net_endpoint_is_local(bind_ep) && !d->curve_server_key && !d->insecure) {
        snprintf(err, err_len, "%s: --bind-host %s: listening beyond this machine needs CURVE (--curve-server-key, --curve-key, "
                        "--curve-allow; keys from asgd keygen, see docs/security.md) or, on a network you trust, --insecure",
                command, d->bind_host);
        return 2;
    }
    if (dist_without_servers(d->sync)) {
        d->servers = 0;
    } else if (d->servers == 0) {
        snprintf(err, err_len, "%s: --servers: --sync %s needs at least one parameter-server shard", command,
                sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if (d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP) {
        if ((d->push_every != 1 || d->fetch_every != 1)) {
            snprintf(err, err_len, "%s: --push-every/--fetch-every apply to asp and ssp; bsp, allreduce and hybrid exchange "
                            "every round, local every --local-steps",
                    command);
            return 2;
        }
    }
    if (d->backup_workers > 0 && (d->sync != SYNC_MODE_BSP || d->backup_workers >= d->workers)) {
        snprintf(err, err_len, "%s: --backup-workers %zu: applies to --sync bsp, and must be below --workers (%zu)", command,
                d->backup_workers, d->workers);
        return 2;
    }
    if (d->max_workers == 0) d->max_workers = d->workers;
    if (d->max_workers < d->workers) {
        snprintf(err, err_len, "%s: --max-workers %zu: below --workers %zu", command, d->max_workers, d->workers);
        return 2;
    }
    if (dist_slots(d) > d->workers && (dist_uses_ring(d->sync) || d->backup_workers > 0)) {
        snprintf(err, err_len, "%s: --max-workers %zu: workers join asp, ssp and bsp runs (without --backup-workers); "
                 "--sync %s%s has a fixed membership", command, d->max_workers, sync_mode_name((sync_mode_t)d->sync),
                 d->backup_workers > 0 ? " --backup-workers" : "");
        return 2;
    }
    if ((d->sync == SYNC_MODE_LOCAL) != (d->local_steps > 0)) {
        snprintf(err, err_len, "%s: %s", command,
                d->local_steps > 0 ? "--local-steps applies to --sync local"
                                   : "--sync local needs --local-steps H (the steps between model averages)");
        return 2;
    }
    if (d->sync == SYNC_MODE_LOCAL && (t->opt.kind != OPTIMIZER_KIND_SGD || t->opt.momentum > 0)) {
        snprintf(err, err_len, "%s: --sync local: the workers step with plain SGD (no --momentum, --optimizer sgd); their "
                        "models are averaged, not their optimizer states", command);
        return 2;
    }
    if (d->sync == SYNC_MODE_LOCAL && strcmp(d->compress, "none") != 0) {
        snprintf(err, err_len, "%s: --compress: --sync local averages models, sent as float32", command);
        return 2;
    }
    if (d->sync == SYNC_MODE_HYBRID && !train_args_model(t)->split) {
        char split[200];
        model_registry_names(split, sizeof split, ", ", has_split);
        snprintf(err, err_len, "%s: --sync hybrid needs a model with a sparse and a dense part (--model %s); %s has no "
                        "such split (use asp/ssp/bsp or allreduce)", command, split, train_args_model(t)->name);
        return 2;
    }
    if (d->sync == SYNC_MODE_BSP && t->schedule != LR_SCHEDULE_CONSTANT) {
        snprintf(err, err_len, "%s: --lr-schedule: under bsp the servers apply the update with a constant step (--server-lr)",
                command);
        return 2;
    }
    if (dist_uses_ring(d->sync) && (t->time_limit > 0 || t->stop_at_target)) {
        snprintf(err, err_len, "%s: --time-limit/--stop-at-target: %s replicas must run the same rounds; "
                        "stop them by --epochs", command, sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    if ((d->server_staleness_aware || d->server_dc_lambda > 0 || d->server_delay_adaptive) && d->sync != SYNC_MODE_ASP &&
        d->sync != SYNC_MODE_SSP) {
        snprintf(err, err_len, "%s: --server-staleness-aware/--server-dc-asgd/--server-delay-adaptive: only asp and ssp "
                 "updates are stale", command);
        return 2;
    }
    if (d->server_delay_adaptive && d->server_staleness_aware) {
        snprintf(err, err_len, "%s: --server-delay-adaptive replaces --server-staleness-aware; give one of the two", command);
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
        snprintf(err, err_len, "%s: --worker-timeout %zu: needs heartbeats at least 3 times as often (--heartbeat-ms %zu), "
                        "or a busy worker is taken for a dead one; --worker-timeout 0 turns eviction off",
                command, d->worker_timeout_ms, d->heartbeat_ms);
        return 2;
    }
    char cerr[ERR_LEN];
    if (compress_spec_parse(d->compress, &d->compress_spec, cerr, sizeof cerr) != 0) {
        snprintf(err, err_len, "%s: %s", command, cerr);
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
        snprintf(err, err_len, "%s: --collective %s: compressed exchanges (--compress %s) go round the ring; use "
                 "--collective ring or auto", command, collective_name((collective_choice_t)d->collective), d->compress);
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
        snprintf(err, err_len, "%s: --error-feedback on: under allreduce fp16 rounds the ring's partial sums, which no worker "
                        "owns; feedback applies to qsgd, topk and randk there", command);
        return 2;
    }
    // Models on sparse data or ratings push sparse gradients.
    int sparse_model = train_args_data_kind(t) != DATA_KIND_DENSE;
    if (compress_is_lossy(&d->compress_spec) && sparse_model && d->sync != SYNC_MODE_ALLREDUCE &&
        d->sync != SYNC_MODE_HYBRID) {
        char dense[200];
        model_registry_names(dense, sizeof dense, ", ", on_dense_data);
        snprintf(err, err_len, "%s: --compress %s: %s pushes are already (index, value) pairs of the touched parameters; "
                        "compression applies to dense models (%s) and to --sync allreduce",
                command, d->compress, train_args_model(t)->name, dense);
        return 2;
    }
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
            snprintf(err, err_len, "%s: --scaling strong: --batch %zu is the total, and it does not split evenly over %zu workers",
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

uint64_t dist_default_run_id(const char *coordinator) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const char *p = coordinator; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ? h : 1;
}

// ---- helpers -------------------------------------------------------------------

static int make_dir(const char *dir, const char *flag, char *err, size_t err_len) {
    if (!dir) return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        int last = *p == '\0';
        if (*p == '/' || last) {
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                snprintf(err, err_len, "%s %.300s: cannot create %.300s: %s", flag, dir, path, strerror(errno));
                return -1;
            }
            if (last) break;
            *p = '/';
        }
    }
    return 0;
}

int dist_make_run_dir(const char *dir, char *err, size_t err_len) { return make_dir(dir, "--run-dir", err, err_len); }

int dist_check_writable_dir(const char *dir, const char *flag, char *err, size_t err_len) {
    if (make_dir(dir, flag, err, err_len) != 0) return -1;
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.asgd-write-check.XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(err, err_len, "%s %.300s: cannot write there (%s)", flag, dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

int dist_check_writable_file(const char *path, const char *flag, char *err, size_t err_len) {
    if (!path) return 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s %.300s: is a directory; expected a file to write", flag, path);
        return -1;
    }
    // Created and removed when new, opened without truncating when not: the
    // check leaves the file system as it was.
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), created = fd >= 0;
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "%s %.300s: cannot write there: %s", flag, path, strerror(errno));
        return -1;
    }
    close(fd);
    if (created) unlink(path);
    return 0;
}

// The endpoint others should dial: a wildcard bind is advertised under this host's name.
static void advertise(const char *bound, char *out, size_t out_len) {
    const char *wild = strstr(bound, "0.0.0.0");
    if (!wild) {
        snprintf(out, out_len, "%s", bound);
        return;
    }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(out, out_len, "%.*s%s%s", (int)(wild - bound), bound, host, wild + strlen("0.0.0.0"));
}

void dist_json_staleness(json_writer_t *j, const char *key, const staleness_hist_t *h) {
    json_object(j, key);
    json_uint(j, "updates", h->count);
    json_number(j, "mean", staleness_hist_mean(h));
    json_staleness_quantile(j, "p50", h, 0.5);
    json_staleness_quantile(j, "p99", h, 0.99);
    json_uint(j, "max", h->max);
    json_object_end(j);
}

// ---- the workers' push ledgers ---------------------------------------------------

static const char push_ledger_magic[8] = {'A', 'S', 'G', 'D', 'P', 'U', 'S', 'H'};
#define PUSH_LEDGER_MAX 100000  // incarnations of one worker looked for

static void push_ledger_path(char *out, size_t len, const char *dir, size_t worker, size_t incarnation) {
    snprintf(out, len, "%s/worker-%zu.pushes.%zu", dir, worker, incarnation);
}

// Counter 0 is the run id (a run directory used again holds an earlier run's
// ledgers, which are not this run's); then per shard a ps_push_count_t, two
// counters: sent, acked.
int dist_push_ledger_open(const char *dir, uint64_t run_id, size_t worker, size_t n_shards, counter_file_t *f,
                          size_t *incarnation, char *err, size_t err_len) {
    char path[1100];
    for (size_t n = 0; n < PUSH_LEDGER_MAX; n++) {
        push_ledger_path(path, sizeof path, dir, worker, n);
        if (counter_file_create(f, path, push_ledger_magic, 1 + 2 * n_shards, 1, err, err_len) == 0) {
            f->v[0] = run_id;
            *incarnation = n;
            return 0;
        }
        if (errno != EEXIST) return -1;
    }
    snprintf(err, err_len, "%s: %d incarnations of worker %zu already", dir, PUSH_LEDGER_MAX, worker);
    return -1;
}

ps_push_count_t *dist_push_ledger_counts(const counter_file_t *f) { return (ps_push_count_t *)(f->v + 1); }

int dist_push_ledger_sum(const char *dir, uint64_t run_id, size_t worker, size_t n_shards, ps_push_count_t *sums,
                         size_t *incarnations, char *err, size_t err_len) {
    memset(sums, 0, n_shards * sizeof *sums);
    *incarnations = 0;
    size_t n_counters = 1 + 2 * n_shards, held;
    uint64_t *one = malloc(n_counters * sizeof *one);
    if (!one) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    char path[1100];
    int rc = 0;
    for (size_t n = 0; n < PUSH_LEDGER_MAX; n++) {
        push_ledger_path(path, sizeof path, dir, worker, n);
        if (access(path, F_OK) != 0) break;
        if (counter_file_read(path, push_ledger_magic, n_counters, one, &held, err, err_len) != 0) {
            rc = -1;
            break;
        }
        if (held == 0 || one[0] != run_id) continue;  // never sized, or another run's
        if (held != n_counters) {
            snprintf(err, err_len, "%s: holds %zu counters; this run's ledgers hold %zu", path, held, n_counters);
            rc = -1;
            break;
        }
        for (size_t k = 0; k < n_shards; k++) {
            sums[k].sent += one[1 + 2 * k];
            sums[k].acked += one[2 + 2 * k];
        }
        (*incarnations)++;
    }
    free(one);
    if (rc == 0 && *incarnations == 0) {
        push_ledger_path(path, sizeof path, dir, worker, 0);
        snprintf(err, err_len, "%s: missing (or of another run): worker %zu counted no pushes", path, worker);
        rc = -1;
    }
    return rc;
}

// The run's exactly-once check (dist.h, docs/reliability.md), from the
// shards' result records and the workers' ledgers.
int dist_check_pushes_applied_once(const char *dir, size_t servers, size_t workers, char *why, size_t why_len) {
    ps_push_count_t *acks = calloc(servers ? servers : 1, sizeof *acks);
    server_result_t *shard = calloc(servers ? servers : 1, sizeof *shard);
    char err[1200];
    size_t held = 0;  // records read (freed at the end)
    int rc = acks && shard ? 0 : -1;
    if (rc != 0) snprintf(why, why_len, "out of memory");
    for (size_t s = 0; rc == 0 && s < servers; s++) {
        if (run_record_read_server(dir, s, &shard[s], why, why_len) != 0) {
            rc = -1;
            break;
        }
        held++;
        if (shard[s].workers < workers || shard[s].workers != shard[0].workers) {
            snprintf(why, why_len, "server %zu's result counts %llu workers; the run has %zu", s,
                     (unsigned long long)shard[s].workers, workers);
            rc = -1;
        } else if (!shard[s].lost_known) {
            snprintf(why, why_len, "server %zu was resumed without the ledger beside its checkpoint "
                     "(server-%zu.ckpt.ledger): the pushes its crash lost cannot be counted", s, s);
            rc = -1;
        }
    }
    uint64_t run_id = held ? shard[0].run_id : 0;  // server 0's names the run
    // Slots from `workers` on are joiners' (--max-workers): one nobody took has no ledger and no pushes.
    size_t slots = held ? (size_t)shard[0].workers : workers;
    for (size_t k = 0; rc == 0 && k < slots; k++) {
        size_t incarnations = 0;
        uint64_t applied_k = 0;
        for (size_t s = 0; k >= workers && s < servers; s++) applied_k += shard[s].pushes_total[k] + shard[s].pushes_lost[k];
        if (k >= workers && applied_k == 0 && dist_push_ledger_sum(dir, run_id, k, servers, acks, &incarnations, err, sizeof err) != 0)
            continue;
        if (dist_push_ledger_sum(dir, run_id, k, servers, acks, &incarnations, err, sizeof err) != 0) {
            snprintf(why, why_len, "%s", err);
            rc = -1;
            break;
        }
        for (size_t s = 0; rc == 0 && s < servers; s++) {
            double total = (double)shard[s].pushes_total[k], lost = (double)shard[s].pushes_lost[k];
            double applied = total + lost, acked = (double)acks[s].acked, sent = (double)acks[s].sent;
            if (acked <= applied && applied <= sent) continue;
            snprintf(why, why_len, "worker %zu, shard %zu: %s: its %zu incarnation%s sent %.0f pushes and were "
                     "acknowledged for %.0f; the shard applied %.0f (%.0f of them lost with a restart)", k, s,
                     acked > applied ? "a push was acknowledged but not applied"
                                     : "more pushes were applied than were sent (one applied twice)",
                     incarnations, incarnations == 1 ? "" : "s", sent, acked, applied, lost);
            rc = 1;
        }
    }
    for (size_t s = 0; s < held; s++) server_result_free(&shard[s]);
    free(shard);
    free(acks);
    return rc;
}

// ---- security --------------------------------------------------------------------

void dist_args_from_launcher(dist_args_t *d) {
    const char *id = getenv(DIST_ENV_RUN_ID), *pub = getenv(DIST_ENV_KEY_PUBLIC), *sec = getenv(DIST_ENV_KEY_SECRET);
    if (!d->run_id && id) d->run_id = strtoull(id, NULL, 10);
    if (!d->curve_server_key && !d->insecure && pub && sec) d->run_key_public = pub, d->run_key_secret = sec;
}

// A key file that holds a secret key must be the owner's alone (as ssh asks
// of its private keys): one readable by group or others is refused. Returns
// 0, or -1 with err naming the flag, the file and its mode.
static int secret_key_private(const char *flag, const char *path, const curve_key_t *secret, char *err,
                              size_t err_len) {
    struct stat st;
    if (!secret->z85[0] || stat(path, &st) != 0 || (st.st_mode & 077) == 0) return 0;
    snprintf(err, err_len, "%s %s: holds a secret key but is readable by %s (mode %04o); make it yours alone: "
             "chmod 600 %s", flag, path, st.st_mode & 007 ? "others" : "its group", (unsigned)(st.st_mode & 07777), path);
    return -1;
}

int dist_security_start(const dist_args_t *d, void *zmq_ctx, struct zap_handler **zap, char *err, size_t err_len) {
    *zap = NULL;
    net_security_t sec;
    memset(&sec, 0, sizeof sec);
    sec.insecure = d->insecure;
    curve_key_t *allowed = NULL;
    size_t n_allowed = 0;
    char why[400];
    if (d->curve_server_key) {
        sec.curve = 1;
        if (curve_key_load(d->curve_server_key, &sec.server_public, &sec.server_secret, why, sizeof why) != 0) {
            snprintf(err, err_len, "--curve-server-key: %s", why);
            return -1;
        }
        if (secret_key_private("--curve-server-key", d->curve_server_key, &sec.server_secret, err, err_len) != 0)
            return -1;
        if (d->curve_key) {
            if (curve_key_load(d->curve_key, &sec.client_public, &sec.client_secret, why, sizeof why) != 0) {
                snprintf(err, err_len, "--curve-key: %s", why);
                return -1;
            }
            if (secret_key_private("--curve-key", d->curve_key, &sec.client_secret, err, err_len) != 0) return -1;
            if (!sec.client_secret.z85[0]) {
                snprintf(err, err_len, "--curve-key %s: holds no secret key (give the .key file asgd keygen wrote, not the .pub)",
                         d->curve_key);
                return -1;
            }
        } else if (sec.server_secret.z85[0]) {
            sec.client_public = sec.server_public;  // a server connects (to the coordinator) as itself
            sec.client_secret = sec.server_secret;
        } else {
            snprintf(err, err_len, "--curve-key FILE: a process that only has the server's public key connects with "
                     "its own key pair (make one with asgd keygen --out NAME)");
            return -1;
        }
        if (d->curve_allow) {
            if (curve_allow_load(d->curve_allow, &allowed, &n_allowed, why, sizeof why) != 0) {
                snprintf(err, err_len, "--curve-allow: %s", why);
                return -1;
            }
            // Servers join the coordinator with the server key itself.
            curve_key_t *grown = realloc(allowed, (n_allowed + 1) * sizeof *grown);
            if (!grown) {
                free(allowed);
                snprintf(err, err_len, "--curve-allow: out of memory");
                return -1;
            }
            allowed = grown;
            allowed[n_allowed++] = sec.server_public;
        }
    } else if (d->run_key_secret) {
        // A local launch's own pair: every process of the run holds it, and it alone is admitted.
        sec.curve = 1;
        if (strlen(d->run_key_public) != CURVE_KEY_LEN || strlen(d->run_key_secret) != CURVE_KEY_LEN) {
            snprintf(err, err_len, "the launcher's key pair (%s, %s) is malformed", DIST_ENV_KEY_PUBLIC, DIST_ENV_KEY_SECRET);
            return -1;
        }
        memcpy(sec.server_public.z85, d->run_key_public, CURVE_KEY_LEN + 1);
        memcpy(sec.server_secret.z85, d->run_key_secret, CURVE_KEY_LEN + 1);
        sec.client_public = sec.server_public;
        sec.client_secret = sec.server_secret;
        if (!(allowed = malloc(sizeof *allowed))) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        allowed[n_allowed++] = sec.server_public;
    }
    if (net_security_set(&sec, err, err_len) != 0) {
        free(allowed);
        return -1;
    }
    if (allowed) {
        *zap = zap_handler_new(zmq_ctx, allowed, n_allowed, err, err_len);
        free(allowed);
        if (!*zap) return -1;
    }
    return 0;
}

// ---- server --------------------------------------------------------------------

static void write_server_json(FILE *out, size_t id, uint64_t run_id, const dist_args_t *d, const ps_server_t *s) {
    ps_stats_t st;
    ps_server_stats(s, &st);
    size_t begin, end;
    ps_server_range(s, &begin, &end);
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "role", "server");
    json_uint(&j, "id", id);
    json_uint(&j, "run_id", run_id);  // what the workers' push ledgers are matched by
    json_string(&j, "sync", sync_mode_name((sync_mode_t)d->sync));
    json_uint(&j, "range_begin", begin);
    json_uint(&j, "range_end", end);
    json_uint(&j, "version", st.version);
    json_uint(&j, "pushes_applied", st.pushes_applied);
    json_uint(&j, "pulls_answered", st.pulls_answered);
    json_uint(&j, "pulls_waited", st.pulls_waited);
    json_uint(&j, "bytes_in", st.bytes_in);
    json_uint(&j, "bytes_out", st.bytes_out);
    json_uint(&j, "dropped", st.dropped_total);
    json_uint(&j, "rejected", st.rejected);
    json_uint(&j, "duplicates", st.duplicates);
    json_uint(&j, "evictions", st.evictions);
    json_uint(&j, "stalls", st.stalls);
    json_uint(&j, "rejoins", st.rejoins);
    json_uint(&j, "hellos_resent", st.hellos_resent);
    json_uint(&j, "memory_trips", st.memory_trips);
    json_uint(&j, "connections_dropped", st.connections_dropped);
    json_uint(&j, "rounds_skipped", st.rounds_skipped);
    // Pushes in parts and rounds answered in ranges (docs/protocol.md).
    json_uint(&j, "parts_taken", st.parts_taken);
    json_uint(&j, "parts_skipped", st.parts_skipped);
    json_uint(&j, "parts_out_of_order", st.parts_out_of_order);
    json_uint(&j, "pushes_unfinished", st.pushes_unfinished);
    json_uint(&j, "pulls_in_ranges", st.pulls_in_ranges);
    json_uint(&j, "checkpoints", st.checkpoints);
    json_uint(&j, "checkpoint_failures", st.checkpoint_failures);
    json_bool(&j, "interrupted", stop_signal_received() != 0);
    json_uint(&j, "resumed_version", st.resumed_version);
    json_uint(&j, "min_clock", st.min_clock);
    json_uint(&j, "max_clock", st.max_clock);
    // Since each worker's last (re)join.
    json_uint_by_index(&j, "pushes_by_worker", ps_server_pushes_per_worker(s), dist_slots(d));
    json_uint_by_index(&j, "clocks", ps_server_clocks(s), dist_slots(d));
    // Over the whole run (restored on --resume): what the exactly-once check
    // compares with the workers' acknowledged pushes (docs/reliability.md).
    json_uint_by_index(&j, "pushes_total_by_worker", ps_server_pushes_total_per_worker(s), dist_slots(d));
    json_uint_by_index(&j, "pushes_lost_by_worker", ps_server_lost_per_worker(s), dist_slots(d));
    json_bool(&j, "pushes_lost_known", !st.lost_unknown);
    json_uint_by_index(&j, "duplicates_by_worker", ps_server_duplicates_per_worker(s), dist_slots(d));
    json_uint_by_index(&j, "resumed_pushes_by_worker", ps_server_resumed_pushes_per_worker(s), dist_slots(d));
    if (d->sync == SYNC_MODE_BSP) {
        // Backup workers: gradients that came after their round was applied (among the pushes above).
        json_uint(&j, "backup_workers", d->backup_workers);
        json_uint(&j, "rounds_applied", st.version);
        json_uint_by_index(&j, "late_gradients_dropped", ps_server_late_per_worker(s), dist_slots(d));
    }
    dist_json_staleness(&j, "staleness_clocks", &st.staleness_clocks);
    dist_json_staleness(&j, "staleness_updates", &st.staleness_updates);
    json_end(&j);
    fputc('\n', out);
}

// The shard's result record (run_record.h), for whoever merges the run directory.
static int write_server_record(size_t id, uint64_t run_id, const dist_args_t *d, const ps_server_t *s,
                               const ps_stats_t *st, char *err, size_t err_len) {
    server_result_t r = {.id = id, .run_id = run_id, .lost_known = !st->lost_unknown};
    if (server_result_alloc(&r, dist_slots(d), err, err_len) != 0) return -1;
    size_t bytes = dist_slots(d) * sizeof(uint64_t);
    memcpy(r.pushes_total, ps_server_pushes_total_per_worker(s), bytes);
    memcpy(r.pushes_lost, ps_server_lost_per_worker(s), bytes);
    if (d->sync == SYNC_MODE_BSP) memcpy(r.late_dropped, ps_server_late_per_worker(s), bytes);
    r.staleness_clocks = st->staleness_clocks;
    r.staleness_updates = st->staleness_updates;
    int rc = run_record_write_server(d->run_dir, &r, err, err_len);
    server_result_free(&r);
    return rc;
}

// server-K.json, server-K-staleness.csv, then the record (its presence says the shard is done).
static int write_server_files(size_t id, uint64_t run_id, const dist_args_t *d, const ps_server_t *s, char *err,
                              size_t err_len) {
    if (!d->run_dir) return 0;
    char name[64];
    snprintf(name, sizeof name, "server-%zu.json", id);
    FILE *f = dist_file_open(d->run_dir, name, err, err_len);
    if (!f) return -1;
    write_server_json(f, id, run_id, d, s);
    if (dist_file_close(f, d->run_dir, name, err, err_len) != 0) return -1;
    ps_stats_t st;
    ps_server_stats(s, &st);
    snprintf(name, sizeof name, "server-%zu-staleness.csv", id);
    if (!(f = dist_file_open(d->run_dir, name, err, err_len))) return -1;
    fprintf(f, "staleness,updates_by_clocks,updates_by_versions\n");
    for (size_t v = 0; v < STALENESS_HIST_BINS; v++) {
        uint64_t a = st.staleness_clocks.bins[v], b = st.staleness_updates.bins[v];
        if (a || b) fprintf(f, "%zu,%llu,%llu\n", v, (unsigned long long)a, (unsigned long long)b);
    }
    if (dist_file_close(f, d->run_dir, name, err, err_len) != 0) return -1;
    return write_server_record(id, run_id, d, s, &st, err, err_len);
}

static void csv_value(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.9g", v);
    else fputc(',', f);
}

// One row of the global model's curve (global.csv, global-progress.csv).
static void global_csv_row(FILE *f, const global_eval_row_t *r, const model_t *m) {
    int rmse = model_metric(m) == METRIC_KIND_RMSE;
    double n_train = (double)model_num_train(m);
    {
        fprintf(f, "%.6f,%.6f,%llu,%llu", r->wall_s, (double)r->samples / n_train, (unsigned long long)r->samples,
                (unsigned long long)r->updates);
        csv_value(f, r->wall_s > 0 ? (double)r->samples / r->wall_s : NAN);
        csv_value(f, NAN);  // lr: the servers' rule, in the config
        csv_value(f, NAN);  // train_loss: the workers'
        csv_value(f, r->test_loss);
        csv_value(f, rmse ? NAN : r->test_metric);
        csv_value(f, rmse ? r->test_metric : NAN);
        csv_value(f, r->staleness_versions_mean);
        csv_value(f, r->staleness_versions_max);
        csv_value(f, r->staleness_clocks_mean);
        csv_value(f, r->staleness_clocks_max);
        csv_value(f, r->wait_s);
        csv_value(f, r->eval_s);
        fprintf(f, ",%d", r->during_training);
        fputc('\n', f);
    }
}

// The global model's curve: dist_curve_columns, then each evaluation's own cost
// and whether it was made while the workers trained (1) or after (0).
static int write_global_csv(const char *dir, const global_eval_t *ge, const model_t *m, char *err, size_t err_len) {
    FILE *f = dist_file_open(dir, "global.csv", err, err_len);
    if (!f) return -1;
    fprintf(f, "%s,eval_s,during_training\n", dist_curve_columns);
    size_t n = 0;
    const global_eval_row_t *rows = global_eval_rows(ge, &n);
    for (size_t i = 0; i < n; i++) global_csv_row(f, &rows[i], m);
    return dist_file_close(f, dir, "global.csv", err, err_len);
}

// global-progress.csv: global.csv's rows as they are made, each flushed, for
// whoever shows the run's progress (asgd launch); global.csv stays the record.
typedef struct global_progress {
    FILE *f;
    const model_t *m;
} global_progress_t;

static void global_progress_row(const global_eval_row_t *row, void *ctx) {
    global_progress_t *p = ctx;
    global_csv_row(p->f, row, p->m);
    fflush(p->f);
}

// Shard 0's process evaluates the global model beside serving (asp, ssp, bsp;
// global_eval.h) when the run keeps files. NULL, with err empty, when it does not.
static global_eval_t *start_global_eval(void *ctx, const train_args_t *t, const dist_args_t *d, const model_t *m,
                                        const ps_server_t *s, const rdv_entry_t *table, const char **endpoints,
                                        global_eval_config_t *gc, global_progress_t *gp, uint64_t run_id,
                                        char *err, size_t err_len) {
    if (!d->run_dir || !table || !dist_global_on_servers(d->sync)) return NULL;
    for (size_t k = 0; k < d->servers; k++) endpoints[k] = table[k].endpoint;
    char path[1100];
    snprintf(path, sizeof path, "%s/global-progress.csv", d->run_dir);
    if (!(gp->f = fopen(path, "w"))) {
        snprintf(err, err_len, "%.300s: cannot open for writing: %s", path, strerror(errno));
        return NULL;
    }
    gp->m = m;
    fprintf(gp->f, "%s,eval_s,during_training\n", dist_curve_columns);
    fflush(gp->f);
    *gc = (global_eval_config_t){
        .zmq_ctx = ctx,
        .run_id = run_id,
        .servers = endpoints,
        .n_servers = d->servers,
        .n_params = model_num_params(m),
        .model = m,
        .eval_limit = t->eval_limit,
        .every_samples = t->eval_every ? t->eval_every : model_num_train(m),
        .every_s = t->eval_every_s,
        .shard = s,
        .snapshot_budget_bytes = d->eval_snapshot_mb << 20,
        .timeout_ms = (int)d->timeout_ms,
        .on_row = global_progress_row,
        .on_row_ctx = gp,
    };
    return global_eval_start(gc, err, err_len);
}

// --save-model: parameters [first, first + count) of model m (all of them, or
// a server's shard) as a model file (model_file.h), with the run's split.
static int save_model(const char *path, const model_t *m, const model_file_split_t *split, size_t first, size_t count,
                      const float *values, char *err, size_t err_len) {
    model_file_info_t *info = malloc(sizeof *info);
    int rc = -1;
    if (!info) snprintf(err, err_len, "--save-model %s: out of memory", path);
    else if (model_file_info_of(m, info, err, err_len) == 0) {
        info->first = first;
        info->count = count;
        info->split = *split;
        rc = model_file_write(path, "--save-model", info, values, err, err_len);
    }
    free(info);
    return rc;
}

// The shard's configuration: range `n` parameters of the model (its sparse
// part under hybrid), and its checkpoints (ckpt_path: their file's buffer).
static int server_ps_config(size_t id, uint64_t run_id, const train_args_t *t, const dist_args_t *d, size_t n,
                            ps_config_t *c, char *ckpt_path, size_t ckpt_len, char *err, size_t err_len) {
    int hybrid = d->sync == SYNC_MODE_HYBRID;
    *c = (ps_config_t){
        .run_id = run_id,
        .shard = id,
        .n_shards = d->servers,
        .n_params = n,
        .n_workers = dist_slots(d),
        .n_start_workers = d->workers,
        .mode = hybrid ? (d->hybrid_sparse ? SYNC_MODE_SSP : SYNC_MODE_ASP) : (sync_mode_t)d->sync,
        .staleness = d->staleness,
        .optimizer = (optimizer_kind_t)d->server_optimizer,
        .lr = (float)d->server_lr,
        .adagrad_eps = (float)t->adagrad_eps,
        .heartbeat_ms = (int)d->heartbeat_ms,
        .worker_timeout_ms = (int)d->worker_timeout_ms,
        .memory_allowance = d->server_memory_mib << 20,
        .quiet = 0,
        .stale = {d->server_staleness_aware, d->server_dc_lambda, d->server_delay_adaptive},
        .warmup = t->warmup,
        // ASP/SSP pushes count local steps of --batch examples; BSP's and hybrid's count examples.
        .samples_per_step = d->sync == SYNC_MODE_BSP || hybrid ? 0 : t->batch,
        .backup_workers = d->sync == SYNC_MODE_BSP ? d->backup_workers : 0,
    };
    if (t->checkpoint_every <= 0) return 0;
    const char *ckpt_dir = t->checkpoint_dir ? t->checkpoint_dir : d->run_dir;
    if (!ckpt_dir) {
        snprintf(err, err_len, "--checkpoint-every: needs --checkpoint-dir DIR (or --run-dir) to write to");
        return -1;
    }
    if (dist_check_writable_dir(ckpt_dir, t->checkpoint_dir ? train_args_checkpoint_flag(t) : "--run-dir", err,
                                err_len) != 0)
        return -1;
    snprintf(ckpt_path, ckpt_len, "%s/server-%zu.ckpt", ckpt_dir, id);
    c->checkpoint_path = ckpt_path;
    c->checkpoint_every_s = t->checkpoint_every;
    return 0;
}

// A new shard serving values, or (--resume) a restarted one: it binds the
// endpoint it had, so its workers' connections find it again.
static ps_server_t *server_start(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d,
                                 const ps_config_t *c, const float *values, char *err, size_t err_len) {
    if (!t->resume) {
        char bind[300];
        snprintf(bind, sizeof bind, "tcp://%s:*", d->bind_host);
        return ps_server_new(ctx, c, bind, values, err, err_len);
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/server-%zu.ckpt", t->resume, id);
    ps_server_t *s = ps_server_resume(ctx, c, NULL, path, err, err_len);
    if (!s) return NULL;
    ps_stats_t st;
    ps_server_stats(s, &st);
    fprintf(stderr, "asgd server %zu: resumed from %s at version %llu (%llu pushes applied), serving at %s\n", id,
            path, (unsigned long long)st.version, (unsigned long long)st.pushes_applied, ps_server_endpoint(s));
    return s;
}

// After serving: the evaluator's curve, the shard's values (--save-model) and
// its files. A shard stopped by a signal writes its files, marked
// interrupted, and fails (its values are not final: no --save-model).
static int server_finish(size_t id, uint64_t run_id, const dist_args_t *d, const model_t *m,
                         const model_file_split_t *split, const ps_server_t *s, const global_eval_t *ge, size_t begin,
                         size_t end, char *err, size_t err_len) {
    if (ge && write_global_csv(d->run_dir, ge, m, err, err_len) != 0) return -1;
    if (stop_signal_received()) {
        snprintf(err, err_len, "server %zu: stopped by a signal before every worker had left", id);
        write_server_files(id, run_id, d, s, err + strlen(err), 0);
        return -1;
    }
    // Every worker has left: the shard's values are final (before its files,
    // which tell a launcher the shard is done).
    if (d->save_model && save_model(d->save_model, m, split, begin, end - begin, ps_server_values(s), err, err_len) != 0)
        return -1;
    return write_server_files(id, run_id, d, s, err, err_len);
}

// A resumed shard 0 that evaluates the global model needs every shard's
// endpoint again. Its join, with the endpoint it had, is a retry the
// coordinator answers for as long as it lives (under asgd launch
// --restart-servers it does); one that is gone leaves *table NULL after
// RESUMED_TABLE_MS, and the shard serves without the evaluator.
#define RESUMED_TABLE_MS 1500
static void resumed_table(void *ctx, const train_args_t *t, const dist_args_t *d, const char *coordinator,
                          uint64_t run_id, const rdv_entry_t *me, rdv_entry_t **table) {
    if (!d->run_dir || !dist_global_on_servers(d->sync)) return;
    char why[ERR_LEN];
    if (rdv_join(ctx, coordinator, run_id, me, d->servers + dist_slots(d), table, RESUMED_TABLE_MS, why, sizeof why) == 0)
        return;
    if (!t->quiet)
        fprintf(stderr, "asgd server 0: resumed without the coordinator (%s): no global model curve from here on\n", why);
}

// --server-replicas: this replica's final values, RUN_DIR/server-K-replica-I.values
// (float32, the shard's range), by which the replicas are compared.
static int write_replica_values(size_t id, const dist_args_t *d, const ps_server_t *s, char *err, size_t err_len) {
    char name[96];
    snprintf(name, sizeof name, "server-%zu-replica-%zu.values", id, d->replica);
    FILE *f = dist_file_open(d->run_dir, name, err, err_len);
    if (!f) return -1;
    size_t begin, end;
    ps_server_range(s, &begin, &end);
    fwrite(ps_server_values(s), sizeof(float), end - begin, f);
    return dist_file_close(f, d->run_dir, name, err, err_len);
}

// --server-replicas: the replication of this shard (net/ps_replica.h), or NULL with err when it cannot start.
static ps_replica_t *server_replica(void *ctx, size_t id, uint64_t run_id, const dist_args_t *d,
                                    void (*on_promoted)(void *, ps_server_t *, const char *), void *promoted_ctx,
                                    char *err, size_t err_len) {
    int ack_ms = (int)(d->timeout_ms / 4 > 500 ? d->timeout_ms / 4 : 500);
    ps_replica_config_t rc = {
        .state_dir = d->run_dir, .shard = id, .replica = d->replica, .run_id = run_id, .n_workers = dist_slots(d),
        .ack_timeout_ms = ack_ms, .worker_timeout_ms = (int)d->worker_timeout_ms,
        .join_timeout_ms = (int)d->timeout_ms, .quiet = 0, .on_promoted = on_promoted,
        .on_promoted_ctx = promoted_ctx};
    return ps_replica_new(ctx, &rc, err, err_len);
}

// Shard 0's evaluator of the global model, started again by a backup that
// took over (the primary's died with it): it asks the coordinator for the
// table again under the primary's endpoint, as a resumed shard does.
typedef struct backup_eval {
    void *ctx;
    size_t id;
    uint64_t run_id;
    const train_args_t *t;
    const dist_args_t *d;
    const model_t *m;
    const char *coordinator;
    rdv_entry_t *table;
    const char **endpoints;
    global_eval_config_t gc;
    global_progress_t gp;
    global_eval_t *ge;
} backup_eval_t;

// Shard `id`'s entry in the rendezvous table, at the endpoint it is bound to.
static rdv_entry_t server_entry(size_t id, const char *bound) {
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.rank = (uint32_t)id;
    me.role = DIST_ROLE_SERVER;
    advertise(bound, me.endpoint, sizeof me.endpoint);
    return me;
}

// Serves until the run ends, then stops the global evaluator *ge points to
// (it may have been started meanwhile). Returns 0, or -1 with err.
static int serve_then_stop_eval(size_t id, ps_server_t *s, global_eval_t *const *ge, char *err, size_t err_len) {
    int served = ps_server_run(s, stop_signal_flag(), err, err_len);
    char eval_err[ERR_LEN] = "";
    int evaluated = *ge ? global_eval_stop(*ge, eval_err, sizeof eval_err) : 0;
    if (served != 0) return -1;
    if (evaluated != 0) {
        snprintf(err, err_len, "server %zu: %s", id, eval_err);
        return -1;
    }
    return 0;
}

static void backup_promoted(void *ctx, ps_server_t *s, const char *endpoint) {
    backup_eval_t *b = ctx;
    if (b->id != 0 || !b->endpoints) return;
    rdv_entry_t me = server_entry(0, endpoint);
    resumed_table(b->ctx, b->t, b->d, b->coordinator, b->run_id, &me, &b->table);
    char err[ERR_LEN] = "";
    b->ge = start_global_eval(b->ctx, b->t, b->d, b->m, s, b->table, b->endpoints, &b->gc, &b->gp, b->run_id, err,
                              sizeof err);
    if (!b->ge && err[0]) fprintf(stderr, "asgd server 0: no global model curve from here on: %s\n", err);
}

// A backup replica's life: it copies its primary's state, applies what the
// primary forwards, and takes over when the primary dies. Returns 0 or -1.
static int run_backup(void *ctx, size_t id, uint64_t run_id, const train_args_t *t, const dist_args_t *d,
                      const model_t *m, const model_file_split_t *split, const char *coordinator, ps_config_t *c, const float *values, size_t begin,
                      size_t end, char *err, size_t err_len) {
    backup_eval_t b = {.ctx = ctx, .id = id, .run_id = run_id, .t = t, .d = d, .m = m, .coordinator = coordinator,
                       .endpoints = calloc(d->servers, sizeof(const char *))};
    ps_replica_t *rep = NULL;
    if (!b.endpoints) snprintf(err, err_len, "out of memory");
    else rep = server_replica(ctx, id, run_id, d, backup_promoted, &b, err, err_len);
    ps_server_t *s = NULL;
    int rc = -1;
    char bind[300];
    snprintf(bind, sizeof bind, "tcp://%s:*", d->bind_host);
    c->worker_timeout_ms = 0;  // the primary's evictions only (ps_replica restores it on promotion)
    if (!rep || !(s = ps_server_new(ctx, c, bind, values, err, err_len))) goto out;
    int joined = ps_replica_join(rep, s, err, err_len);
    if (joined != 0) {
        rc = joined > 0 ? 0 : -1;  // 1: the run had finished
        goto out;
    }
    if (serve_then_stop_eval(id, s, &b.ge, err, err_len) != 0) goto out;
    if (ps_replica_stale(rep)) {
        fprintf(stderr, "asgd server %zu: replica %zu was out of sync when the run finished: it holds no result\n",
                id, d->replica);
        rc = 0;
        goto out;
    }
    if (write_replica_values(id, d, s, err, err_len) != 0) goto out;
    // Promoted: it finished the run as the primary, and writes the shard's files.
    if (ps_replica_is_primary(rep) && (ps_replica_finish(rep, err, err_len) != 0 ||
                                      server_finish(id, run_id, d, m, split, s, b.ge, begin, end, err, err_len) != 0))
        goto out;
    rc = 0;
out:
    global_eval_destroy(&b.ge);
    if (b.gp.f) fclose(b.gp.f);
    free(b.table);
    free(b.endpoints);
    ps_server_destroy(&s);
    ps_replica_destroy(&rep);
    return rc;
}

static int run_server(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                      const model_file_split_t *split, const char *coordinator, uint64_t run_id, char *err, size_t err_len) {
    // Under hybrid the servers hold the sparse part only, the first S parameters.
    size_t n = d->sync == SYNC_MODE_HYBRID ? model_num_sparse_params(m) : model_num_params(m);
    if (n == 0) {
        snprintf(err, err_len, "--sync hybrid needs a model with a sparse and a dense part, not %s",
                 train_args_model(t)->name);
        return -1;
    }
    // Every shard starts from the same seeded model a single process would
    // (its first n parameters under hybrid).
    param_t *init = params_new(model_num_params(m), err, err_len);
    float *values = init ? malloc(n * sizeof *values) : NULL;
    ps_server_t *s = NULL;
    ps_replica_t *rep = NULL;
    rdv_entry_t *table = NULL;
    global_eval_t *ge = NULL;
    global_eval_config_t gc;
    global_progress_t gp = {NULL, NULL};
    const char **endpoints = calloc(d->servers, sizeof *endpoints);
    int rc = -1;
    if (!values || !endpoints) {
        if (init) snprintf(err, err_len, "server: out of memory for %zu parameters", n);
        goto out;
    }
    model_init_params(m, init, t->seed);
    params_read(init, n, values);
    size_t begin, end;
    shard_range(n, d->servers, id, &begin, &end);
    ps_config_t c;
    char ckpt_path[1100];
    if (server_ps_config(id, run_id, t, d, n, &c, ckpt_path, sizeof ckpt_path, err, err_len) != 0) goto out;
    // Test build only (tests/test_launch_stop.c): the shard's first replica
    // fails before it joins, as one with a broken setup would.
    const char *fail_early = test_hook_value(TEST_HOOK_SERVER_FAIL_EARLY);
    if (fail_early && strtoull(fail_early, NULL, 10) == id && !d->replica_backup) {
        snprintf(err, err_len, "%s=%s: failing before joining the run", test_hook_name(TEST_HOOK_SERVER_FAIL_EARLY),
                 fail_early);
        goto out;
    }
    if (d->server_replicas > 1 && d->replica_backup) {
        rc = run_backup(ctx, id, run_id, t, d, m, split, coordinator, &c, values + begin, begin, end, err, err_len);
        goto out;
    }
    if (!(s = server_start(ctx, id, t, d, &c, values + begin, err, err_len))) goto out;
    if (d->server_replicas > 1 &&
        (!(rep = server_replica(ctx, id, run_id, d, NULL, NULL, err, err_len)) || ps_replica_lead(rep, s, err, err_len) != 0 ||
         ps_replica_await_backup(rep, s, err, err_len) != 0))
        goto out;
    rdv_entry_t me = server_entry(id, ps_server_endpoint(s));
    // A resumed shard does not meet the others anew.
    if (!t->resume &&
        rdv_join(ctx, coordinator, run_id, &me, d->servers + dist_slots(d), &table, (int)d->timeout_ms, err, err_len) != 0)
        goto out;
    if (t->resume && id == 0) resumed_table(ctx, t, d, coordinator, run_id, &me, &table);
    if (!t->quiet)
        fprintf(stderr, "asgd server %zu: parameters [%zu, %zu) of %zu at %s, %s\n", id, begin, end, n,
                ps_server_endpoint(s), sync_mode_name((sync_mode_t)d->sync));
    if (id == 0 && !(ge = start_global_eval(ctx, t, d, m, s, table, endpoints, &gc, &gp, run_id, err, err_len)) && err[0])
        goto out;
    if (serve_then_stop_eval(id, s, &ge, err, err_len) != 0) goto out;
    if (rep && (write_replica_values(id, d, s, err, err_len) != 0 || ps_replica_finish(rep, err, err_len) != 0))
        goto out;
    if (server_finish(id, run_id, d, m, split, s, ge, begin, end, err, err_len) != 0) goto out;
    rc = 0;
out:
    ps_replica_destroy(&rep);
    global_eval_destroy(&ge);  // its thread joined: the progress file is no longer written
    if (gp.f) fclose(gp.f);
    free(endpoints);
    free(table);
    ps_server_destroy(&s);
    free(values);
    params_free(&init);
    return rc;
}

// ---- worker --------------------------------------------------------------------

// This incarnation's pushes per shard: sent, or acknowledged.
static void json_push_counts(json_writer_t *j, const char *key, const ps_push_count_t *counts, size_t n, int acked) {
    json_object(j, key);
    for (size_t k = 0; k < n; k++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", k);
        json_uint(j, index, acked ? counts[k].acked : counts[k].sent);
    }
    json_object_end(j);
}

// An achieved period beside the requested one: {"requested":N,"mean":M,"p99":P}
// (mean and p99 null when nothing happened).
static void json_period(json_writer_t *j, const char *key, size_t requested, double mean, uint64_t p99) {
    json_object(j, key);
    json_uint(j, "requested", requested);
    if (isnan(mean)) {
        json_null(j, "mean");
        json_null(j, "p99");
    } else {
        json_number(j, "mean", mean);
        json_uint(j, "p99", p99);
    }
    json_object_end(j);
}

static void write_worker_json(FILE *out, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                              const train_result_t *r, const replica_stats_t *rs, unsigned rejoins,
                              const ps_push_count_t *counts, size_t incarnation) {
    metric_kind_t metric = model_metric(m);
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "role", "worker");
    json_uint(&j, "id", id);
    json_string(&j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP || (d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse))
        json_uint(&j, "staleness_bound", d->staleness);
    else if (d->sync == SYNC_MODE_BSP) json_uint(&j, "staleness_bound", 0);
    else json_null(&j, "staleness_bound");
    json_uint(&j, "threads", t->threads);
    json_uint(&j, "batch", t->batch);  // each thread's step (sync: its share of a round), after --scaling
    json_number(&j, "lr", t->lr);      // after --lr-scaling
    json_string(&j, "scaling", d->scaling ? "strong" : "weak");
    json_string(&j, "lr_scaling", dist_lr_scaling_name(d->lr_scaling));
    json_uint(&j, "warmup", t->warmup);
    json_number(&j, "wall_s", r->wall_s);
    json_number(&j, "eval_s", r->eval_s);
    json_uint(&j, "samples", r->samples);
    json_uint(&j, "updates", r->updates);
    json_uint(&j, "evaluations", r->n_evals);
    json_uint(&j, "train_examples", model_num_train(m));  // of the whole run; this worker trains on its share
    json_number(&j, "samples_per_s", r->samples_per_s);
    json_number(&j, "time_to_target_s", r->time_to_target_s);
    if (isnan(r->time_to_target_s)) json_null(&j, "samples_to_target");
    else json_uint(&j, "samples_to_target", r->samples_to_target);
    json_number(&j, "final_train_loss", r->last.train_loss);
    json_number(&j, "final_test_loss", r->last.test_loss);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "final_test_accuracy" : "final_test_rmse", r->last.test_metric);
    json_number(&j, "final_epoch", r->last.epoch);
    json_bool(&j, "stopped_at_time_limit", r->stopped_at_time_limit);
    json_bool(&j, "interrupted", r->interrupted);
    json_bool(&j, "evicted", rs->servers_finished);  // the servers finished the run without it
    json_number(&j, "global_test_loss", rs->global_test_loss);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "global_test_accuracy" : "global_test_rmse", rs->global_test_metric);
    json_uint(&j, "global_versions", rs->global_versions);
    if (rs->collective) json_string(&j, "collective", rs->collective);
    else json_null(&j, "collective");
    if (rs->cross_ring) json_string(&j, "cross_ring", rs->cross_ring);
    json_uint(&j, "clock", rs->clock);
    json_uint(&j, "pushes", rs->pushes);
    json_uint(&j, "push_messages_acked", rs->pushes_acked);  // since its last (re)join
    if (counts) {
        // This process's (every rejoin of it), as its ledger worker-K.pushes.N holds them.
        json_uint(&j, "incarnation", incarnation);
        json_push_counts(&j, "push_messages_sent_by_shard", counts, d->servers, 0);
        json_push_counts(&j, "push_messages_acked_by_shard", counts, d->servers, 1);
    }
    json_uint(&j, "start_clock", rs->start_clock);
    // Worker checkpoints (asp/ssp; docs/reliability.md): written by this
    // incarnation, and where a resumed one went on from.
    json_uint(&j, "checkpoints", r->checkpoints - rs->checkpoint_failures);
    json_uint(&j, "checkpoint_failures", rs->checkpoint_failures);
    json_bool(&j, "resumed", rs->resumed);
    json_uint(&j, "resumed_samples", rs->resumed_samples);
    json_uint(&j, "resumed_clock", rs->resumed_clock);
    json_uint(&j, "samples_retrained", rs->samples_retrained);
    json_uint(&j, "samples_skipped", rs->samples_skipped);
    json_uint(&j, "rejoins_after_eviction", rejoins);
    json_uint(&j, "retries", rs->retries);
    json_uint(&j, "pulls", rs->pulls);
    json_number(&j, "wait_s", rs->wait_s);
    json_number(&j, "pull_wait_s", rs->pull_wait_s);
    if (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP) {
        json_period(&j, "steps_per_push", d->push_every, rs->steps_per_push_mean, rs->steps_per_push_p99);
        json_period(&j, "steps_per_pull", d->fetch_every, rs->steps_per_pull_mean, rs->steps_per_pull_p99);
        json_number(&j, "pull_held_s", rs->pull_held_s);
        double bound = dist_wait_for_bound(rs->wait_s, rs->pull_held_s, t->threads);
        json_number(&j, "wait_for_bound_s", bound);
        json_number(&j, "wait_for_bytes_s", rs->wait_s - bound);
    }
    json_number(&j, "comm_s", rs->comm_s);
    json_uint(&j, "bytes_out", rs->bytes_out);
    json_uint(&j, "bytes_in", rs->bytes_in);
    char spec[64];
    compress_spec_format(&d->compress_spec, spec, sizeof spec);
    json_string(&j, "compress", spec);
    json_bool(&j, "error_feedback", d->error_feedback);
    json_uint(&j, "bytes_out_uncompressed", rs->bytes_out_raw);
    json_number(&j, "compression_ratio", rs->bytes_out ? (double)rs->bytes_out_raw / (double)rs->bytes_out : NAN);
    json_number(&j, "residual_norm", rs->residual_norm);
    char sum_hex[16];
    snprintf(sum_hex, sizeof sum_hex, "%08x", rs->dense_checksum);
    json_string(&j, "dense_params_checksum", sum_hex);
    if (d->sync == SYNC_MODE_HYBRID) json_string(&j, "hybrid_sparse", d->hybrid_sparse ? "ssp" : "asp");
    if (d->sync == SYNC_MODE_BSP) json_uint(&j, "backup_workers", d->backup_workers);
    if (d->sync == SYNC_MODE_LOCAL) json_uint(&j, "local_steps", d->local_steps);  // `pushes` counts the averages
    json_end(&j);
    fputc('\n', out);
}

// The worker's result record (run_record.h): what the merge of the run directory reads.
static int write_worker_record(const char *dir, size_t id, const model_t *m, const train_result_t *r,
                               const replica_stats_t *rs, char *err, size_t err_len) {
    worker_result_t w = {
        .id = id,
        .left = r->interrupted,
        .evicted = (uint64_t)rs->servers_finished,
        .metric_rmse = model_metric(m) == METRIC_KIND_RMSE,
        .samples = r->samples,
        .updates = r->updates,
        .train_examples = model_num_train(m),
        .pushes = rs->pushes,
        .global_versions = rs->global_versions,
        .samples_to_target = r->samples_to_target,
        .bytes_out = rs->bytes_out,
        .bytes_in = rs->bytes_in,
        .bytes_out_uncompressed = rs->bytes_out_raw,
        .wall_s = r->wall_s,
        .samples_per_s = r->samples_per_s,
        .wait_s = rs->wait_s,
        .final_test_loss = r->last.test_loss,
        .final_test_metric = r->last.test_metric,
        .time_to_target_s = r->time_to_target_s,
        .global_test_loss = rs->global_test_loss,
        .global_test_metric = rs->global_test_metric,
        .samples_retrained = rs->samples_retrained,
        .samples_skipped = rs->samples_skipped,
        .pulls = rs->pulls,
        .steps_per_push_p99 = rs->steps_per_push_p99,
        .steps_per_pull_p99 = rs->steps_per_pull_p99,
        .pull_held_s = rs->pull_held_s,
    };
    return run_record_write_worker(dir, &w, err, err_len);
}

// What one worker process holds while it runs (freed by worker_free).
typedef struct worker {
    size_t id;
    const train_args_t *t;
    const dist_args_t *d;
    const model_t *m;
    const model_file_split_t *split;  // --save-model: the run's split, recorded in the file
    ring_t *ring;
    collective_t *collective;  // the ring modes' sums (collective.h), or NULL
    rdv_entry_t *table;        // every rank's endpoint, from the coordinator
    const char **servers;      // the shards' endpoints (into table)
    step_delay_t *delays;      // --delay-worker, per worker
    uint32_t join_nonce;       // --join: this process's own, non-zero (ps_client_new_joiner)
    counter_file_t ledger;     // its pushes, in the run directory
    ps_push_count_t *own_counts;  // ... or here, without a run directory
    ps_push_count_t *counts;   // whichever of the two (NULL without servers)
    size_t incarnation;
    worker_ckpt_config_t *ckpt;  // asp/ssp with --checkpoint-every or --resume, else NULL
    servers_watch_t watch;     // the servers' end, seen in the run directory
    worker_live_t live;        // its live counts in the run directory (asgd launch's progress line)
    train_callbacks_t cb;      // what the trainer calls: the report's, through the live counts
    run_report_t *report;
    float *final_w;            // --save-model
} worker_t;

static void worker_free(worker_t *w) {
    servers_watch_stop(&w->watch);
    worker_live_close(&w->live);
    if (w->report) {
        char ignored[8];
        run_report_close(&w->report, ignored, sizeof ignored);
    }
    free(w->final_w);
    free(w->ckpt);
    free(w->servers);
    free(w->table);
    collective_destroy(&w->collective);
    ring_destroy(&w->ring);
    free(w->delays);
    counter_file_close(&w->ledger);
    free(w->own_counts);
}

// Where the ring listens: --bind-host; with --ring-ipc a socket file in the
// run directory (ring-K.sock, left there if the worker is killed), else when
// that path is too long or there is none, a fresh one under $TMPDIR (ring.h).
static const char *ring_bind_host(const worker_t *w, char *buf, size_t len) {
    if (!w->d->ring_ipc) return w->d->bind_host;
    char *dir = w->d->run_dir ? realpath(w->d->run_dir, NULL) : NULL;
    int n = dir ? snprintf(buf, len, "ipc://%s/ring-%zu.sock", dir, w->id) : -1;
    free(dir);
    return n > 0 && (size_t)n < len && (size_t)n - 6 < RING_IPC_PATH_MAX ? buf : "ipc";
}

// Meets the others at the coordinator (with its ring's endpoint under
// allreduce, hybrid and local) and learns the shards' endpoints.
static int worker_meet(void *ctx, worker_t *w, const char *coordinator, uint64_t run_id, char *err, size_t err_len) {
    const dist_args_t *d = w->d;
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.rank = (uint32_t)(d->servers + w->id);
    me.role = DIST_ROLE_WORKER;
    snprintf(me.endpoint, sizeof me.endpoint, "-");
    if (dist_uses_ring(d->sync)) {
        // + 1: an allreduce carries the examples behind the sum after the values (replica.c).
        char host[RING_IPC_PATH_MAX + 8];
        w->ring = ring_new(ctx, w->id, d->workers, run_id, model_num_params(w->m) + 1,
                           ring_bind_host(w, host, sizeof host), err, err_len);
        if (!w->ring) return -1;
        advertise(ring_endpoint(w->ring), me.endpoint, sizeof me.endpoint);
        // Its host identity, by which the collective groups the workers.
        if (collective_host_id(w->id, me.name, sizeof me.name, err, err_len) != 0) return -1;
    }
    if (rdv_join(ctx, coordinator, run_id, &me, d->servers + dist_slots(d), &w->table, (int)d->timeout_ms, err,
                 err_len) != 0)
        return -1;
    if (!(w->servers = calloc(d->servers ? d->servers : 1, sizeof *w->servers))) {
        snprintf(err, err_len, "worker: out of memory");
        return -1;
    }
    for (size_t k = 0; k < d->servers; k++) w->servers[k] = w->table[k].endpoint;
    if (w->ring && ring_connect(w->ring, w->table[d->servers + (w->id + 1) % d->workers].endpoint, err, err_len) != 0)
        return -1;
    // With every worker on this host the uncompressed sums go through shared
    // memory, the ring staying for compressed ones. All decide alike: from the
    // same table.
    if (!w->ring) return 0;
    w->collective = collective_new(ctx, w->ring, (collective_choice_t)d->collective, &d->compress_spec,
                                   w->table + d->servers, d->workers, w->id, run_id, model_num_params(w->m) + 1,
                                   d->bind_host, (int)d->timeout_ms, err, err_len);
    return w->collective ? 0 : -1;
}

// Its pushes are counted from the first on, in a file that outlives a SIGKILL
// (in memory without a run directory).
static int worker_open_ledger(worker_t *w, uint64_t run_id, char *err, size_t err_len) {
    const dist_args_t *d = w->d;
    if (d->servers == 0) return 0;
    if (d->run_dir) {
        if (dist_push_ledger_open(d->run_dir, run_id, w->id, d->servers, &w->ledger, &w->incarnation, err, err_len) != 0)
            return -1;
        w->counts = dist_push_ledger_counts(&w->ledger);
    } else if (!(w->counts = w->own_counts = calloc(d->servers, sizeof *w->counts))) {
        snprintf(err, err_len, "worker: out of memory");
        return -1;
    }
    return 0;
}

static replica_config_t worker_replica_config(const worker_t *w, uint64_t run_id) {
    const dist_args_t *d = w->d;
    return (replica_config_t){
        .run_id = run_id,
        .id = w->id,
        .n_workers = dist_slots(d),  // a joiner's id is below it
        .join_nonce = d->join ? w->join_nonce : 0,
        .mode = (sync_mode_t)d->sync,
        .staleness = d->staleness,
        .push_every = d->push_every,
        .fetch_every = d->fetch_every,
        .servers = w->servers,
        .n_servers = d->servers,
        .collective = w->collective,
        .timeout_ms = (int)d->timeout_ms,
        .heartbeat_ms = (int)d->heartbeat_ms,
        .retry_ms = (int)d->retry_ms,
        .delay = w->delays[w->id],
        .gpu = w->t->device ? &w->t->gpu : NULL,
        .compress = d->compress_spec,
        .error_feedback = d->error_feedback,
        .compress_seed = w->t->seed,
        .hybrid_ssp = d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse,
        .local_steps = d->local_steps,
        .push_counts = w->counts,
        .ckpt = w->ckpt,
        .servers_finished = &w->watch.finished,
    };
}

// A worker checkpoint that failed: said, and training goes on.
static void worker_ckpt_failed(void *ctx, const char *err) {
    const worker_t *w = ctx;
    struct stat st;
    int good = stat(w->ckpt->path, &st) == 0 && S_ISREG(st.st_mode);
    fprintf(stderr, "asgd worker %zu: checkpoint failed: %s; training goes on%s%s\n", w->id, err,
            good ? ", the last good checkpoint is " : " (no good checkpoint yet)", good ? w->ckpt->path : "");
}

// Under asp and ssp, with --checkpoint-every S or --resume DIR: the worker's
// checkpoint DIR/worker-K.ckpt (DIR: --checkpoint-dir, else the --resume
// directory, else --run-dir) and its progress file beside it. A checkpoint
// to resume from is read and checked here, before the worker meets the others.
// Other modes leave --checkpoint-every to the servers. Returns 0, or -1 with err.
static int worker_ckpt_setup(worker_t *w, char *err, size_t err_len) {
    const train_args_t *t = w->t;
    const dist_args_t *d = w->d;
    int downpour = d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP;
    if (!downpour || t->device || (t->checkpoint_every <= 0 && !t->resume)) return 0;
    const char *dir = t->checkpoint_dir ? t->checkpoint_dir : d->run_dir;
    if (!dir) {
        snprintf(err, err_len, "--checkpoint-every: needs --checkpoint-dir DIR (or --run-dir) to write to");
        return -1;
    }
    if (t->checkpoint_every > 0 &&
        dist_check_writable_dir(dir, t->checkpoint_dir ? train_args_checkpoint_flag(t) : "--run-dir", err,
                                err_len) != 0)
        return -1;
    worker_ckpt_config_t *k = w->ckpt = calloc(1, sizeof *k);
    if (!k) {
        snprintf(err, err_len, "worker: out of memory");
        return -1;
    }
    snprintf(k->path, sizeof k->path, "%s/worker-%zu.ckpt", dir, w->id);
    snprintf(k->progress_path, sizeof k->progress_path, "%s/worker-%zu.progress", dir, w->id);
    k->every_s = t->checkpoint_every;
    k->resume = t->resume != NULL;
    k->on_failure = worker_ckpt_failed;
    k->failure_ctx = w;
    k->id = (worker_ckpt_identity_t){
        .worker = w->id, .workers = d->workers, .servers = d->servers, .mode = (uint64_t)d->sync,
        .staleness = d->sync == SYNC_MODE_SSP ? d->staleness : 0, .seed = t->seed, .threads = t->threads,
        .batch = t->batch, .push_every = d->push_every, .n_params = model_num_params(w->m),
        .n_train = model_num_train(w->m), .n_test = model_num_test(w->m)};
    model_describe(w->m, k->id.model, sizeof k->id.model);
    const char *sources[] = {t->data ? t->data : "", "\n", t->test_data ? t->test_data : ""};
    uint32_t crc = 0;
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) crc = ckpt_crc32(crc, sources[i], strlen(sources[i]));
    k->id.data = crc;
    if (!k->resume) return 0;
    worker_ckpt_t check;
    if (worker_ckpt_load(k->path, &k->id, &check, err, err_len) != 0) return -1;
    worker_ckpt_free(&check);
    return 0;
}

// The training flags as this worker applies them.
static int worker_train_config(const worker_t *w, train_config_t *tc, char *err, size_t err_len) {
    const train_args_t *t = w->t;
    const dist_args_t *d = w->d;
    train_args_train_config(t, tc);
    // --eval-every counts the samples of all workers: each evaluates its own
    // copy every N / workers samples of its own.
    if (t->eval_every) tc->eval_every = (t->eval_every + d->workers - 1) / d->workers;
    // Under allreduce and hybrid worker 0's evaluations are the global model's
    // curve; --worker-eval off spares the others (and, under asp/ssp/bsp, all
    // workers: the evaluator beside shard 0 reads the global model) their pauses.
    // --stop-at-target is decided by each worker on its own copy.
    int global_here = !dist_global_on_servers(d->sync) && w->id == 0;
    if (!d->worker_eval && !global_here && !t->stop_at_target) {
        tc->eval_every = (size_t)1 << 62;  // the starting and final evaluations only
        tc->eval_every_s = 0;
    }
    // Off the clock: in the ring modes worker 0's evaluations are the global
    // model's curve, and a worker's pause to evaluate holds every rank of the
    // ring back, so the points are copied and evaluated after training
    // (train_config_t.defer_eval_bytes). Under asp, ssp and bsp the evaluator
    // beside shard 0 defers the global model's (global_eval.h); a worker's own
    // evaluations (--worker-eval on) pause it as it trains, and its rows come then.
    if (!dist_global_on_servers(d->sync)) tc->defer_eval_bytes = d->eval_snapshot_mb << 20;
    return train_config_check(tc, model_num_train(w->m), err, err_len);
}

// Its curve (worker-K.csv in the run directory, else --log) and progress; the start line.
static int worker_open_report(worker_t *w, char *err, size_t err_len) {
    const train_args_t *t = w->t;
    const dist_args_t *d = w->d;
    char log_path[1024];
    const char *log = t->log;
    if (d->run_dir) {
        snprintf(log_path, sizeof log_path, "%s/worker-%zu.csv", d->run_dir, w->id);
        log = log_path;
    }
    double total = (double)model_num_train(w->m) * (double)t->epochs / (double)d->workers;
    w->report = run_report_new(log, model_metric(w->m), t->quiet ? NULL : stderr, total, err, err_len);
    if (!w->report ||
        worker_live_open(&w->live, d->run_dir, w->id, run_report_callbacks(w->report), &w->cb, err, err_len) != 0)
        return -1;
    if (!t->quiet) {
        char desc[160];
        model_describe(w->m, desc, sizeof desc);
        fprintf(stderr, "asgd worker %zu of %zu: %s, %s%s, %zu threads, batch %zu%s%s\n", w->id, d->workers, desc,
                sync_mode_name((sync_mode_t)d->sync), !w->collective ? "" : collective_kind(w->collective) == COLLECTIVE_SHM ? " in shared memory" : collective_kind(w->collective) == COLLECTIVE_HIER ? " in shared memory and across hosts" : collective_kind(w->collective) == COLLECTIVE_STREAM ? " over the stream ring" : "", t->threads, t->batch,
                step_delay_active(&w->delays[w->id]) ? ", delayed" : "", t->device ? ", on the GPU" : "");
    }
    return 0;
}

// Trains its replica. A worker the servers evicted (cut off for longer than
// --worker-timeout) rejoins with a fresh replica: its unpushed progress is
// lost, its data order resumes at the clock the servers give it. One that
// finds the servers finished (evicted, and back after every other worker had
// left: they no longer answer) ends at once: 1, with the samples it trained
// in *result and rs->servers_finished set. Returns 0 when it trained its
// share, -1 with err when it failed.
static int worker_train(void *ctx, worker_t *w, const replica_config_t *rc, const train_config_t *tc,
                        train_result_t *result, replica_stats_t *rs, unsigned *rejoins, char *err, size_t err_len) {
    train_callbacks_t cb = w->cb;
    *rejoins = 0;
    uint64_t most_samples = 0;  // the most any attempt trained (a rejoin goes on from its position)
    for (;;) {
        memset(result, 0, sizeof *result);
        if (replica_train(ctx, rc, w->m, &w->t->opt, tc, w->t->seed, &cb, result, rs, w->final_w, err, err_len) == 0)
            return 0;
        if (rs->stopped_with_peers) {  // stopped by the signal that stopped its peers: its results stand
            err[0] = '\0';
            return 0;
        }
        if (result->samples > most_samples) most_samples = result->samples;
        if (rs->evicted && atomic_load(&w->watch.finished)) rs->servers_finished = 1;
        if (rs->servers_finished) {
            result->samples = most_samples;
            return 1;
        }
        if (!rs->evicted || *rejoins >= MAX_REJOINS) return -1;
        (*rejoins)++;
        // A checkpointing worker rejoins from its last checkpoint, once it has one.
        if (w->ckpt) w->ckpt->resume = access(w->ckpt->path, F_OK) == 0;
        fprintf(stderr, "asgd worker %zu: %s; rejoining (%u of at most %d)\n", w->id, err, *rejoins, MAX_REJOINS);
        err[0] = '\0';
    }
}

// Its model (--save-model; not when the servers finished without it: it
// holds no final model), its JSON on stdout, and in the run directory its
// JSON and then its result record (whose presence says it is done).
static int worker_write_results(const worker_t *w, const train_result_t *result, const replica_stats_t *rs,
                                unsigned rejoins, char *err, size_t err_len) {
    const dist_args_t *d = w->d;
    if (d->save_model && !rs->servers_finished && save_model(d->save_model, w->m, w->split, 0, model_num_params(w->m), w->final_w, err, err_len) != 0)
        return -1;
    write_worker_json(stdout, w->id, w->t, d, w->m, result, rs, rejoins, w->counts, w->incarnation);
    fflush(stdout);
    if (!d->run_dir) return 0;
    char name[64];
    snprintf(name, sizeof name, "worker-%zu.json", w->id);
    FILE *f = dist_file_open(d->run_dir, name, err, err_len);
    if (!f) return -1;
    write_worker_json(f, w->id, w->t, d, w->m, result, rs, rejoins, w->counts, w->incarnation);
    if (dist_file_close(f, d->run_dir, name, err, err_len) != 0) return -1;
    return write_worker_record(d->run_dir, w->id, w->m, result, rs, err, err_len);
}

static int run_worker(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                      const model_file_split_t *split, const char *coordinator, uint64_t run_id, char *err,
                      size_t err_len) {
    worker_t w = {.id = id, .t = t, .d = d, .m = m, .split = split, .live = {.fd = -1}};
    int rc = -1;
    if (!(w.join_nonce = (uint32_t)wire_fresh_id(&w))) w.join_nonce = 1;
    if (!(w.delays = calloc(dist_slots(d), sizeof *w.delays))) {
        snprintf(err, err_len, "worker: out of memory");
        goto out;
    }
    if (d->delay_worker && delay_spec_parse(d->delay_worker, dist_slots(d), w.delays, err, err_len) != 0) goto out;
    // Test build only (tests/test_hostile.c): worker K fails before it joins,
    // as a worker with a broken setup would, every time it is started (asgd
    // launch --restart-workers backs off).
    const char *fail_early = test_hook_value(TEST_HOOK_WORKER_FAIL_EARLY);
    if (fail_early && strtoull(fail_early, NULL, 10) == id) {
        snprintf(err, err_len, "%s=%s: failing before joining the run", test_hook_name(TEST_HOOK_WORKER_FAIL_EARLY),
                 fail_early);
        goto out;
    }
    if (worker_ckpt_setup(&w, err, err_len) != 0) goto out;
    if (worker_meet(ctx, &w, coordinator, run_id, err, err_len) != 0) goto out;
    if (worker_open_ledger(&w, run_id, err, err_len) != 0) goto out;
    if (servers_watch_start(&w.watch, d->run_dir, d->servers, run_id, err, err_len) != 0) goto out;
    replica_config_t rc_cfg = worker_replica_config(&w, run_id);
    train_config_t tc;
    if (worker_train_config(&w, &tc, err, err_len) != 0) goto out;
    if (worker_open_report(&w, err, err_len) != 0) goto out;
    if (d->save_model && !(w.final_w = malloc(model_num_params(m) * sizeof *w.final_w))) {
        snprintf(err, err_len, "worker: out of memory");
        goto out;
    }
    train_result_t result;
    replica_stats_t rs;
    unsigned rejoins;
    int trained = worker_train(ctx, &w, &rc_cfg, &tc, &result, &rs, &rejoins, err, err_len);
    if (trained < 0) goto out;
    if (trained > 0) {
        fprintf(stderr, "asgd worker %zu: the servers finished the run without it (evicted: silent longer than "
                        "--worker-timeout %zu ms): %llu samples trained, its last pushes never applied\n", id,
                d->worker_timeout_ms, (unsigned long long)result.samples);
        err[0] = '\0';
    }
    if (run_report_close(&w.report, err, err_len) != 0) goto out;
    if (worker_write_results(&w, &result, &rs, rejoins, err, err_len) != 0) goto out;
    rc = 0;
out:
    worker_free(&w);
    return rc;
}

// ---- one rank ------------------------------------------------------------------

int dist_run_role(dist_role_t role, size_t id, const train_args_t *t, const dist_args_t *d, const char *host_bind) {
    char err[ERR_LEN] = "";
    const char *what = role == DIST_ROLE_SERVER ? "server" : "worker";
    char coordinator[300];
    if (!d->coordinator) {
        fprintf(stderr, "asgd %s: --coordinator HOST:PORT is needed to find the other processes\n", what);
        return 2;
    }
    snprintf(coordinator, sizeof coordinator, "%s%s", strncmp(d->coordinator, "tcp://", 6) == 0 ? "" : "tcp://",
             d->coordinator);
    uint64_t run_id = d->run_id ? d->run_id : dist_default_run_id(coordinator);
    size_t limit = role == DIST_ROLE_SERVER ? d->servers : d->join ? dist_slots(d) : d->workers;
    if (d->join && role == DIST_ROLE_WORKER && (id < d->workers || id >= dist_slots(d))) {
        if (dist_slots(d) == d->workers)
            fprintf(stderr, "asgd worker: --join: the run has no room for joiners (%s)\n",
                    dist_uses_ring(d->sync) ? "--sync allreduce, hybrid and local have a fixed membership"
                                            : "give every process --max-workers above --workers");
        else
            fprintf(stderr, "asgd worker: --join --id %zu: joiners take ids %zu..%zu (--workers %zu, --max-workers %zu)\n",
                    id, d->workers, dist_slots(d) - 1, d->workers, dist_slots(d));
        return 2;
    }
    if (id >= limit) {
        fprintf(stderr, "asgd %s: --id %zu: the run has %zu %ss (ids 0..%zu)\n", what, id, limit, what,
                limit ? limit - 1 : 0);
        return 2;
    }
    if (t->resume && role == DIST_ROLE_WORKER && d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP) {
        fprintf(stderr, "asgd worker: --resume: workers checkpoint under --sync asp and ssp only; a %s worker "
                        "restarted without --resume rejoins by itself%s\n", sync_mode_name((sync_mode_t)d->sync),
                dist_uses_ring(d->sync) || d->sync == SYNC_MODE_LOCAL ? " where its mode allows it (a ring cannot "
                                                                         "take a member back)" : "");
        return 2;
    }
    if (t->resume && role == DIST_ROLE_WORKER && t->device) {
        fprintf(stderr, "asgd worker: --resume: a GPU worker does not checkpoint; restart it without --resume\n");
        return 2;
    }
    if (t->resume && host_bind) {
        fprintf(stderr, "asgd server: --host-coordinator: a resumed server does not meet the others again (it binds "
                        "the endpoint it had); drop the flag\n");
        return 2;
    }
    // SIGTERM, SIGINT, SIGHUP: every wait below ends early, a worker stops
    // training at its next step and leaves; the summary says interrupted, the
    // exit status is 128 + the signal (0 for a worker with servers that left
    // gracefully: docs/reliability.md, "Elastic membership"). A second signal kills.
    stop_signal_install();
    data_bundle_t data;
    data_bundle_init(&data);
    model_t *model = NULL;
    void *ctx = NULL;
    rdv_server_t *rdv = NULL;
    zap_handler_t *zap = NULL;
    int status = 1;
    // Every file this process will write, checked before the data loads.
    if ((d->run_dir && dist_check_writable_dir(d->run_dir, "--run-dir", err, sizeof err) != 0) ||
        dist_check_writable_file(d->save_model, "--save-model", err, sizeof err) != 0 ||
        (role == DIST_ROLE_WORKER && !d->run_dir && dist_check_writable_file(t->log, "--log", err, sizeof err) != 0))
        goto out;
    ctx = zmq_ctx_new();
    if (!ctx) {
        snprintf(err, sizeof err, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        goto out;
    }
    // Keys first: a bad key file fails at once, not after the data has loaded.
    if (dist_security_start(d, ctx, &zap, err, sizeof err) != 0) goto out;
    if (train_args_build(t, &data, &model, err, sizeof err) != 0) goto out;
    if (host_bind) {
        rdv = rdv_server_new_elastic(ctx, host_bind, d->servers + dist_slots(d), d->servers + d->workers, run_id,
                                     err, sizeof err);
        if (!rdv) goto out;
    }
    char process[32];
    snprintf(process, sizeof process, "%s %zu", what, id);
    if (t->trace && trace_start(process, err, sizeof err) != 0) goto out;
    model_file_split_t split;
    model_file_split_of(&data, t->test_frac, t->seed, t->train_limit, t->test_limit, t->test_data != NULL, &split);
    int rc = role == DIST_ROLE_SERVER ? run_server(ctx, id, t, d, model, &split, coordinator, run_id, err, sizeof err)
                                      : run_worker(ctx, id, t, d, model, &split, coordinator, run_id, err, sizeof err);
    // The timeline of a failed run is written too: it may show why.
    char why[ERR_LEN];
    if (t->trace && trace_write(t->trace, "--trace", why, sizeof why) != 0 && rc == 0) {
        snprintf(err, sizeof err, "%s", why);
        rc = -1;
    }
    if (rc != 0) goto out;
    if (rdv && rdv_server_wait(rdv, (int)d->timeout_ms, err, sizeof err) != 0) goto out;
    status = 0;
out:
    if (stop_signal_received() && status == 0 && role == DIST_ROLE_WORKER && d->servers > 0) {
        // A graceful leave (docs/reliability.md, "Elastic membership"): it
        // pushed what it had and said goodbye; the servers count it as left.
        fprintf(stderr, "asgd worker %zu: left the run on signal %d (%s)\n", id, stop_signal_received(),
                strsignal(stop_signal_received()));
    } else if (stop_signal_received()) {
        int sig = stop_signal_received();
        if (status != 0) fprintf(stderr, "asgd %s %zu: stopped by signal %d (%s): %s\n", what, id, sig, strsignal(sig), err);
        else fprintf(stderr, "asgd %s %zu: stopped by signal %d (%s)\n", what, id, sig, strsignal(sig));
        status = 128 + sig;
    } else if (status != 0) {
        fprintf(stderr, "asgd %s %zu: %s\n", what, id, err);
    }
    rdv_server_destroy(&rdv);
    zap_handler_destroy(&zap);
    if (ctx) zmq_ctx_term(ctx);
    model_destroy(&model);
    data_bundle_free(&data);
    return status;
}

// ---- asgd server / asgd worker -------------------------------------------------

static const char server_usage[] = "asgd server --id K --coordinator HOST:PORT [--servers M --workers N --sync ...] [train flags]";
static const char worker_usage[] = "asgd worker --id K --coordinator HOST:PORT [--servers M --workers N --sync ...] [train flags]";
static const char role_description[] =
    "One process of a distributed run, started by hand or by a script: a parameter-server shard\n"
    "(asgd server) or a worker replica (asgd worker). Every process of the run must get the same\n"
    "training and distributed flags. `asgd launch` starts all of them for you.";

size_t dist_role_flags(dist_role_args_t *a, flag_spec_t *specs) {
    memset(a, 0, sizeof *a);
    train_args_defaults(&a->t);
    dist_args_defaults(&a->d);
    size_t n = train_args_flags(&a->t, specs, 0);
    n += dist_args_flags(&a->d, specs + n);
    specs[n++] = (flag_spec_t){"id", FLAG_TYPE_SIZE, &a->id, "K", "this process's shard or worker id", 0, 4096, NULL, 0};
    specs[n++] = (flag_spec_t){"join", FLAG_TYPE_BOOL, &a->d.join, NULL, "worker: join a running asp/ssp/bsp run with a free id from --workers to --max-workers - 1; with --run-dir of an asgd launch and no --coordinator, the coordinator, run id and keys come from DIR/join", 0, 0, NULL, 0};
    specs[n++] = (flag_spec_t){"replica", FLAG_TYPE_SIZE, &a->d.replica, "I", "server, with --server-replicas: this process's replica of its shard (asgd launch gives it)", 0, PS_REPLICA_MAX - 1, NULL, 0};
    specs[n++] = (flag_spec_t){"replica-backup", FLAG_TYPE_BOOL, &a->d.replica_backup, NULL, "server, with --server-replicas: start as a backup that copies the state of its shard's primary", 0, 0, NULL, 0};
    specs[n++] = (flag_spec_t){"host-coordinator", FLAG_TYPE_STRING, &a->host, "ENDPOINT", "this process also hosts the coordinator, bound at ENDPOINT (e.g. tcp://0.0.0.0:29517)", 0, 0, NULL, 0};
    specs[n++] = (flag_spec_t){"save-model", FLAG_TYPE_STRING, &a->d.save_model, "FILE", "worker: write its final model to FILE; server: its shard's final values, a part of the model (docs/model_file.md)", 0, 0, NULL, 0};
    return n;
}

int dist_role_finish(dist_role_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command) {
    char err[ERR_LEN];
    int usage = train_args_finish(&a->t, specs, n_specs, command, err, sizeof err);
    if (usage == 0) dist_args_from_launcher(&a->d);
    if (usage == 0) usage = dist_args_finish(&a->d, &a->t, specs, n_specs, command, err, sizeof err);
    if (usage == 0) usage = dist_apply_scaling(&a->d, &a->t, command, err, sizeof err);
    if (usage != 0) fprintf(stderr, "%s\n", err);
    return usage;
}

// What a joiner (--join --run-dir DIR, no --coordinator) reads from DIR/join,
// which asgd launch writes (owner-only: it may hold the run's secret key).
typedef struct join_file {
    char coordinator[300], pub[64], sec[64];
} join_file_t;

// Fills d's coordinator, run id and launch keys from DIR/join. Returns 0, or
// 2 after saying why.
static int read_join_file(dist_args_t *d, join_file_t *jf) {
    char path[1100];
    snprintf(path, sizeof path, "%s/join", d->run_dir);
    FILE *f = fopen(path, "r");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "asgd worker: --join --run-dir %s: cannot read %s (%s): give --coordinator, or the run "
                        "directory of a running asgd launch\n", d->run_dir, path, strerror(errno));
        if (f) fclose(f);
        return 2;
    }
    if (st.st_mode & 077) {
        fprintf(stderr, "asgd worker: --join --run-dir: %s is readable by others (mode %03o); it holds the run's key\n",
                path, (unsigned)(st.st_mode & 0777));
        fclose(f);
        return 2;
    }
    char line[400], key[32], val[256];
    unsigned long long run_id = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%31s %255s", key, val) != 2) continue;
        if (strcmp(key, "coordinator") == 0) snprintf(jf->coordinator, sizeof jf->coordinator, "%s", val);
        else if (strcmp(key, "run_id") == 0) run_id = strtoull(val, NULL, 10);
        else if (strcmp(key, "curve_public") == 0) snprintf(jf->pub, sizeof jf->pub, "%.63s", val);
        else if (strcmp(key, "curve_secret") == 0) snprintf(jf->sec, sizeof jf->sec, "%.63s", val);
    }
    fclose(f);
    if (!jf->coordinator[0] || !run_id) {
        fprintf(stderr, "asgd worker: --join --run-dir: %s names no coordinator or run id\n", path);
        return 2;
    }
    d->coordinator = jf->coordinator;
    if (!d->run_id) d->run_id = run_id;
    if (jf->pub[0] && jf->sec[0] && !d->curve_server_key && !d->insecure) d->run_key_public = jf->pub, d->run_key_secret = jf->sec;
    return 0;
}

static int cmd_role(dist_role_t role, int argc, char **argv) {
    dist_role_args_t a;
    flag_spec_t flags[DIST_ROLE_N_FLAGS];
    size_t n = dist_role_flags(&a, flags);
    const char *command = role == DIST_ROLE_SERVER ? "asgd server" : "asgd worker";
    int parsed = train_args_command(&a.t, command, role == DIST_ROLE_SERVER ? server_usage : worker_usage,
                                    role_description, flags, n, argc, argv);
    int status = parsed >= 0 ? parsed : dist_role_finish(&a, flags, n, command);
    join_file_t jf = {{0}, {0}, {0}};
    if (parsed < 0 && status == 0 && a.d.join && role == DIST_ROLE_SERVER) {
        fprintf(stderr, "asgd server: --join: workers join a run; a server does not\n");
        status = 2;
    }
    if (parsed < 0 && status == 0 && a.d.join && !a.d.coordinator && a.d.run_dir) status = read_join_file(&a.d, &jf);
    if (parsed < 0 && status == 0) status = dist_run_role(role, a.id, &a.t, &a.d, a.host);
    train_args_release(&a.t);
    return status;
}

int cmd_server(int argc, char **argv) { return cmd_role(DIST_ROLE_SERVER, argc, argv); }
int cmd_worker(int argc, char **argv) { return cmd_role(DIST_ROLE_WORKER, argc, argv); }
