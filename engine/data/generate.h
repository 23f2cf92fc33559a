#ifndef ASGD_ENGINE_DATA_GENERATE_H
#define ASGD_ENGINE_DATA_GENERATE_H
// Seeded synthetic datasets. The same config (seed included) gives the same data
// on any machine, byte for byte once written with libsvm_write / ratings_write:
// all randomness comes from rng.h, sampling is done in integers (but for the
// Zipf tail of very wide sets, in +, -, *, / of doubles), and the only
// floating-point functions are IEEE-exact ones (sqrt, frexp, ldexp, floor) plus
// rng_normal's log and cos (see generate.c).
//
// Every function returns 0 on success and -1 on error with one line in err
// naming the config field that is out of range; out is initialised first and
// filled only on success (the caller then frees it).
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"

// Sparse binary classification modelled on RCV1:
// - row lengths: uniform integers in [nnz - h, nnz + h] with h = min(nnz / 2,
//   dim - nnz), so the mean is exactly nnz_per_example (60 -> 30..90);
// - features: drawn without replacement from a Zipf popularity, P(rank r) ~
//   1 / (r + 1)^zipf_exponent (r = 0 most popular), over a seeded random
//   permutation of the feature ids, so popular features are spread over the id
//   range; indices within a row are sorted and distinct;
// - values: log-tf times idf, as RCV1's ltc weighting: (1 + ln tf) * ln(1 +
//   (r + 1)^zipf_exponent) with a term count tf >= 1, P(tf > t) = 2^-t; each
//   row is then L2-normalised, so all values are positive and rows have norm 1;
// - labels: a hidden weight per feature, w_j = z_j / idf_j^2 with z_j ~ N(0, 1),
//   so the label rests on the common features (as RCV1's topics rest on common
//   words) and stays learnable from a modest sample; score = w.x summed in
//   double over the row's stored float values in index order; bias = minus the
//   median score, so label = +1 iff score + bias >= 0 puts half of the examples
//   in each class (rows that tie with the median, possible only when rows
//   repeat, go to +1); then exactly round(label_noise * n) labels, chosen at
//   random, are flipped.
//
// Up to GEN_SPARSE_TABLE_MAX_DIM features the generator keeps tables over all
// of them (about 45 bytes a feature: 755 MB at 2^24). Above, it keeps none,
// so that memory and time follow n x nnz, not dim (dim 2 10^8: the data alone);
// the same promises hold, drawn another way, so those sets differ from what
// the tables would have made:
// - ranks: the 2^16 most popular (or 2 x the longest row, if more) from a
//   table; the rest by rejection-inversion (Hörmann and Derflinger 1996), with
//   the tail's total weight from its Euler-Maclaurin sum: the exact Zipf law up
//   to double rounding, where the tables round each weight to an integer;
// - the permutation: a seeded Feistel network with cycle-walking;
// - z_j: from a normal stream seeded by (seed, rank), computed when drawn.

// The most features the tables serve: the data of every dim up to it is what
// earlier versions made, byte for byte (the sets in use today are at most 10^6
// wide). At 2^24 `asgd gen sparse --n 200000` takes 8 s and 0.87 GB, a cost one
// process can still pay; past it the tables grow to 9 GB at 2 10^8, in every
// process of a launch.
#define GEN_SPARSE_TABLE_MAX_DIM ((size_t)1 << 24)

typedef struct sparse_gen_config {
    size_t n_examples;  // rows, 1 .. 2^32 - 1
    size_t dim;  // features, 1 .. 2^32 - 1
    size_t nnz_per_example;  // mean non-zeros per row, 1 .. dim
    double zipf_exponent;  // popularity skew, 0 (uniform) .. 10
    double label_noise;  // fraction of labels flipped, 0 .. 0.5
    uint64_t seed;
} sparse_gen_config_t;

// 200,000 examples x 100,000 features, 60 non-zeros, zipf 1.0, 5% noise, seed 1.
void sparse_gen_config_default(sparse_gen_config_t *c);
int gen_sparse(const sparse_gen_config_t *c, sparse_dataset_t *out, char *err, size_t err_len);
// The same, also returning the hidden model that made the labels (before the
// flips): hidden_w (dim) and *hidden_bias, either may be NULL.
// With dim above GEN_SPARSE_TABLE_MAX_DIM, filling hidden_w computes every
// feature's weight: time in dim, which generating the data itself does not take.
int gen_sparse_with_truth(const sparse_gen_config_t *c, sparse_dataset_t *out, double *hidden_w, double *hidden_bias,
                          char *err, size_t err_len);
// The ids of the k most popular features (rank 0 first) of the data gen_sparse
// makes from c: what a check of the popularity counts against. 1 <= k <= dim;
// up to GEN_SPARSE_TABLE_MAX_DIM it builds the permutation (4 bytes a feature).
int gen_sparse_popular_features(const sparse_gen_config_t *c, size_t k, uint32_t *ids, char *err, size_t err_len);

// Low-rank ratings: hidden user and item factors with entries ~ N(0, 1/sqrt(rank))
// (variance 1/sqrt(rank)), so u.v has unit variance; rating = u.v + N(0, noise_std^2).
// The (user, item) pairs are drawn uniformly WITHOUT repetition (so n_ratings
// <= n_users * n_items), in random order. Not every user or item need appear.
typedef struct ratings_gen_config {
    size_t n_users;  // 1 .. 2^32 - 1
    size_t n_items;  // 1 .. 2^32 - 1
    size_t rank;  // >= 1
    size_t n_ratings;  // 1 .. min(2^32 - 1, n_users * n_items)
    double noise_std;  // >= 0, finite
    uint64_t seed;
} ratings_gen_config_t;

// 2,000 users x 1,000 items, rank 8, 200,000 ratings, noise 0.1, seed 1.
void ratings_gen_config_default(ratings_gen_config_t *c);
int gen_ratings(const ratings_gen_config_t *c, ratings_t *out, char *err, size_t err_len);
// The same, also returning the hidden factors: user_factors (n_users, rank) and
// item_factors (n_items, rank), row-major; either may be NULL.
int gen_ratings_with_truth(const ratings_gen_config_t *c, ratings_t *out, double *user_factors, double *item_factors,
                           char *err, size_t err_len);

#endif
