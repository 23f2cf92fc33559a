// Every model's analytic gradient against central finite differences; and,
// where a model makes a range of its initialisation alone (a server's shard),
// that the range has the bits of the whole's.
#include "engine/core/model.h"
#include "tests/support/test_support.h"

#define N_EXAMPLES 12

// Perturbs each of up to max_coords coordinates by +-eps and compares
// (f(w+e) - f(w-e)) / 2e with the analytic gradient. Reports the relative error
// of the whole vector, ||fd - g|| / (||fd|| + ||g||). `scale` multiplies the
// analytic gradient: 1 for the real check, otherwise to prove the check notices.
static double gradient_error(const char *label, const model_t *m, uint64_t seed, double eps, float scale) {
    char err[256];
    size_t p = model_num_params(m);
    param_t *w = params_new(p, err, sizeof err);
    CHECK(w);
    model_init_params(m, w, seed);
    // Linear models start at zero; move them somewhere generic.
    rng_t r;
    rng_seed(&r, seed, 99);
    for (size_t i = 0; i < p; i++) param_set(&w[i], param_get(&w[i]) + (float)(0.3 * rng_normal(&r)));
    model_ws_t *ws = model_ws_new(m, N_EXAMPLES, err, sizeof err);
    CHECK(ws);
    uint32_t idx[N_EXAMPLES];
    for (size_t i = 0; i < N_EXAMPLES; i++) idx[i] = (uint32_t)(i * 3 % model_num_train(m));
    grad_t g, scratch;
    CHECK_OK(grad_init(&g, p, model_grad_is_dense(m), err, sizeof err), err);
    CHECK_OK(grad_init(&scratch, p, model_grad_is_dense(m), err, sizeof err), err);
    model_loss_grad(m, w, idx, N_EXAMPLES, &g, ws);
    double diff2 = 0.0, fd2 = 0.0, an2 = 0.0, worst = 0.0;
    size_t checked = 0, stride = p > 400 ? p / 400 : 1;
    for (size_t i = 0; i < p; i += stride) {
        float saved = param_get(&w[i]);
        param_set(&w[i], saved + (float)eps);
        double up = model_loss_grad(m, w, idx, N_EXAMPLES, &scratch, ws);
        grad_clear(&scratch);
        param_set(&w[i], saved - (float)eps);
        double down = model_loss_grad(m, w, idx, N_EXAMPLES, &scratch, ws);
        grad_clear(&scratch);
        param_set(&w[i], saved);
        // The step actually taken in float, not the nominal eps.
        double h = ((double)(saved + (float)eps) - (double)(saved - (float)eps));
        double fd = (up - down) / h, an = scale * g.value[i];
        diff2 += (fd - an) * (fd - an);
        fd2 += fd * fd;
        an2 += an * an;
        double rel = fabs(fd - an) / fmax(fabs(fd) + fabs(an), 1e-3);
        if (rel > worst) worst = rel;
        checked++;
    }
    double rel_vec = sqrt(diff2) / (sqrt(fd2) + sqrt(an2));
    printf("%-28s %6zu coords  |g| %.4g  vector rel err %.3g  worst coord %.3g\n", label, checked, sqrt(an2), rel_vec,
           worst);
    CHECK(an2 > 0.0);  // a zero gradient would pass trivially
    grad_free(&g);
    grad_free(&scratch);
    model_ws_destroy(&ws);
    params_free(&w);
    return rel_vec;
}

// model_init_range against the same range of model_init_params, bit for bit,
// at a few ranges (the empty one, single values, the ends, the whole).
static void check_init_range(const char *label, const model_t *m, uint64_t seed) {
    if (!model_has_init_range(m)) return;
    char err[256];
    size_t p = model_num_params(m);
    param_t *w = params_new(p, err, sizeof err);
    float *whole = malloc(p * sizeof *whole), *part = malloc(p * sizeof *part);
    CHECK(w && whole && part);
    model_init_params(m, w, seed);
    params_read(w, p, whole);
    size_t ranges[][2] = {{0, 0}, {0, 1}, {p / 3, p / 3 + 1}, {p / 3, 2 * p / 3}, {p - 1, p}, {0, p}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        size_t b = ranges[r][0], e = ranges[r][1];
        for (size_t i = 0; i < p; i++) part[i] = 12345.0f;  // what the call does not write stays
        model_init_range(m, seed, b, e, part + b);
        CHECK(memcmp(part + b, whole + b, (e - b) * sizeof *part) == 0);
        for (size_t i = 0; i < p; i++) CHECK(i >= b && i < e ? 1 : part[i] == 12345.0f);
    }
    printf("%s: a range of its initialisation made alone has the whole's bits\n", label);
    free(whole);
    free(part);
    params_free(&w);
}

static void gradcheck(const char *label, const model_t *m, uint64_t seed, double eps, double tol) {
    check_init_range(label, m, seed);
    CHECK(gradient_error(label, m, seed, eps, 1.0f) < tol);
}

// model_grad_one_pairs is model_loss_grad on one example, written as pairs:
// the same coordinates in the same order, the same value and loss bits, on
// every example (the hinge loss's zero-coefficient examples included); a
// cap one short writes nothing and says how many are needed.
static void check_pairs(const char *label, const model_t *m, size_t n_examples) {
    char err[256];
    size_t p = model_num_params(m);
    grad_t g;
    CHECK_OK(grad_init(&g, p, 0, err, sizeof err), err);
    param_t *w = params_new(p, err, sizeof err);
    model_ws_t *ws = model_ws_new(m, 1, err, sizeof err);
    uint32_t *idx = malloc(p * sizeof *idx);
    float *val = malloc(p * sizeof *val);
    CHECK(w && ws && idx && val && model_has_grad_one_pairs(m));
    model_init_params(m, w, 9);
    for (size_t j = 0; j < p; j++) param_set(&w[j], 0.3f * (float)((j * 7) % 11) - 1.5f);  // margins on both sides
    size_t empty = 0;
    for (uint32_t e = 0; e < n_examples; e++) {
        double want_loss = model_loss_grad(m, w, &e, 1, &g, ws), loss = 0.0;
        size_t n = model_grad_one_pairs(m, w, e, idx, val, p, &loss);
        CHECK(n == g.n_touched && memcmp(&loss, &want_loss, sizeof loss) == 0);
        for (size_t k = 0; k < n; k++)
            CHECK(idx[k] == g.touched[k] && memcmp(&val[k], &g.value[idx[k]], sizeof(float)) == 0);
        if (n > 0) {
            idx[0] = UINT32_MAX;
            CHECK(model_grad_one_pairs(m, w, e, idx, val, n - 1, &loss) == n && idx[0] == UINT32_MAX);
        }
        empty += n == 0;
        grad_clear(&g);
    }
    printf("%s: pairs equal model_loss_grad on %zu examples (%zu with no gradient)\n", label, n_examples, empty);
    free(idx);
    free(val);
    grad_free(&g);
    params_free(&w);
    model_ws_destroy(&ws);
}

// Without L2, model_grad_one_scale and model_sgd_apply_one_scale are the
// pairs applied by a plain-SGD step: the same loss bits, and the same
// parameters bit for bit after the update, on every example (zero-coefficient
// hinge examples included); with L2 the model has no such form.
static void check_scale(const char *label, const model_t *m, size_t n_examples, int l2) {
    char err[256];
    size_t p = model_num_params(m);
    CHECK(model_has_grad_one_scale(m) == !l2);
    if (l2) return;
    param_t *by_pairs = params_new(p, err, sizeof err), *by_scale = params_new(p, err, sizeof err);
    uint32_t *idx = malloc(p * sizeof *idx);
    float *val = malloc(p * sizeof *val);
    CHECK(by_pairs && by_scale && idx && val);
    for (size_t j = 0; j < p; j++) {
        float v = 0.3f * (float)((j * 7) % 11) - 1.5f;  // margins on both sides
        param_set(&by_pairs[j], v);
        param_set(&by_scale[j], v);
    }
    const float lr = 0.37f;
    size_t changed = 0;
    for (uint32_t e = 0; e < n_examples; e++) {
        double pairs_loss, scale_loss;
        float scale;
        size_t n = model_grad_one_pairs(m, by_pairs, e, idx, val, p, &pairs_loss);
        scale_loss = model_grad_one_scale(m, by_scale, e, &scale);
        CHECK(memcmp(&pairs_loss, &scale_loss, sizeof pairs_loss) == 0 && (n == 0) == (scale == 0.0f));
        for (size_t k = 0; k < n; k++) param_set(&by_pairs[idx[k]], param_get(&by_pairs[idx[k]]) - lr * val[k]);
        model_sgd_apply_one_scale(m, by_scale, e, scale, lr);
        CHECK(memcmp(by_pairs, by_scale, p * sizeof *by_pairs) == 0);
        changed += n > 0;
    }
    CHECK(changed > 0);
    printf("%s: a scale applied equals the pairs applied on %zu examples (%zu updates)\n", label, n_examples, changed);
    free(idx);
    free(val);
    params_free(&by_pairs);
    params_free(&by_scale);
}

int main(void) {
    char err[256];
    sparse_dataset_t sp;
    make_sparse(&sp, 40, 60, 6, 7);
    for (int l2 = 0; l2 <= 1; l2++) {
        model_t *lr = model_new_linear(LINEAR_LOSS_LOGISTIC, &sp, &sp, l2 ? 0.1 : 0.0, err, sizeof err);
        model_t *svm = model_new_linear(LINEAR_LOSS_HINGE, &sp, &sp, l2 ? 0.1 : 0.0, err, sizeof err);
        CHECK(lr && svm);
        gradcheck(l2 ? "logreg (l2 0.1)" : "logreg", lr, 1, 1e-3, 1e-3);
        gradcheck(l2 ? "svm (l2 0.1)" : "svm", svm, 2, 1e-3, 1e-3);
        check_pairs(l2 ? "logreg pairs (l2 0.1)" : "logreg pairs", lr, 40);
        check_pairs(l2 ? "svm pairs (l2 0.1)" : "svm pairs", svm, 40);
        check_scale("logreg scale", lr, 40, l2);
        check_scale("svm scale", svm, 40, l2);
        model_destroy(&lr);
        model_destroy(&svm);
    }

    // A sparse embedding feeding a dense layer: both parts checked (the
    // embedding rows of the examples' features and every dense weight).
    for (int l2 = 0; l2 <= 1; l2++) {
        model_t *emb = model_new_embmlp(&sp, &sp, 3, 5, l2 ? 0.1 : 0.0, err, sizeof err);
        CHECK(emb);
        CHECK(model_num_sparse_params(emb) == 60 * 3 && model_num_params(emb) == 60 * 3 + 5 * 3 + 2 * 5 + 1);
        gradcheck(l2 ? "embmlp 60x3-5-1 (l2 0.1)" : "embmlp 60x3-5-1", emb, 6, 1e-3, 1e-3);
        // The sparse keys of a minibatch are exactly the sparse coordinates its gradient touches.
        size_t S = model_num_sparse_params(emb), p = model_num_params(emb);
        uint32_t idx[4] = {0, 5, 9, 5}, keys[60 * 3];
        uint8_t mark[60 * 3] = {0};
        size_t nk = model_sparse_keys(emb, idx, 4, mark, keys);
        grad_t g;
        CHECK_OK(grad_init(&g, p, 0, err, sizeof err), err);
        param_t *w = params_new(p, err, sizeof err);
        model_ws_t *ws = model_ws_new(emb, 4, err, sizeof err);
        CHECK(w && ws);
        model_init_params(emb, w, 1);
        model_loss_grad(emb, w, idx, 4, &g, ws);
        size_t touched_sparse = 0;
        for (size_t k = 0; k < g.n_touched; k++) touched_sparse += g.touched[k] < S;
        CHECK(nk == touched_sparse && nk > 0);
        for (size_t k = 0; k < nk; k++) CHECK(keys[k] < S && g.is_touched[keys[k]]);
        for (size_t k = 0; k < S; k++) CHECK(mark[k] == 0);
        grad_free(&g);
        params_free(&w);
        model_ws_destroy(&ws);
        model_destroy(&emb);
    }

    dense_dataset_t dn;
    make_dense(&dn, 40, 9, 4, 3);
    size_t hidden[2] = {7, 5};
    for (int l2 = 0; l2 <= 1; l2++) {
        model_t *soft = model_new_mlp(&dn, &dn, NULL, 0, l2 ? 0.05 : 0.0, err, sizeof err);
        model_t *mlp = model_new_mlp(&dn, &dn, hidden, 2, l2 ? 0.05 : 0.0, err, sizeof err);
        CHECK(soft && mlp);
        gradcheck(l2 ? "softmax (l2 0.05)" : "softmax", soft, 3, 1e-2, 1e-3);
        gradcheck(l2 ? "mlp 9-7-5-4 (l2 0.05)" : "mlp 9-7-5-4", mlp, 4, 1e-2, 1e-3);
        model_destroy(&soft);
        model_destroy(&mlp);
    }

    // softmax and mlp over sparse input: the first layer a sparse-dense product
    // (W0 one row per feature), three classes of arbitrary labels. The mlp's
    // eps is 1e-3: its inputs are larger than the dense set's, and 1e-2 moves
    // some ReLU units across their kink.
    sparse_dataset_t sp3;
    make_sparse(&sp3, 40, 60, 6, 11);
    CHECK_OK(sparse_dataset_set_classes(&sp3, (const int32_t[]){-4, 2, 9}, 3, err, sizeof err), err);
    for (size_t i = 0; i < sp3.n; i++) sp3.cls[i] = (int32_t)(i * 7 % 3);
    for (int l2 = 0; l2 <= 1; l2++) {
        model_t *soft = model_new_mlp_sparse(&sp3, &sp3, NULL, 0, l2 ? 0.05 : 0.0, err, sizeof err);
        model_t *mlp = model_new_mlp_sparse(&sp3, &sp3, hidden, 2, l2 ? 0.05 : 0.0, err, sizeof err);
        CHECK(soft && mlp);
        CHECK(model_num_params(soft) == 60 * 3 + 3 && model_num_params(mlp) == 60 * 7 + 7 + 7 * 5 + 5 + 5 * 3 + 3);
        CHECK(model_num_outputs(mlp) == 3);
        gradcheck(l2 ? "softmax sparse (l2 0.05)" : "softmax sparse", soft, 7, 1e-2, 1e-3);
        gradcheck(l2 ? "mlp sparse 60-7-5-3 (l2 0.05)" : "mlp sparse 60-7-5-3", mlp, 8, 1e-3, 1e-3);
        // A step touches W0 only in the rows of its examples' features.
        size_t p = model_num_params(mlp);
        uint32_t idx[3] = {1, 4, 4};
        grad_t g;
        CHECK_OK(grad_init(&g, p, model_grad_is_dense(mlp), err, sizeof err), err);
        param_t *w = params_new(p, err, sizeof err);
        model_ws_t *ws = model_ws_new(mlp, 3, err, sizeof err);
        CHECK(w && ws && !model_grad_is_dense(mlp));
        model_init_params(mlp, w, 1);
        model_loss_grad(mlp, w, idx, 3, &g, ws);
        uint8_t present[60] = {0};
        for (size_t r = 0; r < 3; r++)
            for (size_t k = sp3.row_ptr[idx[r]]; k < sp3.row_ptr[idx[r] + 1]; k++) present[sp3.col[k]] = 1;
        size_t rows_touched = 0, n_present = 0;
        for (size_t j = 0; j < 60; j++) n_present += present[j];
        for (size_t k = 0; k < g.n_touched; k++) {
            if (g.touched[k] >= 60 * 7) continue;  // b0 and the dense layers: every step
            CHECK(present[g.touched[k] / 7]);
            rows_touched++;
        }
        CHECK(rows_touched == n_present * 7 && n_present > 0);
        CHECK(g.n_touched == rows_touched + (p - 60 * 7));
        grad_free(&g);
        params_free(&w);
        model_ws_destroy(&ws);
        model_destroy(&soft);
        model_destroy(&mlp);
    }
    // The check notices a sparse gradient 2% off.
    model_t *soft = model_new_mlp_sparse(&sp3, &sp3, NULL, 0, 0.0, err, sizeof err);
    CHECK(soft && gradient_error("softmax sparse, gradient x 1.02", soft, 7, 1e-2, 1.02f) > 1e-3);
    model_destroy(&soft);
    sparse_dataset_free(&sp3);

    ratings_t rt;
    make_ratings(&rt, 60, 8, 6, 3, 5);
    model_t *mf = model_new_mf(&rt, &rt, 3, 0.05, err, sizeof err);
    CHECK(mf);
    gradcheck("mf rank 3 (l2 0.05)", mf, 5, 1e-3, 1e-3);
    // The check itself must notice a gradient that is 2% off.
    CHECK(gradient_error("mf, gradient x 1.02", mf, 5, 1e-3, 1.02f) > 1e-3);
    model_destroy(&mf);

    sparse_dataset_free(&sp);
    dense_dataset_free(&dn);
    ratings_free(&rt);
    printf("gradient checks passed\n");
    return 0;
}
