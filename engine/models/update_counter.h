#ifndef ASGD_ENGINE_MODELS_UPDATE_COUNTER_H
#define ASGD_ENGINE_MODELS_UPDATE_COUNTER_H
// Hogwild!'s lost updates, counted. An update counter wraps a real model: its
// steps read the shared parameters and compute exactly as the wrapped model's
// do (the same forward and backward passes, the same workspace and parameter
// copy), so threads race over the same windows; but every gradient value it
// hands to the optimizer is -UPDATE_COUNT_UNIT. Trained with plain SGD at a
// constant step of 1, each parameter then holds UPDATE_COUNT_UNIT times the
// number of updates that reached it, and
//     lost fraction = 1 - (sum of the parameters) / (unit * updates handed over).
// One thread, or the locked mode, loses none: the sum is exact (a float holds
// every multiple of the unit up to 2^24 of them, far above any count here).
// The unit is small so that the counts the wrapped model reads as weights stay
// small: a logistic loss stays far from saturating, where its gradient would
// be exactly 0 and a step would touch nothing.
//
// What it measures: the read-modify-writes of the optimizer's apply (dense
// blocks through model_loss_grad_apply, sparse ones through model_loss_grad)
// colliding between threads. It has no one-example direct step
// (model_sgd_step_one): a counted sparse model takes the gradient path, whose
// reads and writes of a parameter are the same load and store. The wrapped
// model's losses are meaningless on counts; the counter reports a loss of 0.
#include <stdint.h>

#include "engine/core/model.h"

#define UPDATE_COUNT_UNIT (1.0f / 65536.0f)

// A counter over `inner` (not owned: it must outlive the counter). Destroy
// with model_destroy. NULL (and err) when out of memory.
model_t *update_counter_new(const model_t *inner, char *err, size_t err_len);

typedef struct update_count {
    uint64_t handed;  // +1 updates the steps handed to the optimizer
    double applied;  // the parameters' sum over UPDATE_COUNT_UNIT: the updates that reached them
} update_count_t;

// The count after a run whose workspaces are all destroyed (train_run and
// train_fresh destroy theirs before they return); w: the final parameters.
update_count_t update_counter_result(const model_t *counter, const float *w);

// 1 - applied / handed (0 when nothing was handed over).
double update_count_lost_fraction(update_count_t c);

#endif
