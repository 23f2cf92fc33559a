// Matrix factorisation by SGD over ratings: the Hogwild! paper's other sparse case.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"
#include "engine/core/model_impl.h"
#include "engine/models/model_registry.h"

typedef struct mf_model {
    model_t base;
    const ratings_t *train;
    const ratings_t *test;
    size_t rank;
    size_t n_users;
    size_t n_items;
    float mean;  // training mean rating, a fixed offset so factors model deviations
    float l2;
} mf_model_t;

typedef struct mf_ws {
    model_ws_header_t header;  // no parameter copy: w is read directly
} mf_ws_t;

static const model_ops_t mf_ops;

static size_t mf_num_params(const model_t *m) {
    const mf_model_t *mf = (const mf_model_t *)m;
    return (mf->n_users + mf->n_items) * mf->rank;
}

static void mf_describe(const model_t *m, char *out, size_t out_len) {
    const mf_model_t *mf = (const mf_model_t *)m;
    snprintf(out, out_len, "mf %zu users x %zu items, rank %zu, l2 %g", mf->n_users, mf->n_items, mf->rank,
             (double)mf->l2);
}

static double mf_flops(const model_t *m) { return 6.0 * (double)((const mf_model_t *)m)->rank; }

static void mf_init(const model_t *m, param_t *w, uint64_t seed) {
    const mf_model_t *mf = (const mf_model_t *)m;
    rng_t rng;
    rng_seed(&rng, seed, 0x4d46);  // "MF"
    // Small random factors: zero would be a saddle point where every gradient vanishes.
    double std = 0.1 / sqrt((double)mf->rank);
    size_t n = mf_num_params(m);
    for (size_t i = 0; i < n; i++) param_set(&w[i], (float)(std * rng_normal(&rng)));
}

static model_ws_t *mf_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    (void)m;
    (void)max_batch;
    mf_ws_t *ws = malloc(sizeof *ws);
    if (!ws) {
        snprintf(err, err_len, "mf: allocating workspace: %s", strerror(errno));
        return NULL;
    }
    ws->header.ops = &mf_ops;
    ws->header.param_copy = NULL;
    ws->header.copy_current = 0;
    return (model_ws_t *)ws;
}

static void mf_ws_destroy(model_ws_t *ws) { free(ws); }

static double mf_predict(const mf_model_t *mf, const param_t *w, uint32_t user, uint32_t item) {
    const param_t *u = w + (size_t)user * mf->rank;
    const param_t *v = w + (mf->n_users + (size_t)item) * mf->rank;
    double dot = mf->mean;
    for (size_t k = 0; k < mf->rank; k++) dot += (double)param_get(&u[k]) * param_get(&v[k]);
    return dot;
}

static double mf_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                           model_ws_t *ws) {
    (void)ws;
    const mf_model_t *mf = (const mf_model_t *)m;
    const ratings_t *r = mf->train;
    double inv = 1.0 / (double)count, total = 0.0;
    for (size_t e = 0; e < count; e++) {
        uint32_t user = r->user[idx[e]], item = r->item[idx[e]];
        size_t u_off = (size_t)user * mf->rank, v_off = (mf->n_users + (size_t)item) * mf->rank;
        double err = mf_predict(mf, w, user, item) - r->rating[idx[e]];
        double reg = 0.0;
        for (size_t k = 0; k < mf->rank; k++) {
            float uk = param_get(&w[u_off + k]), vk = param_get(&w[v_off + k]);
            reg += (double)uk * uk + (double)vk * vk;
            grad_add(g, (uint32_t)(u_off + k), (float)(inv * (err * vk + mf->l2 * uk)));
            grad_add(g, (uint32_t)(v_off + k), (float)(inv * (err * uk + mf->l2 * vk)));
        }
        total += 0.5 * err * err + 0.5 * mf->l2 * reg;
    }
    return total * inv;
}

// mf_loss_grad on one rating followed by w -= lr * g, without the gradient.
static double mf_sgd_step_one(const model_t *m, param_t *w, uint32_t example, float lr) {
    const mf_model_t *mf = (const mf_model_t *)m;
    const ratings_t *r = mf->train;
    uint32_t user = r->user[example], item = r->item[example];
    size_t u_off = (size_t)user * mf->rank, v_off = (mf->n_users + (size_t)item) * mf->rank;
    double err = mf_predict(mf, w, user, item) - r->rating[example];
    double reg = 0.0;
    for (size_t k = 0; k < mf->rank; k++) {
        float uk = param_get(&w[u_off + k]), vk = param_get(&w[v_off + k]);
        reg += (double)uk * uk + (double)vk * vk;
        param_set(&w[u_off + k], uk - lr * (float)(err * vk + mf->l2 * uk));
        param_set(&w[v_off + k], vk - lr * (float)(err * uk + mf->l2 * vk));
    }
    return 0.5 * err * err + 0.5 * mf->l2 * reg;
}

static void mf_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws,
                        eval_sums_t *sums) {
    (void)ws;
    const mf_model_t *mf = (const mf_model_t *)m;
    const ratings_t *r = mf->test;
    for (size_t i = begin; i < end; i++) {
        double err = mf_predict(mf, w, r->user[i], r->item[i]) - r->rating[i];
        sums->loss_sum += 0.5 * err * err;
        sums->metric_sum += err * err;
        sums->count++;
    }
}

static void mf_predict_test(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    (void)ws;
    const mf_model_t *mf = (const mf_model_t *)m;
    for (size_t i = begin; i < end; i++) out[i - begin] = mf_predict(mf, w, mf->test->user[i], mf->test->item[i]);
}

static void mf_destroy(model_t *m) { free(m); }

static void mf_layout(const model_t *m, model_layout_t *out) {
    const mf_model_t *mf = (const mf_model_t *)m;
    out->kind = MODEL_KIND_MF;
    out->l2 = mf->l2;
    out->rank = mf->rank;
    out->n_users = mf->n_users;
    out->n_items = mf->n_items;
    out->mean = mf->mean;
    out->ratings_train = mf->train;
}

// The factor rows of the ratings' users and items; mark has a byte per row.
static size_t mf_sparse_keys(const model_t *m, int of_test, const uint32_t *idx, size_t count, uint8_t *mark,
                             uint32_t *keys) {
    const mf_model_t *mf = (const mf_model_t *)m;
    const ratings_t *d = of_test ? mf->test : mf->train;
    size_t n = 0;
    for (size_t r = 0; r < count; r++) {
        size_t rows[2] = {d->user[idx[r]], mf->n_users + d->item[idx[r]]};
        for (size_t j = 0; j < 2; j++) {
            if (mark[rows[j]]) continue;
            mark[rows[j]] = 1;
            for (size_t k = 0; k < mf->rank; k++) keys[n++] = (uint32_t)(rows[j] * mf->rank + k);
        }
    }
    for (size_t j = 0; j < n; j += mf->rank) mark[keys[j] / mf->rank] = 0;
    return n;
}

static const model_ops_t mf_ops = {
    .describe = mf_describe,
    .num_params = mf_num_params,
    .flops_per_example = mf_flops,
    .init_params = mf_init,
    .ws_new = mf_ws_new,
    .ws_destroy = mf_ws_destroy,
    .loss_grad = mf_loss_grad,
    .evaluate = mf_evaluate,
    .predict = mf_predict_test,
    .destroy = mf_destroy,
    .layout = mf_layout,
    .sgd_step_one = mf_sgd_step_one,
    .sparse_keys = mf_sparse_keys,
};

model_t *model_new_mf(const ratings_t *train, const ratings_t *test, size_t rank, double l2, char *err,
                      size_t err_len) {
    if (!train || train->n == 0) {
        snprintf(err, err_len, "mf: the training set is empty");
        return NULL;
    }
    if (rank == 0 || rank > 4096) {
        snprintf(err, err_len, "mf: rank %zu; expected 1..4096", rank);
        return NULL;
    }
    size_t n_users = train->n_users, n_items = train->n_items;
    if (test) {
        if (test->n_users > n_users) n_users = test->n_users;
        if (test->n_items > n_items) n_items = test->n_items;
    }
    if ((n_users + n_items) > UINT32_MAX / rank) {
        snprintf(err, err_len, "mf: (%zu users + %zu items) x rank %zu exceeds the 32-bit parameter index range",
                 n_users, n_items, rank);
        return NULL;
    }
    mf_model_t *mf = calloc(1, sizeof *mf);
    if (!mf) {
        snprintf(err, err_len, "mf: allocating: %s", strerror(errno));
        return NULL;
    }
    double sum = 0.0;
    for (size_t i = 0; i < train->n; i++) sum += train->rating[i];
    mf->base.ops = &mf_ops;
    mf->base.name = "mf";
    mf->base.num_train = train->n;
    mf->base.num_test = test ? test->n : 0;
    mf->base.grad_dense = 0;
    mf->base.metric = METRIC_KIND_RMSE;
    mf->train = train;
    mf->test = test;
    mf->rank = rank;
    mf->n_users = n_users;
    mf->n_items = n_items;
    mf->mean = (float)(sum / (double)train->n);
    mf->l2 = (float)l2;
    mf->base.sparse_params = (n_users + n_items) * rank;  // every factor row is read by key
    return &mf->base;
}

// ---- descriptor ----

typedef struct mf_options {
    size_t rank;  // --rank
} mf_options_t;

static void mf_options_default(void *opts) { ((mf_options_t *)opts)->rank = 16; }

static void mf_flags(void *opts, flag_spec_t *specs) {
    specs[0] =
        (flag_spec_t){"rank", FLAG_TYPE_SIZE, &((mf_options_t *)opts)->rank, "K", "factor rank", 1, 4096, NULL, 0};
}

static model_t *mf_create(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                          size_t err_len) {
    (void)seed;
    return model_new_mf(train, test, ((const mf_options_t *)opts)->rank, l2, err, err_len);
}

static int mf_shape_of(const model_t *m, model_shape_t *out, char *err, size_t err_len) {
    (void)err, (void)err_len;
    const mf_model_t *mf = (const mf_model_t *)m;
    out->rank = mf->rank;
    out->users = mf->n_users;
    out->items = mf->n_items;
    out->mean = mf->mean;
    return 0;
}

static uint64_t mf_shape_params(const model_shape_t *s) { return (s->users + s->items) * s->rank; }

static void mf_options_of_shape(const model_shape_t *s, void *opts) { ((mf_options_t *)opts)->rank = s->rank; }

const model_descriptor_t model_mf_descriptor = {
    .name = "mf",
    .summary = "matrix factorisation of ratings: mean + U[u].V[i], squared loss",
    .data = DATA_KIND_RATINGS,
    .metric = METRIC_KIND_RMSE,
    .output = MODEL_OUTPUT_VALUE,
    .defaults = {.lr = 0.05, .batch = 1, .l2 = 0.01, .data = "gen:ratings"},
    .options_size = sizeof(mf_options_t),
    .n_flags = 1,
    .options_default = mf_options_default,
    .flags = mf_flags,
    .create = mf_create,
    .gpu = 1,
    .shape_of = mf_shape_of,
    .shape_params = mf_shape_params,
    .options_of_shape = mf_options_of_shape,
};
