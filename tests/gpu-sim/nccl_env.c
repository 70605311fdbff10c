/*
 * NCCL's own variables and the rules they drive, as the release played
 * (GPUSIM_NCCL_VERSION) reads and applies them, for the simulation's
 * libnccl.so.2 (tests only). Each rule cites the NCCL source line it
 * follows (github.com/NVIDIA/nccl, tag, src/FILE:LINE).
 *
 * Read: NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_NET, NCCL_ALGO and
 * NCCL_PROTO (each release's syntax and refusals), NCCL_RUNTIME_CONNECT,
 * NCCL_COMM_BLOCKING (nccl_sim.c), NCCL_CUMEM_ENABLE, NCCL_WIN_ENABLE,
 * NCCL_LOCAL_REGISTER. The simulation's own switches: GPUSIM_NODE_RANKS
 * (world rank r is on simulated node r / K: the node a communicator spans
 * decides its transports and its symmetric memory) and GPUSIM_NO_CUDA_P2P
 * (GPUs without CUDA P2P).
 */
#define _GNU_SOURCE
#include "nccl_sim.h"

#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ */
/* Numeric parameters (misc/param.cc): strtoll with base 0, read once per
 * process; the first read writes "%s set by environment to %lld." (ALL up
 * to 2.16.2, ENV from 2.16.5: v2.30.7-1 src/misc/param.cc:91-101). */

#define MAX_PARAMS 32
static struct {
    const char *name;
    long long value;
} params[MAX_PARAMS];
static int nparams;
static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;

long long sim_param(const char *name, long long dflt)
{
    pthread_mutex_lock(&params_lock);
    for (int i = 0; i < nparams; i++) {
        if (strcmp(params[i].name, name) == 0) {
            long long v = params[i].value;
            pthread_mutex_unlock(&params_lock);
            return v;
        }
    }
    long long value = dflt;
    const char *text = getenv(name);
    int shown = 0;
    if (text && *text) {
        errno = 0;
        value = strtoll(text, NULL, 0);
        if (errno)
            value = dflt;
        else
            shown = 1;
    }
    if (nparams < MAX_PARAMS)
        params[nparams++] = (typeof(params[0])){name, value};
    pthread_mutex_unlock(&params_lock);
    if (shown)
        sim_info(sim_version() < 21605 ? SUB_ALL : SUB_ENV, "%s set by environment to %lld.", name, value);
    return value;
}

/* ncclCuMemEnable(): NCCL_CUMEM_ENABLE, whose default is 0 in 2.18 and
 * -2 ("when supported": a driver of CUDA 12.0 or later) from 2.19
 * (v2.29.7-1 src/misc/cudawrap.cc:16, 24-47, 49-53); no cuMem before
 * 2.18. */
int sim_cumem(void)
{
    int v = sim_version();
    if (v < 21801)
        return 0;
    long long p = sim_param("NCCL_CUMEM_ENABLE", v < 21901 ? 0 : -2);
    if (p >= 0)
        return p != 0;
    int driver = 0;
    cuDriverGetVersion(&driver);
    return p == -2 && driver >= 12000;
}

/* NCCL_P2P_DISABLE=1 sets the P2P level to LOC: no P2P between GPUs
 * (v2.30.7-1 src/graph/paths.cc:244-253); read once, with its own line. */
static pthread_once_t p2p_once = PTHREAD_ONCE_INIT;
static int p2p_off;

static void read_p2p_disable(void)
{
    const char *s = getenv("NCCL_P2P_DISABLE");
    if (!s)
        return;
    int d = (int)strtol(s, NULL, 0);
    p2p_off = d == 1;
    if (p2p_off)
        sim_info(SUB_ALL, "%s set by environment to %d", "NCCL_P2P_DISABLE", d);
}

int sim_p2p_disabled(void)
{
    pthread_once(&p2p_once, read_p2p_disable);
    return p2p_off;
}

int sim_no_cuda_p2p(void)
{
    const char *s = getenv("GPUSIM_NO_CUDA_P2P");
    return s && strcmp(s, "1") == 0;
}

int sim_node_of(int rank)
{
    const char *s = getenv("GPUSIM_NODE_RANKS");
    int k = s && *s ? atoi(s) : 0;
    return k > 0 ? rank / k : 0;
}

/* NCCL_RUNTIME_CONNECT (2.22.3 and later, default 1): on cuMem, the rings
 * connect at the first collective instead of at init (v2.30.7-1
 * src/init.cc:1552). */
int sim_runtime_connect(void)
{
    if (sim_version() < 22203)
        return 0;
    return sim_cumem() && sim_param("NCCL_RUNTIME_CONNECT", 1) != 0;
}

/* ------------------------------------------------------------------ */
/* NCCL_ALGO and NCCL_PROTO (graph/tuning.cc, read at init). Up to 2.23.4
 * a comma list, `^` excluding, unknown names ignored (v2.23.4-1
 * src/graph/tuning.cc:34-52). From 2.24.3 `[func:]list;func:list...`,
 * where every entry but the first needs a function, and an unknown
 * function or name is refused: WARN and ncclInvalidUsage, so the
 * communicator fails to start (v2.30.7-1 src/graph/tuning.cc:55-133). */

static const char *const func_names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
static const char *const algo_names[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
static const char *const proto_names[] = {"LL", "LL128", "Simple"};
#define NFUNCS 5
#define NALGOS 7
#define NPROTOS 3

/* A WARN's file:line per release: the first entry whose `until` (the
 * NCCL_VERSION_CODE of the next release that moved it) is above `v`. */
struct at {
    int until;
    const char *at;
};

static const char *at_for(int v, const struct at *table, size_t n)
{
    size_t i = 0;
    while (i + 1 < n && v >= table[i].until)
        i++;
    return table[i].at;
}
#define AT(v, table) at_for(v, table, sizeof table / sizeof table[0])

/* The refusal's file:line (graph/tuning.cc parseList, 2.24.3 and later). */
static const char *parse_warn_at(int v)
{
    static const struct at table[] = {
        {22703, "graph/tuning.cc:99"},
        {22803, "graph/tuning.cc:103"},
        {22907, "graph/tuning.cc:104"},
        {23007, "graph/tuning.cc:105"},
        {1 << 30, "graph/tuning.cc:109"},
    };
    return AT(v, table);
}

/* Fills enable[f * n + e] (1 allowed) from `text`; ncclSuccess or the
 * refusal. `elems` has `n` names; `algos`: the names include PAT from
 * 2.23.4 only. */
static ncclResult_t parse_list(const char *text, const char *const *elems, int n, int *enable)
{
    int v = sim_version();
    if (v < 22403) {
        const char *s = text;
        int def = s[0] == '^', set = !def;
        if (def)
            s++;
        for (int e = 0; e < n; e++)
            enable[e] = def;
        char *copy = strdup(s), *save = NULL;
        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
            for (int e = 0; e < n; e++)
                if (strcasecmp(t, elems[e]) == 0)
                    enable[e] = set;
        free(copy);
        for (int f = 1; f < NFUNCS; f++)
            memcpy(enable + f * n, enable, (size_t)n * sizeof *enable);
        return ncclSuccess;
    }
    ncclResult_t rc = ncclSuccess;
    char *full = strdup(text), *save_full = NULL;
    int first = 1;
    for (char *entry = full ? strtok_r(full, ";", &save_full) : NULL; entry && rc == ncclSuccess;
         entry = strtok_r(NULL, ";", &save_full), first = 0) {
        char *colon = strchr(entry, ':'), *prefix = NULL, *list = entry;
        if (colon) {
            *colon = 0;
            prefix = entry;
            list = colon + 1;
        } else if (!first) {
            sim_warn(parse_warn_at(v), "All entries except the first must have a prefix: \"%s\"", text);
            rc = ncclInvalidUsage;
            break;
        }
        int unset = list[0] == '^', set = !unset, found = 0;
        if (unset)
            list++;
        for (int f = 0; f < NFUNCS && rc == ncclSuccess; f++) {
            if (prefix && strcasecmp(prefix, func_names[f]) != 0)
                continue;
            found = 1;
            for (int e = 0; e < n; e++)
                enable[f * n + e] = unset;
            char *copy = strdup(list), *save = NULL;
            for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
                int e = 0;
                while (e < n && strcasecmp(t, elems[e]) != 0)
                    e++;
                if (e == n) {
                    sim_warn(parse_warn_at(v), "Unrecognized element token \"%s\" when parsing \"%s\"", t, text);
                    rc = ncclInvalidUsage;
                    break;
                }
                enable[f * n + e] = set;
            }
            free(copy);
        }
        if (rc == ncclSuccess && !found) {
            sim_warn(parse_warn_at(v), "Unrecognized prefix token \"%s\" when parsing \"%s\"", prefix, text);
            rc = ncclInvalidUsage;
        }
    }
    free(full);
    return rc;
}

/* The enabled algorithms and protocols per function, from the
 * environment (all enabled where unset), with the ENV lines NCCL writes
 * (v2.30.7-1 src/graph/tuning.cc:455, 460). */
static ncclResult_t read_algo_proto(int *algos, int *protos, int log)
{
    int nalgos = sim_version() < 22304 ? NALGOS - 1 : NALGOS;
    for (int i = 0; i < NFUNCS * NALGOS; i++)
        algos[i] = 1;
    for (int i = 0; i < NFUNCS * NPROTOS; i++)
        protos[i] = 1;
    const char *proto = getenv("NCCL_PROTO"), *algo = getenv("NCCL_ALGO");
    ncclResult_t rc = ncclSuccess;
    if (proto) {
        if (log)
            sim_info(SUB_ENV, "NCCL_PROTO set by environment to %s", proto);
        rc = parse_list(proto, proto_names, NPROTOS, protos);
    }
    if (rc == ncclSuccess && algo) {
        if (log)
            sim_info(SUB_ENV, "NCCL_ALGO set by environment to %s", algo);
        int tmp[NFUNCS * NALGOS];
        rc = parse_list(algo, algo_names, nalgos, tmp);
        for (int f = 0; rc == ncclSuccess && f < NFUNCS; f++)
            for (int e = 0; e < NALGOS; e++)
                algos[f * NALGOS + e] = e < nalgos ? tmp[f * nalgos + e] : 0;
    }
    return rc;
}

/* NCCL_NET (init.cc, read into the config's netName): the simulation has
 * the internal Socket transport only (no HCA). Another name finds no
 * network: "Error: network %s not found." up to 2.26.6 (net.cc, then
 * plugin/net.cc), "Failed to initialize any NET plugin" from 2.27.3
 * (v2.30.7-1 src/plugin/net.cc:349), both ncclInvalidUsage. */
static ncclResult_t check_net(void)
{
    const char *net = getenv("NCCL_NET");
    if (!net || strcasecmp(net, "Socket") == 0)
        return ncclSuccess;
    int v = sim_version();
    static const struct at not_found[] = {
        {21701, "net.cc:290"}, {21901, "net.cc:285"}, {22003, "net.cc:372"}, {22105, "net.cc:518"},
        {22203, "net.cc:579"}, {22304, "net.cc:626"}, {22403, "net.cc:627"}, {22602, "net.cc:937"},
        {1 << 30, "plugin/net.cc:232"},
    };
    static const struct at any[] = {
        {22706, "plugin/net.cc:277"}, {22803, "plugin/net.cc:278"}, {22807, "plugin/net.cc:306"},
        {22902, "plugin/net.cc:379"}, {22907, "plugin/net.cc:402"}, {23003, "plugin/net.cc:326"},
        {23007, "plugin/net.cc:334"}, {1 << 30, "plugin/net.cc:349"},
    };
    if (v < 22703)
        sim_warn(AT(v, not_found), "Error: network %s not found.", net);
    else
        sim_warn(AT(v, any), "Failed to initialize any NET plugin");
    return ncclInvalidUsage;
}

_Static_assert(sizeof(((struct ncclComm *)0)->algos) == NFUNCS * NALGOS * sizeof(int), "algos per function");
_Static_assert(sizeof(((struct ncclComm *)0)->protos) == NFUNCS * NPROTOS * sizeof(int), "protos per function");

ncclResult_t sim_check_init_env(struct ncclComm *c)
{
    ncclResult_t rc = check_net();
    if (rc == ncclSuccess)
        rc = read_algo_proto(c->algos, c->protos, 1);
    const char *a = getenv("NCCL_ALGO"), *p = getenv("NCCL_PROTO");
    c->tuned = (a && *a) || (p && *p);
    return rc;
}

static const char *const type_names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                         "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                         "ncclFloat64", "ncclBfloat16"};

/* The simulation runs Ring and Tree only. With neither NCCL_ALGO nor
 * NCCL_PROTO set, a documented size rule and no model of NCCL's tuner
 * (docs/gpu-simulation.md): an AllReduce of `bytes` up to 64 KiB runs
 * Tree, anything else Ring; the protocol is LL up to 64 KiB, LL128 up to
 * 1 MiB, Simple above. With either set, among what they allow: AllReduce
 * takes Ring, else Tree; the other functions Ring; the protocol is Simple,
 * else LL128, else LL.
 * None allowed: "no algorithm/protocol available" (enqueue.cc), whose
 * text and code follow the release (v2.23.4-1 src/enqueue.cc:1848
 * ncclInternalError; v2.29.7-1 src/enqueue.cc:1971-1972 and v2.30.7-1
 * src/enqueue.cc:2063: ncclInvalidUsage where NCCL_ALGO or NCCL_PROTO is
 * set). */
ncclResult_t sim_algo_proto(const struct ncclComm *c, enum func f, ncclDataType_t type, size_t bytes, int *algo,
                            int *proto)
{
    const int *algos = c->algos, *protos = c->protos;
    if (!c->tuned) {
        *algo = f == F_ALLREDUCE && bytes <= 65536 ? ALGO_TREE : ALGO_RING;
        *proto = bytes <= 65536 ? PROTO_LL : bytes <= 1048576 ? PROTO_LL128 : PROTO_SIMPLE;
        return ncclSuccess;
    }
    int fi = f == F_OTHER ? F_ALLREDUCE : (int)f;
    *algo = algos[fi * NALGOS + ALGO_RING] ? ALGO_RING : (f == F_ALLREDUCE && algos[fi * NALGOS + ALGO_TREE]) ? ALGO_TREE : -1;
    *proto = protos[fi * NPROTOS + PROTO_SIMPLE] ? PROTO_SIMPLE
             : protos[fi * NPROTOS + PROTO_LL128] ? PROTO_LL128
             : protos[fi * NPROTOS + PROTO_LL]    ? PROTO_LL
                                                  : -1;
    if (*algo >= 0 && *proto >= 0)
        return ncclSuccess;
    int v = sim_version();
    static const struct at where[] = {
        {21501, "enqueue.cc:1076"}, {21505, "enqueue.cc:1154"}, {21602, "enqueue.cc:1155"},
        {21801, "enqueue.cc:1175"}, {21803, "enqueue.cc:1184"}, {21901, "enqueue.cc:1182"},
        {21904, "enqueue.cc:1196"}, {22003, "enqueue.cc:1211"}, {22105, "enqueue.cc:1492"},
        {22203, "enqueue.cc:1528"}, {22304, "enqueue.cc:1606"}, {22403, "enqueue.cc:1848"},
        {22501, "enqueue.cc:1656"}, {22602, "enqueue.cc:1666"}, {22603, "enqueue.cc:1728"},
        {22703, "enqueue.cc:1745"}, {22707, "enqueue.cc:1828"}, {22803, "enqueue.cc:1825"},
        {22807, "enqueue.cc:1842"}, {22902, "enqueue.cc:1859"}, {22907, "enqueue.cc:1966"},
        {23003, "enqueue.cc:1971"}, {23007, "enqueue.cc:1977"}, {1 << 30, "enqueue.cc:2063"},
    };
    const char *a = getenv("NCCL_ALGO"), *p = getenv("NCCL_PROTO");
    if (v < 22403) {
        sim_warn(AT(v, where), "Error : no algorithm/protocol available");
        return ncclInternalError;
    }
    char as[1100] = "", ps[1100] = "";
    if (a)
        snprintf(as, sizeof as, " NCCL_ALGO was set to %s.", a);
    if (p)
        snprintf(ps, sizeof ps, " NCCL_PROTO was set to %s.", p);
    const char *fn = f == F_OTHER ? "AllReduce" : func_names[f];
    const char *tn = (unsigned)type < sizeof type_names / sizeof type_names[0] ? type_names[type] : "Unknown";
    if (v < 23003)
        sim_warn(AT(v, where), "Error : no algorithm/protocol available for function %s with datatype %s.%s%s", fn,
                 tn, as, ps);
    else
        sim_warn(AT(v, where), "No algorithm/protocol available for function %s with datatype %s.%s%s", fn, tn, as,
                 ps);
    return c->tuned ? ncclInvalidUsage : ncclInternalError;
}

/* ------------------------------------------------------------------ */
/* Transports and symmetric memory. */

/* Between this rank and `peer`: another node goes over NET; on one node
 * P2P (same process: direct pointer; else cuMem or IPC) unless
 * NCCL_P2P_DISABLE or GPUs without CUDA P2P, then SHM unless
 * NCCL_SHM_DISABLE (transport/shm.cc canConnect), then NET. */
enum via sim_via(const struct ncclComm *c, int peer)
{
    struct seg *s = c->seg;
    if (atomic_load(&s->node[peer]) != atomic_load(&s->node[c->rank]))
        return VIA_NET;
    if (!sim_p2p_disabled() && !sim_no_cuda_p2p()) {
        if (atomic_load(&s->pid[peer]) == atomic_load(&s->pid[c->rank]))
            return VIA_P2P_DIRECT;
        return sim_cumem() ? VIA_P2P_CUMEM : VIA_P2P_IPC;
    }
    if (sim_param("NCCL_SHM_DISABLE", 0) == 0)
        return VIA_SHM;
    return VIA_NET;
}

/* comm->symmetricSupport (init.cc), per release:
 *   2.27.3-2.28.3: isAllDirectP2p && nNodes == 1 && NCCL_WIN_ENABLE &&
 *     cuMem (v2.27.3-1 src/init.cc:1250, v2.28.3-1 src/init.cc:1331),
 *     where isAllDirectP2p needs two local ranks or more, reachable by
 *     NCCL's P2P (v2.28.3-1 src/transport.cc:74-97);
 *   2.28.7-2.28.9: isAllCudaP2p && NCCL_WIN_ENABLE && cuMem (v2.28.7-1
 *     src/init.cc:1376);
 *   2.29.2 and later: the same, and GIN or one node (v2.29.2-1
 *     src/init.cc:1442), one NVLink domain from 2.29.7 (v2.29.7-1
 *     src/init.cc:1475-1476, v2.30.7-1 src/init.cc:1674-1675); the
 *     simulation has no GIN and no multi-node NVLink, so: one node.
 * isAllCudaP2p holds where the GPUs have CUDA P2P (GPUSIM_NO_CUDA_P2P). */
int sim_symmetric_support(const struct ncclComm *c)
{
    int v = sim_version();
    if (v < 22700)
        return 0;
    int win = sim_param("NCCL_WIN_ENABLE", 1) != 0, cumem = sim_cumem(), cuda_p2p = !sim_no_cuda_p2p();
    if (v < 22807) {
        int direct = c->local_ranks > 1 && cuda_p2p && !sim_p2p_disabled();
        return direct && c->nnodes == 1 && win && cumem;
    }
    if (v < 22902)
        return cuda_p2p && win && cumem;
    return cuda_p2p && win && cumem && c->nnodes == 1;
}
