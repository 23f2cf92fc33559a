// A file of a run directory written whole or not at all (dist.h:
// dist_file_open, dist_file_close): the run records and summaries use it, and
// the roles and the launcher use those.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/run/dist.h"

static void tmp_path(char *out, size_t len, const char *dir, const char *name) {
    snprintf(out, len, "%s/.%s.tmp", dir, name);
}

FILE *dist_file_open(const char *dir, const char *name, char *err, size_t err_len) {
    char path[1024];
    tmp_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "w");
    if (!f) snprintf(err, err_len, "%.300s: cannot open for writing: %s", path, strerror(errno));
    return f;
}

// A write that failed (a full disk: the data are buffered, so the error shows
// at the flush in fclose) leaves neither the file nor its temporary copy.
int dist_file_close(FILE *f, const char *dir, const char *name, char *err, size_t err_len) {
    char tmp[1024], path[1024];
    tmp_path(tmp, sizeof tmp, dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int failed = ferror(f);
    int saved = failed ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && !failed) failed = 1, saved = errno;
    if (!failed && rename(tmp, path) != 0) failed = 1, saved = errno;
    if (!failed) return 0;
    unlink(tmp);
    snprintf(err, err_len, "%.300s: writing failed: %s", path, strerror(saved));
    return -1;
}
