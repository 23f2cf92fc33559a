// asgd launch: every process of a distributed run, here or under a cluster launcher.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "engine/cli/commands.h"
#include "engine/cli/dist.h"            // defines: dist_args_t, dist_run_role
#include "engine/core/json_writer.h"     // defines: json_*
#include "engine/cli/launch_curve.h"    // defines: global_curve_load, global_curve_write_merged
#include "engine/cli/launch_job.h"      // defines: launch_job_outcome_t
#include "engine/cli/model_file.h"      // defines: model_file_join, model_file_write
#include "engine/cli/run_record.h"      // defines: run_record_read_worker, run_record_read_server
#include "kernels/mono_clock.h"  // defines: mono_clock_s
#include "kernels/trace.h"          // defines: trace_merge
#include "net/curve_auth.h"         // defines: zap_handler_destroy, curve_keypair_new
#include "net/wire.h"               // defines: wire_fresh_id
#include "net/ps_client.h"          // defines: ps_push_count_t
#include "net/launch_env.h"         // defines: launch_env_detect
#include "net/rendezvous.h"         // defines: rdv_server_new, rdv_server_answers
#include "staleness/histogram.h"    // defines: staleness_hist_t

#define ERR_LEN 512

static const char usage[] = "asgd launch [--servers M] [--workers N] [--threads T] [--sync bsp|ssp|asp|allreduce|hybrid|local] [train flags]";
static const char description[] =
    "Runs one model with N worker replicas (each T Hogwild threads) and M parameter-server shards.\n"
    "On its own it starts every process on this machine, shows their progress as one view, stops\n"
    "them all on Ctrl-C or when one fails (naming it), and merges their logs into --run-dir: a CSV\n"
    "and JSON per process, merged.csv, staleness.csv and summary.json. Under srun, mpirun or torchrun\n"
    "the same command runs as one rank: the first M ranks serve, the rest train, and rank 0 hosts the\n"
    "coordinator (--coordinator HOST:PORT; else torchrun's MASTER_ADDR at MASTER_PORT+1, or the first\n"
    "SLURM node, port 29517). Under a ps-lite tracker (DMLC_ROLE) the scheduler hosts it and merges\n"
    "the run directory, and servers and workers get their ids from it. See docs/launch.md.";

typedef struct child {
    pid_t pid;
    dist_role_t role;
    size_t id;
    int out_fd, err_fd;  // pipes from its stdout and stderr; -1 once closed
    char line[2][1024];  // partial lines being assembled
    size_t line_len[2];
    char last_err[1024];  // its last error line ("asgd ..."), not a progress line
    char save_path[1100];  // the --save-model part it writes (part_path)
    int status;
    int exited;
    int echo;  // show its lines on stderr (not under launch_job_run)
    int echo_stdout;  // ... its stdout's (its JSON) too (not under --quiet)
    const char *resume;  // a restarted server: the checkpoint directory it resumes from
    size_t replica;      // --server-replicas: which replica of its shard (0: the first primary)
    int replica_backup;  // ... started as a backup that copies the state of the shard's primary
    size_t answers_at_start;  // rdv_server_answers when this incarnation started: more later = it joined
    size_t early_failures;    // failures in a row before joining (restart_worker backs off, then gives up)
    int restart_due;          // it is to be started again at restart_at (restart_worker's back-off)
    double restart_at;
} child_t;

static volatile sig_atomic_t interrupted;  // the signal's number
static int progress_on_screen;  // a terminal shows an unfinished progress line
static void on_interrupt(int sig) { interrupted = sig; }

static const char *role_name(dist_role_t r) { return r == DIST_ROLE_SERVER ? "server" : "worker"; }

// ---- the run directory's merged files ---------------------------------------------

// Every process's result record (run_record.h), read once.
typedef struct run_results {
    worker_result_t *workers;  // [dist_slots(d)]: a joiner's slot nobody took is zeros
    server_result_t *servers;  // [d->servers]
    size_t n_servers;          // shard records held (to free)
    size_t joined, left;       // workers that joined the running run (--join); workers that left on a signal
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
            fprintf(f, "%zu,%llu,%llu\n", v, (unsigned long long)h_clocks->bins[v], (unsigned long long)h_updates->bins[v]);
    return dist_file_close(f, dir, "staleness.csv", err, err_len);
}

// One figure of the run: a number, or null when there is none.
static void json_number_or_null(json_writer_t *j, const char *key, double v) {
    if (isnan(v)) json_null(j, key);
    else json_number(j, key, v);
}

// The global model's time, samples and epochs to the target, and its final metric.
static void json_global_figures(json_writer_t *j, const global_curve_t *gc, double target, int rmse) {
    const curve_point_t *hit = global_curve_at_target(gc, target, rmse);
    const curve_point_t *last = global_curve_last(gc);
    json_number_or_null(j, rmse ? "final_test_rmse" : "final_test_accuracy",
                        last ? last->v[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY] : NAN);
    json_number_or_null(j, "final_test_loss", last ? last->v[CURVE_TEST_LOSS] : NAN);
    json_number_or_null(j, "time_to_target_s", hit ? hit->v[CURVE_WALL_S] : NAN);
    if (hit) json_uint(j, "samples_to_target", (uint64_t)hit->v[CURVE_SAMPLES]);
    else json_null(j, "samples_to_target");
    json_number_or_null(j, "epochs_to_target", hit ? hit->v[CURVE_EPOCH] : NAN);
    json_string(j, "global_curve", gc->source);
    json_uint(j, "global_evaluations", gc->evals);
    json_number(j, "global_eval_s", gc->eval_s);
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
    double launch_wall_s;
    int consistent;  // every acknowledged push applied once (servers only)
    const size_t *server_restarts;  // [d->servers] by the local launcher, or NULL: none
    size_t replica_restarts;        // --server-replicas: dead replicas started again by the local launcher
} run_summary_t;

// The run's shape: model, sync, processes, batch.
static void json_run_shape(json_writer_t *j, const train_args_t *t, const dist_args_t *d) {
    json_string(j, "asgd", ASGD_VERSION);
    json_string(j, "command", "launch");
    json_string(j, "model", train_args_model(t)->name);
    json_string(j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP || (d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse))
        json_uint(j, "staleness_bound", d->staleness);
    else if (d->sync == SYNC_MODE_BSP) json_uint(j, "staleness_bound", 0);
    else json_null(j, "staleness_bound");
    json_uint(j, "servers", d->servers);
    json_uint(j, "workers", d->workers);
    json_uint(j, "threads", t->threads);
    json_uint(j, "batch", t->batch);
    // Examples per round (or per step of every thread) over all workers.
    json_uint(j, "total_batch", (uint64_t)d->workers * t->threads * t->batch);
}

// Samples, time and rates over the workers; the global model's figures, and worker 0's own.
static void json_run_figures(json_writer_t *j, const train_args_t *t, const dist_args_t *d, const run_summary_t *s) {
    uint64_t samples = 0, pushes = 0, retrained = 0, skipped = 0;
    double wall = 0, wait = 0, own_rates = 0;
    for (size_t k = 0; k < dist_slots(d); k++) {
        const worker_result_t *w = &s->res->workers[k];
        samples += w->samples;
        if (w->wall_s > wall) wall = w->wall_s;
        wait += w->wait_s;
        own_rates += w->samples_per_s;
        pushes += w->pushes;
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
    json_number(j, "launch_wall_s", s->launch_wall_s);
    // The global model's figures (launch_curve.h says where its curve comes
    // from); worker 0's own copy's, named as such.
    json_global_figures(j, s->gc, train_args_target(t), rmse);
    json_number_or_null(j, rmse ? "worker0_test_rmse" : "worker0_test_accuracy", w0->final_test_metric);
    json_number_or_null(j, "worker0_time_to_target_s", w0->time_to_target_s);
    json_number_or_null(j, "worker0_samples_to_target",
                        isnan(w0->time_to_target_s) ? NAN : (double)w0->samples_to_target);
    json_number(j, "worker_wait_s", wait);
    json_uint(j, "pushes", pushes);
}

// Bytes each worker sent and received (payloads), and what its sends would
// have been as float32: the compression ratio is their quotient.
static void json_run_bytes(json_writer_t *j, const dist_args_t *d, const run_results_t *res) {
    double out_total = 0, in_total = 0, raw_total = 0;
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
        out_total += o, in_total += i, raw_total += raw;
    }
    json_object_end(j);
    json_number(j, "bytes_out", out_total);
    json_number(j, "bytes_in", in_total);
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
    if (train_examples > 0) json_uint(j, "train_examples", train_examples);
    else json_null(j, "train_examples");
    json_uint(j, "epochs", t->epochs);
    json_uint(j, "batch", t->batch);
    json_number(j, "lr", t->lr);
    json_uint(j, "seed", t->seed);
    json_number(j, "time_limit_s", t->time_limit);
    json_number(j, "target", train_args_target(t));
    json_string(j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP) json_uint(j, "staleness", d->staleness);
    else json_null(j, "staleness");  // the bound exists under ssp only
    json_uint(j, "push_every", d->push_every);
    json_uint(j, "fetch_every", d->fetch_every);
    json_string(j, "server_optimizer", d->server_optimizer ? "adagrad" : "sgd");
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
    json_string(j, "device", t->device ? "cuda" : "cpu");
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
        uint64_t n = s->server_restarts ? s->server_restarts[k] : 0;
        json_uint(j, key, n);
        restarts += n;
    }
    json_object_end(j);
    json_uint(j, "server_restarts", restarts);
    json_uint(j, "server_replica_restarts", s->replica_restarts);
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
    json_run_figures(&j, t, d, s);
    json_run_bytes(&j, d, s->res);
    if (d->servers) {  // elastic membership (docs/reliability.md)
        json_uint(&j, "max_workers", dist_slots(d));
        json_uint(&j, "workers_joined", s->res->joined);
        json_uint(&j, "workers_left", s->res->left);
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
    if (!with_stdout) return 0;
    write_summary(stdout, dir, t, d, s);
    fflush(stdout);
    return 0;
}

// Merges the run directory from every process's result record: staleness.csv,
// merged.csv and summary.json. The run fails when an acknowledged push was not
// applied exactly once (the summary says so first).
// The outcome's figures and curve: the global model's, as summary.json has them.
static int outcome_of(const run_results_t *res, const global_curve_t *gc, const train_args_t *t,
                      const dist_args_t *d, launch_job_outcome_t *o, char *err, size_t err_len) {
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

static int finish_run_dir(const char *dir, const train_args_t *t, const dist_args_t *d, double launch_wall_s,
                          const size_t *server_restarts, size_t replica_restarts, launch_job_outcome_t *outcome,
                          char *err, size_t err_len) {
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
    run_summary_t s = {&res, &gc, &hc, &hu, launch_wall_s, 1, server_restarts, replica_restarts};
    if (d->servers > 0) s.consistent = dist_check_pushes_applied_once(dir, d->servers, d->workers, why, sizeof why) == 0;
    if (write_summaries(dir, t, d, &s, !outcome, err, err_len) != 0) goto out;
    if (!s.consistent) {
        snprintf(err, err_len, "%s", why);
        goto out;
    }
    if (outcome && outcome_of(&res, &gc, t, d, outcome, err, err_len) != 0) goto out;
    rc = 0;
out:
    global_curve_free(&gc);
    run_results_free(&res);
    return rc;
}

// ---- --save-model: the global model ----------------------------------------------

// Where process (role, id) writes its part of the run's model under
// --save-model, or NULL: each server its final shard, in the run directory;
// worker 0 the user's file under allreduce (every replica holds the global
// model), or under hybrid its replica in the run directory (whose sparse part
// the servers' shards then replace).
static const char *part_path(dist_role_t role, size_t id, const dist_args_t *d, const char *dir, const char *save_model,
                             char *buf, size_t len) {
    if (!save_model) return NULL;
    if (role == DIST_ROLE_SERVER) snprintf(buf, len, "%s/server-%zu.model", dir, id);
    else if (id != 0) return NULL;
    else if (dist_without_servers(d->sync)) return save_model;
    else if (d->sync == SYNC_MODE_HYBRID) snprintf(buf, len, "%s/worker-0.model", dir);
    else return NULL;
    return buf;
}

// --trace: the timeline process (role, id) writes in the run directory.
static void trace_part_path(char *out, size_t len, const char *dir, dist_role_t role, size_t id) {
    snprintf(out, len, "%s/trace-%s-%zu.json", dir, role_name(role), id);
}

// --trace FILE: every process's timeline merged into FILE (docs/trace.md).
// A process that left none (it was stopped) is named on stderr and left out.
static int merge_traces(const char *dir, const dist_args_t *d, const char *out, int quiet, char *err, size_t err_len) {
    size_t n = d->servers + d->workers;
    char (*paths)[600] = calloc(n, sizeof *paths);
    const char **list = calloc(n, sizeof *list);
    int rc = -1;
    if (!paths || !list) {
        snprintf(err, err_len, "--trace: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        trace_part_path(paths[i], sizeof paths[i], dir, i < d->servers ? DIST_ROLE_SERVER : DIST_ROLE_WORKER,
                        i < d->servers ? i : i - d->servers);
        list[i] = paths[i];
    }
    size_t missing = 0;
    if (trace_merge(out, list, n, &missing, "--trace", err, err_len) != 0) goto out;
    if (missing && !quiet)
        fprintf(stderr, "asgd launch: --trace %s: %zu of %zu processes left no timeline\n", out, missing, n);
    rc = 0;
out:
    free(paths);
    free(list);
    return rc;
}

// After the run: the parts joined in order into the user's file.
static int save_global_model(const char *dir, const dist_args_t *d, const char *save_model, char *err,
                             size_t err_len) {
    if (!save_model || dist_without_servers(d->sync)) return 0;
    size_t n = 0, max = d->servers + 1;
    char (*buf)[1024] = calloc(max, sizeof *buf);
    const char **paths = calloc(max, sizeof *paths);
    model_file_t f;
    model_file_init(&f);
    int rc = -1;
    if (!buf || !paths) {
        snprintf(err, err_len, "--save-model %s: out of memory", save_model);
        goto out;
    }
    if (d->sync == SYNC_MODE_HYBRID)
        paths[n] = part_path(DIST_ROLE_WORKER, 0, d, dir, save_model, buf[n], sizeof buf[n]), n++;
    for (size_t k = 0; k < d->servers; k++)
        paths[n] = part_path(DIST_ROLE_SERVER, k, d, dir, save_model, buf[n], sizeof buf[n]), n++;
    if (model_file_join(paths, n, &f, err, err_len) == 0)
        rc = model_file_write(save_model, "--save-model", &f.info, f.params, err, err_len);
out:
    model_file_free(&f);
    free(paths);
    free(buf);
    return rc;
}

// ---- local launch ----------------------------------------------------------------

// Whether a child's stderr line is one of its messages ("asgd worker 1: ...",
// "asgd server: ...", "exec ... failed"), which may say why it failed, rather
// than an evaluation or progress line, which never does.
static int is_error_line(const char *line) {
    return strncmp(line, "asgd ", 5) == 0 || strncmp(line, "exec ", 5) == 0;
}

// Shows a child's output line by line, prefixed with who wrote it.
static void pump_child(child_t *c, int which) {
    int fd = which == 0 ? c->out_fd : c->err_fd;
    char buf[4096];
    ssize_t got = read(fd, buf, sizeof buf);
    if (got <= 0) {
        if (got < 0 && errno == EINTR) return;
        close(fd);
        if (which == 0) c->out_fd = -1;
        else c->err_fd = -1;
        got = 0;
    }
    for (ssize_t i = 0; i <= got; i++) {
        int end = i == got;
        if (end && got > 0) break;
        char ch = end ? '\n' : buf[i];
        if (ch == '\r') ch = '\n';
        if (ch != '\n' && c->line_len[which] < sizeof c->line[which] - 1) {
            c->line[which][c->line_len[which]++] = ch;
            continue;
        }
        if (ch != '\n') continue;
        if (c->line_len[which] == 0) continue;
        c->line[which][c->line_len[which]] = '\0';
        if (which == 1 && is_error_line(c->line[which])) snprintf(c->last_err, sizeof c->last_err, "%s", c->line[which]);
        if (c->echo && (which == 1 || c->echo_stdout)) {
            if (progress_on_screen) fputs("\r\033[K", stderr);  // the progress line is redrawn at its next tick
            progress_on_screen = 0;
            fprintf(stderr, "[%s %zu] %s\n", role_name(c->role), c->id, c->line[which]);
        }
        c->line_len[which] = 0;
    }
}

static int spawn(child_t *c, const char *exe, char **args, char **envp) {
    int out[2], errp[2];
    if (pipe(out) != 0) return -1;
    if (pipe(errp) != 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        // The child dies with the launcher, however the launcher ends (SIGKILL
        // included); a launcher gone before the prctl shows as a new parent.
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
        dup2(out[1], STDOUT_FILENO);
        dup2(errp[1], STDERR_FILENO);
        close(out[0]);
        close(out[1]);
        close(errp[0]);
        close(errp[1]);
        signal(SIGINT, SIG_IGN);  // Ctrl-C goes to the launcher, which stops everyone in order
        execve(exe, args, envp);
        fprintf(stderr, "exec %s failed: %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(errp[1]);
    c->pid = pid;
    c->out_fd = out[0];
    c->err_fd = errp[0];
    return 0;
}

// Is argv[i] the launcher-only flag `name` (as "--name V" or "--name=V")? Sets *skip to its word count.
static int is_flag(char **argv, int argc, int i, const char *name, int *skip) {
    size_t n = strlen(name);
    if (strncmp(argv[i], name, n) != 0) return 0;
    if (argv[i][n] == '=') {
        *skip = 1;
        return 1;
    }
    if (argv[i][n] == '\0') {
        *skip = i + 1 < argc ? 2 : 1;
        return 1;
    }
    return 0;
}

static void stop_children(child_t *kids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (kids[i].pid > 0 && !kids[i].exited) kill(kids[i].pid, SIGTERM);
    // Give them two seconds to leave cleanly, then insist.
    for (int tries = 0; tries < 40; tries++) {
        int alive = 0;
        for (size_t i = 0; i < n; i++) {
            if (kids[i].pid <= 0 || kids[i].exited) continue;
            int st;
            if (waitpid(kids[i].pid, &st, WNOHANG) == kids[i].pid) {
                kids[i].exited = 1;
                kids[i].status = st;
            } else {
                alive = 1;
            }
        }
        if (!alive) return;
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (kids[i].pid > 0 && !kids[i].exited) {
            kill(kids[i].pid, SIGKILL);
            waitpid(kids[i].pid, &kids[i].status, 0);
            kids[i].exited = 1;
        }
    }
}

static void describe_exit(int status, char *out, size_t len) {
    if (WIFEXITED(status)) snprintf(out, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(out, len, "status %d", status);
}

// Starts (or restarts) child c with the launcher's own flags replaced by its
// role, id and the run's coordinator, run id and directory.
static int spawn_child(child_t *c, const char *exe, char **args, char **envp, int argc, char **argv,
                       const dist_args_t *d, const char *coordinator, const char *dir, const char *save_model,
                       char *id_text) {
    size_t a = 0;
    char trace_path[600];
    int traced = 0;  // --trace: each child its own timeline in the run directory
    args[a++] = (char *)exe;
    args[a++] = (char *)role_name(c->role);
    for (int k = 0; k < argc; k++) {
        int skip = 0;
        if (is_flag(argv, argc, k, "--run-dir", &skip) || is_flag(argv, argc, k, "--save-model", &skip) ||
            is_flag(argv, argc, k, "--coordinator", &skip) || is_flag(argv, argc, k, "--run-id", &skip) ||
            is_flag(argv, argc, k, "--restart-workers", &skip) || is_flag(argv, argc, k, "--config", &skip) ||
            is_flag(argv, argc, k, "--progress-every", &skip) || is_flag(argv, argc, k, "--restart-servers", &skip)) {
            k += skip - 1;
            continue;
        }
        if (is_flag(argv, argc, k, "--trace", &skip)) {
            traced = 1;
            k += skip - 1;
            continue;
        }
        args[a++] = argv[k];
    }
    snprintf(id_text, 32, "%zu", c->id);
    args[a++] = "--id";
    args[a++] = id_text;
    args[a++] = "--coordinator";
    args[a++] = (char *)coordinator;
    args[a++] = "--run-dir";
    args[a++] = (char *)dir;
    // Every process is on this machine: the ring is faster over ipc:// (docs/allreduce.md).
    if (dist_uses_ring(d->sync) && !d->ring_ipc) args[a++] = "--ring-ipc";
    const char *part = part_path(c->role, c->id, d, dir, save_model, c->save_path, sizeof c->save_path);
    if (part) {
        args[a++] = "--save-model";
        args[a++] = (char *)part;
    }
    if (c->resume) {
        args[a++] = "--resume";
        args[a++] = (char *)c->resume;
    }
    char replica_text[24];
    if (d->server_replicas > 1 && c->role == DIST_ROLE_SERVER) {
        snprintf(replica_text, sizeof replica_text, "%zu", c->replica);
        args[a++] = "--replica";
        args[a++] = replica_text;
        if (c->replica_backup) args[a++] = "--replica-backup";
    }
    if (traced) {
        trace_part_path(trace_path, sizeof trace_path, dir, c->role, c->id);
        args[a++] = "--trace";
        args[a++] = trace_path;
    }
    args[a] = NULL;
    return spawn(c, exe, args, envp);
}

// One local run: the coordinator here, every process a child of this one.
typedef struct local_run {
    const train_args_t *t;
    const dist_args_t *d;
    int argc;
    char **argv;
    const char *save_model;
    size_t restart_workers;
    size_t restart_servers, server_restarts_done;
    size_t replica_restarts;  // --server-replicas: dead replicas started again as backups
    size_t *server_restarts;  // [d->servers]: each shard's restarts, for the summary
    char ckpt_dir[512];       // where the servers checkpoint: --checkpoint-dir, else the run directory
    char dir[512];
    void *ctx;
    zap_handler_t *zap;
    rdv_server_t *rdv;
    char coordinator_bind[300];  // where the coordinator listens: --coordinator's port, else any
    char coordinator[256], id_text[32];
    // The children's environment: ours, and the run id and key pair (DIST_ENV_*),
    // which stay off their command lines.
    char **envp;
    char env_run_id[64], env_public[96], env_secret[96];
    curve_key_t key_public, key_secret;  // the run's throwaway pair (d->run_key_*), unless --curve-server-key or --insecure
    char exe[4096];
    child_t *kids;
    char **args;           // a child's command line, built by spawn_child
    size_t n_kids, started, running, restarts;
    const child_t *culprit; // the child whose failure stopped the run
    launch_job_outcome_t *outcome;  // launch_job_run: nothing on stderr, the first failure in err, figures here
    double progress_every;  // seconds between progress lines (0: none, --quiet)
    int progress_tty;       // stderr is a terminal: one line rewritten in place
    double next_progress;   // when the next one is due
    char err[ERR_LEN];
} local_run_t;

// "asgd launch: <what>" on stderr, or under launch_job_run the first such
// message kept in r->err.
__attribute__((format(printf, 2, 3))) static void launch_say(local_run_t *r, const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!r->outcome) fprintf(stderr, "asgd launch: %s\n", msg);
    else if (!r->err[0]) snprintf(r->err, sizeof r->err, "%s", msg);
}

// The run directory: --run-dir, else runs/launch-DATE-TIME-PID. Returns 0, or 1 after saying why.
static int local_run_dir(local_run_t *r) {
    char err[ERR_LEN];
    if (r->d->run_dir) {
        snprintf(r->dir, sizeof r->dir, "%s", r->d->run_dir);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        mkdir("runs", 0777);
        snprintf(r->dir, sizeof r->dir, "runs/launch-%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
    }
    if (dist_check_writable_dir(r->dir, "--run-dir", err, sizeof err) != 0 ||
        train_args_write_run_config(r->t, r->dir, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    return 0;
}

extern char **environ;

// The children's environment: this process's, less any DIST_ENV_* of its own,
// plus the run's. Returns 0 or -1 (out of memory).
static int local_run_env(local_run_t *r) {
    size_t n = 0;
    while (environ[n]) n++;
    if (!(r->envp = calloc(n + 4, sizeof *r->envp))) return -1;
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ASGD_LAUNCH_", 12) != 0) r->envp[e++] = environ[i];
    r->envp[e++] = r->env_run_id;
    if (r->d->run_key_secret) {
        snprintf(r->env_public, sizeof r->env_public, DIST_ENV_KEY_PUBLIC "=%s", r->d->run_key_public);
        snprintf(r->env_secret, sizeof r->env_secret, DIST_ENV_KEY_SECRET "=%s", r->d->run_key_secret);
        r->envp[e++] = r->env_public;
        r->envp[e++] = r->env_secret;
    }
    r->envp[e] = NULL;
    return 0;
}

// DIR/join, for asgd worker --join --run-dir DIR: the coordinator, the run id
// and the run's key pair (when it has one); owner-only, created so.
static int local_run_write_join(local_run_t *r, uint64_t run_id, char *err, size_t err_len) {
    char path[1100];
    snprintf(path, sizeof path, "%s/join", r->dir);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        snprintf(err, err_len, "%.300s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "coordinator %s\nrun_id %llu\n", rdv_server_endpoint(r->rdv), (unsigned long long)run_id);
    if (r->d->run_key_secret) fprintf(f, "curve_public %s\ncurve_secret %s\n", r->d->run_key_public, r->d->run_key_secret);
    if (fclose(f) != 0) {
        snprintf(err, err_len, "%.300s: writing failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

// The coordinator (with a fresh run id, so that a straggler from an earlier
// run is refused), this program's path and the children's table. Returns 0,
// or 1 after saying why.
static int local_run_start(local_run_t *r) {
    char err[ERR_LEN] = "";
    if (!(r->ctx = zmq_ctx_new())) {
        launch_say(r, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        return 1;
    }
    // The coordinator meets the primaries and the workers; backups (after the
    // workers in kids) find their primary through the run directory.
    size_t ranks = r->d->servers + r->d->workers;
    r->n_kids = ranks + r->d->servers * (r->d->server_replicas - 1);
    uint64_t run_id = wire_fresh_id(r);
    // The children get the --curve-* flags too: the coordinator here speaks as they do.
    if (dist_security_start(r->d, r->ctx, &r->zap, err, sizeof err) != 0 ||
        !(r->rdv = rdv_server_new_elastic(r->ctx, r->coordinator_bind, ranks + dist_slots(r->d) - r->d->workers,
                                          ranks, run_id, err, sizeof err))) {
        launch_say(r, "starting the coordinator: %s", err);
        return 1;
    }
    if (dist_slots(r->d) > r->d->workers && local_run_write_join(r, run_id, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    snprintf(r->coordinator, sizeof r->coordinator, "%s", rdv_server_endpoint(r->rdv));
    snprintf(r->env_run_id, sizeof r->env_run_id, DIST_ENV_RUN_ID "=%llu", (unsigned long long)run_id);
    if (local_run_env(r) != 0) {
        launch_say(r, "out of memory");
        return 1;
    }
    ssize_t len = readlink("/proc/self/exe", r->exe, sizeof r->exe - 1);
    if (len <= 0) {
        launch_say(r, "cannot find this program's path (/proc/self/exe): %s", strerror(errno));
        return 1;
    }
    r->exe[len] = '\0';
    r->kids = calloc(r->n_kids, sizeof *r->kids);
    r->args = calloc((size_t)r->argc + 24, sizeof *r->args);  // the flags, and up to 11 pairs of its own
    r->server_restarts = calloc(r->d->servers + 1, sizeof *r->server_restarts);
    snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", r->t->checkpoint_dir ? r->t->checkpoint_dir : r->dir);
    if (!r->kids || !r->args || !r->server_restarts) {
        launch_say(r, "out of memory");
        return 1;
    }
    return 0;
}

static void local_run_free(local_run_t *r) {
    for (size_t i = 0; i < r->started; i++) {
        if (r->kids[i].out_fd >= 0) close(r->kids[i].out_fd);
        if (r->kids[i].err_fd >= 0) close(r->kids[i].err_fd);
    }
    free(r->kids);
    free(r->args);
    free(r->server_restarts);
    free(r->envp);
    memset(r->env_secret, 0, sizeof r->env_secret);
    memset(&r->key_secret, 0, sizeof r->key_secret);
    rdv_server_destroy(&r->rdv);
    zap_handler_destroy(&r->zap);
    if (r->ctx) zmq_ctx_term(r->ctx);
}

static int local_spawn(local_run_t *r, child_t *c) {
    c->answers_at_start = rdv_server_answers(r->rdv, c->role == DIST_ROLE_SERVER ? c->id : r->d->servers + c->id);
    return spawn_child(c, r->exe, r->args, r->envp, r->argc, r->argv, r->d, r->coordinator, r->dir, r->save_model,
                       r->id_text);
}

// Servers first, then workers. Returns 0, or -1 after naming the one that did not start.
static int spawn_all(local_run_t *r) {
    for (size_t i = 0; i < r->n_kids; i++) {
        child_t *c = &r->kids[i];
        size_t ranks = r->d->servers + r->d->workers, backups = r->d->server_replicas - 1;
        c->role = i < r->d->servers || i >= ranks ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
        c->id = i < r->d->servers ? i : i < ranks ? i - r->d->servers : (i - ranks) / backups;
        c->replica = i < ranks ? 0 : 1 + (i - ranks) % backups;
        c->replica_backup = i >= ranks;
        c->out_fd = c->err_fd = -1;
        c->echo = !r->outcome;
        c->echo_stdout = !r->t->quiet;
        if (local_spawn(r, c) != 0) {
            launch_say(r, "starting %s %zu: %s", role_name(c->role), c->id, strerror(errno));
            return -1;
        }
        r->started++;
    }
    r->running = r->started;
    return 0;
}

// Shows what the children wrote (waiting up to 100 ms for it).
static void pump_output(local_run_t *r) {
    struct pollfd fds[2 * 64];
    child_t *owner[2 * 64];
    int which[2 * 64];
    nfds_t nf = 0;
    for (size_t i = 0; i < r->started && nf + 2 <= 2 * 64; i++) {
        child_t *c = &r->kids[i];
        if (c->out_fd >= 0) {
            fds[nf] = (struct pollfd){c->out_fd, POLLIN, 0};
            owner[nf] = c;
            which[nf++] = 0;
        }
        if (c->err_fd >= 0) {
            fds[nf] = (struct pollfd){c->err_fd, POLLIN, 0};
            owner[nf] = c;
            which[nf++] = 1;
        }
    }
    if (nf == 0) {
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        return;
    }
    int rc = poll(fds, nf, 100);
    for (nfds_t f = 0; rc > 0 && f < nf; f++)
        if (fds[f].revents) pump_child(owner[f], which[f]);
}

// A worker that fails before joining the run (it never got the rendezvous
// table) is started again after RESTART_BACKOFF_S, doubled at each such
// failure in a row, and given up after RESTART_EARLY_FAILURES of them: it
// would only fail the same way again.
#define RESTART_BACKOFF_S 0.5
#define RESTART_EARLY_FAILURES 3

// A failed worker is started again, with the same command: it rejoins the run
// at the clock the servers give it (not under allreduce or hybrid: their ring
// cannot take a member back), at most --restart-workers times; one that
// failed before joining, after a back-off (start_due_restarts). Returns 0
// when it was (or will be).
static int restart_worker(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_WORKER || dist_uses_ring(r->d->sync) || r->restarts >= r->restart_workers) return -1;
    char how[128];
    describe_exit(c->status, how, sizeof how);
    int joined = rdv_server_answers(r->rdv, r->d->servers + c->id) > c->answers_at_start;
    c->early_failures = joined ? 0 : c->early_failures + 1;
    if (c->early_failures >= RESTART_EARLY_FAILURES) {
        launch_say(r, "worker %zu failed %zu times in a row before joining the run: not restarting it again",
                   c->id, c->early_failures);
        return -1;
    }
    double wait_s = joined ? 0 : RESTART_BACKOFF_S * (double)(1u << (c->early_failures - 1));
    r->restarts++;
    // Under asp and ssp a worker that checkpoints goes on from its last checkpoint.
    char ckpt[1100] = "";
    if (r->t->checkpoint_every > 0 && (r->d->sync == SYNC_MODE_ASP || r->d->sync == SYNC_MODE_SSP) && !r->t->device) {
        snprintf(ckpt, sizeof ckpt, "%s/worker-%zu.ckpt", r->ckpt_dir, c->id);
        if (access(ckpt, R_OK) == 0) c->resume = r->ckpt_dir;
        else ckpt[0] = '\0';
    }
    if (!r->outcome) {
        char when[64] = "", from[1120] = "";
        if (!joined) snprintf(when, sizeof when, " in %g s (it had not joined the run)", wait_s);
        if (ckpt[0]) snprintf(from, sizeof from, " from %s", ckpt);
        fprintf(stderr, "asgd launch: worker %zu (pid %d) failed: %s; restarting it%s%s (restart %zu of at most %zu)\n",
                c->id, (int)c->pid, how, from, when, r->restarts, r->restart_workers);
    }
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
    if (!joined) {
        c->restart_due = 1;  // stays exited until then
        c->restart_at = mono_clock_s() + wait_s;
        return 0;
    }
    c->exited = 0;
    if (local_spawn(r, c) == 0) return 0;
    c->exited = 1;
    return -1;
}

// Starts the workers whose back-off has passed. Returns -1 when one did not
// start (r->culprit), else 0.
static int start_due_restarts(local_run_t *r) {
    double now = mono_clock_s();
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        if (!c->restart_due || now < c->restart_at) continue;
        c->restart_due = 0;
        c->exited = 0;
        if (local_spawn(r, c) != 0) {
            c->exited = 1;
            launch_say(r, "restarting worker %zu: %s", c->id, strerror(errno));
            r->culprit = c;
            return -1;
        }
    }
    return 0;
}

// A failed server is started again from its last checkpoint (--resume), at
// most --restart-servers times in all: it binds the endpoint it had, its
// workers reconnect by themselves and resend what it had not answered, and
// it counts the pushes it had applied after that checkpoint, lost. Returns 0
// when it was; -1 (after saying why, when the flag is on) when not.
static int restart_server(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_SERVER || r->restart_servers == 0) return -1;
    if (r->server_restarts_done >= r->restart_servers) {
        launch_say(r, "server %zu failed again: --restart-servers %zu used up", c->id, r->restart_servers);
        return -1;
    }
    char ckpt[1100], how[128];
    snprintf(ckpt, sizeof ckpt, "%s/server-%zu.ckpt", r->ckpt_dir, c->id);
    if (access(ckpt, R_OK) != 0) {
        launch_say(r, "server %zu failed before its first checkpoint (%s: %s): nothing to restart it from", c->id,
                   ckpt, strerror(errno));
        return -1;
    }
    describe_exit(c->status, how, sizeof how);
    r->server_restarts_done++;
    if (!r->outcome)
        fprintf(stderr, "asgd launch: server %zu (pid %d) failed: %s; restarting it from %s (restart %zu of at most "
                        "%zu)\n", c->id, (int)c->pid, how, ckpt, r->server_restarts_done, r->restart_servers);
    c->exited = 0;
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
    c->resume = r->ckpt_dir;
    if (local_spawn(r, c) == 0) {
        r->server_restarts[c->id]++;
        return 0;
    }
    c->exited = 1;
    return -1;
}

// --server-replicas: a dead replica is started again as a backup, which copies
// the state of its shard's live replica and rejoins (net/ps_replica.h); a run
// gives up after REPLICA_RESTARTS_MAX such restarts in all.
#define REPLICA_RESTARTS_MAX 16
static int restart_replica(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_SERVER || r->d->server_replicas < 2 || r->replica_restarts >= REPLICA_RESTARTS_MAX)
        return -1;
    char how[128];
    describe_exit(c->status, how, sizeof how);
    r->replica_restarts++;
    if (!r->outcome)
        fprintf(stderr, "asgd launch: server %zu replica %zu (pid %d) failed: %s; restarting it as a backup (replica "
                        "restart %zu)\n", c->id, c->replica, (int)c->pid, how, r->replica_restarts);
    c->exited = 0;
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
    c->replica_backup = 1;
    if (local_spawn(r, c) == 0) return 0;
    c->exited = 1;
    return -1;
}

// Collects the children that ended. Returns -1 when one failed for good (r->culprit), else 0.
static int reap_children(local_run_t *r) {
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        int st;
        if (c->exited || waitpid(c->pid, &st, WNOHANG) != c->pid) continue;
        // Show what it still had to say.
        while (c->err_fd >= 0) pump_child(c, 1);
        while (c->out_fd >= 0) pump_child(c, 0);
        c->exited = 1;
        c->status = st;
        r->running--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        if (restart_worker(r, c) == 0 || restart_replica(r, c) == 0 || restart_server(r, c) == 0) {
            r->running++;
            continue;
        }
        r->culprit = c;
        return -1;
    }
    return 0;
}

// ---- the live progress line ----------------------------------------------------------

// The last complete row of a curve file (the run directory's CSVs: global.csv's
// columns, or a worker's first ten of them) into v[0..n) (NaN: empty or
// missing). Reads the file's last 4 KiB only. Returns 1 when there was a row.
static int last_curve_row(const char *path, double *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = NAN;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[4097];
    long at = 0;
    if (fseek(f, 0, SEEK_END) == 0 && (at = ftell(f)) > 4096) fseek(f, at - 4096, SEEK_SET);
    else rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    char *end = strrchr(buf, '\n');  // a row being written has no newline yet
    if (!end) return 0;
    *end = '\0';
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    if (!(*line >= '0' && *line <= '9')) return 0;  // the header: no row yet
    for (size_t i = 0; i < n && line; i++) {
        if (*line != ',' && *line) v[i] = strtod(line, NULL);
        line = strchr(line, ',');
        if (line) line++;
    }
    return 1;
}

// The last "global" row of merged.csv (process, then the curve's columns) into
// v[0..n); v is left as it is when there is none.
static void last_global_row(const char *path, double *v, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "global,", 7) == 0) memcpy(last, line, sizeof last);
    fclose(f);
    if (!last[0]) return;
    const char *p = last + 7;
    for (size_t i = 0; i < n && p; i++) {
        v[i] = *p != ',' && *p != '\n' && *p ? strtod(p, NULL) : NAN;
        p = strchr(p, ',');
        if (p) p++;
    }
}

// The run's progress from the files its processes keep in the run directory:
// the workers' own rows (samples, rates) and the global model's latest
// evaluation (global-progress.csv, written beside shard 0; under allreduce,
// hybrid and local, worker 0's rows are the global model's). The final line,
// once the run directory is merged, shows the global model's last row of
// merged.csv: the closing pull, with the staleness of the whole run. Returns 0
// when there is nothing to show yet.
static int progress_text(const local_run_t *r, int final, char *out, size_t len) {
    const dist_args_t *d = r->d;
    double samples = 0, rate = 0, wall = 0, w[CURVE_N_COLUMNS], g[CURVE_N_COLUMNS];
    size_t rows = 0;
    for (size_t k = 0; k < d->workers; k++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/worker-%zu.csv", r->dir, k);
        if (!last_curve_row(path, w, CURVE_N_COLUMNS)) continue;
        rows++;
        if (isfinite(w[CURVE_SAMPLES])) samples += w[CURVE_SAMPLES];
        if (isfinite(w[CURVE_SAMPLES_PER_S])) rate += w[CURVE_SAMPLES_PER_S];
        if (w[CURVE_WALL_S] > wall) wall = w[CURVE_WALL_S];
        if (k == 0) memcpy(g, w, sizeof g);
    }
    if (rows == 0) return 0;
    if (dist_global_on_servers(d->sync)) {
        char path[1100];
        snprintf(path, sizeof path, "%s/global-progress.csv", r->dir);
        last_curve_row(path, g, CURVE_N_COLUMNS);
    }
    if (final) {
        char path[1100];
        snprintf(path, sizeof path, "%s/merged.csv", r->dir);
        last_global_row(path, g, CURVE_N_COLUMNS);
    }
    int rmse = train_args_model(r->t)->metric == METRIC_KIND_RMSE;
    double metric = g[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY];
    int at = snprintf(out, len, "asgd launch: %.1f s of training, %.0f samples, %.0f samples/s over %zu workers, global %s ",
                      wall, samples, rate, rows, rmse ? "test_rmse" : "test_acc");
    if (at < 0 || (size_t)at >= len) return 1;
    at += isfinite(metric) ? snprintf(out + at, len - (size_t)at, "%.4f", metric)
                           : snprintf(out + at, len - (size_t)at, "-");
    if (at < 0 || (size_t)at >= len) return 1;
    if (isfinite(g[CURVE_STALENESS_VERSIONS_MEAN]))
        at += snprintf(out + at, len - (size_t)at, ", staleness %.2f", g[CURVE_STALENESS_VERSIONS_MEAN]);
    if (at >= 0 && (size_t)at < len && dist_global_on_servers(d->sync) && isfinite(g[CURVE_WAIT_S]))
        snprintf(out + at, len - (size_t)at, ", wait %.2f s", g[CURVE_WAIT_S]);
    return 1;
}

// Shows the progress line when it is due (or, final, at once: the run's last
// figures, ending the line on a terminal).
static void progress_tick(local_run_t *r, int final) {
    if (r->progress_every <= 0) return;
    double now = mono_clock_s();
    if (!final && now < r->next_progress) return;
    r->next_progress = now + r->progress_every;
    char line[400];
    if (!progress_text(r, final, line, sizeof line)) return;
    if (r->progress_tty) {
        fprintf(stderr, "\r\033[K%s%s", line, final ? "\n" : "");
        progress_on_screen = !final;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

// Until every child has ended, one failed, or a signal came. Returns 0 when all ended well.
static int supervise(local_run_t *r) {
    while (r->running > 0 && !interrupted) {
        pump_output(r);
        if (reap_children(r) != 0 || start_due_restarts(r) != 0) return -1;
        progress_tick(r, 0);
    }
    return 0;
}

// The exit status: 128 + the signal, 1 when a child failed (naming it) or the
// merge did, else 0 with the run directory merged.
static int local_run_outcome(local_run_t *r, int failed, double t0) {
    char err[ERR_LEN] = "";
    if (interrupted) {
        launch_say(r, "interrupted by signal %d (%s); stopping every process", (int)interrupted,
                strsignal(interrupted));
        stop_children(r->kids, r->started);
        return 128 + interrupted;
    }
    if (failed) {
        stop_children(r->kids, r->started);
        const child_t *c = r->culprit;
        if (c) {
            char how[128];
            describe_exit(c->status, how, sizeof how);
            // A process killed by a signal said nothing about it: its last
            // message (a note from its start) is not the cause.
            const char *why = WIFEXITED(c->status) ? c->last_err : "";
            launch_say(r, "%s %zu (pid %d) failed: %s%s%s; stopped the others", role_name(c->role),
                    c->id, (int)c->pid, how, why[0] ? ": " : "", why);
        }
        return 1;
    }
    if (rdv_server_wait(r->rdv, 1000, err, sizeof err) != 0 ||
        finish_run_dir(r->dir, r->t, r->d, mono_clock_s() - t0, r->server_restarts, r->replica_restarts, r->outcome,
                       err, sizeof err) != 0 ||
        save_global_model(r->dir, r->d, r->save_model, err, sizeof err) != 0 ||
        (r->t->trace && merge_traces(r->dir, r->d, r->t->trace, r->outcome != NULL, err, sizeof err) != 0)) {
        launch_say(r, "%s", err);
        return 1;
    }
    return 0;
}

// Where a local run's coordinator listens: on 127.0.0.1, at --coordinator's
// port when given (its host must be this machine's loopback), else at any
// free port. Returns 0, or -1 with err.
static int local_coordinator(const char *given, char *bind, size_t bind_len, char *err, size_t err_len) {
    if (!given) {
        snprintf(bind, bind_len, "tcp://127.0.0.1:*");
        return 0;
    }
    const char *host = strncmp(given, "tcp://", 6) == 0 ? given + 6 : given;
    const char *colon = strrchr(host, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    int loopback = colon && ((colon - host == 9 && strncmp(host, "localhost", 9) == 0) || strncmp(host, "127.", 4) == 0);
    if (!colon || *end != '\0' || port <= 0 || port > 65535 || !loopback) {
        snprintf(err, err_len, "--coordinator %s: a local launch hosts the coordinator on this machine; give "
                 "127.0.0.1:PORT (or drop the flag for any free port)", given);
        return -1;
    }
    snprintf(bind, bind_len, "tcp://127.0.0.1:%ld", port);
    return 0;
}

// --restart-servers needs servers that checkpoint. Returns 0, or 2 with err.
static int check_restart_servers(const train_args_t *t, const dist_args_t *d, size_t restart_servers, char *err,
                                 size_t err_len) {
    if (restart_servers == 0) return 0;
    if (d->server_replicas > 1) {
        snprintf(err, err_len, "--restart-servers: with --server-replicas a dead replica is started again from a live "
                 "one, not from a checkpoint; drop --restart-servers");
        return 2;
    }
    if (d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP && d->sync != SYNC_MODE_BSP) {
        snprintf(err, err_len, "--restart-servers: --sync %s %s; drop the flag (or use --sync asp, ssp or bsp)",
                 sync_mode_name((sync_mode_t)d->sync),
                 dist_without_servers(d->sync) ? "runs without servers" : "does not restart its servers");
        return 2;
    }
    if (t->checkpoint_every <= 0) {
        snprintf(err, err_len, "--restart-servers: a server restarts from its last checkpoint: add --checkpoint-every "
                               "S (and --checkpoint-dir DIR, else they go to the run directory)");
        return 2;
    }
    return 0;
}

static int launch_local(int argc, char **argv, const train_args_t *t, dist_args_t *d, const char *save_model,
                        size_t restart_workers, size_t restart_servers, double progress_every,
                        launch_job_outcome_t *outcome, char *err, size_t err_len) {
    if (check_restart_servers(t, d, restart_servers, err, err_len) != 0) {
        if (!outcome) fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    if (restart_workers > 0 && dist_uses_ring(d->sync)) {
        snprintf(err, err_len, "--restart-workers: the ring of --sync %s cannot take a restarted worker back; drop the "
                               "flag (or use --sync asp, ssp or bsp)", sync_mode_name((sync_mode_t)d->sync));
        if (!outcome) fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    local_run_t r;
    memset(&r, 0, sizeof r);
    r.t = t, r.d = d, r.argc = argc, r.argv = argv, r.save_model = save_model, r.restart_workers = restart_workers;
    r.restart_servers = restart_servers;
    r.outcome = outcome;
    r.progress_tty = isatty(STDERR_FILENO);
    r.progress_every = t->quiet || outcome ? 0 : progress_every > 0 ? progress_every : r.progress_tty ? 0.5 : 5.0;
    r.next_progress = mono_clock_s() + r.progress_every;
    if (local_coordinator(d->coordinator, r.coordinator_bind, sizeof r.coordinator_bind, err, err_len) != 0) {
        if (!outcome) fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    if (!t->quiet && !outcome) print_banner(stderr, "launch");
    int status = 1;
    // Every file the run will write, checked before any process starts.
    char why[ERR_LEN];
    if (dist_check_writable_file(save_model, "--save-model", why, sizeof why) != 0 ||
        (t->checkpoint_every > 0 && t->checkpoint_dir &&
         dist_check_writable_dir(t->checkpoint_dir, "--checkpoint-dir", why, sizeof why) != 0)) {
        launch_say(&r, "%s", why);
        goto out;
    }
    // On one machine every socket of the run is CURVE with a pair made for
    // this run alone (docs/security.md), unless the user brings keys or says --insecure.
    if (!d->curve_server_key && !d->insecure) {
        if (curve_keypair_new(&r.key_public, &r.key_secret, why, sizeof why) == 0) {
            d->run_key_public = r.key_public.z85;
            d->run_key_secret = r.key_secret.z85;
        } else if (!outcome) {
            fprintf(stderr, "asgd launch: %s: the run's sockets are plain (on 127.0.0.1 only)\n", why);
        }
    }
    if (local_run_dir(&r) != 0 || local_run_start(&r) != 0) goto out;
    if (!outcome) {
        // A program calling launch_job_run keeps its own signal handling.
        signal(SIGINT, on_interrupt);
        signal(SIGTERM, on_interrupt);
        signal(SIGHUP, on_interrupt);  // a closed terminal stops the run as SIGTERM does
    }
    double t0 = mono_clock_s();
    int failed = spawn_all(&r) != 0;
    if (!t->quiet && !failed && !outcome)
        fprintf(stderr, "asgd launch: %zu servers, %zu workers x %zu threads, %s; coordinator %s; logs in %s\n",
                d->servers, d->workers, t->threads, sync_mode_name((sync_mode_t)d->sync), r.coordinator, r.dir);
    if (!failed) failed = supervise(&r) != 0;
    if (progress_on_screen) fputc('\n', stderr);  // the messages below start on a line of their own
    progress_on_screen = 0;
    status = local_run_outcome(&r, failed, t0);
    if (status == 0) {
        r.progress_tty = 0;  // the last line stays
        progress_tick(&r, 1);
    }
    if (outcome) snprintf(outcome->run_dir, sizeof outcome->run_dir, "%s", r.dir);
out:
    snprintf(err, err_len, "%s", r.err);
    d->run_key_public = d->run_key_secret = NULL;
    local_run_free(&r);
    return status;
}

// ---- under srun / mpirun ------------------------------------------------------------

static int is_local_host(const char *endpoint) {
    return strstr(endpoint, "//127.") || strstr(endpoint, "//localhost:");
}

// Waits briefly until every process's result record is in the run directory:
// each appears complete, under its final name, once that process has finished.
static void wait_for_process_files(const dist_args_t *d) {
    for (int tries = 0; tries < 200; tries++) {
        size_t have = 0;
        for (size_t k = 0; k < d->servers + d->workers; k++) {
            char path[1100];
            if (k < d->servers) run_record_path(path, sizeof path, d->run_dir, 1, k);
            else run_record_path(path, sizeof path, d->run_dir, 0, k - d->servers);
            have += access(path, R_OK) == 0;
        }
        if (have == d->servers + d->workers) break;
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
    }
}

// The run directory when --run-dir is not given: one name for every process.
static void default_run_dir(const launch_env_t *env, dist_args_t *d, char *dir, size_t len) {
    if (d->run_dir) return;
    snprintf(dir, len, "runs/launch-%s-%s", launcher_kind_name(env->kind),
             getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "run");
    mkdir("runs", 0777);
    d->run_dir = dir;
}

static int launch_as_rank(const launch_env_t *env, train_args_t *t, dist_args_t *d) {
    char err[ERR_LEN], coordinator[300];
    if (env->size <= d->servers) {
        fprintf(stderr, "asgd launch: %zu ranks but --servers %zu: no rank is left to train\n", env->size, d->servers);
        return 2;
    }
    d->workers = env->size - d->servers;
    int scaled = dist_apply_scaling(d, t, "asgd launch", err, sizeof err);  // with the number of workers known
    if (scaled != 0) {
        fprintf(stderr, "%s\n", err);
        return scaled;
    }
    if (launch_coordinator_endpoint(env, d->coordinator, DIST_DEFAULT_PORT, coordinator, sizeof coordinator, err,
                                    sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    d->coordinator = coordinator;
    int local = is_local_host(coordinator);
    // Across machines the others must reach us: listen on every interface.
    if (!local && strcmp(d->bind_host, "127.0.0.1") == 0) d->bind_host = "0.0.0.0";
    char host_bind[320];
    const char *port = strrchr(coordinator, ':');
    snprintf(host_bind, sizeof host_bind, "tcp://%s%s", local ? "127.0.0.1" : "0.0.0.0", port ? port : ":29517");
    char dir[512];
    default_run_dir(env, d, dir, sizeof dir);
    // Rank 0 writes the run's merged files and model: checked before anyone trains.
    if (env->rank == 0 && (dist_check_writable_dir(d->run_dir, "--run-dir", err, sizeof err) != 0 ||
                           dist_check_writable_file(d->save_model, "--save-model", err, sizeof err) != 0 ||
                           train_args_write_run_config(t, d->run_dir, err, sizeof err) != 0)) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 1;
    }
    dist_role_t role = launch_role_of_rank(env->rank, d->servers) == LAUNCH_ROLE_SERVER ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
    size_t id = role == DIST_ROLE_SERVER ? env->rank : env->rank - d->servers;
    const char *save_model = d->save_model;
    char part[1100];
    d->save_model = part_path(role, id, d, d->run_dir, save_model, part, sizeof part);
    char trace_path[600];  // each rank its own timeline (merged by hand: docs/trace.md)
    if (t->trace) trace_part_path(trace_path, sizeof trace_path, d->run_dir, role, id), t->trace = trace_path;
    double t0 = mono_clock_s();
    int status = dist_run_role(role, id, t, d, env->rank == 0 ? host_bind : NULL);
    if (status != 0 || env->rank != 0) return status;
    // Rank 0 writes the run's merged files once every process has written its own.
    wait_for_process_files(d);
    if (finish_run_dir(d->run_dir, t, d, mono_clock_s() - t0, NULL, 0, NULL, err, sizeof err) != 0 ||
        save_global_model(d->run_dir, d, save_model, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 1;
    }
    return 0;
}

// ---- under a ps-lite tracker ---------------------------------------------------------
//
// ps-lite numbers no process: DMLC_ROLE says scheduler, server or worker. The
// scheduler hosts three rendezvous (docs/launch.md): at DMLC_PS_ROOT_PORT the
// ids (servers and workers join for any rank of their role, first come first
// served), at the next port the run's own (as rank 0 hosts it elsewhere), and
// again at DMLC_PS_ROOT_PORT, once every id is given, the end: each process
// reports how it finished, waiting for all the others as ps-lite's final
// barrier does, and the scheduler then merges the run directory.

#define PSLITE_ROLE_SCHEDULER 2          // its own entry in the end table
#define PSLITE_DONE_RUN_ID 0x656e64ull   // the end rendezvous's run id: the ids' one xor this

// "tcp://host:port" -> its port; 0 when it has none.
static int endpoint_port(const char *ep) {
    const char *colon = strrchr(ep, ':');
    return colon ? atoi(colon + 1) : 0;
}

// A name no other process of the run has: host, pid and a clock reading.
static void pslite_name(char *out, size_t len) {
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "host");
    host[32] = '\0';
    for (char *c = host; *c; c++)
        if (*c <= ' ' || *c >= 0x7f) *c = '_';
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(out, len, "%s.%d.%llx", host, (int)getpid(),
             (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
}

// A server or worker: its id from the scheduler, then its part of the run, then the end.
static int pslite_member(const launch_env_t *env, train_args_t *t, dist_args_t *d, const char *ids_ep, uint64_t ids_id) {
    char err[ERR_LEN];
    dist_role_t role = env->role == LAUNCH_ENV_SERVER ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
    size_t n = d->servers + d->workers;
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.role = role;
    snprintf(me.endpoint, sizeof me.endpoint, "-");  // nothing to reach here yet: the run's own rendezvous comes next
    pslite_name(me.name, sizeof me.name);
    uint32_t rank = 0;
    rdv_entry_t *table = NULL;
    zap_handler_t *zap = NULL;
    void *ctx = zmq_ctx_new();
    int rc = -1;
    if (!ctx) snprintf(err, sizeof err, "zmq_ctx_new failed: %s", zmq_strerror(errno));
    else if (dist_security_start(d, ctx, &zap, err, sizeof err) == 0)
        rc = rdv_join_any(ctx, ids_ep, ids_id, &me, n, &table, &rank, (int)d->timeout_ms, err, sizeof err);
    free(table);
    zap_handler_destroy(&zap);
    if (ctx) zmq_ctx_term(ctx);
    if (rc != 0) {
        fprintf(stderr, "asgd launch: ps-lite %s: no id from the scheduler: %s\n", role_name(role), err);
        return 1;
    }
    size_t id = role == DIST_ROLE_SERVER ? rank : rank - d->servers;
    if (!t->quiet) fprintf(stderr, "asgd launch: ps-lite %s %s is %s %zu\n", role_name(role), me.name, role_name(role), id);
    char part[1100];
    d->save_model = part_path(role, id, d, d->run_dir, d->save_model, part, sizeof part);
    int status = dist_run_role(role, id, t, d, NULL);

    // The end: tell the scheduler how this process finished.
    rdv_entry_t end = me;
    end.rank = rank;
    if (status == 0) snprintf(end.endpoint, sizeof end.endpoint, "ok");
    else snprintf(end.endpoint, sizeof end.endpoint, "exit-%d", status);
    ctx = zmq_ctx_new();
    rc = ctx ? rdv_join(ctx, ids_ep, ids_id ^ PSLITE_DONE_RUN_ID, &end, n + 1, &table, -1, err, sizeof err) : -1;
    if (!ctx) snprintf(err, sizeof err, "zmq_ctx_new failed: %s", zmq_strerror(errno));
    free(table);
    if (ctx) zmq_ctx_term(ctx);
    if (rc != 0) {
        fprintf(stderr, "asgd launch: ps-lite %s %zu: reporting the end to the scheduler: %s\n", role_name(role), id, err);
        return status ? status : 1;
    }
    return status;
}

// The scheduler: hands out ids, hosts the run's rendezvous, waits for every
// process to end and merges the run directory as rank 0 does elsewhere.
static int pslite_scheduler(const train_args_t *t, const dist_args_t *d, const char *ids_ep, const char *run_ep,
                            uint64_t ids_id, int local) {
    char err[ERR_LEN] = "", ids_bind[320], run_bind[320], own[320];
    const char *host = local ? "127.0.0.1" : "0.0.0.0";
    snprintf(ids_bind, sizeof ids_bind, "tcp://%s:%d", host, endpoint_port(ids_ep));
    snprintf(run_bind, sizeof run_bind, "tcp://%s:%d", host, endpoint_port(run_ep));
    snprintf(own, sizeof own, "tcp://127.0.0.1:%d", endpoint_port(ids_ep));
    size_t n = d->servers + d->workers, counts[2] = {d->servers, d->workers};  // roles DIST_ROLE_SERVER, _WORKER
    uint64_t run_id = d->run_id ? d->run_id : dist_default_run_id(run_ep);
    double t0 = mono_clock_s();
    if (dist_make_run_dir(d->run_dir, err, sizeof err) != 0 || train_args_write_run_config(t, d->run_dir, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 1;
    }
    // The ids first, in a context of their own: its end closes the port for
    // certain, which the end rendezvous then binds again.
    zap_handler_t *zap = NULL;
    rdv_server_t *ids = NULL, *run = NULL, *done = NULL;
    rdv_entry_t *table = NULL;
    int status = 1;
    void *ctx = zmq_ctx_new();
    if (!ctx) {
        fprintf(stderr, "asgd launch: zmq_ctx_new failed: %s\n", zmq_strerror(errno));
        return 1;
    }
    if (dist_security_start(d, ctx, &zap, err, sizeof err) == 0 &&
        (ids = rdv_server_new_roles(ctx, ids_bind, counts, 2, ids_id, err, sizeof err)) != NULL) {
        if (!t->quiet)
            fprintf(stderr, "asgd launch: ps-lite scheduler for %zu servers and %zu workers at %s; logs in %s\n",
                    d->servers, d->workers, ids_ep, d->run_dir);
        if (rdv_server_wait(ids, (int)d->timeout_ms, err, sizeof err) == 0) status = 0;
    }
    rdv_server_destroy(&ids);
    zap_handler_destroy(&zap);
    zmq_ctx_term(ctx);
    if (status != 0) {
        fprintf(stderr, "asgd launch: ps-lite scheduler: handing out ids: %s\n", err);
        return 1;
    }
    status = 1;
    if (!(ctx = zmq_ctx_new())) {
        fprintf(stderr, "asgd launch: zmq_ctx_new failed: %s\n", zmq_strerror(errno));
        return 1;
    }
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.rank = (uint32_t)n;
    me.role = PSLITE_ROLE_SCHEDULER;
    snprintf(me.endpoint, sizeof me.endpoint, "scheduler");
    if (dist_security_start(d, ctx, &zap, err, sizeof err) != 0 ||
        !(run = rdv_server_new(ctx, run_bind, n, run_id, err, sizeof err)) ||
        !(done = rdv_server_new(ctx, ids_bind, n + 1, ids_id ^ PSLITE_DONE_RUN_ID, err, sizeof err)) ||
        rdv_join(ctx, own, ids_id ^ PSLITE_DONE_RUN_ID, &me, n + 1, &table, -1, err, sizeof err) != 0 ||
        rdv_server_wait(done, (int)d->timeout_ms, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: ps-lite scheduler: %s\n", err);
        goto out;
    }
    size_t failed = 0;
    for (size_t r = 0; r < n; r++) {
        if (strcmp(table[r].endpoint, "ok") == 0) continue;
        failed++;
        fprintf(stderr, "asgd launch: ps-lite %s %zu (%s) failed: %s\n", r < d->servers ? "server" : "worker",
                r < d->servers ? r : r - d->servers, table[r].name, table[r].endpoint);
    }
    if (failed) goto out;
    wait_for_process_files(d);
    if (finish_run_dir(d->run_dir, t, d, mono_clock_s() - t0, NULL, 0, NULL, err, sizeof err) != 0 ||
        save_global_model(d->run_dir, d, d->save_model, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        goto out;
    }
    status = 0;
out:
    free(table);
    rdv_server_destroy(&done);
    rdv_server_destroy(&run);
    zap_handler_destroy(&zap);
    zmq_ctx_term(ctx);
    return status;
}

// Sizes the run from DMLC_NUM_SERVER / DMLC_NUM_WORKER before the flags are
// checked; an explicit --servers or --workers must agree. Returns 0 or 2.
static int pslite_counts(const launch_env_t *env, dist_args_t *d, const flag_spec_t *flags, size_t n_flags) {
    const struct {
        const char *flag, *var;
        size_t *target, want;
    } c[2] = {{"servers", "DMLC_NUM_SERVER", &d->servers, env->servers},
              {"workers", "DMLC_NUM_WORKER", &d->workers, env->workers}};
    for (int i = 0; i < 2; i++) {
        const flag_spec_t *f = flags_find(flags, n_flags, c[i].flag);
        if (f && f->seen && *c[i].target != c[i].want) {
            fprintf(stderr, "asgd launch: --%s %zu but %s=%zu: under ps-lite its variables size the run; drop --%s "
                            "or make them agree\n", c[i].flag, *c[i].target, c[i].var, c[i].want, c[i].flag);
            return 2;
        }
        *c[i].target = c[i].want;
    }
    if (d->sync == SYNC_MODE_ALLREDUCE && env->servers > 0) {
        fprintf(stderr, "asgd launch: DMLC_NUM_SERVER=%zu but --sync allreduce runs without servers (expected "
                        "DMLC_NUM_SERVER=0)\n", env->servers);
        return 2;
    }
    if (d->sync != SYNC_MODE_ALLREDUCE && env->servers == 0) {
        fprintf(stderr, "asgd launch: DMLC_NUM_SERVER=0 but --sync %s needs at least one server\n",
                sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    return 0;
}

static int launch_pslite(const launch_env_t *env, train_args_t *t, dist_args_t *d) {
    char err[ERR_LEN], ids_ep[300], run_ep[320], dir[512];
    int scaled = dist_apply_scaling(d, t, "asgd launch", err, sizeof err);  // with the number of workers known
    if (scaled != 0) {
        fprintf(stderr, "%s\n", err);
        return scaled;
    }
    if (launch_coordinator_endpoint(env, d->coordinator, DIST_DEFAULT_PORT, ids_ep, sizeof ids_ep, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    int port = endpoint_port(ids_ep);
    if (port >= 65535) {
        fprintf(stderr, "asgd launch: coordinator %s: under ps-lite the port after it is used too (expected a port "
                        "below 65535)\n", ids_ep);
        return 2;
    }
    snprintf(run_ep, sizeof run_ep, "%.*s:%d", (int)(strrchr(ids_ep, ':') - ids_ep), ids_ep, port + 1);
    int local = is_local_host(ids_ep);
    // Across machines the others must reach us: listen on every interface.
    if (!local && strcmp(d->bind_host, "127.0.0.1") == 0) d->bind_host = "0.0.0.0";
    default_run_dir(env, d, dir, sizeof dir);
    uint64_t ids_id = d->run_id ? d->run_id : dist_default_run_id(ids_ep);
    d->coordinator = run_ep;
    if (env->role == LAUNCH_ENV_SCHEDULER) return pslite_scheduler(t, d, ids_ep, run_ep, ids_id, local);
    return pslite_member(env, t, d, ids_ep, ids_id);
}

// --log: every process's curve goes into the run directory. Returns 0, or 2 with err.
static int launch_refuse_log(const train_args_t *t, char *err, size_t err_len) {
    if (!t->log) return 0;
    snprintf(err, err_len, "asgd launch: --log: a launch writes each worker's CSV into --run-dir (worker-K.csv, and "
             "global.csv, merged.csv); drop --log");
    return 2;
}

#define LAUNCH_MAX_FLAGS (TRAIN_ARGS_N_FLAGS + DIST_N_FLAGS + 5)

// The command's flags: the training ones, the distributed ones and its own.
static size_t launch_flags(train_args_t *t, dist_args_t *d, const char **save_model, size_t *restart_workers,
                           size_t *restart_servers, double *progress_every, flag_spec_t *flags) {
    size_t n = train_args_flags(t, flags, 0);
    n += dist_args_flags(d, flags + n);
    flags[n++] = (flag_spec_t){"save-model", FLAG_TYPE_STRING, save_model, "FILE", "write the run's global model to FILE (the servers' final values; allreduce: worker 0's replica; docs/model_file.md)", 0, 0, NULL, 0};
    flags[n++] = (flag_spec_t){"progress-every", FLAG_TYPE_DOUBLE, progress_every, "S", "a local run's progress line on stderr every S seconds (default 0.5 on a terminal, rewritten in place; else 5)", 0.001, 1e6, NULL, 0};
    flags[n++] = (flag_spec_t){"restart-workers", FLAG_TYPE_SIZE, restart_workers, "N", "start a worker that dies again (it rejoins the run; asp/ssp with --checkpoint-every: from its last checkpoint), at most N times in all (default 0: a failure stops the run)", 0, 1e6, NULL, 0};
    flags[n++] = (flag_spec_t){"restart-servers", FLAG_TYPE_SIZE, restart_servers, "N", "start a server that dies again from its last checkpoint (needs --checkpoint-every; asp, ssp, bsp), at most N times in all; the pushes it applied after that checkpoint are lost and counted (default 0: a failure stops the run)", 0, 1e6, NULL, 0};
    return n;
}

int cmd_launch_has_flag(const char *name) {
    train_args_t *t = calloc(1, sizeof *t);
    dist_args_t d;
    const char *save_model = NULL;
    size_t restart_workers = 0, restart_servers = 0;
    double progress_every = 0;
    flag_spec_t flags[LAUNCH_MAX_FLAGS];
    int has = t && flags_find(flags, launch_flags(t, &d, &save_model, &restart_workers, &restart_servers, &progress_every, flags), name) != NULL;
    free(t);
    return has;
}

int cmd_launch(int argc, char **argv) {
    train_args_t t __attribute__((cleanup(train_args_release)));  // string flags point into t.words
    dist_args_t d;
    const char *save_model = NULL;
    size_t restart_workers = 0, restart_servers = 0;
    double progress_every = 0;
    train_args_defaults(&t);
    dist_args_defaults(&d);
    flag_spec_t flags[LAUNCH_MAX_FLAGS];
    size_t n = launch_flags(&t, &d, &save_model, &restart_workers, &restart_servers, &progress_every, flags);
    int parsed = train_args_command(&t, "asgd launch", usage, description, flags, n, argc, argv);
    if (parsed >= 0) return parsed;
    // Under a launcher whose variables do not say what this process is, it
    // stops here: never a whole local run per process.
    char err[ERR_LEN];
    launch_env_t env;
    if (launch_env_detect(&env, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 2;
    }
    if (env.kind == LAUNCHER_KIND_PSLITE && pslite_counts(&env, &d, flags, n) != 0) return 2;
    int usage_status = train_args_finish(&t, flags, n, "asgd launch", err, sizeof err);
    if (usage_status == 0) usage_status = dist_args_finish(&d, &t, flags, n, "asgd launch", err, sizeof err);
    if (usage_status == 0) usage_status = launch_refuse_log(&t, err, sizeof err);
    if (usage_status != 0) {
        fprintf(stderr, "%s\n", err);
        return usage_status;
    }
    if (t.resume) {
        fprintf(stderr, "asgd launch: --resume: restart a failed server by hand with asgd server --id K --resume DIR "
                        "(its workers reconnect by themselves)\n");
        return 2;
    }
    d.save_model = save_model;
    if (d.server_replicas > 1 && env.kind != LAUNCHER_KIND_NONE) {
        fprintf(stderr, "asgd launch: --server-replicas: only a launch that starts every process itself places and "
                        "restarts the replicas (they share one host and the run directory)\n");
        return 2;
    }
    if (restart_servers > 0 && env.kind != LAUNCHER_KIND_NONE) {
        fprintf(stderr, "asgd launch: --restart-servers: only a launch that starts every process itself restarts them "
                        "(under %s restart a server by hand with asgd server --id K --resume DIR)\n",
                launcher_kind_name(env.kind));
        return 2;
    }
    if (env.kind == LAUNCHER_KIND_PSLITE) return launch_pslite(&env, &t, &d);
    if (env.kind != LAUNCHER_KIND_NONE) return launch_as_rank(&env, &t, &d);
    usage_status = dist_apply_scaling(&d, &t, "asgd launch", err, sizeof err);
    if (usage_status != 0) {
        fprintf(stderr, "%s\n", err);
        return usage_status;
    }
    return launch_local(t.words.argc, t.words.argv, &t, &d, save_model, restart_workers, restart_servers,
                        progress_every, NULL, err, sizeof err);
}

int launch_job_run(int argc, char **argv, launch_job_outcome_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    train_args_t t __attribute__((cleanup(train_args_release)));
    dist_args_t d;
    const char *save_model = NULL;
    size_t restart_workers = 0, restart_servers = 0;
    double progress_every = 0;  // a job shows no progress line
    train_args_defaults(&t);
    dist_args_defaults(&d);
    flag_spec_t flags[LAUNCH_MAX_FLAGS];
    size_t n = launch_flags(&t, &d, &save_model, &restart_workers, &restart_servers, &progress_every, flags);
    flags_status_t parsed = train_args_parse(&t, "asgd launch", flags, n, argc, argv, err, err_len);
    if (parsed == FLAGS_STATUS_HELP) snprintf(err, err_len, "asgd launch: --help is not a job's flag");
    if (parsed != FLAGS_STATUS_OK) return -1;
    if (train_args_finish(&t, flags, n, "asgd launch", err, err_len) != 0 ||
        dist_args_finish(&d, &t, flags, n, "asgd launch", err, err_len) != 0 ||
        launch_refuse_log(&t, err, err_len) != 0 ||
        dist_apply_scaling(&d, &t, "asgd launch", err, err_len) != 0)
        return -1;
    if (t.resume) {
        snprintf(err, err_len, "asgd launch: --resume: a launch does not resume; restart a server with asgd server --resume");
        return -1;
    }
    d.save_model = save_model;
    char why[ERR_LEN] = "";
    int status = launch_local(t.words.argc, t.words.argv, &t, &d, save_model, restart_workers, restart_servers, 0, out,
                              why, sizeof why);
    if (status == 0) return 0;
    snprintf(err, err_len, "asgd launch: %s", why[0] ? why : "the run failed");
    launch_job_outcome_free(out);
    return -1;
}

void launch_job_outcome_free(launch_job_outcome_t *o) {
    free(o->points);
    o->points = NULL;
    o->n_points = 0;
}
