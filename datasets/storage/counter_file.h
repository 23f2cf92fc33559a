#ifndef ASGD_DATASETS_STORAGE_COUNTER_FILE_H
#define ASGD_DATASETS_STORAGE_COUNTER_FILE_H
// A small file of 64-bit counters mapped into memory (MAP_SHARED): a counter
// is updated by a plain store, with no system call, and what the process
// stored is in the file even when it is killed the next instant (the kernel
// holds the page and writes it back; a machine that loses power may lose the
// last updates). For records that must survive a SIGKILL: a worker's count of
// acknowledged pushes, a parameter-server shard's count of applied ones.
//
// Layout (host byte order): 8 bytes of magic, u64 n, then n u64 counters.
#include <stddef.h>
#include <stdint.h>

typedef struct counter_file {
    uint64_t *v;  // (n) the counters, in the mapping
    size_t n;
    void *map;
    size_t map_len;
} counter_file_t;

// Creates PATH holding n zero counters and maps it. exclusive: fail when PATH
// exists (errno EEXIST, so that a caller can pick another name); otherwise an
// existing file is replaced. Returns 0, or -1 with err naming the file.
int counter_file_create(counter_file_t *f, const char *path, const char magic[8], size_t n, int exclusive, char *err,
                        size_t err_len);
// Unmaps (the counters stay in the file). Accepts a file never created.
void counter_file_close(counter_file_t *f);
// Copies the first counters of PATH, at most n, into out (the rest zero) and
// sets *held to how many the file holds: the caller judges the count. A file
// of zero bytes (its writer was stopped before it sized it) holds none.
// Returns 0, or -1 with err naming the file and the problem (missing, another
// magic, short).
int counter_file_read(const char *path, const char magic[8], size_t n, uint64_t *out, size_t *held, char *err,
                      size_t err_len);

#endif
