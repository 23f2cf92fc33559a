// Ratings reader and writer: every supported layout, id remapping by first
// appearance, bad lines refused with the exact file:line:column and an empty
// output, and write -> load round trips.
#include <unistd.h>

#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "datasets/text_io.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_ratings_XXXXXX";

static const char *put_bytes(const char *name, const char *bytes, size_t len) {
    return test_write_file(dir, name, bytes, len);
}

static const char *put(const char *name, const char *text) { return put_bytes(name, text, strlen(text)); }

static void load_data(const char *name, ratings_t *r) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/ratings/%s", ASGD_TEST_DATA_DIR, name);
    CHECK_OK(ratings_load(path, r, err, sizeof err), err);
}

// Checks every triple: users, items (dense ids) and ratings.
static void check_all(const ratings_t *r, size_t n, size_t n_users, size_t n_items, const uint32_t *user,
                      const uint32_t *item, const float *rating) {
    CHECK(r->n == n && r->n_users == n_users && r->n_items == n_items);
    for (size_t i = 0; i < n; i++) CHECK(r->user[i] == user[i] && r->item[i] == item[i] && r->rating[i] == rating[i]);
}

static void expect_bad(const char *path, const char *name, const char *location, const char *words) {
    char err[512] = "", want[128];
    ratings_t r;
    int rc = ratings_load(path, &r, err, sizeof err);
    printf("%-22s -> %s\n", name, err);
    snprintf(want, sizeof want, "%s:%s: ", name, location);
    CHECK(rc == -1);
    CHECK(strstr(err, want) != NULL);
    CHECK(strstr(err, words) != NULL);
    CHECK(strchr(err, '\n') == NULL);
    CHECK(r.n == 0 && r.n_users == 0 && r.n_items == 0 && r.user == NULL && r.item == NULL && r.rating == NULL);
}

static void expect_bad_data(const char *name, const char *location, const char *words) {
    char path[512];
    snprintf(path, sizeof path, "%s/ratings/%s", ASGD_TEST_DATA_DIR, name);
    expect_bad(path, name, location, words);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    char err[512];
    ratings_t r;

    // CSV with a MovieLens header and a comment; ids 10, 20, 30 -> 0, 1, 2 and
    // 100, 300, 200 -> 0, 1, 2 by first appearance; the timestamps are ignored.
    load_data("good.csv", &r);
    check_all(&r, 4, 3, 3, (uint32_t[]){0, 1, 0, 2}, (uint32_t[]){0, 0, 1, 2}, (float[]){4.5f, 3.0f, 1.5f, 5.0f});
    ratings_free(&r);
    load_data("good.tsv", &r);
    check_all(&r, 2, 1, 2, (uint32_t[]){0, 0}, (uint32_t[]){0, 1}, (float[]){2.5f, -1.0f});
    ratings_free(&r);
    load_data("good.dat", &r);  // MovieLens user::item::rating::timestamp
    check_all(&r, 3, 2, 2, (uint32_t[]){0, 0, 1}, (uint32_t[]){0, 1, 0}, (float[]){5.0f, 3.0f, 4.0f});
    ratings_free(&r);
    load_data("good_spaces.txt", &r);
    check_all(&r, 2, 2, 2, (uint32_t[]){0, 1}, (uint32_t[]){0, 1}, (float[]){3.0f, 0.5f});
    ratings_free(&r);

    // Written here: a BOM and CRLF, spaces around commas, a quoted header,
    // comments, the largest id, ids shared between users and items, no final newline.
    const char *path = put("forms.csv",
                           "\xEF\xBB\xBF\"user\",\"item\",\"rating\"\r\n"
                           "# comment\r\n"
                           "7 , 7 , 1e-1\r\n"
                           "\r\n"
                           "18446744073709551615,0,-2.5,  1700000000  # trailing comment\r\n"
                           "0\t18446744073709551615\t+3\n"
                           "7,0,4.25");
    CHECK_OK(ratings_load(path, &r, err, sizeof err), err);
    check_all(&r, 4, 3, 3, (uint32_t[]){0, 1, 2, 0}, (uint32_t[]){0, 1, 2, 1}, (float[]){0.1f, -2.5f, 3.0f, 4.25f});
    ratings_free(&r);
    // A header is only skipped on the first line; a first line with digits is data.
    path = put("digits_first.csv", "1,2,3\n");
    CHECK_OK(ratings_load(path, &r, err, sizeof err), err);
    CHECK(r.n == 1 && r.rating[0] == 3.0f);
    ratings_free(&r);

    // The bad corpus.
    expect_bad_data(
        "bad_missing_field.csv", "2:4",
        "expected a separator (',', tab, space or '::') and a rating after the item id, got the end of the line");
    expect_bad_data("bad_user.csv", "2:1", "expected a user id (a non-negative integer), got 'x1'");
    expect_bad_data("bad_item.csv", "2:3", "expected an item id (a non-negative integer), got '-5'");
    expect_bad_data("bad_rating.csv", "2:5", "rating 'nan' is not finite");
    expect_bad_data("bad_trailing.csv", "2:5", "expected a rating (a number), got '2.5x'");
    expect_bad_data("bad_fifth_field.csv", "1:10", "expected the end of the line after the timestamp");
    expect_bad_data("bad_timestamp.dat", "2:10", "expected a timestamp (a number) as the 4th field, got 'abc'");
    expect_bad_data("bad_late_header.csv", "2:1", "expected a user id (a non-negative integer), got 'userId'");
    expect_bad_data("bad_id_overflow.tsv", "2:1", "user id '18446744073709551616' is too large");
    expect_bad_data("bad_separator.txt", "2:2",
                    "expected a separator (',', tab, space or '::') and an item id after the user id, got ';'");
    // Written here.
    expect_bad(put("inf.csv", "1,2,3\n3,4,-inf\n"), "inf.csv", "2:5", "rating '-inf' is not finite");
    expect_bad(put("range.csv", "1,2,1e39\n"), "range.csv", "1:5", "rating '1e39' is out of float range");
    expect_bad(put("no_item.csv", "# c\n\n1,\n"), "no_item.csv", "3:3",
               "expected an item id (a non-negative integer), got the end of the line");
    // strtod would skip the newline and read the next line's user id as this rating.
    expect_bad(put("next_line.csv", "1,2,\n3,4,5\n"), "next_line.csv", "1:5",
               "expected a rating (a number), got the end of the line");
    expect_bad(put("space_after_colons.dat", "1::2:: 3\n"), "space_after_colons.dat", "1:7",
               "expected a rating (a number), got a space");
    expect_bad(put("float_id.csv", "1.5,2,3\n"), "float_id.csv", "1:1",
               "expected a user id (a non-negative integer), got '1.5'");
    expect_bad(put("single_colon.dat", "1:2:3\n"), "single_colon.dat", "1:2",
               "and an item id after the user id, got ':'");
    expect_bad(put("crlf.csv", "1,2,3\r\n4,5\r\n"), "crlf.csv", "2:4", "got the end of the line");
    expect_bad(put_bytes("nul.csv", "1,2,3\n4,5,6\0\n", 13), "nul.csv", "2:6", "NUL byte");
    CHECK(ratings_load(put("header_only.csv", "userId,movieId,rating\n# nothing\n"), &r, err, sizeof err) == -1);
    printf("%-22s -> %s\n", "header_only.csv", err);
    CHECK(strstr(err, "header_only.csv: no ratings") && r.n == 0 && r.user == NULL);
    CHECK(ratings_load("/nonexistent/r.csv", &r, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent/r.csv: cannot open: No such file or directory"));

    // Round trip: ratings bit for bit; ids renumbered by first appearance, which
    // make_ratings' ids are not, so compare through the renumbering. 150,000
    // lines (2.6 MB) span several of the reader's 1 MiB blocks.
    ratings_t orig;
    make_ratings(&orig, 150000, 40, 30, 3, 4);
    orig.rating[0] = -0.0f;
    orig.rating[1] = 1e-40f;  // a denormal
    orig.rating[2] = 1.0f / 3.0f;
    char out[512];
    snprintf(out, sizeof out, "%s/round_trip.csv", dir);
    CHECK_OK(ratings_write(out, &orig, err, sizeof err), err);
    CHECK_OK(ratings_load(out, &r, err, sizeof err), err);
    CHECK(r.n == orig.n && memcmp(r.rating, orig.rating, r.n * sizeof *r.rating) == 0);
    uint32_t user_of[40], item_of[30], next_user = 0, next_item = 0;
    memset(user_of, 0xff, sizeof user_of);
    memset(item_of, 0xff, sizeof item_of);
    for (size_t i = 0; i < r.n; i++) {
        if (user_of[orig.user[i]] == UINT32_MAX) user_of[orig.user[i]] = next_user++;
        if (item_of[orig.item[i]] == UINT32_MAX) item_of[orig.item[i]] = next_item++;
        CHECK(r.user[i] == user_of[orig.user[i]] && r.item[i] == item_of[orig.item[i]]);
    }
    CHECK(r.n_users == next_user && r.n_items == next_item);
    ratings_free(&r);
    // Written from dense ids that already are in first-appearance order, the ids come back unchanged.
    ratings_t dense;
    CHECK_OK(ratings_alloc(&dense, 3, 2, 2, err, sizeof err), err);
    memcpy(dense.user, (uint32_t[]){0, 1, 1}, 3 * sizeof(uint32_t));
    memcpy(dense.item, (uint32_t[]){0, 0, 1}, 3 * sizeof(uint32_t));
    memcpy(dense.rating, (float[]){0.1f, 2.0f, -3.75f}, 3 * sizeof(float));
    CHECK_OK(ratings_write(out, &dense, err, sizeof err), err);
    char *bytes;
    size_t len;
    CHECK_OK(text_file_read(out, &bytes, &len, err, sizeof err), err);
    CHECK(strcmp(bytes, "0,0,0.100000001\n1,0,2\n1,1,-3.75\n") == 0);
    free(bytes);
    CHECK(ratings_write("/nonexistent/dir/r.csv", &dense, err, sizeof err) == -1 &&
          strstr(err, "No such file or directory"));
    ratings_free(&dense);
    ratings_free(&orig);

    static const char *const names[] = {
        "forms.csv",     "digits_first.csv",       "inf.csv",       "range.csv",        "no_item.csv",
        "next_line.csv", "space_after_colons.dat", "float_id.csv",  "single_colon.dat", "crlf.csv",
        "nul.csv",       "header_only.csv",        "round_trip.csv"};
    char p[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        CHECK(unlink(p) == 0);
    }
    CHECK(rmdir(dir) == 0);
    printf("ratings tests passed\n");
    return 0;
}
