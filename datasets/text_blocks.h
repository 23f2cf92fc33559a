#ifndef ASGD_DATASETS_TEXT_BLOCKS_H
#define ASGD_DATASETS_TEXT_BLOCKS_H
// A text input parsed in blocks of whole lines on several threads, the
// blocks' results joined in input order: the libsvm and CSV readers run on it.
//
// The threads (the caller and up to threads - 1 more, started only when the
// input has more than one block) each take the next block from the reader
// (one at a time: reading is sequential), parse it into a part of their own
// with no lock held, and hand it back; parts are joined into the whole in the
// order of their blocks, one at a time. A parser sees only its block, so
// everything it decides must follow from the block's lines and from state
// fixed before the blocks start (prepare, below): then the whole is the same,
// byte for byte, whatever the thread count and however the threads were
// scheduled. Errors are reported in input order too: the first bad line of the
// input is the one named, with its line number in the whole input, and no
// block after it is joined; a read error (a corrupt compressed file) is
// reported where its block would have come.
//
// Memory: at most 2 x threads blocks of text (text_io.h: about 1 MiB each, more
// for a longer line) and their parts at once.
#include <stddef.h>
#include <stdint.h>

#include "datasets/text_io.h"

// The most threads a parse uses.
#define TEXT_BLOCKS_MAX_THREADS 16

// Threads used by parses started after the call (process-wide): n, at most
// TEXT_BLOCKS_MAX_THREADS; 0 restores the default, the CPUs online (at most
// the maximum). Returns the previous setting (0: the default).
size_t text_blocks_set_threads(size_t n);
// The threads a parse starts with now.
size_t text_blocks_threads(void);

// A block as a parser sees it: whole lines, then '\0' and TEXT_BLOCK_PAD
// readable bytes. The input's first block starts after a UTF-8 byte order mark.
typedef struct text_block {
    const char *text;
    size_t len;
    uint64_t index;  // 0, 1, ...: its place in the input
} text_block_t;

// Where a parse failed: the line within the block (from 1) and the byte of
// that line (from 1; 0: the line as a whole), and what was expected. With
// whole set, what is the entire message (it names the file itself).
typedef struct text_block_error {
    size_t line, column;
    int whole;
    char what[480];
} text_block_error_t;

typedef struct text_blocks_ops {
    // A thread's part: made once per block slot, reused block after block.
    void *(*part_new)(void *ctx);
    void (*part_free)(void *ctx, void *part);
    // Parses block b into part (emptied first), counting its lines into
    // *lines. 0, or -1 with e. Called on several threads at once: ctx is
    // read-only here.
    int (*parse)(void *ctx, const text_block_t *b, void *part, size_t *lines, text_block_error_t *e);
    // Appends a parsed part to the whole, in input order, one part at a time.
    // 0, or -1 with err (one line, naming the input).
    int (*join)(void *ctx, void *part, char *err, size_t err_len);
    // Optional, before any parse, on the input's first block (grown with more
    // lines while it returns 0, or the whole input): fixes what every block's
    // parse depends on (a CSV file's columns), and says how much of the block
    // it used (*used bytes, *used_lines lines: blank lines, a header) so that
    // the blocks start after it. 1, 0 for more, or -1 with e.
    int (*prepare)(void *ctx, const text_block_t *b, int at_end, size_t *used, size_t *used_lines,
                   text_block_error_t *e);
} text_blocks_ops_t;

// Reads r to its end and parses it as above, then closes r. 0, or -1 with err:
// "NAME:LINE:COLUMN: what" (or "NAME:LINE: what") for a parse error, the
// reader's or join's message otherwise.
int text_blocks_run(text_reader_t *r, const text_blocks_ops_t *ops, void *ctx, char *err, size_t err_len);

#endif
