#ifndef ASGD_STALENESS_DELAY_H
#define ASGD_STALENESS_DELAY_H
// Injected delays that make a worker a straggler, so that the value of
// asynchrony under imbalance can be measured.
#include <stddef.h>

#include "kernels/foundation/rng.h"

// One worker's delay after every step, in milliseconds: a fixed sleep, or one
// drawn per step (uniform on [a, b], or exponential with mean a, capped at
// STEP_DELAY_MAX_MS).
typedef enum { STEP_DELAY_FIXED = 0, STEP_DELAY_UNIFORM, STEP_DELAY_EXP } step_delay_kind_t;

typedef struct step_delay {
    step_delay_kind_t kind;
    double a, b;  // fixed: a ms; uniform: a..b ms; exp: mean a ms (b unused)
} step_delay_t;

#define STEP_DELAY_MAX_MS 60000.0

// Parses "--delay-worker" values "ITEM[,ITEM...]", each ITEM one of ID:MS,
// ID:uniform:A,B or ID:exp:MEAN (milliseconds, 0..60000), into
// per_worker[0..n_workers) (entries not named keep their value; the commas
// of uniform:A,B belong to the item). Returns 0, or -1 with err naming the bad item.
int delay_spec_parse(const char *spec, size_t n_workers, step_delay_t *per_worker, char *err, size_t err_len);

// Whether the delay can ever be > 0.
int step_delay_active(const step_delay_t *d);

// The delay for one step, in ms (draws from rng unless fixed).
double step_delay_draw(const step_delay_t *d, rng_t *rng);

// Its mean, in ms.
double step_delay_mean(const step_delay_t *d);

#endif
