#include "engine/core/model_impl.h"

#include <math.h>
#include <string.h>

void model_destroy(model_t **m) {
    if (!m || !*m) return;
    (*m)->ops->destroy(*m);
    *m = NULL;
}

void model_describe(const model_t *m, char *out, size_t out_len) { m->ops->describe(m, out, out_len); }
const char *model_name(const model_t *m) { return m->name; }
size_t model_num_params(const model_t *m) { return m->ops->num_params(m); }
size_t model_num_train(const model_t *m) { return m->num_train; }
size_t model_num_test(const model_t *m) { return m->num_test; }
int model_grad_is_dense(const model_t *m) { return m->grad_dense; }
size_t model_num_sparse_params(const model_t *m) { return m->sparse_params; }

size_t model_sparse_keys(const model_t *m, const uint32_t *idx, size_t count, uint8_t *mark, uint32_t *keys) {
    return m->ops->sparse_keys ? m->ops->sparse_keys(m, 0, idx, count, mark, keys) : 0;
}

size_t model_sparse_test_keys(const model_t *m, const uint32_t *idx, size_t count, uint8_t *mark, uint32_t *keys) {
    return m->ops->sparse_keys ? m->ops->sparse_keys(m, 1, idx, count, mark, keys) : 0;
}

size_t model_feature_rows_keys(const sparse_dataset_t *d, const uint32_t *idx, size_t count, size_t width, size_t dim,
                               uint8_t *mark, uint32_t *keys) {
    size_t n = 0;
    for (size_t r = 0; r < count; r++) {
        for (size_t p = d->row_ptr[idx[r]]; p < d->row_ptr[idx[r] + 1]; p++) {
            uint32_t f = d->col[p];
            if (f >= dim || mark[f]) continue;
            mark[f] = 1;
            for (size_t i = 0; i < width; i++) keys[n++] = (uint32_t)(f * width + i);
        }
    }
    for (size_t j = 0; j < n; j += width) mark[keys[j] / width] = 0;
    return n;
}

void model_layout(const model_t *m, model_layout_t *out) {
    memset(out, 0, sizeof *out);
    if (m->ops->layout) m->ops->layout(m, out);
}
metric_kind_t model_metric(const model_t *m) { return m->metric; }
double model_flops_per_example(const model_t *m) { return m->ops->flops_per_example(m); }

void model_init_params(const model_t *m, param_t *w, uint64_t seed) { m->ops->init_params(m, w, seed); }

int model_has_init_range(const model_t *m) { return m->ops->init_range != NULL; }

void model_init_range(const model_t *m, uint64_t seed, size_t begin, size_t end, float *out) {
    m->ops->init_range(m, seed, begin, end, out);
}

model_ws_t *model_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    return m->ops->ws_new(m, max_batch ? max_batch : 1, err, err_len);
}

void model_ws_destroy(model_ws_t **ws) {
    if (!ws || !*ws) return;
    ((model_ws_header_t *)*ws)->ops->ws_destroy(*ws);
    *ws = NULL;
}

float *model_ws_param_copy(model_ws_t *ws) { return ((model_ws_header_t *)ws)->param_copy; }

void model_ws_mark_copy_current(model_ws_t *ws) { ((model_ws_header_t *)ws)->copy_current = 1; }

double model_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                       model_ws_t *ws) {
    return m->ops->loss_grad(m, w, idx, count, g, ws);
}

int model_has_loss_grad_apply(const model_t *m) { return m->ops->loss_grad_apply != NULL; }

void grad_block_store(void *ctx, size_t offset, const float *g, size_t n) {
    memcpy((float *)ctx + offset, g, n * sizeof *g);
}

double model_loss_grad_apply(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, model_ws_t *ws,
                             grad_block_fn apply, void *ctx) {
    return m->ops->loss_grad_apply(m, w, idx, count, ws, apply, ctx);
}

int model_has_sgd_step_one(const model_t *m) { return m->ops->sgd_step_one != NULL; }

double model_sgd_step_one(const model_t *m, param_t *w, uint32_t example, float lr) {
    return m->ops->sgd_step_one(m, w, example, lr);
}

int model_has_grad_one_pairs(const model_t *m) { return m->ops->grad_one_pairs != NULL; }

size_t model_grad_one_pairs(const model_t *m, const param_t *w, uint32_t example, uint32_t *idx, float *val, size_t cap,
                            double *loss) {
    return m->ops->grad_one_pairs(m, w, example, idx, val, cap, loss);
}

int model_has_grad_one_scale(const model_t *m) {
    return m->ops->has_grad_one_scale != NULL && m->ops->has_grad_one_scale(m);
}

double model_grad_one_scale(const model_t *m, const param_t *w, uint32_t example, float *scale) {
    return m->ops->grad_one_scale(m, w, example, scale);
}

void model_sgd_apply_one_scale(const model_t *m, param_t *w, uint32_t example, float scale, float lr) {
    m->ops->sgd_apply_one_scale(m, w, example, scale, lr);
}

size_t model_eval_slice(size_t limit, size_t i, size_t n) {
    if (i >= n) return limit;
    size_t at = limit * i / n;
    return at - at % MODEL_EVAL_ROWS;
}

size_t model_eval_block_end(size_t start, size_t end) {
    size_t stop = (start / MODEL_EVAL_ROWS + 1) * MODEL_EVAL_ROWS;
    return stop < end ? stop : end;
}

void model_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, eval_sums_t *sums) {
    if (end > m->num_test) end = m->num_test;
    if (begin >= end) return;
    m->ops->evaluate(m, w, begin, end, ws, sums);
}

size_t model_num_outputs(const model_t *m) {
    model_layout_t l;
    model_layout(m, &l);
    return l.kind == MODEL_KIND_MLP ? l.width[l.n_layers] : 1;
}

void model_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    if (end > m->num_test) end = m->num_test;
    if (begin >= end) return;
    m->ops->predict(m, w, begin, end, ws, out);
}

double eval_metric_value(metric_kind_t kind, const eval_sums_t *sums) {
    if (sums->count == 0) return NAN;
    if (kind == METRIC_KIND_ACCURACY) return sums->metric_sum / (double)sums->count;
    return sqrt(sums->metric_sum / (double)sums->count);
}
