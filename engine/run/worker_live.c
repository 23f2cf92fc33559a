// A worker's live counts (worker_live.h).
#include "engine/run/worker_live.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Fixed widths: every write is the same length, at offset 0, in one call.
#define LIVE_FORMAT "%20llu %20.3f %20.6f %20llu %20llu %20llu\n"
#define LIVE_BYTES 127

void worker_live_path(char *out, size_t len, const char *dir, size_t worker) {
    snprintf(out, len, "%s/worker-%zu.live", dir, worker);
}

static void write_point(const worker_live_t *l, const train_point_t *p) {
    char line[LIVE_BYTES + 1];
    uint64_t pushes = 0, pulls = 0;
    if (l->exchanges) replica_live_read(l->exchanges, &pushes, &pulls);
    int n = snprintf(line, sizeof line, LIVE_FORMAT, (unsigned long long)p->samples, p->samples_per_s, p->wall_s,
                     (unsigned long long)p->updates, (unsigned long long)pushes, (unsigned long long)pulls);
    if (n == LIVE_BYTES - 1 && pwrite(l->fd, line, (size_t)n, 0) != n) {
        // A progress line missed: the next tick writes it again.
    }
}

static void live_on_eval(const train_point_t *p, void *ctx) {
    worker_live_t *l = ctx;
    write_point(l, p);
    if (l->next.on_eval) l->next.on_eval(p, l->next.ctx);
}

static void live_on_progress(const train_point_t *p, double eta_s, void *ctx) {
    worker_live_t *l = ctx;
    write_point(l, p);
    if (l->next.on_progress) l->next.on_progress(p, eta_s, l->next.ctx);
}

int worker_live_open(worker_live_t *l, const char *dir, size_t worker, const replica_live_t *exchanges,
                     train_callbacks_t next, train_callbacks_t *out, char *err, size_t err_len) {
    l->fd = -1;
    l->next = next;
    l->exchanges = exchanges;
    *out = next;
    if (!dir) return 0;
    char path[1100];
    worker_live_path(path, sizeof path, dir, worker);
    if ((l->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644)) < 0) {
        snprintf(err, err_len, "%.300s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    *out = (train_callbacks_t){live_on_eval, live_on_progress, l};
    return 0;
}

void worker_live_close(worker_live_t *l) {
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}

int worker_live_read(const char *dir, size_t worker, worker_live_counts_t *c) {
    char path[1100], line[LIVE_BYTES + 1];
    worker_live_path(path, sizeof path, dir, worker);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    ssize_t got = read(fd, line, LIVE_BYTES);
    close(fd);
    if (got != LIVE_BYTES - 1) return 0;
    line[got] = '\0';
    unsigned long long samples, steps, pushes, pulls;
    if (sscanf(line, "%llu %lf %lf %llu %llu %llu", &samples, &c->samples_per_s, &c->wall_s, &steps, &pushes, &pulls) !=
        6)
        return 0;
    c->samples = (double)samples;
    c->steps = (double)steps;
    c->pushes = (double)pushes;
    c->pulls = (double)pulls;
    return 1;
}
