#ifndef ASGD_ENGINE_DIST_COLLECTIVE_H
#define ASGD_ENGINE_DIST_COLLECTIVE_H
// Which collective sums a ring mode's exchanges (allreduce, local, hybrid's
// dense part): the ZeroMQ ring (net/ring.h) or, when every worker is on this
// host, the shared-memory segment (net/shm_allreduce.h), or, when asked for
// under mpirun, MPI_Allreduce (collective_mpi.h). docs/allreduce.md,
// "Choosing the collective".
#include <stddef.h>
#include <stdint.h>

#include "net/rendezvous.h"  // defines: rdv_entry_t

typedef enum collective_choice {
    COLLECTIVE_AUTO = 0,  // shared memory when every worker is on this host and nothing is compressed
    COLLECTIVE_SHM = 1,
    COLLECTIVE_RING = 2,
    COLLECTIVE_MPI = 3,   // MPI_Allreduce (collective_mpi.h); never chosen by auto
} collective_choice_t;

struct shm_allreduce;

// "auto", "shm", "ring" or "mpi".
const char *collective_name(collective_choice_t c);

// Whether the workers' ring endpoints (ring[0..n), as they advertised them)
// say they are all on one host: every one ipc:// or loopback (such rings
// work only within one host), or every one tcp:// on the same host name or
// address. Every worker sees the same table, so all decide alike.
int collective_one_host(const rdv_entry_t *ring, size_t n);

// Decides for worker `id` of n and, for shared memory, attaches it to the
// run's segment (named by run_id; calls of up to max_count floats).
// compressed: the run compresses its exchanges, which stay on the ring.
// *shm is NULL when the ring or MPI is chosen; MPI is opened here for the
// process (collective_mpi_open). A forced shm or mpi that cannot be honoured
// (compression; for shm workers on several hosts) or a failed attach or MPI
// start returns -1 with err naming --collective or the segment.
int collective_open(collective_choice_t choice, int compressed, const rdv_entry_t *ring, size_t n, size_t id,
                    uint64_t run_id, size_t max_count, struct shm_allreduce **shm, char *err, size_t err_len);

#endif
