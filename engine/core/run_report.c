#include "engine/core/run_report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char run_report_csv_header[] =
    "wall_s,epoch,samples,updates,samples_per_s,lr,train_loss,test_loss,test_accuracy,test_rmse";

struct run_report {
    FILE *csv;
    char csv_path[512];
    int write_failed;
    int write_errno;
    metric_kind_t metric;
    FILE *progress;
    int tty;
    int line_open;  // a rewritten progress line is on screen
    double total_samples;
    run_report_columns_t extra;  // header NULL: none
};

run_report_t *run_report_new(const char *csv_path, metric_kind_t metric, FILE *progress, double total_samples,
                             const run_report_columns_t *extra, char *err, size_t err_len) {
    run_report_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, err_len, "report: allocating: %s", strerror(errno));
        return NULL;
    }
    r->metric = metric;
    r->progress = progress;
    r->tty = progress && isatty(fileno(progress));
    r->total_samples = total_samples;
    if (extra) r->extra = *extra;
    if (csv_path) {
        snprintf(r->csv_path, sizeof r->csv_path, "%s", csv_path);
        r->csv = fopen(csv_path, "w");
        if (!r->csv) {
            snprintf(err, err_len, "--log %s: cannot open for writing: %s", csv_path, strerror(errno));
            free(r);
            return NULL;
        }
        fprintf(r->csv, "%s%s%s\n", run_report_csv_header, r->extra.header ? "," : "",
                r->extra.header ? r->extra.header : "");
    }
    return r;
}

static void csv_number(FILE *f, double v, int last) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    if (!last) fputc(',', f);
}

static void on_eval(const train_point_t *p, void *ctx) {
    run_report_t *r = ctx;
    int accuracy = r->metric == METRIC_KIND_ACCURACY;
    if (r->csv) {
        fprintf(r->csv, "%.6f,%.6f,%llu,%llu,", p->wall_s, p->epoch, (unsigned long long)p->samples,
                (unsigned long long)p->updates);
        csv_number(r->csv, p->samples_per_s, 0);
        csv_number(r->csv, p->lr, 0);
        csv_number(r->csv, p->train_loss, 0);
        csv_number(r->csv, p->test_loss, 0);
        csv_number(r->csv, accuracy ? p->test_metric : NAN, 0);
        csv_number(r->csv, accuracy ? NAN : p->test_metric, 1);
        if (r->extra.header) r->extra.write(r->csv, p, r->extra.ctx);
        fputc('\n', r->csv);
        // Each row reaches the file as it is taken (evaluations are seconds
        // apart): a process that is killed leaves its log up to that point.
        fflush(r->csv);
        if (ferror(r->csv) && !r->write_failed) {
            r->write_failed = 1;
            r->write_errno = errno;
        }
    }
    if (!r->progress) return;
    if (r->line_open) fputs("\r\033[K", r->progress);  // replace the live line, do not leave it behind
    r->line_open = 0;
    fprintf(r->progress,
            "eval  %8.2fs  epoch %6.3f  samples %10llu  %9.0f samples/s  train_loss %.4f  test_loss %.4f  %s %.4f\n",
            p->wall_s, p->epoch, (unsigned long long)p->samples, p->samples_per_s, p->train_loss, p->test_loss,
            accuracy ? "test_acc" : "test_rmse", p->test_metric);
    fflush(r->progress);
}

static void on_progress(const train_point_t *p, double eta_s, void *ctx) {
    run_report_t *r = ctx;
    if (!r->progress || !r->tty) return;  // logs get one line per evaluation, not a stream of \r
    fprintf(r->progress, "\r  epoch %6.3f  %9.0f samples/s  loss %.4f  ETA %5.0fs ", p->epoch, p->samples_per_s,
            p->train_loss, isfinite(eta_s) ? eta_s : 0.0);
    fflush(r->progress);
    r->line_open = 1;
}

train_callbacks_t run_report_callbacks(run_report_t *r) {
    train_callbacks_t cb = {on_eval, on_progress, r};
    return cb;
}

int run_report_close(run_report_t **rp, char *err, size_t err_len) {
    if (!rp || !*rp) return 0;
    run_report_t *r = *rp;
    int rc = 0;
    if (r->progress && r->line_open) fputs("\r\033[K", r->progress);
    if (r->csv) {
        if (fclose(r->csv) != 0 && !r->write_failed) {
            r->write_failed = 1;
            r->write_errno = errno;
        }
        if (r->write_failed) {
            snprintf(err, err_len, "--log %s: writing failed: %s", r->csv_path, strerror(r->write_errno));
            rc = -1;
        }
    }
    free(r);
    *rp = NULL;
    return rc;
}
