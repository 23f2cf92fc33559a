#ifndef ASGD_ENGINE_CORE_FLAGS_H
#define ASGD_ENGINE_CORE_FLAGS_H
// Command-line flags from a table: parsing, range checks, and --help text.
// "--name value" and "--name=value" are both accepted; booleans take no value.
// A name may be written with '_' for '-' (--test_frac), and by another name
// it is known by elsewhere when an alias lookup is set (--batch-size for
// --batch: flags_set_alias_lookup). --help shows each flag's default: the
// value its target holds before parsing, when it is one the flag accepts
// (a bool's false, an unset string, a NaN or an out-of-range number — "the
// model's", say — show none: the help text says what happens then).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum flag_type {
    FLAG_TYPE_BOOL,  // int*, set to 1
    FLAG_TYPE_SIZE,  // size_t*, decimal, within [min, max]
    FLAG_TYPE_U64,  // uint64_t*
    FLAG_TYPE_DOUBLE,  // double*, finite, within [min, max]
    FLAG_TYPE_STRING,  // const char** (points into argv)
    FLAG_TYPE_CHOICE,  // int* index into `choices` ("a|b|c")
} flag_type_t;

typedef struct flag_spec {
    const char *name;  // without the leading "--"
    flag_type_t type;
    void *target;
    const char *value_name;  // shown in help: "N", "RATE", ...
    const char *help;
    double min, max;  // numeric range; min == max == 0 means unchecked
    const char *choices;  // FLAG_TYPE_CHOICE only
    int seen;  // set by flags_parse when the flag was given
} flag_spec_t;

typedef enum flags_status {
    FLAGS_STATUS_OK = 0,
    FLAGS_STATUS_ERROR = -1,
    FLAGS_STATUS_HELP = 1,  // --help or -h was given
} flags_status_t;

// Parses argv[0..argc) (the subcommand's own arguments). On error, err names the
// flag and what was expected, prefixed with `command`. --help (or -h) anywhere
// returns FLAGS_STATUS_HELP before any flag is set, so the help shows the defaults.
flags_status_t flags_parse(const char *command, flag_spec_t *specs, size_t n_specs, int argc, char **argv, char *err,
                           size_t err_len);

// flags_parse for a subcommand: prints the help to stdout or the error (one
// line) to stderr. Returns -1 to go on, else the exit status: 0 after --help,
// 2 after a usage error.
int flags_command(const char *command, const char *usage, const char *description, flag_spec_t *specs, size_t n_specs,
                  int argc, char **argv);

// The command's help: the renderer's layout when one is set
// (flags_set_help_renderer), else usage, description and one line per flag.
void flags_print_help(FILE *out, const char *command, const char *usage, const char *description,
                      const flag_spec_t *specs, size_t n_specs);

// Sets one flag from its value's text as flags_parse would (range checks and
// messages included) and marks it seen. Returns 0, or -1 with err.
int flags_set(const char *command, flag_spec_t *spec, const char *value, char *err, size_t err_len);

// While a hook is set, flags_print_help hands the command's help to it instead
// of printing (asgd help --man / --completion render the same tables).
typedef void (*flags_help_hook_t)(const char *command, const char *usage, const char *description,
                                  const flag_spec_t *specs, size_t n_specs, void *ctx);
void flags_set_help_hook(flags_help_hook_t hook, void *ctx);  // NULL: print again
int flags_help_hooked(void);

// How the program lays its help out (topics, common flags first: engine/cli);
// set once, before any parsing. NULL: the plain list.
typedef void (*flags_help_renderer_t)(FILE *out, const char *command, const char *usage, const char *description,
                                      const flag_spec_t *specs, size_t n_specs);
void flags_set_help_renderer(flags_help_renderer_t renderer);

// One line per spec, as flags_print_help lists them, each after `indent`.
void flags_print_specs(FILE *out, const char *indent, const flag_spec_t *specs, size_t n_specs);

// The default --help shows for f, into out ("1", "0.1", "hogwild"); 0 when it
// shows none (see above).
int flags_default_text(const flag_spec_t *f, char *out, size_t out_len);

// Other names of the flags (--batch-size for --batch): the lookup returns the
// table's name for `name` (with '-' for '_'), or NULL. Set once, before any
// parsing; flags_find and so flags_parse and flag files then take those names too.
typedef const char *(*flags_alias_fn)(const char *name);
void flags_set_alias_lookup(flags_alias_fn fn);

// The spec called `name` — or `name` with '-' for '_', or the flag it is an
// alias of — or NULL.
const flag_spec_t *flags_find(const flag_spec_t *specs, size_t n_specs, const char *name);

// The name in specs nearest to `name` by edit distance, when it is near enough
// to be a slip (at most 1 edit for names under 4 characters, 2 under 9, else 3);
// else NULL. An unknown flag's message suggests it ("did you mean --epochs?").
const char *flags_suggest(const flag_spec_t *specs, size_t n_specs, const char *name);

// The program's other commands, for an unknown flag's message: writes into
// owners the commands (other than `command`) that take --name, e.g. "asgd
// launch, asgd server and asgd worker", and returns how many. Set once, before
// any parsing; the message then says "--workers is a flag of asgd launch ...".
typedef size_t (*flags_owner_fn)(const char *command, const char *name, char *owners, size_t owners_len);
void flags_set_owner_lookup(flags_owner_fn fn);

// "key=value,key=value" lists (used inside --data specs). Calls fn for each pair;
// stops with -1 on a malformed item or when fn fails.
int flags_parse_pairs(const char *list,
                      int (*fn)(const char *key, const char *value, void *ctx, char *err, size_t err_len), void *ctx,
                      char *err, size_t err_len);

// Number parsers with the same messages as flag parsing; `what` names the field.
int flags_parse_size(const char *what, const char *s, size_t *out, char *err, size_t err_len);
int flags_parse_double(const char *what, const char *s, double *out, char *err, size_t err_len);

#endif
