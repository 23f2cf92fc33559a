#include "datasets/libsvm.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/data_input.h"
#include "datasets/text_blocks.h"
#include "datasets/text_decimal.h"
#include "datasets/text_io.h"
#include "datasets/text_span.h"

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

// The examples of one block, in growable arrays reused block after block.
typedef struct libsvm_part {
    size_t *row_end;  // (rows) the part's non-zeros up to each row's end
    int32_t *cls;  // (rows) the label, or with a given mapping its class
    uint32_t *col;  // (nnz)
    float *val;  // (nnz)
    size_t rows, nnz, row_cap, nnz_cap;
    size_t max_index;
    size_t beyond;  // prediction: features above the width, skipped
} libsvm_part_t;

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

#define FAIL_AT(where, ...)                                 \
    do {                                                    \
        e->at = (where);                                    \
        snprintf(e->detail, sizeof e->detail, __VA_ARGS__); \
        return -1;                                          \
    } while (0)

// An index:value pair's value at value_at into *out; the end in *end.
static int parse_value(const char *value_at, uint64_t index, float *out, const char **end, parse_error_t *e) {
    char shown[48];
    if (ends_token(*value_at))
        FAIL_AT(value_at, "expected a value after '%llu:', got %s", (unsigned long long)index,
                text_show_char(value_at, shown));
    double value;
    *end = text_parse_float_padded(value_at, out, &value);
    if (*end == value_at || !ends_token(**end))
        FAIL_AT(value_at, "expected a number after '%llu:', got '%s'", (unsigned long long)index,
                show_token(value_at, shown));
    if (isnan(value) || (isinf(value) && !spelled_in_digits(value_at)))
        FAIL_AT(value_at, "value '%s' is not finite", show_token(value_at, shown));
    if (fabs(value) >= FLOAT_ROUNDS_FINITE_BELOW)
        FAIL_AT(value_at, "value '%s' is out of float range (|value| <= 3.40282347e+38)", show_token(value_at, shown));
    return 0;
}

// Parses the features after the label, from *pp up to the end of the line or a
// comment, appending them to s; *pp is left there. With skip_beyond
// (prediction), an index above dim is skipped and counted in s->beyond
// instead of refused.
__attribute__((always_inline)) static inline int parse_features(const char **pp, size_t dim, int skip_beyond,
                                                                libsvm_part_t *s, parse_error_t *e) {
    const char *p = *pp;
    char shown[48];
    uint64_t prev = 0, limit = dim > 0 ? dim : LIBSVM_MAX_DIM;
    for (int first = 1;; first = 0) {
        while (is_blank(*p)) p++;
        if (*p == '\n' || *p == '#' || *p == '\0') break;
        const char *tok = p;
        // The common token in one pass: an index of at most 7 digits in order,
        // ':' and a short plain decimal (text_decimal.h). Where it ends is
        // found first (text_span.h), and the next token starts from there, not
        // from the end of the number read. Anything else, every error
        // included, is read by the careful code below.
        const char *tok_end = tok + text_span_until(tok, '#');
        uint64_t word = text_load8(tok), mantissa;
        int k = text_digit_run8(word), frac_digits, negative;
        if (k && k < 8 && tok[k] == ':' && s->nnz < s->nnz_cap) {
            uint64_t index = text_digits_value8(word, k);
            // Ending at tok_end, the number has no letter, digit or '.' after it.
            const char *end = text_decimal_scan(tok + k + 1, &mantissa, &frac_digits, &negative);
            if (end == tok_end && ends_token(*tok_end) && index > prev && index <= limit) {
                s->col[s->nnz] = (uint32_t)(index - 1);
                s->val[s->nnz++] = text_decimal_float(mantissa, frac_digits, negative, tok + k + 1);
                prev = index;
                p = tok_end;
                continue;
            }
        }
        if (first && strncmp(p, "qid:", 4) == 0) {
            const char *q = p + 4;
            if (!text_is_digit(*q))
                FAIL_AT(q, "expected a query id (digits) after 'qid:', got %s", text_show_char(q, shown));
            while (text_is_digit(*q)) q++;
            if (!ends_token(*q)) FAIL_AT(q, "expected a space after the query id, got %s", text_show_char(q, shown));
            p = q;
            continue;
        }
        if (!text_is_digit(*p))
            FAIL_AT(tok, "expected a feature index (an integer >= 1) followed by ':', got '%s'",
                    show_token(tok, shown));
        uint64_t index;
        int digits;
        p = text_parse_digits_padded(tok, &index, &digits);
        int overflow = index > LIBSVM_MAX_DIM || text_is_digit(*p);
        while (text_is_digit(*p)) p++;
        // Prediction: an index in order past the model's width (however large) is skipped.
        if (skip_beyond && dim > 0 && (overflow || index > dim) && *p == ':' &&
            (overflow ? prev <= LIBSVM_MAX_DIM : index > prev)) {
            float ignored;
            if (parse_value(p + 1, overflow ? LIBSVM_MAX_DIM + 1 : index, &ignored, &p, e) != 0) return -1;
            s->beyond++;
            prev = overflow ? LIBSVM_MAX_DIM + 1 : index;
            continue;
        }
        if (overflow) {
            FAIL_AT(tok, "feature index %.*s is too large (at most %zu features)", (int)(p - tok < 40 ? p - tok : 40),
                    tok, LIBSVM_MAX_DIM);
        }
        if (*p != ':')
            FAIL_AT(p, "expected ':' after feature index %llu, got %s", (unsigned long long)index,
                    text_show_char(p, shown));
        if (index == 0) FAIL_AT(tok, "feature index 0 (indices are 1-based)");
        if (index == prev)
            FAIL_AT(tok, "duplicate feature index %llu (indices must be strictly increasing)",
                    (unsigned long long)index);
        if (index < prev)
            FAIL_AT(tok, "feature index %llu after %llu (indices must be strictly increasing)",
                    (unsigned long long)index, (unsigned long long)prev);
        if (dim > 0 && index > dim)
            FAIL_AT(tok, "feature index %llu is beyond dim %zu", (unsigned long long)index, dim);
        if (s->nnz == s->nnz_cap &&
            grow_pair((void **)&s->col, sizeof *s->col, (void **)&s->val, sizeof *s->val, &s->nnz_cap, s->nnz + 1) != 0)
            FAIL_AT(tok, "out of memory after %zu non-zeros", s->nnz);
        if (parse_value(p + 1, index, &s->val[s->nnz], &p, e) != 0) return -1;
        s->col[s->nnz++] = (uint32_t)(index - 1);
        prev = index;
    }
    if (prev > s->max_index) s->max_index = (size_t)prev;
    *pp = p;
    return 0;
}

// The training set's classes, when a second file must use them; or, for
// prediction, no classes at all.
typedef struct label_map {
    const int32_t *labels;  // ascending; NULL: the file's own labels make the classes
    size_t k;
    int unlabelled;  // labels optional and not kept; features beyond dim skipped (libsvm_load_unlabelled)
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
    const char *end = text_parse_double_padded(p, &value);
    if (end == p || !ends_token(*end))
        FAIL_AT(p, "expected a label (a number) or a feature (index:value), got '%s'", show_token(p, shown));
    *end_out = end;
    return 0;
}

// Reads an integer label into *label, or with a mapping its class.
static int parse_label(const char *p, const char **end_out, int32_t *label, const label_map_t *map, parse_error_t *e) {
    char shown[48];
    double value;
    const char *end = text_parse_double_padded(p, &value);
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

// What every block's parse reads, and the whole the parts join into.
typedef struct libsvm_read {
    const char *name;
    size_t dim;
    label_map_t map;
    size_t *row_ptr;  // (rows + 1)
    int32_t *cls;  // (rows)
    uint32_t *col;  // (nnz)
    float *val;  // (nnz)
    size_t rows, nnz, row_cap, nnz_cap;
    size_t max_index;
    size_t beyond;  // prediction: features above the width, skipped
} libsvm_read_t;

static void *part_new(void *ctx) { return calloc(1, sizeof(libsvm_part_t)); }

static void part_free(void *ctx, void *part) {
    libsvm_part_t *s = part;
    free(s->row_end);
    free(s->cls);
    free(s->col);
    free(s->val);
    free(s);
}

TEXT_HOT_CLONES static int parse_block(void *ctx, const text_block_t *b, void *part, size_t *lines,
                                       text_block_error_t *out) {
    const libsvm_read_t *c = ctx;
    libsvm_part_t *s = part;
    s->rows = s->nnz = s->max_index = s->beyond = 0;
    parse_error_t e_store = {NULL, ""}, *e = &e_store;
    const char *p = b->text, *end = b->text + b->len, *line_start = p;
    size_t line = 0;
    while (p < end) {
        line++;
        line_start = p;
        while (is_blank(*p)) p++;
        if (*p != '\n' && *p != '#' && *p != '\0') {
            if (s->rows == s->row_cap && grow_pair((void **)&s->row_end, sizeof *s->row_end, (void **)&s->cls,
                                                   sizeof *s->cls, &s->row_cap, s->rows + 1) != 0) {
                e->at = p;
                snprintf(e->detail, sizeof e->detail, "out of memory after %zu examples", s->rows);
                goto fail;
            }
            if (c->map.unlabelled) {
                if (!starts_with_feature(p) && skip_label(p, &p, e) != 0) goto fail;
                s->cls[s->rows] = 0;
            } else if (parse_label(p, &p, &s->cls[s->rows], &c->map, e) != 0) {
                goto fail;
            }
            if (parse_features(&p, c->dim, c->map.unlabelled, s, e) != 0) goto fail;
            s->row_end[s->rows++] = s->nnz;
        }
        if (*p != '\n') p = p + strcspn(p, "\n");  // the rest is a comment (or nothing)
        if (p < end && *p == '\0') {
            e->at = p;
            snprintf(e->detail, sizeof e->detail, "NUL byte in a text file (is it binary?)");
            goto fail;
        }
        if (*p == '\n') p++;
    }
    *lines = line;
    return 0;
fail:
    out->whole = 0;
    out->line = line;
    out->column = (size_t)(e->at - line_start) + 1;
    snprintf(out->what, sizeof out->what, "%s", e->detail);
    return -1;
}

static int join_part(void *ctx, void *part, char *err, size_t err_len) {
    libsvm_read_t *c = ctx;
    const libsvm_part_t *s = part;
    if ((c->rows + s->rows + 1 > c->row_cap && (grow_pair((void **)&c->row_ptr, sizeof *c->row_ptr, (void **)&c->cls,
                                                          sizeof *c->cls, &c->row_cap, c->rows + s->rows + 1) != 0)) ||
        (c->nnz + s->nnz > c->nnz_cap && grow_pair((void **)&c->col, sizeof *c->col, (void **)&c->val, sizeof *c->val,
                                                   &c->nnz_cap, c->nnz + s->nnz) != 0)) {
        snprintf(err, err_len, "%s: out of memory after %zu examples and %zu non-zeros", c->name, c->rows, c->nnz);
        return -1;
    }
    c->row_ptr[0] = 0;
    for (size_t i = 0; i < s->rows; i++) c->row_ptr[c->rows + 1 + i] = c->nnz + s->row_end[i];
    if (s->rows) memcpy(c->cls + c->rows, s->cls, s->rows * sizeof *s->cls);  // a block of comments has no cls
    if (s->nnz) {
        text_copy_fresh(c->col + c->nnz, s->col, s->nnz * sizeof *s->col);
        text_copy_fresh(c->val + c->nnz, s->val, s->nnz * sizeof *s->val);
    }
    c->rows += s->rows;
    c->nnz += s->nnz;
    if (s->max_index > c->max_index) c->max_index = s->max_index;
    c->beyond += s->beyond;
    return 0;
}

static void read_free(libsvm_read_t *c) {
    free(c->row_ptr);
    free(c->cls);
    free(c->col);
    free(c->val);
}

static const text_blocks_ops_t libsvm_ops = {part_new, part_free, parse_block, join_part, NULL};

// Parses everything the reader holds into out and closes the reader; an
// unlabelled read counts the features it skipped in *beyond.
static int parse_all(text_reader_t *reader, size_t dim, const label_map_t *map, sparse_dataset_t *out, size_t *beyond,
                     char *err, size_t err_len) {
    char name[512];
    snprintf(name, sizeof name, "%s", reader->name);
    if (dim > LIBSVM_MAX_DIM) {
        snprintf(err, err_len, "%s: a dimension of %zu features is more than the %zu accepted", name, dim,
                 LIBSVM_MAX_DIM);
        text_reader_close(reader);
        return -1;
    }
    libsvm_read_t c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.dim = dim;
    c.map = *map;
    if (text_blocks_run(reader, &libsvm_ops, &c, err, err_len) != 0) {
        read_free(&c);
        return -1;
    }
    if (c.rows == 0) {
        snprintf(err, err_len, "%s: no examples (the file is empty or has only comments and blank lines)", name);
        read_free(&c);
        return -1;
    }
    // Labels to classes: the given mapping's (already applied), or the file's
    // own; none for an unlabelled read (y only, -1, as a generated set's).
    int32_t *labels = NULL;
    size_t k = map->k;
    if (map->unlabelled) {
        free(c.cls);
        c.cls = NULL;
        k = 0;
    } else if (map->labels) {
        // NULL when out of memory: sparse_dataset_adopt reports it.
        if ((labels = malloc(k * sizeof *labels))) memcpy(labels, map->labels, k * sizeof *labels);
    } else if (dataset_classes_of(name, c.cls, c.rows, &labels, &k, err, err_len) != 0) {
        read_free(&c);
        return -1;
    }
    *out = (sparse_dataset_t){.n = c.rows,
                              .dim = dim ? dim : c.max_index,
                              .nnz = c.nnz,
                              .row_ptr = c.row_ptr,
                              .col = c.col,
                              .val = c.val,
                              .cls = c.cls,
                              .labels = labels,
                              .n_classes = k};
    if (sparse_dataset_adopt(out, name, err, err_len) != 0) return -1;
    if (beyond) *beyond = c.beyond;
    return 0;
}

int libsvm_load(const char *path, size_t dim, sparse_dataset_t *out, char *err, size_t err_len) {
    return libsvm_load_mapped(path, dim, NULL, NULL, 0, out, err, err_len);
}

int libsvm_load_mapped(const char *path, size_t dim, const int32_t *labels, const char *label_text, size_t k,
                       sparse_dataset_t *out, char *err, size_t err_len) {
    sparse_dataset_init(out);
    if (labels && label_text) {
        char known[160];
        dataset_label_names_text(label_text, k, known, sizeof known);
        snprintf(err, err_len,
                 "%s: a libsvm file's labels are integers, and the training data's are strings (%s): "
                 "give the examples as CSV",
                 data_input_display_name(path), known);
        return -1;
    }
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    label_map_t map = {labels, labels ? k : 0, 0};
    return parse_all(&reader, dim, &map, out, NULL, err, err_len);
}

int libsvm_load_unlabelled(const char *path, size_t dim, sparse_dataset_t *out, size_t *beyond, char *err,
                           size_t err_len) {
    sparse_dataset_init(out);
    *beyond = 0;
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    label_map_t map = {NULL, 0, 1};
    return parse_all(&reader, dim, &map, out, beyond, err, err_len);
}

int libsvm_parse(const char *name, const char *text, size_t len, size_t dim, sparse_dataset_t *out, char *err,
                 size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open_memory(&reader, name, text, len, err, err_len) != 0) return -1;
    label_map_t map = {NULL, 0, 0};
    return parse_all(&reader, dim, &map, out, NULL, err, err_len);
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
