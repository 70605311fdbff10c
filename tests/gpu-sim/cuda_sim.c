/*
 * libcuda.so.1 of the host GPU simulation: the CUDA driver calls that
 * collbench and cudarc make, on host memory, for tests only. Compiled
 * against the real cuda.h (nvidia-cuda-runtime-cu12), so every definition
 * here has the driver's own prototype.
 *
 * What it models:
 *   - devices: GPUSIM_DEVICES of them (default 1), each with a name that
 *     says it is simulated, a memory size, a PCI id and a UUID;
 *   - primary contexts, the calling thread's current context;
 *   - streams that run their work in order, asynchronously: each stream's
 *     worker thread runs it after the call that enqueued it returned (the
 *     host must synchronize before it reads what the work writes; events
 *     complete when their stream reaches them; GPUSIM_STREAM_LAG_US keeps
 *     the stream behind), except while the stream captures: then the work
 *     is recorded, and cuGraphLaunch queues it again at each replay;
 *   - "device" memory: host memory from the C allocator, with an allocation
 *     table, so that libnccl.so.2 can check that every pointer range it is
 *     handed lies inside one live allocation (gpusim_check_range);
 *   - events timed with the host's monotonic clock;
 *   - cuMemGetInfo: the device size less what is allocated on it;
 *   - what real CUDA refuses and a correct program never does, refused the
 *     same way: during a stream capture, synchronizing or querying the
 *     capturing stream (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), and the
 *     "potentially unsafe" calls (cuMemAlloc, cuMemFree, cuMemsetD8,
 *     cuCtxSynchronize) from a thread whose capture is not relaxed, or from
 *     any thread during another thread's global-mode capture
 *     (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); either invalidates the
 *     capture, whose cuStreamEndCapture then fails with
 *     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; ending a capture from another
 *     thread (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD); querying,
 *     synchronizing or timing an event last recorded in a capture
 *     (CUDA_ERROR_CAPTURED_EVENT: such a record only orders the capture,
 *     no replay records it); elapsed time between events made with
 *     CU_EVENT_DISABLE_TIMING (CUDA_ERROR_INVALID_HANDLE).
 *
 * Environment (read once, at the first call):
 *   GPUSIM_DEVICES=N          devices of the machine (default 1; 0 = none)
 *   CUDA_VISIBLE_DEVICES=a,b  the devices this process sees, in that order
 *                             (per process, as the driver applies it)
 *   GPUSIM_MEM_BYTES=B        memory of each device (default 80 GiB); a
 *                             small value exercises the lowered --maxbytes
 *                             path (the fault "shrink device memory")
 *   GPUSIM_DRIVER_VERSION=V   cuDriverGetVersion (default 12090)
 *   GPUSIM_STREAM_LAG_US=N    every stream item starts at least N us after
 *                             it was queued and after the one before
 *   GPUSIM_CUDA_HIDE=a,b      driver entry points that resolve to NULL
 *                             (only those listed in HIDEABLE below), to
 *                             test the missing-symbol checks
 *
 * Private entry points for libnccl.so.2 (prefix gpusim_) are at the end.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpusim.h"

#define MAX_DEVICES 64

struct CUctx_st {
    int device;
    int retained;
};

struct node {
    void (*fn)(void *);
    void *arg;
    void (*release)(void *);
};

/* One piece of a stream's work, run by its worker in order: a function
 * (an NCCL group, a copy, a graph node), an event's record, or a wait for
 * another stream's event. */
struct item {
    struct item *next;
    void (*fn)(void *);
    void *arg;
    void (*release)(void *);
    struct CUevent_st *record; /* record this event when reached */
    struct CUstream_st *wait;  /* wait until this stream ... */
    uint64_t wait_seq;         /* ... has completed this many items */
    int replay;                /* a node of a graph being replayed */
    int64_t not_before_ns;     /* GPUSIM_STREAM_LAG_US */
};

struct CUstream_st {
    struct CUctx_st *ctx;
    int capturing;
    struct CUgraph_st *capture;
    CUstreamCaptureMode mode;
    pthread_t owner;  /* the thread that began the capture */
    int invalidated;  /* an illegal call during the capture */
    /* Asynchronous execution (under `sched`): items queued and run by the
     * stream's own worker thread, counted as they are enqueued and as they
     * complete; a hung item never completes, nor anything after it. */
    struct item *head, *tail;
    uint64_t enqueued, completed;
    int hung;
    int has_worker, stopping;
    pthread_t worker;
};

struct CUgraph_st {
    int refs;
    size_t len, cap;
    struct node *nodes;
};

struct CUgraphExec_st {
    struct CUgraph_st *graph;
};

struct CUevent_st {
    struct CUctx_st *ctx;
    unsigned int flags;
    int64_t time_ns;
    int recorded; /* the stream has reached its last record */
    int captured; /* last recorded in a capturing stream */
    /* the last record: on `stream`, complete once it has completed `seq`
     * items (under `sched`); `refs`: the handle and each queued record */
    struct CUstream_st *stream;
    uint64_t seq;
    int refs;
};

struct alloc {
    uintptr_t base;
    size_t size;
    int device;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ndevices = 1;             /* visible to this process */
static int visible[MAX_DEVICES];     /* ordinal -> physical device */
static size_t mem_bytes = (size_t)80 << 30;
static int driver_version = 12090;
static struct CUctx_st contexts[MAX_DEVICES];
static __thread struct CUctx_st *current;

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;
static size_t nallocs, cap_allocs;
static size_t used_bytes[MAX_DEVICES];

static void setup(void)
{
    const char *v = getenv("GPUSIM_DEVICES");
    if (v && *v)
        ndevices = atoi(v);
    if (ndevices < 0)
        ndevices = 0;
    if (ndevices > MAX_DEVICES)
        ndevices = MAX_DEVICES;
    for (int i = 0; i < MAX_DEVICES; i++)
        visible[i] = i;
    /* CUDA_VISIBLE_DEVICES: the listed physical devices become ordinals
     * 0, 1, ... in that order; the list ends at the first entry that is not
     * a device (out of range, repeated, or not a number), as the driver
     * reads it; an empty value hides every device. */
    v = getenv("CUDA_VISIBLE_DEVICES");
    if (v) {
        int physical = ndevices, n = 0;
        const char *p = v;
        while (*p && n < MAX_DEVICES) {
            char *end;
            long d = strtol(p, &end, 10);
            int repeated = 0;
            for (int i = 0; i < n; i++)
                repeated |= visible[i] == d;
            if (end == p || d < 0 || d >= physical || repeated || (*end && *end != ','))
                break;
            visible[n++] = (int)d;
            p = *end ? end + 1 : end;
        }
        ndevices = n;
    }
    v = getenv("GPUSIM_MEM_BYTES");
    if (v && *v)
        mem_bytes = (size_t)strtoull(v, NULL, 10);
    v = getenv("GPUSIM_DRIVER_VERSION");
    if (v && *v)
        driver_version = atoi(v);
    for (int i = 0; i < MAX_DEVICES; i++)
        contexts[i].device = i;
}

static void init(void) { pthread_once(&once, setup); }

int64_t gpusim_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}


/* ------------------------------------------------------------------ */
/* Stream capture: who captures, and what that forbids */

#define MAX_CAPTURES 256
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *captures[MAX_CAPTURES]; /* streams capturing now */
static __thread int replaying;                      /* inside cuGraphLaunch */

/* Whether a "potentially unsafe" call made now on this thread conflicts
 * with a capture (this thread's, unless relaxed; any thread's in global
 * mode); if so, those captures are invalidated, as CUDA does. */
static int unsafe_during_capture(void)
{
    int conflict = 0;
    pthread_mutex_lock(&capture_lock);
    for (int i = 0; i < MAX_CAPTURES; i++) {
        struct CUstream_st *s = captures[i];
        if (!s)
            continue;
        int mine = pthread_equal(s->owner, pthread_self());
        if ((mine && s->mode != CU_STREAM_CAPTURE_MODE_RELAXED) || s->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
            s->invalidated = 1;
            conflict = 1;
        }
    }
    pthread_mutex_unlock(&capture_lock);
    return conflict;
}

static void capture_list(struct CUstream_st *s, int add)
{
    pthread_mutex_lock(&capture_lock);
    for (int i = 0; i < MAX_CAPTURES; i++) {
        if (add && !captures[i]) {
            captures[i] = s;
            break;
        }
        if (!add && captures[i] == s)
            captures[i] = NULL;
    }
    pthread_mutex_unlock(&capture_lock);
}

/* Synchronizing or querying a capturing stream: refused, and the capture
 * is invalidated. */
static int capturing_refused(struct CUstream_st *s)
{
    if (!s || !s->capturing)
        return 0;
    s->invalidated = 1;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Initialisation, version, errors */

CUresult cuInit(unsigned int flags)
{
    (void)flags;
    init();
    return ndevices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuDriverGetVersion(int *version)
{
    init();
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = driver_version;
    return CUDA_SUCCESS;
}

static const char *error_name(CUresult e)
{
    switch (e) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: return "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD";
    case CUDA_ERROR_CAPTURED_EVENT: return "CUDA_ERROR_CAPTURED_EVENT";
    case CUDA_ERROR_ILLEGAL_STATE: return "CUDA_ERROR_ILLEGAL_STATE";
    default: return NULL;
    }
}

CUresult cuGetErrorName(CUresult error, const char **str)
{
    const char *n = error_name(error);
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = n;
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
    const char *s = NULL;
    switch (error) {
    case CUDA_SUCCESS: s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: s = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: s = "out of memory (simulated device)"; break;
    case CUDA_ERROR_NOT_INITIALIZED: s = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: s = "no CUDA-capable device is detected (GPUSIM_DEVICES=0)"; break;
    case CUDA_ERROR_INVALID_DEVICE: s = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: s = "invalid device context"; break;
    case CUDA_ERROR_INVALID_HANDLE: s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_READY: s = "device not ready"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: s = "operation failed due to a previous error during capture"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: s = "operation not permitted when stream is capturing"; break;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: s = "attempt to terminate a thread-local capture sequence from another thread"; break;
    case CUDA_ERROR_CAPTURED_EVENT: s = "operation not permitted on an event last recorded in a capturing stream"; break;
    case CUDA_ERROR_ILLEGAL_STATE: s = "the operation cannot be performed in the present state"; break;
    default: break;
    }
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = s;
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------------------ */
/* Devices */

CUresult cuDeviceGetCount(int *count)
{
    init();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = ndevices;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    init();
    if (!device || ordinal < 0 || ordinal >= ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

/* What the device queries share: the simulation started, a place for the
 * answer and a device it has. */
static CUresult device_arg(const void *answer, CUdevice dev)
{
    init();
    if (!answer)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    init();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "GPUSIM simulated GPU %d (host memory, not a measurement)", visible[dev]);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = device_arg(bytes, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    *bytes = mem_bytes;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = device_arg(pi, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x10 + visible[dev]; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    /* cudarc asks this to choose between cuMemAlloc and the stream-ordered
     * pool; the simulation has no pool. */
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 0; break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = device_arg(uuid, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    memcpy(uuid->bytes, "GPUSIM", 6);
    uuid->bytes[15] = (char)visible[dev];
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Contexts */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = device_arg(pctx, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    __atomic_add_fetch(&contexts[dev].retained, 1, __ATOMIC_SEQ_CST);
    *pctx = &contexts[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    init();
    if (dev < 0 || dev >= ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    __atomic_sub_fetch(&contexts[dev].retained, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    init();
    current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    init();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = current;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    init();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = current->device;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Asynchronous streams: each stream's work runs on a worker thread of its
 * own, in order, after the call that enqueued it has returned, as on a
 * GPU: the host must synchronize (a stream, an event) before it reads what
 * the work writes, and an event recorded before the work it should follow
 * completes before that work does. GPUSIM_STREAM_LAG_US=N makes each item
 * start at least N microseconds after it was enqueued and after the item
 * before it finished (a slow GPU), so that a missing synchronisation fails
 * every time rather than sometimes. */

static pthread_mutex_t sched = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;
static __thread struct CUstream_st *running_on; /* the worker's stream */

static int64_t lag_ns(void)
{
    const char *v = getenv("GPUSIM_STREAM_LAG_US");
    return v && *v ? (int64_t)strtoll(v, NULL, 10) * 1000 : 0;
}

static void event_unref_locked(struct CUevent_st *e)
{
    if (--e->refs == 0)
        free(e);
}

static void *worker_main(void *arg)
{
    struct CUstream_st *s = arg;
    current = s->ctx;
    running_on = s;
    int64_t last_done = 0;
    pthread_mutex_lock(&sched);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&progress, &sched);
        if (!s->head)
            break;
        struct item *it = s->head;
        /* a wait for another stream's event */
        while (it->wait && it->wait->completed < it->wait_seq)
            pthread_cond_wait(&progress, &sched);
        pthread_mutex_unlock(&sched);
        int64_t lag = lag_ns(), start = it->not_before_ns;
        if (lag > 0 && last_done + lag > start)
            start = last_done + lag;
        int64_t late = start - gpusim_now_ns();
        if (late > 0) {
            struct timespec t = {late / 1000000000, late % 1000000000};
            nanosleep(&t, NULL);
        }
        if (it->fn && !s->hung) {
            replaying = it->replay;
            it->fn(it->arg);
            replaying = 0;
        }
        if (it->release)
            it->release(it->arg);
        last_done = gpusim_now_ns();
        pthread_mutex_lock(&sched);
        if (s->hung) {
            /* never completes: whoever waits for it waits until the process
             * ends (the watchdog's case); nothing after it runs */
            while (!s->stopping)
                pthread_cond_wait(&progress, &sched);
            break;
        }
        if (it->record) {
            /* only the event's last record stamps it */
            if (it->record->stream == s && it->record->seq == s->completed + 1) {
                it->record->time_ns = gpusim_now_ns();
                it->record->recorded = 1;
            }
            event_unref_locked(it->record);
        }
        s->head = it->next;
        if (!s->head)
            s->tail = NULL;
        free(it);
        s->completed++;
        pthread_cond_broadcast(&progress);
    }
    pthread_mutex_unlock(&sched);
    return NULL;
}

/* Queues `it` on `s` (under `sched`), starting the worker on first use. */
static int push_locked(struct CUstream_st *s, struct item *it)
{
    if (!s->has_worker) {
        if (pthread_create(&s->worker, NULL, worker_main, s) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        s->has_worker = 1;
    }
    it->not_before_ns = gpusim_now_ns() + lag_ns();
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->enqueued++;
    pthread_cond_broadcast(&progress);
    return CUDA_SUCCESS;
}

static int push(struct CUstream_st *s, struct item proto)
{
    struct item *it = malloc(sizeof *it);
    if (!it) {
        if (proto.release)
            proto.release(proto.arg);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *it = proto;
    it->next = NULL;
    pthread_mutex_lock(&sched);
    int rc = push_locked(s, it);
    pthread_mutex_unlock(&sched);
    if (rc != CUDA_SUCCESS) {
        if (it->release)
            it->release(it->arg);
        free(it);
    }
    return rc;
}

/* Waits until `s` has completed what was enqueued so far (forever, on a
 * hung stream). */
static void drain(struct CUstream_st *s)
{
    pthread_mutex_lock(&sched);
    uint64_t target = s->enqueued;
    while (s->completed < target)
        pthread_cond_wait(&progress, &sched);
    pthread_mutex_unlock(&sched);
}

/* Every stream of the process, for cuCtxSynchronize and cuMemFree. */
#define MAX_STREAMS 1024
static struct CUstream_st *streams[MAX_STREAMS];

static void stream_list(struct CUstream_st *s, int add)
{
    pthread_mutex_lock(&sched);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (add && !streams[i]) {
            streams[i] = s;
            break;
        }
        if (!add && streams[i] == s)
            streams[i] = NULL;
    }
    pthread_mutex_unlock(&sched);
}

/* Waits for every stream of `ctx` (every stream: NULL) that is not hung,
 * as the driver's synchronous calls do (cuCtxSynchronize, cuMemFree). */
static void drain_all(struct CUctx_st *ctx)
{
    pthread_mutex_lock(&sched);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < MAX_STREAMS && !busy; i++) {
            struct CUstream_st *t = streams[i];
            busy = t && t != running_on && (!ctx || t->ctx == ctx) && !t->hung && t->completed < t->enqueued;
        }
        if (!busy)
            break;
        pthread_cond_wait(&progress, &sched);
    }
    pthread_mutex_unlock(&sched);
}

void gpusim_drain_device(int dev)
{
    init();
    if (dev >= 0 && dev < ndevices)
        drain_all(&contexts[dev]);
}

int gpusim_device_busy(int dev)
{
    int busy = 0;
    pthread_mutex_lock(&sched);
    for (int i = 0; i < MAX_STREAMS && !busy; i++) {
        struct CUstream_st *t = streams[i];
        busy = t && t->ctx == &contexts[dev] && t->completed < t->enqueued;
    }
    pthread_mutex_unlock(&sched);
    return busy;
}

CUresult cuCtxSynchronize(void)
{
    init();
    if (unsafe_during_capture())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    drain_all(current);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Streams, capture and graphs */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    (void)flags;
    init();
    if (!phStream)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = current;
    stream_list(s, 1);
    *phStream = s;
    return CUDA_SUCCESS;
}

static void graph_release(struct CUgraph_st *g)
{
    if (!g || --g->refs > 0)
        return;
    for (size_t i = 0; i < g->len; i++)
        if (g->nodes[i].release)
            g->nodes[i].release(g->nodes[i].arg);
    free(g->nodes);
    free(g);
}

/* The stream's work completes first (the driver releases a stream's
 * resources once its work is done); a hung stream's worker is left
 * behind. */
CUresult cuStreamDestroy_v2(CUstream s)
{
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->capturing)
        capture_list(s, 0);
    stream_list(s, 0);
    pthread_mutex_lock(&sched);
    int hung = s->hung;
    pthread_mutex_unlock(&sched);
    if (hung)
        return CUDA_SUCCESS;
    drain(s);
    pthread_mutex_lock(&sched);
    s->stopping = 1;
    pthread_cond_broadcast(&progress);
    pthread_mutex_unlock(&sched);
    if (s->has_worker)
        pthread_join(s->worker, NULL);
    graph_release(s->capture);
    free(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
    if (capturing_refused(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    drain(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream s)
{
    if (capturing_refused(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sched);
    int done = s->completed == s->enqueued;
    pthread_mutex_unlock(&sched);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* Work enqueued on `s` after this waits until the event's last record has
 * been reached (a record on a hung stream never is: the waiter hangs too).
 * In a capture the wait only orders the graph. */
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    (void)flags;
    if (!s || !e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->capturing || !e->stream)
        return CUDA_SUCCESS;
    return (CUresult)push(s, (struct item){.wait = e->stream, .wait_seq = e->seq});
}

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->refs = 1;
    s->capture = g;
    s->mode = mode;
    s->owner = pthread_self();
    s->invalidated = 0;
    s->capturing = 1;
    capture_list(s, 1);
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph *phGraph)
{
    if (!s || !phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (s->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->owner, pthread_self()))
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    capture_list(s, 0);
    s->capturing = 0;
    struct CUgraph_st *g = s->capture;
    s->capture = NULL;
    if (s->invalidated) {
        s->invalidated = 0;
        graph_release(g);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = g;
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    if (!s || !status)
        return CUDA_ERROR_INVALID_VALUE;
    *status = s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph g, unsigned long long flags)
{
    (void)flags;
    if (!phGraphExec || !g)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sched);
    g->refs++;
    pthread_mutex_unlock(&sched);
    x->graph = g;
    *phGraphExec = x;
    return CUDA_SUCCESS;
}

CUresult cuGraphUpload(CUgraphExec x, CUstream s)
{
    return x && s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static void graph_release_item(void *g)
{
    pthread_mutex_lock(&sched);
    graph_release(g);
    pthread_mutex_unlock(&sched);
}

/* The graph's nodes go on the stream as its work, marked as a replay; the
 * graph is held until the last has run (an executable graph destroyed
 * while in flight is freed on completion, as the driver does). */
CUresult cuGraphLaunch(CUgraphExec x, CUstream s)
{
    if (!x || !s)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUgraph_st *g = x->graph;
    pthread_mutex_lock(&sched);
    g->refs++;
    pthread_mutex_unlock(&sched);
    for (size_t i = 0; i < g->len; i++) {
        int rc = push(s, (struct item){.fn = g->nodes[i].fn, .arg = g->nodes[i].arg, .replay = 1});
        if (rc != CUDA_SUCCESS) {
            graph_release_item(g);
            return (CUresult)rc;
        }
    }
    return (CUresult)push(s, (struct item){.arg = g, .release = graph_release_item});
}

int gpusim_replaying(void) { return replaying; }

CUresult cuGraphExecDestroy(CUgraphExec x)
{
    if (!x)
        return CUDA_ERROR_INVALID_HANDLE;
    graph_release_item(x->graph);
    free(x);
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph g)
{
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    graph_release_item(g);
    return CUDA_SUCCESS;
}

/* Runs `fn(arg)` in stream order, on the stream's worker: after the call
 * returns, or at each replay of the graph being captured. `release(arg)`
 * is called once the work can never run again. */
int gpusim_enqueue(CUstream s, void (*fn)(void *), void *arg, void (*release)(void *))
{
    if (!s) {
        if (release)
            release(arg);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (s->capturing) {
        struct CUgraph_st *g = s->capture;
        if (g->len == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 16;
            struct node *n = realloc(g->nodes, cap * sizeof *n);
            if (!n) {
                if (release)
                    release(arg);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            g->nodes = n;
            g->cap = cap;
        }
        g->nodes[g->len++] = (struct node){fn, arg, release};
        return CUDA_SUCCESS;
    }
    return push(s, (struct item){.fn = fn, .arg = arg, .release = release});
}

int gpusim_capturing(CUstream s) { return s && s->capturing; }

/* Called by the work running on `s`'s worker: this item never completes. */
void gpusim_hang(CUstream s)
{
    if (!s)
        return;
    pthread_mutex_lock(&sched);
    s->hung = 1;
    pthread_mutex_unlock(&sched);
}

int gpusim_device_of(CUstream s) { return s && s->ctx ? s->ctx->device : -1; }

int gpusim_current_device(void) { return current ? current->device : -1; }

int gpusim_physical_device(int ordinal)
{
    init();
    return ordinal >= 0 && ordinal < ndevices ? visible[ordinal] : -1;
}

/* ------------------------------------------------------------------ */
/* Events: complete once their stream has reached their last record. */

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = current;
    e->flags = flags;
    e->refs = 1;
    *phEvent = e;
    return CUDA_SUCCESS;
}

/* Freed once no queued record refers to it (the driver destroys an event
 * still pending asynchronously). */
CUresult cuEventDestroy_v2(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sched);
    event_unref_locked(e);
    pthread_mutex_unlock(&sched);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
    if (!e || !s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->capturing) {
        /* It orders the capture; no replay records it. */
        e->captured = 1;
        return CUDA_SUCCESS;
    }
    struct item *it = calloc(1, sizeof *it);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->record = e;
    pthread_mutex_lock(&sched);
    e->captured = 0;
    e->recorded = 0;
    e->refs++;
    int rc = push_locked(s, it);
    if (rc == CUDA_SUCCESS) {
        e->stream = s;
        e->seq = s->enqueued;
    } else {
        e->refs--;
        free(it);
    }
    pthread_mutex_unlock(&sched);
    return (CUresult)rc;
}

/* Whether `e`'s last record has been reached (an event never recorded is
 * complete, as in CUDA); under `sched`. */
static int event_done_locked(const struct CUevent_st *e)
{
    return !e->stream || e->stream->completed >= e->seq;
}

CUresult cuEventQuery(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->captured)
        return CUDA_ERROR_CAPTURED_EVENT;
    pthread_mutex_lock(&sched);
    int done = event_done_locked(e);
    pthread_mutex_unlock(&sched);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->captured)
        return CUDA_ERROR_CAPTURED_EVENT;
    pthread_mutex_lock(&sched);
    while (!event_done_locked(e))
        pthread_cond_wait(&progress, &sched);
    pthread_mutex_unlock(&sched);
    return CUDA_SUCCESS;
}

/* Both events must have been reached (CUDA_ERROR_NOT_READY otherwise). */
static CUresult impl_cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
    if (!ms || !start || !end)
        return CUDA_ERROR_INVALID_VALUE;
    if (start->captured || end->captured)
        return CUDA_ERROR_CAPTURED_EVENT;
    if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sched);
    int done = event_done_locked(start) && event_done_locked(end);
    int recorded = start->recorded && end->recorded;
    int64_t delta = end->time_ns - start->time_ns;
    pthread_mutex_unlock(&sched);
    if (!done)
        return CUDA_ERROR_NOT_READY;
    if (!recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    *ms = (float)((double)delta / 1e6);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Memory */

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    init();
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&alloc_lock);
    size_t used = used_bytes[current->device];
    pthread_mutex_unlock(&alloc_lock);
    *total = mem_bytes;
    *free_bytes = used < mem_bytes ? mem_bytes - used : 0;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    init();
    if (unsafe_during_capture())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    int dev = current->device;
    pthread_mutex_lock(&alloc_lock);
    CUresult rc = CUDA_SUCCESS;
    void *p = NULL;
    if (used_bytes[dev] + bytesize > mem_bytes || used_bytes[dev] + bytesize < bytesize) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (nallocs == cap_allocs) {
        size_t cap = cap_allocs ? 2 * cap_allocs : 64;
        struct alloc *a = realloc(allocs, cap * sizeof *a);
        if (!a)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            allocs = a;
            cap_allocs = cap;
        }
    }
    if (rc == CUDA_SUCCESS && posix_memalign(&p, 4096, bytesize) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        allocs[nallocs++] = (struct alloc){(uintptr_t)p, bytesize, dev};
        used_bytes[dev] += bytesize;
        *dptr = (CUdeviceptr)(uintptr_t)p;
    }
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

/* Synchronous, as the driver's: the work queued on the allocation's
 * device completes first (but not a hung stream's). */
CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    if (unsafe_during_capture())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    int dev = -1;
    pthread_mutex_lock(&alloc_lock);
    for (size_t i = 0; i < nallocs && dev < 0; i++)
        if (allocs[i].base == (uintptr_t)dptr)
            dev = allocs[i].device;
    pthread_mutex_unlock(&alloc_lock);
    if (dev >= 0)
        drain_all(&contexts[dev]);
    pthread_mutex_lock(&alloc_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nallocs; i++) {
        if (allocs[i].base == (uintptr_t)dptr) {
            used_bytes[allocs[i].device] -= allocs[i].size;
            free((void *)allocs[i].base);
            allocs[i] = allocs[--nallocs];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

/* Device memory NCCL's own buffers take (its connections), counted
 * against device `dev` without host memory behind it; negative to give
 * back. -1 where it does not fit, as cuMemAlloc's out of memory. */
int gpusim_charge(int dev, long long bytes)
{
    init();
    if (dev < 0 || dev >= ndevices)
        return -1;
    int rc = 0;
    pthread_mutex_lock(&alloc_lock);
    if (bytes > 0 && used_bytes[dev] + (size_t)bytes > mem_bytes)
        rc = -1;
    else if (bytes > 0)
        used_bytes[dev] += (size_t)bytes;
    else
        used_bytes[dev] -= (size_t)(-bytes) < used_bytes[dev] ? (size_t)(-bytes) : used_bytes[dev];
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

/* 0 when `len` bytes from `p` lie inside one live allocation. */
int gpusim_check_range(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    int rc = -1;
    pthread_mutex_lock(&alloc_lock);
    for (size_t i = 0; i < nallocs; i++) {
        if (a >= allocs[i].base && a - allocs[i].base <= allocs[i].size &&
            len <= allocs[i].size - (a - allocs[i].base)) {
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

/* The byte offset of `p` inside its live allocation, or -1. */
long long gpusim_alloc_offset(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    long long at = -1;
    pthread_mutex_lock(&alloc_lock);
    for (size_t i = 0; i < nallocs; i++) {
        if (a >= allocs[i].base && a - allocs[i].base < allocs[i].size) {
            at = (long long)(a - allocs[i].base);
            break;
        }
    }
    pthread_mutex_unlock(&alloc_lock);
    return at;
}

/* Memory from ncclMemAlloc: the same table, on the current device. */
int gpusim_alloc(void **p, size_t n)
{
    CUdeviceptr d = 0;
    CUresult rc = cuMemAlloc_v2(&d, n);
    *p = (void *)(uintptr_t)d;
    return rc;
}

int gpusim_free(void *p) { return cuMemFree_v2((CUdeviceptr)(uintptr_t)p); }

struct copy {
    void *dst;
    const void *src;
    size_t n;
    int value; /* memset when >= 0 */
};

static void run_copy(void *arg)
{
    struct copy *c = arg;
    if (c->value >= 0)
        memset(c->dst, c->value, c->n);
    else
        memmove(c->dst, c->src, c->n);
}

static CUresult enqueue_copy(CUstream s, void *dst, const void *src, size_t n, int value)
{
    struct copy *c = malloc(sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct copy){dst, src, n, value};
    return (CUresult)gpusim_enqueue(s, run_copy, c, free);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    if (n && gpusim_check_range((void *)(uintptr_t)dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue_copy(s, (void *)(uintptr_t)dst, src, n, -1);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    if (n && gpusim_check_range((void *)(uintptr_t)src, n))
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue_copy(s, dst, (void *)(uintptr_t)src, n, -1);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    if (n && (gpusim_check_range((void *)(uintptr_t)dst, n) || gpusim_check_range((void *)(uintptr_t)src, n)))
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue_copy(s, (void *)(uintptr_t)dst, (void *)(uintptr_t)src, n, -1);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{
    if (n && gpusim_check_range((void *)(uintptr_t)dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue_copy(s, (void *)(uintptr_t)dst, NULL, n, uc);
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{
    if (unsafe_during_capture())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (n && gpusim_check_range((void *)(uintptr_t)dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)dst, uc, n);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Symbols that may be hidden (GPUSIM_CUDA_HIDE): each resolves through a
 * GNU indirect function, whose resolver returns NULL for a hidden name, so
 * that dlsym finds the symbol but with a NULL address, as the loader does
 * for an unresolved weak symbol. */

#define HIDEABLE(name, ret, params)                                                  \
    static ret (*resolve_##name(void)) params                                        \
    {                                                                                \
        return gpusim_hidden("GPUSIM_CUDA_HIDE", #name) ? NULL : impl_##name;         \
    }                                                                                \
    ret name params __attribute__((ifunc("resolve_" #name)));

static CUresult impl_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    (void)s;
    return cuMemAlloc_v2(dptr, bytesize);
}

static CUresult impl_cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return cuMemFree_v2(dptr);
}

HIDEABLE(cuEventElapsedTime, CUresult, (float *pMilliseconds, CUevent hStart, CUevent hEnd))
HIDEABLE(cuMemAllocAsync, CUresult, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))
HIDEABLE(cuMemFreeAsync, CUresult, (CUdeviceptr dptr, CUstream hStream))
