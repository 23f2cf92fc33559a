// IDX reader (datasets/idx.c), raw or gzipped: the input is a little-endian
// uint32 L, then the images file (its first L bytes, fewer if the input is
// shorter), then the labels file (the rest).
#include "datasets/data_input.h"
#include "datasets/idx.h"
#include "tests/fuzz/fuzz.h"

int fuzz_idx(const uint8_t *data, size_t size, char *err, size_t err_len) {
    size_t skip = size < 4 ? size : 4, images_len = 0;
    for (size_t i = 0; i < skip; i++) images_len |= (size_t)data[i] << (8 * i);
    const uint8_t *images = data + skip;
    if (images_len > size - skip) images_len = size - skip;
    const uint8_t *labels = images + images_len;
    size_t labels_len = size - skip - images_len;
    dense_dataset_t d;
    int rc =
        fuzz_refused(idx_parse("images", images, images_len, "labels", labels, labels_len, 0, &d, err, err_len), err);
    if (rc != 0) return rc;
    FUZZ_ASSERT(d.n > 0 && d.dim > 0 && d.n_classes == IDX_N_CLASSES);
    // Every pixel came from a byte of the (inflated) images file.
    FUZZ_ASSERT(d.n * d.dim <= images_len || d.n * d.dim <= data_input_max_inflated());
    for (size_t i = 0; i < d.n * d.dim; i++) FUZZ_ASSERT(d.x[i] >= 0.0f && d.x[i] <= 1.0f);
    for (size_t i = 0; i < d.n; i++) FUZZ_ASSERT(d.y[i] >= 0 && d.y[i] < IDX_N_CLASSES);
    // A limit keeps a prefix.
    dense_dataset_t first;
    char err2[512];
    FUZZ_ASSERT(idx_parse("images", images, images_len, "labels", labels, labels_len, 1, &first, err2, sizeof err2) ==
                0);
    FUZZ_ASSERT(first.n == 1 && first.dim == d.dim && memcmp(first.x, d.x, d.dim * sizeof *d.x) == 0);
    dense_dataset_free(&first);
    dense_dataset_free(&d);
    return 0;
}

FUZZ_ENTRY(fuzz_idx)
