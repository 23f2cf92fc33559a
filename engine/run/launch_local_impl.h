#ifndef ASGD_ENGINE_RUN_LAUNCH_LOCAL_IMPL_H
#define ASGD_ENGINE_RUN_LAUNCH_LOCAL_IMPL_H
// The parts of a local launch (launch_local.h), for its own files only; not
// installed. They call each other one way:
//   launch_local.c           the entry points and the supervision loop: calls every part below
//   launch_local_end.c       the run's end: exit status, failure named, run directory merged
//   launch_local_restart.c   restarts and their policy (--restart-workers, --restart-servers, replicas)
//   launch_local_stop.c      stop signals, stopping in order, stopping at once
//   launch_local_progress.c  the live progress line
//   launch_local_setup.c     the run directory, the coordinator, the children's environment
//   launch_local_children.c  the children: started, their output shown, their exit described
//   launch_local_say.c       what the launcher says, and the unfinished progress line on the screen
// The end calls the stop and the children; the restarts call the children;
// every part says things through launch_local_say.c, which calls none of them.
#include <stddef.h>
#include <sys/types.h>

#include "engine/run/dist.h"
#include "engine/run/launch_job.h"
#include "engine/run/run_job.h"
#include "net/curve_auth.h"
#include "net/rendezvous.h"

#define LAUNCH_ERR_LEN 512

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
    uint64_t run_id;  // 0 until the coordinator is set up
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
    char err[LAUNCH_ERR_LEN];
} local_run_t;

// ---- launch_local_say.c ----
// "asgd launch: <what>" on stderr, or under launch_job_run the first such
// message kept in r->err.
__attribute__((format(printf, 2, 3))) void launch_say(local_run_t *r, const char *fmt, ...);
// Before a line of its own on stderr: an unfinished progress line is cleared
// (it is redrawn at its next tick).
void launch_screen_clear(void);
// Shows a progress line: on a terminal (tty) rewritten in place and left
// unfinished until the final one; else one line each.
void launch_screen_progress(const char *line, int tty, int final);
// Ends an unfinished progress line, so that the messages below start on a line of their own.
void launch_screen_end_line(void);

// ---- launch_local_children.c ----
// Starts (or restarts) child c: its role, the run's job (r->job_path, read as
// its --config), its own id, the run's coordinator and directory. Returns 0, or -1 with errno.
int launch_child_spawn(local_run_t *r, child_t *c);
// Servers first, then workers. Returns 0, or -1 after naming the one that did not start.
int launch_spawn_all(local_run_t *r);
// Shows a child's output (which: 0 its stdout, 1 its stderr) line by line,
// prefixed with who wrote it; closes the pipe at its end.
void launch_child_pump(child_t *c, int which);
// Shows what the children wrote (waiting up to 100 ms for it).
void launch_pump_output(local_run_t *r);
// "exit status N", "killed by signal N (NAME)".
void launch_describe_exit(int status, char *out, size_t len);

// ---- launch_local_setup.c ----
// The run directory: --run-dir, else runs/launch-DATE-TIME-PID. Returns 0, or 1 after saying why.
int local_run_dir(local_run_t *r);
// The coordinator (with a fresh run id, so that a straggler from an earlier
// run is refused), this program's path and the children's table. Returns 0,
// or 1 after saying why.
int local_run_start(local_run_t *r);
void local_run_free(local_run_t *r);
// Where a local run's coordinator listens: on 127.0.0.1, at --coordinator's
// port when given (its host must be this machine's loopback), else at any
// free port. Returns 0, or -1 with err.
int launch_local_coordinator(const char *given, char *bind, size_t bind_len, char *err, size_t err_len);

// ---- launch_local_progress.c ----
// Shows the progress line when it is due (or, final, at once: the run's last
// figures, ending the line on a terminal).
void launch_progress_tick(local_run_t *r, int final);

// ---- launch_local_stop.c ----
// From now on the first stop signal (SIGINT, SIGTERM, SIGHUP) stops the run in order.
void launch_catch_stop_signals(void);
// The first stop signal's number; 0 before one came.
int launch_stop_signal(void);
// The children of `role` still running.
size_t launch_live_children(const local_run_t *r, dist_role_t role);
// After a stop signal: the workers asked to leave, then the servers stopped
// when they do not finish by themselves. Returns 0, or -1 when the stop's
// bound (--timeout-ms) passed and every child was killed.
int launch_stop_in_order(local_run_t *r);
// Every child still running asked to leave (SIGTERM), then killed after two seconds.
void launch_stop_children(local_run_t *r);

// ---- launch_local_restart.c ----
// --restart-workers and --restart-servers against the run's --sync,
// --server-replicas and checkpoints. Returns 0, or 2 with err.
int launch_check_restarts(const run_job_t *j, char *err, size_t err_len);
// A child that failed started again when the run's policy says so. Returns 0
// when it was (or will be, after a back-off), else -1.
int launch_restart(local_run_t *r, child_t *c);
// Starts the workers whose back-off has passed. Returns -1 when one did not
// start (r->culprit), else 0.
int launch_start_due_restarts(local_run_t *r);

// ---- launch_local_end.c ----
// The exit status: 128 + the signal (the run directory merged when every
// process wrote its result), 1 when a child failed (naming it) or the merge
// did, else 0 with the run directory merged. t0: when the children started.
int local_run_outcome(local_run_t *r, int failed, double t0);

#endif
