// A peer that never ends a message cannot grow a server without bound
// (net/memory_guard.h).
//
// A shard (in a thread, allowance 32 MiB) serves a genuine worker. A raw TCP
// peer speaks ZMTP 3.0 itself (libzmq's own senders never put a message on
// the wire before it is whole) and sends an endless multipart message of
// 1-byte frames. The shard must shut the connection down before the peer has
// sent FLOOD_CAP bytes, count the trip, and hand the memory back; the worker,
// whose connection went down with the rest, reconnects and goes on: its
// pushes before and after are each applied exactly once, bit for bit.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zmq.h>

#include "net/memory_guard.h"
#include "net/ps_client.h"
#include "net/ps_server.h"
#include "tests/support/server_thread.h"
#include "tests/support/test_support.h"

#define RUN_ID 0x7e57000051ad0003ull
#define N 1000
#define ALLOWANCE ((size_t)32 << 20)
#define FLOOD_CAP ((size_t)256 << 20)  // wire bytes: 5 GiB of frames in libzmq if nothing stopped them

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1  // freed memory waits in ASan's quarantine instead of going back
#else
#define UNDER_ASAN 0
#endif

// Reads exactly n bytes.
static void read_exactly(int fd, uint8_t *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        CHECK(r > 0);
        got += (size_t)r;
    }
}

// A ZMTP 3.0 DEALER with the NULL mechanism, connected to port: the greeting
// (signature, version 3.0, "NULL", not a server) and a READY command; then
// the shard's greeting and READY, after which messages may flow.
static int zmtp_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    uint8_t greeting[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
    CHECK(send(fd, greeting, sizeof greeting, MSG_NOSIGNAL) == (ssize_t)sizeof greeting);
    static const uint8_t ready[] = {0x04, 41,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S', 'o', 'c', 'k', 'e', 't',
                                    '-',  'T', 'y', 'p', 'e', 0,   0,   0,   6,   'D', 'E', 'A', 'L', 'E', 'R',
                                    8,    'I', 'd', 'e', 'n', 't', 'i', 't', 'y', 0,   0,   0,   0};
    CHECK(send(fd, ready, sizeof ready, MSG_NOSIGNAL) == (ssize_t)sizeof ready);
    uint8_t theirs[64 + 2 + 255];
    read_exactly(fd, theirs, 64 + 2);
    CHECK(theirs[0] == 0xff && theirs[9] == 0x7f && theirs[10] == 3 && theirs[64] == 0x04);  // a short command
    read_exactly(fd, theirs + 66, theirs[65]);
    CHECK(theirs[66] == 5 && memcmp(theirs + 67, "READY", 5) == 0);
    return fd;
}

// Sends 1-byte frames, each flagged MORE, until the peer shuts the connection
// down (its end: a reset, or the peer's FIN while our data waits for room) or
// FLOOD_CAP bytes went out. Returns the bytes sent.
static size_t flood(int fd) {
    static uint8_t frames[3 * 21845];
    for (size_t i = 0; i < sizeof frames; i += 3) frames[i] = 0x01, frames[i + 1] = 1, frames[i + 2] = 'x';
    size_t sent = 0;
    while (sent < FLOOD_CAP) {
        struct pollfd p = {.fd = fd, .events = POLLOUT | POLLIN | POLLRDHUP};
        if (poll(&p, 1, -1) < 0) {
            CHECK(errno == EINTR);
            continue;
        }
        if (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) break;  // the peer closed its end
        ssize_t n = send(fd, frames, sizeof frames, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        sent += (size_t)n;
    }
    return sent;
}

static void push(ps_client_t *c, const float *g, uint64_t clock) {
    char err[256];
    float *const *frames = ps_client_push_frames(c, err, sizeof err);
    CHECK_OK(frames == NULL, err);
    memcpy(frames[0], g, N * sizeof *g);
    CHECK_OK(ps_client_push_commit(c, clock, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_wait_acks(c, err, sizeof err), err);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char err[256];
    void *ctx = zmq_ctx_new();
    float init[N], g[N], want[N], got[N];
    for (size_t j = 0; j < N; j++) init[j] = want[j] = (float)j * 0.5f, g[j] = (float)(j % 7) - 3.0f;
    // quiet 0: the trip is logged.
    ps_config_t c = {.run_id = RUN_ID,
                     .n_shards = 1,
                     .n_params = N,
                     .n_workers = 1,
                     .mode = SYNC_MODE_ASP,
                     .optimizer = OPTIMIZER_KIND_SGD,
                     .lr = 0.5f,
                     .memory_allowance = ALLOWANCE,
                     .quiet = 0};
    server_thread_t st = {0};
    st.s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK_OK(st.s == NULL, err);
    int port = atoi(ps_server_endpoint(st.s) + strlen("tcp://127.0.0.1:"));
    const char *endpoints[1] = {ps_server_endpoint(st.s)};
    server_thread_start(&st);
    ps_client_t *worker = ps_client_new(ctx, RUN_ID, 0, endpoints, 1, N, 0, 30000, err, sizeof err);
    CHECK_OK(worker == NULL, err);
    push(worker, g, 0);
    size_t before = memory_guard_resident_bytes();

    int fd = zmtp_connect(port);
    size_t sent = flood(fd);
    close(fd);
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    size_t peak = (size_t)ru.ru_maxrss << 10;
    printf(
        "flood: %zu MiB of 1-byte frames sent before the shard shut the connection down (cap %zu MiB); "
        "resident %zu MiB before, peak %zu MiB\n",
        sent >> 20, FLOOD_CAP >> 20, before >> 20, peak >> 20);
    CHECK(sent < FLOOD_CAP);

    // The worker goes on over a new connection: its push and pull get through.
    push(worker, g, 1);
    uint64_t min_clock = 0;
    CHECK_OK(ps_client_pull(worker, 0, got, &min_clock, err, sizeof err), err);
    for (size_t j = 0; j < N; j++) want[j] = want[j] - 0.5f * g[j], want[j] = want[j] - 0.5f * g[j];
    CHECK(memcmp(got, want, sizeof want) == 0);
    // The memory goes back (bounded wait: only a broken guard reaches it).
    size_t after = memory_guard_resident_bytes();
    for (int i = 0; i < 1000 && !UNDER_ASAN && after > before + ALLOWANCE; i++) {
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
        after = memory_guard_resident_bytes();
    }
    printf("resident %zu MiB once the shard had handed the memory back (allowance %zu MiB)%s\n", after >> 20,
           ALLOWANCE >> 20, UNDER_ASAN ? "; not checked under ASan, whose quarantine keeps freed memory" : "");
    CHECK(UNDER_ASAN || after <= before + ALLOWANCE);

    CHECK_OK(ps_client_bye(worker, err, sizeof err), err);
    ps_client_destroy(&worker);
    server_thread_join(&st);  // ends by itself: its worker left
    ps_stats_t s;
    ps_server_stats(st.s, &s);
    printf("shard: %llu trip(s), %llu connection(s) shut down, %llu pushes applied, %llu duplicates\n",
           (unsigned long long)s.memory_trips, (unsigned long long)s.connections_dropped,
           (unsigned long long)s.pushes_applied, (unsigned long long)s.duplicates);
    CHECK(s.memory_trips >= 1 && s.connections_dropped >= 2);  // the flood's and the worker's
    CHECK(s.pushes_applied == 2 && ps_server_pushes_total_per_worker(st.s)[0] == 2);
    ps_server_destroy(&st.s);
    CHECK(zmq_ctx_term(ctx) == 0);
    printf("test_memory_guard: ok\n");
    return 0;
}
