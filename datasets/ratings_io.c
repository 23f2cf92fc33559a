#include "datasets/ratings_io.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/libsvm.h"  // defines: text_file_read

// Open-addressing map from a file's id to a dense id.
typedef struct id_map {
    uint64_t *keys;
    uint32_t *values;  // dense id + 1; 0 marks an empty slot
    size_t cap, count;
} id_map_t;

static uint64_t hash_id(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

static int id_map_grow(id_map_t *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *values = calloc(cap, sizeof *values);
    if (!keys || !values) {
        free(keys), free(values);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->values[i]) continue;
        size_t j = hash_id(m->keys[i]) & (cap - 1);
        while (values[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        values[j] = m->values[i];
    }
    free(m->keys), free(m->values);
    m->keys = keys, m->values = values, m->cap = cap;
    return 0;
}

// The dense id of `key`, adding it if new; -1 when out of memory.
static int64_t id_map_get(id_map_t *m, uint64_t key) {
    if ((m->count + 1) * 2 > m->cap && id_map_grow(m) != 0) return -1;
    size_t j = hash_id(key) & (m->cap - 1);
    while (m->values[j]) {
        if (m->keys[j] == key) return m->values[j] - 1;
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->values[j] = (uint32_t)++m->count;
    return (int64_t)m->count - 1;
}

static int is_separator(char c) { return c == ',' || c == '\t' || c == ' ' || c == ';'; }

// Moves past one field separator (",", tab, spaces, or "::"); 0 if none is there.
static int skip_separator(const char **p) {
    if ((*p)[0] == ':' && (*p)[1] == ':') {
        *p += 2;
        return 1;
    }
    if (!is_separator(**p)) return 0;
    while (**p == ' ' || **p == '\t') (*p)++;
    if (**p == ',' || **p == ';') {
        (*p)++;
        while (**p == ' ' || **p == '\t') (*p)++;
    }
    return 1;
}

static int parse_id(const char **p, uint64_t *id) {
    if (**p < '0' || **p > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*p, &end, 10);
    if (errno == ERANGE) return -1;
    *id = v;
    *p = end;
    return 0;
}

int ratings_load(const char *path, ratings_t *out, char *err, size_t err_len) {
    ratings_init(out);
    char *text;
    size_t text_len;
    if (text_file_read(path, &text, &text_len, err, err_len) != 0) return -1;
    id_map_t users = {0}, items = {0};
    uint32_t *u = NULL, *it = NULL;
    float *r = NULL;
    size_t n = 0, cap = 0, line = 0, content_lines = 0;
    const char *p = text, *at = NULL;
    char detail[160] = "";
    while (*p) {
        line++;
        const char *start = p;
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (*p == '\n' || *p == '#' || *p == '\0') goto next_line;
        content_lines++;
        uint64_t user, item;
        if (parse_id(&p, &user) != 0) {
            if (content_lines == 1 && (isalpha((unsigned char)*p) || *p == '"')) goto next_line;  // a header
            at = p;
            snprintf(detail, sizeof detail, "expected a user id (a non-negative integer)");
            goto fail;
        }
        if (!skip_separator(&p)) {
            at = p;
            snprintf(detail, sizeof detail, "expected a separator (',', tab, space or '::') after the user id");
            goto fail;
        }
        if (parse_id(&p, &item) != 0) {
            at = p;
            snprintf(detail, sizeof detail, "expected an item id (a non-negative integer)");
            goto fail;
        }
        if (!skip_separator(&p)) {
            at = p;
            snprintf(detail, sizeof detail, "expected a separator and a rating after the item id");
            goto fail;
        }
        char *end;
        double rating = strtod(p, &end);
        if (end == p || !isfinite(rating) || fabs(rating) > 3.0e38) {
            at = p;
            snprintf(detail, sizeof detail, "expected a finite rating, got '%.*s'", (int)strcspn(p, ",\t \r\n:"), p);
            goto fail;
        }
        p = end;
        // An optional timestamp (or anything) may follow a separator; nothing else may.
        if (*p != '\n' && *p != '\r' && *p != '\0' && !skip_separator(&p)) {
            at = p;
            snprintf(detail, sizeof detail, "unexpected '%c' after the rating", *p);
            goto fail;
        }
        int64_t du = id_map_get(&users, user), di = id_map_get(&items, item);
        if (du < 0 || di < 0) {
            at = start;
            snprintf(detail, sizeof detail, "out of memory mapping ids");
            goto fail;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint32_t *u2 = realloc(u, cap * sizeof *u);
            if (u2) u = u2;
            uint32_t *i2 = realloc(it, cap * sizeof *it);
            if (i2) it = i2;
            float *r2 = realloc(r, cap * sizeof *r);
            if (r2) r = r2;
            if (!u2 || !i2 || !r2) {
                at = start;
                snprintf(detail, sizeof detail, "out of memory after %zu ratings", n);
                goto fail;
            }
        }
        u[n] = (uint32_t)du;
        it[n] = (uint32_t)di;
        r[n] = (float)rating;
        n++;
    next_line:
        while (*p && *p != '\n') p++;
        if (*p == '\n') p++;
    }
    int rc = -1;
    if (n == 0) {
        snprintf(err, err_len, "%s: no ratings (the file is empty, all comments, or only a header)", path);
    } else if (ratings_alloc(out, n, users.count, items.count, err, err_len) == 0) {
        memcpy(out->user, u, n * sizeof *u);
        memcpy(out->item, it, n * sizeof *it);
        memcpy(out->rating, r, n * sizeof *r);
        rc = 0;
    }
    free(u), free(it), free(r), free(text);
    free(users.keys), free(users.values), free(items.keys), free(items.values);
    return rc;
fail: {
    size_t column = 1;
    for (const char *c = at; c > text && c[-1] != '\n'; c--) column++;
    snprintf(err, err_len, "%s:%zu:%zu: %s", path, line, column, detail);
    free(u), free(it), free(r), free(text);
    free(users.keys), free(users.values), free(items.keys), free(items.values);
    return -1;
}
}

int ratings_write(const char *path, const ratings_t *r, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < r->n; i++) fprintf(f, "%u,%u,%.9g\n", r->user[i], r->item[i], (double)r->rating[i]);
    int failed = ferror(f), saved = errno;
    if (fclose(f) != 0 && !failed) failed = 1, saved = errno;
    if (failed) {
        snprintf(err, err_len, "%s: writing failed: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}
