// asgd train: one single-node training run.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/commands.h"
#include "engine/data_source.h"  // defines: data_bundle_load
#include "engine/flags.h"        // defines: flags_parse
#include "engine/json_writer.h"  // defines: json_*
#include "engine/model.h"        // defines: model_new_*
#include "engine/optimizer.h"    // defines: optimizer_new
#include "engine/run_report.h"   // defines: run_report_new, run_report_callbacks
#include "engine/trainer.h"      // defines: train_run
#include "kernels/blas_runtime.h"  // defines: blas_core_name

#define ERR_LEN 512
#define MAX_HIDDEN 7

enum { MODEL_LOGREG, MODEL_SVM, MODEL_SOFTMAX, MODEL_MLP, MODEL_MF };
static const char model_choices[] = "logreg|svm|softmax|mlp|mf";
static const char *const model_names[] = {"logreg", "svm", "softmax", "mlp", "mf"};

typedef struct train_args {
    int model;
    const char *data;
    const char *data_dir;
    size_t train_limit, test_limit;
    double test_frac;
    const char *hidden;
    size_t rank;
    double l2;
    int mode;
    size_t threads, epochs, batch;
    int optimizer;
    double lr, lr_decay, momentum, adagrad_eps;
    int schedule;
    uint64_t seed;
    size_t eval_every, eval_limit;
    double target_acc, target_rmse;
    int stop_at_target, pin, quiet;
    const char *log, *summary;
} train_args_t;

static const char usage[] = "asgd train [--model M] [--data SPEC] [--mode hogwild|locked|sync] [--threads T] ...";
static const char description[] =
    "Trains one model on one machine with T threads and reports loss and accuracy (or RMSE)\n"
    "over time. --data SPEC is one of: fashion-mnist (default for mlp/softmax); gen:sparse[:n=,dim=,nnz=,\n"
    "zipf=,noise=,seed=] (default for logreg/svm); gen:ratings[:users=,items=,rank=,n=,noise=,seed=]\n"
    "(default for mf); or a file: libsvm for logreg/svm, ratings (CSV/TSV/MovieLens ::) for mf.\n"
    "Prints a startup line and progress on stderr, and a one-line JSON summary on stdout.\n"
    "Per-model defaults: lr 0.05 (mlp, softmax, mf) or 0.5 (logreg, svm); batch 16 (mlp, softmax)\n"
    "or 1 (logreg, svm, mf); l2 0.01 for mf, 0 otherwise.";

static int parse_hidden(const char *s, size_t *out, size_t *n, char *err, size_t err_len) {
    *n = 0;
    if (strcmp(s, "none") == 0 || *s == '\0') return 0;
    const char *p = s;
    while (*p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v == 0 || v > (1ul << 20) || *p == '-') {
            snprintf(err, err_len, "--hidden: '%s' is not a comma-separated list of layer widths (e.g. 256,128)", s);
            return -1;
        }
        if (*n == MAX_HIDDEN) {
            snprintf(err, err_len, "--hidden: more than %d layers", MAX_HIDDEN);
            return -1;
        }
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static void write_summary(FILE *out, const train_args_t *a, const char *model_desc, size_t n_params,
                          const data_bundle_t *data, metric_kind_t metric, const train_result_t *r) {
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "command", "train");
    json_string(&j, "model", model_names[a->model]);
    json_string(&j, "mode", train_mode_name((train_mode_t)a->mode));
    json_uint(&j, "threads", a->threads);
    json_number(&j, "samples_per_s", r->samples_per_s);
    json_number(&j, "updates_per_s", r->updates_per_s);
    json_number(&j, "wall_s", r->wall_s);
    json_number(&j, "eval_s", r->eval_s);
    json_uint(&j, "samples", r->samples);
    json_uint(&j, "updates", r->updates);
    json_number(&j, "epochs_done", r->last.epoch);
    double target = metric == METRIC_KIND_ACCURACY ? a->target_acc : a->target_rmse;
    json_string(&j, "target_metric", metric == METRIC_KIND_ACCURACY ? "test_accuracy" : "test_rmse");
    json_number(&j, "target", target);
    json_number(&j, "time_to_target_s", r->time_to_target_s);
    if (isnan(r->time_to_target_s)) json_null(&j, "samples_to_target");
    else json_uint(&j, "samples_to_target", r->samples_to_target);
    json_bool(&j, "stopped_at_target", r->stopped_at_target);
    json_number(&j, "final_train_loss", r->last.train_loss);
    json_number(&j, "final_test_loss", r->last.test_loss);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "final_test_accuracy" : "final_test_rmse", r->last.test_metric);
    json_object(&j, "config");
    json_string(&j, "model", model_names[a->model]);
    json_string(&j, "model_detail", model_desc);
    json_uint(&j, "params", n_params);
    json_string(&j, "data", data->description);
    json_uint(&j, "train_examples", data_bundle_num_train(data));
    json_uint(&j, "test_examples", data_bundle_num_test(data));
    json_string(&j, "mode", train_mode_name((train_mode_t)a->mode));
    json_uint(&j, "threads", a->threads);
    json_uint(&j, "epochs", a->epochs);
    json_uint(&j, "batch", a->batch);
    json_string(&j, "optimizer", optimizer_kind_name((optimizer_kind_t)a->optimizer));
    json_number(&j, "lr", a->lr);
    json_string(&j, "lr_schedule", lr_schedule_name((lr_schedule_t)a->schedule));
    json_number(&j, "lr_decay", a->lr_decay);
    json_number(&j, "momentum", a->momentum);
    json_number(&j, "l2", a->l2);
    json_uint(&j, "seed", a->seed);
    json_uint(&j, "eval_every", a->eval_every);
    json_uint(&j, "eval_limit", a->eval_limit);
    json_bool(&j, "pin", a->pin);
    json_string(&j, "blas_core", blas_core_name());
    json_object_end(&j);
    json_end(&j);
    fputc('\n', out);
}

static data_kind_t data_kind_for(int model) {
    return model == MODEL_LOGREG || model == MODEL_SVM ? DATA_KIND_SPARSE
           : model == MODEL_MF                         ? DATA_KIND_RATINGS
                                                       : DATA_KIND_DENSE;
}

int cmd_train(int argc, char **argv) {
    train_args_t a;
    memset(&a, 0, sizeof a);
    a.model = MODEL_MLP;
    a.test_frac = 0.1;
    a.hidden = "256,128";
    a.rank = 16;
    a.l2 = NAN;
    a.threads = 1;
    a.epochs = 1;
    a.lr = NAN;
    a.adagrad_eps = 1e-8;
    a.seed = 1;
    a.target_acc = NAN;
    a.target_rmse = NAN;
    flag_spec_t flags[] = {
        {"model", FLAG_TYPE_CHOICE, &a.model, "M", "model to train (default mlp)", 0, 0, model_choices, 0},
        {"data", FLAG_TYPE_STRING, &a.data, "SPEC", "data source, see above", 0, 0, NULL, 0},
        {"data-dir", FLAG_TYPE_STRING, &a.data_dir, "DIR", "directory with the Fashion-MNIST IDX files", 0, 0, NULL, 0},
        {"train-limit", FLAG_TYPE_SIZE, &a.train_limit, "N", "use only the first N training examples (0: all)", 0, 0, NULL, 0},
        {"test-limit", FLAG_TYPE_SIZE, &a.test_limit, "N", "use only the first N test examples (0: all)", 0, 0, NULL, 0},
        {"test-frac", FLAG_TYPE_DOUBLE, &a.test_frac, "F", "held-out fraction for data without a test split (default 0.1)", 0.0001, 0.9999, NULL, 0},
        {"hidden", FLAG_TYPE_STRING, &a.hidden, "W1,W2", "mlp hidden layer widths (default 256,128)", 0, 0, NULL, 0},
        {"rank", FLAG_TYPE_SIZE, &a.rank, "K", "mf factor rank (default 16)", 1, 4096, NULL, 0},
        {"l2", FLAG_TYPE_DOUBLE, &a.l2, "X", "L2 regularisation strength", 0, 1e6, NULL, 0},
        {"mode", FLAG_TYPE_CHOICE, &a.mode, "MODE", "how threads share the model (default hogwild)", 0, 0, "hogwild|locked|sync", 0},
        {"threads", FLAG_TYPE_SIZE, &a.threads, "T", "training threads (default 1)", 1, 1024, NULL, 0},
        {"epochs", FLAG_TYPE_SIZE, &a.epochs, "E", "passes over the training set (default 1)", 1, 1e6, NULL, 0},
        {"batch", FLAG_TYPE_SIZE, &a.batch, "B", "examples per step per thread", 1, 1 << 20, NULL, 0},
        {"optimizer", FLAG_TYPE_CHOICE, &a.optimizer, "OPT", "update rule (default sgd)", 0, 0, "sgd|adagrad", 0},
        {"lr", FLAG_TYPE_DOUBLE, &a.lr, "RATE", "initial step size", 1e-12, 1e6, NULL, 0},
        {"lr-schedule", FLAG_TYPE_CHOICE, &a.schedule, "S", "step-size schedule (default constant)", 0, 0, "constant|inverse-time|epoch-decay", 0},
        {"lr-decay", FLAG_TYPE_DOUBLE, &a.lr_decay, "X", "inverse-time: lr/(1+X*updates); epoch-decay: lr*X^epoch", 0, 1e6, NULL, 0},
        {"momentum", FLAG_TYPE_DOUBLE, &a.momentum, "M", "SGD momentum in [0,1) (default 0)", 0, 0.9999, NULL, 0},
        {"adagrad-eps", FLAG_TYPE_DOUBLE, &a.adagrad_eps, "E", "Adagrad denominator guard (default 1e-8)", 1e-30, 1, NULL, 0},
        {"seed", FLAG_TYPE_U64, &a.seed, "S", "seed for data order, initialisation and generators (default 1)", 0, 0, NULL, 0},
        {"eval-every", FLAG_TYPE_SIZE, &a.eval_every, "N", "evaluate every N training samples (default: once per epoch)", 0, 0, NULL, 0},
        {"eval-limit", FLAG_TYPE_SIZE, &a.eval_limit, "N", "evaluate on the first N test examples (0: all)", 0, 0, NULL, 0},
        {"target-acc", FLAG_TYPE_DOUBLE, &a.target_acc, "A", "report time to reach this test accuracy", 0, 1, NULL, 0},
        {"target-rmse", FLAG_TYPE_DOUBLE, &a.target_rmse, "R", "report time to reach this test RMSE (mf)", 1e-12, 1e12, NULL, 0},
        {"stop-at-target", FLAG_TYPE_BOOL, &a.stop_at_target, NULL, "stop at the first evaluation that meets the target", 0, 0, NULL, 0},
        {"pin", FLAG_TYPE_BOOL, &a.pin, NULL, "pin thread t to CPU t mod #CPUs", 0, 0, NULL, 0},
        {"log", FLAG_TYPE_STRING, &a.log, "FILE", "write one CSV row per evaluation (schema in README)", 0, 0, NULL, 0},
        {"summary", FLAG_TYPE_STRING, &a.summary, "FILE", "also write the JSON summary to FILE", 0, 0, NULL, 0},
        {"quiet", FLAG_TYPE_BOOL, &a.quiet, NULL, "no startup or progress lines on stderr", 0, 0, NULL, 0},
    };
    size_t n_flags = sizeof flags / sizeof flags[0];
    char err[ERR_LEN] = "";
    int parsed = flags_command("asgd train", usage, description, flags, n_flags, argc, argv);
    if (parsed >= 0) return parsed;
    int sparse = a.model == MODEL_LOGREG || a.model == MODEL_SVM;
    if (isnan(a.lr)) a.lr = sparse ? 0.5 : 0.05;
    if (a.batch == 0) a.batch = (a.model == MODEL_MLP || a.model == MODEL_SOFTMAX) ? 16 : 1;
    if (isnan(a.l2)) a.l2 = a.model == MODEL_MF ? 0.01 : 0.0;
    if (!a.data) a.data = sparse ? "gen:sparse" : a.model == MODEL_MF ? "gen:ratings" : "fashion-mnist";
    if (a.model == MODEL_MF && !isnan(a.target_acc)) {
        fprintf(stderr, "asgd train: --target-acc: mf is measured by RMSE; use --target-rmse\n");
        return 2;
    }
    if (a.model != MODEL_MF && !isnan(a.target_rmse)) {
        fprintf(stderr, "asgd train: --target-rmse: only mf is measured by RMSE; use --target-acc\n");
        return 2;
    }
    if (a.stop_at_target && isnan(a.target_acc) && isnan(a.target_rmse)) {
        fprintf(stderr, "asgd train: --stop-at-target needs --target-acc or --target-rmse\n");
        return 2;
    }
    size_t hidden[MAX_HIDDEN], n_hidden = 0;
    if (a.model == MODEL_MLP && parse_hidden(a.hidden, hidden, &n_hidden, err, sizeof err) != 0) {
        fprintf(stderr, "asgd train: %s\n", err);
        return 2;
    }
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.kind = (optimizer_kind_t)a.optimizer;
    oc.lr = a.lr;
    oc.schedule = (lr_schedule_t)a.schedule;
    oc.decay = a.lr_decay;
    oc.momentum = a.momentum;
    oc.epsilon = a.adagrad_eps;
    if (oc.schedule == LR_SCHEDULE_EPOCH_DECAY && !flags_find(flags, n_flags, "lr-decay")->seen) oc.decay = 0.5;
    a.lr_decay = oc.decay;
    if (optimizer_config_check(&oc, err, sizeof err) != 0) {
        fprintf(stderr, "asgd train: %s\n", err);
        return 2;
    }

    data_options_t dopt = {a.data, a.data_dir, a.train_limit, a.test_limit, a.test_frac, a.seed};
    data_bundle_t data;
    if (data_bundle_load(&dopt, data_kind_for(a.model), &data, err, sizeof err) != 0) {
        fprintf(stderr, "asgd train: %s\n", err);
        return 1;
    }
    model_t *model = NULL;
    switch (a.model) {
    case MODEL_LOGREG:
    case MODEL_SVM:
        model = model_new_linear(a.model == MODEL_SVM ? LINEAR_LOSS_HINGE : LINEAR_LOSS_LOGISTIC, &data.sparse_train,
                                 &data.sparse_test, a.l2, err, sizeof err);
        break;
    case MODEL_SOFTMAX:
    case MODEL_MLP:
        model = model_new_mlp(&data.dense_train, &data.dense_test, hidden, n_hidden, a.l2, err, sizeof err);
        break;
    case MODEL_MF:
        model = model_new_mf(&data.ratings_train, &data.ratings_test, a.rank, a.l2, err, sizeof err);
        break;
    }
    int status = 1;
    run_report_t *report = NULL;
    FILE *summary_file = NULL;
    if (!model) goto fail;
    train_config_t tc;
    train_config_default(&tc);
    tc.mode = (train_mode_t)a.mode;
    tc.threads = a.threads;
    tc.epochs = a.epochs;
    tc.batch = a.batch;
    tc.seed = a.seed;
    tc.eval_every = a.eval_every;
    tc.eval_limit = a.eval_limit;
    tc.target = a.model == MODEL_MF ? a.target_rmse : a.target_acc;
    tc.stop_at_target = a.stop_at_target;
    tc.pin = a.pin;
    tc.progress_interval_s = a.quiet ? 0.0 : 0.5;
    if (train_config_check(&tc, model_num_train(model), err, sizeof err) != 0) goto fail;
    size_t n_params = model_num_params(model);
    if (a.summary && !(summary_file = fopen(a.summary, "w"))) {
        snprintf(err, sizeof err, "--summary %s: cannot open for writing: %s", a.summary, strerror(errno));
        goto fail;
    }
    char model_desc[160];
    model_describe(model, model_desc, sizeof model_desc);
    if (!a.quiet) {
        print_banner(stderr, "train");
        fprintf(stderr, "asgd: model %s | data %s: %zu train / %zu test\n", model_desc, data.description,
                data_bundle_num_train(&data), data_bundle_num_test(&data));
        fprintf(stderr, "asgd: %s, %zu threads, batch %zu, %zu epochs, %s lr %g (%s), seed %llu\n",
                train_mode_name(tc.mode), tc.threads, tc.batch, tc.epochs, optimizer_kind_name(oc.kind), oc.lr,
                lr_schedule_name(oc.schedule), (unsigned long long)a.seed);
    }
    double total = (double)model_num_train(model) * (double)a.epochs;
    if (!(report = run_report_new(a.log, model_metric(model), a.quiet ? NULL : stderr, total, err, sizeof err))) goto fail;
    train_callbacks_t cb = run_report_callbacks(report);
    train_result_t result;
    if (train_fresh(model, &oc, &tc, a.seed, &cb, &result, NULL, err, sizeof err) != 0) goto fail;
    if (run_report_close(&report, err, sizeof err) != 0) goto fail;
    write_summary(stdout, &a, model_desc, n_params, &data, model_metric(model), &result);
    fflush(stdout);
    if (summary_file) {
        write_summary(summary_file, &a, model_desc, n_params, &data, model_metric(model), &result);
        if (fclose(summary_file) != 0) {
            summary_file = NULL;
            snprintf(err, sizeof err, "--summary %s: writing failed: %s", a.summary, strerror(errno));
            goto fail;
        }
        summary_file = NULL;
    }
    status = 0;
fail:
    if (status != 0) fprintf(stderr, "asgd train: %s\n", err);
    if (summary_file) fclose(summary_file);
    char ignored[8];
    run_report_close(&report, ignored, sizeof ignored);
    model_destroy(&model);
    data_bundle_free(&data);
    return status;
}
