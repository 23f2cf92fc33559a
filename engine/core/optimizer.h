#ifndef ASGD_ENGINE_CORE_OPTIMIZER_H
#define ASGD_ENGINE_CORE_OPTIMIZER_H
// Update rules applied to shared parameters: SGD (optionally with momentum) and
// Adagrad, with a step-size schedule. Optimizer state (velocity, squared-gradient
// sums) is shared by all threads the same way the parameters are: relaxed atomics.
// For sparse gradients only touched coordinates are updated (lazy momentum and
// Adagrad, as sparse Hogwild! implementations do).
#include <stddef.h>

#include "engine/core/grad.h"
#include "engine/core/params.h"
#include "kernels/optimizer_kind.h"

typedef struct optimizer optimizer_t;

typedef enum lr_schedule {
    LR_SCHEDULE_CONSTANT,  // lr
    LR_SCHEDULE_INVERSE_TIME,  // lr / (1 + decay * updates)
    LR_SCHEDULE_EPOCH_DECAY,  // lr * decay^floor(epoch)
} lr_schedule_t;

typedef struct optimizer_config {
    optimizer_kind_t kind;
    double lr;
    lr_schedule_t schedule;
    double decay;  // inverse-time gamma, or per-epoch factor in (0, 1]
    double momentum;  // SGD only; 0 disables the velocity buffer
    double epsilon;  // Adagrad's denominator guard
    size_t warmup;  // > 0: the step grows linearly over the first `warmup` updates, lr * (u + 1) / warmup
} optimizer_config_t;

void optimizer_config_default(optimizer_config_t *c);

// Checks the config; on error names the field (as its CLI flag) and the valid range.
int optimizer_config_check(const optimizer_config_t *c, char *err, size_t err_len);

optimizer_t *optimizer_new(const optimizer_config_t *c, size_t dim, char *err, size_t err_len);
void optimizer_destroy(optimizer_t **o);

// Step size after `updates` applied updates, during epoch number `epoch`
// (0-based): the schedule's, times min(1, (updates + 1) / warmup) when
// warming up (the first update takes lr / warmup, update warmup - 1 the full lr).
float optimizer_lr(const optimizer_t *o, double updates, size_t epoch);

// w -= step(g) over the gradient's touched coordinates (all of them when
// dense), leaving the gradient clear (zero) for the next step, in one pass.
void optimizer_apply_and_clear(optimizer_t *o, param_t *w, grad_t *g, float lr);

// The same for a dense gradient restricted to coordinates [begin, end): lets
// several threads apply one averaged gradient in parallel, each its own range.
// Leaves g as it was.
void optimizer_apply_range(optimizer_t *o, param_t *w, const float *g, size_t begin, size_t end, float lr);

// Synchronous training on plain copies of the parameters: for coordinates
// [offset, offset + n), whose current values are cur[0..n) and gradient
// g[0..n), writes the new values over g (the arithmetic of
// optimizer_apply_range, bit for bit) and updates the optimizer's state.
// w itself is not written: the caller stores the values where they belong.
void optimizer_step_values(optimizer_t *o, size_t offset, size_t n, const float *cur, float *g, float lr);

// Applies a block of a dense gradient, g[0..n) for parameters [offset, offset+n),
// and writes each new value into copy[offset + i] as well: the Hogwild! thread's
// next private copy of the parameters.
void optimizer_apply_block(optimizer_t *o, param_t *w, size_t offset, const float *g, size_t n, float lr, float *copy);

// The same update on plain floats that one thread owns: values[i], the value
// of parameter offset + i, becomes its updated value for i < n (a Hogwild!
// thread's replica, in the replicas variant). The optimizer's state is
// updated as by optimizer_apply_range.
void optimizer_apply_values(optimizer_t *o, size_t offset, const float *g, size_t n, float lr, float *values);

// The optimizer's state (momentum velocity or Adagrad sums; none for plain
// SGD), for checkpoints: its length in floats, a copy out, a copy in.
size_t optimizer_state_len(const optimizer_t *o);
void optimizer_state_read(const optimizer_t *o, float *out);
void optimizer_state_write(optimizer_t *o, const float *in);

// True for SGD without momentum: the only rule model_sgd_step_one implements.
int optimizer_is_plain_sgd(const optimizer_t *o);

// The configuration the optimizer was made from.
const optimizer_config_t *optimizer_config(const optimizer_t *o);

const char *lr_schedule_name(lr_schedule_t s);

#endif
