// Counters kept in a mapped file (counter_file.h).
#include "datasets/storage/counter_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_BYTES 16

int counter_file_create(counter_file_t *f, const char *path, const char magic[8], size_t n, int exclusive, char *err,
                        size_t err_len) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDWR | O_CREAT | (exclusive ? O_EXCL : O_TRUNC), 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, err_len, "%s: cannot create: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    size_t len = HEADER_BYTES + n * sizeof(uint64_t);
    void *map = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0) map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, err_len, "%s: cannot size or map %zu bytes: %s", path, len, strerror(e));
        errno = e;
        return -1;
    }
    uint64_t count = n;
    memcpy(map, magic, 8);
    memcpy((char *)map + 8, &count, sizeof count);
    f->map = map;
    f->map_len = len;
    f->v = (uint64_t *)((char *)map + HEADER_BYTES);
    f->n = n;
    return 0;
}

void counter_file_close(counter_file_t *f) {
    if (f->map) munmap(f->map, f->map_len);
    memset(f, 0, sizeof *f);
}

int counter_file_read(const char *path, const char magic[8], size_t n, uint64_t *out, size_t *held, char *err,
                      size_t err_len) {
    memset(out, 0, n * sizeof *out);
    *held = 0;
    FILE *in = fopen(path, "rb");
    if (!in) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char head[HEADER_BYTES];
    size_t got = fread(head, 1, sizeof head, in);
    int rc = 0;
    uint64_t count = 0;
    if (got == 0 && feof(in)) {
        rc = 0;  // never sized: nothing was counted
    } else if (got != sizeof head || memcmp(head, magic, 8) != 0) {
        snprintf(err, err_len, "%s: not a counter file of this kind", path);
        rc = -1;
    } else {
        memcpy(&count, head + 8, sizeof count);
        size_t want = count < n ? (size_t)count : n;
        if (fread(out, sizeof *out, want, in) != want) {
            snprintf(err, err_len, "%s: truncated", path);
            rc = -1;
        } else {
            *held = (size_t)count;
        }
    }
    fclose(in);
    return rc;
}
