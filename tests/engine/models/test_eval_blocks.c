// A test row's outputs do not depend on how the test set is split: models that
// evaluate rows together take blocks at multiples of MODEL_EVAL_ROWS (model.h),
// so the trainer's evaluation threads (slices at model_eval_slice) and the
// global evaluator (one slice from 0) compute every row in the same block,
// bit for bit. A BLAS kernel may round a row differently with the number of
// rows in its call (OpenBLAS's Zen kernels did, and a distributed run's
// global loss then differed from one process's in the ninth digit).
//   - model_eval_slice: boundaries rounded down to multiples of the block;
//   - mlp and softmax (several widths), 1..6 slices: every row's outputs
//     identical to one slice's, and the loss and metric sums the same.
#include <math.h>
#include <string.h>

#include "engine/core/model.h"
#include "tests/support/test_support.h"

static void check_slices(void) {
    CHECK(model_eval_slice(1000, 0, 3) == 0 && model_eval_slice(1000, 1, 3) == 256);
    CHECK(model_eval_slice(1000, 2, 3) == 512 && model_eval_slice(1000, 3, 3) == 1000);
    CHECK(model_eval_slice(100, 1, 2) == 0 && model_eval_slice(100, 2, 2) == 100);
    CHECK(model_eval_block_end(0, 1000) == 256 && model_eval_block_end(300, 1000) == 512);
    CHECK(model_eval_block_end(900, 1000) == 1000 && model_eval_block_end(256, 260) == 260);
    printf("slices of 1000 in 3: 0 256 512 1000\n");
}

static void check_model(const char *label, const size_t *hidden, size_t n_hidden, size_t batch) {
    char err[256];
    dense_dataset_t train, test;
    make_dense(&train, 300, 37, 10, 3);
    make_dense(&test, 1531, 37, 10, 4);  // six blocks, the last one short
    model_t *m = model_new_mlp(&train, &test, hidden, n_hidden, 0.0, err, sizeof err);
    CHECK_OK(m == NULL, err);
    size_t n = model_num_params(m), outs = model_num_outputs(m), rows = model_num_test(m);
    param_t *w = params_new(n, err, sizeof err);
    CHECK_OK(w == NULL, err);
    model_init_params(m, w, 9);
    model_ws_t *ws = model_ws_new(m, batch, err, sizeof err);
    CHECK_OK(ws == NULL, err);
    double *whole = malloc(rows * outs * sizeof *whole), *parts = malloc(rows * outs * sizeof *parts);
    CHECK(whole && parts);
    model_predict(m, w, 0, rows, ws, whole);
    eval_sums_t one = {0.0, 0.0, 0};
    model_evaluate(m, w, 0, rows, ws, &one);
    for (size_t k = 1; k <= 6; k++) {
        eval_sums_t sum = {0.0, 0.0, 0};
        for (size_t i = 0; i < k; i++) {
            size_t b = model_eval_slice(rows, i, k), e = model_eval_slice(rows, i + 1, k);
            model_predict(m, w, b, e, ws, parts + b * outs);
            eval_sums_t s = {0.0, 0.0, 0};
            model_evaluate(m, w, b, e, ws, &s);
            sum.loss_sum += s.loss_sum;
            sum.metric_sum += s.metric_sum;
            sum.count += s.count;
        }
        int same = memcmp(whole, parts, rows * outs * sizeof *whole) == 0;
        printf("%-26s %zu slices: outputs %s, loss %.17g against %.17g\n", label, k, same ? "bit-identical" : "DIFFER",
               sum.loss_sum, one.loss_sum);
        CHECK(same);
        CHECK(sum.count == one.count && sum.metric_sum == one.metric_sum);
        CHECK(fabs(sum.loss_sum - one.loss_sum) <= 1e-12 * fabs(one.loss_sum));
    }
    free(whole);
    free(parts);
    model_ws_destroy(&ws);
    params_free(&w);
    model_destroy(&m);
    dense_dataset_free(&train);
    dense_dataset_free(&test);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_slices();
    const size_t h1[1] = {33}, h2[2] = {64, 19};
    check_model("mlp 37-33-10, batch 16", h1, 1, 16);
    check_model("mlp 37-64-19-10, batch 300", h2, 2, 300);
    check_model("softmax 37-10, batch 1", NULL, 0, 1);
    printf("evaluation block tests passed\n");
    return 0;
}
