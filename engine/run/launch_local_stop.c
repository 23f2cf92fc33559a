// Stopping a local launch: the stop signals, the stop in order they start,
// and the stop at once of every child (launch_local_impl.h).
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "engine/run/launch_local_impl.h"
#include "engine/run/run_merge.h"
#include "kernels/foundation/mono_clock.h"

static volatile sig_atomic_t interrupted;  // the first stop signal's number

// The first stop signal (SIGINT, SIGTERM, SIGHUP) stops the run in order
// (launch_stop_in_order). From then on the three have their default action: a
// second one kills the launcher at once, and its children with it (each
// asked for SIGKILL when its parent dies: launch_child_spawn).
static void on_interrupt(int sig) {
    interrupted = sig;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
}

void launch_catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);  // a closed terminal stops the run as SIGTERM does
}

int launch_stop_signal(void) { return interrupted; }

void launch_stop_children(local_run_t *r) {
    child_t *kids = r->kids;
    size_t n = r->started;
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

// After a stop signal, the servers get this long to finish by themselves once
// the last worker has ended (every worker gone, a shard ends at once; one
// that waits for a worker that died without a goodbye would wait
// --worker-timeout), then they are stopped too.
#define SERVERS_FINISH_S 3.0

size_t launch_live_children(const local_run_t *r, dist_role_t role) {
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
int launch_stop_in_order(local_run_t *r) {
    double now = mono_clock_s();
    if (r->stop_began == 0) {
        r->stop_began = now;
        launch_say(r,
                   "signal %d (%s): stopping the run in order: the workers leave, the servers finish, then the "
                   "run directory is merged (a second signal kills at once)",
                   (int)interrupted, strsignal(interrupted));
        char err[LAUNCH_ERR_LEN];
        if (run_merge_mark_interrupted(r->dir, interrupted, err, sizeof err) != 0) launch_say(r, "%s", err);
        signal_children(r, DIST_ROLE_WORKER, SIGTERM);
    }
    if (launch_live_children(r, DIST_ROLE_WORKER) == 0 && r->workers_gone_at == 0) r->workers_gone_at = now;
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
    launch_stop_children(r);
    return -1;
}
