// asgd server / asgd worker: one process of a distributed run, started by hand or by a script.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/cli/commands.h"
#include "engine/cli/train_help.h"
#include "engine/run/dist.h"

static const char server_usage[] =
    "asgd server --id K --coordinator HOST:PORT [--servers M --workers N --sync ...] [train flags]";
static const char worker_usage[] =
    "asgd worker --id K --coordinator HOST:PORT [--servers M --workers N --sync ...] [train flags]";
static const char role_description[] =
    "One process of a distributed run, started by hand or by a script: a parameter-server shard\n"
    "(asgd server) or a worker replica (asgd worker). Every process of the run must get the same\n"
    "training and distributed flags. `asgd launch` starts all of them for you.";

int dist_role_finish(dist_role_args_t *a, const flag_spec_t *specs, size_t n_specs, const char *command) {
    char err[512];
    int usage = dist_role_check(a, specs, n_specs, command, err, sizeof err);
    if (usage != 0) fprintf(stderr, "%s\n", err);
    return usage;
}

static int cmd_role(dist_role_t role, int argc, char **argv) {
    dist_role_args_t a;
    flag_spec_t flags[DIST_ROLE_N_FLAGS];
    size_t n = dist_role_flags(&a, flags);
    const char *command = role == DIST_ROLE_SERVER ? "asgd server" : "asgd worker";
    int parsed = train_args_command(&a.t, command, role == DIST_ROLE_SERVER ? server_usage : worker_usage,
                                    role_description, flags, n, argc, argv);
    int status = parsed >= 0 ? parsed : dist_role_finish(&a, flags, n, command);
    dist_join_file_t jf = {{0}, {0}, {0}};
    if (parsed < 0 && status == 0 && a.d.join && role == DIST_ROLE_SERVER) {
        fprintf(stderr, "asgd server: --join: workers join a run; a server does not\n");
        status = 2;
    }
    if (parsed < 0 && status == 0 && a.d.join && !a.d.coordinator && a.d.run_dir) {
        char err[512];
        status = dist_join_file_read(&a.d, &jf, err, sizeof err);
        if (status != 0) fprintf(stderr, "asgd worker: %s\n", err);
    }
    if (parsed < 0 && status == 0) status = dist_run_role(role, a.id, &a.t, &a.d, a.host);
    train_args_release(&a.t);
    return status;
}

int cmd_server(int argc, char **argv) { return cmd_role(DIST_ROLE_SERVER, argc, argv); }
int cmd_worker(int argc, char **argv) { return cmd_role(DIST_ROLE_WORKER, argc, argv); }
