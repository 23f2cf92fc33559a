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
    sparse_dataset_init(d);
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
            snprintf(err, err_len, "dataset subset: index %u at position %zu is out of range (set has %zu examples)", idx[i], i, n);
            return -1;
        }
    }
    return 0;
}

int sparse_dataset_subset(const sparse_dataset_t *src, const uint32_t *idx, size_t count, sparse_dataset_t *dst, char *err, size_t err_len) {
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
