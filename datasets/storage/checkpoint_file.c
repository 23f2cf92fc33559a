// Checkpoint files (checkpoint_file.h).
#include "datasets/storage/checkpoint_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint sections are written in host byte order");

#define HEADER_SIZE 16
#define SECTION_HEADER_SIZE (CKPT_NAME_MAX + 8)
#define TRAILER_SIZE 16
#define PATH_MAX_LEN 1024
#define MAX_SECTIONS 4096

static const char file_magic[8] = {'A', 'S', 'G', 'D', 'C', 'K', 'P', 'T'};
static const char end_magic[8] = {'A', 'S', 'G', 'D', 'E', 'N', 'D', '\0'};

// ---- CRC-32 ---------------------------------------------------------------------

uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t n) {
    // zlib's crc32_z: the same polynomial and conditioning, table-driven over
    // several bytes at a time. (It returns 0 for a NULL buffer, whatever crc was.)
    return n ? (uint32_t)crc32_z(crc, data, n) : crc;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

// ---- writing -----------------------------------------------------------------------

struct ckpt_writer {
    int fd;
    char path[PATH_MAX_LEN], tmp[PATH_MAX_LEN + 8];
    uint32_t crc;
    uint32_t sections;
    int failed;  // errno of the first failed write (or EINVAL for a bad name), 0 if none
    char failed_what[64];
};

static void write_bytes(ckpt_writer_t *w, const void *data, size_t n) {
    if (w->failed) return;
    w->crc = ckpt_crc32(w->crc, data, n);
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t got = write(w->fd, p, n);
        if (got < 0) {
            if (errno == EINTR) continue;
            w->failed = errno;
            snprintf(w->failed_what, sizeof w->failed_what, "writing");
            return;
        }
        p += got;
        n -= (size_t)got;
    }
}

ckpt_writer_t *ckpt_writer_open(const char *path, char *err, size_t err_len) {
    if (strlen(path) >= PATH_MAX_LEN) {
        snprintf(err, err_len, "checkpoint path is longer than %d bytes: %.100s...", PATH_MAX_LEN - 1, path);
        return NULL;
    }
    ckpt_writer_t *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, err_len, "%s: out of memory", path);
        return NULL;
    }
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    // O_NONBLOCK: a FIFO in the file's place must not hang the open; it is refused.
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
    struct stat st;
    if (w->fd < 0 || fstat(w->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (w->fd < 0 && errno != ENXIO)
            snprintf(err, err_len, "%s: cannot create: %s", w->tmp, strerror(errno));
        else
            snprintf(err, err_len, "%s: cannot create: something other than a regular file is there", w->tmp);
        if (w->fd >= 0) close(w->fd);
        free(w);
        return NULL;
    }
    (void)fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) & ~O_NONBLOCK);
    uint8_t header[HEADER_SIZE] = {0};
    memcpy(header, file_magic, sizeof file_magic);
    put_u32(header + 8, CKPT_FORMAT_VERSION);
    write_bytes(w, header, sizeof header);
    return w;
}

void ckpt_writer_section_parts(ckpt_writer_t *w, const char *name, const void *const *parts, const size_t *sizes,
                               size_t count) {
    if (w->failed) return;
    size_t len = strlen(name);
    if (len == 0 || len >= CKPT_NAME_MAX || w->sections >= MAX_SECTIONS) {
        w->failed = EINVAL;
        snprintf(w->failed_what, sizeof w->failed_what, "section name '%.20s'", name);
        return;
    }
    size_t size = 0;
    for (size_t i = 0; i < count; i++) size += sizes[i];
    uint8_t head[SECTION_HEADER_SIZE] = {0};
    memcpy(head, name, len);
    put_u64(head + CKPT_NAME_MAX, size);
    write_bytes(w, head, sizeof head);
    for (size_t i = 0; i < count; i++)
        if (sizes[i]) write_bytes(w, parts[i], sizes[i]);
    static const uint8_t zeros[8] = {0};
    if (size % 8) write_bytes(w, zeros, 8 - size % 8);
    w->sections++;
}

void ckpt_writer_section(ckpt_writer_t *w, const char *name, const void *data, size_t size) {
    ckpt_writer_section_parts(w, name, &data, &size, 1);
}

static void writer_free(ckpt_writer_t **wp, int remove_tmp) {
    ckpt_writer_t *w = *wp;
    if (w->fd >= 0) close(w->fd);
    if (remove_tmp) unlink(w->tmp);
    free(w);
    *wp = NULL;
}

void ckpt_writer_abort(ckpt_writer_t **wp) {
    if (wp && *wp) writer_free(wp, 1);
}

// Flushes the directory that holds path, so that a rename in it survives a crash.
static int sync_directory(const char *path) {
    char copy[PATH_MAX_LEN];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int ckpt_writer_commit(ckpt_writer_t **wp, char *err, size_t err_len) {
    ckpt_writer_t *w = *wp;
    uint8_t trailer[TRAILER_SIZE];
    memcpy(trailer, end_magic, sizeof end_magic);
    put_u32(trailer + 8, w->sections);
    write_bytes(w, trailer, 12);
    put_u32(trailer + 12, w->crc);
    if (!w->failed) {
        // The CRC covers what came before it, not itself.
        uint32_t crc = w->crc;
        write_bytes(w, trailer + 12, 4);
        w->crc = crc;
    }
    if (w->failed) {
        if (w->failed == EINVAL)
            snprintf(err, err_len, "%s: invalid %s", w->path, w->failed_what);
        else
            snprintf(err, err_len, "%s: %s failed: %s", w->tmp, w->failed_what, strerror(w->failed));
        writer_free(wp, 1);
        return -1;
    }
    if (fsync(w->fd) != 0) {
        snprintf(err, err_len, "%s: fsync failed: %s", w->tmp, strerror(errno));
        writer_free(wp, 1);
        return -1;
    }
    if (close(w->fd) != 0) {
        w->fd = -1;
        snprintf(err, err_len, "%s: close failed: %s", w->tmp, strerror(errno));
        writer_free(wp, 1);
        return -1;
    }
    w->fd = -1;
    if (rename(w->tmp, w->path) != 0) {
        snprintf(err, err_len, "%s: cannot rename it to %s: %s", w->tmp, w->path, strerror(errno));
        writer_free(wp, 1);
        return -1;
    }
    if (sync_directory(w->path) != 0) {
        snprintf(err, err_len, "%s: written, but flushing its directory failed: %s", w->path, strerror(errno));
        writer_free(wp, 0);
        return -1;
    }
    writer_free(wp, 0);
    return 0;
}

// ---- reading -----------------------------------------------------------------------

typedef struct section {
    char name[CKPT_NAME_MAX];
    const uint8_t *data;
    size_t size;
} section_t;

struct ckpt_file {
    char path[PATH_MAX_LEN];
    uint8_t *bytes;
    size_t len;
    section_t *sections;
    size_t n_sections;
};

void ckpt_file_free(ckpt_file_t **fp) {
    if (!fp || !*fp) return;
    free((*fp)->bytes);
    free((*fp)->sections);
    free(*fp);
    *fp = NULL;
}

static int read_whole(ckpt_file_t *f, const char *path, char *err, size_t err_len) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: not a regular file (a checkpoint is read from a regular file only)", path);
        close(fd);
        return -1;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    f->len = (size_t)st.st_size;
    f->bytes = malloc(f->len ? f->len : 1);
    if (!f->bytes) {
        snprintf(err, err_len, "%s: out of memory for its %zu bytes", path, f->len);
        close(fd);
        return -1;
    }
    size_t have = 0;
    while (have < f->len) {
        ssize_t got = read(fd, f->bytes + have, f->len - have);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            snprintf(err, err_len, "%s: reading failed after %zu of %zu bytes: %s", path, have, f->len,
                     got < 0 ? strerror(errno) : "the file shrank");
            close(fd);
            return -1;
        }
        have += (size_t)got;
    }
    close(fd);
    return 0;
}

ckpt_file_t *ckpt_file_read(const char *path, char *err, size_t err_len) {
    ckpt_file_t *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, err_len, "%s: out of memory", path);
        return NULL;
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    if (read_whole(f, path, err, err_len) != 0) goto fail;
    if (f->len == 0) {
        snprintf(err, err_len, "%s: empty file, not a checkpoint", path);
        goto fail;
    }
    if (f->len < 8 || memcmp(f->bytes, file_magic, sizeof file_magic) != 0) {
        snprintf(err, err_len, "%s: not an asgd checkpoint (it does not start with ASGDCKPT)", path);
        goto fail;
    }
    if (f->len < HEADER_SIZE + TRAILER_SIZE) {
        snprintf(err, err_len, "%s: truncated: %zu bytes, a checkpoint has at least %d", path, f->len,
                 HEADER_SIZE + TRAILER_SIZE);
        goto fail;
    }
    uint32_t version = get_u32(f->bytes + 8);
    if (version != CKPT_FORMAT_VERSION) {
        snprintf(err, err_len, "%s: checkpoint format version %u; this asgd reads version %u", path, version,
                 CKPT_FORMAT_VERSION);
        goto fail;
    }
    const uint8_t *trailer = f->bytes + f->len - TRAILER_SIZE;
    if (memcmp(trailer, end_magic, sizeof end_magic) != 0) {
        snprintf(err, err_len, "%s: truncated or incomplete: no end marker in its last bytes (%zu bytes in all)", path,
                 f->len);
        goto fail;
    }
    uint32_t stored = get_u32(trailer + 12), computed = ckpt_crc32(0, f->bytes, f->len - 4);
    if (stored != computed) {
        snprintf(err, err_len, "%s: corrupt: checksum mismatch (stored %08x, computed %08x)", path, stored, computed);
        goto fail;
    }
    uint32_t n = get_u32(trailer + 8);
    if (n > MAX_SECTIONS) {
        snprintf(err, err_len, "%s: malformed: %u sections (at most %d)", path, n, MAX_SECTIONS);
        goto fail;
    }
    f->sections = calloc(n ? n : 1, sizeof *f->sections);
    if (!f->sections) {
        snprintf(err, err_len, "%s: out of memory", path);
        goto fail;
    }
    size_t at = HEADER_SIZE, end = f->len - TRAILER_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        if (end - at < SECTION_HEADER_SIZE) {
            snprintf(err, err_len, "%s: malformed: section %u of %u starts past the end of the data", path, i, n);
            goto fail;
        }
        section_t *s = &f->sections[i];
        memcpy(s->name, f->bytes + at, CKPT_NAME_MAX);
        s->name[CKPT_NAME_MAX - 1] = '\0';
        uint64_t size = get_u64(f->bytes + at + CKPT_NAME_MAX);
        at += SECTION_HEADER_SIZE;
        uint64_t padded = size + (size % 8 ? 8 - size % 8 : 0);
        if (size > end - at || padded > end - at) {
            snprintf(err, err_len, "%s: malformed: section '%s' claims %llu bytes but only %zu remain", path, s->name,
                     (unsigned long long)size, end - at);
            goto fail;
        }
        s->data = f->bytes + at;
        s->size = (size_t)size;
        at += (size_t)padded;
    }
    if (at != end) {
        snprintf(err, err_len, "%s: malformed: %zu bytes after the last section", path, end - at);
        goto fail;
    }
    f->n_sections = n;
    return f;
fail:
    ckpt_file_free(&f);
    return NULL;
}

const char *ckpt_file_path(const ckpt_file_t *f) { return f->path; }

const void *ckpt_file_section(const ckpt_file_t *f, const char *name, size_t *size) {
    for (size_t i = 0; i < f->n_sections; i++) {
        if (strncmp(f->sections[i].name, name, CKPT_NAME_MAX) != 0) continue;
        if (size) *size = f->sections[i].size;
        return f->sections[i].data;
    }
    return NULL;
}

int ckpt_file_get(const ckpt_file_t *f, const char *name, void *out, size_t size, char *err, size_t err_len) {
    size_t have;
    const void *data = ckpt_file_section(f, name, &have);
    if (!data) {
        snprintf(err, err_len, "%s: no section '%s' (a checkpoint of something else?)", f->path, name);
        return -1;
    }
    if (have != size) {
        snprintf(err, err_len, "%s: section '%s' holds %zu bytes; expected %zu (a checkpoint of another model or run?)",
                 f->path, name, have, size);
        return -1;
    }
    if (size) memcpy(out, data, size);
    return 0;
}
