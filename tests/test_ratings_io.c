// Ratings reader and writer: the supported layouts, id remapping, and bad lines
// refused with the exact file:line:column.
#include <unistd.h>

#include "datasets/ratings_io.h"
#include "test_support.h"

static void load(const char *name, ratings_t *r) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/ratings/%s", ASGD_TEST_DATA_DIR, name);
    CHECK_OK(ratings_load(path, r, err, sizeof err), err);
}

static void expect_bad(const char *name, const char *location, const char *words) {
    char path[512], err[512] = "", want[96];
    snprintf(path, sizeof path, "%s/ratings/%s", ASGD_TEST_DATA_DIR, name);
    ratings_t r;
    int rc = ratings_load(path, &r, err, sizeof err);
    printf("%-22s -> %s\n", name, err);
    snprintf(want, sizeof want, "%s:%s: ", name, location);
    CHECK(rc == -1 && strstr(err, want) && strstr(err, words));
    CHECK(r.n == 0 && r.user == NULL);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    ratings_t r;
    // CSV with a header and a comment; ids remapped in order of first appearance.
    load("good.csv", &r);
    CHECK(r.n == 4 && r.n_users == 3 && r.n_items == 3);
    CHECK(r.user[0] == 0 && r.user[1] == 1 && r.user[2] == 0 && r.user[3] == 2);
    CHECK(r.item[0] == 0 && r.item[1] == 0 && r.item[2] == 1 && r.item[3] == 2);
    CHECK(r.rating[0] == 4.5f && r.rating[1] == 3.0f && r.rating[2] == 1.5f && r.rating[3] == 5.0f);
    ratings_free(&r);
    load("good.tsv", &r);
    CHECK(r.n == 2 && r.n_users == 1 && r.n_items == 2 && r.rating[1] == -1.0f);
    ratings_free(&r);
    load("good.dat", &r);  // MovieLens user::item::rating::timestamp
    CHECK(r.n == 3 && r.n_users == 2 && r.n_items == 2 && r.item[2] == 0 && r.rating[0] == 5.0f);
    ratings_free(&r);
    load("good_spaces.txt", &r);
    CHECK(r.n == 2 && r.rating[1] == 0.5f);
    ratings_free(&r);

    expect_bad("bad_missing_field.csv", "2:4", "expected a separator and a rating");
    expect_bad("bad_user.csv", "2:1", "expected a user id");
    expect_bad("bad_item.csv", "2:3", "expected an item id");
    expect_bad("bad_rating.csv", "2:5", "expected a finite rating");
    expect_bad("bad_trailing.csv", "2:8", "unexpected 'x' after the rating");

    // Round trip through the writer.
    ratings_t orig;
    make_ratings(&orig, 500, 30, 20, 3, 4);
    char tmp[] = "/tmp/asgd_ratings_XXXXXX", err[512];
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(ratings_write(tmp, &orig, err, sizeof err), err);
    CHECK_OK(ratings_load(tmp, &r, err, sizeof err), err);
    CHECK(r.n == orig.n && memcmp(r.rating, orig.rating, r.n * sizeof *r.rating) == 0);
    // Dense ids come back renumbered by first appearance, but pairs keep their identity.
    for (size_t i = 0; i < r.n; i++)
        for (size_t j = i + 1; j < r.n && j < i + 50; j++) {
            CHECK((r.user[i] == r.user[j]) == (orig.user[i] == orig.user[j]));
            CHECK((r.item[i] == r.item[j]) == (orig.item[i] == orig.item[j]));
        }
    unlink(tmp);
    ratings_free(&r);
    ratings_free(&orig);
    printf("ratings tests passed\n");
    return 0;
}
