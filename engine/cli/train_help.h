#ifndef ASGD_ENGINE_CLI_TRAIN_HELP_H
#define ASGD_ENGINE_CLI_TRAIN_HELP_H
// What the command line adds to the training flags (engine/run/train_args.h):
// the help of a command that trains, and its parse with the help and the
// usage error printed.
#include <stddef.h>
#include <stdio.h>

#include "engine/run/train_args.h"

// flags_command for a command whose flags include train_args_flags': its
// --help lists the shared flags, then each model with its own flags.
// Returns 0 after the help, 2 after a usage error, -1 to go on.
int train_args_command(train_args_t *a, const char *command, const char *usage, const char *description,
                       flag_spec_t *specs, size_t n_specs, int argc, char **argv);
void train_args_print_help(FILE *out, const train_args_t *a, const char *command, const char *usage,
                           const char *description, const flag_spec_t *specs, size_t n_specs);

#endif
