// The bulk operations on shared parameters (engine/core/params.h): the vector
// lanes give the bits of the per-float reference on every length and start
// (the lanes' loops and the reference's tail), touch nothing outside the
// range, and under two racing threads every float is read and written whole.
#include <pthread.h>

#include "engine/core/params.h"
#include "kernels/update.h"
#include "tests/support/test_support.h"

#define GUARD 8  // parameters on each side of a range that must stay untouched
#define MAX_N 1100

static float value_at(size_t i) { return (float)((i * 7919u) % 1009u) * 0.37f - 150.0f; }

static param_t *fresh(size_t n) {
    char err[128];
    param_t *p = params_new(n, err, sizeof err);
    CHECK(p);
    for (size_t i = 0; i < n; i++) param_set(&p[i], value_at(i));
    return p;
}

static void check_untouched(const param_t *p, size_t total, size_t begin, size_t end) {
    for (size_t i = 0; i < total; i++)
        if (i < begin || i >= end) CHECK(param_get(&p[i]) == value_at(i));
}

static void check_range(size_t start, size_t n) {
    size_t total = start + n + GUARD;
    float g[MAX_N], out[MAX_N], copy[MAX_N], expect[MAX_N];
    for (size_t i = 0; i < n; i++) g[i] = (float)((i * 31u) % 17u) * 0.125f - 1.0f;

    param_t *p = fresh(total);
    params_read(p + start, n, out);
    for (size_t i = 0; i < n; i++) CHECK(out[i] == value_at(start + i));

    const float lr = 0.0375f;
    for (size_t i = 0; i < n; i++) {
        float step = lr * g[i];
        expect[i] = value_at(start + i) - step;
    }
    params_sgd(p + start, n, g, lr, copy);
    CHECK(memcmp(copy, expect, n * sizeof *copy) == 0);
    params_read(p + start, n, out);
    CHECK(memcmp(out, expect, n * sizeof *out) == 0);
    check_untouched(p, total, start, start + n);

    params_sgd(p + start, n, g, lr, NULL);  // no copy: the same arithmetic again
    for (size_t i = 0; i < n; i++) {
        float step = lr * g[i];
        CHECK(param_get(&p[start + i]) == expect[i] - step);
    }
    check_untouched(p, total, start, start + n);

    // A sync round's share of one gradient, 0.0f + weight * g: a -0.0f in g
    // becomes +0.0f first, which a parameter at -0.0f shows.
    const float weight = 0.6875f;
    for (size_t i = 0; i < n; i++) {
        if (i % 5 == 2) {
            g[i] = -0.0f;
            param_set(&p[start + i], -0.0f);
        }
        float before = param_get(&p[start + i]), share = weight * g[i], sum = 0.0f + share, step = lr * sum;
        expect[i] = before - step;
    }
    params_sgd_weighted(p + start, n, g, weight, lr, copy);
    CHECK(memcmp(copy, expect, n * sizeof *copy) == 0);
    params_read(p + start, n, out);
    CHECK(memcmp(out, expect, n * sizeof *out) == 0);
    check_untouched(p, total, start, start + n);

    // A round's sum of gradients over the examples behind it, on plain floats
    // (sgd_divided_update_cpu): the average formed first, then the step (a
    // divisor that makes no quotient exact); written over the gradient, as the
    // allreduce's step writes it.
    const float divisor = 3.0f;
    params_read(p + start, n, out);
    for (size_t i = 0; i < n; i++) {
        float average = g[i] / divisor, step = lr * average;
        expect[i] = out[i] - step;
    }
    sgd_divided_update_cpu(n, lr, divisor, g, out, g);
    CHECK(memcmp(g, expect, n * sizeof *g) == 0);

    for (size_t i = 0; i < n; i++) out[i] = -expect[i];
    params_write(p + start, n, out);
    for (size_t i = 0; i < n; i++) CHECK(param_get(&p[start + i]) == -expect[i]);
    check_untouched(p, total, start, start + n);
    params_free(&p);
    CHECK(p == NULL);
}

// Two threads add 1 to every parameter of one array, `rounds` times each,
// through params_sgd's racy read-modify-write. A float read or written in
// pieces would leave a value that is not a whole count between 1 and
// 2 * rounds; lost updates leave less than 2 * rounds.
typedef struct adder {
    param_t *p;
    size_t n, rounds;
} adder_t;

static void *add_ones(void *arg) {
    adder_t *a = arg;
    float minus_one[256];
    for (size_t i = 0; i < 256; i++) minus_one[i] = -1.0f;
    for (size_t r = 0; r < a->rounds; r++)
        for (size_t at = 0; at < a->n; at += 256)
            params_sgd(a->p + at, a->n - at < 256 ? a->n - at : 256, minus_one, 1.0f, NULL);
    return NULL;
}

static void check_racing_adds(void) {
    const size_t n = 1000, rounds = 2000;
    char err[128];
    param_t *p = params_new(n, err, sizeof err);
    CHECK(p);
    adder_t a = {p, n, rounds};
    pthread_t t[2];
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&t[k], NULL, add_ones, &a) == 0);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    size_t lost = 0;
    for (size_t i = 0; i < n; i++) {
        float v = param_get(&p[i]);
        CHECK(v == floorf(v) && v >= 1.0f && v <= (float)(2 * rounds));
        lost += 2 * rounds - (size_t)v;
    }
    printf("two threads, %zu racing adds to each of %zu parameters: every value whole, %zu of %zu updates lost\n",
           rounds, n, lost, 2 * rounds * n);
    params_free(&p);
}

int main(void) {
    size_t lengths[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, MAX_N};
    for (size_t s = 0; s < 5; s++)
        for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) check_range(s, lengths[k]);
    printf(
        "params_read, params_write, params_sgd, params_sgd_weighted, sgd_divided_update_cpu: the reference's bits on "
        "%zu "
        "lengths x 5 starts\n",
        sizeof lengths / sizeof lengths[0]);
    check_racing_adds();
    params_free(NULL);
    printf("params tests passed\n");
    return 0;
}
