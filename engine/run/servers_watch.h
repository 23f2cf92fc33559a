#ifndef ASGD_ENGINE_RUN_SERVERS_WATCH_H
#define ASGD_ENGINE_RUN_SERVERS_WATCH_H
// A worker's watch on the servers' end. A worker the servers evicted
// (silent past --worker-timeout: stopped, swapped out, cut off) may come back
// after they finished the run — every other worker gone — and then waits for
// answers nobody will send. The run directory says when that is so: each
// shard writes its result record there once it has finished (run_record.h).
// A thread looks for all of them every SERVERS_WATCH_MS and raises a flag the
// worker's waits for the servers end on (replica_config_t.servers_finished).
// Only records of this run count: written since the watch began, and naming
// the run's id (a run directory used again holds an earlier run's).
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SERVERS_WATCH_MS 100

typedef struct servers_watch {
    const char *dir;
    size_t servers;
    uint64_t run_id;
    struct timespec began;  // CLOCK_REALTIME, as files' times are
    atomic_int finished;  // 1 once every shard's record is there
    atomic_int stop;
    pthread_t thread;
    int running;
} servers_watch_t;

// Starts watching dir for the records of `servers` shards of run run_id (dir NULL or no
// servers: nothing to watch, finished stays 0). Returns 0, or -1 with err.
int servers_watch_start(servers_watch_t *w, const char *dir, size_t servers, uint64_t run_id, char *err,
                        size_t err_len);
// Stops the thread (when one runs); the flag keeps its value.
void servers_watch_stop(servers_watch_t *w);

#endif
