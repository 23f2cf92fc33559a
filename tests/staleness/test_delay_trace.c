// --delay trace:FILE: parsing (errors name the file and line), the sampler
// (lines in order, repeating), and through the simulator: a trace of zeros is
// fixed:0 and a constant trace K is fixed:K, bit for bit, for logistic
// regression and the MLP; a varying trace measures the staleness it asks for.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/model.h"
#include "engine/sim/simulate.h"
#include "staleness/delay_model.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_trace_XXXXXX";

// Writes `count` lines of `value` (with a comment and a blank line) to name.
static const char *constant_trace(const char *name, unsigned value, size_t count) {
    size_t cap = 64 + count * 12, len = 0;
    char *text = malloc(cap);
    CHECK(text);
    len += (size_t)snprintf(text + len, cap - len, "# constant %u\n\n", value);
    for (size_t i = 0; i < count; i++) len += (size_t)snprintf(text + len, cap - len, "%u\n", value);
    const char *path = test_write_file(dir, name, text, len);
    free(text);
    return path;
}

static const char *write_text(const char *name, const char *text) {
    return test_write_file(dir, name, text, strlen(text));
}

static void expect_error(const char *spec, const char *needle) {
    char err[512] = "";
    delay_model_t m;
    CHECK(delay_model_parse(spec, &m, err, sizeof err) != 0);
    if (!strstr(err, needle)) {
        fprintf(stderr, "--delay %s: error '%s' lacks '%s'\n", spec, err, needle);
        exit(1);
    }
    CHECK(m.trace == NULL);
}

static void test_parse_and_sample(void) {
    char spec[600], err[512];
    const char *path = write_text("mixed.txt", "# tau per update\n0\n3\n\n1\r\n");
    snprintf(spec, sizeof spec, "trace:%s", path);
    delay_model_t m;
    CHECK_OK(delay_model_parse(spec, &m, err, sizeof err), err);
    CHECK(m.kind == DELAY_KIND_TRACE && m.trace_len == 3 && m.lo == 0 && m.hi == 3);
    CHECK(delay_model_max_in_flight(&m) == 3);
    CHECK_OK(delay_model_check(&m, err, sizeof err), err);
    char desc[400];
    delay_model_describe(&m, desc, sizeof desc);
    CHECK(strstr(desc, "(3 delays in 0..3)") != NULL);
    delay_sampler_t s;
    delay_sampler_init(&s, &m, 1);
    const uint64_t want[] = {0, 3, 1, 0, 3, 1, 0};  // in order, then again from the top
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(delay_sampler_next(&s) == want[i]);
    delay_model_free(&m);
    CHECK(m.trace == NULL);
    delay_model_free(&m);  // twice is fine

    path = write_text("bad.txt", "1\n2\nx7\n");
    snprintf(spec, sizeof spec, "trace:%s", path);
    expect_error(spec, "bad.txt line 3: 'x7' is not an integer");
    path = write_text("big.txt", "1000001\n");
    snprintf(spec, sizeof spec, "trace:%s", path);
    expect_error(spec, "line 1: '1000001'");
    path = write_text("empty.txt", "# nothing\n\n");
    snprintf(spec, sizeof spec, "trace:%s", path);
    expect_error(spec, "empty.txt holds no delays");
    expect_error("trace:", "expected trace:FILE");
    expect_error("trace:/nonexistent/asgd-trace", "cannot open '/nonexistent/asgd-trace'");
}

static float *run(const model_t *m, const char *spec, size_t batch, double lr, simulate_result_t *r) {
    char err[512];
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    oc.lr = lr;
    simulate_config_t c;
    simulate_config_default(&c);
    c.train.batch = batch;
    c.train.epochs = 2;
    c.train.seed = 11;
    c.train.eval_every = model_num_train(m) / 3;
    CHECK_OK(delay_model_parse(spec, &c.delay, err, sizeof err), err);
    float *w = malloc(model_num_params(m) * sizeof *w);
    CHECK(w);
    CHECK_OK(simulate_fresh(m, &oc, &c, 11, NULL, r, w, err, sizeof err), err);
    delay_model_free(&c.delay);
    return w;
}

static void check_same(const model_t *m, const char *fixed, const char *trace_spec, size_t batch, double lr,
                       const char *what) {
    simulate_result_t ra, rb;
    float *a = run(m, fixed, batch, lr, &ra);
    float *b = run(m, trace_spec, batch, lr, &rb);
    if (memcmp(a, b, model_num_params(m) * sizeof *a) != 0) {
        fprintf(stderr, "%s: %s and %s differ\n", what, fixed, trace_spec);
        exit(1);
    }
    CHECK(ra.train.updates == rb.train.updates && ra.staleness.sum == rb.staleness.sum &&
          ra.staleness.max == rb.staleness.max && ra.max_in_flight == rb.max_in_flight);
    CHECK(ra.train.last.test_loss == rb.train.last.test_loss);
    free(a);
    free(b);
}

static void check_model(const model_t *m, size_t batch, double lr, const char *what) {
    char spec[600];
    // A trace shorter than the run repeats: 7 lines of zeros cover every step.
    snprintf(spec, sizeof spec, "trace:%s", constant_trace("zeros.txt", 0, 7));
    check_same(m, "fixed:0", spec, batch, lr, what);
    snprintf(spec, sizeof spec, "trace:%s", constant_trace("k5.txt", 5, 4000));
    check_same(m, "fixed:5", spec, batch, lr, what);

    // Alternating 0 and 4: every update is read at step t and applied at t or
    // t+4, so the measured staleness is between 0 and 4 + the ones due with it.
    const char *alt = write_text("alt.txt", "0\n4\n");
    snprintf(spec, sizeof spec, "trace:%s", alt);
    simulate_result_t r;
    free(run(m, spec, batch, lr, &r));
    CHECK(r.staleness.count == r.train.updates && r.staleness.max >= 4 && r.staleness.max <= 6);
    CHECK(r.max_in_flight >= 2 && r.max_in_flight <= 5);
}

int main(void) {
    CHECK(mkdtemp(dir));
    test_parse_and_sample();

    char err[256];
    sparse_dataset_t str, ste;
    make_sparse(&str, 900, 300, 10, 1);
    make_sparse(&ste, 200, 300, 10, 2);
    model_t *lin = model_new_linear(LINEAR_LOSS_LOGISTIC, &str, &ste, 0.001, err, sizeof err);
    CHECK(lin);
    check_model(lin, 1, 0.5, "logreg batch 1");
    check_model(lin, 7, 0.3, "logreg batch 7");

    dense_dataset_t dtr, dte;
    make_dense(&dtr, 300, 12, 3, 3);
    make_dense(&dte, 100, 12, 3, 4);
    size_t hidden[1] = {10};
    model_t *mlp = model_new_mlp(&dtr, &dte, hidden, 1, 0.001, err, sizeof err);
    CHECK(mlp);
    check_model(mlp, 8, 0.05, "mlp batch 8");

    model_destroy(&lin);
    model_destroy(&mlp);
    sparse_dataset_free(&str);
    sparse_dataset_free(&ste);
    dense_dataset_free(&dtr);
    dense_dataset_free(&dte);
    CHECK(test_remove_tree(dir) == 0);
    fprintf(stderr, "trace:FILE equals fixed:0 and fixed:5 bit for bit (logreg, mlp)\n");
    return 0;
}
