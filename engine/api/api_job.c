// asgd_job_t: a job's flags, kept as the command line would pass them.
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/api/api_job.h"

asgd_job_t *asgd_job_new(char *err, size_t err_len) {
    asgd_job_t *j = calloc(1, sizeof *j);
    if (!j) snprintf(err, err_len, "asgd_job_new: out of memory");
    return j;
}

void asgd_job_destroy(asgd_job_t **job) {
    if (!job || !*job) return;
    for (size_t i = 0; i < (*job)->n; i++) {
        free((*job)->flag[i]);
        free((*job)->value[i]);
    }
    free(*job);
    *job = NULL;
}

static int valid_flag_name(const char *flag) {
    if (!flag || !*flag || flag[0] == '-') return 0;
    for (const char *p = flag; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) return 0;
    return 1;
}

int asgd_job_set(asgd_job_t *job, const char *flag, const char *value, char *err, size_t err_len) {
    if (!valid_flag_name(flag)) {
        snprintf(err, err_len, "asgd_job_set: flag '%s': expected a flag's name without dashes, e.g. \"threads\"",
                 flag ? flag : "(null)");
        return -1;
    }
    size_t i = 0;
    while (i < job->n && strcmp(job->flag[i], flag) != 0) i++;
    if (i == ASGD_JOB_MAX_FLAGS) {
        snprintf(err, err_len, "asgd_job_set: --%s: a job takes at most %d flags", flag, ASGD_JOB_MAX_FLAGS);
        return -1;
    }
    char *f = strdup(flag), *v = value ? strdup(value) : NULL;
    if (!f || (value && !v)) {
        free(f);
        free(v);
        snprintf(err, err_len, "asgd_job_set: --%s: out of memory", flag);
        return -1;
    }
    if (i == job->n)
        job->n++;
    else {
        free(job->flag[i]);
        free(job->value[i]);
    }
    job->flag[i] = f;
    job->value[i] = v;
    return 0;
}

// ---- asgd_job_config_t: one row per field, its flag and its type ----

typedef enum config_type { CONFIG_STRING, CONFIG_COUNT, CONFIG_REAL } config_type_t;

typedef struct config_field {
    const char *flag;
    config_type_t type;
    size_t offset;
} config_field_t;

#define CONFIG_FIELD(flag, type, member) \
    { flag, type, offsetof(asgd_job_config_t, member) }
static const config_field_t config_fields[] = {
    CONFIG_FIELD("model", CONFIG_STRING, model),
    CONFIG_FIELD("data", CONFIG_STRING, data),
    CONFIG_FIELD("test-data", CONFIG_STRING, test_data),
    CONFIG_FIELD("test-frac", CONFIG_REAL, test_frac),
    CONFIG_FIELD("seed", CONFIG_COUNT, seed),
    CONFIG_FIELD("mode", CONFIG_STRING, mode),
    CONFIG_FIELD("threads", CONFIG_COUNT, threads),
    CONFIG_FIELD("epochs", CONFIG_COUNT, epochs),
    CONFIG_FIELD("batch", CONFIG_COUNT, batch),
    CONFIG_FIELD("lr", CONFIG_REAL, lr),
    CONFIG_FIELD("l2", CONFIG_REAL, l2),
    CONFIG_FIELD("optimizer", CONFIG_STRING, optimizer),
    CONFIG_FIELD("momentum", CONFIG_REAL, momentum),
    CONFIG_FIELD("time-limit", CONFIG_REAL, time_limit),
    CONFIG_FIELD("eval-every", CONFIG_COUNT, eval_every),
    CONFIG_FIELD("target-acc", CONFIG_REAL, target_acc),
    CONFIG_FIELD("target-rmse", CONFIG_REAL, target_rmse),
    CONFIG_FIELD("log", CONFIG_STRING, log),
    CONFIG_FIELD("save-model", CONFIG_STRING, save_model),
    CONFIG_FIELD("servers", CONFIG_COUNT, servers),
    CONFIG_FIELD("workers", CONFIG_COUNT, workers),
    CONFIG_FIELD("sync", CONFIG_STRING, sync),
    CONFIG_FIELD("staleness", CONFIG_COUNT, staleness),
    CONFIG_FIELD("server-lr", CONFIG_REAL, server_lr),
};
// Every field is 8 bytes on LP64, so a field added without its row here
// changes the size and stops the build.
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(asgd_job_config_t) == 8 * (sizeof config_fields / sizeof config_fields[0]),
               "every field of asgd_job_config_t has its row in config_fields");
#endif

void asgd_job_config_init(asgd_job_config_t *config) {
    for (size_t i = 0; i < sizeof config_fields / sizeof config_fields[0]; i++) {
        void *field = (char *)config + config_fields[i].offset;
        switch (config_fields[i].type) {
            case CONFIG_STRING:
                *(const char **)field = NULL;
                break;
            case CONFIG_COUNT:
                *(uint64_t *)field = ASGD_JOB_UNSET;
                break;
            case CONFIG_REAL:
                *(double *)field = NAN;
                break;
        }
    }
}

// The field's value as its flag's text into buf; 0 when the field is unset.
static const char *config_value(const asgd_job_config_t *config, const config_field_t *f, char *buf, size_t len) {
    const void *field = (const char *)config + f->offset;
    switch (f->type) {
        case CONFIG_STRING:
            return *(const char *const *)field;
        case CONFIG_COUNT:
            if (*(const uint64_t *)field == ASGD_JOB_UNSET) return NULL;
            snprintf(buf, len, "%" PRIu64, *(const uint64_t *)field);
            return buf;
        case CONFIG_REAL:
            if (isnan(*(const double *)field)) return NULL;
            snprintf(buf, len, "%.17g", *(const double *)field);  // read back to the same double
            return buf;
    }
    return NULL;
}

int asgd_job_configure(asgd_job_t *job, const asgd_job_config_t *config, char *err, size_t err_len) {
    // Set on a copy, then take it: a failure leaves the job untouched.
    asgd_job_t *next = asgd_job_new(err, err_len);
    int rc = next ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < job->n; i++) rc = asgd_job_set(next, job->flag[i], job->value[i], err, err_len);
    for (size_t i = 0; rc == 0 && i < sizeof config_fields / sizeof config_fields[0]; i++) {
        char buf[32];
        const char *value = config_value(config, &config_fields[i], buf, sizeof buf);
        if (value) rc = asgd_job_set(next, config_fields[i].flag, value, err, err_len);
    }
    if (rc == 0) {
        asgd_job_t old = *job;
        *job = *next;
        *next = old;
    }
    asgd_job_destroy(&next);
    return rc;
}

int api_argv_init(api_argv_t *a, const asgd_job_t *job, const char *const *lead, size_t n_lead, char *err,
                  size_t err_len) {
    memset(a, 0, sizeof *a);
    a->argv = calloc(n_lead + 2 * job->n + 1, sizeof *a->argv);  // NULL-terminated, as main's
    a->dashed = calloc(job->n + 1, sizeof *a->dashed);
    if (!a->argv || !a->dashed) goto oom;
    for (size_t i = 0; i < n_lead; i++) a->argv[a->argc++] = (char *)lead[i];
    for (size_t i = 0; i < job->n; i++) {
        size_t len = strlen(job->flag[i]) + 3;
        if (!(a->dashed[i] = malloc(len))) goto oom;
        snprintf(a->dashed[i], len, "--%s", job->flag[i]);
        a->argv[a->argc++] = a->dashed[i];
        if (job->value[i]) a->argv[a->argc++] = job->value[i];
    }
    return 0;
oom:
    api_argv_free(a);
    snprintf(err, err_len, "out of memory for the job's flags");
    return -1;
}

void api_argv_free(api_argv_t *a) {
    for (size_t i = 0; a->dashed && a->dashed[i]; i++) free(a->dashed[i]);
    free(a->dashed);
    free(a->argv);
    memset(a, 0, sizeof *a);
}
