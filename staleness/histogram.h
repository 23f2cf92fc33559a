#ifndef ASGD_STALENESS_HISTOGRAM_H
#define ASGD_STALENESS_HISTOGRAM_H
// Counts of staleness values: exact up to STALENESS_HIST_BINS - 1, then one
// overflow bin (the exact maximum is kept separately).
#include <stddef.h>
#include <stdint.h>

#define STALENESS_HIST_BINS 1024

typedef struct staleness_hist {
    uint64_t bins[STALENESS_HIST_BINS];  // bins[v]: updates with staleness v (last: >= BINS-1)
    uint64_t count;
    double sum;
    uint64_t max;
} staleness_hist_t;

void staleness_hist_init(staleness_hist_t *h);
void staleness_hist_add(staleness_hist_t *h, uint64_t staleness);
void staleness_hist_merge(staleness_hist_t *dst, const staleness_hist_t *src);
double staleness_hist_mean(const staleness_hist_t *h);  // NaN when empty
// The smallest v with at least q of the counts at or below it (q in [0,1]); the
// overflow bin reports the maximum. 0 when empty.
uint64_t staleness_hist_quantile(const staleness_hist_t *h, double q);

#endif
