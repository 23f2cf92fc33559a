// --collective mpi (collective_mpi.h): MPI_Allreduce over the worker ranks,
// or, built without MPI, refusals.
#include "engine/replica/collective_mpi.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/replica/collective_impl.h"

#ifdef ASGD_HAVE_MPI
#include <limits.h>
#include <mpi.h>

// One per process, as MPI is: set by the open (on the thread that meets the
// others, before the replica's threads start), read by the sums.
static MPI_Comm workers = MPI_COMM_NULL;  // the worker ranks, errors returned
static int we_initialised, settled;

// MPI's reason for code, after "what failed: ".
static int mpi_fail(int code, const char *what, char *err, size_t err_len) {
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(code, why, &len) != MPI_SUCCESS) snprintf(why, sizeof why, "MPI error %d", code);
    snprintf(err, err_len, "--collective mpi: %s failed: %s", what, why);
    return -1;
}

// At exit: finalise only after every sum (collective_mpi_settled); MPI_Finalize
// waits for every rank, which a failed one's peers stuck in a sum never reach.
static void finalise_at_exit(void) {
    int done = 0;
    if (!we_initialised || !settled || MPI_Finalized(&done) != MPI_SUCCESS || done) return;
    if (workers != MPI_COMM_NULL) MPI_Comm_free(&workers);
    MPI_Finalize();
}

int collective_mpi_usable(char *err, size_t err_len) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return 0;
    snprintf(err, err_len,
             "--collective mpi: this process was not started by mpirun (OMPI_COMM_WORLD_SIZE is not "
             "set); run `mpirun -np N asgd launch ...`, one rank per worker");
    return -1;
}

int collective_mpi_open(size_t n, size_t id, char *err, size_t err_len) {
    if (collective_mpi_usable(err, err_len) != 0) return -1;
    if (workers != MPI_COMM_NULL) {
        snprintf(err, err_len, "--collective mpi: MPI is already open in this process (one worker per rank)");
        return -1;
    }
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (down) {
        snprintf(err, err_len, "--collective mpi: MPI was finalised in this process");
        return -1;
    }
    if (!up) {
        int provided = MPI_THREAD_SINGLE;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread", err, err_len);
        we_initialised = 1;
        atexit(finalise_at_exit);
        if (provided < MPI_THREAD_SERIALIZED) {
            snprintf(err, err_len,
                     "--collective mpi: this MPI offers thread level %d, below MPI_THREAD_SERIALIZED "
                     "(the replica's rounds run on its training threads)",
                     provided);
            return -1;
        }
    }
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((size_t)size != n || (size_t)rank != id) {
        snprintf(err, err_len,
                 "--collective mpi: this is worker %zu of %zu, but MPI rank %d of %d; every rank "
                 "must be one worker, in order (mpirun -np %zu asgd launch ..., no --servers)",
                 id, n, rank, size, n);
        return -1;
    }
    MPI_Comm comm;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_dup of the worker ranks", err, err_len);
    if ((rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        MPI_Comm_free(&comm);
        return mpi_fail(rc, "MPI_Comm_set_errhandler", err, err_len);
    }
    workers = comm;
    return 0;
}

int collective_mpi_sum(float *buf, size_t count, char *err, size_t err_len) {
    if (workers == MPI_COMM_NULL) {
        snprintf(err, err_len, "--collective mpi: MPI is not open in this process");
        return -1;
    }
    for (size_t at = 0; at < count;) {  // MPI counts are ints
        size_t k = count - at < (size_t)INT_MAX ? count - at : (size_t)INT_MAX;
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)k, MPI_FLOAT, MPI_SUM, workers);
        if (rc != MPI_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "MPI_Allreduce of %zu floats", count);
            return mpi_fail(rc, what, err, err_len);
        }
        at += k;
    }
    return 0;
}

void collective_mpi_settled(void) { settled = 1; }

#else  // built without MPI

static int without_mpi(char *err, size_t err_len) {
    snprintf(err, err_len,
             "--collective mpi: asgd was built without MPI (configure it with Open MPI installed, "
             "libopenmpi-dev and openmpi-bin, and -DASGD_MPI=AUTO or ON; docs/allreduce.md)");
    return -1;
}

int collective_mpi_usable(char *err, size_t err_len) { return without_mpi(err, err_len); }

int collective_mpi_open(size_t n, size_t id, char *err, size_t err_len) {
    (void)n;
    (void)id;
    return without_mpi(err, err_len);
}

int collective_mpi_sum(float *buf, size_t count, char *err, size_t err_len) {
    (void)buf;
    (void)count;
    return without_mpi(err, err_len);
}

void collective_mpi_settled(void) {}

#endif

// ---- behind the collective table (collective_impl.h) ----

static int mpi_sum(void *impl, float *buf, size_t n, int timeout_ms, char *err, size_t err_len) {
    (void)impl;
    (void)timeout_ms;  // MPI_Allreduce has none
    return collective_mpi_sum(buf, n, err, err_len);
}

static void mpi_settled(void *impl) {
    (void)impl;
    collective_mpi_settled();
}

const collective_ops_t collective_mpi_ops = {
    .kind = COLLECTIVE_MPI,
    .sum = mpi_sum,
    .settled = mpi_settled,
};
