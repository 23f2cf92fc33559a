// A worker's watch on the servers' end (servers_watch.h).
#include "engine/run/servers_watch.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/run/run_record.h"

// Whether shard k's record is there, of this run.
static int record_of_run(const servers_watch_t *w, size_t k) {
    char path[1100], err[600];
    struct stat st;
    run_record_path(path, sizeof path, w->dir, 1, k);
    if (stat(path, &st) != 0) return 0;
    if (st.st_mtim.tv_sec < w->began.tv_sec ||
        (st.st_mtim.tv_sec == w->began.tv_sec && st.st_mtim.tv_nsec < w->began.tv_nsec))
        return 0;  // an earlier run's
    server_result_t r;
    if (run_record_read_server(w->dir, k, &r, err, sizeof err) != 0) return 0;
    int ours = r.run_id == w->run_id;
    server_result_free(&r);
    return ours;
}

static int every_record_there(const servers_watch_t *w) {
    for (size_t k = 0; k < w->servers; k++)
        if (!record_of_run(w, k)) return 0;
    return 1;
}

static void *watch_main(void *arg) {
    servers_watch_t *w = arg;
    while (!atomic_load(&w->stop)) {
        if (every_record_there(w)) {
            atomic_store(&w->finished, 1);
            break;
        }
        struct timespec nap = {0, SERVERS_WATCH_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

int servers_watch_start(servers_watch_t *w, const char *dir, size_t servers, uint64_t run_id, char *err,
                        size_t err_len) {
    memset(w, 0, sizeof *w);
    atomic_init(&w->finished, 0);
    atomic_init(&w->stop, 0);
    w->dir = dir;
    w->servers = servers;
    w->run_id = run_id;
    clock_gettime(CLOCK_REALTIME, &w->began);
    if (!dir || servers == 0) return 0;
    // The thread takes no stop signal: the process's main thread does.
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &was);
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (rc != 0) {
        snprintf(err, err_len, "worker: cannot start a thread: %s", strerror(rc));
        return -1;
    }
    w->running = 1;
    return 0;
}

void servers_watch_stop(servers_watch_t *w) {
    if (!w->running) return;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    w->running = 0;
}
