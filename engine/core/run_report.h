#ifndef ASGD_ENGINE_CORE_RUN_REPORT_H
#define ASGD_ENGINE_CORE_RUN_REPORT_H
// What a training run shows while it runs: the CSV log (--log) and the progress
// lines. The CSV schema (one row per evaluation point, header first):
//
//   wall_s         training seconds since start, evaluation pauses excluded
//   epoch          samples / training-set size
//   samples        training examples processed, all threads
//   updates        updates applied to the shared model
//   samples_per_s  samples / wall_s
//   lr             step size in use
//   train_loss     mean minibatch objective (loss + L2) since the previous row
//   test_loss      mean test loss (no L2)
//   test_accuracy  classification accuracy in [0,1] (empty for mf)
//   test_rmse      rating RMSE (empty for classifiers)
//
// then any columns the caller adds (run_report_columns_t): a distributed
// worker's pushes and pulls so far.
#include <stdio.h>

#include "engine/core/model.h"
#include "engine/core/trainer.h"

typedef struct run_report run_report_t;

// Columns appended to every CSV row after the schema's. header names them
// ("a,b"); write prints their values for point p, each after a comma (",1,2").
typedef struct run_report_columns {
    const char *header;
    void (*write)(FILE *csv, const train_point_t *p, void *ctx);
    void *ctx;
} run_report_columns_t;

// The schema's columns (run_report_csv_header); a reader of a log with added
// columns takes these first.
#define RUN_REPORT_N_COLUMNS 10

// csv_path may be NULL (no log); extra NULL: the schema's columns only.
// progress may be NULL (silent). On a terminal, progress is one line
// rewritten in place; otherwise one plain line per evaluation.
run_report_t *run_report_new(const char *csv_path, metric_kind_t metric, FILE *progress, double total_samples,
                             const run_report_columns_t *extra, char *err, size_t err_len);
// Flushes and closes the log; returns -1 with err filled if any write failed.
int run_report_close(run_report_t **r, char *err, size_t err_len);

// Callbacks to hand to train_run (ctx = the report).
train_callbacks_t run_report_callbacks(run_report_t *r);

extern const char run_report_csv_header[];

#endif
