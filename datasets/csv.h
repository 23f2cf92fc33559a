#ifndef ASGD_DATASETS_CSV_H
#define ASGD_DATASETS_CSV_H
// Dense CSV (or TSV) files of numbers, one example per line:
//   label,x1,x2,...        (the label in any column: csv_options_t)
// Cells are separated by commas, or by tabs when the first line holds a tab
// and no comma (outside quotes). Every line has as many cells as the first;
// blanks around a cell, CRLF line ends, blank lines and a UTF-8 BOM are
// accepted. Quoting follows RFC 4180: a cell in double quotes may hold the
// delimiter, and "" inside it is one quote; blanks may stand around the
// quotes, nothing else. A quoted cell must close on its line (a newline inside
// quotes is refused, naming where the cell opened). An unquoted cell is taken
// as written, quotes included.
//
// The label is an integer class id, or a string: when the first data line's
// label cell is not a number, every label is a string (its text, unquoted;
// at most DATASET_MAX_LABEL_BYTES bytes) and the distinct strings, in byte
// order, are the classes (datasets/dataset.h: label_text). Otherwise every
// label must be an integer. The other cells, in order, are the features:
// finite numbers within float range (an empty cell is an error).
//
// The first line is a header (column names) when asked, or when one of its
// cells outside the label column is not a number. When only its label cell is
// not a number, the next line decides: a number in the label column there
// makes the first line a header (it names the column), a string makes it the
// first example (string labels). With the label column given by name the
// header is needed, and detected as any cell that is not a number.
//
// The examples are stored in the sparse form (datasets/dataset.h), zeros
// dropped, so that every model on sparse features reads them: dim is the
// number of columns less one. Integer labels become classes as libsvm files'
// do (ascending, at most DATASET_MAX_CLASSES; y is the binary view). The file
// may be compressed, a pipe or "-" for stdin (datasets/data_input.h); it is
// parsed on several threads (datasets/text_blocks.h) with the same result.
//
// Returns 0, or -1 with ONE line in err: "file:line:column: column K ('name'):
// what was expected" for bad input (K counts cells from 0, the column bytes
// from 1), "file: what failed" otherwise.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"

typedef struct csv_options {
    const char *label_column;  // NULL: the first; digits: a position from 0; else a header name
    int header;  // 1: the first line is a header; 0: detected
    const int32_t *labels;  // non-NULL: read with these classes (a training set's, ascending, k of them);
    size_t k;  //   a label not among them is an error at its line
    const char *label_text;  // with labels: their names (string labels, as a set's label_text), or NULL
} csv_options_t;

int csv_load(const char *path, const csv_options_t *o, sparse_dataset_t *out, char *err, size_t err_len);

// csv_load over len bytes in memory; name stands for the path in messages.
int csv_parse(const char *name, const char *text, size_t len, const csv_options_t *o, sparse_dataset_t *out, char *err,
              size_t err_len);

#endif
