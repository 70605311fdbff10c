#!/usr/bin/env bash
# What recording NCCL's algorithm costs in the timed loop
# (docs/algorithms.md): `--algo-record log` (NCCL's rank 0 writes one
# TUNING line per collective there) and `--algo-record plugin` (NCCL calls
# collbench's profiler plugin once per collective on every rank), against
# `--algo-record off`. Runs the same small all-reduce sweep R times with
# each, interleaved, and prints per size the median time_us of each and
# the differences; then the algo columns of the last run of each; then
# the plugin's own cost per collective event: a small C driver (built
# here with cc) opens the plugin as NCCL 2.29+ does (ncclProfiler_v6),
# makes one context and hands it N collective events, timing the calls.
#
#   scripts/bench/algo-record-cost.sh [R]            (default 5 rounds)
#
# Where NCCL and a GPU are found (`collbench info`), the real library
# writes the lines; otherwise point COLLBENCH_NCCL_LIB at the host GPU
# simulation (scripts/gpu-sim.sh DIR; LD_LIBRARY_PATH=DIR GPUSIM_DEVICES=2),
# whose figures are the simulation's own logging, never NCCL's, and say so
# (`-sim` versions). COLLBENCH_BIN=PATH uses that binary instead of
# building the release one; RANKS (default 2) sets -g.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
ranks=${RANKS:-2}
if [ -n "${COLLBENCH_BIN:-}" ]; then
    bin=$COLLBENCH_BIN
else
    cargo build --release --quiet
    bin=$PWD/target/release/collbench
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sweep=(run --backend nccl -g "$ranks" --collectives all_reduce -b 8 -e 64K -f 8 -n 2000 -w 100 --no-progress)

for i in $(seq 1 "$rounds"); do
    for arm in off log plugin; do
        "$bin" "${sweep[@]}" --algo-record "$arm" --csv "$out/$arm-$i.csv" >"$out/$arm-$i.txt"
    done
done
echo "== log:    $(grep -m1 '^# backend' "$out/log-1.txt")"
echo "== plugin: $(grep -m1 '^# backend' "$out/plugin-1.txt")"
echo "== load: $(uptime)"
# median time_us per (size, placement) over the rounds of each arm
python3 - "$out" "$rounds" <<'PY'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def times(arm):
    t = {}
    for i in range(1, rounds + 1):
        for r in csv.DictReader(open(f"{out}/{arm}-{i}.csv")):
            t.setdefault((int(r["size_bytes"]), r["placement"]), []).append(float(r["time_us"]))
    return {k: statistics.median(v) for k, v in t.items()}
off, log, plugin = times("off"), times("log"), times("plugin")
print(f"{'size_bytes':>10} {'placement':>12} {'off_us':>10} {'log_us':>10} {'plugin_us':>10} {'log_pct':>8} {'plugin_pct':>10}")
for k in sorted(off):
    a, b, c = off[k], log[k], plugin[k]
    print(f"{k[0]:>10} {k[1]:>12} {a:>10.3f} {b:>10.3f} {c:>10.3f} {100 * (b - a) / a:>7.1f}% {100 * (c - a) / a:>9.1f}%")
for arm in ("log", "plugin"):
    last = list(csv.DictReader(open(f"{out}/{arm}-{rounds}.csv")))
    print(f"algo columns of the last {arm} run:")
    for r in last:
        print(f"  {r['size_bytes']:>8} {r['placement']:>12}  {r['algo']}/{r['proto']} nchannels={r['nchannels'] or '-'} ({r['algo_source']})")
PY

# The plugin's cost per event, alone: NCCL's call of startEvent (and its
# record) as NCCL 2.29+ makes it, N times, against an empty loop.
plugin_so=$(dirname "$bin")/libcollbench_profiler.so
cat > "$out/per-event.c" <<'C'
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* ncclProfilerEventDescr_v6_t's head and collective member, as laid out
 * by NCCL's profiler_v6.h (the plugin's tests check the same offsets) */
struct coll { uint64_t seq; const char *func; const void *send; void *recv; size_t count; int root;
              const char *datatype; uint8_t nch, nwarps; const char *algo, *proto; void *parent; };
struct descr { uint64_t type; void *parent; int rank; struct coll coll; };
struct table { const char *name;
               int (*init)(void **, uint64_t, int *, const char *, int, int, int, void *);
               int (*start)(void *, void **, struct descr *); int (*stop)(void *);
               void *record; int (*finalize)(void *); };
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
    long n = atol(argv[2]);
    void *lib = dlopen(argv[1], RTLD_NOW);
    struct table *p = lib ? dlsym(lib, "ncclProfiler_v6") : NULL;
    if (!p) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    long (*read)(uint64_t, void *, size_t, uint64_t *) = dlsym(lib, "collbench_profiler_read");
    uint64_t (*find)(uint64_t) = dlsym(lib, "collbench_profiler_find");
    static char recs[4096 * 40];
    void *ctx; int mask;
    p->init(&ctx, 1, &mask, "bench", 1, 2, 0, NULL);
    uint64_t id = find(0), dropped;
    struct descr d = {2, NULL, 0, {0, "AllReduce", NULL, NULL, 1024, -1, "ncclFloat32", 2, 16, "RING", "LL128", NULL}};
    double best = 1e9;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
        for (long i = 0; i < n; i++) { void *h; d.coll.seq = i; p->start(ctx, &h, &d); }
        double ns = (now() - t0) * 1e9 / n;
        if (ns < best) best = ns;
        while (read(id, recs, 4096, &dropped) == 4096) {}   /* drained between rounds, untimed */
    }
    p->finalize(ctx);
    printf("plugin startEvent + record: %.1f ns per collective event (best of 5 rounds of %ld)\n", best, n);
    return 0;
}
C
if cc -O2 -o "$out/per-event" "$out/per-event.c" -ldl; then
    "$out/per-event" "$plugin_so" 60000
else
    echo "(no C compiler: the per-event figure is skipped)"
fi
