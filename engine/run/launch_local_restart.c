// Restarts in a local launch and their policy: a failed worker started again
// (--restart-workers, with a back-off before it joined), a failed server
// from its last checkpoint (--restart-servers), a dead replica as a backup
// (--server-replicas) (launch_local_impl.h).
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/run/launch_local_impl.h"
#include "engine/run/run_output.h"
#include "kernels/foundation/mono_clock.h"
#include "net/rendezvous.h"

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

int launch_check_restarts(const run_job_t *j, char *err, size_t err_len) {
    const dist_args_t *d = &j->d;
    if (check_restart_servers(&j->t, d, j->o.restart_servers, err, err_len) != 0) return 2;
    if (j->o.restart_workers > 0 && dist_uses_ring(d->sync)) {
        snprintf(err, err_len,
                 "--restart-workers: the ring of --sync %s cannot take a restarted worker back; drop the "
                 "flag (or use --sync asp, ssp or bsp)",
                 sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    return 0;
}

// A restarted child's output starts afresh.
static void forget_output(child_t *c) {
    c->line_len[0] = c->line_len[1] = 0;
    c->last_err[0] = '\0';
}

// Starts c again now. Returns 0, or -1 (c stays exited).
static int respawn(local_run_t *r, child_t *c) {
    c->exited = 0;
    if (launch_child_spawn(r, c) == 0) return 0;
    c->exited = 1;
    return -1;
}

// A worker that fails before joining the run (it never got the rendezvous
// table) is started again after RESTART_BACKOFF_S, doubled at each such
// failure in a row, and given up after RESTART_EARLY_FAILURES of them: it
// would only fail the same way again.
#define RESTART_BACKOFF_S 0.5
#define RESTART_EARLY_FAILURES 3

// Under asp and ssp a worker that checkpoints goes on from its last
// checkpoint: then c->resume is set and ckpt names the file, else ckpt is "".
static void resume_worker(const local_run_t *r, child_t *c, char *ckpt, size_t ckpt_len) {
    ckpt[0] = '\0';
    if (r->t->checkpoint_every > 0 && (r->d->sync == SYNC_MODE_ASP || r->d->sync == SYNC_MODE_SSP) && !r->t->device) {
        snprintf(ckpt, ckpt_len, "%s/worker-%zu.ckpt", r->ckpt_dir, c->id);
        if (access(ckpt, R_OK) == 0)
            c->resume = r->ckpt_dir;
        else
            ckpt[0] = '\0';
    }
}

static void say_worker_restart(const local_run_t *r, const child_t *c, int joined, double wait_s, const char *ckpt) {
    if (r->outcome) return;
    char how[128], when[64] = "", from[1120] = "";
    launch_describe_exit(c->status, how, sizeof how);
    if (!joined) snprintf(when, sizeof when, " in %g s (it had not joined the run)", wait_s);
    if (ckpt[0]) snprintf(from, sizeof from, " from %s", ckpt);
    run_say("asgd launch: worker %zu (pid %d) failed: %s; restarting it%s%s (restart %zu of at most %zu)\n", c->id,
            (int)c->pid, how, from, when, r->restarts, r->restart_workers);
}

// A failed worker is started again, with the same command: it rejoins the run
// at the clock the servers give it (not under allreduce or hybrid: their ring
// cannot take a member back), at most --restart-workers times; one that
// failed before joining, after a back-off (launch_start_due_restarts). Returns 0
// when it was (or will be).
static int restart_worker(local_run_t *r, child_t *c) {
    if (c->role != DIST_ROLE_WORKER || dist_uses_ring(r->d->sync) || r->restarts >= r->restart_workers) return -1;
    int joined = rdv_server_answers(r->rdv, r->d->servers + c->id) > c->answers_at_start;
    c->early_failures = joined ? 0 : c->early_failures + 1;
    if (c->early_failures >= RESTART_EARLY_FAILURES) {
        launch_say(r, "worker %zu failed %zu times in a row before joining the run: not restarting it again", c->id,
                   c->early_failures);
        return -1;
    }
    double wait_s = joined ? 0 : RESTART_BACKOFF_S * (double)(1u << (c->early_failures - 1));
    r->restarts++;
    char ckpt[1100];
    resume_worker(r, c, ckpt, sizeof ckpt);
    say_worker_restart(r, c, joined, wait_s, ckpt);
    forget_output(c);
    if (!joined) {
        c->restart_due = 1;  // stays exited until then
        c->restart_at = mono_clock_s() + wait_s;
        return 0;
    }
    return respawn(r, c);
}

int launch_start_due_restarts(local_run_t *r) {
    double now = mono_clock_s();
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        if (!c->restart_due || now < c->restart_at) continue;
        c->restart_due = 0;
        if (respawn(r, c) != 0) {
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
    launch_describe_exit(c->status, how, sizeof how);
    r->server_restarts_done++;
    if (!r->outcome)
        run_say(
            "asgd launch: server %zu (pid %d) failed: %s; restarting it from %s (restart %zu of at most "
            "%zu)\n",
            c->id, (int)c->pid, how, ckpt, r->server_restarts_done, r->restart_servers);
    forget_output(c);
    c->resume = r->ckpt_dir;
    if (respawn(r, c) != 0) return -1;
    r->server_restarts[c->id]++;
    return 0;
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
    launch_describe_exit(c->status, how, sizeof how);
    r->replica_restarts++;
    if (!r->outcome)
        run_say(
            "asgd launch: server %zu replica %zu (pid %d) failed: %s; restarting it as a backup (replica "
            "restart %zu)\n",
            c->id, c->replica, (int)c->pid, how, r->replica_restarts);
    forget_output(c);
    c->replica_backup = 1;
    return respawn(r, c);
}

int launch_restart(local_run_t *r, child_t *c) {
    return restart_worker(r, c) == 0 || restart_replica(r, c) == 0 || restart_server(r, c) == 0 ? 0 : -1;
}
