#include "datasets/libsvm.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int text_file_read(const char *path, char **out, size_t *out_len, char *err, size_t err_len) {
    *out = NULL;
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len + 1 >= cap) {
            char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    if (!buf) {
        snprintf(err, err_len, "%s: out of memory reading the file", path);
        fclose(f);
        return -1;
    }
    if (ferror(f)) {
        snprintf(err, err_len, "%s: read error: %s", path, strerror(errno));
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    buf[len] = '\0';
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        size_t line = 1;
        for (const char *c = buf; c < nul; c++) line += *c == '\n';
        snprintf(err, err_len, "%s:%zu: NUL byte in a text file (is it binary or compressed?)", path, line);
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

// Growable arrays for the parse; freed on any error.
typedef struct parse_state {
    size_t *row_ptr;
    float *y;
    uint32_t *col;
    float *val;
    size_t rows, nnz;
    size_t row_ptr_cap, y_cap, col_cap, val_cap;
} parse_state_t;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t bigger = *cap ? *cap : 1024;
    while (bigger < need) bigger *= 2;
    void *q = realloc(*p, bigger * elem);
    if (!q) return -1;
    *p = q;
    *cap = bigger;
    return 0;
}

static void state_free(parse_state_t *s) {
    free(s->row_ptr);
    free(s->y);
    free(s->col);
    free(s->val);
    memset(s, 0, sizeof *s);
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static int ends_token(char c) { return c == '\0' || c == '\n' || c == '#' || is_blank(c); }
static int token_length(const char *p) {
    int n = 0;
    while (!ends_token(p[n]) && n < 40) n++;
    return n ? n : 1;
}

// A parse error at position `at` of the current line, as "file:line:column: detail".
typedef struct parse_error {
    const char *at;
    char detail[200];
} parse_error_t;

#define PARSE_FAIL(e, where, ...)                               \
    do {                                                        \
        (e)->at = (where);                                      \
        snprintf((e)->detail, sizeof (e)->detail, __VA_ARGS__); \
        return -1;                                              \
    } while (0)

// Parses the features of one line starting at *pp; appends them to s.
static int parse_features(const char **pp, size_t dim, parse_state_t *s, size_t *max_index, parse_error_t *e) {
    const char *p = *pp;
    size_t prev = 0;
    int first_token = 1;
    for (;;) {
        while (is_blank(*p)) p++;
        if (*p == '\0' || *p == '\n' || *p == '#') break;
        const char *tok = p;
        if (first_token && strncmp(p, "qid:", 4) == 0) {
            p += 4;
            while (!ends_token(*p)) p++;
            first_token = 0;
            continue;
        }
        first_token = 0;
        if (*p < '0' || *p > '9')
            PARSE_FAIL(e, tok, "expected a feature index (a positive integer), got '%.*s'", token_length(tok), tok);
        char *end;
        errno = 0;
        unsigned long long index = strtoull(p, &end, 10);
        if (errno == ERANGE || index > UINT32_MAX)
            PARSE_FAIL(e, tok, "feature index %.*s is too large (at most %u)", (int)(end - tok), tok, UINT32_MAX);
        if (index == 0) PARSE_FAIL(e, tok, "feature index 0 (indices are 1-based)");
        if (*end != ':') PARSE_FAIL(e, end, "expected ':' after feature index %llu", index);
        if (index == prev) PARSE_FAIL(e, tok, "feature index %llu is a duplicate", index);
        if (index < prev)
            PARSE_FAIL(e, tok, "feature index %llu comes after %zu; indices must be strictly increasing", index, prev);
        if (dim > 0 && index > dim) PARSE_FAIL(e, tok, "feature index %llu is beyond the %zu features declared", index, dim);
        const char *value_at = end + 1;
        if (ends_token(*value_at)) PARSE_FAIL(e, value_at, "expected a value after '%llu:'", index);
        errno = 0;
        double value = strtod(value_at, &end);
        if (end == value_at || !ends_token(*end))
            PARSE_FAIL(e, value_at, "expected a number, got '%.*s'", token_length(value_at), value_at);
        if (!isfinite(value) || fabs(value) > FLT_MAX)
            PARSE_FAIL(e, value_at, "value %.*s is not a finite float", (int)(end - value_at), value_at);
        if (grow((void **)&s->col, &s->col_cap, s->nnz + 1, sizeof *s->col) != 0 ||
            grow((void **)&s->val, &s->val_cap, s->nnz + 1, sizeof *s->val) != 0)
            PARSE_FAIL(e, tok, "out of memory after %zu values", s->nnz);
        s->col[s->nnz] = (uint32_t)(index - 1);
        s->val[s->nnz] = (float)value;
        s->nnz++;
        prev = (size_t)index;
        if (prev > *max_index) *max_index = prev;
        p = end;
    }
    *pp = p;
    return 0;
}

int libsvm_load(const char *path, size_t dim, sparse_dataset_t *out, char *err, size_t err_len) {
    sparse_dataset_init(out);
    char *text;
    size_t text_len;
    if (text_file_read(path, &text, &text_len, err, err_len) != 0) return -1;
    parse_state_t s;
    memset(&s, 0, sizeof s);
    parse_error_t e = {NULL, ""};
    size_t line = 0, max_index = 0, convention_line = 0;
    int convention = 0;  // 1: {-1,+1}, 2: {0,1}
    const char *p = text;
    while (*p) {
        line++;
        while (is_blank(*p)) p++;
        if (*p != '\n' && *p != '#' && *p != '\0') {
            char *end;
            double label = strtod(p, &end);
            if (end == p || !ends_token(*end)) {
                e.at = p;
                snprintf(e.detail, sizeof e.detail, "expected a label (-1, +1, 0 or 1), got '%.*s'", token_length(p), p);
                goto fail;
            }
            int this_convention = label == -1.0 ? 1 : label == 0.0 ? 2 : 0;
            if (label != 1.0 && !this_convention) {
                e.at = p;
                snprintf(e.detail, sizeof e.detail, "label %.*s is not -1, +1, 0 or 1", (int)(end - p), p);
                goto fail;
            }
            if (this_convention && convention && convention != this_convention) {
                e.at = p;
                snprintf(e.detail, sizeof e.detail, "label %.*s mixes the {-1,+1} and {0,1} conventions (line %zu used the other)",
                         (int)(end - p), p, convention_line);
                goto fail;
            }
            if (this_convention) convention = this_convention, convention_line = line;
            if (grow((void **)&s.y, &s.y_cap, s.rows + 1, sizeof *s.y) != 0 ||
                grow((void **)&s.row_ptr, &s.row_ptr_cap, s.rows + 2, sizeof *s.row_ptr) != 0) {
                e.at = p;
                snprintf(e.detail, sizeof e.detail, "out of memory after %zu examples", s.rows);
                goto fail;
            }
            if (s.rows == 0) s.row_ptr[0] = 0;
            s.y[s.rows] = label > 0.0 ? 1.0f : -1.0f;
            p = end;
            if (parse_features(&p, dim, &s, &max_index, &e) != 0) goto fail;
            s.rows++;
            s.row_ptr[s.rows] = s.nnz;
        }
        while (*p && *p != '\n') p++;
        if (*p == '\n') p++;
    }
    if (s.rows == 0) {
        snprintf(err, err_len, "%s: no examples (the file is empty or all comments)", path);
        state_free(&s);
        free(text);
        return -1;
    }
    int rc = sparse_dataset_alloc(out, s.rows, dim ? dim : max_index, s.nnz, err, err_len);
    if (rc == 0) {
        memcpy(out->row_ptr, s.row_ptr, (s.rows + 1) * sizeof *s.row_ptr);
        memcpy(out->y, s.y, s.rows * sizeof *s.y);
        if (s.nnz) {
            memcpy(out->col, s.col, s.nnz * sizeof *s.col);
            memcpy(out->val, s.val, s.nnz * sizeof *s.val);
        }
    }
    state_free(&s);
    free(text);
    return rc;
fail: {
    size_t column = 1;
    for (const char *c = e.at; c > text && c[-1] != '\n'; c--) column++;
    snprintf(err, err_len, "%s:%zu:%zu: %s", path, line, column, e.detail);
    state_free(&s);
    free(text);
    return -1;
}
}

int libsvm_write(const char *path, const sparse_dataset_t *d, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < d->n; i++) {
        fputs(d->y[i] > 0 ? "+1" : "-1", f);
        for (size_t k = d->row_ptr[i]; k < d->row_ptr[i + 1]; k++) fprintf(f, " %u:%.9g", d->col[k] + 1, (double)d->val[k]);
        fputc('\n', f);
    }
    int failed = ferror(f);
    int saved = errno;
    if (fclose(f) != 0 && !failed) failed = 1, saved = errno;
    if (failed) {
        snprintf(err, err_len, "%s: writing failed: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}
