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

// Each parameter's examples: how many training examples touch it (the dense
// part: all of them). NULL when out of memory.
static uint32_t *touch_counts(const model_t *m) {
    size_t n = model_num_params(m), sparse = model_num_sparse_params(m), n_train = model_num_train(m);
    uint32_t *count = calloc(n ? n : 1, sizeof *count), *keys = malloc((sparse ? sparse : 1) * sizeof *keys);
    uint8_t *mark = calloc(sparse ? sparse : 1, 1);
    if (count && keys && mark) {
        for (uint32_t i = 0; i < n_train; i++) {
            size_t nk = model_sparse_keys(m, &i, 1, mark, keys);
            for (size_t k = 0; k < nk; k++) count[keys[k]]++;
        }
        for (size_t j = sparse; j < n; j++) count[j] = (uint32_t)n_train;
    } else {
        free(count);
        count = NULL;
    }
    free(keys);
    free(mark);
    return count;
}

int hogwild_hot_init(hogwild_hot_t *h, const model_t *m, size_t threads, double examples_per_interval, char *err,
                     size_t err_len) {
    memset(h, 0, sizeof *h);
    h->n = model_num_params(m);
    h->share = 1.0f / (float)(threads ? threads : 1);
    size_t n_train = model_num_train(m);
    uint32_t *count = touch_counts(m);
    if (!count || !(h->hot = malloc(h->n ? h->n : 1))) {
        snprintf(err, err_len, "allocating the hot set of %zu parameters: %s", h->n, strerror(errno));
        free(count);
        return -1;
    }
    // Every example touches it (hogwild_replica.h), and an interval holds enough of them.
    int enough = examples_per_interval >= HOGWILD_HOT_TOUCHES;
    for (size_t j = 0; j < h->n; j++) {
        h->hot[j] = enough && n_train > 0 && count[j] == n_train;
        h->n_hot += h->hot[j];
    }
    free(count);
    return 0;
}

double hogwild_touches_per_example(const model_t *m) {
    size_t n = model_num_params(m), sparse = model_num_sparse_params(m), n_train = model_num_train(m);
    if (!sparse || !n_train) return (double)n;
    uint32_t *keys = malloc(sparse * sizeof *keys);
    uint8_t *mark = calloc(sparse, 1);
    // Out of memory: as if every step touched the whole model (the shortest default interval).
    double touches = (double)n;
    if (keys && mark) {
        size_t stride = n_train > HOGWILD_TOUCH_SAMPLE ? n_train / HOGWILD_TOUCH_SAMPLE : 1, sampled = 0, total = 0;
        for (size_t i = 0; i < n_train; i += stride, sampled++) {
            uint32_t example = (uint32_t)i;
            total += model_sparse_keys(m, &example, 1, mark, keys);
        }
        touches = (double)total / (double)sampled + (double)(n - sparse);
    }
    free(keys);
    free(mark);
    return touches;
}

void hogwild_hot_free(hogwild_hot_t *h) {
    free(h->hot);
    h->hot = NULL;
}

// One line's worth: s (the shared values, read) becomes the merged values.
// hot: the line's flags, or NULL.
static void merge_values(float *s, const float *l, float *b, const uint8_t *hot, float share, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float change = l[i] - b[i];
        if (hot && hot[i]) change *= share;
        float v = s[i] == b[i] ? l[i] : s[i] + change;
        s[i] = v;
        b[i] = v;
    }
}

// Line by line (a cache line of floats): where the replica changed nothing,
// the shared line is not written, only read back into the replica if another
// thread's merge changed it; so a merge dirties only the lines this thread's
// steps wrote, and the other threads' next merges do not have to fetch the rest.
void hogwild_replica_merge(hogwild_replica_t *r, param_t *shared, const hogwild_hot_t *hot) {
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
                merge_values(s + k, local + k, b, hot ? hot->hot + at + k : NULL, hot ? hot->share : 1.0f, w);
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
