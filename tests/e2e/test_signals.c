// Stop signals, sent to real asgd processes at a known point (docs/reliability.md, "Signals"):
//
//   a) asgd worker waiting at the rendezvous (its connection reached the
//      coordinator's port, which nobody answers) stops on SIGTERM: exit 143,
//      "stopped by signal 15" on stderr, long before its --timeout-ms.
//   b) asgd server hosting the rendezvous, waiting for workers that never
//      come, stops on SIGINT: exit 130.
//   c) a worker in the middle of training (its log has evaluations) stops on
//      SIGTERM: a graceful leave (docs/reliability.md, "Elastic membership"):
//      exit 0, "left the run on signal 15", worker-0.json marked interrupted
//      with fewer samples than its epochs hold; then its server on SIGTERM:
//      143, server-0.json marked interrupted.
//   d) asgd train on SIGHUP: exit 129, --summary written, interrupted; its
//      final_train_loss is the last --log row's, or, when that row's interval
//      is shorter than the one before (the signal came between two
//      evaluations), the two rows' mean weighed by their samples.
//   e) a second signal kills a process that is still stopping (a worker in a
//      60 s injected step delay): killed by SIGTERM, not exited.
//   f) orphans: asgd launch is SIGKILLed while training; every child it
//      started (found by parent pid in /proc) is gone soon after.
//   g) asgd train stopped by two signals in a row (the second kills) while
//      training or ending: no --summary, no SUMMARY.tmp, no model's .tmp.
// Every wait is a hang bound, not a timing assertion.
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_signals_XXXXXX";

#define HANG_S 60.0  // far beyond a prompt stop; without the fix each case waits minutes

static const char *const data_args[] = {
    "--model", "logreg", "--data", "gen:sparse:n=3000,dim=2000,nnz=20", "--threads", "1", "--eval-every", "300", NULL};

static int add_args(const char **a, int n, const char *const *more) {
    for (; *more; more++) a[n++] = *more;
    return n;
}

// A TCP listener on 127.0.0.1 that never speaks; *port gets its port.
static int silent_listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(fd, 8) == 0);
    socklen_t len = sizeof a;
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void expect_stderr(const char *path, const char *needle) {
    char *text = proc_slurp(path);
    if (!strstr(text, needle)) {
        fprintf(stderr, "expected \"%s\" in %s:\n%s\n", needle, path, text);
        exit(1);
    }
    free(text);
}

// a) a worker at the rendezvous
static void worker_at_rendezvous(void) {
    int port;
    int fd = silent_listener(&port);
    char coordinator[64];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    const char *a[64] = {ASGD_BINARY, "worker"};
    int n = add_args(a, 2, data_args);
    const char *more[] = {"--servers",     "1",         "--workers",    "1",      "--id", "0",
                          "--coordinator", coordinator, "--timeout-ms", "600000", NULL};
    n = add_args(a, n, more);
    a[n] = NULL;
    const char *out = proc_path(dir, "a.out"), *err = proc_path(dir, "a.err");
    pid_t pid = proc_start(a, out, err);
    int conn = accept(fd, NULL, NULL);  // the event: its join reached the coordinator's port
    CHECK(conn >= 0);
    CHECK(kill(pid, SIGTERM) == 0);
    int st = proc_wait(pid, HANG_S);
    printf("a) worker at the rendezvous, SIGTERM: exit %d\n", st);
    CHECK(st == 143);
    expect_stderr(err, "stopped by signal 15");
    close(conn);
    close(fd);
}

// b) a server hosting the rendezvous
static void server_at_rendezvous(void) {
    int port = proc_free_port();
    char coordinator[64], host[80];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *a[64] = {ASGD_BINARY, "server"};
    int n = add_args(a, 2, data_args);
    const char *more[] = {
        "--servers",          "1",  "--workers",    "2",      "--id", "0", "--coordinator", coordinator,
        "--host-coordinator", host, "--timeout-ms", "600000", NULL};
    n = add_args(a, n, more);
    a[n] = NULL;
    const char *out = proc_path(dir, "b.out"), *err = proc_path(dir, "b.err");
    pid_t pid = proc_start(a, out, err);
    // The event: the coordinator's port accepts connections (bound after the handlers are in place).
    int connected = 0;
    for (double until = proc_now_s() + HANG_S; !connected && proc_now_s() < until;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (!connected) proc_sleep_ms(20);
    }
    CHECK(connected);
    CHECK(kill(pid, SIGINT) == 0);
    int st = proc_wait(pid, HANG_S);
    printf("b) server at the rendezvous, SIGINT: exit %d\n", st);
    CHECK(st == 130);
    expect_stderr(err, "stopped by signal 2");
}

// c) a worker and its server in the middle of training
static void stop_while_training(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/c", dir);
    CHECK(mkdir(rd, 0755) == 0);
    int port = proc_free_port();
    char coordinator[64], host[80];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *common[] = {"--servers",     "1",         "--workers", "1", "--sync",   "asp", "--epochs", "100000",
                            "--coordinator", coordinator, "--run-dir", rd,  "--run-id", "77",  "--quiet",  NULL};
    const char *s[64] = {ASGD_BINARY, "server"};
    int n = add_args(s, 2, data_args);
    n = add_args(s, n, common);
    s[n++] = "--id";
    s[n++] = "0";
    s[n++] = "--host-coordinator";
    s[n++] = host;
    s[n] = NULL;
    pid_t server = proc_start(s, proc_path(rd, "server.out"), proc_path(rd, "server.err"));
    const char *w[64] = {ASGD_BINARY, "worker"};
    n = add_args(w, 2, data_args);
    n = add_args(w, n, common);
    w[n++] = "--id";
    w[n++] = "0";
    w[n] = NULL;
    pid_t worker = proc_start(w, proc_path(rd, "worker.out"), proc_path(rd, "worker.err"));
    const char *csv = proc_path(rd, "worker-0.csv");
    for (double until = proc_now_s() + HANG_S; proc_count_lines(csv) < 4 && proc_now_s() < until;) proc_sleep_ms(20);
    CHECK(proc_count_lines(csv) >= 4);  // the event: training, past a few evaluations
    CHECK(kill(worker, SIGTERM) == 0);
    int st = proc_wait(worker, HANG_S);
    char *wj = proc_slurp(proc_path(rd, "worker-0.json"));
    printf("c) training worker, SIGTERM: exit %d, %.0f samples, interrupted %s\n", st,
           proc_json_number(wj, NULL, "samples"), strstr(wj, "\"interrupted\":true") ? "true" : "false");
    CHECK(st == 0);
    CHECK(strstr(wj, "\"interrupted\":true"));
    CHECK(proc_json_number(wj, NULL, "samples") < 3000.0 * 100000);
    expect_stderr(proc_path(rd, "worker.err"), "left the run on signal 15");
    free(wj);
    // The server's worker has left: it would finish by itself. Stop it anyway.
    kill(server, SIGTERM);
    st = proc_wait(server, HANG_S);
    char *sj = proc_slurp(proc_path(rd, "server-0.json"));
    printf("   its server, SIGTERM after the worker left: exit %d, pushes %.0f\n", st,
           proc_json_number(sj, NULL, "pushes_applied"));
    CHECK(st == 0 || st == 143);  // the worker's BYE may have ended it first
    CHECK(proc_json_number(sj, NULL, "pushes_applied") > 0);
    CHECK(strstr(sj, st == 143 ? "\"interrupted\":true" : "\"interrupted\":false"));
    free(sj);
}

// d) asgd train on SIGHUP
static void train_interrupted(void) {
    const char *summary = proc_path(dir, "d.json"), *log = proc_path(dir, "d.csv");
    const char *a[64] = {ASGD_BINARY, "train"};
    int n = add_args(a, 2, data_args);
    const char *more[] = {"--epochs", "100000", "--log", log, "--summary", summary, "--quiet", NULL};
    n = add_args(a, n, more);
    a[n] = NULL;
    const char *err = proc_path(dir, "d.err");
    pid_t pid = proc_start(a, proc_path(dir, "d.out"), err);
    for (double until = proc_now_s() + HANG_S; proc_count_lines(log) < 4 && proc_now_s() < until;) proc_sleep_ms(20);
    CHECK(proc_count_lines(log) >= 4);
    CHECK(kill(pid, SIGHUP) == 0);
    int st = proc_wait(pid, HANG_S);
    char *j = proc_slurp(summary);
    printf("d) asgd train, SIGHUP: exit %d, %.0f samples, interrupted %s\n", st, proc_json_number(j, NULL, "samples"),
           strstr(j, "\"interrupted\":true") ? "true" : "false");
    CHECK(st == 129);
    CHECK(strstr(j, "\"interrupted\":true"));
    CHECK(proc_json_number(j, NULL, "samples") > 0);
    expect_stderr(err, "stopped by signal 1");
    // The log's last three rows: samples (column 2) and train_loss (column 6).
    char *csv = proc_slurp(log);
    double samples[3] = {0}, loss[3] = {0};
    size_t rows = 0;
    for (char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        double v[7];
        const char *p = line + 1;
        for (int c = 0; c < 7; c++) {
            v[c] = *p == ',' ? NAN : strtod(p, NULL);
            p = strchr(p, ',');
            p = p ? p + 1 : "";
        }
        memmove(samples, samples + 1, 2 * sizeof *samples);
        memmove(loss, loss + 1, 2 * sizeof *loss);
        samples[2] = v[2], loss[2] = v[6];
        rows++;
    }
    CHECK(rows >= 4);
    double n_last = samples[2] - samples[1], n_before = samples[1] - samples[0];
    double want =
        n_last >= n_before ? loss[2] : (loss[1] * n_before + (n_last > 0 ? loss[2] * n_last : 0)) / (n_before + n_last);
    double got = proc_json_number(j, NULL, "final_train_loss");
    printf("   final_train_loss %.9g: last interval %.0f samples, the one before %.0f; expected %.9g\n", got, n_last,
           n_before, want);
    CHECK(fabs(got - want) <= 1e-6 * fabs(want));
    free(csv);
    free(j);
}

// e) a second signal kills. Every step sleeps a minute after it is computed
// (--delay-worker): a stop asked for during that sleep waits for its end. The
// first SIGTERM goes once the trainer thread is in that sleep (the first step
// is done), the second once the first has been taken: the process is killed
// by the second, not ended by the first.
static void second_signal_kills(void) {
    int n;
    char rd[400];
    snprintf(rd, sizeof rd, "%s/e", dir);
    CHECK(mkdir(rd, 0755) == 0);
    int port = proc_free_port();
    char coordinator[64], host[80];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *common[] = {"--servers", "1",   "--workers",      "1",       "--sync",        "asp",
                            "--epochs",  "100", "--delay-worker", "0:60000", "--coordinator", coordinator,
                            "--run-dir", rd,    "--run-id",       "78",      "--quiet",       NULL};
    const char *s[64] = {ASGD_BINARY, "server"};
    n = add_args(s, 2, data_args);
    n = add_args(s, n, common);
    s[n++] = "--id";
    s[n++] = "0";
    s[n++] = "--host-coordinator";
    s[n++] = host;
    s[n] = NULL;
    pid_t server = proc_start(s, proc_path(rd, "server.out"), proc_path(rd, "server.err"));
    const char *w[64] = {ASGD_BINARY, "worker"};
    n = add_args(w, 2, data_args);
    n = add_args(w, n, common);
    w[n++] = "--id";
    w[n++] = "0";
    w[n] = NULL;
    pid_t worker = proc_start(w, proc_path(rd, "worker.out"), proc_path(rd, "worker.err"));
    // The event: the trainer thread sleeps in its first step's delay.
    for (double until = proc_now_s() + HANG_S; !proc_thread_sleeping(worker, "trainer-0") && proc_now_s() < until;)
        proc_sleep_ms(5);
    CHECK(proc_thread_sleeping(worker, "trainer-0"));
    CHECK(kill(worker, SIGTERM) == 0);
    // The event: the first signal taken (no longer pending); the step still sleeps.
    for (double until = proc_now_s() + HANG_S; proc_signal_pending(worker, SIGTERM) && proc_now_s() < until;)
        proc_sleep_ms(5);
    CHECK(!proc_signal_pending(worker, SIGTERM));
    CHECK(kill(worker, SIGTERM) == 0);
    int status;
    double until = proc_now_s() + HANG_S;
    pid_t got;
    while ((got = waitpid(worker, &status, WNOHANG)) == 0 && proc_now_s() < until) proc_sleep_ms(20);
    if (got != worker) {
        kill(worker, SIGKILL);
        waitpid(worker, &status, 0);
    }
    kill(server, SIGTERM);
    CHECK(proc_wait(server, HANG_S) == 143);
    printf("e) worker in a 60 s step, SIGTERM twice: %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exit",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CHECK(got == worker && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

// The pids whose parent is ppid (from /proc/PID/stat).
static size_t children_of(pid_t ppid, pid_t *out, size_t max) {
    DIR *d = opendir("/proc");
    CHECK(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *p = strrchr(buf, ')');  // after "pid (comm)": state ppid
        long parent;
        char state;
        if (p && sscanf(p + 1, " %c %ld", &state, &parent) == 2 && parent == ppid) out[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

static int alive(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

// f) children die with their launcher
static void launcher_killed(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/f", dir);
    const char *a[64] = {ASGD_BINARY, "launch"};
    int n = add_args(a, 2, data_args);
    const char *more[] = {"--workers",        "2", "--sync",  "asp",       "--epochs", "100000",
                          "--worker-timeout", "0", "--quiet", "--run-dir", rd,         NULL};
    n = add_args(a, n, more);
    a[n] = NULL;
    pid_t launcher = proc_start(a, proc_path(dir, "f.out"), proc_path(dir, "f.err"));
    const char *csv = proc_path(rd, "worker-1.csv");
    for (double until = proc_now_s() + HANG_S; proc_count_lines(csv) < 4 && proc_now_s() < until;) proc_sleep_ms(20);
    CHECK(proc_count_lines(csv) >= 4);  // the event: every child started, a worker training
    pid_t kids[16];
    size_t n_kids = children_of(launcher, kids, 16);
    CHECK(n_kids == 3);  // a server, two workers
    CHECK(kill(launcher, SIGKILL) == 0);
    CHECK(proc_wait(launcher, HANG_S) == 128 + SIGKILL);
    size_t left = n_kids;
    for (double until = proc_now_s() + HANG_S; left > 0 && proc_now_s() < until;) {
        left = 0;
        for (size_t i = 0; i < n_kids; i++) left += (size_t)alive(kids[i]);
        if (left) proc_sleep_ms(20);
    }
    printf("f) asgd launch SIGKILLed: %zu children, %zu still alive after\n", n_kids, left);
    CHECK(left == 0);
}

// g) a second signal kills asgd train: whatever it was doing, no half or
// temporary output is left.
static void train_killed_leaves_nothing(void) {
    const char *summary = proc_path(dir, "g.json"), *log = proc_path(dir, "g.csv"), *model = proc_path(dir, "g.model");
    // A large test set: the final evaluation after the first signal takes a while.
    const char *a[64] = {
        ASGD_BINARY,    "train",  "--model",   "logreg", "--data",       "gen:sparse:n=400000,dim=2000,nnz=20",
        "--test-frac",  "0.5",    "--threads", "1",      "--eval-every", "300",
        "--epochs",     "100000", "--log",     log,      "--summary",    summary,
        "--save-model", model,    "--quiet",   NULL};
    pid_t pid = proc_start(a, proc_path(dir, "g.out"), proc_path(dir, "g.err"));
    for (double until = proc_now_s() + HANG_S; proc_count_lines(log) < 2 && proc_now_s() < until;) proc_sleep_ms(20);
    CHECK(proc_count_lines(log) >= 2);  // the event: training
    CHECK(kill(pid, SIGTERM) == 0);
    proc_sleep_ms(20);  // two signals, not one pending twice
    CHECK(kill(pid, SIGTERM) == 0);
    int st = proc_wait(pid, HANG_S);
    char tmp[700], model_tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", summary);
    snprintf(model_tmp, sizeof model_tmp, "%s.tmp", model);
    printf("g) asgd train, SIGTERM twice: exit %d; summary %s, SUMMARY.tmp %s, model .tmp %s\n", st,
           access(summary, F_OK) == 0 ? "written" : "none", access(tmp, F_OK) == 0 ? "LEFT" : "none",
           access(model_tmp, F_OK) == 0 ? "LEFT" : "none");
    CHECK(st == 128 + SIGTERM);
    CHECK(access(tmp, F_OK) != 0 && access(model_tmp, F_OK) != 0);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    worker_at_rendezvous();
    server_at_rendezvous();
    stop_while_training();
    train_interrupted();
    second_signal_kills();
    launcher_killed();
    train_killed_leaves_nothing();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
