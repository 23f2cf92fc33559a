#ifndef ASGD_NET_LAUNCH_ENV_H
#define ASGD_NET_LAUNCH_ENV_H
// Who am I in a distributed run? Under a cluster launcher (srun, mpirun, an
// MPICH/PMI mpiexec, torchrun, a ps-lite tracker) every process of one run is
// the same binary with the same arguments; only the environment the launcher
// sets tells them apart. This reads that environment: the process's rank (or,
// under ps-lite, its role: ps-lite numbers no one, its scheduler does), the
// run's size, and where the coordinator runs when the launcher says so.
// docs/launch.md has the whole story.
#include <stddef.h>

typedef enum launcher_kind {
    LAUNCHER_KIND_NONE,  // started by hand (or by asgd's own local launcher)
    LAUNCHER_KIND_SLURM,  // srun: SLURM_PROCID / SLURM_NTASKS
    LAUNCHER_KIND_OPENMPI,  // mpirun (Open MPI): OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
    LAUNCHER_KIND_PMI,  // MPICH/Intel mpiexec, srun --mpi=pmi2: PMI_RANK (or PMIX_RANK) / PMI_SIZE
    LAUNCHER_KIND_TORCHRUN,  // torchrun (and launchers that copy it): RANK / WORLD_SIZE, MASTER_ADDR / MASTER_PORT
    LAUNCHER_KIND_PSLITE,  // a ps-lite (DMLC) tracker: DMLC_ROLE, DMLC_PS_ROOT_URI/_PORT, DMLC_NUM_SERVER/_WORKER
} launcher_kind_t;

// What the launcher says this process is: a rank (every launcher but
// ps-lite), or a ps-lite role whose id the coordinator hands out.
typedef enum launch_env_role {
    LAUNCH_ENV_BY_RANK = 0,  // rank below; the role follows from it (launch_role_of_rank)
    LAUNCH_ENV_SCHEDULER,  // DMLC_ROLE=scheduler: hosts the coordinator, trains nothing
    LAUNCH_ENV_SERVER,  // DMLC_ROLE=server: a shard, id assigned at the rendezvous
    LAUNCH_ENV_WORKER,  // DMLC_ROLE=worker: a worker, id assigned at the rendezvous
} launch_env_role_t;

typedef struct launch_env {
    launcher_kind_t kind;
    launch_env_role_t role;
    size_t rank, size;  // rank < size; 0 and 1 when kind is NONE; under ps-lite rank is 0 (not known yet)
    size_t servers, workers;  // ps-lite: DMLC_NUM_SERVER and DMLC_NUM_WORKER (size is their sum); else 0
    char first_host[256];  // first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST); "" without one
    // The coordinator as the launcher names it: torchrun MASTER_ADDR and
    // MASTER_PORT + 1, ps-lite DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT.
    // coord_host "" / coord_port 0 when the variable is not set.
    char coord_host[256];
    int coord_port;
} launch_env_t;

// Looks a variable up; returns NULL when it is not set. ctx is the caller's.
typedef const char *(*launch_getenv_fn)(const char *name, void *ctx);

// Fills *e from the environment (getenv_fn NULL = the process's own, via getenv).
// When several launchers' variables are present the one that started this very
// process wins, and that is the innermost one; in this order:
//   1. torchrun  (any of RANK, WORLD_SIZE, LOCAL_RANK set) — its agent starts
//      its workers itself, and is the one run under srun/mpirun (`srun torchrun`),
//      whose variables then describe the agent, not this process;
//   2. ps-lite   (any of DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT,
//      DMLC_NUM_SERVER, DMLC_NUM_WORKER set) — its trackers start the processes
//      through mpirun, srun or ssh with these variables added;
//   3. Open MPI, 4. PMI — mpirun or mpiexec inside a SLURM allocation runs its
//      ranks under daemons that srun started, so there SLURM_PROCID numbers
//      the daemons, not the ranks;
//   5. SLURM.
// Under torchrun RANK and WORLD_SIZE are required; MASTER_ADDR/MASTER_PORT are
// checked when set (launch_coordinator_endpoint needs them unless --coordinator
// is given). Under ps-lite all five variables are required. MASTER_PORT + 1 is
// the coordinator's port: torchrun's own store may listen on MASTER_PORT.
// Returns 0 (kind NONE when no launcher is detected), or -1 with a one-line err
// naming the variable and the form expected when one is present but missing
// its partner or malformed (not a number, rank >= size, size 0, a rank without
// a size, an unknown DMLC_ROLE, a port out of range) or the node list cannot
// be parsed. A process that gets -1 must not run: it cannot know its part.
int launch_env_detect(launch_env_t *e, launch_getenv_fn getenv_fn, void *ctx, char *err, size_t err_len);

// "none", "slurm", "openmpi", "pmi", "torchrun" or "pslite".
const char *launcher_kind_name(launcher_kind_t kind);

// The first host of a SLURM node list (hostlist syntax: comma-separated names,
// each with bracketed ranges): "node[01-04,07],gpu3" -> "node01",
// "localhost" -> "localhost", "a-[9-10]" -> "a-9", "r[1-2]-n[3-4]" -> "r1-n3".
// Returns 0, or -1 with err on an empty or malformed list or when out_len is too small.
int slurm_first_host(const char *nodelist, char *out, size_t out_len, char *err, size_t err_len);

// The coordinator's endpoint, "tcp://host:port". An explicit "host:port" (or
// "tcp://host:port") wins; otherwise, under torchrun and ps-lite, the
// launcher's coord_host:coord_port (-1 with an err naming the variable that is
// not set); otherwise the SLURM first host with default_port; otherwise -1 with
// an err telling the user to pass --coordinator host:port.
int launch_coordinator_endpoint(const launch_env_t *e, const char *explicit_host_port, int default_port, char *out,
                                size_t out_len, char *err, size_t err_len);

// A rank's role: the first `servers` ranks serve parameters, the rest train.
// The values are the rendezvous table's role field (rendezvous.h).
typedef enum launch_role {
    LAUNCH_ROLE_SERVER = 0,
    LAUNCH_ROLE_WORKER = 1,
} launch_role_t;

launch_role_t launch_role_of_rank(size_t rank, size_t servers);

// "scheduler", "server" or "worker" for a ps-lite role; "rank" for BY_RANK.
const char *launch_env_role_name(launch_env_role_t role);

#endif
