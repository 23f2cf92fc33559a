#ifndef ASGD_STALENESS_STALE_UPDATE_H
#define ASGD_STALENESS_STALE_UPDATE_H
// Update rules for a gradient that arrives `staleness` updates late: what an
// asynchronous applier (the staleness simulator today, a parameter server
// tomorrow) does to a stale gradient before its optimizer step. Plain float
// arrays, so any layer can call them.
//
//   staleness-aware step (Zhang et al. 2016, "Staleness-aware async-SGD"):
//       lr_used = lr / max(1, staleness)
//   delay-adaptive step (Koloskova et al. 2022, "Sharper convergence
//   guarantees for asynchronous SGD", their delay-adaptive stepsize with the
//   base step tuned to the threshold; Mishchenko et al. 2022 use the same
//   min(gamma, c / tau) form), threshold tau_C >= 1:
//       lr_used = lr                    if staleness <= tau_C
//               = lr * tau_C / staleness otherwise
//     Gradients no staler than tau_C (the fast workers') keep the full step;
//     only the stragglers' are damped, in proportion to their delay.
//   delay compensation (Zheng et al. 2017, DC-ASGD, constant lambda):
//       g <- g + lambda * g (.) g (.) (w_now - w_then)
//     w_then: the parameters the gradient was computed on; w_now: the ones it
//     is applied to; g (.) g is the diagonal outer-product approximation of
//     the Hessian.
#include <stddef.h>
#include <stdint.h>

typedef struct stale_update_config {
    int staleness_aware;  // divide the step by max(1, staleness)
    double dc_lambda;  // > 0: delay compensation with this lambda; 0: off
    uint64_t delay_adaptive;  // > 0: the delay-adaptive step with threshold tau_C = this; 0: off
} stale_update_config_t;

// Returns 0, or -1 with err naming the flag (--dc-asgd, --delay-adaptive) and
// the valid range; the staleness-aware and delay-adaptive steps exclude each other.
int stale_update_config_check(const stale_update_config_t *c, char *err, size_t err_len);

// The step size for an update of the given staleness.
static inline float stale_update_lr(const stale_update_config_t *c, float lr, uint64_t staleness) {
    if (c->delay_adaptive) {
        if (staleness <= c->delay_adaptive) return lr;
        return (float)((double)lr * (double)c->delay_adaptive / (double)staleness);
    }
    if (!c->staleness_aware || staleness <= 1) return lr;
    return lr / (float)staleness;
}

// g[i] += lambda * g[i] * g[i] * (w_now[i] - w_then[i]) for i in [0, n): the
// three arrays are aligned (the same coordinates, dense or gathered).
void dc_asgd_compensate(float *g, const float *w_now, const float *w_then, size_t n, float lambda);

#endif
