/*
 * libnccl.so.2 of the host GPU simulation: the NCCL calls collbench makes,
 * with NCCL's documented semantics, on the simulated devices of
 * libcuda.so.1 (host memory), for tests only. Compiled against the real
 * nccl.h (nvidia-nccl-cu12), so every definition here has NCCL's own
 * prototype. It proves plumbing, semantics, counts, offsets, validation and
 * error paths, never speed.
 *
 * Model:
 *   - ranks of a communicator are threads of one process (`-g N`) or
 *     processes (`mpirun`); they meet in one POSIX shared-memory segment
 *     named from the unique id (ncclCommSplit: from the parent's name, the
 *     split's sequence number and the color), unlinked once every rank has
 *     mapped it;
 *   - every byte a rank receives is copied through that segment from the
 *     peer's real buffer: one channel per ordered pair of ranks (three
 *     sets: collectives and point-to-point, which the stream's worker runs,
 *     and the bootstrap of splits and windows, which the calling thread
 *     runs), a chunk at a time, waits on futexes;
 *   - collectives are computed from every rank's real input: reductions
 *     fold the inputs in rank order 0..n-1; half and bfloat16 are rounded
 *     to nearest even after every multiplication and addition (NCCL's
 *     device code does the same per operation, on whatever order its
 *     algorithm takes); avg is NCCL's: integers sum then divide by n, half,
 *     bfloat16, float and double multiply each input by (T)(1/n) (half and
 *     bfloat16: the float 1/n rounded to the type) and then sum, as NCCL's
 *     enqueue.cc sets up ncclDevPreMulSum;
 *   - NCCL's in-place conventions (nccl.h): inputs are read before any
 *     output is written, so every in-place layout NCCL documents works;
 *   - grouped send/recv (and ncclAlltoAll with sendbuff == recvbuff): NCCL
 *     does not order a send against a receive of the same group, so a send
 *     whose buffer overlaps a receive buffer of its group may read data
 *     already overwritten. The simulation takes that worst case: such a
 *     send delivers 0xA5 bytes (a receive from and a send to the rank
 *     itself of the very same range is a copy onto itself, and allowed);
 *   - operations are issued at ncclGroupEnd (a call outside a group is a
 *     group of one), on the stream of the group's first operation, and run
 *     on that stream's worker after the call returns; sends
 *     and receives of one group progress together, so pairs never deadlock;
 *   - every pointer range is checked against libcuda's allocation table
 *     (ncclInvalidArgument otherwise): counts and offsets are verified;
 *   - ncclGetLastError returns one process-wide buffer, as NCCL's does;
 *   - the version it plays (GPUSIM_NCCL_VERSION) decides what exists and
 *     what is refused, as in that release: the entry points it did not
 *     have resolve to NULL, and ncclCommInitRankConfig/ncclCommSplit read
 *     ncclConfig_t as that release's init.cc does (the struct's size and
 *     fields of that release, the same per-field checks, "Invalid config
 *     ... attribute value" refused with ncclInvalidArgument: 2.14-2.16
 *     accept blocking 0 or 1 only, 2.17 and later also the undefined
 *     value), checked against NCCL's sources 2.14.3 to 2.30.7;
 *   - symmetric windows (ncclCommWindowRegister, 2.27 and later) are
 *     collective: every rank of the communicator exchanges (size, flags)
 *     and all refuse (ncclInvalidUsage) where they differ; memory not from
 *     ncclMemAlloc, unknown flags and a window not registered with the
 *     communicator are refused (ncclInvalidArgument); destroy and abort
 *     release the windows left; collectives compute the same on windows;
 *   - what real NCCL leaves undefined is refused instead of computed: a
 *     collective whose send and receive ranges overlap other than in its
 *     in-place layout (nccl.h) returns ncclInvalidArgument;
 *   - NCCL's own variables, log lines, symmetric memory and the node
 *     layout (GPUSIM_NODE_RANKS) as the release played decides them:
 *     nccl_env.c and nccl_log.c.
 *
 * Environment (fault switches and knobs):
 *   GPUSIM_NCCL_VERSION=CODE    ncclGetVersion (default NCCL_VERSION_CODE),
 *                               and the release played (model above)
 *   GPUSIM_NCCL_HIDE=a,b        entry points that resolve to NULL (the
 *                               optional ones: ncclAlltoAll, ncclGather,
 *                               ncclScatter, ncclCommSplit (the "refused
 *                               split" fallback), ncclCommRegister,
 *                               ncclCommDeregister, ncclCommWindowRegister,
 *                               ncclCommWindowDeregister, ncclMemAlloc,
 *                               ncclMemFree, ncclCommInitRankConfig,
 *                               ncclGetLastError)
 *   GPUSIM_NCCL_FAIL=NAME:N:CODE[:RANK]
 *                               the Nth call of NAME (an NCCL function)
 *                               returns ncclResult_t CODE, on rank RANK
 *                               (the rank of the thread's first
 *                               communicator) or on every rank; without
 *                               RANK, the messages of the ranks of one
 *                               process land in the process-wide last-error
 *                               buffer in rank order and lower ranks return
 *                               first (the worst case of that buffer)
 *   GPUSIM_NCCL_ASYNC=RANK:N:CODE
 *                               the Nth group issued by RANK does nothing,
 *                               its stream never completes (as a failed
 *                               kernel's) and its communicator reports CODE
 *                               through ncclCommGetAsyncError
 *   GPUSIM_NCCL_HANG=RANK:N     the Nth group issued by RANK never
 *                               completes: its stream hangs (events stay
 *                               not ready), its peers wait for it
 *   GPUSIM_NCCL_DELAY=RANK:N:MS the Nth group issued by RANK returns MS
 *                               milliseconds late (after its data moved):
 *                               RANK reaches what follows late, as a rank
 *                               held up by its host would
 *   GPUSIM_DELAY_RANK=RANK:US   every group RANK issues returns US
 *                               microseconds late (a slow node)
 *   GPUSIM_DELAY_COLL_RANK=RANK:US
 *                               every group of RANK with a collective in it
 *                               returns US microseconds late (a host only
 *                               collectives see: sends and receives keep
 *                               their speed)
 *   GPUSIM_DELAY_PAIR=A-B:US    every group with a send or receive between
 *                               A and B returns US microseconds late on
 *                               that end (a slow link)
 *   GPUSIM_NCCL_GRAPH_CORRUPT=1 every output an NCCL call writes while a
 *                               CUDA graph replays has its first byte
 *                               flipped (work that runs outside a graph is
 *                               left alone): validation must go through
 *                               the graph to see it
 *   GPUSIM_NCCL_TRACE=FILE      every call that passes its checks appends
 *                               `RANK CALL SENDOFF RECVOFF COUNT` to FILE
 *                               (ncclSend and ncclRecv: `... COUNT PEER`;
 *                               ncclCommWindowRegister and
 *                               ncclCommWindowDeregister: `RANK CALL
 *                               BUFFOFF -1 BYTES FLAGS`):
 *                               the byte offsets of its pointers inside
 *                               their allocations (-1: none), to check
 *                               where each operation works
 *   GPUSIM_SHM_BYTES=B          channel memory per communicator (16 MiB)
 *   GPUSIM_NCCL_REQUIRE_REGISTERED=1
 *                               an operation whose buffers are not
 *                               registered with its communicator
 *                               (ncclCommRegister or a window) fails with
 *                               ncclInvalidUsage: a detector for tests
 *                               (and `RANK CALL NRANKS` when a communicator
 *                               is made or freed)
 *   GPUSIM_NODE_RANKS, GPUSIM_NO_CUDA_P2P: nccl_env.c
 */
#define _GNU_SOURCE
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpusim.h"
#include "nccl_sim.h"

#define ID_MAGIC "GPUSIM-ID"
/* Channel classes: collectives and point-to-point (the stream's work, on
 * its worker), and the bootstrap of ncclCommSplit and window registration
 * (the calling thread), so that neither mixes into the other's bytes. */
#define CLS_COLL 0
#define CLS_P2P 1
#define CLS_BOOT 2
#define NCLS 3
#define SEG_MAGIC 0x47505553u

static size_t shm_budget(void)
{
    const char *v = getenv("GPUSIM_SHM_BYTES");
    size_t b = v && *v ? (size_t)strtoull(v, NULL, 10) : (size_t)16 << 20;
    return b < 4096 ? 4096 : b;
}

static size_t chunk_for(int n)
{
    size_t c = shm_budget() / (NCLS * (size_t)n * (size_t)n);
    c &= ~(size_t)63;
    if (c < 4096)
        c = 4096;
    if (c > (256 << 10))
        c = 256 << 10;
    return c;
}

static size_t seg_size(int n, size_t chunk)
{
    return sizeof(struct seg) + NCLS * (size_t)n * (size_t)n * (sizeof(struct chan) + chunk);
}

static struct chan *chan_of(struct ncclComm *c, int cls, int from, int to)
{
    struct chan *base = (struct chan *)(c->seg + 1);
    return &base[((size_t)cls * c->nranks + (size_t)from) * c->nranks + (size_t)to];
}

static uint8_t *chunk_of(struct ncclComm *c, int cls, int from, int to)
{
    uint8_t *base = (uint8_t *)((struct chan *)(c->seg + 1) + NCLS * (size_t)c->nranks * c->nranks);
    size_t i = ((size_t)cls * c->nranks + (size_t)from) * c->nranks + (size_t)to;
    return base + i * c->seg->chunk;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, long timeout_ns)
{
    struct timespec t = {timeout_ns / 1000000000, timeout_ns % 1000000000};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &t, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void ring(struct ncclComm *c, int rank)
{
    atomic_fetch_add(&c->seg->doorbell[rank], 1);
    futex_wake(&c->seg->doorbell[rank]);
}

/* Maps (creating where needed) the segment `name` for `nranks` ranks and
 * waits until every rank has mapped it: NCCL's initialisation is
 * collective. Each rank publishes its simulated node (`c->node`), process
 * and device first, so that all know where every rank is (init.cc's
 * all-gather of ncclPeerInfo: hostHash, pidHash, nvmlDev). */
static ncclResult_t attach(struct ncclComm *c, const char *name, int nranks, int rank)
{
    size_t chunk = chunk_for(nranks);
    size_t bytes = seg_size(nranks, chunk);
    snprintf(c->name, sizeof c->name, "%s", name);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        sim_error("gpusim: shm_open %s: %s", name, strerror(errno));
        return ncclSystemError;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size < bytes && ftruncate(fd, (off_t)bytes) != 0) {
        sim_error("gpusim: ftruncate %s to %zu bytes: %s", name, bytes, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        sim_error("gpusim: mmap %s: %s", name, strerror(errno));
        return ncclSystemError;
    }
    struct seg *s = p;
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong(&s->state, &zero, 1)) {
        s->magic = SEG_MAGIC;
        s->nranks = (uint32_t)nranks;
        s->chunk = (uint32_t)chunk;
        atomic_store(&s->state, 2);
        futex_wake(&s->state);
    }
    while (atomic_load(&s->state) != 2)
        futex_wait(&s->state, 1, 1000000);
    if (s->magic != SEG_MAGIC || s->nranks != (uint32_t)nranks) {
        sim_error("gpusim: rank %d: communicator %s has %u ranks, this rank was told %d", rank, name, s->nranks, nranks);
        munmap(p, bytes);
        return ncclInvalidUsage;
    }
    c->seg = s;
    c->seg_bytes = bytes;
    c->rank = rank;
    c->nranks = nranks;
    atomic_store(&s->node[rank], c->node);
    atomic_store(&s->pid[rank], (int32_t)getpid());
    atomic_store(&s->dev[rank], gpusim_physical_device(c->device));
    if (atomic_fetch_add(&s->joined, 1) + 1 == (uint32_t)nranks) {
        shm_unlink(name); /* every rank has it mapped: nothing to leak */
        ring(c, 0);
        for (int r = 0; r < nranks; r++)
            ring(c, r);
    }
    for (;;) {
        uint32_t bell = atomic_load(&s->doorbell[rank]);
        if (atomic_load(&s->joined) >= (uint32_t)nranks)
            break;
        futex_wait(&s->doorbell[rank], bell, 1000000);
    }
    /* nNodes, localRanks and localRank as init.cc counts them */
    c->nnodes = 0;
    c->local_ranks = 0;
    c->local_rank = 0;
    for (int r = 0; r < nranks; r++) {
        int node = atomic_load(&s->node[r]), seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = atomic_load(&s->node[q]) == node;
        c->nnodes += !seen;
        if (node == c->node) {
            c->local_ranks++;
            c->local_rank += r < rank;
        }
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------------ */
/* Transfers: one batch progresses every send and receive together. */

struct xfer {
    int peer, cls, is_send, garbage;
    uint8_t *buf;
    size_t len, done;
};

struct batch {
    struct xfer *x;
    size_t n, cap;
};

static int batch_add(struct batch *b, int peer, int cls, int is_send, void *buf, size_t len)
{
    if (len == 0)
        return 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        struct xfer *x = realloc(b->x, cap * sizeof *x);
        if (!x)
            return -1;
        b->x = x;
        b->cap = cap;
    }
    b->x[b->n++] = (struct xfer){peer, cls, is_send, 0, buf, len, 0};
    return 0;
}

/* The worst legal order of a group: a send whose buffer overlaps one of
 * the group's receive buffers reads what the receive wrote (model comment). */
static void mark_hazards(struct batch *b, int me)
{
    for (size_t i = 0; i < b->n; i++) {
        struct xfer *s = &b->x[i];
        if (!s->is_send)
            continue;
        for (size_t j = 0; j < b->n; j++) {
            struct xfer *r = &b->x[j];
            if (r->is_send || r->cls != s->cls)
                continue;
            int overlap = s->buf < r->buf + r->len && r->buf < s->buf + s->len;
            int self_copy = s->peer == me && r->peer == me && s->buf == r->buf && s->len == r->len;
            if (overlap && !self_copy)
                s->garbage = 1;
        }
    }
}

/* Moves at most one chunk of `x`; 1 when something moved. */
static int step(struct ncclComm *c, struct xfer *x, ncclResult_t *err)
{
    int me = c->rank;
    size_t chunk = c->seg->chunk;
    if (x->is_send) {
        struct chan *ch = chan_of(c, x->cls, me, x->peer);
        uint64_t head = atomic_load(&ch->head);
        if (head != atomic_load(&ch->tail))
            return 0; /* the peer has not taken the previous chunk */
        size_t n = x->len - x->done < chunk ? x->len - x->done : chunk;
        uint8_t *dst = chunk_of(c, x->cls, me, x->peer);
        if (x->garbage)
            memset(dst, 0xA5, n);
        else
            memcpy(dst, x->buf + x->done, n);
        if (x->done == 0)
            ch->msg_len = x->len;
        atomic_store(&ch->head, head + n);
        x->done += n;
        ring(c, x->peer);
        return 1;
    }
    struct chan *ch = chan_of(c, x->cls, x->peer, me);
    uint64_t head = atomic_load(&ch->head), tail = atomic_load(&ch->tail);
    if (head == tail)
        return 0;
    size_t n = (size_t)(head - tail);
    if (x->done == 0 && ch->msg_len != x->len) {
        sim_error("gpusim: rank %d receives %zu bytes from rank %d, which sends %llu: counts or types differ", me,
             x->len, x->peer, (unsigned long long)ch->msg_len);
        *err = ncclInvalidUsage;
        return 0;
    }
    if (n > x->len - x->done) {
        sim_error("gpusim: rank %d: message from rank %d longer than its receive", me, x->peer);
        *err = ncclInvalidUsage;
        return 0;
    }
    memcpy(x->buf + x->done, chunk_of(c, x->cls, x->peer, me), n);
    x->done += n;
    atomic_store(&ch->tail, head);
    ring(c, x->peer);
    return 1;
}

/* Runs the batch to completion: transfers between one pair of ranks go in
 * posting order (NCCL matches sends and receives in order). */
static ncclResult_t run_batch(struct ncclComm *c, struct batch *b)
{
    ncclResult_t err = ncclSuccess;
    for (;;) {
        uint32_t bell = atomic_load(&c->seg->doorbell[c->rank]);
        int moved = 0, pending = 0;
        for (size_t i = 0; i < b->n; i++) {
            struct xfer *x = &b->x[i];
            if (x->done == x->len)
                continue;
            int blocked = 0;
            for (size_t j = 0; j < i && !blocked; j++) {
                struct xfer *y = &b->x[j];
                blocked = y->done < y->len && y->peer == x->peer && y->cls == x->cls && y->is_send == x->is_send;
            }
            pending = 1;
            if (!blocked)
                moved |= step(c, x, &err);
            if (err != ncclSuccess)
                return err;
        }
        if (!pending)
            return ncclSuccess;
        if (atomic_load(&c->seg->aborted)) {
            sim_error("gpusim: rank %d: a peer aborted the communicator", c->rank);
            return ncclRemoteError;
        }
        if (!moved)
            futex_wait(&c->seg->doorbell[c->rank], bell, 10000000);
    }
}

/* ------------------------------------------------------------------ */
/* Element types and reductions */

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 0x400), (int)e - 25);
    return sign ? -v : v;
}

/* Round to nearest even. */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f))
        return 0x7e00;
    if (a >= 65520.0f)
        return sign | 0x7c00;
    if (a < ldexpf(1.0f, -14)) {
        /* subnormal: multiples of 2^-24, rint rounds to even */
        return sign | (uint16_t)rintf(ldexpf(a, 24));
    }
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    float q = rintf(ldexpf(m, 11)); /* 11 significant bits */
    if (q >= 2048.0f) {
        q /= 2;
        e++;
    }
    uint16_t exp = (uint16_t)(e - 1 + 15);
    if (exp >= 31)
        return sign | 0x7c00;
    return sign | (uint16_t)(exp << 10) | ((uint16_t)q & 0x3ff);
}

static float bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f))
        return 0x7fc0;
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* out[i] = reduction over k of in[k][i] (k in rank order), NCCL's avg
 * arithmetic included. */
static void reduce_all(void *out, uint8_t **in, int n, size_t count, ncclDataType_t t, ncclRedOp_t op)
{
    /* Floating types: accumulate in ACC, rounding each step to the type
     * (ROUND); avg multiplies each input by 1/n, rounded the same way. */
#define FLOAT_CASE(ENUM, T, ACC, CONV_IN, CONV_OUT, ROUND)                                  \
    case ENUM: {                                                                            \
        ACC scale = ROUND((ACC)(1.0 / n));                                                  \
        for (size_t i = 0; i < count; i++) {                                                \
            ACC acc = 0;                                                                    \
            for (int k = 0; k < n; k++) {                                                   \
                ACC v = CONV_IN(((T *)in[k])[i]);                                           \
                if (op == ncclAvg)                                                          \
                    v = ROUND(v * scale);                                                   \
                if (k == 0)                                                                 \
                    acc = v;                                                                \
                else if (op == ncclSum || op == ncclAvg)                                    \
                    acc = ROUND(acc + v);                                                   \
                else if (op == ncclProd)                                                    \
                    acc = ROUND(acc * v);                                                   \
                else if (op == ncclMax)                                                     \
                    acc = v > acc ? v : acc;                                                \
                else                                                                        \
                    acc = v < acc ? v : acc;                                                \
            }                                                                               \
            ((T *)out)[i] = CONV_OUT(acc);                                                  \
        }                                                                                   \
        return;                                                                             \
    }
#define ID(x) (x)
#define ROUND_HALF(x) half_to_float(float_to_half(x))
#define ROUND_BF16(x) bf16_to_float(float_to_bf16(x))
#define ROUND_F32(x) ((float)(x))
#define ROUND_F64(x) ((double)(x))
    switch (t) {
        FLOAT_CASE(ncclFloat16, uint16_t, float, half_to_float, float_to_half, ROUND_HALF)
        FLOAT_CASE(ncclBfloat16, uint16_t, float, bf16_to_float, float_to_bf16, ROUND_BF16)
        FLOAT_CASE(ncclFloat32, float, float, ID, ID, ROUND_F32)
        FLOAT_CASE(ncclFloat64, double, double, ID, ID, ROUND_F64)
    default:
        break;
    }
#undef FLOAT_CASE
#undef ROUND_HALF
#undef ROUND_BF16
#undef ROUND_F32
#undef ROUND_F64
    /* Integers: wrapping sums and products, exact; avg is the sum over n. */
#define INT_CASE(ENUM, T, U)                                                                \
    case ENUM: {                                                                            \
        for (size_t i = 0; i < count; i++) {                                                \
            T acc = 0;                                                                      \
            for (int k = 0; k < n; k++) {                                                   \
                T v = ((T *)in[k])[i];                                                      \
                if (k == 0)                                                                 \
                    acc = v;                                                                \
                else if (op == ncclSum || op == ncclAvg)                                    \
                    acc = (T)((U)acc + (U)v);                                               \
                else if (op == ncclProd)                                                    \
                    acc = (T)((U)acc * (U)v);                                               \
                else if (op == ncclMax)                                                     \
                    acc = v > acc ? v : acc;                                                \
                else                                                                        \
                    acc = v < acc ? v : acc;                                                \
            }                                                                               \
            if (op == ncclAvg)                                                              \
                acc = (T)(acc / (T)n);                                                      \
            ((T *)out)[i] = acc;                                                            \
        }                                                                                   \
        return;                                                                             \
    }
    switch (t) {
        INT_CASE(ncclInt8, int8_t, uint8_t)
        INT_CASE(ncclUint8, uint8_t, uint8_t)
        INT_CASE(ncclInt32, int32_t, uint32_t)
        INT_CASE(ncclUint32, uint32_t, uint32_t)
        INT_CASE(ncclInt64, int64_t, uint64_t)
        INT_CASE(ncclUint64, uint64_t, uint64_t)
    default:
        return;
    }
#undef INT_CASE
#undef ID
}

/* ------------------------------------------------------------------ */
/* Operations and groups */

enum kind { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER, K_ALLTOALL, K_GATHER, K_SCATTER, K_SEND, K_RECV };

struct op {
    enum kind kind;
    struct ncclComm *comm;
    const uint8_t *send;
    uint8_t *recv;
    size_t count; /* elements, as NCCL's count argument */
    ncclDataType_t type;
    ncclRedOp_t red;
    int root; /* root or peer */
    cudaStream_t stream;
    int algo, proto; /* NCCL's choice, for the TUNING line */
};

/* One issued group: its operations, and what the fault switches name it
 * by (its issuer's world rank and group number), fixed at issue on the
 * host thread, since the work runs on the stream's worker. */
struct job {
    struct op *ops;
    size_t n;
    int world;
    long nth;
};

static __thread int group_depth;
static __thread struct op *pending;
static __thread size_t npending, cap_pending;
static __thread ncclResult_t group_error;
static __thread int world_rank = -1; /* rank of this thread's first communicator */
static __thread long groups_issued;  /* groups this thread issued */


/* One collective, to completion; inputs are read (sent or staged) before
 * any output is written. */
static ncclResult_t run_collective(const struct op *o)
{
    struct ncclComm *c = o->comm;
    int n = c->nranks, me = c->rank;
    size_t es = type_size(o->type), bytes = o->count * es;
    struct batch b = {0};
    uint8_t **tmp = calloc((size_t)n, sizeof *tmp);
    uint8_t *stage = NULL;
    ncclResult_t rc = ncclSuccess;
    int need_tmp = o->kind == K_ALLREDUCE || o->kind == K_REDUCESCATTER || (o->kind == K_REDUCE && me == o->root);
    if (!tmp)
        return ncclSystemError;
    if (need_tmp) {
        stage = malloc(bytes * (size_t)n + 1);
        if (!stage) {
            free(tmp);
            return ncclSystemError;
        }
        for (int p = 0; p < n; p++)
            tmp[p] = stage + (size_t)p * bytes;
    }
    int fail = 0;
    switch (o->kind) {
    case K_ALLREDUCE:
        memcpy(tmp[me], o->send, bytes);
        for (int p = 0; p < n; p++) {
            if (p == me)
                continue;
            fail |= batch_add(&b, p, CLS_COLL, 1, (void *)o->send, bytes);
            fail |= batch_add(&b, p, CLS_COLL, 0, tmp[p], bytes);
        }
        break;
    case K_REDUCE:
        if (me == o->root) {
            memcpy(tmp[me], o->send, bytes);
            for (int p = 0; p < n; p++)
                if (p != me)
                    fail |= batch_add(&b, p, CLS_COLL, 0, tmp[p], bytes);
        } else {
            fail |= batch_add(&b, o->root, CLS_COLL, 1, (void *)o->send, bytes);
        }
        break;
    case K_REDUCESCATTER:
        memcpy(tmp[me], o->send + (size_t)me * bytes, bytes);
        for (int p = 0; p < n; p++) {
            if (p == me)
                continue;
            fail |= batch_add(&b, p, CLS_COLL, 1, (void *)(o->send + (size_t)p * bytes), bytes);
            fail |= batch_add(&b, p, CLS_COLL, 0, tmp[p], bytes);
        }
        break;
    case K_BROADCAST:
        for (int p = 0; p < n; p++) {
            if (me == o->root && p != me)
                fail |= batch_add(&b, p, CLS_COLL, 1, (void *)o->send, bytes);
        }
        if (me != o->root)
            fail |= batch_add(&b, o->root, CLS_COLL, 0, o->recv, bytes);
        break;
    case K_ALLGATHER:
        for (int p = 0; p < n; p++) {
            if (p == me)
                continue;
            fail |= batch_add(&b, p, CLS_COLL, 1, (void *)o->send, bytes);
            fail |= batch_add(&b, p, CLS_COLL, 0, o->recv + (size_t)p * bytes, bytes);
        }
        break;
    case K_GATHER:
        if (me == o->root) {
            for (int p = 0; p < n; p++)
                if (p != me)
                    fail |= batch_add(&b, p, CLS_COLL, 0, o->recv + (size_t)p * bytes, bytes);
        } else {
            fail |= batch_add(&b, o->root, CLS_COLL, 1, (void *)o->send, bytes);
        }
        break;
    case K_SCATTER:
        if (me == o->root) {
            for (int p = 0; p < n; p++)
                if (p != me)
                    fail |= batch_add(&b, p, CLS_COLL, 1, (void *)(o->send + (size_t)p * bytes), bytes);
        } else {
            fail |= batch_add(&b, o->root, CLS_COLL, 0, o->recv, bytes);
        }
        break;
    case K_ALLTOALL:
        /* send and receive of one group: the hazard rule applies */
        for (int p = 0; p < n; p++) {
            fail |= batch_add(&b, p, CLS_COLL, 1, (void *)(o->send + (size_t)p * bytes), bytes);
            fail |= batch_add(&b, p, CLS_COLL, 0, o->recv + (size_t)p * bytes, bytes);
        }
        mark_hazards(&b, me);
        break;
    default:
        break;
    }
    if (fail)
        rc = ncclSystemError;
    if (rc == ncclSuccess)
        rc = run_batch(c, &b);
    if (rc == ncclSuccess) {
        switch (o->kind) {
        case K_ALLREDUCE:
            reduce_all(o->recv, tmp, n, o->count, o->type, o->red);
            break;
        case K_REDUCE:
            if (me == o->root)
                reduce_all(o->recv, tmp, n, o->count, o->type, o->red);
            break;
        case K_REDUCESCATTER:
            reduce_all(o->recv, tmp, n, o->count, o->type, o->red);
            break;
        case K_BROADCAST:
            if (me == o->root)
                memmove(o->recv, o->send, bytes);
            break;
        case K_ALLGATHER:
            memmove(o->recv + (size_t)me * bytes, o->send, bytes);
            break;
        case K_GATHER:
            if (me == o->root)
                memmove(o->recv + (size_t)me * bytes, o->send, bytes);
            break;
        case K_SCATTER:
            if (me == o->root)
                memmove(o->recv, o->send + (size_t)me * bytes, bytes);
            break;
        default:
            break;
        }
    }
    free(b.x);
    free(stage);
    free(tmp);
    return rc;
}

struct fault {
    int rank;
    long nth;
    int code;
};

/* "RANK:N[:CODE]" */
static int parse_fault(const char *var, struct fault *f)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return 0;
    f->code = ncclSystemError;
    int got = sscanf(v, "%d:%ld:%d", &f->rank, &f->nth, &f->code);
    return got >= 2;
}

static void set_async(struct ncclComm *c, ncclResult_t rc)
{
    int ok = ncclSuccess;
    atomic_compare_exchange_strong(&c->async_err, &ok, (int)rc);
}

static void run_job_inner(struct job *j);
static void delay_if_asked(const struct job *j);

static void delay_rank_or_pair(const struct job *j);
/* Operations NCCL runs as point-to-point (no ring, no TUNING line). */
static int is_p2p(enum kind k) { return k == K_SEND || k == K_RECV || k == K_ALLTOALL || k == K_GATHER || k == K_SCATTER; }
/* GPUSIM_NCCL_GRAPH_CORRUPT: the first byte of every output this rank's
 * operations of `j` wrote is flipped, when they ran in a graph replay. */
static void corrupt_replayed(struct job *j)
{
    const char *v = getenv("GPUSIM_NCCL_GRAPH_CORRUPT");
    if (!v || strcmp(v, "1") != 0 || !gpusim_replaying())
        return;
    for (size_t i = 0; i < j->n; i++) {
        const struct op *o = &j->ops[i];
        int writes = o->recv && o->count > 0 && o->kind != K_SEND;
        if ((o->kind == K_REDUCE || o->kind == K_GATHER) && o->comm->rank != o->root)
            writes = 0;
        if (writes && atomic_load(&o->comm->async_err) == ncclSuccess)
            o->recv[0] ^= 0x5a;
    }
}

static void run_job(void *arg)
{
    run_job_inner(arg);
    corrupt_replayed(arg);
    delay_if_asked(arg);
    delay_rank_or_pair(arg);
}

static void run_job_inner(struct job *j)
{
    if (j->n == 0)
        return;
    struct ncclComm *c0 = j->ops[0].comm;
    /* After an asynchronous error the communicator is unusable: NCCL's
     * kernels for it no longer run, and the error stays (the caller sees it
     * through ncclCommGetAsyncError and aborts). */
    for (size_t i = 0; i < j->n; i++)
        if (atomic_load(&j->ops[i].comm->async_err) != ncclSuccess)
            return;
    struct fault f;
    if (parse_fault("GPUSIM_NCCL_HANG", &f) && f.rank == j->world && f.nth == j->nth) {
        gpusim_hang(j->ops[0].stream);
        return;
    }
    if (parse_fault("GPUSIM_NCCL_ASYNC", &f) && f.rank == j->world && f.nth == j->nth) {
        sim_error("gpusim: rank %d: injected asynchronous error %d in group %ld (GPUSIM_NCCL_ASYNC)", j->world, f.code,
             j->nth);
        set_async(c0, (ncclResult_t)f.code);
        gpusim_hang(j->ops[0].stream); /* the failed kernels never finish */
        return;
    }
    for (size_t i = 0; i < j->n; i++) {
        const struct op *o = &j->ops[i];
        if (o->kind == K_SEND || o->kind == K_RECV)
            continue;
        ncclResult_t rc = run_collective(o);
        if (rc != ncclSuccess) {
            set_async(o->comm, rc);
            return;
        }
    }
    /* Point-to-point: every send and receive of the group, per
     * communicator, progressing together. */
    for (size_t i = 0; i < j->n; i++) {
        struct ncclComm *c = j->ops[i].comm;
        int first = 1;
        for (size_t k = 0; k < i; k++)
            if ((j->ops[k].kind == K_SEND || j->ops[k].kind == K_RECV) && j->ops[k].comm == c)
                first = 0;
        if (!first || !(j->ops[i].kind == K_SEND || j->ops[i].kind == K_RECV))
            continue;
        struct batch b = {0};
        int fail = 0;
        for (size_t k = i; k < j->n; k++) {
            const struct op *o = &j->ops[k];
            if (o->comm != c || !(o->kind == K_SEND || o->kind == K_RECV))
                continue;
            size_t bytes = o->count * type_size(o->type);
            if (o->kind == K_SEND)
                fail |= batch_add(&b, o->root, CLS_P2P, 1, (void *)o->send, bytes);
            else
                fail |= batch_add(&b, o->root, CLS_P2P, 0, o->recv, bytes);
        }
        mark_hazards(&b, c->rank);
        ncclResult_t rc = fail ? ncclSystemError : run_batch(c, &b);
        free(b.x);
        if (rc != ncclSuccess) {
            set_async(c, rc);
            return;
        }
    }
}

static void delay_if_asked(const struct job *j)
{
    struct fault f;
    if (parse_fault("GPUSIM_NCCL_DELAY", &f) && f.rank == j->world && f.nth == j->nth)
        usleep((useconds_t)f.code * 1000);
}

/* GPUSIM_DELAY_RANK=RANK:US: every group RANK issues returns US
 * microseconds late (a slow node: slow with every partner, and in every
 * collective). GPUSIM_DELAY_PAIR=A-B:US: every group in which A sends to
 * or receives from B, or B from A, returns US microseconds late on that
 * end (a slow link: A and B slow only with each other). Ranks are those of
 * the thread's first communicator (the world's); after the data moved. */
static void delay_rank_or_pair(const struct job *j)
{
    long us = 0, v;
    int r, a, b;
    const char *rank = getenv("GPUSIM_DELAY_RANK");
    if (rank && sscanf(rank, "%d:%ld", &r, &v) == 2 && r == j->world)
        us += v;
    const char *coll = getenv("GPUSIM_DELAY_COLL_RANK");
    if (coll && sscanf(coll, "%d:%ld", &r, &v) == 2 && r == j->world) {
        for (size_t i = 0; i < j->n; i++) {
            if (!is_p2p(j->ops[i].kind)) {
                us += v;
                break;
            }
        }
    }
    const char *pair = getenv("GPUSIM_DELAY_PAIR");
    if (pair && sscanf(pair, "%d-%d:%ld", &a, &b, &v) == 3 && (j->world == a || j->world == b)) {
        int other = j->world == a ? b : a;
        for (size_t i = 0; i < j->n; i++) {
            const struct op *o = &j->ops[i];
            if ((o->kind == K_SEND || o->kind == K_RECV) && o->root == other) {
                us += v;
                break;
            }
        }
    }
    if (us > 0)
        usleep((useconds_t)us);
}

static void free_job(void *arg)
{
    struct job *j = arg;
    free(j->ops);
    free(j);
}

static const char *result_text(ncclResult_t r);

/* Injected failure of the Nth call of `name` (GPUSIM_NCCL_FAIL), made by
 * one of `nranks` ranks (0: a call of no communicator). */
static ncclResult_t injected_in(const char *name, int nranks)
{
    static __thread char names[32][40];
    static __thread long counts[32];
    const char *v = getenv("GPUSIM_NCCL_FAIL");
    if (!v || !*v)
        return ncclSuccess;
    char want[64] = {0};
    long nth = 0;
    int code = ncclSystemError, rank = -1;
    if (sscanf(v, "%63[^:]:%ld:%d:%d", want, &nth, &code, &rank) < 2 || strcmp(want, name) != 0)
        return ncclSuccess;
    int slot = 0;
    while (slot < 32 && names[slot][0] && strcmp(names[slot], name) != 0)
        slot++;
    if (slot == 32)
        return ncclSuccess;
    snprintf(names[slot], sizeof names[slot], "%s", name);
    if (++counts[slot] != nth)
        return ncclSuccess;
    if (rank >= 0 && rank != world_rank)
        return ncclSuccess;
    int me = world_rank;
    if (rank < 0 && nranks > 0) {
        /* Every rank fails: write in rank order, lower ranks return first. */
        usleep((useconds_t)me * 100000);
        sim_error("gpusim: rank %d: injected failure of %s (call %ld): %s", me, name, nth, result_text((ncclResult_t)code));
        usleep((useconds_t)(nranks - 1 - me) * 100000 + 50000);
        usleep((useconds_t)me * 100000);
    } else {
        sim_error("gpusim: rank %d: injected failure of %s (call %ld): %s", me, name, nth, result_text((ncclResult_t)code));
    }
    return (ncclResult_t)code;
}

static ncclResult_t injected(const char *name, struct ncclComm *comm)
{
    return injected_in(name, comm ? comm->nranks : 0);
}

static ncclResult_t check_range(const char *fn, const char *what, const void *p, size_t bytes)
{
    if (bytes == 0)
        return ncclSuccess;
    if (!p || gpusim_check_range(p, bytes) != 0) {
        sim_error("gpusim: %s: %s %p + %zu bytes is not inside one device allocation", fn, what, p, bytes);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* NCCL's in-place layouts (nccl.h): where an operation's send and receive
 * ranges overlap, only these are defined; real NCCL computes garbage for
 * any other overlap, the simulation refuses it. alltoall has no in-place
 * layout: its overlap falls under the send/receive hazard rule. */
static ncclResult_t check_overlap(const char *fn, const struct op *o, size_t send_bytes, size_t recv_bytes)
{
    const uint8_t *s = o->send, *r = o->recv;
    if (!send_bytes || !recv_bytes || !(s < r + recv_bytes && r < s + send_bytes))
        return ncclSuccess;
    size_t b = o->count * type_size(o->type), me = (size_t)o->comm->rank, root = (size_t)o->root;
    int ok = 1;
    const char *layout = "";
    switch (o->kind) {
    case K_ALLREDUCE: case K_BROADCAST: case K_REDUCE:
        ok = s == r, layout = "sendbuff == recvbuff";
        break;
    case K_REDUCESCATTER:
        ok = r == s + me * b, layout = "recvbuff == sendbuff + rank * recvcount";
        break;
    case K_ALLGATHER:
        ok = s == r + me * b, layout = "sendbuff == recvbuff + rank * sendcount";
        break;
    case K_GATHER:
        ok = s == r + root * b, layout = "sendbuff == recvbuff + root * count";
        break;
    case K_SCATTER:
        ok = r == s + root * b, layout = "recvbuff == sendbuff + root * count";
        break;
    default:
        break;
    }
    if (ok)
        return ncclSuccess;
    sim_error("gpusim: %s: sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap, but not in-place "
         "(%s): NCCL's result is undefined", fn, (const void *)s, send_bytes, (void *)r, recv_bytes, layout);
    return ncclInvalidArgument;
}

/* GPUSIM_NCCL_TRACE: append one line, written at once (O_APPEND), so that
 * the lines of threads and processes never mix. */
static void trace_line(const char *line, int n)
{
    const char *path = getenv("GPUSIM_NCCL_TRACE");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) != n)
        sim_error("gpusim: GPUSIM_NCCL_TRACE %s: short write", path);
    close(fd);
}

static int tracing(void)
{
    const char *path = getenv("GPUSIM_NCCL_TRACE");
    return path && *path;
}

/* GPUSIM_NCCL_TRACE line of a call that passed its checks. */
static void trace(const char *fn, const struct op *o)
{
    if (!tracing())
        return;
    char line[160], peer[24] = "";
    if (o->kind == K_SEND || o->kind == K_RECV)
        snprintf(peer, sizeof peer, " %d", o->root);
    int n = snprintf(line, sizeof line, "%d %s %lld %lld %zu%s\n", o->comm->rank, fn,
                     o->send ? gpusim_alloc_offset(o->send) : -1LL, o->recv ? gpusim_alloc_offset(o->recv) : -1LL,
                     o->count, peer);
    trace_line(line, n);
}

static ncclResult_t issue(void);

/* GPUSIM_NCCL_TRACE line of a communicator's life: `RANK CALL NRANKS`
 * (ncclCommInitRank*, ncclCommSplit, ncclCommDestroy, ncclCommAbort; RANK
 * is the rank in that communicator), so that a test sees when each is
 * made and freed. */
static void trace_comm(const char *fn, const struct ncclComm *c)
{
    if (!tracing())
        return;
    char line[96];
    trace_line(line, snprintf(line, sizeof line, "%d %s %d\n", c->rank, fn, c->nranks));
}


/* The function NCCL_ALGO names an operation by, and its name in the
 * TUNING line (ncclFuncToString). */
static enum func func_of(enum kind k, const char **name)
{
    switch (k) {
    case K_ALLREDUCE: *name = "AllReduce"; return F_ALLREDUCE;
    case K_BROADCAST: *name = "Broadcast"; return F_BROADCAST;
    case K_REDUCE: *name = "Reduce"; return F_REDUCE;
    case K_ALLGATHER: *name = "AllGather"; return F_ALLGATHER;
    case K_REDUCESCATTER: *name = "ReduceScatter"; return F_REDUCESCATTER;
    default: *name = "SendRecv"; return F_OTHER;
    }
}

/* GPUSIM_NCCL_REQUIRE_REGISTERED=1 (a detector, not NCCL's behaviour: NCCL
 * runs unregistered buffers): every buffer an operation touches must be
 * registered with its communicator (ncclCommRegister, or a window), else
 * ncclInvalidUsage, so that a test sees a row that ran on a communicator
 * its buffers were not registered with. */
static ncclResult_t check_registered(const char *fn, const struct op *o, const char *what, const void *p, size_t bytes)
{
    const char *v = getenv("GPUSIM_NCCL_REQUIRE_REGISTERED");
    if (!v || strcmp(v, "1") != 0 || bytes == 0)
        return ncclSuccess;
    const uint8_t *a = p;
    for (const struct reg *r = o->comm->regs; r; r = r->next)
        if (a >= (const uint8_t *)r->buff && a + bytes <= (const uint8_t *)r->buff + r->size)
            return ncclSuccess;
    for (const struct ncclWindow_vidmem *w = o->comm->windows; w; w = w->next)
        if (a >= (const uint8_t *)w->buff && a + bytes <= (const uint8_t *)w->buff + w->size)
            return ncclSuccess;
    sim_error("gpusim: %s: %s %p + %zu bytes is not registered with communicator %s (rank %d of %d) "
         "(GPUSIM_NCCL_REQUIRE_REGISTERED)", fn, what, p, bytes, o->comm->name, o->comm->rank, o->comm->nranks);
    return ncclInvalidUsage;
}

/* NCCL's buffers of `conns` connections (NCCL_BUFFSIZE each, 4 MiB by
 * default: its SIMPLE protocol's), taken from the communicator's device:
 * 0, or ncclUnhandledCudaError where they do not fit (as NCCL's cudaMalloc
 * failing). The simulation's model of NCCL's own memory, not NCCL's
 * figures: the rings take a buffer to the next rank and one from the
 * previous on each of two channels (16 MiB), a peer two (8 MiB). */
static ncclResult_t charge(struct ncclComm *c, int conns)
{
    long long bytes = (long long)conns * sim_param("NCCL_BUFFSIZE", 1 << 22);
    if (gpusim_charge(c->device, bytes) != 0) {
        sim_error("gpusim: rank %d: out of device memory for %d connections of NCCL (%lld bytes)", c->rank, conns,
                  bytes);
        return ncclUnhandledCudaError;
    }
    c->charged += bytes;
    return ncclSuccess;
}

/* The rings, connected once: at init, or with NCCL_RUNTIME_CONNECT (2.22.3
 * and later, on cuMem) at the first collective (v2.30.7-1
 * src/init.cc:1552-1573); each of two channels connects to the next rank
 * and from the previous one. */
static ncclResult_t connect_rings(struct ncclComm *c)
{
    if (c->rings_connected)
        return ncclSuccess;
    ncclResult_t rc = c->nranks > 1 ? charge(c, 2 * 2) : ncclSuccess;
    if (rc != ncclSuccess)
        return rc;
    c->rings_connected = 1;
    log_rings(c);
    return ncclSuccess;
}

/* A point-to-point peer, connected at its first use (a send and a receive
 * buffer, one channel). */
static ncclResult_t connect_peer(struct ncclComm *c, int peer)
{
    if (peer == c->rank || c->p2p_connected[peer])
        return ncclSuccess;
    ncclResult_t rc = charge(c, 2);
    if (rc != ncclSuccess)
        return rc;
    c->p2p_connected[peer] = 1;
    log_p2p_connect(c, peer);
    return ncclSuccess;
}

/* What a group needs and NCCL writes as it is issued (host thread, in
 * order): a collective's rings where NCCL_RUNTIME_CONNECT deferred them
 * and rank 0's TUNING line; a point-to-point peer's connection at its
 * first use. */
static ncclResult_t connect_issued(const struct job *j)
{
    ncclResult_t rc = ncclSuccess;
    for (size_t i = 0; i < j->n && rc == ncclSuccess; i++) {
        struct op *o = &j->ops[i];
        struct ncclComm *c = o->comm;
        if (o->kind == K_SEND || o->kind == K_RECV) {
            rc = connect_peer(c, o->root);
        } else if (is_p2p(o->kind)) {
            for (int p = 0; p < c->nranks && rc == ncclSuccess; p++)
                rc = connect_peer(c, p);
        } else {
            const char *name;
            enum func f = func_of(o->kind, &name);
            size_t bytes = o->count * type_size(o->type);
            rc = connect_rings(c);
            if (rc == ncclSuccess)
                log_tuning(c, name, bytes, o->algo, o->proto);
            if (rc == ncclSuccess && f != F_OTHER)
                sim_profiler_coll(c, (int)f, o->send, o->recv, o->count, o->type, o->root, o->algo, o->proto, bytes);
        }
    }
    return rc;
}

/* Checks an operation and adds it to the thread's group; outside a group
 * it is issued at once. */
static ncclResult_t post(const char *fn, struct op o, size_t send_bytes, size_t recv_bytes)
{
    ncclResult_t rc = injected(fn, o.comm);
    if (rc != ncclSuccess)
        return rc;
    if (!o.comm) {
        sim_error("gpusim: %s: NULL communicator", fn);
        return ncclInvalidArgument;
    }
    if (type_size(o.type) == 0 || (unsigned)o.red > (unsigned)ncclAvg) {
        sim_error("gpusim: %s: invalid datatype %d or operation %d", fn, (int)o.type, (int)o.red);
        return ncclInvalidArgument;
    }
    if (o.root < 0 || o.root >= o.comm->nranks) {
        sim_error("gpusim: %s: root or peer %d outside 0..%d", fn, o.root, o.comm->nranks - 1);
        return ncclInvalidArgument;
    }
    if (o.count == 0)
        return ncclSuccess;
    if ((rc = check_range(fn, "sendbuff", o.send, send_bytes)) != ncclSuccess ||
        (rc = check_range(fn, "recvbuff", o.recv, recv_bytes)) != ncclSuccess ||
        (rc = check_overlap(fn, &o, send_bytes, recv_bytes)) != ncclSuccess ||
        (rc = check_registered(fn, &o, "sendbuff", o.send, send_bytes)) != ncclSuccess ||
        (rc = check_registered(fn, &o, "recvbuff", o.recv, recv_bytes)) != ncclSuccess)
        return rc;
    if (!is_p2p(o.kind)) {
        const char *name;
        enum func f = func_of(o.kind, &name);
        if ((rc = sim_algo_proto(o.comm, f, o.type, o.count * type_size(o.type), &o.algo, &o.proto)) != ncclSuccess)
            return rc;
    }
    trace(fn, &o);
    if (npending == cap_pending) {
        size_t cap = cap_pending ? 2 * cap_pending : 16;
        struct op *p = realloc(pending, cap * sizeof *p);
        if (!p)
            return ncclSystemError;
        pending = p;
        cap_pending = cap;
    }
    pending[npending++] = o;
    if (group_depth == 0)
        return issue();
    return ncclSuccess;
}

/* Issues the thread's pending operations as one job on the stream of the
 * first (ncclGroupEnd). */
static ncclResult_t issue(void)
{
    size_t n = npending;
    npending = 0;
    if (n == 0)
        return ncclSuccess;
    struct job *j = malloc(sizeof *j);
    struct op *ops = malloc(n * sizeof *ops);
    if (!j || !ops) {
        free(j);
        free(ops);
        return ncclSystemError;
    }
    memcpy(ops, pending, n * sizeof *ops);
    *j = (struct job){ops, n, ops[0].comm->world, ++groups_issued};
    ncclResult_t connected = connect_issued(j);
    if (connected != ncclSuccess) {
        free_job(j);
        return connected;
    }
    int rc = gpusim_enqueue(ops[0].stream, run_job, j, free_job);
    if (rc != 0) {
        sim_error("gpusim: the stream refused the work (CUDA error %d)", rc);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    ncclResult_t rc = injected("ncclGroupStart", NULL);
    if (rc != ncclSuccess)
        return rc;
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t rc = injected("ncclGroupEnd", NULL);
    if (group_depth <= 0) {
        sim_error("gpusim: ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group_depth > 0)
        return rc;
    ncclResult_t err = group_error;
    group_error = ncclSuccess;
    if (rc != ncclSuccess || err != ncclSuccess) {
        npending = 0; /* a failed group issues nothing */
        return rc != ncclSuccess ? rc : err;
    }
    return issue();
}

/* Remembers a failure inside a group: ncclGroupEnd reports it too. */
static ncclResult_t grouped(ncclResult_t rc)
{
    if (rc != ncclSuccess && group_depth > 0)
        group_error = rc;
    return rc;
}

#define OP(...) ((struct op){__VA_ARGS__, 0, 0})

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    size_t b = count * type_size(datatype);
    return grouped(post("ncclAllReduce",
                        OP(K_ALLREDUCE, comm, sendbuff, recvbuff, count, datatype, op, 0, stream), b, b));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream)
{
    size_t b = count * type_size(datatype);
    int is_root = comm && comm->rank == root;
    return grouped(post("ncclBroadcast",
                        OP(K_BROADCAST, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, stream),
                        is_root ? b : 0, b));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream)
{
    size_t b = count * type_size(datatype);
    int is_root = comm && comm->rank == root;
    return grouped(post("ncclReduce", OP(K_REDUCE, comm, sendbuff, recvbuff, count, datatype, op, root, stream), b,
                        is_root ? b : 0));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    size_t b = sendcount * type_size(datatype), n = comm ? (size_t)comm->nranks : 0;
    return grouped(post("ncclAllGather",
                        OP(K_ALLGATHER, comm, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream), b,
                        b * n));
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    size_t b = recvcount * type_size(datatype), n = comm ? (size_t)comm->nranks : 0;
    return grouped(post("ncclReduceScatter",
                        OP(K_REDUCESCATTER, comm, sendbuff, recvbuff, recvcount, datatype, op, 0, stream), b * n,
                        b));
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    size_t b = count * type_size(datatype);
    return grouped(post("ncclSend", OP(K_SEND, comm, sendbuff, NULL, count, datatype, ncclSum, peer, stream), b, 0));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    size_t b = count * type_size(datatype);
    return grouped(post("ncclRecv", OP(K_RECV, comm, NULL, recvbuff, count, datatype, ncclSum, peer, stream), 0, b));
}

static ncclResult_t impl_ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream)
{
    size_t b = count * type_size(datatype) * (comm ? (size_t)comm->nranks : 0);
    return grouped(post("ncclAlltoAll",
                        OP(K_ALLTOALL, comm, sendbuff, recvbuff, count, datatype, ncclSum, 0, stream), b, b));
}

static ncclResult_t impl_ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream)
{
    size_t b = count * type_size(datatype), n = comm ? (size_t)comm->nranks : 0;
    int is_root = comm && comm->rank == root;
    return grouped(post("ncclGather", OP(K_GATHER, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, stream),
                        b, is_root ? b * n : 0));
}

static ncclResult_t impl_ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream)
{
    size_t b = count * type_size(datatype), n = comm ? (size_t)comm->nranks : 0;
    int is_root = comm && comm->rank == root;
    return grouped(post("ncclScatter",
                        OP(K_SCATTER, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, stream),
                        is_root ? b * n : 0, b));
}

/* ------------------------------------------------------------------ */
/* Version, ids, communicators */

ncclResult_t ncclGetVersion(int *version)
{
    ncclResult_t rc = injected("ncclGetVersion", NULL);
    if (rc != ncclSuccess)
        return rc;
    if (!version)
        return ncclInvalidArgument;
    const char *v = getenv("GPUSIM_NCCL_VERSION");
    *version = v && *v ? atoi(v) : NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* The simulation's marker: collbench labels every run on this library as
 * simulated (`backend_version` 2.32.3-sim, the table header, info). */
const char *gpusimNcclSimulation(void)
{
    return "host GPU simulation (tests/gpu-sim): plumbing and semantics, never speed";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    ncclResult_t rc = injected("ncclGetUniqueId", NULL);
    if (rc != ncclSuccess)
        return rc;
    if (!uniqueId)
        return ncclInvalidArgument;
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, ID_MAGIC, sizeof ID_MAGIC);
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        int64_t t = gpusim_now_ns() ^ ((int64_t)getpid() << 32);
        memcpy(rnd, &t, 8);
        memcpy(rnd + 8, &t, 8);
    }
    memcpy(uniqueId->internal + 16, rnd, sizeof rnd);
    return ncclSuccess;
}

static void detach(struct ncclComm *c);

/* NCCL_COMM_BLOCKING over the configuration's blocking: from 2.17 the
 * variable, 0 or 1, wins (v2.18.3-1 src/init.cc:1406-1408, v2.30.7-1
 * src/init.cc:1998-1999); 2.14-2.16 apply 1 only and warn about other
 * values than 0 and 1 (v2.16.5-1 src/init.cc:1311-1315). */
static int env_blocking(int blocking)
{
    long long env = sim_param("NCCL_COMM_BLOCKING", sim_version() < 21700 ? 0 : NCCL_CONFIG_UNDEF_INT);
    if (sim_version() < 21700)
        return env == 1 ? 1 : blocking;
    return env == 0 || env == 1 ? (int)env : blocking;
}

/* A non-blocking communicator's creation returns ncclInProgress (nccl.h);
 * here the communicator is ready at once, and ncclCommGetAsyncError says
 * ncclSuccess from then on. Blocking ones return ncclSuccess. */
static ncclResult_t started(const struct ncclComm *c) { return c->blocking ? ncclSuccess : ncclInProgress; }

/* The end of a communicator's making (`fn`; a split names its parent,
 * colour and key): its symmetric memory, its lines, its rings where NCCL
 * connects them at once; freed where they do not fit. */
static ncclResult_t ready(struct ncclComm *c, const char *fn, const struct ncclComm *parent, int color, int key)
{
    ncclResult_t rc;
    c->symmetric = sim_symmetric_support(c);
    log_init_start(c);
    if (!sim_runtime_connect() && (rc = connect_rings(c)) != ncclSuccess) {
        detach(c);
        return rc;
    }
    sim_profiler_init(c);
    log_init_complete(c, fn, parent, color, key);
    trace_comm(fn, c);
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *newcomm, int nranks, ncclUniqueId id, int rank, int blocking,
                              const char *fn)
{
    sim_debug_init();
    if (!newcomm || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        sim_error("gpusim: ncclCommInitRank: rank %d of %d is invalid (at most %d ranks)", rank, nranks, MAX_RANKS);
        return ncclInvalidArgument;
    }
    if (memcmp(id.internal, ID_MAGIC, sizeof ID_MAGIC) != 0) {
        sim_error("gpusim: ncclCommInitRank: the unique id was not made by this library");
        return ncclInvalidArgument;
    }
    int dev = gpusim_current_device();
    if (dev < 0) {
        sim_error("gpusim: ncclCommInitRank: no current CUDA context");
        return ncclUnhandledCudaError;
    }
    char name[96] = "/gpusim-";
    for (int i = 0; i < 16; i++)
        snprintf(name + 8 + 2 * i, 3, "%02x", (uint8_t)id.internal[16 + i]);
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    c->device = dev;
    c->blocking = env_blocking(blocking);
    c->world = world_rank >= 0 ? world_rank : rank;
    c->node = sim_node_of(c->world);
    memcpy(&c->comm_id, id.internal + 16, sizeof c->comm_id);
    ncclResult_t rc = attach(c, name, nranks, rank);
    if (rc != ncclSuccess) {
        free(c);
        return rc;
    }
    if (world_rank < 0)
        world_rank = rank;
    /* what init reads of NCCL_NET, NCCL_ALGO and NCCL_PROTO; every rank
     * of the communicator reads the same and refuses alike */
    if ((rc = sim_check_init_env(c)) != ncclSuccess) {
        detach(c);
        return rc;
    }
    if ((rc = ready(c, fn, NULL, 0, 0)) != ncclSuccess)
        return rc;
    *newcomm = c;
    return started(c);
}

ncclResult_t ncclCommInitRank(ncclComm_t *newcomm, int nranks, ncclUniqueId commId, int rank)
{
    if (world_rank < 0)
        world_rank = rank; /* so that GPUSIM_NCCL_FAIL can name this rank */
    ncclResult_t rc = injected_in("ncclCommInitRank", nranks);
    if (rc != ncclSuccess)
        return rc;
    log_version(rank);
    return init_rank(newcomm, nranks, commId, rank, 1, "ncclCommInitRank");
}

/* ncclConfig_t as each release reads it (its init.cc, 2.14.3 to 2.30.7).
 * Fields only ever get appended, so one struct describes every release:
 * a release reads the first `size` bytes it knows of and keeps its own
 * NCCL_CONFIG_INITIALIZER for the rest. */
#define END(f) (offsetof(ncclConfig_t, f) + sizeof(((ncclConfig_t *)0)->f))
#define ROUND8(n) (((n) + 7) & ~(size_t)7)

/* sizeof(ncclConfig_t) in release `v`'s nccl.h. */
static size_t config_bytes(int v)
{
    if (v < 21700)
        return ROUND8(END(blocking)); /* ncclConfig_v21400 */
    if (v < 21800)
        return ROUND8(END(netName)); /* ncclConfig_v21700 */
    if (v < 22700)
        return ROUND8(END(trafficClass)); /* + splitShare (2.18), trafficClass (2.26) */
    if (v < 22800)
        return ROUND8(END(nvlsCTAs)); /* ncclConfig_v22700 */
    if (v < 22900)
        return ROUND8(END(nvlinkCentricSched)); /* ncclConfig_v22800 */
    if (v < 23000)
        return ROUND8(END(numRmaCtx));
    if (v < 23005)
        return ROUND8(END(maxP2pPeers));
    if (v < 23100)
        return ROUND8(END(graphStreamOrdering)); /* ncclConfig_v23000 */
    return sizeof(ncclConfig_t); /* this nccl.h's */
}

/* The integer fields a release checks, with the release that added the
 * check and the name NCCL_CONFIG_DEFAULT prints. `ok` says which values
 * pass besides NCCL_CONFIG_UNDEF_INT. */
enum rule { R_BOOL, R_NONNEG, R_POS, R_POLICY, R_MODE, R_CHANNELS, R_NONE };

static const struct field {
    const char *name;
    size_t at;
    int since;
    enum rule rule;
} fields[] = {
    {"Blocking", offsetof(ncclConfig_t, blocking), 21700, R_BOOL},
    {"CGA cluster size", offsetof(ncclConfig_t, cgaClusterSize), 21700, R_NONNEG},
    {"Min CTAs", offsetof(ncclConfig_t, minCTAs), 21700, R_POS},
    {"Max CTAs", offsetof(ncclConfig_t, maxCTAs), 21700, R_POS},
    {"Split share", offsetof(ncclConfig_t, splitShare), 21800, R_BOOL},
    {"Traffic class", offsetof(ncclConfig_t, trafficClass), 22600, R_NONE},
    {"Collnet enable", offsetof(ncclConfig_t, collnetEnable), 22700, R_BOOL},
    {"CTA policy flags", offsetof(ncclConfig_t, CTAPolicy), 22700, R_POLICY},
    {"shrinkShare", offsetof(ncclConfig_t, shrinkShare), 22700, R_BOOL},
    {"nvlsCTAs", offsetof(ncclConfig_t, nvlsCTAs), 22700, R_POS},
    {"nChannelsPerNetPeer", offsetof(ncclConfig_t, nChannelsPerNetPeer), 22800, R_CHANNELS},
    {"nvlinkCentricSched", offsetof(ncclConfig_t, nvlinkCentricSched), 22800, R_BOOL},
    {"graphUsageMode", offsetof(ncclConfig_t, graphUsageMode), 22900, R_MODE},
    {"numRmaCtx", offsetof(ncclConfig_t, numRmaCtx), 22900, R_NONNEG},
    /* checked from the first 2.30 release (v2.30.3-1 src/init.cc:2265-2266) */
    {"maxP2pPeers", offsetof(ncclConfig_t, maxP2pPeers), 23000, R_POS},
    {"graphStreamOrdering", offsetof(ncclConfig_t, graphStreamOrdering), 23005, R_BOOL},
};

static int field_ok(enum rule r, int x)
{
    switch (r) {
    case R_BOOL: return x == 0 || x == 1;
    case R_NONNEG: return x >= 0;
    case R_POS: return x > 0;
    case R_POLICY: return x >= 0 && x <= (NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO);
    case R_MODE: return x >= 0 && x <= 2;
    case R_CHANNELS: return x > 0 && x <= 64; /* MAXCHANNELS */
    default: return 1;
    }
}

static int *field_of(ncclConfig_t *c, const struct field *f) { return (int *)((char *)c + f->at); }

/* `config` read as release sim_version() reads it; its `blocking` comes
 * back in *blocking. NULL is NCCL's own defaults. */
static ncclResult_t check_config(const char *fn, const ncclConfig_t *config, int *blocking)
{
    int v = sim_version();
    *blocking = 1;
    if (!config)
        return ncclSuccess;
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    if (v < 21700)
        c.blocking = 1; /* 2.14-2.16: NCCL_CONFIG_INITIALIZER's blocking */
    size_t n = config->size < config_bytes(v) ? config->size : config_bytes(v);
    memcpy(&c, config, n < sizeof c ? n : sizeof c);
    if (c.magic != NCCL_API_MAGIC) {
        sim_error("gpusim: %s: ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER", fn);
        return ncclInvalidArgument;
    }
    if (v < 21700) {
        /* 2.14-2.16 know one attribute, and only its two values */
        if (c.blocking != 0 && c.blocking != 1) {
            sim_error("gpusim: %s: Invalid config blocking attribute value %d (NCCL %d)", fn, c.blocking, v);
            return ncclInvalidArgument;
        }
        *blocking = c.blocking;
        return ncclSuccess;
    }
    /* 2.17 and later: fields newer than the struct's version take their
     * defaults, then each is checked; the undefined value always passes. */
    const int undef = NCCL_CONFIG_UNDEF_INT;
    if (c.version < 21400)
        c.blocking = undef;
    if (c.version < 21700)
        c.cgaClusterSize = c.minCTAs = c.maxCTAs = undef, c.netName = NULL;
    if (c.version < 22500)
        c.trafficClass = undef;
    if (c.version < 22700)
        c.collnetEnable = c.CTAPolicy = c.shrinkShare = c.nvlsCTAs = undef;
    if (c.version < 22800)
        c.nChannelsPerNetPeer = c.nvlinkCentricSched = undef;
    if (c.version < 22900)
        c.graphUsageMode = c.numRmaCtx = undef;
    if (c.version < 23000)
        c.maxP2pPeers = undef;
    if (c.version < 23005)
        c.graphStreamOrdering = undef;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const struct field *f = &fields[i];
        int x = *field_of(&c, f);
        if (v < f->since || x == undef)
            continue;
        if (!field_ok(f->rule, x)) {
            sim_error("gpusim: %s: Invalid config %s attribute value %d (NCCL %d)", fn, f->name, x, v);
            return ncclInvalidArgument;
        }
    }
    if (c.minCTAs != undef && c.maxCTAs != undef && c.minCTAs > c.maxCTAs) {
        sim_error("gpusim: %s: Invalid config min/max channels attribute value %d/%d", fn, c.minCTAs, c.maxCTAs);
        return ncclInvalidArgument;
    }
    /* NCCL_CONFIG_DEFAULT: an ENV line per attribute set (v2.30.7-1
     * src/init.cc:1970-1975) */
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int x = *field_of(&c, &fields[i]);
        if (v >= fields[i].since && x != undef)
            sim_info(SUB_ENV, "Comm config %s set to %d", fields[i].name, x);
    }
    *blocking = c.blocking == undef ? 1 : c.blocking;
    return ncclSuccess;
}

static ncclResult_t impl_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t *config)
{
    if (world_rank < 0)
        world_rank = rank;
    ncclResult_t rc = injected_in("ncclCommInitRankConfig", nranks);
    int blocking = 1;
    if (rc == ncclSuccess)
        log_version(rank);
    if (rc == ncclSuccess)
        rc = check_config("ncclCommInitRankConfig", config, &blocking);
    if (rc != ncclSuccess)
        return rc;
    return init_rank(comm, nranks, commId, rank, blocking, "ncclCommInitRankConfig");
}

static void detach(struct ncclComm *c)
{
    sim_profiler_finalize(c);
    /* NCCL releases the windows still registered with a communicator it
     * destroys or aborts. */
    while (c->windows) {
        struct ncclWindow_vidmem *w = c->windows;
        c->windows = w->next;
        free(w);
    }
    while (c->regs) {
        struct reg *r = c->regs;
        c->regs = r->next;
        free(r);
    }
    gpusim_charge(c->device, -c->charged);
    if (c->seg)
        munmap(c->seg, c->seg_bytes);
    free(c);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    ncclResult_t rc = injected("ncclCommDestroy", comm);
    if (rc != ncclSuccess)
        return rc;
    if (!comm)
        return ncclInvalidArgument;
    /* NCCL flushes what was issued on the communicator first (nccl.h:
     * ncclCommDestroy finalizes a communicator not finalized yet) */
    gpusim_drain_device(comm->device);
    trace_comm("ncclCommDestroy", comm);
    detach(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    atomic_store(&comm->seg->aborted, 1);
    for (int r = 0; r < comm->nranks; r++)
        ring(comm, r);
    /* without waiting for peers: where work is still queued on the
     * device (it fails at the abort), the communicator is left behind
     * rather than freed under it */
    trace_comm("ncclCommAbort", comm);
    if (!gpusim_device_busy(comm->device))
        detach(comm);
    return ncclSuccess;
}

/* What the communicator queries share: the fault injected into CALL, then
 * a communicator and a place for the answer. */
static ncclResult_t comm_query(const char *call, const ncclComm_t comm, const void *answer)
{
    ncclResult_t rc = injected(call, comm);
    if (rc != ncclSuccess)
        return rc;
    if (!comm || !answer)
        return ncclInvalidArgument;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t rc = comm_query("ncclCommCount", comm, count);
    if (rc == ncclSuccess)
        *count = comm->nranks;
    return rc;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t rc = comm_query("ncclCommCuDevice", comm, device);
    if (rc == ncclSuccess)
        *device = comm->device;
    return rc;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t rc = comm_query("ncclCommUserRank", comm, rank);
    if (rc == ncclSuccess)
        *rank = comm->rank;
    return rc;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm || !asyncError)
        return ncclInvalidArgument;
    *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
    return ncclSuccess;
}

static const char *result_text(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "NCCL operation timed out";
    default: return "unknown result code";
    }
}

const char *ncclGetErrorString(ncclResult_t result) { return result_text(result); }

static const char *impl_ncclGetLastError(ncclComm_t comm)
{
    (void)comm; /* NCCL's buffer is process-wide, whatever comm is */
    return last_error_text();
}

/* Every parent rank learns every (color, key): an all-gather over the
 * parent's bootstrap channels, on the calling thread. */
static ncclResult_t exchange_split(struct ncclComm *c, int color, int key, int *all)
{
    int mine[2] = {color, key};
    struct batch b = {0};
    int fail = 0;
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank)
            continue;
        fail |= batch_add(&b, p, CLS_BOOT, 1, mine, sizeof mine);
        fail |= batch_add(&b, p, CLS_BOOT, 0, all + 2 * p, sizeof mine);
    }
    all[2 * c->rank] = color;
    all[2 * c->rank + 1] = key;
    ncclResult_t rc = fail ? ncclSystemError : run_batch(c, &b);
    free(b.x);
    return rc;
}

static ncclResult_t impl_ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc = injected("ncclCommSplit", comm);
    int blocking = comm ? comm->blocking : 1;
    if (rc == ncclSuccess && config)
        rc = check_config("ncclCommSplit", config, &blocking);
    if (rc != ncclSuccess)
        return rc;
    if (!comm || !newcomm)
        return ncclInvalidArgument;
    int n = comm->nranks;
    int *all = calloc(2 * (size_t)n, sizeof *all);
    if (!all)
        return ncclSystemError;
    rc = exchange_split(comm, color, key, all);
    int seq = comm->splits++;
    if (rc != ncclSuccess || color == NCCL_SPLIT_NOCOLOR) {
        free(all);
        *newcomm = NULL;
        return rc;
    }
    int size = 0, rank = 0;
    for (int p = 0; p < n; p++) {
        if (all[2 * p] != color)
            continue;
        size++;
        if (all[2 * p + 1] < key || (all[2 * p + 1] == key && p < comm->rank))
            rank++;
    }
    free(all);
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    char name[96];
    snprintf(name, sizeof name, "%.60s-s%d-c%d", comm->name, seq, color);
    c->device = comm->device;
    c->blocking = env_blocking(blocking);
    c->world = comm->world;
    c->node = comm->node;
    memcpy(&c->comm_id, name + strlen(name) - sizeof c->comm_id, sizeof c->comm_id);
    rc = attach(c, name, size, rank);
    if (rc != ncclSuccess) {
        free(c);
        return rc;
    }
    /* a split is made as any communicator: NCCL_ALGO and NCCL_PROTO are
     * read again (graph/tuning.cc, ncclTopoTuneModel) */
    if ((rc = sim_check_init_env(c)) != ncclSuccess) {
        detach(c);
        return rc;
    }
    if ((rc = ready(c, "ncclCommSplit", comm, color, key)) != ncclSuccess)
        return rc;
    *newcomm = c;
    return started(c);
}

static ncclResult_t impl_ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t rc = injected("ncclCommRegister", comm);
    if (rc != ncclSuccess)
        return rc;
    if (!comm || !handle)
        return ncclInvalidArgument;
    if ((rc = check_range("ncclCommRegister", "buff", buff, size)) != ncclSuccess)
        return rc;
    struct reg *r = malloc(sizeof *r);
    if (!r)
        return ncclSystemError;
    *r = (struct reg){comm->regs, buff, size};
    comm->regs = r;
    *handle = r;
    return ncclSuccess;
}

/* A handle not registered with this communicator: "Deregister: Could not
 * find handle", ncclInvalidUsage (v2.27.7-1 src/register/register.cc:152). */
static ncclResult_t impl_ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    if (!comm || !handle)
        return ncclInvalidArgument;
    struct reg **at = &comm->regs;
    while (*at && *at != handle)
        at = &(*at)->next;
    if (!*at) {
        sim_error("gpusim: ncclCommDeregister: handle %p is not registered with this communicator", handle);
        return ncclInvalidUsage;
    }
    *at = (*at)->next;
    free(handle);
    return ncclSuccess;
}

/* The live allocations of ncclMemAlloc (process-wide, as the driver's):
 * symmetric windows accept only these. */
struct mem_block {
    uintptr_t start;
    size_t size;
};
static struct mem_block *mem_blocks;
static size_t n_mem_blocks, cap_mem_blocks;
static pthread_mutex_t mem_blocks_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether `p .. p + size` lies inside one allocation of ncclMemAlloc. */
static int from_mem_alloc(const void *p, size_t size)
{
    uintptr_t a = (uintptr_t)p;
    int found = 0;
    pthread_mutex_lock(&mem_blocks_lock);
    for (size_t i = 0; i < n_mem_blocks && !found; i++)
        found = a >= mem_blocks[i].start && size <= mem_blocks[i].size && a - mem_blocks[i].start <= mem_blocks[i].size - size;
    pthread_mutex_unlock(&mem_blocks_lock);
    return found;
}

static ncclResult_t impl_ncclMemAlloc(void **ptr, size_t size)
{
    ncclResult_t rc = injected("ncclMemAlloc", NULL);
    if (rc != ncclSuccess)
        return rc;
    if (!ptr)
        return ncclInvalidArgument;
    if (gpusim_alloc(ptr, size ? size : 1) != 0) {
        sim_error("gpusim: ncclMemAlloc of %zu bytes: out of device memory", size);
        return ncclUnhandledCudaError;
    }
    pthread_mutex_lock(&mem_blocks_lock);
    if (n_mem_blocks == cap_mem_blocks) {
        size_t cap = cap_mem_blocks ? 2 * cap_mem_blocks : 16;
        struct mem_block *m = realloc(mem_blocks, cap * sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&mem_blocks_lock);
            gpusim_free(*ptr);
            return ncclSystemError;
        }
        mem_blocks = m;
        cap_mem_blocks = cap;
    }
    mem_blocks[n_mem_blocks++] = (struct mem_block){(uintptr_t)*ptr, size ? size : 1};
    pthread_mutex_unlock(&mem_blocks_lock);
    return ncclSuccess;
}

static ncclResult_t impl_ncclMemFree(void *ptr)
{
    if (!ptr)
        return ncclSuccess;
    pthread_mutex_lock(&mem_blocks_lock);
    for (size_t i = 0; i < n_mem_blocks; i++) {
        if (mem_blocks[i].start == (uintptr_t)ptr) {
            mem_blocks[i] = mem_blocks[--n_mem_blocks];
            break;
        }
    }
    pthread_mutex_unlock(&mem_blocks_lock);
    return gpusim_free(ptr) == 0 ? ncclSuccess : ncclInvalidArgument;
}

/* GPUSIM_NCCL_TRACE line of a window call: `RANK CALL BUFFOFF -1 BYTES
 * FLAGS` (the buffer's offset inside its allocation). */
static void trace_window(const char *fn, const struct ncclComm *comm, const struct ncclWindow_vidmem *w)
{
    if (!tracing())
        return;
    char line[160];
    trace_line(line, snprintf(line, sizeof line, "%d %s %lld -1 %zu %d\n", comm->rank, fn,
                              gpusim_alloc_offset(w->buff), w->size, w->flags));
}

/* The collective step of a window call: every rank of `comm` learns every
 * rank's (size, flags), over the collective channels, on the calling
 * thread (a rank that does not take part leaves the others waiting, as
 * NCCL's would). Returns ncclInvalidUsage, on every rank alike, where the
 * ranks disagree: NCCL registers a window of one size on all ranks. */
static ncclResult_t window_collective(const char *fn, struct ncclComm *c, size_t size, int flags)
{
    uint64_t mine[2] = {size, (uint64_t)flags};
    uint64_t *all = calloc(2 * (size_t)c->nranks, sizeof *all);
    if (!all)
        return ncclSystemError;
    struct batch b = {0};
    int fail = 0;
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank)
            continue;
        fail |= batch_add(&b, p, CLS_BOOT, 1, mine, sizeof mine);
        fail |= batch_add(&b, p, CLS_BOOT, 0, all + 2 * p, sizeof mine);
    }
    all[2 * c->rank] = mine[0];
    all[2 * c->rank + 1] = mine[1];
    ncclResult_t rc = fail ? ncclSystemError : run_batch(c, &b);
    free(b.x);
    for (int p = 0; rc == ncclSuccess && p < c->nranks; p++) {
        if (all[2 * p] != mine[0] || all[2 * p + 1] != mine[1]) {
            sim_error("gpusim: %s: rank %d passes %llu bytes (flags %llu), rank %d %llu bytes (flags %llu): every rank "
                 "of the communicator must pass the same size and flags",
                 fn, c->rank, (unsigned long long)mine[0], (unsigned long long)mine[1], p,
                 (unsigned long long)all[2 * p], (unsigned long long)all[2 * p + 1]);
            rc = ncclInvalidUsage;
        }
    }
    free(all);
    return rc;
}

/* Whether ncclCommWindowRegister of the release played returns success
 * and no window on `comm` (before any collective step):
 *   2.27: where NCCL_LOCAL_REGISTER=0 or cuMem is off (v2.27.7-1
 *     src/register/register.cc:207-209);
 *   2.28: where neither symmetric memory nor local registration is
 *     (v2.28.9-1 src/dev_runtime.cc:902);
 *   2.29 and later: where the communicator has no symmetric memory
 *     (v2.29.7-1 src/dev_runtime.cc:1076-1078, v2.30.7-1
 *     src/dev_runtime.cc:1342-1344). */
static int no_window(const struct ncclComm *comm)
{
    int v = sim_version(), local = sim_param("NCCL_LOCAL_REGISTER", 1) != 0;
    if (v < 22800)
        return !local || !sim_cumem();
    if (v < 22900)
        return !(comm->symmetric || local);
    return !comm->symmetric;
}

/* NCCL 2.27's symmetric registration: `buff .. buff + size` of memory from
 * ncclMemAlloc, collectively, with NCCL_WIN_* flags; no window where the
 * release makes none (`no_window`); on 2.28 without symmetric memory, the
 * local registration as the window. */
static ncclResult_t impl_ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                                int winFlags)
{
    ncclResult_t rc = injected("ncclCommWindowRegister", comm);
    if (rc != ncclSuccess)
        return rc;
    if (!comm || !win || !buff || size == 0) {
        sim_error("gpusim: ncclCommWindowRegister: NULL communicator, window or buffer, or zero size");
        return ncclInvalidArgument;
    }
    *win = NULL;
    const int known = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING;
    if (winFlags & ~known) {
        sim_error("gpusim: ncclCommWindowRegister: flags 0x%x: only NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC and "
             "NCCL_WIN_STRICT_ORDERING are simulated", winFlags);
        return ncclInvalidArgument;
    }
    if ((rc = check_range("ncclCommWindowRegister", "buff", buff, size)) != ncclSuccess)
        return rc;
    if (!from_mem_alloc(buff, size)) {
        sim_error("gpusim: ncclCommWindowRegister: buff %p + %zu bytes was not allocated by ncclMemAlloc, which "
             "window registration requires", buff, size);
        return ncclInvalidArgument;
    }
    if (no_window(comm))
        return ncclSuccess;
    for (struct ncclWindow_vidmem *w = comm->windows; w; w = w->next) {
        if (w->buff == buff) {
            sim_error("gpusim: ncclCommWindowRegister: buff %p is already a window of this communicator", buff);
            return ncclInvalidUsage;
        }
    }
    if ((rc = window_collective("ncclCommWindowRegister", comm, size, winFlags)) != ncclSuccess)
        return rc;
    struct ncclWindow_vidmem *w = malloc(sizeof *w);
    if (!w)
        return ncclSystemError;
    *w = (struct ncclWindow_vidmem){comm->windows, buff, size, winFlags, !comm->symmetric};
    comm->windows = w;
    trace_window("ncclCommWindowRegister", comm, w);
    *win = w;
    return ncclSuccess;
}

static ncclResult_t impl_ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    ncclResult_t rc = injected("ncclCommWindowDeregister", comm);
    if (rc != ncclSuccess)
        return rc;
    if (!comm) {
        sim_error("gpusim: ncclCommWindowDeregister: NULL communicator");
        return ncclInvalidArgument;
    }
    /* a NULL window returns at once (v2.27.7-1
     * src/register/register.cc:261, v2.29.7-1 src/dev_runtime.cc:1116) */
    if (!win)
        return ncclSuccess;
    struct ncclWindow_vidmem **at = &comm->windows;
    while (*at && *at != win)
        at = &(*at)->next;
    if (!*at) {
        sim_error("gpusim: ncclCommWindowDeregister: window %p is not registered with this communicator", (void *)win);
        return ncclInvalidArgument;
    }
    if ((rc = window_collective("ncclCommWindowDeregister", comm, win->size, win->flags)) != ncclSuccess)
        return rc;
    *at = win->next;
    trace_window("ncclCommWindowDeregister", comm, win);
    free(win);
    return ncclSuccess;
}

/* Optional entry points resolve through GNU indirect functions, so that
 * GPUSIM_NCCL_HIDE can make them resolve to NULL, and so does a release
 * played (GPUSIM_NCCL_VERSION) older than the one that added them (`since`,
 * from nccl.h's history). */
#define HIDEABLE(name, since, ret, params)                                                           \
    static ret (*resolve_##name(void)) params                                                        \
    {                                                                                                \
        return gpusim_hidden("GPUSIM_NCCL_HIDE", #name) || sim_version() < (since) ? NULL : impl_##name; \
    }                                                                                                \
    ret name params __attribute__((ifunc("resolve_" #name)));

HIDEABLE(ncclAlltoAll, 22800, ncclResult_t,
         (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
          cudaStream_t stream))
HIDEABLE(ncclGather, 22800, ncclResult_t,
         (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream))
HIDEABLE(ncclScatter, 22800, ncclResult_t,
         (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream))
HIDEABLE(ncclCommSplit, 21800, ncclResult_t,
         (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config))
HIDEABLE(ncclCommRegister, 21900, ncclResult_t, (const ncclComm_t comm, void *buff, size_t size, void **handle))
HIDEABLE(ncclCommDeregister, 21900, ncclResult_t, (const ncclComm_t comm, void *handle))
HIDEABLE(ncclCommWindowRegister, 22700, ncclResult_t,
         (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags))
HIDEABLE(ncclCommWindowDeregister, 22700, ncclResult_t, (ncclComm_t comm, ncclWindow_t win))
HIDEABLE(ncclMemAlloc, 21900, ncclResult_t, (void **ptr, size_t size))
HIDEABLE(ncclMemFree, 21900, ncclResult_t, (void *ptr))
HIDEABLE(ncclCommInitRankConfig, 21400, ncclResult_t,
         (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config))
HIDEABLE(ncclGetLastError, 21300, const char *, (ncclComm_t comm))
