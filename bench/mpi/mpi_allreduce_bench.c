// OpenMPI reference for bench_allreduce: MPI_Allreduce (in place, float sum)
// timed the same way as asgd's ring, so both run on the same machine in the
// same bench run. Rank 0 prints one line per size:
//   mpi_allreduce ranks=R bytes=B seconds=T check=ok|BAD
// where T is the slowest rank's median time per call over the timed iterations.
//
//   mpirun -n R mpi_allreduce_bench WARMUP ITERS BYTES [BYTES...]
#include "../bench_support.h"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: mpi_allreduce_bench WARMUP ITERS BYTES [BYTES...]\n");
        MPI_Finalize();
        return 2;
    }
    int warmup = atoi(argv[1]), iters = atoi(argv[2]);
    if (iters < 1) iters = 1;
    for (int a = 3; a < argc; a++) {
        size_t bytes = strtoull(argv[a], NULL, 10), count = bytes / sizeof(float);
        if (count > (size_t)0x7fffffff) {
            if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: %zu floats exceed an MPI count\n", count);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        float *x = malloc(count * sizeof *x);
        double *times = malloc((size_t)iters * sizeof *times);
        if (!x || !times) MPI_Abort(MPI_COMM_WORLD, 1);
        // Zeros stay zeros however often they are summed: no overflow, no
        // denormals, whatever the number of iterations (the ring's bench does the same).
        memset(x, 0, count * sizeof *x);
        for (int i = 0; i < warmup; i++) MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < iters; i++) {
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            times[i] = MPI_Wtime() - t0;
        }
        double mine = bench_median(times, iters), slowest = 0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        // One checked call: rank r contributes r + 1 everywhere.
        for (size_t i = 0; i < count; i++) x[i] = (float)(rank + 1);
        MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        int ok = 1;
        float want = (float)size * (float)(size + 1) / 2.0f;
        for (size_t i = 0; i < count; i++) ok &= x[i] == want;
        int all_ok = 0;
        MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("mpi_allreduce ranks=%d bytes=%zu seconds=%.9f check=%s\n", size, bytes, slowest,
                   all_ok ? "ok" : "BAD");
        fflush(stdout);
        free(x);
        free(times);
    }
    MPI_Finalize();
    return 0;
}
