#include "staleness/clock_table.h"

#include <stdio.h>
#include <stdlib.h>

int clock_table_init(clock_table_t *t, size_t n, char *err, size_t err_len) {
    size_t m = n ? n : 1;
    t->n = n;
    t->n_start = n;
    t->clock = calloc(m, sizeof *t->clock);
    t->joined = calloc(m, 1);
    t->left = calloc(m, 1);
    t->evicted = calloc(m, 1);
    t->pushes = calloc(m, sizeof *t->pushes);
    t->pushes_total = calloc(m, sizeof *t->pushes_total);
    if (!t->clock || !t->joined || !t->left || !t->evicted || !t->pushes || !t->pushes_total) {
        clock_table_free(t);
        snprintf(err, err_len, "out of memory for a clock table of %zu workers", n);
        return -1;
    }
    return 0;
}

void clock_table_free(clock_table_t *t) {
    free(t->clock);
    free(t->joined);
    free(t->left);
    free(t->evicted);
    free(t->pushes);
    free(t->pushes_total);
    t->clock = t->pushes = t->pushes_total = NULL;
    t->joined = t->left = t->evicted = NULL;
}

void clock_table_set_start(clock_table_t *t, size_t n_start) {
    t->n_start = n_start >= 1 && n_start <= t->n ? n_start : t->n;
}

int clock_table_is_live(const clock_table_t *t, size_t k) {
    return !t->left[k] && !t->evicted[k] && (k < t->n_start || t->joined[k]);
}

uint64_t clock_table_entry_clock(const clock_table_t *t, size_t k) {
    uint64_t m = clock_table_min_others(t, k);
    return m == UINT64_MAX ? clock_table_max(t) : m;
}

uint64_t clock_table_max(const clock_table_t *t) {
    uint64_t m = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->clock[i] > m) m = t->clock[i];
    return m;
}

uint64_t clock_table_min_others(const clock_table_t *t, size_t except) {
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < t->n; i++)
        if (i != except && clock_table_is_live(t, i) && t->clock[i] < m) m = t->clock[i];
    return m;
}

uint64_t clock_table_min(const clock_table_t *t) {
    uint64_t m = clock_table_min_others(t, t->n);
    return m == UINT64_MAX ? clock_table_max(t) : m;
}

size_t clock_table_live(const clock_table_t *t) {
    size_t live = 0;
    for (size_t i = 0; i < t->n; i++) live += clock_table_is_live(t, i);
    return live;
}
