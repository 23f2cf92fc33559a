#ifndef ASGD_NET_LAUNCH_ENV_H
#define ASGD_NET_LAUNCH_ENV_H
// Who am I in a distributed run? Under a cluster launcher (srun, mpirun,
// an MPICH/PMI mpiexec) every process of one run is the same binary with the
// same arguments; only the environment the launcher sets tells them apart.
// This reads that environment: the process's rank, the run's size, and — under
// SLURM — the first host of the node list, where rank 0 (and so the
// rendezvous coordinator) runs. docs/launch.md has the whole story.
#include <stddef.h>

typedef enum launcher_kind {
    LAUNCHER_KIND_NONE,     // started by hand (or by asgd's own local launcher)
    LAUNCHER_KIND_SLURM,    // srun: SLURM_PROCID / SLURM_NTASKS
    LAUNCHER_KIND_OPENMPI,  // mpirun (Open MPI): OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
    LAUNCHER_KIND_PMI,      // MPICH/Intel mpiexec, srun --mpi=pmi2: PMI_RANK (or PMIX_RANK) / PMI_SIZE
} launcher_kind_t;

typedef struct launch_env {
    launcher_kind_t kind;
    size_t rank, size;     // rank < size; 0 and 1 when kind is NONE
    char first_host[256];  // first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST); "" without one
} launch_env_t;

// Looks a variable up; returns NULL when it is not set. ctx is the caller's.
typedef const char *(*launch_getenv_fn)(const char *name, void *ctx);

// Fills *e from the environment (getenv_fn NULL = the process's own, via getenv).
// When several launchers' variables are present the one that started this very
// process wins: Open MPI, then PMI, then SLURM — mpirun or mpiexec inside a
// SLURM allocation runs its ranks under daemons that srun started, so there
// SLURM_PROCID numbers the daemons, not the ranks.
// Returns 0 (kind NONE when no launcher is detected), or -1 with a one-line err
// naming the variable when one is present but malformed (not a number, rank >=
// size, size 0, a rank without a size) or the node list cannot be parsed.
int launch_env_detect(launch_env_t *e, launch_getenv_fn getenv_fn, void *ctx, char *err, size_t err_len);

// "none", "slurm", "openmpi" or "pmi".
const char *launcher_kind_name(launcher_kind_t kind);

// The first host of a SLURM node list (hostlist syntax: comma-separated names,
// each with bracketed ranges): "node[01-04,07],gpu3" -> "node01",
// "localhost" -> "localhost", "a-[9-10]" -> "a-9", "r[1-2]-n[3-4]" -> "r1-n3".
// Returns 0, or -1 with err on an empty or malformed list or when out_len is too small.
int slurm_first_host(const char *nodelist, char *out, size_t out_len, char *err, size_t err_len);

// The coordinator's endpoint, "tcp://host:port". An explicit "host:port" (or
// "tcp://host:port") wins; otherwise the SLURM first host with default_port;
// otherwise -1 with an err telling the user to pass --coordinator host:port.
int launch_coordinator_endpoint(const launch_env_t *e, const char *explicit_host_port, int default_port, char *out,
                                size_t out_len, char *err, size_t err_len);

// A rank's role: the first `servers` ranks serve parameters, the rest train.
// The values are the rendezvous table's role field (rendezvous.h).
typedef enum launch_role {
    LAUNCH_ROLE_SERVER = 0,
    LAUNCH_ROLE_WORKER = 1,
} launch_role_t;

launch_role_t launch_role_of_rank(size_t rank, size_t servers);

#endif
