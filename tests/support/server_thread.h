#ifndef ASGD_TESTS_SERVER_THREAD_H
#define ASGD_TESTS_SERVER_THREAD_H
// A parameter-server shard serving in a thread of the test: the test makes
// the shard (ps_server_new or _resume) into s, starts it, and later either
// sets stop or lets the shard return by itself once its workers have left.
#include <pthread.h>
#include <stdatomic.h>
#include <zmq.h>

#include "net/ps_server.h"
#include "tests/support/test_support.h"

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

// A shard's configuration for a test: ASP, SGD at lr 0.5, quiet, every
// other field 0; the test changes what it needs.
static inline ps_config_t server_test_config(uint64_t run_id, size_t n_shards, size_t n_params, size_t n_workers) {
    ps_config_t c;
    memset(&c, 0, sizeof c);
    c.run_id = run_id;
    c.n_shards = n_shards;
    c.n_params = n_params;
    c.n_workers = n_workers;
    c.mode = SYNC_MODE_ASP;
    c.optimizer = OPTIMIZER_KIND_SGD;
    c.lr = 0.5f;
    c.adagrad_eps = 1e-8f;
    c.quiet = 1;
    return c;
}

// A DEALER connected to a shard, for a test that speaks the protocol itself:
// no linger, and a receive that gives up after timeout_ms (a broken shard
// fails the test instead of hanging it).
static inline void *server_test_dealer(void *zmq_ctx, const char *endpoint, int timeout_ms) {
    void *d = zmq_socket(zmq_ctx, ZMQ_DEALER);
    CHECK(d != NULL);
    int zero = 0;
    CHECK(zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero) == 0);
    CHECK(zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms) == 0);
    CHECK(zmq_connect(d, endpoint) == 0);
    return d;
}

// Joins the thread (after stop, or once the shard returns by itself) and
// checks that ps_server_run succeeded.
static inline void server_thread_join(server_thread_t *st) {
    CHECK(pthread_join(st->tid, NULL) == 0);
    CHECK_OK(st->rc, st->err);
}

#endif
