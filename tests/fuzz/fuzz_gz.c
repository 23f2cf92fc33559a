// Compressed input (datasets/data_input.c over zlib, liblzma and libzstd): any
// bytes as a data file's contents, read whole, read again in chunks of odd
// sizes, and parsed as a libsvm file through the text reader that every
// compressed libsvm and ratings file goes through. The decompressed size is
// capped at FUZZ_GZ_CAP for the run.
#include "datasets/data_input.h"
#include "datasets/libsvm.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_GZ_CAP ((uint64_t)1 << 18)

// Reads everything in chunks of the sizes in steps[] (cycled); 0 or -1 (err).
// *gz: 0 plain, 1 gzip, 2 another compression.
static int read_all(const uint8_t *data, size_t size, const size_t *steps, size_t n_steps, uint8_t *out, size_t *len,
                    int *gz, char *err, size_t err_len) {
    data_input_t *in;
    *len = 0;
    *gz = -1;
    if (data_input_open_memory(&in, "fuzz.gz", data, size, err, err_len) != 0) return -1;
    *gz = !data_input_compressed(in) ? 0 : strcmp(data_input_format(in), "gzip") == 0 ? 1 : 2;
    int rc = 0;
    for (size_t k = 0;; k++) {
        size_t want = steps[k % n_steps], got;
        if (want > FUZZ_GZ_CAP + 1 - *len) want = FUZZ_GZ_CAP + 1 - *len;
        if ((rc = data_input_read(in, out + *len, want, &got, err, err_len)) != 0) break;
        *len += got;
        if (got < want) break;
        // A plain input is not capped: read no further than the harness's buffer.
        if (*len == FUZZ_GZ_CAP + 1) break;
    }
    data_input_close(in);
    return rc;
}

int fuzz_gz(const uint8_t *data, size_t size, char *err, size_t err_len) {
    uint64_t cap_before = data_input_set_max_inflated(FUZZ_GZ_CAP);
    static uint8_t whole[FUZZ_GZ_CAP + 1], pieces[FUZZ_GZ_CAP + 1];
    static const size_t big[] = {(size_t)FUZZ_GZ_CAP + 1}, odd[] = {1, 3, 17, 255, 4096, 65521};  // cycled
    size_t whole_len, pieces_len;
    int gz, gz2;
    char err2[1024] = "";
    int rc = fuzz_refused(read_all(data, size, big, 1, whole, &whole_len, &gz, err, err_len), err);
    int rc2 = fuzz_refused(
        read_all(data, size, odd, sizeof odd / sizeof *odd, pieces, &pieces_len, &gz2, err2, sizeof err2), err2);
    // How the bytes are asked for changes nothing: the same bytes, or the same refusal.
    FUZZ_ASSERT(rc == rc2 && gz == gz2);
    if (rc != 0) {
        if (strcmp(err, err2) != 0) fprintf(stderr, "read whole: %s\nread in pieces: %s\n", err, err2);
        FUZZ_ASSERT(strcmp(err, err2) == 0 && strncmp(err, "fuzz.gz: ", 9) == 0);
    } else {
        FUZZ_ASSERT(whole_len == pieces_len && memcmp(whole, pieces, whole_len) == 0);
        FUZZ_ASSERT(gz ? whole_len <= FUZZ_GZ_CAP : whole_len == (size < FUZZ_GZ_CAP + 1 ? size : FUZZ_GZ_CAP + 1));
        if (!gz) FUZZ_ASSERT(memcmp(whole, data, whole_len) == 0);
        // The smallest gzip member is 20 bytes and deflate's best ratio is under 1032:1.
        if (gz == 1) FUZZ_ASSERT(size >= 20 && whole_len / 1032 <= size);
    }
    // The text reader over the same bytes: bytes that cannot be read cannot be parsed
    // (it may stop earlier, at a line it cannot parse).
    sparse_dataset_t d;
    char err3[1024] = "";
    int rc3 = fuzz_refused(libsvm_parse("fuzz.gz", (const char *)data, size, 0, &d, err3, sizeof err3), err3);
    if (rc != 0) FUZZ_ASSERT(rc3 != 0 && strncmp(err3, "fuzz.gz:", 8) == 0);
    if (rc3 == 0) {
        FUZZ_ASSERT(d.n > 0);
        sparse_dataset_free(&d);
    }
    data_input_set_max_inflated(cap_before);
    return rc;
}

FUZZ_ENTRY(fuzz_gz)
