// What the processes of a run share: the run id, the run directory's checks, endpoints, staleness JSON (dist.h).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/partition.h"
#include "engine/run/dist.h"
#include "engine/replica/collective.h"
#include "engine/replica/collective_mpi.h"
#include "engine/replica/global_eval.h"
#include "engine/core/json_writer.h"
#include "engine/core/test_hooks.h"
#include "engine/run/model_file.h"
#include "engine/run/run_record.h"
#include "engine/run/servers_watch.h"
#include "engine/run/worker_live.h"
#include "engine/replica/replica.h"
#include "engine/replica/worker_checkpoint.h"
#include "engine/core/run_report.h"
#include "net/ps_client.h"
#include "net/curve_auth.h"
#include "kernels/foundation/trace.h"
#include "net/ps_server.h"
#include "net/ps_replica.h"
#include "net/rendezvous.h"
#include "net/shm_frames.h"
#include "net/stop_signal.h"
#include "net/ring.h"
#include "net/wire.h"
#include "staleness/delay.h"
#include "staleness/histogram.h"

#include "engine/run/dist_roles.h"

uint64_t dist_default_run_id(const char *coordinator) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const char *p = coordinator; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ? h : 1;
}

// ---- helpers -------------------------------------------------------------------

static int make_dir(const char *dir, const char *flag, char *err, size_t err_len) {
    if (!dir) return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        int last = *p == '\0';
        if (*p == '/' || last) {
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                snprintf(err, err_len, "%s %.300s: cannot create %.300s: %s", flag, dir, path, strerror(errno));
                return -1;
            }
            if (last) break;
            *p = '/';
        }
    }
    return 0;
}

int dist_make_run_dir(const char *dir, char *err, size_t err_len) { return make_dir(dir, "--run-dir", err, err_len); }

int dist_check_writable_dir(const char *dir, const char *flag, char *err, size_t err_len) {
    if (make_dir(dir, flag, err, err_len) != 0) return -1;
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.asgd-write-check.XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(err, err_len, "%s %.300s: cannot write there (%s)", flag, dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

int dist_check_writable_file(const char *path, const char *flag, char *err, size_t err_len) {
    if (!path) return 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s %.300s: is a directory; expected a file to write", flag, path);
        return -1;
    }
    // Created and removed when new, opened without truncating when not: the
    // check leaves the file system as it was.
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), created = fd >= 0;
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "%s %.300s: cannot write there: %s", flag, path, strerror(errno));
        return -1;
    }
    close(fd);
    if (created) unlink(path);
    return 0;
}

// The endpoint others should dial: a wildcard bind is advertised under this host's name.
uint64_t dist_peak_rss_bytes(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0 || u.ru_maxrss < 0) return 0;
    return (uint64_t)u.ru_maxrss * 1024u;  // Linux counts kilobytes
}

void dist_json_transport(json_writer_t *j, const dist_args_t *d) {
    json_string(j, "ps_transport",
                dist_ps_transport_name(d->ps_transport == PS_TRANSPORT_SHM ? PS_TRANSPORT_SHM : PS_TRANSPORT_TCP));
    shm_frames_counts_t c;
    shm_frames_counts(&c);
    json_uint(j, "messages_sent_by_reference", c.packed);
    json_uint(j, "payloads_sent_without_copy", c.without_copy);
    json_uint(j, "messages_received_by_reference", c.unpacked);
    json_uint(j, "messages_inline_for_want_of_slot", c.inline_for_want_of_slot);
}

uint64_t dist_memory_available(void) {
    const char *forced = test_hook_value(TEST_HOOK_MEMORY_AVAILABLE);
    if (forced) return strtoull(forced, NULL, 10);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024u;
}

int dist_model_fits(size_t params, size_t threads, char *err, size_t err_len) {
    uint64_t available = dist_memory_available();
    // The weights, and per thread a gradient (a value, an index and a mark per parameter).
    uint64_t need = (uint64_t)params * (sizeof(float) + threads * (2 * sizeof(float) + 1));
    if (available == 0 || need <= available) return 0;
    snprintf(err, err_len,
             "the model's %zu parameters need %.1f MB (its weights and each of %zu threads' gradients), more than "
             "the %.1f MB this machine has available: train a smaller model, or spread it over parameter servers "
             "(asgd launch --servers)",
             params, (double)need / 1e6, threads, (double)available / 1e6);
    return -1;
}

void dist_advertise(const char *bound, char *out, size_t out_len) {
    const char *wild = strstr(bound, "0.0.0.0");
    if (!wild) {
        snprintf(out, out_len, "%s", bound);
        return;
    }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(out, out_len, "%.*s%s%s", (int)(wild - bound), bound, host, wild + strlen("0.0.0.0"));
}

void dist_json_staleness(json_writer_t *j, const char *key, const staleness_hist_t *h) {
    json_object(j, key);
    json_uint(j, "updates", h->count);
    json_number(j, "mean", staleness_hist_mean(h));
    json_staleness_quantile(j, "p50", h, 0.5);
    json_staleness_quantile(j, "p99", h, 0.99);
    json_uint(j, "max", h->max);
    json_object_end(j);
}

// --save-model: parameters [first, first + count) of model m (all of them, or
// a server's shard) as a model file (model_file.h), with the run's split.
int dist_save_model(const char *path, const model_t *m, const model_file_split_t *split, size_t first, size_t count,
                    const float *values, char *err, size_t err_len) {
    model_file_info_t *info = malloc(sizeof *info);
    int rc = -1;
    if (!info)
        snprintf(err, err_len, "--save-model %s: out of memory", path);
    else if (model_file_info_of(m, info, err, err_len) == 0) {
        info->first = first;
        info->count = count;
        info->split = *split;
        rc = model_file_write(path, "--save-model", info, values, err, err_len);
    }
    free(info);
    return rc;
}
