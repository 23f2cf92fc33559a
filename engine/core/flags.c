#include "engine/core/flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int flags_parse_size(const char *what, const char *s, size_t *out, char *err, size_t err_len) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *s == '+' || *end != '\0' || errno == ERANGE || v > SIZE_MAX) {
        snprintf(err, err_len, "%s: '%s' is not a non-negative integer", what, s);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

int flags_parse_double(const char *what, const char *s, double *out, char *err, size_t err_len) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v)) {
        snprintf(err, err_len, "%s: '%s' is not a finite number", what, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int check_range(const char *command, const flag_spec_t *f, double v, char *err, size_t err_len) {
    if (f->min == 0.0 && f->max == 0.0) return 0;
    if (v < f->min || v > f->max) {
        snprintf(err, err_len, "%s: --%s: %g is out of range; expected %g..%g", command, f->name, v, f->min, f->max);
        return -1;
    }
    return 0;
}

static int parse_choice(const char *command, const flag_spec_t *f, const char *value, char *err, size_t err_len) {
    size_t len = strlen(value);
    int index = 0;
    for (const char *c = f->choices; *c; index++) {
        size_t n = strcspn(c, "|");
        if (n == len && strncmp(c, value, n) == 0) {
            *(int *)f->target = index;
            return 0;
        }
        c += n;
        if (*c == '|') c++;
    }
    char shown[256];
    size_t at = 0;
    for (const char *p = f->choices; *p && at + 3 < sizeof shown; p++) {
        if (*p == '|') {
            shown[at++] = ',';
            shown[at++] = ' ';
        } else {
            shown[at++] = *p;
        }
    }
    shown[at] = '\0';
    snprintf(err, err_len, "%s: --%s: '%s' is not one of: %s", command, f->name, value, shown);
    return -1;
}

static int set_value(const char *command, flag_spec_t *f, const char *value, char *err, size_t err_len) {
    char what[96];
    snprintf(what, sizeof what, "%s: --%s", command, f->name);
    switch (f->type) {
        case FLAG_TYPE_BOOL:
            if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
                *(int *)f->target = 1;
            else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
                *(int *)f->target = 0;
            else {
                snprintf(err, err_len, "%s: '%s' is not true or false", what, value);
                return -1;
            }
            return 0;
        case FLAG_TYPE_SIZE: {
            size_t v;
            if (flags_parse_size(what, value, &v, err, err_len) != 0 ||
                check_range(command, f, (double)v, err, err_len) != 0)
                return -1;
            *(size_t *)f->target = v;
            return 0;
        }
        case FLAG_TYPE_U64: {
            size_t v;
            if (flags_parse_size(what, value, &v, err, err_len) != 0) return -1;
            *(uint64_t *)f->target = (uint64_t)v;
            return 0;
        }
        case FLAG_TYPE_DOUBLE: {
            double v;
            if (flags_parse_double(what, value, &v, err, err_len) != 0 || check_range(command, f, v, err, err_len) != 0)
                return -1;
            *(double *)f->target = v;
            return 0;
        }
        case FLAG_TYPE_STRING:
            if (*value == '\0') {
                snprintf(err, err_len, "%s: expected a non-empty %s", what, f->value_name ? f->value_name : "value");
                return -1;
            }
            *(const char **)f->target = value;
            return 0;
        case FLAG_TYPE_CHOICE:
            return parse_choice(command, f, value, err, err_len);
    }
    return -1;
}

int flags_set(const char *command, flag_spec_t *spec, const char *value, char *err, size_t err_len) {
    if (set_value(command, spec, value, err, err_len) != 0) return -1;
    spec->seen = 1;
    return 0;
}

static flags_alias_fn alias_lookup;

void flags_set_alias_lookup(flags_alias_fn fn) { alias_lookup = fn; }

static const flag_spec_t *find_named(const flag_spec_t *specs, size_t n_specs, const char *name) {
    for (size_t i = 0; i < n_specs; i++)
        if (strcmp(specs[i].name, name) == 0) return &specs[i];
    return NULL;
}

const flag_spec_t *flags_find(const flag_spec_t *specs, size_t n_specs, const char *name) {
    const flag_spec_t *f = find_named(specs, n_specs, name);
    if (f) return f;
    char dashed[64];
    size_t n = strlen(name);
    if (n >= sizeof dashed) return NULL;
    for (size_t i = 0; i <= n; i++) dashed[i] = name[i] == '_' ? '-' : name[i];
    if ((f = find_named(specs, n_specs, dashed))) return f;
    const char *canonical = alias_lookup ? alias_lookup(dashed) : NULL;
    return canonical ? find_named(specs, n_specs, canonical) : NULL;
}

// Edit distance (insertions, deletions, substitutions) between a and b, both
// shorter than 64 characters (flag names).
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64) return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *flags_suggest(const flag_spec_t *specs, size_t n_specs, const char *name) {
    size_t len = strlen(name);
    size_t limit = len < 4 ? 1 : len < 9 ? 2 : 3;  // a slip, not another word
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n_specs; i++) {
        size_t d = edit_distance(name, specs[i].name);
        if (d < best_d) best = specs[i].name, best_d = d;
    }
    return best;
}

static flags_owner_fn owner_lookup;

void flags_set_owner_lookup(flags_owner_fn fn) { owner_lookup = fn; }

// "unknown flag --NAME", with the command that takes it or the nearest name.
static void unknown_flag(const char *command, const flag_spec_t *specs, size_t n_specs, const char *name, char *err,
                         size_t err_len) {
    char owners[160] = "";
    const char *near = NULL;
    if (owner_lookup && owner_lookup(command, name, owners, sizeof owners) > 0)
        snprintf(err, err_len, "%s: --%s is a flag of %s, not of %s (see %s --help)", command, name, owners, command,
                 command);
    else if ((near = flags_suggest(specs, n_specs, name)) != NULL)
        snprintf(err, err_len, "%s: unknown flag --%s; did you mean --%s? (see %s --help)", command, name, near,
                 command);
    else
        snprintf(err, err_len, "%s: unknown flag --%s (see %s --help)", command, name, command);
}

flags_status_t flags_parse(const char *command, flag_spec_t *specs, size_t n_specs, int argc, char **argv, char *err,
                           size_t err_len) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return FLAGS_STATUS_HELP;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            snprintf(err, err_len, "%s: unexpected argument '%s' (flags start with --; see --help)", command, arg);
            return FLAGS_STATUS_ERROR;
        }
        char name[64];
        const char *eq = strchr(arg + 2, '=');
        size_t name_len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (name_len >= sizeof name) name_len = sizeof name - 1;
        memcpy(name, arg + 2, name_len);
        name[name_len] = '\0';
        flag_spec_t *f = (flag_spec_t *)flags_find(specs, n_specs, name);
        if (!f) {
            unknown_flag(command, specs, n_specs, name, err, err_len);
            return FLAGS_STATUS_ERROR;
        }
        if (f->seen) {
            if (strcmp(name, f->name) == 0)
                snprintf(err, err_len, "%s: --%s given twice", command, name);
            else
                snprintf(err, err_len, "%s: --%s given twice (as --%s too)", command, f->name, name);
            return FLAGS_STATUS_ERROR;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (f->type == FLAG_TYPE_BOOL) {
            value = "true";
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            snprintf(err, err_len, "%s: --%s needs a value (%s)", command, name,
                     f->value_name ? f->value_name : "VALUE");
            return FLAGS_STATUS_ERROR;
        }
        if (set_value(command, f, value, err, err_len) != 0) return FLAGS_STATUS_ERROR;
        f->seen = 1;
    }
    return FLAGS_STATUS_OK;
}

int flags_command(const char *command, const char *usage, const char *description, flag_spec_t *specs, size_t n_specs,
                  int argc, char **argv) {
    char err[512];
    flags_status_t st = flags_parse(command, specs, n_specs, argc, argv, err, sizeof err);
    if (st == FLAGS_STATUS_HELP) {
        flags_print_help(stdout, command, usage, description, specs, n_specs);
        return 0;
    }
    if (st == FLAGS_STATUS_ERROR) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    return -1;
}

static flags_help_hook_t help_hook;
static void *help_hook_ctx;
static flags_help_renderer_t help_renderer;

void flags_set_help_renderer(flags_help_renderer_t renderer) { help_renderer = renderer; }

void flags_set_help_hook(flags_help_hook_t hook, void *ctx) {
    help_hook = hook;
    help_hook_ctx = ctx;
}

int flags_help_hooked(void) { return help_hook != NULL; }

void flags_print_help(FILE *out, const char *command, const char *usage, const char *description,
                      const flag_spec_t *specs, size_t n_specs) {
    if (help_hook) {
        help_hook(command, usage, description, specs, n_specs, help_hook_ctx);
        return;
    }
    if (help_renderer) {
        help_renderer(out, command, usage, description, specs, n_specs);
        return;
    }
    fprintf(out, "usage: %s\n\n%s\n\nflags:\n", usage, description);
    flags_print_specs(out, "  ", specs, n_specs);
    fprintf(out, "  %-24s %s\n", "--help", "show this help");
}

void flags_print_specs(FILE *out, const char *indent, const flag_spec_t *specs, size_t n_specs) {
    for (size_t i = 0; i < n_specs; i++) {
        const flag_spec_t *f = &specs[i];
        char left[64];
        if (f->type == FLAG_TYPE_BOOL)
            snprintf(left, sizeof left, "--%s", f->name);
        else if (f->type == FLAG_TYPE_CHOICE)
            snprintf(left, sizeof left, "--%s %s", f->name, f->value_name ? f->value_name : "CHOICE");
        else
            snprintf(left, sizeof left, "--%s %s", f->name, f->value_name ? f->value_name : "VALUE");
        char shown[96];
        int has_default = flags_default_text(f, shown, sizeof shown);
        fprintf(out, "%s%-24s %s", indent, left, f->help);
        if (f->type == FLAG_TYPE_CHOICE)
            fprintf(out, " (%s%s%s)", f->choices, has_default ? "; default " : "", has_default ? shown : "");
        else if (has_default)
            fprintf(out, " (default %s)", shown);
        fputc('\n', out);
    }
}

// Whether v lies in f's range (or the range is unchecked).
static int in_range(const flag_spec_t *f, double v) {
    return (f->min == 0.0 && f->max == 0.0) || (v >= f->min && v <= f->max);
}

int flags_default_text(const flag_spec_t *f, char *out, size_t out_len) {
    out[0] = '\0';
    switch (f->type) {
        case FLAG_TYPE_BOOL:
            return 0;
        case FLAG_TYPE_SIZE: {
            size_t v = *(const size_t *)f->target;
            if (!in_range(f, (double)v)) return 0;
            snprintf(out, out_len, "%zu", v);
            return 1;
        }
        case FLAG_TYPE_U64:
            snprintf(out, out_len, "%llu", (unsigned long long)*(const uint64_t *)f->target);
            return 1;
        case FLAG_TYPE_DOUBLE: {
            double v = *(const double *)f->target;
            if (!isfinite(v) || !in_range(f, v)) return 0;
            snprintf(out, out_len, "%g", v);
            return 1;
        }
        case FLAG_TYPE_STRING: {
            const char *v = *(const char *const *)f->target;
            if (!v) return 0;
            snprintf(out, out_len, "%s", v);
            return 1;
        }
        case FLAG_TYPE_CHOICE: {
            int index = *(const int *)f->target, at = 0;
            for (const char *c = f->choices; *c; at++) {
                size_t n = strcspn(c, "|");
                if (at == index) {
                    snprintf(out, out_len, "%.*s", (int)n, c);
                    return 1;
                }
                c += n;
                if (*c == '|') c++;
            }
            return 0;
        }
    }
    return 0;
}

int flags_parse_pairs(const char *list,
                      int (*fn)(const char *key, const char *value, void *ctx, char *err, size_t err_len), void *ctx,
                      char *err, size_t err_len) {
    char item[128];
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof item) {
            snprintf(err, err_len, "'%.*s': expected key=value items separated by commas", (int)(n ? n : 1), p);
            return -1;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        char *eq = strchr(item, '=');
        if (!eq || eq == item || eq[1] == '\0') {
            snprintf(err, err_len, "'%s': expected key=value", item);
            return -1;
        }
        *eq = '\0';
        if (fn(item, eq + 1, ctx, err, err_len) != 0) return -1;
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}
