#ifndef ASGD_ENGINE_CLI_HELP_LAYOUT_H
#define ASGD_ENGINE_CLI_HELP_LAYOUT_H
// How a command's help is laid out: its common flags first, then every other
// flag under its topic (data, model, optimisation, distributed, output,
// reliability), each with its default (flags.h) and its other names
// (flag_synonyms.h); then examples. `asgd CMD --help` (help_render, the flag
// parser's renderer) and the manual pages (cmd_help.c) read the same tables
// here and the commands' own flag tables, so no flag, default or example is
// written twice.
#include <stddef.h>
#include <stdio.h>

#include "engine/core/flags.h"

typedef enum help_topic {
    HELP_TOPIC_DATA,
    HELP_TOPIC_MODEL,
    HELP_TOPIC_OPTIMISATION,
    HELP_TOPIC_DISTRIBUTED,
    HELP_TOPIC_OUTPUT,
    HELP_TOPIC_RELIABILITY,
    HELP_TOPIC_COUNT,  // as a group: the flags of no topic (every flag has one: tests/engine/cli/test_cli_manual.c)
} help_topic_t;

// The groups a command's flags are listed in, in order: its common flags,
// then the topics (a flag listed as common is not listed again).
#define HELP_GROUP_COMMON (-1)
#define HELP_GROUP_FIRST HELP_GROUP_COMMON
#define HELP_GROUP_LAST HELP_TOPIC_COUNT

// The group's title ("common flags", "data", ..., "other").
const char *help_group_title(int group);
// The flags of specs[0..n) in `group` for command ("asgd train"), in the
// order they are shown, into out (room for n); returns how many.
size_t help_group(const char *command, int group, const flag_spec_t *specs, size_t n, const flag_spec_t **out);
// The topic of flag `name` (the table's), or HELP_TOPIC_COUNT when it has none.
help_topic_t help_topic_of(const char *name);

// The command's examples: lines "asgd ...  # what it does", or "" (none).
const char *help_examples(const char *command);

// flags_help_renderer_t: the command's help on out, laid out as above.
void help_render(FILE *out, const char *command, const char *usage, const char *description, const flag_spec_t *specs,
                 size_t n_specs);

#endif
