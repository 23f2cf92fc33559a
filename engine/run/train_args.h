#ifndef ASGD_ENGINE_RUN_TRAIN_ARGS_H
#define ASGD_ENGINE_RUN_TRAIN_ARGS_H
// The flags that describe one training job (model, data, optimizer, threads,
// evaluation), shared by `asgd train` and by every process of a distributed
// run, so that all of them build the same model from the same data.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/data/data_source.h"
#include "engine/core/flags.h"
#include "engine/core/flags_file.h"
#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "engine/core/trainer.h"
#include "engine/core/train_device.h"
#include "engine/gpu/gpu_device.h"
#include "engine/models/model_registry.h"

#define TRAIN_ARGS_N_FLAGS (48 + MODEL_REGISTRY_MAX_FLAGS)
#define TRAIN_ARGS_HELP_LEN 200

typedef struct train_args {
    int model;  // position in the model registry (model_registry_at)
    const char *data;
    const char *test_data;  // --test-data: the test set (the training data is then used whole)
    const char *data_dir;
    size_t train_limit, test_limit;
    double test_frac;
    const char *label_column;  // CSV data: --label-column
    int csv_header;  // CSV data: --csv-header
    double l2;
    int mode;
    int hogwild_variant;  // hogwild_variant_t
    size_t merge_every;  // --hogwild-variant replicas: steps between merges (0: the default)
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
    const char *trace;  // --trace FILE: the timeline (kernels/foundation/trace.h)
    double checkpoint_every;  // seconds; 0 = no checkpoints
    const char *checkpoint_dir;  // where checkpoints go (default: the --resume directory)
    const char *resume;  // a checkpoint directory to continue from
    int device;  // train_device_kind_t (engine/core/train_device.h)
    int gpu_scatter;
    size_t gpu_chunk, gpu_index, gpu_in_flight;
    // The models' own flags as given (each model reads them in train_args_finish).
    const char *model_flag_text[MODEL_REGISTRY_MAX_FLAGS];
    int model_flag_bool[MODEL_REGISTRY_MAX_FLAGS];
    char model_flag_help[MODEL_REGISTRY_MAX_FLAGS][TRAIN_ARGS_HELP_LEN];
    char model_choices[MODEL_REGISTRY_MAX * (MODEL_NAME_MAX + 1)], model_help[TRAIN_ARGS_HELP_LEN];
    const char *config;  // --config FILE: flags read before the command line's
    flags_argv_t words;  // the words parsed: --config's flags, then the command line's (train_args_parse)
    char *given;  // the flags given, as a flag file (train_args_parse; NULL before)
    // Filled by train_args_finish.
    model_options_t model_opts;  // the model's own options, for its descriptor's create
    optimizer_config_t opt;
    gpu_options_t gpu;
} train_args_t;

void train_args_defaults(train_args_t *a);
// Writes the training flags into specs[0..TRAIN_ARGS_N_FLAGS) and returns how
// many: the shared ones, then every registered model's own (each name once).
// with_mode: include --mode and --hogwild-variant, --merge-every (single-node runs only).
size_t train_args_flags(train_args_t *a, flag_spec_t *specs, int with_mode);
// flags_parse after reading --config FILE into the words (kept in a->words:
// string flags point into them) and a->given filled with the flags given,
// less --config and --run-dir. Same statuses as flags_parse.
flags_status_t train_args_parse(train_args_t *a, const char *command, flag_spec_t *specs, size_t n_specs, int argc,
                                char **argv, char *err, size_t err_len);
// Frees what train_args_parse kept.
void train_args_release(train_args_t *a);
// Writes a flag file (flags_file.h): one comment line, then flags (NULL: none). Returns 0, or -1 with err.
int train_args_write_flag_file(const char *path, const char *comment, const char *flags, char *err, size_t err_len);
// Writes a->given (with a comment line saying what wrote it) to path. Returns 0, or -1 with err.
int train_args_write_given(const train_args_t *a, const char *command, const char *path, char *err, size_t err_len);
// The flag that named a->checkpoint_dir, for messages about it: "--resume"
// when it is the --resume directory (the default), else "--checkpoint-dir".
const char *train_args_checkpoint_flag(const train_args_t *a);
// asgd launch's copy: DIR/config.
int train_args_write_run_config(const train_args_t *a, const char *dir, char *err, size_t err_len);
// Whether spec is one of a's model-flag slots (train_args_flags' tail).
int train_args_is_model_flag(const train_args_t *a, const flag_spec_t *spec);
// The data a model reads, in words: "dense images", "sparse features (libsvm, CSV)", ...
const char *train_args_data_kind_text(const model_descriptor_t *d);
// After parsing: per-model defaults and checks across flags. Returns 0, or 2
// with the usage error, prefixed with `command`, in err.
int train_args_finish(train_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command, char *err,
                      size_t err_len);
// train_args_train_config points tc->device_options at a->gpu under --device cuda: the
// arguments must outlive the config.

// Loads the data (the caller frees it). Returns 0 or -1.
int train_args_load(const train_args_t *a, data_bundle_t *data, char *err, size_t err_len);
// Builds the model over the loaded data (the caller frees it). Returns 0 or -1.
int train_args_make_model(const train_args_t *a, const data_bundle_t *data, model_t **model, char *err, size_t err_len);
// Both. Returns 0 or -1.
int train_args_build(const train_args_t *a, data_bundle_t *data, model_t **model, char *err, size_t err_len);
void train_args_train_config(const train_args_t *a, train_config_t *tc);

// The model --model names.
const model_descriptor_t *train_args_model(const train_args_t *a);
// The kind of data it reads from --data (data_spec_kind: softmax and mlp read
// sparse data from every --data but fashion-mnist).
data_kind_t train_args_data_kind(const train_args_t *a);
// --target-acc or --target-rmse, whichever the model's metric takes.
double train_args_target(const train_args_t *a);

#endif
