// `asgd launch` under torchrun's and ps-lite's conventions, without either
// installed: this test sets the variables itself, as the launcher would, and
// starts every process on 127.0.0.1.
//   torchrun: RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT for 3 ranks
//             (1 server, 2 workers), with MASTER_PORT held by another
//             listener as torchrun's own store would hold it;
//   ps-lite:  DMLC_ROLE=scheduler, 1 server and 2 workers, started in a
//             shuffled order; ids come from the scheduler, which merges the
//             run directory;
// each trains a small model to the end with summary.json written by exactly
// one process. A process with DMLC_ROLE=bogus (or RANK without WORLD_SIZE)
// fails at once with one line naming the variable, and starts nothing.
#include <math.h>
#include <sys/stat.h>

#include "tests/support/proc_support.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_conventions_XXXXXX";

#define TRAIN_FLAGS                                                                                              \
    "--model", "logreg", "--data", "gen:sparse:n=4000,dim=500,nnz=10", "--epochs", "3", "--timeout-ms", "60000", \
        "--heartbeat-ms", "200", "--worker-timeout", "20000", "--server-lr", "0.25"

// Variables of any launcher, which this test's own environment must not pass on.
static int launcher_var(const char *kv) {
    static const char *const prefixes[] = {"OMPI_", "PMI_", "PMIX_", "SLURM_", "DMLC_", "TORCHELASTIC_"};
    static const char *const names[] = {
        "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "GROUP_RANK=", "MASTER_ADDR=", "MASTER_PORT="};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(kv, names[i], strlen(names[i])) == 0) return 1;
    return 0;
}

// Starts `asgd launch ARGS` with this environment less any launcher's, plus
// `vars` (NULL-terminated "NAME=VALUE"); its output goes to dir/TAG.out and .err.
static pid_t start_launch(const char *tag, const char *const *vars, const char *const *args) {
    static char *env[512];
    size_t n = 0;
    for (char **e = environ; *e && n < 480; e++)
        if (!launcher_var(*e)) env[n++] = *e;
    for (; *vars && n < 510; vars++) env[n++] = (char *)*vars;
    env[n] = NULL;
    const char *argv[64] = {ASGD_BINARY, "launch"};
    size_t a = 2;
    for (; *args && a < 63; args++) argv[a++] = *args;
    argv[a] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, proc_path(dir, "%s.out", tag), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, proc_path(dir, "%s.err", tag), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    CHECK(posix_spawn(&pid, ASGD_BINARY, &fa, NULL, (char **)argv, env) == 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

// Waits for the process started as TAG; it must exit 0 (else its stderr is shown).
static void expect_success(const char *tag, pid_t pid) {
    int rc = proc_wait(pid, 300);
    if (rc != 0) {
        char *err = proc_slurp(proc_path(dir, "%s.err", tag));
        fprintf(stderr, "%s exited with %d:\n%s\n", tag, rc, err);
        free(err);
        exit(1);
    }
}

// Can a TCP socket bind 127.0.0.1:port now? Returns the bound socket (listening
// when `listen_too`) or -1.
static int bind_port(int port, int listen_too) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || (listen_too && listen(fd, 4) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

// A port P below 65535 such that P and P + 1 are both free now.
static int free_port_pair(void) {
    for (int tries = 0; tries < 100; tries++) {
        int p = proc_free_port();
        if (p >= 65535) continue;
        int a = bind_port(p, 0), b = bind_port(p + 1, 0);
        if (a >= 0) close(a);
        if (b >= 0) close(b);
        if (a >= 0 && b >= 0) return p;
    }
    fprintf(stderr, "no two consecutive free ports on 127.0.0.1\n");
    exit(1);
}

// The run in dir/NAME finished: 1 server, 2 workers, a useful model, and the
// summary written once — it is in the run directory, and exactly one of the
// processes (`tags`) printed it.
static void check_run(const char *name, const char *const *tags, size_t n_tags, const char *writer) {
    char *summary = proc_slurp(proc_path(dir, "%s/summary.json", name));
    if (!*summary) {
        fprintf(stderr, "%s: no summary.json\n", name);
        exit(1);
    }
    CHECK(proc_json_number(summary, NULL, "servers") == 1 && proc_json_number(summary, NULL, "workers") == 2);
    double acc = proc_json_number(summary, NULL, "final_test_accuracy");
    printf("%s: final_test_accuracy %.3f, samples %.0f\n", name, acc, proc_json_number(summary, NULL, "samples"));
    // The servers average the 2 workers' deltas (--server-lr = lr / 2; summed,
    // one ASan run ended at 0.650). The untrained model (w = 0) and the
    // majority class score about 0.5 on this balanced data.
    CHECK(acc > 0.75);
    CHECK(proc_json_number(summary, NULL, "final_test_loss") <= M_LN2 - 0.1);  // untrained: ln 2
    CHECK(proc_json_number(summary, NULL, "samples") >= 2 * 4000 * 0.9);  // 3 epochs of 90% of 4000, split in two
    CHECK(strstr(summary, "\"acked_pushes_applied_once\":true"));
    free(summary);
    size_t printed = 0;
    for (size_t i = 0; i < n_tags; i++) {
        char *out = proc_slurp(proc_path(dir, "%s.out", tags[i]));
        int has = strstr(out, "\"command\":\"launch\"") != NULL;
        printed += (size_t)has;
        if (has && strcmp(tags[i], writer) != 0) {
            fprintf(stderr, "%s: %s wrote the summary, not %s\n", name, tags[i], writer);
            exit(1);
        }
        free(out);
    }
    CHECK(printed == 1);
    for (int k = 0; k < 2; k++) {
        char *w = proc_slurp(proc_path(dir, "%s/worker-%d.json", name, k));
        CHECK(proc_json_number(w, NULL, "id") == k);
        free(w);
    }
    char *s = proc_slurp(proc_path(dir, "%s/server-0.json", name));
    CHECK(*s);
    free(s);
}

static void test_torchrun(void) {
    int port = free_port_pair();
    // torchrun's agent keeps its store on MASTER_PORT on the master node.
    int store = bind_port(port, 1);
    CHECK(store >= 0);
    char run_dir[300], master_port[32];
    snprintf(run_dir, sizeof run_dir, "%s/torchrun", dir);
    snprintf(master_port, sizeof master_port, "MASTER_PORT=%d", port);
    const char *args[] = {"--servers", "1",       "--sync",    "ssp",   "--staleness", "2",
                          TRAIN_FLAGS, "--quiet", "--run-dir", run_dir, NULL};
    const char *tags[3] = {"torchrun-0", "torchrun-1", "torchrun-2"};
    pid_t pids[3];
    // Started from the last rank to the first: rank 0's coordinator comes up last.
    for (int r = 2; r >= 0; r--) {
        char rank[32], local[32];
        snprintf(rank, sizeof rank, "RANK=%d", r);
        snprintf(local, sizeof local, "LOCAL_RANK=%d", r);
        const char *vars[] = {rank,        local, "WORLD_SIZE=3", "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1",
                              master_port, NULL};
        pids[r] = start_launch(tags[r], vars, args);
    }
    for (int r = 0; r < 3; r++) expect_success(tags[r], pids[r]);
    close(store);
    check_run("torchrun", tags, 3, "torchrun-0");
}

static void test_pslite(void) {
    int port = free_port_pair();
    char run_dir[300], root_port[40], model[320];
    snprintf(run_dir, sizeof run_dir, "%s/pslite", dir);
    snprintf(root_port, sizeof root_port, "DMLC_PS_ROOT_PORT=%d", port);
    snprintf(model, sizeof model, "%s/pslite.model", dir);
    // No --servers/--workers: DMLC_NUM_SERVER/DMLC_NUM_WORKER size the run.
    const char *args[] = {"--sync", "asp", TRAIN_FLAGS, "--run-dir", run_dir, "--save-model", model, NULL};
    const char *tags[4] = {"pslite-scheduler", "pslite-server", "pslite-worker-a", "pslite-worker-b"};
    const char *roles[4] = {"DMLC_ROLE=scheduler", "DMLC_ROLE=server", "DMLC_ROLE=worker", "DMLC_ROLE=worker"};
    // A shuffled start order (Fisher-Yates, seeded by the pid: shown for a rerun).
    int order[4] = {0, 1, 2, 3};
    unsigned seed = (unsigned)getpid();
    for (int i = 3; i > 0; i--) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    printf("ps-lite start order: %s, %s, %s, %s\n", tags[order[0]], tags[order[1]], tags[order[2]], tags[order[3]]);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        int k = order[i];
        const char *vars[] = {
            roles[k], "DMLC_PS_ROOT_URI=127.0.0.1", root_port, "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=2", NULL};
        pids[k] = start_launch(tags[k], vars, args);
    }
    for (int k = 0; k < 4; k++) expect_success(tags[k], pids[k]);
    check_run("pslite", tags, 4, "pslite-scheduler");
    // The scheduler also joined the server's part of --save-model into the file.
    struct stat st;
    CHECK(stat(model, &st) == 0 && st.st_size > 500 * 4);  // at least the 500 weights
    // Each worker was given its own id, once: 0 and 1 between them.
    int ids_seen[2] = {0, 0};
    for (int k = 2; k < 4; k++) {
        char *err = proc_slurp(proc_path(dir, "%s.err", tags[k]));
        const char *is = strstr(err, " is worker ");
        CHECK(is);
        int id = atoi(is + strlen(" is worker "));
        CHECK(id == 0 || id == 1);
        ids_seen[id]++;
        free(err);
    }
    CHECK(ids_seen[0] == 1 && ids_seen[1] == 1);
    char *err = proc_slurp(proc_path(dir, "pslite-server.err"));
    CHECK(strstr(err, " is server 0"));
    free(err);
}

// A process whose part cannot be known fails with one line naming the
// variable and what it should hold, and starts no run of its own.
static void expect_refused(const char *tag, const char *const *vars, const char *var, const char *form) {
    char run_dir[300];
    snprintf(run_dir, sizeof run_dir, "%s/%s", dir, tag);
    const char *args[] = {TRAIN_FLAGS, "--run-dir", run_dir, NULL};
    int rc = proc_wait(start_launch(tag, vars, args), 60);
    char *err = proc_slurp(proc_path(dir, "%s.err", tag)), *out = proc_slurp(proc_path(dir, "%s.out", tag));
    printf("%s: exit %d: %s", tag, rc, err);
    CHECK(rc == 2);
    CHECK(strstr(err, var) && strstr(err, form));
    CHECK(proc_count_lines(proc_path(dir, "%s.err", tag)) == 1 && *out == '\0');
    CHECK(access(run_dir, F_OK) != 0);  // no run directory: nothing started
    free(err);
    free(out);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    const char *bogus[] = {"DMLC_ROLE=bogus",   "DMLC_PS_ROOT_URI=127.0.0.1", "DMLC_PS_ROOT_PORT=9091",
                           "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=2",          NULL};
    expect_refused("bogus-role", bogus, "DMLC_ROLE", "scheduler, server or worker");
    const char *half[] = {"RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", NULL};
    expect_refused("rank-without-size", half, "WORLD_SIZE", "number of processes");
    test_torchrun();
    test_pslite();
    CHECK(test_remove_tree(dir) == 0);
    printf("launcher conventions: ok\n");
    return 0;
}
