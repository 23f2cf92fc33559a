#ifndef ASGD_TESTS_SERVER_THREAD_H
#define ASGD_TESTS_SERVER_THREAD_H
// A parameter-server shard serving in a thread of the test: the test makes
// the shard (ps_server_new or _resume) into s, starts it, and later either
// sets stop or lets the shard return by itself once its workers have left.
#include <pthread.h>
#include <stdatomic.h>

#include "net/ps_server.h"  // defines: ps_server_t, ps_server_run
#include "test_support.h"

typedef struct server_thread {
    ps_server_t *s;
    atomic_int stop;
    pthread_t tid;
    int rc;  // ps_server_run's, read after the join
    char err[512];
} server_thread_t;

static inline void *server_thread_main(void *arg) {
    server_thread_t *st = arg;
    st->rc = ps_server_run(st->s, &st->stop, st->err, sizeof st->err);
    return NULL;
}

static inline void server_thread_start(server_thread_t *st) {
    atomic_init(&st->stop, 0);
    CHECK(pthread_create(&st->tid, NULL, server_thread_main, st) == 0);
}

// Joins the thread (after stop, or once the shard returns by itself) and
// checks that ps_server_run succeeded.
static inline void server_thread_join(server_thread_t *st) {
    CHECK(pthread_join(st->tid, NULL) == 0);
    CHECK_OK(st->rc, st->err);
}

#endif
