#ifndef ASGD_TESTS_LEARNING_SUPPORT_H
#define ASGD_TESTS_LEARNING_SUPPORT_H
// A training run from fresh parameters for the learning tests.
#include "engine/core/trainer.h"
#include "tests/support/test_support.h"

static const train_mode_t modes[] = {TRAIN_MODE_HOGWILD, TRAIN_MODE_LOCKED, TRAIN_MODE_SYNC};

// The last two evaluations of a run (the ends of its last two epochs, with
// train_late): a Hogwild! run's final iterate swings from one evaluation to
// the next, so a test of what a model can learn looks at both.
typedef struct late_points {
    size_t n;
    double first_loss, first_metric;  // the run's first evaluation: the untrained model
    double loss[2], metric[2];  // [1]: the latest
} late_points_t;

static inline void note_late_point(const train_point_t *p, void *ctx) {
    late_points_t *l = ctx;
    if (l->n == 0) l->first_loss = p->test_loss, l->first_metric = p->test_metric;
    l->loss[0] = l->loss[1], l->metric[0] = l->metric[1];
    l->loss[1] = p->test_loss, l->metric[1] = p->test_metric;
    l->n++;
}

// lr_decay > 0 selects the inverse-time schedule lr / (1 + lr_decay * updates).
// late: NULL to evaluate at the start and the end only; else an evaluation at
// every epoch's end, the last two kept there.
static inline train_result_t train_late(const model_t *m, train_mode_t mode, size_t threads, size_t batch,
                                        size_t epochs, double lr, double lr_decay, double *initial_metric,
                                        late_points_t *late) {
    char err[256];
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = lr;
    if (lr_decay > 0) {
        oc.schedule = LR_SCHEDULE_INVERSE_TIME;
        oc.decay = lr_decay;
    }
    train_config_t c;
    train_config_default(&c);
    c.mode = mode;
    c.threads = threads;
    c.batch = batch;
    c.epochs = epochs;
    c.eval_every = late ? model_num_train(m) : model_num_train(m) * epochs;
    if (late) memset(late, 0, sizeof *late);
    train_callbacks_t cb = {note_late_point, NULL, late};
    train_result_t r;
    CHECK_OK(train_fresh(m, &oc, &c, 1, late ? &cb : NULL, &r, NULL, err, sizeof err), err);
    if (initial_metric) {
        // The "before" number: the same initial parameters, evaluated.
        param_t *w = params_new(model_num_params(m), err, sizeof err);
        CHECK(w);
        model_init_params(m, w, 1);
        eval_sums_t s = {0, 0, 0};
        model_ws_t *ws = model_ws_new(m, batch, err, sizeof err);
        model_evaluate(m, w, 0, model_num_test(m), ws, &s);
        *initial_metric = eval_metric_value(model_metric(m), &s);
        model_ws_destroy(&ws);
        params_free(&w);
    }
    return r;
}

// A run evaluated at its start and its end only.
static inline train_result_t train(const model_t *m, train_mode_t mode, size_t threads, size_t batch, size_t epochs,
                                   double lr, double lr_decay, double *initial_metric) {
    return train_late(m, mode, threads, batch, epochs, lr, lr_decay, initial_metric, NULL);
}

#endif
