// Ratings reader (datasets/ratings_io.c): any bytes as a file's contents.
#include <math.h>

#include "datasets/ratings_io.h"
#include "tests/fuzz/fuzz.h"

int fuzz_ratings(const uint8_t *data, size_t size, char *err, size_t err_len) {
    ratings_t r;
    int rc = fuzz_refused(ratings_parse("fuzz.csv", (const char *)data, size, &r, err, err_len), err);
    if (rc != 0) return rc;
    FUZZ_ASSERT(r.n > 0 && r.n_users > 0 && r.n_items > 0);
    FUZZ_ASSERT(r.n_users <= r.n && r.n_items <= r.n);  // ids are dense, in order of first appearance
    uint32_t next_user = 0, next_item = 0;
    for (size_t i = 0; i < r.n; i++) {
        FUZZ_ASSERT(r.user[i] < r.n_users && r.item[i] < r.n_items);
        FUZZ_ASSERT(r.user[i] <= next_user && r.item[i] <= next_item);
        if (r.user[i] == next_user) next_user++;
        if (r.item[i] == next_item) next_item++;
        FUZZ_ASSERT(isfinite(r.rating[i]));
    }
    FUZZ_ASSERT(next_user == r.n_users && next_item == r.n_items);
    ratings_free(&r);
    return 0;
}

FUZZ_ENTRY(fuzz_ratings)
