#include "engine/core/json_writer.h"

#include "staleness/histogram.h"

#include <inttypes.h>
#include <math.h>

static void key(json_writer_t *j, const char *k) {
    if (j->need_comma[j->depth]) fputc(',', j->out);
    j->need_comma[j->depth] = 1;
    fprintf(j->out, "\"%s\":", k);  // keys are our own literals: no escaping needed
}

static void open_brace(json_writer_t *j) {
    fputc('{', j->out);
    if (j->depth < 7) j->depth++;
    j->need_comma[j->depth] = 0;
}

void json_begin(json_writer_t *j, FILE *out) {
    j->out = out;
    j->depth = 0;
    j->need_comma[0] = 0;
    open_brace(j);
}

void json_end(json_writer_t *j) {
    fputc('}', j->out);
    if (j->depth > 0) j->depth--;
}

void json_object(json_writer_t *j, const char *k) {
    key(j, k);
    open_brace(j);
}

void json_object_end(json_writer_t *j) { json_end(j); }

void json_string(json_writer_t *j, const char *k, const char *value) {
    key(j, k);
    if (!value) {
        fputs("null", j->out);
        return;
    }
    fputc('"', j->out);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(j->out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(j->out, "\\u%04x", *p);
        else
            fputc(*p, j->out);
    }
    fputc('"', j->out);
}

void json_number(json_writer_t *j, const char *k, double value) {
    key(j, k);
    if (isfinite(value))
        fprintf(j->out, "%.9g", value);
    else
        fputs("null", j->out);
}

void json_uint(json_writer_t *j, const char *k, uint64_t value) {
    key(j, k);
    fprintf(j->out, "%" PRIu64, value);
}

void json_uint_by_index(json_writer_t *j, const char *k, const uint64_t *values, size_t n) {
    json_object(j, k);
    for (size_t i = 0; i < n; i++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        json_uint(j, index, values[i]);
    }
    json_object_end(j);
}

void json_bool(json_writer_t *j, const char *k, int value) {
    key(j, k);
    fputs(value ? "true" : "false", j->out);
}

void json_null(json_writer_t *j, const char *k) {
    key(j, k);
    fputs("null", j->out);
}

void json_number_or_null(json_writer_t *j, const char *k, double value) {
    if (isnan(value))
        json_null(j, k);
    else
        json_number(j, k, value);
}

void json_staleness_quantile(json_writer_t *j, const char *key, const staleness_hist_t *h, double q) {
    if (staleness_hist_quantile_exact(h, q)) {
        json_uint(j, key, staleness_hist_quantile(h, q));
        return;
    }
    char text[32];
    staleness_hist_quantile_text(h, q, text, sizeof text);
    json_string(j, key, text);
}
