// Training-job flags shared by every command that trains (train_args.h).
#include "engine/run/train_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/optimizer_kind.h"
#include "net/stop_signal.h"

const model_descriptor_t *train_args_model(const train_args_t *a) {
    const model_descriptor_t *d = model_registry_at((size_t)a->model);
    return d ? d : model_registry_default();
}

data_kind_t train_args_data_kind(const train_args_t *a) {
    const model_descriptor_t *d = train_args_model(a);
    return data_spec_kind(a->data ? a->data : d->defaults.data, d->data, d->create_sparse != NULL);
}

double train_args_target(const train_args_t *a) {
    return train_args_model(a)->metric == METRIC_KIND_RMSE ? a->target_rmse : a->target_acc;
}

void train_args_defaults(train_args_t *a) {
    memset(a, 0, sizeof *a);
    a->model = model_registry_index(model_registry_default());
    a->test_frac = 0.1;
    a->l2 = NAN;
    a->threads = 1;
    a->epochs = 1;
    a->lr = NAN;
    a->adagrad_eps = 1e-8;
    a->seed = 1;
    a->target_acc = NAN;
    a->target_rmse = NAN;
    a->lr_decay = NAN;  // the schedule's own when not given (train_args_finish)
    gpu_options_t gpu;  // the GPU's defaults, as its flags show them
    gpu_options_default(&gpu);
    a->gpu_chunk = gpu.chunk;
    a->gpu_in_flight = gpu.in_flight;
    // The default model's options, for callers that build without parsing flags.
    const model_descriptor_t *d = train_args_model(a);
    flag_spec_t specs[MODEL_MAX_FLAGS];
    char err[256];
    model_options_init(d, &a->model_opts, specs);
    if (d->options_finish) d->options_finish(&a->model_opts, specs, err, sizeof err);
}

size_t train_args_flags(train_args_t *a, flag_spec_t *specs, int with_mode) {
    const flag_spec_t table[] = {
        {"model", FLAG_TYPE_CHOICE, &a->model, "M", a->model_help, 0, 0, a->model_choices, 0},
        {"data", FLAG_TYPE_STRING, &a->data, "SPEC", "data source, see above", 0, 0, NULL, 0},
        {"test-data", FLAG_TYPE_STRING, &a->test_data, "FILE",
         "the test set: a libsvm or ratings file, or for dense models a directory of t10k IDX files; the training data "
         "is then used whole",
         0, 0, NULL, 0},
        {"config", FLAG_TYPE_STRING, &a->config, "FILE",
         "read flags from FILE (name = value lines; docs/cli.md) before the command line's, which override them", 0, 0,
         NULL, 0},
        {"data-dir", FLAG_TYPE_STRING, &a->data_dir, "DIR", "directory with the Fashion-MNIST IDX files", 0, 0, NULL,
         0},
        {"train-limit", FLAG_TYPE_SIZE, &a->train_limit, "N", "use only the first N training examples (0: all)", 0, 0,
         NULL, 0},
        {"test-limit", FLAG_TYPE_SIZE, &a->test_limit, "N", "use only the first N test examples (0: all)", 0, 0, NULL,
         0},
        {"test-frac", FLAG_TYPE_DOUBLE, &a->test_frac, "F",
         "held-out fraction for data without a test split (0 with --test-data)", 0, 0.9999, NULL, 0},
        {"label-column", FLAG_TYPE_STRING, &a->label_column, "N|NAME",
         "CSV data: the labels' column, by position from 0 or by its header name (the first when not given)", 0, 0,
         NULL, 0},
        {"csv-header", FLAG_TYPE_BOOL, &a->csv_header, NULL,
         "CSV data: the first line names the columns (else detected: a line with a cell that is not a number)", 0, 0,
         NULL, 0},
        {"l2", FLAG_TYPE_DOUBLE, &a->l2, "X", "L2 regularisation strength (the model's when not given)", 0, 1e6, NULL,
         0},
        {"mode", FLAG_TYPE_CHOICE, &a->mode, "MODE", "how threads share the model", 0, 0, "hogwild|locked|sync", 0},
        {"hogwild-variant", FLAG_TYPE_CHOICE, &a->hogwild_variant, "V",
         "--mode hogwild: plain (the Hogwild! paper's: every step on the shared model) or replicas (each thread steps "
         "on its own replica, merged into the shared model every --merge-every steps)",
         0, 0, "plain|replicas", 0},
        {"merge-every", FLAG_TYPE_SIZE, &a->merge_every, "STEPS",
         "--hogwild-variant replicas: a thread's steps between merges (when not given: the examples whose touches "
         "add up to 20 times the model's size, at least 8192 examples' worth and 1 step)",
         1, 1e12, NULL, 0},
        {"threads", FLAG_TYPE_SIZE, &a->threads, "T", "training threads", 1, 1024, NULL, 0},
        {"epochs", FLAG_TYPE_SIZE, &a->epochs, "E", "passes over the training set", 1, 1e6, NULL, 0},
        {"batch", FLAG_TYPE_SIZE, &a->batch, "B", "examples per step per thread (the model's when not given)", 1,
         1 << 20, NULL, 0},
        {"optimizer", FLAG_TYPE_CHOICE, &a->optimizer, "OPT", "update rule", 0, 0, OPTIMIZER_KIND_CHOICES, 0},
        {"lr", FLAG_TYPE_DOUBLE, &a->lr, "RATE", "initial step size (the model's when not given)", 1e-12, 1e6, NULL, 0},
        {"lr-schedule", FLAG_TYPE_CHOICE, &a->schedule, "S", "step-size schedule", 0, 0,
         "constant|inverse-time|epoch-decay", 0},
        {"lr-decay", FLAG_TYPE_DOUBLE, &a->lr_decay, "X",
         "inverse-time: lr/(1+X*updates), 0 when not given; epoch-decay: lr*X^epoch, 0.5 when not given", 0, 1e6, NULL,
         0},
        {"warmup", FLAG_TYPE_SIZE, &a->warmup, "STEPS",
         "grow the step linearly to --lr over the first STEPS updates (0: none)", 0, 1e12, NULL, 0},
        {"clip-grad-norm", FLAG_TYPE_DOUBLE, &a->clip_grad_norm, "C",
         "scale each step's gradient down to L2 norm C when it is longer (direction kept; off when not given)", 1e-30,
         1e30, NULL, 0},
        {"momentum", FLAG_TYPE_DOUBLE, &a->momentum, "M", "SGD momentum in [0,1)", 0, 0.9999, NULL, 0},
        {"adagrad-eps", FLAG_TYPE_DOUBLE, &a->adagrad_eps, "E", "Adagrad denominator guard", 1e-30, 1, NULL, 0},
        {"seed", FLAG_TYPE_U64, &a->seed, "S", "seed for data order, initialisation and generators", 0, 0, NULL, 0},
        {"eval-every", FLAG_TYPE_SIZE, &a->eval_every, "N", "evaluate every N training samples (0: once per epoch)", 0,
         0, NULL, 0},
        {"eval-every-s", FLAG_TYPE_DOUBLE, &a->eval_every_s, "S",
         "also evaluate every S seconds of training (evaluation excluded; in a distributed run, the global model; off "
         "when not given)",
         1e-3, 1e9, NULL, 0},
        {"eval-limit", FLAG_TYPE_SIZE, &a->eval_limit, "N", "evaluate on the first N test examples (0: all)", 0, 0,
         NULL, 0},
        {"target-acc", FLAG_TYPE_DOUBLE, &a->target_acc, "A", "report time to reach this test accuracy", 0, 1, NULL, 0},
        {"target-rmse", FLAG_TYPE_DOUBLE, &a->target_rmse, "R",
         "report time to reach this test RMSE (models measured by RMSE)", 1e-12, 1e12, NULL, 0},
        {"stop-at-target", FLAG_TYPE_BOOL, &a->stop_at_target, NULL,
         "stop at the first evaluation that meets the target", 0, 0, NULL, 0},
        {"time-limit", FLAG_TYPE_DOUBLE, &a->time_limit, "S",
         "stop after S seconds of training (evaluation excluded), even mid-epoch (0: no limit)", 0, 1e9, NULL, 0},
        {"pin", FLAG_TYPE_BOOL, &a->pin, NULL,
         "pin training thread t to the t-th CPU this process may use (launch: worker K's threads after those of "
         "workers 0..K-1)",
         0, 0, NULL, 0},
        {"log", FLAG_TYPE_STRING, &a->log, "FILE", "write one CSV row per evaluation (schema in README)", 0, 0, NULL,
         0},
        {"summary", FLAG_TYPE_STRING, &a->summary, "FILE", "also write the JSON summary to FILE", 0, 0, NULL, 0},
        {"trace", FLAG_TYPE_STRING, &a->trace, "FILE",
         "write a timeline of the run to FILE (Chrome trace-event JSON; launch: the children's merged; docs/trace.md)",
         0, 0, NULL, 0},
        {"quiet", FLAG_TYPE_BOOL, &a->quiet, NULL, "no startup or progress lines on stderr", 0, 0, NULL, 0},
        {"checkpoint-every", FLAG_TYPE_DOUBLE, &a->checkpoint_every, "S",
         "train, server, worker (asp/ssp): write a checkpoint every S seconds of training", 0, 1e9, NULL, 0},
        {"checkpoint-dir", FLAG_TYPE_STRING, &a->checkpoint_dir, "DIR",
         "where checkpoints go (train.ckpt, server-K.ckpt, worker-K.ckpt; the --resume directory when not given)", 0, 0,
         NULL, 0},
        {"resume", FLAG_TYPE_STRING, &a->resume, "DIR",
         "train, server, worker (asp/ssp): continue from the checkpoint in DIR (same flags as the run that wrote it)",
         0, 0, NULL, 0},
        {"device", FLAG_TYPE_CHOICE, &a->device, "D", "where the steps run (cuda: one thread drives the GPU)", 0, 0,
         TRAIN_DEVICE_CHOICES, 0},
        {"gpu", FLAG_TYPE_SIZE, &a->gpu_index, "K", "--device cuda: the CUDA device index", 0, 1023, NULL, 0},
        {"gpu-scatter", FLAG_TYPE_CHOICE, &a->gpu_scatter, "S",
         "--device cuda, sparse Hogwild!: how updates are written", 0, 0, "plain|atomic", 0},
        {"gpu-chunk", FLAG_TYPE_SIZE, &a->gpu_chunk, "N", "--device cuda, sparse Hogwild!: examples per kernel launch",
         1, 1 << 26, NULL, 0},
        {"gpu-in-flight", FLAG_TYPE_SIZE, &a->gpu_in_flight, "N",
         "--device cuda, sparse Hogwild!: examples under way at once, the degree of asynchrony (0: the whole chunk)", 0,
         1 << 26, NULL, 0},
    };
    _Static_assert(sizeof table / sizeof table[0] + MODEL_REGISTRY_MAX_FLAGS <= TRAIN_ARGS_N_FLAGS, "flag table");
    model_registry_names(a->model_choices, sizeof a->model_choices, "|", NULL);
    snprintf(a->model_help, sizeof a->model_help, "model to train");
    size_t n = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        int single_node = strcmp(table[i].name, "mode") == 0 || strcmp(table[i].name, "hogwild-variant") == 0 ||
                          strcmp(table[i].name, "merge-every") == 0;
        if (!with_mode && single_node) continue;
        specs[n++] = table[i];
    }
    // The models' own flags, each name once, kept as text until the model is
    // known (models may share a name: --hidden); help names who reads it.
    const char *names[MODEL_REGISTRY_MAX_FLAGS];
    flag_spec_t first[MODEL_REGISTRY_MAX_FLAGS];
    size_t n_names = model_registry_flag_names(names, first);
    for (size_t k = 0; k < n_names; k++) {
        if (flags_find(table, sizeof table / sizeof table[0], names[k]))
            continue;  // a shared flag's name: refused at use
        char *help = a->model_flag_help[k];
        size_t at = 0;
        help[0] = '\0';
        for (size_t i = 0; i < model_registry_count(); i++) {
            const model_descriptor_t *d = model_registry_at(i);
            model_options_t scratch;
            flag_spec_t own[MODEL_MAX_FLAGS];
            model_options_init(d, &scratch, own);
            const flag_spec_t *f = flags_find(own, d->n_flags, names[k]);
            if (f && at < TRAIN_ARGS_HELP_LEN) {
                int w = snprintf(help + at, TRAIN_ARGS_HELP_LEN - at, "%s%s: %s", at ? "; " : "", d->name, f->help);
                at += w > 0 ? (size_t)w : 0;
            }
        }
        int is_bool = first[k].type == FLAG_TYPE_BOOL;
        specs[n++] = (flag_spec_t){names[k],
                                   is_bool ? FLAG_TYPE_BOOL : FLAG_TYPE_STRING,
                                   is_bool ? (void *)&a->model_flag_bool[k] : (void *)&a->model_flag_text[k],
                                   first[k].value_name,
                                   help,
                                   0,
                                   0,
                                   NULL,
                                   0};
    }
    return n;
}

int train_args_is_model_flag(const train_args_t *a, const flag_spec_t *spec) {
    for (size_t k = 0; k < MODEL_REGISTRY_MAX_FLAGS; k++)
        if (spec->target == (const void *)&a->model_flag_text[k] ||
            spec->target == (const void *)&a->model_flag_bool[k])
            return 1;
    return 0;
}

const char *train_args_data_kind_text(const model_descriptor_t *d) {
    if (d->data == DATA_KIND_DENSE && d->create_sparse) return "dense images, or sparse features (libsvm, CSV)";
    return d->data == DATA_KIND_DENSE    ? "dense images"
           : d->data == DATA_KIND_SPARSE ? "sparse features (libsvm, CSV)"
                                         : "ratings";
}

flags_status_t train_args_parse(train_args_t *a, const char *command, flag_spec_t *specs, size_t n_specs, int argc,
                                char **argv, char *err, size_t err_len) {
    flags_argv_free(&a->words);
    free(a->given);
    a->given = NULL;
    if (flags_file_merge(command, "config", specs, n_specs, argc, argv, &a->words, err, err_len) != 0)
        return FLAGS_STATUS_ERROR;
    flags_status_t st = flags_parse(command, specs, n_specs, a->words.argc, a->words.argv, err, err_len);
    if (st != FLAGS_STATUS_OK) return st;
    static const char *const not_repeated[] = {"config", "run-dir", NULL};
    char why[256];
    if (!(a->given = flags_file_format(specs, n_specs, not_repeated, why, sizeof why))) {
        snprintf(err, err_len, "%s: %s", command, why);
        return FLAGS_STATUS_ERROR;
    }
    return FLAGS_STATUS_OK;
}

void train_args_release(train_args_t *a) {
    flags_argv_free(&a->words);
    free(a->given);
    a->given = NULL;
}

int train_args_write_flag_file(const char *path, const char *comment, const char *flags, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, err_len, "%.300s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# %s\n", comment);
    fputs(flags ? flags : "", f);
    if (ferror(f) | (fclose(f) != 0)) {
        snprintf(err, err_len, "%.300s: writing failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int train_args_write_given(const train_args_t *a, const char *command, const char *path, char *err, size_t err_len) {
    char comment[300];
    snprintf(comment, sizeof comment,
             "%s %s: the flags this run was given (--config and the command line); %s --config FILE repeats it",
             command, ASGD_VERSION, command);
    return train_args_write_flag_file(path, comment, a->given, err, err_len);
}

int train_args_write_run_config(const train_args_t *a, const char *dir, char *err, size_t err_len) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config", dir);
    return train_args_write_given(a, "asgd launch", path, err, err_len);
}

// Every model's own flags from their text: the chosen model's into
// a->model_opts, the others' into scratch (so that a bad value is refused
// whichever model is chosen, as for any flag). Returns 0, or -1 with err.
static int model_flags_finish(train_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command, char *err,
                              size_t err_len) {
    const model_descriptor_t *chosen = train_args_model(a);
    for (size_t i = 0; i < model_registry_count(); i++) {
        const model_descriptor_t *d = model_registry_at(i);
        model_options_t scratch;
        void *opts = d == chosen ? (void *)&a->model_opts : (void *)&scratch;
        flag_spec_t own[MODEL_MAX_FLAGS];
        model_options_init(d, opts, own);
        for (size_t k = 0; k < d->n_flags; k++) {
            const flag_spec_t *given = flags_find(specs, n_specs, own[k].name);
            if (!given || !given->seen) continue;
            if (!train_args_is_model_flag(a, given)) {
                snprintf(err, err_len, "%s: model %s: its flag --%s has a training flag's name", command, d->name,
                         own[k].name);
                return -1;
            }
            const char *text = given->type == FLAG_TYPE_BOOL ? (*(const int *)given->target ? "true" : "false")
                                                             : *(const char *const *)given->target;
            if (flags_set(command, &own[k], text, err, err_len) != 0) return -1;
        }
        if (d == chosen && d->options_finish) {
            char why[400];
            if (d->options_finish(opts, own, why, sizeof why) != 0) {
                snprintf(err, err_len, "%s: %s", command, why);
                return -1;
            }
        }
    }
    return 0;
}

// For the list of the models measured by RMSE.
static int measured_by_rmse(const model_descriptor_t *d) { return d->metric == METRIC_KIND_RMSE; }

int train_args_finish(train_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command, char *err,
                      size_t err_len) {
    char why[512];
    const model_descriptor_t *d = train_args_model(a);
    if (isnan(a->lr)) a->lr = d->defaults.lr;
    if (a->batch == 0) a->batch = d->defaults.batch;
    if (isnan(a->l2)) a->l2 = d->defaults.l2;
    if (!a->data) a->data = d->defaults.data;
    if (!a->checkpoint_dir) a->checkpoint_dir = a->resume;
    if (a->config && !a->words.argv) {
        snprintf(err, err_len, "%s: --config: this caller reads no flag file; give the flags themselves", command);
        return 2;
    }
    if (a->test_data && a->test_frac != 0.0 && flags_find(specs, n_specs, "test-frac")->seen) {
        snprintf(err, err_len,
                 "%s: --test-frac: with --test-data the test set is that file and the training data "
                 "is used whole; drop --test-frac (or give 0)",
                 command);
        return 2;
    }
    if (d->metric == METRIC_KIND_RMSE && !isnan(a->target_acc)) {
        snprintf(err, err_len, "%s: --target-acc: %s is measured by RMSE; use --target-rmse", command, d->name);
        return 2;
    }
    if (d->metric != METRIC_KIND_RMSE && !isnan(a->target_rmse)) {
        char names[256];
        size_t n = model_registry_names(names, sizeof names, ", ", measured_by_rmse);
        snprintf(err, err_len, "%s: --target-rmse: only %s %s measured by RMSE; use --target-acc", command,
                 n ? names : "no model", n > 1 ? "are" : "is");
        return 2;
    }
    if (a->data_dir && d->data != DATA_KIND_DENSE) {
        snprintf(err, err_len, "%s: --data-dir: %s reads %s from --data; --data-dir applies to models on dense images",
                 command, d->name, train_args_data_kind_text(d));
        return 2;
    }
    if (a->stop_at_target && isnan(a->target_acc) && isnan(a->target_rmse)) {
        snprintf(err, err_len, "%s: --stop-at-target needs --target-acc or --target-rmse", command);
        return 2;
    }
    if (a->device == 0 &&
        (flags_find(specs, n_specs, "gpu")->seen || flags_find(specs, n_specs, "gpu-scatter")->seen ||
         flags_find(specs, n_specs, "gpu-chunk")->seen || flags_find(specs, n_specs, "gpu-in-flight")->seen)) {
        snprintf(err, err_len, "%s: --gpu/--gpu-scatter/--gpu-chunk/--gpu-in-flight apply to --device cuda", command);
        return 2;
    }
    const flag_spec_t *variant = flags_find(specs, n_specs, "hogwild-variant");
    if (variant && variant->seen && a->hogwild_variant == HOGWILD_VARIANT_REPLICAS && a->mode != TRAIN_MODE_HOGWILD) {
        snprintf(err, err_len, "%s: --hogwild-variant replicas: applies to --mode hogwild, not --mode %s", command,
                 train_mode_name((train_mode_t)a->mode));
        return 2;
    }
    if (variant && variant->seen && a->hogwild_variant == HOGWILD_VARIANT_REPLICAS && a->device) {
        snprintf(err, err_len, "%s: --hogwild-variant replicas: for the CPU threads, not --device cuda", command);
        return 2;
    }
    const flag_spec_t *merge = flags_find(specs, n_specs, "merge-every");
    if (merge && merge->seen && a->hogwild_variant != HOGWILD_VARIANT_REPLICAS) {
        snprintf(err, err_len, "%s: --merge-every: applies to --hogwild-variant replicas", command);
        return 2;
    }
    if (a->device && a->clip_grad_norm > 0) {
        snprintf(err, err_len, "%s: --clip-grad-norm: the GPU steps do not clip yet; use --device cpu", command);
        return 2;
    }
    gpu_options_default(&a->gpu);
    a->gpu.device = (int)a->gpu_index;
    a->gpu.scatter_atomic = a->gpu_scatter;
    a->gpu.chunk = a->gpu_chunk;
    a->gpu.in_flight = a->gpu_in_flight;
    if (model_flags_finish(a, specs, n_specs, command, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s", why);
        return 2;
    }
    if (a->device && !d->gpu) {
        snprintf(err, err_len, "%s: --device cuda: %s runs on the CPU only", command, d->name);
        return 2;
    }
    if (a->device && train_args_data_kind(a) != d->data) {
        snprintf(err, err_len,
                 "%s: --device cuda: %s runs on the GPU over dense images only; over sparse input (--data "
                 "%s) it runs on the CPU (--device cpu)",
                 command, d->name, a->data);
        return 2;
    }
    optimizer_config_default(&a->opt);
    a->opt.kind = (optimizer_kind_t)a->optimizer;
    a->opt.lr = a->lr;
    a->opt.schedule = (lr_schedule_t)a->schedule;
    a->opt.decay = isnan(a->lr_decay) ? 0.0 : a->lr_decay;
    a->opt.momentum = a->momentum;
    a->opt.warmup = a->warmup;
    a->opt.epsilon = a->adagrad_eps;
    if (a->opt.schedule == LR_SCHEDULE_EPOCH_DECAY && isnan(a->lr_decay)) a->opt.decay = 0.5;
    a->lr_decay = a->opt.decay;
    if (optimizer_config_check(&a->opt, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s: %s", command, why);
        return 2;
    }
    return 0;
}

int train_args_load(const train_args_t *a, data_bundle_t *data, char *err, size_t err_len) {
    data_kind_t kind = train_args_data_kind(a);
    data_options_t dopt = {a->data, a->data_dir,  a->train_limit,  a->test_limit, a->test_frac,
                           a->seed, a->test_data, a->label_column, a->csv_header};
    if (data_bundle_load(&dopt, kind, data, err, err_len) != 0) return -1;
    if (data_bundle_num_test(data) == 0) {  // every evaluation would be NaN
        snprintf(err, err_len,
                 "--data %s: no test examples (%zu training examples; --test-frac %g leaves none): give "
                 "more examples or a larger --test-frac",
                 a->data, data_bundle_num_train(data), a->test_frac);
        return -1;
    }
    return 0;
}

int train_args_make_model(const train_args_t *a, const data_bundle_t *data, model_t **model, char *err,
                          size_t err_len) {
    *model = NULL;
    const model_descriptor_t *d = train_args_model(a);
    data_kind_t kind = train_args_data_kind(a);
    const void *train = kind == DATA_KIND_DENSE    ? (const void *)&data->dense_train
                        : kind == DATA_KIND_SPARSE ? (const void *)&data->sparse_train
                                                   : (const void *)&data->ratings_train;
    const void *test = kind == DATA_KIND_DENSE    ? (const void *)&data->dense_test
                       : kind == DATA_KIND_SPARSE ? (const void *)&data->sparse_test
                                                  : (const void *)&data->ratings_test;
    const sparse_dataset_t *s = &data->sparse_train;
    if (kind == DATA_KIND_SPARSE && d->output != MODEL_OUTPUT_CLASS_LOGITS && s->cls && s->n_classes > 2) {
        char shown[160];
        sparse_dataset_labels_text(s, shown, sizeof shown);
        snprintf(err, err_len,
                 "--data %s: %zu labels (%s); %s is a binary classifier and takes two (softmax and mlp "
                 "take more)",
                 a->data, s->n_classes, shown, d->name);
        return -1;
    }
    *model = model_create(d, kind, train, test, &a->model_opts, a->l2, a->seed, err, err_len);
    return *model ? 0 : -1;
}

int train_args_build(const train_args_t *a, data_bundle_t *data, model_t **model, char *err, size_t err_len) {
    *model = NULL;
    if (train_args_load(a, data, err, err_len) != 0) return -1;
    return train_args_make_model(a, data, model, err, err_len);
}

void train_args_train_config(const train_args_t *a, train_config_t *tc) {
    train_config_default(tc);
    tc->mode = (train_mode_t)a->mode;
    tc->threads = a->threads;
    tc->epochs = a->epochs;
    tc->batch = a->batch;
    tc->seed = a->seed;
    tc->eval_every = a->eval_every;
    tc->eval_every_s = a->eval_every_s;
    tc->eval_limit = a->eval_limit;
    tc->target = train_args_target(a);
    tc->stop_at_target = a->stop_at_target;
    tc->time_limit_s = a->time_limit;
    tc->pin = a->pin;
    tc->progress_interval_s = a->quiet ? 0.0 : 0.5;
    tc->device = a->device ? &gpu_device_ops : NULL;
    tc->device_options = a->device ? &a->gpu : NULL;
    tc->clip_grad_norm = a->clip_grad_norm;
    tc->hogwild_variant = (hogwild_variant_t)a->hogwild_variant;
    tc->merge_every = a->merge_every;
    tc->interrupt = stop_signal_flag();  // set once the command installed stop_signal_install
}

const char *train_args_checkpoint_flag(const train_args_t *a) {
    return a->checkpoint_dir && a->checkpoint_dir == a->resume ? "--resume" : "--checkpoint-dir";
}
