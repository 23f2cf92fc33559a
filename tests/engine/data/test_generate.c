// Generators: the same seed gives the same bytes (here and, through pinned
// checksums, on other machines), another seed other bytes, and the data has the
// statistics generate.h promises.
#include <time.h>
#include <unistd.h>

#include "engine/data/generate.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "datasets/text_io.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_generate_XXXXXX";

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The bytes other tools would read: the set written with libsvm_write (caller frees).
static char *sparse_bytes(const sparse_gen_config_t *c, size_t *len) {
    char err[512], path[512], *bytes;
    sparse_dataset_t d;
    CHECK_OK(gen_sparse(c, &d, err, sizeof err), err);
    snprintf(path, sizeof path, "%s/sparse.svm", dir);
    CHECK_OK(libsvm_write(path, &d, err, sizeof err), err);
    sparse_dataset_free(&d);
    CHECK_OK(text_file_read(path, &bytes, len, err, sizeof err), err);
    CHECK(unlink(path) == 0);
    return bytes;
}

static char *ratings_bytes(const ratings_gen_config_t *c, size_t *len) {
    char err[512], path[512], *bytes;
    ratings_t r;
    CHECK_OK(gen_ratings(c, &r, err, sizeof err), err);
    snprintf(path, sizeof path, "%s/ratings.csv", dir);
    CHECK_OK(ratings_write(path, &r, err, sizeof err), err);
    ratings_free(&r);
    CHECK_OK(text_file_read(path, &bytes, len, err, sizeof err), err);
    CHECK(unlink(path) == 0);
    return bytes;
}

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

static int cmp_size_desc(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x < y) - (x > y);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

// Same seed -> same bytes; the next seed -> other bytes. Returns the bytes (caller frees).
static char *seeded_bytes(sparse_gen_config_t c, size_t *len) {
    size_t lb, lo;
    char *a = sparse_bytes(&c, len), *b = sparse_bytes(&c, &lb);
    c.seed++;
    char *other = sparse_bytes(&c, &lo);
    CHECK(*len > 100000 && *len == lb && memcmp(a, b, *len) == 0);
    CHECK(*len != lo || memcmp(a, other, *len) != 0);
    free(b), free(other);
    return a;
}

// Same seed -> same bytes; another seed -> other bytes; and the bytes of a small
// set pinned, so that another machine or libc producing different data fails here.
static void determinism(void) {
    sparse_gen_config_t c;
    sparse_gen_config_default(&c);
    c.n_examples = 5000;
    c.dim = 20000;
    c.seed = 5;
    size_t la, lb, lo;
    free(seeded_bytes(c, &la));
    char *a, *b, *other;

    // The Fenwick path (the top ranks hold most of the weight) too.
    c.dim = 200;
    c.seed = 5;
    a = sparse_bytes(&c, &la), b = sparse_bytes(&c, &lb);
    CHECK(la == lb && memcmp(a, b, la) == 0);
    free(a), free(b);

    ratings_gen_config_t rc;
    ratings_gen_config_default(&rc);
    rc.n_ratings = 20000;
    a = ratings_bytes(&rc, &la), b = ratings_bytes(&rc, &lb);
    rc.seed = 2;
    other = ratings_bytes(&rc, &lo);
    CHECK(la == lb && memcmp(a, b, la) == 0 && (la != lo || memcmp(a, other, la) != 0));
    free(a), free(b), free(other);

    // Pinned: these hashes were taken on x86-64 glibc. A change in the generator
    // must update them on purpose; a change with the machine is a portability bug.
    sparse_gen_config_t small = {300, 1000, 20, 1.0, 0.05, 42};
    ratings_gen_config_t small_r = {50, 40, 4, 500, 0.1, 42};
    a = sparse_bytes(&small, &la);
    b = ratings_bytes(&small_r, &lb);
    uint64_t ha = fnv1a(a, la), hb = fnv1a(b, lb);
    printf("pinned bytes: sparse %zu bytes fnv1a %016llx, ratings %zu bytes fnv1a %016llx\n", la,
           (unsigned long long)ha, lb, (unsigned long long)hb);
    CHECK(ha == 0x4a29f73e7b703618ull);
    CHECK(hb == 0x55c4f07f9c8a2db8ull);
    free(a), free(b);

    // The tables' other ways (the Fenwick tree; the extreme skew; uniform
    // popularity; a million features), pinned when they were the only method:
    // the data of every dim up to GEN_SPARSE_TABLE_MAX_DIM stays what it was.
    static const struct {
        sparse_gen_config_t c;
        size_t bytes;
        uint64_t fnv1a;
    } pinned[] = {
        {{2000, 200, 60, 1.0, 0.05, 7}, 1906398, 0x2ce60dc2d85d1e15ull},
        {{1000, 100000, 60, 3.0, 0.05, 9}, 1116424, 0x61eff2d2260a35a2ull},
        {{3000, 5000, 20, 0.0, 0.1, 11}, 999558, 0x83999d4a63a7a60full},
        {{2000, 1000000, 60, 1.0, 0.05, 1}, 2307251, 0x57baafbc55b07d2dull},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        a = sparse_bytes(&pinned[i].c, &la);
        printf("pinned tables %zu: %zu bytes fnv1a %016llx\n", i, la, (unsigned long long)fnv1a(a, la));
        CHECK(la == pinned[i].bytes && fnv1a(a, la) == pinned[i].fnv1a);
        free(a);
    }
}

// Everything the header promises about one generated set, measured.
// Without truth (a dim too large to hold a weight per feature in a test),
// what the hidden model decides is not checked.
static void sparse_statistics_of(const sparse_gen_config_t *c, int truth, double *top_share_out) {
    char err[512];
    sparse_dataset_t d;
    double *w = truth ? malloc(c->dim * sizeof *w) : NULL, bias = 0.0;
    CHECK_OK(gen_sparse_with_truth(c, &d, w, &bias, err, sizeof err), err);
    CHECK(d.n == c->n_examples && d.dim == c->dim && d.row_ptr[0] == 0 && d.row_ptr[d.n] == d.nnz);
    size_t k = c->nnz_per_example, half = k / 2 < c->dim - k ? k / 2 : c->dim - k;
    size_t positives = 0, agree = 0;
    double worst_norm = 0.0;
    for (size_t i = 0; i < d.n; i++) {
        size_t len = d.row_ptr[i + 1] - d.row_ptr[i];
        CHECK(len >= k - half && len <= k + half);
        double norm2 = 0.0, dot = 0.0;
        for (size_t q = d.row_ptr[i]; q < d.row_ptr[i + 1]; q++) {
            CHECK(d.col[q] < d.dim);
            if (q > d.row_ptr[i]) CHECK(d.col[q] > d.col[q - 1]);  // sorted, distinct
            CHECK(d.val[q] > 0.0f);
            norm2 += (double)d.val[q] * d.val[q];
            if (w) dot += w[d.col[q]] * (double)d.val[q];  // as generate.h defines the score
        }
        worst_norm = fmax(worst_norm, fabs(sqrt(norm2) - 1.0));
        CHECK(d.y[i] == 1.0f || d.y[i] == -1.0f);
        positives += d.y[i] > 0;
        agree += (dot + bias >= 0.0 ? 1.0f : -1.0f) == d.y[i];
    }
    // Uses per feature, counted from the sorted indices (features never used count 0).
    uint32_t *cols = malloc(d.nnz * sizeof *cols);
    memcpy(cols, d.col, d.nnz * sizeof *cols);
    qsort(cols, d.nnz, sizeof *cols, cmp_u32);
    size_t *uses = malloc(d.nnz * sizeof *uses), used = 0;
    for (size_t q = 0; q < d.nnz; q++) {
        if (q == 0 || cols[q] != cols[q - 1]) uses[used++] = 0;
        uses[used - 1]++;
    }
    qsort(uses, used, sizeof *uses, cmp_size_desc);
    size_t top = 0, top_n = d.dim / 100 ? d.dim / 100 : 1;
    for (size_t j = 0; j < top_n && j < used; j++) top += uses[j];
    free(cols);
    double mean_nnz = (double)d.nnz / (double)d.n, balance = (double)positives / (double)d.n;
    double agreement = (double)agree / (double)d.n, top_share = (double)top / (double)d.nnz;
    printf(
        "sparse %zu x %zu, nnz %zu, zipf %g: mean nnz %.2f, max |row norm - 1| %.2g, positives %.4f, "
        "hidden model agrees with %.4f of labels%s, top 1%% of features carry %.3f of non-zeros\n",
        c->n_examples, c->dim, k, c->zipf_exponent, mean_nnz, worst_norm, balance, w ? agreement : NAN,
        w ? "" : " (not asked for)", top_share);
    CHECK(fabs(mean_nnz - (double)k) <= 0.1 * (double)k);
    CHECK(worst_norm < 1e-5);
    CHECK(balance > 0.35 && balance < 0.65);
    if (w) {
        // Exactly round(noise * n) labels were flipped away from the hidden model.
        CHECK(d.n - agree == (size_t)(c->label_noise * (double)d.n + 0.5));
        if (c->label_noise == 0.05) CHECK(agreement > 0.93 && agreement < 0.97);
    }
    *top_share_out = top_share;
    free(uses);
    free(w);
    sparse_dataset_free(&d);
}

static void sparse_statistics(const sparse_gen_config_t *c, double *top_share_out) {
    sparse_statistics_of(c, 1, top_share_out);
}

static void sparse_properties(void) {
    char err[512];
    sparse_gen_config_t c;
    sparse_gen_config_default(&c);
    CHECK(c.n_examples == 200000 && c.dim == 100000 && c.nnz_per_example == 60 && c.zipf_exponent == 1.0 &&
          c.label_noise == 0.05 && c.seed == 1);
    c.n_examples = 20000;
    c.dim = 20000;
    double share;
    sparse_statistics(&c, &share);
    // Zipf(1) over 20,000 ranks puts 56% of draws on the top 1%; at most one
    // non-zero per feature per row brings that to ~44% (measured) of non-zeros.
    // A uniform popularity would give 1%.
    CHECK(share > 0.30);
    c.zipf_exponent = 0.0;
    sparse_statistics(&c, &share);
    CHECK(share < 0.03);
    // The Fenwick path: the top 90 of 200 ranks hold most of the weight.
    c.zipf_exponent = 1.0;
    c.dim = 200;
    sparse_statistics(&c, &share);
    c.zipf_exponent = 3.0;  // extreme skew: without replacement must not mean forever
    c.dim = 100000;
    c.n_examples = 3000;
    sparse_statistics(&c, &share);
    // Every row has every feature.
    c.dim = 50;
    c.nnz_per_example = 50;
    sparse_dataset_t d;
    CHECK_OK(gen_sparse(&c, &d, err, sizeof err), err);
    CHECK(d.nnz == 50 * d.n);
    for (size_t q = 0; q < d.nnz; q++) CHECK(d.col[q] == q % 50);
    sparse_dataset_free(&d);
    // One non-zero per row, no noise: the value is 1 and the labels follow the model.
    // (Rows sharing the median's feature tie with it and go positive: over 20,000
    // features the most popular one has 9.5% of the rows, so balance stays near 1/2.)
    c.n_examples = 20000;
    c.dim = 20000;
    c.zipf_exponent = 1.0;
    c.nnz_per_example = 1;
    c.label_noise = 0.0;
    sparse_statistics(&c, &share);

    // Bad configurations name the field, and leave the output empty.
    static const struct {
        size_t field;  // which one to break
        const char *words;
    } bad[] = {{0, "n_examples is 0"},      {1, "dim is 0"},
               {2, "nnz_per_example is 0"}, {3, "nnz_per_example is 101; expected 1..dim (100)"},
               {4, "zipf_exponent is -1"},  {5, "label_noise is 0.7"},
               {6, "label_noise is nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sparse_gen_config_default(&c);
        c.dim = 100;
        switch (bad[i].field) {
            case 0:
                c.n_examples = 0;
                break;
            case 1:
                c.dim = 0;
                break;
            case 2:
                c.nnz_per_example = 0;
                break;
            case 3:
                c.nnz_per_example = 101;
                break;
            case 4:
                c.zipf_exponent = -1;
                break;
            case 5:
                c.label_noise = 0.7;
                break;
            default:
                c.label_noise = NAN;
                break;
        }
        CHECK(gen_sparse(&c, &d, err, sizeof err) == -1);
        printf("bad config -> %s\n", err);
        CHECK(strstr(err, bad[i].words) && d.n == 0 && d.row_ptr == NULL);
    }

    // The default size, timed once (generation only).
    sparse_gen_config_default(&c);
    double t0 = seconds();
    CHECK_OK(gen_sparse(&c, &d, err, sizeof err), err);
    printf("default sparse config (%zu x %zu, %zu non-zeros) generated in %.2f s\n", d.n, d.dim, d.nnz, seconds() - t0);
    sparse_dataset_free(&d);
}

// Bernstein's inequality: a count X ~ Binomial(n, p) strays from np by t or
// more with probability at most 2 exp(-t^2 / (2 (np(1 - p) + t / 3))). The t
// that makes this `chance`: a correct generator fails a check so bounded with
// at most that probability, whatever the seed.
static double binomial_bound(double n, double p, double chance) {
    double l = log(2.0 / chance), var = n * p * (1.0 - p);
    return l / 3.0 + sqrt(l * l / 9.0 + 2.0 * var * l);
}

// Beyond GEN_SPARSE_TABLE_MAX_DIM, with one non-zero per row, each row is one
// independent Zipf draw: the number of rows on rank r is Binomial(n, p_r) with
// p_r = (r + 1)^-s / sum over all ranks, summed here directly. Checked: each of
// the ten most popular ranks, and bands of ranks on both sides of where the
// generator's table ends and its rejection-inversion tail begins (2^16), and
// everything past 2^18; all checks together fail a correct generator with
// probability below 1e-6.
static void lean_zipf_popularity(double s) {
    char err[512];
    sparse_gen_config_t c = {1000000, 20000000, 1, s, 0.0, 3};
    CHECK(c.dim > GEN_SPARSE_TABLE_MAX_DIM);
    enum { KNOWN = 1 << 18 };  // ranks whose ids the test asks for
    uint32_t *ids = malloc(KNOWN * sizeof *ids);
    CHECK_OK(gen_sparse_popular_features(&c, KNOWN, ids, err, sizeof err), err);
    uint64_t *by_id = malloc(KNOWN * sizeof *by_id);  // id << 32 | rank, sorted
    for (size_t r = 0; r < KNOWN; r++) by_id[r] = (uint64_t)ids[r] << 32 | r;
    qsort(by_id, KNOWN, sizeof *by_id, cmp_u64);
    for (size_t r = 1; r < KNOWN; r++) CHECK(by_id[r] >> 32 != by_id[r - 1] >> 32);  // distinct ids
    sparse_dataset_t d;
    CHECK_OK(gen_sparse(&c, &d, err, sizeof err), err);
    CHECK(d.nnz == d.n);
    size_t *rows = calloc(KNOWN + 1, sizeof *rows);  // [KNOWN]: ranks past KNOWN
    for (size_t i = 0; i < d.n; i++) {
        size_t lo = 0, hi = KNOWN;  // the first entry with id >= col
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (by_id[mid] >> 32 < d.col[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        rows[lo < KNOWN && by_id[lo] >> 32 == d.col[i] ? (uint32_t)by_id[lo] : KNOWN]++;
    }
    static const size_t band[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 1000, 1 << 16, 1 << 17, KNOWN};
    enum { BANDS = sizeof band / sizeof band[0] };
    long double mass[BANDS], total = 0.0L;
    for (size_t b = BANDS; b-- > 0;) {
        size_t from = band[b], to = b + 1 < BANDS ? band[b + 1] : c.dim;
        mass[b] = 0.0L;
        for (size_t r = to; r > from; r--)
            mass[b] += pow((double)r, -s);  // ranks from..to-1 (1-based r), smallest first
        total += mass[b];
    }
    for (size_t b = 0; b < BANDS; b++) {
        size_t from = band[b], to = b + 1 < BANDS ? band[b + 1] : c.dim, bands = BANDS;
        size_t seen = 0;
        for (size_t r = from; r < to && r < KNOWN; r++) seen += rows[r];
        if (to > KNOWN) seen += rows[KNOWN];
        double p = (double)(mass[b] / total), expect = (double)d.n * p;
        double bound = binomial_bound((double)d.n, p, 1e-6 / (double)bands);
        printf("zipf %g, ranks [%zu, %zu): %zu rows, expected %.1f +- %.1f\n", s, from, to, seen, expect, bound);
        CHECK(fabs((double)seen - expect) <= bound);
    }
    sparse_dataset_free(&d);
    free(rows);
    free(by_id);
    free(ids);
}

static void lean_properties(void) {
    char err[512];
    sparse_gen_config_t c;
    sparse_gen_config_default(&c);
    c.n_examples = 5000;
    c.dim = 40000000;  // not a power of 4: the permutation walks its cycles
    c.seed = 5;
    size_t la;
    char *a = seeded_bytes(c, &la);
    // Pinned as the tables' sets are (x86-64 glibc).
    printf("pinned lean bytes: %zu bytes fnv1a %016llx\n", la, (unsigned long long)fnv1a(a, la));
    CHECK(la == 6342472 && fnv1a(a, la) == 0xf6a90310e9e55683ull);
    free(a);

    double share;
    c.seed = 5;
    c.n_examples = 20000;
    sparse_statistics_of(&c, 0, &share);
    // Extreme skew: the table's 65,536 ranks hold all but 1e-10 of the weight.
    c.zipf_exponent = 3.0;
    c.n_examples = 3000;
    sparse_statistics_of(&c, 0, &share);
    c.zipf_exponent = 0.0;
    sparse_statistics_of(&c, 0, &share);
    // Rows longer than half the table: the table grows to twice the longest row.
    c.nnz_per_example = 50000;
    c.n_examples = 20;
    c.zipf_exponent = 1.0;
    sparse_statistics_of(&c, 0, &share);
    // The hidden model, just past the tables (it takes a weight for every feature).
    sparse_gen_config_default(&c);
    c.n_examples = 20000;
    c.dim = GEN_SPARSE_TABLE_MAX_DIM + 1;
    sparse_statistics(&c, &share);

    lean_zipf_popularity(1.0);
    lean_zipf_popularity(0.7);

    uint32_t id;
    CHECK(gen_sparse_popular_features(&c, 0, &id, err, sizeof err) == -1);
    printf("bad request -> %s\n", err);
    CHECK(strstr(err, "asked for the 0 most popular features; expected 1..dim (16777217)"));
}

static void ratings_properties(void) {
    char err[512];
    ratings_gen_config_t c;
    ratings_gen_config_default(&c);
    CHECK(c.n_users == 2000 && c.n_items == 1000 && c.rank == 8 && c.n_ratings == 200000 && c.noise_std == 0.1 &&
          c.seed == 1);
    c.n_ratings = 50000;
    ratings_t r;
    double *u = malloc(c.n_users * c.rank * sizeof *u), *v = malloc(c.n_items * c.rank * sizeof *v);
    CHECK_OK(gen_ratings_with_truth(&c, &r, u, v, err, sizeof err), err);
    CHECK(r.n == c.n_ratings && r.n_users == c.n_users && r.n_items == c.n_items);
    double sq = 0.0, signal = 0.0, factor2 = 0.0;
    uint64_t *pair = malloc(r.n * sizeof *pair);
    for (size_t i = 0; i < r.n; i++) {
        CHECK(r.user[i] < c.n_users && r.item[i] < c.n_items);
        double dot = 0.0;
        for (size_t f = 0; f < c.rank; f++) dot += u[r.user[i] * c.rank + f] * v[r.item[i] * c.rank + f];
        sq += (r.rating[i] - dot) * (r.rating[i] - dot);
        signal += dot * dot;
        pair[i] = (uint64_t)r.user[i] * c.n_items + r.item[i];
    }
    for (size_t i = 0; i < c.n_users * c.rank; i++) factor2 += u[i] * u[i];
    qsort(pair, r.n, sizeof *pair, cmp_u64);
    for (size_t i = 1; i < r.n; i++) CHECK(pair[i] != pair[i - 1]);  // no pair twice
    double rmse = sqrt(sq / (double)r.n), signal_std = sqrt(signal / (double)r.n);
    double factor_var = factor2 / (double)(c.n_users * c.rank);
    printf(
        "ratings %zu of %zu x %zu, rank %zu: RMSE of the hidden factors %.4f (noise_std 0.1), rating signal std %.3f, "
        "factor variance %.4f (1/sqrt(rank) = %.4f)\n",
        r.n, c.n_users, c.n_items, c.rank, rmse, signal_std, factor_var, 1.0 / sqrt((double)c.rank));
    // 50,000 squared N(0, 0.01) draws: the RMSE's relative standard error is 1/sqrt(2n) = 0.3%.
    CHECK(fabs(rmse - 0.1) < 0.005);
    CHECK(signal_std > 0.8 && signal_std < 1.2);
    CHECK(fabs(factor_var - 1.0 / sqrt((double)c.rank)) < 0.02);
    free(pair);
    free(u);
    free(v);
    ratings_free(&r);

    // Dense: every pair once, in some order.
    ratings_gen_config_t dense = {30, 20, 2, 600, 0.0, 3};
    CHECK_OK(gen_ratings(&dense, &r, err, sizeof err), err);
    uint8_t seen[600] = {0};
    for (size_t i = 0; i < r.n; i++) {
        size_t p = (size_t)r.user[i] * 20 + r.item[i];
        CHECK(!seen[p]);
        seen[p] = 1;
    }
    CHECK(r.user[0] != 0 || r.item[0] != 0 || r.user[1] != 0 || r.item[1] != 1);  // shuffled
    ratings_free(&r);

    static const struct {
        size_t field;
        const char *words;
    } bad[] = {{0, "n_users is 0"},
               {1, "n_items is 0"},
               {2, "rank is 0"},
               {3, "n_ratings is 0"},
               {4, "n_ratings is 601; expected 1..600"},
               {5, "noise_std is -0.1"},
               {6, "noise_std is inf"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = dense;
        switch (bad[i].field) {
            case 0:
                c.n_users = 0;
                break;
            case 1:
                c.n_items = 0;
                break;
            case 2:
                c.rank = 0;
                break;
            case 3:
                c.n_ratings = 0;
                break;
            case 4:
                c.n_ratings = 601;
                break;
            case 5:
                c.noise_std = -0.1;
                break;
            default:
                c.noise_std = INFINITY;
                break;
        }
        CHECK(gen_ratings(&c, &r, err, sizeof err) == -1);
        printf("bad config -> %s\n", err);
        CHECK(strstr(err, bad[i].words) && r.n == 0 && r.user == NULL);
    }

    ratings_gen_config_default(&c);
    double t0 = seconds();
    CHECK_OK(gen_ratings(&c, &r, err, sizeof err), err);
    printf("default ratings config (%zu ratings) generated in %.3f s\n", r.n, seconds() - t0);
    ratings_free(&r);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    sparse_properties();
    lean_properties();
    ratings_properties();
    determinism();
    CHECK(rmdir(dir) == 0);
    printf("generator tests passed\n");
    return 0;
}
