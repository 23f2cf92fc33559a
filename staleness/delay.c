#include "staleness/delay.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int delay_spec_parse(const char *spec, size_t n_workers, double *per_worker_ms, char *err, size_t err_len) {
    const char *p = spec;
    while (*p) {
        const char *item = p;
        int item_len = (int)strcspn(item, ",");  // errors quote this item, not the rest of the list
        char *end;
        errno = 0;
        unsigned long id = strtoul(p, &end, 10);
        if (end == p || *end != ':' || *p == '-' || errno) {
            snprintf(err, err_len, "--delay-worker: '%.*s' is not ID:MS (e.g. 1:5 delays worker 1 by 5 ms a step)",
                     item_len, item);
            return -1;
        }
        p = end + 1;
        double ms = strtod(p, &end);
        if (end == p || (*end != ',' && *end != '\0') || !isfinite(ms) || ms < 0 || ms > 60000) {
            snprintf(err, err_len, "--delay-worker: '%.*s': the delay must be 0..60000 ms", item_len, item);
            return -1;
        }
        if (id >= n_workers) {
            snprintf(err, err_len, "--delay-worker: worker %lu does not exist (workers are 0..%zu)", id,
                     n_workers ? n_workers - 1 : 0);
            return -1;
        }
        per_worker_ms[id] = ms;
        p = *end ? end + 1 : end;
    }
    return 0;
}
