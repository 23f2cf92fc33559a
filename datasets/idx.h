#ifndef ASGD_DATASETS_IDX_H
#define ASGD_DATASETS_IDX_H
// IDX image/label files (MNIST, Fashion-MNIST), raw or compressed (gzip, xz,
// zstd: read through datasets/data_input.h; a compressed file is decompressed
// no further than its header's dimensions allow, plus a few KiB to see
// whether it ends there).
// Both loaders return 0 on success and -1 on error with one line in err naming
// the file and what was wrong; out is initialised first and stays empty on error.
// On success the caller owns out's arrays and releases them with dense_dataset_free.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"

// Labels of these sets are the ten classes 0..9; n_classes is always this, not
// max label + 1, so that a small `limit` subset keeps the full output layer.
#define IDX_N_CLASSES 10

// Loads images (magic 0x00000803: uint8, 3-D n x rows x cols) and labels
// (magic 0x00000801: uint8, 1-D n). Each file must be exactly as long as its
// header says (a shorter or longer one is refused naming the file before more
// than the declared bytes are read); the two counts must agree and every label
// must be < IDX_N_CLASSES.
// limit > 0 keeps the first `limit` examples (0 = all). Pixels become value/255
// in [0, 1]; out->dim = rows * cols.
int idx_load(const char *images_path, const char *labels_path, size_t limit, dense_dataset_t *out, char *err,
             size_t err_len);

// idx_load over the two files' contents in memory (raw or gzipped, as they
// would be stored); the names stand for the paths in messages.
int idx_parse(const char *images_name, const uint8_t *images, size_t images_len, const char *labels_name,
              const uint8_t *labels, size_t labels_len, size_t limit, dense_dataset_t *out, char *err, size_t err_len);

// Loads Fashion-MNIST from dir (NULL = ASGD_FASHION_MNIST_DIR): train != 0 reads
// train-{images-idx3,labels-idx1}-ubyte, train == 0 reads the t10k-* pair;
// each name is tried as "<name>.gz", then "<name>".
int fashion_mnist_load(const char *dir, int train, size_t limit, dense_dataset_t *out, char *err, size_t err_len);

#endif
