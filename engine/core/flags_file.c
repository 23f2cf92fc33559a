// Flag files: --config FILE read into a command's words, and the flags a run
// was given written back as such a file (flags_file.h).
#include "engine/core/flags_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void flags_argv_free(flags_argv_t *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n_owned; i++) free(a->argv[i]);
    free(a->argv);
    memset(a, 0, sizeof *a);
}

// The name of the flag word w ("--name" or "--name=value") into name; NULL
// when w is no flag word.
static const char *word_name(const char *w, char *name, size_t len) {
    if (strncmp(w, "--", 2) != 0 || w[2] == '\0') return NULL;
    size_t n = strcspn(w + 2, "=");
    if (n >= len) n = len - 1;
    memcpy(name, w + 2, n);
    name[n] = '\0';
    return name;
}

// Walks argv as flags_parse does. Sets *file to file_flag's value (or NULL) and
// given[i] for each spec named on the command line.
static void scan_command_line(const char *file_flag, const flag_spec_t *specs, size_t n_specs, int argc, char **argv,
                              const char **file, unsigned char *given) {
    *file = NULL;
    for (int i = 0; i < argc; i++) {
        char name[64];
        if (!word_name(argv[i], name, sizeof name)) continue;
        const flag_spec_t *f = flags_find(specs, n_specs, name);
        if (!f) continue;
        given[f - specs] = 1;
        const char *eq = strchr(argv[i], '=');
        const char *value = eq ? eq + 1 : NULL;
        if (!eq && f->type != FLAG_TYPE_BOOL && i + 1 < argc) value = argv[++i];
        if (strcmp(name, file_flag) == 0 && value) *file = value;
    }
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

// The value after '=' (trimmed, unquoted, comment removed) in place; NULL with
// why on a bad quote.
static char *line_value(char *v, const char **why) {
    v = trim(v);
    if (*v == '"') {
        char *close = strrchr(v + 1, '"');
        if (!close) {
            *why = "a quoted value has no closing '\"'";
            return NULL;
        }
        char *rest = trim(close + 1);
        if (*rest && *rest != '#') {
            *why = "text after a quoted value (only a # comment may follow)";
            return NULL;
        }
        *close = '\0';
        return v + 1;
    }
    for (char *p = v; *p; p++) {
        if (*p == '#' && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            break;
        }
    }
    return trim(v);
}

typedef union scratch {
    int i;
    size_t z;
    uint64_t u;
    double d;
    const char *s;
} scratch_t;

// The first byte of text[0..n) that no text file holds (a control
// character other than tab, CR and LF, or DEL), or NULL.
static const char *binary_byte(const char *text, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return text + i;
    }
    return NULL;
}

// The file whole, as text. Opened without blocking and refused unless it is
// a regular file: a FIFO would hang the open or the read until some writer
// came. A file with bytes no text holds is refused by line, never echoed.
static int read_file(const char *path, char **text, char *err, size_t err_len) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, err_len, "%.300s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%.300s: not a regular file (%s); a flag file is a text file", path,
                 S_ISFIFO(st.st_mode)  ? "a FIFO"
                 : S_ISDIR(st.st_mode) ? "a directory"
                                       : "a device or socket");
        close(fd);
        return -1;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, err_len, "%.300s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    char *buf = malloc(FLAGS_FILE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, FLAGS_FILE_MAX_BYTES + 1, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    const char *odd = buf && !bad && n <= FLAGS_FILE_MAX_BYTES ? binary_byte(buf, n) : NULL;
    if (bad || n > FLAGS_FILE_MAX_BYTES || odd) {
        size_t line = 1;
        for (const char *p = buf; odd && p < odd; p++) line += *p == '\n';
        if (odd)
            snprintf(err, err_len, "%.300s:%zu: byte 0x%02x: not a text file (a flag file holds name = value lines)",
                     path, line, (unsigned)(unsigned char)*odd);
        else
            snprintf(err, err_len, "%.300s: %s", path,
                     !buf  ? "out of memory"
                     : bad ? "read failed"
                           : "larger than 1 MiB");
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *text = buf;
    return 0;
}

// Reads path's lines into words ("--name=value", malloc'd) for the flags not
// in given[]; *n_words of them. Returns 0, or -1 with err.
static int read_lines(const char *path, const char *file_flag, const flag_spec_t *specs, size_t n_specs,
                      const unsigned char *given, char **words, size_t *n_words, char *err, size_t err_len) {
    char *text;
    if (read_file(path, &text, err, err_len) != 0) return -1;
    size_t *first_line = calloc(n_specs ? n_specs : 1, sizeof *first_line);
    int rc = first_line ? 0 : -1;
    if (!first_line) snprintf(err, err_len, "%.300s: out of memory", path);
    char *p = text;
    if (strncmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    for (size_t line = 1; rc == 0 && *p; line++) {
        char *end = strchr(p, '\n');
        if (end) *end = '\0';
        char *s = trim(p);
        p = end ? end + 1 : p + strlen(p);
        if (*s == '\0' || *s == '#') continue;
        char where[400];
        snprintf(where, sizeof where, "%.300s:%zu", path, line);
        char *eq = strchr(s, '=');
        char *name = s;
        const char *value = NULL, *why = NULL;
        if (eq) {
            *eq = '\0';
            name = trim(s);
            if (!(value = line_value(eq + 1, &why))) {
                snprintf(err, err_len, "%s: %s", where, why);
                rc = -1;
                break;
            }
        } else {
            char *hash = strpbrk(s, " \t");  // "name   # comment"
            if (hash) {
                *hash = '\0';
                char *rest = trim(hash + 1);
                if (*rest && *rest != '#') {
                    snprintf(err, err_len, "%s: expected 'name = value' or a boolean flag's name alone", where);
                    rc = -1;
                    break;
                }
            }
        }
        if (*name == '\0' || strncmp(name, "-", 1) == 0) {
            snprintf(err, err_len, "%s: '%s': expected a flag's name without dashes (name = value)", where, name);
            rc = -1;
            break;
        }
        const flag_spec_t *f = flags_find(specs, n_specs, name);
        if (!f) {
            snprintf(err, err_len, "%s: unknown flag '%.64s'", where, name);
            rc = -1;
            break;
        }
        if (strcmp(name, file_flag) == 0) {
            snprintf(err, err_len, "%s: %s: a flag file cannot name another", where, name);
            rc = -1;
            break;
        }
        size_t k = (size_t)(f - specs);
        if (first_line[k]) {
            snprintf(err, err_len, "%s: %s given twice (first on line %zu)", where, name, first_line[k]);
            rc = -1;
            break;
        }
        first_line[k] = line;
        if (!value) {
            if (f->type != FLAG_TYPE_BOOL) {
                snprintf(err, err_len, "%s: %s needs a value (%s = %s)", where, name, name,
                         f->value_name ? f->value_name : "VALUE");
                rc = -1;
                break;
            }
            value = "true";
        }
        // The value checked as the command line would check it, on a copy.
        flag_spec_t copy = *f;
        scratch_t scratch;
        copy.target = &scratch;
        if (flags_set(where, &copy, value, err, err_len) != 0) {
            rc = -1;
            break;
        }
        if (given[k]) continue;  // the command line's value wins
        size_t len = strlen(name) + strlen(value) + 4;
        char *w = malloc(len);
        if (!w) {
            snprintf(err, err_len, "%s: out of memory", where);
            rc = -1;
            break;
        }
        snprintf(w, len, "--%s=%s", name, value);
        words[(*n_words)++] = w;
    }
    free(first_line);
    free(text);
    return rc;
}

int flags_file_merge(const char *command, const char *file_flag, const flag_spec_t *specs, size_t n_specs, int argc,
                     char **argv, flags_argv_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    unsigned char *given = calloc(n_specs ? n_specs : 1, 1);
    // Each spec at most once from the file.
    char **words = calloc(n_specs + (size_t)argc + 1, sizeof *words);
    if (!given || !words) {
        free(given);
        free(words);
        snprintf(err, err_len, "%s: out of memory", command);
        return -1;
    }
    const char *file;
    scan_command_line(file_flag, specs, n_specs, argc, argv, &file, given);
    size_t n = 0;
    int rc = 0;
    if (file) {
        if (!flags_find(specs, n_specs, file_flag)) {
            snprintf(err, err_len, "%s: --%s is not a flag here", command, file_flag);
            rc = -1;
        } else {
            rc = read_lines(file, file_flag, specs, n_specs, given, words, &n, err, err_len);
        }
    }
    free(given);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) free(words[i]);
        free(words);
        return -1;
    }
    out->n_owned = n;
    for (int i = 0; i < argc; i++) words[n + (size_t)i] = argv[i];
    out->argc = (int)n + argc;
    out->argv = words;
    return 0;
}

// ---- writing ----

typedef struct text_buf {
    char *s;
    size_t len, cap;
    int failed;
} text_buf_t;

__attribute__((format(printf, 2, 3))) static void buf_add(text_buf_t *b, const char *fmt, ...) {
    if (b->failed) return;
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int w = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->len + (size_t)w < b->cap) {
            b->len += (size_t)w;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)w;
        char *grown = realloc(b->s, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
}

// The shortest of %.15g..%.17g that reads back to v.
static void format_double(double v, char out[32]) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(out, 32, "%.*g", digits, v);
        if (strtod(out, NULL) == v) return;
    }
}

// A string value as a line holds it: quoted when blanks at its ends, a '#' or
// a leading '"' would read differently.
static int needs_quotes(const char *v) {
    size_t n = strlen(v);
    return n == 0 || strchr(v, '#') || *v == '"' || *v == ' ' || *v == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t' ||
           v[n - 1] == '\r';
}

static int skipped(const char *name, const char *const *skip) {
    for (; skip && *skip; skip++)
        if (strcmp(*skip, name) == 0) return 1;
    return 0;
}

char *flags_file_format(const flag_spec_t *specs, size_t n_specs, const char *const *skip, char *err, size_t err_len) {
    text_buf_t b = {NULL, 0, 0, 0};
    buf_add(&b, "%s", "");
    for (size_t i = 0; i < n_specs; i++) {
        const flag_spec_t *f = &specs[i];
        if (!f->seen || skipped(f->name, skip)) continue;
        switch (f->type) {
            case FLAG_TYPE_BOOL:
                if (*(const int *)f->target)
                    buf_add(&b, "%s\n", f->name);
                else
                    buf_add(&b, "%s = false\n", f->name);
                break;
            case FLAG_TYPE_SIZE:
                buf_add(&b, "%s = %zu\n", f->name, *(const size_t *)f->target);
                break;
            case FLAG_TYPE_U64:
                buf_add(&b, "%s = %" PRIu64 "\n", f->name, *(const uint64_t *)f->target);
                break;
            case FLAG_TYPE_DOUBLE: {
                char v[32];
                format_double(*(const double *)f->target, v);
                buf_add(&b, "%s = %s\n", f->name, v);
                break;
            }
            case FLAG_TYPE_STRING: {
                const char *v = *(const char *const *)f->target;
                if (!v) break;
                if (strpbrk(v, "\n")) {
                    snprintf(err, err_len, "--%s: a value with a line break cannot be written to a flag file", f->name);
                    free(b.s);
                    return NULL;
                }
                if (needs_quotes(v))
                    buf_add(&b, "%s = \"%s\"\n", f->name, v);
                else
                    buf_add(&b, "%s = %s\n", f->name, v);
                break;
            }
            case FLAG_TYPE_CHOICE: {
                const char *c = f->choices;
                for (int k = *(const int *)f->target; k > 0 && c; k--) {
                    c = strchr(c, '|');
                    if (c) c++;
                }
                if (c) buf_add(&b, "%s = %.*s\n", f->name, (int)strcspn(c, "|"), c);
                break;
            }
        }
    }
    if (b.failed) {
        snprintf(err, err_len, "out of memory writing the flags");
        free(b.s);
        return NULL;
    }
    return b.s;
}
