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
//   f) a worker that fails before it joins, every time (the test-only
//      ASGD_TEST_WORKER_FAIL_EARLY), under --restart-workers 50: restarted
//      twice, each after a longer back-off, then given up, saying so.
//   g) a worker SIGKILLed after its evaluation lines: the launch's failure line
//      names the signal and quotes none of them.
//   h) a failed allreduce run leaves nothing in the working directory (no
//      tmpXXXXXX/socket of an ipc:// ring), TMPDIR unset.
//   i) a CURVE key file holding a secret key, readable by its group or by
//      others, is refused (launch, server, worker), naming flag, file and mode.
//   j) a checkpoint directory that cannot be created is blamed on the flag
//      that named it: --resume for a server resumed without --checkpoint-dir.
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_hostile_XXXXXX";

#define HANG_S 60.0

static const char *const data_args[] = {"--model",   "logreg", "--data",       "gen:sparse:n=3000,dim=2000,nnz=20",
                                        "--threads", "1",      "--eval-every", "300",
                                        "--quiet",   NULL};

static int add_args(const char **a, int n, const char *const *more) {
    for (; *more; more++) a[n++] = *more;
    return n;
}

// Runs asgd with args, returns its exit status; its stderr in *err_text (caller frees).
// Runs the program `binary` with args (its output in dir/NAME.out, .err);
// returns its exit status and *err_text its stderr.
static int run_binary(const char *binary, const char *name, const char *const *args, char **err_text) {
    const char *a[64] = {binary};
    int n = add_args(a, 1, args);
    a[n] = NULL;
    const char *err = proc_path(dir, "%s.err", name);
    pid_t pid = proc_start(a, proc_path(dir, "%s.out", name), err);
    int st = proc_wait(pid, HANG_S);
    *err_text = proc_slurp(err);
    return st;
}

static int run(const char *name, const char *const *args, char **err_text) {
    return run_binary(ASGD_BINARY, name, args, err_text);
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
    const char *lmore[] = {"--workers", "2", "--checkpoint-dir", ro, "--checkpoint-every", "0.2", "--run-dir",
                           rd,          NULL};
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
    const char *smore[] = {"--id",          "0",           "--servers", "1", "--workers", "1",
                           "--coordinator", "127.0.0.1:1", "--resume",  rd,  NULL};
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
    const char *common[] = {"--servers",
                            "1",
                            "--workers",
                            "3",
                            "--sync",
                            "asp",
                            "--epochs",
                            "3",
                            "--delay-worker",
                            "0:0.5,1:0.5,2:0.5",
                            "--heartbeat-ms",
                            "100",
                            "--worker-timeout",
                            "1000",
                            "--retry-ms",
                            "200",
                            "--timeout-ms",
                            "30000",
                            "--coordinator",
                            coordinator,
                            "--run-dir",
                            rd,
                            "--run-id",
                            "99",
                            NULL};
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
    const char *t[32] = {"train",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=3000,dim=2000,nnz=20",
                         "--threads",
                         "1",
                         "--epochs",
                         "20",
                         "--checkpoint-dir",
                         rd,
                         "--checkpoint-every",
                         "0.001",
                         "--summary",
                         summary,
                         "--quiet",
                         NULL};
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

static size_t count_text(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) n++;
    return n;
}

// f) a worker that never gets as far as joining is not restarted for ever.
static void crash_loop(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/f-launch", dir);
    const char *l[40] = {"launch"};
    int n = add_args(l, 1, data_args);
    const char *more[] = {"--workers", "2", "--restart-workers", "50", "--run-dir", rd, NULL};
    n = add_args(l, n, more);
    l[n] = NULL;
    setenv("ASGD_TEST_WORKER_FAIL_EARLY", "1", 1);  // read by the test build only
    char *err;
    int st = run_binary(ASGD_HOOKS_BINARY, "f-launch", l, &err);
    unsetenv("ASGD_TEST_WORKER_FAIL_EARLY");
    printf("f) launch --restart-workers 50, worker 1 failing before it joins: exit %d, %zu restarts:\n%s", st,
           count_text(err, "; restarting it"), err);
    CHECK(st == 1);
    CHECK(count_text(err, "; restarting it") == 2);
    expect(err, "restarting it in 0.5 s (it had not joined the run) (restart 1 of at most 50)");
    expect(err, "restarting it in 1 s (it had not joined the run) (restart 2 of at most 50)");
    expect(err, "asgd launch: worker 1 failed 3 times in a row before joining the run: not restarting it again");
    // The cause quoted is the worker's own message.
    const char *line = strstr(err, "asgd launch: worker 1 (pid ");
    for (const char *next; line && (next = strstr(line + 1, "asgd launch: worker 1 (pid "));) line = next;
    CHECK(line && strstr(line,
                         "failed: exit status 1: asgd worker 1: ASGD_TEST_WORKER_FAIL_EARLY=1: failing before "
                         "joining the run; stopped the others"));
    free(err);
}

// Starts `asgd launch` with args (its output in dir/NAME.out, .err), waits for
// worker 1's curve to have `rows` lines (0: for worker 1 to train, its trainer
// thread started) and SIGKILLs that worker. Returns the launch's exit status;
// *victim the pid killed.
static int launch_and_kill_worker(const char *name, const char *const *args, const char *rd, size_t rows,
                                  pid_t *victim) {
    const char *a[64] = {ASGD_BINARY, "launch"};
    int n = add_args(a, 2, args);
    a[n] = NULL;
    pid_t launcher = proc_start(a, proc_path(dir, "%s.out", name), proc_path(dir, "%s.err", name));
    const char *csv = proc_path(rd, "worker-1.csv");
    for (double until = proc_now_s() + HANG_S; proc_count_lines(csv) < rows && proc_now_s() < until;) proc_sleep_ms(10);
    CHECK(proc_count_lines(csv) >= rows);
    *victim = 0;
    for (double until = proc_now_s() + HANG_S; proc_now_s() < until; proc_sleep_ms(10))
        if ((*victim = proc_find_child(launcher, "worker", 1)) > 0 && proc_thread_named(*victim, "trainer-0", 0)) break;
    CHECK(*victim > 0 && proc_thread_named(*victim, "trainer-0", 0));
    CHECK(kill(*victim, SIGKILL) == 0);
    return proc_wait(launcher, HANG_S);
}

// g) the failure line of a worker killed by a signal quotes no progress line.
static void killed_worker_line(void) {
    char rd[400];
    snprintf(rd, sizeof rd, "%s/g-launch", dir);
    const char *l[] = {"--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--threads",
                       "1",
                       "--eval-every",
                       "300",
                       "--epochs",
                       "1000",
                       "--workers",
                       "2",
                       "--run-dir",
                       rd,
                       NULL};
    pid_t victim;
    int st = launch_and_kill_worker("g-launch", l, rd, 4, &victim);
    char *err = proc_slurp(proc_path(dir, "g-launch.err"));
    char needle[128];
    snprintf(needle, sizeof needle, "asgd launch: worker 1 (pid %d) failed: ", (int)victim);
    char *line = strstr(err, needle);
    CHECK(line);
    line[strcspn(line, "\n")] = '\0';
    printf("g) worker 1 SIGKILLed after its evaluation lines: exit %d: %s\n", st, line);
    CHECK(st == 1);
    CHECK(strstr(err, "[worker 1] eval "));  // it did write evaluation lines
    snprintf(needle, sizeof needle,
             "asgd launch: worker 1 (pid %d) failed: killed by signal 9 (Killed); stopped the "
             "others",
             (int)victim);
    CHECK(strcmp(line, needle) == 0);
    free(err);
}

// h) a failed allreduce run: nothing left where it was started.
static void allreduce_leaves_nothing(void) {
    char cwd[400], rd[400], back[1024];
    snprintf(cwd, sizeof cwd, "%s/h-cwd", dir);
    snprintf(rd, sizeof rd, "%s/h-launch", dir);
    CHECK(mkdir(cwd, 0755) == 0);
    CHECK(getcwd(back, sizeof back));
    CHECK(chdir(cwd) == 0);  // the launch starts here, as its children do
    unsetenv("TMPDIR"), unsetenv("TEMPDIR"), unsetenv("TMP");
    const char *l[] = {"--model",   "logreg",    "--data",    "gen:sparse:n=20000,dim=2000,nnz=20",
                       "--threads", "1",         "--epochs",  "200",
                       "--sync",    "allreduce", "--workers", "2",
                       "--quiet",   "--run-dir", rd,          NULL};
    pid_t victim;
    // Its evaluations are deferred to the end (the ring's): training is the event.
    int st = launch_and_kill_worker("h-launch", l, rd, 0, &victim);
    CHECK(chdir(back) == 0);
    DIR *d = opendir(cwd);
    CHECK(d);
    size_t left = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        printf("   left in the working directory: %s\n", e->d_name);
        left++;
    }
    closedir(d);
    printf("h) allreduce run with worker 1 SIGKILLed: exit %d, %zu entries left in its working directory\n", st, left);
    CHECK(st == 1);
    CHECK(left == 0);
}

// i) secret keys readable by others are refused.
static void exposed_secret_key(void) {
    char keys[400], server_key[450], server_pub[450], worker_key[450];
    snprintf(keys, sizeof keys, "%s/keys", dir);
    CHECK(mkdir(keys, 0700) == 0);
    snprintf(server_key, sizeof server_key, "%s/server.key", keys);
    snprintf(server_pub, sizeof server_pub, "%s/server.pub", keys);
    snprintf(worker_key, sizeof worker_key, "%s/worker.key", keys);
    char *err;
    const char *k1[] = {"keygen", "--out", proc_path(keys, "server"), NULL};
    CHECK(run("i-keygen-server", k1, &err) == 0);
    free(err);
    const char *k2[] = {"keygen", "--out", proc_path(keys, "worker"), NULL};
    CHECK(run("i-keygen-worker", k2, &err) == 0);
    free(err);
    CHECK(chmod(server_key, 0640) == 0 && chmod(worker_key, 0604) == 0);
    char needle[1200];
    const char *l[40] = {"launch"};
    int n = add_args(l, 1, data_args);
    const char *lmore[] = {"--workers", "2", "--curve-server-key", server_key, "--run-dir", proc_path(dir, "i-launch"),
                           NULL};
    n = add_args(l, n, lmore);
    l[n] = NULL;
    int st = run("i-launch", l, &err);
    printf("i) launch with a 0640 server key: exit %d: %s", st, err);
    snprintf(needle, sizeof needle,
             "--curve-server-key %s: holds a secret key but is readable by its group (mode "
             "0640); make it yours alone: chmod 600 %s",
             server_key, server_key);
    CHECK(st == 1);
    expect(err, needle);
    free(err);
    const char *w[40] = {"worker"};
    n = add_args(w, 1, data_args);
    const char *wmore[] = {"--id",
                           "0",
                           "--servers",
                           "1",
                           "--workers",
                           "1",
                           "--coordinator",
                           "127.0.0.1:1",
                           "--curve-server-key",
                           server_pub,
                           "--curve-key",
                           worker_key,
                           NULL};
    n = add_args(w, n, wmore);
    w[n] = NULL;
    st = run("i-worker", w, &err);
    printf("   worker with a 0604 key of its own: exit %d: %s", st, err);
    snprintf(needle, sizeof needle, "--curve-key %s: holds a secret key but is readable by others (mode 0604)",
             worker_key);
    CHECK(st == 1);
    expect(err, needle);
    free(err);
}

// j) the flag blamed for a checkpoint directory that cannot be created.
static void checkpoint_dir_blame(void) {
    char file[400], below[450], needle[1400];
    snprintf(file, sizeof file, "%s/j-file", dir);
    FILE *f = fopen(file, "w");
    CHECK(f && fclose(f) == 0);
    snprintf(below, sizeof below, "%s/ck", file);  // below a regular file: nothing can create it, root included
    const char *flags[] = {"--resume", "--checkpoint-dir"};
    for (int k = 0; k < 2; k++) {
        const char *s[40] = {"server"};
        int n = add_args(s, 1, data_args);
        const char *more[] = {"--id",
                              "0",
                              "--servers",
                              "1",
                              "--workers",
                              "1",
                              "--coordinator",
                              "127.0.0.1:1",
                              "--checkpoint-every",
                              "1",
                              "--run-dir",
                              proc_path(dir, "j-run"),
                              flags[k],
                              below,
                              NULL};
        n = add_args(s, n, more);
        s[n] = NULL;
        char *err;
        int st = run(k ? "j-server-ckdir" : "j-server-resume", s, &err);
        printf("%s server %s DIR --checkpoint-every 1, DIR uncreatable: exit %d: %s", k ? "  " : "j)", flags[k], st,
               err);
        snprintf(needle, sizeof needle, "%s %s: cannot create %s: ", flags[k], below, below);
        CHECK(st == 1);
        expect(err, needle);
        CHECK(!strstr(err, "--run-dir"));
        free(err);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    checkpoint_dir_unwritable();
    fifo_checkpoints();
    stalled_server();
    restart_under_allreduce();
    checkpoint_fails_midway();
    crash_loop();
    killed_worker_line();
    allreduce_leaves_nothing();
    exposed_secret_key();
    checkpoint_dir_blame();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
