// Dense CSV files into the sparse form (csv.h), in blocks on several threads
// (text_blocks.h): a fast path for lines of plain numbers, and the careful
// path of csv_cells.h for quoted cells and for every error.
#include "datasets/csv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/csv_cells.h"
#include "datasets/label_dict.h"
#include "datasets/text_blocks.h"
#include "datasets/text_decimal.h"
#include "datasets/text_io.h"
#include "datasets/text_span.h"

#define FLOAT_ROUNDS_FINITE_BELOW 0x1.ffffffp+127  // as libsvm.c: FLT_MAX and half an ulp
#define MAX_COLUMNS ((size_t)1 << 24)

// What every block's parse reads (fixed by prepare), and the whole the parts join into.
typedef struct csv_read {
    const char *name;
    const csv_options_t *o;
    char delim;
    size_t ncols, label_col;
    int have_header;
    int string_labels;  // labels are strings (label_dict ids, or with given classes their classes)
    char *names;  // the header's names, NUL-separated (have_header)
    size_t *name_at;  // (ncols) each name's offset in names
    const char **given;  // (o->k) the given classes' names (o->label_text), for lookups
    size_t *row_ptr;  // (rows + 1)
    int32_t *cls;  // (rows) labels, or classes (given classes), or dict ids (string labels)
    uint32_t *col;  // (nnz)
    float *val;  // (nnz)
    size_t rows, row_cap, nnz, nnz_cap;
    label_dict_t dict;  // string labels, in order of first appearance
    int32_t *to_dict;  // (to_dict_cap) a part's label ids to dict's, while it joins
    size_t to_dict_cap;
} csv_read_t;

// One block's examples, reused block after block.
typedef struct csv_part {
    size_t *row_end;  // (rows) the part's non-zeros up to each row's end
    int32_t *cls;  // (rows) as csv_read_t's, string labels as ids of dict
    uint32_t *col;  // (nnz)
    float *val;  // (nnz)
    size_t rows, row_cap, nnz, nnz_cap;
    label_dict_t dict;  // the block's string labels
    csv_splitter_t split;
    // The error, when one is found: where and what.
    const char *at;
    char what[400];
} csv_part_t;

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

static int is_number(const csv_cell_t *c) {
    double v;
    const char *e = text_parse_double(c->text, &v);
    return e != c->text && e == c->text + c->len;
}

// "column K ('name')" or "column K".
static void column_name(const csv_read_t *c, size_t k, char *out, size_t out_len) {
    if (c->have_header && k < c->ncols)
        snprintf(out, out_len, "column %zu ('%.40s')", k, c->names + c->name_at[k]);
    else
        snprintf(out, out_len, "column %zu", k);
}

static void show_cell(const csv_cell_t *c, char out[48]) {
    size_t k = 0;
    for (; k < c->len && k < 32; k++) {
        unsigned char ch = (unsigned char)c->text[k];
        out[k] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (c->len > 32) memcpy(out + k, "...", 3), k += 3;
    out[k] = '\0';
}

#define FAIL_CELL(c, s, k, ...)                                      \
    do {                                                             \
        char name_[80];                                              \
        char msg_[300];                                              \
        column_name((c), (k), name_, sizeof name_);                  \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                    \
        snprintf((s)->what, sizeof(s)->what, "%s: %s", name_, msg_); \
        (s)->at = (s)->split.cells[k].at;                            \
        return -1;                                                   \
    } while (0)

// ---- the first lines: columns, header, label column, the labels' kind ----

// The next content line at or after p (blank lines skipped, *lines counted):
// 1 with it in *line, 0 when the block ends first, -1 at a NUL byte (*line
// is then the line that holds it).
static int next_content_line(const char *p, const char *end, const char **line, size_t *lines) {
    while (p < end) {
        const char *q = p;
        while (is_blank(*q)) q++;
        (*lines)++;
        *line = p;
        if (*q != '\n' && *q != '\0') return 1;
        if (*q == '\0') return q < end ? -1 : 0;
        p = q + 1;
    }
    return 0;
}

// The label column from --label-column (the header's names known). 0, or -1 with e.
static int find_label_column(csv_read_t *c, size_t line, text_block_error_t *e) {
    const char *lc = c->o->label_column;
    size_t n = c->ncols;
    e->whole = 1;
    if (!lc || !*lc) {
        c->label_col = 0;
    } else if (strspn(lc, "0123456789") == strlen(lc)) {
        c->label_col = strlen(lc) > 9 ? n : (size_t)strtoul(lc, NULL, 10);
        if (c->label_col >= n) {
            snprintf(e->what, sizeof e->what, "--label-column %s: %s has %zu columns (0 to %zu)", lc, c->name, n,
                     n - 1);
            return -1;
        }
    } else {
        if (!c->have_header) {
            snprintf(e->what, sizeof e->what,
                     "--label-column %s: %s has no header line to find the name in (give "
                     "the column's position from 0, or --csv-header)",
                     lc, c->name);
            return -1;
        }
        size_t k = 0;
        while (k < n && strcmp(c->names + c->name_at[k], lc) != 0) k++;
        if (k == n) {
            snprintf(e->what, sizeof e->what, "--label-column %s: %s:%zu: no column of that name in the header", lc,
                     c->name, line);
            return -1;
        }
        c->label_col = k;
    }
    e->whole = 0;
    return 0;
}

// The label column's cell of the line at p is a number: 1, 0 (not), or -1 when
// the line cannot say (too few cells, a quoting error).
static int label_is_number(csv_part_t *s, const char *p, char delim, size_t label_col) {
    const char *end, *bad;
    char why[200];
    long n = csv_split(&s->split, p, delim, label_col + 1, &end, &bad, why, sizeof why);
    if (n <= (long)label_col) return -1;
    return is_number(&s->split.cells[label_col]);
}

static int keep_header(csv_read_t *c, csv_part_t *s, size_t n) {
    size_t len = 0;
    for (size_t k = 0; k < n; k++) len += s->split.cells[k].len + 1;
    c->names = malloc(len ? len : 1);
    c->name_at = malloc(n * sizeof *c->name_at);
    if (!c->names || !c->name_at) return -1;
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        c->name_at[k] = at;
        memcpy(c->names + at, s->split.cells[k].text, s->split.cells[k].len + 1);
        at += s->split.cells[k].len + 1;
    }
    c->have_header = 1;
    return 0;
}

static int by_name(const char *lc) { return lc && *lc && strspn(lc, "0123456789") != strlen(lc); }

// The label column --label-column gives by position (0 without it).
static size_t label_position(const char *lc) { return lc && *lc && !by_name(lc) ? (size_t)strtoul(lc, NULL, 10) : 0; }

// Whether the first line (split in s, n cells) is a header: 1, 0, or 2 when
// the next content line must decide (only the label cell is not a number).
static int header_verdict(const csv_read_t *c, const csv_part_t *s, size_t n) {
    if (c->o->header) return 1;
    size_t label = by_name(c->o->label_column) ? n : label_position(c->o->label_column);
    int label_text = 0;
    for (size_t k = 0; k < n; k++) {
        if (is_number(&s->split.cells[k])) continue;
        if (k != label) return 1;
        label_text = 1;
    }
    if (!label_text) return 0;
    if (c->o->labels) return c->o->label_text ? 0 : 1;  // the given classes say what a label is
    return 2;
}

static int prepare(void *ctx, const text_block_t *b, int at_end, size_t *used, size_t *used_lines,
                   text_block_error_t *e) {
    csv_read_t *c = ctx;
    csv_part_t s;
    memset(&s, 0, sizeof s);
    const char *end = b->text + b->len, *first = NULL, *data = NULL, *line_end, *bad;
    size_t line = 0;
    int found = next_content_line(b->text, end, &first, &line);
    if (found < 0) {  // before the first line: no block is parsed without the columns
        const char *nul = first;
        while (is_blank(*nul)) nul++;
        e->line = line;
        e->column = (size_t)(nul - first) + 1;
        snprintf(e->what, sizeof e->what, "NUL byte in a text file (is it binary?)");
        return -1;
    }
    if (found == 0) return at_end ? 1 : 0;  // blank so far
    int rc = -1;
    c->delim = csv_delimiter(first);
    long n = csv_split(&s.split, first, c->delim, MAX_COLUMNS, &line_end, &bad, e->what, sizeof e->what);
    e->line = line;
    if (n == -1) {
        e->column = (size_t)(bad - first) + 1;
        goto out;
    }
    if (n < 0 || (size_t)n > MAX_COLUMNS) {
        e->whole = 1;
        if (n < 0)
            snprintf(e->what, sizeof e->what, "%s: out of memory for the first line's cells", c->name);
        else
            snprintf(e->what, sizeof e->what, "%s: more than %zu columns; at most %zu are read", c->name, MAX_COLUMNS,
                     MAX_COLUMNS);
        goto out;
    }
    int header = header_verdict(c, &s, (size_t)n);
    // The first data line: the first line, or the next content line after a header.
    size_t next_line_no = line;
    int next = next_content_line(*line_end ? line_end + 1 : line_end, end, &data, &next_line_no);
    if (next == 0 && !at_end && header != 0) {
        rc = 0;  // that line is beyond this block
        goto out;
    }
    if (next <= 0) data = NULL;  // a NUL there is the parse's to report, at its line
    if (header == 2) {
        // Only the label cell is not a number: a name over integer labels, or the first of string labels.
        header = data && label_is_number(&s, data, c->delim, label_position(c->o->label_column)) == 1;
        csv_split(&s.split, first, c->delim, MAX_COLUMNS, &line_end, &bad, e->what, sizeof e->what);
    }
    if (!header) data = first;
    c->ncols = (size_t)n;
    if (header && keep_header(c, &s, c->ncols) != 0) {
        e->whole = 1;
        snprintf(e->what, sizeof e->what, "%s: out of memory for the header", c->name);
        goto out;
    }
    if (c->ncols < 2) {
        snprintf(e->what, sizeof e->what,
                 "one column: a label and at least one feature are needed (cells separated "
                 "by commas or tabs)");
        goto out;
    }
    if (find_label_column(c, line, e) != 0) goto out;
    if (c->o->labels)
        c->string_labels = c->o->label_text != NULL;
    else
        c->string_labels = data && label_is_number(&s, data, c->delim, c->label_col) == 0;
    if (c->o->labels && c->string_labels) {
        if (!(c->given = malloc((c->o->k ? c->o->k : 1) * sizeof *c->given))) {
            e->whole = 1;
            snprintf(e->what, sizeof e->what, "%s: out of memory", c->name);
            goto out;
        }
        dataset_label_names(c->o->label_text, c->o->k, c->given);
    }
    *used = header ? (size_t)(line_end - b->text) + (*line_end == '\n') : 0;
    *used_lines = header ? line : 0;
    rc = 1;
out:
    csv_splitter_free(&s.split);
    return rc;
}

// ---- data lines ----

static int grow_rows(csv_part_t *s) {
    if (s->rows < s->row_cap) return 0;
    size_t cap = s->row_cap;
    int32_t *t = NULL;
    if (grow((void **)&s->row_end, sizeof *s->row_end, &cap, s->rows + 1) != 0 ||
        !(t = realloc(s->cls, cap * sizeof *s->cls)))
        return -1;
    s->cls = t;
    s->row_cap = cap;
    return 0;
}

// Room for n more values.
static int reserve_values(csv_part_t *s, size_t n) {
    if (s->nnz + n <= s->nnz_cap) return 0;
    size_t cap = s->nnz_cap;
    return grow((void **)&s->col, sizeof *s->col, &cap, s->nnz + n) != 0 ||
                   grow((void **)&s->val, sizeof *s->val, &s->nnz_cap, s->nnz + n) != 0
               ? -1
               : 0;
}

static int add_value(csv_part_t *s, uint32_t col, float v) {
    if (reserve_values(s, 1) != 0) return -1;
    s->col[s->nnz] = col;
    s->val[s->nnz++] = v;
    return 0;
}

// The class among the given names of the label s[0..len), or -1.
static int32_t given_class(const csv_read_t *c, const char *s, size_t len) {
    size_t lo = 0, hi = c->o->k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strncmp(c->given[mid], s, len);
        if (cmp == 0 && c->given[mid][len] != '\0') cmp = 1;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->o->k && strncmp(c->given[lo], s, len) == 0 && c->given[lo][len] == '\0') return (int32_t)lo;
    return -1;
}

// A string label's class (given classes) or id in the part's dictionary; -1
// when it is not among the given classes, -2 when out of memory.
static int32_t string_label(const csv_read_t *c, csv_part_t *s, const char *text, size_t len) {
    if (c->given) return given_class(c, text, len);
    int32_t id = label_dict_id(&s->dict, text, len);
    return id < 0 ? -2 : id;
}

// The label cell k of the careful path into s->cls[s->rows]. 0, or -1 with the error.
static int careful_label(const csv_read_t *c, csv_part_t *s, size_t k) {
    const csv_cell_t *cell = &s->split.cells[k];
    char shown[48];
    if (c->string_labels) {
        if (cell->len == 0) FAIL_CELL(c, s, k, "empty cell (expected a label)");
        if (cell->len > DATASET_MAX_LABEL_BYTES) {
            show_cell(cell, shown);
            FAIL_CELL(c, s, k, "label '%s' of %zu bytes; at most %d are read", shown, cell->len,
                      DATASET_MAX_LABEL_BYTES);
        }
        int32_t id = string_label(c, s, cell->text, cell->len);
        if (id == -2) FAIL_CELL(c, s, k, "out of memory for the labels");
        if (id < 0) {
            char known[160];
            show_cell(cell, shown);
            dataset_label_names_text(c->o->label_text, c->o->k, known, sizeof known);
            FAIL_CELL(c, s, k, "label '%s' is not among the training data's labels (%s)", shown, known);
        }
        s->cls[s->rows] = id;
        return 0;
    }
    if (cell->len == 0) FAIL_CELL(c, s, k, "empty cell (expected a number)");
    double v;
    const char *e = text_parse_double(cell->text, &v);
    if (e == cell->text || e != cell->text + cell->len) {
        show_cell(cell, shown);
        FAIL_CELL(c, s, k, "expected a number, got '%s'%s", shown,
                  c->o->labels ? "" : " (the first data line's label is a number: every label must be one)");
    }
    if (!(v == floor(v) && v >= -2147483648.0 && v <= 2147483647.0)) {
        show_cell(cell, shown);
        FAIL_CELL(c, s, k, "label '%s' is not an integer (labels are class ids)", shown);
    }
    int32_t label = (int32_t)v;
    if (c->o->labels) {
        int32_t m = dataset_label_class(c->o->labels, c->o->k, label);
        if (m < 0) {
            char known[160];
            dataset_labels_text(c->o->labels, c->o->k, known, sizeof known);
            FAIL_CELL(c, s, k, "label %d is not among the training data's labels (%s)", (int)label, known);
        }
        label = m;
    }
    s->cls[s->rows] = label;
    return 0;
}

// One data line through the cells: its label and non-zero features, every
// error named exactly. 0, or -1 with s->at and s->what.
static int careful_line(const csv_read_t *c, csv_part_t *s, const char *p, const char **end) {
    const char *bad;
    long n = csv_split(&s->split, p, c->delim, c->ncols, end, &bad, s->what, sizeof s->what);
    if (n == -1) {
        s->at = bad;
        return -1;
    }
    if (n < 0) {
        s->at = p;
        snprintf(s->what, sizeof s->what, "out of memory for the line's cells");
        return -1;
    }
    if ((size_t)n != c->ncols) {
        s->at = (size_t)n > c->ncols ? s->split.cells[c->ncols - 1].at_end : *end;
        if ((size_t)n > c->ncols)
            snprintf(s->what, sizeof s->what, "more than %zu cells (the first line has %zu)", c->ncols, c->ncols);
        else
            snprintf(s->what, sizeof s->what, "%ld cells; the first line has %zu", n, c->ncols);
        return -1;
    }
    char shown[48];
    for (size_t k = 0; k < (size_t)n; k++) {
        const csv_cell_t *cell = &s->split.cells[k];
        if (k == c->label_col) {
            if (careful_label(c, s, k) != 0) return -1;
            continue;
        }
        if (cell->len == 0) FAIL_CELL(c, s, k, "empty cell (expected a number)");
        double v;
        const char *e = text_parse_double(cell->text, &v);
        if (e == cell->text || e != cell->text + cell->len) {
            show_cell(cell, shown);
            FAIL_CELL(c, s, k, "expected a number, got '%s'", shown);
        }
        if (isnan(v) || isinf(v)) {
            show_cell(cell, shown);
            FAIL_CELL(c, s, k, "value '%s' is not finite", shown);
        }
        if (fabs(v) >= FLOAT_ROUNDS_FINITE_BELOW) {
            show_cell(cell, shown);
            FAIL_CELL(c, s, k, "value '%s' is out of float range (|value| <= 3.40282347e+38)", shown);
        }
        float f = text_strtof(cell->text);  // not (float)v, which could round twice
        if (f == 0.0f) continue;
        if (add_value(s, (uint32_t)(k < c->label_col ? k : k - 1), f) != 0) {
            s->at = cell->at;
            snprintf(s->what, sizeof s->what, "out of memory after %zu non-zeros", s->nnz);
            return -1;
        }
    }
    return 0;
}

// The common line in one pass: unquoted cells of plain decimals (and a label
// of the file's kind). 1 when read (the row's label stored, its values
// appended), 0 when the careful path must read it (the values appended so far
// are dropped by the caller). A function of its own, compiled for the CPU
// (TEXT_HOT_CLONES) and called once a line: inlined into the block's loop, its
// running count and pointers were spilled to the stack, a store and a load on
// every cell.
TEXT_HOT_CLONES __attribute__((noinline)) static int fast_line(const csv_read_t *c, csv_part_t *s, const char *p,
                                                               const char **end) {
    const char delim = c->delim;
    const size_t label_col = c->label_col, last = c->ncols - 1;
    uint32_t *col = s->col;
    float *val = s->val;
    size_t nnz = s->nnz;  // in a register, not in s: stored once, with the row
    int spans_cell = 1;  // every number so far ended where its cell does
    for (size_t k = 0;; k++) {
        while (*p == ' ' || (*p == '\t' && delim != '\t')) p++;
        if (__builtin_expect(k == label_col, 0)) {
            const char *b = p;
            if (c->string_labels) {
                if (*p == '"') return 0;
                while (*p != delim && *p != '\n' && *p != '\0') p++;
                const char *e = p;
                while (e > b && (*(e - 1) == ' ' || *(e - 1) == '\r' || (*(e - 1) == '\t' && delim != '\t'))) e--;
                if (e == b || (size_t)(e - b) > DATASET_MAX_LABEL_BYTES) return 0;
                int32_t id = string_label(c, s, b, (size_t)(e - b));
                if (id < 0) return 0;
                s->cls[s->rows] = id;
            } else {
                uint64_t mantissa;
                int frac_digits, negative;
                const char *cell_end = b + text_span_until(b, delim);
                const char *e = text_decimal_fast(b, &mantissa, &frac_digits, &negative);
                if (!e || frac_digits || mantissa > 2147483647u + (uint64_t)negative) return 0;
                int32_t label = negative ? (int32_t)(-(int64_t)mantissa) : (int32_t)mantissa;
                if (c->o->labels && (label = dataset_label_class(c->o->labels, c->o->k, label)) < 0) return 0;
                s->cls[s->rows] = label;
                p = e == cell_end ? cell_end : e;
            }
        } else {
            // Where the cell ends is found first (text_span.h: the first blank,
            // delimiter or line end), and the next cell starts from there, so
            // that it does not wait for this one's number. The number must end
            // at the same byte; that is checked without a branch (spans_cell),
            // for a branch on it would let the compiler take the next start
            // from the number's end, which chains every cell to the last.
            uint64_t mantissa;
            int frac_digits, negative;
            const char *cell_end = p + text_span_until(p, delim);
            const char *e = text_decimal_scan(p, &mantissa, &frac_digits, &negative);
            if (!e) return 0;
            spans_cell &= e == cell_end;  // the byte there ends the cell: no letter, digit or '.' follows
            // Stored whatever it is, kept only when not 0: no branch on the value
            // (the caller made room for the row).
            float v = text_decimal_float(mantissa, frac_digits, negative, p);
            col[nnz] = (uint32_t)(k - (k > label_col));
            val[nnz] = v;
            nnz += v != 0.0f;
            p = cell_end;
        }
        while (*p == ' ' || *p == '\r' || (*p == '\t' && delim != '\t')) p++;
        if (*p == delim && k < last) {
            p++;
            continue;
        }
        if ((*p == '\n' || *p == '\0') && k == last) break;
        return 0;
    }
    if (!spans_cell) return 0;
    s->nnz = nnz;
    *end = p;
    return 1;
}

static void *part_new(void *ctx) {
    csv_part_t *s = calloc(1, sizeof *s);
    if (s) label_dict_init(&s->dict);
    return s;
}

static void part_free(void *ctx, void *part) {
    csv_part_t *s = part;
    free(s->row_end);
    free(s->cls);
    free(s->col);
    free(s->val);
    label_dict_free(&s->dict);
    csv_splitter_free(&s->split);
    free(s);
}

static int parse_block(void *ctx, const text_block_t *b, void *part, size_t *lines, text_block_error_t *out) {
    const csv_read_t *c = ctx;
    csv_part_t *s = part;
    s->rows = s->nnz = 0;
    label_dict_clear(&s->dict);
    const char *p = b->text, *block_end = b->text + b->len, *line_start = p;
    size_t line = 0;
    while (p < block_end) {
        line++;
        line_start = p;
        const char *q = p;
        while (is_blank(*q)) q++;
        const char *end = q;
        if (*q != '\n' && *q != '\0') {
            size_t nnz_before = s->nnz;
            if (grow_rows(s) != 0) {
                s->at = p;
                snprintf(s->what, sizeof s->what, "out of memory after %zu examples", s->rows);
                goto fail;
            }
            if (reserve_values(s, c->ncols) != 0) {
                s->at = p;
                snprintf(s->what, sizeof s->what, "out of memory after %zu non-zeros", s->nnz);
                goto fail;
            }
            if (!fast_line(c, s, p, &end)) {
                s->nnz = nnz_before;
                if (careful_line(c, s, p, &end) != 0) goto fail;
            }
            s->row_end[s->rows++] = s->nnz;
        }
        if (end < block_end && *end == '\0') {
            s->at = end;
            snprintf(s->what, sizeof s->what, "NUL byte in a text file (is it binary?)");
            goto fail;
        }
        p = *end == '\n' ? end + 1 : end;
        if (p == end) break;  // the end of the block
    }
    *lines = line;
    return 0;
fail:
    out->whole = 0;
    out->line = line;
    out->column = (size_t)(s->at - line_start) + 1;
    snprintf(out->what, sizeof out->what, "%s", s->what);
    return -1;
}

// A part's string labels as ids of the file's dictionary, into c->to_dict.
static int fold_labels(csv_read_t *c, const csv_part_t *s, char *err, size_t err_len) {
    if (grow((void **)&c->to_dict, sizeof *c->to_dict, &c->to_dict_cap, s->dict.count) != 0) goto oom;
    for (size_t id = 0; id < s->dict.count; id++) {
        const char *label = label_dict_label(&s->dict, (int32_t)id);
        if ((c->to_dict[id] = label_dict_id(&c->dict, label, strlen(label))) < 0) goto oom;
    }
    if (c->dict.count > DATASET_MAX_CLASSES) {
        char shown[160];
        dataset_label_names_text(c->dict.text, c->dict.count, shown, sizeof shown);
        snprintf(err, err_len,
                 "%s: more than %d distinct labels (%s); at most %d classes are read (labels are "
                 "classes, not values to regress on)",
                 c->name, DATASET_MAX_CLASSES, shown, DATASET_MAX_CLASSES);
        return -1;
    }
    return 0;
oom:
    snprintf(err, err_len, "%s: out of memory for the labels", c->name);
    return -1;
}

static int join_part(void *ctx, void *part, char *err, size_t err_len) {
    csv_read_t *c = ctx;
    const csv_part_t *s = part;
    size_t cap = c->row_cap;
    int32_t *t = NULL;
    if (c->rows + s->rows + 1 > c->row_cap &&
        (grow((void **)&c->row_ptr, sizeof *c->row_ptr, &cap, c->rows + s->rows + 1) != 0 ||
         !(t = realloc(c->cls, cap * sizeof *c->cls)) || !(c->cls = t, c->row_cap = cap))) {
        snprintf(err, err_len, "%s: out of memory after %zu examples", c->name, c->rows);
        return -1;
    }
    if (c->nnz + s->nnz > c->nnz_cap) {
        size_t ncap = c->nnz_cap;
        if (grow((void **)&c->col, sizeof *c->col, &ncap, c->nnz + s->nnz) != 0 ||
            grow((void **)&c->val, sizeof *c->val, &c->nnz_cap, c->nnz + s->nnz) != 0) {
            snprintf(err, err_len, "%s: out of memory after %zu non-zeros", c->name, c->nnz);
            return -1;
        }
    }
    int fold = c->string_labels && !c->given;
    if (fold && fold_labels(c, s, err, err_len) != 0) return -1;
    c->row_ptr[0] = 0;
    for (size_t i = 0; i < s->rows; i++) {
        c->row_ptr[c->rows + 1 + i] = c->nnz + s->row_end[i];
        c->cls[c->rows + i] = fold ? c->to_dict[s->cls[i]] : s->cls[i];
    }
    if (s->nnz) {
        text_copy_fresh(c->col + c->nnz, s->col, s->nnz * sizeof *s->col);
        text_copy_fresh(c->val + c->nnz, s->val, s->nnz * sizeof *s->val);
    }
    c->rows += s->rows;
    c->nnz += s->nnz;
    return 0;
}

static void read_free(csv_read_t *c) {
    free(c->names);
    free(c->name_at);
    free(c->given);
    free(c->row_ptr);
    free(c->cls);
    free(c->col);
    free(c->val);
    free(c->to_dict);
    label_dict_free(&c->dict);
}

static const text_blocks_ops_t csv_ops = {part_new, part_free, parse_block, join_part, prepare};

// The classes of the labels read: the given ones, the strings' (byte order),
// or the integers' (ascending). cls is rewritten to classes. Out of memory
// leaves *labels NULL, which sparse_dataset_adopt reports.
static int classes_of(csv_read_t *c, int32_t **labels, char **label_text, size_t *k, char *err, size_t err_len) {
    const csv_options_t *o = c->o;
    *labels = NULL;
    *label_text = NULL;
    if (o->labels) {
        *k = o->k;
        if ((*labels = malloc((o->k ? o->k : 1) * sizeof **labels))) memcpy(*labels, o->labels, o->k * sizeof **labels);
        if (o->label_text && *labels) {
            size_t bytes = dataset_label_text_bytes(o->label_text, o->k);
            if ((*label_text = malloc(bytes ? bytes : 1))) memcpy(*label_text, o->label_text, bytes);
        }
    } else if (!c->string_labels) {
        return dataset_classes_of(c->name, c->cls, c->rows, labels, k, err, err_len);
    } else {
        *k = c->dict.count;
        int32_t *to_class = malloc((*k ? *k : 1) * sizeof *to_class);
        *labels = malloc((*k ? *k : 1) * sizeof **labels);
        if (to_class && *labels && label_dict_classes(&c->dict, label_text, to_class) == 0) {
            for (size_t i = 0; i < c->rows; i++) c->cls[i] = to_class[c->cls[i]];
            for (size_t i = 0; i < *k; i++) (*labels)[i] = (int32_t)i;
        }
        free(to_class);
    }
    if (c->string_labels && !*label_text) {  // the names' allocation failed: no classes without them
        free(*labels);
        *labels = NULL;
    }
    return 0;
}

static int parse_all(text_reader_t *reader, const csv_options_t *o, sparse_dataset_t *out, char *err, size_t err_len) {
    csv_read_t c;
    memset(&c, 0, sizeof c);
    char name[512];
    snprintf(name, sizeof name, "%s", reader->name);
    c.name = name;
    c.o = o;
    label_dict_init(&c.dict);
    if (text_blocks_run(reader, &csv_ops, &c, err, err_len) != 0) {
        read_free(&c);
        return -1;
    }
    if (c.rows == 0) {
        snprintf(err, err_len, "%s: no examples (the file is empty, blank or a header alone)", name);
        read_free(&c);
        return -1;
    }
    int32_t *labels = NULL;
    char *label_text = NULL;
    size_t k = 0;
    if (classes_of(&c, &labels, &label_text, &k, err, err_len) != 0) {
        read_free(&c);
        return -1;
    }
    *out = (sparse_dataset_t){.n = c.rows,
                              .dim = c.ncols - 1,
                              .nnz = c.nnz,
                              .row_ptr = c.row_ptr,
                              .col = c.col,
                              .val = c.val,
                              .cls = c.cls,
                              .labels = labels,
                              .label_text = label_text,
                              .n_classes = k};
    c.row_ptr = NULL, c.col = NULL, c.val = NULL, c.cls = NULL;
    read_free(&c);
    return sparse_dataset_adopt(out, name, err, err_len);
}

int csv_load(const char *path, const csv_options_t *o, sparse_dataset_t *out, char *err, size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    return parse_all(&reader, o, out, err, err_len);
}

int csv_parse(const char *name, const char *text, size_t len, const csv_options_t *o, sparse_dataset_t *out, char *err,
              size_t err_len) {
    sparse_dataset_init(out);
    text_reader_t reader;
    if (text_reader_open_memory(&reader, name, text, len, err, err_len) != 0) return -1;
    return parse_all(&reader, o, out, err, err_len);
}
