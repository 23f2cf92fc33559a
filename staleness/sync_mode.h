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

#define SYNC_MODE_COMMA ,

// The modes, in the enum's order, with their names: the one list the enum,
// the names (sync_mode_name), the parser and the --sync choices are made from.
// X(SUFFIX, "name") for each, SEP between two.
#define SYNC_MODE_LIST(X, SEP) \
    X(BSP, "bsp")              \
    SEP X(SSP, "ssp") SEP X(ASP, "asp") SEP X(ALLREDUCE, "allreduce") SEP X(HYBRID, "hybrid") SEP X(LOCAL, "local")

// HYBRID: sparse parameters through the servers (asp or ssp), dense ones by ring allreduce.
// LOCAL: local SGD: replicas step alone and average their models by ring allreduce every H steps.
#define SYNC_MODE_ENUM_ENTRY(suffix, name) SYNC_MODE_##suffix
typedef enum sync_mode { SYNC_MODE_LIST(SYNC_MODE_ENUM_ENTRY, SYNC_MODE_COMMA) } sync_mode_t;

// "bsp|ssp|asp|allreduce|hybrid|local": --sync's choices, a string literal.
#define SYNC_MODE_NAME_ENTRY(suffix, name) name
#define SYNC_MODE_CHOICES SYNC_MODE_LIST(SYNC_MODE_NAME_ENTRY, "|")

#define STALENESS_INFINITE UINT64_MAX

// The mode's name (SYNC_MODE_LIST), or "unknown".
const char *sync_mode_name(sync_mode_t m);
// Parses a name; returns 0, or -1 with err naming the accepted values.
int sync_mode_parse(const char *s, sync_mode_t *out, char *err, size_t err_len);

// The staleness bound a mode enforces: 0 for BSP, `ssp_bound` for SSP, infinite for ASP.
uint64_t sync_mode_bound(sync_mode_t m, uint64_t ssp_bound);

// The SSP gate: the one statement of the rule, used by the workers (replica:
// their threads' step allowance, the conditional pull that raises it, hybrid's
// sparse reads, BSP's round pull) and by the servers (answering that pull).
// Rounds are numbered from 0; a worker that has pushed c rounds computes round c.
//
// ssp_gate(round, min_clock, bound) answers for a worker about to compute
// `round` with parameters read while the slowest live worker had pushed
// `min_clock` rounds, under staleness bound `bound` (STALENESS_INFINITE: asp):
//   proceed     it may: round <= last_round;
//   last_round  the last round those parameters allow: min_clock + bound
//               (UINT64_MAX when the bound is infinite or the sum would not fit);
//   pull_clock  what it must pull first when it may not: the parameters as of
//               a slowest clock of at least this, round - bound (0 when the
//               bound is infinite or at least `round`: any parameters do).
//               It does not depend on min_clock (a worker that has not pulled
//               yet names it too). Under BSP (bound 0) it is the round itself.
// Parameters read at min_clock >= pull_clock let the round proceed, and none
// read earlier do. A server holds a pull naming clock `need` until
// ssp_gate(need, min_clock, 0).proceed: the worker took the bound off already.
typedef struct ssp_gate {
    int proceed;
    uint64_t last_round;
    uint64_t pull_clock;
} ssp_gate_t;

ssp_gate_t ssp_gate(uint64_t round, uint64_t min_clock, uint64_t bound);

#endif
