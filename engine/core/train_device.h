#ifndef ASGD_ENGINE_CORE_TRAIN_DEVICE_H
#define ASGD_ENGINE_CORE_TRAIN_DEVICE_H
// A device the trainer's steps can run on instead of its CPU threads: it holds
// the parameters while training and takes a step as (data position, count,
// learning rate). The core knows devices only through this table, so the GPU
// layer (engine/gpu/gpu_device.h) sits above the core and the core builds
// without CUDA. Every function returns 0, or -1 with one line in err.
#include <stddef.h>
#include <stdint.h>

#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "engine/core/params.h"

// Where a run's steps run, in the order of --device's choices: the one list
// the enum, the names (train_device_name) and the flag's choices are made
// from. X(SUFFIX, "name") for each, SEP between two.
#define TRAIN_DEVICE_LIST(X, SEP) X(CPU, "cpu") SEP X(CUDA, "cuda")
#define TRAIN_DEVICE_COMMA ,
#define TRAIN_DEVICE_ENUM_ENTRY(suffix, name) TRAIN_DEVICE_##suffix
typedef enum train_device_kind { TRAIN_DEVICE_LIST(TRAIN_DEVICE_ENUM_ENTRY, TRAIN_DEVICE_COMMA) } train_device_kind_t;
// "cpu|cuda": --device's choices, a string literal.
#define TRAIN_DEVICE_NAME_ENTRY(suffix, name) name
#define TRAIN_DEVICE_CHOICES TRAIN_DEVICE_LIST(TRAIN_DEVICE_NAME_ENTRY, "|")

// The device's name (TRAIN_DEVICE_LIST); "cpu" for a value outside the enum.
static inline const char *train_device_name(int device) {
    static const char *const names[] = {TRAIN_DEVICE_LIST(TRAIN_DEVICE_NAME_ENTRY, TRAIN_DEVICE_COMMA)};
    return device >= 0 && (size_t)device < sizeof names / sizeof names[0] ? names[device] : "cpu";
}

typedef struct train_device_ops {
    const char *name;  // as the flag says it: "cuda"
    // Makes a device for m from the caller's options (the layer's own struct),
    // sized for steps of at most max_batch examples; NULL on failure.
    void *(*create)(const void *options, const model_t *m, const optimizer_config_t *oc, size_t max_batch, char *err,
                    size_t err_len);
    void (*destroy)(void *device);
    // The thread that will queue steps binds first, and unbinds when done.
    int (*bind_thread)(void *device, char *err, size_t err_len);
    void (*unbind_thread)(void);
    int (*set_params)(void *device, const param_t *w, char *err, size_t err_len);
    int (*get_params)(void *device, param_t *w, char *err, size_t err_len);
    // The order of the training examples for the epoch's steps.
    int (*set_order)(void *device, const uint32_t *order, size_t n, char *err, size_t err_len);
    // 1: each example of a step is its own update (sparse Hogwild! on the
    // device); 0: a step is one minibatch update.
    int (*is_hogwild)(const void *device);
    // Under is_hogwild: examples per step call.
    size_t (*hogwild_chunk)(const void *device);
    int (*step)(void *device, size_t pos, size_t count, float lr, char *err, size_t err_len);
    // Waits for the queued steps; their summed loss.
    int (*take_loss)(void *device, double *loss_sum, char *err, size_t err_len);
} train_device_ops_t;

#endif
