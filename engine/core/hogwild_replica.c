// A Hogwild! thread's replica of the shared parameters (hogwild_replica.h).
#include "engine/core/hogwild_replica.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Parameters per pass of a merge: its plain-float buffers live on the stack.
#define MERGE_CHUNK 512
#define MERGE_LINE 16  // floats in a 64-byte cache line

int hogwild_replica_init(hogwild_replica_t *r, size_t n, float *values, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    r->n = n;
    r->values = values;
    if (!values && !(r->params = params_new(n, err, err_len))) return -1;
    if (!(r->base = malloc((n ? n : 1) * sizeof *r->base))) {
        snprintf(err, err_len, "allocating a replica of %zu parameters: %s", n, strerror(errno));
        params_free(&r->params);
        return -1;
    }
    return 0;
}

void hogwild_replica_free(hogwild_replica_t *r) {
    params_free(&r->params);
    free(r->base);
    r->base = NULL;
}

void hogwild_replica_start(hogwild_replica_t *r, const param_t *shared) {
    params_read(shared, r->n, r->base);
    if (r->values)
        memcpy(r->values, r->base, r->n * sizeof *r->values);
    else
        params_write(r->params, r->n, r->base);
}

// One line's worth: s (the shared values, read) becomes the merged values.
static void merge_values(float *s, const float *l, float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = s[i] == b[i] ? l[i] : s[i] + (l[i] - b[i]);
        s[i] = v;
        b[i] = v;
    }
}

// Line by line (a cache line of floats): where the replica changed nothing,
// the shared line is not written, only read back into the replica if another
// thread's merge changed it; so a merge dirties only the lines this thread's
// steps wrote, and the other threads' next merges do not have to fetch the rest.
void hogwild_replica_merge(hogwild_replica_t *r, param_t *shared) {
    float s[MERGE_CHUNK], l[MERGE_CHUNK];
    for (size_t at = 0; at < r->n; at += MERGE_CHUNK) {
        size_t m = r->n - at < MERGE_CHUNK ? r->n - at : MERGE_CHUNK;
        params_read(shared + at, m, s);
        float *local = r->values ? r->values + at : l;
        if (!r->values) params_read(r->params + at, m, l);
        for (size_t k = 0; k < m; k += MERGE_LINE) {
            size_t w = m - k < MERGE_LINE ? m - k : MERGE_LINE;
            float *b = r->base + at + k;
            if (memcmp(local + k, b, w * sizeof *b) != 0) {
                merge_values(s + k, local + k, b, w);
                params_write(shared + at + k, w, s + k);
            } else if (memcmp(s + k, b, w * sizeof *b) != 0) {
                memcpy(b, s + k, w * sizeof *b);
            } else {
                continue;  // nobody changed the line
            }
            if (r->values)
                memcpy(r->values + at + k, s + k, w * sizeof *s);
            else
                params_write(r->params + at + k, w, s + k);
        }
    }
}
