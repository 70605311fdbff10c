/*
 * Planted misuses of CUDA and NCCL that real CUDA and NCCL refuse (or
 * leave undefined), each beside its correct use, run against the host GPU
 * simulation (tests only; tests/it/gpu_sim.rs compiles and runs it): the
 * simulation must refuse each misuse with the code real CUDA or NCCL gives
 * and allow each correct use. Prints one line per case; exits 0 when every
 * case went as expected.
 */
#include <cuda.h>
#include <nccl.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(const char *what, int got, int want)
{
    const char *verdict = got == want ? (want == 0 ? "allowed as expected" : "refused as expected") : "UNEXPECTED";
    printf("%-70s %s (got %d, want %d)\n", what, verdict, got, want);
    if (got != want)
        failures++;
}

/* A planted misuse that cannot be refused (the host reads memory the
 * stream has not written yet): `stale` says whether the simulation showed
 * it. */
static void caught(const char *what, int stale)
{
    printf("%-70s %s\n", what, stale ? "caught as expected" : "UNEXPECTED (not caught)");
    if (!stale)
        failures++;
}

/* One rank of a two-rank communicator that registers a window of `bytes`
 * (window registration is collective: both ranks must pass one size). */
struct window_rank {
    ncclUniqueId id;
    int rank;
    size_t bytes;
    CUcontext ctx;
    ncclResult_t rc;
};

static void *register_window_as_rank(void *arg)
{
    struct window_rank *w = arg;
    ncclComm_t comm = NULL;
    void *buf = NULL;
    ncclWindow_t win = NULL;
    cuCtxSetCurrent(w->ctx);
    w->rc = ncclMemAlloc(&buf, w->bytes);
    if (w->rc == ncclSuccess)
        w->rc = ncclCommInitRank(&comm, 2, w->id, w->rank);
    if (w->rc == ncclSuccess)
        w->rc = ncclCommWindowRegister(comm, buf, w->bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
    if (comm)
        ncclCommDestroy(comm);
    ncclMemFree(buf);
    return NULL;
}

/* Both ranks' results, each registering `bytes0` and `bytes1`: the worse. */
static ncclResult_t two_rank_windows(CUcontext ctx, size_t bytes0, size_t bytes1)
{
    struct window_rank w[2] = {{.rank = 0, .bytes = bytes0, .ctx = ctx}, {.rank = 1, .bytes = bytes1, .ctx = ctx}};
    if (ncclGetUniqueId(&w[0].id) != ncclSuccess)
        return ncclSystemError;
    w[1].id = w[0].id;
    pthread_t t[2];
    for (int r = 0; r < 2; r++)
        pthread_create(&t[r], NULL, register_window_as_rank, &w[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    if (w[0].rc != w[1].rc)
        return ncclInternalError; /* the ranks disagreed: never expected */
    return w[0].rc;
}

static ncclComm_t one_rank_comm(ncclConfig_t *config, ncclResult_t *rc)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    *rc = ncclGetUniqueId(&id);
    if (*rc == ncclSuccess)
        *rc = ncclCommInitRankConfig(&comm, 1, id, 0, config);
    return comm;
}

/* ncclCommInitRankConfig on one rank with CONFIG of SIZE bytes and the
 * version of NCCL release VERSION, which the simulation then plays,
 * expecting WHAT to end in WANT; the communicator, or NULL. */
static ncclComm_t release_comm(ncclConfig_t *config, size_t size, const char *version, const char *what,
                               ncclResult_t want)
{
    ncclResult_t rc;
    config->size = size;
    config->version = (unsigned int)atoi(version);
    setenv("GPUSIM_NCCL_VERSION", version, 1);
    ncclComm_t comm = one_rank_comm(config, &rc);
    expect(what, rc, want);
    return comm;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    CUdeviceptr a, b, extra;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&a, 64) || cuMemAlloc(&b, 64)) {
        printf("set-up failed\n");
        return 2;
    }

    /* During a capture: no synchronizing the capturing stream, no
     * allocation from the capturing thread; either invalidates it. */
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    expect("cuStreamSynchronize of the capturing stream", cuStreamSynchronize(s),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect("cuStreamEndCapture after it", cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    expect("cuMemAlloc on the capturing thread", cuMemAlloc(&extra, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect("cuStreamEndCapture after it", cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a capture of stream-ordered work only */
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cuMemcpyDtoDAsync(b, a, 64, s);
    CUresult rc = cuStreamEndCapture(s, &g);
    if (rc == CUDA_SUCCESS)
        rc = cuGraphInstantiate(&x, g, 0);
    if (rc == CUDA_SUCCESS)
        rc = cuGraphLaunch(x, s);
    if (rc == CUDA_SUCCESS)
        rc = cuStreamSynchronize(s);
    expect("a capture of a copy, instantiated and replayed", rc, CUDA_SUCCESS);

    /* Events: one recorded in a capture orders the capture only; elapsed
     * time needs timing events. */
    CUevent plain, t0, t1, e0, e1;
    cuEventCreate(&plain, CU_EVENT_DEFAULT);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cuEventRecord(plain, s);
    cuStreamEndCapture(s, &g);
    expect("cuEventQuery of an event recorded in a capture", cuEventQuery(plain), CUDA_ERROR_CAPTURED_EVENT);
    float ms = 0;
    cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING);
    cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING);
    cuEventRecord(e0, s);
    cuEventRecord(e1, s);
    expect("cuEventElapsedTime of events made without timing", cuEventElapsedTime(&ms, e0, e1),
           CUDA_ERROR_INVALID_HANDLE);
    cuEventCreate(&t0, CU_EVENT_DEFAULT);
    cuEventCreate(&t1, CU_EVENT_DEFAULT);
    setenv("GPUSIM_STREAM_LAG_US", "20000", 1);
    cuEventRecord(t0, s);
    cuEventRecord(t1, s);
    /* the stream runs behind the host: the events are not reached yet */
    expect("cuEventElapsedTime of timing events not reached yet", cuEventElapsedTime(&ms, t0, t1),
           CUDA_ERROR_NOT_READY);
    cuEventSynchronize(t1);
    unsetenv("GPUSIM_STREAM_LAG_US");
    expect("cuEventElapsedTime of timing events", cuEventElapsedTime(&ms, t0, t1), CUDA_SUCCESS);

    /* NCCL: send and receive may overlap only in the in-place layout. */
    ncclResult_t nrc;
    ncclComm_t comm = one_rank_comm(NULL, &nrc);
    if (nrc != ncclSuccess) {
        printf("ncclCommInitRankConfig failed: %d\n", nrc);
        return 2;
    }
    char *p = (char *)(uintptr_t)a;
    cudaStream_t stream = (cudaStream_t)s;
    expect("ncclAllReduce, recvbuff 4 bytes past sendbuff", ncclAllReduce(p, p + 4, 4, ncclFloat, ncclSum, comm, stream),
           ncclInvalidArgument);
    expect("ncclAllReduce in place", ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, stream), ncclSuccess);
    expect("ncclAllGather, sendbuff 16 bytes into recvbuff (rank 0)", ncclAllGather(p + 16, p, 8, ncclFloat, comm, stream),
           ncclInvalidArgument);
    expect("ncclAllGather in place (rank 0)", ncclAllGather(p, p, 8, ncclFloat, comm, stream), ncclSuccess);

    /* NCCL 2.27's symmetric windows: memory from ncclMemAlloc only, one
     * window per buffer, released once. */
    ncclWindow_t win = NULL, again = NULL;
    void *sym = NULL;
    expect("ncclCommWindowRegister of cuMemAlloc memory",
           ncclCommWindowRegister(comm, p, 64, &win, NCCL_WIN_COLL_SYMMETRIC), ncclInvalidArgument);
    if (ncclMemAlloc(&sym, 4096) != ncclSuccess) {
        printf("ncclMemAlloc failed\n");
        return 2;
    }
    expect("ncclCommWindowRegister of ncclMemAlloc memory",
           ncclCommWindowRegister(comm, sym, 4096, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
    expect("ncclCommWindowRegister of the same buffer again",
           ncclCommWindowRegister(comm, sym, 4096, &again, NCCL_WIN_COLL_SYMMETRIC), ncclInvalidUsage);
    expect("ncclCommWindowDeregister of the window", ncclCommWindowDeregister(comm, win), ncclSuccess);
    expect("ncclCommWindowDeregister of a window no longer registered", ncclCommWindowDeregister(comm, win),
           ncclInvalidArgument);
    /* what ncclCommWindowRegister returns where NCCL makes no window */
    expect("ncclCommWindowDeregister of a NULL window", ncclCommWindowDeregister(comm, NULL), ncclSuccess);
    ncclMemFree(sym);
    ncclCommDestroy(comm);
    expect("ncclCommWindowRegister on two ranks, 4096 and 4096 bytes", two_rank_windows(ctx, 4096, 4096),
           ncclSuccess);
    expect("ncclCommWindowRegister on two ranks, 4096 and 8192 bytes", two_rank_windows(ctx, 4096, 8192),
           ncclInvalidUsage);

    /* NCCL 2.14-2.16 accept blocking 0 or 1 only; 2.17 added "undefined". */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    /* sizeof(ncclConfig_v21400) */
    comm = release_comm(&config, 24, "21403", "NCCL 2.14.3: ncclCommInitRankConfig, blocking undefined",
                        ncclInvalidArgument);
    config.blocking = 1;
    comm = one_rank_comm(&config, &nrc);
    expect("NCCL 2.14.3: ncclCommInitRankConfig, blocking 1", nrc, ncclSuccess);
    if (comm)
        ncclCommDestroy(comm);
    ncclConfig_t config17 = NCCL_CONFIG_INITIALIZER;
    /* sizeof(ncclConfig_v21700) */
    comm = release_comm(&config17, 40, "21701", "NCCL 2.17.1: ncclCommInitRankConfig, blocking undefined", ncclSuccess);
    if (comm)
        ncclCommDestroy(comm);
    /* maxP2pPeers is checked from the first 2.30 release on */
    ncclConfig_t config30 = NCCL_CONFIG_INITIALIZER;
    config30.maxP2pPeers = 0;
    size_t size30 = (offsetof(ncclConfig_t, maxP2pPeers) + sizeof(int) + 7) & ~(size_t)7;
    comm = release_comm(&config30, size30, "23003", "NCCL 2.30.3: ncclCommInitRankConfig, maxP2pPeers 0",
                        ncclInvalidArgument);
    if (comm)
        ncclCommDestroy(comm);

    /* Asynchronous streams (GPUSIM_STREAM_LAG_US): a copy read back before
     * its stream is synchronized, and an event recorded before the work it
     * should mark, show stale bytes; synchronized, the right ones. */
    setenv("GPUSIM_NCCL_VERSION", "23203", 1);
    setenv("GPUSIM_STREAM_LAG_US", "20000", 1);
    unsigned char host[64], back[64];
    memset(host, 7, sizeof host);
    memset(back, 0, sizeof back);
    cuMemcpyHtoDAsync(b, host, sizeof host, s);
    cuMemcpyDtoHAsync(back, b, sizeof back, s);
    caught("device-to-host copy read before cuStreamSynchronize", back[0] != 7);
    cuStreamSynchronize(s);
    expect("device-to-host copy read after cuStreamSynchronize", back[0] == 7 ? 0 : 1, 0);
    comm = one_rank_comm(NULL, &nrc);
    CUevent mark;
    cuEventCreate(&mark, CU_EVENT_DISABLE_TIMING);
    memset(host, 9, sizeof host);
    cuMemcpyHtoDAsync(a, host, sizeof host, s);
    cuStreamSynchronize(s);
    cuEventRecord(mark, s); /* misplaced: before the work it should mark */
    ncclAllReduce((void *)(uintptr_t)a, (void *)(uintptr_t)b, 16, ncclFloat, ncclSum, comm, stream);
    cuMemcpyDtoHAsync(back, b, sizeof back, s);
    cuEventSynchronize(mark);
    caught("result read after an event recorded before the collective", back[0] != 9);
    cuEventRecord(mark, s);
    cuEventSynchronize(mark);
    expect("result read after an event recorded after it", back[0] == 9 ? 0 : 1, 0);
    unsetenv("GPUSIM_STREAM_LAG_US");
    if (comm)
        ncclCommDestroy(comm);

    printf("%d unexpected\n", failures);
    return failures ? 1 : 0;
}
