#ifndef ASGD_ENGINE_CORE_JSON_WRITER_H
#define ASGD_ENGINE_CORE_JSON_WRITER_H
// Writes one JSON object to a stream, field by field: enough for run summaries.
// Non-finite numbers are written as null (JSON has no NaN).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct json_writer {
    FILE *out;
    int depth;
    int need_comma[8];
} json_writer_t;

void json_begin(json_writer_t *j, FILE *out);  // "{"
void json_end(json_writer_t *j);  // "}" (no newline)
void json_object(json_writer_t *j, const char *key);  // "key": {
void json_object_end(json_writer_t *j);
void json_string(json_writer_t *j, const char *key, const char *value);  // NULL -> null
void json_number(json_writer_t *j, const char *key, double value);
void json_uint(json_writer_t *j, const char *key, uint64_t value);
// "key": {"0": values[0], "1": values[1], ...}: per-worker counts keyed by id.
void json_uint_by_index(json_writer_t *j, const char *key, const uint64_t *values, size_t n);
void json_bool(json_writer_t *j, const char *key, int value);
void json_null(json_writer_t *j, const char *key);
void json_number_or_null(json_writer_t *j, const char *key, double value);  // NaN -> null
// A staleness quantile (staleness/histogram.h): the number, or the string
// ">= 1023" where it lies in the overflow bin and only that bound is known.
struct staleness_hist;
void json_staleness_quantile(json_writer_t *j, const char *key, const struct staleness_hist *h, double q);

#endif
