// Every CUDA kernel against its CPU twin on the same fresh random inputs
// (never zeros): relative error below 1e-4 in float32, measured element-wise
// against max(|cpu|, 1% of the largest |cpu|) so that values near zero after
// cancellation do not dominate. The Hogwild! kernels are checked where the
// answer does not depend on the order of concurrent updates: one example
// alone, examples with disjoint coordinates, and a hinge loss held inside its
// margin (every update a constant, so atomic scatters must lose none).
// Skips (77) without a CUDA build or device.
#include <stdint.h>

#include "kernels/dense.h"
#include "kernels/gpu.h"
#include "kernels/sparse_sgd.h"
#include "kernels/update.h"
#include "tests/support/test_support.h"
#include "tests/support/twin_check.h"

#ifndef ASGD_HAVE_CUDA
int main(void) { return test_skip_no_gpu("built without CUDA"); }
#else

static char err[512];
static rng_t rng;

static float *random_floats(size_t n, float lo, float hi) {
    float *p = twin_random_floats(&rng, n, lo, hi);
    CHECK(p);
    return p;
}

static void *to_device(const void *host, size_t bytes) {
    void *d = gpu_alloc(bytes, err, sizeof err);
    CHECK_OK(d ? 0 : -1, err);
    CHECK_OK(gpu_upload(d, host, bytes, err, sizeof err), err);
    return d;
}

static void from_device(void *host, const void *dev, size_t bytes) {
    CHECK_OK(gpu_check(err, sizeof err), err);
    CHECK_OK(gpu_download(host, dev, bytes, err, sizeof err), err);
}

#define TOL 1e-4
#define EXPECT_CLOSE(name, got, want, n)                                                                  \
    do {                                                                                                  \
        double e_ = twin_rel_err(got, want, n);                                                           \
        printf("  %-40s rel err %.2e\n", name, e_);                                                       \
        if (!(e_ < TOL)) {                                                                                \
            fprintf(stderr, "%s:%d: %s: relative error %.3g >= %g\n", __FILE__, __LINE__, name, e_, TOL); \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

static void test_dense(int batch, int in, int out) {
    printf("dense %d x %d -> %d\n", batch, in, out);
    float *x = random_floats((size_t)batch * in, -1, 1), *w = random_floats((size_t)out * in, -0.1f, 0.1f);
    float *bias = random_floats(out, -0.5f, 0.5f);
    float *dx = to_device(x, (size_t)batch * in * 4), *dw = to_device(w, (size_t)out * in * 4);
    float *dbias = to_device(bias, (size_t)out * 4);
    size_t nz = (size_t)batch * out;
    float *z = malloc(nz * 4),
          *got = malloc((nz > (size_t)out * in ? nz : (size_t)out * in) * 4 + (size_t)batch * in * 4);
    float *dz = gpu_alloc(nz * 4, err, sizeof err);
    CHECK(z && got && dz);
    for (int relu = 0; relu <= 1; relu++) {
        dense_forward_act_cpu(batch, in, out, x, w, bias, z, relu);
        dense_forward_act_cuda(batch, in, out, dx, dw, dbias, dz, relu);
        from_device(got, dz, nz * 4);
        EXPECT_CLOSE(relu ? "dense_forward_act (relu)" : "dense_forward_act", got, z, nz);
    }
    dense_forward_cpu(batch, in, out, x, w, bias, z);
    dense_forward_cuda(batch, in, out, dx, dw, dbias, dz);
    from_device(got, dz, nz * 4);
    EXPECT_CLOSE("dense_forward", got, z, nz);

    // Backward: delta (batch, out), accumulating weight and bias gradients
    // (start from non-zero values: the kernels add), one block of rows through ldz.
    float *delta = random_floats(nz, -1, 1), *ddelta = to_device(delta, nz * 4);
    float *gw = random_floats((size_t)out * in, -1, 1), *dgw = to_device(gw, (size_t)out * in * 4);
    dense_weight_grad_cpu(batch, in, out, delta, out, x, gw);
    dense_weight_grad_cuda(batch, in, out, ddelta, out, dx, dgw);
    from_device(got, dgw, (size_t)out * in * 4);
    EXPECT_CLOSE("dense_weight_grad", got, gw, (size_t)out * in);
    int first = out / 3, rows = out - first;
    dense_weight_grad_cpu(batch, in, rows, delta + first, out, x, gw + (size_t)first * in);
    dense_weight_grad_cuda(batch, in, rows, ddelta + first, out, dx, dgw + (size_t)first * in);
    from_device(got, dgw, (size_t)out * in * 4);
    EXPECT_CLOSE("dense_weight_grad (row block, ldz)", got, gw, (size_t)out * in);

    float *gb = random_floats(out, -1, 1), *dgb = to_device(gb, (size_t)out * 4);
    dense_bias_grad_cpu(batch, out, delta, gb);
    dense_bias_grad_cuda(batch, out, ddelta, dgb);
    from_device(got, dgb, (size_t)out * 4);
    EXPECT_CLOSE("dense_bias_grad", got, gb, out);

    float *back = malloc((size_t)batch * in * 4), *dback = gpu_alloc((size_t)batch * in * 4, err, sizeof err);
    CHECK(back && dback);
    dense_backward_input_cpu(batch, in, out, delta, w, back);
    dense_backward_input_cuda(batch, in, out, ddelta, dw, dback);
    from_device(got, dback, (size_t)batch * in * 4);
    EXPECT_CLOSE("dense_backward_input", got, back, (size_t)batch * in);

    // ReLU forward in place and backward (mask by an activation with both signs).
    float *act = random_floats(nz, -1, 1), *dact = to_device(act, nz * 4);
    relu_forward_cpu((int)nz, act);
    relu_forward_cuda((int)nz, dact);
    from_device(got, dact, nz * 4);
    EXPECT_CLOSE("relu_forward", got, act, nz);
    float *sig = random_floats(nz, -1, 1), *dsig = to_device(sig, nz * 4);
    CHECK_OK(gpu_upload(ddelta, delta, nz * 4, err, sizeof err), err);
    memcpy(z, delta, nz * 4);
    relu_backward_cpu((int)nz, sig, z);
    relu_backward_cuda((int)nz, dsig, ddelta);
    from_device(got, ddelta, nz * 4);
    EXPECT_CLOSE("relu_backward", got, z, nz);

    gpu_free(dx), gpu_free(dw), gpu_free(dbias), gpu_free(dz), gpu_free(ddelta), gpu_free(dgw), gpu_free(dgb);
    gpu_free(dback), gpu_free(dact), gpu_free(dsig);
    free(x), free(w), free(bias), free(z), free(got), free(delta), free(gw), free(gb), free(back), free(act), free(sig);
}

static void test_softmax_and_gather(int batch, int classes, int dim) {
    printf("softmax %d x %d, gather of %d-float rows\n", batch, classes, dim);
    size_t n = (size_t)batch * classes;
    float *logits = random_floats(n, -4, 4), *dlog = to_device(logits, n * 4);
    int32_t *labels = malloc((size_t)batch * 4);
    for (int r = 0; r < batch; r++) labels[r] = (int32_t)rng_below(&rng, (uint64_t)classes);
    // Ties for the argmax: the first of equal maxima counts, on both.
    for (int c = 0; c < classes; c++) logits[c] = 1.0f;
    CHECK_OK(gpu_upload(dlog, logits, n * 4, err, sizeof err), err);
    int32_t *dlab = to_device(labels, (size_t)batch * 4);
    float *grad = malloc(n * 4), *loss = malloc((size_t)batch * 4), *hit = malloc((size_t)batch * 4);
    float *got = malloc(n * 4);
    float *dgrad = gpu_alloc(n * 4, err, sizeof err), *dloss = gpu_alloc((size_t)batch * 4, err, sizeof err);
    float *dhit = gpu_alloc((size_t)batch * 4, err, sizeof err);
    softmax_xent_rows_cpu(batch, classes, logits, labels, 0.25f, grad, loss, hit);
    softmax_xent_rows_cuda(batch, classes, dlog, dlab, 0.25f, dgrad, dloss, dhit);
    from_device(got, dgrad, n * 4);
    EXPECT_CLOSE("softmax_xent_rows: dlogits", got, grad, n);
    from_device(got, dloss, (size_t)batch * 4);
    EXPECT_CLOSE("softmax_xent_rows: row loss", got, loss, batch);
    from_device(got, dhit, (size_t)batch * 4);
    for (int r = 0; r < batch; r++) CHECK(got[r] == hit[r]);
    int32_t dummy;
    CHECK(softmax_xent_cpu(1, classes, logits, labels, 1.0f, NULL, &dummy) > 0);
    CHECK(dummy == (labels[0] == 0));  // the first of the tied maxima

    // Gather: rows drawn with repeats from a set of 3 * batch.
    size_t set = (size_t)3 * batch;
    float *src = random_floats(set * dim, -1, 1), *dsrc = to_device(src, set * dim * 4);
    int32_t *slab = malloc(set * 4);
    uint32_t *idx = malloc((size_t)batch * 4);
    for (size_t i = 0; i < set; i++) slab[i] = (int32_t)i;
    for (int r = 0; r < batch; r++) idx[r] = (uint32_t)rng_below(&rng, set);
    int32_t *dslab = to_device(slab, set * 4);
    uint32_t *didx = to_device(idx, (size_t)batch * 4);
    float *dst = malloc((size_t)batch * dim * 4), *gdst = malloc((size_t)batch * dim * 4);
    int32_t *dl = malloc((size_t)batch * 4), *gdl = malloc((size_t)batch * 4);
    float *ddst = gpu_alloc((size_t)batch * dim * 4, err, sizeof err);
    int32_t *ddl = gpu_alloc((size_t)batch * 4, err, sizeof err);
    gather_rows_cpu(batch, dim, src, slab, idx, dst, dl);
    gather_rows_cuda(batch, dim, dsrc, dslab, didx, ddst, ddl);
    from_device(gdst, ddst, (size_t)batch * dim * 4);
    from_device(gdl, ddl, (size_t)batch * 4);
    CHECK(memcmp(gdst, dst, (size_t)batch * dim * 4) == 0);
    CHECK(memcmp(gdl, dl, (size_t)batch * 4) == 0);
    printf("  %-40s identical\n", "gather_rows");
    gpu_free(dlog), gpu_free(dlab), gpu_free(dgrad), gpu_free(dloss), gpu_free(dhit), gpu_free(dsrc), gpu_free(dslab);
    gpu_free(didx), gpu_free(ddst), gpu_free(ddl);
    free(logits), free(labels), free(grad), free(loss), free(hit), free(got), free(src), free(slab), free(idx);
    free(dst), free(gdst), free(dl), free(gdl);
}

static void test_updates(size_t n) {
    printf("optimizer steps and reductions over %zu floats\n", n);
    float *g = random_floats(n, -1, 1), *w = random_floats(n, -1, 1), *h = random_floats(n, 0.1f, 1);
    float *v = random_floats(n, -1, 1), *got = malloc(n * 4);
    float *dg = to_device(g, n * 4), *dw = to_device(w, n * 4), *dh = to_device(h, n * 4), *dv = to_device(v, n * 4);
    sgd_update_cpu(n, 0.1f, g, w);
    sgd_update_cuda(n, 0.1f, dg, dw);
    from_device(got, dw, n * 4);
    EXPECT_CLOSE("sgd_update", got, w, n);
    adagrad_update_cpu(n, 0.1f, 1e-8f, g, h, w);
    adagrad_update_cuda(n, 0.1f, 1e-8f, dg, dh, dw);
    from_device(got, dw, n * 4);
    EXPECT_CLOSE("adagrad_update: w", got, w, n);
    from_device(got, dh, n * 4);
    EXPECT_CLOSE("adagrad_update: h", got, h, n);
    momentum_update_cpu(n, 0.1f, 0.9f, g, v, w);
    momentum_update_cuda(n, 0.1f, 0.9f, dg, dv, dw);
    from_device(got, dw, n * 4);
    EXPECT_CLOSE("momentum_update: w", got, w, n);
    from_device(got, dv, n * 4);
    EXPECT_CLOSE("momentum_update: v", got, v, n);
    axpy_cpu(n, -0.3f, g, w);
    axpy_cuda(n, -0.3f, dg, dw);
    from_device(got, dw, n * 4);
    EXPECT_CLOSE("axpy", got, w, n);
    double acc[2] = {1.5, -2.0}, gacc[2];
    double *dacc = to_device(acc, sizeof acc);
    dot_accumulate_cpu(n, 0.5f, g, w, &acc[0]);
    sum_accumulate_cpu(n, g, &acc[1]);
    dot_accumulate_cuda(n, 0.5f, dg, dw, &dacc[0]);
    sum_accumulate_cuda(n, dg, &dacc[1]);
    from_device(gacc, dacc, sizeof gacc);
    float fa[2] = {(float)acc[0], (float)acc[1]}, fg[2] = {(float)gacc[0], (float)gacc[1]};
    EXPECT_CLOSE("dot_accumulate, sum_accumulate", fg, fa, 2);
    gpu_free(dg), gpu_free(dw), gpu_free(dh), gpu_free(dv), gpu_free(dacc);
    free(g), free(w), free(h), free(v), free(got);
}

// A CSR set on the device and its order.
typedef struct {
    size_t *row_ptr;
    uint32_t *col, *order;
    float *val, *y;
} dev_csr_t;

static dev_csr_t csr_to_device(const sparse_dataset_t *d, const uint32_t *order, size_t count) {
    dev_csr_t c = {
        to_device(d->row_ptr, (d->n + 1) * sizeof(size_t)),
        to_device(d->col, d->nnz * 4),
        to_device(order, count * 4),
        to_device(d->val, d->nnz * 4),
        to_device(d->y, d->n * 4),
    };
    return c;
}

static void csr_free(dev_csr_t *c) {
    gpu_free(c->row_ptr), gpu_free(c->col), gpu_free(c->order), gpu_free(c->val), gpu_free(c->y);
}

static void test_linear(void) {
    printf("sparse linear models\n");
    const size_t n = 512, dim = 4096, nnz = 24;
    sparse_dataset_t d;
    make_sparse(&d, n, dim, nnz, 11);
    uint32_t *order = malloc(n * 4);
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)((i * 37) % n);
    dev_csr_t c = csr_to_device(&d, order, n);
    float *w = random_floats(dim + 1, -0.5f, 0.5f), *got = malloc((dim + 1) * 4);
    float *dw = to_device(w, (dim + 1) * 4);

    // Minibatch gradient, then the lazy-L2 step (logistic and hinge).
    for (int hinge = 0; hinge <= 1; hinge++) {
        float *grad = calloc(dim + 1, 4);
        uint8_t *touched = calloc(dim, 1);
        float *dgrad = to_device(grad, (dim + 1) * 4);
        uint8_t *dtouched = to_device(touched, dim);
        double acc = 0.25, gacc;
        double *dacc = to_device(&acc, sizeof acc);
        size_t batch = 200;
        linear_grad_csr_cpu(batch, order, d.row_ptr, d.col, d.val, d.y, dim, hinge, 1.0f / batch, w, grad, touched,
                            &acc);
        linear_grad_csr_cuda(batch, c.order, c.row_ptr, c.col, c.val, c.y, dim, hinge, 1.0f / batch, dw, dgrad,
                             dtouched, dacc);
        from_device(got, dgrad, (dim + 1) * 4);
        EXPECT_CLOSE(hinge ? "linear_grad_csr (hinge): grad" : "linear_grad_csr: grad", got, grad, dim + 1);
        uint8_t *gt = malloc(dim);
        from_device(gt, dtouched, dim);
        CHECK(memcmp(gt, touched, dim) == 0);
        linear_apply_csr_cpu(dim, 0.5f, 0.01f, (float)batch, grad, touched, w, &acc);
        linear_apply_csr_cuda(dim, 0.5f, 0.01f, (float)batch, dgrad, dtouched, dw, dacc);
        from_device(got, dw, (dim + 1) * 4);
        EXPECT_CLOSE("linear_apply_csr: w", got, w, dim + 1);
        from_device(&gacc, dacc, sizeof gacc);
        float fa = (float)acc, fg = (float)gacc;
        EXPECT_CLOSE("linear_grad/apply: loss", &fg, &fa, 1);
        from_device(gt, dtouched, dim);
        for (size_t j = 0; j < dim; j++) CHECK(gt[j] == 0);  // cleared for the next minibatch
        from_device(got, dgrad, (dim + 1) * 4);
        for (size_t j = 0; j <= dim; j++) CHECK(got[j] == 0.0f);
        gpu_free(dgrad), gpu_free(dtouched), gpu_free(dacc);
        free(grad), free(touched), free(gt);
    }

    // Hogwild! kernel, one example alone: the CPU's arithmetic (both losses, with L2).
    for (int hinge = 0; hinge <= 1; hinge++) {
        for (int atomic = 0; atomic <= 1; atomic++) {
            double acc = 0.0, gacc;
            double *dacc = to_device(&acc, sizeof acc);
            CHECK_OK(gpu_upload(dw, w, (dim + 1) * 4, err, sizeof err), err);
            linear_sgd_hogwild_cpu(1, order + 5, d.row_ptr, d.col, d.val, d.y, dim, hinge, 0.5f, 0.01f, atomic, 0, w,
                                   &acc);
            linear_sgd_hogwild_cuda(1, c.order + 5, c.row_ptr, c.col, c.val, c.y, dim, hinge, 0.5f, 0.01f, atomic, 0,
                                    dw, dacc);
            from_device(got, dw, (dim + 1) * 4);
            EXPECT_CLOSE("linear_sgd_hogwild, one example: w", got, w, dim + 1);
            from_device(&gacc, dacc, sizeof gacc);
            float fa = (float)acc, fg = (float)gacc;
            EXPECT_CLOSE("linear_sgd_hogwild, one example: loss", &fg, &fa, 1);
            gpu_free(dacc);
        }
    }

    // Hinge loss inside its margin: every example's update is the constant
    // lr * y * x, whatever it reads, so the result is order-free. With atomic
    // scatters all n updates must land (the bias takes every one of them).
    {
        // All labels +1, so that the bias moves by n * lr, far from zero.
        for (size_t i = 0; i < n; i++) d.y[i] = 1.0f;
        CHECK_OK(gpu_upload(c.y, d.y, n * 4, err, sizeof err), err);
        float *w0 = malloc((dim + 1) * 4);
        for (size_t j = 0; j <= dim; j++) w0[j] = 1e-3f * (float)((j % 7) + 1) * (j % 2 ? 1.0f : -1.0f);
        memcpy(w, w0, (dim + 1) * 4);
        double acc = 0.0;
        linear_sgd_hogwild_cpu(n, order, d.row_ptr, d.col, d.val, d.y, dim, 1, 1e-5f, 0.0f, 1, 0, w, &acc);
        for (int atomic = 1; atomic >= 0; atomic--) {
            double gacc = 0.0;
            double *dacc = to_device(&gacc, sizeof gacc);
            CHECK_OK(gpu_upload(dw, w0, (dim + 1) * 4, err, sizeof err), err);
            linear_sgd_hogwild_cuda(n, c.order, c.row_ptr, c.col, c.val, c.y, dim, 1, 1e-5f, 0.0f, atomic, 0, dw, dacc);
            from_device(got, dw, (dim + 1) * 4);
            if (atomic) {
                // Compare the change from w0: w0 itself is much larger than a step.
                float *dg = malloc((dim + 1) * 4), *dc = malloc((dim + 1) * 4);
                for (size_t j = 0; j <= dim; j++) dg[j] = got[j] - w0[j], dc[j] = w[j] - w0[j];
                EXPECT_CLOSE("linear_sgd_hogwild, atomic: no update lost", dg, dc, dim + 1);
                free(dg), free(dc);
            } else {
                double lost = fabs((got[dim] - w0[dim]) - (w[dim] - w0[dim])) / fabs(w[dim] - w0[dim]);
                printf("  %-40s bias lost %.1f%% of its updates\n", "linear_sgd_hogwild, plain stores:", 100 * lost);
            }
            gpu_free(dacc);
        }
        free(w0);
    }
    csr_free(&c);
    gpu_free(dw);
    free(order), free(w), free(got);
    sparse_dataset_free(&d);
}

static void test_mf(void) {
    printf("matrix factorisation\n");
    const size_t users = 300, items = 200, rank = 40;  // rank > 32: lanes take two coordinates
    ratings_t r;
    make_ratings(&r, 200, users, items, 8, 5);
    // Ratings with distinct users and distinct items touch disjoint rows: order-free.
    for (size_t i = 0; i < r.n; i++) r.user[i] = (uint32_t)i, r.item[i] = (uint32_t)(r.n - 1 - i);
    uint32_t *order = malloc(r.n * 4);
    for (size_t i = 0; i < r.n; i++) order[i] = (uint32_t)((i * 7) % r.n);
    size_t np = (users + items) * rank;
    float *w = random_floats(np, -0.3f, 0.3f), *got = malloc(np * 4);
    float *dw = to_device(w, np * 4), *drating = to_device(r.rating, r.n * 4);
    uint32_t *duser = to_device(r.user, r.n * 4), *ditem = to_device(r.item, r.n * 4),
             *dorder = to_device(order, r.n * 4);
    double acc = 0.0, gacc = 0.0;
    double *dacc = to_device(&gacc, sizeof gacc);
    mf_sgd_hogwild_cpu(r.n, order, r.user, r.item, r.rating, 3.0f, users, rank, 0.05f, 0.01f, 0, 0, w, &acc);
    mf_sgd_hogwild_cuda(r.n, dorder, duser, ditem, drating, 3.0f, users, rank, 0.05f, 0.01f, 0, 0, dw, dacc);
    from_device(got, dw, np * 4);
    EXPECT_CLOSE("mf_sgd_hogwild, disjoint rows: w", got, w, np);
    from_device(&gacc, dacc, sizeof gacc);
    float fa = (float)acc, fg = (float)gacc;
    EXPECT_CLOSE("mf_sgd_hogwild: loss", &fg, &fa, 1);
    gpu_free(dw), gpu_free(drating), gpu_free(duser), gpu_free(ditem), gpu_free(dorder), gpu_free(dacc);
    free(order), free(w), free(got);
    ratings_free(&r);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[256];
    if (gpu_device_count(why, sizeof why) == 0) {
        return test_skip_no_gpu("%s", why);
    }
    CHECK_OK(gpu_select(0, err, sizeof err), err);
    rng_seed(&rng, 2024, 9);
    test_dense(64, 784, 256);
    test_dense(33, 129, 10);  // odd sizes: partial tiles everywhere
    test_dense(1024, 256, 128);
    test_softmax_and_gather(300, 10, 784);
    test_softmax_and_gather(7, 1000, 33);  // more classes than a warp has lanes
    test_updates(100003);
    test_linear();
    test_mf();
    CHECK_OK(gpu_sync_device(err, sizeof err), err);
    gpu_release_thread();
    printf("all CUDA kernels agree with their CPU twins\n");
    return 0;
}
#endif
