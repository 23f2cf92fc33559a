// Rendezvous over real sockets on 127.0.0.1: five processes that start in any
// order learn one identical table; foreign and malformed messages are dropped
// and counted; a joiner without a coordinator gives up at its timeout, saying
// how many joins it sent. Under CURVE, its message speaks of keys only when
// the coordinator refused its key (a wrong --curve-server-key), not when no
// coordinator was there. No check depends on elapsed time.
#include <errno.h>
#include <inttypes.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "net/curve_auth.h"
#include "net/rendezvous.h"
#include "net/zmsg.h"
#include "tests/support/proc_support.h"
#include "tests/support/test_support.h"

#define RUN_ID 0x5eed0000c0ffee11ull

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

// A port that was free a moment ago, for a coordinator that must be known
// before it starts (below the ephemeral range: proc_support.h).
static int free_port(void) { return proc_free_port(); }

// Sends one JOIN over a raw DEALER; body NULL means the well-formed line.
static void send_join(void *sock, uint64_t run_id, uint32_t sender, uint32_t n, const char *body) {
    char err[256];
    wire_header_t h = zmsg_header(MSG_TYPE_RDV_JOIN, run_id);
    h.sender = sender;
    h.aux = n;
    h.payload_kind = PAYLOAD_KIND_TEXT;
    h.count = (uint32_t)strlen(body);
    zmq_msg_t f;
    CHECK_OK(zmsg_frame_alloc(&f, h.count, err, sizeof err), err);
    memcpy(zmq_msg_data(&f), body, h.count);
    CHECK_OK(zmsg_send(sock, NULL, &h, &f, 1, 0, err, sizeof err), err);
}

// Messages that are not joins of this run; returns how many were sent.
static size_t send_garbage(void *sock, uint32_t n) {
    char err[256];
    size_t sent = 0;
    send_join(sock, RUN_ID + 1, 1, n, "1 1 tcp://10.9.9.9:1\n");  // another run
    sent++;
    CHECK(zmq_send(sock, "garbage", 7, 0) == 7);  // not a protocol header at all
    sent++;
    // A header whose checksum does not cover its payload.
    wire_header_t h = zmsg_header(MSG_TYPE_RDV_JOIN, RUN_ID);
    h.aux = n;
    h.payload_kind = PAYLOAD_KIND_TEXT;
    h.count = 16;
    h.checksum = 12345;
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(&h, bytes);
    CHECK(zmq_send(sock, bytes, sizeof bytes, ZMQ_SNDMORE) == (int)sizeof bytes);
    CHECK(zmq_send(sock, "0 0 tcp://x:1\n\n\n", 16, 0) == 16);
    sent++;
    // A valid message of this run that is not a join.
    wire_header_t hello = zmsg_header(MSG_TYPE_HELLO, RUN_ID);
    CHECK_OK(zmsg_send(sock, NULL, &hello, NULL, 0, 0, err, sizeof err), err);
    sent++;
    return sent;
}

// ---- five processes ----------------------------------------------------------

#define N_PROCS 5

// One rank's process: bind its own endpoint, (rank 0) run the coordinator,
// join, and write "me ENDPOINT" and the table to fd.
static int rank_main(int rank, int delay_ms, const char *coordinator, int fd) {
    usleep((useconds_t)delay_ms * 1000);
    char err[512];
    void *ctx = zmq_ctx_new();
    void *own = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(own, ZMQ_LINGER, &zero, sizeof zero);
    rdv_entry_t me = {.rank = (uint32_t)rank, .role = rank < 2 ? 0 : 1};
    CHECK_OK(net_bind_ephemeral(own, "127.0.0.1", me.endpoint, sizeof me.endpoint, err, sizeof err), err);

    rdv_server_t *server = NULL;
    const char *join_at = coordinator;
    if (rank == 0) {
        server = rdv_server_new(ctx, coordinator, N_PROCS, RUN_ID, err, sizeof err);
        if (!server) {
            fprintf(stderr, "rank 0: %s\n", err);
            return 1;
        }
        join_at = rdv_server_endpoint(server);
        CHECK(strcmp(join_at, coordinator) == 0);
    }
    rdv_entry_t *table = NULL;
    if (rdv_join(ctx, join_at, RUN_ID, &me, N_PROCS, &table, 8000, err, sizeof err) != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    if (server) {
        CHECK_OK(rdv_server_wait(server, 8000, err, sizeof err), err);
        // The garbage sent before the coordinator started is dropped and counted
        // (its sender stays connected until every rank is done; 60 s: a hang bound).
        int64_t end = now_ms() + 60000;
        while (rdv_server_dropped(server) < 4 && now_ms() < end) usleep(10000);
        CHECK(rdv_server_dropped(server) == 4);
        rdv_server_destroy(&server);
        CHECK(server == NULL);
    }
    FILE *f = fdopen(fd, "w");
    CHECK(f);
    fprintf(f, "me %s\n", me.endpoint);
    for (size_t i = 0; i < N_PROCS; i++) fprintf(f, "%u %u %s\n", table[i].rank, table[i].role, table[i].endpoint);
    CHECK(fclose(f) == 0);
    free(table);
    zmq_close(own);
    zmq_ctx_term(ctx);
    return 0;
}

// Foreign and malformed messages, sent before the coordinator is up; the
// socket stays open until the parent closes `done` (every rank has exited,
// rank 0 after counting them), so libzmq delivers them whenever it comes up.
static int garbage_main(const char *coordinator, int done) {
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(sock, coordinator) == 0);
    CHECK(send_garbage(sock, N_PROCS) == 4);
    char byte;
    while (read(done, &byte, 1) != 0) {  // end of file: the parent is done
        if (errno != EINTR) break;
    }
    close(done);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return 0;
}

static void test_processes(void) {
    int64_t t0 = now_ms();
    char coordinator[64];
    snprintf(coordinator, sizeof coordinator, "tcp://127.0.0.1:%d", free_port());
    // Ranks 1 and 2 start before the coordinator (rank 0, at 1 s), 3 and 4 after it.
    const int delay_ms[N_PROCS] = {1000, 0, 100, 1300, 1500};
    int fds[N_PROCS];
    pid_t pids[N_PROCS + 1];
    fflush(NULL);
    for (int r = 0; r < N_PROCS; r++) {
        int p[2];
        CHECK(pipe(p) == 0);
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0) {
            close(p[0]);
            exit(rank_main(r, delay_ms[r], coordinator, p[1]));
        }
        close(p[1]);
        fds[r] = p[0];
    }
    int done[2];
    CHECK(pipe(done) == 0);
    pids[N_PROCS] = fork();
    CHECK(pids[N_PROCS] >= 0);
    if (pids[N_PROCS] == 0) {
        close(done[1]);
        for (int r = 0; r < N_PROCS; r++) close(fds[r]);
        exit(garbage_main(coordinator, done[0]));
    }
    close(done[0]);

    for (int i = 0; i <= N_PROCS; i++) {
        if (i == N_PROCS) close(done[1]);  // every rank exited: the garbage sender may go
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "process %d (%s) failed: status %#x\n", i, i < N_PROCS ? "rank" : "garbage", status);
            exit(1);
        }
    }
    // Every rank holds the same table, and entry r is what rank r bound.
    char tables[N_PROCS][2048], mine[N_PROCS][256];
    for (int r = 0; r < N_PROCS; r++) {
        char buf[4096];
        ssize_t n, len = 0;
        while ((n = read(fds[r], buf + len, sizeof buf - 1 - (size_t)len)) > 0) len += n;
        close(fds[r]);
        buf[len] = '\0';
        char *nl = strchr(buf, '\n');
        CHECK(nl && strncmp(buf, "me ", 3) == 0);
        *nl = '\0';
        CHECK(strlen(buf + 3) < sizeof mine[r] && strlen(nl + 1) < sizeof tables[r]);
        memcpy(mine[r], buf + 3, strlen(buf + 3) + 1);
        memcpy(tables[r], nl + 1, strlen(nl + 1) + 1);
    }
    for (int r = 1; r < N_PROCS; r++) {
        if (strcmp(tables[r], tables[0]) != 0) {
            fprintf(stderr, "rank %d's table differs from rank 0's:\n%s---\n%s", r, tables[r], tables[0]);
            exit(1);
        }
    }
    const char *line = tables[0];
    for (int r = 0; r < N_PROCS; r++) {
        unsigned rank, role;
        char ep[256];
        CHECK(sscanf(line, "%u %u %255s", &rank, &role, ep) == 3);
        CHECK(rank == (unsigned)r && role == (r < 2 ? 0u : 1u));
        CHECK(strcmp(ep, mine[r]) == 0);
        line = strchr(line, '\n') + 1;
    }
    CHECK(*line == '\0');
    printf("five processes: identical tables in %" PRId64 " ms\n", now_ms() - t0);
}

// ---- one process: drops counted exactly --------------------------------------

// Receives one message on sock within timeout_ms; returns its text payload (static) or NULL.
static const char *recv_table(void *sock, int timeout_ms) {
    static char text[4096];
    zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) != 1) return NULL;
    zmsg_t m;
    char err[256];
    CHECK(zmsg_recv(sock, 0, RUN_ID, &m, err, sizeof err) == 1);
    CHECK(m.h.type == MSG_TYPE_RDV_TABLE && m.h.payload_kind == PAYLOAD_KIND_TEXT && m.h.count < sizeof text);
    memcpy(text, zmsg_payload(&m, 0), m.h.count);
    text[m.h.count] = '\0';
    zmsg_close(&m);
    return text;
}

static void test_drops(void) {
    char err[512];
    void *ctx = zmq_ctx_new();
    rdv_server_t *s = rdv_server_new(ctx, "tcp://127.0.0.1:0", 3, RUN_ID, err, sizeof err);
    CHECK_OK(s ? 0 : -1, err);
    const char *ep = rdv_server_endpoint(s);
    CHECK(strncmp(ep, "tcp://127.0.0.1:", 16) == 0 && atoi(ep + 16) > 0);

    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(raw, ep) == 0);
    size_t dropped = send_garbage(raw, 3);
    send_join(raw, RUN_ID, 0, 3, "x y z\n");  // does not parse
    send_join(raw, RUN_ID, 1, 3, "0 0 tcp://127.0.0.1:1000\n");  // header and body disagree
    send_join(raw, RUN_ID, 0, 3, "0 0 tcp://127.0.0.1:1000\nextra");
    send_join(raw, RUN_ID, 7, 3, "7 1 tcp://127.0.0.1:1007\n");  // rank out of range
    send_join(raw, RUN_ID, 0, 4, "0 0 tcp://127.0.0.1:1000\n");  // expects 4 ranks
    dropped += 5;
    send_join(raw, RUN_ID, 0, 3, "0 0 tcp://127.0.0.1:1000\n");
    send_join(raw, RUN_ID, 0, 3, "0 0 tcp://127.0.0.1:1000\n");  // a retry: fine
    send_join(raw, RUN_ID, 0, 3, "0 0 tcp://127.0.0.1:1001\n");  // rank 0 taken by another endpoint
    send_join(raw, RUN_ID, 0, 3, "0 1 tcp://127.0.0.1:1000\n");  // ... or another role
    dropped += 2;
    send_join(raw, RUN_ID, 1, 3, "1 0 tcp://127.0.0.1:1001\n");

    // The table cannot complete before rank 1's join, the last message on
    // `raw`, so every drop above has been counted when rdv_join returns.
    rdv_entry_t me = {.rank = 2, .role = 1}, *table = NULL;
    snprintf(me.endpoint, sizeof me.endpoint, "tcp://127.0.0.1:1002");
    CHECK_OK(rdv_join(ctx, ep, RUN_ID, &me, 3, &table, 5000, err, sizeof err), err);
    CHECK_OK(rdv_server_wait(s, 5000, err, sizeof err), err);
    CHECK_OK(rdv_server_wait(s, 0, err, sizeof err), err);  // done stays done
    CHECK(rdv_server_dropped(s) == dropped);
    const char *want = "0 0 tcp://127.0.0.1:1000\n1 0 tcp://127.0.0.1:1001\n2 1 tcp://127.0.0.1:1002\n";
    for (uint32_t i = 0; i < 3; i++) CHECK(table[i].rank == i);
    CHECK(strcmp(table[1].endpoint, "tcp://127.0.0.1:1001") == 0 && table[2].role == 1);
    free(table);

    // Ranks 0 and 1 joined over `raw`: one table each, then one more for a late retry.
    for (int i = 0; i < 2; i++) {
        const char *t = recv_table(raw, 2000);
        CHECK(t && strcmp(t, want) == 0);
    }
    CHECK(recv_table(raw, 100) == NULL);
    send_join(raw, RUN_ID, 1, 3, "1 0 tcp://127.0.0.1:1001\n");
    const char *again = recv_table(raw, 2000);
    CHECK(again && strcmp(again, want) == 0);
    CHECK(rdv_server_dropped(s) == dropped);

    zmq_close(raw);
    rdv_server_destroy(&s);
    CHECK(s == NULL);
    rdv_server_destroy(&s);  // NULL is fine
    rdv_server_destroy(NULL);
    zmq_ctx_term(ctx);
    printf("drops: %zu foreign or malformed messages dropped and counted\n", dropped);
}

// ---- any rank of a role (ps-lite: no process knows its rank) -------------------

// Receives one table on sock within timeout_ms; returns the rank it answers
// (the header's sender) and fills text, or fails the test.
static uint32_t recv_table_for(void *sock, char *text, size_t cap, int timeout_ms) {
    zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
    CHECK(zmq_poll(&item, 1, timeout_ms) == 1);
    zmsg_t m;
    char err[256];
    CHECK(zmsg_recv(sock, 0, RUN_ID, &m, err, sizeof err) == 1);
    CHECK(m.h.type == MSG_TYPE_RDV_TABLE && m.h.payload_kind == PAYLOAD_KIND_TEXT && m.h.count < cap);
    memcpy(text, zmsg_payload(&m, 0), m.h.count);
    text[m.h.count] = '\0';
    uint32_t sender = m.h.sender;
    zmsg_close(&m);
    return sender;
}

static void test_any_rank(void) {
    char err[512], text[4096];
    void *ctx = zmq_ctx_new();
    const size_t counts[2] = {1, 3};  // role 0: rank 0 (a server); role 1: ranks 1..3 (workers)
    rdv_server_t *s = rdv_server_new_roles(ctx, "tcp://127.0.0.1:0", counts, 2, RUN_ID, err, sizeof err);
    CHECK_OK(s ? 0 : -1, err);
    const char *ep = rdv_server_endpoint(s);
    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(raw, ep) == 0);

    // One connection delivers in order: first come, first served. Every
    // worker advertises "-": only its name tells it apart.
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 - w-first\n");  // rank 1
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 - w-first\n");  // a retry: rank 1 again, not a second rank
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 - w-second\n");  // rank 2
    size_t dropped = 0;
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 -\n");  // any rank without a name
    send_join(raw, RUN_ID, 3, 4, "* 1 - w-x\n");  // any rank, but the header names rank 3
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 2 - w-y\n");  // role 2 is not in the layout
    send_join(raw, RUN_ID, 0, 4, "0 1 tcp://127.0.0.1:1000\n");  // rank 0 is role 0's, not role 1's
    send_join(raw, RUN_ID, 1, 4, "1 1 - w-other\n");  // rank 1 is w-first's
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 - a b\n");  // a name is one word
    dropped += 6;
    send_join(raw, RUN_ID, 0, 4, "0 0 tcp://127.0.0.1:1000\n");  // a fixed-rank join, as ever
    // The raw connection's joins are taken in order, but another connection's
    // may overtake them: wait until the coordinator has taken the drops, which
    // come after the first two workers' joins.
    for (int i = 0; i < 10000 && rdv_server_dropped(s) < dropped; i++) usleep(1000);
    CHECK(rdv_server_dropped(s) >= dropped);

    // The last worker joins from here and is told rank 3.
    rdv_entry_t me = {.rank = 0, .role = 1}, *table = NULL;
    snprintf(me.endpoint, sizeof me.endpoint, "-");
    snprintf(me.name, sizeof me.name, "w-third");
    uint32_t rank = 99;
    CHECK_OK(rdv_join_any(ctx, ep, RUN_ID, &me, 4, &table, &rank, 5000, err, sizeof err), err);
    CHECK(rank == 3);
    const char *want = "0 0 tcp://127.0.0.1:1000\n1 1 - w-first\n2 1 - w-second\n3 1 - w-third\n";
    const char *names[4] = {"", "w-first", "w-second", "w-third"};
    for (uint32_t i = 0; i < 4; i++) {
        CHECK(table[i].rank == i && table[i].role == (i ? 1u : 0u) && strcmp(table[i].name, names[i]) == 0);
        CHECK(strcmp(table[i].endpoint, i ? "-" : "tcp://127.0.0.1:1000") == 0);
    }
    free(table);
    CHECK_OK(rdv_server_wait(s, 5000, err, sizeof err), err);
    CHECK(rdv_server_dropped(s) == dropped);

    // Ranks 0, 1 and 2 joined over `raw`: one table each, naming the rank it answers.
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        uint32_t to = recv_table_for(raw, text, sizeof text, 2000);
        CHECK(to < 3 && strcmp(text, want) == 0);
        seen[to]++;
    }
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    // Every worker rank is taken: a fourth name is dropped; a known one gets its rank again.
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 - w-late\n");
    dropped++;
    send_join(raw, RUN_ID, WIRE_NO_ID, 4, "* 1 - w-second\n");
    CHECK(recv_table_for(raw, text, sizeof text, 2000) == 2 && strcmp(text, want) == 0);
    CHECK(rdv_server_dropped(s) == dropped);
    zmq_close(raw);
    rdv_server_destroy(&s);

    // A coordinator without a role layout drops any-rank joins.
    s = rdv_server_new(ctx, "tcp://127.0.0.1:0", 2, RUN_ID, err, sizeof err);
    CHECK_OK(s ? 0 : -1, err);
    raw = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(raw, rdv_server_endpoint(s)) == 0);
    send_join(raw, RUN_ID, WIRE_NO_ID, 2, "* 1 - w-first\n");
    send_join(raw, RUN_ID, 0, 2, "0 0 tcp://127.0.0.1:1000\n");
    send_join(raw, RUN_ID, 1, 2, "1 1 tcp://127.0.0.1:1001 named-too\n");  // a fixed rank may carry a name
    for (int i = 0; i < 2; i++) {
        uint32_t to = recv_table_for(raw, text, sizeof text, 2000);
        CHECK(to < 2 && strcmp(text, "0 0 tcp://127.0.0.1:1000\n1 1 tcp://127.0.0.1:1001 named-too\n") == 0);
    }
    CHECK(rdv_server_dropped(s) == 1);
    zmq_close(raw);
    rdv_server_destroy(&s);

    // Bad arguments fail at once: a name is required, one word, short enough.
    me.name[0] = '\0';
    CHECK(rdv_join_any(ctx, ep, RUN_ID, &me, 4, &table, &rank, 5000, err, sizeof err) == -1 && strstr(err, "name"));
    snprintf(me.name, sizeof me.name, "two words");
    CHECK(rdv_join_any(ctx, ep, RUN_ID, &me, 4, &table, &rank, 5000, err, sizeof err) == -1 && strstr(err, "name"));
    CHECK(rdv_server_new_roles(ctx, "tcp://127.0.0.1:0", counts, 0, RUN_ID, err, sizeof err) == NULL);
    zmq_ctx_term(ctx);
    printf("any rank: first come first served within a role, retries keep their rank, %zu drops counted\n", dropped);
}

// ---- failures are reported, not waited on forever ------------------------------

static void test_failures(void) {
    char err[512];
    void *ctx = zmq_ctx_new();

    // A joiner with no coordinator gives up after its timeout.
    char nobody[64];
    snprintf(nobody, sizeof nobody, "tcp://127.0.0.1:%d", free_port());
    rdv_entry_t me = {.rank = 1, .role = 1}, *table = (rdv_entry_t *)&me;
    snprintf(me.endpoint, sizeof me.endpoint, "tcp://127.0.0.1:2001");
    CHECK(rdv_join(ctx, nobody, RUN_ID, &me, 2, &table, 1200, err, sizeof err) == -1);
    CHECK(table == NULL);
    // It failed because its timeout ran out (the message says so), having sent
    // at least its first join.
    CHECK(strstr(err, "no table from the coordinator") && strstr(err, nobody) && strstr(err, "within 1200 ms"));
    const char *sent = strstr(err, "(rank 1 sent ");
    CHECK(sent && atoi(sent + strlen("(rank 1 sent ")) >= 1);
    printf("no coordinator: failed at its timeout: %s\n", err);

    // The coordinator reports who is missing when not everyone came.
    rdv_server_t *s = rdv_server_new(ctx, "tcp://127.0.0.1:*", 4, RUN_ID, err, sizeof err);
    CHECK_OK(s ? 0 : -1, err);
    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(raw, rdv_server_endpoint(s)) == 0);
    send_join(raw, RUN_ID, 1, 4, "1 1 tcp://127.0.0.1:3001\n");
    CHECK(rdv_server_wait(s, 400, err, sizeof err) == -1);
    CHECK(strstr(err, "1 of 4 ranks joined") && strstr(err, "missing: 0 2 3"));
    zmq_close(raw);
    rdv_server_destroy(&s);

    // Bind failures come back from rdv_server_new.
    CHECK(rdv_server_new(ctx, "tcp://127.0.0.1:notaport", 2, RUN_ID, err, sizeof err) == NULL);
    CHECK(strstr(err, "zmq_bind"));
    void *holder = zmq_socket(ctx, ZMQ_ROUTER);
    zmq_setsockopt(holder, ZMQ_LINGER, &zero, sizeof zero);
    char taken[256];
    CHECK_OK(net_bind_ephemeral(holder, "127.0.0.1", taken, sizeof taken, err, sizeof err), err);
    CHECK(rdv_server_new(ctx, taken, 2, RUN_ID, err, sizeof err) == NULL);
    CHECK(strstr(err, "in use"));
    CHECK(rdv_server_new(ctx, "tcp://127.0.0.1:0", 0, RUN_ID, err, sizeof err) == NULL);
    CHECK(net_bind_ephemeral(holder, "no.such.host.invalid", taken, sizeof taken, err, sizeof err) == -1);
    CHECK(strstr(err, "no.such.host.invalid"));
    zmq_close(holder);

    // Bad arguments to rdv_join fail at once.
    CHECK(rdv_join(ctx, nobody, RUN_ID, &me, 1, &table, 5000, err, sizeof err) == -1);  // rank 1 of 1
    snprintf(me.endpoint, sizeof me.endpoint, "tcp://a b:1");
    CHECK(rdv_join(ctx, nobody, RUN_ID, &me, 2, &table, 5000, err, sizeof err) == -1);
    me.endpoint[0] = '\0';
    CHECK(rdv_join(ctx, nobody, RUN_ID, &me, 2, &table, 5000, err, sizeof err) == -1);
    snprintf(me.endpoint, sizeof me.endpoint, "tcp://127.0.0.1:2001");
    CHECK(rdv_join(ctx, "nonsense", RUN_ID, &me, 2, &table, 5000, err, sizeof err) == -1);
    CHECK(strstr(err, "zmq_connect(nonsense)"));
    zmq_ctx_term(ctx);
}

// This process's sockets under CURVE with the run's server key pair `server`
// (its secret only where it listens) and a key pair of its own.
static void curve_on(const curve_key_t *server_pub, const curve_key_t *server_sec) {
    char err[256];
    net_security_t s;
    memset(&s, 0, sizeof s);
    s.curve = 1;
    s.server_public = *server_pub;
    if (server_sec) s.server_secret = *server_sec;
    CHECK_OK(curve_keypair_new(&s.client_public, &s.client_secret, err, sizeof err), err);
    CHECK_OK(net_security_set(&s, err, sizeof err), err);
}

// A coordinator under CURVE with key pair A, in a child; a joiner here that
// names another server key B is refused: its message says so. A joiner with
// no coordinator at all is not sent after keys. (Last: this process stays under CURVE.)
static void test_curve_hint(void) {
    char err[768];
    curve_key_t a_pub, a_sec, b_pub, b_sec;
    if (curve_keypair_new(&a_pub, &a_sec, err, sizeof err) != 0) {
        printf("CURVE hint: not checked, %s\n", err);
        return;
    }
    CHECK_OK(curve_keypair_new(&b_pub, &b_sec, err, sizeof err), err);
    int port = free_port();
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(ready[0]);
        curve_on(&a_pub, &a_sec);
        void *ctx = zmq_ctx_new();
        zap_handler_t *zap = zap_handler_new(ctx, &a_pub, 1, err, sizeof err);  // admits key A's holder only
        rdv_server_t *s = zap ? rdv_server_new(ctx, endpoint, 2, RUN_ID, err, sizeof err) : NULL;
        char byte = s ? 1 : 0;
        if (!s) fprintf(stderr, "coordinator: %s\n", err);
        if (write(ready[1], &byte, 1) != 1) _exit(1);
        if (s) rdv_server_wait(s, 30000, err, sizeof err);  // killed below long before
        _exit(0);
    }
    close(ready[1]);
    char byte = 0;
    CHECK(read(ready[0], &byte, 1) == 1 && byte == 1);  // the event: the coordinator listens
    close(ready[0]);
    curve_on(&b_pub, NULL);
    void *ctx = zmq_ctx_new();
    rdv_entry_t me = {.rank = 1, .role = 1}, *table = NULL;
    snprintf(me.endpoint, sizeof me.endpoint, "tcp://127.0.0.1:2001");
    CHECK(rdv_join(ctx, endpoint, RUN_ID, &me, 2, &table, 1500, err, sizeof err) == -1);
    printf("CURVE, another server key: %s\n", err);
    CHECK(strstr(err, "With CURVE a refused key looks like this too"));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    char nobody[64];
    snprintf(nobody, sizeof nobody, "tcp://127.0.0.1:%d", free_port());
    CHECK(rdv_join(ctx, nobody, RUN_ID, &me, 2, &table, 1200, err, sizeof err) == -1);
    printf("CURVE, no coordinator: %s\n", err);
    CHECK(strstr(err, "no table from the coordinator") && !strstr(err, "refused key"));
    zmq_ctx_term(ctx);
}

int main(void) {
    int64_t t0 = now_ms();
    test_drops();
    test_any_rank();
    test_failures();
    test_processes();
    test_curve_hint();
    printf("rendezvous: ok in %" PRId64 " ms\n", now_ms() - t0);
    return 0;
}
