#ifndef ASGD_KERNELS_OPTIMIZER_KIND_H
#define ASGD_KERNELS_OPTIMIZER_KIND_H
// The update rules, named once for every layer that applies them: the
// engine's optimizer (engine/core/optimizer.h) and a parameter server's shard
// (net/ps_server.h). The kernels of each rule are in kernels/update.h.

typedef enum optimizer_kind {
    OPTIMIZER_KIND_SGD,
    OPTIMIZER_KIND_ADAGRAD,
    OPTIMIZER_KIND_COUNT_,  // not a rule: the number of them
} optimizer_kind_t;

// "sgd" or "adagrad"; the choices of --optimizer and --server-optimizer are
// these names, in this order (a choice's index is its optimizer_kind_t).
const char *optimizer_kind_name(optimizer_kind_t k);

#endif
