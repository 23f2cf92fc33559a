#ifndef ASGD_DATASETS_DATA_INPUT_H
#define ASGD_DATASETS_DATA_INPUT_H
// A data file read as a stream of bytes, plain or gzip-compressed: every
// dataset reader (libsvm, ratings, IDX) reads through this, so a .gz file is
// read transparently wherever a plain one is. gzip is recognised by its magic
// bytes (1f 8b), not by the name, and inflated with zlib: several concatenated
// members and zero padding after the last are accepted; corrupt or truncated
// data, a CRC or length mismatch and any other bytes after the stream are
// refused. (.zst, .bz2 and .xz are not read: decompress those first.)
//
// Bounded: a file must be a regular file (not a FIFO, device or directory, whose
// length is not known), and a compressed one is refused once it has inflated
// to more than data_input_max_inflated() bytes, so that a small file cannot
// make a reader inflate without end. Readers with a size of their own (IDX
// headers) read no more than it allows.
//
// Every function that fails returns -1 with ONE line in err naming the file
// (the path, or the name given for bytes in memory).
#include <stddef.h>
#include <stdint.h>

typedef struct data_input data_input_t;

// The default cap on a compressed file's inflated size: 16 GiB, above every
// dataset asgd is used with, yet a bound.
#define DATA_INPUT_MAX_INFLATED_DEFAULT ((uint64_t)1 << 34)

// The cap in force for inputs opened after the call (process-wide; 0 restores
// the default). Returns the previous cap.
uint64_t data_input_set_max_inflated(uint64_t bytes);
uint64_t data_input_max_inflated(void);

// Opens path (which must outlive the input) for reading. *in is NULL on error.
int data_input_open(data_input_t **in, const char *path, char *err, size_t err_len);
// The same over len bytes in memory, which must outlive the input (not copied);
// name stands for the path in messages.
int data_input_open_memory(data_input_t **in, const char *name, const void *data, size_t len, char *err,
                           size_t err_len);

// Reads up to n bytes (inflated, for a compressed file) into buf; *got < n
// only at the end of the data. 0, or -1 with err.
int data_input_read(data_input_t *in, void *buf, size_t n, size_t *got, char *err, size_t err_len);

// 1 if the input is gzip-compressed.
int data_input_compressed(const data_input_t *in);

void data_input_close(data_input_t *in);  // accepts NULL

#endif
