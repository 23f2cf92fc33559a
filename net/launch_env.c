// Rank, size and coordinator host from a cluster launcher's environment (launch_env.h).
#include "net/launch_env.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *process_getenv(const char *name, void *ctx) {
    (void)ctx;
    return getenv(name);
}

const char *launcher_kind_name(launcher_kind_t kind) {
    switch (kind) {
        case LAUNCHER_KIND_NONE:
            return "none";
        case LAUNCHER_KIND_SLURM:
            return "slurm";
        case LAUNCHER_KIND_OPENMPI:
            return "openmpi";
        case LAUNCHER_KIND_PMI:
            return "pmi";
        case LAUNCHER_KIND_TORCHRUN:
            return "torchrun";
        case LAUNCHER_KIND_PSLITE:
            return "pslite";
    }
    return "unknown";
}

const char *launch_env_role_name(launch_env_role_t role) {
    switch (role) {
        case LAUNCH_ENV_BY_RANK:
            return "rank";
        case LAUNCH_ENV_SCHEDULER:
            return "scheduler";
        case LAUNCH_ENV_SERVER:
            return "server";
        case LAUNCH_ENV_WORKER:
            return "worker";
    }
    return "unknown";
}

// A launcher writes plain decimal; anything else (sign, spaces, hex) means the
// variable is not what we think it is, so it is refused rather than guessed at.
static int parse_count(const char *name, const char *s, uint64_t max, uint64_t *out, char *err, size_t err_len) {
    if (!*s) {
        snprintf(err, err_len, "%s is set but empty", name);
        return -1;
    }
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) {
            snprintf(err, err_len, "%s=\"%s\" is not a decimal number", name, s);
            return -1;
        }
    }
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE || v > max) {
        snprintf(err, err_len, "%s=%s is out of range (at most %llu)", name, s, (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

// Rank and size from one launcher's pair of variables; both must be present.
// Ranks travel as uint32 in the rendezvous table, hence the bound.
static int rank_and_size(launch_env_t *e, const char *rank_name, const char *rank_s, const char *size_name,
                         const char *size_s, char *err, size_t err_len) {
    if (!rank_s) {
        snprintf(err, err_len, "%s=%s is set but %s is not (expected this process's rank, a decimal number below %s)",
                 size_name, size_s, rank_name, size_name);
        return -1;
    }
    if (!size_s) {
        snprintf(err, err_len, "%s=%s is set but %s is not (expected the number of processes, a decimal number)",
                 rank_name, rank_s, size_name);
        return -1;
    }
    uint64_t rank, size;
    if (parse_count(rank_name, rank_s, UINT32_MAX - 1, &rank, err, err_len) != 0) return -1;
    if (parse_count(size_name, size_s, UINT32_MAX, &size, err, err_len) != 0) return -1;
    if (size == 0) {
        snprintf(err, err_len, "%s=0: a run has at least one process", size_name);
        return -1;
    }
    if (rank >= size) {
        snprintf(err, err_len, "%s=%s is not below %s=%s", rank_name, rank_s, size_name, size_s);
        return -1;
    }
    e->rank = (size_t)rank;
    e->size = (size_t)size;
    return 0;
}

// A hostname character as SLURM's hostlist accepts it outside brackets (and
// as a host name or IPv4 address in MASTER_ADDR / DMLC_PS_ROOT_URI).
static int host_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'; }

// A host a launcher names (MASTER_ADDR, DMLC_PS_ROOT_URI) into out.
static int parse_host(const char *name, const char *s, char *out, size_t out_len, char *err, size_t err_len) {
    size_t n = strlen(s);
    int ok = n > 0 && n < out_len;
    for (size_t i = 0; ok && i < n; i++) ok = host_char(s[i]);
    if (!ok) {
        snprintf(err, err_len, "%s=\"%s\" is not a host (expected a host name or IPv4 address, e.g. node01)", name, s);
        return -1;
    }
    memcpy(out, s, n + 1);
    return 0;
}

// A port a launcher names; max is below 65535 where the next port is used too.
static int parse_port(const char *name, const char *s, unsigned max, int *out, char *err, size_t err_len) {
    uint64_t v;
    char why[160];
    if (parse_count(name, s, max, &v, why, sizeof why) != 0 || v == 0) {
        snprintf(err, err_len, "%s=\"%s\" is not a port (expected a decimal number in 1..%u)", name, s, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

// torchrun: RANK and WORLD_SIZE (required), LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT (checked when set). The coordinator listens on MASTER_PORT + 1:
// torchrun's agent on the master node may run its own store on MASTER_PORT.
static int detect_torchrun(launch_env_t *e, launch_getenv_fn getenv_fn, void *ctx, char *err, size_t err_len) {
    const char *r = getenv_fn("RANK", ctx), *s = getenv_fn("WORLD_SIZE", ctx), *l = getenv_fn("LOCAL_RANK", ctx);
    e->kind = LAUNCHER_KIND_TORCHRUN;
    if (!r && !s) {
        snprintf(err, err_len,
                 "LOCAL_RANK=%s is set but RANK and WORLD_SIZE are not (torchrun sets all three: the "
                 "global rank and the number of processes, decimal)",
                 l);
        return -1;
    }
    if (rank_and_size(e, "RANK", r, "WORLD_SIZE", s, err, err_len) != 0) return -1;
    uint64_t local;
    if (l && parse_count("LOCAL_RANK", l, UINT32_MAX - 1, &local, err, err_len) != 0) return -1;
    const char *addr = getenv_fn("MASTER_ADDR", ctx), *port = getenv_fn("MASTER_PORT", ctx);
    if (addr && parse_host("MASTER_ADDR", addr, e->coord_host, sizeof e->coord_host, err, err_len) != 0) return -1;
    if (port) {
        if (parse_port("MASTER_PORT", port, 65534, &e->coord_port, err, err_len) != 0) return -1;
        e->coord_port++;
    }
    return 0;
}

// ps-lite: DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER and
// DMLC_NUM_WORKER, all required. `seen` names one that is set, for messages.
static int detect_pslite(launch_env_t *e, launch_getenv_fn getenv_fn, void *ctx, const char *seen, char *err,
                         size_t err_len) {
    e->kind = LAUNCHER_KIND_PSLITE;
    static const struct {
        const char *name, *form;
    } vars[5] = {
        {"DMLC_ROLE", "scheduler, server or worker"},
        {"DMLC_PS_ROOT_URI", "the scheduler's host name or IPv4 address"},
        {"DMLC_PS_ROOT_PORT", "the scheduler's port, 1..65534"},
        {"DMLC_NUM_SERVER", "the number of servers, 0..1024"},
        {"DMLC_NUM_WORKER", "the number of workers, 1..4096"},
    };
    const char *v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = getenv_fn(vars[i].name, ctx);
        if (!v[i]) {
            snprintf(err, err_len, "%s is set but %s is not (ps-lite sets it to %s)", seen, vars[i].name, vars[i].form);
            return -1;
        }
    }
    if (strcmp(v[0], "scheduler") == 0)
        e->role = LAUNCH_ENV_SCHEDULER;
    else if (strcmp(v[0], "server") == 0)
        e->role = LAUNCH_ENV_SERVER;
    else if (strcmp(v[0], "worker") == 0)
        e->role = LAUNCH_ENV_WORKER;
    else {
        snprintf(err, err_len, "DMLC_ROLE=\"%s\" is not a ps-lite role (expected scheduler, server or worker)", v[0]);
        return -1;
    }
    if (parse_host(vars[1].name, v[1], e->coord_host, sizeof e->coord_host, err, err_len) != 0) return -1;
    // The coordinator uses DMLC_PS_ROOT_PORT and the port after it (docs/launch.md).
    if (parse_port(vars[2].name, v[2], 65534, &e->coord_port, err, err_len) != 0) return -1;
    uint64_t servers, workers;
    char why[160];
    if (parse_count(vars[3].name, v[3], 1024, &servers, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s (expected %s)", why, vars[3].form);
        return -1;
    }
    if (parse_count(vars[4].name, v[4], 4096, &workers, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s (expected %s)", why, vars[4].form);
        return -1;
    }
    if (workers == 0) {
        snprintf(err, err_len, "DMLC_NUM_WORKER=0: a run has at least one worker (expected %s)", vars[4].form);
        return -1;
    }
    if (e->role == LAUNCH_ENV_SERVER && servers == 0) {
        snprintf(err, err_len, "DMLC_ROLE=server but DMLC_NUM_SERVER=0 (expected at least 1 server when one runs)");
        return -1;
    }
    e->servers = (size_t)servers;
    e->workers = (size_t)workers;
    e->size = e->servers + e->workers;
    e->rank = 0;
    return 0;
}

// SLURM's batch script (and an salloc shell) carries SLURM_PROCID=0 and the
// job's SLURM_NTASKS but is not one of the tasks: only srun's tasks have a
// step id, and special steps (batch, extern, interactive) use ids near 2^32.
static int slurm_task_step(const char *step) {
    if (!step || !*step) return 0;
    for (const char *p = step; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return strtoull(step, NULL, 10) < 0xFFFFFFF0ull;
}

int launch_env_detect(launch_env_t *e, launch_getenv_fn getenv_fn, void *ctx, char *err, size_t err_len) {
    if (!getenv_fn) getenv_fn = process_getenv;
    memset(e, 0, sizeof *e);
    e->kind = LAUNCHER_KIND_NONE;
    e->rank = 0;
    e->size = 1;

    // The node list is read whatever the launcher: mpirun inside a SLURM
    // allocation also places rank 0 on the allocation's first node.
    const char *list_name = "SLURM_STEP_NODELIST";
    const char *list = getenv_fn(list_name, ctx);
    if (!list) list = getenv_fn(list_name = "SLURM_JOB_NODELIST", ctx);
    if (list) {
        char why[200];
        if (slurm_first_host(list, e->first_host, sizeof e->first_host, why, sizeof why) != 0) {
            snprintf(err, err_len, "%s: %s", list_name, why);
            return -1;
        }
    }

    // The innermost launcher first (launch_env.h).
    if (getenv_fn("RANK", ctx) || getenv_fn("WORLD_SIZE", ctx) || getenv_fn("LOCAL_RANK", ctx))
        return detect_torchrun(e, getenv_fn, ctx, err, err_len);
    static const char *const dmlc[] = {"DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER",
                                       "DMLC_NUM_WORKER"};
    for (size_t i = 0; i < sizeof dmlc / sizeof dmlc[0]; i++) {
        const char *v = getenv_fn(dmlc[i], ctx);
        if (!v) continue;
        char seen[160];
        snprintf(seen, sizeof seen, "%s=%.100s", dmlc[i], v);
        return detect_pslite(e, getenv_fn, ctx, seen, err, err_len);
    }

    const char *r = getenv_fn("OMPI_COMM_WORLD_RANK", ctx), *s = getenv_fn("OMPI_COMM_WORLD_SIZE", ctx);
    if (r || s) {
        e->kind = LAUNCHER_KIND_OPENMPI;
        return rank_and_size(e, "OMPI_COMM_WORLD_RANK", r, "OMPI_COMM_WORLD_SIZE", s, err, err_len);
    }

    const char *rank_name = "PMI_RANK";
    r = getenv_fn(rank_name, ctx);
    if (!r) r = getenv_fn(rank_name = "PMIX_RANK", ctx);
    s = getenv_fn("PMI_SIZE", ctx);
    if (s || (r && strcmp(rank_name, "PMI_RANK") == 0)) {
        e->kind = LAUNCHER_KIND_PMI;
        return rank_and_size(e, rank_name, r, "PMI_SIZE", s, err, err_len);
    }

    const char *procid = getenv_fn("SLURM_PROCID", ctx);
    const char *step = getenv_fn("SLURM_STEP_ID", ctx);
    if (!step) step = getenv_fn("SLURM_STEPID", ctx);
    if (procid && slurm_task_step(step)) {
        const char *size_name = "SLURM_NTASKS";
        s = getenv_fn(size_name, ctx);
        if (!s) s = getenv_fn(size_name = "SLURM_NPROCS", ctx);
        if (!s) size_name = "SLURM_NTASKS";
        e->kind = LAUNCHER_KIND_SLURM;
        return rank_and_size(e, "SLURM_PROCID", procid, size_name, s, err, err_len);
    }

    // srun --mpi=pmix sets PMIX_RANK alongside SLURM's variables (handled
    // above); PMIx alone exports no size, so the run cannot be sized.
    if (r) {
        snprintf(err, err_len, "%s=%s is set but no run size is (PMI_SIZE, OMPI_COMM_WORLD_SIZE or SLURM_NTASKS)",
                 rank_name, r);
        return -1;
    }
    return 0;
}

// Parses "[...]" at *pp (SLURM ranges: a or a-b with a <= b, comma-separated),
// returning the first number's digits as written (zero padding is part of the
// name: node[01-04] starts at node01) and moving *pp past the ']'.
static int bracket_group(const char *list, const char **pp, const char **first, size_t *first_len, char *err,
                         size_t err_len) {
    const char *g = *pp + 1;
    *first = g;
    *first_len = 0;
    for (;;) {
        const char *a = g;
        while (isdigit((unsigned char)*g)) g++;
        if (g == a) break;
        if (*first_len == 0) *first_len = (size_t)(g - a);
        if (*g == '-') {
            const char *b = ++g;
            while (isdigit((unsigned char)*g)) g++;
            if (g == b) break;
            if (strtoull(a, NULL, 10) > strtoull(b, NULL, 10)) {
                snprintf(err, err_len, "\"%s\": descending range at offset %zu", list, (size_t)(a - list));
                return -1;
            }
        }
        if (*g != ',') {
            if (*g == ']') {
                *pp = g + 1;
                return 0;
            }
            break;
        }
        g++;
    }
    snprintf(err, err_len, "\"%s\": malformed range inside brackets at offset %zu", list, (size_t)(g - list));
    return -1;
}

int slurm_first_host(const char *nodelist, char *out, size_t out_len, char *err, size_t err_len) {
    if (!nodelist || !*nodelist) {
        snprintf(err, err_len, "empty node list");
        return -1;
    }
    // Every entry is checked, so a garbled list is reported rather than half
    // used; only the first entry is expanded into out.
    size_t n = 0;  // bytes written to out
    const char *p = nodelist;
    for (size_t entry = 0;; entry++) {
        const char *entry_start = p;
        while (*p && *p != ',') {
            const char *piece;
            size_t len;
            if (*p == '[') {
                if (bracket_group(nodelist, &p, &piece, &len, err, err_len) != 0) return -1;
            } else if (host_char(*p)) {
                piece = p;
                while (host_char(*p)) p++;
                len = (size_t)(p - piece);
            } else {
                snprintf(err, err_len, "\"%s\": unexpected '%c' at offset %zu", nodelist, *p, (size_t)(p - nodelist));
                return -1;
            }
            if (entry > 0) continue;
            if (n + len + 1 > out_len) {
                snprintf(err, err_len, "\"%s\": first host longer than %zu bytes", nodelist, out_len ? out_len - 1 : 0);
                return -1;
            }
            memcpy(out + n, piece, len);
            n += len;
        }
        if (p == entry_start) {
            snprintf(err, err_len, "\"%s\": empty host name at offset %zu", nodelist, (size_t)(p - nodelist));
            return -1;
        }
        if (!*p) break;
        p++;  // the comma
    }
    out[n] = '\0';
    return 0;
}

int launch_coordinator_endpoint(const launch_env_t *e, const char *explicit_host_port, int default_port, char *out,
                                size_t out_len, char *err, size_t err_len) {
    if (explicit_host_port && *explicit_host_port) {
        const char *hp = explicit_host_port;
        if (strncmp(hp, "tcp://", 6) == 0) hp += 6;
        const char *colon = strrchr(hp, ':');
        if (!colon || colon == hp) {
            snprintf(err, err_len, "coordinator \"%s\" is not host:port", explicit_host_port);
            return -1;
        }
        uint64_t port;
        char why[160];
        if (parse_count("the coordinator's port", colon + 1, 65535, &port, why, sizeof why) != 0 || port == 0) {
            snprintf(err, err_len, "coordinator \"%s\": the port must be a number in 1..65535", explicit_host_port);
            return -1;
        }
        for (const char *c = hp; c < colon; c++) {
            if (isspace((unsigned char)*c) || *c == '/') {
                snprintf(err, err_len, "coordinator \"%s\": bad character in the host", explicit_host_port);
                return -1;
            }
        }
        int w = snprintf(out, out_len, "tcp://%.*s:%u", (int)(colon - hp), hp, (unsigned)port);
        if (w < 0 || (size_t)w >= out_len) {
            snprintf(err, err_len, "coordinator \"%s\" is too long", explicit_host_port);
            return -1;
        }
        return 0;
    }
    if (e && (e->kind == LAUNCHER_KIND_TORCHRUN || e->kind == LAUNCHER_KIND_PSLITE)) {
        int torchrun = e->kind == LAUNCHER_KIND_TORCHRUN;
        const char *missing = !e->coord_host[0] ? (torchrun ? "MASTER_ADDR" : "DMLC_PS_ROOT_URI")
                              : !e->coord_port  ? (torchrun ? "MASTER_PORT" : "DMLC_PS_ROOT_PORT")
                                                : NULL;
        if (missing) {
            snprintf(err, err_len, "launched by %s, but %s is not set: set it (%s) or pass --coordinator host:port",
                     launcher_kind_name(e->kind), missing,
                     torchrun ? "MASTER_ADDR=host of rank 0, MASTER_PORT=a port whose next one is free there"
                              : "the scheduler's host and port");
            return -1;
        }
        int w = snprintf(out, out_len, "tcp://%s:%d", e->coord_host, e->coord_port);
        if (w < 0 || (size_t)w >= out_len) {
            snprintf(err, err_len, "coordinator endpoint for host \"%s\" is too long", e->coord_host);
            return -1;
        }
        return 0;
    }
    if (e && e->first_host[0]) {
        if (default_port <= 0 || default_port > 65535) {
            snprintf(err, err_len, "default coordinator port %d is not in 1..65535", default_port);
            return -1;
        }
        int w = snprintf(out, out_len, "tcp://%s:%d", e->first_host, default_port);
        if (w < 0 || (size_t)w >= out_len) {
            snprintf(err, err_len, "coordinator endpoint for host \"%s\" is too long", e->first_host);
            return -1;
        }
        return 0;
    }
    snprintf(err, err_len,
             "no coordinator: launched by %s, which names no first host; pass --coordinator host:port "
             "(the host of rank 0)",
             launcher_kind_name(e ? e->kind : LAUNCHER_KIND_NONE));
    return -1;
}

launch_role_t launch_role_of_rank(size_t rank, size_t servers) {
    return rank < servers ? LAUNCH_ROLE_SERVER : LAUNCH_ROLE_WORKER;
}
