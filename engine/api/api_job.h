#ifndef ASGD_ENGINE_API_API_JOB_H
#define ASGD_ENGINE_API_API_JOB_H
// The inside of asgd_job_t, and the job as an argument vector for the
// command line's flag tables.
#include <stddef.h>
#include <stdio.h>

#include "asgd/train.h"

#define ASGD_JOB_MAX_FLAGS 128

struct asgd_job {
    size_t n;
    char *flag[ASGD_JOB_MAX_FLAGS];  // without dashes
    char *value[ASGD_JOB_MAX_FLAGS];  // NULL: a switch
};

// argv = lead..., then "--flag" [value] per flag; argv[argc] is NULL. The
// strings are the caller's (lead) and the job's: keep both alive.
typedef struct api_argv {
    int argc;
    char **argv;
    char **dashed;  // the "--flag" strings made here, NULL-terminated
} api_argv_t;

int api_argv_init(api_argv_t *a, const asgd_job_t *job, const char *const *lead, size_t n_lead, char *err,
                  size_t err_len);
void api_argv_free(api_argv_t *a);

#endif
