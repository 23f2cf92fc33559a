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

// ---- the lean method's pieces: nothing stored per feature ----

// ln(1 + x) / x (x > -1) and (e^x - 1) / x, accurate near x = 0 where the plain
// formulas cancel: the rounding of 1 + x, or of e^x, is divided out again
// (Goldberg's and Kahan's forms). Both are 1 at x = 0.
static double log1p_over_x(double x) {
    double u = 1.0 + x;
    return u == 1.0 ? 1.0 : det_log(u) / (u - 1.0);
}

static double expm1_over_x(double x) {  // |x| < 700
    double u = det_exp(x);
    return u == 1.0 ? 1.0 : (u - 1.0) / det_log(u);
}

// A 64-bit mixer (splitmix64's step, rng.h): nearby inputs, unrelated outputs.
static uint64_t mix64(uint64_t x) { return rng_splitmix64(&x); }

// Popularity rank -> feature id with no table: a four-round Feistel network,
// keyed from the seed, permutes [0, 4^h) (h the least with 4^h >= dim), and
// cycle-walking (applying it again while the result is >= dim) makes that a
// permutation of [0, dim) (Black and Rogaway 2002). 4^h < 4 dim, so a rank
// takes fewer than four passes on average.
typedef struct rank_permutation {
    uint64_t dim;
    int half_bits;  // h: the bits of each Feistel half
    uint64_t key[4];  // one per round
} rank_permutation_t;

static void rank_permutation_init(rank_permutation_t *p, uint64_t dim, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, STREAM_PERMUTATION);
    p->dim = dim;
    for (p->half_bits = 1; (UINT64_C(1) << 2 * p->half_bits) < dim; p->half_bits++) {
    }
    for (int i = 0; i < 4; i++) p->key[i] = rng_next(&r);
}

static uint32_t rank_permutation_apply(const rank_permutation_t *p, uint64_t rank) {
    uint64_t mask = (UINT64_C(1) << p->half_bits) - 1, x = rank;
    do {
        uint64_t left = x >> p->half_bits, right = x & mask;
        for (int i = 0; i < 4; i++) {
            uint64_t next = left ^ (mix64(right ^ p->key[i]) & mask);
            left = right;
            right = next;
        }
        x = left << p->half_bits | right;
    } while (x >= p->dim);
    return (uint32_t)x;
}

// The Zipf tail: 1-based ranks k = first..last with P(k) ~ k^-s, s > 0, drawn
// by rejection-inversion (Hörmann and Derflinger 1996) with no table: invert
// the integral of the hat x^-s, round to the nearest rank k, and keep k when
// the point falls in the last k^-s of k's interval [k - 1/2, k + 1/2] (x^-s is
// convex, so the interval holds at least that much). Exact up to the rounding
// of G and its inverse, a few ulps of G against a rank's step: under 1e-6 of
// the rarest rank's probability at dim 2 10^8, zipf 1 (G ~ 8, step 5e-9),
// where the tables' integer weights round that rank's by up to 1/230 (half a
// unit of 115). With first > 2^16 the hat exceeds the steps by
// a relative s(s + 1) / (24 first^2) < 1e-8: draws are almost never redrawn.
// x is measured in units of `first` (y = x / first) so that G is small, and
// so finely resolved, near the tail's start, where its mass is.
typedef struct zipf_tail {
    double s;  // exponent, > 0
    double first, last;  // 1-based ranks (exact: below 2^32)
    double v_low, v_high;  // the values of G the draws cover
} zipf_tail_t;

// G(y) = integral of z^-s over [1, y]: (y^(1-s) - 1) / (1 - s), or ln y at s = 1.
static double zipf_G(double s, double y) {
    double l = det_log(y);
    return expm1_over_x((1.0 - s) * l) * l;
}

static double zipf_G_inverse(double s, double v) {
    double t = (1.0 - s) * v;  // 1 + t = y^(1 - s)
    return t <= -1.0 ? INFINITY : det_exp(log1p_over_x(t) * v);
}

// Rank k's share of G: (k / first)^-s / first.
static double zipf_step(const zipf_tail_t *z, double k) { return det_exp(-z->s * det_log(k / z->first)) / z->first; }

static void zipf_tail_init(zipf_tail_t *z, double s, double first, double last) {
    z->s = s;
    z->first = first;
    z->last = last;
    z->v_low = zipf_G(s, (first + 0.5) / first) - 1.0 / first;  // so rank `first` is always kept
    z->v_high = zipf_G(s, (last + 0.5) / first);
}

static uint64_t zipf_tail_draw(const zipf_tail_t *z, rng_t *r) {
    for (;;) {
        double v = z->v_high + rng_uniform(r) * (z->v_low - z->v_high);  // in (v_low, v_high]
        double k = floor(z->first * zipf_G_inverse(z->s, v) + 0.5);
        if (!(k <= z->last)) k = z->last;  // rounding at the ends (and the infinite inverse)
        if (k < z->first) k = z->first;
        if (v >= zipf_G(z->s, (k + 0.5) / z->first) - zipf_step(z, k)) return (uint64_t)k;
    }
}

// The sum of k^-s over the tail, by Euler-Maclaurin to the B6 term: with
// first > 2^16 the remainder is below 3.3e-5 s(s+1)(s+2)(s+3)(s+4) / first^5
// of the sum, under 1e-23 even at s = 10, so the result is as exact as a double.
static double zipf_tail_mass(const zipf_tail_t *z) {
    double s = z->s, a = z->first, b = z->last;
    double fb = det_exp(-s * det_log(b / a));  // f(x) = (x / a)^-s: f(a) = 1
    double c1 = s, c3 = c1 * (s + 1.0) * (s + 2.0), c5 = c3 * (s + 3.0) * (s + 4.0);  // -f^(m)(x) x^m / f(x)
    double sum = a * zipf_G(s, b / a) + 0.5 * (1.0 + fb);
    sum -= c1 / 12.0 * (fb / b - 1.0 / a);
    sum += c3 / 720.0 * (fb / (b * b * b) - 1.0 / (a * a * a));
    sum -= c5 / 30240.0 * (fb / (b * b * b * b * b) - 1.0 / (a * a * a * a * a));
    return sum * det_exp(-s * det_log(a));
}

// ---- one generator, two ways to know the features ----

// Popularity rank r (0 = most popular) weighs (r + 1)^-zipf.
static double zipf_weight(double zipf, uint64_t rank) {
    return zipf == 0.0 ? 1.0 : det_exp(-zipf * det_log((double)(rank + 1)));
}

// Draws a row's ranks without replacement. Ranks below n_head have integer
// weights, in an alias table (repeats redrawn) or a Fenwick tree (picks taken
// out for the rest of the row); the lean method's ranks from n_head to dim are
// the tail, drawn as a whole with probability tail_units / (what is left).
typedef struct popularity {
    size_t n_head, dim;
    uint64_t *weight;  // (n_head)
    uint64_t total;  // the head's weights + tail_units
    uint64_t tail_units;
    int removing;  // 1: the Fenwick tree; 0: the alias table
    alias_table_t table;
    uint8_t *taken;  // (n_head) alias: this row's picks
    fenwick_t tree;
    double zipf;
    zipf_tail_t tail;
    uint64_t *tail_picks;  // (tail_mask + 1) this row's tail ranks + 1, open addressing (0: empty)
    size_t tail_mask;
} popularity_t;

static void popularity_free(popularity_t *p) {
    free(p->weight);
    free(p->table.entry);
    free(p->taken);
    free(p->tree.tree);
    free(p->tail_picks);
}

// A tail rank for this row: 0 when the row has it already.
static int tail_take(popularity_t *p, uint64_t rank) {
    size_t j = (size_t)mix64(rank) & p->tail_mask;
    for (; p->tail_picks[j]; j = (j + 1) & p->tail_mask)
        if (p->tail_picks[j] == rank + 1) return 0;
    p->tail_picks[j] = rank + 1;
    return 1;
}

static uint64_t tail_draw(const popularity_t *p, rng_t *r) {
    if (p->zipf == 0.0) return p->n_head + rng_below(r, p->dim - p->n_head);
    return zipf_tail_draw(&p->tail, r) - 1;
}

static void popularity_draw_row(popularity_t *p, rng_t *r, size_t len, uint32_t *ranks) {
    if (!p->removing) {
        for (size_t t = 0; t < len;) {
            uint32_t rank = alias_draw(&p->table, r);
            if (p->taken[rank]) continue;
            p->taken[rank] = 1;
            ranks[t++] = rank;
        }
        for (size_t t = 0; t < len; t++) p->taken[ranks[t]] = 0;
        return;
    }
    uint64_t left = p->total;
    int tail_used = 0;
    for (size_t t = 0; t < len;) {
        uint64_t u = rng_below(r, left);
        if (u < left - p->tail_units) {
            size_t rank = fenwick_find(&p->tree, u);
            ranks[t++] = (uint32_t)rank;
            fenwick_add(&p->tree, rank, ~p->weight[rank] + 1);
            left -= p->weight[rank];
        } else {
            // A repeat is drawn again from the start: exact sampling from what is left.
            uint64_t rank = tail_draw(p, r);
            if (!tail_take(p, rank)) continue;
            tail_used = 1;
            ranks[t++] = (uint32_t)rank;
        }
    }
    for (size_t t = 0; t < len; t++)
        if (ranks[t] < p->n_head) fenwick_add(&p->tree, ranks[t], p->weight[ranks[t]]);
    if (tail_used) memset(p->tail_picks, 0, (p->tail_mask + 1) * sizeof *p->tail_picks);
}

// What a row needs of the feature at each rank: its id, idf and hidden weight.
// Ranks below n_tabled are looked up (every rank in the tables, the head in
// the lean method); the lean method computes the others when drawn.
typedef struct rank_features {
    size_t n_tabled;
    uint32_t *id;  // (n_tabled)
    double *idf;  // (n_tabled)
    double *hidden;  // (n_tabled) the hidden weight of the feature at that rank
    double zipf;
    uint64_t seed;
    rank_permutation_t perm;
} rank_features_t;

static void rank_features_free(rank_features_t *f) {
    free(f->id);
    free(f->idf);
    free(f->hidden);
}

// The lean method's rule: the idf of the tables, the id from the Feistel
// permutation, and z ~ N(0, 1) from a stream seeded by (seed, rank).
static void rank_features_compute(const rank_features_t *f, uint64_t rank, uint32_t *id, double *idf, double *hidden) {
    *idf = det_log(1.0 + 1.0 / zipf_weight(f->zipf, rank));
    rng_t r;
    rng_seed(&r, f->seed ^ mix64(rank), STREAM_WEIGHTS);
    *hidden = rng_normal(&r) / (*idf * *idf);
    *id = rank_permutation_apply(&f->perm, rank);
}

static void rank_features_get(const rank_features_t *f, uint64_t rank, uint32_t *id, double *idf, double *hidden) {
    if (rank < f->n_tabled) {
        *id = f->id[rank];
        *idf = f->idf[rank];
        *hidden = f->hidden[rank];
    } else {
        rank_features_compute(f, rank, id, idf, hidden);
    }
}

// The seeded permutation of the tables: rank -> feature id, over all of dim.
static int shuffled_ids(const sparse_gen_config_t *c, uint32_t **ids) {
    *ids = malloc(c->dim * sizeof **ids);
    if (!*ids) return -1;
    for (size_t j = 0; j < c->dim; j++) (*ids)[j] = (uint32_t)j;
    rng_t r;
    rng_seed(&r, c->seed, STREAM_PERMUTATION);
    rng_shuffle_u32(&r, *ids, c->dim);
    return 0;
}

// The tables: a weight, idf, id and hidden weight for every feature (about 45
// bytes each, with the sampler), the method of every dim up to
// GEN_SPARSE_TABLE_MAX_DIM.
static int build_tables(const sparse_gen_config_t *c, size_t longest, popularity_t *pop, rank_features_t *f) {
    size_t dim = c->dim;
    pop->n_head = pop->dim = f->n_tabled = dim;
    pop->weight = malloc(dim * sizeof *pop->weight);
    f->idf = malloc(dim * sizeof *f->idf);
    f->hidden = malloc(dim * sizeof *f->hidden);
    double *by_id = malloc(dim * sizeof *by_id);
    if (!pop->weight || !f->idf || !f->hidden || !by_id || shuffled_ids(c, &f->id) != 0) {
        free(by_id);
        return -1;
    }
    // Popularity weights, as integers scaled so that their sum stays below 2^63
    // (and weight * dim below 2^63 for the alias table); every weight is at
    // least 1 so that any row length up to dim can be drawn.
    double unit = (double)((UINT64_C(1) << 62) / dim);
    uint64_t top = 0;
    for (size_t r = 0; r < dim; r++) {
        double p = zipf_weight(c->zipf_exponent, r);
        uint64_t w = (uint64_t)(unit * p + 0.5);
        pop->weight[r] = w ? w : 1;
        pop->total += pop->weight[r];
        if (r < longest) top += pop->weight[r];
        // Rarer features weigh more, as inverse document frequency does: ln(1 + w_0 / w_r).
        f->idf[r] = det_log(1.0 + 1.0 / p);
    }
    // Drawing with replacement and redrawing repeats is exact sampling without
    // replacement. While a row's earlier picks hold at most half of the weight,
    // each draw is new with probability >= 1/2, so a row costs at most 2x its
    // length in expectation. When the most popular `longest` ranks hold more
    // than half, repeats could take very long (zipf 3: the tail beyond rank 60
    // holds 1e-4 of the weight), so the Fenwick tree removes each pick instead.
    pop->removing = top > pop->total / 2;
    int built = pop->removing ? fenwick_build(&pop->tree, pop->weight, dim)
                              : alias_build(&pop->table, pop->weight, dim, pop->total);
    if (!pop->removing && built == 0) {
        pop->taken = calloc(dim, 1);
        if (!pop->taken) built = -1;
    }
    if (built != 0) {
        free(by_id);
        return -1;
    }
    // rng_normal (rng.h) uses libm's log and cos. glibc's are correctly rounded in
    // practice; another libc could differ in a last bit, which would move a score
    // by ~1e-16 and so change a label only at an exact tie with the median.
    rng_t r_w;
    rng_seed(&r_w, c->seed, STREAM_WEIGHTS);
    for (size_t j = 0; j < dim; j++) by_id[j] = rng_normal(&r_w);
    // A feature's weight shrinks as idf^2 while its values grow as idf, so the label
    // rests on the common features, as RCV1's topics rest on common words. With
    // plain N(0, 1) weights the rare features (large values, seen a handful of
    // times) would decide most labels: logistic regression on 24,000 examples of
    // 20,000 features reached 73% test accuracy instead of 83% (Bayes: 95%).
    // Looked up by rank, popular features share cache lines (by id they are scattered).
    for (size_t r = 0; r < dim; r++) f->hidden[r] = by_id[f->id[r]] / (f->idf[r] * f->idf[r]);
    free(by_id);
    return 0;
}

// The lean method's table: the popular ranks, where most draws land, cost a
// lookup; starting the tail past 2^16 keeps its Euler-Maclaurin sum exact, and
// the table (36 bytes a rank, 2.4 MB) within a cache.
enum { LEAN_HEAD = 1 << 16 };

// The lean method: tables for the head only (the LEAN_HEAD most popular ranks,
// or 2 longest if more, so that a row's tail picks hold at most about half of
// what is left and a repeat costs at most two draws on average); the tail's
// weight from its Euler-Maclaurin sum, its draws by rejection-inversion, and
// its features computed when drawn.
static int build_lean(const sparse_gen_config_t *c, size_t longest, popularity_t *pop, rank_features_t *f) {
    size_t dim = c->dim, head = LEAN_HEAD > 2 * longest ? LEAN_HEAD : 2 * longest;
    if (head > dim) head = dim;
    pop->n_head = f->n_tabled = head;
    pop->dim = dim;
    pop->zipf = f->zipf = c->zipf_exponent;
    f->seed = c->seed;
    rank_permutation_init(&f->perm, dim, c->seed);
    pop->weight = malloc(head * sizeof *pop->weight);
    f->id = malloc(head * sizeof *f->id);
    f->idf = malloc(head * sizeof *f->idf);
    f->hidden = malloc(head * sizeof *f->hidden);
    size_t slots = 16;
    while (slots < 2 * longest) slots *= 2;
    pop->tail_mask = slots - 1;
    pop->tail_picks = calloc(slots, sizeof *pop->tail_picks);
    if (!pop->weight || !f->id || !f->idf || !f->hidden || !pop->tail_picks) return -1;
    for (size_t r = 0; r < head; r++) rank_features_compute(f, r, &f->id[r], &f->idf[r], &f->hidden[r]);

    double head_mass = 0.0, tail_mass = 0.0;
    for (size_t r = 0; r < head; r++) head_mass += zipf_weight(c->zipf_exponent, r);
    if (head < dim) {
        if (c->zipf_exponent == 0.0) {
            tail_mass = (double)(dim - head);
        } else {
            zipf_tail_init(&pop->tail, c->zipf_exponent, (double)head + 1.0, (double)dim);
            tail_mass = zipf_tail_mass(&pop->tail);
        }
    }
    // Integer weights as in the tables, summing to about 2^61.
    double unit = 0x1.0p61 / (head_mass + tail_mass);
    for (size_t r = 0; r < head; r++) {
        uint64_t w = (uint64_t)(unit * zipf_weight(c->zipf_exponent, r) + 0.5);
        pop->weight[r] = w ? w : 1;
        pop->total += pop->weight[r];
    }
    pop->tail_units = (uint64_t)(unit * tail_mass + 0.5);
    pop->total += pop->tail_units;
    pop->removing = 1;
    return fenwick_build(&pop->tree, pop->weight, head);
}

// The rows, drawn: d's indices and values, and each row's hidden score.
static int draw_rows(const sparse_gen_config_t *c, const uint32_t *length, size_t longest, popularity_t *pop,
                     const rank_features_t *f, sparse_dataset_t *d, double *score) {
    uint32_t *ranks = malloc(longest * sizeof *ranks), *id = malloc(longest * sizeof *id);
    double *value = malloc(longest * sizeof *value), *hidden = malloc(longest * sizeof *hidden);
    float *row_val = malloc(longest * sizeof *row_val);
    uint64_t *keys = malloc(longest * sizeof *keys);
    int rc = ranks && id && value && hidden && row_val && keys ? 0 : -1;
    double log_tf[66];
    for (int t = 1; t <= 65; t++) log_tf[t] = 1.0 + det_log((double)t);
    rng_t r_feat, r_count;
    rng_seed(&r_feat, c->seed, STREAM_FEATURES);
    rng_seed(&r_count, c->seed, STREAM_COUNTS);
    size_t at = 0;
    for (size_t i = 0; i < d->n && rc == 0; i++) {
        size_t len = length[i];
        popularity_draw_row(pop, &r_feat, len, ranks);
        double norm2 = 0.0;
        for (size_t t = 0; t < len; t++) {
            double idf;
            rank_features_get(f, ranks[t], &id[t], &idf, &hidden[t]);
            int tf = 1 + trailing_ones(rng_next(&r_count));  // P(tf > j) = 2^-j
            value[t] = log_tf[tf] * idf;
            norm2 += value[t] * value[t];
        }
        // Sort by feature id, carrying the draw number t in the low bits.
        double inv = 1.0 / sqrt(norm2);
        for (size_t t = 0; t < len; t++) {
            row_val[t] = (float)(value[t] * inv);
            keys[t] = (uint64_t)id[t] << 32 | t;
        }
        sort_u64(keys, len);
        double dot = 0.0;
        for (size_t t = 0; t < len; t++) {
            size_t drawn = (uint32_t)keys[t];
            d->col[at + t] = (uint32_t)(keys[t] >> 32);
            d->val[at + t] = row_val[drawn];
            dot += hidden[drawn] * (double)row_val[drawn];  // = w[col] * val, in index order
        }
        score[i] = dot;
        at += len;
        d->row_ptr[i + 1] = at;
    }
    free(ranks);
    free(id);
    free(value);
    free(hidden);
    free(row_val);
    free(keys);
    return rc;
}

// Labels from the scores: centred at the median, then exactly round(noise * n) flipped.
static int label_rows(const sparse_gen_config_t *c, const double *score, sparse_dataset_t *d, double *bias_out) {
    size_t n = d->n;
    // Half the examples on each side (the upper median for even n). score +
    // bias >= 0 is exactly score >= median in IEEE.
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted) return -1;
    memcpy(sorted, score, n * sizeof *score);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    double bias = -sorted[n / 2];
    free(sorted);
    // A uniform random subset (selection sampling).
    rng_t r_flip;
    rng_seed(&r_flip, c->seed, STREAM_FLIPS);
    size_t flips = (size_t)(c->label_noise * (double)n + 0.5);
    for (size_t i = 0; i < n; i++) {
        float y = score[i] + bias >= 0.0 ? 1.0f : -1.0f;
        if (flips && rng_below(&r_flip, n - i) < flips) {
            y = -y;
            flips--;
        }
        d->y[i] = y;
    }
    *bias_out = bias;
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
    popularity_t pop = {0};
    rank_features_t features = {0};
    double *score = malloc(n * sizeof *score), bias = 0.0;
    int lean = dim > GEN_SPARSE_TABLE_MAX_DIM, rc = -1;
    if (!score || (lean ? build_lean(c, longest, &pop, &features) : build_tables(c, longest, &pop, &features)) != 0) {
        snprintf(err, err_len, "gen_sparse: out of memory for the tables of %zu features", lean ? pop.n_head : dim);
    } else if (draw_rows(c, length, longest, &pop, &features, &d, score) != 0 || label_rows(c, score, &d, &bias) != 0) {
        snprintf(err, err_len, "gen_sparse: out of memory for %zu rows of up to %zu non-zeros", n, longest);
    } else {
        if (hidden_w) {
            for (size_t r = 0; r < dim; r++) {
                uint32_t id;
                double idf, w;
                rank_features_get(&features, r, &id, &idf, &w);
                hidden_w[id] = w;
            }
        }
        if (hidden_bias) *hidden_bias = bias;
        *out = d;
        sparse_dataset_init(&d);
        rc = 0;
    }
    sparse_dataset_free(&d);
    popularity_free(&pop);
    rank_features_free(&features);
    free(length);
    free(score);
    return rc;
}

int gen_sparse_popular_features(const sparse_gen_config_t *c, size_t k, uint32_t *ids, char *err, size_t err_len) {
    if (check_sparse_config(c, err, err_len) != 0) return -1;
    if (k == 0 || k > c->dim) {
        snprintf(err, err_len, "gen_sparse: asked for the %zu most popular features; expected 1..dim (%zu)", k, c->dim);
        return -1;
    }
    if (c->dim > GEN_SPARSE_TABLE_MAX_DIM) {
        rank_permutation_t perm;
        rank_permutation_init(&perm, c->dim, c->seed);
        for (size_t r = 0; r < k; r++) ids[r] = rank_permutation_apply(&perm, r);
        return 0;
    }
    uint32_t *all;
    if (shuffled_ids(c, &all) != 0) {
        snprintf(err, err_len, "gen_sparse: out of memory for the ids of %zu features", c->dim);
        return -1;
    }
    memcpy(ids, all, k * sizeof *ids);
    free(all);
    return 0;
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
        size_t j = mix64(p) & (cap - 1);
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
