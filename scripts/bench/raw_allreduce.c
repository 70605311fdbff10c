/* A minimal MPI_Allreduce timing loop, the reference for collbench's own
 * overhead (scripts/bench/overhead.sh). It times exactly as collbench does
 * by default: per size, warm-up operations, a barrier, the host clock
 * around `iters` operations back to back, time per operation = elapsed /
 * iters, averaged over ranks. Float sum, fixed buffers, no checking.
 *
 *   mpirun -np 2 raw_allreduce MINBYTES MAXBYTES ITERS WARMUP
 * prints "size_bytes time_us" per size on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: raw_allreduce MINBYTES MAXBYTES ITERS WARMUP\n");
        MPI_Finalize();
        return 2;
    }
    long minbytes = atol(argv[1]), maxbytes = atol(argv[2]);
    int iters = atoi(argv[3]), warmup = atoi(argv[4]);
    size_t maxcount = maxbytes / sizeof(float);
    float *send = calloc(maxcount ? maxcount : 1, sizeof(float));
    float *recv = calloc(maxcount ? maxcount : 1, sizeof(float));
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
    /* Touch every page, as collbench's buffers are: untouched calloc pages
     * all map to the one shared zero page, which reads faster than memory. */
    for (size_t i = 0; i < maxcount; i++) send[i] = recv[i] = 1.0f;
    for (long size = minbytes; size <= maxbytes; size *= 2) {
        int count = (int)(size / sizeof(float));
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = now();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double per_op = (now() - start) / iters, sum = 0;
        MPI_Reduce(&per_op, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("%ld %.6f\n", size, sum / nranks * 1e6);
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
