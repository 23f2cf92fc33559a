// The GPU path, measured in one run:
//  1. every CUDA kernel against its CPU twin on fresh random inputs (never
//     zeros), over sizes: the largest relative error, CPU and GPU time, speedup;
//  2. cuBLAS sgemm's FP32 peak on this device (the best of several sizes);
//  3. MLP 784-256-128-10 training (Fashion-MNIST's shape, synthetic images) on
//     the GPU by batch size, in samples/s and GFLOP/s against that peak, and
//     on the CPU with 1 and N Hogwild! threads, through train_fresh as asgd
//     trains;
//  4. sparse logistic regression (RCV1-like, generated) with GPU Hogwild!,
//     plain against atomic scatters, against CPU Hogwild!.
// Usage: bench_gpu [--cpu-threads N] [--epochs E]
// Exits 77 without a CUDA build or device.
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "bench_support.h"
#include "engine/data/generate.h"
#include "kernels/foundation/rng.h"
#include "engine/data/data_source.h"
#include "engine/core/trainer.h"
#include "engine/gpu/gpu_device.h"
#include "kernels/blas_runtime.h"
#include "kernels/dense.h"
#include "kernels/gpu.h"
#include "kernels/sparse_sgd.h"
#include "kernels/update.h"
#include "tests/support/twin_check.h"

#ifndef ASGD_HAVE_CUDA
int main(void) {
    printf("bench_gpu: built without CUDA\n");
    return 77;
}
#else

static char err[512];
static rng_t rng;

#define DIE_IF(cond)                                                            \
    do {                                                                        \
        if (cond) {                                                             \
            fprintf(stderr, "bench_gpu: %s:%d: %s\n", __FILE__, __LINE__, err); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static float *rand_host(size_t n, float lo, float hi) {
    float *p = twin_random_floats(&rng, n, lo, hi);
    if (!p) {
        fprintf(stderr, "bench_gpu: out of memory\n");
        exit(1);
    }
    return p;
}

static void *dev_copy(const void *h, size_t bytes) {
    void *d = gpu_alloc(bytes, err, sizeof err);
    DIE_IF(!d);
    DIE_IF(gpu_upload(d, h, bytes, err, sizeof err) != 0);
    return d;
}

// One kernel case: run_cpu/run_gpu do the work once; check compares outputs.
typedef struct kcase {
    const char *name;
    char size[48];
    void (*run_cpu)(struct kcase *);
    void (*run_gpu)(struct kcase *);
    // inputs/outputs, host (h*) and device (d*)
    int batch, in, out;
    size_t n;
    float *hx, *hw, *hb, *hz, *dx, *dw, *db, *dz;
    int32_t *hl, *dl;
    uint32_t *hidx, *didx;
    float *hl2, *dl2, *hl3, *dl3;
    size_t out_floats;
    float *check_host, *check_dev;
} kcase_t;

static gpu_event_t *ev_a, *ev_b;

// Median of 5 timings, each of `reps` calls; milliseconds per call.
static double time_gpu(kcase_t *k, int reps) {
    double t[5];
    for (int trial = 0; trial < 5; trial++) {
        DIE_IF(gpu_event_record(ev_a, NULL, err, sizeof err) != 0);
        for (int r = 0; r < reps; r++) k->run_gpu(k);
        DIE_IF(gpu_event_record(ev_b, NULL, err, sizeof err) != 0);
        DIE_IF(gpu_event_sync(ev_b, err, sizeof err) != 0);
        float ms;
        DIE_IF(gpu_event_elapsed_ms(ev_a, ev_b, &ms, err, sizeof err) != 0);
        t[trial] = ms / reps;
    }
    DIE_IF(gpu_check(err, sizeof err) != 0);
    return bench_median(t, 5);
}

static double time_cpu(kcase_t *k, int reps) {
    double t[3];
    for (int trial = 0; trial < 3; trial++) {
        double t0 = bench_now_s();
        for (int r = 0; r < reps; r++) k->run_cpu(k);
        t[trial] = (bench_now_s() - t0) * 1e3 / reps;
    }
    return bench_median(t, 3);
}

static void report(kcase_t *k) {
    // Correctness first, on a fresh copy of the output buffers: one call each.
    k->run_cpu(k);
    k->run_gpu(k);
    float *got = malloc(k->out_floats * sizeof *got);
    DIE_IF(gpu_check(err, sizeof err) != 0);
    DIE_IF(gpu_download(got, k->check_dev, k->out_floats * sizeof *got, err, sizeof err) != 0);
    double e = twin_rel_err(got, k->check_host, k->out_floats);
    free(got);
    double cpu = time_cpu(k, 3), gpu = time_gpu(k, 50);
    printf("  %-26s %-20s %10.2e %10.4f %10.4f %9.1fx\n", k->name, k->size, e, cpu, gpu, cpu / gpu);
}

// ---- the cases ----
static void fwd_cpu(kcase_t *k) { dense_forward_act_cpu(k->batch, k->in, k->out, k->hx, k->hw, k->hb, k->hz, 1); }
static void fwd_gpu(kcase_t *k) { dense_forward_act_cuda(k->batch, k->in, k->out, k->dx, k->dw, k->db, k->dz, 1); }
// Weight gradient: overwrite-then-accumulate would drift between calls, so each call starts from zero.
static void wgrad_cpu(kcase_t *k) {
    memset(k->hz, 0, (size_t)k->out * k->in * 4);
    dense_weight_grad_cpu(k->batch, k->in, k->out, k->hl2, k->out, k->hx, k->hz);
}
static void wgrad_gpu(kcase_t *k) {
    gpu_zero_async(k->dz, (size_t)k->out * k->in * 4, NULL, err, sizeof err);
    dense_weight_grad_cuda(k->batch, k->in, k->out, k->dl2, k->out, k->dx, k->dz);
}
static void bwd_cpu(kcase_t *k) { dense_backward_input_cpu(k->batch, k->in, k->out, k->hl2, k->hw, k->hz); }
static void bwd_gpu(kcase_t *k) { dense_backward_input_cuda(k->batch, k->in, k->out, k->dl2, k->dw, k->dz); }
static void bgrad_cpu(kcase_t *k) {
    memset(k->hz, 0, (size_t)k->out * 4);
    dense_bias_grad_cpu(k->batch, k->out, k->hl2, k->hz);
}
static void bgrad_gpu(kcase_t *k) {
    gpu_zero_async(k->dz, (size_t)k->out * 4, NULL, err, sizeof err);
    dense_bias_grad_cuda(k->batch, k->out, k->dl2, k->dz);
}
static void sm_cpu(kcase_t *k) {
    softmax_xent_rows_cpu(k->batch, k->out, k->hx, k->hl, 1.0f / k->batch, k->hz, k->hl3, k->hb);
}
static void sm_gpu(kcase_t *k) {
    softmax_xent_rows_cuda(k->batch, k->out, k->dx, k->dl, 1.0f / k->batch, k->dz, k->dl3, k->db);
}
static void gather_cpu(kcase_t *k) {
    gather_rows_cpu(k->batch, k->in, k->hx, k->hl, k->hidx, k->hz, (int32_t *)k->hl3);
}
static void gather_gpu(kcase_t *k) {
    gather_rows_cuda(k->batch, k->in, k->dx, k->dl, k->didx, k->dz, (int32_t *)k->dl3);
}
// Optimizer steps are applied repeatedly to the same w: both twins take the same sequence.
static void adagrad_cpu(kcase_t *k) { adagrad_update_cpu(k->n, 1e-3f, 1e-8f, k->hx, k->hb, k->hz); }
static void adagrad_gpu(kcase_t *k) { adagrad_update_cuda(k->n, 1e-3f, 1e-8f, k->dx, k->db, k->dz); }
static void mom_cpu(kcase_t *k) { momentum_update_cpu(k->n, 1e-3f, 0.9f, k->hx, k->hb, k->hz); }
static void mom_gpu(kcase_t *k) { momentum_update_cuda(k->n, 1e-3f, 0.9f, k->dx, k->db, k->dz); }

static kcase_t dense_case(const char *name, int batch, int in, int out, void (*c)(kcase_t *), void (*g)(kcase_t *)) {
    kcase_t k;
    memset(&k, 0, sizeof k);
    k.name = name;
    snprintf(k.size, sizeof k.size, "%dx%d->%d", batch, in, out);
    k.run_cpu = c, k.run_gpu = g;
    k.batch = batch, k.in = in, k.out = out;
    size_t big = (size_t)batch * in > (size_t)out * in ? (size_t)batch * in : (size_t)out * in;
    if ((size_t)batch * out > big) big = (size_t)batch * out;
    k.hx = rand_host((size_t)batch * in, -1, 1), k.dx = dev_copy(k.hx, (size_t)batch * in * 4);
    k.hw = rand_host((size_t)out * in, -0.1f, 0.1f), k.dw = dev_copy(k.hw, (size_t)out * in * 4);
    k.hb = rand_host((size_t)batch > (size_t)out ? (size_t)batch : (size_t)out, -0.5f, 0.5f);
    k.db = dev_copy(k.hb, ((size_t)batch > (size_t)out ? (size_t)batch : (size_t)out) * 4);
    k.hl2 = rand_host((size_t)batch * out, -1, 1), k.dl2 = dev_copy(k.hl2, (size_t)batch * out * 4);
    k.hz = calloc(big, 4), k.dz = dev_copy(k.hz, big * 4);
    k.hl3 = calloc((size_t)batch, 4), k.dl3 = dev_copy(k.hl3, (size_t)batch * 4);
    k.hl = malloc((size_t)batch * 4);
    for (int r = 0; r < batch; r++) k.hl[r] = (int32_t)rng_below(&rng, (uint64_t)out);
    k.dl = dev_copy(k.hl, (size_t)batch * 4);
    k.hidx = malloc((size_t)batch * 4);
    for (int r = 0; r < batch; r++) k.hidx[r] = (uint32_t)rng_below(&rng, (uint64_t)batch);
    k.didx = dev_copy(k.hidx, (size_t)batch * 4);
    k.check_host = k.hz, k.check_dev = k.dz;
    k.out_floats = c == wgrad_cpu                    ? (size_t)out * in
                   : c == bwd_cpu || c == gather_cpu ? (size_t)batch * in
                   : c == bgrad_cpu                  ? (size_t)out
                                                     : (size_t)batch * out;
    return k;
}

static kcase_t vector_case(const char *name, size_t n, void (*c)(kcase_t *), void (*g)(kcase_t *)) {
    kcase_t k;
    memset(&k, 0, sizeof k);
    k.name = name;
    snprintf(k.size, sizeof k.size, "%zu floats", n);
    k.run_cpu = c, k.run_gpu = g;
    k.n = n;
    k.hx = rand_host(n, -1, 1), k.dx = dev_copy(k.hx, n * 4);
    k.hb = rand_host(n, 0.1f, 1), k.db = dev_copy(k.hb, n * 4);
    k.hz = rand_host(n, -1, 1), k.dz = dev_copy(k.hz, n * 4);
    k.check_host = k.hz, k.check_dev = k.dz;
    k.out_floats = n;
    return k;
}

static void kcase_free(kcase_t *k) {
    free(k->hx), free(k->hw), free(k->hb), free(k->hz), free(k->hl), free(k->hidx), free(k->hl2), free(k->hl3);
    gpu_free(k->dx), gpu_free(k->dw), gpu_free(k->db), gpu_free(k->dz), gpu_free(k->dl), gpu_free(k->didx);
    gpu_free(k->dl2), gpu_free(k->dl3);
}

static void kernels_section(void) {
    printf(
        "\n1. kernels: CUDA twin against CPU twin on fresh random inputs; ms per call (CPU: median of 3 x 3 calls,\n"
        "   GPU: median of 5 x 50 calls timed by events); the repeated optimizer steps run the same sequence on "
        "both\n");
    printf("  %-26s %-20s %10s %10s %10s %10s\n", "kernel", "size", "rel err", "cpu ms", "gpu ms", "speedup");
    static const int batches[] = {16, 256, 1024, 4096};
    for (size_t b = 0; b < 4; b++) {
        int B = batches[b];
        kcase_t cases[] = {
            dense_case("dense_forward_act (relu)", B, 784, 256, fwd_cpu, fwd_gpu),
            dense_case("dense_weight_grad", B, 784, 256, wgrad_cpu, wgrad_gpu),
            dense_case("dense_backward_input", B, 256, 128, bwd_cpu, bwd_gpu),
            dense_case("dense_bias_grad", B, 784, 256, bgrad_cpu, bgrad_gpu),
            dense_case("softmax_xent_rows", B, 10, 10, sm_cpu, sm_gpu),
            dense_case("gather_rows", B, 784, 10, gather_cpu, gather_gpu),
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            report(&cases[i]);
            kcase_free(&cases[i]);
        }
    }
    static const size_t sizes[] = {235146, 4u << 20};
    for (size_t s = 0; s < 2; s++) {
        kcase_t cases[] = {vector_case("adagrad_update", sizes[s], adagrad_cpu, adagrad_gpu),
                           vector_case("momentum_update", sizes[s], mom_cpu, mom_gpu)};
        for (size_t i = 0; i < 2; i++) {
            // The step sequences run different numbers of times in the timing loops: check first, on fresh state.
            report(&cases[i]);
            kcase_free(&cases[i]);
        }
    }
}

// ---- 2. sgemm peak ----
static double sgemm_peak(void) {
    printf("\n2. cuBLAS sgemm (FP32, no tensor-core math), C (n,n) += A B, median of 5 x 20 calls\n");
    double best = 0;
    static const int ns[] = {1024, 2048, 4096, 8192};
    for (size_t i = 0; i < 4; i++) {
        int n = ns[i];
        size_t nn = (size_t)n * n;
        float *a = gpu_alloc(nn * 4, err, sizeof err), *b = gpu_alloc(nn * 4, err, sizeof err),
              *c = gpu_alloc(nn * 4, err, sizeof err);
        DIE_IF(!a || !b || !c);
        float *h = rand_host(nn, -1, 1);
        DIE_IF(gpu_upload(a, h, nn * 4, err, sizeof err) || gpu_upload(b, h, nn * 4, err, sizeof err) ||
               gpu_zero(c, nn * 4, err, sizeof err));
        free(h);
        double t[5];
        for (int trial = 0; trial < 5; trial++) {
            DIE_IF(gpu_event_record(ev_a, NULL, err, sizeof err) != 0);
            for (int r = 0; r < 20; r++) dense_weight_grad_cuda(n, n, n, a, n, b, c);
            DIE_IF(gpu_event_record(ev_b, NULL, err, sizeof err) || gpu_event_sync(ev_b, err, sizeof err));
            float ms;
            DIE_IF(gpu_event_elapsed_ms(ev_a, ev_b, &ms, err, sizeof err) != 0);
            t[trial] = ms / 20;
        }
        DIE_IF(gpu_check(err, sizeof err) != 0);
        double ms = bench_median(t, 5), gflops = 2.0 * n * (double)n * n / (ms * 1e6);
        printf("  n = %5d: %8.3f ms, %8.0f GFLOP/s\n", n, ms, gflops);
        if (gflops > best) best = gflops;
        gpu_free(a), gpu_free(b), gpu_free(c);
    }
    printf("  peak: %.0f GFLOP/s\n", best);
    return best;
}

// ---- 3. MLP training ----
static train_result_t train_mlp(const model_t *m, size_t batch, size_t threads, int gpu, size_t epochs) {
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = 0.05;
    train_config_t c;
    train_config_default(&c);
    c.batch = batch;
    c.threads = threads;
    c.epochs = epochs;
    c.eval_every = model_num_train(m) * epochs;  // start and end only
    gpu_options_t g;
    gpu_options_default(&g);
    c.device = gpu ? &gpu_device_ops : NULL;
    c.device_options = gpu ? &g : NULL;
    train_result_t r;
    DIE_IF(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err) != 0);
    return r;
}

static void mlp_section(double peak, size_t cpu_threads, size_t epochs) {
    // Fashion-MNIST's shape: 60,000 images of 784 pixels, 10 classes, 10,000 test images.
    dense_dataset_t train, test;
    DIE_IF(dense_dataset_alloc(&train, 60000, 784, 10, err, sizeof err) != 0);
    DIE_IF(dense_dataset_alloc(&test, 10000, 784, 10, err, sizeof err) != 0);
    for (size_t i = 0; i < train.n * train.dim; i++) train.x[i] = (float)rng_uniform(&rng);
    for (size_t i = 0; i < test.n * test.dim; i++) test.x[i] = (float)rng_uniform(&rng);
    for (size_t i = 0; i < train.n; i++) train.y[i] = (int32_t)rng_below(&rng, 10);
    for (size_t i = 0; i < test.n; i++) test.y[i] = (int32_t)rng_below(&rng, 10);
    size_t hidden[] = {256, 128};
    model_t *m = model_new_mlp(&train, &test, hidden, 2, 0.0, err, sizeof err);
    DIE_IF(!m);
    double flops = model_flops_per_example(m);
    printf(
        "\n3. MLP 784-256-128-10 (%.3f MFLOP per example, forward + backward), 60,000 synthetic images, %zu epochs,\n"
        "   SGD; samples/s over the training time (evaluation excluded)\n",
        flops / 1e6, epochs);
    printf("  %-26s %8s %12s %10s %12s\n", "device", "batch", "samples/s", "GFLOP/s", "% of sgemm");
    static const size_t batches[] = {16, 64, 256, 1024, 4096};
    double gpu1024 = 0, cpu_best = 0;
    for (size_t i = 0; i < 5; i++) {
        train_result_t r = train_mlp(m, batches[i], 1, 1, epochs);
        double gf = r.samples_per_s * flops / 1e9;
        if (batches[i] == 1024) gpu1024 = r.samples_per_s;
        printf("  %-26s %8zu %12.0f %10.1f %11.1f%%\n", "GPU (one stream)", batches[i], r.samples_per_s, gf,
               100 * gf / peak);
    }
    size_t threads[] = {1, cpu_threads};
    for (size_t t = 0; t < 2; t++) {
        for (size_t b = 0; b < 2; b++) {
            size_t batch = b ? 256 : 16;
            train_result_t r = train_mlp(m, batch, threads[t], 0, 1);
            if (r.samples_per_s > cpu_best) cpu_best = r.samples_per_s;
            char label[64];
            snprintf(label, sizeof label, "CPU Hogwild!, %zu thread%s", threads[t], threads[t] > 1 ? "s" : "");
            printf("  %-26s %8zu %12.0f %10.1f %12s\n", label, batch, r.samples_per_s, r.samples_per_s * flops / 1e9,
                   "-");
        }
    }
    printf("  ratios: GPU batch 1024 / best CPU = %.1fx; GPU batch 1024 = %.1f%% of the sgemm peak (target >= 50%%)\n",
           gpu1024 / cpu_best, 100 * gpu1024 * flops / 1e9 / peak);
    model_destroy(&m);
    dense_dataset_free(&train);
    dense_dataset_free(&test);
}

// ---- 4. sparse Hogwild! ----
static void sparse_section(size_t cpu_threads) {
    data_options_t o = {"gen:sparse", NULL, 0, 0, 0.1, 7, NULL, NULL, 0};
    data_bundle_t d;
    DIE_IF(data_bundle_load(&o, DATA_KIND_SPARSE, &d, err, sizeof err) != 0);
    model_t *m = model_new_linear(LINEAR_LOSS_LOGISTIC, &d.sparse_train, &d.sparse_test, 0.0, err, sizeof err);
    DIE_IF(!m);
    printf("\n4. sparse logistic regression, %s, 2 epochs, batch 1, lr 0.5 / (1 + 1e-6 t)\n", d.description);
    printf("  %-46s %12s %10s\n", "configuration", "updates/s", "accuracy");
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = 0.5;
    oc.schedule = LR_SCHEDULE_INVERSE_TIME;
    oc.decay = 1e-6;
    static const size_t in_flight[] = {64, 256, 1024, 4096, 65536};
    for (int cfg = 0; cfg < 12; cfg++) {
        train_config_t c;
        train_config_default(&c);
        c.epochs = 2;
        c.eval_every = model_num_train(m) * 2;
        gpu_options_t g;
        gpu_options_default(&g);
        char label[80];
        if (cfg < 10) {
            g.scatter_atomic = cfg % 2;
            g.in_flight = in_flight[cfg / 2];
            g.chunk = g.in_flight > 16384 ? g.in_flight : 16384;
            c.device = &gpu_device_ops;
            c.device_options = &g;
            snprintf(label, sizeof label, "GPU Hogwild!, %s scatters, %zu in flight",
                     g.scatter_atomic ? "atomic" : "plain", g.in_flight);
        } else {
            c.threads = cfg == 10 ? 1 : cpu_threads;
            snprintf(label, sizeof label, "CPU Hogwild!, %zu threads", c.threads);
        }
        train_result_t r;
        DIE_IF(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err) != 0);
        printf("  %-46s %12.0f %10.4f\n", label, r.updates_per_s, r.last.test_metric);
    }
    model_destroy(&m);
    data_bundle_free(&d);
}

int main(int argc, char **argv) {
    blas_prepare_process(argv, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    size_t cpu_threads = (size_t)sysconf(_SC_NPROCESSORS_ONLN), epochs = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpu-threads") == 0 && i + 1 < argc)
            cpu_threads = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--epochs") == 0 && i + 1 < argc)
            epochs = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_gpu [--cpu-threads N] [--epochs E]\n");
            return 2;
        }
    }
    char why[256];
    if (gpu_device_count(why, sizeof why) == 0) {
        printf("bench_gpu: %s\n", why);
        return 77;
    }
    char blas[256];
    blas_describe(blas, sizeof blas);
    printf("bench_gpu: %s; CPU: %zu threads\n", blas, cpu_threads);
    rng_seed(&rng, 99, 1);
    DIE_IF(gpu_select(0, err, sizeof err) != 0);
    ev_a = gpu_event_new(1, err, sizeof err);
    ev_b = gpu_event_new(1, err, sizeof err);
    DIE_IF(!ev_a || !ev_b);
    kernels_section();
    double peak = sgemm_peak();
    mlp_section(peak, cpu_threads, epochs);
    sparse_section(cpu_threads);
    return 0;
}
#endif
