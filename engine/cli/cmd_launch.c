// asgd launch: every process of a distributed run, here or under a cluster launcher.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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
#include "engine/cli/model_file.h"      // defines: model_file_join, model_file_write
#include "net/curve_auth.h"         // defines: zap_handler_destroy
#include "net/launch_env.h"         // defines: launch_env_detect
#include "net/rendezvous.h"         // defines: rdv_server_new
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
    char last_err[1024];
    char save_path[1100];  // the --save-model part it writes (part_path)
    int status;
    int exited;
} child_t;

static volatile sig_atomic_t interrupted;  // the signal's number
static void on_interrupt(int sig) { interrupted = sig; }

static const char *role_name(dist_role_t r) { return r == DIST_ROLE_SERVER ? "server" : "worker"; }

// ---- the run directory's merged files ---------------------------------------------

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

// The number after "key": in a flat part of our own JSON (NaN when absent or null).
static double json_field(const char *text, const char *key) {
    if (!text) return NAN;
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(text, pattern);
    if (!p) return NAN;
    p += strlen(pattern);
    if (strncmp(p, "null", 4) == 0) return NAN;
    return strtod(p, NULL);
}

static const char *json_section(const char *text, const char *key) {
    if (!text) return NULL;
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    return strstr(text, pattern);
}

// Sums the shards' staleness histograms into staleness.csv and h_clocks/h_updates.
static void merge_staleness(const char *dir, size_t servers, staleness_hist_t *h_clocks, staleness_hist_t *h_updates) {
    staleness_hist_init(h_clocks);
    staleness_hist_init(h_updates);
    for (size_t k = 0; k < servers; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/server-%zu-staleness.csv", dir, k);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char line[256];
        if (!fgets(line, sizeof line, f)) {
            fclose(f);
            continue;
        }
        unsigned long long v, a, b;
        while (fgets(line, sizeof line, f) && sscanf(line, "%llu,%llu,%llu", &v, &a, &b) == 3) {
            for (unsigned long long i = 0; i < a; i++) staleness_hist_add(h_clocks, v);
            for (unsigned long long i = 0; i < b; i++) staleness_hist_add(h_updates, v);
        }
        fclose(f);
        // The exact maxima (the CSV's last bin may be an overflow bin).
        snprintf(path, sizeof path, "%s/server-%zu.json", dir, k);
        char *text = read_text(path);
        double mc = json_field(json_section(text, "staleness_clocks"), "max");
        double mu = json_field(json_section(text, "staleness_updates"), "max");
        if (!isnan(mc) && mc > (double)h_clocks->max) h_clocks->max = (uint64_t)mc;
        if (!isnan(mu) && mu > (double)h_updates->max) h_updates->max = (uint64_t)mu;
        free(text);
    }
    char err[256];
    FILE *f = dist_file_open(dir, "staleness.csv", err, sizeof err);
    if (!f) return;
    fprintf(f, "staleness,updates_by_clocks,updates_by_versions\n");
    for (size_t v = 0; v < STALENESS_HIST_BINS; v++)
        if (h_clocks->bins[v] || h_updates->bins[v])
            fprintf(f, "%zu,%llu,%llu\n", v, (unsigned long long)h_clocks->bins[v], (unsigned long long)h_updates->bins[v]);
    dist_file_close(f, dir, "staleness.csv", err, sizeof err);
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
static void read_curve_final(const char *dir, const dist_args_t *d, int rmse, const staleness_hist_t *hc,
                             const staleness_hist_t *hu, curve_final_t *fin, double *train_examples) {
    memset(fin, 0, sizeof *fin);
    *train_examples = NAN;
    char *last_text = NULL;
    double last_versions = -1;
    for (size_t k = 0; k < d->workers; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/worker-%zu.json", dir, k);
        char *text = read_text(path);
        fin->samples += json_field(text, "samples");
        double w = json_field(text, "wall_s"), versions = json_field(text, "global_versions");
        if (k == 0) *train_examples = json_field(text, "train_examples");
        if (w > fin->wall_s) fin->wall_s = w;
        if (versions > last_versions || !last_text) {
            last_versions = versions;
            free(last_text);
            last_text = text;
        } else {
            free(text);
        }
    }
    fin->test_metric = json_field(last_text, rmse ? "global_test_rmse" : "global_test_accuracy");
    fin->test_loss = json_field(last_text, "global_test_loss");
    free(last_text);
    fin->staleness_versions_mean = staleness_hist_mean(hu);
    fin->staleness_versions_max = hu->count ? (double)hu->max : NAN;
    fin->staleness_clocks_mean = staleness_hist_mean(hc);
    fin->staleness_clocks_max = hc->count ? (double)hc->max : NAN;
}

static void write_summary(FILE *out, const char *dir, const train_args_t *t, const dist_args_t *d, double launch_wall_s,
                          const global_curve_t *gc, const staleness_hist_t *hc, const staleness_hist_t *hu) {
    double samples = 0, wall = 0, wait = 0, pushes = 0, own_rates = 0;
    int consistent = 1;
    char **wtext = calloc(d->workers, sizeof *wtext);
    char **stext = calloc(d->servers ? d->servers : 1, sizeof *stext);
    char path[1024];
    for (size_t k = 0; wtext && k < d->workers; k++) {
        snprintf(path, sizeof path, "%s/worker-%zu.json", dir, k);
        wtext[k] = read_text(path);
        samples += json_field(wtext[k], "samples");
        double w = json_field(wtext[k], "wall_s");
        if (w > wall) wall = w;
        wait += json_field(wtext[k], "wait_s");
        own_rates += json_field(wtext[k], "samples_per_s");
        pushes += json_field(wtext[k], "pushes");
    }
    for (size_t s = 0; stext && s < d->servers; s++) {
        snprintf(path, sizeof path, "%s/server-%zu.json", dir, s);
        stext[s] = read_text(path);
    }
    // Every push a worker was acknowledged for was applied once (docs/reliability.md).
    char why[600];
    if (d->servers > 0) consistent = dist_check_pushes_applied_once(dir, d->servers, d->workers, why, sizeof why) == 0;
    const char *w0 = wtext ? wtext[0] : NULL;
    int rmse = json_section(w0, "final_test_rmse") != NULL;
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "command", "launch");
    json_string(&j, "model", train_args_model(t)->name);
    json_string(&j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP || (d->sync == SYNC_MODE_HYBRID && d->hybrid_sparse))
        json_uint(&j, "staleness_bound", d->staleness);
    else if (d->sync == SYNC_MODE_BSP) json_uint(&j, "staleness_bound", 0);
    else json_null(&j, "staleness_bound");
    json_uint(&j, "servers", d->servers);
    json_uint(&j, "workers", d->workers);
    json_uint(&j, "threads", t->threads);
    json_uint(&j, "batch", t->batch);
    // Examples per round (or per step of every thread) over all workers.
    json_uint(&j, "total_batch", (uint64_t)d->workers * t->threads * t->batch);
    json_uint(&j, "samples", (uint64_t)samples);
    json_number(&j, "wall_s", wall);
    json_number(&j, "samples_per_s", wall > 0 ? samples / wall : NAN);
    // Each worker's own rate, summed: what the cluster processes while its
    // workers run, which a fixed share per worker hides behind the slowest one.
    json_number(&j, "worker_samples_per_s", own_rates);
    json_number(&j, "launch_wall_s", launch_wall_s);
    // The global model's figures (launch_curve.h says where its curve comes
    // from); worker 0's own copy's, named as such.
    const char *metric_key = rmse ? "final_test_rmse" : "final_test_accuracy";
    json_global_figures(&j, gc, train_args_target(t), rmse);
    double train_examples = json_field(w0, "train_examples");
    json_number_or_null(&j, rmse ? "worker0_test_rmse" : "worker0_test_accuracy", json_field(w0, metric_key));
    json_number_or_null(&j, "worker0_time_to_target_s", json_field(w0, "time_to_target_s"));
    json_number_or_null(&j, "worker0_samples_to_target", json_field(w0, "samples_to_target"));
    json_number(&j, "worker_wait_s", wait);
    json_uint(&j, "pushes", (uint64_t)pushes);
    // Bytes each worker sent and received (payloads), and what its sends
    // would have been as float32: the compression ratio is their quotient.
    double out_total = 0, in_total = 0, raw_total = 0;
    json_object(&j, "bytes_by_worker");
    for (size_t k = 0; wtext && k < d->workers; k++) {
        char key[32];
        snprintf(key, sizeof key, "%zu", k);
        double o = json_field(wtext[k], "bytes_out"), i = json_field(wtext[k], "bytes_in");
        double raw = json_field(wtext[k], "bytes_out_uncompressed");
        json_object(&j, key);
        json_number(&j, "out", o);
        json_number(&j, "in", i);
        json_number(&j, "compression_ratio", o > 0 ? raw / o : NAN);
        json_object_end(&j);
        out_total += o, in_total += i, raw_total += raw;
    }
    json_object_end(&j);
    json_number(&j, "bytes_out", out_total);
    json_number(&j, "bytes_in", in_total);
    json_number(&j, "bytes_out_uncompressed", raw_total);
    json_number(&j, "compression_ratio", out_total > 0 ? raw_total / out_total : NAN);
    if (d->servers) json_bool(&j, "acked_pushes_applied_once", consistent);
    if (d->sync == SYNC_MODE_BSP) {
        // Backup workers: late gradients each shard dropped, summed over the shards.
        double late = 0;
        json_object(&j, "late_gradients_dropped_by_worker");
        for (size_t k = 0; k < d->workers; k++) {
            char key[32];
            snprintf(key, sizeof key, "%zu", k);
            double by = 0;
            for (size_t s = 0; stext && s < d->servers; s++) {
                double v = json_field(json_section(stext[s], "late_gradients_dropped"), key);
                if (!isnan(v)) by += v;
            }
            json_uint(&j, key, (uint64_t)by);
            late += by;
        }
        json_object_end(&j);
        json_uint(&j, "late_gradients_dropped", (uint64_t)late);
    }
    if (d->servers) {
        dist_json_staleness(&j, "staleness_clocks", hc);
        dist_json_staleness(&j, "staleness_updates", hu);
    }
    json_string(&j, "run_dir", dir);
    json_object(&j, "config");
    json_string(&j, "model", train_args_model(t)->name);
    json_string(&j, "data", t->data);
    if (train_examples > 0) json_uint(&j, "train_examples", (uint64_t)train_examples);
    else json_null(&j, "train_examples");
    json_uint(&j, "epochs", t->epochs);
    json_uint(&j, "batch", t->batch);
    json_number(&j, "lr", t->lr);
    json_uint(&j, "seed", t->seed);
    json_number(&j, "time_limit_s", t->time_limit);
    json_number(&j, "target", train_args_target(t));
    json_string(&j, "sync", sync_mode_name((sync_mode_t)d->sync));
    if (d->sync == SYNC_MODE_SSP) json_uint(&j, "staleness", d->staleness);
    else json_null(&j, "staleness");  // the bound exists under ssp only
    json_uint(&j, "push_every", d->push_every);
    json_uint(&j, "fetch_every", d->fetch_every);
    json_string(&j, "server_optimizer", d->server_optimizer ? "adagrad" : "sgd");
    json_number(&j, "server_lr", d->server_lr);
    json_bool(&j, "server_staleness_aware", d->server_staleness_aware);
    json_number(&j, "server_dc_asgd", d->server_dc_lambda);
    json_string(&j, "delay_worker", d->delay_worker);
    if (d->sync == SYNC_MODE_HYBRID) json_string(&j, "hybrid_sparse", d->hybrid_sparse ? "ssp" : "asp");
    if (d->sync == SYNC_MODE_BSP) json_uint(&j, "backup_workers", d->backup_workers);
    if (d->sync == SYNC_MODE_LOCAL) json_uint(&j, "local_steps", d->local_steps);
    json_string(&j, "scaling", d->scaling ? "strong" : "weak");
    json_string(&j, "lr_scaling", dist_lr_scaling_name(d->lr_scaling));
    json_uint(&j, "warmup", t->warmup);
    json_uint(&j, "batch_requested", d->requested_batch);
    json_number(&j, "lr_requested", d->requested_lr);
    json_string(&j, "device", t->device ? "cuda" : "cpu");
    char spec[64];
    compress_spec_format(&d->compress_spec, spec, sizeof spec);
    json_string(&j, "compress", spec);
    json_bool(&j, "error_feedback", d->error_feedback);
    json_object_end(&j);
    json_end(&j);
    fputc('\n', out);
    for (size_t k = 0; wtext && k < d->workers; k++) free(wtext[k]);
    for (size_t s = 0; stext && s < d->servers; s++) free(stext[s]);
    free(wtext);
    free(stext);
}

static int finish_run_dir(const char *dir, const train_args_t *t, const dist_args_t *d, double launch_wall_s,
                          char *err, size_t err_len) {
    staleness_hist_t hc, hu;
    merge_staleness(dir, d->servers, &hc, &hu);
    int rmse = train_args_model(t)->metric == METRIC_KIND_RMSE;
    curve_final_t fin;
    double train_examples;
    read_curve_final(dir, d, rmse, &hc, &hu, &fin, &train_examples);
    global_curve_t gc;
    if (global_curve_load(dir, d, train_examples, &fin, rmse, &gc, err, err_len) != 0) return -1;
    int rc = -1;
    if (global_curve_write_merged(dir, &gc, d->workers, err, err_len) != 0) goto out;
    FILE *f = dist_file_open(dir, "summary.json", err, err_len);
    if (!f) goto out;
    write_summary(f, dir, t, d, launch_wall_s, &gc, &hc, &hu);
    if (dist_file_close(f, dir, "summary.json", err, err_len) != 0) goto out;
    write_summary(stdout, dir, t, d, launch_wall_s, &gc, &hc, &hu);
    fflush(stdout);
    // The summary says whether it held; the run fails when it did not.
    if (d->servers > 0 && dist_check_pushes_applied_once(dir, d->servers, d->workers, err, err_len) != 0) goto out;
    rc = 0;
out:
    global_curve_free(&gc);
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
        if (which == 1) snprintf(c->last_err, sizeof c->last_err, "%s", c->line[which]);
        fprintf(stderr, "[%s %zu] %s\n", role_name(c->role), c->id, c->line[which]);
        c->line_len[which] = 0;
    }
}

static int spawn(child_t *c, const char *exe, char **args) {
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
        execv(exe, args);
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

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Starts (or restarts) child c with the launcher's own flags replaced by its
// role, id and the run's coordinator, run id and directory.
static int spawn_child(child_t *c, const char *exe, char **args, int argc, char **argv, const dist_args_t *d,
                       const char *coordinator, const char *run_id_text, const char *dir, const char *save_model,
                       char *id_text) {
    size_t a = 0;
    args[a++] = (char *)exe;
    args[a++] = (char *)role_name(c->role);
    for (int k = 0; k < argc; k++) {
        int skip = 0;
        if (is_flag(argv, argc, k, "--run-dir", &skip) || is_flag(argv, argc, k, "--save-model", &skip) ||
            is_flag(argv, argc, k, "--coordinator", &skip) || is_flag(argv, argc, k, "--run-id", &skip) ||
            is_flag(argv, argc, k, "--restart-workers", &skip)) {
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
    args[a++] = "--run-id";
    args[a++] = (char *)run_id_text;
    args[a++] = "--run-dir";
    args[a++] = (char *)dir;
    // Every process is on this machine: the ring is faster over ipc:// (docs/allreduce.md).
    if (dist_uses_ring(d->sync) && !d->ring_ipc) args[a++] = "--ring-ipc";
    const char *part = part_path(c->role, c->id, d, dir, save_model, c->save_path, sizeof c->save_path);
    if (part) {
        args[a++] = "--save-model";
        args[a++] = (char *)part;
    }
    args[a] = NULL;
    return spawn(c, exe, args);
}

static void describe_exit(int status, char *out, size_t len);

static int launch_local(int argc, char **argv, const train_args_t *t, dist_args_t *d, const char *save_model,
                        size_t restart_workers) {
    if (restart_workers > 0 && (d->sync == SYNC_MODE_ALLREDUCE || d->sync == SYNC_MODE_HYBRID)) {
        fprintf(stderr, "asgd launch: --restart-workers: the ring of --sync %s cannot take a restarted worker back; drop the "
                        "flag (or use --sync asp, ssp or bsp)\n", sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    char err[ERR_LEN] = "";
    char dir[512];
    if (d->run_dir) {
        snprintf(dir, sizeof dir, "%s", d->run_dir);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        mkdir("runs", 0777);
        snprintf(dir, sizeof dir, "runs/launch-%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
    }
    if (dist_make_run_dir(dir, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 1;
    }
    void *ctx = zmq_ctx_new();
    if (!ctx) {
        fprintf(stderr, "asgd launch: zmq_ctx_new failed: %s\n", zmq_strerror(errno));
        return 1;
    }
    size_t n_kids = d->servers + d->workers;
    // A fresh id per run, so that a straggler from an earlier run is refused.
    uint64_t run_id = ((uint64_t)time(NULL) << 20) ^ ((uint64_t)getpid() << 1) ^ (uint64_t)(now_s() * 1e9);
    if (run_id == 0) run_id = 1;
    // The children get the --curve-* flags too: the coordinator here speaks as they do.
    zap_handler_t *zap = NULL;
    rdv_server_t *rdv = NULL;
    if (dist_security_start(d, ctx, &zap, err, sizeof err) != 0 ||
        !(rdv = rdv_server_new(ctx, "tcp://127.0.0.1:*", n_kids, run_id, err, sizeof err))) {
        fprintf(stderr, "asgd launch: starting the coordinator: %s\n", err);
        zap_handler_destroy(&zap);
        zmq_ctx_term(ctx);
        return 1;
    }
    char coordinator[256], run_id_text[32];
    snprintf(coordinator, sizeof coordinator, "%s", rdv_server_endpoint(rdv));
    snprintf(run_id_text, sizeof run_id_text, "%llu", (unsigned long long)run_id);
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        fprintf(stderr, "asgd launch: cannot find this program's path (/proc/self/exe): %s\n", strerror(errno));
        rdv_server_destroy(&rdv);
        zmq_ctx_term(ctx);
        return 1;
    }
    exe[len] = '\0';
    child_t *kids = calloc(n_kids, sizeof *kids);
    char **args = calloc((size_t)argc + 16, sizeof *args);
    if (!kids || !args) {
        fprintf(stderr, "asgd launch: out of memory\n");
        free(kids);
        free(args);
        rdv_server_destroy(&rdv);
        zmq_ctx_term(ctx);
        return 1;
    }
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
    signal(SIGHUP, on_interrupt);  // a closed terminal stops the run as SIGTERM does
    double t0 = now_s();
    int failed = 0;
    size_t started = 0;
    char id_text[32];
    for (size_t i = 0; i < n_kids; i++) {
        child_t *c = &kids[i];
        c->role = i < d->servers ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
        c->id = i < d->servers ? i : i - d->servers;
        c->out_fd = c->err_fd = -1;
        if (spawn_child(c, exe, args, argc, argv, d, coordinator, run_id_text, dir, save_model, id_text) != 0) {
            fprintf(stderr, "asgd launch: starting %s %zu: %s\n", role_name(c->role), c->id, strerror(errno));
            failed = 1;
            break;
        }
        started++;
    }
        if (!t->quiet && !failed)
        fprintf(stderr, "asgd launch: %zu servers, %zu workers x %zu threads, %s; coordinator %s; logs in %s\n",
                d->servers, d->workers, t->threads, sync_mode_name((sync_mode_t)d->sync), coordinator, dir);
    const child_t *culprit = NULL;
    size_t running = started, restarts = 0;
    while (!failed && running > 0) {
        if (interrupted) break;
        struct pollfd fds[2 * 64];
        child_t *owner[2 * 64];
        int which[2 * 64];
        nfds_t nf = 0;
        for (size_t i = 0; i < started && nf + 2 <= 2 * 64; i++) {
            if (kids[i].out_fd >= 0) {
                fds[nf] = (struct pollfd){kids[i].out_fd, POLLIN, 0};
                owner[nf] = &kids[i];
                which[nf++] = 0;
            }
            if (kids[i].err_fd >= 0) {
                fds[nf] = (struct pollfd){kids[i].err_fd, POLLIN, 0};
                owner[nf] = &kids[i];
                which[nf++] = 1;
            }
        }
        int rc = nf ? poll(fds, nf, 100) : 0;
        if (nf == 0) {
            struct timespec nap = {0, 50000000};
            nanosleep(&nap, NULL);
        }
        for (nfds_t f = 0; rc > 0 && f < nf; f++)
            if (fds[f].revents) pump_child(owner[f], which[f]);
        for (size_t i = 0; i < started; i++) {
            child_t *c = &kids[i];
            if (c->exited) continue;
            int st;
            if (waitpid(c->pid, &st, WNOHANG) != c->pid) continue;
            // Show what it still had to say.
            while (c->err_fd >= 0) pump_child(c, 1);
            while (c->out_fd >= 0) pump_child(c, 0);
            c->exited = 1;
            c->status = st;
            running--;
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                // A failed worker is started again, with the same command: it
                // rejoins the run at the clock the servers give it.
                // (Not in allreduce or hybrid runs: their ring cannot take a member back.)
                if (c->role == DIST_ROLE_WORKER && !dist_uses_ring(d->sync) &&
                    restarts < restart_workers) {
                    char how[128];
                    describe_exit(st, how, sizeof how);
                    restarts++;
                    fprintf(stderr, "asgd launch: worker %zu (pid %d) failed: %s; restarting it (restart %zu of at "
                                    "most %zu)\n", c->id, (int)c->pid, how, restarts, restart_workers);
                    c->exited = 0;
                    c->line_len[0] = c->line_len[1] = 0;
                    c->last_err[0] = '\0';
                    if (spawn_child(c, exe, args, argc, argv, d, coordinator, run_id_text, dir, save_model,
                                    id_text) == 0) {
                        running++;
                        continue;
                    }
                    c->exited = 1;
                }
                culprit = c;
                failed = 1;
                break;
            }
        }
    }
    int status = 0;
    if (interrupted) {
        fprintf(stderr, "asgd launch: interrupted by signal %d (%s); stopping every process\n", (int)interrupted,
                strsignal(interrupted));
        stop_children(kids, started);
        status = 128 + interrupted;
    } else if (failed) {
        stop_children(kids, started);
        if (culprit) {
            char how[128];
            describe_exit(culprit->status, how, sizeof how);
            fprintf(stderr, "asgd launch: %s %zu (pid %d) failed: %s%s%s; stopped the others\n",
                    role_name(culprit->role), culprit->id, (int)culprit->pid, how, culprit->last_err[0] ? ": " : "",
                    culprit->last_err);
        }
        status = 1;
    } else if (rdv_server_wait(rdv, 1000, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        status = 1;
    } else if (finish_run_dir(dir, t, d, now_s() - t0, err, sizeof err) != 0 ||
               save_global_model(dir, d, save_model, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        status = 1;
    }
    for (size_t i = 0; i < started; i++) {
        if (kids[i].out_fd >= 0) close(kids[i].out_fd);
        if (kids[i].err_fd >= 0) close(kids[i].err_fd);
    }
    free(kids);
    free(args);
    rdv_server_destroy(&rdv);
    zap_handler_destroy(&zap);
    zmq_ctx_term(ctx);
    return status;
}

// ---- under srun / mpirun ------------------------------------------------------------

static int is_local_host(const char *endpoint) {
    return strstr(endpoint, "//127.") || strstr(endpoint, "//localhost:");
}

// Waits briefly until every process's JSON file is in the run directory: each
// appears complete, under its final name, once that process has finished.
static void wait_for_process_files(const dist_args_t *d) {
    for (int tries = 0; tries < 200; tries++) {
        size_t have = 0;
        for (size_t k = 0; k < d->servers + d->workers; k++) {
            char path[1024];
            if (k < d->servers) snprintf(path, sizeof path, "%s/server-%zu.json", d->run_dir, k);
            else snprintf(path, sizeof path, "%s/worker-%zu.json", d->run_dir, k - d->servers);
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
    int scaled = dist_apply_scaling(d, t, "asgd launch");  // with the number of workers known
    if (scaled != 0) return scaled;
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
    if (env->rank == 0 && dist_make_run_dir(d->run_dir, err, sizeof err) != 0) {
        fprintf(stderr, "asgd launch: %s\n", err);
        return 1;
    }
    dist_role_t role = launch_role_of_rank(env->rank, d->servers) == LAUNCH_ROLE_SERVER ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
    size_t id = role == DIST_ROLE_SERVER ? env->rank : env->rank - d->servers;
    const char *save_model = d->save_model;
    char part[1100];
    d->save_model = part_path(role, id, d, d->run_dir, save_model, part, sizeof part);
    double t0 = now_s();
    int status = dist_run_role(role, id, t, d, env->rank == 0 ? host_bind : NULL);
    if (status != 0 || env->rank != 0) return status;
    // Rank 0 writes the run's merged files once every process has written its own.
    wait_for_process_files(d);
    if (finish_run_dir(d->run_dir, t, d, now_s() - t0, err, sizeof err) != 0 ||
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
    double t0 = now_s();
    if (dist_make_run_dir(d->run_dir, err, sizeof err) != 0) {
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
    if (finish_run_dir(d->run_dir, t, d, now_s() - t0, err, sizeof err) != 0 ||
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
    int scaled = dist_apply_scaling(d, t, "asgd launch");  // with the number of workers known
    if (scaled != 0) return scaled;
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

int cmd_launch(int argc, char **argv) {
    train_args_t t;
    dist_args_t d;
    const char *save_model = NULL;
    size_t restart_workers = 0;
    train_args_defaults(&t);
    dist_args_defaults(&d);
    flag_spec_t flags[TRAIN_ARGS_N_FLAGS + DIST_N_FLAGS + 4];
    size_t n = train_args_flags(&t, flags, 0);
    n += dist_args_flags(&d, flags + n);
    flags[n++] = (flag_spec_t){"save-model", FLAG_TYPE_STRING, &save_model, "FILE", "write the run's global model to FILE (the servers' final values; allreduce: worker 0's replica; docs/model_file.md)", 0, 0, NULL, 0};
    flags[n++] = (flag_spec_t){"restart-workers", FLAG_TYPE_SIZE, &restart_workers, "N", "start a worker that dies again (it rejoins the run), at most N times in all (default 0: a failure stops the run)", 0, 1e6, NULL, 0};
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
    int usage_status = train_args_finish(&t, flags, n, "asgd launch");
    if (usage_status == 0) usage_status = dist_args_finish(&d, &t, "asgd launch");
    if (usage_status != 0) return usage_status;
    if (t.resume) {
        fprintf(stderr, "asgd launch: --resume: restart a failed server by hand with asgd server --id K --resume DIR "
                        "(its workers reconnect by themselves)\n");
        return 2;
    }
    d.save_model = save_model;
    if (env.kind == LAUNCHER_KIND_PSLITE) return launch_pslite(&env, &t, &d);
    if (env.kind != LAUNCHER_KIND_NONE) return launch_as_rank(&env, &t, &d);
    usage_status = dist_apply_scaling(&d, &t, "asgd launch");
    if (usage_status != 0) return usage_status;
    if (!t.quiet) print_banner(stderr, "launch");
    return launch_local(argc, argv, &t, &d, save_model, restart_workers);
}
