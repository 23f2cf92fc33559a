// The children of a local launch: each started with its command line, its
// output shown line by line, its exit described (launch_local_impl.h).
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/run/launch_local.h"
#include "engine/run/launch_local_impl.h"
#include "engine/run/run_merge.h"
#include "engine/run/run_output.h"
#include "net/rendezvous.h"

const char *launch_role_name(dist_role_t r) { return r == DIST_ROLE_SERVER ? "server" : "worker"; }

// --trace: the timeline process (role, id) writes in the run directory.
void launch_trace_part_path(char *out, size_t len, const char *dir, dist_role_t role, size_t id) {
    snprintf(out, len, "%s/trace-%s-%zu.json", dir, launch_role_name(role), id);
}

// Whether a child's stderr line is one of its messages ("asgd worker 1: ...",
// "asgd server: ...", "exec ... failed"), which may say why it failed, rather
// than an evaluation or progress line, which never does.
static int is_error_line(const char *line) { return strncmp(line, "asgd ", 5) == 0 || strncmp(line, "exec ", 5) == 0; }

void launch_child_pump(child_t *c, int which) {
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
            launch_screen_clear();
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

void launch_describe_exit(int status, char *out, size_t len) {
    if (WIFEXITED(status))
        snprintf(out, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "status %d", status);
}

// Child c's command line, in r->args, and the child started with it.
static int spawn_child(local_run_t *r, child_t *c) {
    const dist_args_t *d = r->d;
    const char *exe = r->exe, *job_path = r->job_path, *coordinator = r->coordinator, *dir = r->dir;
    char **args = r->args, *id_text = r->id_text;
    size_t a = 0;
    char trace_path[600];  // --trace: each child its own timeline in the run directory
    args[a++] = (char *)exe;
    args[a++] = (char *)launch_role_name(c->role);
    args[a++] = "--config";
    args[a++] = (char *)job_path;
    if (d->ps_transport == PS_TRANSPORT_SHM) {  // resolved from auto by local_run_prepare
        args[a++] = "--ps-transport";
        args[a++] = "shm";
    }
    snprintf(id_text, sizeof r->id_text, "%zu", c->id);
    args[a++] = "--id";
    args[a++] = id_text;
    args[a++] = "--coordinator";
    args[a++] = (char *)coordinator;
    args[a++] = "--run-dir";
    args[a++] = (char *)dir;
    // Every process is on this machine: the ring is faster over ipc:// (docs/allreduce.md).
    if (dist_uses_ring(d->sync) && !d->ring_ipc) args[a++] = "--ring-ipc";
    const char *part = run_merge_part_path(c->role, c->id, d, dir, r->save_model, c->save_path, sizeof c->save_path);
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
    if (r->t->trace != NULL) {
        launch_trace_part_path(trace_path, sizeof trace_path, dir, c->role, c->id);
        args[a++] = "--trace";
        args[a++] = trace_path;
    }
    args[a] = NULL;
    return spawn(c, exe, args, r->envp);
}

int launch_child_spawn(local_run_t *r, child_t *c) {
    c->answers_at_start = rdv_server_answers(r->rdv, c->role == DIST_ROLE_SERVER ? c->id : r->d->servers + c->id);
    return spawn_child(r, c);
}

int launch_spawn_all(local_run_t *r) {
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
        if (launch_child_spawn(r, c) != 0) {
            launch_say(r, "starting %s %zu: %s", launch_role_name(c->role), c->id, strerror(errno));
            return -1;
        }
        r->started++;
    }
    r->running = r->started;
    return 0;
}

void launch_pump_output(local_run_t *r) {
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
        if (fds[f].revents) launch_child_pump(owner[f], which[f]);
}
