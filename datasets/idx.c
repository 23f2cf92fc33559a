#include "datasets/idx.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/gunzip.h"  // defines: gz_read_file, gz_inflate_buffer

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

static int check_magic(const char *path, const uint8_t *data, size_t len, uint32_t want, const char *what, char *err, size_t err_len) {
    if (len < 4) {
        snprintf(err, err_len, "%s: file is %zu bytes, too short for the 4-byte IDX magic (expected 0x%08x for %s)", path, len, want, what);
        return -1;
    }
    uint32_t magic = load_be32(data);
    if (magic != want) {
        snprintf(err, err_len, "%s: bad IDX magic 0x%08x at byte offset 0 (expected 0x%08x for %s)", path, magic, want, what);
        return -1;
    }
    return 0;
}

static int parse_images(const char *path, const uint8_t *data, size_t len, idx_header_t *h, char *err, size_t err_len) {
    if (check_magic(path, data, len, IDX_MAGIC_IMAGES, "uint8 images", err, err_len) != 0) return -1;
    if (len < IMAGES_HEADER) {
        snprintf(err, err_len, "%s: file is %zu bytes, too short for the %d-byte IDX images header", path, len, IMAGES_HEADER);
        return -1;
    }
    h->n = load_be32(data + 4);
    h->rows = load_be32(data + 8);
    h->cols = load_be32(data + 12);
    static const char *const field[3] = {"image count", "rows", "cols"};
    const uint32_t dims[3] = {h->n, h->rows, h->cols};
    for (int i = 0; i < 3; i++) {
        if (dims[i] == 0) {
            snprintf(err, err_len, "%s: %s is 0 at byte offset %d (expected a positive dimension)", path, field[i], 4 + 4 * i);
            return -1;
        }
    }
    // Two 32-bit factors fit in 64 bits; the third is checked by division so that
    // a header claiming 2^96 bytes is caught without forming the product.
    const uint64_t pixels = (uint64_t)h->rows * h->cols, payload = len - IMAGES_HEADER;
    if (payload / pixels < h->n) {
        char need[48];
        if (h->n > UINT64_MAX / pixels)
            snprintf(need, sizeof need, "more than 2^64");
        else
            snprintf(need, sizeof need, "%llu", (unsigned long long)(pixels * h->n));
        snprintf(err, err_len,
                 "%s: truncated: header says %u images of %u x %u pixels (%s bytes after the %d-byte header) but the file has only "
                 "%llu",
                 path, h->n, h->rows, h->cols, need, IMAGES_HEADER, (unsigned long long)payload);
        return -1;
    }
    if (payload != pixels * h->n) {
        snprintf(err, err_len,
                 "%s: %llu trailing byte(s) after the %u images of %u x %u pixels the header declares (expected the file to end at "
                 "byte offset %llu)",
                 path, (unsigned long long)(payload - pixels * h->n), h->n, h->rows, h->cols,
                 (unsigned long long)(IMAGES_HEADER + pixels * h->n));
        return -1;
    }
    return 0;
}

static int parse_labels(const char *path, const uint8_t *data, size_t len, idx_header_t *h, char *err, size_t err_len) {
    if (check_magic(path, data, len, IDX_MAGIC_LABELS, "uint8 labels", err, err_len) != 0) return -1;
    if (len < LABELS_HEADER) {
        snprintf(err, err_len, "%s: file is %zu bytes, too short for the %d-byte IDX labels header", path, len, LABELS_HEADER);
        return -1;
    }
    h->n = load_be32(data + 4);
    h->rows = h->cols = 1;
    if (h->n == 0) {
        snprintf(err, err_len, "%s: label count is 0 at byte offset 4 (expected a positive count)", path);
        return -1;
    }
    if (len - LABELS_HEADER != h->n) {
        snprintf(err, err_len, "%s: %s: header says %u labels but the file has %zu bytes after the %d-byte header (expected exactly %u)",
                 path, len - LABELS_HEADER < h->n ? "truncated" : "trailing bytes", h->n, len - LABELS_HEADER, LABELS_HEADER, h->n);
        return -1;
    }
    for (uint32_t i = 0; i < h->n; i++) {
        uint8_t y = data[LABELS_HEADER + i];
        if (y >= IDX_N_CLASSES) {
            snprintf(err, err_len, "%s: label %u of example %u at byte offset %u is out of range (expected 0..%d)", path, y, i,
                     LABELS_HEADER + i, IDX_N_CLASSES - 1);
            return -1;
        }
    }
    return 0;
}

// Parses both files' bytes (already inflated) into out.
static int build(const char *images_path, const uint8_t *images, size_t images_len, const char *labels_path,
                 const uint8_t *labels, size_t labels_len, size_t limit, dense_dataset_t *out, char *err, size_t err_len) {
    idx_header_t ih, lh;
    if (parse_images(images_path, images, images_len, &ih, err, err_len) != 0) return -1;
    if (parse_labels(labels_path, labels, labels_len, &lh, err, err_len) != 0) return -1;
    if (ih.n != lh.n) {
        snprintf(err, err_len, "%s has %u images but %s has %u labels (expected the same count)", images_path, ih.n, labels_path, lh.n);
        return -1;
    }
    // Both sizes are now bounded by the bytes actually read, so allocating is safe.
    size_t n = limit > 0 && limit < ih.n ? limit : ih.n, dim = (size_t)ih.rows * ih.cols;
    dense_dataset_t d;
    if (dense_dataset_alloc(&d, n, dim, IDX_N_CLASSES, err, err_len) != 0) return -1;
    float scale[256];  // exact value/255 for every byte, cheaper than dividing per pixel
    for (int v = 0; v < 256; v++) scale[v] = (float)v / 255.0f;
    const uint8_t *px = images + IMAGES_HEADER;
    for (size_t i = 0; i < n * dim; i++) d.x[i] = scale[px[i]];
    for (size_t i = 0; i < n; i++) d.y[i] = labels[LABELS_HEADER + i];
    *out = d;
    return 0;
}

int idx_load(const char *images_path, const char *labels_path, size_t limit, dense_dataset_t *out, char *err, size_t err_len) {
    dense_dataset_init(out);
    uint8_t *images = NULL, *labels = NULL;
    size_t images_len = 0, labels_len = 0;
    int rc = -1;
    if (gz_read_file(images_path, &images, &images_len, err, err_len) == 0 &&
        gz_read_file(labels_path, &labels, &labels_len, err, err_len) == 0)
        rc = build(images_path, images, images_len, labels_path, labels, labels_len, limit, out, err, err_len);
    free(images);
    free(labels);
    return rc;
}

// Bytes as stored: inflated into *owned when they start with the gzip magic,
// else used in place.
static int stored_bytes(const char *name, const uint8_t *data, size_t len, uint8_t **owned, const uint8_t **bytes,
                        size_t *n, char *err, size_t err_len) {
    *owned = NULL;
    *bytes = data;
    *n = len;
    if (len < 2 || data[0] != 0x1f || data[1] != 0x8b) return 0;
    if (gz_inflate_buffer(data, len, name, owned, n, err, err_len) != 0) return -1;
    *bytes = *owned;
    return 0;
}

int idx_parse(const char *images_name, const uint8_t *images, size_t images_len, const char *labels_name,
              const uint8_t *labels, size_t labels_len, size_t limit, dense_dataset_t *out, char *err, size_t err_len) {
    dense_dataset_init(out);
    uint8_t *images_owned = NULL, *labels_owned = NULL;
    const uint8_t *ib, *lb;
    size_t in, ln;
    int rc = -1;
    if (stored_bytes(images_name, images, images_len, &images_owned, &ib, &in, err, err_len) == 0 &&
        stored_bytes(labels_name, labels, labels_len, &labels_owned, &lb, &ln, err, err_len) == 0)
        rc = build(images_name, ib, in, labels_name, lb, ln, limit, out, err, err_len);
    free(images_owned);
    free(labels_owned);
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
    snprintf(err, err_len, "fashion-mnist: neither %s/%s.gz (%s) nor %s/%s (%s) can be read ---> HINT: is dataset-fashion-mnist "
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
