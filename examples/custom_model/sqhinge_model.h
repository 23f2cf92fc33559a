#ifndef CUSTOM_MODEL_SQHINGE_MODEL_H
#define CUSTOM_MODEL_SQHINGE_MODEL_H
#include <stddef.h>

// Registers "sqhinge": a sparse linear classifier with the squared hinge loss
// max(0, margin - y (w.x + b))^2 and its own flag, --margin.
int sqhinge_register(char *err, size_t err_len);

#endif
