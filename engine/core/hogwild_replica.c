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

// One pass over training examples 0, stride, 2 * stride, ...: the sparse
// keys each touches, counted per key into count (model_num_sparse_params
// entries) unless it is NULL. *keys_seen gets their sum, *examples the
// examples read. -1 when out of memory.
static int sparse_key_pass(const model_t *m, size_t stride, uint32_t *count, size_t *keys_seen, size_t *examples) {
    size_t sparse = model_num_sparse_params(m), n_train = model_num_train(m);
    uint32_t *keys = malloc((sparse ? sparse : 1) * sizeof *keys);
    uint8_t *mark = calloc(sparse ? sparse : 1, 1);
    int ok = keys && mark;
    *keys_seen = *examples = 0;
    for (size_t i = 0; ok && i < n_train; i += stride, ++*examples) {
        uint32_t example = (uint32_t)i;
        size_t nk = model_sparse_keys(m, &example, 1, mark, keys);
        *keys_seen += nk;
        for (size_t k = 0; count && k < nk; k++) count[keys[k]]++;
    }
    free(keys);
    free(mark);
    return ok ? 0 : -1;
}

int hogwild_hot_init(hogwild_hot_t *h, const model_t *m, size_t threads, double examples_per_interval, char *err,
                     size_t err_len) {
    memset(h, 0, sizeof *h);
    h->n = model_num_params(m);
    h->share = 1.0f / (float)(threads ? threads : 1);
    size_t sparse = model_num_sparse_params(m), n_train = model_num_train(m), keys_seen, examples;
    // Hot (hogwild_replica.h): every example touches it, and an interval holds enough of them.
    int any = examples_per_interval >= HOGWILD_HOT_TOUCHES && n_train > 0;
    uint32_t *count = any && sparse ? calloc(sparse, sizeof *count) : NULL;
    if (!(h->hot = calloc(h->n ? h->n : 1, 1)) || (any && sparse && !count) ||
        (count && sparse_key_pass(m, 1, count, &keys_seen, &examples) != 0)) {
        snprintf(err, err_len, "allocating the hot set of %zu parameters: %s", h->n, strerror(errno));
        free(count);
        hogwild_hot_free(h);
        return -1;
    }
    for (size_t j = 0; any && j < h->n; j++) {
        h->hot[j] = j >= sparse || count[j] == n_train;  // the dense part: every step touches it
        h->n_hot += h->hot[j];
    }
    free(count);
    return 0;
}

double hogwild_touches_per_example(const model_t *m) {
    size_t n = model_num_params(m), sparse = model_num_sparse_params(m), n_train = model_num_train(m);
    if (!sparse || !n_train) return (double)n;
    size_t stride = n_train > HOGWILD_TOUCH_SAMPLE ? n_train / HOGWILD_TOUCH_SAMPLE : 1, keys_seen, examples;
    // Out of memory: as if every step touched the whole model (the shortest default interval).
    if (sparse_key_pass(m, stride, NULL, &keys_seen, &examples) != 0) return (double)n;
    return (double)keys_seen / (double)examples + (double)(n - sparse);
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
