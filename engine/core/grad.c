#include "engine/core/grad.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int grad_init(grad_t *g, size_t dim, int dense, char *err, size_t err_len) {
    memset(g, 0, sizeof *g);
    size_t n = dim ? dim : 1;
    g->value = calloc(n, sizeof *g->value);
    g->touched = dense ? NULL : malloc(n * sizeof *g->touched);
    g->is_touched = dense ? NULL : calloc(n, 1);
    if (!g->value || (!dense && (!g->touched || !g->is_touched))) {
        snprintf(err, err_len, "grad: allocating a gradient of %zu coordinates: %s", dim, strerror(errno));
        grad_free(g);
        return -1;
    }
    g->dim = dim;
    g->dense = dense;
    return 0;
}

void grad_free(grad_t *g) {
    free(g->value);
    free(g->touched);
    free(g->is_touched);
    memset(g, 0, sizeof *g);
}

void grad_clear(grad_t *g) {
    if (g->dense) {
        memset(g->value, 0, g->dim * sizeof *g->value);
        return;
    }
    for (size_t k = 0; k < g->n_touched; k++) {
        uint32_t i = g->touched[k];
        g->value[i] = 0.0f;
        g->is_touched[i] = 0;
    }
    g->n_touched = 0;
}

double grad_clip_norm(grad_t *g, double max_norm) {
    double sum = 0.0;
    if (g->dense) {
        for (size_t i = 0; i < g->dim; i++) sum += (double)g->value[i] * (double)g->value[i];
    } else {
        for (size_t k = 0; k < g->n_touched; k++) {
            double v = g->value[g->touched[k]];
            sum += v * v;
        }
    }
    double norm = sqrt(sum);
    // A non-finite norm is left alone for the divergence check to see.
    if (!(norm > max_norm) || !isfinite(norm)) return norm;
    float scale = (float)(max_norm / norm);
    if (g->dense) {
        for (size_t i = 0; i < g->dim; i++) g->value[i] *= scale;
    } else {
        for (size_t k = 0; k < g->n_touched; k++) g->value[g->touched[k]] *= scale;
    }
    return norm;
}
