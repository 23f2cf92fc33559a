// A joiner's DIR/join, which asgd launch writes (dist.h).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/run/dist.h"

int dist_join_file_read(dist_args_t *d, dist_join_file_t *jf, char *err, size_t err_len) {
    char path[1100];
    snprintf(path, sizeof path, "%s/join", d->run_dir);
    FILE *f = fopen(path, "r");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        snprintf(err, err_len,
                 "--join --run-dir %s: cannot read %s (%s): give --coordinator, or the run "
                 "directory of a running asgd launch",
                 d->run_dir, path, strerror(errno));
        if (f) fclose(f);
        return 2;
    }
    if (st.st_mode & 077) {
        snprintf(err, err_len, "--join --run-dir: %s is readable by others (mode %03o); it holds the run's key", path,
                 (unsigned)(st.st_mode & 0777));
        fclose(f);
        return 2;
    }
    char line[400], key[32], val[256];
    unsigned long long run_id = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%31s %255s", key, val) != 2) continue;
        if (strcmp(key, "coordinator") == 0)
            snprintf(jf->coordinator, sizeof jf->coordinator, "%s", val);
        else if (strcmp(key, "run_id") == 0)
            run_id = strtoull(val, NULL, 10);
        else if (strcmp(key, "curve_public") == 0)
            snprintf(jf->pub, sizeof jf->pub, "%.63s", val);
        else if (strcmp(key, "curve_secret") == 0)
            snprintf(jf->sec, sizeof jf->sec, "%.63s", val);
    }
    fclose(f);
    if (!jf->coordinator[0] || !run_id) {
        snprintf(err, err_len, "--join --run-dir: %s names no coordinator or run id", path);
        return 2;
    }
    d->coordinator = jf->coordinator;
    if (!d->run_id) d->run_id = run_id;
    if (jf->pub[0] && jf->sec[0] && !d->curve_server_key && !d->insecure)
        d->run_key_public = jf->pub, d->run_key_secret = jf->sec;
    return 0;
}
