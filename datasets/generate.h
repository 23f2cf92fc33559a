#ifndef ASGD_DATASETS_GENERATE_H
#define ASGD_DATASETS_GENERATE_H
// Seeded synthetic datasets. The same config (seed included) gives the same data,
// byte for byte once written with libsvm_write / ratings_write.
#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"  // defines: sparse_dataset_t, ratings_t

// Sparse binary classification modelled on RCV1. Each example has a number of
// non-zeros drawn uniformly from [nnz/2, 3nnz/2] (mean nnz); its features are
// drawn from a Zipf popularity (P(rank r) ~ 1/(r+1)^zipf_exponent) over a seeded
// permutation of the feature ids, so popular features are spread over the id
// range; values are tf-idf-like (a small integer count times the feature's idf)
// and each row is L2-normalised. Labels are sign(w.x - median) for a hidden
// standard-normal w, so the classes are balanced, then a fraction label_noise is flipped.
typedef struct sparse_gen_config {
    size_t n_examples;
    size_t dim;
    size_t nnz_per_example;
    double zipf_exponent;
    double label_noise;
    uint64_t seed;
} sparse_gen_config_t;

void sparse_gen_config_default(sparse_gen_config_t *c);  // 200,000 x 100,000, 60 nnz, zipf 1.0, 5% noise, seed 1
int gen_sparse(const sparse_gen_config_t *c, sparse_dataset_t *out, char *err, size_t err_len);

// Low-rank ratings: hidden user and item factors with entries ~ N(0, rank^-1/2),
// so u.v has unit variance; rating = u.v + N(0, noise_std^2). (user, item) pairs
// are drawn uniformly and may repeat.
typedef struct ratings_gen_config {
    size_t n_users;
    size_t n_items;
    size_t rank;
    size_t n_ratings;
    double noise_std;
    uint64_t seed;
} ratings_gen_config_t;

void ratings_gen_config_default(ratings_gen_config_t *c);  // 2,000 x 1,000, rank 8, 200,000 ratings, noise 0.1
int gen_ratings(const ratings_gen_config_t *c, ratings_t *out, char *err, size_t err_len);

#endif
