#ifndef ASGD_KERNELS_OPTIMIZER_KIND_H
#define ASGD_KERNELS_OPTIMIZER_KIND_H
// The update rules, named once for every layer that applies them: the
// engine's optimizer (engine/core/optimizer.h) and a parameter server's shard
// (net/ps_server.h). The kernels of each rule are in kernels/update.h.

// The rules, in the enum's order, with their names: the one list the enum, the
// names (optimizer_kind_name) and the --optimizer and --server-optimizer choices
// are made from (a choice's index is its optimizer_kind_t). X(SUFFIX, "name")
// for each, SEP between two.
#define OPTIMIZER_KIND_LIST(X, SEP) X(SGD, "sgd") SEP X(ADAGRAD, "adagrad")

#define OPTIMIZER_KIND_COMMA ,
#define OPTIMIZER_KIND_ENUM_ENTRY(suffix, name) OPTIMIZER_KIND_##suffix
typedef enum optimizer_kind {
    OPTIMIZER_KIND_LIST(OPTIMIZER_KIND_ENUM_ENTRY, OPTIMIZER_KIND_COMMA),
    OPTIMIZER_KIND_COUNT_,  // not a rule: the number of them
} optimizer_kind_t;

// "sgd|adagrad": the flags' choices, a string literal.
#define OPTIMIZER_KIND_NAME_ENTRY(suffix, name) name
#define OPTIMIZER_KIND_CHOICES OPTIMIZER_KIND_LIST(OPTIMIZER_KIND_NAME_ENTRY, "|")

// The rule's name (OPTIMIZER_KIND_LIST); "sgd" for a value outside the enum.
const char *optimizer_kind_name(optimizer_kind_t k);

#endif
