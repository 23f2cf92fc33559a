#include "engine/replica/working_set.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t steps_of(const working_set_t *ws, size_t t) {
    return atomic_load_explicit(&ws->progress[t].steps, memory_order_acquire);  // with the steps' writes
}

int working_set_applies(const model_t *m) { return model_num_sparse_params(m) > 0; }

int working_set_by_key(const model_t *m, sync_mode_t mode, int gpu, int compressed) {
    if (!working_set_applies(m)) return 0;
    int sparse = !model_grad_is_dense(m);
    if (mode == SYNC_MODE_BSP) return sparse;
    return !gpu && (sparse || !compressed);
}

// Frees what was made; "worker: out of memory ..." in err; returns -1.
static int out_of_memory(working_set_t *ws, const model_t *m, char *err, size_t err_len) {
    working_set_free(ws);
    snprintf(err, err_len, "worker: out of memory for the working set of a model of %zu parameters",
             model_num_params(m));
    return -1;
}

// The keys one example reads, averaged over the first examples (at most
// 256: the mean settles long before, and the cost stays that of a few steps).
static double keys_per_example(working_set_t *ws, size_t n_train) {
    size_t sample = n_train < 256 ? n_train : 256, keys = 0;
    for (uint32_t i = 0; i < sample; i++) keys += model_sparse_keys(ws->model, &i, 1, ws->mark, ws->sort_tmp);
    return sample ? (double)keys / (double)sample : 0.0;
}

int working_set_whole_cheaper(const working_set_t *ws, size_t examples) {
    return (double)examples * ws->keys_per_example >= (double)ws->key_n;
}

int working_set_init_keys(working_set_t *ws, const model_t *m, char *err, size_t err_len) {
    memset(ws, 0, sizeof *ws);
    ws->model = m;
    ws->n = model_num_params(m);
    ws->key_n = model_num_sparse_params(m);
    ws->mark = calloc(ws->key_n, 1);
    ws->sort_tmp = malloc(ws->n * sizeof *ws->sort_tmp);
    if (!ws->mark || !ws->sort_tmp) {
        return out_of_memory(ws, m, err, err_len);
    }
    ws->keys_per_example = keys_per_example(ws, model_num_train(m));
    return 0;
}

int working_set_init(working_set_t *ws, const model_t *m, const train_config_t *tc, train_thread_progress_t *progress,
                     char *err, size_t err_len) {
    if (working_set_init_keys(ws, m, err, err_len) != 0) return -1;
    ws->threads = tc->threads;
    ws->progress = progress;
    ws->push_order = calloc(ws->threads, sizeof *ws->push_order);
    ws->pull_order = calloc(ws->threads, sizeof *ws->pull_order);
    ws->push_from = calloc(ws->threads, sizeof *ws->push_from);
    size_t batch = tc->batch ? tc->batch : 1;
    ws->cap = WORKING_SET_EXAMPLES > ws->threads * batch ? WORKING_SET_EXAMPLES : ws->threads * batch;
    ws->examples = malloc(ws->cap * sizeof *ws->examples);
    if (!ws->push_order || !ws->pull_order || !ws->push_from || !ws->examples) {
        return out_of_memory(ws, m, err, err_len);
    }
    size_t n_train = model_num_train(m);
    for (size_t t = 0; t < ws->threads; t++) {
        if (train_order_init(&ws->push_order[t], tc, n_train, t, err, err_len) != 0 ||
            train_order_init(&ws->pull_order[t], tc, n_train, t, err, err_len) != 0) {
            working_set_free(ws);
            return -1;
        }
        ws->push_from[t] = steps_of(ws, t);
    }
    return 0;
}

void working_set_free(working_set_t *ws) {
    for (size_t t = 0; ws->push_order && t < ws->threads; t++) train_order_free(&ws->push_order[t]);
    for (size_t t = 0; ws->pull_order && t < ws->threads; t++) train_order_free(&ws->pull_order[t]);
    free(ws->push_order);
    free(ws->pull_order);
    free(ws->push_from);
    free(ws->examples);
    free(ws->mark);
    free(ws->sort_tmp);
    memset(ws, 0, sizeof *ws);
}

// Sorts keys[0..n) ascending: four passes of a byte each (the keys of one
// window number in the thousands, where qsort's calls dominate).
static void radix_sort(uint32_t *keys, uint32_t *tmp, size_t n) {
    uint32_t *from = keys, *to = tmp;
    for (unsigned shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((from[i] >> shift) & 0xffu) + 1]++;
        if (count[1] == n) continue;  // every key has this byte 0: nothing moves
        for (size_t b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) to[count[(from[i] >> shift) & 0xffu]++] = from[i];
        uint32_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != keys) memcpy(keys, from, n * sizeof *keys);
}

// Sparse keys[0..nk) sorted, then the dense part after them.
static size_t with_dense_part(working_set_t *ws, size_t nk, uint32_t *keys) {
    radix_sort(keys, ws->sort_tmp, nk);
    for (size_t j = ws->key_n; j < ws->n; j++) keys[nk++] = (uint32_t)j;
    return nk;
}

size_t working_set_sparse_keys(working_set_t *ws, const uint32_t *examples, size_t count, uint32_t *keys) {
    size_t nk = model_sparse_keys(ws->model, examples, count, ws->mark, keys);
    radix_sort(keys, ws->sort_tmp, nk);
    return nk;
}

size_t working_set_keys(working_set_t *ws, const uint32_t *examples, size_t count, uint32_t *keys) {
    return with_dense_part(ws, model_sparse_keys(ws->model, examples, count, ws->mark, keys), keys);
}

size_t working_set_test_keys(working_set_t *ws, const uint32_t *examples, size_t count, uint32_t *keys) {
    return with_dense_part(ws, model_sparse_test_keys(ws->model, examples, count, ws->mark, keys), keys);
}

// Appends the examples of steps [from, to) of order o; 0 when they would not fit.
static int gather(working_set_t *ws, train_order_t *o, uint64_t from, uint64_t to, size_t *count) {
    for (uint64_t s = from; s < to; s++) {
        size_t k;
        const uint32_t *ex = train_order_step(o, s, &k);
        if (!ex || k > ws->cap - *count) return 0;  // NULL: a step the order has left behind
        memcpy(ws->examples + *count, ex, k * sizeof *ex);
        *count += k;
    }
    return 1;
}

size_t working_set_pushed(working_set_t *ws, uint32_t *keys) {
    size_t count = 0;
    int fits = 1;
    for (size_t t = 0; t < ws->threads; t++) {
        uint64_t now = steps_of(ws, t);
        fits = fits && gather(ws, &ws->push_order[t], ws->push_from[t], now + 1, &count);
        ws->push_from[t] = now;
    }
    if (fits && !working_set_whole_cheaper(ws, count)) return working_set_keys(ws, ws->examples, count, keys);
    // Too many steps to list: every key (the push then compares the whole model).
    for (size_t j = 0; j < ws->n; j++) keys[j] = (uint32_t)j;
    return ws->n;
}

static int finished(const working_set_t *ws, size_t t) {
    return atomic_load_explicit(&ws->progress[t].finished, memory_order_acquire);
}

size_t working_set_window(working_set_t *ws, uint64_t end, uint32_t *keys, uint64_t *covered) {
    size_t active = 0;
    for (size_t t = 0; t < ws->threads; t++) active += !finished(ws, t);
    *covered = end;
    size_t count = 0;
    for (size_t t = 0; t < ws->threads && active > 0; t++) {
        uint64_t from = steps_of(ws, t);
        if (finished(ws, t) || from >= end) continue;
        // Each thread gets its share of the room, in whole steps, and at most
        // an epoch: the next window, from a later step, then finds its steps
        // in the order, which keeps one epoch behind.
        train_order_t *o = &ws->pull_order[t];
        uint64_t room = ws->cap / active / o->batch;  // at least one step
        if (room > o->per_epoch) room = o->per_epoch;
        uint64_t to = end - from > room ? from + room : end;
        size_t before = count;
        if (!gather(ws, o, from, to, &count)) {
            count = before;  // its order has left from behind: nothing of it is covered
            to = from;
        }
        if (to < *covered) *covered = to;
    }
    if (working_set_whole_cheaper(ws, count)) {
        *covered = UINT64_MAX;
        return SIZE_MAX;
    }
    return working_set_keys(ws, ws->examples, count, keys);
}
