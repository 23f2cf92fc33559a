// The end of a local launch: its exit status, the child whose failure stopped
// it named, else the run directory, the model and the timelines merged
// (launch_local_impl.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "engine/run/launch_local.h"
#include "engine/run/launch_local_impl.h"
#include "engine/run/run_merge.h"
#include "engine/run/run_output.h"
#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/trace.h"
#include "net/rendezvous.h"

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

// After a stop signal: the run directory merged, marked interrupted, when
// every process wrote its result (else what is missing is named), and the
// exit status 128 + the signal (sig).
static int local_run_interrupted(local_run_t *r, int sig, double t0) {
    char missing[400], err[LAUNCH_ERR_LEN] = "";
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

// A child failed: the others stopped, and the one whose failure stopped the
// run named (none when the run failed before its children ran). Returns 1.
static int local_run_failed(local_run_t *r) {
    launch_stop_children(r);
    const child_t *c = r->culprit;
    if (c) {
        char how[128];
        launch_describe_exit(c->status, how, sizeof how);
        // A process killed by a signal said nothing about it: its last
        // message (a note from its start) is not the cause.
        const char *why = WIFEXITED(c->status) ? c->last_err : "";
        launch_say(r, "%s %zu (pid %d) failed: %s%s%s; stopped the others", launch_role_name(c->role), c->id,
                   (int)c->pid, how, why[0] ? ": " : "", why);
    }
    return 1;
}

int local_run_outcome(local_run_t *r, int failed, double t0) {
    char err[LAUNCH_ERR_LEN] = "";
    int sig = launch_stop_signal();
    if (sig && !failed) return local_run_interrupted(r, sig, t0);
    if (sig && !r->culprit) return 128 + sig;  // killed at the stop's bound (said)
    if (failed) return local_run_failed(r);
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
