#include "staleness/histogram.h"

#include <math.h>
#include <string.h>

void staleness_hist_init(staleness_hist_t *h) { memset(h, 0, sizeof *h); }

void staleness_hist_add(staleness_hist_t *h, uint64_t s) {
    h->bins[s < STALENESS_HIST_BINS - 1 ? s : STALENESS_HIST_BINS - 1]++;
    h->count++;
    h->sum += (double)s;
    if (s > h->max) h->max = s;
}

void staleness_hist_merge(staleness_hist_t *dst, const staleness_hist_t *src) {
    for (size_t i = 0; i < STALENESS_HIST_BINS; i++) dst->bins[i] += src->bins[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->max > dst->max) dst->max = src->max;
}

double staleness_hist_mean(const staleness_hist_t *h) { return h->count ? h->sum / (double)h->count : NAN; }

uint64_t staleness_hist_quantile(const staleness_hist_t *h, double q) {
    if (!h->count) return 0;
    double need = q * (double)h->count;
    uint64_t seen = 0;
    for (size_t i = 0; i < STALENESS_HIST_BINS; i++) {
        seen += h->bins[i];
        if ((double)seen >= need && seen > 0) return i == STALENESS_HIST_BINS - 1 ? h->max : i;
    }
    return h->max;
}
