#ifndef ASGD_ENGINE_RUN_FLAG_SYNONYMS_H
#define ASGD_ENGINE_RUN_FLAG_SYNONYMS_H
// Other names asgd's flags answer to: the names users bring from PyTorch's
// examples, scikit-learn and Vowpal Wabbit (--batch-size, --learning-rate,
// --max-iter, --passes, ...). The one table; flags_find takes them
// (flags_set_alias_lookup), each command's help names them beside the flag,
// and asgd launch knows its own flags by them too. A synonym that would
// mean something else here (--workers: PyTorch's data-loading threads) is
// not one.
#include <stddef.h>

// The flag `name` (dashes, not underscores) stands for, or NULL.
const char *flag_synonym_canonical(const char *name);

// The synonyms of flag `canonical`, "--a, --b" into out; returns how many.
size_t flag_synonyms_of(const char *canonical, char *out, size_t out_len);

#endif
