#!/usr/bin/env bash
# Runs the README's "Compare two runs" recipe again and again and prints
# how often it exits 4; nothing is asserted, the figures are for a person
# to read (issue 21's targets are given beside them).
#
#   scripts/bench/readme-compare.sh [--runs N] [--slow N]
#
#   1. identical runs: N times the whole recipe (a baseline of its
#      launches, one more launch, `collbench compare base new.csv` with
#      the README's options) with nothing changed: how many exited 4
#      (target: at most 1 of 10);
#   2. a real slowdown: --slow times the recipe with the new launch's two
#      ranks on one core (taskset -c 0, mpirun --bind-to none; the
#      baseline as in part 1): how many exited 4 (target: 5 of 5).
# Defaults: --runs 10 --slow 5. The run arguments, the number of baseline
# launches and compare's options are read from README.md's recipe, so the
# script measures what the README says; every launch runs with mpirun
# --bind-to none, so that the two parts differ only by taskset. The load average is printed
# before and after each part: other work on the machine makes every
# figure noisier. Files: results/bench-readme-compare-<UTC time>/ (each
# trial's baseline, new CSV and compare output). Needs taskset
# (util-linux) for part 2.
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
    read -r code secs headline < <(trial "same-$i")
    [ "$code" != 4 ] || alarms=$((alarms + 1))
    echo "run $i: exit $code, ${secs} s: $headline"
done
echo "load after: $(load)"
echo
echo "## 2. the new launch's ranks on one core (load before: $(load))"
bench_one_core "$slow" trial
echo "load after: $(load)"
echo
echo "## targets"
echo "1. identical runs that exited 4: $alarms of $runs (target: at most 1 of 10)"
echo "2. one-core runs that exited 4: $caught of $slow (target: $slow of $slow)"
