#include "datasets/csv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/text_io.h"  // defines: text_reader_*, text_parse_double

#define FLOAT_ROUNDS_FINITE_BELOW 0x1.ffffffp+127  // as libsvm.c: FLT_MAX and half an ulp
#define MAX_COLUMNS ((size_t)1 << 24)

// One cell of the current line: [begin, end) after trimming blanks and quotes.
typedef struct cell {
    const char *begin, *end;
} cell_t;

typedef struct csv_state {
    const char *path;
    const csv_options_t *o;
    char delim;
    size_t ncols, label_col;
    int have_header;
    char *names;          // the header line, NUL-separated names (have_header)
    size_t *name_at;      // (ncols) each name's offset in names
    cell_t *cells;        // (ncols + 1) the current line's
    size_t *row_ptr;      // (rows + 1)
    int32_t *cls;         // (rows) labels, or with a given mapping classes
    uint32_t *col;        // (nnz)
    float *val;           // (nnz)
    size_t rows, row_cap, nnz, nnz_cap;
    // The error, when one is found: where and what.
    size_t line;
    const char *line_start, *at;
    char what[400];
} csv_state_t;

static void state_free(csv_state_t *s) {
    free(s->names);
    free(s->name_at);
    free(s->cells);
    free(s->row_ptr);
    free(s->cls);
    free(s->col);
    free(s->val);
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Grows *p (elements of size) to hold `need`, doubling.
static int grow(void **p, size_t size, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t bigger = *cap ? *cap : 4096;
    while (bigger < need) {
        if (bigger > SIZE_MAX / 16) return -1;
        bigger *= 2;
    }
    void *q = realloc(*p, bigger * size);
    if (!q) return -1;
    *p = q;
    *cap = bigger;
    return 0;
}

// Splits the line at p into s->cells (up to max of them); returns the count
// (max + 1 when there are more) and leaves *end at the line's '\n' or '\0'.
static size_t split_line(csv_state_t *s, const char *p, size_t max, const char **end) {
    size_t n = 0;
    for (;;) {
        const char *b = p;
        while (*p != s->delim && *p != '\n' && *p != '\0') p++;
        const char *e = p;
        while (b < e && (*b == ' ' || (*b == '\t' && s->delim != '\t'))) b++;
        while (e > b && is_blank(e[-1]) && !(e[-1] == '\t' && s->delim == '\t')) e--;
        if (e - b >= 2 && *b == '"' && e[-1] == '"') b++, e--;
        if (n < max) s->cells[n] = (cell_t){b, e};
        n++;
        if (*p != s->delim) break;
        p++;
    }
    *end = p;
    return n > max ? max + 1 : n;
}

static int is_number(const cell_t *c) {
    double v;
    const char *e = text_parse_double(c->begin, &v);
    return e != c->begin && e == c->end;
}

// "column K ('name')" or "column K".
static void column_name(const csv_state_t *s, size_t k, char *out, size_t out_len) {
    if (s->have_header && k < s->ncols)
        snprintf(out, out_len, "column %zu ('%.40s')", k, s->names + s->name_at[k]);
    else
        snprintf(out, out_len, "column %zu", k);
}

static void show_cell(const cell_t *c, char out[48]) {
    size_t n = (size_t)(c->end - c->begin), k = 0;
    for (; k < n && k < 32; k++) {
        unsigned char ch = (unsigned char)c->begin[k];
        out[k] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (n > 32) memcpy(out + k, "...", 3), k += 3;
    out[k] = '\0';
}

#define FAIL_CELL(s, k, ...)                                                  \
    do {                                                                      \
        char name_[80];                                                       \
        char msg_[240];                                                       \
        column_name((s), (k), name_, sizeof name_);                           \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                             \
        snprintf((s)->what, sizeof (s)->what, "%s: %s", name_, msg_);         \
        (s)->at = (s)->cells[k].begin;                                        \
        return -1;                                                            \
    } while (0)

// The header line (or the first data line) fixes the columns and the label's.
static int first_line(csv_state_t *s, const char *p, int *is_header, char *err, size_t err_len) {
    const char *q = p;
    while (*q != '\n' && *q != '\0' && *q != ',' && *q != '\t') q++;
    s->delim = *q == '\t' ? '\t' : ',';
    for (q = p; *q != '\n' && *q != '\0'; q++)
        if (*q == ',') s->delim = ',';
    size_t n = 1;
    for (q = p; *q != '\n' && *q != '\0'; q++) n += *q == s->delim;
    if (n > MAX_COLUMNS || !(s->cells = malloc((n + 1) * sizeof *s->cells))) {
        snprintf(err, err_len, "%s: %zu columns; at most %zu are read", s->path, n, MAX_COLUMNS);
        return -1;
    }
    s->ncols = n;
    const char *end;
    split_line(s, p, n, &end);
    int header = s->o->header;
    for (size_t k = 0; k < n && !header; k++) header = !is_number(&s->cells[k]);
    *is_header = header;
    if (header) {
        size_t len = (size_t)(end - p);
        s->names = malloc(len + n + 1);
        s->name_at = malloc(n * sizeof *s->name_at);
        if (!s->names || !s->name_at) {
            snprintf(err, err_len, "%s: out of memory for the header", s->path);
            return -1;
        }
        size_t at = 0;
        for (size_t k = 0; k < n; k++) {
            s->name_at[k] = at;
            size_t w = (size_t)(s->cells[k].end - s->cells[k].begin);
            memcpy(s->names + at, s->cells[k].begin, w);
            at += w;
            s->names[at++] = '\0';
        }
        s->have_header = 1;
    }
    if (n < 2) {
        snprintf(err, err_len, "%s:%zu: one column: a label and at least one feature are needed (cells separated by "
                 "commas or tabs)", s->path, s->line);
        return -1;
    }
    const char *lc = s->o->label_column;
    if (!lc || !*lc) {
        s->label_col = 0;
    } else if (strspn(lc, "0123456789") == strlen(lc)) {
        s->label_col = strlen(lc) > 9 ? n : (size_t)strtoul(lc, NULL, 10);
        if (s->label_col >= n) {
            snprintf(err, err_len, "--label-column %s: %s has %zu columns (0 to %zu)", lc, s->path, n, n - 1);
            return -1;
        }
    } else {
        if (!header) {
            snprintf(err, err_len, "--label-column %s: %s has no header line to find the name in (give the column's "
                     "position from 0, or --csv-header)", lc, s->path);
            return -1;
        }
        size_t k = 0;
        while (k < n && strcmp(s->names + s->name_at[k], lc) != 0) k++;
        if (k == n) {
            snprintf(err, err_len, "--label-column %s: %s:%zu: no column of that name in the header", lc, s->path,
                     s->line);
            return -1;
        }
        s->label_col = k;
    }
    return 0;
}

// One data line: its label and non-zero features.
static int data_line(csv_state_t *s, const char *p, const char **end) {
    size_t n = split_line(s, p, s->ncols, end);
    if (n != s->ncols) {
        s->at = n > s->ncols ? s->cells[s->ncols - 1].end : *end;
        if (n > s->ncols) snprintf(s->what, sizeof s->what, "more than %zu cells (the first line has %zu)", s->ncols, s->ncols);
        else snprintf(s->what, sizeof s->what, "%zu cells; the first line has %zu", n, s->ncols);
        return -1;
    }
    if (s->rows + 2 > s->row_cap) {
        size_t cap = s->row_cap;
        int32_t *t = NULL;
        if (grow((void **)&s->row_ptr, sizeof *s->row_ptr, &cap, s->rows + 2) != 0 ||
            !(t = realloc(s->cls, cap * sizeof *s->cls))) {
            s->at = p;
            snprintf(s->what, sizeof s->what, "out of memory after %zu examples", s->rows);
            return -1;
        }
        s->cls = t;
        s->row_cap = cap;
    }
    char shown[48];
    for (size_t k = 0; k < n; k++) {
        const cell_t *c = &s->cells[k];
        if (c->begin == c->end) FAIL_CELL(s, k, "empty cell (expected a number)");
        double v;
        const char *e = text_parse_double(c->begin, &v);
        if (e == c->begin || e != c->end) {
            show_cell(c, shown);
            FAIL_CELL(s, k, "expected a number, got '%s'", shown);
        }
        if (k == s->label_col) {
            if (!(v == floor(v) && v >= -2147483648.0 && v <= 2147483647.0)) {
                show_cell(c, shown);
                FAIL_CELL(s, k, "label '%s' is not an integer (labels are class ids)", shown);
            }
            int32_t label = (int32_t)v;
            if (s->o->labels) {
                int32_t m = dataset_label_class(s->o->labels, s->o->k, label);
                if (m < 0) {
                    char known[160];
                    dataset_labels_text(s->o->labels, s->o->k, known, sizeof known);
                    FAIL_CELL(s, k, "label %d is not among the training data's labels (%s)", (int)label, known);
                }
                label = m;
            }
            s->cls[s->rows] = label;
            continue;
        }
        if (isnan(v) || isinf(v)) {
            show_cell(c, shown);
            FAIL_CELL(s, k, "value '%s' is not finite", shown);
        }
        if (fabs(v) >= FLOAT_ROUNDS_FINITE_BELOW) {
            show_cell(c, shown);
            FAIL_CELL(s, k, "value '%s' is out of float range (|value| <= 3.40282347e+38)", shown);
        }
        if ((float)v == 0.0f) continue;
        if (s->nnz == s->nnz_cap) {
            size_t cap = s->nnz_cap;
            if (grow((void **)&s->col, sizeof *s->col, &cap, s->nnz + 1) != 0 ||
                grow((void **)&s->val, sizeof *s->val, &s->nnz_cap, s->nnz + 1) != 0) {
                s->at = c->begin;
                snprintf(s->what, sizeof s->what, "out of memory after %zu non-zeros", s->nnz);
                return -1;
            }
        }
        s->col[s->nnz] = (uint32_t)(k < s->label_col ? k : k - 1);
        s->val[s->nnz++] = (float)v;
    }
    s->row_ptr[0] = 0;
    s->rows++;
    s->row_ptr[s->rows] = s->nnz;
    return 0;
}

static int parse_all(text_reader_t *reader, const char *path, const csv_options_t *o, sparse_dataset_t *out, char *err,
                     size_t err_len) {
    csv_state_t s;
    memset(&s, 0, sizeof s);
    s.path = path;
    s.o = o;
    const char *block;
    size_t block_len;
    int got, started = 0, bad = 0;
    for (int first = 1; !bad && (got = text_reader_next(reader, &block, &block_len, err, err_len)) == 1; first = 0) {
        const char *p = block, *block_end = block + block_len;
        if (first && strncmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
        while (p < block_end) {
            s.line++;
            s.line_start = p;
            const char *q = p;
            while (is_blank(*q)) q++;
            const char *end = q;
            if (*q != '\n' && *q != '\0') {
                if (!started) {
                    int header;
                    if (first_line(&s, p, &header, err, err_len) != 0) {
                        bad = 2;
                        break;
                    }
                    started = 1;
                    end = p;
                    if (header || data_line(&s, p, &end) == 0) {
                        while (*end && *end != '\n') end++;
                    } else {
                        bad = 1;
                        break;
                    }
                } else if (data_line(&s, p, &end) != 0) {
                    bad = 1;
                    break;
                }
            }
            if (end < block_end && *end == '\0') {
                s.at = end;
                snprintf(s.what, sizeof s.what, "NUL byte in a text file (is it binary?)");
                bad = 1;
                break;
            }
            p = *end == '\n' ? end + 1 : end;
            if (p == end) break;  // the end of the block
        }
    }
    text_reader_close(reader);
    if (bad == 1) snprintf(err, err_len, "%s:%zu:%zu: %s", path, s.line, (size_t)(s.at - s.line_start) + 1, s.what);
    if (bad || got < 0) {
        state_free(&s);
        return -1;
    }
    if (s.rows == 0) {
        snprintf(err, err_len, "%s: no examples (the file is empty, blank or a header alone)", path);
        state_free(&s);
        return -1;
    }
    int32_t *labels = NULL;
    size_t k = o->k;
    if (o->labels) {
        if ((labels = malloc(k * sizeof *labels))) memcpy(labels, o->labels, k * sizeof *labels);
    } else if (dataset_classes_of(path, s.cls, s.rows, &labels, &k, err, err_len) != 0) {
        state_free(&s);
        return -1;
    }
    float *y = malloc(s.rows * sizeof *y);
    if (!labels || !y || (!s.col && !(s.col = malloc(sizeof *s.col))) || (!s.val && !(s.val = malloc(sizeof *s.val)))) {
        snprintf(err, err_len, "%s: out of memory", path);
        free(labels);
        free(y);
        state_free(&s);
        return -1;
    }
    for (size_t i = 0; i < s.rows; i++) y[i] = dataset_binary_y(labels, k, s.cls[i]);
    sparse_dataset_init(out);
    out->n = s.rows;
    out->dim = s.ncols - 1;
    out->nnz = s.nnz;
    out->row_ptr = s.row_ptr;
    out->col = s.col;
    out->val = s.val;
    out->y = y;
    out->cls = s.cls;
    out->labels = labels;
    out->n_classes = k;
    s.row_ptr = NULL, s.col = NULL, s.val = NULL, s.cls = NULL;
    state_free(&s);
    return 0;
}

int csv_load(const char *path, const csv_options_t *o, sparse_dataset_t *out, char *err, size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    return parse_all(&reader, path, o, out, err, err_len);
}

int csv_parse(const char *name, const char *text, size_t len, const csv_options_t *o, sparse_dataset_t *out,
              char *err, size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open_memory(&reader, name, text, len, err, err_len) != 0) return -1;
    return parse_all(&reader, name, o, out, err, err_len);
}
