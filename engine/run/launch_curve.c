// The global model's curve of a finished run (launch_curve.h).
#include "engine/run/launch_curve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/run_report.h"

// Numbers of one CSV line (ours: no quoting) into v[0..max); empty fields and
// missing trailing ones are NaN. Returns how many fields the line had.
static size_t parse_numbers(const char *line, double *v, size_t max) {
    for (size_t i = 0; i < max; i++) v[i] = NAN;
    size_t field = 0;
    const char *p = line;
    for (;;) {
        const char *end = p + strcspn(p, ",\r\n");
        if (field < max && end > p) v[field] = strtod(p, NULL);
        field++;
        if (*end != ',') break;
        p = end + 1;
    }
    return field;
}

static int append(global_curve_t *c, size_t *cap, const curve_point_t *p, char *err, size_t err_len) {
    if (c->n == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 64;
        curve_point_t *grown = realloc(c->points, grown_cap * sizeof *grown);
        if (!grown) {
            snprintf(err, err_len, "launch: out of memory for the global curve");
            return -1;
        }
        c->points = grown;
        *cap = grown_cap;
    }
    c->points[c->n++] = *p;
    return 0;
}

// Rows of a CSV with a header; each handed to row(). Returns 0, 1 when the file is absent, -1 on error.
static int read_rows(const char *path, int (*row)(const char *line, void *ctx), void *ctx) {
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, header = 1;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        if (header) {
            header = 0;
            continue;
        }
        if (line[0] != '\n' && line[0] != '\0') rc = row(line, ctx);
    }
    free(line);
    fclose(f);
    return rc;
}

typedef struct load_ctx {
    global_curve_t *c;
    size_t cap;
    double workers;  // scale for worker 0's samples (allreduce, hybrid); 0: rows are the evaluator's
    char *err;
    size_t err_len;
} load_ctx_t;

static int load_row(const char *line, void *arg) {
    load_ctx_t *x = arg;
    curve_point_t p;
    double v[CURVE_N_COLUMNS + 2];  // the curve, then the evaluator's eval_s and during_training
    parse_numbers(line, v, CURVE_N_COLUMNS + 2);
    memcpy(p.v, v, sizeof p.v);
    if (x->workers > 0) {
        // Worker 0's row: the trainer's columns, then its pushes and pulls,
        // which are not the curve's staleness.
        for (size_t i = RUN_REPORT_N_COLUMNS; i < CURVE_N_COLUMNS; i++) p.v[i] = NAN;
        // Worker 0's replica is the global model; its samples are its share.
        p.v[CURVE_SAMPLES] *= x->workers;
        p.v[CURVE_SAMPLES_PER_S] *= x->workers;
    } else if (!isnan(v[CURVE_N_COLUMNS])) {
        x->c->evals++;
        x->c->eval_s += v[CURVE_N_COLUMNS];
        if (v[CURVE_N_COLUMNS + 1] == 1.0) {
            x->c->evals_during_training++;
            x->c->eval_during_training_s += v[CURVE_N_COLUMNS];
        }
    }
    return append(x->c, &x->cap, &p, x->err, x->err_len);
}

// The run's staleness (every shard's, summary.json's) into a point that stands for the end.
static void run_staleness(curve_point_t *p, const curve_final_t *final) {
    p->v[CURVE_STALENESS_VERSIONS_MEAN] = final->staleness_versions_mean;
    p->v[CURVE_STALENESS_VERSIONS_MAX] = final->staleness_versions_max;
    p->v[CURVE_STALENESS_CLOCKS_MEAN] = final->staleness_clocks_mean;
    p->v[CURVE_STALENESS_CLOCKS_MAX] = final->staleness_clocks_max;
}

// The curve's end: the evaluator's last row where it read the final model
// (it counts every sample; its staleness, shard 0's, becomes the run's), else
// the workers' final point appended. Returns 0 or -1 with err.
static int end_point(global_curve_t *out, size_t *cap, double train_examples, const curve_final_t *final, int rmse,
                     char *err, size_t err_len) {
    curve_point_t *last = out->n ? &out->points[out->n - 1] : NULL;
    if (last && last->v[CURVE_SAMPLES] >= final->samples) {
        run_staleness(last, final);
        return 0;
    }
    if (isnan(final->test_metric)) return 0;
    curve_point_t p;
    for (size_t i = 0; i < CURVE_N_COLUMNS; i++) p.v[i] = NAN;
    double wall = final->wall_s;
    if (last && last->v[CURVE_WALL_S] > wall) wall = last->v[CURVE_WALL_S];
    p.v[CURVE_WALL_S] = wall;
    p.v[CURVE_SAMPLES] = final->samples;
    p.v[CURVE_EPOCH] = train_examples > 0 ? final->samples / train_examples : NAN;
    p.v[CURVE_SAMPLES_PER_S] = wall > 0 ? final->samples / wall : NAN;
    p.v[CURVE_UPDATES] = last ? last->v[CURVE_UPDATES] : NAN;
    p.v[CURVE_TEST_LOSS] = final->test_loss;
    p.v[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY] = final->test_metric;
    run_staleness(&p, final);
    p.v[CURVE_WAIT_S] = last ? last->v[CURVE_WAIT_S] : NAN;
    return append(out, cap, &p, err, err_len);
}

int global_curve_load(const char *dir, const dist_args_t *d, double train_examples, const curve_final_t *final,
                      int rmse, global_curve_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    load_ctx_t x = {out, 0, 0.0, err, err_len};
    char path[1100];
    int rc = 1;
    if (dist_global_on_servers(d->sync)) {
        snprintf(path, sizeof path, "%s/global.csv", dir);
        out->source = "servers";
        rc = read_rows(path, load_row, &x);
        if (rc < 0) return -1;
        if (rc == 1) {
            snprintf(err, err_len, "launch: %s is missing: the evaluator beside server shard 0 wrote no curve", path);
            return -1;
        }
        if (end_point(out, &x.cap, train_examples, final, rmse, err, err_len) != 0) return -1;
    } else {
        snprintf(path, sizeof path, "%s/worker-0.csv", dir);
        out->source = "worker 0's replica";
        x.workers = (double)d->workers;
        rc = read_rows(path, load_row, &x);
        if (rc < 0) return -1;
        if (rc == 1) {
            snprintf(err, err_len, "launch: %s is missing: worker 0 wrote no curve", path);
            return -1;
        }
    }
    return 0;
}

void global_curve_free(global_curve_t *c) {
    free(c->points);
    memset(c, 0, sizeof *c);
}

static double metric_of(const curve_point_t *p, int rmse) { return p->v[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY]; }

const curve_point_t *global_curve_at_target(const global_curve_t *c, double target, int rmse) {
    if (isnan(target)) return NULL;
    for (size_t i = 0; i < c->n; i++) {
        double m = metric_of(&c->points[i], rmse);
        if (!isnan(m) && (rmse ? m <= target : m >= target)) return &c->points[i];
    }
    return NULL;
}

const curve_point_t *global_curve_last(const global_curve_t *c) {
    for (size_t i = c->n; i > 0; i--)
        if (!isnan(c->points[i - 1].v[CURVE_TEST_LOSS])) return &c->points[i - 1];
    return NULL;
}

const curve_point_t *global_curve_untrained(const global_curve_t *c) {
    if (!c->n || c->points[0].v[CURVE_SAMPLES] != 0 || isnan(c->points[0].v[CURVE_TEST_LOSS])) return NULL;
    return &c->points[0];
}

const curve_point_t *global_curve_peak_loss(const global_curve_t *c) {
    if (!global_curve_untrained(c)) return NULL;
    const curve_point_t *peak = NULL;
    for (size_t i = 1; i < c->n; i++) {
        double loss = c->points[i].v[CURVE_TEST_LOSS];
        if (!isnan(loss) && (!peak || loss > peak->v[CURVE_TEST_LOSS])) peak = &c->points[i];
    }
    return peak;
}

_Static_assert(CURVE_TEST_RMSE + 1 == RUN_REPORT_N_COLUMNS, "a worker's curve starts with the global curve's columns");

typedef struct worker_rows {
    FILE *out;
    size_t k;
} worker_rows_t;

// The columns merged.csv adds after dist_curve_columns; the global rows leave them empty.
static const char merged_worker_columns[] = "pushes,pulls,steps_per_push,steps_per_pull";

// The length of a row's first n fields, their commas between them.
static size_t fields_length(const char *line, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            if (line[len] != ',') break;
            len++;
        }
        len += strcspn(line + len, ",\r\n");
    }
    return len;
}

static void csv_cell(FILE *out, double v) {
    if (isfinite(v))
        fprintf(out, ",%.9g", v);
    else
        fputc(',', out);
}

// A worker's row: its trainer's columns, empty staleness and wait (the global
// rows'), then its pushes and pulls so far and the periods they make
// (updates per push and per pull: the replica's steps, all threads).
static int copy_worker_row(const char *line, void *arg) {
    worker_rows_t *w = arg;
    double v[RUN_REPORT_N_COLUMNS + 2];
    parse_numbers(line, v, RUN_REPORT_N_COLUMNS + 2);
    fprintf(w->out, "worker-%zu,%.*s", w->k, (int)fields_length(line, RUN_REPORT_N_COLUMNS), line);
    for (size_t i = RUN_REPORT_N_COLUMNS; i < CURVE_N_COLUMNS; i++) fputc(',', w->out);
    double updates = v[CURVE_UPDATES], pushes = v[RUN_REPORT_N_COLUMNS], pulls = v[RUN_REPORT_N_COLUMNS + 1];
    csv_cell(w->out, pushes);
    csv_cell(w->out, pulls);
    csv_cell(w->out, pushes > 0 ? updates / pushes : NAN);
    csv_cell(w->out, pulls > 0 ? updates / pulls : NAN);
    fputc('\n', w->out);
    return 0;
}

int global_curve_write_merged(const char *dir, const global_curve_t *c, size_t workers, char *err, size_t err_len) {
    FILE *out = dist_file_open(dir, "merged.csv", err, err_len);
    if (!out) return -1;
    fprintf(out, "process,%s,%s\n", dist_curve_columns, merged_worker_columns);
    for (size_t i = 0; i < c->n; i++) {
        fputs("global", out);
        for (size_t col = 0; col < CURVE_N_COLUMNS; col++) csv_cell(out, c->points[i].v[col]);
        fputs(",,,,\n", out);  // merged_worker_columns: the workers' alone
    }
    for (size_t k = 0; k < workers; k++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/worker-%zu.csv", dir, k);
        worker_rows_t w = {out, k};
        read_rows(path, copy_worker_row, &w);
    }
    return dist_file_close(out, dir, "merged.csv", err, err_len);
}
