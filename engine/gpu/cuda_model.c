// The CUDA module's model (gpu_module.h; what gpu_model.h describes): device
// buffers and the kernel sequence of one step, in plain C over kernels/gpu.h
// and the *_cuda kernels. Built into libasgd_cuda.so only, which exports
// nothing but the table at the end and uses nothing of libasgd's.
#include "engine/gpu/gpu_module.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_info.h"
#include "kernels/dense.h"
#include "kernels/gpu.h"
#include "kernels/sparse_sgd.h"
#include "kernels/update.h"

struct cuda_model {
    model_layout_t L;
    optimizer_config_t oc;
    gpu_options_t o;
    size_t n_params, n_train, max_batch;
    char device_name[160];

    gpu_stream_t *compute;  // steps
    gpu_stream_t *copy;  // parameter traffic of a replica
    gpu_event_t *snapshot_taken;  // compute stream: the snapshot copy is done
    gpu_event_t *delta_arrived;  // copy stream: the delta is on the device
    gpu_event_t *delta_used;  // compute stream: the delta has been added

    float *w;  // (n_params) parameters
    float *grad;  // (n_params) minibatch gradient
    float *state;  // (n_params) momentum velocity or Adagrad sums; NULL for plain SGD
    float *snapshot;  // (n_params) a copy of w for the host
    float *delta;  // (n_params) a delta from the host
    float *host_snapshot, *host_delta;  // (n_params) pinned: the communication thread's
    float *host_params;  // (n_params) pinned: the training thread's
    uint32_t *order;  // (n_train) this epoch's order
    double *loss;  // (1) objective sum since the last take
    size_t loss_examples;

    // mlp
    float *x;  // (n_train, width[0])
    int32_t *labels;  // (n_train)
    float *act[MODEL_MAX_LAYERS + 1];  // (max_batch, width[l])
    float *delta_act[MODEL_MAX_LAYERS + 1];
    int32_t *batch_labels;  // (max_batch)
    float *row_loss, *row_hit;  // (max_batch)
    // linear
    size_t *row_ptr;
    uint32_t *col;
    float *val, *y;
    uint8_t *touched;  // (dim)
    // mf
    uint32_t *user, *item;
    float *rating;
};

// Every device buffer goes through here, so that a failure names what was being allocated.
static void *device_copy_of(const void *host, size_t bytes, const char *what, char *err, size_t err_len) {
    char why[320];
    void *d = gpu_alloc(bytes, why, sizeof why);
    if (!d) {
        snprintf(err, err_len, "--device cuda: allocating %s (%zu bytes): %s", what, bytes, why);
        return NULL;
    }
    if (host && gpu_upload(d, host, bytes, why, sizeof why) != 0) {
        snprintf(err, err_len, "--device cuda: uploading %s (%zu bytes): %s", what, bytes, why);
        gpu_free(d);
        return NULL;
    }
    return d;
}

#define DEVICE(field, host, bytes, what)                                                   \
    do {                                                                                   \
        if (!((field) = device_copy_of((host), (bytes), (what), err, err_len))) goto fail; \
    } while (0)

static int check_supported(const model_layout_t *L, const optimizer_config_t *oc, size_t max_batch, char *err,
                           size_t err_len) {
    int plain_sgd = oc->kind == OPTIMIZER_KIND_SGD && oc->momentum == 0.0;
    // The layouts the GPU steps below run; a model of any other layout stays on the CPU.
    if (L->kind != MODEL_KIND_MLP && L->kind != MODEL_KIND_LINEAR && L->kind != MODEL_KIND_MF) {
        snprintf(err, err_len, "--device cuda: this model has no GPU steps; use --device cpu");
        return -1;
    }
    if (L->kind == MODEL_KIND_MLP && !L->dense_train) {
        snprintf(err, err_len,
                 "--device cuda: softmax and mlp run on the GPU over dense images only; over sparse "
                 "input (libsvm, CSV) use --device cpu");
        return -1;
    }
    if (L->kind != MODEL_KIND_MLP && !plain_sgd) {
        snprintf(err, err_len,
                 "--device cuda: sparse models train with plain SGD on the GPU (no --momentum or "
                 "--optimizer adagrad); dense models take every optimizer");
        return -1;
    }
    if (L->kind == MODEL_KIND_MF && max_batch != 1) {
        snprintf(err, err_len, "--device cuda: mf trains with --batch 1 on the GPU (Hogwild!, one warp per rating)");
        return -1;
    }
    return 0;
}

static void cuda_model_destroy(cuda_model_t *g);

static cuda_model_t *cuda_model_new(const gpu_model_spec_t *spec, const optimizer_config_t *oc, const gpu_options_t *o,
                                    size_t max_batch, char *err, size_t err_len) {
    char why[320];
    if (gpu_device_count(why, sizeof why) <= o->device) {
        snprintf(err, err_len, "--device cuda: no CUDA device %d (%s)", o->device, why);
        return NULL;
    }
    cuda_model_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_len, "--device cuda: out of memory");
        return NULL;
    }
    g->L = spec->layout;
    g->oc = *oc;
    g->o = *o;
    g->n_params = spec->n_params;
    g->n_train = spec->n_train;
    g->max_batch = max_batch;
    cuda_device_summary(g->device_name, sizeof g->device_name);
    if (check_supported(&g->L, oc, max_batch, err, err_len) != 0) goto fail;
    if (gpu_select(o->device, why, sizeof why) != 0 || !(g->compute = gpu_stream_new(why, sizeof why)) ||
        !(g->copy = gpu_stream_new(why, sizeof why)) || !(g->snapshot_taken = gpu_event_new(0, why, sizeof why)) ||
        !(g->delta_arrived = gpu_event_new(0, why, sizeof why)) ||
        !(g->delta_used = gpu_event_new(0, why, sizeof why)) || gpu_use_stream(g->compute, why, sizeof why) != 0) {
        snprintf(err, err_len, "--device cuda: setting up device %d: %s", o->device, why);
        goto fail;
    }
    size_t pbytes = g->n_params * sizeof(float);
    DEVICE(g->w, NULL, pbytes, "the parameters");
    DEVICE(g->grad, NULL, pbytes, "the gradient");
    DEVICE(g->snapshot, NULL, pbytes, "the snapshot buffer");
    DEVICE(g->delta, NULL, pbytes, "the delta buffer");
    DEVICE(g->order, NULL, g->n_train * sizeof(uint32_t), "the data order");
    DEVICE(g->loss, NULL, sizeof(double), "the loss accumulator");
    if (oc->kind == OPTIMIZER_KIND_ADAGRAD || oc->momentum > 0.0) DEVICE(g->state, NULL, pbytes, "the optimizer state");
    if (!(g->host_snapshot = gpu_alloc_host(pbytes, why, sizeof why)) ||
        !(g->host_delta = gpu_alloc_host(pbytes, why, sizeof why)) ||
        !(g->host_params = gpu_alloc_host(pbytes, why, sizeof why))) {
        snprintf(err, err_len, "--device cuda: allocating pinned host buffers (3 x %zu bytes): %s", pbytes, why);
        goto fail;
    }
    if (gpu_zero(g->grad, pbytes, why, sizeof why) != 0 || gpu_zero(g->loss, sizeof(double), why, sizeof why) != 0) {
        snprintf(err, err_len, "--device cuda: clearing buffers: %s", why);
        goto fail;
    }

    const model_layout_t *L = &g->L;
    if (L->kind == MODEL_KIND_MLP) {
        const dense_dataset_t *d = L->dense_train;
        DEVICE(g->x, d->x, d->n * d->dim * sizeof(float), "the training images");
        DEVICE(g->labels, d->y, d->n * sizeof(int32_t), "the training labels");
        for (size_t l = 0; l <= L->n_layers; l++) {
            DEVICE(g->act[l], NULL, max_batch * L->width[l] * sizeof(float), "activations");
            DEVICE(g->delta_act[l], NULL, max_batch * L->width[l] * sizeof(float), "deltas");
        }
        DEVICE(g->batch_labels, NULL, max_batch * sizeof(int32_t), "minibatch labels");
        DEVICE(g->row_loss, NULL, max_batch * sizeof(float), "per-row losses");
        DEVICE(g->row_hit, NULL, max_batch * sizeof(float), "per-row hits");
    } else if (L->kind == MODEL_KIND_LINEAR) {
        const sparse_dataset_t *d = L->sparse_train;
        DEVICE(g->row_ptr, d->row_ptr, (d->n + 1) * sizeof(size_t), "the CSR row pointers");
        DEVICE(g->col, d->col, d->nnz * sizeof(uint32_t), "the CSR columns");
        DEVICE(g->val, d->val, d->nnz * sizeof(float), "the CSR values");
        DEVICE(g->y, d->y, d->n * sizeof(float), "the labels");
        DEVICE(g->touched, NULL, L->dim, "the touched-feature flags");
        if (gpu_zero(g->touched, L->dim, why, sizeof why) != 0) {
            snprintf(err, err_len, "--device cuda: clearing buffers: %s", why);
            goto fail;
        }
    } else {
        const ratings_t *r = L->ratings_train;
        DEVICE(g->user, r->user, r->n * sizeof(uint32_t), "the rating users");
        DEVICE(g->item, r->item, r->n * sizeof(uint32_t), "the rating items");
        DEVICE(g->rating, r->rating, r->n * sizeof(float), "the ratings");
    }
    return g;
fail:
    cuda_model_destroy(g);
    return NULL;
}

static void cuda_model_destroy(cuda_model_t *g) {
    char why[320];
    if (g->compute) gpu_stream_sync(g->compute, why, sizeof why);
    if (g->copy) gpu_stream_sync(g->copy, why, sizeof why);
    void *device[] = {g->w,   g->grad,   g->state,        g->snapshot, g->delta,   g->order,   g->loss,
                      g->x,   g->labels, g->batch_labels, g->row_loss, g->row_hit, g->row_ptr, g->col,
                      g->val, g->y,      g->touched,      g->user,     g->item,    g->rating};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++) gpu_free(device[i]);
    for (size_t l = 0; l <= MODEL_MAX_LAYERS; l++) {
        gpu_free(g->act[l]);
        gpu_free(g->delta_act[l]);
    }
    gpu_free_host(g->host_snapshot);
    gpu_free_host(g->host_delta);
    gpu_free_host(g->host_params);
    gpu_event_destroy(&g->snapshot_taken);
    gpu_event_destroy(&g->delta_arrived);
    gpu_event_destroy(&g->delta_used);
    gpu_stream_destroy(&g->compute);
    gpu_stream_destroy(&g->copy);
    free(g);
}

static int cuda_model_bind_thread(cuda_model_t *g, char *err, size_t err_len) {
    char why[320];
    if (gpu_select(g->o.device, why, sizeof why) != 0 || gpu_use_stream(g->compute, why, sizeof why) != 0) {
        snprintf(err, err_len, "--device cuda: binding a thread to device %d: %s", g->o.device, why);
        return -1;
    }
    return 0;
}

static void cuda_model_unbind_thread(void) { gpu_release_thread(); }

// Reports a failure that a kernel of this thread recorded, or a failed call.
static int failed(const char *what, const char *why, char *err, size_t err_len) {
    snprintf(err, err_len, "--device cuda: %s: %s", what, why);
    return -1;
}

#define CALL(what, call)                                            \
    do {                                                            \
        char why_[320];                                             \
        if ((call) != 0) return failed((what), why_, err, err_len); \
    } while (0)
#define WHY why_, sizeof why_

static int cuda_model_set_params(cuda_model_t *g, const param_t *w, char *err, size_t err_len) {
    CALL("waiting for the steps", gpu_stream_sync(g->compute, WHY));
    float *host = g->host_params;
    for (size_t i = 0; i < g->n_params; i++) host[i] = param_get(&w[i]);
    size_t bytes = g->n_params * sizeof(float);
    CALL("uploading the parameters", gpu_upload(g->w, host, bytes, WHY));
    if (g->state) CALL("clearing the optimizer state", gpu_zero(g->state, bytes, WHY));
    return 0;
}

static int cuda_model_get_params(cuda_model_t *g, param_t *w, char *err, size_t err_len) {
    CALL("waiting for the steps", gpu_stream_sync(g->compute, WHY));
    CALL("a step", gpu_check(WHY));
    CALL("downloading the parameters", gpu_download(g->host_params, g->w, g->n_params * sizeof(float), WHY));
    for (size_t i = 0; i < g->n_params; i++) param_set(&w[i], g->host_params[i]);
    return 0;
}

static int cuda_model_set_order(cuda_model_t *g, const uint32_t *order, size_t n, char *err, size_t err_len) {
    if (n > g->n_train) return failed("the data order", "longer than the training set", err, err_len);
    CALL("waiting for the steps", gpu_stream_sync(g->compute, WHY));
    CALL("uploading the data order", gpu_upload(g->order, order, n * sizeof(uint32_t), WHY));
    return 0;
}

static int cuda_model_is_hogwild(const cuda_model_t *g) {
    return g->L.kind == MODEL_KIND_MF || (g->L.kind == MODEL_KIND_LINEAR && g->max_batch == 1);
}

static size_t cuda_model_hogwild_chunk(const cuda_model_t *g) { return g->o.chunk; }

// Dense minibatch: forward, loss, backward into grad, L2, optimizer.
static int mlp_step(cuda_model_t *g, const uint32_t *idx, int rows, float lr, char *err, size_t err_len) {
    const model_layout_t *L = &g->L;
    size_t top = L->n_layers;
    gather_rows_cuda(rows, (int)L->width[0], g->x, g->labels, idx, g->act[0], g->batch_labels);
    for (size_t l = 0; l < top; l++)
        dense_forward_act_cuda(rows, (int)L->width[l], (int)L->width[l + 1], g->act[l], g->w + L->w_offset[l],
                               g->w + L->b_offset[l], g->act[l + 1], l + 1 < top);
    softmax_xent_rows_cuda(rows, (int)L->width[top], g->act[top], g->batch_labels, 1.0f / (float)rows,
                           g->delta_act[top], g->row_loss, g->row_hit);
    sum_accumulate_cuda((size_t)rows, g->row_loss, g->loss);
    // The weight-gradient products accumulate (beta = 1) into a cleared gradient.
    CALL("clearing the gradient", gpu_zero_async(g->grad, g->n_params * sizeof(float), g->compute, WHY));
    for (size_t l = top; l-- > 0;) {
        int in = (int)L->width[l], out = (int)L->width[l + 1];
        if (l > 0) {
            dense_backward_input_cuda(rows, in, out, g->delta_act[l + 1], g->w + L->w_offset[l], g->delta_act[l]);
            relu_backward_cuda(rows * in, g->act[l], g->delta_act[l]);
        }
        dense_weight_grad_cuda(rows, in, out, g->delta_act[l + 1], out, g->act[l], g->grad + L->w_offset[l]);
        dense_bias_grad_cuda(rows, out, g->delta_act[l + 1], g->grad + L->b_offset[l]);
    }
    if (L->l2 > 0.0f) {
        for (size_t l = 0; l < top; l++) {
            size_t n = L->width[l] * L->width[l + 1];
            const float *wl = g->w + L->w_offset[l];
            axpy_cuda(n, L->l2, wl, g->grad + L->w_offset[l]);
            dot_accumulate_cuda(n, 0.5f * L->l2 * (float)rows, wl, wl, g->loss);
        }
    }
    if (g->oc.kind == OPTIMIZER_KIND_ADAGRAD)
        adagrad_update_cuda(g->n_params, lr, (float)g->oc.epsilon, g->grad, g->state, g->w);
    else if (g->state)
        momentum_update_cuda(g->n_params, lr, (float)g->oc.momentum, g->grad, g->state, g->w);
    else
        sgd_update_cuda(g->n_params, lr, g->grad, g->w);
    return 0;
}

static int cuda_model_step(cuda_model_t *g, size_t pos, size_t count, float lr, char *err, size_t err_len) {
    const model_layout_t *L = &g->L;
    const uint32_t *idx = g->order + pos;
    if (L->kind == MODEL_KIND_MLP) {
        if (count > g->max_batch) return failed("a step", "minibatch larger than the workspace", err, err_len);
        if (mlp_step(g, idx, (int)count, lr, err, err_len) != 0) return -1;
    } else if (L->kind == MODEL_KIND_LINEAR) {
        const sparse_dataset_t *d = L->sparse_train;
        int hinge = L->loss == LINEAR_LOSS_HINGE;
        if (g->max_batch == 1) {
            linear_sgd_hogwild_cuda(count, idx, g->row_ptr, g->col, g->val, g->y, d->dim, hinge, lr, L->l2,
                                    g->o.scatter_atomic, g->o.in_flight, g->w, g->loss);
        } else {
            linear_grad_csr_cuda(count, idx, g->row_ptr, g->col, g->val, g->y, d->dim, hinge, 1.0f / (float)count, g->w,
                                 g->grad, g->touched, g->loss);
            linear_apply_csr_cuda(d->dim, lr, L->l2, (float)count, g->grad, g->touched, g->w, g->loss);
        }
    } else {
        mf_sgd_hogwild_cuda(count, idx, g->user, g->item, g->rating, L->mean, L->n_users, L->rank, lr, L->l2,
                            g->o.scatter_atomic, g->o.in_flight, g->w, g->loss);
    }
    g->loss_examples += count;
    CALL("a step", gpu_check(WHY));
    return 0;
}

static int cuda_model_take_loss(cuda_model_t *g, double *loss_sum, char *err, size_t err_len) {
    double sum = 0.0;
    CALL("waiting for the steps", gpu_stream_sync(g->compute, WHY));
    CALL("a step", gpu_check(WHY));
    CALL("reading the loss", gpu_download(&sum, g->loss, sizeof sum, WHY));
    CALL("clearing the loss", gpu_zero(g->loss, sizeof sum, WHY));
    g->loss_examples = 0;
    *loss_sum = sum;
    return 0;
}

static const float *cuda_model_snapshot(cuda_model_t *g, char *err, size_t err_len) {
    size_t bytes = g->n_params * sizeof(float);
    char why[320];
    // A device-side copy between two steps (fast), then the slow trip to the
    // host on the copy stream while the compute stream goes on training.
    if (gpu_copy_async(g->snapshot, g->w, bytes, g->compute, why, sizeof why) != 0 ||
        gpu_event_record(g->snapshot_taken, g->compute, why, sizeof why) != 0 ||
        gpu_stream_wait_event(g->copy, g->snapshot_taken, why, sizeof why) != 0 ||
        gpu_copy_async(g->host_snapshot, g->snapshot, bytes, g->copy, why, sizeof why) != 0 ||
        gpu_stream_sync(g->copy, why, sizeof why) != 0) {
        failed("copying the parameters to the host", why, err, err_len);
        return NULL;
    }
    return g->host_snapshot;
}

static float *cuda_model_delta_buffer(cuda_model_t *g) { return g->host_delta; }

static int cuda_model_add_delta(cuda_model_t *g, char *err, size_t err_len) {
    size_t bytes = g->n_params * sizeof(float);
    // The device buffer is free once the previous add has run; the host
    // buffer once the copy has finished (waited for below).
    CALL("copying a delta to the device", gpu_stream_wait_event(g->copy, g->delta_used, WHY));
    CALL("copying a delta to the device", gpu_copy_async(g->delta, g->host_delta, bytes, g->copy, WHY));
    CALL("copying a delta to the device", gpu_event_record(g->delta_arrived, g->copy, WHY));
    CALL("adding a delta", gpu_stream_wait_event(g->compute, g->delta_arrived, WHY));
    axpy_cuda(g->n_params, 1.0f, g->delta, g->w);
    CALL("adding a delta", gpu_check(WHY));
    CALL("adding a delta", gpu_event_record(g->delta_used, g->compute, WHY));
    CALL("copying a delta to the device", gpu_stream_sync(g->copy, WHY));
    return 0;
}

static void cuda_model_describe(const cuda_model_t *g, char *out, size_t out_len) {
    if (cuda_model_is_hogwild(g))
        snprintf(out, out_len, "%s; GPU Hogwild!, %s scatters, %zu examples in flight", g->device_name,
                 g->o.scatter_atomic ? "atomic" : "plain", g->o.in_flight);
    else
        snprintf(out, out_len, "%s; minibatch steps", g->device_name);
}

// The module's one exported symbol (gpu_module.h).
__attribute__((visibility("default"))) const gpu_module_t asgd_gpu_module = {
    .abi = GPU_MODULE_ABI,
    .device_summary = cuda_device_summary,
    .model_new = cuda_model_new,
    .model_destroy = cuda_model_destroy,
    .bind_thread = cuda_model_bind_thread,
    .unbind_thread = cuda_model_unbind_thread,
    .set_params = cuda_model_set_params,
    .get_params = cuda_model_get_params,
    .set_order = cuda_model_set_order,
    .is_hogwild = cuda_model_is_hogwild,
    .hogwild_chunk = cuda_model_hogwild_chunk,
    .step = cuda_model_step,
    .take_loss = cuda_model_take_loss,
    .snapshot = cuda_model_snapshot,
    .delta_buffer = cuda_model_delta_buffer,
    .add_delta = cuda_model_add_delta,
    .describe = cuda_model_describe,
};
