#ifndef ASGD_STALENESS_SYNC_MODE_H
#define ASGD_STALENESS_SYNC_MODE_H
// The consistency models of a distributed run, and the SSP rule that bounds them.
//
// Worker clocks count push rounds. A worker that has pushed c rounds may compute
// round c (its (c+1)-th) only while the slowest live worker has pushed at least
// c - s rounds. BSP is s = 0; ASP is s = infinity; allreduce has no server and
// no staleness at all (every worker applies the same summed gradient); hybrid
// splits a model: its sparse part through the servers under ASP or SSP, its
// dense part by allreduce.
#include <stddef.h>
#include <stdint.h>

typedef enum sync_mode {
    SYNC_MODE_BSP,
    SYNC_MODE_SSP,
    SYNC_MODE_ASP,
    SYNC_MODE_ALLREDUCE,
    SYNC_MODE_HYBRID,  // sparse parameters through the servers (asp or ssp), dense ones by ring allreduce
} sync_mode_t;

#define STALENESS_INFINITE UINT64_MAX

// "bsp", "ssp", "asp", "allreduce", "hybrid".
const char *sync_mode_name(sync_mode_t m);
// Parses a name; returns 0, or -1 with err naming the accepted values.
int sync_mode_parse(const char *s, sync_mode_t *out, char *err, size_t err_len);

// The staleness bound a mode enforces: 0 for BSP, `ssp_bound` for SSP, infinite for ASP.
uint64_t sync_mode_bound(sync_mode_t m, uint64_t ssp_bound);

// May a worker that has completed `own_clock` rounds start the next one, when
// the slowest live worker has completed `min_clock`?
static inline int ssp_may_advance(uint64_t own_clock, uint64_t min_clock, uint64_t bound) {
    if (bound == STALENESS_INFINITE) return 1;
    return own_clock <= min_clock || own_clock - min_clock <= bound;  // min_clock + bound could wrap
}

// The smallest min clock that lets a worker at own_clock go on (0 if any will).
static inline uint64_t ssp_required_min_clock(uint64_t own_clock, uint64_t bound) {
    if (bound == STALENESS_INFINITE || own_clock <= bound) return 0;
    return own_clock - bound;
}

#endif
