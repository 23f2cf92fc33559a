// --pin's choice of CPUs (engine/core/cpu_pin.h):
//   - slot s is the s-th CPU, in turn, of those the process may run on;
//   - restricted to one CPU that is not CPU 0 (as taskset or a cgroup would
//     leave it), every slot is that CPU, and a pinned two-thread run trains
//     there (pinning thread t to CPU t would ask for a CPU it may not use);
//   - pinning changes no number: a pinned one-thread run gives the same bits.
#include <string.h>

#include "engine/core/cpu_pin.h"
#include "engine/core/trainer.h"
#include "tests/support/test_support.h"

static void check_slots(const cpu_set_t *set) {
    char err[256];
    size_t n = (size_t)CPU_COUNT(set);
    for (size_t s = 0; s < 2 * n + 1; s++) {
        int cpu = -1;
        CHECK_OK(cpu_pin_choose(s, &cpu, err, sizeof err), err);
        CHECK(cpu == test_nth_cpu(set, s));
    }
}

// One run of logreg from the same start; returns its final parameters.
static float *train(const model_t *m, size_t threads, int pin, size_t pin_first) {
    char err[256];
    train_config_t c;
    train_config_default(&c);
    c.threads = threads;
    c.epochs = 2;
    c.pin = pin;
    c.pin_first = pin_first;
    optimizer_config_t sgd;
    optimizer_config_default(&sgd);
    sgd.lr = 0.1;
    size_t n = model_num_params(m);
    param_t *w = params_new(n, err, sizeof err);
    optimizer_t *opt = optimizer_new(&sgd, n, err, sizeof err);
    CHECK(w && opt);
    model_init_params(m, w, 1);
    train_result_t res;
    CHECK_OK(train_run(m, opt, w, &c, NULL, &res, err, sizeof err), err);
    CHECK(res.samples == 2 * model_num_train(m));
    float *out = malloc(n * sizeof *out);
    CHECK(out);
    for (size_t j = 0; j < n; j++) out[j] = param_get(&w[j]);
    optimizer_destroy(&opt);
    params_free(&w);
    return out;
}

int main(void) {
    cpu_set_t all;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    check_slots(&all);
    printf("%d CPUs allowed: slots follow them in turn\n", CPU_COUNT(&all));

    char err[256];
    sparse_dataset_t sp;
    make_sparse(&sp, 301, 200, 10, 2);
    model_t *lr = model_new_linear(LINEAR_LOSS_LOGISTIC, &sp, &sp, 0.0, err, sizeof err);
    CHECK(lr);
    size_t n = model_num_params(lr);
    float *free_run = train(lr, 1, 0, 0), *pinned_run = train(lr, 1, 1, 3);
    CHECK(memcmp(free_run, pinned_run, n * sizeof *free_run) == 0);
    free(pinned_run);

    // The last allowed CPU alone (CPU 0 only on a one-CPU machine).
    cpu_set_t last;
    CPU_ZERO(&last);
    CPU_SET(test_nth_cpu(&all, (size_t)CPU_COUNT(&all) - 1), &last);
    CHECK(sched_setaffinity(0, sizeof last, &last) == 0);
    check_slots(&last);
    float *restricted = train(lr, 2, 1, 0);
    printf("restricted to CPU %d: every slot is it, and a pinned 2-thread run trains\n", test_nth_cpu(&last, 0));
    free(restricted);
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);

    free(free_run);
    model_destroy(&lr);
    sparse_dataset_free(&sp);
    printf("cpu pin tests passed\n");
    return 0;
}
