/* NCCL's profiler plugin, as each release loads and drives it
 * (github.com/NVIDIA/nccl: src/misc/profiler.cc to 2.25,
 * src/plugin/profiler.cc and src/plugin/profiler/profiler_vN.cc from
 * 2.26; the descriptors of src/include/nccl_profiler.h to 2.25 and
 * src/include/plugin/profiler/profiler_vN.h from 2.26).
 *
 * Once per process, at the first communicator: dlopen of
 * NCCL_PROFILER_PLUGIN (unset, or `none` from 2.28: no plugin), then the
 * symbols the release played looks up, newest first:
 *
 *   2.23          ncclProfiler_v1
 *   2.24, 2.25    ncclProfiler_v2, v1
 *   2.26          v3 .. v1          2.27   v4 .. v1
 *   2.28          v5 .. v1          2.29 on v6 .. v1
 *
 * with the release's INIT lines (below). Every communicator then gets the
 * plugin's init with its version's arguments (v1-v3: context and mask;
 * v4: and name, commHash, nodes, ranks, rank, logger; v5-v6: commId
 * before the mask), one collective event per collective NCCL schedules
 * (startEvent, and stopEvent where the plugin gave a handle) where the
 * mask asks for ncclProfileColl, and finalize when it is destroyed or
 * aborted. A communicator of one rank gets no event (NCCL copies, as for
 * its TUNING line).
 *
 * The event carries the algorithm and protocol of the simulation's rule
 * (sim_algo_proto, the same the TUNING lines print), 1 channel up to
 * 64 KiB and 2 above (the TUNING lines' channel{Lo..Hi}), 16 warps, the
 * communicator's commId hash, and a sequence number per function (NCCL's
 * comm->seqNumber[func]). The descriptors below are this simulation's
 * own declarations, laid out as NCCL's headers lay theirs: the offsets
 * are asserted against the headers' figures (the same the plugin's tests
 * check, profiler/src/abi.rs). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_sim.h"

#define PROFILE_COLL (1 << 1)

struct head8 {
    uint8_t type;
    void *parent;
    int rank;
};
struct head64 {
    uint64_t type;
    void *parent;
    int rank;
};
struct coll_v1 {
    const char *name;
    uint64_t comm_hash, seq;
    uint8_t func;
    const void *send;
    void *recv;
    size_t count;
    int root;
    uint8_t datatype;
    uint32_t op;
    size_t traffic_bytes;
    uint8_t nchannels, nwarps, algo, proto;
    int is_collnet, is_nvls;
};
struct coll_v2 { /* v3 has no traffic_bytes */
    const char *name;
    uint64_t comm_hash, seq;
    const char *func;
    const void *send;
    void *recv;
    size_t count;
    int root;
    const char *datatype;
    size_t traffic_bytes;
    uint8_t nchannels, nwarps;
    const char *algo, *proto;
};
struct coll_v3 {
    const char *name;
    uint64_t comm_hash, seq;
    const char *func;
    const void *send;
    void *recv;
    size_t count;
    int root;
    const char *datatype;
    uint8_t nchannels, nwarps;
    const char *algo, *proto;
};
struct coll_v4 { /* parent_group: v5 and v6 (v4's ends before it) */
    uint64_t seq;
    const char *func;
    const void *send;
    void *recv;
    size_t count;
    int root;
    const char *datatype;
    uint8_t nchannels, nwarps;
    const char *algo, *proto;
    void *parent_group;
};
struct descr_v1 { struct head8 h; struct coll_v1 coll; };
struct descr_v2 { struct head8 h; struct coll_v2 coll; };
struct descr_v3 { struct head8 h; struct coll_v3 coll; };
struct descr_v4 { struct head8 h; struct coll_v4 coll; };
struct descr_v5 { struct head64 h; struct coll_v4 coll; };

/* Offsets of NCCL's headers (x86_64): profiler_v1.h .. profiler_v6.h of
 * v2.30.7-1, the same as each version's first release. */
#define AT(s, f, n) _Static_assert(offsetof(struct s, f) == (n), #s "." #f)
AT(descr_v1, h.rank, 16); AT(descr_v1, coll, 24); AT(descr_v1, coll.comm_hash, 32); AT(descr_v1, coll.func, 48);
AT(descr_v1, coll.count, 72); AT(descr_v1, coll.datatype, 84); AT(descr_v1, coll.nchannels, 104);
AT(descr_v1, coll.nwarps, 105); AT(descr_v1, coll.algo, 106); AT(descr_v1, coll.proto, 107);
AT(descr_v2, coll.func, 48); AT(descr_v2, coll.datatype, 88); AT(descr_v2, coll.nchannels, 104);
AT(descr_v2, coll.algo, 112); AT(descr_v2, coll.proto, 120);
AT(descr_v3, coll.datatype, 88); AT(descr_v3, coll.nchannels, 96); AT(descr_v3, coll.algo, 104);
AT(descr_v3, coll.proto, 112);
AT(descr_v4, coll.seq, 24); AT(descr_v4, coll.func, 32); AT(descr_v4, coll.count, 56); AT(descr_v4, coll.datatype, 72);
AT(descr_v4, coll.nchannels, 80); AT(descr_v4, coll.nwarps, 81); AT(descr_v4, coll.algo, 88); AT(descr_v4, coll.proto, 96);
AT(descr_v5, h.rank, 16); AT(descr_v5, coll.seq, 24); AT(descr_v5, coll.algo, 88); AT(descr_v5, coll.parent_group, 104);

typedef ncclResult_t (*init_v1_t)(void **ctx, int *mask);
typedef ncclResult_t (*init_v4_t)(void **ctx, int *mask, const char *name, uint64_t hash, int nnodes, int nranks,
                                  int rank, void *logger);
typedef ncclResult_t (*init_v5_t)(void **ctx, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                                  int rank, void *logger);
/* ncclProfiler_vN_t: the same six pointers in every version */
struct table {
    const char *name;
    void *init;
    ncclResult_t (*start)(void *ctx, void **handle, void *descr);
    ncclResult_t (*stop)(void *handle);
    void *record_state;
    ncclResult_t (*finalize)(void *ctx);
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded; /* 0 not tried, 1 loaded, -1 failed */
static int version;
static const struct table *plugin;

/* The newest version release `v` looks up. */
static int newest(int v)
{
    return v < 22304 ? 0 : v < 22403 ? 1 : v < 22600 ? 2 : v < 22703 ? 3 : v < 22803 ? 4 : v < 22902 ? 5 : 6;
}

/* The release's line for version `n` found (`name`: the plugin's), or
 * for it missing (found 0). */
static void log_lookup(int v, int n, int found, const char *name, const char *path)
{
    unsigned long sub = SUB_INIT | SUB_ENV;
    if (v < 22403) {
        /* 2.23 says only a failure */
        if (!found)
            sim_info(sub, "PROFILER/Plugin: failed to find ncclProfiler_v1.");
    } else if (v < 22600) {
        if (found)
            sim_info(sub, "PROFILER/Plugin: loaded ncclProfiler_v%d.", n);
        else
            sim_info(sub, "PROFILER/Plugin: failed to find ncclProfiler_v%d.", n);
    } else if (v < 22803) {
        if (found)
            sim_info(sub, "PROFILER/Plugin: loaded %s", name);
        else
            sim_info(sub, "PROFILER/Plugin: failed to find ncclProfiler_v%d%s", n, n == 1 ? "." : "");
    } else if (found) {
        sim_info(SUB_INIT, "PROFILER/Plugin: Loaded %s (v%d)", name, n);
        sim_info(SUB_INIT, "Successfully loaded external profiler plugin %s", path);
    }
}

/* The plugin, loaded once per process as the release played does. */
static const struct table *load(void)
{
    pthread_mutex_lock(&lock);
    if (!loaded) {
        int v = sim_version(), top = newest(v);
        const char *path = getenv("NCCL_PROFILER_PLUGIN");
        loaded = -1;
        if (v >= 22304 && path && *path && !(v >= 22803 && strcasecmp(path, "none") == 0)) {
            if (v >= 22803)
                sim_info(SUB_ENV, "NCCL_PROFILER_PLUGIN set by environment to %s", path);
            else
                sim_info(SUB_INIT | SUB_ENV, "PROFILER/Plugin: Plugin name set by env to %s", path);
            void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            for (int n = top; lib && n >= 1 && !plugin; n--) {
                char sym[32];
                snprintf(sym, sizeof sym, "ncclProfiler_v%d", n);
                plugin = dlsym(lib, sym);
                log_lookup(v, n, plugin != NULL, plugin ? plugin->name : "", path);
                if (plugin)
                    version = n;
            }
            if (plugin)
                loaded = 1;
            else if (lib)
                dlclose(lib);
        }
    }
    const struct table *p = loaded == 1 ? plugin : NULL;
    pthread_mutex_unlock(&lock);
    return p;
}

void sim_profiler_init(struct ncclComm *c)
{
    const struct table *p = load();
    if (!p)
        return;
    int mask = 0;
    void *ctx = NULL;
    ncclResult_t rc;
    if (version >= 5)
        rc = ((init_v5_t)p->init)(&ctx, c->comm_id, &mask, NULL, c->nnodes, c->nranks, c->rank, NULL);
    else if (version == 4)
        rc = ((init_v4_t)p->init)(&ctx, &mask, NULL, c->comm_id, c->nnodes, c->nranks, c->rank, NULL);
    else
        rc = ((init_v1_t)p->init)(&ctx, &mask);
    if (rc != ncclSuccess)
        return;
    c->profiler_ctx = ctx;
    c->profiler_mask = mask;
    c->profiler_on = 1;
}

static const char *const func_text[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
static const char *const algo_text[] = {"TREE", "RING"};
static const char *const proto_text[] = {"LL", "LL128", "SIMPLE"};
static const char *const type_text[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                        "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                        "ncclFloat64", "ncclBfloat16"};

void sim_profiler_coll(struct ncclComm *c, int func, const void *send, void *recv, size_t count,
                       ncclDataType_t type, int root, int algo, int proto, size_t bytes)
{
    if (!c->profiler_on || !(c->profiler_mask & PROFILE_COLL) || c->nranks == 1 || func < 0 || func > 4 ||
        algo < 0 || algo > 1 || proto < 0 || proto > 2)
        return;
    const struct table *p = plugin;
    uint64_t seq = c->coll_seq[func]++;
    uint8_t nch = bytes <= 65536 ? 1 : 2, warps = 16;
    const char *tn = (unsigned)type < sizeof type_text / sizeof type_text[0] ? type_text[type] : "Unknown";
    void *handle = NULL;
    union {
        struct descr_v1 v1;
        struct descr_v2 v2;
        struct descr_v3 v3;
        struct descr_v4 v4;
        struct descr_v5 v5;
    } d;
    memset(&d, 0, sizeof d);
    if (version == 1)
        d.v1 = (struct descr_v1){{PROFILE_COLL, NULL, c->rank},
                                 {NULL, c->comm_id, seq, (uint8_t)func, send, recv, count, root, (uint8_t)type, 0,
                                  bytes, nch, warps, (uint8_t)algo, (uint8_t)proto, 0, 0}};
    else if (version == 2)
        d.v2 = (struct descr_v2){{PROFILE_COLL, NULL, c->rank},
                                 {NULL, c->comm_id, seq, func_text[func], send, recv, count, root, tn, bytes, nch,
                                  warps, algo_text[algo], proto_text[proto]}};
    else if (version == 3)
        d.v3 = (struct descr_v3){{PROFILE_COLL, NULL, c->rank},
                                 {NULL, c->comm_id, seq, func_text[func], send, recv, count, root, tn, nch, warps,
                                  algo_text[algo], proto_text[proto]}};
    else if (version == 4)
        d.v4 = (struct descr_v4){{PROFILE_COLL, NULL, c->rank},
                                 {seq, func_text[func], send, recv, count, root, tn, nch, warps, algo_text[algo],
                                  proto_text[proto], NULL}};
    else
        d.v5 = (struct descr_v5){{PROFILE_COLL, NULL, c->rank},
                                 {seq, func_text[func], send, recv, count, root, tn, nch, warps, algo_text[algo],
                                  proto_text[proto], NULL}};
    if (p->start(c->profiler_ctx, &handle, &d) == ncclSuccess && handle)
        p->stop(handle);
}

void sim_profiler_finalize(struct ncclComm *c)
{
    if (!c->profiler_on)
        return;
    c->profiler_on = 0;
    plugin->finalize(c->profiler_ctx);
}
