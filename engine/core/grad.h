#ifndef ASGD_ENGINE_CORE_GRAD_H
#define ASGD_ENGINE_CORE_GRAD_H
// A gradient over all of a model's parameters, stored densely but tracked
// sparsely: sparse models (logistic regression, matrix factorisation) touch a few
// dozen coordinates per example, and every pass over the gradient — apply, sum,
// clear — walks only the touched list, so a step costs O(nnz), not O(dim).
// Dense models (MLP) set `dense`: every value is live, and the pass that applies
// the gradient also zeroes it for the next step.
#include <stddef.h>
#include <stdint.h>

typedef struct grad {
    size_t dim;
    int dense;  // all coordinates are live; touched list unused
    float *value;  // (dim); zero outside the touched set when sparse
    uint32_t *touched;  // (dim) indices with an entry, each listed once
    size_t n_touched;
    uint8_t *is_touched;  // (dim) membership flags for `touched`
} grad_t;

int grad_init(grad_t *g, size_t dim, int dense, char *err, size_t err_len);
void grad_free(grad_t *g);

static inline void grad_add(grad_t *g, uint32_t i, float v) {
    if (!g->is_touched[i]) {
        g->is_touched[i] = 1;
        g->touched[g->n_touched++] = i;
    }
    g->value[i] += v;
}

// Zeroes the gradient (touched entries only, when sparse).
void grad_clear(grad_t *g);

// Gradient-norm clipping: when the L2 norm of g is above max_norm, scales g
// down to that norm (every coordinate by the same factor, so the direction is
// kept; up to float rounding). Returns the norm before clipping. A NaN or
// infinite norm leaves g as it is. One pass over the live coordinates.
double grad_clip_norm(grad_t *g, double max_norm);

#endif
