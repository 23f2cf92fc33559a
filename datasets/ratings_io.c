#include "datasets/ratings_io.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/data_input.h"
#include "datasets/text_io.h"

// See libsvm.c: the largest double that still rounds to a finite float.
#define FLOAT_ROUNDS_FINITE_BELOW 0x1.ffffffp+127

// ---- file id -> dense id ----

// Open addressing with linear probing; values hold dense id + 1 so 0 marks a free slot.
typedef struct id_map {
    uint64_t *keys;  // (cap)
    uint32_t *values;  // (cap)
    size_t cap, count;
} id_map_t;

static uint64_t hash_id(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static int id_map_grow(id_map_t *m) {
    if (m->cap > SIZE_MAX / 2 / sizeof *m->keys) return -1;
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *values = calloc(cap, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->values[i]) continue;
        size_t j = hash_id(m->keys[i]) & (cap - 1);
        while (values[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        values[j] = m->values[i];
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    return 0;
}

static void id_map_free(id_map_t *m) {
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}

// The dense id of key, assigning the next one if it is new. -1: out of memory;
// -2: more distinct ids than a uint32 holds.
static int64_t id_map_get(id_map_t *m, uint64_t key) {
    if ((m->count + 1) * 2 > m->cap && id_map_grow(m) != 0) return -1;
    size_t j = hash_id(key) & (m->cap - 1);
    while (m->values[j]) {
        if (m->keys[j] == key) return (int64_t)m->values[j] - 1;
        j = (j + 1) & (m->cap - 1);
    }
    if (m->count >= UINT32_MAX) return -2;
    m->keys[j] = key;
    m->values[j] = (uint32_t)++m->count;
    return (int64_t)m->count - 1;
}

// ---- the parser ----

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static int at_line_end(const char *p) { return *p == '\n' || *p == '#' || *p == '\0'; }
// A field ends at a separator, a comment or the end of the line.
static int ends_field(const char *p) {
    return *p == ',' || *p == ' ' || *p == '\t' || *p == '\r' || at_line_end(p) || (p[0] == ':' && p[1] == ':');
}

static const char *skip_blanks(const char *p) {
    while (is_blank(*p)) p++;
    return p;
}

// What stands at p, for "expected X, got Y".

// The field at p for an error message, quoted: at most 32 bytes, non-printable
// bytes as '?'; an empty field is described by what stands there instead.
static const char *show_field(const char *p, char buf[48]) {
    if (ends_field(p)) return text_show_char(p, buf);
    size_t n = 0;
    buf[n++] = '\'';
    while (n < 33 && !ends_field(p + n - 1)) {
        unsigned char c = (unsigned char)p[n - 1];
        buf[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (!ends_field(p + n - 1)) memcpy(buf + n, "...", 3), n += 3;
    buf[n++] = '\'';
    buf[n] = '\0';
    return buf;
}

// Moves past one separator: "::", or ',' with optional blanks around it, or a run
// of spaces/tabs. 0 when there is none at p.
static int skip_separator(const char **pp) {
    const char *p = *pp;
    if (p[0] == ':' && p[1] == ':') {
        *pp = p + 2;
        return 1;
    }
    const char *q = skip_blanks(p);
    if (*q == ',')
        q = skip_blanks(q + 1);
    else if (q[0] == ':' && q[1] == ':')
        q += 2;
    else if (q == p || at_line_end(q))
        return 0;  // no blank, or only trailing blanks
    *pp = q;
    return 1;
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

static int is_alnum(char c) { return text_is_digit(c) || (unsigned)((c | 0x20) - 'a') < 26; }

// what: "user id" or "item id".
static int parse_id(const char **pp, const char *what, uint64_t *id, parse_error_t *e) {
    const char *p = *pp, *article = what[0] == 'i' ? "an" : "a";
    char shown[48];
    uint64_t v = 0;
    const char *q = p;
    for (; text_is_digit(*q); q++) {
        uint64_t d = (uint64_t)(*q - '0');
        if (v > (UINT64_MAX - d) / 10) FAIL_AT(p, "%s %s is too large (at most 2^64 - 1)", what, show_field(p, shown));
        v = v * 10 + d;
    }
    // Digits then punctuation ("4;5") are an id and a bad separator, which the
    // caller reports; digits glued to letters, '.' or a sign are a bad id.
    if (q == p || (!ends_field(q) && (is_alnum(*q) || *q == '.' || *q == '+' || *q == '-')))
        FAIL_AT(p, "expected %s %s (a non-negative integer), got %s", article, what, show_field(p, shown));
    *id = v;
    *pp = q;
    return 0;
}

static int expect_separator(const char **pp, const char *after, const char *next, parse_error_t *e) {
    char shown[48];
    if (!skip_separator(pp))
        FAIL_AT(*pp, "expected a separator (',', tab, space or '::') and %s after the %s, got %s", next, after,
                text_show_char(*pp, shown));
    return 0;
}

// One `user item rating [timestamp]` line starting at *pp (not blank, not a comment).
static int parse_line(const char **pp, uint64_t *user, uint64_t *item, float *rating, parse_error_t *e) {
    const char *p = *pp;
    char shown[48];
    if (parse_id(&p, "user id", user, e) != 0) return -1;
    if (expect_separator(&p, "user id", "an item id", e) != 0) return -1;
    if (parse_id(&p, "item id", item, e) != 0) return -1;
    if (expect_separator(&p, "item id", "a rating", e) != 0) return -1;
    double value;
    const char *end = text_parse_double(p, &value);
    if (end == p || !ends_field(end)) FAIL_AT(p, "expected a rating (a number), got %s", show_field(p, shown));
    const char *digits = *p == '+' || *p == '-' ? p + 1 : p;  // "1e999" is out of range, "inf" is not finite
    if (isnan(value) || (isinf(value) && !text_is_digit(*digits) && *digits != '.'))
        FAIL_AT(p, "rating %s is not finite", show_field(p, shown));
    if (fabs(value) >= FLOAT_ROUNDS_FINITE_BELOW)
        FAIL_AT(p, "rating %s is out of float range (|rating| <= 3.40282347e+38)", show_field(p, shown));
    p = end;
    if (!at_line_end(skip_blanks(p))) {
        if (!skip_separator(&p))
            FAIL_AT(p, "expected a separator or the end of the line after the rating, got %s",
                    text_show_char(p, shown));
        double timestamp;
        end = text_parse_double(p, &timestamp);
        if (end == p || !ends_field(end))
            FAIL_AT(p, "expected a timestamp (a number) as the 4th field, got %s", show_field(p, shown));
        p = skip_blanks(end);
        if (!at_line_end(p))
            FAIL_AT(p,
                    "expected the end of the line after the timestamp (at most 4 fields: user, item, rating, "
                    "timestamp), got %s",
                    text_show_char(p, shown));
    }
    *rating = (float)value;
    *pp = p;
    return 0;
}

// A header names the columns: letters and no digits (userId,movieId,rating,timestamp).
static int is_header(const char *p) {
    int letters = 0;
    for (; *p != '\n' && *p != '\0'; p++) {
        if (text_is_digit(*p)) return 0;
        letters |= (unsigned)((*p | 0x20) - 'a') < 26;
    }
    return letters;
}

// The ratings read so far.
typedef struct parse_state {
    uint32_t *user;  // (cap)
    uint32_t *item;  // (cap)
    float *rating;  // (cap)
    size_t n, cap;
    id_map_t *users, *items;  // shared by the files read together (ratings_load_pair)
} parse_state_t;

static void state_free(parse_state_t *s) {
    free(s->user);
    free(s->item);
    free(s->rating);
    s->user = s->item = NULL;
    s->rating = NULL;
    s->n = s->cap = 0;
}

static int state_grow(parse_state_t *s) {
    size_t cap = s->cap ? s->cap * 2 : 4096;
    if (cap < s->cap || cap > SIZE_MAX / sizeof(uint32_t)) return -1;
    void *t;
    if (!(t = realloc(s->user, cap * sizeof *s->user))) return -1;
    s->user = t;
    if (!(t = realloc(s->item, cap * sizeof *s->item))) return -1;
    s->item = t;
    if (!(t = realloc(s->rating, cap * sizeof *s->rating))) return -1;
    s->rating = t;
    s->cap = cap;
    return 0;
}

// Parses everything the reader holds into out and closes the reader; ids are
// numbered through the maps (which may already hold another file's).
static int parse_with(text_reader_t *reader, const char *path, id_map_t *users, id_map_t *items, ratings_t *out,
                      char *err, size_t err_len) {
    parse_state_t s;
    memset(&s, 0, sizeof s);
    s.users = users;
    s.items = items;
    parse_error_t e_store = {NULL, ""}, *e = &e_store;
    size_t line = 0, content_lines = 0, block_len;
    const char *block, *line_start = NULL;
    int got;
    for (int first = 1; (got = text_reader_next(reader, &block, &block_len, err, err_len)) == 1; first = 0) {
        const char *p = block, *block_end = block + block_len;
        if (first && strncmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;  // a UTF-8 byte order mark
        while (p < block_end) {
            line++;
            line_start = p;
            p = skip_blanks(p);
            if (!at_line_end(p) && !(++content_lines == 1 && is_header(p))) {
                uint64_t user, item;
                float rating;
                if (parse_line(&p, &user, &item, &rating, e) != 0) goto fail;
                int64_t du = id_map_get(s.users, user), di = du >= 0 ? id_map_get(s.items, item) : du;
                if (du < 0 || di < 0) {
                    e->at = line_start;
                    snprintf(e->detail, sizeof e->detail, "%s",
                             du == -2 || di == -2 ? "more than 2^32 - 1 distinct ids" : "out of memory mapping ids");
                    goto fail;
                }
                if (s.n == s.cap && state_grow(&s) != 0) {
                    e->at = line_start;
                    snprintf(e->detail, sizeof e->detail, "out of memory after %zu ratings", s.n);
                    goto fail;
                }
                s.user[s.n] = (uint32_t)du;
                s.item[s.n] = (uint32_t)di;
                s.rating[s.n] = rating;
                s.n++;
            }
            while (*p && *p != '\n') p++;  // the rest is a comment, a skipped header, or nothing
            if (p < block_end && *p == '\0') {
                e->at = p;
                snprintf(e->detail, sizeof e->detail, "NUL byte in a text file (is it binary?)");
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
    if (s.n == 0) {
        snprintf(err, err_len, "%s: no ratings (the file is empty or has only a header, comments and blank lines)",
                 path);
        state_free(&s);
        return -1;
    }
    void *t;  // trim to size; a failed trim keeps the larger block
    if ((t = realloc(s.user, s.n * sizeof *s.user))) s.user = t;
    if ((t = realloc(s.item, s.n * sizeof *s.item))) s.item = t;
    if ((t = realloc(s.rating, s.n * sizeof *s.rating))) s.rating = t;
    out->n = s.n;
    out->n_users = s.users->count;
    out->n_items = s.items->count;
    out->user = s.user;
    out->item = s.item;
    out->rating = s.rating;
    return 0;
fail:
    snprintf(err, err_len, "%s:%zu:%zu: %s", path, line, (size_t)(e->at - line_start) + 1, e->detail);
    text_reader_close(reader);
    state_free(&s);
    return -1;
}

static int parse_all(text_reader_t *reader, const char *path, ratings_t *out, char *err, size_t err_len) {
    id_map_t users, items;
    memset(&users, 0, sizeof users);
    memset(&items, 0, sizeof items);
    int rc = parse_with(reader, path, &users, &items, out, err, err_len);
    id_map_free(&users);
    id_map_free(&items);
    return rc;
}

int ratings_load(const char *path, ratings_t *out, char *err, size_t err_len) {
    ratings_init(out);
    text_reader_t reader;
    if (text_reader_open(&reader, path, err, err_len) != 0) return -1;
    return parse_all(&reader, data_input_display_name(path), out, err, err_len);
}

int ratings_load_pair(const char *path, const char *second_path, ratings_t *out, ratings_t *second, char *err,
                      size_t err_len) {
    ratings_init(out);
    ratings_init(second);
    id_map_t users, items;
    memset(&users, 0, sizeof users);
    memset(&items, 0, sizeof items);
    text_reader_t reader;
    int rc = text_reader_open(&reader, path, err, err_len);
    if (rc == 0) rc = parse_with(&reader, data_input_display_name(path), &users, &items, out, err, err_len);
    if (rc == 0) rc = text_reader_open(&reader, second_path, err, err_len);
    if (rc == 0) rc = parse_with(&reader, data_input_display_name(second_path), &users, &items, second, err, err_len);
    if (rc != 0) ratings_free(out);
    id_map_free(&users);
    id_map_free(&items);
    return rc;
}

int ratings_parse(const char *name, const char *text, size_t len, ratings_t *out, char *err, size_t err_len) {
    ratings_init(out);
    text_reader_t reader;
    if (text_reader_open_memory(&reader, name, text, len, err, err_len) != 0) return -1;
    return parse_all(&reader, name, out, err, err_len);
}

int ratings_write(const char *path, const ratings_t *r, char *err, size_t err_len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    int failed = 0, saved = 0;
    char value[32];
    for (size_t i = 0; i < r->n && !failed; i++) {
        text_format_float(r->rating[i], value);
        if (fprintf(f, "%u,%u,%s\n", r->user[i], r->item[i], value) < 0) failed = 1, saved = errno;
    }
    if (fclose(f) != 0 && !failed) failed = 1, saved = errno;
    if (failed) {
        snprintf(err, err_len, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
        return -1;
    }
    return 0;
}
