// asgd_job_t: a job's flags, kept as the command line would pass them.
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
    if (i == job->n) job->n++;
    else {
        free(job->flag[i]);
        free(job->value[i]);
    }
    job->flag[i] = f;
    job->value[i] = v;
    return 0;
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
