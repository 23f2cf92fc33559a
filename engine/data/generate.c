#include "engine/data/generate.h"

#include <errno.h>
#include <math.h>  // sqrt, frexp, ldexp, floor: exact or correctly rounded by IEEE 754, so the same everywhere
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/rng.h"

// One rng stream per purpose, so that one kind of draw never shifts another.
enum {
    STREAM_LENGTHS = 1,
    STREAM_PERMUTATION,
    STREAM_FEATURES,
    STREAM_COUNTS,
    STREAM_WEIGHTS,
    STREAM_FLIPS,
    STREAM_USERS,
    STREAM_ITEMS,
    STREAM_PAIRS,
    STREAM_NOISE,
};

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

// ---- deterministic log and exp ----
// libm's log/exp/pow are accurate but not required to be correctly rounded, so
// two libcs may differ in the last bit, and a last bit that moves an alias-table
// threshold would change every row after it. These use only +, -, *, / and the
// exact frexp/ldexp/floor, so they give the same bits on every IEEE machine
// (with the C11 mode's -ffp-contract=off: no fused multiply-adds). About 1e-16
// relative accuracy, far more than a generator needs.

static double det_log(double x) {  // x > 0, finite
    int e;
    double m = frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    // ln m = 2 atanh(t) = 2 (t + t^3/3 + t^5/5 + ...) with |t| <= 0.1716, t^2 <= 0.0295:
    // 14 terms leave less than 1e-21.
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, sum = 0.0;
    for (int k = 27; k >= 1; k -= 2) sum = sum * t2 + 1.0 / k;
    return 2.0 * t * sum + e * 0.69314718055994530942;
}

static double det_exp(double x) {  // |x| < 700
    double k = floor(x * 1.44269504088896340736 + 0.5);
    double r = x - k * 0.69314718055994530942;  // |r| <= 0.35: 20 Taylor terms leave < 1e-27
    double sum = 1.0;
    for (int j = 20; j >= 1; j--) sum = 1.0 + sum * r / j;
    return ldexp(sum, (int)k);
}

// ---- drawing feature ranks from integer weights ----
// Weights are integers so that sampling is exact integer arithmetic: no
// rounding can differ between machines, and removing and restoring a weight
// (the Fenwick path) leaves the tree bit-identical.

// Walker/Vose alias table: O(1) draws with replacement. Built exactly in
// integers, then each bucket's split point is stored as a 32-bit fraction (a
// relative error below 2^-32 per bucket) so that a bucket is one 8-byte load:
// draws are bound by cache misses on this table.
typedef struct alias_entry {
    uint32_t threshold;  // draws below it (out of 2^32) mean the bucket itself
    uint32_t alias;  // the rest mean this index
} alias_entry_t;

typedef struct alias_table {
    size_t n;
    alias_entry_t *entry;  // (n)
} alias_table_t;

static int alias_build(alias_table_t *t, const uint64_t *weight, size_t n, uint64_t total) {
    t->n = n;
    t->entry = malloc(n * sizeof *t->entry);
    uint64_t *units = malloc(n * sizeof *units);  // each bucket holds `total` units
    uint32_t *small = malloc(n * sizeof *small), *large = malloc(n * sizeof *large);
    if (!t->entry || !units || !small || !large) {
        free(units);
        free(small);
        free(large);
        return -1;
    }
    size_t ns = 0, nl = 0;
    for (size_t i = 0; i < n; i++) {
        units[i] = weight[i] * n;  // <= 2^62 + 2^41 by the choice of weights
        t->entry[i].alias = (uint32_t)i;
        if (units[i] < total)
            small[ns++] = (uint32_t)i;
        else
            large[nl++] = (uint32_t)i;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[nl - 1];
        t->entry[s].alias = l;
        units[l] -= total - units[s];
        if (units[l] < total) {
            nl--;
            small[ns++] = l;
        }
    }
    // Whatever is left is full (exactly, in integers): it always means itself.
    while (nl) units[large[--nl]] = total;
    while (ns) units[small[--ns]] = total;
    for (size_t i = 0; i < n; i++) {
        // A full bucket never takes its alias (which is itself anyway).
        __uint128_t scaled = ((__uint128_t)units[i] << 32) / total;
        t->entry[i].threshold = scaled > UINT32_MAX ? UINT32_MAX : (uint32_t)scaled;
        if (units[i] == total) t->entry[i].alias = (uint32_t)i;
    }
    free(units);
    free(small);
    free(large);
    return 0;
}

static uint32_t alias_draw(const alias_table_t *t, rng_t *r) {
    uint64_t i = rng_below(r, t->n);
    alias_entry_t e = t->entry[i];
    return (uint32_t)(rng_next(r) >> 32) < e.threshold ? (uint32_t)i : e.alias;
}

// Fenwick tree over the weights: O(log n) draws, and a drawn rank can be taken
// out (weight 0) for the rest of a row. Used when a row's draws would collide
// often (see gen_sparse_with_truth).
typedef struct fenwick {
    size_t n;
    uint64_t *tree;  // (n + 1), 1-based
    size_t top_bit;  // the largest power of two <= n
} fenwick_t;

static int fenwick_build(fenwick_t *f, const uint64_t *weight, size_t n) {
    f->n = n;
    f->tree = malloc((n + 1) * sizeof *f->tree);
    if (!f->tree) return -1;
    f->tree[0] = 0;
    for (size_t i = 1; i <= n; i++) f->tree[i] = weight[i - 1];
    for (size_t i = 1; i <= n; i++) {
        size_t j = i + (i & (~i + 1));
        if (j <= n) f->tree[j] += f->tree[i];
    }
    for (f->top_bit = 1; f->top_bit <= n / 2; f->top_bit *= 2) {
    }
    return 0;
}

// Adds delta (mod 2^64, so "minus w" is exact) to the weight of index i.
static void fenwick_add(fenwick_t *f, size_t i, uint64_t delta) {
    for (i++; i <= f->n; i += i & (~i + 1)) f->tree[i] += delta;
}

// The index whose cumulative range [prefix(i), prefix(i + 1)) holds unit u.
static size_t fenwick_find(const fenwick_t *f, uint64_t u) {
    size_t pos = 0;
    for (size_t step = f->top_bit; step; step >>= 1) {
        if (pos + step <= f->n && f->tree[pos + step] <= u) {
            pos += step;
            u -= f->tree[pos];
        }
    }
    return pos;
}

// The number of consecutive 1 bits from the lowest: 0..64.
static int trailing_ones(uint64_t x) {
#if defined(__GNUC__)
    return ~x ? __builtin_ctzll(~x) : 64;
#else
    int n = 0;
    for (; x & 1; x >>= 1) n++;
    return n;
#endif
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void sort_u64(uint64_t *a, size_t n) {
    if (n > 96) {
        qsort(a, n, sizeof *a, cmp_u64);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

static int check_sparse_config(const sparse_gen_config_t *c, char *err, size_t err_len) {
    if (c->n_examples == 0 || c->n_examples > UINT32_MAX) {
        snprintf(err, err_len, "gen_sparse: n_examples is %zu; expected 1..%u", c->n_examples, UINT32_MAX);
        return -1;
    }
    if (c->dim == 0 || c->dim > UINT32_MAX) {
        snprintf(err, err_len, "gen_sparse: dim is %zu; expected 1..%u", c->dim, UINT32_MAX);
        return -1;
    }
    if (c->nnz_per_example == 0 || c->nnz_per_example > c->dim) {
        snprintf(err, err_len, "gen_sparse: nnz_per_example is %zu; expected 1..dim (%zu)", c->nnz_per_example, c->dim);
        return -1;
    }
    if (!(c->zipf_exponent >= 0.0 && c->zipf_exponent <= 10.0)) {
        snprintf(err, err_len, "gen_sparse: zipf_exponent is %g; expected 0..10", c->zipf_exponent);
        return -1;
    }
    if (!(c->label_noise >= 0.0 && c->label_noise <= 0.5)) {
        snprintf(err, err_len, "gen_sparse: label_noise is %g; expected a fraction in [0, 0.5]", c->label_noise);
        return -1;
    }
    return 0;
}

int gen_sparse(const sparse_gen_config_t *c, sparse_dataset_t *out, char *err, size_t err_len) {
    return gen_sparse_with_truth(c, out, NULL, NULL, err, err_len);
}

int gen_sparse_with_truth(const sparse_gen_config_t *c, sparse_dataset_t *out, double *hidden_w, double *hidden_bias,
                          char *err, size_t err_len) {
    sparse_dataset_init(out);
    if (check_sparse_config(c, err, err_len) != 0) return -1;
    size_t n = c->n_examples, dim = c->dim, k = c->nnz_per_example;
    size_t half = k / 2 < dim - k ? k / 2 : dim - k, shortest = k - half, longest = k + half;

    // Row lengths first (their own stream), so the arrays are allocated exactly.
    sparse_dataset_t d;
    size_t total_nnz = 0;
    uint32_t *length = malloc(n * sizeof *length);
    if (!length) {
        snprintf(err, err_len, "gen_sparse: out of memory for %zu row lengths", n);
        return -1;
    }
    rng_t r_len;
    rng_seed(&r_len, c->seed, STREAM_LENGTHS);
    for (size_t i = 0; i < n; i++) {
        length[i] = (uint32_t)(shortest + rng_below(&r_len, 2 * half + 1));
        total_nnz += length[i];  // <= 2^32 * 1.5 * 2^32: no overflow in 64 bits
    }
    if (sparse_dataset_alloc(&d, n, dim, total_nnz, err, err_len) != 0) {
        free(length);
        return -1;
    }

    uint64_t *weight = malloc(dim * sizeof *weight);
    double *idf = malloc(dim * sizeof *idf), *hidden = malloc(dim * sizeof *hidden), *score = malloc(n * sizeof *score);
    double *hidden_by_rank = malloc(dim * sizeof *hidden_by_rank);
    uint32_t *perm = malloc(dim * sizeof *perm), *ranks = malloc(longest * sizeof *ranks);
    double *value = malloc(longest * sizeof *value);
    float *row_val = malloc(longest * sizeof *row_val);
    uint64_t *keys = malloc(longest * sizeof *keys);
    uint8_t *taken = calloc(dim, 1);
    alias_table_t table = {0, NULL};
    fenwick_t tree = {0, NULL, 0};
    int rc = -1;
    if (!weight || !idf || !hidden || !score || !hidden_by_rank || !perm || !ranks || !value || !row_val || !keys ||
        !taken) {
        snprintf(err, err_len, "gen_sparse: out of memory for %zu features", dim);
        goto done;
    }

    // Popularity weights, as integers scaled so that their sum stays below 2^63
    // (and weight * dim below 2^63 for the alias table); every weight is at
    // least 1 so that any row length up to dim can be drawn.
    double unit = (double)((UINT64_C(1) << 62) / dim);
    uint64_t total = 0, top = 0;
    for (size_t r = 0; r < dim; r++) {
        double p = c->zipf_exponent == 0.0 ? 1.0 : det_exp(-c->zipf_exponent * det_log((double)(r + 1)));
        uint64_t w = (uint64_t)(unit * p + 0.5);
        weight[r] = w ? w : 1;
        total += weight[r];
        if (r < longest) top += weight[r];
        // Rarer features weigh more, as inverse document frequency does: ln(1 + w_0 / w_r).
        idf[r] = det_log(1.0 + 1.0 / p);
    }
    // Drawing with replacement and redrawing repeats is exact sampling without
    // replacement. While a row's earlier picks hold at most half of the weight,
    // each draw is new with probability >= 1/2, so a row costs at most 2x its
    // length in expectation. When the most popular `longest` ranks hold more
    // than half, repeats could take very long (zipf 3: the tail beyond rank 60
    // holds 1e-4 of the weight), so the Fenwick tree removes each pick instead.
    int heavy = top > total / 2;
    if ((heavy ? fenwick_build(&tree, weight, dim) : alias_build(&table, weight, dim, total)) != 0) {
        snprintf(err, err_len, "gen_sparse: out of memory for the sampling table of %zu features", dim);
        goto done;
    }
    double log_tf[66];
    for (int t = 1; t <= 65; t++) log_tf[t] = 1.0 + det_log((double)t);

    rng_t r_perm, r_feat, r_count, r_w, r_flip;
    rng_seed(&r_perm, c->seed, STREAM_PERMUTATION);
    rng_seed(&r_feat, c->seed, STREAM_FEATURES);
    rng_seed(&r_count, c->seed, STREAM_COUNTS);
    rng_seed(&r_w, c->seed, STREAM_WEIGHTS);
    rng_seed(&r_flip, c->seed, STREAM_FLIPS);
    for (size_t j = 0; j < dim; j++) perm[j] = (uint32_t)j;
    rng_shuffle_u32(&r_perm, perm, dim);  // popularity rank -> feature id
    // rng_normal (rng.h) uses libm's log and cos. glibc's are correctly rounded in
    // practice; another libc could differ in a last bit, which would move a score
    // by ~1e-16 and so change a label only at an exact tie with the median.
    for (size_t j = 0; j < dim; j++) hidden[j] = rng_normal(&r_w);
    // A feature's weight shrinks as idf^2 while its values grow as idf, so the label
    // rests on the common features, as RCV1's topics rest on common words. With
    // plain N(0, 1) weights the rare features (large values, seen a handful of
    // times) would decide most labels: logistic regression on 24,000 examples of
    // 20,000 features reached 73% test accuracy instead of 83% (Bayes: 95%).
    for (size_t r = 0; r < dim; r++) {
        hidden[perm[r]] /= idf[r] * idf[r];
        // Looked up by rank, popular features share cache lines (by id they are scattered).
        hidden_by_rank[r] = hidden[perm[r]];
    }

    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = length[i];
        if (heavy) {
            uint64_t left = total;
            for (size_t t = 0; t < len; t++) {
                size_t rank = fenwick_find(&tree, rng_below(&r_feat, left));
                ranks[t] = (uint32_t)rank;
                fenwick_add(&tree, rank, ~weight[rank] + 1);
                left -= weight[rank];
            }
            for (size_t t = 0; t < len; t++) fenwick_add(&tree, ranks[t], weight[ranks[t]]);
        } else {
            for (size_t t = 0; t < len;) {
                uint32_t rank = alias_draw(&table, &r_feat);
                if (taken[rank]) continue;
                taken[rank] = 1;
                ranks[t++] = rank;
            }
            for (size_t t = 0; t < len; t++) taken[ranks[t]] = 0;
        }
        double norm2 = 0.0;
        for (size_t t = 0; t < len; t++) {
            int tf = 1 + trailing_ones(rng_next(&r_count));  // P(tf > j) = 2^-j
            value[t] = log_tf[tf] * idf[ranks[t]];
            norm2 += value[t] * value[t];
        }
        // Sort by feature id, carrying the draw number t in the low bits.
        double inv = 1.0 / sqrt(norm2);
        for (size_t t = 0; t < len; t++) {
            row_val[t] = (float)(value[t] * inv);
            keys[t] = (uint64_t)perm[ranks[t]] << 32 | t;
        }
        sort_u64(keys, len);
        double dot = 0.0;
        for (size_t t = 0; t < len; t++) {
            size_t drawn = (uint32_t)keys[t];
            d.col[at + t] = (uint32_t)(keys[t] >> 32);
            d.val[at + t] = row_val[drawn];
            dot += hidden_by_rank[ranks[drawn]] * (double)row_val[drawn];  // = hidden[col] * val, in index order
        }
        score[i] = dot;
        at += len;
        d.row_ptr[i + 1] = at;
    }

    // Centre at the median score: half the examples on each side (the upper
    // median for even n). score + bias >= 0 is exactly score >= median in IEEE.
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted) {
        snprintf(err, err_len, "gen_sparse: out of memory sorting %zu scores", n);
        goto done;
    }
    memcpy(sorted, score, n * sizeof *score);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    double bias = -sorted[n / 2];
    free(sorted);
    // Flip exactly round(noise * n) labels, a uniform random subset (selection sampling).
    size_t flips = (size_t)(c->label_noise * (double)n + 0.5);
    for (size_t i = 0; i < n; i++) {
        float y = score[i] + bias >= 0.0 ? 1.0f : -1.0f;
        if (flips && rng_below(&r_flip, n - i) < flips) {
            y = -y;
            flips--;
        }
        d.y[i] = y;
    }
    if (hidden_w) memcpy(hidden_w, hidden, dim * sizeof *hidden);
    if (hidden_bias) *hidden_bias = bias;
    *out = d;
    sparse_dataset_init(&d);
    rc = 0;
done:
    sparse_dataset_free(&d);
    free(table.entry);
    free(tree.tree);
    free(length);
    free(weight);
    free(idf);
    free(hidden);
    free(hidden_by_rank);
    free(score);
    free(perm);
    free(ranks);
    free(value);
    free(row_val);
    free(keys);
    free(taken);
    return rc;
}

// ---- ratings ----

static int check_ratings_config(const ratings_gen_config_t *c, char *err, size_t err_len) {
    if (c->n_users == 0 || c->n_users > UINT32_MAX) {
        snprintf(err, err_len, "gen_ratings: n_users is %zu; expected 1..%u", c->n_users, UINT32_MAX);
        return -1;
    }
    if (c->n_items == 0 || c->n_items > UINT32_MAX) {
        snprintf(err, err_len, "gen_ratings: n_items is %zu; expected 1..%u", c->n_items, UINT32_MAX);
        return -1;
    }
    if (c->rank == 0 || c->rank > SIZE_MAX / sizeof(double) / c->n_users ||
        c->rank > SIZE_MAX / sizeof(double) / c->n_items) {
        snprintf(err, err_len, "gen_ratings: rank is %zu; expected >= 1 (and factor matrices that fit in memory)",
                 c->rank);
        return -1;
    }
    uint64_t pairs = (uint64_t)c->n_users * (uint64_t)c->n_items;  // < 2^64: both are < 2^32
    if (c->n_ratings == 0 || c->n_ratings > UINT32_MAX || c->n_ratings > pairs) {
        snprintf(err, err_len,
                 "gen_ratings: n_ratings is %zu; expected 1..%llu (distinct pairs: at most n_users * n_items, and at "
                 "most %u)",
                 c->n_ratings, (unsigned long long)(pairs < UINT32_MAX ? pairs : UINT32_MAX), UINT32_MAX);
        return -1;
    }
    if (!(c->noise_std >= 0.0 && isfinite(c->noise_std))) {
        snprintf(err, err_len, "gen_ratings: noise_std is %g; expected a finite standard deviation >= 0", c->noise_std);
        return -1;
    }
    return 0;
}

static uint64_t hash_pair(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

// n distinct pair numbers in [0, pairs), in random order.
static int draw_pairs(uint64_t pairs, size_t n, rng_t *r, uint64_t *out) {
    if (n > pairs / 2) {
        // Dense: selection sampling over all pairs (pairs < 2n, so O(n)), then a shuffle.
        size_t got = 0;
        for (uint64_t p = 0; p < pairs && got < n; p++)
            if (rng_below(r, pairs - p) < n - got) out[got++] = p;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)rng_below(r, i);
            uint64_t t = out[i - 1];
            out[i - 1] = out[j];
            out[j] = t;
        }
        return 0;
    }
    // Sparse: redraw repeats; fewer than half the pairs are ever taken, so each
    // draw is new with probability > 1/2. The set stores pair + 1 (0 = empty).
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint64_t *set = calloc(cap, sizeof *set);
    if (!set) return -1;
    for (size_t got = 0; got < n;) {
        uint64_t p = rng_below(r, pairs);
        size_t j = hash_pair(p) & (cap - 1);
        while (set[j] && set[j] != p + 1) j = (j + 1) & (cap - 1);
        if (set[j]) continue;
        set[j] = p + 1;
        out[got++] = p;
    }
    free(set);
    return 0;
}

int gen_ratings(const ratings_gen_config_t *c, ratings_t *out, char *err, size_t err_len) {
    return gen_ratings_with_truth(c, out, NULL, NULL, err, err_len);
}

int gen_ratings_with_truth(const ratings_gen_config_t *c, ratings_t *out, double *user_factors, double *item_factors,
                           char *err, size_t err_len) {
    ratings_init(out);
    if (check_ratings_config(c, err, err_len) != 0) return -1;
    size_t rank = c->rank, n = c->n_ratings;
    double *u = malloc(c->n_users * rank * sizeof *u), *v = malloc(c->n_items * rank * sizeof *v);
    uint64_t *pairs = malloc(n * sizeof *pairs);
    ratings_t r;
    ratings_init(&r);
    int rc = -1;
    if (!u || !v || !pairs) {
        snprintf(err, err_len, "gen_ratings: out of memory for factors of rank %zu and %zu ratings", rank, n);
        goto done;
    }
    if (ratings_alloc(&r, n, c->n_users, c->n_items, err, err_len) != 0) goto done;
    rng_t r_u, r_v, r_pairs, r_noise;
    rng_seed(&r_u, c->seed, STREAM_USERS);
    rng_seed(&r_v, c->seed, STREAM_ITEMS);
    rng_seed(&r_pairs, c->seed, STREAM_PAIRS);
    rng_seed(&r_noise, c->seed, STREAM_NOISE);
    // Variance 1/sqrt(rank) per entry: u.v, a sum of rank products, has variance 1.
    // rng_normal uses libm's log and cos (see gen_sparse_with_truth): a last-bit
    // difference in another libc would change a float rating about once in 2^29.
    double std = 1.0 / sqrt(sqrt((double)rank));
    for (size_t i = 0; i < c->n_users * rank; i++) u[i] = std * rng_normal(&r_u);
    for (size_t i = 0; i < c->n_items * rank; i++) v[i] = std * rng_normal(&r_v);
    if (draw_pairs((uint64_t)c->n_users * c->n_items, n, &r_pairs, pairs) != 0) {
        snprintf(err, err_len, "gen_ratings: out of memory for the set of %zu drawn pairs", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t user = (size_t)(pairs[i] / c->n_items), item = (size_t)(pairs[i] % c->n_items);
        double dot = 0.0;
        for (size_t f = 0; f < rank; f++) dot += u[user * rank + f] * v[item * rank + f];
        r.user[i] = (uint32_t)user;
        r.item[i] = (uint32_t)item;
        r.rating[i] = (float)(dot + c->noise_std * rng_normal(&r_noise));
    }
    if (user_factors) memcpy(user_factors, u, c->n_users * rank * sizeof *u);
    if (item_factors) memcpy(item_factors, v, c->n_items * rank * sizeof *v);
    *out = r;
    ratings_init(&r);
    rc = 0;
done:
    ratings_free(&r);
    free(u);
    free(v);
    free(pairs);
    return rc;
}
