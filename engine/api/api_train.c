// asgd_train and asgd_launch: a job's flags parsed once by the run layer into
// its typed job and run there (engine/run/train_job.h, launch_job.h), without
// the command line; the outcome as asgd_result_t.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asgd/train.h"
#include "engine/api/api_job.h"
#include "engine/run/launch_job.h"
#include "engine/run/train_job.h"

static asgd_point_t point_of(const train_point_t *p) {
    return (asgd_point_t){p->wall_s, p->epoch, p->samples, p->train_loss, p->test_loss, p->test_metric};
}

static int result_of_train(const train_job_outcome_t *o, asgd_result_t *out, char *err, size_t err_len) {
    snprintf(out->model, sizeof out->model, "%s", o->model);
    out->metric = o->metric == METRIC_KIND_ACCURACY ? "accuracy" : "rmse";
    const train_result_t *r = &o->result;
    out->wall_s = r->wall_s;
    out->samples = r->samples;
    out->updates = r->updates;
    out->samples_per_s = r->samples_per_s;
    out->time_to_target_s = r->time_to_target_s;
    out->samples_to_target = isnan(r->time_to_target_s) ? 0 : r->samples_to_target;
    out->final = point_of(&r->last);
    if (o->n_points && !(out->points = malloc(o->n_points * sizeof *out->points))) {
        snprintf(err, err_len, "out of memory for the run's curve");
        return -1;
    }
    for (size_t i = 0; i < o->n_points; i++) out->points[i] = point_of(&o->points[i]);
    out->n_points = o->n_points;
    return 0;
}

int asgd_train(const asgd_job_t *job, asgd_result_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    api_argv_t av;
    if (api_argv_init(&av, job, NULL, 0, err, err_len) != 0) return -1;
    train_job_outcome_t o;
    int rc = train_job_run(av.argc, av.argv, &o, err, err_len);
    api_argv_free(&av);
    if (rc == 0 && result_of_train(&o, out, err, err_len) != 0) {
        asgd_result_free(out);
        rc = -1;
    }
    train_job_outcome_free(&o);
    return rc;
}

static asgd_point_t point_of_curve(const curve_point_t *p, int rmse) {
    const double *v = p->v;
    return (asgd_point_t){v[CURVE_WALL_S],     v[CURVE_EPOCH],     (uint64_t)v[CURVE_SAMPLES],
                          v[CURVE_TRAIN_LOSS], v[CURVE_TEST_LOSS], v[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY]};
}

static int result_of_launch(const launch_job_outcome_t *o, asgd_result_t *out, char *err, size_t err_len) {
    snprintf(out->model, sizeof out->model, "%s", o->model);
    out->metric = o->rmse ? "rmse" : "accuracy";
    out->wall_s = o->wall_s;
    out->samples = o->samples;
    out->updates = o->pushes;
    out->samples_per_s = o->samples_per_s;
    out->time_to_target_s = o->time_to_target_s;
    out->samples_to_target = o->samples_to_target;
    // The points that hold an evaluation of the global model.
    size_t n = 0;
    if (o->n_points && !(out->points = malloc(o->n_points * sizeof *out->points))) {
        snprintf(err, err_len, "out of memory for the run's curve");
        return -1;
    }
    for (size_t i = 0; i < o->n_points; i++) {
        asgd_point_t p = point_of_curve(&o->points[i], o->rmse);
        if (!isnan(p.test_metric)) out->points[n++] = p;
    }
    out->n_points = n;
    if (n)
        out->final = out->points[n - 1];
    else
        out->final = (asgd_point_t){NAN, NAN, 0, NAN, NAN, NAN};
    return 0;
}

int asgd_launch(const asgd_job_t *job, asgd_result_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    api_argv_t av;
    if (api_argv_init(&av, job, NULL, 0, err, err_len) != 0) return -1;
    launch_job_outcome_t o;
    int rc = launch_job_run(av.argc, av.argv, &o, err, err_len);
    api_argv_free(&av);
    if (rc == 0 && result_of_launch(&o, out, err, err_len) != 0) {
        asgd_result_free(out);
        rc = -1;
    }
    launch_job_outcome_free(&o);
    return rc;
}
