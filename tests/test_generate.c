// Generators: the same seed gives the same bytes, another seed other bytes, and
// the data has the statistics the documentation promises.
#include <time.h>
#include <unistd.h>

#include "datasets/generate.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "test_support.h"

static char *written_sparse(const sparse_gen_config_t *c) {
    char err[256], path[] = "/tmp/asgd_gen_XXXXXX";
    sparse_dataset_t d;
    CHECK_OK(gen_sparse(c, &d, err, sizeof err), err);
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(libsvm_write(path, &d, err, sizeof err), err);
    sparse_dataset_free(&d);
    char *bytes;
    size_t len;
    CHECK_OK(text_file_read(path, &bytes, &len, err, sizeof err), err);
    unlink(path);
    return bytes;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x < y) - (x > y);  // descending
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char err[256];
    sparse_gen_config_t c;
    sparse_gen_config_default(&c);
    CHECK(c.n_examples == 200000 && c.dim == 100000 && c.nnz_per_example == 60 && c.label_noise == 0.05);
    c.n_examples = 20000;
    c.dim = 20000;
    c.seed = 5;

    // Determinism, through the file format other tools read.
    char *a = written_sparse(&c), *b = written_sparse(&c);
    c.seed = 6;
    char *other = written_sparse(&c);
    c.seed = 5;
    CHECK(strlen(a) > 100000 && strcmp(a, b) == 0 && strcmp(a, other) != 0);
    free(a), free(b), free(other);

    // Statistics.
    sparse_dataset_t d, clean;
    CHECK_OK(gen_sparse(&c, &d, err, sizeof err), err);
    double mean_nnz = (double)d.nnz / (double)d.n;
    size_t positives = 0, *uses = calloc(d.dim, sizeof *uses);
    double worst_norm = 0.0;
    for (size_t i = 0; i < d.n; i++) {
        double norm2 = 0.0;
        for (size_t k = d.row_ptr[i]; k < d.row_ptr[i + 1]; k++) {
            norm2 += (double)d.val[k] * d.val[k];
            uses[d.col[k]]++;
            if (k > d.row_ptr[i]) CHECK(d.col[k] > d.col[k - 1]);  // sorted, distinct
            CHECK(d.val[k] > 0.0f);
        }
        worst_norm = fmax(worst_norm, fabs(sqrt(norm2) - 1.0));
        positives += d.y[i] > 0;
    }
    qsort(uses, d.dim, sizeof *uses, cmp_size);
    size_t top = 0;
    for (size_t j = 0; j < d.dim / 100; j++) top += uses[j];
    double top_share = (double)top / (double)d.nnz, balance = (double)positives / (double)d.n;
    // Labels without noise come from the same draws (noise has its own stream): the
    // flipped fraction is the difference.
    sparse_gen_config_t c0 = c;
    c0.label_noise = 0.0;
    CHECK_OK(gen_sparse(&c0, &clean, err, sizeof err), err);
    CHECK(clean.nnz == d.nnz && memcmp(clean.col, d.col, d.nnz * sizeof *d.col) == 0);
    size_t flipped = 0;
    for (size_t i = 0; i < d.n; i++) flipped += clean.y[i] != d.y[i];
    double flip_rate = (double)flipped / (double)d.n;
    printf("sparse: mean nnz %.2f (asked 60), max |row norm - 1| %.2g, positives %.3f, top 1%% of features "
           "carry %.3f of non-zeros, labels flipped %.4f (asked 0.05)\n",
           mean_nnz, worst_norm, balance, top_share, flip_rate);
    CHECK(fabs(mean_nnz - 60.0) < 6.0);
    CHECK(worst_norm < 1e-5);
    CHECK(balance > 0.45 && balance < 0.55);
    // Zipf(1) puts 56% of draws on the top 1% of 20,000 features; redrawing repeats
    // within a row lowers the share of non-zeros (0.44 measured).
    CHECK(top_share > 0.3);
    CHECK(flip_rate > 0.044 && flip_rate < 0.056);  // 5% +- 3.5 standard deviations
    free(uses);
    sparse_dataset_free(&d);
    sparse_dataset_free(&clean);

    // Bad configurations name the field.
    c.nnz_per_example = 0;
    CHECK(gen_sparse(&c, &d, err, sizeof err) == -1 && strstr(err, "nnz=0"));
    c.nnz_per_example = 60;
    c.label_noise = 0.7;
    CHECK(gen_sparse(&c, &d, err, sizeof err) == -1 && strstr(err, "noise=0.7"));

    // The default size, timed once.
    sparse_gen_config_default(&c);
    clock_t t0 = clock();
    CHECK_OK(gen_sparse(&c, &d, err, sizeof err), err);
    printf("default sparse config (%zu x %zu, %zu non-zeros) generated in %.2f s of CPU\n", d.n, d.dim, d.nnz,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    sparse_dataset_free(&d);

    // Ratings: the noise is the part the hidden factors do not explain.
    ratings_gen_config_t rc;
    ratings_gen_config_default(&rc);
    rc.n_ratings = 50000;
    ratings_t r1, r2, r0;
    CHECK_OK(gen_ratings(&rc, &r1, err, sizeof err), err);
    CHECK_OK(gen_ratings(&rc, &r2, err, sizeof err), err);
    CHECK(memcmp(r1.rating, r2.rating, r1.n * sizeof *r1.rating) == 0 && memcmp(r1.user, r2.user, r1.n * 4) == 0);
    ratings_gen_config_t rc0 = rc;
    rc0.noise_std = 0.0;
    CHECK_OK(gen_ratings(&rc0, &r0, err, sizeof err), err);
    double sq = 0.0, var = 0.0;
    for (size_t i = 0; i < r1.n; i++) {
        sq += (double)(r1.rating[i] - r0.rating[i]) * (r1.rating[i] - r0.rating[i]);
        var += (double)r0.rating[i] * r0.rating[i];
    }
    double noise = sqrt(sq / (double)r1.n), signal = sqrt(var / (double)r1.n);
    printf("ratings: noise std %.4f (asked 0.1), signal std %.3f (about 1 by design)\n", noise, signal);
    CHECK(fabs(noise - 0.1) < 0.003);
    CHECK(signal > 0.8 && signal < 1.2);
    rc.seed = 2;
    ratings_free(&r2);
    CHECK_OK(gen_ratings(&rc, &r2, err, sizeof err), err);
    CHECK(memcmp(r1.rating, r2.rating, r1.n * sizeof *r1.rating) != 0);
    ratings_free(&r0), ratings_free(&r1), ratings_free(&r2);
    printf("generator tests passed\n");
    return 0;
}
