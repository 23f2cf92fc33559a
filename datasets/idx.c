#include "datasets/idx.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/data_input.h"

#ifndef ASGD_FASHION_MNIST_DIR
#define ASGD_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#endif

#define IDX_MAGIC_IMAGES 0x00000803u  // type 0x08 = uint8, 3 dimensions
#define IDX_MAGIC_LABELS 0x00000801u  // type 0x08 = uint8, 1 dimension
#define IMAGES_HEADER 16
#define LABELS_HEADER 8

static uint32_t load_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// The header's count, then its other dimensions, as read from the file.
typedef struct idx_header {
    uint32_t n;
    uint32_t rows, cols;  // images only
} idx_header_t;

static int check_magic(const char *path, const uint8_t *data, size_t len, uint32_t want, const char *what, char *err,
                       size_t err_len) {
    if (len < 4) {
        snprintf(err, err_len, "%s: file is %zu bytes, too short for the 4-byte IDX magic (expected 0x%08x for %s)",
                 path, len, want, what);
        return -1;
    }
    uint32_t magic = load_be32(data);
    if (magic != want) {
        snprintf(err, err_len, "%s: bad IDX magic 0x%08x at byte offset 0 (expected 0x%08x for %s)", path, magic, want,
                 what);
        return -1;
    }
    return 0;
}

// Reads up to n bytes into a buffer that grows with what actually arrives (so a
// header that claims more than the file holds allocates no more than the file),
// then looks for bytes beyond n: *extra is how many (at most TRAILING_PROBE).
#define TRAILING_PROBE 4096
static int read_bounded(data_input_t *in, uint64_t n, uint8_t **out, size_t *len, size_t *extra, char *err,
                        size_t err_len) {
    *out = NULL;
    *len = *extra = 0;
    size_t cap = 0, have = 0;
    uint8_t *buf = NULL;
    for (;;) {
        if (have == n) break;
        if (have == cap) {
            uint64_t next = cap ? (uint64_t)cap * 2 : (uint64_t)1 << 20;
            if (next > n) next = n;
            uint8_t *bigger = next <= SIZE_MAX ? realloc(buf, (size_t)next) : NULL;
            if (!bigger) {
                free(buf);
                return -2;  // out of memory: the caller words it
            }
            buf = bigger;
            cap = (size_t)next;
        }
        size_t got;
        if (data_input_read(in, buf + have, cap - have, &got, err, err_len) != 0) {
            free(buf);
            return -1;
        }
        have += got;
        if (have < cap) break;  // the end of the data
    }
    if (have == n) {
        uint8_t probe[TRAILING_PROBE];
        if (data_input_read(in, probe, sizeof probe, extra, err, err_len) != 0) {
            free(buf);
            return -1;
        }
    }
    *out = buf;
    *len = have;
    return 0;
}

// One IDX file: the header (parsed into h), then exactly the payload it declares
// into *payload (the caller frees it). Reads no more than the header allows
// (and TRAILING_PROBE bytes to find out whether the file ends there).
static int read_idx(data_input_t *in, const char *path, int images, idx_header_t *h, uint8_t **payload, char *err,
                    size_t err_len) {
    *payload = NULL;
    const size_t header_len = images ? IMAGES_HEADER : LABELS_HEADER;
    uint8_t header[IMAGES_HEADER];
    size_t len;
    if (data_input_read(in, header, header_len, &len, err, err_len) != 0) return -1;
    if (check_magic(path, header, len, images ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS,
                    images ? "uint8 images" : "uint8 labels", err, err_len) != 0)
        return -1;
    if (len < header_len) {
        snprintf(err, err_len, "%s: file is %zu bytes, too short for the %zu-byte IDX %s header", path, len, header_len,
                 images ? "images" : "labels");
        return -1;
    }
    h->n = load_be32(header + 4);
    h->rows = images ? load_be32(header + 8) : 1;
    h->cols = images ? load_be32(header + 12) : 1;
    static const char *const field[3] = {"image count", "rows", "cols"};
    const uint32_t dims[3] = {h->n, h->rows, h->cols};
    for (int i = 0; i < (images ? 3 : 1); i++) {
        if (dims[i] == 0) {
            if (images)
                snprintf(err, err_len, "%s: %s is 0 at byte offset %d (expected a positive dimension)", path, field[i],
                         4 + 4 * i);
            else
                snprintf(err, err_len, "%s: label count is 0 at byte offset 4 (expected a positive count)", path);
            return -1;
        }
    }
    // Two 32-bit factors fit in 64 bits; the third is checked by division so that
    // a header claiming 2^96 bytes is caught without forming the product.
    const uint64_t pixels = (uint64_t)h->rows * h->cols;
    const int overflow = h->n > UINT64_MAX / pixels;
    const uint64_t need = overflow ? UINT64_MAX : pixels * h->n;
    uint8_t *data;
    size_t got, extra;
    int rc = read_bounded(in, need, &data, &got, &extra, err, err_len);
    if (rc == -2) {
        snprintf(err, err_len, "%s: out of memory for the %llu bytes its header declares", path,
                 (unsigned long long)need);
        return -1;
    }
    if (rc != 0) return -1;
    if (got < need) {
        if (!images) {
            snprintf(err, err_len,
                     "%s: truncated: header says %u labels but the file has %zu bytes after the %d-byte header "
                     "(expected exactly %u)",
                     path, h->n, got, LABELS_HEADER, h->n);
        } else {
            char need_text[48];
            if (overflow)
                snprintf(need_text, sizeof need_text, "more than 2^64");
            else
                snprintf(need_text, sizeof need_text, "%llu", (unsigned long long)need);
            snprintf(err, err_len,
                     "%s: truncated: header says %u images of %u x %u pixels (%s bytes after the %d-byte header) but "
                     "the file has only "
                     "%zu",
                     path, h->n, h->rows, h->cols, need_text, IMAGES_HEADER, got);
        }
        free(data);
        return -1;
    }
    if (extra > 0) {
        char count[32];
        snprintf(count, sizeof count, extra < TRAILING_PROBE ? "%zu" : "at least %zu", extra);
        if (images)
            snprintf(err, err_len,
                     "%s: %s trailing byte(s) after the %u images of %u x %u pixels the header declares (expected the "
                     "file to end at "
                     "byte offset %llu)",
                     path, count, h->n, h->rows, h->cols, (unsigned long long)(IMAGES_HEADER + need));
        else
            snprintf(err, err_len,
                     "%s: trailing bytes: header says %u labels but %s more byte(s) follow them (expected the file to "
                     "end at byte offset %llu)",
                     path, h->n, count, (unsigned long long)(LABELS_HEADER + need));
        free(data);
        return -1;
    }
    if (!images) {
        for (uint32_t i = 0; i < h->n; i++) {
            if (data[i] >= IDX_N_CLASSES) {
                snprintf(err, err_len, "%s: label %u of example %u at byte offset %u is out of range (expected 0..%d)",
                         path, data[i], i, LABELS_HEADER + i, IDX_N_CLASSES - 1);
                free(data);
                return -1;
            }
        }
    }
    *payload = data;
    return 0;
}

// Reads both files and builds out from them.
static int load(data_input_t *images_in, const char *images_path, data_input_t *labels_in, const char *labels_path,
                size_t limit, dense_dataset_t *out, char *err, size_t err_len) {
    idx_header_t ih, lh;
    uint8_t *px = NULL, *labels = NULL;
    int rc = -1;
    if (read_idx(images_in, images_path, 1, &ih, &px, err, err_len) != 0) goto done;
    if (read_idx(labels_in, labels_path, 0, &lh, &labels, err, err_len) != 0) goto done;
    if (ih.n != lh.n) {
        snprintf(err, err_len, "%s has %u images but %s has %u labels (expected the same count)", images_path, ih.n,
                 labels_path, lh.n);
        goto done;
    }
    // Both sizes are now bounded by the bytes actually read, so allocating is safe.
    size_t n = limit > 0 && limit < ih.n ? limit : ih.n, dim = (size_t)ih.rows * ih.cols;
    dense_dataset_t d;
    if (dense_dataset_alloc(&d, n, dim, IDX_N_CLASSES, err, err_len) != 0) goto done;
    float scale[256];  // exact value/255 for every byte, cheaper than dividing per pixel
    for (int v = 0; v < 256; v++) scale[v] = (float)v / 255.0f;
    for (size_t i = 0; i < n * dim; i++) d.x[i] = scale[px[i]];
    for (size_t i = 0; i < n; i++) d.y[i] = labels[i];
    *out = d;
    rc = 0;
done:
    free(px);
    free(labels);
    return rc;
}

int idx_load(const char *images_path, const char *labels_path, size_t limit, dense_dataset_t *out, char *err,
             size_t err_len) {
    dense_dataset_init(out);
    data_input_t *images = NULL, *labels = NULL;
    int rc = -1;
    if (data_input_open(&images, images_path, err, err_len) == 0 &&
        data_input_open(&labels, labels_path, err, err_len) == 0)
        rc = load(images, images_path, labels, labels_path, limit, out, err, err_len);
    data_input_close(images);
    data_input_close(labels);
    return rc;
}

int idx_parse(const char *images_name, const uint8_t *images, size_t images_len, const char *labels_name,
              const uint8_t *labels, size_t labels_len, size_t limit, dense_dataset_t *out, char *err, size_t err_len) {
    dense_dataset_init(out);
    data_input_t *ii = NULL, *li = NULL;
    int rc = -1;
    if (data_input_open_memory(&ii, images_name, images, images_len, err, err_len) == 0 &&
        data_input_open_memory(&li, labels_name, labels, labels_len, err, err_len) == 0)
        rc = load(ii, images_name, li, labels_name, limit, out, err, err_len);
    data_input_close(ii);
    data_input_close(li);
    return rc;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// Picks "<dir>/<name>.gz", else "<dir>/<name>"; path receives the choice.
static int find_file(const char *dir, const char *name, char *path, size_t path_len, char *err, size_t err_len) {
    int w = snprintf(path, path_len, "%s/%s.gz", dir, name);
    if (w < 0 || (size_t)w >= path_len) {
        snprintf(err, err_len, "%s/%s.gz: path is longer than %zu bytes", dir, name, path_len - 1);
        return -1;
    }
    if (file_exists(path)) return 0;
    int gz_errno = errno;
    snprintf(path, path_len, "%s/%s", dir, name);
    if (file_exists(path)) return 0;
    snprintf(err, err_len,
             "fashion-mnist: neither %s/%s.gz (%s) nor %s/%s (%s) can be read ---> HINT: is dataset-fashion-mnist "
             "installed? (apt-get install dataset-fashion-mnist), or pass --data-dir DIR",
             dir, name, strerror(gz_errno), dir, name, strerror(errno));
    return -1;
}

int fashion_mnist_load(const char *dir, int train, size_t limit, dense_dataset_t *out, char *err, size_t err_len) {
    dense_dataset_init(out);
    if (!dir) dir = ASGD_FASHION_MNIST_DIR;
    const char *split = train ? "train" : "t10k";
    char name[64], images[4096], labels[4096];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    if (find_file(dir, name, images, sizeof images, err, err_len) != 0) return -1;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    if (find_file(dir, name, labels, sizeof labels, err, err_len) != 0) return -1;
    return idx_load(images, labels, limit, out, err, err_len);
}
