#ifndef ASGD_STALENESS_DELAY_MODEL_H
#define ASGD_STALENESS_DELAY_MODEL_H
// Delay models for the deterministic staleness simulator (engine/sim/simulate.h):
// how many steps late each gradient is applied. Parsed from `--delay SPEC`:
//
//   fixed:K               every gradient is applied K steps after it was read
//   uniform:A,B           an integer delay drawn uniformly from [A, B]
//   geometric:P[,max=M]   P(delay = k) = P (1-P)^k for k = 0, 1, ... (mean (1-P)/P),
//                         clamped at M (default: the smallest M with P(delay > M) <= 1e-6)
//   trace:FILE            the delays read from FILE, one non-negative integer a
//                         line in read order ('#' lines and blank lines skipped);
//                         gradient i gets line i mod N (the trace repeats)
//   straggler:slow=F[,n=S]  W simulated workers (--simulate-workers W) in a
//                         round-robin; workers 0..S-1 (default S = 1) take F
//                         times as long per gradient as the others, so their
//                         gradients are far staler and the others' a little less.
//
// The first four are per-gradient (i.i.d.) delays drawn by a seeded sampler;
// straggler is a worker model: each worker's gradient takes a fixed virtual
// duration (delay_model_duration), and the simulator replays the workers' reads
// and writes in virtual time. Nothing here knows about models or parameters.
#include <stddef.h>
#include <stdint.h>

#include "kernels/foundation/rng.h"

#define DELAY_MODEL_MAX 1000000u  // largest delay, bound or worker count accepted
#define DELAY_MODEL_TIME_UNIT 1024u  // a fast worker's gradient, in virtual time units

typedef enum delay_kind {
    DELAY_KIND_FIXED,
    DELAY_KIND_UNIFORM,
    DELAY_KIND_GEOMETRIC,
    DELAY_KIND_STRAGGLER,
    DELAY_KIND_TRACE,
} delay_kind_t;

#define DELAY_MODEL_SPEC_MAX 256  // longest --delay SPEC, terminator included

typedef struct delay_model {
    delay_kind_t kind;
    uint64_t lo, hi;  // fixed: lo == hi == K; uniform: [A, B]; geometric: [0, max]
    double p;  // geometric: success probability in (0, 1]
    uint64_t workers;  // straggler: simulated workers W (set by the caller, see delay_model_check)
    uint64_t slow_workers;  // straggler: S, the workers 0..S-1 that are slow
    double slow;  // straggler: F >= 1, a slow worker's time per gradient / a fast one's
    uint32_t *trace;  // trace: the delays (owned: delay_model_free), lo/hi their min/max
    uint64_t trace_len;  // trace: how many (>= 1)
    char trace_file[DELAY_MODEL_SPEC_MAX];  // trace: FILE as given
} delay_model_t;

// Parses a --delay SPEC (see above). Returns 0, or -1 with err holding one line
// that names the field: e.g. "--delay 'uniform:5,2': B (2) must be >= A (5)".
// A straggler model's `workers` is left 0: the caller sets it and calls
// delay_model_check. A trace model reads FILE here and owns the delays:
// release them with delay_model_free (a no-op for the other models).
int delay_model_parse(const char *spec, delay_model_t *out, char *err, size_t err_len);

// Frees a trace model's delays; safe on any parsed or zeroed model.
void delay_model_free(delay_model_t *m);

// Checks the fields across each other (straggler: 2 <= W <= DELAY_MODEL_MAX, S <= W).
int delay_model_check(const delay_model_t *m, char *err, size_t err_len);

// The canonical spec, e.g. "uniform:0,8" or "straggler:slow=8,n=1 (64 workers)".
void delay_model_describe(const delay_model_t *m, char *out, size_t out_len);

// Per-gradient models: the largest delay the sampler can return.
// Straggler: the workers, i.e. gradients in flight at once.
uint64_t delay_model_max_in_flight(const delay_model_t *m);

// Straggler: worker `worker`'s virtual time per gradient (DELAY_MODEL_TIME_UNIT
// for a fast worker, round(F * DELAY_MODEL_TIME_UNIT) for a slow one).
uint64_t delay_model_duration(const delay_model_t *m, uint64_t worker);

// A seeded stream of delays for the per-gradient models (same seed, same delays).
typedef struct delay_sampler {
    delay_model_t model;
    rng_t rng;
    double log_q;  // geometric: log(1 - p)
    uint64_t pos;  // trace: the next line to return (mod trace_len)
} delay_sampler_t;

// The sampler shares the model's trace: keep the model alive while sampling.

void delay_sampler_init(delay_sampler_t *s, const delay_model_t *m, uint64_t seed);
// The next delay (per-gradient models only; straggler returns 0).
uint64_t delay_sampler_next(delay_sampler_t *s);

const char *delay_kind_name(delay_kind_t k);

#endif
