// One parameter-server shard of a run, from meeting the others to its result files (dist_roles.h).
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
#include "engine/run/worker_keys.h"
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

// eval_params: the parameters shard 0's global evaluator reads (0: none here).
static void write_server_json(FILE *out, size_t id, uint64_t run_id, const dist_args_t *d, const ps_server_t *s,
                              size_t eval_params) {
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
    json_uint(&j, "eval_params", eval_params);
    json_uint(&j, "range_begin", begin);
    json_uint(&j, "range_end", end);
    json_uint(&j, "version", st.version);
    json_uint(&j, "pushes_applied", st.pushes_applied);
    json_uint(&j, "pulls_answered", st.pulls_answered);
    json_uint(&j, "pulls_waited", st.pulls_waited);
    json_uint(&j, "bytes_in", st.bytes_in);
    json_uint(&j, "bytes_out", st.bytes_out);
    dist_json_transport(&j, d);
    json_uint(&j, "dropped", st.dropped_total);
    json_uint(&j, "rejected", st.rejected);
    json_uint(&j, "duplicates", st.duplicates);
    json_uint(&j, "evictions", st.evictions);
    json_uint(&j, "stalls", st.stalls);
    json_uint(&j, "peak_rss_bytes", dist_peak_rss_bytes());
    json_uint(&j, "rejoins", st.rejoins);
    json_uint(&j, "hellos_resent", st.hellos_resent);
    json_uint(&j, "memory_trips", st.memory_trips);
    json_uint(&j, "connections_dropped", st.connections_dropped);
    json_uint(&j, "rounds_skipped", st.rounds_skipped);
    json_uint(&j, "local_posts", st.local_posts);
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
static int write_server_files(size_t id, uint64_t run_id, const dist_args_t *d, const ps_server_t *s,
                              size_t eval_params, char *err, size_t err_len) {
    if (!d->run_dir) return 0;
    char name[64];
    snprintf(name, sizeof name, "server-%zu.json", id);
    FILE *f = dist_file_open(d->run_dir, name, err, err_len);
    if (!f) return -1;
    write_server_json(f, id, run_id, d, s, eval_params);
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
    if (isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fputc(',', f);
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
// m: the servers' model; keys: the evaluator's own over its test examples' features (NULL: m).
static global_eval_t *start_global_eval(void *ctx, const train_args_t *t, const dist_args_t *d, const model_t *m,
                                        const eval_keys_t *keys, ps_server_t *s, const rdv_entry_t *table,
                                        const char **endpoints, global_eval_config_t *gc, global_progress_t *gp,
                                        uint64_t run_id, char *err, size_t err_len) {
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
        .n_params = model_num_params(keys ? keys->model : m),
        .model = keys ? keys->model : m,
        .keys = keys ? &keys->map : NULL,
        .eval_limit = t->eval_limit,
        .every_samples = t->eval_every ? t->eval_every : model_num_train(m),
        .every_s = t->eval_every_s,
        .shard = s,
        .snapshot_budget_bytes = d->eval_snapshot_mb << 20,
        .timeout_ms = (int)d->timeout_ms,
        .on_row = global_progress_row,
        .on_row_ctx = gp,
    };
    global_eval_t *ge = global_eval_start(gc, err, err_len);
    if (ge && keys && !t->quiet)
        run_say(
            "asgd server 0: the global model's evaluator reads %zu of its %zu parameters (the %zu feature rows its "
            "test examples read)\n",
            gc->n_params, keys->map.n_global, keys->map.n_rows);
    return ge;
}

// The longest a shard serves on after its workers have left, for the global
// evaluator's final read: it comes within a turn of the evaluator's thread,
// so this bounds only a shard whose evaluator is gone.
#define OBSERVER_LINGER_MS 10000

// The shard's configuration: range `n` parameters of the model m (its sparse
// part under hybrid), and its checkpoints (ckpt_path: their file's buffer).
static int server_ps_config(size_t id, uint64_t run_id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                            size_t n, ps_config_t *c, char *ckpt_path, size_t ckpt_len, char *err, size_t err_len) {
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
        // A shard that checkpoints may be restarted (--restart-servers): its
        // workers' rounds keep to the sockets, whose retries find it again.
        // Only a dense model's rounds are stepped in place (the workers' side
        // of shared-memory rounds): a model with a sparse block gets no segment.
        .local_rounds =
            d->ps_transport == PS_TRANSPORT_SHM && t->checkpoint_every <= 0 && model_num_sparse_params(m) == 0,
        // Shard 0's evaluator (start_global_eval) reads the final model once
        // every worker has left; a resumed shard may have none to wait for.
        .observer_linger_ms = d->run_dir && dist_global_on_servers(d->sync) && !t->resume ? OBSERVER_LINGER_MS : 0,
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
    run_say("asgd server %zu: resumed from %s at version %llu (%llu pushes applied), serving at %s\n", id, path,
            (unsigned long long)st.version, (unsigned long long)st.pushes_applied, ps_server_endpoint(s));
    return s;
}

// After serving: the evaluator's curve, the shard's values (--save-model) and
// its files. A shard stopped by a signal writes its files, marked
// interrupted, and fails (its values are not final: no --save-model).
static int server_finish(size_t id, uint64_t run_id, const dist_args_t *d, const model_t *m,
                         const model_file_split_t *split, const ps_server_t *s, const global_eval_t *ge, size_t begin,
                         size_t end, char *err, size_t err_len) {
    if (ge && write_global_csv(d->run_dir, ge, m, err, err_len) != 0) return -1;
    size_t eval_params = ge ? global_eval_params(ge) : 0;
    if (stop_signal_received()) {
        snprintf(err, err_len, "server %zu: stopped by a signal before every worker had left", id);
        write_server_files(id, run_id, d, s, eval_params, err + strlen(err), 0);
        return -1;
    }
    // Every worker has left: the shard's values are final (before its files,
    // which tell a launcher the shard is done).
    if (d->save_model &&
        dist_save_model(d->save_model, m, split, begin, end - begin, ps_server_values(s), err, err_len) != 0)
        return -1;
    return write_server_files(id, run_id, d, s, eval_params, err, err_len);
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
    if (rdv_join(ctx, coordinator, run_id, me, d->servers + dist_slots(d), table, RESUMED_TABLE_MS, why, sizeof why) ==
        0)
        return;
    if (!t->quiet)
        run_say("asgd server 0: resumed without the coordinator (%s): no global model curve from here on\n", why);
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
    ps_replica_config_t rc = {.state_dir = d->run_dir,
                              .shard = id,
                              .replica = d->replica,
                              .run_id = run_id,
                              .n_workers = dist_slots(d),
                              .ack_timeout_ms = ack_ms,
                              .worker_timeout_ms = (int)d->worker_timeout_ms,
                              .join_timeout_ms = (int)d->timeout_ms,
                              .quiet = 0,
                              .on_promoted = on_promoted,
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
    const eval_keys_t *keys;
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
    dist_advertise(bound, me.endpoint, sizeof me.endpoint);
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
    b->ge = start_global_eval(b->ctx, b->t, b->d, b->m, b->keys, s, b->table, b->endpoints, &b->gc, &b->gp, b->run_id,
                              err, sizeof err);
    if (!b->ge && err[0]) run_say("asgd server 0: no global model curve from here on: %s\n", err);
}

// A backup replica's life: it copies its primary's state, applies what the
// primary forwards, and takes over when the primary dies. Returns 0 or -1.
static int run_backup(void *ctx, size_t id, uint64_t run_id, const train_args_t *t, const dist_args_t *d,
                      const model_t *m, const eval_keys_t *keys, const model_file_split_t *split,
                      const char *coordinator, ps_config_t *c, const float *values, size_t begin, size_t end, char *err,
                      size_t err_len) {
    backup_eval_t b = {.ctx = ctx,
                       .id = id,
                       .run_id = run_id,
                       .t = t,
                       .d = d,
                       .m = m,
                       .keys = keys,
                       .coordinator = coordinator,
                       .endpoints = calloc(d->servers, sizeof(const char *))};
    ps_replica_t *rep = NULL;
    if (!b.endpoints)
        snprintf(err, err_len, "out of memory");
    else
        rep = server_replica(ctx, id, run_id, d, backup_promoted, &b, err, err_len);
    ps_server_t *s = NULL;
    int rc = -1;
    char bind[300];
    snprintf(bind, sizeof bind, "tcp://%s:*", d->bind_host);
    c->worker_timeout_ms = 0;  // the primary's evictions only (ps_replica restores it on promotion)
    // The evaluator reads the primary: a backup ends with its workers (and,
    // promoted, gives no final row of its own: the launcher's stands in).
    c->observer_linger_ms = 0;
    if (!rep || !(s = ps_server_new(ctx, c, bind, values, err, err_len))) goto out;
    int joined = ps_replica_join(rep, s, err, err_len);
    if (joined != 0) {
        rc = joined > 0 ? 0 : -1;  // 1: the run had finished
        goto out;
    }
    if (serve_then_stop_eval(id, s, &b.ge, err, err_len) != 0) goto out;
    if (ps_replica_stale(rep)) {
        run_say("asgd server %zu: replica %zu was out of sync when the run finished: it holds no result\n", id,
                d->replica);
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

// Whether this machine can hold the shard of n parameters: refused before
// anything starts, with the bytes it needs, when the memory available is less.
static int shard_fits(const model_t *m, const ps_config_t *c, size_t n, char *err, size_t err_len) {
    uint64_t available = dist_memory_available();
    // The shard, and for a moment the seeded model it starts from (shard_init;
    // none for a model that makes a range of its own).
    uint64_t shard = (uint64_t)n * ps_server_bytes_per_param(c);
    uint64_t seeded = model_has_init_range(m) ? 0 : (uint64_t)model_num_params(m) * sizeof(float);
    if (available == 0 || shard + seeded <= available) return 0;
    char parts[96] = "";
    if (seeded > 0)
        snprintf(parts, sizeof parts, " (%.1f MB the shard, %.1f MB the seeded model it starts from)",
                 (double)shard / 1e6, (double)seeded / 1e6);
    snprintf(err, err_len,
             "its shard of %zu of the model's %zu parameters needs %.1f MB%s, more than the %.1f MB this machine has "
             "available: run more --servers (on more machines) or train a smaller model",
             n, model_num_params(m), (double)(shard + seeded) / 1e6, parts, (double)available / 1e6);
    return -1;
}

// The shard's starting values, [begin, end) of the seeded model a single
// process would start from: made for the range alone where the model can,
// else the seeded model is made and freed at once.
static float *shard_init(const model_t *m, uint64_t seed, size_t begin, size_t end, char *err, size_t err_len) {
    if (model_has_init_range(m)) {
        float *values = malloc((end > begin ? end - begin : 1) * sizeof *values);
        if (!values)
            snprintf(err, err_len, "server: out of memory for %zu parameters", end - begin);
        else
            model_init_range(m, seed, begin, end, values);
        return values;
    }
    param_t *init = params_new(model_num_params(m), err, err_len);
    float *values = init ? malloc((end - begin) * sizeof *values) : NULL;
    if (init && !values) snprintf(err, err_len, "server: out of memory for %zu parameters", end - begin);
    if (values) {
        model_init_params(m, init, seed);
        params_read(init + begin, end - begin, values);
    }
    params_free(&init);
    return values;
}

int dist_run_server(void *ctx, size_t id, const train_args_t *t, const dist_args_t *d, const model_t *m,
                    const eval_keys_t *eval_keys, const model_file_split_t *split, const char *coordinator,
                    uint64_t run_id, char *err, size_t err_len) {
    // Under hybrid the servers hold the sparse part only, the first S parameters.
    size_t n = d->sync == SYNC_MODE_HYBRID ? model_num_sparse_params(m) : model_num_params(m);
    if (n == 0) {
        snprintf(err, err_len, "--sync hybrid needs a model with a sparse and a dense part, not %s",
                 train_args_model(t)->name);
        return -1;
    }
    size_t begin, end;
    shard_range(n, d->servers, id, &begin, &end);
    ps_config_t c;
    char ckpt_path[1100];
    if (server_ps_config(id, run_id, t, d, m, n, &c, ckpt_path, sizeof ckpt_path, err, err_len) != 0) return -1;
    if (shard_fits(m, &c, end - begin, err, err_len) != 0) return -1;
    float *values = shard_init(m, t->seed, begin, end, err, err_len);
    ps_server_t *s = NULL;
    ps_replica_t *rep = NULL;
    rdv_entry_t *table = NULL;
    global_eval_t *ge = NULL;
    global_eval_config_t gc;
    global_progress_t gp = {NULL, NULL};
    const char **endpoints = calloc(d->servers, sizeof *endpoints);
    int rc = -1;
    if (!values || !endpoints) {
        if (values) snprintf(err, err_len, "server: out of memory");
        goto out;
    }
    // Test build only (tests/e2e/test_launch_stop.c): the shard's first replica
    // fails before it joins, as one with a broken setup would.
    const char *fail_early = test_hook_value(TEST_HOOK_SERVER_FAIL_EARLY);
    if (fail_early && strtoull(fail_early, NULL, 10) == id && !d->replica_backup) {
        snprintf(err, err_len, "%s=%s: failing before joining the run", test_hook_name(TEST_HOOK_SERVER_FAIL_EARLY),
                 fail_early);
        goto out;
    }
    if (d->server_replicas > 1 && d->replica_backup) {
        rc = run_backup(ctx, id, run_id, t, d, m, eval_keys, split, coordinator, &c, values, begin, end, err, err_len);
        goto out;
    }
    if (!(s = server_start(ctx, id, t, d, &c, values, err, err_len))) goto out;
    if (d->server_replicas > 1 &&
        (!(rep = server_replica(ctx, id, run_id, d, NULL, NULL, err, err_len)) ||
         ps_replica_lead(rep, s, err, err_len) != 0 || ps_replica_await_backup(rep, s, err, err_len) != 0))
        goto out;
    rdv_entry_t me = server_entry(id, ps_server_endpoint(s));
    // A resumed shard does not meet the others anew.
    if (!t->resume && rdv_join(ctx, coordinator, run_id, &me, d->servers + dist_slots(d), &table, (int)d->timeout_ms,
                               err, err_len) != 0)
        goto out;
    if (t->resume && id == 0) resumed_table(ctx, t, d, coordinator, run_id, &me, &table);
    if (!t->quiet)
        run_say("asgd server %zu: parameters [%zu, %zu) of %zu at %s, %s\n", id, begin, end, n, ps_server_endpoint(s),
                sync_mode_name((sync_mode_t)d->sync));
    if (id == 0 &&
        !(ge = start_global_eval(ctx, t, d, m, eval_keys, s, table, endpoints, &gc, &gp, run_id, err, err_len)) &&
        err[0])
        goto out;
    // The curve's first point is the model as the run starts: no worker is
    // welcomed (so none pushes) before the evaluator has read it.
    if (ge && !t->resume && ps_server_hold_hellos(s, global_eval_first_taken(ge), err, err_len) != 0) goto out;
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
    return rc;
}

// ---- worker --------------------------------------------------------------------

// This incarnation's pushes per shard: sent, or acknowledged.
