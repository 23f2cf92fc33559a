// Every mode learns on generated data, through the same data path as the CLI:
// logistic regression (against the majority-class baseline) and matrix
// factorisation (RMSE falls). The MLP on Fashion-MNIST is test_learning_mlp.
#include "engine/data/data_source.h"

#include "learning_support.h"

static void logreg_learns(void) {
    char err[512];
    data_options_t o = {"gen:sparse:n=30000,dim=20000,nnz=40", NULL, 0, 0, 0.2, 3, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, DATA_KIND_SPARSE, &d, err, sizeof err), err);
    size_t positives = 0;
    for (size_t i = 0; i < d.sparse_test.n; i++) positives += d.sparse_test.y[i] > 0;
    double majority = fmax((double)positives, (double)(d.sparse_test.n - positives)) / (double)d.sparse_test.n;
    model_t *m = model_new_linear(LINEAR_LOSS_LOGISTIC, &d.sparse_train, &d.sparse_test, 0.0, err, sizeof err);
    CHECK(m);
    for (size_t i = 0; i < 3; i++) {
        // Single-example steps at a constant 0.5 leave a noisy final iterate (test accuracy
        // swings by +-3 points between evaluations); a decaying step settles it.
        train_result_t r = train(m, modes[i], 2, 1, 3, 0.5, 1e-4, NULL);
        printf("logreg %-8s 2 threads, 3 epochs: accuracy %.4f (majority class %.4f), %.0f samples/s\n",
               train_mode_name(modes[i]), r.last.test_metric, majority, r.samples_per_s);
        CHECK(r.last.test_metric >= majority + 0.20);
        CHECK(r.last.test_metric >= 0.80);
    }
    model_destroy(&m);
    data_bundle_free(&d);
}

static void mf_learns(void) {
    char err[512];
    data_options_t o = {"gen:ratings:users=500,items=300,rank=4,n=40000,noise=0.1", NULL, 0, 0, 0.1, 4, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, DATA_KIND_RATINGS, &d, err, sizeof err), err);
    model_t *m = model_new_mf(&d.ratings_train, &d.ratings_test, 8, 0.01, err, sizeof err);
    CHECK(m);
    for (size_t i = 0; i < 3; i++) {
        double before;
        train_result_t r = train(m, modes[i], 2, 1, 10, 0.05, 0.0, &before);
        printf("mf rank 8 %-8s 2 threads, 10 epochs: RMSE %.4f -> %.4f\n", train_mode_name(modes[i]), before,
               r.last.test_metric);
        CHECK(r.last.test_metric < 0.6 * before);
    }
    model_destroy(&m);
    data_bundle_free(&d);
}

int main(void) {
    logreg_learns();
    mf_learns();
    printf("learning tests passed\n");
    return 0;
}
