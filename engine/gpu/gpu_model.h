#ifndef ASGD_ENGINE_GPU_GPU_MODEL_H
#define ASGD_ENGINE_GPU_GPU_MODEL_H
// A model trained on the GPU: its parameters, optimizer state, training data
// and scratch live in device memory, and a step is a sequence of kernels
// (kernels/*_cuda) queued on the model's compute stream without waiting.
//
//   mlp, softmax  a minibatch step: gather the rows, forward (cuBLAS sgemm +
//                 fused bias/ReLU), softmax cross-entropy, backward, L2, and
//                 the optimizer (SGD, momentum or Adagrad) over all parameters.
//   logreg, svm   --batch 1: Hogwild! on the GPU — one call takes a chunk of
//                 examples, one warp each, all updating the shared weights at
//                 once (plain or atomic scatters); --batch B > 1: a CSR
//                 minibatch gradient and one lazy-L2 SGD step.
//   mf            --batch 1 Hogwild!, one warp per rating.
//
// For a distributed replica a second stream moves parameters to and from
// pinned host buffers while the compute stream keeps training
// (gpu_model_snapshot, gpu_model_add_delta).
//
// The work is done by the CUDA module (gpu_module.h), which gpu_model_new
// opens; without it (a build without CUDA, or the module not loadable),
// gpu_model_new fails with one line saying why.
#include <stddef.h>
#include <stdint.h>

#include "engine/core/model.h"
#include "engine/core/optimizer.h"
#include "engine/core/params.h"

typedef struct gpu_model gpu_model_t;

typedef struct gpu_options {
    int device;  // CUDA device index
    int scatter_atomic;  // sparse Hogwild!: 1 atomicAdd, 0 plain load + store
    size_t chunk;  // sparse Hogwild!: examples per call (one kernel launch)
    size_t in_flight;  // sparse Hogwild!: examples under way at once (0: the whole chunk)
} gpu_options_t;

void gpu_options_default(gpu_options_t *o);

// Uploads the model's training data and allocates everything a step needs
// for minibatches of up to max_batch examples. Refuses configurations the GPU
// path does not run (the message names the flag). Binds the calling thread.
gpu_model_t *gpu_model_new(const model_t *m, const optimizer_config_t *oc, const gpu_options_t *o, size_t max_batch,
                           char *err, size_t err_len);
void gpu_model_destroy(gpu_model_t **g);

// Makes the model's device current for the calling thread and its kernels
// launch on the compute stream. Every thread that calls the functions below
// binds first; gpu_model_unbind_thread frees what the thread holds.
int gpu_model_bind_thread(gpu_model_t *g, char *err, size_t err_len);
void gpu_model_unbind_thread(void);

// Parameters between host and device (waits for queued steps). The optimizer
// state is reset by set_params.
int gpu_model_set_params(gpu_model_t *g, const param_t *w, char *err, size_t err_len);
int gpu_model_get_params(gpu_model_t *g, param_t *w, char *err, size_t err_len);

// This epoch's order of training examples (indices into the training set),
// which the steps walk by position. Waits for queued steps first.
int gpu_model_set_order(gpu_model_t *g, const uint32_t *order, size_t n, char *err, size_t err_len);

// Whether a step takes one minibatch (dense models, sparse with batch > 1) or
// a chunk of single-example Hogwild! updates.
int gpu_model_is_hogwild(const gpu_model_t *g);
// Under gpu_model_is_hogwild: examples per step call (gpu_options_t.chunk).
size_t gpu_model_hogwild_chunk(const gpu_model_t *g);

// Queues one step over order[pos, pos + count): a minibatch of count examples,
// or count Hogwild! updates. Returns at once; errors of earlier steps surface here.
int gpu_model_step(gpu_model_t *g, size_t pos, size_t count, float lr, char *err, size_t err_len);

// Waits for the queued steps and returns the sum, over them, of each step's
// objective times its examples (the trainer's loss_sum), then resets it.
int gpu_model_take_loss(gpu_model_t *g, double *loss_sum, char *err, size_t err_len);

// ---- a replica's communication thread ----

// A copy of the parameters as of the steps queued so far, in pinned host
// memory (valid until the next call). The copy to the host runs on the copy
// stream: steps queued later keep running meanwhile.
const float *gpu_model_snapshot(gpu_model_t *g, char *err, size_t err_len);

// A pinned host buffer of model_num_params floats for the caller to fill, then
// gpu_model_add_delta adds it to the parameters (w += delta) between two steps.
float *gpu_model_delta_buffer(gpu_model_t *g);
int gpu_model_add_delta(gpu_model_t *g, char *err, size_t err_len);

// What the device is, for a startup line.
void gpu_model_describe(const gpu_model_t *g, char *out, size_t out_len);

#endif
