// A file of a run directory written whole or not at all (dist.h:
// dist_file_open, dist_file_close): the run records and summaries use it, and
// the roles and the launcher use those.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/cli/dist.h"

FILE *dist_file_open(const char *dir, const char *name, char *err, size_t err_len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.%s.tmp", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) snprintf(err, err_len, "%.300s: cannot open for writing: %s", path, strerror(errno));
    return f;
}

int dist_file_close(FILE *f, const char *dir, const char *name, char *err, size_t err_len) {
    char tmp[1024], path[1024];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, err_len, "%.300s: writing failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
