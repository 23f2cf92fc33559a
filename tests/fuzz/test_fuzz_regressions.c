// Replays every file under tests/fuzz/<harness>/ — the seed corpora and the
// inputs fuzzing once found to crash or misbehave — through the fuzz
// harnesses (tests/fuzz/fuzz_*.c), so that an ordinary build catches a
// regression without clang or libFuzzer. A harness aborts on any broken
// invariant; here, files named good-* must also be accepted and bad-* refused
// (with a one-line message), while other names (libFuzzer's, regress-*) only
// have to pass the harness's own checks.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tests/support/test_support.h"

typedef struct harness {
    const char *name;
    fuzz_harness_fn fn;
} harness_t;

static const harness_t harnesses[] = {
    {"libsvm", fuzz_libsvm}, {"ratings", fuzz_ratings}, {"idx", fuzz_idx}, {"gz", fuzz_gz},
    {"flags", fuzz_flags},   {"wire", fuzz_wire},       {"csv", fuzz_csv},
};

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    size_t cap = 4096, n = 0, got;
    uint8_t *buf = malloc(cap);
    CHECK(buf);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) CHECK((buf = realloc(buf, cap *= 2)) != NULL);
    }
    CHECK(!ferror(f));
    fclose(f);
    *len = n;
    return buf;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    size_t total = 0;
    for (size_t h = 0; h < sizeof harnesses / sizeof harnesses[0]; h++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", ASGD_FUZZ_DIR, harnesses[h].name);
        DIR *d = opendir(dir);
        if (!d) {
            fprintf(stderr, "%s: cannot open the corpus of harness %s\n", dir, harnesses[h].name);
            return 1;
        }
        char *names[4096];
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, "README.md") == 0) continue;
            CHECK(n < sizeof names / sizeof names[0]);
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, by_name);  // a failure names the same file every time
        size_t good = 0, bad = 0;
        for (size_t i = 0; i < n; i++) {
            char path[1024], err[1024] = "";
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            size_t len;
            uint8_t *data = read_all(path, &len);
            int rc = harnesses[h].fn(data, len, err, sizeof err);
            free(data);
            if (strncmp(names[i], "good-", 5) == 0) {
                good++;
                if (rc != 0) {
                    fprintf(stderr, "%s: refused, expected accepted: %s\n", path, err);
                    return 1;
                }
            } else if (strncmp(names[i], "bad-", 4) == 0) {
                bad++;
                if (rc == 0) {
                    fprintf(stderr, "%s: accepted, expected refused\n", path);
                    return 1;
                }
            }
            free(names[i]);
        }
        // A corpus that lost its seeds would pass vacuously.
        CHECK(good > 0 && bad > 0);
        printf("%-8s %3zu inputs (%zu good, %zu bad, %zu found by fuzzing or other)\n", harnesses[h].name, n, good, bad,
               n - good - bad);
        total += n;
    }
    printf("test_fuzz_regressions: ok (%zu inputs)\n", total);
    return 0;
}
