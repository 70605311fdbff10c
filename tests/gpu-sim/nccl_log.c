/*
 * NCCL's debug log as the release played (GPUSIM_NCCL_VERSION) writes it,
 * for the simulation's libnccl.so.2 (tests only): NCCL_DEBUG's levels,
 * NCCL_DEBUG_SUBSYS with each release's default mask, NCCL_DEBUG_FILE
 * (%h, %p), the `host:pid:tid [dev] NCCL INFO` prefix, WARN lines with
 * their file:line and (2.26.2 and later) timestamp, and the lines NCCL
 * writes while a communicator starts and runs, each in the format string
 * of the release played (docs/doctor-rules-research.md lists them per
 * release; the sources are cited line by line below). Releases after
 * 2.30.7 (whose sources were not read) write 2.30.7's lines.
 *
 * Differences from NCCL, on purpose: the file is opened for appending,
 * not truncated (ranks of several processes may share one name in a
 * test); the numbers NCCL's model computes (the TUNING line's time) are
 * the simulation's own.
 */
#define _GNU_SOURCE
#include "nccl_sim.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpusim.h"

int sim_version(void)
{
    const char *v = getenv("GPUSIM_NCCL_VERSION");
    return v && *v ? atoi(v) : NCCL_VERSION_CODE;
}

/* ------------------------------------------------------------------ */
/* The last error, process-wide as NCCL's ncclLastError (debug.cc). */

static char last_error[1024];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void sim_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&log_lock);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    pthread_mutex_unlock(&log_lock);
    va_end(ap);
}

const char *last_error_text(void) { return last_error; }

/* ------------------------------------------------------------------ */
/* Level, mask, file: read once per process, as debug.cc's ncclDebugInit. */

enum level { L_NONE, L_VERSION, L_WARN, L_INFO, L_ABORT, L_TRACE };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static enum level debug_level;
static unsigned long debug_mask;
static FILE *debug_file;
static char hostname[256];

/* The default NCCL_DEBUG_SUBSYS: INIT up to 2.16.2, INIT,ENV up to
 * 2.22.3, INIT,BOOTSTRAP,ENV from 2.23.4 (debug.cc of each release). */
static unsigned long default_mask(int v)
{
    if (v < 21605)
        return SUB_INIT;
    if (v < 22304)
        return SUB_INIT | SUB_ENV;
    return SUB_INIT | SUB_BOOTSTRAP | SUB_ENV;
}

static const struct {
    const char *name;
    unsigned long mask;
} subsystems[] = {
    {"INIT", SUB_INIT},   {"COLL", SUB_COLL},   {"P2P", SUB_P2P},     {"SHM", SUB_SHM},
    {"NET", SUB_NET},     {"GRAPH", SUB_GRAPH}, {"TUNING", SUB_TUNING}, {"ENV", SUB_ENV},
    {"ALLOC", SUB_ALLOC}, {"CALL", SUB_CALL},   {"PROXY", SUB_PROXY}, {"NVLS", SUB_NVLS},
    {"BOOTSTRAP", SUB_BOOTSTRAP}, {"REG", SUB_REG}, {"ALL", SUB_ALL},
};

/* NCCL_DEBUG_SUBSYS: a comma list, `^` inverting it (v2.29.7-1
 * src/debug.cc:93-140). */
static unsigned long parse_mask(const char *text, unsigned long dflt)
{
    if (!text)
        return dflt;
    int invert = text[0] == '^';
    unsigned long mask = invert ? SUB_ALL : 0;
    char *copy = strdup(invert ? text + 1 : text), *save = NULL;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        for (size_t i = 0; i < sizeof subsystems / sizeof subsystems[0]; i++) {
            if (strcasecmp(t, subsystems[i].name) == 0)
                mask = invert ? mask & ~subsystems[i].mask : mask | subsystems[i].mask;
        }
    }
    free(copy);
    return mask;
}

static void debug_init(void)
{
    const char *level = getenv("NCCL_DEBUG");
    debug_level = !level                             ? L_NONE
                  : strcasecmp(level, "VERSION") == 0 ? L_VERSION
                  : strcasecmp(level, "WARN") == 0    ? L_WARN
                  : strcasecmp(level, "INFO") == 0    ? L_INFO
                  : strcasecmp(level, "ABORT") == 0   ? L_ABORT
                  : strcasecmp(level, "TRACE") == 0   ? L_TRACE
                                                      : L_NONE;
    debug_mask = parse_mask(getenv("NCCL_DEBUG_SUBSYS"), default_mask(sim_version()));
    /* getHostName(.., '.'): up to the first dot; '%' and '/' become '-' */
    gethostname(hostname, sizeof hostname - 1);
    hostname[strcspn(hostname, ".")] = 0;
    for (char *h = hostname; *h; h++)
        if (*h == '%' || *h == '/')
            *h = '-';
    debug_file = stdout;
    const char *file = getenv("NCCL_DEBUG_FILE");
    if (debug_level <= L_VERSION || !file)
        return;
    char path[4096] = "";
    size_t n = 0;
    for (size_t i = 0; file[i] && n + 64 < sizeof path; i++) {
        if (file[i] == '%' && file[i + 1] == 'h') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%s", hostname);
            i++;
        } else if (file[i] == '%' && file[i + 1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%d", (int)getpid());
            i++;
        } else if (file[i] == '%' && file[i + 1] == '%') {
            path[n++] = '%';
            i++;
        } else {
            path[n++] = file[i];
        }
        path[n] = 0;
    }
    FILE *f = path[0] ? fopen(path, "a") : NULL;
    if (f) {
        setlinebuf(f);
        debug_file = f;
    }
}

/* NCCL's debug init, at a communicator's creation at the latest: the log
 * file exists (and stays open) from then on, before any line of it. */
void sim_debug_init(void)
{
    pthread_once(&once, debug_init);
}

/* One line: the prefix of its level, then the message (debug.cc
 * ncclDebugLog: `host:pid:tid [dev] NCCL INFO msg`; WARN: a newline
 * first, the timestamp (2.26.2 and later, NCCL_DEBUG_TIMESTAMP_LEVELS'
 * default), then `host:pid:tid [dev] file:line NCCL WARN msg`). */
static void emit(enum level lv, unsigned long sub, const char *file_line, const char *fmt, va_list ap)
{
    pthread_once(&once, debug_init);
    if (debug_level < lv || !(sub & debug_mask))
        return;
    char msg[1024], stamp[40] = "";
    vsnprintf(msg, sizeof msg, fmt, ap);
    int dev = gpusim_current_device();
    int tid = (int)syscall(SYS_gettid), pid = (int)getpid();
    if (lv == L_WARN && sim_version() >= 22602) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "[%F %T] ", &tm);
    }
    pthread_mutex_lock(&log_lock);
    if (lv == L_WARN)
        fprintf(debug_file, "\n%s%s:%d:%d [%d] %s NCCL WARN %s\n", stamp, hostname, pid, tid, dev < 0 ? 0 : dev,
                file_line, msg);
    else
        fprintf(debug_file, "%s:%d:%d [%d] NCCL INFO %s\n", hostname, pid, tid, dev < 0 ? 0 : dev, msg);
    fflush(debug_file);
    pthread_mutex_unlock(&log_lock);
}

void sim_info(unsigned long sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(L_INFO, sub, NULL, fmt, ap);
    va_end(ap);
}

void sim_warn(const char *file_line, const char *fmt, ...)
{
    va_list ap, copy;
    va_start(ap, fmt);
    va_copy(copy, ap);
    pthread_mutex_lock(&log_lock);
    vsnprintf(last_error, sizeof last_error, fmt, copy);
    pthread_mutex_unlock(&log_lock);
    va_end(copy);
    emit(L_WARN, SUB_ALL, file_line, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ */
/* The lines of a communicator's life, per release. */

/* "NCCL version 2.x.y+cudaA.B" (init.cc showVersion), once per process
 * at the start of a communicator's initialisation: up to 2.21.5 by rank 0,
 * a bare printf to standard output at NCCL_DEBUG=VERSION and above (and
 * an INFO line into NCCL_DEBUG_FILE) (v2.21.5-1 src/init.cc:473-482,
 * 1770); from 2.22.3 by any rank at INFO, by rank 0 at VERSION or WARN,
 * as an INFO line, or bare at VERSION and WARN (v2.22.3-1
 * src/init.cc:493-499, 1635-1637; v2.30.7-1 src/init.cc:2491-2494). */
void log_version(int rank)
{
    static int shown;
    pthread_once(&once, debug_init);
    int v = sim_version(), cuda = 12090;
    int show = v < 22203 ? rank == 0 && debug_level >= L_VERSION
                         : debug_level > L_WARN || (debug_level != L_NONE && rank == 0);
    if (!show || __atomic_exchange_n(&shown, 1, __ATOMIC_SEQ_CST))
        return;
    char text[96];
    snprintf(text, sizeof text, "NCCL version %d.%d.%d+cuda%d.%d", v / 10000, v % 10000 / 100, v % 100,
             cuda / 1000, cuda % 1000 / 10);
    if (v < 22203) {
        printf("%s\n", text);
        fflush(stdout);
        if (debug_file != stdout)
            sim_info(SUB_ALL, "%s", text);
    } else if (debug_level == L_VERSION || debug_level == L_WARN) {
        pthread_mutex_lock(&log_lock);
        fprintf(debug_file, "%s\n", text);
        fflush(debug_file);
        pthread_mutex_unlock(&log_lock);
    } else {
        sim_info(SUB_ALL, "%s", text);
    }
}

/* Once per process: the network plugins' lines (no HCA in the
 * simulation: IB finds none, sockets carry NET) and the communicator's
 * own ones. */
void log_init_start(const struct ncclComm *c)
{
    static int plugins;
    if (!__atomic_exchange_n(&plugins, 1, __ATOMIC_SEQ_CST)) {
        /* transport/net_ib.cc "NET/IB : No device found." (every release);
         * transport/net_socket.cc "NET/Socket : Using%s" */
        sim_info(SUB_INIT | SUB_NET, "NET/IB : No device found.");
        sim_info(SUB_INIT | SUB_NET, "NET/Socket : Using [0]gpusim0:127.0.0.1<0>");
    }
    /* init.cc "Using network %s" (2.6.4 to 2.30.7) */
    sim_info(SUB_INIT, "Using network Socket");
    /* init.cc, 2.20.3 and later (v2.30.7-1 src/init.cc: "comm %p rank %d
     * nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d") */
    if (sim_version() >= 22003)
        sim_info(SUB_INIT, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d", (void *)c,
                 c->rank, c->nranks, c->nnodes, c->local_ranks, c->local_rank, 0);
}

/* The channel count line (init.cc): 2.14 to 2.16 without NVLS, 2.17 to
 * 2.19 without CollNet, then all five; 2.21.5 to 2.30.7 print the ring
 * channel count as the CollNet one (v2.30.7-1 src/init.cc:1646-1647). The
 * simulation has two channels of each kind. */
static void log_channel_counts(void)
{
    int v = sim_version(), ch = 2;
    if (v < 21701)
        sim_info(SUB_INIT, "%d coll channels, %d p2p channels, %d p2p channels per peer", ch, ch, ch);
    else if (v < 22003)
        sim_info(SUB_INIT, "%d coll channels, %d nvls channels, %d p2p channels, %d p2p channels per peer", ch, 0,
                 ch, ch);
    else
        sim_info(SUB_INIT,
                 "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p channels per peer",
                 ch, v < 22105 ? 0 : ch, 0, ch, ch);
}

/* "Symmetric memory is not supported. ..." (init.cc, 2.29.2 and later)
 * where the communicator has none: v2.29.2-1 src/init.cc:1443-1445,
 * v2.29.7-1 src/init.cc:1478-1480, v2.30.7-1 src/init.cc:1678-1682. The
 * simulation has no GIN and no fused NIC; cuMem GDR follows cuMem. */
static void log_symmetric(const struct ncclComm *c)
{
    int v = sim_version(), cumem = sim_cumem();
    if (v < 22902 || c->symmetric)
        return;
    if (v < 22907)
        sim_info(SUB_INIT, "Symmetric memory is not supported. cuMemEnable %d, ginSupport %d, globalNicFused %d",
                 cumem, 0, 0);
    else if (v < 23007)
        sim_info(SUB_INIT,
                 "Symmetric memory is not supported. cuMemEnable %d, globalGinSupport %d, globalNicFused %d "
                 "cuMemGdrSupport %d",
                 cumem, 0, 0, cumem);
    else
        sim_info(SUB_INIT, "Symmetric memory is not supported. cuMemEnable %d, globalGinSupport %d, cuMemGdrSupport %d",
                 cumem, 0, cumem);
}

/* The end of an initialisation (init.cc "... - Init COMPLETE"), per
 * release: 2.14-2.15 `comm %p rank %d nranks %d cudaDev %d busId %lx`,
 * 2.16-2.18.1 with `commId 0x%llx`, 2.18.3-2.20.5 with `nvmlDev %d`,
 * 2.21.5-2.22.3 led by `ncclCommInitRank` or `ncclCommSplit`, 2.23.4 and
 * later by the entry point's name (job->funcName); splits name their
 * parent, color and key (2.24.3-2.28.9 `splitCount`, 2.29.2 and later
 * `childCount`). */
void log_init_complete(const struct ncclComm *c, const char *fn, const struct ncclComm *parent, int color, int key)
{
    int v = sim_version();
    long bus = (long)(0x10 + c->device) << 12;
    log_channel_counts();
    log_symmetric(c);
    const char *split_count = v < 22902 ? "splitCount" : "childCount";
    if (v < 21600)
        sim_info(SUB_INIT, "comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE", (void *)c, c->rank,
                 c->nranks, c->device, bus);
    else if (v < 21803)
        sim_info(SUB_INIT, "comm %p rank %d nranks %d cudaDev %d busId %lx commId 0x%llx - Init COMPLETE",
                 (void *)c, c->rank, c->nranks, c->device, bus, c->comm_id);
    else if (v < 22105)
        sim_info(SUB_INIT,
                 "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",
                 (void *)c, c->rank, c->nranks, c->device, c->device, bus, c->comm_id);
    else if (parent && v < 22304)
        sim_info(SUB_INIT,
                 "ncclCommSplit comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p color %d key "
                 "%d commId 0x%llx - Init COMPLETE",
                 (void *)c, c->rank, c->nranks, c->device, c->device, bus, (void *)parent, color, key, c->comm_id);
    else if (v < 22304)
        sim_info(SUB_INIT,
                 "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - "
                 "Init COMPLETE",
                 (void *)c, c->rank, c->nranks, c->device, c->device, bus, c->comm_id);
    else if (parent && v < 22403)
        sim_info(SUB_INIT,
                 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p color %d key %d - Init "
                 "COMPLETE",
                 fn, (void *)c, c->rank, c->nranks, c->device, c->device, bus, (void *)parent, color, key);
    else if (parent)
        sim_info(SUB_INIT,
                 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p %s %d color %d key %d - "
                 "Init COMPLETE",
                 fn, (void *)c, c->rank, c->nranks, c->device, c->device, bus, (void *)parent, split_count,
                 parent->splits, color, key);
    else
        sim_info(SUB_INIT, "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",
                 fn, (void *)c, c->rank, c->nranks, c->device, c->device, bus, c->comm_id);
}

/* One connection's line, from `from` to `to` on channel `ch`, connection
 * index `conn` (0 rings, 1 point-to-point), as this rank sees it (a NET
 * connection's sender writes `[send]`, its receiver `[receive]`). The
 * brackets hold the PCI bus id up to 2.18.1 and the device from 2.18.3. */
static void log_connection(const struct ncclComm *c, int ch, int conn, int from, int to, int receiving)
{
    int v = sim_version(), peer = receiving ? from : to;
    int dev_from = atomic_load(&c->seg->dev[from]), dev_to = atomic_load(&c->seg->dev[to]);
    enum via via = sim_via(c, peer);
    if (v < 21803) {
        long bf = (long)(0x10 + dev_from) << 12, bt = (long)(0x10 + dev_to) << 12;
        if (via == VIA_NET)
            sim_info(SUB_INIT | SUB_NET, "Channel %02d/%d : %d[%lx] -> %d[%lx] [%s] via NET/Socket/0", ch, conn,
                     from, bf, to, bt, receiving ? "receive" : "send");
        else if (via == VIA_SHM)
            sim_info(SUB_INIT | SUB_SHM, "Channel %02d : %d[%lx] -> %d[%lx] via SHM/direct/direct", ch, from, bf, to,
                     bt);
        else if (via == VIA_P2P_DIRECT)
            sim_info(SUB_INIT | SUB_P2P, "Channel %02d/%01d : %d[%lx] -> %d[%lx] via P2P/direct pointer", ch, conn,
                     from, bf, to, bt);
        else
            sim_info(SUB_INIT | SUB_P2P, "Channel %02d/%01d : %d[%lx] -> %d[%lx] via P2P/IPC", ch, conn, from, bf, to,
                     bt);
        return;
    }
    switch (via) {
    case VIA_NET:
        /* transport/net.cc: 2.18.3-2.25.1 two trailing %s, 2.26.2 and
         * later three; no GDR and no sharing over sockets: all empty */
        sim_info(SUB_INIT | SUB_NET, "Channel %02d/%d : %d[%d] -> %d[%d] [%s] via NET/Socket/0", ch, conn, from,
                 dev_from, to, dev_to, receiving ? "receive" : "send");
        break;
    case VIA_SHM:
        /* transport/shm.cc: `SHM/%s/%s` up to 2.30.4, `SHM/direct` in 2.30.7 */
        sim_info(SUB_INIT | SUB_SHM, "Channel %02d : %d[%d] -> %d[%d] via SHM/direct%s", ch, from, dev_from, to, dev_to,
                 v < 23007 ? "/direct" : "");
        break;
    case VIA_P2P_DIRECT:
        sim_info(SUB_INIT | SUB_P2P, "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/direct pointer", ch, conn, from,
                 dev_from, to, dev_to);
        break;
    case VIA_P2P_CUMEM:
        /* transport/p2p.cc: `P2P/CUMEM%s%s` 2.18.3-2.19.4, `P2P/%s%s%s`
         * (MNNVL or CUMEM) from 2.20.3 (v2.30.7-1 src/transport/p2p.cc:423) */
        sim_info(SUB_INIT | SUB_P2P, "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/CUMEM", ch, conn, from, dev_from,
                 to, dev_to);
        break;
    case VIA_P2P_IPC:
        sim_info(SUB_INIT | SUB_P2P, "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/IPC", ch, conn, from, dev_from, to,
                 dev_to);
        break;
    }
}

/* The rings' lines (rank order, two channels): each rank's send
 * connection to the next rank, and its receive from the previous one
 * where NET carries it; then "Connected all rings" (2.24.3 and later with
 * `, use ring PXN %d GDR %d`, transport/generic.cc) and "Connected all
 * trees". Written when the rings connect (nccl_sim.c connect_rings). */
void log_rings(const struct ncclComm *c)
{
    int n = c->nranks, me = c->rank;
    if (n > 1) {
        for (int ch = 0; ch < 2; ch++) {
            int next = (me + 1) % n, prev = (me + n - 1) % n;
            log_connection(c, ch, 0, me, next, 0);
            if (sim_via(c, prev) == VIA_NET)
                log_connection(c, ch, 0, prev, me, 1);
        }
    }
    if (sim_version() < 22403)
        sim_info(SUB_INIT, "Connected all rings");
    else
        sim_info(SUB_INIT, "Connected all rings, use ring PXN %d GDR %d", 0, 0);
    sim_info(SUB_INIT, "Connected all trees");
}

/* A point-to-point connection to `peer` (channel 0, connection index 1),
 * written when it connects (nccl_sim.c connect_peer). */
void log_p2p_connect(const struct ncclComm *c, int peer)
{
    log_connection(c, 0, 1, c->rank, peer, 0);
    if (sim_via(c, peer) == VIA_NET)
        log_connection(c, 0, 1, peer, c->rank, 1);
}

static const char *const algo_names[] = {"TREE", "RING"};
static const char *const proto_names[] = {"LL", "LL128", "SIMPLE"};

/* Rank 0's TUNING line per collective (enqueue.cc): none before 2.20.3
 * (commented out); `%ld Bytes -> Algo %d proto %d time %f` 2.20.3-2.22.3
 * (v2.22.3-1 src/enqueue.cc:1613); with `%s: ` in front 2.23.4 (v2.23.4-1
 * src/enqueue.cc:1855); `%s: %ld Bytes -> Algo %s proto %s
 * channel{Lo..Hi}={%d..%d}` from 2.24.3 (v2.30.7-1 src/enqueue.cc:822).
 * `bytes` is NCCL's count times the type's size. */
void log_tuning(const struct ncclComm *c, const char *func, size_t bytes, int algo, int proto)
{
    int v = sim_version();
    /* one rank: NCCL copies (ncclLaunchOneRank), choosing nothing */
    if (c->rank != 0 || c->nranks == 1 || v < 22003)
        return;
    /* the time is the simulation's, not NCCL's model */
    double time_us = 10.0 + (double)bytes / 1e4;
    if (v < 22304)
        sim_info(SUB_TUNING, "%ld Bytes -> Algo %d proto %d time %f", (long)bytes, algo, proto, time_us);
    else if (v < 22403)
        sim_info(SUB_TUNING, "%s: %ld Bytes -> Algo %d proto %d time %f", func, (long)bytes, algo, proto, time_us);
    else
        sim_info(SUB_TUNING, "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}", func, (long)bytes,
                 algo_names[algo], proto_names[proto], 0, bytes <= 65536 ? 0 : 1);
}
