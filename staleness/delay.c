#include "staleness/delay.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Reads one millisecond value at p; it must end at the string's end or at one of the characters in `ends`.
static int parse_ms(const char *p, const char *ends, double *ms, const char **next) {
    char *end;
    double v = strtod(p, &end);
    if (end == p || !strchr(ends, *end) || !isfinite(v) || v < 0 || v > STEP_DELAY_MAX_MS) return -1;
    *ms = v;
    *next = end;
    return 0;
}

int delay_spec_parse(const char *spec, size_t n_workers, step_delay_t *per_worker, char *err, size_t err_len) {
    const char *p = spec;
    while (*p) {
        const char *item = p;
        char *end;
        errno = 0;
        unsigned long id = strtoul(p, &end, 10);
        // An item runs to the next comma, or for uniform:A,B to the comma after B.
        int item_len = (int)strcspn(item, ",");
        if (end != p && *end == ':' && strncmp(end + 1, "uniform:", 8) == 0 && item[item_len] == ',')
            item_len += 1 + (int)strcspn(item + item_len + 1, ",");
        if (end == p || *end != ':' || *p == '-' || errno) {
            snprintf(err, err_len,
                     "--delay-worker: '%.*s' is not ID:MS, ID:uniform:A,B or ID:exp:MEAN (e.g. 1:5 delays worker 1 by "
                     "5 ms a step)",
                     item_len, item);
            return -1;
        }
        p = end + 1;
        step_delay_t d = {STEP_DELAY_FIXED, 0.0, 0.0};
        const char *next = p;
        int bad;
        if (strncmp(p, "uniform:", 8) == 0) {
            d.kind = STEP_DELAY_UNIFORM;
            bad =
                parse_ms(p + 8, ",", &d.a, &next) || *next != ',' || parse_ms(next + 1, ",", &d.b, &next) || d.b < d.a;
        } else if (strncmp(p, "exp:", 4) == 0) {
            d.kind = STEP_DELAY_EXP;
            bad = parse_ms(p + 4, ",", &d.a, &next);
        } else {
            bad = parse_ms(p, ",", &d.a, &next);
        }
        if (bad) {
            snprintf(err, err_len, "--delay-worker: '%.*s': the delay must be 0..60000 ms (uniform:A,B with A <= B)",
                     item_len, item);
            return -1;
        }
        if (id >= n_workers) {
            snprintf(err, err_len, "--delay-worker: worker %lu does not exist (workers are 0..%zu)", id,
                     n_workers ? n_workers - 1 : 0);
            return -1;
        }
        per_worker[id] = d;
        p = *next ? next + 1 : next;
    }
    return 0;
}

int step_delay_active(const step_delay_t *d) { return d->kind == STEP_DELAY_UNIFORM ? d->b > 0 : d->a > 0; }

double step_delay_draw(const step_delay_t *d, rng_t *rng) {
    switch (d->kind) {
        case STEP_DELAY_UNIFORM:
            return d->a + (d->b - d->a) * rng_uniform(rng);
        case STEP_DELAY_EXP: {
            double ms = -d->a * log1p(-rng_uniform(rng));  // 1 - u in (0, 1]
            return ms < STEP_DELAY_MAX_MS ? ms : STEP_DELAY_MAX_MS;
        }
        case STEP_DELAY_FIXED:
            break;
    }
    return d->a;
}

double step_delay_mean(const step_delay_t *d) { return d->kind == STEP_DELAY_UNIFORM ? 0.5 * (d->a + d->b) : d->a; }
