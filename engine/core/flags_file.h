#ifndef ASGD_ENGINE_CORE_FLAGS_FILE_H
#define ASGD_ENGINE_CORE_FLAGS_FILE_H
// Flag files (--config FILE), read and written against a command's flag table.
// One flag a line, by the flag's own name without the dashes:
//   name = value        # a comment
//   name                # a boolean flag, set (also: name = true / name = false)
// Blank lines and lines starting with `#` are skipped; ` #` (a blank, then #)
// starts a comment after a value. A value in double quotes runs to the line's
// last `"` and keeps blanks and `#`. The file's flags come before the command
// line's: a flag on the command line replaces the file's. An unknown name, a
// name given twice, a missing or bad value are refused as
// "FILE:LINE: what is wrong".
#include <stddef.h>
#include <stdio.h>

#include "engine/core/flags.h"

#define FLAGS_FILE_MAX_BYTES (1u << 20)

// The words flags_parse is given once a flag file is read.
typedef struct flags_argv {
    int argc;
    char **argv;  // the file's flags as "--name=value", then the command line's words as given
    size_t n_owned;  // argv[0..n_owned) are this struct's (flags_argv_free)
} flags_argv_t;

// Finds `--<file_flag> FILE` (or --<file_flag>=FILE) in argv[0..argc) as
// flags_parse would, reads FILE against specs and fills out with the words to
// parse: FILE's flags that the command line does not give, then argv. Without
// the flag, out holds argv's words. Returns 0, or -1 with err (prefixed with
// `command` only for the command line's own mistakes); out is then empty.
int flags_file_merge(const char *command, const char *file_flag, const flag_spec_t *specs, size_t n_specs, int argc,
                     char **argv, flags_argv_t *out, char *err, size_t err_len);
void flags_argv_free(flags_argv_t *a);

// The flags that were given (spec->seen), in table order, as a flag file's
// lines that read back to the same values; names in `skip` (NULL-terminated,
// or NULL) are left out. Returns a malloc'd string, or NULL with err (out of
// memory, or a value no line can hold: one with a line break).
char *flags_file_format(const flag_spec_t *specs, size_t n_specs, const char *const *skip, char *err, size_t err_len);

#endif
