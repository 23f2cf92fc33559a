// A local launch's live progress line: the run's samples, rate and global
// figures, read from the files its processes keep in the run directory
// (launch_local_impl.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/run_report.h"
#include "engine/run/launch_local_impl.h"
#include "engine/run/run_record.h"
#include "engine/run/worker_live.h"
#include "kernels/foundation/mono_clock.h"

// The last complete row of a curve file (the run directory's CSVs: global.csv's
// columns, or a worker's first ten of them) into v[0..n) (NaN: empty or
// missing). Reads the file's last 4 KiB only. Returns 1 when there was a row.
static int last_curve_row(const char *path, double *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = NAN;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[4097];
    long at = 0;
    if (fseek(f, 0, SEEK_END) == 0 && (at = ftell(f)) > 4096)
        fseek(f, at - 4096, SEEK_SET);
    else
        rewind(f);
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
// the workers' live counts (samples, rates: worker_live.h, current whether or
// not the workers evaluate), else their curves' last rows, and the global
// model's latest evaluation (global-progress.csv, written beside shard 0;
// under allreduce, hybrid and local, worker 0's rows are the global model's). The final line,
// once the run directory is merged, shows the global model's last row of
// merged.csv: the closing pull, with the staleness of the whole run. Returns 0
// when there is nothing to show yet.
static int progress_text(const local_run_t *r, int final, char *out, size_t len, double *samples_out) {
    const dist_args_t *d = r->d;
    double samples = 0, rate = 0, wall = 0, w[CURVE_N_COLUMNS], g[CURVE_N_COLUMNS];
    double steps = 0, pushes = 0, pulls = 0;  // the replicas', from their live counts
    size_t rows = 0;
    for (size_t k = 0; k < d->workers; k++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/worker-%zu.csv", r->dir, k);
        int has_row = last_curve_row(path, w, CURVE_N_COLUMNS);
        // A worker's row has the trainer's columns, then its pushes and pulls
        // (worker rows carry no staleness or wait).
        for (size_t i = RUN_REPORT_N_COLUMNS; i < CURVE_N_COLUMNS; i++) w[i] = NAN;
        if (k == 0) memcpy(g, w, sizeof g);
        worker_live_counts_t live;
        if (worker_live_read(r->dir, k, &live)) {
            w[CURVE_SAMPLES] = live.samples;
            w[CURVE_SAMPLES_PER_S] = live.samples_per_s;
            w[CURVE_WALL_S] = live.wall_s;
            steps += live.steps, pushes += live.pushes, pulls += live.pulls;
            has_row = 1;
        }
        if (!has_row) continue;
        rows++;
        if (isfinite(w[CURVE_SAMPLES])) samples += w[CURVE_SAMPLES];
        if (w[CURVE_WALL_S] > wall) wall = w[CURVE_WALL_S];
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
    // The run's rate: every worker's samples over the longest training time
    // (a worker that finished early would otherwise add its last rate forever).
    rate = wall > 0 ? samples / wall : 0;
    *samples_out = samples;
    int rmse = train_args_model(r->t)->metric == METRIC_KIND_RMSE;
    double metric = g[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY];
    int at =
        snprintf(out, len, "asgd launch: %.1f s of training, %.0f samples, %.0f samples/s over %zu workers, global %s ",
                 wall, samples, rate, rows, rmse ? "test_rmse" : "test_acc");
    if (at < 0 || (size_t)at >= len) return 1;
    at += isfinite(metric) ? snprintf(out + at, len - (size_t)at, "%.4f", metric)
                           : snprintf(out + at, len - (size_t)at, "-");
    if (at < 0 || (size_t)at >= len) return 1;
    if (isfinite(g[CURVE_STALENESS_VERSIONS_MEAN]))
        at += snprintf(out + at, len - (size_t)at, ", staleness %.2f", g[CURVE_STALENESS_VERSIONS_MEAN]);
    if (at >= 0 && (size_t)at < len && dist_global_on_servers(d->sync) && isfinite(g[CURVE_WAIT_S]))
        at += snprintf(out + at, len - (size_t)at, ", wait %.2f s", g[CURVE_WAIT_S]);
    // The periods achieved so far (the summary has their p99 and the ones asked for).
    if (at >= 0 && (size_t)at < len && (d->sync == SYNC_MODE_ASP || d->sync == SYNC_MODE_SSP) && pushes > 0 &&
        pulls > 0)
        snprintf(out + at, len - (size_t)at, ", %.0f steps a push, %.0f a pull", steps / pushes, steps / pulls);
    return 1;
}

// Whether every worker has written its result record (it may still be exiting).
static int workers_done(const local_run_t *r) {
    for (size_t k = 0; k < r->d->workers; k++) {
        char path[1100];
        run_record_path(path, sizeof path, r->dir, 0, k);
        if (access(path, F_OK) != 0) return 0;
    }
    return 1;
}

void launch_progress_tick(local_run_t *r, int final) {
    if (r->progress_every <= 0) return;
    double now = mono_clock_s();
    if (!final && now < r->next_progress) return;
    r->next_progress = now + r->progress_every;
    char line[400];
    double samples = 0;
    if (!progress_text(r, final, line, sizeof line, &samples)) return;
    // A line only when the workers moved on: not twice for the same counts,
    // nor after the last one finished (the final line, after the merge, says it).
    if (!final && (samples == r->shown_samples || workers_done(r))) return;
    r->shown_samples = samples;
    launch_screen_progress(line, r->progress_tty, final);
}
