// A local launch: every process of a distributed run started on this machine, supervised and restarted (launch_local.h).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "engine/run/banner.h"
#include "engine/run/launch_local.h"
#include "engine/run/run_output.h"
#include "engine/run/dist.h"
#include "engine/run/launch_curve.h"
#include "engine/run/launch_job.h"
#include "engine/run/run_merge.h"
#include "engine/run/run_record.h"
#include "engine/run/worker_live.h"
#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/trace.h"
#include "net/curve_auth.h"
#include "net/wire.h"
#include "net/launch_env.h"
#include "net/rendezvous.h"

#define ERR_LEN 512

typedef struct child {
    pid_t pid;
    dist_role_t role;
    size_t id;
    int out_fd, err_fd;  // pipes from its stdout and stderr; -1 once closed
    char line[2][1024];  // partial lines being assembled
    size_t line_len[2];
    char last_err[1024];  // its last error line ("asgd ..."), not a progress line
    char save_path[1100];  // the --save-model part it writes (part_path)
    int status;
    int exited;
    int echo;  // show its lines on stderr (not under launch_job_run)
    int echo_stdout;  // ... its stdout's (its JSON) too (not under --quiet)
    const char *resume;  // a restarted server: the checkpoint directory it resumes from
    size_t replica;  // --server-replicas: which replica of its shard (0: the first primary)
    int replica_backup;  // ... started as a backup that copies the state of the shard's primary
    size_t answers_at_start;  // rdv_server_answers when this incarnation started: more later = it joined
    size_t early_failures;  // failures in a row before joining (restart_worker backs off, then gives up)
    int restart_due;  // it is to be started again at restart_at (restart_worker's back-off)
    double restart_at;
} child_t;

static volatile sig_atomic_t interrupted;  // the first stop signal's number
static int progress_on_screen;  // a terminal shows an unfinished progress line

// The first stop signal (SIGINT, SIGTERM, SIGHUP) stops the run in order
// (stop_in_order). From then on the three have their default action: a
// second one kills the launcher at once, and its children with it (each
// asked for SIGKILL when its parent dies: spawn).
static void on_interrupt(int sig) {
    interrupted = sig;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
}

const char *launch_role_name(dist_role_t r) { return r == DIST_ROLE_SERVER ? "server" : "worker"; }

// --trace: the timeline process (role, id) writes in the run directory.
void launch_trace_part_path(char *out, size_t len, const char *dir, dist_role_t role, size_t id) {
    snprintf(out, len, "%s/trace-%s-%zu.json", dir, launch_role_name(role), id);
}

// --trace FILE: every process's timeline merged into FILE (docs/trace.md).
// A process that left none (it was stopped) is named on stderr and left out.
static int merge_traces(const char *dir, const dist_args_t *d, const char *out, int quiet, char *err, size_t err_len) {
    size_t n = d->servers + d->workers;
    char(*paths)[600] = calloc(n, sizeof *paths);
    const char **list = calloc(n, sizeof *list);
    int rc = -1;
    if (!paths || !list) {
        snprintf(err, err_len, "--trace: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        launch_trace_part_path(paths[i], sizeof paths[i], dir, i < d->servers ? DIST_ROLE_SERVER : DIST_ROLE_WORKER,
                               i < d->servers ? i : i - d->servers);
        list[i] = paths[i];
    }
    size_t missing = 0;
    if (trace_merge(out, list, n, &missing, "--trace", err, err_len) != 0) goto out;
    if (missing && !quiet) run_say("asgd launch: --trace %s: %zu of %zu processes left no timeline\n", out, missing, n);
    rc = 0;
out:
    free(paths);
    free(list);
    return rc;
}

// ---- local launch ----------------------------------------------------------------

// Whether a child's stderr line is one of its messages ("asgd worker 1: ...",
// "asgd server: ...", "exec ... failed"), which may say why it failed, rather
// than an evaluation or progress line, which never does.
static int is_error_line(const char *line) { return strncmp(line, "asgd ", 5) == 0 || strncmp(line, "exec ", 5) == 0; }

// Shows a child's output line by line, prefixed with who wrote it.
static void pump_child(child_t *c, int which) {
    int fd = which == 0 ? c->out_fd : c->err_fd;
    char buf[4096];
    ssize_t got = read(fd, buf, sizeof buf);
    if (got <= 0) {
        if (got < 0 && errno == EINTR) return;
        close(fd);
        if (which == 0)
            c->out_fd = -1;
        else
            c->err_fd = -1;
        got = 0;
    }
    for (ssize_t i = 0; i <= got; i++) {
        int end = i == got;
        if (end && got > 0) break;
        char ch = end ? '\n' : buf[i];
        if (ch == '\r') ch = '\n';
        if (ch != '\n' && c->line_len[which] < sizeof c->line[which] - 1) {
            c->line[which][c->line_len[which]++] = ch;
            continue;
        }
        if (ch != '\n') continue;
        if (c->line_len[which] == 0) continue;
        c->line[which][c->line_len[which]] = '\0';
        if (which == 1 && is_error_line(c->line[which]))
            snprintf(c->last_err, sizeof c->last_err, "%s", c->line[which]);
        if (c->echo && (which == 1 || c->echo_stdout)) {
            if (progress_on_screen) run_say("\r\033[K");  // the progress line is redrawn at its next tick
            progress_on_screen = 0;
            run_say("[%s %zu] %s\n", launch_role_name(c->role), c->id, c->line[which]);
        }
        c->line_len[which] = 0;
    }
}

static int spawn(child_t *c, const char *exe, char **args, char **envp) {
    int out[2], errp[2];
    if (pipe(out) != 0) return -1;
    if (pipe(errp) != 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        // The child dies with the launcher, however the launcher ends (SIGKILL
        // included); a launcher gone before the prctl shows as a new parent.
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
        dup2(out[1], STDOUT_FILENO);
        dup2(errp[1], STDERR_FILENO);
        close(out[0]);
        close(out[1]);
        close(errp[0]);
        close(errp[1]);
        signal(SIGINT, SIG_IGN);  // Ctrl-C goes to the launcher, which stops everyone in order
        execve(exe, args, envp);
        dprintf(STDERR_FILENO, "exec %s failed: %s\n", exe, strerror(errno));  // into the pipe the launcher reads
        _exit(127);
    }
    close(out[1]);
    close(errp[1]);
    c->pid = pid;
    c->out_fd = out[0];
    c->err_fd = errp[0];
    return 0;
}

static void stop_children(child_t *kids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (kids[i].pid > 0 && !kids[i].exited) kill(kids[i].pid, SIGTERM);
    // Give them two seconds to leave cleanly, then insist.
    for (int tries = 0; tries < 40; tries++) {
        int alive = 0;
        for (size_t i = 0; i < n; i++) {
            if (kids[i].pid <= 0 || kids[i].exited) continue;
            int st;
            if (waitpid(kids[i].pid, &st, WNOHANG) == kids[i].pid) {
                kids[i].exited = 1;
                kids[i].status = st;
            } else {
                alive = 1;
            }
        }
        if (!alive) return;
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (kids[i].pid > 0 && !kids[i].exited) {
            kill(kids[i].pid, SIGKILL);
            waitpid(kids[i].pid, &kids[i].status, 0);
            kids[i].exited = 1;
        }
    }
}

static void describe_exit(int status, char *out, size_t len) {
    if (WIFEXITED(status))
        snprintf(out, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "status %d", status);
}

// Starts (or restarts) child c: its role, the run's job (job_path, read as
// its --config), and its own id, the run's coordinator and directory.
static int spawn_child(child_t *c, const char *exe, char **args, char **envp, const char *job_path, int traced,
                       const dist_args_t *d, const char *coordinator, const char *dir, const char *save_model,
                       char *id_text) {
    size_t a = 0;
    char trace_path[600];  // --trace: each child its own timeline in the run directory
    args[a++] = (char *)exe;
    args[a++] = (char *)launch_role_name(c->role);
    args[a++] = "--config";
    args[a++] = (char *)job_path;
    snprintf(id_text, 32, "%zu", c->id);
    args[a++] = "--id";
    args[a++] = id_text;
    args[a++] = "--coordinator";
    args[a++] = (char *)coordinator;
    args[a++] = "--run-dir";
    args[a++] = (char *)dir;
    // Every process is on this machine: the ring is faster over ipc:// (docs/allreduce.md).
    if (dist_uses_ring(d->sync) && !d->ring_ipc) args[a++] = "--ring-ipc";
    const char *part = run_merge_part_path(c->role, c->id, d, dir, save_model, c->save_path, sizeof c->save_path);
    if (part) {
        args[a++] = "--save-model";
        args[a++] = (char *)part;
    }
    if (c->resume) {
        args[a++] = "--resume";
        args[a++] = (char *)c->resume;
    }
    char replica_text[24];
    if (d->server_replicas > 1 && c->role == DIST_ROLE_SERVER) {
        snprintf(replica_text, sizeof replica_text, "%zu", c->replica);
        args[a++] = "--replica";
        args[a++] = replica_text;
        if (c->replica_backup) args[a++] = "--replica-backup";
    }
    if (traced) {
        launch_trace_part_path(trace_path, sizeof trace_path, dir, c->role, c->id);
        args[a++] = "--trace";
        args[a++] = trace_path;
    }
    args[a] = NULL;
    return spawn(c, exe, args, envp);
}

// One local run: the coordinator here, every process a child of this one.
typedef struct local_run {
    const run_job_t *job;
    const train_args_t *t;
    const dist_args_t *d;
    char job_path[600];  // the run directory's RUN_JOB_PROCESS_FILE, every child's --config
    const char *save_model;
    size_t restart_workers;
    size_t restart_servers, server_restarts_done;
    size_t replica_restarts;  // --server-replicas: dead replicas started again as backups
    size_t *server_restarts;  // [d->servers]: each shard's restarts, for the summary
    char ckpt_dir[512];  // where the servers checkpoint: --checkpoint-dir, else the run directory
    char dir[512];
    void *ctx;
    zap_handler_t *zap;
    rdv_server_t *rdv;
    char coordinator_bind[300];  // where the coordinator listens: --coordinator's port, else any
    char coordinator[256], id_text[32];
    // The children's environment: ours, and the run id and key pair (DIST_ENV_*),
    // which stay off their command lines.
    char **envp;
    char env_run_id[64], env_public[96], env_secret[96];
    curve_key_t key_public,
        key_secret;  // the run's throwaway pair (d->run_key_*), unless --curve-server-key or --insecure
    char exe[4096];
    child_t *kids;
    char **args;  // a child's command line, built by spawn_child
    size_t n_kids, started, running, restarts;
    const child_t *culprit;  // the child whose failure stopped the run
    int verbose;  // --verbose
    double stop_began;  // after a stop signal: when the workers were asked to leave (0: not yet)
    double workers_gone_at;  // ... when the last of them had ended (0: not yet)
    int servers_told;  // ... the servers were stopped too (they had not finished by themselves)
    int merged;  // the run directory was merged (the final progress line shows it)
    launch_job_outcome_t *outcome;  // launch_job_run: nothing on stderr, the first failure in err, figures here
    double progress_every;  // seconds between progress lines (0: none, --quiet)
    int progress_tty;  // stderr is a terminal: one line rewritten in place
    double next_progress;  // when the next one is due
    double shown_samples;  // the samples the last line showed
    char err[ERR_LEN];
} local_run_t;

// "asgd launch: <what>" on stderr, or under launch_job_run the first such
// message kept in r->err.
__attribute__((format(printf, 2, 3))) static void launch_say(local_run_t *r, const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!r->outcome) {
        if (progress_on_screen) run_say("\r\033[K");  // the progress line is redrawn at its next tick
        progress_on_screen = 0;
        run_say("asgd launch: %s\n", msg);
    } else if (!r->err[0]) {
        snprintf(r->err, sizeof r->err, "%s", msg);
    }
}

// The run directory: --run-dir, else runs/launch-DATE-TIME-PID. Returns 0, or 1 after saying why.
static int local_run_dir(local_run_t *r) {
    char err[ERR_LEN];
    if (r->d->run_dir) {
        snprintf(r->dir, sizeof r->dir, "%s", r->d->run_dir);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        mkdir("runs", 0777);
        snprintf(r->dir, sizeof r->dir, "runs/launch-%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
    }
    if (dist_check_writable_dir(r->dir, "--run-dir", err, sizeof err) != 0 ||
        train_args_write_run_config(r->t, r->dir, err, sizeof err) != 0 ||
        run_job_write_process_file(r->job, r->dir, r->job_path, sizeof r->job_path, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    // A directory used again: what says a process of this run is done must be this run's.
    run_merge_clear(r->dir, r->d);
    return 0;
}

extern char **environ;

// The children's environment: this process's, less any DIST_ENV_* of its own,
// plus the run's. Returns 0 or -1 (out of memory).
static int local_run_env(local_run_t *r) {
    size_t n = 0;
    while (environ[n]) n++;
    if (!(r->envp = calloc(n + 4, sizeof *r->envp))) return -1;
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ASGD_LAUNCH_", 12) != 0) r->envp[e++] = environ[i];
    r->envp[e++] = r->env_run_id;
    if (r->d->run_key_secret) {
        snprintf(r->env_public, sizeof r->env_public, DIST_ENV_KEY_PUBLIC "=%s", r->d->run_key_public);
        snprintf(r->env_secret, sizeof r->env_secret, DIST_ENV_KEY_SECRET "=%s", r->d->run_key_secret);
        r->envp[e++] = r->env_public;
        r->envp[e++] = r->env_secret;
    }
    r->envp[e] = NULL;
    return 0;
}

// DIR/join, for asgd worker --join --run-dir DIR: the coordinator, the run id
// and the run's key pair (when it has one); owner-only, created so.
static int local_run_write_join(local_run_t *r, uint64_t run_id, char *err, size_t err_len) {
    char path[1100];
    snprintf(path, sizeof path, "%s/join", r->dir);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        snprintf(err, err_len, "%.300s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "coordinator %s\nrun_id %llu\n", rdv_server_endpoint(r->rdv), (unsigned long long)run_id);
    if (r->d->run_key_secret)
        fprintf(f, "curve_public %s\ncurve_secret %s\n", r->d->run_key_public, r->d->run_key_secret);
    if (fclose(f) != 0) {
        snprintf(err, err_len, "%.300s: writing failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

// The coordinator (with a fresh run id, so that a straggler from an earlier
// run is refused), this program's path and the children's table. Returns 0,
// or 1 after saying why.
static int local_run_start(local_run_t *r) {
    char err[ERR_LEN] = "";
    if (!(r->ctx = zmq_ctx_new())) {
        launch_say(r, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        return 1;
    }
    // The coordinator meets the primaries and the workers; backups (after the
    // workers in kids) find their primary through the run directory.
    size_t ranks = r->d->servers + r->d->workers;
    r->n_kids = ranks + r->d->servers * (r->d->server_replicas - 1);
    uint64_t run_id = wire_fresh_id(r);
    // The children get the --curve-* flags too: the coordinator here speaks as they do.
    if (dist_security_start(r->d, r->ctx, &r->zap, err, sizeof err) != 0 ||
        !(r->rdv = rdv_server_new_elastic(r->ctx, r->coordinator_bind, ranks + dist_slots(r->d) - r->d->workers, ranks,
                                          run_id, err, sizeof err))) {
        launch_say(r, "starting the coordinator: %s", err);
        return 1;
    }
    if (dist_slots(r->d) > r->d->workers && local_run_write_join(r, run_id, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    snprintf(r->coordinator, sizeof r->coordinator, "%s", rdv_server_endpoint(r->rdv));
    snprintf(r->env_run_id, sizeof r->env_run_id, DIST_ENV_RUN_ID "=%llu", (unsigned long long)run_id);
    if (local_run_env(r) != 0) {
        launch_say(r, "out of memory");
        return 1;
    }
    ssize_t len = readlink("/proc/self/exe", r->exe, sizeof r->exe - 1);
    if (len <= 0) {
        launch_say(r, "cannot find this program's path (/proc/self/exe): %s", strerror(errno));
        return 1;
    }
    r->exe[len] = '\0';
    r->kids = calloc(r->n_kids, sizeof *r->kids);
    r->args = calloc(32, sizeof *r->args);  // up to 15 pairs of flags
    r->server_restarts = calloc(r->d->servers + 1, sizeof *r->server_restarts);
    snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", r->t->checkpoint_dir ? r->t->checkpoint_dir : r->dir);
    if (!r->kids || !r->args || !r->server_restarts) {
        launch_say(r, "out of memory");
        return 1;
    }
    return 0;
}

static void local_run_free(local_run_t *r) {
    for (size_t i = 0; i < r->started; i++) {
        if (r->kids[i].out_fd >= 0) close(r->kids[i].out_fd);
        if (r->kids[i].err_fd >= 0) close(r->kids[i].err_fd);
    }
    free(r->kids);
    free(r->args);
    free(r->server_restarts);
    free(r->envp);
    memset(r->env_secret, 0, sizeof r->env_secret);
    memset(&r->key_secret, 0, sizeof r->key_secret);
    rdv_server_destroy(&r->rdv);
    zap_handler_destroy(&r->zap);
    if (r->ctx) zmq_ctx_term(r->ctx);
}

static int local_spawn(local_run_t *r, child_t *c) {
    c->answers_at_start = rdv_server_answers(r->rdv, c->role == DIST_ROLE_SERVER ? c->id : r->d->servers + c->id);
    return spawn_child(c, r->exe, r->args, r->envp, r->job_path, r->t->trace != NULL, r->d, r->coordinator, r->dir,
                       r->save_model, r->id_text);
}

// Servers first, then workers. Returns 0, or -1 after naming the one that did not start.
static int spawn_all(local_run_t *r) {
    for (size_t i = 0; i < r->n_kids; i++) {
        child_t *c = &r->kids[i];
        size_t ranks = r->d->servers + r->d->workers, backups = r->d->server_replicas - 1;
        c->role = i < r->d->servers || i >= ranks ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
        c->id = i < r->d->servers ? i : i < ranks ? i - r->d->servers : (i - ranks) / backups;
        c->replica = i < ranks ? 0 : 1 + (i - ranks) % backups;
        c->replica_backup = i >= ranks;
        c->out_fd = c->err_fd = -1;
        c->echo = !r->outcome;
        c->echo_stdout = r->verbose;  // its JSON summary is in the run directory
        if (local_spawn(r, c) != 0) {
            launch_say(r, "starting %s %zu: %s", launch_role_name(c->role), c->id, strerror(errno));
            return -1;
        }
        r->started++;
    }
    r->running = r->started;
    return 0;
}

// Shows what the children wrote (waiting up to 100 ms for it).
static void pump_output(local_run_t *r) {
    struct pollfd fds[2 * 64];
    child_t *owner[2 * 64];
    int which[2 * 64];
    nfds_t nf = 0;
    for (size_t i = 0; i < r->started && nf + 2 <= 2 * 64; i++) {
        child_t *c = &r->kids[i];
        if (c->out_fd >= 0) {
            fds[nf] = (struct pollfd){c->out_fd, POLLIN, 0};
            owner[nf] = c;
            which[nf++] = 0;
        }
        if (c->err_fd >= 0) {
            fds[nf] = (struct pollfd){c->err_fd, POLLIN, 0};
            owner[nf] = c;
            which[nf++] = 1;
        }
    }
    if (nf == 0) {
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        return;
    }
    int rc = poll(fds, nf, 100);
    for (nfds_t f = 0; rc > 0 && f < nf; f++)
        if (fds[f].revents) pump_child(owner[f], which[f]);
}

// A worker that fails before joining the run (it never got the rendezvous
// table) is started again after RESTART_BACKOFF_S, doubled at each such
// failure in a row, and given up after RESTART_EARLY_FAILURES of them: it
// would only fail the same way again.
#define RESTART_BACKOFF_S 0.5
#define RESTART_EARLY_FAILURES 3

// A failed worker is started again, with the same command: it rejoins the run
// at the clock the servers give it (not under allreduce or hybrid: their ring
// cannot take a member back), at most --restart-workers times; one that
// failed before joining, after a back-off (start_due_restarts). Returns 0
// when it was (or will be).
static int restart_worker(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_WORKER || dist_uses_ring(r->d->sync) || r->restarts >= r->restart_workers) return -1;
    char how[128];
    describe_exit(c->status, how, sizeof how);
    int joined = rdv_server_answers(r->rdv, r->d->servers + c->id) > c->answers_at_start;
    c->early_failures = joined ? 0 : c->early_failures + 1;
    if (c->early_failures >= RESTART_EARLY_FAILURES) {
        launch_say(r, "worker %zu failed %zu times in a row before joining the run: not restarting it again", c->id,
                   c->early_failures);
        return -1;
    }
    double wait_s = joined ? 0 : RESTART_BACKOFF_S * (double)(1u << (c->early_failures - 1));
    r->restarts++;
    // Under asp and ssp a worker that checkpoints goes on from its last checkpoint.
    char ckpt[1100] = "";
    if (r->t->checkpoint_every > 0 && (r->d->sync == SYNC_MODE_ASP || r->d->sync == SYNC_MODE_SSP) && !r->t->device) {
        snprintf(ckpt, sizeof ckpt, "%s/worker-%zu.ckpt", r->ckpt_dir, c->id);
        if (access(ckpt, R_OK) == 0)
            c->resume = r->ckpt_dir;
        else
            ckpt[0] = '\0';
    }
    if (!r->outcome) {
        char when[64] = "", from[1120] = "";
        if (!joined) snprintf(when, sizeof when, " in %g s (it had not joined the run)", wait_s);
        if (ckpt[0]) snprintf(from, sizeof from, " from %s", ckpt);
        run_say("asgd launch: worker %zu (pid %d) failed: %s; restarting it%s%s (restart %zu of at most %zu)\n", c->id,
                (int)c->pid, how, from, when, r->restarts, r->restart_workers);
    }
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
    if (!joined) {
        c->restart_due = 1;  // stays exited until then
        c->restart_at = mono_clock_s() + wait_s;
        return 0;
    }
    c->exited = 0;
    if (local_spawn(r, c) == 0) return 0;
    c->exited = 1;
    return -1;
}

// Starts the workers whose back-off has passed. Returns -1 when one did not
// start (r->culprit), else 0.
static int start_due_restarts(local_run_t *r) {
    double now = mono_clock_s();
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        if (!c->restart_due || now < c->restart_at) continue;
        c->restart_due = 0;
        c->exited = 0;
        if (local_spawn(r, c) != 0) {
            c->exited = 1;
            launch_say(r, "restarting worker %zu: %s", c->id, strerror(errno));
            r->culprit = c;
            return -1;
        }
    }
    return 0;
}

// A failed server is started again from its last checkpoint (--resume), at
// most --restart-servers times in all: it binds the endpoint it had, its
// workers reconnect by themselves and resend what it had not answered, and
// it counts the pushes it had applied after that checkpoint, lost. Returns 0
// when it was; -1 (after saying why, when the flag is on) when not.
static int restart_server(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_SERVER || r->restart_servers == 0) return -1;
    if (r->server_restarts_done >= r->restart_servers) {
        launch_say(r, "server %zu failed again: --restart-servers %zu used up", c->id, r->restart_servers);
        return -1;
    }
    char ckpt[1100], how[128];
    snprintf(ckpt, sizeof ckpt, "%s/server-%zu.ckpt", r->ckpt_dir, c->id);
    if (access(ckpt, R_OK) != 0) {
        launch_say(r,
                   "server %zu failed before its first checkpoint (%s: %s): nothing to restart it from; its "
                   "message below says why it failed, and once that is mended a new launch starts afresh (a "
                   "smaller --checkpoint-every S saves sooner)",
                   c->id, ckpt, strerror(errno));
        return -1;
    }
    describe_exit(c->status, how, sizeof how);
    r->server_restarts_done++;
    if (!r->outcome)
        run_say(
            "asgd launch: server %zu (pid %d) failed: %s; restarting it from %s (restart %zu of at most "
            "%zu)\n",
            c->id, (int)c->pid, how, ckpt, r->server_restarts_done, r->restart_servers);
    c->exited = 0;
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
    c->resume = r->ckpt_dir;
    if (local_spawn(r, c) == 0) {
        r->server_restarts[c->id]++;
        return 0;
    }
    c->exited = 1;
    return -1;
}

// --server-replicas: a dead replica is started again as a backup, which copies
// the state of its shard's live replica and rejoins (net/ps_replica.h); a run
// gives up after REPLICA_RESTARTS_MAX such restarts in all.
#define REPLICA_RESTARTS_MAX 16
static int restart_replica(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_SERVER || r->d->server_replicas < 2 || r->replica_restarts >= REPLICA_RESTARTS_MAX)
        return -1;
    // A primary that died before the run's processes had all met at the
    // coordinator leaves nothing to take over: no replica holds its state
    // (none was in sync yet) and no worker knows its endpoint. Started again
    // as a backup it would wait for a primary that never comes: the run ends.
    if (!c->replica_backup && rdv_server_answers(r->rdv, c->id) == 0) {
        launch_say(r,
                   "server %zu replica %zu died before the run's processes had met: no replica holds its shard "
                   "to take over from",
                   c->id, c->replica);
        return -1;
    }
    char how[128];
    describe_exit(c->status, how, sizeof how);
    r->replica_restarts++;
    if (!r->outcome)
        run_say(
            "asgd launch: server %zu replica %zu (pid %d) failed: %s; restarting it as a backup (replica "
            "restart %zu)\n",
            c->id, c->replica, (int)c->pid, how, r->replica_restarts);
    c->exited = 0;
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
    c->replica_backup = 1;
    if (local_spawn(r, c) == 0) return 0;
    c->exited = 1;
    return -1;
}

// Collects the children that ended. Returns -1 when one failed for good (r->culprit), else 0.
static int reap_children(local_run_t *r) {
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        int st;
        if (c->exited || waitpid(c->pid, &st, WNOHANG) != c->pid) continue;
        // Show what it still had to say.
        while (c->err_fd >= 0) pump_child(c, 1);
        while (c->out_fd >= 0) pump_child(c, 0);
        c->exited = 1;
        c->status = st;
        r->running--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        if (interrupted) continue;  // stopping: each ends as the signal had it; the merge says what is missing
        if (restart_worker(r, c) == 0 || restart_replica(r, c) == 0 || restart_server(r, c) == 0) {
            r->running++;
            continue;
        }
        r->culprit = c;
        return -1;
    }
    return 0;
}

// ---- the live progress line ----------------------------------------------------------

// The last complete row of a curve file (the run directory's CSVs: global.csv's
// columns, or a worker's first ten of them) into v[0..n) (NaN: empty or
// missing). Reads the file's last 4 KiB only. Returns 1 when there was a row.
static int last_curve_row(const char *path, double *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = NAN;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[4097];
    long at = 0;
    if (fseek(f, 0, SEEK_END) == 0 && (at = ftell(f)) > 4096)
        fseek(f, at - 4096, SEEK_SET);
    else
        rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    char *end = strrchr(buf, '\n');  // a row being written has no newline yet
    if (!end) return 0;
    *end = '\0';
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    if (!(*line >= '0' && *line <= '9')) return 0;  // the header: no row yet
    for (size_t i = 0; i < n && line; i++) {
        if (*line != ',' && *line) v[i] = strtod(line, NULL);
        line = strchr(line, ',');
        if (line) line++;
    }
    return 1;
}

// The last "global" row of merged.csv (process, then the curve's columns) into
// v[0..n); v is left as it is when there is none.
static void last_global_row(const char *path, double *v, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "global,", 7) == 0) memcpy(last, line, sizeof last);
    fclose(f);
    if (!last[0]) return;
    const char *p = last + 7;
    for (size_t i = 0; i < n && p; i++) {
        v[i] = *p != ',' && *p != '\n' && *p ? strtod(p, NULL) : NAN;
        p = strchr(p, ',');
        if (p) p++;
    }
}

// The run's progress from the files its processes keep in the run directory:
// the workers' live counts (samples, rates: worker_live.h, current whether or
// not the workers evaluate), else their curves' last rows, and the global
// model's latest evaluation (global-progress.csv, written beside shard 0;
// under allreduce, hybrid and local, worker 0's rows are the global model's). The final line,
// once the run directory is merged, shows the global model's last row of
// merged.csv: the closing pull, with the staleness of the whole run. Returns 0
// when there is nothing to show yet.
static int progress_text(const local_run_t *r, int final, char *out, size_t len, double *samples_out) {
    const dist_args_t *d = r->d;
    double samples = 0, rate = 0, wall = 0, w[CURVE_N_COLUMNS], g[CURVE_N_COLUMNS];
    size_t rows = 0;
    for (size_t k = 0; k < d->workers; k++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/worker-%zu.csv", r->dir, k);
        int has_row = last_curve_row(path, w, CURVE_N_COLUMNS);
        if (k == 0) memcpy(g, w, sizeof g);
        if (worker_live_read(r->dir, k, &w[CURVE_SAMPLES], &w[CURVE_SAMPLES_PER_S], &w[CURVE_WALL_S])) has_row = 1;
        if (!has_row) continue;
        rows++;
        if (isfinite(w[CURVE_SAMPLES])) samples += w[CURVE_SAMPLES];
        if (w[CURVE_WALL_S] > wall) wall = w[CURVE_WALL_S];
    }
    if (rows == 0) return 0;
    if (dist_global_on_servers(d->sync)) {
        char path[1100];
        snprintf(path, sizeof path, "%s/global-progress.csv", r->dir);
        last_curve_row(path, g, CURVE_N_COLUMNS);
    }
    if (final) {
        char path[1100];
        snprintf(path, sizeof path, "%s/merged.csv", r->dir);
        last_global_row(path, g, CURVE_N_COLUMNS);
    }
    // The run's rate: every worker's samples over the longest training time
    // (a worker that finished early would otherwise add its last rate forever).
    rate = wall > 0 ? samples / wall : 0;
    *samples_out = samples;
    int rmse = train_args_model(r->t)->metric == METRIC_KIND_RMSE;
    double metric = g[rmse ? CURVE_TEST_RMSE : CURVE_TEST_ACCURACY];
    int at =
        snprintf(out, len, "asgd launch: %.1f s of training, %.0f samples, %.0f samples/s over %zu workers, global %s ",
                 wall, samples, rate, rows, rmse ? "test_rmse" : "test_acc");
    if (at < 0 || (size_t)at >= len) return 1;
    at += isfinite(metric) ? snprintf(out + at, len - (size_t)at, "%.4f", metric)
                           : snprintf(out + at, len - (size_t)at, "-");
    if (at < 0 || (size_t)at >= len) return 1;
    if (isfinite(g[CURVE_STALENESS_VERSIONS_MEAN]))
        at += snprintf(out + at, len - (size_t)at, ", staleness %.2f", g[CURVE_STALENESS_VERSIONS_MEAN]);
    if (at >= 0 && (size_t)at < len && dist_global_on_servers(d->sync) && isfinite(g[CURVE_WAIT_S]))
        snprintf(out + at, len - (size_t)at, ", wait %.2f s", g[CURVE_WAIT_S]);
    return 1;
}

// Whether every worker has written its result record (it may still be exiting).
static int workers_done(const local_run_t *r) {
    for (size_t k = 0; k < r->d->workers; k++) {
        char path[1100];
        run_record_path(path, sizeof path, r->dir, 0, k);
        if (access(path, F_OK) != 0) return 0;
    }
    return 1;
}

// Shows the progress line when it is due (or, final, at once: the run's last
// figures, ending the line on a terminal).
static void progress_tick(local_run_t *r, int final) {
    if (r->progress_every <= 0) return;
    double now = mono_clock_s();
    if (!final && now < r->next_progress) return;
    r->next_progress = now + r->progress_every;
    char line[400];
    double samples = 0;
    if (!progress_text(r, final, line, sizeof line, &samples)) return;
    // A line only when the workers moved on: not twice for the same counts,
    // nor after the last one finished (the final line, after the merge, says it).
    if (!final && (samples == r->shown_samples || workers_done(r))) return;
    r->shown_samples = samples;
    if (r->progress_tty) {
        run_say("\r\033[K%s%s", line, final ? "\n" : "");
        progress_on_screen = !final;
    } else {
        run_say("%s\n", line);
    }
}

// After a stop signal, the servers get this long to finish by themselves once
// the last worker has ended (every worker gone, a shard ends at once; one
// that waits for a worker that died without a goodbye would wait
// --worker-timeout), then they are stopped too.
#define SERVERS_FINISH_S 3.0

static size_t live_children(const local_run_t *r, dist_role_t role) {
    size_t n = 0;
    for (size_t i = 0; i < r->started; i++) n += r->kids[i].role == role && !r->kids[i].exited;
    return n;
}

static void signal_children(local_run_t *r, dist_role_t role, int sig) {
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        c->restart_due = 0;  // a restart that was due does not happen
        if (c->role == role && !c->exited && c->pid > 0) kill(c->pid, sig);
    }
}

// After a stop signal (docs/reliability.md, "Signals"): each worker is asked
// to leave (SIGTERM: under asp, ssp and bsp it pushes what it has and says
// goodbye; under allreduce and local the workers stop at the same round),
// then the servers, their workers gone, finish by themselves: their final
// values, model parts and records are written as at a normal end. A server
// still serving SERVERS_FINISH_S after the last worker ended is stopped
// (its part of the model is then not final). The whole stop is bounded by
// --timeout-ms, past which every process is killed: returns -1 then.
static int stop_in_order(local_run_t *r) {
    double now = mono_clock_s();
    if (r->stop_began == 0) {
        r->stop_began = now;
        launch_say(r,
                   "signal %d (%s): stopping the run in order: the workers leave, the servers finish, then the "
                   "run directory is merged (a second signal kills at once)",
                   (int)interrupted, strsignal(interrupted));
        char err[ERR_LEN];
        if (run_merge_mark_interrupted(r->dir, interrupted, err, sizeof err) != 0) launch_say(r, "%s", err);
        signal_children(r, DIST_ROLE_WORKER, SIGTERM);
    }
    if (live_children(r, DIST_ROLE_WORKER) == 0 && r->workers_gone_at == 0) r->workers_gone_at = now;
    if (r->workers_gone_at > 0 && !r->servers_told && now - r->workers_gone_at >= SERVERS_FINISH_S) {
        r->servers_told = 1;
        launch_say(r,
                   "the servers had not finished %.0f s after the last worker left: stopping them (their model "
                   "parts are not final)",
                   SERVERS_FINISH_S);
        signal_children(r, DIST_ROLE_SERVER, SIGTERM);
    }
    if ((now - r->stop_began) * 1000.0 < (double)r->d->timeout_ms) return 0;
    launch_say(r, "processes still running %.0f s after the stop signal (--timeout-ms): killing them",
               (double)r->d->timeout_ms / 1000.0);
    stop_children(r->kids, r->started);
    return -1;
}

// Until every child has ended, or one failed (after a stop signal: until
// every child has ended, or the stop's bound passed). Returns 0 when all ended well.
static int supervise(local_run_t *r) {
    while (r->running > 0) {
        if (interrupted && stop_in_order(r) != 0) return -1;
        pump_output(r);
        if (reap_children(r) != 0 || (!interrupted && start_due_restarts(r) != 0)) return -1;
        // The line shows the workers' progress: once the last has ended, the
        // final line (after the merge) is the one left to show.
        if (!interrupted && live_children(r, DIST_ROLE_WORKER) > 0) progress_tick(r, 0);
    }
    return 0;
}

// After a stop signal: the run directory merged, marked interrupted, when
// every process wrote its result (else what is missing is named), and the
// exit status 128 + the signal.
static int local_run_interrupted(local_run_t *r, double t0) {
    int sig = interrupted;
    char missing[400], err[ERR_LEN] = "";
    size_t n = run_merge_missing(r->dir, r->d, missing, sizeof missing);
    if (n) {
        launch_say(r,
                   "stopped by signal %d (%s) before %s wrote %s result: nothing merged (%s keeps what each "
                   "process wrote)",
                   sig, strsignal(sig), missing, n == 1 ? "its" : "their", r->dir);
        return 128 + sig;
    }
    run_merge_info_t info = {mono_clock_s() - t0, r->server_restarts, r->replica_restarts, sig};
    if (run_merge_dir(r->dir, r->t, r->d, &info, r->outcome, err, sizeof err) != 0) {
        launch_say(r, "stopped by signal %d (%s); merging the run directory: %s", sig, strsignal(sig), err);
        return 128 + sig;
    }
    r->merged = 1;
    int saved = run_merge_model(r->dir, r->d, r->save_model, err, sizeof err) == 0;
    if (!saved) launch_say(r, "stopped by signal %d (%s): the model was not saved: %s", sig, strsignal(sig), err);
    if (r->t->trace && merge_traces(r->dir, r->d, r->t->trace, r->outcome != NULL, err, sizeof err) != 0)
        launch_say(r, "%s", err);
    launch_say(r, "stopped by signal %d (%s): %s merged, marked interrupted%s", sig, strsignal(sig), r->dir,
               r->save_model && saved ? "; the model saved" : "");
    return 128 + sig;
}

// The exit status: 128 + the signal (the run directory merged when every
// process wrote its result), 1 when a child failed (naming it) or the merge
// did, else 0 with the run directory merged.
static int local_run_outcome(local_run_t *r, int failed, double t0) {
    char err[ERR_LEN] = "";
    if (interrupted && !failed) return local_run_interrupted(r, t0);
    if (interrupted && !r->culprit) return 128 + interrupted;  // killed at the stop's bound (said)
    if (failed) {
        stop_children(r->kids, r->started);
        const child_t *c = r->culprit;
        if (c) {
            char how[128];
            describe_exit(c->status, how, sizeof how);
            // A process killed by a signal said nothing about it: its last
            // message (a note from its start) is not the cause.
            const char *why = WIFEXITED(c->status) ? c->last_err : "";
            launch_say(r, "%s %zu (pid %d) failed: %s%s%s; stopped the others", launch_role_name(c->role), c->id,
                       (int)c->pid, how, why[0] ? ": " : "", why);
        }
        return 1;
    }
    run_merge_info_t info = {mono_clock_s() - t0, r->server_restarts, r->replica_restarts, 0};
    if (rdv_server_wait(r->rdv, 1000, err, sizeof err) != 0 ||
        run_merge_dir(r->dir, r->t, r->d, &info, r->outcome, err, sizeof err) != 0) {
        launch_say(r, "%s", err);
        return 1;
    }
    r->merged = 1;
    if (run_merge_model(r->dir, r->d, r->save_model, err, sizeof err) != 0 ||
        (r->t->trace && merge_traces(r->dir, r->d, r->t->trace, r->outcome != NULL, err, sizeof err) != 0)) {
        launch_say(r, "%s", err);
        return 1;
    }
    return 0;
}

// Where a local run's coordinator listens: on 127.0.0.1, at --coordinator's
// port when given (its host must be this machine's loopback), else at any
// free port. Returns 0, or -1 with err.
static int local_coordinator(const char *given, char *bind, size_t bind_len, char *err, size_t err_len) {
    if (!given) {
        snprintf(bind, bind_len, "tcp://127.0.0.1:*");
        return 0;
    }
    const char *host = strncmp(given, "tcp://", 6) == 0 ? given + 6 : given;
    const char *colon = strrchr(host, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    int loopback =
        colon && ((colon - host == 9 && strncmp(host, "localhost", 9) == 0) || strncmp(host, "127.", 4) == 0);
    if (!colon || *end != '\0' || port <= 0 || port > 65535 || !loopback) {
        snprintf(err, err_len,
                 "--coordinator %s: a local launch hosts the coordinator on this machine; give "
                 "127.0.0.1:PORT (or drop the flag for any free port)",
                 given);
        return -1;
    }
    snprintf(bind, bind_len, "tcp://127.0.0.1:%ld", port);
    return 0;
}

// --restart-servers needs servers that checkpoint. Returns 0, or 2 with err.
static int check_restart_servers(const train_args_t *t, const dist_args_t *d, size_t restart_servers, char *err,
                                 size_t err_len) {
    if (restart_servers == 0) return 0;
    if (d->server_replicas > 1) {
        snprintf(err, err_len,
                 "--restart-servers: with --server-replicas a dead replica is started again from a live "
                 "one, not from a checkpoint; drop --restart-servers");
        return 2;
    }
    if (d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP && d->sync != SYNC_MODE_BSP) {
        snprintf(err, err_len, "--restart-servers: --sync %s %s; drop the flag (or use --sync asp, ssp or bsp)",
                 sync_mode_name((sync_mode_t)d->sync),
                 dist_without_servers(d->sync) ? "runs without servers" : "does not restart its servers");
        return 2;
    }
    if (t->checkpoint_every <= 0) {
        snprintf(err, err_len,
                 "--restart-servers: a server restarts from its last checkpoint: add --checkpoint-every "
                 "S (and --checkpoint-dir DIR, else they go to the run directory)");
        return 2;
    }
    return 0;
}

int launch_local(run_job_t *j, launch_job_outcome_t *outcome, char *err, size_t err_len) {
    const train_args_t *t = &j->t;
    dist_args_t *d = &j->d;
    const launch_opts_t *o = &j->o;
    const char *save_model = o->save_model;
    if (check_restart_servers(t, d, o->restart_servers, err, err_len) != 0) {
        if (!outcome) run_say("asgd launch: %s\n", err);
        return 2;
    }
    if (o->restart_workers > 0 && dist_uses_ring(d->sync)) {
        snprintf(err, err_len,
                 "--restart-workers: the ring of --sync %s cannot take a restarted worker back; drop the "
                 "flag (or use --sync asp, ssp or bsp)",
                 sync_mode_name((sync_mode_t)d->sync));
        if (!outcome) run_say("asgd launch: %s\n", err);
        return 2;
    }
    local_run_t r;
    memset(&r, 0, sizeof r);
    r.job = j, r.t = t, r.d = d, r.save_model = save_model, r.restart_workers = o->restart_workers;
    r.restart_servers = o->restart_servers;
    r.verbose = o->verbose;
    r.outcome = outcome;
    r.progress_tty = run_messages_on_tty();
    r.progress_every = t->quiet || outcome ? 0 : o->progress_every > 0 ? o->progress_every : r.progress_tty ? 0.5 : 5.0;
    r.next_progress = mono_clock_s() + r.progress_every;
    if (local_coordinator(d->coordinator, r.coordinator_bind, sizeof r.coordinator_bind, err, err_len) != 0) {
        if (!outcome) run_say("asgd launch: %s\n", err);
        return 2;
    }
    if (!t->quiet && !outcome) {
        char banner[600];
        banner_line(banner, sizeof banner, "launch", t->device);
        run_say("%s\n", banner);
    }
    int status = 1;
    // Every file the run will write, checked before any process starts.
    char why[ERR_LEN];
    if (dist_check_writable_file(save_model, "--save-model", why, sizeof why) != 0 ||
        (t->checkpoint_every > 0 && t->checkpoint_dir &&
         dist_check_writable_dir(t->checkpoint_dir, "--checkpoint-dir", why, sizeof why) != 0)) {
        launch_say(&r, "%s", why);
        goto out;
    }
    // On one machine every socket of the run is CURVE with a pair made for
    // this run alone (docs/security.md), unless the user brings keys or says --insecure.
    if (!d->curve_server_key && !d->insecure) {
        if (curve_keypair_new(&r.key_public, &r.key_secret, why, sizeof why) == 0) {
            d->run_key_public = r.key_public.z85;
            d->run_key_secret = r.key_secret.z85;
        } else if (!outcome) {
            run_say("asgd launch: %s: the run's sockets are plain (on 127.0.0.1 only)\n", why);
        }
    }
    if (local_run_dir(&r) != 0 || local_run_start(&r) != 0) goto out;
    if (!outcome) {
        // A program calling launch_job_run keeps its own signal handling.
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);  // a closed terminal stops the run as SIGTERM does
    }
    double t0 = mono_clock_s();
    int failed = spawn_all(&r) != 0;
    if (!t->quiet && !failed && !outcome)
        run_say("asgd launch: %zu servers, %zu workers x %zu threads, %s; coordinator %s; logs in %s\n", d->servers,
                d->workers, t->threads, sync_mode_name((sync_mode_t)d->sync), r.coordinator, r.dir);
    if (!failed) failed = supervise(&r) != 0;
    if (progress_on_screen) run_say("\n");  // the messages below start on a line of their own
    progress_on_screen = 0;
    status = local_run_outcome(&r, failed, t0);
    if (r.merged) {
        r.progress_tty = 0;  // the last line stays
        progress_tick(&r, 1);
    }
    if (outcome) snprintf(outcome->run_dir, sizeof outcome->run_dir, "%s", r.dir);
out:
    snprintf(err, err_len, "%s", r.err);
    d->run_key_public = d->run_key_secret = NULL;
    local_run_free(&r);
    return status;
}

int launch_job_run(int argc, char **argv, launch_job_outcome_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    run_job_t *j = malloc(sizeof *j);
    if (!j) {
        snprintf(err, err_len, "asgd launch: out of memory");
        return -1;
    }
    int rc = -1;
    if (run_job_parse(j, "asgd launch", argc, argv, err, err_len) != 0 ||
        dist_apply_scaling(&j->d, &j->t, "asgd launch", err, err_len) != 0)
        goto out;
    if (j->t.resume) {
        snprintf(err, err_len,
                 "asgd launch: --resume: a launch does not resume; restart a server with asgd server --resume");
        goto out;
    }
    j->d.save_model = j->o.save_model;
    j->o.progress_every = 0;  // a job shows no progress line
    char why[ERR_LEN] = "";
    if (launch_local(j, out, why, sizeof why) == 0) {
        rc = 0;
        goto out;
    }
    snprintf(err, err_len, "asgd launch: %s", why[0] ? why : "the run failed");
    launch_job_outcome_free(out);
out:
    run_job_release(j);
    free(j);
    return rc;
}

void launch_job_outcome_free(launch_job_outcome_t *o) {
    free(o->points);
    o->points = NULL;
    o->n_points = 0;
}
