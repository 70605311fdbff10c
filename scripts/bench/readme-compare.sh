#!/usr/bin/env bash
# Runs the README's "Compare two runs" recipe again and again and prints
# how often it exits 4, with the load average beside every figure; nothing
# is asserted, the figures are for a person to read (issue 35's targets
# are given beside them).
#
#   scripts/bench/readme-compare.sh [--runs N] [--slow N]
#
#   1. identical runs: N times the whole recipe (a baseline of its
#      launches, one more launch, `collbench compare base new.csv` with
#      the README's options: compare's defaults) with nothing changed: how
#      many exited 4 (target: at most 1 of 10 at load 0-2, 2 of 10 at 4);
#   2. a real slowdown: --slow times the recipe with the new launch's two
#      ranks on one core (taskset -c 0, mpirun --bind-to none; the
#      baseline as in part 1): how many exited 4 (target: 5 of 5);
#   3. one launch per side: `collbench compare` of each trial's last
#      baseline launch against its new launch, for the identical trials
#      (how many exited 4: only the launch bound can fail them) and the
#      one-core trials (how many the launch bound caught);
#   4. the launch-to-launch spread behind the launch bound: over every
#      pair of the identical trials' launches and every row, how far apart
#      the two launches' ranges of samples lie (the smaller range's end
#      over the other's start: above 1, every sample of one launch beyond
#      the other's range by that factor), with the bound compare uses;
#      then the same within each state of the machine (launches grouped
#      by their speed: a shared machine switches between speeds).
# Defaults: --runs 10 --slow 5. The run arguments, the number of baseline
# launches and compare's options are read from README.md's recipe, so the
# script measures what the README says; every launch runs with mpirun
# --bind-to none, so that the two parts differ only by taskset. Other work
# on the machine makes every figure noisier: each line carries the load
# average (1, 5, 15 minutes) at its start. Files:
# results/bench-readme-compare-<UTC time>/ (each trial's baseline, new CSV
# and compare outputs). Needs taskset (util-linux) for part 2 and python3
# for part 4.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

runs=10
slow=5
while [ $# -gt 0 ]; do
    case "$1" in
        --runs | --slow) bench_opt "$@"; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) bench_unknown "$1" ;;
    esac
done

# The recipe, from README.md: the baseline loop's count and run line, and
# the compare line.
section=$(sed -n '/^## Compare two runs/,/^## /p' README.md)
launches=$(printf '%s\n' "$section" | sed -n 's/^for i in \([0-9 ]*\); do.*/\1/p' | wc -w)
run_line=$(printf '%s\n' "$section" | grep -m1 -E 'collbench run .*--csv base/' || true)
compare_line=$(printf '%s\n' "$section" | grep -m1 -E '^collbench compare base new\.csv' || true)
if [ "$launches" -lt 1 ] || [ -z "$run_line" ] || [ -z "$compare_line" ]; then
    echo "readme-compare.sh: README.md's \"Compare two runs\" recipe is not where this script reads it" >&2
    exit 2
fi
read -r -a mpirun_args <<< "$(printf '%s\n' "$run_line" | sed -E 's/^ *mpirun (.*) collbench run .*/\1/')"
read -r -a run_args <<< "$(printf '%s\n' "$run_line" | sed -E 's/.*collbench run (.*) --csv .*/\1/')"
read -r -a compare_args <<< "$(printf '%s\n' "$compare_line" | sed -E 's/^collbench compare base new\.csv *//; s/ *--export-markdown [^ ]*//')"

bench_collbench_mpi
bench_out readme-compare

# One trial of the recipe in $out/TAG; the new launch runs under PREFIX...
# (nothing, or taskset). Prints "code seconds headline".
trial() {
    local tag=$1
    shift
    local dir="$out/$tag" start end code headline
    mkdir -p "$dir/base"
    start=$(now)
    for i in $(seq 1 "$launches"); do
        mpirun --bind-to none "${mpirun_args[@]}" "$COLLBENCH" run "${run_args[@]}" --no-progress \
            --csv "$dir/base/launch-$i.csv" > "$dir/base/launch-$i.log" 2>&1 \
            || { echo "9 0 baseline launch $i failed: see $dir/base/launch-$i.log"; return; }
    done
    "$@" mpirun --bind-to none "${mpirun_args[@]}" "$COLLBENCH" run "${run_args[@]}" --no-progress \
        --csv "$dir/new.csv" > "$dir/new.log" 2>&1 \
        || { echo "9 0 the new launch failed: see $dir/new.log"; return; }
    set +e
    "$COLLBENCH" compare "$dir/base" "$dir/new.csv" "${compare_args[@]}" > "$dir/compare.txt" 2>&1
    code=$?
    set -e
    end=$(now)
    headline=$(grep -E '^(OK|REGRESSION|MISSING|NO VERDICT):' "$dir/compare.txt" | tail -n 1 || true)
    [ -n "$headline" ] || headline=$(tail -n 1 "$dir/compare.txt")
    printf '%s %s %s\n' "$code" "$(seconds "$start" "$end")" "$headline"
}

echo "# README compare recipe: $launches baseline launches, then one, then compare"
echo "# mpirun ${mpirun_args[*]} collbench run ${run_args[*]}"
echo "# collbench compare base new.csv ${compare_args[*]}"
bench_banner
echo
echo "## 1. identical runs (load before: $(load))"
alarms=0
for i in $(seq 1 "$runs"); do
    at=$(load)
    read -r code secs headline < <(trial "same-$i")
    [ "$code" != 4 ] || alarms=$((alarms + 1))
    echo "run $i (load $at): exit $code, ${secs} s: $headline"
done
echo "load after: $(load)"
echo
echo "## 2. the new launch's ranks on one core (load before: $(load))"
bench_one_core "$slow" trial
echo "load after: $(load)"
echo
echo "## 3. one launch per side: the last baseline launch against the new one (load before: $(load))"
# Prints "code headline" of compare on TAG's launch-N.csv and new.csv.
single() {
    local dir="$out/$1" code headline
    [ -e "$dir/new.csv" ] || { echo "9 no new launch in $dir"; return; }
    set +e
    "$COLLBENCH" compare "$dir/base/launch-$launches.csv" "$dir/new.csv" > "$dir/single.txt" 2>&1
    code=$?
    set -e
    headline=$(grep -E '^(OK|REGRESSION|MISSING|NO VERDICT):' "$dir/single.txt" | tail -n 1 || true)
    [ -n "$headline" ] || headline=$(tail -n 1 "$dir/single.txt")
    printf '%s %s\n' "$code" "$headline"
}
single_alarms=0
for i in $(seq 1 "$runs"); do
    read -r code headline < <(single "same-$i")
    [ "$code" != 4 ] || single_alarms=$((single_alarms + 1))
    echo "same $i: exit $code: $headline"
done
single_caught=0
slow_tried=0
for i in $(seq 1 "$slow"); do
    [ -d "$out/slow-$i" ] || continue
    slow_tried=$((slow_tried + 1))
    read -r code headline < <(single "slow-$i")
    [ "$code" != 4 ] || single_caught=$((single_caught + 1))
    echo "slow $i: exit $code: $headline"
done
echo
bound=$(sed -n 's/^pub const LAUNCH_BOUND: f64 = \([0-9.]*\);/\1/p' src/compare/noise.rs)
echo "## 4. launch-to-launch spread of the identical launches (compare's launch bound: ${bound:-?})"
python3 - "${bound:-0}" "$out"/same-*/base/*.csv "$out"/same-*/new.csv <<'PY'
import collections, csv, itertools, sys

bound = float(sys.argv[1])
launches = []
for path in sys.argv[2:]:
    rows = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["collective"], r["hierarchy"], r["transport"], r["dtype"], r["op"], r["root"],
                   r["placement"], r["size_bytes"], r["nranks"])
            rows[key].append(float(r["time_us"]))
    launches.append(rows)
gaps, beyond, per_size = [], 0, collections.defaultdict(float)
for a, b in itertools.combinations(launches, 2):
    pair = [max(min(a[k]) / max(b[k]), min(b[k]) / max(a[k])) for k in a if k in b]
    gaps.extend(pair)
    beyond += any(g > bound for g in pair)
    for k, g in zip([k for k in a if k in b], pair):
        per_size[int(k[7])] = max(per_size[int(k[7])], g)
pairs = len(launches) * (len(launches) - 1) // 2
if not gaps:
    print("no pair of launches to compare")
    sys.exit(0)
gaps.sort()
at = lambda q: gaps[min(len(gaps) - 1, int(q * len(gaps)))]
print(f"{len(launches)} launches, {pairs} pairs, {len(gaps)} pair-rows")
print(f"range gap (above 1: apart by that factor): median {at(0.5):.3f}, 90% {at(0.9):.3f}, "
      f"99% {at(0.99):.3f}, largest {gaps[-1]:.3f}; pair-rows apart (> 1): {sum(g > 1 for g in gaps)}")
print("largest gap by size:", ", ".join(f"{s} B {g:.3f}" for s, g in sorted(per_size.items())))
print(f"pairs of launches with a row beyond the bound {bound}: {beyond} of {pairs}")
# The machine's states: each launch's speed, the median over rows of its
# median over the median of every launch's; launches sorted by it and
# split where it jumps by more than 1.25; within a state, the same figures.
median = lambda v: sorted(v)[len(v) // 2]
keys = [k for k in launches[0] if all(k in l for l in launches)]
middle = {k: median([median(l[k]) for l in launches]) for k in keys}
speed = [median([median(l[k]) / middle[k] for k in keys]) for l in launches]
order = sorted(range(len(launches)), key=lambda i: speed[i])
states, current = [], [order[0]]
for i in order[1:]:
    if speed[i] > speed[current[-1]] * 1.25:
        states.append(current)
        current = []
    current.append(i)
states.append(current)
for state in states:
    gaps = [max(min(launches[a][k]) / max(launches[b][k]), min(launches[b][k]) / max(launches[a][k]))
            for a, b in itertools.combinations(state, 2) for k in keys]
    over = sum(any(max(min(launches[a][k]) / max(launches[b][k]), min(launches[b][k]) / max(launches[a][k])) > bound
                   for k in keys) for a, b in itertools.combinations(state, 2))
    n = len(state)
    largest = f"{max(gaps):.3f}" if gaps else "-"
    print(f"state of time x {speed[state[0]]:.2f} to x {speed[state[-1]]:.2f}: {n} launches, largest gap {largest}, "
          f"pairs beyond {bound}: {over} of {n * (n - 1) // 2}")
PY
echo "load after: $(load)"
echo
echo "## targets"
echo "1. identical runs that exited 4: $alarms of $runs (target: at most 1 of 10 at load 0-2, 2 of 10 at load 4)"
echo "2. one-core runs that exited 4: $caught of $slow (target: $slow of $slow)"
echo "3. one launch per side: identical exited 4 in $single_alarms of $runs; one core caught in $single_caught of $slow_tried"
