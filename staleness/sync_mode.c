#include "staleness/sync_mode.h"

#include <stdio.h>
#include <string.h>

#define NAME_OF(suffix, name) [SYNC_MODE_##suffix] = name
static const char *const names[] = {SYNC_MODE_LIST(NAME_OF, SYNC_MODE_COMMA)};
#define N_MODES (sizeof names / sizeof names[0])
#define ONE(suffix, name) 1
_Static_assert(N_MODES == SYNC_MODE_LIST(ONE, +), "every mode has its name, at its enum value");

const char *sync_mode_name(sync_mode_t m) { return (unsigned)m < N_MODES ? names[m] : "unknown"; }

int sync_mode_parse(const char *s, sync_mode_t *out, char *err, size_t err_len) {
    for (unsigned i = 0; i < N_MODES; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (sync_mode_t)i;
            return 0;
        }
    }
    snprintf(err, err_len, "--sync: '%s' is not one of " SYNC_MODE_CHOICES, s);
    return -1;
}

uint64_t sync_mode_bound(sync_mode_t m, uint64_t ssp_bound) {
    switch (m) {
        case SYNC_MODE_BSP:
            return 0;
        case SYNC_MODE_SSP:
            return ssp_bound;
        default:
            return STALENESS_INFINITE;
    }
}

ssp_gate_t ssp_gate(uint64_t round, uint64_t min_clock, uint64_t bound) {
    ssp_gate_t g;
    int unbounded = bound == STALENESS_INFINITE;
    g.last_round = unbounded || min_clock > UINT64_MAX - bound ? UINT64_MAX : min_clock + bound;
    g.pull_clock = unbounded || round <= bound ? 0 : round - bound;
    g.proceed = round <= g.last_round;
    return g;
}
