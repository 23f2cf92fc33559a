// The MLP learns Fashion-MNIST in every mode: a 12,000-example subset, 3 epochs,
// 2 threads; and its hidden layers buy something: softmax regression (the same
// network without them) trained the same way in the same mode ends with a test
// loss higher by a clear margin. Skips (exit 77) when dataset-fashion-mnist is
// not installed (a failure under ASGD_REQUIRE_ALL=1); any other load error fails.
#include "engine/data/data_source.h"
#include "learning_support.h"

// Measured over 6 runs (2,000 test examples): the MLP's test loss was lower
// than softmax's by 0.066-0.093 (hogwild), 0.053-0.121 (locked) and 0.088
// (sync); accuracies: MLP 0.8395-0.8545, softmax 0.8075-0.8335, so a linear
// model passes the accuracy bound alone, and accuracy alone tells them apart
// by as little as 0.01.
// Under TSan a Hogwild! step runs about 10x slower and its threads
// interleave far more coarsely: one CI run there ended with the MLP at test
// loss 0.4909 (accuracy 0.82) against softmax's 0.5162, a gap of 0.025. There
// the MLP must still beat the linear model, by less.
#if defined(__SANITIZE_THREAD__)
#define LOSS_MARGIN 0.01
#else
#define LOSS_MARGIN 0.03
#endif

// One run of the MLP and one of softmax regression, in the same mode with the
// same steps. Checks what must hold in every run; returns 1 when the MLP
// learned (accuracy >= 0.80; 10 classes: chance is 0.1) and beat the linear
// model's test loss by LOSS_MARGIN.
static int mlp_beats_softmax(const model_t *m, const model_t *linear, train_mode_t mode, double lr) {
    double before;
    // A mild inverse-time decay settles the final iterate, which at a constant step
    // swings by a few points between evaluations (0.7975 to 0.849 seen).
    // Even so a Hogwild! run's last iterate was once 0.8025 / loss 0.523
    // (under ASan), so each model is judged by the better of its last two
    // epochs' ends.
    late_points_t ml, sl;
    train_result_t r = train_late(m, mode, 2, 16, 3, lr, 2e-4, &before, &ml);
    // Softmax with the same steps (over lr 0.01-0.2 and the three modes its
    // lowest test loss was 0.497, still 0.046 above the MLP's worst, 0.451).
    train_result_t s = train_late(linear, mode, 2, 16, 3, lr, 2e-4, NULL, &sl);
    double m_loss = fmin(ml.loss[0], ml.loss[1]), s_loss = fmin(sl.loss[0], sl.loss[1]);
    double m_acc = fmax(ml.metric[0], ml.metric[1]);
    printf("mlp 784-256-128-10 %-8s 2 threads, 3 epochs of 12000: accuracy %.4f -> %.4f / %.4f, test loss %.4f / "
           "%.4f (ends of epochs 2 / 3; %.0f samples/s); softmax: test loss %.4f / %.4f\n",
           train_mode_name(mode), before, ml.metric[0], ml.metric[1], ml.loss[0], ml.loss[1], r.samples_per_s,
           sl.loss[0], sl.loss[1]);
    CHECK(r.samples == 36000 && s.samples == 36000);
    CHECK(ml.n == 4 && sl.n == 4);  // the start and three epochs' ends
    CHECK(r.last.test_loss == ml.loss[1]);
    CHECK(before < 0.3);
    int learned = m_acc >= 0.80 && m_loss < s_loss - LOSS_MARGIN;
    if (!learned)
        printf("  missed: accuracy %.4f (needs 0.80), test loss %.4f (needs below softmax's %.4f - %.2f)\n", m_acc,
               m_loss, s_loss, LOSS_MARGIN);
    return learned;
}

int main(void) {
    char err[512];
    if (!test_have_fashion_mnist("test_learning_mlp")) return TEST_SKIP;
    data_options_t o = {"fashion-mnist", NULL, 12000, 2000, 0.1, 1, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, DATA_KIND_DENSE, &d, err, sizeof err), err);
    size_t hidden[2] = {256, 128};
    model_t *m = model_new_mlp(&d.dense_train, &d.dense_test, hidden, 2, 0.0, err, sizeof err);
    CHECK_OK(m == NULL, err);
    model_t *linear = model_new_mlp(&d.dense_train, &d.dense_test, NULL, 0, 0.0, err, sizeof err);
    CHECK_OK(linear == NULL, err);
    for (size_t i = 0; i < 3; i++) {
        // sync averages 2 sub-batches of 16 into one step of 32: by the linear scaling
        // rule its step size doubles to keep the per-example step the same.
        double lr = modes[i] == TRAIN_MODE_SYNC ? 0.1 : 0.05;
        // Hogwild! and locked runs interleave their threads as the scheduler
        // pleases, so no two runs are alike, even from one seed. One CI run's
        // Hogwild! MLP ended both late epochs at test loss 0.50 (16 idle runs
        // here: 0.42-0.44 at the third epoch's end). With both threads on one
        // CPU, or beside two busy loops, single epoch ends of 0.496-0.505 came
        // in 4 of 12 runs (likely a thread preempted mid-step, whose gradient
        // is then many steps stale). Such a mode gets a second run when its
        // first misses; a model that cannot learn misses both. sync is
        // deterministic: one run.
        size_t tries = modes[i] == TRAIN_MODE_SYNC ? 1 : 2, passed = 0;
        for (size_t t = 0; t < tries && !passed; t++) passed = mlp_beats_softmax(m, linear, modes[i], lr);
        CHECK(passed);
    }
    model_destroy(&m);
    model_destroy(&linear);
    data_bundle_free(&d);
    printf("mlp learning tests passed\n");
    return 0;
}
