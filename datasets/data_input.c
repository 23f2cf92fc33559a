// Data files, plain or compressed (data_input.h): gzip through zlib, xz
// through liblzma, zstd through libzstd.
#include "datasets/data_input.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lzma.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>  // ZSTD_getErrorCode and its codes

#define CHUNK ((size_t)1 << 18)  // bytes read from a file at a time

typedef enum input_format {
    INPUT_FORMAT_PLAIN,
    INPUT_FORMAT_GZIP,
    INPUT_FORMAT_XZ,
    INPUT_FORMAT_ZSTD,
} input_format_t;

static const char *const format_names[] = {"plain", "gzip", "xz", "zstd"};

struct data_input {
    const char *name;
    int fd;  // -1: bytes in memory
    int owns_fd;  // 0 for stdin, which stays open
    uint8_t *buf;  // a file's read buffer (CHUNK)
    const uint8_t *next;  // input not yet consumed: avail bytes
    size_t avail;
    uint64_t offset;  // where next[0] is in the file
    int source_done;  // nothing follows next[avail]
    input_format_t format;
    int capped;  // the cap applies: compressed, or plain from a pipe or stdin
    int in_member;  // inside a gzip member, an xz stream, a zstd frame
    uint64_t members;  // gzip members started
    uint64_t part_start;  // where the xz stream or zstd frame being read starts
    uint64_t frame_size;  // the zstd frame's declared content size, or ZSTD_CONTENTSIZE_UNKNOWN
    uint64_t frame_made;  // bytes the zstd frame has given so far
    z_stream zs;
    int zs_ready;
    lzma_stream xz;
    int xz_ready;
    ZSTD_DCtx *zstd;
    uint64_t inflated;  // bytes produced so far
    uint64_t max_inflated;
};

static _Atomic uint64_t max_inflated_cap = DATA_INPUT_MAX_INFLATED_DEFAULT;

uint64_t data_input_set_max_inflated(uint64_t bytes) {
    return atomic_exchange_explicit(&max_inflated_cap, bytes ? bytes : DATA_INPUT_MAX_INFLATED_DEFAULT,
                                    memory_order_relaxed);
}

uint64_t data_input_max_inflated(void) { return atomic_load_explicit(&max_inflated_cap, memory_order_relaxed); }

const char *data_input_display_name(const char *path) { return strcmp(path, "-") == 0 ? "stdin" : path; }

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

// ---- what the content is ----

typedef struct magic {
    const char *bytes;
    size_t len;
    const char *what;  // "is WHAT"
    const char *tool;  // how to decompress it
} magic_t;

// Compressed and archived content that asgd does not read.
static const magic_t refused[] = {
    {"BZh", 3, "bzip2-compressed", "bunzip2 -k FILE"},
    {"\x04\x22\x4d\x18", 4, "lz4-compressed", "lz4 -d FILE"},
    {"\x02\x21\x4c\x18", 4, "lz4-compressed (legacy format)", "lz4 -d FILE"},
    {"LZIP", 4, "lzip-compressed", "lzip -dk FILE"},
    {"\x1f\x9d", 2, "compressed by compress(1), a .Z file", "uncompress FILE"},
    {"\x5d\x00\x00", 3, "compressed in the .lzma format, older than .xz", "unlzma -k FILE"},
    {"\xff\x06\x00\x00sNaPpY", 10, "snappy-compressed", "a snappy tool"},
    {"7z\xbc\xaf\x27\x1c", 6, "a 7-Zip archive", "7z x FILE"},
    {"PK\x03\x04", 4, "a zip archive", "unzip FILE"},
    {"PK\x05\x06", 4, "an empty zip archive", "unzip FILE"},
    {"Rar!\x1a\x07", 6, "a RAR archive", "unrar x FILE"},
};

static int starts_with(const uint8_t *p, size_t n, const char *bytes, size_t len) {
    return n >= len && memcmp(p, bytes, len) == 0;
}

static input_format_t format_of(const uint8_t *p, size_t n) {
    if (starts_with(p, n, "\x1f\x8b", 2)) return INPUT_FORMAT_GZIP;
    if (starts_with(p, n,
                    "\xfd"
                    "7zXZ\x00",
                    6))
        return INPUT_FORMAT_XZ;
    // A zstd frame, or a skippable frame (magic 0x184D2A50..5F, little-endian).
    if (starts_with(p, n, "\x28\xb5\x2f\xfd", 4) ||
        (n >= 4 && (p[0] & 0xf0) == 0x50 && starts_with(p + 1, n - 1, "\x2a\x4d\x18", 3)))
        return INPUT_FORMAT_ZSTD;
    return INPUT_FORMAT_PLAIN;
}

// "42 5a 68 ('BZh')": the first bytes, for a refusal.
static void show_start(const uint8_t *p, size_t n, char *out, size_t out_len) {
    size_t at = 0, k = n < 6 ? n : 6;
    for (size_t i = 0; i < k && at < out_len; i++)
        at += (size_t)snprintf(out + at, out_len - at, "%s%02x", i ? " " : "", p[i]);
    if (at < out_len) at += (size_t)snprintf(out + at, out_len - at, " '");
    for (size_t i = 0; i < k && at + 1 < out_len; i++) out[at++] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    if (at + 2 < out_len)
        out[at++] = '\'', out[at] = '\0';
    else if (out_len)
        out[out_len - 1] = '\0';
}

static int refuse_unread_formats(const data_input_t *in, char *err, size_t err_len) {
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (!starts_with(in->next, in->avail, refused[i].bytes, refused[i].len)) continue;
        char shown[64];
        show_start(in->next, in->avail, shown, sizeof shown);
        snprintf(err, err_len,
                 "%s: is %s (it starts with %s); asgd reads plain text and gzip, xz or zstd data: "
                 "decompress it first (%s)",
                 in->name, refused[i].what, shown, refused[i].tool);
        return -1;
    }
    return 0;
}

// ---- starting a decoder ----

static int start_gzip(data_input_t *in, char *err, size_t err_len) {
    // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32/length trailer), the largest window.
    int rc = inflateInit2(&in->zs, 16 + MAX_WBITS);
    if (rc != Z_OK) {
        snprintf(err, err_len, "%s: cannot start zlib's inflate: %s", in->name,
                 rc == Z_MEM_ERROR ? "out of memory"
                 : in->zs.msg      ? in->zs.msg
                                   : zError(rc));
        return -1;
    }
    in->zs_ready = 1;
    return 0;
}

static int start_xz(data_input_t *in, char *err, size_t err_len) {
    if (in->xz_ready) lzma_end(&in->xz);
    lzma_stream init = LZMA_STREAM_INIT;
    in->xz = init;
    in->xz_ready = 0;
    // One stream: the next one (xz(1) reads them one after another) starts a new decoder.
    lzma_ret rc = lzma_stream_decoder(&in->xz, DATA_INPUT_MAX_WINDOW, 0);
    if (rc != LZMA_OK) {
        snprintf(err, err_len, "%s: cannot start liblzma's decoder: %s", in->name,
                 rc == LZMA_MEM_ERROR ? "out of memory" : "unsupported flags");
        return -1;
    }
    in->xz_ready = 1;
    in->in_member = 1;
    return 0;
}

static int start_zstd(data_input_t *in, char *err, size_t err_len) {
    in->zstd = ZSTD_createDCtx();
    int window_log = 0;
    while (((uint64_t)1 << (window_log + 1)) <= DATA_INPUT_MAX_WINDOW) window_log++;
    if (!in->zstd || ZSTD_isError(ZSTD_DCtx_setParameter(in->zstd, ZSTD_d_windowLogMax, window_log))) {
        snprintf(err, err_len, "%s: cannot start libzstd's decoder: out of memory", in->name);
        return -1;
    }
    in->in_member = 0;  // read_zstd starts the first frame as it starts every other
    return 0;
}

static int start(data_input_t *in, char *err, size_t err_len) {
    if (fill(in, 16, err, err_len) != 0) return -1;
    in->format = format_of(in->next, in->avail);
    in->max_inflated = data_input_max_inflated();
    if (in->format != INPUT_FORMAT_PLAIN) in->capped = 1;
    switch (in->format) {
        case INPUT_FORMAT_GZIP:
            return start_gzip(in, err, err_len);
        case INPUT_FORMAT_XZ:
            return start_xz(in, err, err_len);
        case INPUT_FORMAT_ZSTD:
            return start_zstd(in, err, err_len);
        case INPUT_FORMAT_PLAIN:
            break;
    }
    return refuse_unread_formats(in, err, err_len);
}

// ---- opening ----

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// A descriptor for path: a regular file or a FIFO (opened waiting for its
// writer, as cat(1) would). *pipe_like is 1 for a FIFO. -1 with err otherwise.
//
// A FIFO is told by stat(2) before it is opened, and opened once: opening it
// a first time without blocking would let its writer start, and closing that
// descriptor before opening it again left a moment without any reader, in
// which the writer's next write failed (EPIPE, or SIGPIPE) and the reader then
// took the one pipe buffer already written (64 KiB) for the whole file.
static int open_source(const char *path, int *pipe_like, char *err, size_t err_len) {
    struct stat st;
    *pipe_like = stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
    // Anything else is opened without blocking: a device or socket must not
    // block before it is refused.
    int fd;
    while ((fd = open(path, O_RDONLY | O_CLOEXEC | (*pipe_like ? 0 : O_NONBLOCK))) < 0 && errno == EINTR) {
    }
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_len, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    *pipe_like = S_ISFIFO(st.st_mode);  // what was opened (the path may have changed since stat)
    if (*pipe_like) return fd;
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: is %s, not a regular file or a pipe (expected a data file, plain or compressed)",
                 path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

// Standard input, whatever it is but a directory.
static int open_stdin(int *pipe_like, char *err, size_t err_len) {
    struct stat st;
    if (fstat(STDIN_FILENO, &st) != 0) {
        snprintf(err, err_len, "stdin: cannot stat: %s", strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "stdin: is a directory (expected data, plain or compressed)");
        return -1;
    }
    *pipe_like = !S_ISREG(st.st_mode);
    return STDIN_FILENO;
}

int data_input_open(data_input_t **out, const char *path, char *err, size_t err_len) {
    *out = NULL;
    int is_stdin = strcmp(path, "-") == 0, pipe_like = 0;
    int fd = is_stdin ? open_stdin(&pipe_like, err, err_len) : open_source(path, &pipe_like, err, err_len);
    if (fd < 0) return -1;
    data_input_t *in = calloc(1, sizeof *in);
    uint8_t *buf = malloc(CHUNK);
    if (!in || !buf) {
        snprintf(err, err_len, "%s: out of memory for a read buffer", data_input_display_name(path));
        free(in);
        free(buf);
        if (!is_stdin) close(fd);
        return -1;
    }
    in->name = data_input_display_name(path);
    in->fd = fd;
    in->owns_fd = !is_stdin;
    in->buf = buf;
    in->next = buf;
    if (start(in, err, err_len) != 0) {
        data_input_close(in);
        return -1;
    }
    in->capped |= pipe_like;
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

int data_input_compressed(const data_input_t *in) { return in->format != INPUT_FORMAT_PLAIN; }
const char *data_input_format(const data_input_t *in) { return format_names[in->format]; }
const char *data_input_name(const data_input_t *in) { return in->name; }

// ---- reading ----

// Counts `made` bytes against the cap; -1 with err past it.
static int count_output(data_input_t *in, size_t made, char *err, size_t err_len) {
    in->inflated += made;
    if (!in->capped || in->inflated <= in->max_inflated) return 0;
    if (in->format == INPUT_FORMAT_PLAIN)
        snprintf(err, err_len,
                 "%s: more than %llu bytes, the cap on data read from a pipe or stdin (expected a "
                 "smaller input; give a large one as a file)",
                 in->name, (unsigned long long)in->max_inflated);
    else
        snprintf(err, err_len,
                 "%s: %s to more than %llu bytes, the cap on %s-compressed input (expected a smaller "
                 "file; decompress it first if it is genuine)",
                 in->name, in->format == INPUT_FORMAT_GZIP ? "inflates" : "decompresses",
                 (unsigned long long)in->max_inflated, format_names[in->format]);
    return -1;
}

// The output room for one decoder call: at most one byte past the cap, which
// tells "exactly the cap" from "more".
static size_t room_under_cap(const data_input_t *in, size_t room) {
    uint64_t left = in->max_inflated - in->inflated;
    return left < UINT64_MAX && room > left + 1 ? (size_t)(left + 1) : room;
}

static int read_plain(data_input_t *in, uint8_t *dst, size_t n, size_t *got, char *err, size_t err_len) {
    size_t first = in->avail < n ? in->avail : n;
    if (first) memcpy(dst, in->next, first);
    consume(in, first);
    *got = first;
    if (first < n && !in->source_done) {
        size_t more;  // large reads go straight to the caller's buffer
        if (read_fd(in, dst + first, n - first, &more, err, err_len) != 0) return -1;
        *got += more;
        if (*got < n) in->source_done = 1;
    }
    return count_output(in, *got, err, err_len);
}

// gzip, between members: the end, zero padding (as gzip(1) accepts), or another
// member. Returns 1 when a member starts, 0 at the end, -1 on error.
static int next_member(data_input_t *in, char *err, size_t err_len) {
    for (;;) {
        if (fill(in, 1, err, err_len) != 0) return -1;
        if (in->avail == 0) return 0;
        if (in->next[0] == 0x1f) break;
        if (in->next[0] != 0) {
            snprintf(
                err, err_len,
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

// One call of inflate into dst[0..room); *made bytes out. 1: the member ended,
// 0: go on, -1: error.
static int inflate_some(data_input_t *in, uint8_t *dst, size_t room, size_t *made, char *err, size_t err_len) {
    in->zs.next_in = (Bytef *)(uintptr_t)in->next;
    in->zs.avail_in = in->avail < UINT_MAX ? (uInt)in->avail : UINT_MAX;
    in->zs.next_out = dst;
    in->zs.avail_out = room < UINT_MAX ? (uInt)room : UINT_MAX;
    uInt in_before = in->zs.avail_in, out_before = in->zs.avail_out;
    int rc = inflate(&in->zs, Z_NO_FLUSH);
    *made = out_before - in->zs.avail_out;
    size_t used = in_before - in->zs.avail_in;
    consume(in, used);
    if (count_output(in, *made, err, err_len) != 0) return -1;
    if (rc == Z_STREAM_END) return 1;
    if (rc == Z_OK || (rc == Z_BUF_ERROR && *made + used > 0)) return 0;
    if (rc == Z_BUF_ERROR && in_before == 0) {
        snprintf(err, err_len,
                 "%s: truncated gzip data: the file ends at byte offset %llu inside a compressed member (expected a "
                 "complete .gz file)",
                 in->name, (unsigned long long)in->offset);
    } else if (rc == Z_MEM_ERROR) {
        snprintf(err, err_len, "%s: out of memory inflating the gzip data", in->name);
    } else {
        const char *why = rc == Z_NEED_DICT ? "a preset dictionary is required" : in->zs.msg ? in->zs.msg : zError(rc);
        snprintf(err, err_len, "%s: corrupt gzip data near byte offset %llu: %s (expected a valid .gz file)", in->name,
                 (unsigned long long)in->offset, why);
    }
    return -1;
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
        size_t made;
        int rc = inflate_some(in, dst + done, room_under_cap(in, n - done), &made, err, err_len);
        if (rc < 0) return -1;
        done += made;
        if (rc == 1) in->in_member = 0;
    }
    *got = done;
    return 0;
}

// After an xz stream or a zstd frame: the end, zero padding, or another one
// (its magic). Returns 1 when one starts, 0 at the end, -1 on other bytes.
static int next_part(data_input_t *in, char *err, size_t err_len) {
    const char *what = format_names[in->format], *part = in->format == INPUT_FORMAT_XZ ? "stream" : "frame";
    for (;;) {
        if (fill(in, 6, err, err_len) != 0) return -1;
        if (in->avail == 0) return 0;
        size_t zeros = 0;
        while (zeros < in->avail && in->next[zeros] == 0 && in->format == INPUT_FORMAT_XZ) zeros++;
        if (zeros == 0) break;
        consume(in, zeros);  // xz's stream padding
    }
    in->part_start = in->offset;
    if (format_of(in->next, in->avail) == in->format) return 1;
    snprintf(err, err_len,
             "%s: byte 0x%02x at byte offset %llu follows the end of the %s data (expected another %s %s "
             "or the end of the file)",
             in->name, in->next[0], (unsigned long long)in->offset, what, what, part);
    return -1;
}

static int read_xz(data_input_t *in, uint8_t *dst, size_t n, size_t *got, char *err, size_t err_len) {
    size_t done = 0;
    while (done < n) {
        if (!in->in_member) {
            int rc = next_part(in, err, err_len);
            if (rc < 0 || (rc == 1 && start_xz(in, err, err_len) != 0)) return -1;
            if (rc == 0) break;
        }
        if (in->avail == 0 && fill(in, 1, err, err_len) != 0) return -1;
        // LZMA_FINISH once the file has no more bytes: only then may the data end.
        lzma_action action = in->avail == 0 && in->source_done ? LZMA_FINISH : LZMA_RUN;
        size_t room = room_under_cap(in, n - done);
        in->xz.next_in = in->next;
        in->xz.avail_in = in->avail;
        in->xz.next_out = dst + done;
        in->xz.avail_out = room;
        lzma_ret rc = lzma_code(&in->xz, action);
        size_t made = room - in->xz.avail_out;
        consume(in, in->avail - in->xz.avail_in);
        done += made;
        if (count_output(in, made, err, err_len) != 0) return -1;
        if (rc == LZMA_STREAM_END) in->in_member = 0;
        if (rc == LZMA_OK || rc == LZMA_STREAM_END) continue;
        if (rc == LZMA_BUF_ERROR)
            snprintf(err, err_len,
                     "%s: truncated xz data: the file ends at byte offset %llu inside a stream "
                     "(expected a complete .xz file)",
                     in->name, (unsigned long long)in->offset);
        else if (rc == LZMA_MEMLIMIT_ERROR)
            snprintf(err, err_len,
                     "%s: the xz data needs %llu MiB of memory to decompress, more than the %llu MiB "
                     "allowed (expected a smaller dictionary, as xz -0 to -9 make; decompress it first)",
                     in->name, (unsigned long long)(lzma_memusage(&in->xz) >> 20),
                     (unsigned long long)(DATA_INPUT_MAX_WINDOW >> 20));
        else if (rc == LZMA_MEM_ERROR)
            snprintf(err, err_len, "%s: out of memory decompressing the xz data", in->name);
        else
            snprintf(err, err_len,
                     "%s: corrupt xz data in the stream from byte offset %llu: %s (expected a valid "
                     ".xz file)",
                     in->name, (unsigned long long)in->part_start,
                     rc == LZMA_FORMAT_ERROR    ? "not an xz stream"
                     : rc == LZMA_OPTIONS_ERROR ? "unsupported compression options"
                                                : "the data or its integrity check is wrong");
        return -1;
    }
    *got = done;
    return 0;
}

static void zstd_failed(const data_input_t *in, ZSTD_ErrorCode code, char *err, size_t err_len) {
    if (code == ZSTD_error_frameParameter_windowTooLarge)
        snprintf(err, err_len,
                 "%s: the zstd data needs a window of more than %llu MiB (zstd --long or --ultra "
                 "levels); decompress it first (zstd -d --long=31)",
                 in->name, (unsigned long long)(DATA_INPUT_MAX_WINDOW >> 20));
    else if (code == ZSTD_error_memory_allocation)
        snprintf(err, err_len, "%s: out of memory decompressing the zstd data", in->name);
    else
        snprintf(err, err_len,
                 "%s: corrupt zstd data in the frame from byte offset %llu: %s (expected a valid .zst "
                 "file)",
                 in->name, (unsigned long long)in->part_start,
                 // Which damage libzstd sees first (a wrong checksum, a block that does not
                 // decode, a size that does not match) varies with the reads' sizes: one word for all.
                 code == ZSTD_error_prefix_unknown ? "not a zstd frame" : "the data or its checksum is wrong");
}

// The window a zstd frame's header asks for (RFC 8878, 3.1.1.1): its window
// descriptor's, or a single-segment frame's content size; 0 when the header
// does not say (too short, not a zstd frame, a size it does not give).
static uint64_t zstd_window_of(const uint8_t *p, size_t avail) {
    static const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    if (avail < 6 || memcmp(p, magic, 4) != 0) return 0;
    if (p[4] & 0x20) {  // single segment: the window is the whole content
        unsigned long long size = ZSTD_getFrameContentSize(p, avail);
        return size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR ? 0 : size;
    }
    uint64_t base = (uint64_t)1 << (10 + (p[5] >> 3));
    return base + base / 8 * (p[5] & 7);
}

static int read_zstd(data_input_t *in, uint8_t *dst, size_t n, size_t *got, char *err, size_t err_len) {
    size_t done = 0;
    while (done < n) {
        if (!in->in_member) {
            int rc = next_part(in, err, err_len);
            if (rc < 0) return -1;
            if (rc == 0) break;
            in->in_member = 1;
            // The header is at most 18 bytes; a header libzstd cannot read leaves the size
            // unknown here and the decoder refuses it.
            if (fill(in, 18, err, err_len) != 0) return -1;
            unsigned long long size = ZSTD_getFrameContentSize(in->next, in->avail);
            in->frame_size = size == ZSTD_CONTENTSIZE_ERROR ? ZSTD_CONTENTSIZE_UNKNOWN : size;
            in->frame_made = 0;
            // libzstd refuses a window past its limit ((1 << windowLogMax) + 1) only when
            // it decodes through its own buffer; a read large enough for the whole
            // frame skips the window and meets the blocks first: refused here, whatever
            // the read's size.
            if (zstd_window_of(in->next, in->avail) > DATA_INPUT_MAX_WINDOW + 1) {
                zstd_failed(in, ZSTD_error_frameParameter_windowTooLarge, err, err_len);
                return -1;
            }
        }
        if (in->avail == 0 && fill(in, 1, err, err_len) != 0) return -1;
        // Called with no input too: the decoder may hold output still to give.
        size_t room = room_under_cap(in, n - done);
        ZSTD_inBuffer src = {in->next, in->avail, 0};
        ZSTD_outBuffer out = {dst + done, room, 0};
        size_t rc = ZSTD_decompressStream(in->zstd, &out, &src);
        consume(in, src.pos);
        done += out.pos;
        if (count_output(in, out.pos, err, err_len) != 0) return -1;
        in->frame_made += out.pos;
        if (ZSTD_isError(rc)) {
            zstd_failed(in, ZSTD_getErrorCode(rc), err, err_len);
            return -1;
        }
        in->in_member = rc != 0;  // 0: a frame is complete and flushed
        // libzstd checks the declared size when it decodes into the caller's buffer, not
        // always when it decodes into its own (small reads): check it for every read size.
        if (in->frame_size != ZSTD_CONTENTSIZE_UNKNOWN &&
            (in->frame_made > in->frame_size || (!in->in_member && in->frame_made != in->frame_size))) {
            zstd_failed(in, ZSTD_error_corruption_detected, err, err_len);
            return -1;
        }
        if (in->in_member && in->avail == 0 && in->source_done && out.pos == 0 && src.pos == 0) {
            snprintf(err, err_len,
                     "%s: truncated zstd data: the file ends at byte offset %llu inside a frame "
                     "(expected a complete .zst file)",
                     in->name, (unsigned long long)in->offset);
            return -1;
        }
    }
    *got = done;
    return 0;
}

int data_input_read(data_input_t *in, void *buf, size_t n, size_t *got, char *err, size_t err_len) {
    *got = 0;
    if (n == 0) return 0;
    switch (in->format) {
        case INPUT_FORMAT_GZIP:
            return read_gz(in, buf, n, got, err, err_len);
        case INPUT_FORMAT_XZ:
            return read_xz(in, buf, n, got, err, err_len);
        case INPUT_FORMAT_ZSTD:
            return read_zstd(in, buf, n, got, err, err_len);
        case INPUT_FORMAT_PLAIN:
            break;
    }
    return read_plain(in, buf, n, got, err, err_len);
}

void data_input_close(data_input_t *in) {
    if (!in) return;
    if (in->zs_ready) inflateEnd(&in->zs);
    if (in->xz_ready) lzma_end(&in->xz);
    ZSTD_freeDCtx(in->zstd);
    if (in->fd >= 0 && in->owns_fd) close(in->fd);
    free(in->buf);
    free(in);
}
