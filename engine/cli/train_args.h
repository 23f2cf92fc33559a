#ifndef ASGD_ENGINE_CLI_TRAIN_ARGS_H
#define ASGD_ENGINE_CLI_TRAIN_ARGS_H
// The flags that describe one training job (model, data, optimizer, threads,
// evaluation), shared by `asgd train` and by every process of a distributed
// run, so that all of them build the same model from the same data.
#include <stddef.h>
#include <stdint.h>

#include "engine/data/data_source.h"  // defines: data_bundle_t
#include "engine/core/flags.h"        // defines: flag_spec_t
#include "engine/core/model.h"        // defines: model_t
#include "engine/core/optimizer.h"    // defines: optimizer_config_t
#include "engine/core/trainer.h"      // defines: train_config_t
#include "engine/gpu/gpu_device.h"   // defines: gpu_options_t, gpu_device_ops

#define TRAIN_ARGS_MAX_HIDDEN 7
#define TRAIN_ARGS_N_FLAGS 43

enum { MODEL_LOGREG, MODEL_SVM, MODEL_SOFTMAX, MODEL_MLP, MODEL_MF, MODEL_EMBMLP };
extern const char *const train_model_names[];

typedef struct train_args {
    int model;
    const char *data;
    const char *data_dir;
    size_t train_limit, test_limit;
    double test_frac;
    const char *hidden;
    size_t rank;
    size_t embed_dim;  // embmlp: embedding width
    double l2;
    int mode;
    size_t threads, epochs, batch;
    int optimizer;
    double lr, lr_decay, momentum, adagrad_eps;
    double clip_grad_norm;  // > 0: each step's gradient is scaled down to this L2 norm when longer
    size_t warmup;  // updates over which the step grows linearly to lr (0: none)
    int schedule;
    uint64_t seed;
    size_t eval_every, eval_limit;
    double eval_every_s;  // > 0: also evaluate every S training seconds
    double target_acc, target_rmse;
    int stop_at_target, pin, quiet;
    double time_limit;
    const char *log, *summary;
    double checkpoint_every;      // seconds; 0 = no checkpoints
    const char *checkpoint_dir;   // where checkpoints go (default: the --resume directory)
    const char *resume;           // a checkpoint directory to continue from
    int device;  // 0 cpu, 1 cuda
    int gpu_scatter;
    size_t gpu_chunk, gpu_index, gpu_in_flight;
    // Filled by train_args_finish.
    size_t hidden_widths[TRAIN_ARGS_MAX_HIDDEN], n_hidden;
    optimizer_config_t opt;
    gpu_options_t gpu;
} train_args_t;

void train_args_defaults(train_args_t *a);
// Writes the TRAIN_ARGS_N_FLAGS training flags into specs[0..TRAIN_ARGS_N_FLAGS).
// with_mode: include --mode (single-node runs only).
size_t train_args_flags(train_args_t *a, flag_spec_t *specs, int with_mode);
// After parsing: per-model defaults and checks across flags. Returns 0, or 2
// after printing a usage error prefixed with `command`.
int train_args_finish(train_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command);
// train_args_train_config points tc->device_options at a->gpu under --device cuda: the
// arguments must outlive the config.

// Loads the data and builds the model (the caller frees both). Returns 0 or -1.
int train_args_build(const train_args_t *a, data_bundle_t *data, model_t **model, char *err, size_t err_len);
void train_args_train_config(const train_args_t *a, train_config_t *tc);

#endif
