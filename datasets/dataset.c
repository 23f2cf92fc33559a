#include "datasets/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *alloc_array(size_t count, size_t size, const char *what, char *err, size_t err_len) {
    if (count == 0) count = 1;  // a valid pointer even for empty sets keeps free() paths uniform
    if (count > SIZE_MAX / size) {
        snprintf(err, err_len, "dataset: %s: %zu elements overflow size_t", what, count);
        return NULL;
    }
    void *p = malloc(count * size);
    if (!p) snprintf(err, err_len, "dataset: allocating %s (%zu bytes): %s", what, count * size, strerror(errno));
    return p;
}

void dense_dataset_init(dense_dataset_t *d) { memset(d, 0, sizeof *d); }

int dense_dataset_alloc(dense_dataset_t *d, size_t n, size_t dim, size_t n_classes, char *err, size_t err_len) {
    dense_dataset_init(d);
    if (dim != 0 && n > SIZE_MAX / dim) {
        snprintf(err, err_len, "dataset: %zu x %zu features overflow size_t", n, dim);
        return -1;
    }
    d->x = alloc_array(n * dim, sizeof *d->x, "dense features", err, err_len);
    d->y = d->x ? alloc_array(n, sizeof *d->y, "labels", err, err_len) : NULL;
    if (!d->x || !d->y) {
        dense_dataset_free(d);
        return -1;
    }
    d->n = n;
    d->dim = dim;
    d->n_classes = n_classes;
    return 0;
}

void dense_dataset_free(dense_dataset_t *d) {
    free(d->x);
    free(d->y);
    dense_dataset_init(d);
}

void sparse_dataset_init(sparse_dataset_t *d) { memset(d, 0, sizeof *d); }

int sparse_dataset_alloc(sparse_dataset_t *d, size_t n, size_t dim, size_t nnz, char *err, size_t err_len) {
    sparse_dataset_init(d);
    d->row_ptr = alloc_array(n + 1, sizeof *d->row_ptr, "row pointers", err, err_len);
    d->col = d->row_ptr ? alloc_array(nnz, sizeof *d->col, "feature indices", err, err_len) : NULL;
    d->val = d->col ? alloc_array(nnz, sizeof *d->val, "feature values", err, err_len) : NULL;
    d->y = d->val ? alloc_array(n, sizeof *d->y, "labels", err, err_len) : NULL;
    if (!d->y) {
        sparse_dataset_free(d);
        return -1;
    }
    d->row_ptr[0] = 0;
    d->n = n;
    d->dim = dim;
    d->nnz = nnz;
    return 0;
}

void sparse_dataset_free(sparse_dataset_t *d) {
    free(d->row_ptr);
    free(d->col);
    free(d->val);
    free(d->y);
    free(d->labels);
    free(d->cls);
    free(d->label_text);
    sparse_dataset_init(d);
}

int sparse_dataset_set_classes(sparse_dataset_t *d, const int32_t *labels, size_t k, char *err, size_t err_len) {
    int32_t *l = alloc_array(k ? k : 1, sizeof *l, "class labels", err, err_len);
    int32_t *c = l ? alloc_array(d->n ? d->n : 1, sizeof *c, "classes", err, err_len) : NULL;
    if (!c) {
        free(l);
        return -1;
    }
    memcpy(l, labels, k * sizeof *l);
    free(d->labels);
    free(d->cls);
    d->labels = l;
    d->cls = c;
    d->n_classes = k;
    for (size_t i = 0; i < d->n; i++) {
        c[i] = 0;
        d->y[i] = dataset_binary_y(l, k, 0);
    }
    return 0;
}

int sparse_dataset_adopt(sparse_dataset_t *d, const char *name, char *err, size_t err_len) {
    size_t rows = d->n ? d->n : 1;  // never realloc or malloc 0 bytes
    void *t;
    // Trimmed to the counts; a failed trim keeps the larger block.
    if ((t = realloc(d->row_ptr, (d->n + 1) * sizeof *d->row_ptr))) d->row_ptr = t;
    if (d->cls && (t = realloc(d->cls, rows * sizeof *d->cls))) d->cls = t;
    if (d->nnz && (t = realloc(d->col, d->nnz * sizeof *d->col))) d->col = t;
    if (d->nnz && (t = realloc(d->val, d->nnz * sizeof *d->val))) d->val = t;
    // Valid pointers without non-zeros, as sparse_dataset_alloc gives.
    if (!d->col) d->col = malloc(sizeof *d->col);
    if (!d->val) d->val = malloc(sizeof *d->val);
    d->y = malloc(rows * sizeof *d->y);
    if (!d->row_ptr || !d->col || !d->val || !d->y || (d->cls && !d->labels)) {
        snprintf(err, err_len, "%s: out of memory", name);
        sparse_dataset_free(d);
        return -1;
    }
    for (size_t i = 0; i < d->n; i++) d->y[i] = d->cls ? dataset_binary_y(d->labels, d->n_classes, d->cls[i]) : -1.0f;
    return 0;
}

int sparse_dataset_set_label_text(sparse_dataset_t *d, const char *label_text, char *err, size_t err_len) {
    char *copy = NULL;
    if (label_text) {
        size_t bytes = dataset_label_text_bytes(label_text, d->n_classes);
        if (!(copy = alloc_array(bytes, 1, "class names", err, err_len))) return -1;
        memcpy(copy, label_text, bytes);
    }
    free(d->label_text);
    d->label_text = copy;
    return 0;
}

// The class among labels[0..k) (label_text their names, or NULL) of d's class c; -1 when absent.
static int32_t class_among(const sparse_dataset_t *d, size_t c, const int32_t *labels, const char *const *names,
                           size_t k) {
    if (!names != !d->label_text) return -1;  // names and integers never match
    if (!names) return dataset_label_class(labels, k, d->labels[c]);
    const char *mine = d->label_text;
    for (size_t i = 0; i < c; i++) mine += strlen(mine) + 1;
    return dataset_label_name_class(names, k, mine);
}

int sparse_dataset_remap(sparse_dataset_t *d, const int32_t *labels, const char *label_text, size_t k, const char *name,
                         char *err, size_t err_len) {
    if (!d->cls) return 0;
    int32_t map[DATASET_MAX_CLASSES];
    const char *names[DATASET_MAX_CLASSES];
    if (label_text) dataset_label_names(label_text, k, names);
    for (size_t c = 0; c < d->n_classes && c < DATASET_MAX_CLASSES; c++) {
        map[c] = class_among(d, c, labels, label_text ? names : NULL, k);
        if (map[c] < 0) {
            char mine[64], known[160];
            if (d->label_text) {
                const char *n = d->label_text;
                for (size_t i = 0; i < c; i++) n += strlen(n) + 1;
                snprintf(mine, sizeof mine, "'%.40s'", n);
            } else {
                snprintf(mine, sizeof mine, "%d", (int)d->labels[c]);
            }
            if (label_text)
                dataset_label_names_text(label_text, k, known, sizeof known);
            else
                dataset_labels_text(labels, k, known, sizeof known);
            snprintf(err, err_len, "%s: label %s is not among the model's labels (%s)", name, mine, known);
            return -1;
        }
    }
    int32_t *copy = alloc_array(k ? k : 1, sizeof *copy, "class labels", err, err_len);
    if (!copy) return -1;
    memcpy(copy, labels, k * sizeof *copy);
    for (size_t i = 0; i < d->n; i++) {
        d->cls[i] = map[d->cls[i]];
        d->y[i] = dataset_binary_y(copy, k, d->cls[i]);
    }
    free(d->labels);
    d->labels = copy;
    d->n_classes = k;
    return sparse_dataset_set_label_text(d, label_text, err, err_len);
}

// The first of labels[0..k) (ascending) not below label: k when none is.
static size_t first_not_below(const int32_t *labels, size_t k, int32_t label) {
    size_t lo = 0, hi = k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (labels[mid] < label)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int32_t dataset_label_class(const int32_t *labels, size_t k, int32_t label) {
    size_t at = first_not_below(labels, k, label);
    return at < k && labels[at] == label ? (int32_t)at : -1;
}

static int compare_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

// The first of sorted[0..k) not below v. For a few (most files have 2 to 10
// classes, in no order a branch predictor could learn) the ones below are
// counted without a branch on v; for more, halving.
static size_t rank_among(const int32_t *sorted, size_t k, int32_t v) {
    if (k > 16) return first_not_below(sorted, k, v);
    size_t below = 0;
    for (size_t j = 0; j < k; j++) below += sorted[j] < v;
    return below;
}

// The distinct values of raw[0..n) into sorted (ascending, room for cap):
// their count, or cap + 1 when there are more. One pass and a search among the
// few found, where sorting all n would cost n log n.
static size_t distinct_few(const int32_t *raw, size_t n, int32_t *sorted, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t at = rank_among(sorted, k, raw[i]);
        if (at < k && sorted[at] == raw[i]) continue;
        if (k == cap) return cap + 1;
        memmove(sorted + at + 1, sorted + at, (k - at) * sizeof *sorted);
        sorted[at] = raw[i];
        k++;
    }
    return k;
}

int dataset_classes_of(const char *name, int32_t *raw, size_t n, int32_t **labels, size_t *k, char *err,
                       size_t err_len) {
    *labels = NULL;
    *k = 0;
    int32_t *sorted = alloc_array(DATASET_MAX_CLASSES, sizeof *sorted, "class labels", err, err_len);
    if (!sorted) return -1;
    size_t distinct = distinct_few(raw, n, sorted, DATASET_MAX_CLASSES);
    if (distinct > DATASET_MAX_CLASSES) {
        // Too many: all of them, sorted, for the message (their count and the first few).
        int32_t *all = alloc_array(n, sizeof *all, "class labels", err, err_len);
        free(sorted);
        if (!all) return -1;
        memcpy(all, raw, n * sizeof *all);
        qsort(all, n, sizeof *all, compare_i32);
        distinct = 0;
        for (size_t i = 0; i < n; i++)
            if (i == 0 || all[i] != all[distinct - 1]) all[distinct++] = all[i];
        char shown[160];
        dataset_labels_text(all, distinct, shown, sizeof shown);
        snprintf(err, err_len,
                 "%s: %zu distinct labels (%s); at most %d classes are read (labels are class ids, "
                 "not values to regress on)",
                 name, distinct, shown, DATASET_MAX_CLASSES);
        free(all);
        return -1;
    }
    for (size_t i = 0; i < n; i++) raw[i] = (int32_t)rank_among(sorted, distinct, raw[i]);  // every one is there
    int32_t *t = realloc(sorted, (distinct ? distinct : 1) * sizeof *t);
    *labels = t ? t : sorted;
    *k = distinct;
    return 0;
}

float dataset_binary_y(const int32_t *labels, size_t k, int32_t cls) {
    if (k == 2) return cls ? 1.0f : -1.0f;
    return labels[cls] > 0 ? 1.0f : -1.0f;
}

size_t dataset_label_text_bytes(const char *label_text, size_t k) {
    const char *p = label_text;
    for (size_t i = 0; i < k; i++) p += strlen(p) + 1;
    return (size_t)(p - label_text);
}

void dataset_label_names(const char *label_text, size_t k, const char **names) {
    for (size_t i = 0; i < k; i++, label_text += strlen(label_text) + 1) names[i] = label_text;
}

int32_t dataset_label_name_class(const char *const *names, size_t k, const char *name) {
    size_t lo = 0, hi = k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(names[mid], name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k && strcmp(names[lo], name) == 0 ? (int32_t)lo : -1;
}

void dataset_label_names_text(const char *label_text, size_t k, char *out, size_t out_len) {
    size_t at = 0;
    if (out_len) out[0] = '\0';
    for (size_t i = 0; i < k && at < out_len; i++, label_text += strlen(label_text) + 1) {
        int w = i == 16 ? snprintf(out + at, out_len - at, ", ...")
                        : snprintf(out + at, out_len - at, "%s'%.40s'", i ? ", " : "", label_text);
        if (w < 0 || i == 16) return;
        at += (size_t)w;
    }
}

void sparse_dataset_labels_text(const sparse_dataset_t *d, char *out, size_t out_len) {
    if (d->label_text)
        dataset_label_names_text(d->label_text, d->n_classes, out, out_len);
    else
        dataset_labels_text(d->labels, d->n_classes, out, out_len);
}

void dataset_labels_text(const int32_t *labels, size_t k, char *out, size_t out_len) {
    size_t at = 0;
    if (out_len) out[0] = '\0';
    for (size_t i = 0; i < k && at < out_len; i++) {
        int w = i == 16 ? snprintf(out + at, out_len - at, ", ...")
                        : snprintf(out + at, out_len - at, "%s%d", i ? ", " : "", labels[i]);
        if (w < 0) return;
        at += (size_t)w;
        if (i == 16) return;
    }
}

void ratings_init(ratings_t *r) { memset(r, 0, sizeof *r); }

int ratings_alloc(ratings_t *r, size_t n, size_t n_users, size_t n_items, char *err, size_t err_len) {
    ratings_init(r);
    r->user = alloc_array(n, sizeof *r->user, "user ids", err, err_len);
    r->item = r->user ? alloc_array(n, sizeof *r->item, "item ids", err, err_len) : NULL;
    r->rating = r->item ? alloc_array(n, sizeof *r->rating, "ratings", err, err_len) : NULL;
    if (!r->rating) {
        ratings_free(r);
        return -1;
    }
    r->n = n;
    r->n_users = n_users;
    r->n_items = n_items;
    return 0;
}

void ratings_free(ratings_t *r) {
    free(r->user);
    free(r->item);
    free(r->rating);
    ratings_init(r);
}

static int check_indices(const uint32_t *idx, size_t count, size_t n, char *err, size_t err_len) {
    for (size_t i = 0; i < count; i++) {
        if (idx[i] >= n) {
            snprintf(err, err_len, "dataset subset: index %u at position %zu is out of range (set has %zu examples)",
                     idx[i], i, n);
            return -1;
        }
    }
    return 0;
}

int sparse_dataset_subset(const sparse_dataset_t *src, const uint32_t *idx, size_t count, sparse_dataset_t *dst,
                          char *err, size_t err_len) {
    if (check_indices(idx, count, src->n, err, err_len) != 0) return -1;
    size_t nnz = 0;
    for (size_t i = 0; i < count; i++) nnz += src->row_ptr[idx[i] + 1] - src->row_ptr[idx[i]];
    if (sparse_dataset_alloc(dst, count, src->dim, nnz, err, err_len) != 0) return -1;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        size_t begin = src->row_ptr[idx[i]], len = src->row_ptr[idx[i] + 1] - begin;
        memcpy(dst->col + at, src->col + begin, len * sizeof *src->col);
        memcpy(dst->val + at, src->val + begin, len * sizeof *src->val);
        at += len;
        dst->row_ptr[i + 1] = at;
        dst->y[i] = src->y[idx[i]];
    }
    if (src->cls) {
        if (sparse_dataset_set_classes(dst, src->labels, src->n_classes, err, err_len) != 0 ||
            sparse_dataset_set_label_text(dst, src->label_text, err, err_len) != 0) {
            sparse_dataset_free(dst);
            return -1;
        }
        for (size_t i = 0; i < count; i++) {
            dst->cls[i] = src->cls[idx[i]];
            dst->y[i] = src->y[idx[i]];
        }
    }
    return 0;
}

int ratings_subset(const ratings_t *src, const uint32_t *idx, size_t count, ratings_t *dst, char *err, size_t err_len) {
    if (check_indices(idx, count, src->n, err, err_len) != 0) return -1;
    if (ratings_alloc(dst, count, src->n_users, src->n_items, err, err_len) != 0) return -1;
    for (size_t i = 0; i < count; i++) {
        dst->user[i] = src->user[idx[i]];
        dst->item[i] = src->item[idx[i]];
        dst->rating[i] = src->rating[idx[i]];
    }
    return 0;
}
