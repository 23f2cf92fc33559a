// Every thread's updates reach the shared model, counted
// (engine/models/update_counter.h): a counter over the real model takes the
// real model's steps, reads and writes, with every gradient value replaced by
// one unit, so the parameters' sum is the number of updates that arrived.
//   - one thread and the locked mode lose none: the sum equals, exactly, what
//     the steps handed over;
//   - what the steps handed over is exactly what the data says they touch
//     (every parameter per dense step; an example's features and the bias
//     per sparse step);
//   - two Hogwild! threads lose at most LOST_BOUND of their updates: a thread
//     whose updates never arrived would lose half.
// On the MLP 784-256-128-10 (batch 16, dense blocks applied straight into the
// shared model) and on sparse logistic regression over Zipf-popular features
// (batch 1, the hot bias and head features written by both threads).
#include "engine/core/trainer.h"
#include "engine/data/data_source.h"
#include "engine/models/update_counter.h"
#include "tests/support/test_support.h"

// Lost fractions measured with two Hogwild! threads (docs/benchmarks.md, "Lost
// updates"): see LOST_BOUND's derivation there.
#define LOST_BOUND 0.05

typedef struct counted {
    update_count_t count;
    uint64_t updates, samples;
} counted_t;

static counted_t run_counted(const model_t *counter, train_mode_t mode, size_t threads, size_t batch, size_t epochs) {
    char err[256];
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = 1.0;  // plain SGD, constant step 1: a parameter gains one unit per update that reaches it
    train_config_t c;
    train_config_default(&c);
    c.mode = mode;
    c.threads = threads;
    c.batch = batch;
    c.epochs = epochs;
    c.eval_every = model_num_train(counter) * epochs;  // the start and the end only
    size_t n = model_num_params(counter);
    float *w = malloc(n * sizeof *w);
    CHECK(w);
    train_result_t r;
    CHECK_OK(train_fresh(counter, &oc, &c, 1, NULL, &r, w, err, sizeof err), err);
    counted_t out = {update_counter_result(counter, w), r.updates, r.samples};
    free(w);
    return out;
}

static void report(const char *label, train_mode_t mode, size_t threads, counted_t c) {
    printf("%-22s %-8s %zu thread(s): %llu updates handed over, %.0f arrived, lost fraction %.3g\n", label,
           train_mode_name(mode), threads, (unsigned long long)c.count.handed, c.count.applied,
           update_count_lost_fraction(c.count));
}

// handed_per_epoch: the updates one epoch hands over in every mode; the run's
// samples and its handed-over count follow from it exactly.
static void check_counter(const char *label, const model_t *inner, size_t batch, size_t epochs,
                          uint64_t handed_per_epoch) {
    char err[256];
    model_t *counter = update_counter_new(inner, err, sizeof err);
    CHECK_OK(counter == NULL, err);
    uint64_t handed = handed_per_epoch * epochs, samples = (uint64_t)model_num_train(inner) * epochs;
    counted_t one = run_counted(counter, TRAIN_MODE_HOGWILD, 1, batch, epochs);
    report(label, TRAIN_MODE_HOGWILD, 1, one);
    CHECK(one.samples == samples && one.count.handed == handed);
    CHECK(one.count.applied == (double)one.count.handed);  // one thread: every update arrives
    model_destroy(&counter);

    counter = update_counter_new(inner, err, sizeof err);
    CHECK_OK(counter == NULL, err);
    counted_t locked = run_counted(counter, TRAIN_MODE_LOCKED, 2, batch, epochs);
    report(label, TRAIN_MODE_LOCKED, 2, locked);
    CHECK(locked.samples == samples && locked.count.handed == handed);
    CHECK(locked.count.applied == (double)locked.count.handed);  // a lock per step: none lost
    model_destroy(&counter);

    counter = update_counter_new(inner, err, sizeof err);
    CHECK_OK(counter == NULL, err);
    counted_t racing = run_counted(counter, TRAIN_MODE_HOGWILD, 2, batch, epochs);
    report(label, TRAIN_MODE_HOGWILD, 2, racing);
    CHECK(racing.samples == samples && racing.count.handed == handed);
    CHECK(racing.count.applied <= (double)racing.count.handed);  // a race can lose an update, never make one
    CHECK(update_count_lost_fraction(racing.count) <= LOST_BOUND);
    model_destroy(&counter);
}

static void mlp_counts(void) {
    char err[256];
    dense_dataset_t train, test;
    make_dense(&train, 3000, 784, 10, 7);
    make_dense(&test, 100, 784, 10, 8);
    size_t hidden[2] = {256, 128};
    model_t *mlp = model_new_mlp(&train, &test, hidden, 2, 0.0, err, sizeof err);
    CHECK_OK(mlp == NULL, err);
    size_t batch = 16, epochs = 1;
    // A dense step hands over every parameter once; each thread's range ends
    // in a partial batch of its own (2 threads: ranges of 1500, 94 steps each).
    uint64_t steps_two = 2 * ((1500 + batch - 1) / batch), steps_one = (3000 + batch - 1) / batch;
    CHECK(steps_two == 188 && steps_one == 188);  // the same number of steps either way here
    check_counter("mlp 784-256-128-10", mlp, batch, epochs, steps_one * model_num_params(mlp));
    model_destroy(&mlp);
    dense_dataset_free(&train);
    dense_dataset_free(&test);
}

static void logreg_counts(void) {
    char err[256];
    data_options_t o = {"gen:sparse:n=40000,dim=20000", NULL, 0, 0, 0.1, 3, NULL, NULL, 0};
    data_bundle_t d;
    CHECK_OK(data_bundle_load(&o, DATA_KIND_SPARSE, &d, err, sizeof err), err);
    model_t *lr = model_new_linear(LINEAR_LOSS_LOGISTIC, &d.sparse_train, &d.sparse_test, 0.0, err, sizeof err);
    CHECK_OK(lr == NULL, err);
    // A one-example step touches the example's features (each once) and the bias.
    const sparse_dataset_t *s = &d.sparse_train;
    uint64_t per_epoch = s->nnz + s->n;
    check_counter("logreg (Zipf features)", lr, 1, 1, per_epoch);
    model_destroy(&lr);
    data_bundle_free(&d);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    mlp_counts();
    logreg_counts();
    printf("lost-update tests passed\n");
    return 0;
}
