// The update rules' names (optimizer_kind.h).
#include "kernels/optimizer_kind.h"

static const char *const names[] = {OPTIMIZER_KIND_LIST(OPTIMIZER_KIND_NAME_ENTRY, OPTIMIZER_KIND_COMMA)};
_Static_assert(sizeof names / sizeof names[0] == OPTIMIZER_KIND_COUNT_, "one name per optimizer_kind_t");

const char *optimizer_kind_name(optimizer_kind_t k) { return (unsigned)k < OPTIMIZER_KIND_COUNT_ ? names[k] : "sgd"; }
