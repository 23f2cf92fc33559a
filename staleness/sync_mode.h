#ifndef ASGD_STALENESS_SYNC_MODE_H
#define ASGD_STALENESS_SYNC_MODE_H
// The consistency models of a distributed run, and the SSP rule that bounds them.
//
// Worker clocks count push rounds. A worker that has pushed c rounds may compute
// round c (its (c+1)-th) only with parameters read while the slowest live worker
// had pushed at least c - s rounds (the gate below). BSP is s = 0; ASP is s = infinity; allreduce has no server and
// no staleness at all (every worker applies the same summed gradient); hybrid
// splits a model: its sparse part through the servers under ASP or SSP, its
// dense part by allreduce. Local SGD has no server either: replicas train
// alone and average their models every H steps.
#include <stddef.h>
#include <stdint.h>

typedef enum sync_mode {
    SYNC_MODE_BSP,
    SYNC_MODE_SSP,
    SYNC_MODE_ASP,
    SYNC_MODE_ALLREDUCE,
    SYNC_MODE_HYBRID,  // sparse parameters through the servers (asp or ssp), dense ones by ring allreduce
    SYNC_MODE_LOCAL,   // local SGD: replicas step alone and average their models by ring allreduce every H steps
} sync_mode_t;

#define STALENESS_INFINITE UINT64_MAX

// "bsp", "ssp", "asp", "allreduce", "hybrid", "local".
const char *sync_mode_name(sync_mode_t m);
// Parses a name; returns 0, or -1 with err naming the accepted values.
int sync_mode_parse(const char *s, sync_mode_t *out, char *err, size_t err_len);

// The staleness bound a mode enforces: 0 for BSP, `ssp_bound` for SSP, infinite for ASP.
uint64_t sync_mode_bound(sync_mode_t m, uint64_t ssp_bound);

// The SSP gate: the one statement of the rule, used by the workers (replica.c:
// their threads' step allowance, the conditional pull that raises it, hybrid's
// sparse reads, BSP's round pull) and by the servers (answering that pull).
// Rounds are numbered from 0; a worker that has pushed c rounds computes round c.

// The last round a worker may start when the parameters it holds were read
// while the slowest live worker had pushed `min_clock` rounds: min_clock + bound
// (UINT64_MAX when the bound is infinite or the sum would not fit).
uint64_t ssp_last_round(uint64_t min_clock, uint64_t bound);

// The clock a conditional pull must name so that its answer lets the worker
// start round `round`: round - bound, or 0 (answered at once) when the bound is
// infinite or at least `round`. Under BSP (bound 0) it is the round itself.
uint64_t ssp_pull_clock(uint64_t round, uint64_t bound);

// Whether a pull naming clock `need` may be answered now that the slowest live
// worker has pushed `min_clock` rounds.
int ssp_pull_ready(uint64_t need, uint64_t min_clock);

#endif
