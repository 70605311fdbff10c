/* MPI_Allreduce (float sum) with the send and receive buffers at chosen
 * places, all variants interleaved in one launch: the experiment behind
 * docs/measurement.md ("Buffer placement"). A benchmark, not a test.
 *
 *   mpirun -np 2 offsets MINBYTES MAXBYTES ROUNDS ITERS batched|blocking VARIANT...
 *
 * A VARIANT is
 *   S:R   send at byte S past a page boundary, receive at byte R past
 *         another one (separate page-aligned allocations): 0:0 is OSU's
 *         and collbench's layout, 0:16 a receive buffer 16 bytes further
 *         into its page than the send buffer;
 *   aS    collbench's old layout below glibc's mmap threshold: one heap
 *         block, send at byte S past a page boundary, receive right after
 *         it (send + size + 16, the next malloc chunk).
 * Per size, ROUNDS rounds run every variant once each (starting with a
 * different one every round), each timing ITERS operations after 3
 * warm-up ones: batched (barrier, clock around ITERS operations) or
 * blocking (barrier and clock around each, summed). A round's time is the
 * slowest rank's time per operation; the table gives each variant's median
 * over rounds, in microseconds. Every buffer is touched before timing.
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

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *touched_pages(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(p, 1, bytes);
    return p;
}

/* The buffers of `variant` for a point of `size` bytes; 0 on a bad one. */
static int place(const char *variant, long size, char *a, char *b, char *heap, float **s, float **r) {
    long x, y;
    if (variant[0] == 'a' && sscanf(variant + 1, "%ld", &x) == 1 && x >= 0 && x < 4096) {
        *s = (float *)(heap + x);
        *r = (float *)(heap + x + size + 16);
        return 1;
    }
    if (sscanf(variant, "%ld:%ld", &x, &y) == 2 && x >= 0 && y >= 0 && x < 4096 && y < 4096) {
        *s = (float *)(a + x);
        *r = (float *)(b + y);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int blocking = argc > 6 && strcmp(argv[5], "blocking") == 0;
    if (argc < 7 || (!blocking && strcmp(argv[5], "batched") != 0)) {
        if (rank == 0)
            fprintf(stderr, "usage: offsets MINBYTES MAXBYTES ROUNDS ITERS batched|blocking VARIANT...\n");
        MPI_Finalize();
        return 2;
    }
    long minbytes = atol(argv[1]), maxbytes = atol(argv[2]);
    int rounds = atoi(argv[3]), iters = atoi(argv[4]), nv = argc - 6;
    char **variants = argv + 6;
    char *a = touched_pages(maxbytes + 8192), *b = touched_pages(maxbytes + 8192);
    char *heap = touched_pages(2 * maxbytes + 8192);
    double *times = malloc(sizeof(double) * rounds * nv);
    if (rounds < 1 || iters < 1 || !times) MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0) {
        printf("%10s", "size (B)");
        for (int v = 0; v < nv; v++) printf(" %9s", variants[v]);
        printf("   (median over %d rounds, us per operation, %s)\n", rounds, argv[5]);
    }
    for (long size = minbytes; size <= maxbytes; size *= 2) {
        int count = (int)(size / sizeof(float));
        for (int k = 0; k < rounds; k++) {
            for (int i = 0; i < nv; i++) {
                int v = (i + k) % nv;
                float *s = NULL, *r = NULL;
                if (!place(variants[v], size, a, b, heap, &s, &r)) {
                    if (rank == 0) fprintf(stderr, "offsets: bad variant %s\n", variants[v]);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
                for (int w = 0; w < 3; w++) MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                double elapsed = 0;
                if (blocking) {
                    for (int it = 0; it < iters; it++) {
                        MPI_Barrier(MPI_COMM_WORLD);
                        double start = now();
                        MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                        elapsed += now() - start;
                    }
                } else {
                    MPI_Barrier(MPI_COMM_WORLD);
                    double start = now();
                    for (int it = 0; it < iters; it++) MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    elapsed = now() - start;
                }
                double per_op = elapsed / iters, slowest;
                MPI_Allreduce(&per_op, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                times[v * rounds + k] = slowest;
            }
        }
        if (rank == 0) {
            printf("%10ld", size);
            for (int v = 0; v < nv; v++) {
                qsort(times + v * rounds, rounds, sizeof(double), by_value);
                printf(" %9.2f", times[v * rounds + rounds / 2] * 1e6);
            }
            printf("\n");
        }
    }
    free(times);
    free(a);
    free(b);
    free(heap);
    MPI_Finalize();
    return 0;
}
