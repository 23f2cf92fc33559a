#include "engine/models/layer_widths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_parse_widths(const char *flag, const char *s, size_t *out, size_t max, size_t *n, char *err, size_t err_len) {
    *n = 0;
    if (strcmp(s, "none") == 0 || *s == '\0') return 0;
    const char *p = s;
    while (*p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v == 0 || v > (1ul << 20) || *p == '-') {
            snprintf(err, err_len, "%s: '%s' is not a comma-separated list of layer widths (e.g. 256,128)", flag, s);
            return -1;
        }
        if (*n == max) {
            snprintf(err, err_len, "%s: more than %zu layers", flag, max);
            return -1;
        }
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return 0;
}
