// The memory guard of a listening socket (memory_guard.h).
#include "net/memory_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "net/zmq_error.h"

#define CHECK_EVERY_S 0.1  // the serving loop turns at least this often

struct memory_guard {
    void *sock;  // the socket watched (the caller's)
    void *monitor;  // PAIR: its connection events
    size_t allowance;  // bytes
    size_t start;  // resident bytes the growth is measured from
    double next_check;
    int trimmed;  // 0: a trip's freed memory is still to be handed back
    int *fds;  // (n_fds) connections accepted and not yet closed
    size_t n_fds, cap_fds;
};

size_t memory_guard_resident_bytes(void) {
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[128];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    unsigned long long size_pages = 0, resident_pages = 0;
    if (sscanf(text, "%llu %llu", &size_pages, &resident_pages) != 2) return 0;
    long page = sysconf(_SC_PAGESIZE);
    return (size_t)resident_pages * (size_t)(page > 0 ? page : 4096);
}

memory_guard_t *memory_guard_new(void *zmq_ctx, void *sock, size_t allowance, char *err, size_t err_len) {
    memory_guard_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_len, "server: out of memory for its memory guard");
        return NULL;
    }
    g->sock = sock;
    g->allowance = allowance;
    g->trimmed = 1;
    // A name no other guard of this process has had: a destroyed guard's
    // monitor may still hold its name for a moment, and its address may be reused.
    static atomic_ulong guards_made;
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "inproc://asgd-memory-guard-%lu", atomic_fetch_add(&guards_made, 1));
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED;
    if (zmq_socket_monitor(sock, endpoint, events) != 0) {
        ZMQ_FAIL("server: zmq_socket_monitor (the memory guard)", err, err_len);
        free(g);
        return NULL;
    }
    int zero = 0;
    g->monitor = zmq_socket(zmq_ctx, ZMQ_PAIR);
    if (!g->monitor || zmq_setsockopt(g->monitor, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_connect(g->monitor, endpoint) != 0) {
        ZMQ_FAIL("server: connecting the memory guard's monitor", err, err_len);
        memory_guard_destroy(&g);
        return NULL;
    }
    g->start = memory_guard_resident_bytes();
    return g;
}

static void forget_fd(memory_guard_t *g, int fd) {
    for (size_t i = 0; i < g->n_fds; i++)
        if (g->fds[i] == fd) {
            g->fds[i] = g->fds[--g->n_fds];
            return;
        }
}

static int remember_fd(memory_guard_t *g, int fd, char *err, size_t err_len) {
    if (g->n_fds == g->cap_fds) {
        size_t cap = g->cap_fds ? 2 * g->cap_fds : 16;
        int *grown = realloc(g->fds, cap * sizeof *grown);
        if (!grown) {
            snprintf(err, err_len, "server: out of memory for the memory guard's list of %zu connections", cap);
            return -1;
        }
        g->fds = grown;
        g->cap_fds = cap;
    }
    g->fds[g->n_fds++] = fd;
    return 0;
}

// Brings the list of accepted connections up to date with the monitor's events.
static int drain_events(memory_guard_t *g, char *err, size_t err_len) {
    for (;;) {
        zmq_msg_t ev, address;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, g->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            if (errno == EAGAIN) return 0;
            if (errno == EINTR) continue;
            return ZMQ_FAIL("server: reading the memory guard's monitor", err, err_len);
        }
        // An event is two frames: (uint16 event, uint32 value), then the endpoint.
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&value, (const char *)zmq_msg_data(&ev) + 2, 4);
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&address);
            while (zmq_msg_recv(&address, g->monitor, 0) < 0 && errno == EINTR) {
            }
            zmq_msg_close(&address);
        }
        int fd = (int)value;
        if (event == ZMQ_EVENT_ACCEPTED) {
            forget_fd(g, fd);  // a number closed and given out again
            if (remember_fd(g, fd, err, err_len) != 0) return -1;
        } else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED) {
            forget_fd(g, fd);
        }
    }
}

int memory_guard_check(memory_guard_t *g, double now, memory_guard_trip_t *trip, char *err, size_t err_len) {
    if (now < g->next_check) return 0;
    g->next_check = now + CHECK_EVERY_S;
    if (drain_events(g, err, err_len) != 0) return -1;
    size_t resident = memory_guard_resident_bytes();
    if (!g->trimmed) {
        // The connections a trip shut down have been freed by now (libzmq's
        // I/O thread did it): hand the memory back and measure from there.
        malloc_trim(0);
        resident = memory_guard_resident_bytes();
        g->start = resident;
        g->trimmed = 1;
        return 0;
    }
    if (resident == 0 || resident <= g->start || resident - g->start <= g->allowance) return 0;
    trip->grown = resident - g->start;
    trip->connections = g->n_fds;
    // shutdown, not close: the descriptors stay libzmq's, which sees each
    // connection end and frees what it held.
    for (size_t i = 0; i < g->n_fds; i++) shutdown(g->fds[i], SHUT_RDWR);
    g->n_fds = 0;
    g->trimmed = 0;
    return 1;
}

void memory_guard_destroy(memory_guard_t **gp) {
    if (!gp || !*gp) return;
    memory_guard_t *g = *gp;
    zmq_socket_monitor(g->sock, NULL, 0);
    if (g->monitor) zmq_close(g->monitor);
    free(g->fds);
    free(g);
    *gp = NULL;
}
