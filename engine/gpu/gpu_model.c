// gpu_model.h over the CUDA module (gpu_module.h): the model's layout is
// read here, in the library, and the module gets it as plain data.
#include "engine/gpu/gpu_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gpu/gpu_module.h"

#define GPU_DEFAULT_CHUNK 16384
#define GPU_DEFAULT_IN_FLIGHT 256  // logreg on gen:sparse: 64 -> 0.80-0.83 accuracy, 1024 -> 0.72-0.76, 4096 diverges

struct gpu_model {
    const gpu_module_t *module;
    cuda_model_t *cuda;
};

void gpu_options_default(gpu_options_t *o) {
    memset(o, 0, sizeof *o);
    o->scatter_atomic = 0;
    o->chunk = GPU_DEFAULT_CHUNK;
    o->in_flight = GPU_DEFAULT_IN_FLIGHT;
}

gpu_model_t *gpu_model_new(const model_t *m, const optimizer_config_t *oc, const gpu_options_t *o, size_t max_batch,
                           char *err, size_t err_len) {
    char why[GPU_MODULE_ERR_LEN];
    const gpu_module_t *module = gpu_module_get(why, sizeof why);
    if (!module) {
        snprintf(err, err_len, "--device cuda: %s", why);
        return NULL;
    }
    gpu_model_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_len, "--device cuda: out of memory");
        return NULL;
    }
    gpu_model_spec_t spec;
    model_layout(m, &spec.layout);
    spec.n_params = model_num_params(m);
    spec.n_train = model_num_train(m);
    gpu_options_t options = *o;
    if (options.chunk == 0) options.chunk = GPU_DEFAULT_CHUNK;
    g->module = module;
    if (!(g->cuda = module->model_new(&spec, oc, &options, max_batch, err, err_len))) {
        free(g);
        return NULL;
    }
    return g;
}

void gpu_model_destroy(gpu_model_t **g) {
    if (!g || !*g) return;
    (*g)->module->model_destroy((*g)->cuda);
    free(*g);
    *g = NULL;
}

int gpu_model_bind_thread(gpu_model_t *g, char *err, size_t err_len) {
    return g->module->bind_thread(g->cuda, err, err_len);
}

// Only a thread that bound to a model unbinds, so the module is open.
void gpu_model_unbind_thread(void) {
    char why[GPU_MODULE_ERR_LEN];
    const gpu_module_t *module = gpu_module_get(why, sizeof why);
    if (module) module->unbind_thread();
}

int gpu_model_set_params(gpu_model_t *g, const param_t *w, char *err, size_t err_len) {
    return g->module->set_params(g->cuda, w, err, err_len);
}
int gpu_model_get_params(gpu_model_t *g, param_t *w, char *err, size_t err_len) {
    return g->module->get_params(g->cuda, w, err, err_len);
}
int gpu_model_set_order(gpu_model_t *g, const uint32_t *order, size_t n, char *err, size_t err_len) {
    return g->module->set_order(g->cuda, order, n, err, err_len);
}
int gpu_model_is_hogwild(const gpu_model_t *g) { return g->module->is_hogwild(g->cuda); }
size_t gpu_model_hogwild_chunk(const gpu_model_t *g) { return g->module->hogwild_chunk(g->cuda); }
int gpu_model_step(gpu_model_t *g, size_t pos, size_t count, float lr, char *err, size_t err_len) {
    return g->module->step(g->cuda, pos, count, lr, err, err_len);
}
int gpu_model_take_loss(gpu_model_t *g, double *loss_sum, char *err, size_t err_len) {
    return g->module->take_loss(g->cuda, loss_sum, err, err_len);
}
const float *gpu_model_snapshot(gpu_model_t *g, char *err, size_t err_len) {
    return g->module->snapshot(g->cuda, err, err_len);
}
float *gpu_model_delta_buffer(gpu_model_t *g) { return g->module->delta_buffer(g->cuda); }
int gpu_model_add_delta(gpu_model_t *g, char *err, size_t err_len) {
    return g->module->add_delta(g->cuda, err, err_len);
}
void gpu_model_describe(const gpu_model_t *g, char *out, size_t out_len) { g->module->describe(g->cuda, out, out_len); }
