#include "engine/core/optimizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct optimizer {
    optimizer_config_t config;
    size_t dim;
    param_t *state;  // (dim) momentum velocity or Adagrad sum of squares; NULL for plain SGD
};

void optimizer_config_default(optimizer_config_t *c) {
    memset(c, 0, sizeof *c);
    c->kind = OPTIMIZER_KIND_SGD;
    c->lr = 0.05;
    c->schedule = LR_SCHEDULE_CONSTANT;
    c->decay = 0.0;
    c->momentum = 0.0;
    c->epsilon = 1e-8;
}

int optimizer_config_check(const optimizer_config_t *c, char *err, size_t err_len) {
    if (!(c->lr > 0.0) || !isfinite(c->lr)) {
        snprintf(err, err_len, "--lr: %g; expected a finite number > 0", c->lr);
        return -1;
    }
    if (!(c->momentum >= 0.0 && c->momentum < 1.0)) {
        snprintf(err, err_len, "--momentum: %g; expected a number in [0, 1)", c->momentum);
        return -1;
    }
    if (c->kind == OPTIMIZER_KIND_ADAGRAD && c->momentum > 0.0) {
        snprintf(err, err_len, "--momentum: applies to --optimizer sgd, not adagrad");
        return -1;
    }
    if (c->schedule == LR_SCHEDULE_INVERSE_TIME && !(c->decay >= 0.0 && isfinite(c->decay))) {
        snprintf(err, err_len, "--lr-decay: %g; expected a finite number >= 0 for the inverse-time schedule", c->decay);
        return -1;
    }
    if (c->schedule == LR_SCHEDULE_EPOCH_DECAY && !(c->decay > 0.0 && c->decay <= 1.0)) {
        snprintf(err, err_len, "--lr-decay: %g; expected a factor in (0, 1] for the epoch schedule", c->decay);
        return -1;
    }
    if (!(c->epsilon > 0.0)) {
        snprintf(err, err_len, "--adagrad-eps: %g; expected a number > 0", c->epsilon);
        return -1;
    }
    return 0;
}

optimizer_t *optimizer_new(const optimizer_config_t *c, size_t dim, char *err, size_t err_len) {
    if (optimizer_config_check(c, err, err_len) != 0) return NULL;
    optimizer_t *o = calloc(1, sizeof *o);
    if (!o) {
        snprintf(err, err_len, "optimizer: allocating: %s", strerror(errno));
        return NULL;
    }
    o->config = *c;
    o->dim = dim;
    if (c->kind == OPTIMIZER_KIND_ADAGRAD || c->momentum > 0.0) {
        o->state = params_new(dim, err, err_len);
        if (!o->state) {
            free(o);
            return NULL;
        }
    }
    return o;
}

void optimizer_destroy(optimizer_t **o) {
    if (!o || !*o) return;
    params_free(&(*o)->state);
    free(*o);
    *o = NULL;
}

float optimizer_lr(const optimizer_t *o, double updates, size_t epoch) {
    const optimizer_config_t *c = &o->config;
    double lr = c->lr;
    switch (c->schedule) {
        case LR_SCHEDULE_INVERSE_TIME:
            lr = c->lr / (1.0 + c->decay * updates);
            break;
        case LR_SCHEDULE_EPOCH_DECAY:
            lr = c->lr * pow(c->decay, (double)epoch);
            break;
        case LR_SCHEDULE_CONSTANT:
            break;
    }
    if (c->warmup > 0 && updates + 1.0 < (double)c->warmup) lr *= (updates + 1.0) / (double)c->warmup;
    return (float)lr;
}

// One coordinate's update from its current value: the new value (the
// optimizer's state for coordinate i is updated). The single place the three
// rules are written.
static inline float update_value(const optimizer_t *o, size_t i, float value, float g, float lr) {
    float step;
    if (o->config.kind == OPTIMIZER_KIND_ADAGRAD) {
        float h = param_get(&o->state[i]) + g * g;
        param_set(&o->state[i], h);
        step = lr * g / (sqrtf(h) + (float)o->config.epsilon);
    } else if (o->state) {
        float v = (float)o->config.momentum * param_get(&o->state[i]) + g;
        param_set(&o->state[i], v);
        step = lr * v;
    } else {
        step = lr * g;
    }
    return value - step;
}

// The same applied to w[i], returning the value written.
static inline float update_one(const optimizer_t *o, param_t *w, size_t i, float g, float lr) {
    float value = update_value(o, i, param_get(&w[i]), g, lr);
    param_set(&w[i], value);
    return value;
}

void optimizer_step_values(optimizer_t *o, size_t offset, size_t n, const float *cur, float *g, float lr) {
    if (o->config.kind == OPTIMIZER_KIND_SGD && !o->state) {
        // Plain floats on both sides: the compiler vectorises this loop.
        for (size_t i = 0; i < n; i++) g[i] = cur[i] - lr * g[i];
        return;
    }
    for (size_t i = 0; i < n; i++) g[i] = update_value(o, offset + i, cur[i], g[i], lr);
}

void optimizer_apply_range(optimizer_t *o, param_t *w, const float *g, size_t begin, size_t end, float lr) {
    if (o->config.kind == OPTIMIZER_KIND_SGD && !o->state) {
        params_sgd(w + begin, end - begin, g + begin, lr, NULL);  // the hot case for dense models, in vector lanes
        return;
    }
    for (size_t i = begin; i < end; i++) update_one(o, w, i, g[i], lr);
}

void optimizer_apply_block(optimizer_t *o, param_t *w, size_t offset, const float *g, size_t n, float lr, float *copy) {
    param_t *wb = w + offset;
    float *cb = copy + offset;
    if (o->config.kind == OPTIMIZER_KIND_SGD && !o->state) {
        params_sgd(wb, n, g, lr, cb);
        return;
    }
    for (size_t i = 0; i < n; i++) cb[i] = update_one(o, w, offset + i, g[i], lr);
}

void optimizer_apply_values(optimizer_t *o, size_t offset, const float *g, size_t n, float lr, float *values) {
    if (o->config.kind == OPTIMIZER_KIND_SGD && !o->state) {
        for (size_t i = 0; i < n; i++) values[i] = values[i] - lr * g[i];  // plain floats: vectorised
        return;
    }
    for (size_t i = 0; i < n; i++) values[i] = update_value(o, offset + i, values[i], g[i], lr);
}

void optimizer_apply_and_clear(optimizer_t *o, param_t *w, grad_t *g, float lr) {
    if (g->dense) {
        float *gv = g->value;
        for (size_t i = 0; i < g->dim; i++) {
            update_one(o, w, i, gv[i], lr);
            gv[i] = 0.0f;
        }
        return;
    }
    int plain_sgd = o->config.kind == OPTIMIZER_KIND_SGD && !o->state;
    for (size_t k = 0; k < g->n_touched; k++) {
        uint32_t i = g->touched[k];
        if (plain_sgd)
            param_set(&w[i], param_get(&w[i]) - lr * g->value[i]);
        else
            update_one(o, w, i, g->value[i], lr);
        g->value[i] = 0.0f;
        g->is_touched[i] = 0;
    }
    g->n_touched = 0;
}

const optimizer_config_t *optimizer_config(const optimizer_t *o) { return &o->config; }

size_t optimizer_state_len(const optimizer_t *o) { return o->state ? o->dim : 0; }

void optimizer_state_read(const optimizer_t *o, float *out) {
    if (o->state) params_read(o->state, o->dim, out);
}

void optimizer_state_write(optimizer_t *o, const float *in) {
    if (o->state) params_write(o->state, o->dim, in);
}

int optimizer_is_plain_sgd(const optimizer_t *o) { return o->config.kind == OPTIMIZER_KIND_SGD && !o->state; }

const char *lr_schedule_name(lr_schedule_t s) {
    switch (s) {
        case LR_SCHEDULE_INVERSE_TIME:
            return "inverse-time";
        case LR_SCHEDULE_EPOCH_DECAY:
            return "epoch-decay";
        case LR_SCHEDULE_CONSTANT:
            break;
    }
    return "constant";
}
