// Result records (engine/run/run_record.h): every field of a worker's and a
// shard's record comes back as written; a file of another magic, version or
// kind, cut short at any byte, or with bytes after its end is refused with
// one line naming the file. A record that cannot be written whole (the
// file-size limit standing in for a full disk) leaves no file and no
// temporary copy in the directory.
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/run/run_record.h"
#include "tests/support/test_support.h"

#define WORKERS 5

static char dir[] = "/tmp/asgd_record_XXXXXX";

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n > 0);
    rewind(f);
    unsigned char *p = malloc((size_t)n);
    CHECK(p && fread(p, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

// Bit for bit (NaN included).
static int same_f64(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void worker_round_trip(void) {
    worker_result_t w = {
        .id = 3,
        .metric_rmse = 1,
        .samples = 123456789012ull,
        .updates = 987654321ull,
        .train_examples = 60000,
        .pushes = 4242,
        .global_versions = 77,
        .samples_to_target = 31337,
        .bytes_out = 1ull << 40,
        .bytes_in = (1ull << 33) + 5,
        .bytes_out_uncompressed = UINT64_MAX,
        .wall_s = 12.345678901234567,
        .samples_per_s = 1e9 / 3,
        .wait_s = 0.1,
        .final_test_loss = 0.3333333333333333,
        .final_test_metric = 0.9876543210123,
        .time_to_target_s = NAN,
        .global_test_loss = -0.0,
        .global_test_metric = INFINITY,
        .samples_retrained = 11,
        .samples_skipped = 12,
        .evicted = 1,
    };
    char err[600];
    CHECK_OK(run_record_write_worker(dir, &w, err, sizeof err), err);
    worker_result_t r;
    memset(&r, 0xab, sizeof r);
    CHECK_OK(run_record_read_worker(dir, 3, &r, err, sizeof err), err);
    CHECK(r.id == w.id && r.metric_rmse == w.metric_rmse && r.samples == w.samples && r.updates == w.updates);
    CHECK(r.train_examples == w.train_examples && r.pushes == w.pushes && r.global_versions == w.global_versions);
    CHECK(r.samples_to_target == w.samples_to_target && r.bytes_out == w.bytes_out && r.bytes_in == w.bytes_in);
    CHECK(r.bytes_out_uncompressed == w.bytes_out_uncompressed);
    CHECK(r.samples_retrained == 11 && r.samples_skipped == 12 && r.evicted == 1);
    CHECK(same_f64(r.wall_s, w.wall_s) && same_f64(r.samples_per_s, w.samples_per_s) && same_f64(r.wait_s, w.wait_s));
    CHECK(same_f64(r.final_test_loss, w.final_test_loss) && same_f64(r.final_test_metric, w.final_test_metric));
    CHECK(same_f64(r.time_to_target_s, w.time_to_target_s) && same_f64(r.global_test_loss, w.global_test_loss));
    CHECK(same_f64(r.global_test_metric, w.global_test_metric));
    printf("worker record: every field back bit for bit (NaN, -0, inf, 2^64-1 included)\n");
}

static void server_round_trip(void) {
    char err[600];
    server_result_t s = {.id = 1, .run_id = 0xfeedfacecafebeefull, .lost_known = 1};
    CHECK_OK(server_result_alloc(&s, WORKERS, err, sizeof err), err);
    for (size_t k = 0; k < WORKERS; k++) {
        s.pushes_total[k] = 1000 + k;
        s.pushes_lost[k] = 10 * k;
        s.late_dropped[k] = k * k;
    }
    staleness_hist_init(&s.staleness_clocks);
    staleness_hist_init(&s.staleness_updates);
    for (uint64_t v = 0; v < 40; v++) staleness_hist_add(&s.staleness_clocks, v % 7);
    staleness_hist_add(&s.staleness_updates, 3);
    staleness_hist_add(&s.staleness_updates, 5000);  // the overflow bin: the exact max and sum kept
    CHECK_OK(run_record_write_server(dir, &s, err, sizeof err), err);
    server_result_t r;
    CHECK_OK(run_record_read_server(dir, 1, &r, err, sizeof err), err);
    CHECK(r.id == 1 && r.run_id == s.run_id && r.lost_known == 1 && r.workers == WORKERS);
    for (size_t k = 0; k < WORKERS; k++)
        CHECK(r.pushes_total[k] == s.pushes_total[k] && r.pushes_lost[k] == s.pushes_lost[k] &&
              r.late_dropped[k] == s.late_dropped[k]);
    CHECK(memcmp(&r.staleness_clocks, &s.staleness_clocks, sizeof s.staleness_clocks) == 0);
    CHECK(memcmp(&r.staleness_updates, &s.staleness_updates, sizeof s.staleness_updates) == 0);
    CHECK(r.staleness_updates.max == 5000 && r.staleness_updates.sum == 5003 && r.staleness_clocks.count == 40);
    printf("server record: ids, %d workers' counts and both histograms back as written\n", WORKERS);
    server_result_free(&r);
    server_result_free(&s);
}

// The reader refuses path's contents bytes[0..len), in one line naming the file
// and saying `what`.
static void expect_refused(int server, size_t id, const unsigned char *bytes, size_t len, const char *what) {
    char name[64], path[600], err[600] = "";
    snprintf(name, sizeof name, "%s-%zu.result", server ? "server" : "worker", id);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    test_write_file(dir, name, (const char *)bytes, len);
    int rc;
    if (server) {
        server_result_t r;
        rc = run_record_read_server(dir, id, &r, err, sizeof err);
    } else {
        worker_result_t r;
        rc = run_record_read_worker(dir, id, &r, err, sizeof err);
    }
    if (rc == 0 || !strstr(err, path) || !strstr(err, what) || strchr(err, '\n')) {
        fprintf(stderr, "%s of %zu bytes: rc %d, message \"%s\" (expected one naming %s and saying \"%s\")\n", name,
                len, rc, err, path, what);
        exit(1);
    }
}

static void refusals(void) {
    size_t wlen, slen;
    char path[600];
    snprintf(path, sizeof path, "%s/worker-3.result", dir);
    unsigned char *w = slurp(path, &wlen);
    snprintf(path, sizeof path, "%s/server-1.result", dir);
    unsigned char *s = slurp(path, &slen);

    unsigned char *bad = malloc(slen + 8);
    CHECK(bad);
    memcpy(bad, w, wlen);
    bad[0] = 'X';
    expect_refused(0, 3, bad, wlen, "not a result record");
    memcpy(bad, w, wlen);
    bad[8] = 5;  // version 5
    expect_refused(0, 3, bad, wlen, "version 5; this asgd reads version 4");
    expect_refused(1, 1, w, wlen, "a worker record where a server record belongs");
    memcpy(bad, w, wlen);
    bad[16]++;  // one field more than version 4 has
    expect_refused(0, 3, bad, wlen, "fields");
    memcpy(bad, w, wlen);
    bad[32 + 12 + 2] = 2;  // field 1 (metric_rmse, u64) said to be an f64
    expect_refused(0, 3, bad, wlen, "malformed");
    memcpy(bad, w, wlen);
    memset(bad + wlen, 0, 8);
    expect_refused(0, 3, bad, wlen + 8, "trailing bytes");
    // Cut short anywhere: in the header, in a field, in an array, in a histogram.
    for (size_t cut = 0; cut < wlen; cut += cut < 40 ? 1 : 13) expect_refused(0, 3, w, cut, "cut short");
    size_t hist = slen - 8 * 1024 - 10;
    const size_t cuts[] = {5, 31, 32, 33, 120, 200, hist, slen - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) expect_refused(1, 1, s, cuts[i], "cut short");
    // A header promising fewer bytes than the fields hold is cut short inside a field.
    memcpy(bad, s, slen);
    uint64_t body = 0;
    for (int i = 0; i < 8; i++) body |= (uint64_t)bad[24 + i] << (8 * i);
    body -= 16;
    for (int i = 0; i < 8; i++) bad[24 + i] = (unsigned char)(body >> (8 * i));
    expect_refused(1, 1, bad, slen - 16, "cut short: it ends at byte");
    printf(
        "refused, naming the file: another magic, version, kind, field count, field type; trailing bytes; "
        "cut short in the header, fields, arrays and histograms\n");

    char err[600];
    worker_result_t r;
    CHECK(run_record_read_worker(dir, 9, &r, err, sizeof err) != 0);
    snprintf(path, sizeof path, "%s/worker-9.result", dir);
    CHECK(strstr(err, path) && strstr(err, "wrote no result"));
    printf("a missing record: %s\n", err);
    free(bad);
    free(w);
    free(s);
}

// Entries of dir whose name starts with `prefix`.
static size_t entries_named(const char *prefix) {
    DIR *d = opendir(dir);
    CHECK(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

// A full disk: writes past 1,000 bytes fail (EFBIG) while the server record
// needs about 9 KB. The write fails naming the file and leaves nothing behind.
static void write_fails_whole(void) {
    server_result_t r = {.id = 7, .run_id = 1};
    char err[600];
    CHECK(server_result_alloc(&r, WORKERS, err, sizeof err) == 0);
    struct rlimit was, small;
    CHECK(getrlimit(RLIMIT_FSIZE, &was) == 0);
    small = was;
    small.rlim_cur = 1000;
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    int rc = run_record_write_server(dir, &r, err, sizeof err);
    CHECK(setrlimit(RLIMIT_FSIZE, &was) == 0);
    signal(SIGXFSZ, old);
    server_result_free(&r);
    printf("a record past the file-size limit: rc %d: %s; files left: %zu\n", rc, err,
           entries_named("server-7") + entries_named(".server-7"));
    CHECK(rc != 0 && strstr(err, "server-7.result: writing failed"));
    CHECK(entries_named("server-7") == 0 && entries_named(".server-7") == 0);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    worker_round_trip();
    server_round_trip();
    refusals();
    write_fails_whole();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
