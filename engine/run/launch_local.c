// A local launch: every process of a distributed run started on this machine,
// supervised and restarted (launch_local.h). The entry points and the
// supervision loop; the parts they call are in launch_local_impl.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "engine/run/banner.h"
#include "engine/run/launch_local.h"
#include "engine/run/launch_local_impl.h"
#include "engine/run/run_output.h"
#include "kernels/foundation/mono_clock.h"
#include "net/curve_auth.h"
#include "net/shm_frames.h"

// Collects the children that ended. Returns -1 when one failed for good (r->culprit), else 0.
static int reap_children(local_run_t *r) {
    for (size_t i = 0; i < r->started; i++) {
        child_t *c = &r->kids[i];
        int st;
        if (c->exited || waitpid(c->pid, &st, WNOHANG) != c->pid) continue;
        // Show what it still had to say.
        while (c->err_fd >= 0) launch_child_pump(c, 1);
        while (c->out_fd >= 0) launch_child_pump(c, 0);
        c->exited = 1;
        c->status = st;
        r->running--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        if (launch_stop_signal()) continue;  // stopping: each ends as the signal had it; the merge says what is missing
        if (launch_restart(r, c) == 0) {
            r->running++;
            continue;
        }
        r->culprit = c;
        return -1;
    }
    return 0;
}

// Until every child has ended, or one failed (after a stop signal: until
// every child has ended, or the stop's bound passed). Returns 0 when all ended well.
static int supervise(local_run_t *r) {
    while (r->running > 0) {
        if (launch_stop_signal() && launch_stop_in_order(r) != 0) return -1;
        launch_pump_output(r);
        if (reap_children(r) != 0 || (!launch_stop_signal() && launch_start_due_restarts(r) != 0)) return -1;
        // The line shows the workers' progress: once the last has ended, the
        // final line (after the merge) is the one left to show.
        if (!launch_stop_signal() && launch_live_children(r, DIST_ROLE_WORKER) > 0) launch_progress_tick(r, 0);
    }
    return 0;
}

// The run's settings from job j; nothing is started yet.
static void local_run_init(local_run_t *r, const run_job_t *j, launch_job_outcome_t *outcome) {
    const launch_opts_t *o = &j->o;
    memset(r, 0, sizeof *r);
    r->job = j, r->t = &j->t, r->d = &j->d, r->save_model = o->save_model, r->restart_workers = o->restart_workers;
    r->restart_servers = o->restart_servers;
    r->verbose = o->verbose;
    r->outcome = outcome;
    r->progress_tty = run_messages_on_tty();
    double every = o->progress_every > 0 ? o->progress_every : r->progress_tty ? 0.5 : 5.0;
    r->progress_every = j->t.quiet || outcome ? 0 : every;
    r->next_progress = mono_clock_s() + r->progress_every;
}

// Every file the run will write checked, the run's key pair made (into d),
// its directory, coordinator and children's table set up, the stop signals
// caught. Returns 0, or 1 after saying why.
static int local_run_prepare(local_run_t *r, dist_args_t *d) {
    const train_args_t *t = r->t;
    // Every file the run will write, checked before any process starts.
    char why[LAUNCH_ERR_LEN];
    if (dist_check_writable_file(r->save_model, "--save-model", why, sizeof why) != 0 ||
        (t->checkpoint_every > 0 && t->checkpoint_dir &&
         dist_check_writable_dir(t->checkpoint_dir, "--checkpoint-dir", why, sizeof why) != 0)) {
        launch_say(r, "%s", why);
        return 1;
    }
    // On one machine every socket of the run is CURVE with a pair made for
    // this run alone (docs/security.md), unless the user brings keys or says --insecure.
    if (!d->curve_server_key && !d->insecure) {
        if (curve_keypair_new(&r->key_public, &r->key_secret, why, sizeof why) == 0) {
            d->run_key_public = r->key_public.z85;
            d->run_key_secret = r->key_secret.z85;
        } else if (!r->outcome) {
            run_say("asgd launch: %s: the run's sockets are plain (on 127.0.0.1 only)\n", why);
        }
    }
    // Every process is on this machine: payloads through shared memory (net/shm_frames.h).
    if (d->ps_transport == PS_TRANSPORT_AUTO && !dist_without_servers(d->sync)) d->ps_transport = PS_TRANSPORT_SHM;
    if (local_run_dir(r) != 0 || local_run_start(r) != 0) return 1;
    // A program calling launch_job_run keeps its own signal handling.
    if (!r->outcome) launch_catch_stop_signals();
    return 0;
}

// Starts every child, supervises them to the end and ends the run. Returns the exit status.
static int local_run_supervised(local_run_t *r) {
    const train_args_t *t = r->t;
    const dist_args_t *d = r->d;
    double t0 = mono_clock_s();
    int failed = launch_spawn_all(r) != 0;
    if (!t->quiet && !failed && !r->outcome)
        run_say("asgd launch: %zu servers, %zu workers x %zu threads, %s; coordinator %s; logs in %s\n", d->servers,
                d->workers, t->threads, sync_mode_name((sync_mode_t)d->sync), r->coordinator, r->dir);
    if (!failed) failed = supervise(r) != 0;
    launch_screen_end_line();
    int status = local_run_outcome(r, failed, t0);
    shm_frames_remove_run(r->run_id);  // arenas of children killed before they could remove their own
    if (r->merged) {
        r->progress_tty = 0;  // the last line stays
        launch_progress_tick(r, 1);
    }
    if (r->outcome) snprintf(r->outcome->run_dir, sizeof r->outcome->run_dir, "%s", r->dir);
    return status;
}

// A usage error, found before anything started: said (not under
// launch_job_run, which has it in err). Returns the exit status, 2.
static int usage_error(const launch_job_outcome_t *outcome, const char *err) {
    if (!outcome) run_say("asgd launch: %s\n", err);
    return 2;
}

int launch_local(run_job_t *j, launch_job_outcome_t *outcome, char *err, size_t err_len) {
    if (launch_check_restarts(j, err, err_len) != 0) return usage_error(outcome, err);
    local_run_t r;
    local_run_init(&r, j, outcome);
    if (launch_local_coordinator(j->d.coordinator, r.coordinator_bind, sizeof r.coordinator_bind, err, err_len) != 0)
        return usage_error(outcome, err);
    if (!j->t.quiet && !outcome) {
        char banner[600];
        banner_line(banner, sizeof banner, "launch", j->t.device);
        run_say("%s\n", banner);
    }
    int status = local_run_prepare(&r, &j->d) == 0 ? local_run_supervised(&r) : 1;
    snprintf(err, err_len, "%s", r.err);
    j->d.run_key_public = j->d.run_key_secret = NULL;
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
    char why[LAUNCH_ERR_LEN] = "";
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
