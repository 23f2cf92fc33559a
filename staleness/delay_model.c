#include "staleness/delay_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_MAX DELAY_MODEL_SPEC_MAX
#define GEOMETRIC_TAIL 1e-6  // default geometric bound: P(delay > max) <= this

static const char kinds_hint[] =
    "expected fixed:K, uniform:A,B, geometric:P[,max=M], trace:FILE or straggler:slow=F[,n=S]";

// A decimal integer in [0, DELAY_MODEL_MAX], nothing else.
static int parse_count(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > DELAY_MODEL_MAX) return -1;
    *out = v;
    return 0;
}

static int parse_real(const char *s, double lo, double hi, int lo_open, double *out) {
    if (!*s) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v > hi || v < lo || (lo_open && v == lo)) return -1;
    *out = v;
    return 0;
}

#define FAIL(...)                                                \
    do {                                                         \
        int n_ = snprintf(err, err_len, "--delay '%s': ", spec); \
        if (n_ < 0 || (size_t)n_ >= err_len) n_ = 0;             \
        snprintf(err + n_, err_len - (size_t)n_, __VA_ARGS__);   \
        return -1;                                               \
    } while (0)

// Splits "key=value" in place; returns the value or NULL when there is no '='.
static char *split_pair(char *item) {
    char *eq = strchr(item, '=');
    if (!eq) return NULL;
    *eq = '\0';
    return eq + 1;
}

// Reads trace:FILE into out->trace: one integer in 0..DELAY_MODEL_MAX a line.
static int load_trace(const char *spec, const char *file, delay_model_t *out, char *err, size_t err_len) {
    if (!*file) FAIL("expected trace:FILE (one delay a line)");
    FILE *f = fopen(file, "r");
    if (!f) FAIL("cannot open '%s': %s", file, strerror(errno));
    char line[128];
    uint64_t cap = 0, lineno = 0;
    out->lo = DELAY_MODEL_MAX;
    out->hi = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n' && !feof(f)) {
            fclose(f);
            FAIL("%s line %llu: longer than %zu characters", file, (unsigned long long)lineno, sizeof line - 2);
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = '\0';
        if (n == 0 || line[0] == '#') continue;
        uint64_t v;
        if (parse_count(line, &v) != 0) {
            fclose(f);
            FAIL("%s line %llu: '%s' is not an integer in 0..%u", file, (unsigned long long)lineno, line,
                 DELAY_MODEL_MAX);
        }
        if (out->trace_len == cap) {
            cap = cap ? 2 * cap : 1024;
            uint32_t *grown = realloc(out->trace, cap * sizeof *grown);
            if (!grown) {
                fclose(f);
                FAIL("%s: no memory for %llu delays", file, (unsigned long long)cap);
            }
            out->trace = grown;
        }
        out->trace[out->trace_len++] = (uint32_t)v;
        if (v < out->lo) out->lo = v;
        if (v > out->hi) out->hi = v;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) FAIL("reading '%s': %s", file, strerror(errno));
    if (!out->trace_len) FAIL("%s holds no delays", file);
    return 0;
}

int delay_model_parse(const char *spec, delay_model_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    char buf[SPEC_MAX];
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, err_len, "--delay: spec longer than %d characters", SPEC_MAX - 1);
        return -1;
    }
    strcpy(buf, spec);
    char *args = strchr(buf, ':');
    if (args) *args++ = '\0';
    const char *kind = buf;
    if (strcmp(kind, "fixed") == 0) {
        out->kind = DELAY_KIND_FIXED;
        if (!args || parse_count(args, &out->lo) != 0)
            FAIL("K '%s' is not an integer in 0..%u", args ? args : "", DELAY_MODEL_MAX);
        out->hi = out->lo;
        return 0;
    }
    if (strcmp(kind, "uniform") == 0) {
        out->kind = DELAY_KIND_UNIFORM;
        char *b = args ? strchr(args, ',') : NULL;
        if (!b) FAIL("expected uniform:A,B (two integers)");
        *b++ = '\0';
        if (parse_count(args, &out->lo) != 0) FAIL("A '%s' is not an integer in 0..%u", args, DELAY_MODEL_MAX);
        if (parse_count(b, &out->hi) != 0) FAIL("B '%s' is not an integer in 0..%u", b, DELAY_MODEL_MAX);
        if (out->hi < out->lo)
            FAIL("B (%llu) must be >= A (%llu)", (unsigned long long)out->hi, (unsigned long long)out->lo);
        return 0;
    }
    if (strcmp(kind, "geometric") == 0) {
        out->kind = DELAY_KIND_GEOMETRIC;
        if (!args) FAIL("expected geometric:P[,max=M]");
        char *rest = strchr(args, ',');
        if (rest) *rest++ = '\0';
        if (parse_real(args, 0.0, 1.0, 1, &out->p) != 0) FAIL("P '%s' is not a number in (0, 1]", args);
        int have_max = 0;
        while (rest) {
            char *item = rest;
            rest = strchr(item, ',');
            if (rest) *rest++ = '\0';
            char *value = split_pair(item);
            if (!value || strcmp(item, "max") != 0) FAIL("unknown field '%s'; expected max=M", item);
            if (parse_count(value, &out->hi) != 0) FAIL("max '%s' is not an integer in 0..%u", value, DELAY_MODEL_MAX);
            have_max = 1;
        }
        if (!have_max) {
            // The smallest M with (1-p)^(M+1) <= tail; p = 1 gives 0.
            double m = out->p >= 1.0 ? 0.0 : ceil(log(GEOMETRIC_TAIL) / log1p(-out->p)) - 1.0;
            out->hi = m < 0 ? 0 : m > DELAY_MODEL_MAX ? DELAY_MODEL_MAX : (uint64_t)m;
        }
        return 0;
    }
    if (strcmp(kind, "trace") == 0) {
        out->kind = DELAY_KIND_TRACE;
        if (!args) FAIL("expected trace:FILE (one delay a line)");
        strcpy(out->trace_file, args);
        if (load_trace(spec, args, out, err, err_len) == 0) return 0;
        delay_model_free(out);
        return -1;
    }
    if (strcmp(kind, "straggler") == 0) {
        out->kind = DELAY_KIND_STRAGGLER;
        out->slow_workers = 1;
        out->slow = NAN;
        char *rest = args;
        while (rest && *rest) {
            char *item = rest;
            rest = strchr(item, ',');
            if (rest) *rest++ = '\0';
            char *value = split_pair(item);
            if (value && strcmp(item, "slow") == 0) {
                if (parse_real(value, 1.0, DELAY_MODEL_MAX, 0, &out->slow) != 0)
                    FAIL("slow '%s' is not a number in [1, %u]", value, DELAY_MODEL_MAX);
            } else if (value && strcmp(item, "n") == 0) {
                if (parse_count(value, &out->slow_workers) != 0)
                    FAIL("n '%s' is not an integer in 0..%u", value, DELAY_MODEL_MAX);
            } else {
                FAIL("unknown field '%s'; expected slow=F or n=S", item);
            }
        }
        if (isnan(out->slow)) FAIL("missing slow=F (a slow worker's time per gradient over a fast one's)");
        return 0;
    }
    FAIL("unknown model '%s'; %s", kind, kinds_hint);
}

void delay_model_free(delay_model_t *m) {
    free(m->trace);
    m->trace = NULL;
    m->trace_len = 0;
}

int delay_model_check(const delay_model_t *m, char *err, size_t err_len) {
    if (m->kind != DELAY_KIND_STRAGGLER) return 0;
    if (m->workers == 0) {
        snprintf(err, err_len, "--delay straggler: needs --simulate-workers W (2..%u)", DELAY_MODEL_MAX);
        return -1;
    }
    if (m->workers < 2 || m->workers > DELAY_MODEL_MAX) {
        snprintf(err, err_len, "--delay straggler: needs --simulate-workers W in 2..%u (got %llu)", DELAY_MODEL_MAX,
                 (unsigned long long)m->workers);
        return -1;
    }
    if (m->slow_workers > m->workers) {
        snprintf(err, err_len, "--delay straggler: n (%llu) must be <= --simulate-workers (%llu)",
                 (unsigned long long)m->slow_workers, (unsigned long long)m->workers);
        return -1;
    }
    return 0;
}

void delay_model_describe(const delay_model_t *m, char *out, size_t out_len) {
    switch (m->kind) {
        case DELAY_KIND_FIXED:
            snprintf(out, out_len, "fixed:%llu", (unsigned long long)m->lo);
            return;
        case DELAY_KIND_UNIFORM:
            snprintf(out, out_len, "uniform:%llu,%llu", (unsigned long long)m->lo, (unsigned long long)m->hi);
            return;
        case DELAY_KIND_GEOMETRIC:
            snprintf(out, out_len, "geometric:%g,max=%llu", m->p, (unsigned long long)m->hi);
            return;
        case DELAY_KIND_TRACE:
            snprintf(out, out_len, "trace:%s (%llu delays in %llu..%llu)", m->trace_file,
                     (unsigned long long)m->trace_len, (unsigned long long)m->lo, (unsigned long long)m->hi);
            return;
        case DELAY_KIND_STRAGGLER:
            snprintf(out, out_len, "straggler:slow=%g,n=%llu (%llu workers)", m->slow,
                     (unsigned long long)m->slow_workers, (unsigned long long)m->workers);
            return;
    }
}

uint64_t delay_model_max_in_flight(const delay_model_t *m) {
    return m->kind == DELAY_KIND_STRAGGLER ? m->workers : m->hi;
}

uint64_t delay_model_duration(const delay_model_t *m, uint64_t worker) {
    if (m->kind != DELAY_KIND_STRAGGLER || worker >= m->slow_workers) return DELAY_MODEL_TIME_UNIT;
    return (uint64_t)llround(m->slow * DELAY_MODEL_TIME_UNIT);
}

void delay_sampler_init(delay_sampler_t *s, const delay_model_t *m, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->model = *m;
    rng_seed(&s->rng, seed, 0x44454c41u);  // "DELA": a stream of its own
    s->log_q = m->kind == DELAY_KIND_GEOMETRIC && m->p < 1.0 ? log1p(-m->p) : 0.0;
}

uint64_t delay_sampler_next(delay_sampler_t *s) {
    const delay_model_t *m = &s->model;
    switch (m->kind) {
        case DELAY_KIND_FIXED:
            return m->lo;
        case DELAY_KIND_UNIFORM:
            return m->lo + rng_below(&s->rng, m->hi - m->lo + 1);
        case DELAY_KIND_GEOMETRIC: {
            if (m->p >= 1.0) return 0;
            // Inversion: floor(log U / log(1-p)) with U in (0, 1].
            double u = 1.0 - rng_uniform(&s->rng);
            double k = floor(log(u) / s->log_q);
            return k >= (double)m->hi ? m->hi : (uint64_t)k;
        }
        case DELAY_KIND_TRACE: {
            uint64_t v = m->trace[s->pos];
            s->pos = s->pos + 1 == m->trace_len ? 0 : s->pos + 1;
            return v;
        }
        case DELAY_KIND_STRAGGLER:
            break;
    }
    return 0;
}

const char *delay_kind_name(delay_kind_t k) {
    switch (k) {
        case DELAY_KIND_UNIFORM:
            return "uniform";
        case DELAY_KIND_GEOMETRIC:
            return "geometric";
        case DELAY_KIND_STRAGGLER:
            return "straggler";
        case DELAY_KIND_TRACE:
            return "trace";
        case DELAY_KIND_FIXED:
            break;
    }
    return "fixed";
}
