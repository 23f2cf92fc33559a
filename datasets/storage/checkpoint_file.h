#ifndef ASGD_DATASETS_STORAGE_CHECKPOINT_FILE_H
#define ASGD_DATASETS_STORAGE_CHECKPOINT_FILE_H
// Checkpoint files: named sections of bytes, written atomically and read back
// whole, with a format version and a checksum, so that a file that is
// truncated, corrupt, of another format version or not a checkpoint at all is
// refused with an error naming the file and the problem. What the sections
// hold is the caller's (a parameter-server shard, a training run).
//
// Format version 1, all integers little-endian:
//   header   8 bytes "ASGDCKPT", u32 format version (1), u32 0
//   sections each: name (16 bytes, NUL-padded), u64 size, then size bytes of
//            data and zero padding to a multiple of 8
//   trailer  8 bytes "ASGDEND\0", u32 number of sections, u32 CRC-32 (IEEE) of
//            every byte before the CRC
// Section data are written as given (arrays of float, uint64_t, ... in the
// host's byte order: asgd builds for little-endian hosts only).
//
// A write goes to PATH.tmp, is flushed to the disk (fsync), renamed over PATH
// and the directory flushed too: PATH is always the previous complete
// checkpoint or the new complete one, never a mix, whenever the process or the
// machine stops.
#include <stddef.h>
#include <stdint.h>

#define CKPT_FORMAT_VERSION 1u
#define CKPT_NAME_MAX 16  // section names are shorter than this

// ---- writing -------------------------------------------------------------------
typedef struct ckpt_writer ckpt_writer_t;

// Starts PATH.tmp. Returns NULL with err naming the file and the reason.
ckpt_writer_t *ckpt_writer_open(const char *path, char *err, size_t err_len);
// Appends a section (size may be 0). A failure is kept and reported by the commit.
void ckpt_writer_section(ckpt_writer_t *w, const char *name, const void *data, size_t size);
// Appends one section whose data are the count parts, one after another.
void ckpt_writer_section_parts(ckpt_writer_t *w, const char *name, const void *const *parts, const size_t *sizes,
                               size_t count);
// Writes the trailer, flushes, renames PATH.tmp over PATH. Frees the writer
// (and removes PATH.tmp on failure). Returns 0, or -1 with err.
int ckpt_writer_commit(ckpt_writer_t **w, char *err, size_t err_len);
// Gives up: removes PATH.tmp and frees. Accepts NULL.
void ckpt_writer_abort(ckpt_writer_t **w);

// ---- reading -------------------------------------------------------------------
typedef struct ckpt_file ckpt_file_t;

// Reads and checks a whole checkpoint. Returns NULL with err ("PATH: ...":
// missing, empty, truncated, not a checkpoint, another format version,
// checksum mismatch, malformed section table).
ckpt_file_t *ckpt_file_read(const char *path, char *err, size_t err_len);
void ckpt_file_free(ckpt_file_t **f);

// A section's bytes (valid until ckpt_file_free) and size, or NULL when the
// file has no section of that name.
const void *ckpt_file_section(const ckpt_file_t *f, const char *name, size_t *size);
// Copies section `name`, which must hold exactly `size` bytes, to out.
// Returns 0, or -1 with err naming the file and the section.
int ckpt_file_get(const ckpt_file_t *f, const char *name, void *out, size_t size, char *err, size_t err_len);
const char *ckpt_file_path(const ckpt_file_t *f);

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of n bytes continuing from crc (0 to start).
uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t n);

#endif
