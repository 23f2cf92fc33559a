#ifndef ASGD_DATASETS_DATA_INPUT_H
#define ASGD_DATASETS_DATA_INPUT_H
// A data file read as a stream of bytes, plain or compressed: every dataset
// reader (libsvm, CSV, ratings, IDX) reads through this, so a compressed file
// is read transparently wherever a plain one is. The compression is recognised
// by the content's magic bytes, never by the name:
//   gzip  (1f 8b)             inflated with zlib: several concatenated members
//                             and zero padding after the last are accepted
//   xz    (fd 37 7a 58 5a 00) liblzma: concatenated streams and their padding
//   zstd  (28 b5 2f fd)       libzstd: concatenated and skippable frames
// Corrupt or truncated data, a failed integrity check and other bytes after
// the compressed data are refused. Content that is compressed another way
// (bzip2, lz4, lzip, .lzma, compress's .Z) or an archive (zip, 7-Zip, RAR) is
// refused at open, naming what it looks like and how to decompress it.
//
// Sources: a regular file, a FIFO (named pipe: opening waits for its writer,
// as cat(1) does), or "-", the process's standard input (named "stdin" in
// messages; it can be read once). Directories, devices and sockets are refused.
//
// Bounded: a compressed input is refused once it has decompressed to more
// than data_input_max_inflated() bytes, and so is a plain one read from a pipe
// or stdin, whose length nothing else bounds (a regular file is bounded by its
// size). Decoders' own memory is bounded too: an xz stream may ask for at most
// DATA_INPUT_MAX_WINDOW bytes of decoder memory and a zstd frame for a window
// no larger (what `xz -9` and `zstd -19` need; `zstd --long=31` is refused).
// Readers with a size of their own (IDX headers) read no more than it allows.
//
// Every function that fails returns -1 with ONE line in err naming the source
// (the path, "stdin", or the name given for bytes in memory).
#include <stddef.h>
#include <stdint.h>

typedef struct data_input data_input_t;

// The default cap on a compressed (or piped) input's size: 16 GiB, above every
// dataset asgd is used with, yet a bound.
#define DATA_INPUT_MAX_INFLATED_DEFAULT ((uint64_t)1 << 34)

// The most memory an xz or zstd decoder may use for its dictionary or window.
#define DATA_INPUT_MAX_WINDOW ((uint64_t)1 << 27)

// The cap in force for inputs opened after the call (process-wide; 0 restores
// the default). Returns the previous cap.
uint64_t data_input_set_max_inflated(uint64_t bytes);
uint64_t data_input_max_inflated(void);

// Opens path (which must outlive the input) for reading; "-" is standard
// input. *in is NULL on error.
int data_input_open(data_input_t **in, const char *path, char *err, size_t err_len);
// The same over len bytes in memory, which must outlive the input (not copied);
// name stands for the path in messages.
int data_input_open_memory(data_input_t **in, const char *name, const void *data, size_t len, char *err,
                           size_t err_len);

// Reads up to n bytes (decompressed, for a compressed input) into buf; *got < n
// only at the end of the data. 0, or -1 with err.
int data_input_read(data_input_t *in, void *buf, size_t n, size_t *got, char *err, size_t err_len);

// 1 if the input is compressed (gzip, xz or zstd).
int data_input_compressed(const data_input_t *in);
// "plain", "gzip", "xz" or "zstd".
const char *data_input_format(const data_input_t *in);
// The name messages use: the path, "stdin", or the name given for memory.
const char *data_input_name(const data_input_t *in);

// The name messages use for path: "stdin" for "-", else path itself.
const char *data_input_display_name(const char *path);

void data_input_close(data_input_t *in);  // accepts NULL

#endif
