#!/usr/bin/env bash
# collbench against a raw MPI loop of the same call, per collective.
# A benchmark, not a test: it prints measured figures and whether each
# meets the issue-13 target; its exit status judges nothing.
#
#   scripts/bench/side-by-side.sh [ROUNDS] [-- EXTRA collbench run OPTIONS]
#   environment: NP (2), ITERS (100), WARMUP (10), MAXES ("64K 4M"),
#                METHOD (batched | blocking), LAUNCHES (5, part 2),
#                PARTS ("1 2": which parts to run)
#
# Part 1, time per operation. For each largest size in MAXES and each of the
# nine collectives: `raw_collectives` (scripts/bench/raw_collectives.c: the
# MPI call collbench's mpi backend makes, page-aligned touched buffers, the
# same timing method) and `collbench run` with its defaults but a fixed
# iteration count (-n ITERS -w WARMUP, -z with METHOD=blocking), alternating
# which goes first, ROUNDS (default 5) rounds, float sum, 8 B up, doubling.
# Per size: the median time of each side over rounds, their ratio
# (collbench / raw) and the interquartile range of the per-round ratios (the
# noise); per collective: the geometric mean of the ratios over sizes and
# the largest one, each against the issue's targets (geometric mean within
# 5% of the raw loop, no size over 1.25x).
#
# Part 2, a whole default sweep. LAUNCHES launches of collbench's default
# sweep of all nine collectives (8 B to 4 MiB, its own iteration policy,
# out-of-place and in-place) against, per launch, nine launches of the raw
# loop as OSU Micro-Benchmarks would run them (one launch per collective,
# OSU's method: blocking, and its default iteration counts) over the same
# points (both placements): the wall time of each, and the launch-to-launch
# spread of each point's time (coefficient of variation over launches,
# median over points), against the targets (collbench no slower, its
# spread no larger).
#
# The machine's load average is printed before and after each part: on a
# shared machine, figures taken under load are noise.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"
bench_deps

rounds=${1:-5}
shift $(( $# > 0 ? 1 : 0 ))
[ "${1:-}" = "--" ] && shift
extra=("$@")
np=${NP:-2}
iters=${ITERS:-100}
warmup=${WARMUP:-10}
maxes=${MAXES:-64K 4M}
method=${METHOD:-batched}
launches=${LAUNCHES:-5}
parts=${PARTS:-1 2}
case "$method" in
    batched) zflag=() ;;
    blocking) zflag=(-z) ;;
    *) echo "METHOD must be batched or blocking" >&2; exit 2 ;;
esac
collectives=(all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv)

cargo build --locked --release --quiet
cb=target/release/collbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/raw" scripts/bench/raw_collectives.c
mpi=(${MPIRUN:-mpirun --oversubscribe} -np "$np")

bytes() { # 64K -> 65536
    python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$1"
}
# "size_bytes time_us" of collbench's out-of-place rows, read by header name
rows() {
    python3 - "$1" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["placement"] == "out_of_place":
        print(r["size_bytes"], r["time_us"])
PY
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(mpirun --version | head -1)"
echo "collbench: $($cb --version), np=$np, $method timing, -n $iters -w $warmup, $rounds alternating rounds${extra:+, extra: ${extra[*]}}"
load() { echo "load average ($1): $(cut -d' ' -f1-3 /proc/loadavg)"; }
case " $parts " in *" 1 "*) ;; *) maxes= ;; esac
for max in $maxes; do
    load "before part 1, -e $max"
    maxb=$(bytes "$max")
    for r in $(seq "$rounds"); do
        for c in "${collectives[@]}"; do
            run_raw() { "${mpi[@]}" "$work/raw" "$c" 8 "$maxb" "$iters" "$warmup" "$method" > "$work/raw.$max.$c.$r"; }
            run_cb() {
                "${mpi[@]}" "$cb" run --collectives "$c" -b 8 -e "$max" -n "$iters" -w "$warmup" "${zflag[@]}" \
                    --no-progress --csv "$work/cb.$max.$c.$r.csv" "${extra[@]}" > /dev/null
                rows "$work/cb.$max.$c.$r.csv" > "$work/cb.$max.$c.$r"
            }
            if [ $((r % 2)) = 1 ]; then run_raw; run_cb; else run_cb; run_raw; fi
        done
    done
    echo
    load "after part 1, -e $max"
    echo "== part 1: -e $max, time per operation, median of $rounds rounds"
    python3 - "$work" "$max" "$rounds" "${collectives[@]}" <<'PY'
import math, statistics, sys
work, mx, rounds, colls = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def load(kind, c):
    out = []
    for r in range(1, rounds + 1):
        with open(f"{work}/{kind}.{mx}.{c}.{r}") as f:
            out.append({int(s): float(t) for s, t in (l.split() for l in f if l.strip())})
    return out
summary = []
for c in colls:
    raw, cb = load("raw", c), load("cb", c)
    sizes = sorted(set(raw[0]) & set(cb[0]))
    missing = sorted(set(raw[0]) ^ set(cb[0]))
    print(f"{c}")
    print(f"  {'size (B)':>10} {'raw (us)':>10} {'collbench':>10} {'ratio':>7}  per-round ratio IQR")
    ratios = []
    for s in sizes:
        a = statistics.median(x[s] for x in raw)
        b = statistics.median(x[s] for x in cb)
        per = sorted(y[s] / x[s] for x, y in zip(raw, cb) if x[s] > 0)
        q1, q3 = per[len(per) // 4], per[(3 * len(per)) // 4]
        ratios.append(b / a)
        print(f"  {s:>10} {a:>10.2f} {b:>10.2f} {b / a:>7.3f}  {q1:.2f} .. {q3:.2f}")
    if missing:
        print(f"  sizes only one side measured: {missing}")
    g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    summary.append((c, g, max(ratios), sizes[ratios.index(max(ratios))]))
print(f"summary -e {mx}: geometric mean of collbench/raw over sizes, and the largest"
      " (targets: geomean <= 1.05, no size over 1.25)")
for c, g, m, at in summary:
    verdict = "met" if g <= 1.05 and m <= 1.25 else "NOT met"
    print(f"  {c:<15} geomean {g:.3f}   max {m:.3f} at {at} B   {verdict}")
PY
done

case " $parts " in *" 2 "*) ;; *) exit 0 ;; esac
echo
echo "== part 2: the default sweep of all nine collectives, 8 B to 4 MiB, $launches launches"
load "before part 2"
: > "$work/wall"
for l in $(seq "$launches"); do
    start=$(date +%s.%N)
    "${mpi[@]}" "$cb" run -b 8 -e 4M --no-progress --csv "$work/default.$l.csv" "${extra[@]}" > /dev/null
    t_cb=$(echo "$(date +%s.%N) - $start" | bc)
    start=$(date +%s.%N)
    for c in "${collectives[@]}"; do
        # OSU's method and counts, over collbench's points (both placements)
        "${mpi[@]}" "$work/raw" "$c" 8 4194304 osu osu blocking both > "$work/osu.$c.$l"
    done
    t_raw=$(echo "$(date +%s.%N) - $start" | bc)
    echo "$t_cb $t_raw" >> "$work/wall"
done
load "after part 2"
python3 - "$work" "$launches" "${collectives[@]}" <<'PY'
import csv, statistics, sys
work, launches, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
walls = [tuple(map(float, l.split())) for l in open(f"{work}/wall")]
cb_points, raw_points = {}, {}
for l in range(1, launches + 1):
    for r in csv.DictReader(open(f"{work}/default.{l}.csv")):
        key = (r["collective"], int(r["size_bytes"]), r["placement"])
        cb_points.setdefault(key, []).append(float(r["time_us"]))
    for c in colls:
        for line in open(f"{work}/osu.{c}.{l}"):
            s, t, placement = line.split()
            raw_points.setdefault((c, int(s), placement), []).append(float(t))
def cv(xs):
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 and statistics.mean(xs) > 0 else float("nan")
def median_cv(points):
    return statistics.median(cv(v) for v in points.values() if len(v) > 1)
common = set(cb_points) & set(raw_points)
only = len(set(cb_points) ^ set(raw_points))
w_cb, w_raw = statistics.median(w[0] for w in walls), statistics.median(w[1] for w in walls)
print(f"wall time (median of {launches}): collbench, one launch: {w_cb:.2f} s; "
      f"raw loop as nine OSU launches (OSU's counts, blocking, both placements): {w_raw:.2f} s")
print(f"  per launch: " + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in walls))
s_cb = median_cv({k: cb_points[k] for k in common})
s_raw = median_cv({k: raw_points[k] for k in common})
print(f"launch-to-launch spread of a point's time (CV over launches, median over {len(common)} points"
      f"{f', {only} points on one side only' if only else ''}): collbench {s_cb * 100:.1f}%, raw/OSU {s_raw * 100:.1f}%")
print(f"targets: wall time no slower: {'met' if w_cb <= w_raw else 'NOT met'}; "
      f"spread no larger: {'met' if s_cb <= s_raw else 'NOT met'}")
PY
