// gzip decoder (datasets/gunzip.c): any bytes as a .gz file.
#include "datasets/gunzip.h"  // defines: gz_inflate_buffer, GZ_MAX_OUTPUT
#include "tests/fuzz/fuzz.h"

int fuzz_gunzip(const uint8_t *data, size_t size, char *err, size_t err_len) {
    uint8_t *out = (uint8_t *)"not set";
    size_t out_len = 1;
    int rc = fuzz_refused(gz_inflate_buffer(data, size, "fuzz.gz", &out, &out_len, err, err_len), err);
    if (rc != 0) {
        FUZZ_ASSERT(out == NULL && out_len == 0);
        return rc;
    }
    FUZZ_ASSERT(out != NULL && out_len <= GZ_MAX_OUTPUT);
    // The smallest gzip member is 20 bytes; its stored block costs 5 bytes per
    // 65535 of output and deflate's best ratio is under 1032:1.
    FUZZ_ASSERT(size >= 20 && out_len / 1032 <= size);
    free(out);
    return 0;
}

FUZZ_ENTRY(fuzz_gunzip)
