// Training-job flags shared by every command that trains (train_args.h).
#include "engine/cli/train_args.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/stop_signal.h"  // defines: stop_signal_flag

const char *const train_model_names[] = {"logreg", "svm", "softmax", "mlp", "mf", "embmlp"};

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
        if (*n == TRAIN_ARGS_MAX_HIDDEN) {
            snprintf(err, err_len, "--hidden: more than %d layers", TRAIN_ARGS_MAX_HIDDEN);
            return -1;
        }
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static data_kind_t data_kind_for(int model) {
    return model == MODEL_LOGREG || model == MODEL_SVM || model == MODEL_EMBMLP ? DATA_KIND_SPARSE
           : model == MODEL_MF                         ? DATA_KIND_RATINGS
                                                       : DATA_KIND_DENSE;
}

void train_args_defaults(train_args_t *a) {
    memset(a, 0, sizeof *a);
    a->model = MODEL_MLP;
    a->test_frac = 0.1;
    a->hidden = "256,128";
    a->rank = 16;
    a->embed_dim = 8;
    a->l2 = NAN;
    a->threads = 1;
    a->epochs = 1;
    a->lr = NAN;
    a->adagrad_eps = 1e-8;
    a->seed = 1;
    a->target_acc = NAN;
    a->target_rmse = NAN;
}

size_t train_args_flags(train_args_t *a, flag_spec_t *specs, int with_mode) {
    const flag_spec_t table[] = {
        {"model", FLAG_TYPE_CHOICE, &a->model, "M", "model to train (default mlp)", 0, 0, "logreg|svm|softmax|mlp|mf|embmlp", 0},
        {"data", FLAG_TYPE_STRING, &a->data, "SPEC", "data source, see above", 0, 0, NULL, 0},
        {"data-dir", FLAG_TYPE_STRING, &a->data_dir, "DIR", "directory with the Fashion-MNIST IDX files", 0, 0, NULL, 0},
        {"train-limit", FLAG_TYPE_SIZE, &a->train_limit, "N", "use only the first N training examples (0: all)", 0, 0, NULL, 0},
        {"test-limit", FLAG_TYPE_SIZE, &a->test_limit, "N", "use only the first N test examples (0: all)", 0, 0, NULL, 0},
        {"test-frac", FLAG_TYPE_DOUBLE, &a->test_frac, "F", "held-out fraction for data without a test split (default 0.1)", 0.0001, 0.9999, NULL, 0},
        {"hidden", FLAG_TYPE_STRING, &a->hidden, "W1,W2", "mlp hidden layer widths (default 256,128); embmlp: one width (default 32)", 0, 0, NULL, 0},
        {"embed-dim", FLAG_TYPE_SIZE, &a->embed_dim, "K", "embmlp: embedding width per feature (default 8)", 1, 4096, NULL, 0},
        {"rank", FLAG_TYPE_SIZE, &a->rank, "K", "mf factor rank (default 16)", 1, 4096, NULL, 0},
        {"l2", FLAG_TYPE_DOUBLE, &a->l2, "X", "L2 regularisation strength", 0, 1e6, NULL, 0},
        {"mode", FLAG_TYPE_CHOICE, &a->mode, "MODE", "how threads share the model (default hogwild)", 0, 0, "hogwild|locked|sync", 0},
        {"threads", FLAG_TYPE_SIZE, &a->threads, "T", "training threads (default 1)", 1, 1024, NULL, 0},
        {"epochs", FLAG_TYPE_SIZE, &a->epochs, "E", "passes over the training set (default 1)", 1, 1e6, NULL, 0},
        {"batch", FLAG_TYPE_SIZE, &a->batch, "B", "examples per step per thread", 1, 1 << 20, NULL, 0},
        {"optimizer", FLAG_TYPE_CHOICE, &a->optimizer, "OPT", "update rule (default sgd)", 0, 0, "sgd|adagrad", 0},
        {"lr", FLAG_TYPE_DOUBLE, &a->lr, "RATE", "initial step size", 1e-12, 1e6, NULL, 0},
        {"lr-schedule", FLAG_TYPE_CHOICE, &a->schedule, "S", "step-size schedule (default constant)", 0, 0, "constant|inverse-time|epoch-decay", 0},
        {"lr-decay", FLAG_TYPE_DOUBLE, &a->lr_decay, "X", "inverse-time: lr/(1+X*updates); epoch-decay: lr*X^epoch", 0, 1e6, NULL, 0},
        {"warmup", FLAG_TYPE_SIZE, &a->warmup, "STEPS", "grow the step linearly to --lr over the first STEPS updates (default 0: none)", 0, 1e12, NULL, 0},
        {"clip-grad-norm", FLAG_TYPE_DOUBLE, &a->clip_grad_norm, "C", "scale each step's gradient down to L2 norm C when it is longer (direction kept; default off)", 1e-30, 1e30, NULL, 0},
        {"momentum", FLAG_TYPE_DOUBLE, &a->momentum, "M", "SGD momentum in [0,1) (default 0)", 0, 0.9999, NULL, 0},
        {"adagrad-eps", FLAG_TYPE_DOUBLE, &a->adagrad_eps, "E", "Adagrad denominator guard (default 1e-8)", 1e-30, 1, NULL, 0},
        {"seed", FLAG_TYPE_U64, &a->seed, "S", "seed for data order, initialisation and generators (default 1)", 0, 0, NULL, 0},
        {"eval-every", FLAG_TYPE_SIZE, &a->eval_every, "N", "evaluate every N training samples (default: once per epoch)", 0, 0, NULL, 0},
        {"eval-every-s", FLAG_TYPE_DOUBLE, &a->eval_every_s, "S", "also evaluate every S seconds of training (evaluation excluded; in a distributed run, the global model; default off)", 1e-3, 1e9, NULL, 0},
        {"eval-limit", FLAG_TYPE_SIZE, &a->eval_limit, "N", "evaluate on the first N test examples (0: all)", 0, 0, NULL, 0},
        {"target-acc", FLAG_TYPE_DOUBLE, &a->target_acc, "A", "report time to reach this test accuracy", 0, 1, NULL, 0},
        {"target-rmse", FLAG_TYPE_DOUBLE, &a->target_rmse, "R", "report time to reach this test RMSE (mf)", 1e-12, 1e12, NULL, 0},
        {"stop-at-target", FLAG_TYPE_BOOL, &a->stop_at_target, NULL, "stop at the first evaluation that meets the target", 0, 0, NULL, 0},
        {"time-limit", FLAG_TYPE_DOUBLE, &a->time_limit, "S", "stop after S seconds of training (evaluation excluded), even mid-epoch", 0, 1e9, NULL, 0},
        {"pin", FLAG_TYPE_BOOL, &a->pin, NULL, "pin thread t to CPU t mod #CPUs", 0, 0, NULL, 0},
        {"log", FLAG_TYPE_STRING, &a->log, "FILE", "write one CSV row per evaluation (schema in README)", 0, 0, NULL, 0},
        {"summary", FLAG_TYPE_STRING, &a->summary, "FILE", "also write the JSON summary to FILE", 0, 0, NULL, 0},
        {"quiet", FLAG_TYPE_BOOL, &a->quiet, NULL, "no startup or progress lines on stderr", 0, 0, NULL, 0},
        {"checkpoint-every", FLAG_TYPE_DOUBLE, &a->checkpoint_every, "S", "train, server: write a checkpoint every S seconds of training", 0, 1e9, NULL, 0},
        {"checkpoint-dir", FLAG_TYPE_STRING, &a->checkpoint_dir, "DIR", "where checkpoints go (train.ckpt, server-K.ckpt; default: the --resume directory)", 0, 0, NULL, 0},
        {"resume", FLAG_TYPE_STRING, &a->resume, "DIR", "train, server: continue from the checkpoint in DIR (same flags as the run that wrote it)", 0, 0, NULL, 0},
        {"device", FLAG_TYPE_CHOICE, &a->device, "D", "where the steps run (default cpu; cuda: one thread drives the GPU)", 0, 0, "cpu|cuda", 0},
        {"gpu", FLAG_TYPE_SIZE, &a->gpu_index, "K", "--device cuda: the CUDA device index (default 0)", 0, 1023, NULL, 0},
        {"gpu-scatter", FLAG_TYPE_CHOICE, &a->gpu_scatter, "S", "--device cuda, sparse Hogwild!: how updates are written (default plain)", 0, 0, "plain|atomic", 0},
        {"gpu-chunk", FLAG_TYPE_SIZE, &a->gpu_chunk, "N", "--device cuda, sparse Hogwild!: examples per kernel launch (default 16384)", 1, 1 << 26, NULL, 0},
        {"gpu-in-flight", FLAG_TYPE_SIZE, &a->gpu_in_flight, "N", "--device cuda, sparse Hogwild!: examples under way at once, the degree of asynchrony (default 256; 0: the whole chunk)", 0, 1 << 26, NULL, 0},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (!with_mode && strcmp(table[i].name, "mode") == 0) continue;
        specs[n++] = table[i];
    }
    return n;
}

int train_args_finish(train_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command) {
    char err[512];
    int sparse = a->model == MODEL_LOGREG || a->model == MODEL_SVM || a->model == MODEL_EMBMLP;
    if (isnan(a->lr)) a->lr = sparse ? 0.5 : 0.05;
    if (a->batch == 0)
        a->batch = (a->model == MODEL_MLP || a->model == MODEL_SOFTMAX || a->model == MODEL_EMBMLP) ? 16 : 1;
    if (isnan(a->l2)) a->l2 = a->model == MODEL_MF ? 0.01 : 0.0;
    if (!a->data) a->data = sparse ? "gen:sparse" : a->model == MODEL_MF ? "gen:ratings" : "fashion-mnist";
    if (!a->checkpoint_dir) a->checkpoint_dir = a->resume;
    if (a->model == MODEL_MF && !isnan(a->target_acc)) {
        fprintf(stderr, "%s: --target-acc: mf is measured by RMSE; use --target-rmse\n", command);
        return 2;
    }
    if (a->model != MODEL_MF && !isnan(a->target_rmse)) {
        fprintf(stderr, "%s: --target-rmse: only mf is measured by RMSE; use --target-acc\n", command);
        return 2;
    }
    if (a->stop_at_target && isnan(a->target_acc) && isnan(a->target_rmse)) {
        fprintf(stderr, "%s: --stop-at-target needs --target-acc or --target-rmse\n", command);
        return 2;
    }
    if (a->device == 0 && (flags_find(specs, n_specs, "gpu")->seen || flags_find(specs, n_specs, "gpu-scatter")->seen ||
                           flags_find(specs, n_specs, "gpu-chunk")->seen ||
                           flags_find(specs, n_specs, "gpu-in-flight")->seen)) {
        fprintf(stderr, "%s: --gpu/--gpu-scatter/--gpu-chunk/--gpu-in-flight apply to --device cuda\n", command);
        return 2;
    }
    if (a->device && a->clip_grad_norm > 0) {
        fprintf(stderr, "%s: --clip-grad-norm: the GPU steps do not clip yet; use --device cpu\n", command);
        return 2;
    }
    gpu_options_default(&a->gpu);
    a->gpu.device = (int)a->gpu_index;
    a->gpu.scatter_atomic = a->gpu_scatter;
    if (a->gpu_chunk) a->gpu.chunk = a->gpu_chunk;
    if (flags_find(specs, n_specs, "gpu-in-flight")->seen) a->gpu.in_flight = a->gpu_in_flight;
    if (a->model == MODEL_MLP && parse_hidden(a->hidden, a->hidden_widths, &a->n_hidden, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", command, err);
        return 2;
    }
    if (a->model == MODEL_EMBMLP) {
        if (!flags_find(specs, n_specs, "hidden")->seen) a->hidden = "32";
        if (parse_hidden(a->hidden, a->hidden_widths, &a->n_hidden, err, sizeof err) != 0 || a->n_hidden != 1) {
            fprintf(stderr, "%s: --hidden '%s': embmlp has one hidden layer; give one width, e.g. --hidden 32\n",
                    command, a->hidden);
            return 2;
        }
        if (a->device) {
            fprintf(stderr, "%s: --device cuda: embmlp runs on the CPU only\n", command);
            return 2;
        }
    }
    optimizer_config_default(&a->opt);
    a->opt.kind = (optimizer_kind_t)a->optimizer;
    a->opt.lr = a->lr;
    a->opt.schedule = (lr_schedule_t)a->schedule;
    a->opt.decay = a->lr_decay;
    a->opt.momentum = a->momentum;
    a->opt.warmup = a->warmup;
    a->opt.epsilon = a->adagrad_eps;
    if (a->opt.schedule == LR_SCHEDULE_EPOCH_DECAY && !flags_find(specs, n_specs, "lr-decay")->seen) a->opt.decay = 0.5;
    a->lr_decay = a->opt.decay;
    if (optimizer_config_check(&a->opt, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", command, err);
        return 2;
    }
    return 0;
}

int train_args_build(const train_args_t *a, data_bundle_t *data, model_t **model, char *err, size_t err_len) {
    *model = NULL;
    data_options_t dopt = {a->data, a->data_dir, a->train_limit, a->test_limit, a->test_frac, a->seed};
    if (data_bundle_load(&dopt, data_kind_for(a->model), data, err, err_len) != 0) return -1;
    switch (a->model) {
    case MODEL_LOGREG:
    case MODEL_SVM:
        *model = model_new_linear(a->model == MODEL_SVM ? LINEAR_LOSS_HINGE : LINEAR_LOSS_LOGISTIC, &data->sparse_train,
                                 &data->sparse_test, a->l2, err, err_len);
        break;
    case MODEL_SOFTMAX:
    case MODEL_MLP:
        *model = model_new_mlp(&data->dense_train, &data->dense_test, a->hidden_widths, a->n_hidden, a->l2, err, err_len);
        break;
    case MODEL_MF:
        *model = model_new_mf(&data->ratings_train, &data->ratings_test, a->rank, a->l2, err, err_len);
        break;
    case MODEL_EMBMLP:
        *model = model_new_embmlp(&data->sparse_train, &data->sparse_test, a->embed_dim, a->hidden_widths[0], a->l2,
                                  err, err_len);
        break;
    }
    return *model ? 0 : -1;
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
    tc->target = a->model == MODEL_MF ? a->target_rmse : a->target_acc;
    tc->stop_at_target = a->stop_at_target;
    tc->time_limit_s = a->time_limit;
    tc->pin = a->pin;
    tc->progress_interval_s = a->quiet ? 0.0 : 0.5;
    tc->device = a->device ? &gpu_device_ops : NULL;
    tc->device_options = a->device ? &a->gpu : NULL;
    tc->clip_grad_norm = a->clip_grad_norm;
    tc->interrupt = stop_signal_flag();  // set once the command installed stop_signal_install
}
