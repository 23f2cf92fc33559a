#ifndef ASGD_DATASETS_TEXT_IO_H
#define ASGD_DATASETS_TEXT_IO_H
// Text-file plumbing for the dataset readers and writers (libsvm, ratings):
// reading whole files or blocks of whole lines, parsing and formatting numbers
// exactly, and describing a character for error messages.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "datasets/data_input.h"

// Reads the whole file at path (plain or compressed: datasets/data_input.h)
// into a NUL-terminated buffer; the caller owns *out (free). Refuses files
// containing NUL bytes (with file:line:column), so that a caller may treat '\0'
// as the end.
int text_file_read(const char *path, char **out, size_t *out_len, char *err, size_t err_len);

// Reads a file in blocks of whole lines: each block ends just after a '\n' (the
// file's last line may lack one) and has a '\0' after its end, then
// TEXT_BLOCK_PAD more readable bytes, so a parser can scan it with a sentinel
// and read a word past it. Memory stays at one block (about `block` bytes, more
// for a longer line) however large the file. A '\0' before the end of a block
// is a NUL byte in the file; the parser reports it where it finds it. The
// input may be compressed (read transparently, within data_input.h's bounds),
// a pipe, or "-" for stdin; content that is binary by its first bytes (an ELF
// program, an image, an IDX or asgd model file, a tar archive, ...) is refused
// at the first block, naming what it looks like.
#define TEXT_BLOCK_PAD 64
#define TEXT_BLOCK_BYTES ((size_t)1 << 20)

// A block's bytes: data[0..len) of whole lines, data[len] == '\0', and
// TEXT_BLOCK_PAD readable bytes after it. The owner frees data.
typedef struct text_block_buf {
    char *data;  // (cap + 1 + TEXT_BLOCK_PAD)
    size_t len;
    size_t cap;
} text_block_buf_t;

typedef struct text_reader {
    data_input_t *in;
    const char *name;  // for messages: the path, "stdin", or the name given
    size_t block;  // bytes read for a block (its lines are cut at the last '\n')
    char *carry;  // (carry_cap) the partial line after the last block
    size_t carry_len, carry_cap;
    size_t blocks;  // blocks given so far
    int at_eof;
    text_block_buf_t own;  // the block of text_reader_next
} text_reader_t;

int text_reader_open(text_reader_t *r, const char *path, char *err, size_t err_len);
// The same reader over len bytes in memory (plain or compressed), which
// must outlive the reader; name stands for the path in messages.
int text_reader_open_memory(text_reader_t *r, const char *name, const void *data, size_t len, char *err,
                            size_t err_len);
// 1 with the next block in *block (len bytes, NUL-terminated; valid until the
// next call), 0 at the end of the file, -1 on a read error (err names the file).
int text_reader_next(text_reader_t *r, const char **block, size_t *len, char *err, size_t err_len);
// The next block into b (grown as needed): b's own bytes are replaced, or with
// append kept and the block added after them (a block too short for a
// caller). 1, 0 at the end of the file (b unchanged), or -1 with err.
int text_reader_next_into(text_reader_t *r, text_block_buf_t *b, int append, char *err, size_t err_len);
void text_reader_close(text_reader_t *r);  // safe on a zeroed or closed reader
void text_block_buf_free(text_block_buf_t *b);

// Parses a decimal number at p exactly as strtod does (same value, same end; a
// fast path covers plain decimals of up to 19 digits) and returns the end, or p
// itself when there is no number. errno is left as it was: callers check the
// value's range (isfinite, float range) themselves.
const char *text_parse_double(const char *p, double *value);
// The same where 32 bytes are readable from every byte up to the number's end
// (a block's text: TEXT_BLOCK_PAD): the same value and end, a short decimal
// read without a loop over its digits (text_decimal.h).
const char *text_parse_double_padded(const char *p, double *value);
// text_parse_double_padded's number as a float: *value is exactly strtof's
// (the decimal rounded once, to a float). *wide is text_parse_double's double
// where the number is outside float range or not finite (for the caller's
// checks), and the float itself otherwise.
const char *text_parse_float_padded(const char *p, float *value, double *wide);

// memcpy(to, from, bytes) into memory not written before (a reader's whole
// data set as its parts join it): the pages of to are mapped in first, in one
// call (madvise MADV_POPULATE_WRITE), not by a page fault a page. Where the
// kernel cannot, they fault in as they are written.
void text_copy_fresh(void *to, const void *from, size_t bytes);

// Writes v NUL-terminated exactly as snprintf(out, 32, "%.9g", v) would, and
// returns the length; several times faster for values in [1e-14, 1e9).
int text_format_float(float v, char out[32]);

static inline int text_is_digit(char c) { return (unsigned)(c - '0') < 10; }

// What stands at p, for "expected X, got Y": "the end of the line", "a space",
// "a tab", "a '#' comment", a quoted printable character, or a byte in hex.
const char *text_show_char(const char *p, char buf[48]);

#endif
