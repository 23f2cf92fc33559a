// Data files, plain or gzip-compressed (data_input.h), over zlib's inflate.
#include "datasets/data_input.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK ((size_t)1 << 18)  // bytes read from a file at a time

struct data_input {
    const char *name;
    int fd;                 // -1: bytes in memory
    uint8_t *buf;           // a file's read buffer (CHUNK)
    const uint8_t *next;    // input not yet consumed: avail bytes
    size_t avail;
    uint64_t offset;        // where next[0] is in the file
    int source_done;        // nothing follows next[avail]
    int gz;
    int in_member;          // inflate is inside a gzip member
    uint64_t members;       // members started
    z_stream zs;
    int zs_ready;
    uint64_t inflated;      // bytes produced so far
    uint64_t max_inflated;
};

static _Atomic uint64_t max_inflated_cap = DATA_INPUT_MAX_INFLATED_DEFAULT;

uint64_t data_input_set_max_inflated(uint64_t bytes) {
    return atomic_exchange_explicit(&max_inflated_cap, bytes ? bytes : DATA_INPUT_MAX_INFLATED_DEFAULT,
                                    memory_order_relaxed);
}

uint64_t data_input_max_inflated(void) { return atomic_load_explicit(&max_inflated_cap, memory_order_relaxed); }

// read(2) into dst until n bytes or the end of the file.
static int read_fd(data_input_t *in, uint8_t *dst, size_t n, size_t *got, char *err, size_t err_len) {
    *got = 0;
    while (*got < n) {
        ssize_t r = read(in->fd, dst + *got, n - *got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, err_len, "%s: read error: %s", in->name, strerror(errno));
            return -1;
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return 0;
}

// Tops up the input so that at least `want` bytes (at most CHUNK) are available
// unless the file ends first.
static int fill(data_input_t *in, size_t want, char *err, size_t err_len) {
    if (in->source_done || in->avail >= want) return 0;
    if (in->avail) memmove(in->buf, in->next, in->avail);
    in->next = in->buf;
    size_t got;
    if (read_fd(in, in->buf + in->avail, CHUNK - in->avail, &got, err, err_len) != 0) return -1;
    in->avail += got;
    if (in->avail < CHUNK) in->source_done = 1;  // read_fd stops short only at the end
    return 0;
}

static void consume(data_input_t *in, size_t n) {
    in->next += n;
    in->avail -= n;
    in->offset += n;
}

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

static int start(data_input_t *in, char *err, size_t err_len) {
    if (fill(in, 2, err, err_len) != 0) return -1;
    in->gz = in->avail >= 2 && in->next[0] == 0x1f && in->next[1] == 0x8b;
    in->max_inflated = data_input_max_inflated();
    if (!in->gz) return 0;
    // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32/length trailer), the largest window.
    int rc = inflateInit2(&in->zs, 16 + MAX_WBITS);
    if (rc != Z_OK) {
        snprintf(err, err_len, "%s: cannot start zlib's inflate: %s", in->name,
                 rc == Z_MEM_ERROR ? "out of memory" : in->zs.msg ? in->zs.msg : zError(rc));
        return -1;
    }
    in->zs_ready = 1;
    return 0;
}

int data_input_open(data_input_t **out, const char *path, char *err, size_t err_len) {
    *out = NULL;
    // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_len, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: is %s, not a regular file (expected a data file, plain or gzip-compressed)", path,
                 file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    data_input_t *in = calloc(1, sizeof *in);
    uint8_t *buf = malloc(CHUNK);
    if (!in || !buf) {
        snprintf(err, err_len, "%s: out of memory for a read buffer", path);
        free(in);
        free(buf);
        close(fd);
        return -1;
    }
    in->name = path;
    in->fd = fd;
    in->buf = buf;
    in->next = buf;
    if (start(in, err, err_len) != 0) {
        data_input_close(in);
        return -1;
    }
    *out = in;
    return 0;
}

int data_input_open_memory(data_input_t **out, const char *name, const void *data, size_t len, char *err,
                           size_t err_len) {
    *out = NULL;
    data_input_t *in = calloc(1, sizeof *in);
    if (!in) {
        snprintf(err, err_len, "%s: out of memory", name);
        return -1;
    }
    in->name = name;
    in->fd = -1;
    in->next = len ? data : (const uint8_t *)"";
    in->avail = len;
    in->source_done = 1;
    if (start(in, err, err_len) != 0) {
        data_input_close(in);
        return -1;
    }
    *out = in;
    return 0;
}

int data_input_compressed(const data_input_t *in) { return in->gz; }

static int read_plain(data_input_t *in, uint8_t *dst, size_t n, size_t *got, char *err, size_t err_len) {
    size_t first = in->avail < n ? in->avail : n;
    if (first) memcpy(dst, in->next, first);
    consume(in, first);
    *got = first;
    if (first == n || in->source_done) return 0;
    size_t more;  // large reads go straight to the caller's buffer
    if (read_fd(in, dst + first, n - first, &more, err, err_len) != 0) return -1;
    *got += more;
    if (*got < n) in->source_done = 1;
    return 0;
}

// Between members: the end, zero padding (as gzip(1) accepts), or another member.
// Returns 1 when a member starts, 0 at the end, -1 on error.
static int next_member(data_input_t *in, char *err, size_t err_len) {
    for (;;) {
        if (fill(in, 1, err, err_len) != 0) return -1;
        if (in->avail == 0) return 0;
        if (in->next[0] == 0x1f) break;
        if (in->next[0] != 0) {
            snprintf(err, err_len,
                     "%s: byte 0x%02x at byte offset %llu follows the end of the gzip data (expected another gzip member or "
                     "the end of the file)",
                     in->name, in->next[0], (unsigned long long)in->offset);
            return -1;
        }
        size_t zeros = 0;
        while (zeros < in->avail && in->next[zeros] == 0) zeros++;
        consume(in, zeros);
        if (in->avail) continue;  // a non-zero byte follows: reported above
        if (in->source_done) return 0;
    }
    if (inflateReset(&in->zs) != Z_OK) {
        snprintf(err, err_len, "%s: zlib's inflateReset failed", in->name);
        return -1;
    }
    in->members++;
    in->in_member = 1;
    return 1;
}

static int read_gz(data_input_t *in, uint8_t *dst, size_t n, size_t *got, char *err, size_t err_len) {
    size_t done = 0;
    while (done < n) {
        if (!in->in_member) {
            if (in->members == 0) {  // the magic was seen at the start
                in->members = 1;
                in->in_member = 1;
            } else {
                int rc = next_member(in, err, err_len);
                if (rc < 0) return -1;
                if (rc == 0) break;
            }
        }
        // With no input left, inflate may still have output from bits it holds: it
        // is called all the same, and only when it can make no progress (Z_BUF_ERROR)
        // is the member truncated.
        if (in->avail == 0 && fill(in, 1, err, err_len) != 0) return -1;
        // At most one byte past the cap is produced, which tells "exactly the cap" from "more".
        uint64_t left = in->max_inflated - in->inflated;
        size_t room = n - done;
        if (left < UINT64_MAX && room > left + 1) room = (size_t)(left + 1);
        in->zs.next_in = (Bytef *)(uintptr_t)in->next;
        in->zs.avail_in = in->avail < UINT_MAX ? (uInt)in->avail : UINT_MAX;
        in->zs.next_out = dst + done;
        in->zs.avail_out = room < UINT_MAX ? (uInt)room : UINT_MAX;
        uInt in_before = in->zs.avail_in, out_before = in->zs.avail_out;
        int rc = inflate(&in->zs, Z_NO_FLUSH);
        size_t made = out_before - in->zs.avail_out;
        consume(in, in_before - in->zs.avail_in);
        done += made;
        in->inflated += made;
        if (in->inflated > in->max_inflated) {
            snprintf(err, err_len,
                     "%s: inflates to more than %llu bytes, the cap on a gzip-compressed input (expected a smaller file; "
                     "decompress it first if it is genuine)",
                     in->name, (unsigned long long)in->max_inflated);
            return -1;
        }
        if (rc == Z_STREAM_END) {
            in->in_member = 0;
        } else if (rc == Z_BUF_ERROR && in_before == 0 && made == 0) {
            snprintf(err, err_len,
                     "%s: truncated gzip data: the file ends at byte offset %llu inside a compressed member (expected a "
                     "complete .gz file)",
                     in->name, (unsigned long long)in->offset);
            return -1;
        } else if (rc == Z_MEM_ERROR) {
            snprintf(err, err_len, "%s: out of memory inflating the gzip data", in->name);
            return -1;
        } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && made + (in_before - in->zs.avail_in) > 0)) {
            const char *why = rc == Z_NEED_DICT ? "a preset dictionary is required"
                              : in->zs.msg      ? in->zs.msg
                                                : zError(rc);
            snprintf(err, err_len, "%s: corrupt gzip data near byte offset %llu: %s (expected a valid .gz file)", in->name,
                     (unsigned long long)in->offset, why);
            return -1;
        }
    }
    *got = done;
    return 0;
}

int data_input_read(data_input_t *in, void *buf, size_t n, size_t *got, char *err, size_t err_len) {
    *got = 0;
    if (n == 0) return 0;
    return in->gz ? read_gz(in, buf, n, got, err, err_len) : read_plain(in, buf, n, got, err, err_len);
}

void data_input_close(data_input_t *in) {
    if (!in) return;
    if (in->zs_ready) inflateEnd(&in->zs);
    if (in->fd >= 0) close(in->fd);
    free(in->buf);
    free(in);
}
