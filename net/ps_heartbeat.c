// A worker's heartbeat thread (ps_heartbeat.h).
#include "net/ps_heartbeat.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "net/zmsg.h"

#define NAP_MS 20  // how often the thread looks at its stop flag

struct ps_heartbeat {
    uint64_t run_id;
    uint32_t worker;
    size_t n_shards;
    int interval_ms;
    void **socks;  // (n_shards)
    pthread_t thread;
    int started;
    atomic_int stop;
};

static void nap_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static void *beat(void *arg) {
    ps_heartbeat_t *hb = arg;
    int waited = hb->interval_ms;  // the first beat goes at once
    while (!atomic_load_explicit(&hb->stop, memory_order_acquire)) {
        if (waited >= hb->interval_ms) {
            for (size_t k = 0; k < hb->n_shards; k++) {
                wire_header_t h = zmsg_header(MSG_TYPE_HEARTBEAT, hb->run_id);
                h.sender = hb->worker;
                h.shard = (uint32_t)k;
                char ignored[64];
                // A full queue (an unreachable shard) drops the beat: only the latest ones matter.
                zmsg_send(hb->socks[k], NULL, &h, NULL, 0, 1, ignored, sizeof ignored);
            }
            waited = 0;
        }
        int nap = hb->interval_ms < NAP_MS ? hb->interval_ms : NAP_MS;
        nap_ms(nap);
        waited += nap;
    }
    return NULL;
}

ps_heartbeat_t *ps_heartbeat_start(void *zmq_ctx, uint64_t run_id, uint32_t worker, const char *const *endpoints,
                                   size_t n_shards, int interval_ms, char *err, size_t err_len) {
    if (interval_ms <= 0) {
        snprintf(err, err_len, "heartbeat: interval %d ms; expected > 0", interval_ms);
        return NULL;
    }
    ps_heartbeat_t *hb = calloc(1, sizeof *hb);
    void **socks = calloc(n_shards ? n_shards : 1, sizeof *socks);
    if (!hb || !socks) {
        free(hb);
        free(socks);
        snprintf(err, err_len, "heartbeat: out of memory");
        return NULL;
    }
    hb->run_id = run_id;
    hb->worker = worker;
    hb->n_shards = n_shards;
    hb->interval_ms = interval_ms;
    hb->socks = socks;
    atomic_init(&hb->stop, 0);
    for (size_t k = 0; k < n_shards; k++) {
        hb->socks[k] = zmq_socket(zmq_ctx, ZMQ_DEALER);
        int hwm = 2;
        if (!hb->socks[k]) {
            ZMQ_FAIL("heartbeat: zmq_socket(DEALER)", err, err_len);
            ps_heartbeat_stop(&hb);
            return NULL;
        }
        // ZMTP heartbeats too, so that a connection the network broke is noticed and re-opened at once.
        if (zmsg_socket_defaults(hb->socks[k], interval_ms, err, err_len) != 0 ||
            zmq_setsockopt(hb->socks[k], ZMQ_SNDHWM, &hwm, sizeof hwm) != 0) {
            if (!err[0]) ZMQ_FAIL("heartbeat: zmq_setsockopt(ZMQ_SNDHWM)", err, err_len);
            ps_heartbeat_stop(&hb);
            return NULL;
        }
        char why[400];  // heartbeats are never answered: no frame of the server's is expected
        if (zmsg_connect(hb->socks[k], endpoints[k], WIRE_HEADER_SIZE, why, sizeof why) != 0) {
            snprintf(err, err_len, "heartbeat: %s", why);
            ps_heartbeat_stop(&hb);
            return NULL;
        }
    }
    int rc = pthread_create(&hb->thread, NULL, beat, hb);
    if (rc != 0) {
        snprintf(err, err_len, "heartbeat: starting its thread: %s", strerror(rc));
        ps_heartbeat_stop(&hb);
        return NULL;
    }
    hb->started = 1;
    return hb;
}

void ps_heartbeat_stop(ps_heartbeat_t **hbp) {
    if (!hbp || !*hbp) return;
    ps_heartbeat_t *hb = *hbp;
    atomic_store_explicit(&hb->stop, 1, memory_order_release);
    if (hb->started) pthread_join(hb->thread, NULL);
    for (size_t k = 0; k < hb->n_shards; k++)
        if (hb->socks[k]) zmq_close(hb->socks[k]);
    free(hb->socks);
    free(hb);
    *hbp = NULL;
}
