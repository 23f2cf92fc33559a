#ifndef ASGD_ENGINE_MODELS_LAYER_WIDTHS_H
#define ASGD_ENGINE_MODELS_LAYER_WIDTHS_H
// A model flag's list of layer widths, as mlp's and embmlp's --hidden take it.
#include <stddef.h>

// A comma-separated list of layer widths ("256,128"; "none" or "" for none),
// at most max of them, each in 1..2^20. `flag` names the flag in messages.
// Returns 0, or -1 with err.
int model_parse_widths(const char *flag, const char *s, size_t *out, size_t max, size_t *n, char *err, size_t err_len);

#endif
