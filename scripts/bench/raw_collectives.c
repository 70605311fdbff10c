/* Minimal MPI timing loops for the nine collectives, the reference that
 * scripts/bench/side-by-side.sh holds collbench against. Each loop makes
 * the same MPI call collbench's mpi backend makes (src/backend/mpi: the
 * out-of-place variants, and with `both` the in-place ones), on page-aligned, separately allocated, touched
 * buffers, float sum, root 0, with collbench's size semantics (docs/bandwidth.md:
 * size_bytes is the larger of one rank's send and receive buffer; per-rank
 * or per-peer counts are that over the rank count, rounded down to a
 * multiple of 16 bytes).
 *
 * Timing, per size: WARMUP operations, then
 *   batched  (collbench's default, nccl-tests' method): a barrier, the host
 *            clock around ITERS operations back to back;
 *   blocking (collbench -z, OSU's method): a barrier before each operation,
 *            the clock around that one operation, summed;
 * time per operation = elapsed / ITERS, averaged over ranks.
 *
 *   mpirun -np N raw_collectives COLLECTIVE MINBYTES MAXBYTES ITERS WARMUP batched|blocking [both]
 * ITERS and WARMUP `osu` take OSU Micro-Benchmarks' defaults for
 * collectives (osu_util.h): 1000 iterations after 200 warm-up ones up to
 * 8 KiB, 100 after 10 above.
 * prints "size_bytes time_us" per size on rank 0 (sizes double from
 * MINBYTES; a size whose per-rank count rounds to 0 is skipped, as
 * collbench skips it). With `both`, every size is timed out-of-place and
 * then in-place, as collbench does, and each line ends with the placement
 * (`out_of_place`, `in_place`): the in-place calls are collbench's
 * (src/backend/mpi/mod.rs, `regions`): MPI_IN_PLACE where MPI has it, the
 * one buffer of MPI_Bcast, MPI_Sendrecv_replace.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum coll { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, GATHER, SCATTER, SENDRECV };
static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                              "alltoall",   "gather",     "scatter",        "sendrecv"};

static int rank, nranks;
static float *sendbuf, *recvbuf;

/* Elements of the count column for a point of `size_bytes`: the whole
 * buffer, or one rank's (one peer's) share of it, rounded down to a
 * multiple of 16 bytes as collbench and nccl-tests do
 * (src/collective/mod.rs, `aligned_count`). */
static long count_of(enum coll c, long size_bytes) {
    long elems = size_bytes / (long)sizeof(float);
    long step = 16 / (long)sizeof(float);
    switch (c) {
    case ALL_GATHER: case REDUCE_SCATTER: case ALLTOALL: case GATHER: case SCATTER:
        return elems / nranks / step * step;
    default:
        return elems;
    }
}

/* size_bytes as collbench reports it for `count`. */
static long size_of(enum coll c, long count) {
    switch (c) {
    case ALL_GATHER: case REDUCE_SCATTER: case ALLTOALL: case GATHER: case SCATTER:
        return count * nranks * (long)sizeof(float);
    default:
        return count * (long)sizeof(float);
    }
}

static void op_in_place(enum coll c, int n) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    float *mine = recvbuf + (size_t)rank * n; /* this rank's block */
    switch (c) {
    case ALL_REDUCE: MPI_Allreduce(MPI_IN_PLACE, recvbuf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALL_GATHER: MPI_Allgather(MPI_IN_PLACE, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: MPI_Reduce_scatter_block(MPI_IN_PLACE, recvbuf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case BROADCAST: MPI_Bcast(recvbuf, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case REDUCE:
        if (rank == 0) MPI_Reduce(MPI_IN_PLACE, recvbuf, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        else MPI_Reduce(recvbuf, NULL, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case ALLTOALL: MPI_Alltoall(MPI_IN_PLACE, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    case GATHER:
        if (rank == 0) MPI_Gather(MPI_IN_PLACE, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        else MPI_Gather(mine, n, MPI_FLOAT, NULL, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case SCATTER:
        if (rank == 0) MPI_Scatter(recvbuf, n, MPI_FLOAT, MPI_IN_PLACE, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        else MPI_Scatter(NULL, n, MPI_FLOAT, mine, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case SENDRECV:
        MPI_Sendrecv_replace(recvbuf, n, MPI_FLOAT, next, 0, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    }
}

static void op(enum coll c, int n) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    switch (c) {
    case ALL_REDUCE: MPI_Allreduce(sendbuf, recvbuf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALL_GATHER: MPI_Allgather(sendbuf, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: MPI_Reduce_scatter_block(sendbuf, recvbuf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    /* collbench's out-of-place broadcast: the root sends from its input,
     * the others receive into their output buffer. */
    case BROADCAST: MPI_Bcast(rank == 0 ? sendbuf : recvbuf, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(sendbuf, recvbuf, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(sendbuf, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(sendbuf, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(sendbuf, n, MPI_FLOAT, recvbuf, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case SENDRECV:
        MPI_Sendrecv(sendbuf, n, MPI_FLOAT, next, 0, recvbuf, n, MPI_FLOAT, prev, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        break;
    }
}

static float *page_aligned(size_t elems) {
    void *p = NULL;
    size_t bytes = (elems ? elems : 1) * sizeof(float);
    if (posix_memalign(&p, 4096, bytes) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    /* Touch every page, as collbench's buffers are: untouched pages all map
     * to the one shared zero page, which reads faster than memory. */
    float *f = p;
    for (size_t i = 0; i < elems; i++) f[i] = 1.0f;
    return f;
}

/* Time per operation of one point in microseconds, averaged over ranks
 * (on rank 0). */
static double time_point(enum coll c, int n, int iters, int warmup, int blocking, int in_place) {
    void (*run)(enum coll, int) = in_place ? op_in_place : op;
    for (int i = 0; i < warmup; i++) run(c, n);
    double elapsed = 0;
    if (blocking) {
        for (int i = 0; i < iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = now();
            run(c, n);
            elapsed += now() - start;
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = now();
        for (int i = 0; i < iters; i++) run(c, n);
        elapsed = now() - start;
    }
    double per_op = elapsed / iters, sum = 0;
    MPI_Reduce(&per_op, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum / nranks * 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int which = -1;
    if (argc == 7 || argc == 8)
        for (int i = 0; i < 9; i++)
            if (strcmp(argv[1], names[i]) == 0) which = i;
    int blocking = which >= 0 && strcmp(argv[6], "blocking") == 0;
    int both = argc == 8 && strcmp(argv[7], "both") == 0;
    if (which < 0 || (!blocking && strcmp(argv[6], "batched") != 0) || (argc == 8 && !both)) {
        if (rank == 0)
            fprintf(stderr, "usage: raw_collectives COLLECTIVE MINBYTES MAXBYTES ITERS WARMUP batched|blocking [both]\n");
        MPI_Finalize();
        return 2;
    }
    enum coll c = which;
    long minbytes = atol(argv[2]), maxbytes = atol(argv[3]);
    int osu = strcmp(argv[4], "osu") == 0;
    int iters = atoi(argv[4]), warmup = atoi(argv[5]);
    /* Both buffers as large as the largest point's larger buffer. */
    size_t maxelems = maxbytes / sizeof(float);
    sendbuf = page_aligned(maxelems);
    recvbuf = page_aligned(maxelems);
    for (long size = minbytes; size <= maxbytes; size *= 2) {
        long n = count_of(c, size);
        if (n == 0) continue;
        if (osu) {
            iters = size <= 8192 ? 1000 : 100;
            warmup = size <= 8192 ? 200 : 10;
        }
        for (int in_place = 0; in_place <= both; in_place++) {
            double us = time_point(c, (int)n, iters, warmup, blocking, in_place);
            if (rank != 0) continue;
            if (both) printf("%ld %.6f %s\n", size_of(c, n), us, in_place ? "in_place" : "out_of_place");
            else printf("%ld %.6f\n", size_of(c, n), us);
        }
    }
    free(sendbuf);
    free(recvbuf);
    MPI_Finalize();
    return 0;
}
