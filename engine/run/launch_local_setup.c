// A local run's setup and teardown: its run directory, its coordinator, the
// children's environment and table (launch_local_impl.h).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "engine/run/launch_local_impl.h"
#include "engine/run/run_merge.h"
#include "net/wire.h"

int local_run_dir(local_run_t *r) {
    char err[LAUNCH_ERR_LEN];
    if (r->d->run_dir) {
        snprintf(r->dir, sizeof r->dir, "%s", r->d->run_dir);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        mkdir("runs", 0777);
        snprintf(r->dir, sizeof r->dir, "runs/launch-%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
    }
    if (dist_check_writable_dir(r->dir, "--run-dir", err, sizeof err) != 0 ||
        train_args_write_run_config(r->t, r->dir, err, sizeof err) != 0 ||
        run_job_write_process_file(r->job, r->dir, r->job_path, sizeof r->job_path, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    // A directory used again: what says a process of this run is done must be this run's.
    run_merge_clear(r->dir, r->d);
    return 0;
}

extern char **environ;

// The children's environment: this process's, less any DIST_ENV_* of its own,
// plus the run's. Returns 0 or -1 (out of memory).
static int local_run_env(local_run_t *r) {
    size_t n = 0;
    while (environ[n]) n++;
    if (!(r->envp = calloc(n + 4, sizeof *r->envp))) return -1;
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ASGD_LAUNCH_", 12) != 0) r->envp[e++] = environ[i];
    r->envp[e++] = r->env_run_id;
    if (r->d->run_key_secret) {
        snprintf(r->env_public, sizeof r->env_public, DIST_ENV_KEY_PUBLIC "=%s", r->d->run_key_public);
        snprintf(r->env_secret, sizeof r->env_secret, DIST_ENV_KEY_SECRET "=%s", r->d->run_key_secret);
        r->envp[e++] = r->env_public;
        r->envp[e++] = r->env_secret;
    }
    r->envp[e] = NULL;
    return 0;
}

// DIR/join, for asgd worker --join --run-dir DIR: the coordinator, the run id
// and the run's key pair (when it has one); owner-only, created so.
static int local_run_write_join(local_run_t *r, uint64_t run_id, char *err, size_t err_len) {
    char path[1100];
    snprintf(path, sizeof path, "%s/join", r->dir);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        snprintf(err, err_len, "%.300s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "coordinator %s\nrun_id %llu\n", rdv_server_endpoint(r->rdv), (unsigned long long)run_id);
    if (r->d->run_key_secret)
        fprintf(f, "curve_public %s\ncurve_secret %s\n", r->d->run_key_public, r->d->run_key_secret);
    if (fclose(f) != 0) {
        snprintf(err, err_len, "%.300s: writing failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int local_run_start(local_run_t *r) {
    char err[LAUNCH_ERR_LEN] = "";
    if (!(r->ctx = zmq_ctx_new())) {
        launch_say(r, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        return 1;
    }
    // The coordinator meets the primaries and the workers; backups (after the
    // workers in kids) find their primary through the run directory.
    size_t ranks = r->d->servers + r->d->workers;
    r->n_kids = ranks + r->d->servers * (r->d->server_replicas - 1);
    uint64_t run_id = r->run_id = wire_fresh_id(r);
    // The children get the --curve-* flags too: the coordinator here speaks as they do.
    if (dist_security_start(r->d, r->ctx, &r->zap, err, sizeof err) != 0 ||
        !(r->rdv = rdv_server_new_elastic(r->ctx, r->coordinator_bind, ranks + dist_slots(r->d) - r->d->workers, ranks,
                                          run_id, err, sizeof err))) {
        launch_say(r, "starting the coordinator: %s", err);
        return 1;
    }
    if (dist_slots(r->d) > r->d->workers && local_run_write_join(r, run_id, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    snprintf(r->coordinator, sizeof r->coordinator, "%s", rdv_server_endpoint(r->rdv));
    snprintf(r->env_run_id, sizeof r->env_run_id, DIST_ENV_RUN_ID "=%llu", (unsigned long long)run_id);
    if (local_run_env(r) != 0) {
        launch_say(r, "out of memory");
        return 1;
    }
    ssize_t len = readlink("/proc/self/exe", r->exe, sizeof r->exe - 1);
    if (len <= 0) {
        launch_say(r, "cannot find this program's path (/proc/self/exe): %s", strerror(errno));
        return 1;
    }
    r->exe[len] = '\0';
    r->kids = calloc(r->n_kids, sizeof *r->kids);
    r->args = calloc(32, sizeof *r->args);  // up to 15 pairs of flags
    r->server_restarts = calloc(r->d->servers + 1, sizeof *r->server_restarts);
    snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", r->t->checkpoint_dir ? r->t->checkpoint_dir : r->dir);
    if (!r->kids || !r->args || !r->server_restarts) {
        launch_say(r, "out of memory");
        return 1;
    }
    return 0;
}

void local_run_free(local_run_t *r) {
    for (size_t i = 0; i < r->started; i++) {
        if (r->kids[i].out_fd >= 0) close(r->kids[i].out_fd);
        if (r->kids[i].err_fd >= 0) close(r->kids[i].err_fd);
    }
    free(r->kids);
    free(r->args);
    free(r->server_restarts);
    free(r->envp);
    memset(r->env_secret, 0, sizeof r->env_secret);
    memset(&r->key_secret, 0, sizeof r->key_secret);
    rdv_server_destroy(&r->rdv);
    zap_handler_destroy(&r->zap);
    if (r->ctx) zmq_ctx_term(r->ctx);
}

int launch_local_coordinator(const char *given, char *bind, size_t bind_len, char *err, size_t err_len) {
    if (!given) {
        snprintf(bind, bind_len, "tcp://127.0.0.1:*");
        return 0;
    }
    const char *host = strncmp(given, "tcp://", 6) == 0 ? given + 6 : given;
    const char *colon = strrchr(host, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    int loopback =
        colon && ((colon - host == 9 && strncmp(host, "localhost", 9) == 0) || strncmp(host, "127.", 4) == 0);
    if (!colon || *end != '\0' || port <= 0 || port > 65535 || !loopback) {
        snprintf(err, err_len,
                 "--coordinator %s: a local launch hosts the coordinator on this machine; give "
                 "127.0.0.1:PORT (or drop the flag for any free port)",
                 given);
        return -1;
    }
    snprintf(bind, bind_len, "tcp://127.0.0.1:%ld", port);
    return 0;
}
