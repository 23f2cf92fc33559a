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
// The smallest v with at least q of the counts at or below it (q in [0,1]).
// In the overflow bin only the largest value is known (max): a quantile that
// is the largest value reports it, any other there reports the bin's lower
// bound STALENESS_HIST_BINS - 1, which staleness_hist_quantile_exact then
// says is a bound (the value is at least that, at most max). 0 when empty.
uint64_t staleness_hist_quantile(const staleness_hist_t *h, double q);
int staleness_hist_quantile_exact(const staleness_hist_t *h, double q);
// The quantile as text: the number, or ">= 1023" where it is a bound (JSON
// writers put the first as a number, the second as a string).
void staleness_hist_quantile_text(const staleness_hist_t *h, double q, char *out, size_t len);

#endif
