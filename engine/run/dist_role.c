// One process of a distributed run: a parameter-server shard or a worker replica (dist.h).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/partition.h"
#include "engine/run/dist.h"
#include "engine/replica/collective.h"
#include "engine/replica/collective_mpi.h"
#include "engine/replica/global_eval.h"
#include "engine/core/json_writer.h"
#include "engine/core/test_hooks.h"
#include "engine/run/model_file.h"
#include "engine/run/run_record.h"
#include "engine/run/servers_watch.h"
#include "engine/run/worker_live.h"
#include "engine/replica/replica.h"
#include "engine/replica/worker_checkpoint.h"
#include "engine/core/run_report.h"
#include "net/ps_client.h"
#include "net/curve_auth.h"
#include "kernels/foundation/trace.h"
#include "net/ps_server.h"
#include "net/ps_replica.h"
#include "net/rendezvous.h"
#include "net/shm_frames.h"
#include "net/stop_signal.h"
#include "net/ring.h"
#include "net/wire.h"
#include "staleness/delay.h"
#include "staleness/histogram.h"

#include "engine/run/dist_roles.h"
#include "engine/run/run_output.h"
#include "engine/run/worker_keys.h"

#define ERR_LEN 512

// How the process ended, said: a worker's graceful leave, a stop signal (the
// status then 128 + it), or the failure in err. Returns the exit status.
static int role_said_end(dist_role_t role, size_t id, const dist_args_t *d, int status, const char *err) {
    const char *what = role == DIST_ROLE_SERVER ? "server" : "worker";
    if (stop_signal_received() && status == 0 && role == DIST_ROLE_WORKER && d->servers > 0) {
        // A graceful leave (docs/reliability.md, "Elastic membership"): it
        // pushed what it had and said goodbye; the servers count it as left.
        run_say("asgd worker %zu: left the run on signal %d (%s)\n", id, stop_signal_received(),
                strsignal(stop_signal_received()));
    } else if (stop_signal_received()) {
        int sig = stop_signal_received();
        if (status != 0)
            run_say("asgd %s %zu: stopped by signal %d (%s): %s\n", what, id, sig, strsignal(sig), err);
        else
            run_say("asgd %s %zu: stopped by signal %d (%s)\n", what, id, sig, strsignal(sig));
        status = 128 + sig;
    } else if (status != 0) {
        run_say("asgd %s %zu: %s\n", what, id, err);
    }
    return status;
}

// The role's id and flags against the run: 0, or 2 after saying why.
static int role_refused(dist_role_t role, size_t id, const train_args_t *t, const dist_args_t *d,
                        const char *host_bind) {
    const char *what = role == DIST_ROLE_SERVER ? "server" : "worker";
    size_t limit = role == DIST_ROLE_SERVER ? d->servers : d->join ? dist_slots(d) : d->workers;
    if (d->join && role == DIST_ROLE_WORKER && (id < d->workers || id >= dist_slots(d))) {
        if (dist_slots(d) == d->workers)
            run_say("asgd worker: --join: the run has no room for joiners (%s)\n",
                    dist_uses_ring(d->sync) ? "--sync allreduce, hybrid and local have a fixed membership"
                                            : "give every process --max-workers above --workers");
        else
            run_say("asgd worker: --join --id %zu: joiners take ids %zu..%zu (--workers %zu, --max-workers %zu)\n", id,
                    d->workers, dist_slots(d) - 1, d->workers, dist_slots(d));
        return 2;
    }
    if (id >= limit) {
        run_say("asgd %s: --id %zu: the run has %zu %ss (ids 0..%zu)\n", what, id, limit, what, limit ? limit - 1 : 0);
        return 2;
    }
    if (t->resume && role == DIST_ROLE_WORKER && d->sync != SYNC_MODE_ASP && d->sync != SYNC_MODE_SSP) {
        run_say(
            "asgd worker: --resume: workers checkpoint under --sync asp and ssp only; a %s worker "
            "restarted without --resume rejoins by itself%s\n",
            sync_mode_name((sync_mode_t)d->sync),
            dist_uses_ring(d->sync) || d->sync == SYNC_MODE_LOCAL ? " where its mode allows it (a ring cannot "
                                                                    "take a member back)"
                                                                  : "");
        return 2;
    }
    if (t->resume && role == DIST_ROLE_WORKER && t->device) {
        run_say("asgd worker: --resume: a GPU worker does not checkpoint; restart it without --resume\n");
        return 2;
    }
    if (t->resume && host_bind) {
        run_say(
            "asgd server: --host-coordinator: a resumed server does not meet the others again (it binds "
            "the endpoint it had); drop the flag\n");
        return 2;
    }
    return 0;
}

int dist_run_role(dist_role_t role, size_t id, const train_args_t *t, const dist_args_t *d, const char *host_bind) {
    char err[ERR_LEN] = "";
    const char *what = role == DIST_ROLE_SERVER ? "server" : "worker";
    char coordinator[300];
    if (!d->coordinator) {
        run_say("asgd %s: --coordinator HOST:PORT is needed to find the other processes\n", what);
        return 2;
    }
    snprintf(coordinator, sizeof coordinator, "%s%s", strncmp(d->coordinator, "tcp://", 6) == 0 ? "" : "tcp://",
             d->coordinator);
    uint64_t run_id = d->run_id ? d->run_id : dist_default_run_id(coordinator);
    if (role_refused(role, id, t, d, host_bind) != 0) return 2;
    // SIGTERM, SIGINT, SIGHUP: every wait below ends early, a worker stops
    // training at its next step and leaves; the summary says interrupted, the
    // exit status is 128 + the signal (0 for a worker with servers that left
    // gracefully: docs/reliability.md, "Elastic membership"). A second signal kills.
    stop_signal_install();
    data_bundle_t data;
    data_bundle_init(&data);
    model_t *model = NULL;
    worker_keys_t keys = {0};
    eval_keys_t eval_keys = {0};
    void *ctx = NULL;
    rdv_server_t *rdv = NULL;
    zap_handler_t *zap = NULL;
    int status = 1;
    // Every file this process will write, checked before the data loads.
    if ((d->run_dir && dist_check_writable_dir(d->run_dir, "--run-dir", err, sizeof err) != 0) ||
        dist_check_writable_file(d->save_model, "--save-model", err, sizeof err) != 0 ||
        (role == DIST_ROLE_WORKER && !d->run_dir && dist_check_writable_file(t->log, "--log", err, sizeof err) != 0))
        goto out;
    ctx = zmq_ctx_new();
    if (!ctx) {
        snprintf(err, sizeof err, "zmq_ctx_new failed: %s", zmq_strerror(errno));
        goto out;
    }
    // Keys first: a bad key file fails at once, not after the data has loaded.
    if (dist_security_start(d, ctx, &zap, err, sizeof err) != 0) goto out;
    // A worker of a model with a row per feature holds the rows its data reads (worker_keys.h).
    if (role == DIST_ROLE_WORKER ? worker_keys_build(t, d, &data, &model, &keys, err, sizeof err) != 0
                                 : train_args_build(t, &data, &model, err, sizeof err) != 0)
        goto out;
    if (role == DIST_ROLE_WORKER && dist_model_fits(model_num_params(model), t->threads, err, sizeof err) != 0)
        goto out;
    // Shard 0's evaluator reads the rows its test examples read (worker_keys.h).
    if (role == DIST_ROLE_SERVER && id == 0 && eval_keys_build(t, d, &data, model, &eval_keys, err, sizeof err) != 0)
        goto out;
    if (host_bind) {
        rdv = rdv_server_new_elastic(ctx, host_bind, d->servers + dist_slots(d), d->servers + d->workers, run_id, err,
                                     sizeof err);
        if (!rdv) goto out;
    }
    char process[32];
    snprintf(process, sizeof process, "%s %zu", what, id);
    if (t->trace && trace_start(process, err, sizeof err) != 0) goto out;
    // The split a --save-model file records; its fingerprints walk the whole
    // data set (0.3 s of a process's start on Fashion-MNIST), so only when
    // a model file is written.
    model_file_split_t split = {0};
    if (d->save_model)
        model_file_split_of(&data, t->test_frac, t->seed, t->train_limit, t->test_limit, t->test_data != NULL, &split);
    // References to shared memory only where asked: a role started by hand
    // may have peers on other machines (net/shm_frames.h).
    if (d->ps_transport == PS_TRANSPORT_SHM) shm_frames_enable(run_id);
    int rc = role == DIST_ROLE_SERVER ? dist_run_server(ctx, id, t, d, model, eval_keys.model ? &eval_keys : NULL,
                                                        &split, coordinator, run_id, err, sizeof err)
                                      : dist_run_worker(ctx, id, t, d, model, keys.held ? &keys.map : NULL, &split,
                                                        coordinator, run_id, err, sizeof err);
    shm_frames_disable();  // every thread that sent has ended
    // The timeline of a failed run is written too: it may show why.
    char why[ERR_LEN];
    if (t->trace && trace_write(t->trace, "--trace", why, sizeof why) != 0 && rc == 0) {
        snprintf(err, sizeof err, "%s", why);
        rc = -1;
    }
    if (rc != 0) goto out;
    if (rdv && rdv_server_wait(rdv, (int)d->timeout_ms, err, sizeof err) != 0) goto out;
    status = 0;
out:
    status = role_said_end(role, id, d, status, err);
    rdv_server_destroy(&rdv);
    zap_handler_destroy(&zap);
    if (ctx) zmq_ctx_term(ctx);
    model_destroy(&model);
    worker_keys_free(&keys);
    eval_keys_free(&eval_keys);
    data_bundle_free(&data);
    return status;
}

// ---- the flags of `asgd server` / `asgd worker` ----------------------------------

size_t dist_role_flags(dist_role_args_t *a, flag_spec_t *specs) {
    memset(a, 0, sizeof *a);
    train_args_defaults(&a->t);
    dist_args_defaults(&a->d);
    size_t n = train_args_flags(&a->t, specs, 0);
    n += dist_args_flags(&a->d, specs + n);
    const flag_spec_t own[] = {
        {"id", FLAG_TYPE_SIZE, &a->id, "K", "this process's shard or worker id", 0, 4096, NULL, 0},
        {"join", FLAG_TYPE_BOOL, &a->d.join, NULL,
         "worker: join a running asp/ssp/bsp run with a free id from --workers to --max-workers - 1; with --run-dir of "
         "an asgd launch and no --coordinator, the coordinator, run id and keys come from DIR/join",
         0, 0, NULL, 0},
        {"replica", FLAG_TYPE_SIZE, &a->d.replica, "I",
         "server, with --server-replicas: this process's replica of its shard (asgd launch gives it)", 0,
         PS_REPLICA_MAX - 1, NULL, 0},
        {"replica-backup", FLAG_TYPE_BOOL, &a->d.replica_backup, NULL,
         "server, with --server-replicas: start as a backup that copies the state of its shard's primary", 0, 0, NULL,
         0},
        {"host-coordinator", FLAG_TYPE_STRING, &a->host, "ENDPOINT",
         "this process also hosts the coordinator, bound at ENDPOINT (e.g. tcp://0.0.0.0:29517)", 0, 0, NULL, 0},
        {"save-model", FLAG_TYPE_STRING, &a->d.save_model, "FILE",
         "worker: write its final model to FILE; server: its shard's final values, a part of the model "
         "(docs/model_file.md)",
         0, 0, NULL, 0},
    };
    _Static_assert(sizeof own / sizeof own[0] == DIST_ROLE_OWN_N_FLAGS, "DIST_ROLE_OWN_N_FLAGS is the table's length");
    memcpy(specs + n, own, sizeof own);
    n += DIST_ROLE_OWN_N_FLAGS;
    return n;
}

int dist_role_check(dist_role_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command, char *err,
                    size_t err_len) {
    int usage = train_args_finish(&a->t, specs, n_specs, command, err, err_len);
    if (usage == 0) dist_args_from_launcher(&a->d);
    if (usage == 0) usage = dist_args_finish(&a->d, &a->t, specs, n_specs, command, err, err_len);
    if (usage == 0) usage = dist_apply_scaling(&a->d, &a->t, command, err, err_len);
    return usage;
}
