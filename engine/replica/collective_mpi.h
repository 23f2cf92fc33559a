#ifndef ASGD_ENGINE_REPLICA_COLLECTIVE_MPI_H
#define ASGD_ENGINE_REPLICA_COLLECTIVE_MPI_H
// --collective mpi: the ring modes' uncompressed sums through MPI_Allreduce,
// for runs that mpirun (Open MPI) starts one rank per worker (asgd launch
// under mpirun; allreduce and local SGD, which have no servers). MPI is one
// per process: initialised (MPI_THREAD_SERIALIZED: a replica's rounds run on
// whichever of its threads closes them, one at a time) on the first open,
// finalised at exit. Built without MPI (ASGD_MPI=OFF, or Open MPI not found
// at configure time) every call refuses. docs/allreduce.md, "MPI".
#include <stddef.h>

// Whether this process can sum through MPI: built with it and started by
// mpirun. Returns 0, or -1 with err naming --collective mpi and what is missing.
int collective_mpi_usable(char *err, size_t err_len);

// Initialises MPI (once per process) for worker `id` of n, which must be MPI
// rank id of n: one rank per worker, no other ranks. Returns 0, or -1 with err.
int collective_mpi_open(size_t n, size_t id, char *err, size_t err_len);

// Sums buf[0..count) over every worker, in place (MPI_Allreduce, MPI_SUM of
// floats; every rank receives the same bits). MPI_Allreduce has no timeout.
// Returns 0, or -1 with err naming the call and MPI's reason.
int collective_mpi_sum(float *buf, size_t count, char *err, size_t err_len);

// This process's replica finished every sum it was to take part in, so its
// exit may finalise MPI (which waits for every rank). A process that exits
// without it (it failed, its peers may still wait in a sum) leaves MPI
// unfinalised, and mpirun ends the job instead of every rank waiting forever.
void collective_mpi_settled(void);

#endif
