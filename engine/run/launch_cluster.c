// A launch under srun, mpirun or torchrun (this process one rank) or under a
// ps-lite tracker, and the choice between those and a local launch (launch.h).
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
#include "engine/run/launch.h"
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

// ---- under srun / mpirun ------------------------------------------------------------

static int is_local_host(const char *endpoint) {
    return strstr(endpoint, "//127.") || strstr(endpoint, "//localhost:");
}

// Waits briefly until every process's result record is in the run directory:
// each appears complete, under its final name, once that process has finished.
static void wait_for_process_files(const dist_args_t *d) {
    for (int tries = 0; tries < 200; tries++) {
        size_t have = 0;
        for (size_t k = 0; k < d->servers + d->workers; k++) {
            char path[1100];
            if (k < d->servers)
                run_record_path(path, sizeof path, d->run_dir, 1, k);
            else
                run_record_path(path, sizeof path, d->run_dir, 0, k - d->servers);
            have += access(path, R_OK) == 0;
        }
        if (have == d->servers + d->workers) break;
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
    }
}

// The run directory when --run-dir is not given: one name for every process.
static void default_run_dir(const launch_env_t *env, dist_args_t *d, char *dir, size_t len) {
    if (d->run_dir) return;
    snprintf(dir, len, "runs/launch-%s-%s", launcher_kind_name(env->kind),
             getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "run");
    mkdir("runs", 0777);
    d->run_dir = dir;
}

static int launch_as_rank(const launch_env_t *env, train_args_t *t, dist_args_t *d) {
    char err[ERR_LEN], coordinator[300];
    if (env->size <= d->servers) {
        run_say("asgd launch: %zu ranks but --servers %zu: no rank is left to train\n", env->size, d->servers);
        return 2;
    }
    d->workers = env->size - d->servers;
    int scaled = dist_apply_scaling(d, t, "asgd launch", err, sizeof err);  // with the number of workers known
    if (scaled != 0) {
        run_say("%s\n", err);
        return scaled;
    }
    if (launch_coordinator_endpoint(env, d->coordinator, DIST_DEFAULT_PORT, coordinator, sizeof coordinator, err,
                                    sizeof err) != 0) {
        run_say("asgd launch: %s\n", err);
        return 2;
    }
    d->coordinator = coordinator;
    int local = is_local_host(coordinator);
    // Across machines the others must reach us: listen on every interface.
    if (!local && strcmp(d->bind_host, "127.0.0.1") == 0) d->bind_host = "0.0.0.0";
    char host_bind[320];
    const char *port = strrchr(coordinator, ':');
    snprintf(host_bind, sizeof host_bind, "tcp://%s%s", local ? "127.0.0.1" : "0.0.0.0", port ? port : ":29517");
    char dir[512];
    default_run_dir(env, d, dir, sizeof dir);
    // Rank 0 writes the run's merged files and model: checked before anyone trains.
    if (env->rank == 0 && (dist_check_writable_dir(d->run_dir, "--run-dir", err, sizeof err) != 0 ||
                           dist_check_writable_file(d->save_model, "--save-model", err, sizeof err) != 0 ||
                           train_args_write_run_config(t, d->run_dir, err, sizeof err) != 0)) {
        run_say("asgd launch: %s\n", err);
        return 1;
    }
    dist_role_t role =
        launch_role_of_rank(env->rank, d->servers) == LAUNCH_ROLE_SERVER ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
    size_t id = role == DIST_ROLE_SERVER ? env->rank : env->rank - d->servers;
    const char *save_model = d->save_model;
    char part[1100];
    d->save_model = run_merge_part_path(role, id, d, d->run_dir, save_model, part, sizeof part);
    char trace_path[600];  // each rank its own timeline (merged by hand: docs/trace.md)
    if (t->trace) launch_trace_part_path(trace_path, sizeof trace_path, d->run_dir, role, id), t->trace = trace_path;
    double t0 = mono_clock_s();
    int status = dist_run_role(role, id, t, d, env->rank == 0 ? host_bind : NULL);
    if (status != 0 || env->rank != 0) return status;
    // Rank 0 writes the run's merged files once every process has written its own.
    wait_for_process_files(d);
    run_merge_info_t info = {mono_clock_s() - t0, NULL, 0, 0};
    if (run_merge_dir(d->run_dir, t, d, &info, NULL, err, sizeof err) != 0 ||
        run_merge_model(d->run_dir, d, save_model, err, sizeof err) != 0) {
        run_say("asgd launch: %s\n", err);
        return 1;
    }
    return 0;
}

// ---- under a ps-lite tracker ---------------------------------------------------------
//
// ps-lite numbers no process: DMLC_ROLE says scheduler, server or worker. The
// scheduler hosts three rendezvous (docs/launch.md): at DMLC_PS_ROOT_PORT the
// ids (servers and workers join for any rank of their role, first come first
// served), at the next port the run's own (as rank 0 hosts it elsewhere), and
// again at DMLC_PS_ROOT_PORT, once every id is given, the end: each process
// reports how it finished, waiting for all the others as ps-lite's final
// barrier does, and the scheduler then merges the run directory.

#define PSLITE_ROLE_SCHEDULER 2  // its own entry in the end table
#define PSLITE_DONE_RUN_ID 0x656e64ull  // the end rendezvous's run id: the ids' one xor this

// "tcp://host:port" -> its port; 0 when it has none.
static int endpoint_port(const char *ep) {
    const char *colon = strrchr(ep, ':');
    return colon ? atoi(colon + 1) : 0;
}

// A name no other process of the run has: host, pid and a clock reading.
static void pslite_name(char *out, size_t len) {
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "host");
    host[32] = '\0';
    for (char *c = host; *c; c++)
        if (*c <= ' ' || *c >= 0x7f) *c = '_';
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(out, len, "%s.%d.%llx", host, (int)getpid(),
             (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
}

// A server or worker: its id from the scheduler, then its part of the run, then the end.
static int pslite_member(const launch_env_t *env, train_args_t *t, dist_args_t *d, const char *ids_ep,
                         uint64_t ids_id) {
    char err[ERR_LEN];
    dist_role_t role = env->role == LAUNCH_ENV_SERVER ? DIST_ROLE_SERVER : DIST_ROLE_WORKER;
    size_t n = d->servers + d->workers;
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.role = role;
    snprintf(me.endpoint, sizeof me.endpoint, "-");  // nothing to reach here yet: the run's own rendezvous comes next
    pslite_name(me.name, sizeof me.name);
    uint32_t rank = 0;
    rdv_entry_t *table = NULL;
    zap_handler_t *zap = NULL;
    void *ctx = zmq_ctx_new();
    int rc = -1;
    if (!ctx)
        snprintf(err, sizeof err, "zmq_ctx_new failed: %s", zmq_strerror(errno));
    else if (dist_security_start(d, ctx, &zap, err, sizeof err) == 0)
        rc = rdv_join_any(ctx, ids_ep, ids_id, &me, n, &table, &rank, (int)d->timeout_ms, err, sizeof err);
    free(table);
    zap_handler_destroy(&zap);
    if (ctx) zmq_ctx_term(ctx);
    if (rc != 0) {
        run_say("asgd launch: ps-lite %s: no id from the scheduler: %s\n", launch_role_name(role), err);
        return 1;
    }
    size_t id = role == DIST_ROLE_SERVER ? rank : rank - d->servers;
    if (!t->quiet)
        run_say("asgd launch: ps-lite %s %s is %s %zu\n", launch_role_name(role), me.name, launch_role_name(role), id);
    char part[1100];
    d->save_model = run_merge_part_path(role, id, d, d->run_dir, d->save_model, part, sizeof part);
    int status = dist_run_role(role, id, t, d, NULL);

    // The end: tell the scheduler how this process finished.
    rdv_entry_t end = me;
    end.rank = rank;
    if (status == 0)
        snprintf(end.endpoint, sizeof end.endpoint, "ok");
    else
        snprintf(end.endpoint, sizeof end.endpoint, "exit-%d", status);
    ctx = zmq_ctx_new();
    rc = ctx ? rdv_join(ctx, ids_ep, ids_id ^ PSLITE_DONE_RUN_ID, &end, n + 1, &table, -1, err, sizeof err) : -1;
    if (!ctx) snprintf(err, sizeof err, "zmq_ctx_new failed: %s", zmq_strerror(errno));
    free(table);
    if (ctx) zmq_ctx_term(ctx);
    if (rc != 0) {
        run_say("asgd launch: ps-lite %s %zu: reporting the end to the scheduler: %s\n", launch_role_name(role), id,
                err);
        return status ? status : 1;
    }
    return status;
}

// The scheduler: hands out ids, hosts the run's rendezvous, waits for every
// process to end and merges the run directory as rank 0 does elsewhere.
static int pslite_scheduler(const train_args_t *t, const dist_args_t *d, const char *ids_ep, const char *run_ep,
                            uint64_t ids_id, int local) {
    char err[ERR_LEN] = "", ids_bind[320], run_bind[320], own[320];
    const char *host = local ? "127.0.0.1" : "0.0.0.0";
    snprintf(ids_bind, sizeof ids_bind, "tcp://%s:%d", host, endpoint_port(ids_ep));
    snprintf(run_bind, sizeof run_bind, "tcp://%s:%d", host, endpoint_port(run_ep));
    snprintf(own, sizeof own, "tcp://127.0.0.1:%d", endpoint_port(ids_ep));
    size_t n = d->servers + d->workers, counts[2] = {d->servers, d->workers};  // roles DIST_ROLE_SERVER, _WORKER
    uint64_t run_id = d->run_id ? d->run_id : dist_default_run_id(run_ep);
    double t0 = mono_clock_s();
    if (dist_make_run_dir(d->run_dir, err, sizeof err) != 0 ||
        train_args_write_run_config(t, d->run_dir, err, sizeof err) != 0) {
        run_say("asgd launch: %s\n", err);
        return 1;
    }
    // The ids first, in a context of their own: its end closes the port for
    // certain, which the end rendezvous then binds again.
    zap_handler_t *zap = NULL;
    rdv_server_t *ids = NULL, *run = NULL, *done = NULL;
    rdv_entry_t *table = NULL;
    int status = 1;
    void *ctx = zmq_ctx_new();
    if (!ctx) {
        run_say("asgd launch: zmq_ctx_new failed: %s\n", zmq_strerror(errno));
        return 1;
    }
    if (dist_security_start(d, ctx, &zap, err, sizeof err) == 0 &&
        (ids = rdv_server_new_roles(ctx, ids_bind, counts, 2, ids_id, err, sizeof err)) != NULL) {
        if (!t->quiet)
            run_say("asgd launch: ps-lite scheduler for %zu servers and %zu workers at %s; logs in %s\n", d->servers,
                    d->workers, ids_ep, d->run_dir);
        if (rdv_server_wait(ids, (int)d->timeout_ms, err, sizeof err) == 0) status = 0;
    }
    rdv_server_destroy(&ids);
    zap_handler_destroy(&zap);
    zmq_ctx_term(ctx);
    if (status != 0) {
        run_say("asgd launch: ps-lite scheduler: handing out ids: %s\n", err);
        return 1;
    }
    status = 1;
    if (!(ctx = zmq_ctx_new())) {
        run_say("asgd launch: zmq_ctx_new failed: %s\n", zmq_strerror(errno));
        return 1;
    }
    rdv_entry_t me;
    memset(&me, 0, sizeof me);
    me.rank = (uint32_t)n;
    me.role = PSLITE_ROLE_SCHEDULER;
    snprintf(me.endpoint, sizeof me.endpoint, "scheduler");
    if (dist_security_start(d, ctx, &zap, err, sizeof err) != 0 ||
        !(run = rdv_server_new(ctx, run_bind, n, run_id, err, sizeof err)) ||
        !(done = rdv_server_new(ctx, ids_bind, n + 1, ids_id ^ PSLITE_DONE_RUN_ID, err, sizeof err)) ||
        rdv_join(ctx, own, ids_id ^ PSLITE_DONE_RUN_ID, &me, n + 1, &table, -1, err, sizeof err) != 0 ||
        rdv_server_wait(done, (int)d->timeout_ms, err, sizeof err) != 0) {
        run_say("asgd launch: ps-lite scheduler: %s\n", err);
        goto out;
    }
    size_t failed = 0;
    for (size_t r = 0; r < n; r++) {
        if (strcmp(table[r].endpoint, "ok") == 0) continue;
        failed++;
        run_say("asgd launch: ps-lite %s %zu (%s) failed: %s\n", r < d->servers ? "server" : "worker",
                r < d->servers ? r : r - d->servers, table[r].name, table[r].endpoint);
    }
    if (failed) goto out;
    wait_for_process_files(d);
    run_merge_info_t info = {mono_clock_s() - t0, NULL, 0, 0};
    if (run_merge_dir(d->run_dir, t, d, &info, NULL, err, sizeof err) != 0 ||
        run_merge_model(d->run_dir, d, d->save_model, err, sizeof err) != 0) {
        run_say("asgd launch: %s\n", err);
        goto out;
    }
    status = 0;
out:
    free(table);
    rdv_server_destroy(&done);
    rdv_server_destroy(&run);
    zap_handler_destroy(&zap);
    zmq_ctx_term(ctx);
    return status;
}

// Sizes the run from DMLC_NUM_SERVER / DMLC_NUM_WORKER before the flags are
// checked; an explicit --servers or --workers must agree. Returns 0, or 2 with err.
int run_launch_env_counts(const launch_env_t *env, dist_args_t *d, const flag_spec_t *flags, size_t n_flags, char *err,
                          size_t err_len) {
    const struct {
        const char *flag, *var;
        size_t *target, want;
    } c[2] = {{"servers", "DMLC_NUM_SERVER", &d->servers, env->servers},
              {"workers", "DMLC_NUM_WORKER", &d->workers, env->workers}};
    for (int i = 0; i < 2; i++) {
        const flag_spec_t *f = flags_find(flags, n_flags, c[i].flag);
        if (f && f->seen && *c[i].target != c[i].want) {
            snprintf(err, err_len,
                     "--%s %zu but %s=%zu: under ps-lite its variables size the run; drop --%s "
                     "or make them agree",
                     c[i].flag, *c[i].target, c[i].var, c[i].want, c[i].flag);
            return 2;
        }
        *c[i].target = c[i].want;
    }
    if (d->sync == SYNC_MODE_ALLREDUCE && env->servers > 0) {
        snprintf(err, err_len,
                 "DMLC_NUM_SERVER=%zu but --sync allreduce runs without servers (expected "
                 "DMLC_NUM_SERVER=0)",
                 env->servers);
        return 2;
    }
    if (d->sync != SYNC_MODE_ALLREDUCE && env->servers == 0) {
        snprintf(err, err_len, "DMLC_NUM_SERVER=0 but --sync %s needs at least one server",
                 sync_mode_name((sync_mode_t)d->sync));
        return 2;
    }
    return 0;
}

static int launch_pslite(const launch_env_t *env, train_args_t *t, dist_args_t *d) {
    char err[ERR_LEN], ids_ep[300], run_ep[320], dir[512];
    int scaled = dist_apply_scaling(d, t, "asgd launch", err, sizeof err);  // with the number of workers known
    if (scaled != 0) {
        run_say("%s\n", err);
        return scaled;
    }
    if (launch_coordinator_endpoint(env, d->coordinator, DIST_DEFAULT_PORT, ids_ep, sizeof ids_ep, err, sizeof err) !=
        0) {
        run_say("asgd launch: %s\n", err);
        return 2;
    }
    int port = endpoint_port(ids_ep);
    if (port >= 65535) {
        run_say(
            "asgd launch: coordinator %s: under ps-lite the port after it is used too (expected a port "
            "below 65535)\n",
            ids_ep);
        return 2;
    }
    snprintf(run_ep, sizeof run_ep, "%.*s:%d", (int)(strrchr(ids_ep, ':') - ids_ep), ids_ep, port + 1);
    int local = is_local_host(ids_ep);
    // Across machines the others must reach us: listen on every interface.
    if (!local && strcmp(d->bind_host, "127.0.0.1") == 0) d->bind_host = "0.0.0.0";
    default_run_dir(env, d, dir, sizeof dir);
    uint64_t ids_id = d->run_id ? d->run_id : dist_default_run_id(ids_ep);
    d->coordinator = run_ep;
    if (env->role == LAUNCH_ENV_SCHEDULER) return pslite_scheduler(t, d, ids_ep, run_ep, ids_id, local);
    return pslite_member(env, t, d, ids_ep, ids_id);
}

int run_launch_check(run_job_t *j, const launch_env_t *env, char *err, size_t err_len) {
    if (j->t.resume) {
        snprintf(err, err_len,
                 "--resume: restart a failed server by hand with asgd server --id K --resume DIR "
                 "(its workers reconnect by themselves)");
        return 2;
    }
    j->d.save_model = j->o.save_model;
    if (j->d.server_replicas > 1 && env->kind != LAUNCHER_KIND_NONE) {
        snprintf(err, err_len,
                 "--server-replicas: only a launch that starts every process itself places and "
                 "restarts the replicas (they share one host and the run directory)");
        return 2;
    }
    if (j->o.restart_servers > 0 && env->kind != LAUNCHER_KIND_NONE) {
        snprintf(err, err_len,
                 "--restart-servers: only a launch that starts every process itself restarts them "
                 "(under %s restart a server by hand with asgd server --id K --resume DIR)",
                 launcher_kind_name(env->kind));
        return 2;
    }
    return 0;
}

int run_launch(run_job_t *j, const launch_env_t *env) {
    if (env->kind == LAUNCHER_KIND_PSLITE) return launch_pslite(env, &j->t, &j->d);
    if (env->kind != LAUNCHER_KIND_NONE) return launch_as_rank(env, &j->t, &j->d);
    char err[ERR_LEN];
    int usage = dist_apply_scaling(&j->d, &j->t, "asgd launch", err, sizeof err);
    if (usage != 0) {
        run_say("%s\n", err);
        return usage;
    }
    return launch_local(j, NULL, err, sizeof err);
}
