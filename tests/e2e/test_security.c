// Transport security and message-size limits, over real sockets on 127.0.0.1:
// key files (asgd keygen's format), the listening rule (nothing listens beyond
// loopback without CURVE or --insecure), a CURVE-secured parameter server that
// admits a listed worker key and refuses an unlisted one, a stranger without
// CURVE and a worker that does not know the server's key, and a server that
// cuts off a peer sending a frame larger than any legitimate message and goes
// on serving.
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "net/curve_auth.h"
#include "net/ps_client.h"
#include "net/ps_server.h"
#include "net/rendezvous.h"
#include "net/ring.h"
#include "net/zmsg.h"
#include "tests/support/server_thread.h"
#include "tests/support/test_support.h"

#define RUN_ID 0x5ec0de5ec0de0001ull
#define TIMEOUT_MS 10000
#define SILENCE_MS 1000  // how long a refused peer waits for an answer that must not come
#define N_PARAMS 100

static char dir[] = "/tmp/asgd_security_XXXXXX";

static const char *path_in(const char *name) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

// ---- key files ---------------------------------------------------------------------

static void test_key_files(curve_key_t *server_pub, curve_key_t *server_sec, curve_key_t *w1_pub, curve_key_t *w1_sec,
                           curve_key_t *w2_pub, curve_key_t *w2_sec) {
    char err[512];
    curve_key_t made, pub, sec;
    CHECK_OK(curve_keygen(path_in("server"), &made, err, sizeof err), err);
    CHECK_OK(curve_key_load(path_in("server.key"), server_pub, server_sec, err, sizeof err), err);
    CHECK(strcmp(made.z85, server_pub->z85) == 0 && strlen(server_sec->z85) == CURVE_KEY_LEN);
    CHECK_OK(curve_key_load(path_in("server.pub"), &pub, &sec, err, sizeof err), err);
    CHECK(strcmp(pub.z85, server_pub->z85) == 0 && sec.z85[0] == '\0');  // the .pub holds no secret
    struct stat st;
    CHECK(stat(path_in("server.key"), &st) == 0 && (st.st_mode & 0777) == 0600);
    // A key is never overwritten.
    CHECK(curve_keygen(path_in("server"), NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "server.key: cannot create: File exists") != NULL);
    CHECK_OK(curve_keygen(path_in("w1"), NULL, err, sizeof err), err);
    CHECK_OK(curve_keygen(path_in("w2"), NULL, err, sizeof err), err);
    CHECK_OK(curve_key_load(path_in("w1.key"), w1_pub, w1_sec, err, sizeof err), err);
    CHECK_OK(curve_key_load(path_in("w2.key"), w2_pub, w2_sec, err, sizeof err), err);
    CHECK(strcmp(w1_pub->z85, w2_pub->z85) != 0 && strcmp(w1_pub->z85, server_pub->z85) != 0);

    // An allow list: bare keys, named ones, comments, a trailing comment.
    char text[1024];
    snprintf(text, sizeof text, "# the run's workers\n\n  %s\npublic-key = %s  # w2, for now\n#\n", w1_pub->z85,
             w2_pub->z85);
    test_write_file(dir, "allowed", text, strlen(text));
    curve_key_t *keys;
    size_t n;
    CHECK_OK(curve_allow_load(path_in("allowed"), &keys, &n, err, sizeof err), err);
    CHECK(n == 2 && strcmp(keys[0].z85, w1_pub->z85) == 0 && strcmp(keys[1].z85, w2_pub->z85) == 0);
    free(keys);
    // Bad lists are refused with the file and line.
    snprintf(text, sizeof text, "%s\nsecret-key = %s\n", w1_pub->z85, w1_sec->z85);
    test_write_file(dir, "bad_allow", text, strlen(text));
    CHECK(curve_allow_load(path_in("bad_allow"), &keys, &n, err, sizeof err) == -1);
    CHECK(strstr(err, "bad_allow:2: expected a public key") && strstr(err, "this is a secret key"));
    snprintf(text, sizeof text, "# nobody\n");
    test_write_file(dir, "bad_allow", text, strlen(text));
    CHECK(curve_allow_load(path_in("bad_allow"), &keys, &n, err, sizeof err) == -1);
    CHECK(strstr(err, "no public keys listed") != NULL);
    snprintf(text, sizeof text, "%.39s\n", w1_pub->z85);  // one character short
    test_write_file(dir, "bad_allow", text, strlen(text));
    CHECK(curve_allow_load(path_in("bad_allow"), &keys, &n, err, sizeof err) == -1);
    CHECK(strstr(err, "bad_allow:1:") != NULL);
    // A key file whose secret does not belong to its public key.
    snprintf(text, sizeof text, "public-key = %s\nsecret-key = %s\n", w1_pub->z85, w2_sec->z85);
    test_write_file(dir, "mixed.key", text, strlen(text));
    CHECK(curve_key_load(path_in("mixed.key"), &pub, &sec, err, sizeof err) == -1);
    CHECK(strstr(err, "does not belong") != NULL);
    CHECK(curve_key_load(path_in("missing.key"), &pub, &sec, err, sizeof err) == -1);
    CHECK(strstr(err, "missing.key: cannot open") != NULL);
    printf("key files: made, read back (mode 0600, never overwritten), allow lists parsed, bad ones refused\n");
}

// ---- the listening rule ------------------------------------------------------------

static void set_security(int curve, int insecure, const curve_key_t *server_pub, const curve_key_t *server_sec,
                         const curve_key_t *client_pub, const curve_key_t *client_sec) {
    char err[256];
    net_security_t s;
    memset(&s, 0, sizeof s);
    s.curve = curve;
    s.insecure = insecure;
    if (server_pub) s.server_public = *server_pub;
    if (server_sec) s.server_secret = *server_sec;
    if (client_pub) s.client_public = *client_pub;
    if (client_sec) s.client_secret = *client_sec;
    CHECK_OK(net_security_set(&s, err, sizeof err), err);
}

static ps_config_t config(void) {
    ps_config_t c;
    memset(&c, 0, sizeof c);
    c.run_id = RUN_ID;
    c.n_shards = 1;
    c.n_params = N_PARAMS;
    c.n_workers = 1;
    c.mode = SYNC_MODE_ASP;
    c.optimizer = OPTIMIZER_KIND_SGD;
    c.lr = 0.5f;
    c.quiet = 1;
    return c;
}

static void test_listening_rule(void *ctx) {
    static const struct {
        const char *endpoint;
        int local;
    } cases[] = {
        {"tcp://127.0.0.1:*", 1},
        {"tcp://127.1.2.3:5555", 1},
        {"tcp://localhost:0", 1},
        {"tcp://[::1]:0", 1},
        {"ipc:///tmp/x", 1},
        {"inproc://x", 1},
        {"tcp://0.0.0.0:*", 0},
        {"tcp://*:5555", 0},
        {"tcp://10.0.0.1:0", 0},
        {"tcp://node01:0", 0},
        {"tcp://127.0.0.1.evil:0", 0},
        {"tcp://128.0.0.1:0", 0},
        {"tcp://127.0.0.1;10.0.0.1:5", 0},
        {"udp://127.0.0.1:5", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (net_endpoint_is_local(cases[i].endpoint) != cases[i].local) {
            fprintf(stderr, "net_endpoint_is_local(%s) is not %d\n", cases[i].endpoint, cases[i].local);
            exit(1);
        }
    }
    char err[512];
    float init[N_PARAMS] = {0};
    ps_config_t c = config();
    set_security(0, 0, NULL, NULL, NULL, NULL);
    // Nothing that listens may do so beyond loopback: servers, the coordinator, ring sockets.
    CHECK(ps_server_new(ctx, &c, "tcp://0.0.0.0:*", init, err, sizeof err) == NULL);
    CHECK(strstr(err, "tcp://0.0.0.0:*: refusing to listen beyond this machine without CURVE") &&
          strstr(err, "--insecure"));
    CHECK(rdv_server_new(ctx, "tcp://0.0.0.0:0", 2, RUN_ID, err, sizeof err) == NULL);
    CHECK(strstr(err, "refusing to listen beyond this machine") != NULL);
    CHECK(ring_new(ctx, 0, 2, RUN_ID, 16, "0.0.0.0", err, sizeof err) == NULL);
    CHECK(strstr(err, "refusing to listen beyond this machine") != NULL);
    // On loopback nothing changes.
    ps_server_t *s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK_OK(s == NULL, err);
    ps_server_destroy(&s);
    // --insecure lets it listen (the rule alone is checked here: nothing is bound beyond loopback).
    void *sock = zmq_socket(ctx, ZMQ_ROUTER);
    set_security(0, 1, NULL, NULL, NULL, NULL);
    CHECK_OK(net_security_listen(sock, "tcp://0.0.0.0:5555", err, sizeof err), err);
    zmq_close(sock);
    set_security(0, 0, NULL, NULL, NULL, NULL);
    printf("listening rule: beyond loopback refused without CURVE or --insecure (servers, coordinator, rings)\n");
}

// ---- a CURVE-secured server --------------------------------------------------------

static void server_start(server_thread_t *st, void *ctx, const float *init) {
    char err[512];
    memset(st, 0, sizeof *st);
    ps_config_t c = config();
    st->s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK_OK(st->s == NULL, err);
    server_thread_start(st);
}

// The server returns by itself once its worker has left; 5 s more is a failure, not a hang.
static void server_join(server_thread_t *st) {
    int joined = 0;
    for (int i = 0; i < 500 && !joined; i++) {
        joined = pthread_tryjoin_np(st->tid, NULL) == 0;
        struct timespec ts = {0, 10000000};
        if (!joined) nanosleep(&ts, NULL);
    }
    if (!joined) {
        fprintf(stderr, "the server did not return after its worker left\n");
        exit(1);
    }
    CHECK_OK(st->rc, st->err);
}

// A raw DEALER: with CURVE keys when client_pub is given, else plain.
static void *dealer(void *ctx, const char *endpoint, const curve_key_t *server_pub, const curve_key_t *client_pub,
                    const curve_key_t *client_sec) {
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    CHECK(d && zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero) == 0);
    CHECK(zmq_setsockopt(d, ZMQ_ROUTING_ID, "w0", 2) == 0);
    if (client_pub) {
        CHECK(zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, server_pub->z85, CURVE_KEY_LEN) == 0);
        CHECK(zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, client_pub->z85, CURVE_KEY_LEN) == 0);
        CHECK(zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, client_sec->z85, CURVE_KEY_LEN) == 0);
    }
    CHECK(zmq_connect(d, endpoint) == 0);
    return d;
}

static void send_hello(void *d) {
    wire_header_t h = zmsg_header(MSG_TYPE_HELLO, RUN_ID);
    h.sender = 0;
    h.shard = 0;
    h.offset = N_PARAMS;
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(&h, bytes);
    CHECK(zmq_send(d, bytes, sizeof bytes, ZMQ_DONTWAIT) == (int)sizeof bytes || errno == EAGAIN);
}

// Whether a reply arrives within ms; if one does, it must be a WELCOME.
static int answered(void *d, int ms) {
    zmq_pollitem_t item = {d, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, ms) <= 0) return 0;
    char err[256];
    zmsg_t m;
    CHECK(zmsg_recv(d, 0, RUN_ID, &m, err, sizeof err) == 1);
    CHECK(m.h.type == MSG_TYPE_WELCOME);
    zmsg_close(&m);
    return 1;
}

static void test_curve_server(void *ctx, const curve_key_t *server_pub, const curve_key_t *server_sec,
                              const curve_key_t *w1_pub, const curve_key_t *w1_sec, const curve_key_t *w2_pub,
                              const curve_key_t *w2_sec) {
    char err[512];
    // Without a ZAP handler libzmq would admit any CURVE client: refused.
    set_security(1, 0, server_pub, server_sec, w1_pub, w1_sec);
    float init[N_PARAMS];
    for (int j = 0; j < N_PARAMS; j++) init[j] = 0.01f * (float)j;
    ps_config_t c = config();
    CHECK(ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
    CHECK(strstr(err, "ZAP handler") != NULL);
    // A process that has only the server's public key cannot listen.
    set_security(1, 0, server_pub, NULL, w1_pub, w1_sec);
    CHECK(ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err) == NULL);
    CHECK(strstr(err, "needs the server key's secret half") != NULL);

    set_security(1, 0, server_pub, server_sec, w1_pub, w1_sec);
    curve_key_t allowed[2] = {*w1_pub, *server_pub};
    zap_handler_t *zap = zap_handler_new(ctx, allowed, 2, err, sizeof err);
    CHECK_OK(zap == NULL, err);
    server_thread_t st;
    server_start(&st, ctx, init);
    const char *ep = ps_server_endpoint(st.s);
    uint64_t admitted, refused;

    // An unlisted key: the handshake is refused, nothing reaches the server.
    void *d = dealer(ctx, ep, server_pub, w2_pub, w2_sec);
    send_hello(d);
    CHECK(!answered(d, SILENCE_MS));
    zmq_close(d);
    zap_handler_counts(zap, &admitted, &refused);
    CHECK(refused >= 1 && admitted == 0);
    // A stranger without CURVE, and a listed worker that expects another server key.
    d = dealer(ctx, ep, NULL, NULL, NULL);
    send_hello(d);
    CHECK(!answered(d, SILENCE_MS));
    zmq_close(d);
    d = dealer(ctx, ep, w2_pub, w1_pub, w1_sec);
    send_hello(d);
    CHECK(!answered(d, SILENCE_MS));
    zmq_close(d);
    zap_handler_counts(zap, &admitted, &refused);
    CHECK(admitted == 0);  // neither got as far as asking

    // The listed key: a raw HELLO is welcomed, and a whole worker session works.
    d = dealer(ctx, ep, server_pub, w1_pub, w1_sec);
    send_hello(d);
    CHECK(answered(d, TIMEOUT_MS));
    zmq_close(d);
    const char *eps[1] = {ep};
    ps_client_t *client = ps_client_new(ctx, RUN_ID, 0, eps, 1, N_PARAMS, 0, TIMEOUT_MS, err, sizeof err);
    CHECK_OK(client == NULL, err);
    float g[N_PARAMS], got[N_PARAMS];
    for (int j = 0; j < N_PARAMS; j++) g[j] = 1.0f;
    float *const *frames = ps_client_push_frames(client, err, sizeof err);
    CHECK_OK(frames == NULL, err);
    memcpy(frames[0], g, sizeof g);
    CHECK_OK(ps_client_push_commit(client, 0, 1, 0, err, sizeof err), err);
    CHECK_OK(ps_client_wait_acks(client, err, sizeof err), err);
    CHECK_OK(ps_client_pull(client, 0, got, NULL, err, sizeof err), err);
    for (int j = 0; j < N_PARAMS; j++) CHECK(got[j] == init[j] - 0.5f);
    CHECK_OK(ps_client_bye(client, err, sizeof err), err);
    ps_client_destroy(&client);
    server_join(&st);
    zap_handler_counts(zap, &admitted, &refused);
    CHECK(admitted >= 2 && refused >= 1);
    // Nothing of the strangers' reached the shard: no message dropped or refused.
    ps_stats_t stats;
    ps_server_stats(st.s, &stats);
    CHECK(stats.pushes_applied == 1 && stats.dropped_total == 0 && stats.rejected == 0);
    ps_server_destroy(&st.s);
    zap_handler_destroy(&zap);
    set_security(0, 0, NULL, NULL, NULL, NULL);
    printf(
        "CURVE: an unlisted key (ZAP refused %llu), a plain peer and a wrong server key get nothing; the listed key "
        "is served (admitted %llu)\n",
        (unsigned long long)refused, (unsigned long long)admitted);
}

// ---- message size ------------------------------------------------------------------

// Waits for the monitor to report that d's connection was closed by its peer.
static int disconnected(void *monitor, int ms) {
    zmq_pollitem_t item = {monitor, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&item, 1, ms) > 0) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        CHECK(zmq_msg_recv(&ev, monitor, 0) >= 0);
        uint16_t event;
        memcpy(&event, zmq_msg_data(&ev), sizeof event);
        zmq_msg_close(&ev);
        zmq_msg_init(&ev);
        CHECK(zmq_msg_recv(&ev, monitor, 0) >= 0);  // the endpoint
        zmq_msg_close(&ev);
        if (event == ZMQ_EVENT_DISCONNECTED) return 1;
    }
    return 0;
}

static void test_oversized(void *ctx) {
    char err[512];
    float init[N_PARAMS] = {0};
    server_thread_t st;
    server_start(&st, ctx, init);
    const char *ep = ps_server_endpoint(st.s);
    // A push of a million floats to a shard of 100: libzmq takes the size
    // from the frame header and closes the connection before allocating it.
    enum { HUGE = 1 << 20 };
    CHECK(HUGE * sizeof(float) > zmsg_max_frame(N_PARAMS) + 4096);
    void *d = dealer(ctx, ep, NULL, NULL, NULL);
    CHECK(zmq_socket_monitor(d, "inproc://oversized-monitor", ZMQ_EVENT_DISCONNECTED) == 0);
    void *monitor = zmq_socket(ctx, ZMQ_PAIR);
    CHECK(monitor && zmq_connect(monitor, "inproc://oversized-monitor") == 0);
    send_hello(d);
    CHECK(answered(d, TIMEOUT_MS));
    float *huge = calloc(HUGE, sizeof *huge);
    CHECK(huge);
    wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN_ID);
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.count = HUGE;
    h.checksum = wire_checksum(huge, HUGE * sizeof *huge, 0);
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(&h, bytes);
    CHECK(zmq_send(d, bytes, sizeof bytes, ZMQ_SNDMORE) == (int)sizeof bytes);
    CHECK(zmq_send(d, huge, HUGE * sizeof *huge, 0) == (int)(HUGE * sizeof *huge));
    free(huge);
    CHECK(disconnected(monitor, TIMEOUT_MS));
    zmq_close(monitor);
    zmq_close(d);
    // The shard serves a proper worker as before.
    const char *eps[1] = {ep};
    ps_client_t *client = ps_client_new(ctx, RUN_ID, 0, eps, 1, N_PARAMS, 0, TIMEOUT_MS, err, sizeof err);
    CHECK_OK(client == NULL, err);
    float *const *frames = ps_client_push_frames(client, err, sizeof err);
    CHECK_OK(frames == NULL, err);
    for (int j = 0; j < N_PARAMS; j++) frames[0][j] = 2.0f;  // the largest legitimate push
    CHECK_OK(ps_client_push_commit(client, 0, 1, 0, err, sizeof err), err);
    float got[N_PARAMS];
    CHECK_OK(ps_client_pull(client, 0, got, NULL, err, sizeof err), err);
    for (int j = 0; j < N_PARAMS; j++) CHECK(got[j] == -1.0f);
    CHECK_OK(ps_client_bye(client, err, sizeof err), err);
    ps_client_destroy(&client);
    server_join(&st);
    // ... and never saw the oversized message: only the worker's push came in.
    ps_stats_t stats;
    ps_server_stats(st.s, &stats);
    CHECK(stats.pushes_applied == 1 && stats.bytes_in == 4u * N_PARAMS);
    CHECK(stats.dropped_total == 0 && stats.rejected == 0);
    ps_server_destroy(&st.s);
    printf("message size: a %zu-byte frame to a %d-parameter shard cut the sender off; the shard served on\n",
           (size_t)HUGE * sizeof(float), N_PARAMS);
}

// ---- the command line ---------------------------------------------------------------

// Runs `asgd ARGS` with stderr captured; returns the exit status, output in out.
static int run_asgd(const char *args, char *out, size_t out_len) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", ASGD_BINARY, args);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    size_t n = fread(out, 1, out_len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_command_line(void) {
    char out[4096], args[1024];
    // Listening beyond loopback without keys: a usage error before anything runs.
    CHECK(run_asgd("server --id 0 --coordinator 127.0.0.1:9 --bind-host 0.0.0.0", out, sizeof out) == 2);
    CHECK(strstr(out, "--bind-host 0.0.0.0: listening beyond this machine needs CURVE") && strstr(out, "--insecure"));
    CHECK(run_asgd("launch --workers 2 --model logreg --bind-host 10.0.0.7", out, sizeof out) == 2);
    CHECK(strstr(out, "--bind-host 10.0.0.7: listening beyond this machine needs CURVE") != NULL);
    CHECK(run_asgd("worker --id 0 --coordinator 127.0.0.1:9 --curve-allow x", out, sizeof out) == 2);
    CHECK(strstr(out, "CURVE is turned on by --curve-server-key") != NULL);
    snprintf(args, sizeof args, "worker --id 0 --coordinator 127.0.0.1:9 --curve-server-key %s --insecure",
             path_in("server.pub"));
    CHECK(run_asgd(args, out, sizeof out) == 2);
    CHECK(strstr(out, "drop --insecure") != NULL);
    // A worker with the server's public key alone and no key pair of its own.
    snprintf(args, sizeof args, "worker --id 0 --coordinator 127.0.0.1:9 --model logreg --curve-server-key %s",
             path_in("server.pub"));
    CHECK(run_asgd(args, out, sizeof out) == 1);
    CHECK(strstr(out,
                 "--curve-key FILE: a process that only has the server's public key connects with its own key pair"));
    // asgd keygen: the files, the public key on stdout, the allow list appended.
    snprintf(args, sizeof args, "keygen --out %s --allow %s", path_in("cli"), path_in("cli_allowed"));
    CHECK(run_asgd(args, out, sizeof out) == 0);
    char err[256];
    curve_key_t pub, sec, *keys;
    size_t n;
    CHECK_OK(curve_key_load(path_in("cli.key"), &pub, &sec, err, sizeof err), err);
    CHECK(strstr(out, pub.z85) != NULL);  // printed on stdout
    CHECK_OK(curve_allow_load(path_in("cli_allowed"), &keys, &n, err, sizeof err), err);
    CHECK(n == 1 && strcmp(keys[0].z85, pub.z85) == 0);
    free(keys);
    CHECK(run_asgd(args, out, sizeof out) == 1);  // never overwritten
    CHECK(strstr(out, "cli.key: cannot create: File exists") != NULL);
    printf(
        "command line: --bind-host beyond loopback refused without keys; keygen writes, lists and never overwrites\n");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!zmq_has("curve")) return test_skip("test_security: this libzmq has no CURVE");
    CHECK(mkdtemp(dir) != NULL);
    void *ctx = zmq_ctx_new();
    CHECK(ctx);
    curve_key_t server_pub, server_sec, w1_pub, w1_sec, w2_pub, w2_sec;
    test_key_files(&server_pub, &server_sec, &w1_pub, &w1_sec, &w2_pub, &w2_sec);
    test_listening_rule(ctx);
    test_curve_server(ctx, &server_pub, &server_sec, &w1_pub, &w1_sec, &w2_pub, &w2_sec);
    test_oversized(ctx);
    CHECK(zmq_ctx_term(ctx) == 0);
    test_command_line();
    static const char *const names[] = {"server.key", "server.pub", "w1.key",    "w1.pub",  "w2.key",  "w2.pub",
                                        "allowed",    "bad_allow",  "mixed.key", "cli.key", "cli.pub", "cli_allowed"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK(unlink(path_in(names[i])) == 0);
    CHECK(rmdir(dir) == 0);
    printf("test_security: ok\n");
    return 0;
}
