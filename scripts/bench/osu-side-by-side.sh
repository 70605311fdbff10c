#!/usr/bin/env bash
# collbench against OSU Micro-Benchmarks' osu_allreduce: time per operation
# from 8 B up, and what a launch costs (issue 40; docs/overhead.md).
# A benchmark, not a test: it prints measured figures and whether each
# meets the issue's target; its exit status judges nothing.
#
#   scripts/bench/osu-side-by-side.sh [ROUNDS] [-- EXTRA collbench run OPTIONS]
#   environment:
#     OSU_ALLREDUCE  an osu_allreduce binary (OSU 7.x) to compare against;
#                    without it, the raw MPI loop of OSU's shape
#                    (scripts/bench/raw_collectives.c, `blocking`, OSU's
#                    iteration counts), built here with mpicc
#     NP (2), MAXES ("4M 64K"), STARTUP_NPS ("2 4 8"), LAUNCHES (10),
#     PARTS ("1 2": which parts to run),
#     COUNTS (osu | policy): collbench at OSU's iteration counts (1000
#       after 200 warm-up up to 8 KiB, 100 after 10 above, in two launches
#       split there, -c 0), the same shape as the reference; or its own
#       precision policy and checking, as a user runs it
#     COLLBENCH      the binary (default: a release build made here)
#
# Part 1, time per operation. For each largest size in MAXES: ROUNDS
# (default 3) rounds, alternating which side goes first; each round runs
# the reference (`-m 8:MAX`) and `collbench run --collectives all_reduce -b
# 8 -e MAX --blocking --no-rotate` (OSU's method: a barrier, then each
# operation timed alone; one buffer), float sum, np = NP. Per size: each
# side's median over rounds, their ratio (collbench / reference) and the
# range of the per-round ratios; then the geometric mean of the ratios and
# the largest, against the issue's targets (geomean <= 1.05, no size over
# 1.15).
#
# Part 2, start-up. At each np of STARTUP_NPS, LAUNCHES launches of each,
# interleaved: the reference at one size and 10 iterations (`-m 8:8 -i 10
# -x 1`, or the raw loop's equivalent), `collbench run --collectives
# all_reduce -b 8 -e 8 -n 10 -w 1 -c 0 --timings`, and `mpirun ... true`
# (the launcher alone). Median wall times, collbench's excess over the
# reference against the targets (within 0.08 s at np 2, within 10% at np
# 8), and the median of each phase collbench's --timings reports on rank 0.
#
# The load average is printed before and after each part: on a shared
# machine, figures taken under load are noise.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"
case "${1:-}" in -h | --help) bench_help; exit 0 ;; esac

rounds=${1:-3}
shift $(( $# > 0 ? 1 : 0 ))
[ "${1:-}" = "--" ] && shift
extra=("$@")
np=${NP:-2}
maxes=${MAXES:-4M 64K}
startup_nps=${STARTUP_NPS:-2 4 8}
launches=${LAUNCHES:-10}
parts=${PARTS:-1 2}
counts=${COUNTS:-osu}
case "$counts" in osu | policy) ;; *) echo "COUNTS must be osu or policy" >&2; exit 2 ;; esac

bench_collbench_mpi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(${MPIRUN:-mpirun --oversubscribe})
if [ -n "${OSU_ALLREDUCE:-}" ]; then
    reference="osu_allreduce ($OSU_ALLREDUCE)"
    ref_sweep() { "${mpi[@]}" -np "$np" "$OSU_ALLREDUCE" -m "8:$1"; }
    ref_startup() { "${mpi[@]}" -np "$1" "$OSU_ALLREDUCE" -m 8:8 -i 10 -x 1; }
else
    reference="raw MPI loop of osu_allreduce's shape (raw_collectives.c blocking, OSU's counts)"
    mpicc -O2 -o "$work/raw" scripts/bench/raw_collectives.c
    ref_sweep() { "${mpi[@]}" -np "$np" "$work/raw" all_reduce 8 "$1" osu osu blocking; }
    ref_startup() { "${mpi[@]}" -np "$1" "$work/raw" all_reduce 8 8 10 1 blocking; }
fi

bytes() { # 64K -> 65536
    python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$1"
}
# "size_bytes time_us" of collbench's out-of-place rows, read by header name
cb_rows() {
    python3 - "$@" <<'PY'
import csv, sys
for path in sys.argv[1:]:
    for r in csv.DictReader(open(path)):
        if r["placement"] == "out_of_place":
            print(r["size_bytes"], r["time_us"])
PY
}
# "size_bytes time_us" of an OSU table (lines of two or more numbers)
ref_rows() { awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ { print $1, $2 }'; }
# collbench's sweep up to $1 bytes into $2.csv (and $2.b.csv past 8 KiB)
cb_sweep() {
    local max=$1 out=$2 run=("$COLLBENCH" run --collectives all_reduce --blocking --no-rotate --no-progress --overwrite)
    if [ "$counts" = policy ]; then
        "${mpi[@]}" -np "$np" "${run[@]}" -b 8 -e "$max" --csv "$out.csv" "${extra[@]}" > /dev/null
        return
    fi
    "${mpi[@]}" -np "$np" "${run[@]}" -b 8 -e "$(( max < 8192 ? max : 8192 ))" -n 1000 -w 200 -c 0 \
        --csv "$out.csv" "${extra[@]}" > /dev/null
    if [ "$max" -gt 8192 ]; then
        "${mpi[@]}" -np "$np" "${run[@]}" -b 16K -e "$max" -n 100 -w 10 -c 0 --csv "$out.b.csv" "${extra[@]}" > /dev/null
    fi
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(mpirun --version | head -1)"
echo "collbench: $COLLBENCH ($("$COLLBENCH" --version)), np=$np, counts: $counts${extra:+, extra: ${extra[*]}}"
echo "reference: $reference"

case " $parts " in *" 1 "*) ;; *) maxes= ;; esac
for max in $maxes; do
    maxb=$(bytes "$max")
    echo
    echo "load average (before part 1, -e $max): $(load)"
    for r in $(seq "$rounds"); do
        if [ $((r % 2)) = 1 ]; then
            ref_sweep "$maxb" | ref_rows > "$work/ref.$max.$r"
            cb_sweep "$maxb" "$work/cb.$max.$r"
        else
            cb_sweep "$maxb" "$work/cb.$max.$r"
            ref_sweep "$maxb" | ref_rows > "$work/ref.$max.$r"
        fi
        cb_rows "$work"/cb."$max"."$r"*.csv > "$work/cb.$max.$r"
    done
    echo "load average (after part 1, -e $max): $(load)"
    echo "== part 1: all_reduce float sum, 8 B to $max, np=$np, median of $rounds interleaved rounds"
    python3 - "$work" "$max" "$rounds" <<'PY'
import math, statistics, sys
work, mx, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(kind):
    out = []
    for r in range(1, rounds + 1):
        with open(f"{work}/{kind}.{mx}.{r}") as f:
            out.append({int(s): float(t) for s, t in (l.split() for l in f if l.strip())})
    return out
ref, cb = load("ref"), load("cb")
sizes = sorted(set.intersection(*(set(x) for x in ref + cb)))
print(f"  {'size (B)':>10} {'ref (us)':>10} {'collbench':>10} {'ratio':>7}  per-round ratios")
ratios = []
for s in sizes:
    a = statistics.median(x[s] for x in ref)
    b = statistics.median(x[s] for x in cb)
    per = sorted(y[s] / x[s] for x, y in zip(ref, cb) if x[s] > 0)
    ratios.append(b / a)
    print(f"  {s:>10} {a:>10.2f} {b:>10.2f} {b / a:>7.3f}  {per[0]:.2f} .. {per[-1]:.2f}")
g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
worst = max(ratios)
at = sizes[ratios.index(worst)]
print(f"  geomean ratio {g:.3f} ({'met' if g <= 1.05 else 'NOT met'}: <= 1.05), "
      f"worst {worst:.3f} at {at} B ({'met' if worst <= 1.15 else 'NOT met'}: <= 1.15)")
PY
done

case " $parts " in *" 2 "*) ;; *) exit 0 ;; esac
echo
# an older build without --timings (a before/after comparison) runs without it
timings=(--timings)
"$COLLBENCH" run --help | grep -q -- --timings || timings=()
echo "load average (before part 2): $(load)"
for n in $startup_nps; do
    : > "$work/wall.$n"
    : > "$work/timings.$n"
    for l in $(seq "$launches"); do
        t0=$(now)
        ref_startup "$n" > /dev/null
        t1=$(now)
        "${mpi[@]}" -np "$n" "$COLLBENCH" run --collectives all_reduce -b 8 -e 8 -n 10 -w 1 -c 0 --no-progress \
            --csv "$work/startup.csv" --overwrite "${timings[@]}" "${extra[@]}" > /dev/null 2>> "$work/timings.$n"
        t2=$(now)
        "${mpi[@]}" -np "$n" true
        t3=$(now)
        echo "$t0 $t1 $t2 $t3" >> "$work/wall.$n"
    done
done
echo "load average (after part 2): $(load)"
echo "== part 2: start-up, median wall time of $launches interleaved launches each (all_reduce 8 B, 10 iterations)"
python3 - "$work" "$startup_nps" <<'PY'
import re, statistics, sys
work, nps = sys.argv[1], sys.argv[2].split()
print(f"  {'np':>3} {'launcher alone':>15} {'reference':>10} {'collbench':>10} {'excess':>8} {'ratio':>6}  target")
phases_by_np = {}
for n in nps:
    rows = [list(map(float, l.split())) for l in open(f"{work}/wall.{n}")]
    ref = statistics.median(b - a for a, b, c, d in rows)
    cb = statistics.median(c - b for a, b, c, d in rows)
    bare = statistics.median(d - c for a, b, c, d in rows)
    excess, ratio = cb - ref, cb / ref
    target = {"2": ("within 0.08 s", excess <= 0.08), "8": ("within 10%", ratio <= 1.10)}.get(n)
    verdict = f"{target[0]}: {'met' if target[1] else 'NOT met'}" if target else ""
    print(f"  {n:>3} {bare:>13.3f} s {ref:>8.3f} s {cb:>8.3f} s {excess:>+6.3f} s {ratio:>6.2f}  {verdict}")
    phases = {}
    for line in open(f"{work}/timings.{n}"):
        m = re.match(r"collbench:   (.*?)\s+([0-9.]+) ms$", line)
        if m:
            phases.setdefault(m.group(1), []).append(float(m.group(2)))
    phases_by_np[n] = phases
names = list(dict.fromkeys(p for ph in phases_by_np.values() for p in ph))
if not names:
    sys.exit(0)
print("  collbench's phases on rank 0 (--timings), median ms:")
print("    " + f"{'phase':<42}" + "".join(f"{'np ' + n:>10}" for n in nps))
for p in names:
    cells = "".join(f"{statistics.median(phases_by_np[n][p]):>10.1f}" if p in phases_by_np[n] else f"{'-':>10}" for n in nps)
    print(f"    {p:<42}{cells}")
PY
