#include "staleness/clock_table.h"

#include <stdio.h>
#include <stdlib.h>

int clock_table_init(clock_table_t *t, size_t n, char *err, size_t err_len) {
    t->n = n;
    t->clock = calloc(n ? n : 1, sizeof *t->clock);
    t->joined = calloc(n ? n : 1, 1);
    t->left = calloc(n ? n : 1, 1);
    t->pushes = calloc(n ? n : 1, sizeof *t->pushes);
    if (!t->clock || !t->joined || !t->left || !t->pushes) {
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
    free(t->pushes);
    t->clock = t->pushes = NULL;
    t->joined = t->left = NULL;
}

uint64_t clock_table_max(const clock_table_t *t) {
    uint64_t m = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->clock[i] > m) m = t->clock[i];
    return m;
}

uint64_t clock_table_min(const clock_table_t *t) {
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < t->n; i++)
        if (!t->left[i] && t->clock[i] < m) m = t->clock[i];
    return m == UINT64_MAX ? clock_table_max(t) : m;
}

size_t clock_table_live(const clock_table_t *t) {
    size_t live = 0;
    for (size_t i = 0; i < t->n; i++) live += !t->left[i];
    return live;
}
