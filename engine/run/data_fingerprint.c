// Data sets' fingerprints (data_fingerprint.h).
#include "engine/run/data_fingerprint.h"

#include <string.h>

// One step of a 64-bit hash: the word mixed in with splitmix64's finaliser.
static uint64_t mix(uint64_t h, uint64_t word) {
    uint64_t z = h ^ (word + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t sparse_fingerprint(const sparse_dataset_t *d) {
    uint64_t sum = 0;
    for (size_t i = 0; i < d->n; i++) {
        // The label itself (a class's label, or the binary view of a set without classes).
        int64_t label = d->cls ? d->labels[d->cls[i]] : d->y[i] > 0.0f;
        uint64_t h = mix(0x5350415253450000ull, (uint64_t)label);
        for (size_t k = d->row_ptr[i]; k < d->row_ptr[i + 1]; k++)
            h = mix(h, ((uint64_t)d->col[k] << 32) | float_bits(d->val[k]));
        sum += h;
    }
    return sum;
}

static uint64_t dense_fingerprint(const dense_dataset_t *d) {
    uint64_t sum = 0;
    for (size_t i = 0; i < d->n; i++) {
        uint64_t h = mix(0x44454e5345000000ull, (uint64_t)(int64_t)d->y[i]);
        const float *x = d->x + i * d->dim;
        for (size_t j = 0; j < d->dim; j++) h = mix(h, float_bits(x[j]));
        sum += h;
    }
    return sum;
}

static uint64_t ratings_fingerprint(const ratings_t *r) {
    uint64_t sum = 0;
    for (size_t i = 0; i < r->n; i++)
        sum += mix(mix(0x524154494e470000ull, ((uint64_t)r->user[i] << 32) | r->item[i]), float_bits(r->rating[i]));
    return sum;
}

uint64_t data_fingerprint(const data_bundle_t *b, int test) {
    switch (b->kind) {
        case DATA_KIND_DENSE:
            return dense_fingerprint(test ? &b->dense_test : &b->dense_train);
        case DATA_KIND_SPARSE:
            return sparse_fingerprint(test ? &b->sparse_test : &b->sparse_train);
        case DATA_KIND_RATINGS:
            return ratings_fingerprint(test ? &b->ratings_test : &b->ratings_train);
    }
    return 0;
}
