#include "staleness/stale_update.h"

#include <math.h>
#include <stdio.h>

int stale_update_config_check(const stale_update_config_t *c, char *err, size_t err_len) {
    if (!(c->dc_lambda >= 0.0) || !isfinite(c->dc_lambda)) {
        snprintf(err, err_len, "--dc-asgd: %g; expected a finite lambda >= 0", c->dc_lambda);
        return -1;
    }
    if (c->delay_adaptive && c->staleness_aware) {
        snprintf(err, err_len, "--delay-adaptive %llu: replaces the staleness-aware step; give one of the two",
                 (unsigned long long)c->delay_adaptive);
        return -1;
    }
    return 0;
}

void dc_asgd_compensate(float *g, const float *w_now, const float *w_then, size_t n, float lambda) {
    for (size_t i = 0; i < n; i++) g[i] += lambda * g[i] * g[i] * (w_now[i] - w_then[i]);
}
