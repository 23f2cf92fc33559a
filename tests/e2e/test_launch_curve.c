// A local `asgd launch` secures its own sockets (docs/security.md): it makes a
// CURVE key pair for the run and gives it, with the run id, to its children in
// the environment, never on their command lines. Provoked for real, once by
// default and once with --insecure (the control: the same forgery gets in):
//   - every child's /proc/PID/cmdline holds neither the run id nor a key,
//     while its environment holds the run id (and, by default, the key pair);
//   - a plain ZeroMQ socket that knows the run id and the server's endpoint
//     (from the server's own line) connects to server 0 while the workers are
//     stopped: by default its handshake fails (the socket monitor says so) and
//     its HELLO and PUSH as worker 0 never reach the shard (no message dropped,
//     refused or rejoined there); with --insecure its observer PULL is
//     answered with the shard's parameters.
//   - either way the run completes and acked_pushes_applied_once holds.
#include <dirent.h>
#include <errno.h>
#include <zmq.h>

#include "net/curve_auth.h"
#include "net/wire.h"
#include "net/zmsg.h"
#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_lcurve_XXXXXX";

#define HANG_S 120.0
#define DIM 2000  // gen:sparse dim; logreg has DIM + 1 parameters

// /proc/pid/NAME, NULs turned into newlines (caller frees).
static char *proc_file(pid_t pid, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    FILE *f = fopen(path, "r");
    if (!f) return calloc(1, 1);
    char *text = calloc(1, 65536);
    size_t n = fread(text, 1, 65535, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (text[i] == '\0') text[i] = '\n';
    return text;
}

// The children of pid, their command lines starting with "asgd ROLE"; returns how many (at most max).
static size_t children_of(pid_t parent, const char *role, pid_t *out, size_t max) {
    size_t n = 0;
    DIR *d = opendir("/proc");
    CHECK(d);
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        char *stat = proc_file(pid, "stat");
        const char *close_paren = strrchr(stat, ')');
        int ppid = 0;
        char state;
        int ok = close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)parent;
        free(stat);
        if (!ok) continue;
        char *cmd = proc_file(pid, "cmdline");
        const char *second = strchr(cmd, '\n');
        if (second && strncmp(second + 1, role, strlen(role)) == 0) out[n++] = pid;
        free(cmd);
    }
    closedir(d);
    return n;
}

// The value of NAME= in an environment as proc_file gives it, or "" (static buffer).
static const char *env_value(const char *env, const char *name) {
    static char value[256];
    value[0] = '\0';
    size_t len = strlen(name);
    for (const char *p = env; *p;) {
        const char *end = strchr(p, '\n');
        if (!end) end = p + strlen(p);
        if ((size_t)(end - p) > len && strncmp(p, name, len) == 0 && p[len] == '=')
            snprintf(value, sizeof value, "%.*s", (int)(end - p - (ptrdiff_t)len - 1), p + len + 1);
        p = *end ? end + 1 : end;
    }
    return value;
}

// The first handshake event of the monitored socket: 1 succeeded, 0 failed or closed.
static int handshake_outcome(void *monitor) {
    for (;;) {
        zmq_pollitem_t item = {monitor, 0, ZMQ_POLLIN, 0};
        CHECK(zmq_poll(&item, 1, (long)(HANG_S * 1000)) == 1);
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        CHECK(zmq_msg_recv(&ev, monitor, 0) >= 0);
        uint16_t event;
        memcpy(&event, zmq_msg_data(&ev), sizeof event);
        zmq_msg_close(&ev);
        zmq_msg_init(&ev);
        CHECK(zmq_msg_recv(&ev, monitor, 0) >= 0);  // the endpoint
        zmq_msg_close(&ev);
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) return 1;
        if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED))
            return 0;
    }
}

// Sends h (and a payload frame when given) without waiting: queued, or (EAGAIN)
// refused by a socket with no connection to queue it on. Returns 1 when queued.
static int send_message(void *sock, const wire_header_t *h, const void *payload, size_t len) {
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(h, bytes);
    int rc = zmq_send(sock, bytes, sizeof bytes, ZMQ_DONTWAIT | (payload ? ZMQ_SNDMORE : 0));
    if (rc < 0) {
        CHECK(errno == EAGAIN);
        return 0;
    }
    CHECK(rc == (int)sizeof bytes);
    if (payload) CHECK(zmq_send(sock, payload, len, ZMQ_DONTWAIT) == (int)len);
    return 1;
}

static void one_launch(int insecure) {
    const char *name = insecure ? "insecure" : "default";
    char rd[400];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    const char *args[40] = {
        ASGD_BINARY,      "launch",  "--model",      "logreg", "--data",    "gen:sparse:n=3000,dim=2000,nnz=20",
        "--threads",      "1",       "--eval-every", "300",    "--servers", "1",
        "--workers",      "2",       "--sync",       "asp",    "--epochs",  "1",
        "--delay-worker", "0:1,1:1", "--run-dir",    rd};
    int n = 22;
    if (insecure) args[n++] = "--insecure";
    args[n] = NULL;
    const char *err_path = proc_path(dir, "%s.err", name);
    pid_t launch = proc_start(args, proc_path(dir, "%s.out", name), err_path);
    CHECK(proc_wait_for_text(err_path, " at tcp://127.0.0.1:", HANG_S));
    pid_t servers[2], workers[3];
    CHECK(children_of(launch, "server", servers, 2) == 1);
    CHECK(children_of(launch, "worker", workers, 3) == 2);
    for (int k = 0; k < 2; k++) CHECK(kill(workers[k], SIGSTOP) == 0);  // the run waits while we forge

    // The command lines hold neither run id nor key; the environment does.
    char *env = proc_file(servers[0], "environ");
    char run_id[64], public_key[64], secret_key[64];
    snprintf(run_id, sizeof run_id, "%s", env_value(env, "ASGD_LAUNCH_RUN_ID"));
    snprintf(public_key, sizeof public_key, "%s", env_value(env, "ASGD_LAUNCH_CURVE_PUBLIC"));
    snprintf(secret_key, sizeof secret_key, "%s", env_value(env, "ASGD_LAUNCH_CURVE_SECRET"));
    free(env);
    CHECK(strlen(run_id) > 0);
    CHECK(strlen(public_key) == (insecure ? 0 : CURVE_KEY_LEN) && strlen(secret_key) == strlen(public_key));
    pid_t all[3] = {servers[0], workers[0], workers[1]};
    for (int i = 0; i < 3; i++) {
        char *cmd = proc_file(all[i], "cmdline");
        CHECK(strstr(cmd, "--coordinator"));  // it is the child's command line
        CHECK(!strstr(cmd, "--run-id") && !strstr(cmd, run_id));
        CHECK(insecure || (!strstr(cmd, public_key) && !strstr(cmd, secret_key)));
        free(cmd);
    }
    printf("%s: run id %s and %s in the children's environment, not on their command lines\n", name, run_id,
           insecure ? "no key" : "the key pair");

    // The forger: a plain DEALER that knows the run id and server 0's endpoint.
    char *err_text = proc_slurp(err_path);
    const char *at = strstr(err_text, " at tcp://127.0.0.1:");
    CHECK(at);
    char endpoint[64];
    CHECK(sscanf(at + 4, "%63[^,\n]", endpoint) == 1);
    free(err_text);
    uint64_t id = strtoull(run_id, NULL, 10);
    void *ctx = zmq_ctx_new();
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    CHECK(zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero) == 0);
    CHECK(zmq_socket_monitor(d, "inproc://forger-monitor", ZMQ_EVENT_ALL) == 0);
    void *monitor = zmq_socket(ctx, ZMQ_PAIR);
    CHECK(monitor && zmq_connect(monitor, "inproc://forger-monitor") == 0);
    CHECK(zmq_connect(d, endpoint) == 0);
    int admitted = handshake_outcome(monitor);
    printf("%s: a plain socket's handshake with server 0 at %s %s\n", name, endpoint,
           admitted ? "succeeded" : "failed");
    CHECK(admitted == insecure);
    if (insecure) {
        // The control: a plain socket with the run id is served.
        wire_header_t h = zmsg_header(MSG_TYPE_PULL, id);
        h.sender = WIRE_NO_ID;
        h.shard = 0;
        CHECK(send_message(d, &h, NULL, 0));
        zmsg_t m;
        char why[256];
        CHECK(zmsg_recv(d, 0, id, &m, why, sizeof why) == 1);
        printf("%s: its observer PULL was answered (%s, %u values)\n", name, msg_type_name(m.h.type), m.h.count);
        CHECK(m.h.type == MSG_TYPE_PARAMS && m.h.count == DIM + 1);
        zmsg_close(&m);
    } else {
        // HELLO and a wild PUSH as worker 0: queued on a socket that never connects.
        wire_header_t h = zmsg_header(MSG_TYPE_HELLO, id);
        h.sender = 0;
        h.shard = 0;
        h.offset = DIM + 1;
        int queued = send_message(d, &h, NULL, 0);
        static float wild[DIM + 1];
        for (size_t j = 0; j <= DIM; j++) wild[j] = 1e6f;
        h = zmsg_header(MSG_TYPE_PUSH, id);
        h.sender = 0;
        h.shard = 0;
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.count = DIM + 1;
        h.checksum = wire_checksum(wild, sizeof wild, 0);
        queued += send_message(d, &h, wild, sizeof wild);
        printf("%s: a forged HELLO and PUSH as worker 0: %d of 2 queued on the unconnected socket\n", name, queued);
    }
    zmq_close(monitor);
    zmq_close(d);
    zmq_ctx_term(ctx);
    for (int k = 0; k < 2; k++) CHECK(kill(workers[k], SIGCONT) == 0);
    CHECK(proc_wait(launch, HANG_S) == 0);
    char *summary = proc_slurp(proc_path(rd, "summary.json"));
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    free(summary);
    char *s = proc_slurp(proc_path(rd, "server-0.json"));
    double dropped = proc_json_number(s, NULL, "dropped"), rejected = proc_json_number(s, NULL, "rejected"),
           rejoins = proc_json_number(s, NULL, "rejoins");
    printf("%s: run completed, acked pushes applied once; server 0 dropped %.0f, refused %.0f, rejoins %.0f\n", name,
           dropped, rejected, rejoins);
    CHECK(dropped == 0 && rejected == 0 && rejoins == 0);
    free(s);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!zmq_has("curve")) return test_skip("this libzmq has no CURVE");
    CHECK(mkdtemp(dir));
    one_launch(0);
    one_launch(1);
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
