#ifndef ASGD_DATASETS_TEXT_IO_H
#define ASGD_DATASETS_TEXT_IO_H
// Text-file plumbing for the dataset readers and writers (libsvm, ratings):
// reading whole files or blocks of whole lines, parsing and formatting numbers
// exactly, and describing a character for error messages.
#include <stddef.h>
#include <stdio.h>

#include "datasets/data_input.h"  // defines: data_input_t

// Reads the whole file at path (plain or gzip-compressed: datasets/data_input.h)
// into a NUL-terminated buffer; the caller owns *out (free). Refuses files
// containing NUL bytes (with file:line:column), so that a caller may treat '\0'
// as the end.
int text_file_read(const char *path, char **out, size_t *out_len, char *err, size_t err_len);

// Reads a file in blocks of whole lines: each block ends just after a '\n' (the
// file's last line may lack one) and has a '\0' after its end, so a parser can
// scan it with a sentinel. Memory stays at one block (1 MiB, or more for a
// longer line) however large the file. A '\0' before the end of a block is a
// NUL byte in the file; the parser reports it where it finds it. The file may
// be gzip-compressed (read transparently, within data_input.h's bounds).
typedef struct text_reader {
    data_input_t *in;
    const char *path;
    char *buf;      // (cap)
    size_t cap;     // bytes allocated; one is kept for the '\0'
    size_t len;     // bytes read into buf
    size_t given;   // bytes of buf handed out as the current block
    char cut;       // the byte the '\0' replaced at buf[given]
    int at_eof;
} text_reader_t;

int text_reader_open(text_reader_t *r, const char *path, char *err, size_t err_len);
// The same reader over len bytes in memory (plain or gzip-compressed), which
// must outlive the reader; name stands for the path in messages.
int text_reader_open_memory(text_reader_t *r, const char *name, const void *data, size_t len, char *err,
                            size_t err_len);
// 1 with the next block in *block (len bytes, NUL-terminated; valid until the
// next call), 0 at the end of the file, -1 on a read error (err names the path).
int text_reader_next(text_reader_t *r, const char **block, size_t *len, char *err, size_t err_len);
void text_reader_close(text_reader_t *r);  // safe on a zeroed or closed reader

// Parses a decimal number at p exactly as strtod does (same value, same end; a
// fast path covers plain decimals of up to 19 digits) and returns the end, or p
// itself when there is no number. errno is left as it was: callers check the
// value's range (isfinite, float range) themselves.
const char *text_parse_double(const char *p, double *value);

// Writes v NUL-terminated exactly as snprintf(out, 32, "%.9g", v) would, and
// returns the length; several times faster for values in [1e-14, 1e9).
int text_format_float(float v, char out[32]);

static inline int text_is_digit(char c) { return (unsigned)(c - '0') < 10; }

// What stands at p, for "expected X, got Y": "the end of the line", "a space",
// "a tab", "a '#' comment", a quoted printable character, or a byte in hex.
const char *text_show_char(const char *p, char buf[48]);

#endif
