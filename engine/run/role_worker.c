// One worker replica of a run, from meeting the others to its result files (dist_roles.h).
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
#include "engine/run/dist.h"
#include "engine/replica/collective.h"
#include "engine/replica/collective_mpi.h"
#include "engine/replica/global_eval.h"
#include "engine/core/cpu_pin.h"
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

#include "engine/run/dist_roles.h"
#include "engine/run/run_output.h"

#define ERR_LEN 512
#define MAX_REJOINS 16  // evictions a worker process survives before it gives up

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
// requested: NaN when the exchanges were paced rather than asked for.
static void json_period(json_writer_t *j, const char *key, double requested, double mean, uint64_t p99) {
    json_object(j, key);
    json_number_or_null(j, "requested", requested);
    if (isnan(mean)) {
        json_null(j, "mean");
        json_null(j, "p99");
    } else {
        json_number(j, "mean", mean);
        json_uint(j, "p99", p99);
    }
    json_object_end(j);
}

// --pin: worker id's threads take the CPUs after workers 0..id-1's (modulo
// the CPUs it may use), as if one process ran them all; the same CPU for
// every worker's thread t would leave the others idle.
static size_t pin_first_of(size_t id, size_t threads) { return id * threads; }

// "pinned_cpus": the CPU each training thread was pinned to (the trainer's
// own choice, engine/core/cpu_pin.h), or null without --pin.
static void json_pinned_cpus(json_writer_t *j, size_t id, const train_args_t *t) {
    uint64_t *cpus = t->pin ? calloc(t->threads, sizeof *cpus) : NULL;
    size_t chosen = 0;
    char err[128];
    for (int cpu; cpus && chosen < t->threads; chosen++) {
        if (cpu_pin_choose(pin_first_of(id, t->threads) + chosen, &cpu, err, sizeof err) != 0) break;
        cpus[chosen] = (uint64_t)cpu;
    }
    if (cpus && chosen == t->threads)
        json_uint_by_index(j, "pinned_cpus", cpus, t->threads);
    else
        json_null(j, "pinned_cpus");
    free(cpus);
}

static void write_worker_json(FILE *out, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                              const ps_key_map_t *key_map, const train_result_t *r, const replica_stats_t *rs,
                              unsigned rejoins, const ps_push_count_t *counts, size_t incarnation) {
    metric_kind_t metric = model_metric(m);
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "role", "worker");
    json_uint(&j, "id", id);
    json_string(&j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP || (d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse))
        json_uint(&j, "staleness_bound", d->staleness);
    else if (d->sync == SYNC_MODE_BSP)
        json_uint(&j, "staleness_bound", 0);
    else
        json_null(&j, "staleness_bound");
    json_uint(&j, "threads", t->threads);
    json_pinned_cpus(&j, id, t);
    json_uint(&j, "batch", t->batch);  // each thread's step (sync: its share of a round), after --scaling
    json_number(&j, "lr", t->lr);  // after --lr-scaling
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
    if (isnan(r->time_to_target_s))
        json_null(&j, "samples_to_target");
    else
        json_uint(&j, "samples_to_target", r->samples_to_target);
    json_number(&j, "final_train_loss", r->last.train_loss);
    json_number(&j, "final_test_loss", r->last.test_loss);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "final_test_accuracy" : "final_test_rmse", r->last.test_metric);
    json_number(&j, "final_epoch", r->last.epoch);
    json_bool(&j, "stopped_at_time_limit", r->stopped_at_time_limit);
    json_bool(&j, "interrupted", r->interrupted);
    json_bool(&j, "evicted", rs->servers_finished);  // the servers finished the run without it
    json_number(&j, "global_test_loss", rs->global_test_loss);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "global_test_accuracy" : "global_test_rmse",
                rs->global_test_metric);
    json_uint(&j, "global_versions", rs->global_versions);
    if (rs->collective)
        json_string(&j, "collective", rs->collective);
    else
        json_null(&j, "collective");
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
    json_uint(&j, "pulls_cancelled", rs->pulls_cancelled);
    json_number(&j, "wait_s", rs->wait_s);
    json_number(&j, "pull_wait_s", rs->pull_wait_s);
    if (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP) {
        int paced = d->comm_share > 0.0;
        json_period(&j, "steps_per_push", paced ? NAN : (double)d->push_every, rs->steps_per_push_mean,
                    rs->steps_per_push_p99);
        json_period(&j, "steps_per_pull", paced ? NAN : (double)d->fetch_every, rs->steps_per_pull_mean,
                    rs->steps_per_pull_p99);
        json_number(&j, "pull_held_s", rs->pull_held_s);
        json_uint(&j, "pushes_hot_averaged", rs->pushes_hot_averaged);
        json_uint(&j, "pushes_hot_sized", rs->pushes_hot_sized);
        double bound = dist_wait_for_bound(rs->wait_s, rs->pull_held_s, t->threads);
        json_number(&j, "wait_for_bound_s", bound);
        json_number(&j, "wait_for_bytes_s", rs->wait_s - bound);
    }
    if (d->sync == SYNC_MODE_BSP) json_uint(&j, "local_rounds", rs->local_rounds);
    json_number(&j, "comm_s", rs->comm_s);
    json_uint(&j, "peak_rss_bytes", dist_peak_rss_bytes());
    // The model's parameters, and those this worker holds: fewer when it holds its working set (worker_keys.h).
    json_uint(&j, "model_params", key_map ? key_map->n_global : model_num_params(m));
    json_uint(&j, "params_held", model_num_params(m));
    json_uint(&j, "bytes_out", rs->bytes_out);
    json_uint(&j, "bytes_in", rs->bytes_in);
    if (!dist_without_servers(d->sync)) dist_json_transport(&j, d);
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
        .local_rounds = rs->local_rounds,
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
    rdv_entry_t *table;  // every rank's endpoint, from the coordinator
    const char **servers;  // the shards' endpoints (into table)
    step_delay_t *delays;  // --delay-worker, per worker
    uint32_t join_nonce;  // --join: this process's own, non-zero (ps_client_new_joiner)
    counter_file_t ledger;  // its pushes, in the run directory
    ps_push_count_t *own_counts;  // ... or here, without a run directory
    ps_push_count_t *counts;  // whichever of the two (NULL without servers)
    size_t incarnation;
    worker_ckpt_config_t *ckpt;  // asp/ssp with --checkpoint-every or --resume, else NULL
    servers_watch_t watch;  // the servers' end, seen in the run directory
    worker_live_t live;  // its live counts in the run directory (asgd launch's progress line)
    replica_live_t exchanges;  // the replica's pushes and pulls as they happen, for the live counts
    train_callbacks_t cb;  // what the trainer calls: the report's, through the live counts
    run_report_t *report;
    float *final_w;  // --save-model
    const ps_key_map_t *key_map;  // it holds only these of the servers' keys, or NULL
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
        dist_advertise(ring_endpoint(w->ring), me.endpoint, sizeof me.endpoint);
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
        if (dist_push_ledger_open(d->run_dir, run_id, w->id, d->servers, &w->ledger, &w->incarnation, err, err_len) !=
            0)
            return -1;
        w->counts = dist_push_ledger_counts(&w->ledger);
    } else if (!(w->counts = w->own_counts = calloc(d->servers, sizeof *w->counts))) {
        snprintf(err, err_len, "worker: out of memory");
        return -1;
    }
    return 0;
}

static replica_config_t worker_replica_config(worker_t *w, uint64_t run_id) {
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
        .comm_share = d->comm_share,
        .live = &w->exchanges,
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
        .hot_share = d->hot_params == HOT_PARAMS_AVERAGE ? 1.0f / (float)d->workers : 0.0f,
        .local_steps = d->local_steps,
        .push_counts = w->counts,
        .ckpt = w->ckpt,
        .servers_finished = &w->watch.finished,
        .key_map = w->key_map,
    };
}

// A worker checkpoint that failed: said, and training goes on.
static void worker_ckpt_failed(void *ctx, const char *err) {
    const worker_t *w = ctx;
    struct stat st;
    int good = stat(w->ckpt->path, &st) == 0 && S_ISREG(st.st_mode);
    run_say("asgd worker %zu: checkpoint failed: %s; training goes on%s%s\n", w->id, err,
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
        dist_check_writable_dir(dir, t->checkpoint_dir ? train_args_checkpoint_flag(t) : "--run-dir", err, err_len) !=
            0)
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
    k->id = (worker_ckpt_identity_t){.worker = w->id,
                                     .workers = d->workers,
                                     .servers = d->servers,
                                     .mode = (uint64_t)d->sync,
                                     .staleness = d->sync == SYNC_MODE_SSP ? d->staleness : 0,
                                     .seed = t->seed,
                                     .threads = t->threads,
                                     .batch = t->batch,
                                     .push_every = d->push_every,
                                     .n_params = model_num_params(w->m),
                                     .n_train = model_num_train(w->m),
                                     .n_test = model_num_test(w->m)};
    model_describe(w->m, k->id.model, sizeof k->id.model);
    const char *sources[] = {t->data ? t->data : "", "\n", t->test_data ? t->test_data : ""};
    uint32_t crc = 0;
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
        crc = ckpt_crc32(crc, sources[i], strlen(sources[i]));
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
    tc->pin_first = pin_first_of(w->id, tc->threads);
    return train_config_check(tc, model_num_train(w->m), err, err_len);
}

// A worker's curve adds its replica's pushes and pulls at each point: the
// periods it achieved over any stretch of the run (merged.csv's
// steps_per_push/pull). ctx NULL leaves them empty: the ring modes evaluate
// their points after training (off the clock), when the counts at each point
// are gone.
static void write_exchanges(FILE *csv, const train_point_t *p, void *ctx) {
    (void)p;
    const replica_live_t *x = ctx;
    if (!x) {
        fputs(",,", csv);
        return;
    }
    uint64_t pushes, pulls;
    replica_live_read(x, &pushes, &pulls);
    fprintf(csv, ",%llu,%llu", (unsigned long long)pushes, (unsigned long long)pulls);
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
    run_report_columns_t exchanges = {"pushes,pulls", write_exchanges,
                                      dist_global_on_servers(d->sync) ? &w->exchanges : NULL};
    w->report =
        run_report_new(log, model_metric(w->m), t->quiet ? NULL : run_progress(), total, &exchanges, err, err_len);
    if (!w->report || worker_live_open(&w->live, d->run_dir, w->id, &w->exchanges, run_report_callbacks(w->report),
                                       &w->cb, err, err_len) != 0)
        return -1;
    if (!t->quiet) {
        char desc[160], held[96] = "";
        model_describe(w->m, desc, sizeof desc);
        if (w->key_map)
            snprintf(held, sizeof held, " (the features its data uses: %zu of the model's %zu parameters)",
                     model_num_params(w->m), w->key_map->n_global);
        run_say("asgd worker %zu of %zu: %s%s, %s%s, %zu threads, batch %zu%s%s\n", w->id, d->workers, desc, held,
                sync_mode_name((sync_mode_t)d->sync),
                !w->collective                                        ? ""
                : collective_kind(w->collective) == COLLECTIVE_SHM    ? " in shared memory"
                : collective_kind(w->collective) == COLLECTIVE_HIER   ? " in shared memory and across hosts"
                : collective_kind(w->collective) == COLLECTIVE_STREAM ? " over the stream ring"
                                                                      : "",
                t->threads, t->batch, step_delay_active(&w->delays[w->id]) ? ", delayed" : "",
                t->device ? ", on the GPU" : "");
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
        run_say("asgd worker %zu: %s; rejoining (%u of at most %d)\n", w->id, err, *rejoins, MAX_REJOINS);
        err[0] = '\0';
    }
}

// Its model (--save-model; not when the servers finished without it: it
// holds no final model), its JSON on stdout, and in the run directory its
// JSON and then its result record (whose presence says it is done).
static int worker_write_results(const worker_t *w, const train_result_t *result, const replica_stats_t *rs,
                                unsigned rejoins, char *err, size_t err_len) {
    const dist_args_t *d = w->d;
    if (d->save_model && !rs->servers_finished &&
        dist_save_model(d->save_model, w->m, w->split, 0, model_num_params(w->m), w->final_w, err, err_len) != 0)
        return -1;
    FILE *results = run_results();
    if (results) {
        write_worker_json(results, w->id, w->t, d, w->m, w->key_map, result, rs, rejoins, w->counts, w->incarnation);
        fflush(results);
    }
    if (!d->run_dir) return 0;
    char name[64];
    snprintf(name, sizeof name, "worker-%zu.json", w->id);
    FILE *f = dist_file_open(d->run_dir, name, err, err_len);
    if (!f) return -1;
    write_worker_json(f, w->id, w->t, d, w->m, w->key_map, result, rs, rejoins, w->counts, w->incarnation);
    if (dist_file_close(f, d->run_dir, name, err, err_len) != 0) return -1;
    return write_worker_record(d->run_dir, w->id, w->m, result, rs, err, err_len);
}

int dist_run_worker(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                    const ps_key_map_t *key_map, const model_file_split_t *split, const char *coordinator,
                    uint64_t run_id, char *err, size_t err_len) {
    worker_t w = {.id = id, .t = t, .d = d, .m = m, .key_map = key_map, .split = split, .live = {.fd = -1}};
    int rc = -1;
    if (!(w.join_nonce = (uint32_t)wire_fresh_id(&w))) w.join_nonce = 1;
    if (!(w.delays = calloc(dist_slots(d), sizeof *w.delays))) {
        snprintf(err, err_len, "worker: out of memory");
        goto out;
    }
    if (d->delay_worker && delay_spec_parse(d->delay_worker, dist_slots(d), w.delays, err, err_len) != 0) goto out;
    // Test build only (tests/e2e/test_hostile.c): worker K fails before it joins,
    // as a worker with a broken setup would, every time it is started (asgd
    // launch --restart-workers backs off).
    const char *fail_early = test_hook_value(TEST_HOOK_WORKER_FAIL_EARLY);
    if (fail_early && strtoull(fail_early, NULL, 10) == id) {
        snprintf(err, err_len, "%s=%s: failing before joining the run", test_hook_name(TEST_HOOK_WORKER_FAIL_EARLY),
                 fail_early);
        goto out;
    }
    // Test build only (tests/e2e/test_faults.c): worker K waits, stopped, to be
    // let go when the test has the others where it wants them.
    const char *stop_before = test_hook_value(TEST_HOOK_WORKER_STOP_BEFORE_JOIN);
    if (stop_before && strtoull(stop_before, NULL, 10) == id) raise(SIGSTOP);
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
        // What stopped it is kept in the line: an eviction, or whatever failed once the servers were gone.
        run_say(
            "asgd worker %zu: the servers finished the run without it (evicted: silent longer than "
            "--worker-timeout %zu ms): %llu samples trained, its last pushes never applied%s%s\n",
            id, d->worker_timeout_ms, (unsigned long long)result.samples, err[0] ? "; it stopped on: " : "", err);
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
