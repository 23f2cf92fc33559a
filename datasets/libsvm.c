#include "datasets/libsvm.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/text_io.h"  // defines: text_reader_*, text_parse_double, text_format_float, text_show_char

// The largest double that still rounds to a finite float (FLT_MAX plus half an
// ulp, exclusive: the tie rounds to even, which is infinity). Comparing with this
// instead of FLT_MAX lets "%.9g" of FLT_MAX (3.40282347e+38) read back.
#define FLOAT_ROUNDS_FINITE_BELOW 0x1.ffffffp+127

// ---- the parser ----

// "1e999" overflows to infinity in strtod; "inf" is infinity. They get different messages.
static int spelled_in_digits(const char *p) {
    if (*p == '+' || *p == '-') p++;
    return text_is_digit(*p) || *p == '.';
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static int ends_token(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '#' || c == '\0'; }

// A token for an error message: at most 32 bytes, non-printable bytes as '?'.
static const char *show_token(const char *p, char buf[48]) {
    size_t n = 0;
    while (n < 32 && !ends_token(p[n])) {
        unsigned char c = (unsigned char)p[n];
        buf[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (n == 32 && !ends_token(p[n])) memcpy(buf + n, "...", 3), n += 3;
    buf[n] = '\0';
    return buf;
}


// The examples read so far, in growable arrays.
typedef struct parse_state {
    size_t *row_ptr;  // (rows + 1)
    float *y;         // (rows)
    int32_t *cls;     // (rows) the label, or with a given mapping its class
    uint32_t *col;    // (nnz)
    float *val;       // (nnz)
    size_t rows, nnz, row_cap, nnz_cap;
} parse_state_t;

static void state_free(parse_state_t *s) {
    free(s->row_ptr);
    free(s->y);
    free(s->cls);
    free(s->col);
    free(s->val);
    memset(s, 0, sizeof *s);
}

// Doubles *cap (at least to `need`) and reallocates the arrays of that capacity.
static int grow_pair(void **a, size_t a_elem, void **b, size_t b_elem, size_t *cap, size_t need) {
    size_t bigger = *cap ? *cap : 4096;
    while (bigger < need) {
        if (bigger > SIZE_MAX / 2) return -1;
        bigger *= 2;
    }
    if (bigger > SIZE_MAX / 8) return -1;  // 8 >= the largest element size
    void *na = realloc(*a, bigger * a_elem);
    if (!na) return -1;
    *a = na;
    void *nb = realloc(*b, bigger * b_elem);
    if (!nb) return -1;
    *b = nb;
    *cap = bigger;
    return 0;
}

// Where and why a line failed.
typedef struct parse_error {
    const char *at;
    char detail[256];
} parse_error_t;

#define FAIL_AT(where, ...)                                      \
    do {                                                         \
        e->at = (where);                                         \
        snprintf(e->detail, sizeof e->detail, __VA_ARGS__);     \
        return -1;                                               \
    } while (0)

// Parses the features after the label, from *pp up to the end of the line or a
// comment, appending them to s; *pp is left there.
// With `beyond` (prediction), an index above dim is skipped and counted there
// instead of refused.
static int parse_features(const char **pp, size_t dim, size_t *beyond, parse_state_t *s, size_t *max_index,
                          parse_error_t *e) {
    const char *p = *pp;
    char shown[48];
    uint64_t prev = 0;
    for (int first = 1;; first = 0) {
        while (is_blank(*p)) p++;
        if (*p == '\n' || *p == '#' || *p == '\0') break;
        const char *tok = p;
        if (first && strncmp(p, "qid:", 4) == 0) {
            const char *q = p + 4;
            if (!text_is_digit(*q)) FAIL_AT(q, "expected a query id (digits) after 'qid:', got %s", text_show_char(q, shown));
            while (text_is_digit(*q)) q++;
            if (!ends_token(*q)) FAIL_AT(q, "expected a space after the query id, got %s", text_show_char(q, shown));
            p = q;
            continue;
        }
        if (!text_is_digit(*p))
            FAIL_AT(tok, "expected a feature index (an integer >= 1) followed by ':', got '%s'", show_token(tok, shown));
        uint64_t index = 0;
        for (; text_is_digit(*p); p++) {
            index = index * 10 + (uint64_t)(*p - '0');
            if (index > LIBSVM_MAX_DIM && beyond && dim > 0) {  // beyond any width: skipped below
                while (text_is_digit(*p)) p++;
                index = LIBSVM_MAX_DIM + 1;
                break;
            }
            if (index > LIBSVM_MAX_DIM) {
                while (text_is_digit(*p)) p++;
                FAIL_AT(tok, "feature index %.*s is too large (at most %zu features)", (int)(p - tok < 40 ? p - tok : 40), tok,
                        LIBSVM_MAX_DIM);
            }
        }
        if (*p != ':') FAIL_AT(p, "expected ':' after feature index %llu, got %s", (unsigned long long)index, text_show_char(p, shown));
        if (index == 0) FAIL_AT(tok, "feature index 0 (indices are 1-based)");
        if (index == prev)
            FAIL_AT(tok, "duplicate feature index %llu (indices must be strictly increasing)", (unsigned long long)index);
        if (index < prev)
            FAIL_AT(tok, "feature index %llu after %llu (indices must be strictly increasing)", (unsigned long long)index,
                    (unsigned long long)prev);
        int skip = beyond && dim > 0 && index > dim;
        if (dim > 0 && index > dim && !skip)
            FAIL_AT(tok, "feature index %llu is beyond dim %zu", (unsigned long long)index, dim);
        const char *value_at = p + 1;
        if (ends_token(*value_at))
            FAIL_AT(value_at, "expected a value after '%llu:', got %s", (unsigned long long)index, text_show_char(value_at, shown));
        double value;
        const char *end = text_parse_double(value_at, &value);
        if (end == value_at || !ends_token(*end))
            FAIL_AT(value_at, "expected a number after '%llu:', got '%s'", (unsigned long long)index, show_token(value_at, shown));
        if (isnan(value) || (isinf(value) && !spelled_in_digits(value_at)))
            FAIL_AT(value_at, "value '%s' is not finite", show_token(value_at, shown));
        if (fabs(value) >= FLOAT_ROUNDS_FINITE_BELOW)
            FAIL_AT(value_at, "value '%s' is out of float range (|value| <= 3.40282347e+38)", show_token(value_at, shown));
        prev = index;
        p = end;
        if (skip) {
            (*beyond)++;
            continue;
        }
        if (s->nnz == s->nnz_cap &&
            grow_pair((void **)&s->col, sizeof *s->col, (void **)&s->val, sizeof *s->val, &s->nnz_cap, s->nnz + 1) != 0)
            FAIL_AT(tok, "out of memory after %zu non-zeros", s->nnz);
        s->col[s->nnz] = (uint32_t)(index - 1);
        s->val[s->nnz] = (float)value;
        s->nnz++;
    }
    if (prev > *max_index) *max_index = (size_t)prev;
    *pp = p;
    return 0;
}

// The training set's classes, when a second file must use them; or, for
// prediction, no classes at all.
typedef struct label_map {
    const int32_t *labels;  // ascending; NULL: the file's own labels make the classes
    size_t k;
    int unlabelled;         // labels optional and not kept (libsvm_load_unlabelled)
    size_t *beyond;         // unlabelled: features above dim, skipped and counted here
} label_map_t;

// Whether a line's first token is a feature ("7:0.5", "qid:3") rather than a label.
static int starts_with_feature(const char *p) {
    if (strncmp(p, "qid:", 4) == 0) return 1;
    while (text_is_digit(*p)) p++;
    return *p == ':';
}

// An unlabelled file's label, when a line has one: any number, skipped.
static int skip_label(const char *p, const char **end_out, parse_error_t *e) {
    char shown[48];
    double value;
    const char *end = text_parse_double(p, &value);
    if (end == p || !ends_token(*end))
        FAIL_AT(p, "expected a label (a number) or a feature (index:value), got '%s'", show_token(p, shown));
    *end_out = end;
    return 0;
}

// Reads an integer label into *label, or with a mapping its class.
static int parse_label(const char *p, const char **end_out, int32_t *label, const label_map_t *map, parse_error_t *e) {
    char shown[48];
    double value;
    const char *end = text_parse_double(p, &value);
    if (end == p || !ends_token(*end))
        FAIL_AT(p, "expected a label (an integer class id, such as -1, +1, 0, 1 or 7), got '%s'", show_token(p, shown));
    if (!(value == floor(value) && value >= -2147483648.0 && value <= 2147483647.0))
        FAIL_AT(p, "label '%s' is not an integer (labels are class ids)", show_token(p, shown));
    *label = (int32_t)value;
    if (map->labels) {
        int32_t c = dataset_label_class(map->labels, map->k, *label);
        if (c < 0) {
            char known[160];
            dataset_labels_text(map->labels, map->k, known, sizeof known);
            FAIL_AT(p, "label %d is not among the training data's labels (%s)", (int)*label, known);
        }
        *label = c;
    }
    *end_out = end;
    return 0;
}

// Parses everything the reader holds into out and closes the reader.
static int parse_all(text_reader_t *reader, const char *path, size_t dim, const label_map_t *map,
                     sparse_dataset_t *out, char *err, size_t err_len) {
    if (dim > LIBSVM_MAX_DIM) {
        snprintf(err, err_len, "%s: a dimension of %zu features is more than the %zu accepted", path, dim, LIBSVM_MAX_DIM);
        text_reader_close(reader);
        return -1;
    }
    parse_state_t s;
    memset(&s, 0, sizeof s);
    parse_error_t e = {NULL, ""};
    size_t line = 0, max_index = 0, block_len;
    int got;
    const char *block, *line_start = NULL;
    void *t;
    for (int first = 1; (got = text_reader_next(reader, &block, &block_len, err, err_len)) == 1; first = 0) {
        const char *p = block, *block_end = block + block_len;
        if (first && strncmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;  // a UTF-8 byte order mark
        while (p < block_end) {
            line++;
            line_start = p;
            while (is_blank(*p)) p++;
            if (*p != '\n' && *p != '#' && *p != '\0') {
                if (s.rows + 2 > s.row_cap &&
                    (grow_pair((void **)&s.row_ptr, sizeof *s.row_ptr, (void **)&s.y, sizeof *s.y, &s.row_cap, s.rows + 2) != 0 ||
                     !(t = realloc(s.cls, s.row_cap * sizeof *s.cls)) || !(s.cls = t))) {
                    e.at = p;
                    snprintf(e.detail, sizeof e.detail, "out of memory after %zu examples", s.rows);
                    goto fail;
                }
                if (map->unlabelled) {
                    if (!starts_with_feature(p) && skip_label(p, &p, &e) != 0) goto fail;
                    s.cls[s.rows] = 0;
                } else if (parse_label(p, &p, &s.cls[s.rows], map, &e) != 0) {
                    goto fail;
                }
                if (parse_features(&p, dim, map->beyond, &s, &max_index, &e) != 0) goto fail;
                s.row_ptr[0] = 0;
                s.rows++;
                s.row_ptr[s.rows] = s.nnz;
            }
            while (*p && *p != '\n') p++;  // the rest is a comment (or nothing)
            if (p < block_end && *p == '\0') {
                e.at = p;
                snprintf(e.detail, sizeof e.detail, "NUL byte in a text file (is it binary?)");
                goto fail;
            }
            if (*p == '\n') p++;
        }
    }
    text_reader_close(reader);
    if (got < 0) {
        state_free(&s);
        return -1;
    }
    if (s.rows == 0) {
        snprintf(err, err_len, "%s: no examples (the file is empty or has only comments and blank lines)", path);
        state_free(&s);
        return -1;
    }
    // Labels to classes: the given mapping's (already applied), or the file's
    // own; none for an unlabelled read (y only, -1, as a generated set's).
    int32_t *labels = NULL;
    size_t k = map->k;
    if (map->unlabelled) {
        for (size_t i = 0; i < s.rows; i++) s.y[i] = -1.0f;
        free(s.cls);
        s.cls = NULL;
        k = 0;
    } else if (map->labels) {
        labels = malloc(k * sizeof *labels);
        if (labels) memcpy(labels, map->labels, k * sizeof *labels);
    } else if (dataset_classes_of(path, s.cls, s.rows, &labels, &k, err, err_len) != 0) {
        state_free(&s);
        return -1;
    }
    if (!labels && !map->unlabelled) {
        snprintf(err, err_len, "%s: out of memory", path);
        state_free(&s);
        return -1;
    }
    for (size_t i = 0; labels && i < s.rows; i++) s.y[i] = dataset_binary_y(labels, k, s.cls[i]);
    // Hand the parse arrays over, trimmed to size (a failed trim keeps the larger block).
    if ((t = realloc(s.row_ptr, (s.rows + 1) * sizeof *s.row_ptr))) s.row_ptr = t;
    if ((t = realloc(s.y, s.rows * sizeof *s.y))) s.y = t;
    if (s.cls && (t = realloc(s.cls, s.rows * sizeof *s.cls))) s.cls = t;
    if (s.nnz == 0) {
        // Examples without features: keep valid pointers, as sparse_dataset_alloc does.
        if ((!s.col && !(s.col = malloc(sizeof *s.col))) || (!s.val && !(s.val = malloc(sizeof *s.val)))) {
            snprintf(err, err_len, "%s: out of memory", path);
            state_free(&s);
            free(labels);
            return -1;
        }
    } else {
        if ((t = realloc(s.col, s.nnz * sizeof *s.col))) s.col = t;
        if ((t = realloc(s.val, s.nnz * sizeof *s.val))) s.val = t;
    }
    out->n = s.rows;
    out->dim = dim ? dim : max_index;
    out->nnz = s.nnz;
    out->row_ptr = s.row_ptr;
    out->col = s.col;
    out->val = s.val;
    out->y = s.y;
    out->cls = s.cls;
    out->labels = labels;
    out->n_classes = k;
    return 0;
fail:
    snprintf(err, err_len, "%s:%zu:%zu: %s", path, line, (size_t)(e.at - line_start) + 1, e.detail);
    text_reader_close(reader);
    state_free(&s);
    return -1;
}

int libsvm_load(const char *path, size_t dim, sparse_dataset_t *out, char *err, size_t err_len) {
    return libsvm_load_mapped(path, dim, NULL, 0, out, err, err_len);
}

int libsvm_load_mapped(const char *path, size_t dim, const int32_t *labels, size_t k, sparse_dataset_t *out,
                       char *err, size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    label_map_t map = {labels, labels ? k : 0, 0, NULL};
    return parse_all(&reader, path, dim, &map, out, err, err_len);
}

int libsvm_load_unlabelled(const char *path, size_t dim, sparse_dataset_t *out, size_t *beyond, char *err,
                           size_t err_len) {
    sparse_dataset_init(out);
    *beyond = 0;
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    label_map_t map = {NULL, 0, 1, beyond};
    return parse_all(&reader, path, dim, &map, out, err, err_len);
}

int libsvm_parse(const char *name, const char *text, size_t len, size_t dim, sparse_dataset_t *out, char *err,
                 size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open_memory(&reader, name, text, len, err, err_len) != 0) return -1;
    label_map_t map = {NULL, 0, 0, NULL};
    return parse_all(&reader, name, dim, &map, out, err, err_len);
}

// ---- the writer ----

static int format_u64(uint64_t x, char *out) {
    char tmp[24];
    int n = 0;
    do tmp[n++] = (char)('0' + x % 10), x /= 10;
    while (x);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

int libsvm_write(const char *path, const sparse_dataset_t *d, char *err, size_t err_len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    enum { BUF = 1 << 20, ROOM = 64 };  // ROOM: more than one " index:value"
    char *buf = malloc(BUF);
    if (!buf) {
        snprintf(err, err_len, "%s: out of memory for the write buffer", path);
        fclose(f);
        return -1;
    }
    size_t len = 0;
    int failed = 0, saved = 0;
    for (size_t i = 0; i < d->n && !failed; i++) {
        if (d->cls) {
            len += (size_t)snprintf(buf + len, ROOM, "%d", (int)d->labels[d->cls[i]]);
        } else {
            memcpy(buf + len, d->y[i] > 0 ? "+1" : "-1", 2);
            len += 2;
        }
        for (size_t k = d->row_ptr[i]; k < d->row_ptr[i + 1]; k++) {
            if (len > BUF - ROOM) {
                if (fwrite(buf, 1, len, f) != len) failed = 1, saved = errno;
                len = 0;
            }
            buf[len++] = ' ';
            len += (size_t)format_u64((uint64_t)d->col[k] + 1, buf + len);
            buf[len++] = ':';
            len += (size_t)text_format_float(d->val[k], buf + len);
        }
        buf[len++] = '\n';
        if (len > BUF - ROOM) {
            if (fwrite(buf, 1, len, f) != len) failed = 1, saved = errno;
            len = 0;
        }
    }
    if (!failed && len && fwrite(buf, 1, len, f) != len) failed = 1, saved = errno;
    free(buf);
    if (fclose(f) != 0 && !failed) failed = 1, saved = errno;
    if (failed) {
        snprintf(err, err_len, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
        return -1;
    }
    return 0;
}
