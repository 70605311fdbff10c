/*
 * What the three files of the simulation's libnccl.so.2 share (tests
 * only): the communicator and its shared segment (nccl_sim.c), NCCL's
 * debug log as each release writes it (nccl_log.c), and NCCL's own
 * variables and rules as each release reads and applies them
 * (nccl_env.c). Every rule cites the NCCL source line it follows
 * (github.com/NVIDIA/nccl, the release tag, src/FILE:LINE).
 */
#ifndef NCCL_SIM_H
#define NCCL_SIM_H
#include <nccl.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_RANKS 256

/* One direction between two ranks: bytes written and read, ever. */
struct chan {
    _Atomic uint64_t head; /* bytes written by the sender, ever */
    _Atomic uint64_t tail; /* bytes consumed by the receiver, ever */
    uint64_t msg_len;      /* length of the message being sent */
    uint64_t pad;
};

/* The segment every rank of a communicator maps. Each rank publishes its
 * simulated node, process and device before it joins, so that every rank
 * knows every peer's once all have joined (NCCL's bootstrap all-gather of
 * ncclPeerInfo, init.cc fillInfo). */
struct seg {
    uint32_t magic;
    _Atomic uint32_t state; /* 0 new, 1 being set up, 2 ready */
    uint32_t nranks;
    uint32_t chunk;
    _Atomic uint32_t joined;
    _Atomic uint32_t aborted; /* a rank called ncclCommAbort */
    _Atomic uint32_t doorbell[MAX_RANKS];
    _Atomic int32_t node[MAX_RANKS];
    _Atomic int32_t pid[MAX_RANKS];
    _Atomic int32_t dev[MAX_RANKS];
    /* then NCLS * n * n channels (nccl_sim.c), then their chunks */
};

/* A window of ncclCommWindowRegister, on its communicator's list. */
struct ncclWindow_vidmem {
    struct ncclWindow_vidmem *next;
    void *buff;
    size_t size;
    int flags;
    /* NCCL 2.28 without symmetric memory: a local registration handed out
     * as the window (v2.28.9-1 src/dev_runtime.cc:593-597). */
    int local;
};

/* A buffer of ncclCommRegister, on its communicator's list. */
struct reg {
    struct reg *next;
    void *buff;
    size_t size;
};

struct ncclComm {
    int rank, nranks, device;
    struct seg *seg;
    size_t seg_bytes;
    char name[96];
    int splits;
    _Atomic int async_err;
    int blocking;
    struct ncclWindow_vidmem *windows; /* registered, newest first */
    struct reg *regs;                  /* ncclCommRegister's, newest first */
    /* where the ranks are (after attach): this rank's simulated node, the
     * nodes the communicator spans, and its ranks on this rank's node */
    int node, nnodes, local_rank, local_ranks;
    /* the rank of the thread that made it in its first communicator (the
     * fault switches name ranks so), which its work keeps on the stream's
     * worker thread */
    int world;
    /* NCCL's comm->symmetricSupport, decided at init (nccl_env.c) */
    int symmetric;
    /* the rings are connected (at init, or at the first collective with
     * NCCL_RUNTIME_CONNECT), and the peers a send or receive connected */
    int rings_connected;
    uint8_t p2p_connected[MAX_RANKS];
    /* device memory its connections hold (gpusim_charge) */
    long long charged;
    unsigned long long comm_id; /* the commId hash of the init lines */
    /* NCCL_ALGO and NCCL_PROTO as read when it was made (init and split
     * alike, as NCCL's tuning model is per communicator): per function
     * (enum func), 1 where allowed; `tuned` where either was set */
    int algos[5 * 7], protos[5 * 3], tuned;
    /* the profiler plugin's context for it (profiler.c), its event mask,
     * and the collectives of each function so far (NCCL's seqNumber) */
    void *profiler_ctx;
    int profiler_mask, profiler_on;
    unsigned long long coll_seq[5];
};

/* Everything below is internal to the library: hidden, so that no name
 * here is interposed by (or interposes) the program's or libc's. */
#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------------ */
/* nccl_log.c: NCCL's debug log, as the release played writes it. */

/* Subsystem flags (NCCL's src/include/nccl_common.h, every release). */
#define SUB_INIT 0x1ul
#define SUB_COLL 0x2ul
#define SUB_P2P 0x4ul
#define SUB_SHM 0x8ul
#define SUB_NET 0x10ul
#define SUB_GRAPH 0x20ul
#define SUB_TUNING 0x40ul
#define SUB_ENV 0x80ul
#define SUB_ALLOC 0x100ul
#define SUB_CALL 0x200ul
#define SUB_PROXY 0x400ul
#define SUB_NVLS 0x800ul
#define SUB_BOOTSTRAP 0x1000ul
#define SUB_REG 0x2000ul
#define SUB_ALL (~0ul)

/* The NCCL_VERSION_CODE of the release played (GPUSIM_NCCL_VERSION). */
int sim_version(void);
/* An INFO line of subsystems `sub`, where NCCL_DEBUG and
 * NCCL_DEBUG_SUBSYS let it through. */
void sim_info(unsigned long sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A WARN line, as NCCL prints it at `file_line` ("graph/tuning.cc:109"),
 * at NCCL_DEBUG=WARN or INFO; its text also becomes the last error. */
void sim_warn(const char *file_line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The gpusim's own reasons for a refusal: the last error only. */
void sim_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *last_error_text(void);

/* The lines NCCL writes while a communicator starts and runs. */
void log_version(int rank);
void log_init_start(const struct ncclComm *c);
void log_init_complete(const struct ncclComm *c, const char *fn, const struct ncclComm *parent, int color,
                       int key);
void log_rings(const struct ncclComm *c);
void log_p2p_connect(const struct ncclComm *c, int peer);
void log_tuning(const struct ncclComm *c, const char *func, size_t bytes, int algo, int proto);

/* profiler.c: the profiler plugin, as the release played drives it. */
void sim_profiler_init(struct ncclComm *c);
void sim_profiler_coll(struct ncclComm *c, int func, const void *send, void *recv, size_t count,
                       ncclDataType_t type, int root, int algo, int proto, size_t bytes);
void sim_profiler_finalize(struct ncclComm *c);

/* ------------------------------------------------------------------ */
/* nccl_env.c: NCCL's variables, as the release played reads them. */

/* A numeric NCCL_* variable (NCCL_PARAM): its value, else `dflt`; the
 * first read writes NCCL's "set by environment" line. */
long long sim_param(const char *name, long long dflt);
/* ncclCuMemEnable() of the release played. */
int sim_cumem(void);
/* NCCL_P2P_DISABLE=1 (graph/paths.cc ncclGetLevel). */
int sim_p2p_disabled(void);
/* GPUSIM_NO_CUDA_P2P=1: the GPUs cannot reach each other (no CUDA P2P). */
int sim_no_cuda_p2p(void);
/* The simulated node of world rank `rank` (GPUSIM_NODE_RANKS). */
int sim_node_of(int rank);
/* Init-time checks of NCCL_NET, NCCL_ALGO and NCCL_PROTO, which `c`
 * keeps: ncclSuccess or the release's refusal (with its WARN). */
ncclResult_t sim_check_init_env(struct ncclComm *c);
/* comm->symmetricSupport of the release played (after attach). */
int sim_symmetric_support(const struct ncclComm *c);
/* Whether NCCL_RUNTIME_CONNECT defers the rings to the first collective. */
int sim_runtime_connect(void);

/* How two ranks of a communicator are connected. */
enum via { VIA_P2P_DIRECT, VIA_P2P_CUMEM, VIA_P2P_IPC, VIA_SHM, VIA_NET };
enum via sim_via(const struct ncclComm *c, int peer);

/* NCCL's algorithm and protocol indices (src/include/device.h). */
#define ALGO_TREE 0
#define ALGO_RING 1
#define PROTO_LL 0
#define PROTO_LL128 1
#define PROTO_SIMPLE 2
/* Function indices of ncclFuncStr (init.cc): the ones NCCL_ALGO names. */
enum func { F_BROADCAST, F_REDUCE, F_ALLGATHER, F_REDUCESCATTER, F_ALLREDUCE, F_OTHER };
/* The algorithm and protocol of a collective of `func`, as NCCL_ALGO and
 * NCCL_PROTO allow; ncclSuccess, or the release's refusal when they
 * allow none (with its WARN). */
void sim_debug_init(void);
ncclResult_t sim_algo_proto(const struct ncclComm *c, enum func f, ncclDataType_t type, size_t bytes, int *algo,
                            int *proto);

#pragma GCC visibility pop
#endif
