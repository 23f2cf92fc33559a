// The update counter of update_counter.h: a model whose ops delegate to the
// wrapped model's and overwrite the gradient on its way to the optimizer.
#include "engine/models/update_counter.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/grad.h"
#include "engine/core/model_impl.h"

typedef struct counter_model {
    model_t base;
    model_ops_t ops;  // the inner model's optional ops decide which of ours exist
    const model_t *inner;
    float *minus_unit;  // (num_params) -UPDATE_COUNT_UNIT each: every block's gradient
    _Atomic uint64_t handed;  // from the workspaces destroyed so far
} counter_model_t;

typedef struct counter_ws {
    model_ws_header_t header;  // param_copy: the inner workspace's
    model_ws_t *inner;
    counter_model_t *owner;
    uint64_t handed;  // this thread's updates handed over (its own: no sharing)
} counter_ws_t;

static const model_t *inner_of(const model_t *m) { return ((const counter_model_t *)m)->inner; }

static model_ws_header_t *inner_header(counter_ws_t *ws) { return (model_ws_header_t *)ws->inner; }

static void counter_describe(const model_t *m, char *out, size_t out_len) {
    char inner[200];
    model_describe(inner_of(m), inner, sizeof inner);
    snprintf(out, out_len, "update counter over %s", inner);
}

static size_t counter_num_params(const model_t *m) { return model_num_params(inner_of(m)); }

static double counter_flops(const model_t *m) { return model_flops_per_example(inner_of(m)); }

static void counter_init(const model_t *m, param_t *w, uint64_t seed) {
    (void)seed;  // every count starts at zero
    for (size_t i = 0, n = counter_num_params(m); i < n; i++) param_set(&w[i], 0.0f);
}

static void counter_ws_destroy(model_ws_t *w) {
    counter_ws_t *ws = (counter_ws_t *)w;
    if (!ws) return;
    atomic_fetch_add(&ws->owner->handed, ws->handed);
    model_ws_destroy(&ws->inner);
    free(ws);
}

static model_ws_t *counter_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    counter_model_t *cm = (counter_model_t *)m;
    counter_ws_t *ws = calloc(1, sizeof *ws);
    if (!ws) {
        snprintf(err, err_len, "update counter: allocating a workspace: %s", strerror(errno));
        return NULL;
    }
    if (!(ws->inner = model_ws_new(cm->inner, max_batch, err, err_len))) {
        free(ws);
        return NULL;
    }
    ws->owner = cm;
    ws->header.ops = &cm->ops;
    ws->header.param_copy = inner_header(ws)->param_copy;
    return (model_ws_t *)ws;
}

// The trainer marks our header's copy current; the inner model reads its own.
static void copy_state_in(counter_ws_t *ws) { inner_header(ws)->copy_current = ws->header.copy_current; }
static void copy_state_out(counter_ws_t *ws) { ws->header.copy_current = inner_header(ws)->copy_current; }

static double counter_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                                model_ws_t *w_s) {
    counter_ws_t *ws = (counter_ws_t *)w_s;
    copy_state_in(ws);
    (void)model_loss_grad(inner_of(m), w, idx, count, g, ws->inner);
    copy_state_out(ws);
    if (g->dense) {
        for (size_t i = 0; i < g->dim; i++) g->value[i] = -UPDATE_COUNT_UNIT;
        ws->handed += g->dim;
    } else {
        for (size_t k = 0; k < g->n_touched; k++) g->value[g->touched[k]] = -UPDATE_COUNT_UNIT;
        ws->handed += g->n_touched;
    }
    return 0.0;
}

typedef struct counting_sink {
    grad_block_fn apply;
    void *ctx;
    const float *minus_unit;
    uint64_t *handed;
} counting_sink_t;

static void counting_block(void *ctx, size_t offset, const float *g, size_t n) {
    (void)g;
    counting_sink_t *s = ctx;
    *s->handed += n;
    s->apply(s->ctx, offset, s->minus_unit + offset, n);
}

static double counter_loss_grad_apply(const model_t *m, const param_t *w, const uint32_t *idx, size_t count,
                                      model_ws_t *w_s, grad_block_fn apply, void *ctx) {
    counter_ws_t *ws = (counter_ws_t *)w_s;
    counting_sink_t sink = {apply, ctx, ((const counter_model_t *)m)->minus_unit, &ws->handed};
    copy_state_in(ws);
    (void)model_loss_grad_apply(inner_of(m), w, idx, count, ws->inner, counting_block, &sink);
    copy_state_out(ws);
    return 0.0;
}

static void counter_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws,
                             eval_sums_t *sums) {
    model_evaluate(inner_of(m), w, begin, end, ((counter_ws_t *)ws)->inner, sums);
}

static void counter_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    model_predict(inner_of(m), w, begin, end, ((counter_ws_t *)ws)->inner, out);
}

static void counter_layout(const model_t *m, model_layout_t *out) { model_layout(inner_of(m), out); }

static void counter_destroy(model_t *m) {
    counter_model_t *cm = (counter_model_t *)m;
    free(cm->minus_unit);
    free(cm);
}

model_t *update_counter_new(const model_t *inner, char *err, size_t err_len) {
    counter_model_t *cm = calloc(1, sizeof *cm);
    size_t n = model_num_params(inner);
    if (!cm || !(cm->minus_unit = malloc(n * sizeof *cm->minus_unit))) {
        snprintf(err, err_len, "update counter: allocating %zu parameters: %s", n, strerror(errno));
        free(cm);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) cm->minus_unit[i] = -UPDATE_COUNT_UNIT;
    cm->inner = inner;
    cm->ops = (model_ops_t){
        .describe = counter_describe,
        .num_params = counter_num_params,
        .flops_per_example = counter_flops,
        .init_params = counter_init,
        .ws_new = counter_ws_new,
        .ws_destroy = counter_ws_destroy,
        .loss_grad = counter_loss_grad,
        .evaluate = counter_evaluate,
        .predict = counter_predict,
        .destroy = counter_destroy,
        .layout = inner->ops->layout ? counter_layout : NULL,
        .loss_grad_apply = inner->ops->loss_grad_apply ? counter_loss_grad_apply : NULL,
    };
    cm->base = *inner;  // sizes, metric, gradient kind, name
    cm->base.ops = &cm->ops;
    return &cm->base;
}

update_count_t update_counter_result(const model_t *counter, const float *w) {
    const counter_model_t *cm = (const counter_model_t *)counter;
    update_count_t c = {atomic_load((_Atomic uint64_t *)&cm->handed), 0.0};
    for (size_t i = 0, n = counter_num_params(counter); i < n; i++) c.applied += w[i];
    c.applied /= UPDATE_COUNT_UNIT;
    return c;
}

double update_count_lost_fraction(update_count_t c) { return c.handed ? 1.0 - c.applied / (double)c.handed : 0.0; }
