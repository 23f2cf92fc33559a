#ifndef ASGD_DATASETS_CSV_CELLS_H
#define ASGD_DATASETS_CSV_CELLS_H
// One CSV line split into cells, with RFC 4180 quoting (datasets/csv.h has
// the rules): each cell's text, unquoted, with where it stands in the line
// for messages. The CSV reader's careful path: headers, quoted cells, and
// every line it must explain an error in.
#include <stddef.h>

typedef struct csv_cell {
    const char *text;  // the cell's text, unquoted and NUL-terminated (in the splitter's scratch)
    size_t len;
    const char *at;  // where the text starts in the line (after blanks and an opening quote)
    const char *at_end;  // where it ends in the line (before blanks and a closing quote)
} csv_cell_t;

typedef struct csv_splitter {
    csv_cell_t *cells;  // (cells_cap)
    size_t cells_cap;
    char *scratch;  // (scratch_cap) the cells' texts
    size_t scratch_cap;
} csv_splitter_t;

void csv_splitter_free(csv_splitter_t *s);  // safe on a zeroed one

// The delimiter a first line gives: ',' when it holds a comma outside quotes,
// else a tab when it holds one, else ','.
char csv_delimiter(const char *line);

// Splits the line at p (up to its '\n' or '\0', left in *end) into s->cells,
// storing at most max. Returns the count of cells (max + 1 when there are
// more), or -1 with *bad and why for a quoted cell that does not close on the
// line or text after a closing quote; -2 when out of memory.
long csv_split(csv_splitter_t *s, const char *p, char delim, size_t max, const char **end, const char **bad, char *why,
               size_t why_len);

#endif
