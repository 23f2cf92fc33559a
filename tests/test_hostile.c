// A careless or hostile environment, provoked for real (docs/reliability.md):
//
//   a) a checkpoint directory nothing can be written to (a 0555 directory, or
//      /sys/kernel when running as root, whom modes do not stop): asgd train
//      and asgd launch refuse before training, naming the flag and directory,
//      and exit non-zero.
//   b) a FIFO where a checkpoint is read (--resume of train and of a server)
//      is refused at once, not waited on (each run has a hang bound).
//   c) a server SIGSTOPped for three times --worker-timeout while its workers
//      train, then SIGCONTed: it evicts nobody (the gap is its own stall,
//      counted in "stalls"), and the run completes.
//   d) asgd launch --sync allreduce --restart-workers N is refused (it was
//      silently ignored).
//   e) a checkpoint that fails mid-run (its path is taken by a directory):
//      asgd train says so and trains to the end, and --summary is complete
//      (checkpoints 0); a train run that fails (b) leaves no --summary file.
#include <errno.h>
#include <sys/stat.h>

#include "proc_support.h"

static char dir[] = "/tmp/asgd_hostile_XXXXXX";

#define HANG_S 60.0

static const char *const data_args[] = {"--model", "logreg", "--data", "gen:sparse:n=3000,dim=2000,nnz=20",
                                        "--threads", "1", "--eval-every", "300", "--quiet", NULL};

static int add_args(const char **a, int n, const char *const *more) {
    for (; *more; more++) a[n++] = *more;
    return n;
}

// Runs asgd with args, returns its exit status; its stderr in *err_text (caller frees).
static int run(const char *name, const char *const *args, char **err_text) {
    const char *a[64] = {ASGD_BINARY};
    int n = add_args(a, 1, args);
    a[n] = NULL;
    const char *err = proc_path(dir, "%s.err", name);
    pid_t pid = proc_start(a, proc_path(dir, "%s.out", name), err);
    int st = proc_wait(pid, HANG_S);
    *err_text = proc_slurp(err);
    return st;
}

static void expect(const char *text, const char *needle) {
    if (!strstr(text, needle)) {
        fprintf(stderr, "expected \"%s\" in:\n%s\n", needle, text);
        exit(1);
    }
}

// A directory no file can be created in, or NULL.
static const char *unwritable_dir(void) {
    static char path[300];
    if (geteuid() != 0) {
        snprintf(path, sizeof path, "%s/readonly", dir);
        CHECK(mkdir(path, 0555) == 0);
        return path;
    }
    // Root: sysfs refuses new files whatever the mode.
    snprintf(path, sizeof path, "/sys/kernel/asgd-probe-%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
        close(fd);
        unlink(path);
        return NULL;
    }
    return "/sys/kernel";
}

static void checkpoint_dir_unwritable(void) {
    const char *ro = unwritable_dir();
    if (!ro) {
        fprintf(stderr, "a) skipped: no unwritable directory to be found here\n");
        CHECK(!getenv("ASGD_REQUIRE_ALL") || strcmp(getenv("ASGD_REQUIRE_ALL"), "1") != 0);
        return;
    }
    char needle[400];
    snprintf(needle, sizeof needle, "--checkpoint-dir %s: cannot write there", ro);
    const char *t[32] = {"train"};
    int n = add_args(t, 1, data_args);
    const char *more[] = {"--checkpoint-dir", ro, "--checkpoint-every", "0.2", NULL};
    n = add_args(t, n, more);
    t[n] = NULL;
    char *err;
    int st = run("a-train", t, &err);
    printf("a) train, --checkpoint-dir %s: exit %d: %s", ro, st, err);
    CHECK(st == 1);
    expect(err, needle);
    free(err);
    char rd[400];
    snprintf(rd, sizeof rd, "%s/a-launch", dir);
    const char *l[40] = {"launch"};
    n = add_args(l, 1, data_args);
    const char *lmore[] = {"--workers", "2", "--checkpoint-dir", ro, "--checkpoint-every", "0.2", "--run-dir", rd,
                           NULL};
    n = add_args(l, n, lmore);
    l[n] = NULL;
    st = run("a-launch", l, &err);
    const char *line = strstr(err, "asgd launch:");
    printf("   launch: exit %d: %s", st, line ? line : err);
    CHECK(st == 1);
    CHECK(line);
    expect(line, needle);
    free(err);
}

static void fifo_checkpoints(void) {
    char rd[400], fifo[450];
    snprintf(rd, sizeof rd, "%s/fifo", dir);
    CHECK(mkdir(rd, 0755) == 0);
    snprintf(fifo, sizeof fifo, "%s/train.ckpt", rd);
    CHECK(mkfifo(fifo, 0644) == 0);
    const char *t[32] = {"train"};
    int n = add_args(t, 1, data_args);
    char summary[500];
    snprintf(summary, sizeof summary, "%s/b.json", rd);
    const char *more[] = {"--resume", rd, "--summary", summary, NULL};
    n = add_args(t, n, more);
    t[n] = NULL;
    char *err;
    int st = run("b-train", t, &err);
    printf("b) train --resume with a FIFO checkpoint: exit %d: %s", st, err);
    CHECK(st == 1);
    CHECK(access(summary, F_OK) != 0 && errno == ENOENT);  // no summary rather than an empty one
    snprintf(summary, sizeof summary, "%s/b.json.tmp", rd);
    CHECK(access(summary, F_OK) != 0 && errno == ENOENT);
    expect(err, "not a regular file");
    CHECK(!strstr(err, "the last good checkpoint is"));  // not the file just refused
    free(err);
    snprintf(fifo, sizeof fifo, "%s/server-0.ckpt", rd);
    CHECK(mkfifo(fifo, 0644) == 0);
    const char *s[40] = {"server"};
    n = add_args(s, 1, data_args);
    const char *smore[] = {"--id", "0", "--servers", "1", "--workers", "1", "--coordinator", "127.0.0.1:1",
                           "--resume", rd, NULL};
    n = add_args(s, n, smore);
    s[n] = NULL;
    st = run("b-server", s, &err);
    printf("   server --resume with a FIFO checkpoint: exit %d: %s", st, err);
    CHECK(st == 1);
    expect(err, "not a regular file");
    free(err);
}

static void stalled_server(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/stall", dir);
    CHECK(mkdir(rd, 0755) == 0);
    int port = proc_free_port();
    char coordinator[64], host[80];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
    const char *common[] = {"--servers", "1", "--workers", "3", "--sync", "asp", "--epochs", "3",
                            "--delay-worker", "0:0.5,1:0.5,2:0.5", "--heartbeat-ms", "100", "--worker-timeout",
                            "1000", "--retry-ms", "200", "--timeout-ms", "30000", "--coordinator", coordinator,
                            "--run-dir", rd, "--run-id", "99", NULL};
    const char *s[64] = {ASGD_BINARY, "server"};
    int n = add_args(s, 2, data_args);
    n = add_args(s, n, common);
    s[n++] = "--id";
    s[n++] = "0";
    s[n++] = "--host-coordinator";
    s[n++] = host;
    s[n] = NULL;
    pid_t server = proc_start(s, proc_path(rd, "server.out"), proc_path(rd, "server.err"));
    pid_t workers[3];
    char ids[3][8];
    for (int k = 0; k < 3; k++) {
        const char *w[64] = {ASGD_BINARY, "worker"};
        n = add_args(w, 2, data_args);
        n = add_args(w, n, common);
        snprintf(ids[k], sizeof ids[k], "%d", k);
        w[n++] = "--id";
        w[n++] = ids[k];
        w[n] = NULL;
        workers[k] = proc_start(w, proc_path(rd, "worker-%d.out", k), proc_path(rd, "worker-%d.err", k));
    }
    for (int k = 0; k < 3; k++) {
        const char *csv = proc_path(rd, "worker-%d.csv", k);
        for (double until = proc_now_s() + HANG_S; proc_count_lines(csv) < 3 && proc_now_s() < until;)
            proc_sleep_ms(20);
        CHECK(proc_count_lines(csv) >= 3);  // every worker is training
    }
    CHECK(kill(server, SIGSTOP) == 0);
    proc_sleep_ms(3000);  // the provocation: a stall of three --worker-timeouts
    CHECK(kill(server, SIGCONT) == 0);
    for (int k = 0; k < 3; k++) CHECK(proc_wait(workers[k], 120.0) == 0);
    CHECK(proc_wait(server, HANG_S) == 0);
    char *j = proc_slurp(proc_path(rd, "server-0.json"));
    printf("c) server stopped 3 s (--worker-timeout 1 s) and continued: evictions %.0f, stalls %.0f, pushes %.0f\n",
           proc_json_number(j, NULL, "evictions"), proc_json_number(j, NULL, "stalls"),
           proc_json_number(j, NULL, "pushes_applied"));
    CHECK(proc_json_number(j, NULL, "evictions") == 0);
    CHECK(proc_json_number(j, NULL, "stalls") >= 1);
    free(j);
    for (int k = 0; k < 3; k++) {
        char *w = proc_slurp(proc_path(rd, "worker-%d.json", k));
        CHECK(proc_json_number(w, NULL, "rejoins_after_eviction") == 0);
        free(w);
    }
}

// d) --restart-workers under allreduce is refused, not ignored.
static void restart_under_allreduce(void) {
    const char *l[40] = {"launch"};
    int n = add_args(l, 1, data_args);
    const char *more[] = {"--workers", "2", "--sync", "allreduce", "--restart-workers", "3", NULL};
    n = add_args(l, n, more);
    l[n] = NULL;
    char *err;
    int st = run("d-launch", l, &err);
    printf("d) launch --sync allreduce --restart-workers 3: exit %d: %s", st, err);
    CHECK(st == 2);
    expect(err, "--restart-workers: the ring of --sync allreduce cannot take a restarted worker back");
    free(err);
}

// e) a checkpoint that cannot be written does not stop training.
static void checkpoint_fails_midway(void) {
    char rd[400], blocker[450], summary[500];
    snprintf(rd, sizeof rd, "%s/ckfail", dir);
    snprintf(blocker, sizeof blocker, "%s/train.ckpt", rd);
    CHECK(mkdir(rd, 0755) == 0 && mkdir(blocker, 0755) == 0);
    snprintf(summary, sizeof summary, "%s/keep", blocker);  // not empty: no rename can replace it
    FILE *f = fopen(summary, "w");
    CHECK(f && fclose(f) == 0);
    snprintf(summary, sizeof summary, "%s/summary.json", rd);
    const char *t[32] = {"train", "--model", "logreg", "--data", "gen:sparse:n=3000,dim=2000,nnz=20", "--threads", "1",
                         "--epochs", "20", "--checkpoint-dir", rd, "--checkpoint-every", "0.001", "--summary", summary,
                         "--quiet", NULL};
    char *err;
    int st = run("e-train", t, &err);
    const char *line = strstr(err, "asgd train: checkpoint failed");
    printf("e) train with its checkpoint path taken by a directory: exit %d: %.*s\n", st,
           line ? (int)strcspn(line, "\n") : 0, line ? line : "");
    CHECK(st == 0);
    CHECK(line && strstr(line, "training goes on (no good checkpoint yet)"));
    CHECK(!strstr(err, "the last good checkpoint is"));
    free(err);
    char *j = proc_slurp(summary);
    printf("   summary: epochs_done %.0f, checkpoints %.0f\n", proc_json_number(j, NULL, "epochs_done"),
           proc_json_number(j, NULL, "checkpoints"));
    CHECK(proc_json_number(j, NULL, "epochs_done") == 20 && proc_json_number(j, NULL, "checkpoints") == 0);
    free(j);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    checkpoint_dir_unwritable();
    fifo_checkpoints();
    stalled_server();
    restart_under_allreduce();
    checkpoint_fails_midway();
    char command[400];
    snprintf(command, sizeof command, "chmod -R u+w %s; rm -rf %s", dir, dir);
    CHECK(system(command) == 0);
    return 0;
}
