// CURVE from the command line (docs/security.md), with real processes on
// 127.0.0.1:
//   a) `asgd keygen --out NAME [--allow FILE]` writes NAME.key (mode 0600:
//      public and secret key) and NAME.pub (the public key alone), prints the
//      public key, appends it to the allow list, and never overwrites a key;
//   b) `asgd launch` with --curve-server-key and --curve-allow trains: every
//      process of the run talks CURVE, and the model learns;
//   c) started by hand (a server hosting the coordinator, two workers), a
//      worker whose key is not on the --curve-allow list is refused: it never
//      gets the rendezvous table and gives up at its --timeout-ms with the
//      message docs/security.md documents; the same worker with its listed key
//      then joins, and the run completes with every acknowledged push applied.
// Nothing is timed: each step waits for a process to end (bounded only to end
// a hang).
#include <sys/stat.h>

#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_curve_cli_XXXXXX";

static char *in_dir(const char *name) { return proc_path(dir, "%s", name); }

// Runs asgd with args (NULL-terminated) to its end; output in dir/name.out and .err.
static int run_asgd(const char *name, const char *const *args) {
    const char *argv[64] = {ASGD_BINARY};
    int n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char out[600], err[600];
    snprintf(out, sizeof out, "%s.out", in_dir(name));
    snprintf(err, sizeof err, "%s.err", in_dir(name));
    unlink(out);
    unlink(err);
    return proc_wait(proc_start(argv, out, err), 300.0);
}

static char *output_of(const char *name, const char *ext) { return proc_slurp(proc_path(dir, "%s.%s", name, ext)); }

static void expect_ok(const char *name, int status) {
    if (status == 0) return;
    char *e = output_of(name, "err");
    fprintf(stderr, "asgd (%s) exited with %d:\n%s\n", name, status, e);
    free(e);
    exit(1);
}

// The 40-character Z85 key after "public-key = " in text (static buffer), or NULL.
static const char *public_key_in(const char *text) {
    static char key[41];
    const char *p = strstr(text, "public-key = ");
    if (!p) return NULL;
    p += strlen("public-key = ");
    if (strspn(p, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#") < 40)
        return NULL;
    memcpy(key, p, 40);
    key[40] = '\0';
    return key;
}

// a) keys.
static void keygen(const char *name, int allow) {
    char out[600], allowed[600];
    snprintf(out, sizeof out, "%s", in_dir(name));
    snprintf(allowed, sizeof allowed, "%s", in_dir("allowed"));
    const char *with[] = {"keygen", "--out", out, "--allow", allowed, NULL};
    const char *without[] = {"keygen", "--out", out, NULL};
    expect_ok(name, run_asgd(name, allow ? with : without));
    char *printed = output_of(name, "out");
    char *key = proc_slurp(proc_path(dir, "%s.key", name)), *pub = proc_slurp(proc_path(dir, "%s.pub", name));
    struct stat st;
    CHECK(stat(proc_path(dir, "%s.key", name), &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(strstr(key, "secret-key = "));
    CHECK(!strstr(pub, "secret-key"));
    const char *k = public_key_in(key);
    CHECK(k);
    char want[41];
    memcpy(want, k, sizeof want);
    CHECK(strstr(pub, want));
    CHECK(strncmp(printed, want, 40) == 0 && printed[40] == '\n');  // stdout: the public key
    if (allow) {
        char *list = proc_slurp(in_dir("allowed"));
        CHECK(strstr(list, want));
        free(list);
    }
    free(printed);
    free(key);
    free(pub);
}

static void test_keygen(void) {
    keygen("server", 0);
    keygen("worker0", 1);
    keygen("worker1", 1);
    keygen("stranger", 0);  // not on the list
    char *list = proc_slurp(in_dir("allowed")), *stranger = proc_slurp(in_dir("stranger.pub"));
    size_t lines = 0;
    for (const char *p = list; *p; p++) lines += *p == '\n';
    CHECK(lines == 2 && !strstr(list, public_key_in(stranger) ? public_key_in(stranger) : "?"));
    free(list);
    free(stranger);
    // Never overwritten: a second keygen to the same name fails and leaves the key as it was.
    char *before = proc_slurp(in_dir("worker0.key"));
    char out[600];
    snprintf(out, sizeof out, "%s", in_dir("worker0"));
    const char *again[] = {"keygen", "--out", out, NULL};
    CHECK(run_asgd("again", again) == 1);
    char *after = proc_slurp(in_dir("worker0.key")), *e = output_of("again", "err");
    CHECK(strcmp(before, after) == 0 && strstr(e, "asgd keygen:") && strstr(e, "worker0.key"));
    printf(
        "keygen: 4 key pairs (secret files mode 0600), 2 on the allow list; an existing key is not overwritten: "
        "%s",
        e);
    free(before);
    free(after);
    free(e);
}

// b) asgd launch, every process with the server key pair.
static void test_launch(void) {
    char key[600], allowed[600], rd[600];
    snprintf(key, sizeof key, "%s", in_dir("server.key"));
    snprintf(allowed, sizeof allowed, "%s", in_dir("allowed"));
    snprintf(rd, sizeof rd, "%s", in_dir("launch"));
    const char *a[] = {"launch",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=8000,dim=2000,nnz=20",
                       "--servers",
                       "2",
                       "--workers",
                       "2",
                       "--sync",
                       "ssp",
                       "--staleness",
                       "2",
                       "--curve-server-key",
                       key,
                       "--curve-allow",
                       allowed,
                       "--quiet",
                       "--run-dir",
                       rd,
                       NULL};
    expect_ok("launch", run_asgd("launch", a));
    char *summary = output_of("launch", "out");
    double acc = proc_json_number(summary, NULL, "final_test_accuracy");
    double loss = proc_json_number(summary, NULL, "final_test_loss");
    printf("launch with CURVE: 2 servers, 2 workers: accuracy %.3f, test loss %.4f\n", acc, loss);
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    // It learned: the untrained model scores 0.521 with loss 0.693 on this
    // test set (52.1% positive), and no constant predictor does better; 4 runs
    // measured 0.718-0.807 and 0.439-0.491.
    CHECK(acc > 0.65 && loss <= M_LN2 - 0.1);  // both at least 0.1 past the untrained model
    free(summary);
}

// Waits until something accepts TCP connections on 127.0.0.1:port (60 s: a hang bound).
static void wait_listening(int port) {
    double until = proc_now_s() + 60.0;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        struct sockaddr_in addr = proc_loopback(port);
        int ok = connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
        close(fd);
        if (ok) return;
        CHECK(proc_now_s() < until);
        proc_sleep_ms(20);
    }
}

// c) a worker with an unlisted key is refused; with its own key it joins.
static void test_refused(void) {
    char rd[600], coordinator[64], host[80], server_key[600], server_pub[600], allowed[600], k0[600], k1[600],
        stranger[600];
    snprintf(rd, sizeof rd, "%s", in_dir("byhand"));
    CHECK(mkdir(rd, 0755) == 0);
    int port = proc_free_port();
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    snprintf(server_key, sizeof server_key, "%s", in_dir("server.key"));
    snprintf(server_pub, sizeof server_pub, "%s", in_dir("server.pub"));
    snprintf(allowed, sizeof allowed, "%s", in_dir("allowed"));
    snprintf(k0, sizeof k0, "%s", in_dir("worker0.key"));
    snprintf(k1, sizeof k1, "%s", in_dir("worker1.key"));
    snprintf(stranger, sizeof stranger, "%s", in_dir("stranger.key"));
#define COMMON                                                                                                        \
    "--model", "logreg", "--data", "gen:sparse:n=3000,dim=2000,nnz=20", "--servers", "1", "--workers", "2", "--sync", \
        "asp", "--run-id", "5151", "--coordinator", coordinator, "--run-dir", rd, "--quiet"
    const char *server[] = {
        ASGD_BINARY,          "server",   "--id",          "0",     COMMON, "--host-coordinator", host,
        "--curve-server-key", server_key, "--curve-allow", allowed, NULL};
    const char *w0[] = {ASGD_BINARY,          "worker",   "--id",        "0", COMMON,
                        "--curve-server-key", server_pub, "--curve-key", k0,  NULL};
    // The stranger gives up sooner than the others wait for it.
    const char *bad[] = {ASGD_BINARY,   "worker", "--id",         "1",    COMMON, "--curve-server-key", server_pub,
                         "--curve-key", stranger, "--timeout-ms", "2000", NULL};
    const char *w1[] = {ASGD_BINARY,          "worker",   "--id",        "1", COMMON,
                        "--curve-server-key", server_pub, "--curve-key", k1,  NULL};
#undef COMMON
    pid_t ps = proc_start(server, proc_path(rd, "server.out"), proc_path(rd, "server.err"));
    pid_t p0 = proc_start(w0, proc_path(rd, "w0.out"), proc_path(rd, "w0.err"));
    // The coordinator is up (it binds only with its key check running) before
    // the stranger knocks, so the stranger's only obstacle is its key.
    wait_listening(port);
    int st = proc_wait(proc_start(bad, proc_path(rd, "stranger.out"), proc_path(rd, "stranger.err")), 120.0);
    char *e = proc_slurp(proc_path(rd, "stranger.err"));
    printf("unlisted key: exit %d: %s", st, e);
    CHECK(st == 1);
    CHECK(strstr(e, "no table from the coordinator"));
    CHECK(strstr(e,
                 "With CURVE a refused key looks like this too: is this process's public key on the "
                 "coordinator's --curve-allow list, and does --curve-server-key name the run's server key?"));
    free(e);
    pid_t p1 = proc_start(w1, proc_path(rd, "w1.out"), proc_path(rd, "w1.err"));
    const pid_t pids[] = {p0, p1, ps};
    const char *names[] = {"w0", "w1", "server"};
    for (int i = 0; i < 3; i++) {
        int rc = proc_wait(pids[i], 300.0);
        if (rc != 0) {
            char *err = proc_slurp(proc_path(rd, "%s.err", names[i]));
            fprintf(stderr, "%s exited with %d:\n%s\n", names[i], rc, err);
            free(err);
            exit(1);
        }
    }
    char *sj = proc_slurp(proc_path(rd, "server-0.json"));
    for (int k = 0; k < 2; k++) {
        char key[8];
        snprintf(key, sizeof key, "%d", k);
        char *w = proc_slurp(proc_path(rd, "worker-%d.json", k));
        double acked = proc_json_number(w, NULL, "push_messages_acked");
        double applied = proc_json_number(sj, "pushes_by_worker", key);
        printf("  worker %d (listed key): %.0f pushes acknowledged, %.0f applied\n", k, acked, applied);
        CHECK(acked > 0 && acked == applied);
        free(w);
    }
    free(sj);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    test_keygen();
    test_launch();
    test_refused();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
