// Training on the GPU (--device cuda) against training on the CPU, through
// train_fresh: the same data order and initial parameters.
//  - Minibatch steps (MLP with SGD, momentum and Adagrad, L2; sparse logistic
//    regression with minibatches) end at the CPU's parameters to 1e-4
//    (relative, as in test_cuda_kernels) after tens of steps.
//  - GPU Hogwild! (logreg and MF, plain and atomic scatters) learns as well
//    as the CPU's learning tests require.
//  - Configurations the GPU path does not run are refused with the flag named.
// Skips (77) without a CUDA build or device.
#include "engine/data/data_source.h"
#include "engine/core/trainer.h"
#include "engine/gpu/gpu_device.h"
#include "engine/gpu/gpu_module.h"
#include "tests/support/learning_support.h"
#include "tests/support/twin_check.h"

#ifndef ASGD_HAVE_CUDA
int main(void) { return test_skip_no_gpu("built without CUDA"); }
#else

static char err[512];

static optimizer_config_t sgd(double lr) {
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = lr;
    return oc;
}

static train_config_t config(size_t batch, size_t epochs, const gpu_options_t *gpu) {
    train_config_t c;
    train_config_default(&c);
    c.batch = batch;
    c.epochs = epochs;
    c.device = gpu ? &gpu_device_ops : NULL;
    c.device_options = gpu;
    return c;
}

// Trains once on each device; returns the largest relative difference of the
// final parameters (against max(|cpu|, 1% of the largest |cpu|)).
static double cpu_vs_gpu(const model_t *m, const optimizer_config_t *oc, size_t batch, size_t epochs,
                         train_result_t *cpu_r, train_result_t *gpu_r) {
    size_t n = model_num_params(m);
    float *wc = malloc(n * sizeof *wc), *wg = malloc(n * sizeof *wg);
    CHECK(wc && wg);
    gpu_options_t g;
    gpu_options_default(&g);
    train_config_t cc = config(batch, epochs, NULL), gc = config(batch, epochs, &g);
    CHECK_OK(train_fresh(m, oc, &cc, 1, NULL, cpu_r, wc, err, sizeof err), err);
    CHECK_OK(train_fresh(m, oc, &gc, 1, NULL, gpu_r, wg, err, sizeof err), err);
    CHECK(cpu_r->samples == gpu_r->samples && cpu_r->updates == gpu_r->updates);
    double worst = twin_rel_err(wg, wc, n);
    free(wc);
    free(wg);
    return worst;
}

static void mlp_matches_cpu(void) {
    // One set of clusters, split 1200 / 400.
    dense_dataset_t all, train, test;
    make_dense(&all, 1600, 64, 5, 7);
    CHECK_OK(dense_dataset_alloc(&train, 1200, 64, 5, err, sizeof err), err);
    CHECK_OK(dense_dataset_alloc(&test, 400, 64, 5, err, sizeof err), err);
    memcpy(train.x, all.x, 1200 * 64 * sizeof(float));
    memcpy(train.y, all.y, 1200 * sizeof(int32_t));
    memcpy(test.x, all.x + 1200 * 64, 400 * 64 * sizeof(float));
    memcpy(test.y, all.y + 1200, 400 * sizeof(int32_t));
    dense_dataset_free(&all);
    size_t hidden[] = {48, 24};
    model_t *m = model_new_mlp(&train, &test, hidden, 2, 1e-3, err, sizeof err);
    CHECK(m);
    optimizer_config_t ocs[3];
    ocs[0] = sgd(0.05);
    ocs[1] = sgd(0.02);
    ocs[1].momentum = 0.9;
    ocs[2] = sgd(0.01);
    ocs[2].kind = OPTIMIZER_KIND_ADAGRAD;
    const char *names[] = {"sgd", "momentum", "adagrad"};
    for (int i = 0; i < 3; i++) {
        train_result_t rc, rg;
        double d = cpu_vs_gpu(m, &ocs[i], 40, 2, &rc, &rg);  // 60 steps
        printf(
            "mlp 64-48-24-5 %-8s batch 40, 2 epochs: params rel diff %.2e; accuracy cpu %.4f gpu %.4f; "
            "train loss cpu %.5f gpu %.5f\n",
            names[i], d, rc.last.test_metric, rg.last.test_metric, rc.last.train_loss, rg.last.train_loss);
        CHECK(d < 1e-4);
        CHECK_NEAR(rg.last.test_metric, rc.last.test_metric, 0.0026);  // at most one of 400 test images
        CHECK_NEAR(rg.last.train_loss, rc.last.train_loss, 1e-4 * fabs(rc.last.train_loss));
        CHECK(rg.last.test_metric > 0.9);
    }
    model_destroy(&m);
    dense_dataset_free(&train);
    dense_dataset_free(&test);
}

static void logreg_on_gpu(void) {
    data_options_t o = {"gen:sparse:n=30000,dim=20000,nnz=40", NULL, 0, 0, 0.2, 3, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, DATA_KIND_SPARSE, &d, err, sizeof err), err);
    model_t *m = model_new_linear(LINEAR_LOSS_LOGISTIC, &d.sparse_train, &d.sparse_test, 1e-4, err, sizeof err);
    CHECK(m);
    size_t positives = 0;
    for (size_t i = 0; i < d.sparse_test.n; i++) positives += d.sparse_test.y[i] > 0;
    double majority = fmax((double)positives, (double)(d.sparse_test.n - positives)) / (double)d.sparse_test.n;
    // Minibatches: the CSR gradient and the lazy-L2 step give the CPU's parameters.
    optimizer_config_t oc = sgd(0.5);
    train_result_t rc, rg;
    double diff = cpu_vs_gpu(m, &oc, 500, 1, &rc, &rg);
    printf("logreg batch 500, 1 epoch: params rel diff %.2e; accuracy cpu %.4f gpu %.4f\n", diff, rc.last.test_metric,
           rg.last.test_metric);
    CHECK(diff < 1e-4);

    // Hogwild! on the GPU learns, with either scatter. Inverse-time decay as in test_learning.
    oc.schedule = LR_SCHEDULE_INVERSE_TIME;
    oc.decay = 1e-4;
    for (int atomic = 0; atomic <= 1; atomic++) {
        gpu_options_t g;
        gpu_options_default(&g);
        g.scatter_atomic = atomic;
        g.chunk = 4096;
        g.in_flight = 64;  // the degree of asynchrony: more in flight learns less per update (docs/gpu.md)
        train_config_t c = config(1, 3, &g);
        train_result_t r;
        CHECK_OK(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err), err);
        printf(
            "logreg GPU Hogwild! (%s scatters, chunks of 4096, 64 in flight), 3 epochs: accuracy %.4f (majority "
            "class %.4f), %llu updates\n",
            atomic ? "atomic" : "plain", r.last.test_metric, majority, (unsigned long long)r.updates);
        CHECK(r.updates == 3 * model_num_train(m));
        CHECK(r.last.test_metric >= majority + 0.20);  // as test_learning asks of the CPU
    }

    // Refused: sparse models take plain SGD only, and one host thread.
    gpu_options_t g;
    gpu_options_default(&g);
    optimizer_config_t mom = sgd(0.1);
    mom.momentum = 0.5;
    train_config_t c = config(1, 1, &g);
    train_result_t r;
    CHECK(train_fresh(m, &mom, &c, 1, NULL, &r, NULL, err, sizeof err) == -1);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "--device cuda") && strstr(err, "plain SGD"));
    c.threads = 2;
    oc = sgd(0.5);
    CHECK(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err) == -1);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "--threads 1"));
    model_destroy(&m);
    data_bundle_free(&d);
}

static void mf_on_gpu(void) {
    data_options_t o = {"gen:ratings:users=500,items=300,rank=4,n=40000,noise=0.1", NULL, 0, 0, 0.1, 4, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, DATA_KIND_RATINGS, &d, err, sizeof err), err);
    model_t *m = model_new_mf(&d.ratings_train, &d.ratings_test, 8, 0.01, err, sizeof err);
    CHECK(m);
    optimizer_config_t oc = sgd(0.05);
    double before;
    train_result_t cpu = train(m, TRAIN_MODE_HOGWILD, 1, 1, 10, 0.05, 0.0, &before);
    printf("mf rank 8 CPU, 1 thread, 10 epochs: RMSE %.4f -> %.4f\n", before, cpu.last.test_metric);
    for (int atomic = 0; atomic <= 1; atomic++) {
        gpu_options_t g;
        gpu_options_default(&g);
        g.scatter_atomic = atomic;
        g.chunk = 2048;
        train_config_t c = config(1, 10, &g);
        c.eval_every = model_num_train(m) * 10;
        train_result_t r;
        CHECK_OK(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err), err);
        printf("mf rank 8 GPU Hogwild! (%s scatters), 10 epochs: RMSE %.4f\n", atomic ? "atomic" : "plain",
               r.last.test_metric);
        CHECK(r.last.test_metric < 0.6 * before);  // what test_learning asks of the CPU
    }
    train_config_t c = config(4, 1, NULL);
    gpu_options_t g;
    gpu_options_default(&g);
    c.device = &gpu_device_ops;
    c.device_options = &g;
    train_result_t r;
    CHECK(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err) == -1);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "--batch 1"));
    model_destroy(&m);
    data_bundle_free(&d);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[256];
    if (gpu_device_summary(why, sizeof why) == 0) {
        return test_skip_no_gpu("%s", why);
    }
    mlp_matches_cpu();
    logreg_on_gpu();
    mf_on_gpu();
    printf("GPU training agrees with the CPU\n");
    return 0;
}
#endif
