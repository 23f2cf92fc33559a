#include "engine/gpu/gpu_device.h"

// Adapters from the trainer's untyped device table to gpu_model's functions.

static void *device_create(const void *options, const model_t *m, const optimizer_config_t *oc, size_t max_batch,
                           char *err, size_t err_len) {
    return gpu_model_new(m, oc, options, max_batch, err, err_len);
}
static void device_destroy(void *device) {
    gpu_model_t *g = device;
    gpu_model_destroy(&g);
}
static int device_bind_thread(void *device, char *err, size_t err_len) {
    return gpu_model_bind_thread(device, err, err_len);
}
static int device_set_params(void *device, const param_t *w, char *err, size_t err_len) {
    return gpu_model_set_params(device, w, err, err_len);
}
static int device_get_params(void *device, param_t *w, char *err, size_t err_len) {
    return gpu_model_get_params(device, w, err, err_len);
}
static int device_set_order(void *device, const uint32_t *order, size_t n, char *err, size_t err_len) {
    return gpu_model_set_order(device, order, n, err, err_len);
}
static int device_is_hogwild(const void *device) { return gpu_model_is_hogwild(device); }
static size_t device_hogwild_chunk(const void *device) { return gpu_model_hogwild_chunk(device); }
static int device_step(void *device, size_t pos, size_t count, float lr, char *err, size_t err_len) {
    return gpu_model_step(device, pos, count, lr, err, err_len);
}
static int device_take_loss(void *device, double *loss_sum, char *err, size_t err_len) {
    return gpu_model_take_loss(device, loss_sum, err, err_len);
}

const train_device_ops_t gpu_device_ops = {
    .name = "cuda",  // train_device_name(TRAIN_DEVICE_CUDA)
    .create = device_create,
    .destroy = device_destroy,
    .bind_thread = device_bind_thread,
    .unbind_thread = gpu_model_unbind_thread,
    .set_params = device_set_params,
    .get_params = device_get_params,
    .set_order = device_set_order,
    .is_hogwild = device_is_hogwild,
    .hogwild_chunk = device_hogwild_chunk,
    .step = device_step,
    .take_loss = device_take_loss,
};
