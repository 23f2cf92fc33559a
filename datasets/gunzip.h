#ifndef ASGD_DATASETS_GUNZIP_H
#define ASGD_DATASETS_GUNZIP_H
// gzip (RFC 1952) reader over our own DEFLATE (RFC 1951) decoder, so that the
// datasets layer needs nothing beyond libc. Handles stored, fixed- and
// dynamic-Huffman blocks, the FEXTRA/FNAME/FCOMMENT/FHCRC header fields and
// several concatenated members; CRC-32 and ISIZE of every member are verified.
//
// Both functions return 0 on success and -1 on error. On error *out is NULL,
// *out_len is 0 and err holds one line naming the file and the byte offset.
// On success the caller owns *out and releases it with free(); *out is a valid
// pointer even when *out_len is 0.
#include <stddef.h>
#include <stdint.h>

// No legitimate input of ours comes near this; a stream that would inflate
// beyond it is treated as hostile (a "zip bomb") rather than trusted.
#define GZ_MAX_OUTPUT ((size_t)1 << 32)  // 4 GiB

// Reads the whole file at path. If it starts with the gzip magic 1f 8b it is
// inflated, otherwise the raw bytes are returned unchanged.
int gz_read_file(const char *path, uint8_t **out, size_t *out_len, char *err, size_t err_len);

// Inflates the gzip stream in[0, in_len) (one or more members; zero bytes of
// padding after the last member are accepted, as gzip itself does, anything
// else after it is an error). name_for_errors prefixes every message.
int gz_inflate_buffer(const uint8_t *in, size_t in_len, const char *name_for_errors, uint8_t **out, size_t *out_len, char *err,
                      size_t err_len);

#endif
