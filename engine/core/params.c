#include "engine/core/params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

param_t *params_new(size_t n, char *err, size_t err_len) {
    size_t bytes = (n ? n : 1) * sizeof(param_t);
    bytes = (bytes + 63) / 64 * 64;
    param_t *p = aligned_alloc(64, bytes);
    if (!p) {
        snprintf(err, err_len, "params: allocating %zu parameters (%zu bytes): %s", n, bytes, strerror(errno));
        return NULL;
    }
    for (size_t i = 0; i < n; i++) atomic_init(&p[i], 0.0f);
    return p;
}

void params_free(param_t **p) {
    if (!p || !*p) return;
    free(*p);
    *p = NULL;
}

void params_read(const param_t *p, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = param_get(&p[i]);
}
