// String labels to ids (label_dict.h).
#include "datasets/label_dict.h"

#include <stdlib.h>
#include <string.h>

void label_dict_init(label_dict_t *d) { memset(d, 0, sizeof *d); }

void label_dict_clear(label_dict_t *d) {
    d->text_len = 0;
    d->count = 0;
    if (d->slots) memset(d->slots, 0, d->n_slots * sizeof *d->slots);
}

void label_dict_free(label_dict_t *d) {
    free(d->text);
    free(d->at);
    free(d->slots);
    label_dict_init(d);
}

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int same_label(const label_dict_t *d, uint32_t id, const char *s, size_t len) {
    const char *t = d->text + d->at[id];
    return strncmp(t, s, len) == 0 && t[len] == '\0';
}

// Doubles the slot table (kept at most half full) and places every id again.
static int rehash(label_dict_t *d) {
    size_t n = d->n_slots ? d->n_slots * 2 : 64;
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    for (size_t id = 0; id < d->count; id++) {
        const char *t = d->text + d->at[id];
        size_t i = hash_bytes(t, strlen(t)) & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(d->slots);
    d->slots = slots;
    d->n_slots = n;
    return 0;
}

int32_t label_dict_id(label_dict_t *d, const char *s, size_t len) {
    if ((d->count + 1) * 2 > d->n_slots && rehash(d) != 0) return -1;
    size_t i = hash_bytes(s, len) & (d->n_slots - 1);
    for (; d->slots[i]; i = (i + 1) & (d->n_slots - 1))
        if (same_label(d, d->slots[i] - 1, s, len)) return (int32_t)(d->slots[i] - 1);
    if (d->count == d->at_cap) {
        size_t cap = d->at_cap ? d->at_cap * 2 : 16;
        size_t *at = realloc(d->at, cap * sizeof *at);
        if (!at) return -1;
        d->at = at;
        d->at_cap = cap;
    }
    if (d->text_len + len + 1 > d->text_cap) {
        size_t cap = d->text_cap ? d->text_cap : 256;
        while (cap < d->text_len + len + 1) cap *= 2;
        char *text = realloc(d->text, cap);
        if (!text) return -1;
        d->text = text;
        d->text_cap = cap;
    }
    memcpy(d->text + d->text_len, s, len);
    d->text[d->text_len + len] = '\0';
    d->at[d->count] = d->text_len;
    d->text_len += len + 1;
    d->slots[i] = (uint32_t)d->count + 1;
    return (int32_t)d->count++;
}

static int compare_ids(const void *a, const void *b, void *dict) {
    const label_dict_t *d = dict;
    return strcmp(label_dict_label(d, *(const int32_t *)a), label_dict_label(d, *(const int32_t *)b));
}

int label_dict_classes(const label_dict_t *d, char **label_text, int32_t *to_class) {
    *label_text = NULL;
    int32_t *order = malloc((d->count ? d->count : 1) * sizeof *order);
    char *text = malloc(d->text_len ? d->text_len : 1);
    if (!order || !text) {
        free(order);
        free(text);
        return -1;
    }
    for (size_t i = 0; i < d->count; i++) order[i] = (int32_t)i;
    qsort_r(order, d->count, sizeof *order, compare_ids, (void *)d);
    size_t at = 0;
    for (size_t c = 0; c < d->count; c++) {
        const char *t = label_dict_label(d, order[c]);
        size_t n = strlen(t) + 1;
        memcpy(text + at, t, n);
        at += n;
        to_class[order[c]] = (int32_t)c;
    }
    free(order);
    *label_text = text;
    return 0;
}
