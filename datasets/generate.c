#include "datasets/generate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/rng.h"

// rng streams, one per purpose, so that changing one draw does not shift the others.
enum { STREAM_PERMUTATION = 1, STREAM_FEATURES, STREAM_WEIGHTS, STREAM_NOISE, STREAM_USERS, STREAM_ITEMS, STREAM_PAIRS };

void sparse_gen_config_default(sparse_gen_config_t *c) {
    c->n_examples = 200000;
    c->dim = 100000;
    c->nnz_per_example = 60;
    c->zipf_exponent = 1.0;
    c->label_noise = 0.05;
    c->seed = 1;
}

void ratings_gen_config_default(ratings_gen_config_t *c) {
    c->n_users = 2000;
    c->n_items = 1000;
    c->rank = 8;
    c->n_ratings = 200000;
    c->noise_std = 0.1;
    c->seed = 1;
}

// Walker/Vose alias table: O(1) draws from a discrete distribution.
typedef struct alias_table {
    size_t n;
    float *prob;
    uint32_t *alias;
} alias_table_t;

static int alias_build(alias_table_t *t, const double *weight, size_t n) {
    t->n = n;
    t->prob = malloc(n * sizeof *t->prob);
    t->alias = malloc(n * sizeof *t->alias);
    double *scaled = malloc(n * sizeof *scaled);
    uint32_t *small = malloc(n * sizeof *small), *large = malloc(n * sizeof *large);
    if (!t->prob || !t->alias || !scaled || !small || !large) {
        free(t->prob), free(t->alias), free(scaled), free(small), free(large);
        return -1;
    }
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += weight[i];
    size_t ns = 0, nl = 0;
    for (size_t i = 0; i < n; i++) {
        scaled[i] = weight[i] * (double)n / total;
        if (scaled[i] < 1.0) small[ns++] = (uint32_t)i;
        else large[nl++] = (uint32_t)i;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[nl - 1];
        t->prob[s] = (float)scaled[s];
        t->alias[s] = l;
        scaled[l] -= 1.0 - scaled[s];
        if (scaled[l] < 1.0) {
            nl--;
            small[ns++] = l;
        }
    }
    while (nl) t->prob[large[--nl]] = 1.0f, t->alias[large[nl]] = large[nl];
    while (ns) t->prob[small[--ns]] = 1.0f, t->alias[small[ns]] = small[ns];
    free(scaled), free(small), free(large);
    return 0;
}

static uint32_t alias_draw(const alias_table_t *t, rng_t *r) {
    uint32_t i = (uint32_t)rng_below(r, t->n);
    return rng_uniform(r) < t->prob[i] ? i : t->alias[i];
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int gen_sparse(const sparse_gen_config_t *c, sparse_dataset_t *out, char *err, size_t err_len) {
    sparse_dataset_init(out);
    if (c->n_examples == 0 || c->n_examples > UINT32_MAX) {
        snprintf(err, err_len, "gen sparse: n=%zu; expected 1..%u examples", c->n_examples, UINT32_MAX);
        return -1;
    }
    if (c->dim == 0 || c->dim > UINT32_MAX) {
        snprintf(err, err_len, "gen sparse: dim=%zu; expected 1..%u features", c->dim, UINT32_MAX);
        return -1;
    }
    if (c->nnz_per_example == 0 || c->nnz_per_example > c->dim || c->nnz_per_example > 1000000) {
        snprintf(err, err_len, "gen sparse: nnz=%zu; expected 1..min(dim=%zu, 1000000)", c->nnz_per_example, c->dim);
        return -1;
    }
    if (!(c->label_noise >= 0.0 && c->label_noise <= 0.5)) {
        snprintf(err, err_len, "gen sparse: noise=%g; expected a fraction in [0, 0.5]", c->label_noise);
        return -1;
    }
    if (!(c->zipf_exponent >= 0.0 && c->zipf_exponent <= 10.0)) {
        snprintf(err, err_len, "gen sparse: zipf=%g; expected an exponent in [0, 10]", c->zipf_exponent);
        return -1;
    }
    size_t n = c->n_examples, dim = c->dim, k = c->nnz_per_example;
    size_t lo = k / 2 ? k / 2 : 1, hi = k + k / 2 < dim ? k + k / 2 : dim;
    if (hi < lo) hi = lo;
    if (n > SIZE_MAX / hi) {
        snprintf(err, err_len, "gen sparse: %zu examples x up to %zu non-zeros overflow size_t", n, hi);
        return -1;
    }
    size_t max_nnz = n * hi;  // rows are at most `hi` long
    double *weight = malloc(dim * sizeof *weight), *idf = malloc(dim * sizeof *idf);
    double *hidden = malloc(dim * sizeof *hidden), *score = malloc(n * sizeof *score);
    uint32_t *perm = malloc(dim * sizeof *perm), *stamp = calloc(dim, sizeof *stamp), *row = malloc(hi * sizeof *row);
    sparse_dataset_t d;
    sparse_dataset_init(&d);
    alias_table_t table = {0, NULL, NULL};
    int rc = -1;
    int ok = weight && idf && hidden && score && perm && stamp && row;
    if (ok) {
        for (size_t r = 0; r < dim; r++) {
            weight[r] = pow((double)(r + 1), -c->zipf_exponent);
            // Rarer features weigh more, as inverse document frequency does.
            idf[r] = log(1.0 + (double)dim / (double)(r + 1));
        }
        ok = alias_build(&table, weight, dim) == 0 && sparse_dataset_alloc(&d, n, dim, max_nnz, err, err_len) == 0;
    }
    if (!ok) {
        if (!err[0]) snprintf(err, err_len, "gen sparse: out of memory for %zu x %zu", n, dim);
        goto done;
    }
    rng_t rp, rf, rw, rn;
    rng_seed(&rp, c->seed, STREAM_PERMUTATION);
    rng_seed(&rf, c->seed, STREAM_FEATURES);
    rng_seed(&rw, c->seed, STREAM_WEIGHTS);
    rng_seed(&rn, c->seed, STREAM_NOISE);
    for (size_t j = 0; j < dim; j++) perm[j] = (uint32_t)j;
    rng_shuffle_u32(&rp, perm, dim);  // popularity rank -> feature id
    for (size_t j = 0; j < dim; j++) hidden[j] = rng_normal(&rw);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = lo + (size_t)rng_below(&rf, hi - lo + 1);
        // Distinct features: redraw a rank already in this row (stamp = row number + 1).
        size_t got = 0;
        while (got < len) {
            uint32_t rank = alias_draw(&table, &rf);
            if (stamp[rank] == (uint32_t)(i + 1)) continue;
            stamp[rank] = (uint32_t)(i + 1);
            row[got++] = rank;
        }
        qsort(row, len, sizeof *row, cmp_u32);  // by rank: values drawn in a fixed order
        double norm2 = 0.0;
        for (size_t t = 0; t < len; t++) {
            double count = 1.0 + floor(-log(1.0 - rng_uniform(&rf)));  // geometric term count >= 1
            double v = count * idf[row[t]];
            d.col[at + t] = perm[row[t]];
            d.val[at + t] = (float)v;
            norm2 += v * v;
        }
        // Sort the row's (feature id, value) pairs by id, then normalise.
        for (size_t t = 1; t < len; t++) {
            uint32_t cj = d.col[at + t];
            float vj = d.val[at + t];
            size_t u = t;
            for (; u > 0 && d.col[at + u - 1] > cj; u--) {
                d.col[at + u] = d.col[at + u - 1];
                d.val[at + u] = d.val[at + u - 1];
            }
            d.col[at + u] = cj;
            d.val[at + u] = vj;
        }
        double inv = 1.0 / sqrt(norm2), dot = 0.0;
        for (size_t t = 0; t < len; t++) {
            d.val[at + t] = (float)(d.val[at + t] * inv);
            dot += hidden[d.col[at + t]] * d.val[at + t];
        }
        score[i] = dot;
        at += len;
        d.row_ptr[i + 1] = at;
    }
    d.nnz = at;
    // Centre the scores at their median so that the two classes are balanced.
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted) {
        snprintf(err, err_len, "gen sparse: out of memory sorting %zu scores", n);
        goto done;
    }
    memcpy(sorted, score, n * sizeof *score);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    double median = sorted[n / 2];
    free(sorted);
    for (size_t i = 0; i < n; i++) {
        float y = score[i] >= median ? 1.0f : -1.0f;
        if (rng_uniform(&rn) < c->label_noise) y = -y;
        d.y[i] = y;
    }
    *out = d;
    sparse_dataset_init(&d);
    rc = 0;
done:
    sparse_dataset_free(&d);
    free(table.prob), free(table.alias);
    free(weight), free(idf), free(hidden), free(score), free(perm), free(stamp), free(row);
    return rc;
}

int gen_ratings(const ratings_gen_config_t *c, ratings_t *out, char *err, size_t err_len) {
    ratings_init(out);
    if (c->n_users == 0 || c->n_items == 0 || c->n_users > UINT32_MAX || c->n_items > UINT32_MAX) {
        snprintf(err, err_len, "gen ratings: users=%zu items=%zu; expected 1..%u each", c->n_users, c->n_items, UINT32_MAX);
        return -1;
    }
    if (c->rank == 0 || c->rank > 4096) {
        snprintf(err, err_len, "gen ratings: rank=%zu; expected 1..4096", c->rank);
        return -1;
    }
    if (c->n_ratings == 0 || c->n_ratings > UINT32_MAX) {
        snprintf(err, err_len, "gen ratings: n=%zu; expected 1..%u ratings", c->n_ratings, UINT32_MAX);
        return -1;
    }
    if (!(c->noise_std >= 0.0 && isfinite(c->noise_std))) {
        snprintf(err, err_len, "gen ratings: noise=%g; expected a standard deviation >= 0", c->noise_std);
        return -1;
    }
    if (c->n_users > SIZE_MAX / c->rank / sizeof(double) || c->n_items > SIZE_MAX / c->rank / sizeof(double)) {
        snprintf(err, err_len, "gen ratings: factor matrices of rank %zu overflow size_t", c->rank);
        return -1;
    }
    double *u = malloc(c->n_users * c->rank * sizeof *u), *v = malloc(c->n_items * c->rank * sizeof *v);
    if (!u || !v || ratings_alloc(out, c->n_ratings, c->n_users, c->n_items, err, err_len) != 0) {
        if (!u || !v) snprintf(err, err_len, "gen ratings: out of memory for the hidden factors");
        free(u), free(v);
        return -1;
    }
    rng_t ru, rv, rp, rn;
    rng_seed(&ru, c->seed, STREAM_USERS);
    rng_seed(&rv, c->seed, STREAM_ITEMS);
    rng_seed(&rp, c->seed, STREAM_PAIRS);
    rng_seed(&rn, c->seed, STREAM_NOISE);
    double std = pow((double)c->rank, -0.25);
    for (size_t i = 0; i < c->n_users * c->rank; i++) u[i] = std * rng_normal(&ru);
    for (size_t i = 0; i < c->n_items * c->rank; i++) v[i] = std * rng_normal(&rv);
    for (size_t i = 0; i < c->n_ratings; i++) {
        uint32_t a = (uint32_t)rng_below(&rp, c->n_users), b = (uint32_t)rng_below(&rp, c->n_items);
        double dot = 0.0;
        for (size_t k = 0; k < c->rank; k++) dot += u[a * c->rank + k] * v[b * c->rank + k];
        out->user[i] = a;
        out->item[i] = b;
        out->rating[i] = (float)(dot + c->noise_std * rng_normal(&rn));
    }
    free(u), free(v);
    return 0;
}
