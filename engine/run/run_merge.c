// A distributed run's directory merged (run_merge.h).
#include "engine/run/run_merge.h"
#include "engine/run/run_output.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/run/launch_curve.h"
#include "engine/run/model_file.h"
#include "engine/run/run_record.h"
#include "engine/run/worker_live.h"
#include "engine/core/json_writer.h"
#include "kernels/optimizer_kind.h"
#include "net/ps_client.h"
#include "staleness/histogram.h"

// Every process's result record (run_record.h), read once.
typedef struct run_results {
    worker_result_t *workers;  // [dist_slots(d)]: a joiner's slot nobody took is zeros
    server_result_t *servers;  // [d->servers]
    size_t n_servers;  // shard records held (to free)
    size_t joined, left;  // workers that joined the running run (--join); workers that left on a signal
    size_t evicted;  // workers the servers finished without (worker_result_t.evicted)
    uint64_t samples_evicted;  // ... and their samples
} run_results_t;

static void run_results_free(run_results_t *r) {
    for (size_t s = 0; r->servers && s < r->n_servers; s++) server_result_free(&r->servers[s]);
    free(r->servers);
    free(r->workers);
    memset(r, 0, sizeof *r);
}

// A worker's record is its last incarnation's (--restart-workers). Its pushes
// become those of every incarnation: each push goes to every shard, so what
// the worker's ledgers (worker-K.pushes.N) say were sent to shard 0 over the
// run. Without a ledger of this run (no servers) the record's count stays.
static void run_results_count_incarnations(const char *dir, const dist_args_t *d, run_results_t *r) {
    if (d->servers == 0) return;
    ps_push_count_t *sums = calloc(d->servers, sizeof *sums);
    char why[600];
    for (size_t k = 0; sums && k < dist_slots(d); k++) {
        size_t incarnations;
        if (dist_push_ledger_sum(dir, r->servers[0].run_id, k, d->servers, sums, &incarnations, why, sizeof why) == 0 &&
            sums[0].sent > r->workers[k].pushes)
            r->workers[k].pushes = sums[0].sent;
    }
    free(sums);
}

// Returns 0, or -1 with err naming the record that is missing or refused.
static int run_results_load(const char *dir, const dist_args_t *d, run_results_t *r, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    r->workers = calloc(dist_slots(d) ? dist_slots(d) : 1, sizeof *r->workers);
    r->servers = calloc(d->servers ? d->servers : 1, sizeof *r->servers);
    if (!r->workers || !r->servers) {
        snprintf(err, err_len, "out of memory for the results of %zu processes", d->servers + d->workers);
        run_results_free(r);
        return -1;
    }
    for (size_t k = 0; k < dist_slots(d); k++) {
        if (run_record_read_worker(dir, k, &r->workers[k], err, err_len) != 0) {
            if (k >= d->workers) {  // a joiner's slot nobody took
                memset(&r->workers[k], 0, sizeof r->workers[k]);
                continue;
            }
            run_results_free(r);
            return -1;
        }
        r->joined += k >= d->workers;
        r->left += r->workers[k].left != 0;
        r->evicted += r->workers[k].evicted != 0;
        r->samples_evicted += r->workers[k].evicted ? r->workers[k].samples : 0;
    }
    for (; r->n_servers < d->servers; r->n_servers++) {
        if (run_record_read_server(dir, r->n_servers, &r->servers[r->n_servers], err, err_len) != 0) {
            run_results_free(r);
            return -1;
        }
    }
    run_results_count_incarnations(dir, d, r);
    return 0;
}

// The shards' staleness histograms summed into h_clocks / h_updates, and staleness.csv.
static int merge_staleness(const char *dir, const run_results_t *res, size_t servers, staleness_hist_t *h_clocks,
                           staleness_hist_t *h_updates, char *err, size_t err_len) {
    staleness_hist_init(h_clocks);
    staleness_hist_init(h_updates);
    for (size_t s = 0; s < servers; s++) {
        staleness_hist_merge(h_clocks, &res->servers[s].staleness_clocks);
        staleness_hist_merge(h_updates, &res->servers[s].staleness_updates);
    }
    FILE *f = dist_file_open(dir, "staleness.csv", err, err_len);
    if (!f) return -1;
    fprintf(f, "staleness,updates_by_clocks,updates_by_versions\n");
    for (size_t v = 0; v < STALENESS_HIST_BINS; v++)
        if (h_clocks->bins[v] || h_updates->bins[v])
            fprintf(f, "%zu,%llu,%llu\n", v, (unsigned long long)h_clocks->bins[v],
                    (unsigned long long)h_updates->bins[v]);
    return dist_file_close(f, dir, "staleness.csv", err, err_len);
}

// The global model's time, samples and epochs to the target, and its final metric.
static void json_global_figures(json_writer_t *j, const global_curve_t *gc, double target, int rmse) {
    const curve_point_t *hit = global_curve_at_target(gc, target, rmse);
    const curve_point_t *last = global_curve_last(gc);
    json_number_or_null(j, rmse ? "final_test_rmse" : "final_test_accuracy",
                        last ? last->v[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY] : NAN);
    json_number_or_null(j, "final_test_loss", last ? last->v[CURVE_TEST_LOSS] : NAN);
    // A run that got worse than where it started shows here without reading
    // its curve (say_divergence_hint).
    const curve_point_t *untrained = global_curve_untrained(gc), *peak = global_curve_peak_loss(gc);
    json_number_or_null(j, "untrained_test_loss", untrained ? untrained->v[CURVE_TEST_LOSS] : NAN);
    json_number_or_null(j, "peak_test_loss", peak ? peak->v[CURVE_TEST_LOSS] : NAN);
    json_number_or_null(j, "peak_test_loss_epoch", peak ? peak->v[CURVE_EPOCH] : NAN);
    json_number_or_null(j, "time_to_target_s", hit ? hit->v[CURVE_WALL_S] : NAN);
    if (hit)
        json_uint(j, "samples_to_target", (uint64_t)hit->v[CURVE_SAMPLES]);
    else
        json_null(j, "samples_to_target");
    json_number_or_null(j, "epochs_to_target", hit ? hit->v[CURVE_EPOCH] : NAN);
    json_string(j, "global_curve", gc->source);
    json_uint(j, "global_evaluations", gc->evals);
    json_number(j, "global_eval_s", gc->eval_s);
    json_uint(j, "global_evaluations_during_training", gc->evals_during_training);
    json_number(j, "global_eval_during_training_s", gc->eval_during_training_s);
}

// The run's last point of the global model: the servers' model as the worker
// whose final pull came last pulled and evaluated it after its last push —
// every other worker had pushed its last by then, so that pull saw the final
// model; it is the pull that saw the most shard versions (global_versions) —
// at the longest worker's training time.
static void curve_final_of(const run_results_t *res, size_t workers, const staleness_hist_t *hc,
                           const staleness_hist_t *hu, curve_final_t *fin) {
    memset(fin, 0, sizeof *fin);
    const worker_result_t *last = NULL;
    for (size_t k = 0; k < workers; k++) {
        const worker_result_t *w = &res->workers[k];
        fin->samples += (double)w->samples;
        if (w->wall_s > fin->wall_s) fin->wall_s = w->wall_s;
        if (!last || w->global_versions > last->global_versions) last = w;
    }
    fin->test_metric = last ? last->global_test_metric : NAN;
    fin->test_loss = last ? last->global_test_loss : NAN;
    fin->staleness_versions_mean = staleness_hist_mean(hu);
    fin->staleness_versions_max = hu->count ? (double)hu->max : NAN;
    fin->staleness_clocks_mean = staleness_hist_mean(hc);
    fin->staleness_clocks_max = hc->count ? (double)hc->max : NAN;
}

// What summary.json says beyond the flags: the records, merged.
typedef struct run_summary {
    const run_results_t *res;
    const global_curve_t *gc;
    const staleness_hist_t *hc, *hu;
    const run_merge_info_t *info;
    int consistent;  // every acknowledged push applied once (servers only)
} run_summary_t;

// The run's shape: model, sync, processes, batch.
static void json_run_shape(json_writer_t *j, const train_args_t *t, const dist_args_t *d) {
    json_string(j, "asgd", ASGD_VERSION);
    json_string(j, "command", "launch");
    json_string(j, "model", train_args_model(t)->name);
    json_string(j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP || (d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse))
        json_uint(j, "staleness_bound", d->staleness);
    else if (d->sync == SYNC_MODE_BSP)
        json_uint(j, "staleness_bound", 0);
    else
        json_null(j, "staleness_bound");
    json_uint(j, "servers", d->servers);
    json_uint(j, "workers", d->workers);
    json_uint(j, "threads", t->threads);
    json_uint(j, "batch", t->batch);
    // Examples per round (or per step of every thread) over all workers.
    json_uint(j, "total_batch", (uint64_t)d->workers * t->threads * t->batch);
}

// asp/ssp: the periods the workers achieved (mean: all workers' steps over
// all their pushes or pulls, NaN without any; p99: the largest of the
// workers' 99th percentiles), and what their threads' waits went on.
typedef struct run_periods {
    double push_mean, pull_mean;
    uint64_t push_p99, pull_p99;
    double wait_for_bound_s, wait_for_bytes_s;
} run_periods_t;

static run_periods_t run_periods_of(const train_args_t *t, const dist_args_t *d, const run_results_t *res) {
    run_periods_t p = {0};
    uint64_t steps = 0, pushes = 0, pulls = 0;
    for (size_t k = 0; k < dist_slots(d); k++) {
        const worker_result_t *w = &res->workers[k];
        steps += w->updates;
        pushes += w->pushes;
        pulls += w->pulls;
        if (w->steps_per_push_p99 > p.push_p99) p.push_p99 = w->steps_per_push_p99;
        if (w->steps_per_pull_p99 > p.pull_p99) p.pull_p99 = w->steps_per_pull_p99;
        double b = dist_wait_for_bound(w->wait_s, w->pull_held_s, t->threads);
        p.wait_for_bound_s += b;
        p.wait_for_bytes_s += w->wait_s - b;
    }
    p.push_mean = pushes ? (double)steps / (double)pushes : NAN;
    p.pull_mean = pulls ? (double)steps / (double)pulls : NAN;
    return p;
}

// The achieved periods beside the ones asked for, and the waits' split.
static void json_run_periods(json_writer_t *j, const train_args_t *t, const dist_args_t *d, const run_results_t *res) {
    run_periods_t p = run_periods_of(t, d, res);
    const struct {
        const char *key;
        size_t requested;
        double mean;
        uint64_t p99;
    } periods[] = {{"steps_per_push", d->push_every, p.push_mean, p.push_p99},
                   {"steps_per_pull", d->fetch_every, p.pull_mean, p.pull_p99}};
    for (size_t i = 0; i < 2; i++) {
        json_object(j, periods[i].key);
        json_number_or_null(j, "requested", d->comm_share > 0.0 ? NAN : (double)periods[i].requested);
        json_number_or_null(j, "mean", periods[i].mean);
        json_number_or_null(j, "p99", isnan(periods[i].mean) ? NAN : (double)periods[i].p99);
        json_object_end(j);
    }
    json_number(j, "worker_wait_for_bound_s", p.wait_for_bound_s);
    json_number(j, "worker_wait_for_bytes_s", p.wait_for_bytes_s);
}

// Samples, time and rates over the workers; the global model's figures, and worker 0's own.
static void json_run_figures(json_writer_t *j, const train_args_t *t, const dist_args_t *d, const run_summary_t *s) {
    uint64_t samples = 0, pushes = 0, local_rounds = 0, retrained = 0, skipped = 0;
    double wall = 0, wait = 0, own_rates = 0;
    for (size_t k = 0; k < dist_slots(d); k++) {
        const worker_result_t *w = &s->res->workers[k];
        samples += w->samples;
        if (w->wall_s > wall) wall = w->wall_s;
        wait += w->wait_s;
        own_rates += w->samples_per_s;
        pushes += w->pushes;
        local_rounds += w->local_rounds;
        retrained += w->samples_retrained;
        skipped += w->samples_skipped;
    }
    const worker_result_t *w0 = &s->res->workers[0];
    int rmse = (int)w0->metric_rmse;
    json_uint(j, "samples", samples);
    // Workers resumed from their checkpoints (docs/reliability.md).
    json_uint(j, "samples_retrained", retrained);
    json_uint(j, "samples_skipped", skipped);
    json_number(j, "wall_s", wall);
    json_number(j, "samples_per_s", wall > 0 ? (double)samples / wall : NAN);
    // Each worker's own rate, summed: what the cluster processes while its
    // workers run, which a fixed share per worker hides behind the slowest one.
    json_number(j, "worker_samples_per_s", own_rates);
    json_number_or_null(j, "launch_wall_s", s->info->launch_wall_s);
    // The global model's figures (launch_curve.h says where its curve comes
    // from); worker 0's own copy's, named as such.
    json_global_figures(j, s->gc, train_args_target(t), rmse);
    json_number_or_null(j, rmse ? "worker0_test_rmse" : "worker0_test_accuracy", w0->final_test_metric);
    json_number_or_null(j, "worker0_time_to_target_s", w0->time_to_target_s);
    json_number_or_null(j, "worker0_samples_to_target",
                        isnan(w0->time_to_target_s) ? NAN : (double)w0->samples_to_target);
    json_number(j, "worker_wait_s", wait);
    json_uint(j, "pushes", pushes);
    // Of them, BSP rounds that went through shared memory (docs/protocol.md).
    if (d->sync == SYNC_MODE_BSP) json_uint(j, "local_rounds", local_rounds);
    if (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP) json_run_periods(j, t, d, s->res);
}

// Bytes each worker sent and received (payloads), and what its sends would
// have been as float32: the compression ratio is their quotient.
static void json_run_bytes(json_writer_t *j, const dist_args_t *d, const run_results_t *res) {
    double out_total = 0, in_total = 0, raw_total = 0, samples = 0;
    json_object(j, "bytes_by_worker");
    for (size_t k = 0; k < d->workers; k++) {
        char key[32];
        snprintf(key, sizeof key, "%zu", k);
        const worker_result_t *w = &res->workers[k];
        double o = (double)w->bytes_out, i = (double)w->bytes_in, raw = (double)w->bytes_out_uncompressed;
        json_object(j, key);
        json_number(j, "out", o);
        json_number(j, "in", i);
        json_number(j, "compression_ratio", o > 0 ? raw / o : NAN);
        json_object_end(j);
        out_total += o, in_total += i, raw_total += raw, samples += (double)w->samples;
    }
    json_object_end(j);
    json_number(j, "bytes_out", out_total);
    json_number(j, "bytes_in", in_total);
    // What a sample cost on the wire: the measure that says whether the
    // exchange moves the working set or the model (docs/distributed.md).
    json_number_or_null(j, "bytes_out_per_sample", samples > 0 ? out_total / samples : NAN);
    json_number_or_null(j, "bytes_in_per_sample", samples > 0 ? in_total / samples : NAN);
    json_number(j, "bytes_out_uncompressed", raw_total);
    json_number(j, "compression_ratio", out_total > 0 ? raw_total / out_total : NAN);
}

// Backup workers (bsp): late gradients each shard dropped, summed over the shards.
static void json_late_gradients(json_writer_t *j, const dist_args_t *d, const run_results_t *res) {
    uint64_t late = 0;
    json_object(j, "late_gradients_dropped_by_worker");
    for (size_t k = 0; k < d->workers; k++) {
        char key[32];
        snprintf(key, sizeof key, "%zu", k);
        uint64_t by = 0;
        for (size_t s = 0; s < d->servers; s++) by += res->servers[s].late_dropped[k];
        json_uint(j, key, by);
        late += by;
    }
    json_object_end(j);
    json_uint(j, "late_gradients_dropped", late);
}

// The flags the run was started with (after --scaling and --lr-scaling).
static void json_run_config(json_writer_t *j, const train_args_t *t, const dist_args_t *d, uint64_t train_examples) {
    json_object(j, "config");
    json_string(j, "model", train_args_model(t)->name);
    json_string(j, "data", t->data);
    if (train_examples > 0)
        json_uint(j, "train_examples", train_examples);
    else
        json_null(j, "train_examples");
    json_uint(j, "epochs", t->epochs);
    json_uint(j, "batch", t->batch);
    json_number(j, "lr", t->lr);
    json_uint(j, "seed", t->seed);
    json_number(j, "time_limit_s", t->time_limit);
    json_number(j, "target", train_args_target(t));
    json_string(j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP)
        json_uint(j, "staleness", d->staleness);
    else
        json_null(j, "staleness");  // the bound exists under ssp only
    if (d->comm_share > 0.0) {  // paced: no period was asked for
        json_null(j, "push_every");
        json_null(j, "fetch_every");
    } else {
        json_uint(j, "push_every", d->push_every);
        json_uint(j, "fetch_every", d->fetch_every);
    }
    json_number(j, "comm_share", d->comm_share);
    if (!dist_without_servers(d->sync)) json_string(j, "ps_transport", dist_ps_transport_name(d->ps_transport));
    if (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP)
        json_string(j, "hot_params", dist_hot_params_name(d->hot_params));
    json_string(j, "server_optimizer", optimizer_kind_name((optimizer_kind_t)d->server_optimizer));
    json_number(j, "server_lr", d->server_lr);
    json_bool(j, "server_staleness_aware", d->server_staleness_aware);
    json_number(j, "server_dc_asgd", d->server_dc_lambda);
    json_uint(j, "server_delay_adaptive", d->server_delay_adaptive);  // tau_C; 0: off
    json_string(j, "delay_worker", d->delay_worker);
    if (d->sync == SYNC_MODE_HYBRID) json_string(j, "hybrid_sparse", d->hybrid_sparse ? "ssp" : "asp");
    if (d->sync == SYNC_MODE_BSP) json_uint(j, "backup_workers", d->backup_workers);
    if (d->sync == SYNC_MODE_LOCAL) json_uint(j, "local_steps", d->local_steps);
    json_string(j, "scaling", d->scaling ? "strong" : "weak");
    json_string(j, "lr_scaling", dist_lr_scaling_name(d->lr_scaling));
    json_uint(j, "warmup", t->warmup);
    json_uint(j, "batch_requested", d->requested_batch);
    json_number(j, "lr_requested", d->requested_lr);
    json_string(j, "device", train_device_name(t->device));
    char spec[64];
    compress_spec_format(&d->compress_spec, spec, sizeof spec);
    json_string(j, "compress", spec);
    json_bool(j, "error_feedback", d->error_feedback);
    json_object_end(j);
}

// Server restarts (--restart-servers), and the acknowledged pushes each shard
// had applied after its last checkpoint and lost with a crash (the shards'
// records count them from their ledgers; docs/reliability.md), by shard and in all.
static void json_server_restarts(json_writer_t *j, const dist_args_t *d, const run_summary_t *s) {
    uint64_t restarts = 0, lost = 0;
    json_object(j, "server_restarts_by_shard");
    for (size_t k = 0; k < d->servers; k++) {
        char key[32];
        snprintf(key, sizeof key, "%zu", k);
        uint64_t n = s->info->server_restarts ? s->info->server_restarts[k] : 0;
        json_uint(j, key, n);
        restarts += n;
    }
    json_object_end(j);
    json_uint(j, "server_restarts", restarts);
    json_uint(j, "server_replica_restarts", s->info->replica_restarts);
    json_object(j, "pushes_lost_by_shard");
    for (size_t k = 0; k < d->servers; k++) {
        char key[32];
        snprintf(key, sizeof key, "%zu", k);
        const server_result_t *r = &s->res->servers[k];
        uint64_t n = 0;
        for (size_t w = 0; w < r->workers; w++) n += r->pushes_lost[w];
        json_uint(j, key, n);
        lost += n;
    }
    json_object_end(j);
    json_uint(j, "pushes_lost", lost);
}

static void write_summary(FILE *out, const char *dir, const train_args_t *t, const dist_args_t *d,
                          const run_summary_t *s) {
    json_writer_t j;
    json_begin(&j, out);
    json_run_shape(&j, t, d);
    // Stopped by a signal to the launcher: the workers left, the servers
    // finished with what they had (docs/reliability.md, "Signals").
    json_bool(&j, "interrupted", s->info->interrupted != 0);
    json_run_figures(&j, t, d, s);
    json_run_bytes(&j, d, s->res);
    if (d->servers) {  // elastic membership (docs/reliability.md)
        json_uint(&j, "max_workers", dist_slots(d));
        json_uint(&j, "workers_joined", s->res->joined);
        json_uint(&j, "workers_left", s->res->left);
        // Evicted for silence and back after the servers had finished:
        // their samples count above, their last pushes were never applied.
        json_uint(&j, "workers_evicted", s->res->evicted);
        json_uint(&j, "samples_evicted", s->res->samples_evicted);
    }
    if (d->servers) json_bool(&j, "acked_pushes_applied_once", s->consistent);
    if (d->servers) json_server_restarts(&j, d, s);
    if (d->sync == SYNC_MODE_BSP) json_late_gradients(&j, d, s->res);
    if (d->servers) {
        dist_json_staleness(&j, "staleness_clocks", s->hc);
        dist_json_staleness(&j, "staleness_updates", s->hu);
    }
    json_string(&j, "run_dir", dir);
    json_run_config(&j, t, d, s->res->workers[0].train_examples);
    json_end(&j);
    fputc('\n', out);
}

// summary.json, once here and once on stdout.
// summary.json, and (with_stdout) the same line on stdout.
static int write_summaries(const char *dir, const train_args_t *t, const dist_args_t *d, const run_summary_t *s,
                           int with_stdout, char *err, size_t err_len) {
    FILE *f = dist_file_open(dir, "summary.json", err, err_len);
    if (!f) return -1;
    write_summary(f, dir, t, d, s);
    if (dist_file_close(f, dir, "summary.json", err, err_len) != 0) return -1;
    FILE *results = run_results();
    if (!with_stdout || !results) return 0;
    write_summary(results, dir, t, d, s);
    fflush(results);
    return 0;
}

// The outcome's figures and curve: the global model's, as summary.json has them.
static int outcome_of(const run_results_t *res, const global_curve_t *gc, const train_args_t *t, const dist_args_t *d,
                      launch_job_outcome_t *o, char *err, size_t err_len) {
    int rmse = train_args_model(t)->metric == METRIC_KIND_RMSE;
    snprintf(o->model, sizeof o->model, "%s", train_args_model(t)->name);
    o->rmse = rmse;
    for (size_t k = 0; k < d->workers; k++) {
        const worker_result_t *w = &res->workers[k];
        o->samples += w->samples;
        o->pushes += w->pushes;
        if (w->wall_s > o->wall_s) o->wall_s = w->wall_s;
    }
    o->samples_per_s = o->wall_s > 0 ? (double)o->samples / o->wall_s : NAN;
    const curve_point_t *hit = global_curve_at_target(gc, rmse ? t->target_rmse : t->target_acc, rmse);
    o->time_to_target_s = hit ? hit->v[CURVE_WALL_S] : NAN;
    o->samples_to_target = hit ? (uint64_t)hit->v[CURVE_SAMPLES] : 0;
    if (gc->n && !(o->points = malloc(gc->n * sizeof *o->points))) {
        snprintf(err, err_len, "out of memory for the run's curve");
        return -1;
    }
    if (gc->n) memcpy(o->points, gc->points, gc->n * sizeof *o->points);
    o->n_points = gc->n;
    return 0;
}

// One line on stderr when the workers' threads waited more than a quarter of
// their time, saying on what and naming the flag that would help.
static void say_wait_hint(const train_args_t *t, const dist_args_t *d, const run_results_t *res) {
    double thread_s = 0, waited = 0, bound = 0;
    for (size_t k = 0; k < dist_slots(d); k++) {
        const worker_result_t *w = &res->workers[k];
        thread_s += w->wall_s * (double)t->threads;
        waited += w->wait_s;
        bound += dist_wait_for_bound(w->wait_s, w->pull_held_s, t->threads);
    }
    if (!(thread_s > 0) || waited <= 0.25 * thread_s) return;
    double share = 100.0 * waited / thread_s;
    if (d->sync == SYNC_MODE_BSP)
        run_say(
            "asgd launch: the workers waited %.0f%% of their time for each round's slowest gradient; "
            "--backup-workers B drops the last B, --sync ssp lets the fast ones run ahead\n",
            share);
    else if (d->sync == SYNC_MODE_ALLREDUCE)
        run_say(
            "asgd launch: the workers waited %.0f%% of their time for each round's slowest gradient; "
            "--sync local --local-steps H averages the models every H steps instead\n",
            share);
    else if (d->sync == SYNC_MODE_LOCAL)
        run_say(
            "asgd launch: the workers waited %.0f%% of their time for the slowest worker at each average; "
            "a larger --local-steps (now %zu) averages less often\n",
            share, d->local_steps);
    else if (d->sync == SYNC_MODE_SSP && bound >= waited - bound)
        run_say(
            "asgd launch: the workers waited %.0f%% of their time (%.1f s) for slower workers, held by "
            "the staleness bound; a larger --staleness (now %zu) lets the fast ones run further ahead\n",
            share, bound, d->staleness);
    else if (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP)
        run_say(
            "asgd launch: the workers waited %.0f%% of their time (%.1f s) for pulls to come back; a "
            "larger --push-every and --fetch-every (now %zu, %zu) make fewer, larger exchanges\n",
            share, waited - bound, d->push_every, d->fetch_every);
}

// One line on stderr when the periods asked for were not what happened: under
// asp and ssp a worker's one communication thread pushes and pulls in turn,
// so when an exchange takes longer than --push-every steps the pushes carry
// more steps each (every step is pushed; none is dropped), and pulls come
// less often. Said when a mean is more than twice the request.
static void say_period_hint(const train_args_t *t, const dist_args_t *d, const run_results_t *res) {
    if ((d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP) || d->comm_share > 0.0) return;
    run_periods_t p = run_periods_of(t, d, res);
    if (!(p.push_mean > 2.0 * (double)d->push_every) && !(p.pull_mean > 2.0 * (double)d->fetch_every)) return;
    char pulled[48] = "did not pull";
    if (!isnan(p.pull_mean)) snprintf(pulled, sizeof pulled, "pulled every %.0f", p.pull_mean);
    run_say(
        "asgd launch: the workers pushed every %.0f steps and %s on average (asked: --push-every %zu, "
        "--fetch-every %zu): an exchange took longer than that many steps, so they pushed and pulled as "
        "often as they could, each push carrying every step since the last (summary.json: "
        "steps_per_push, steps_per_pull)\n",
        p.push_mean, pulled, d->push_every, d->fetch_every);
}

// One line on stderr when the global model's test loss rose above the
// untrained model's: the run diverged, for a while or to its end, and its
// final figures are then a draw from an oscillating curve. Under asp and ssp
// the usual cause is that the servers sum the workers' pushes (Downpour), so
// coordinates every worker moves take N workers' steps at once and overshoot
// (docs/distributed.md, "Summed deltas and the hot coordinates").
static void say_divergence_hint(const train_args_t *t, const dist_args_t *d, const global_curve_t *gc) {
    const curve_point_t *untrained = global_curve_untrained(gc), *peak = global_curve_peak_loss(gc);
    const curve_point_t *last = global_curve_last(gc);
    if (!peak || !(peak->v[CURVE_TEST_LOSS] > untrained->v[CURVE_TEST_LOSS])) return;
    char help[320];
    int summed = (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP) && d->server_optimizer == OPTIMIZER_KIND_SGD &&
                 d->workers > 1 && d->server_lr > 1.5 * t->lr / (double)d->workers;
    if (summed && d->hot_params == HOT_PARAMS_SUM)
        snprintf(help, sizeof help,
                 "the servers add up the workers' pushes, and together they overshot; --hot-params average "
                 "averages a sparse model's dense part (its bias, its dense layers), --server-lr %g (--lr over the "
                 "%zu workers) every parameter",
                 d->server_lr / (double)d->workers, d->workers);
    else if (summed)
        snprintf(help, sizeof help,
                 "the servers add up the workers' pushes, and together they overshot; --server-lr %g (--lr over "
                 "the %zu workers) averages them instead",
                 d->server_lr / (double)d->workers, d->workers);
    else
        snprintf(help, sizeof help, "the step was too large for this model; try a lower --lr (now %g)", t->lr);
    run_say(
        "asgd launch: the global model's test loss rose above the untrained model's (%.4g at epoch %.2f against "
        "%.4g; final %.4g): %s (summary.json: peak_test_loss)\n",
        peak->v[CURVE_TEST_LOSS], peak->v[CURVE_EPOCH], untrained->v[CURVE_TEST_LOSS],
        last ? last->v[CURVE_TEST_LOSS] : NAN, help);
}

int run_merge_dir(const char *dir, const train_args_t *t, const dist_args_t *d, const run_merge_info_t *info,
                  launch_job_outcome_t *outcome, char *err, size_t err_len) {
    run_results_t res;
    if (run_results_load(dir, d, &res, err, err_len) != 0) return -1;
    staleness_hist_t hc, hu;
    global_curve_t gc = {0};
    int rc = -1, rmse = train_args_model(t)->metric == METRIC_KIND_RMSE;
    if (merge_staleness(dir, &res, d->servers, &hc, &hu, err, err_len) != 0) goto out;
    curve_final_t fin;
    curve_final_of(&res, dist_slots(d), &hc, &hu, &fin);
    double train_examples = (double)res.workers[0].train_examples;
    if (global_curve_load(dir, d, train_examples, &fin, rmse, &gc, err, err_len) != 0) goto out;
    if (global_curve_write_merged(dir, &gc, d->workers, err, err_len) != 0) goto out;
    char why[600] = "";
    run_summary_t s = {&res, &gc, &hc, &hu, info, 1};
    if (d->servers > 0)
        s.consistent = dist_check_pushes_applied_once(dir, d->servers, d->workers, why, sizeof why) == 0;
    if (write_summaries(dir, t, d, &s, !outcome, err, err_len) != 0) goto out;
    if (!s.consistent) {
        snprintf(err, err_len, "%s", why);
        goto out;
    }
    if (outcome && outcome_of(&res, &gc, t, d, outcome, err, err_len) != 0) goto out;
    if (!outcome && !t->quiet) say_wait_hint(t, d, &res);
    if (!outcome && !t->quiet) say_period_hint(t, d, &res);
    if (!outcome && !t->quiet) say_divergence_hint(t, d, &gc);
    rc = 0;
out:
    global_curve_free(&gc);
    run_results_free(&res);
    return rc;
}

// ---- --save-model: the global model ----------------------------------------------

const char *run_merge_part_path(dist_role_t role, size_t id, const dist_args_t *d, const char *dir,
                                const char *save_model, char *buf, size_t len) {
    if (!save_model) return NULL;
    if (role == DIST_ROLE_SERVER)
        snprintf(buf, len, "%s/server-%zu.model", dir, id);
    else if (id != 0)
        return NULL;
    else if (dist_without_servers(d->sync))
        return save_model;
    else if (d->sync == SYNC_MODE_HYBRID)
        snprintf(buf, len, "%s/worker-0.model", dir);
    else
        return NULL;
    return buf;
}

int run_merge_model(const char *dir, const dist_args_t *d, const char *save_model, char *err, size_t err_len) {
    if (!save_model || dist_without_servers(d->sync)) return 0;
    size_t n = 0, max = d->servers + 1;
    char(*buf)[1024] = calloc(max, sizeof *buf);
    const char **paths = calloc(max, sizeof *paths);
    model_file_t f;
    model_file_init(&f);
    int rc = -1;
    if (!buf || !paths) {
        snprintf(err, err_len, "--save-model %s: out of memory", save_model);
        goto out;
    }
    if (d->sync == SYNC_MODE_HYBRID)
        paths[n] = run_merge_part_path(DIST_ROLE_WORKER, 0, d, dir, save_model, buf[n], sizeof buf[n]), n++;
    for (size_t k = 0; k < d->servers; k++)
        paths[n] = run_merge_part_path(DIST_ROLE_SERVER, k, d, dir, save_model, buf[n], sizeof buf[n]), n++;
    for (size_t i = 0; i < n; i++) {
        if (access(paths[i], R_OK) == 0) continue;
        snprintf(err, err_len,
                 "--save-model %s: %s is missing: its process wrote no part of the model (a run "
                 "launched without --save-model, or a server stopped before the end)",
                 save_model, paths[i]);
        goto out;
    }
    if (model_file_join(paths, n, &f, err, err_len) == 0)
        rc = model_file_write(save_model, "--save-model", &f.info, f.params, err, err_len);
out:
    model_file_free(&f);
    free(paths);
    free(buf);
    return rc;
}

size_t run_merge_missing(const char *dir, const dist_args_t *d, char *names, size_t len) {
    size_t missing = 0, at = 0;
    names[0] = '\0';
    for (size_t k = 0; k < d->servers + d->workers; k++) {
        int server = k < d->servers;
        size_t id = server ? k : k - d->servers;
        char path[1100];
        run_record_path(path, sizeof path, dir, server, id);
        if (access(path, R_OK) == 0) continue;
        if (at < len) {
            int w = snprintf(names + at, len - at, "%s%s %zu", missing ? ", " : "", server ? "server" : "worker", id);
            at += w > 0 ? (size_t)w : 0;
        }
        missing++;
    }
    return missing;
}

void run_merge_clear(const char *dir, const dist_args_t *d) {
    char path[1100];
    for (size_t k = 0; k < d->servers; k++) {
        run_record_path(path, sizeof path, dir, 1, k);
        unlink(path);
    }
    for (size_t k = 0; k < dist_slots(d); k++) {
        run_record_path(path, sizeof path, dir, 0, k);
        unlink(path);
        worker_live_path(path, sizeof path, dir, k);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/%s", dir, RUN_MERGE_INTERRUPTED);
    unlink(path);
}

int run_merge_mark_interrupted(const char *dir, int sig, char *err, size_t err_len) {
    FILE *f = dist_file_open(dir, RUN_MERGE_INTERRUPTED, err, err_len);
    if (!f) return -1;
    fprintf(f, "%d\n", sig);
    return dist_file_close(f, dir, RUN_MERGE_INTERRUPTED, err, err_len);
}

int run_merge_interrupted(const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, RUN_MERGE_INTERRUPTED);
    FILE *f = fopen(path, "r");
    int sig = 0;
    if (!f) return 0;
    if (fscanf(f, "%d", &sig) != 1 || sig <= 0) sig = 1;
    fclose(f);
    return sig;
}
