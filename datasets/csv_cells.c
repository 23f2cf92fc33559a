// A CSV line into cells (csv_cells.h).
#include "datasets/csv_cells.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/text_io.h"

void csv_splitter_free(csv_splitter_t *s) {
    free(s->cells);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

char csv_delimiter(const char *line) {
    int quoted = 0, tab = 0;
    for (const char *q = line; *q != '\n' && *q != '\0'; q++) {
        if (*q == '"')
            quoted = !quoted;
        else if (!quoted && *q == ',')
            return ',';
        else if (!quoted && *q == '\t')
            tab = 1;
    }
    return tab ? '\t' : ',';
}

// Blanks a cell may have around it: spaces, and tabs unless they separate
// cells; after it, carriage returns too (a CRLF line end).
static int leading_blank(char c, char delim) { return c == ' ' || (c == '\t' && delim != '\t'); }
static int trailing_blank(char c, char delim) { return leading_blank(c, delim) || c == '\r'; }
static int ends_cell(char c, char delim) { return c == delim || c == '\n' || c == '\0'; }

// Room for cell n. The cells grow as a line has them: a first line is split
// with room for 2^24 columns, whose cells at once would take 512 MiB.
static int cell_room(csv_splitter_t *s, size_t n) {
    if (n < s->cells_cap) return 0;
    size_t cap = s->cells_cap ? 2 * s->cells_cap : 64;
    csv_cell_t *c = realloc(s->cells, cap * sizeof *c);
    if (!c) return -1;
    s->cells = c;
    s->cells_cap = cap;
    return 0;
}

// Room for a line of len bytes: its cells' texts (no longer than the line)
// and their NULs (one a cell: at most len + 1).
static int text_room(csv_splitter_t *s, size_t len) {
    if (s->scratch_cap < 2 * len + 2) {
        char *t = realloc(s->scratch, 2 * len + 2);
        if (!t) return -1;
        s->scratch = t;
        s->scratch_cap = 2 * len + 2;
    }
    return 0;
}

// A quoted cell from its opening quote at q: its text into out (returned end),
// *p after the closing quote. NULL with *bad and why when it does not close.
static char *unquote(const char **p, char *out, const char **bad, char *why, size_t why_len) {
    const char *q = *p + 1;
    for (;;) {
        if (*q == '"' && q[1] == '"') {
            *out++ = '"';
            q += 2;
        } else if (*q == '"') {
            *p = q + 1;
            return out;
        } else if (*q == '\n' || *q == '\0') {
            *bad = *p;
            snprintf(why, why_len,
                     "a quoted cell opens here and is not closed on its line (expected a closing '\"'; "
                     "newlines inside quotes are not read)");
            return NULL;
        } else {
            *out++ = *q++;
        }
    }
}

long csv_split(csv_splitter_t *s, const char *p, char delim, size_t max, const char **end, const char **bad, char *why,
               size_t why_len) {
    if (text_room(s, strcspn(p, "\n")) != 0) return -2;
    char *out = s->scratch;
    size_t n = 0;
    for (;;) {
        while (leading_blank(*p, delim)) p++;
        csv_cell_t c = {out, 0, p, p};
        if (*p == '"') {
            c.at = p + 1;
            char *done = unquote(&p, out, bad, why, why_len);
            if (!done) return -1;
            c.at_end = p - 1;
            out = done;
            while (trailing_blank(*p, delim)) p++;
            if (!ends_cell(*p, delim)) {
                char shown[48];
                *bad = p;
                snprintf(why, why_len, "expected the delimiter or the end of the line after a quoted cell, got %s",
                         text_show_char(p, shown));
                return -1;
            }
        } else {
            while (!ends_cell(*p, delim)) p++;
            const char *e = p;
            while (e > c.at && trailing_blank(e[-1], delim)) e--;
            c.at_end = e;
            memcpy(out, c.at, (size_t)(e - c.at));
            out += e - c.at;
        }
        c.len = (size_t)(out - c.text);
        *out++ = '\0';
        if (n < max) {
            if (cell_room(s, n) != 0) return -2;
            s->cells[n] = c;
        }
        n++;
        if (*p != delim) break;
        p++;
    }
    *end = p;
    return (long)(n > max ? max + 1 : n);
}
