#include "staleness/histogram.h"

#include <math.h>
#include <stdio.h>
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

// The bin holding quantile q (STALENESS_HIST_BINS - 1: the overflow bin).
static size_t quantile_bin(const staleness_hist_t *h, double q) {
    double need = q * (double)h->count;
    uint64_t seen = 0;
    for (size_t i = 0; i < STALENESS_HIST_BINS; i++) {
        seen += h->bins[i];
        if ((double)seen >= need && seen > 0) return i;
    }
    return STALENESS_HIST_BINS - 1;
}

// Whether quantile q is the largest value: its rank is the last one.
static int is_top(const staleness_hist_t *h, double q) { return q * (double)h->count > (double)(h->count - 1); }

uint64_t staleness_hist_quantile(const staleness_hist_t *h, double q) {
    if (!h->count) return 0;
    size_t bin = quantile_bin(h, q);
    if (bin < STALENESS_HIST_BINS - 1) return bin;
    return is_top(h, q) ? h->max : STALENESS_HIST_BINS - 1;
}

int staleness_hist_quantile_exact(const staleness_hist_t *h, double q) {
    if (!h->count || quantile_bin(h, q) < STALENESS_HIST_BINS - 1) return 1;
    return is_top(h, q) || h->max == STALENESS_HIST_BINS - 1;
}

void staleness_hist_quantile_text(const staleness_hist_t *h, double q, char *out, size_t len) {
    if (staleness_hist_quantile_exact(h, q))
        snprintf(out, len, "%llu", (unsigned long long)staleness_hist_quantile(h, q));
    else
        snprintf(out, len, ">= %d", STALENESS_HIST_BINS - 1);
}
