#!/usr/bin/env bash
# Measures the three targets of the CI regression check (issue 14) and
# prints them; nothing is asserted, the figures are for a person to read.
#
#   scripts/bench/verdicts.sh [--runs N] [--slow N] [--np N] [--launches K] [-- CI-ARGS...]
#
#   1. false alarms: N back-to-back identical runs of the CI recipe
#      (scripts/ci-regression.sh) against a fresh baseline, the first of
#      them creating it: how many of the comparisons had any regressed row
#      (target: at most 1 of 10 runs);
#   2. a real slowdown: --slow runs with both ranks on one core
#      (MPIRUN='mpirun --bind-to none' taskset -c 0 ...): how many were
#      flagged as a regression (target: every one of 5);
#   3. the time of one run of the recipe at --np ranks (target: under 3
#      minutes at 2 ranks), and of measuring the baseline.
# Defaults: --runs 10 --slow 5 --np 2 --launches 5 (baseline launches);
# CI-ARGS go to scripts/ci-regression.sh after the baseline (e.g.
# --threshold 25, or `-- -e 4M`). The load average is printed before and
# after each part: other work on the machine makes every figure noisier.
# Files: results/bench-verdicts-<UTC time>/ (baseline/, one CSV and summary
# per run). Needs taskset (util-linux) for part 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/setup.sh
. scripts/lib/bench.sh

runs=10
slow=5
np=2
launches=5
ci_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs | --slow | --np | --launches) bench_opt "$@"; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --) shift; ci_args=("$@"); break ;;
        *) bench_unknown "$1" ;;
    esac
done

bench_collbench
export COLLBENCH
bench_out verdicts

# One run of the recipe; prints "code seconds headline".
ci_run() {
    local tag=$1
    shift
    local start end code create=()
    [ -e "$out/baseline" ] || create=(--create-baseline)
    start=$(now)
    set +e
    "$@" scripts/ci-regression.sh "$out/baseline" "${create[@]}" --np "$np" --launches "$launches" \
        --csv "$out/$tag.csv" --summary "$out/$tag.md" "${ci_args[@]}" > "$out/$tag.log" 2>&1
    code=$?
    set -e
    end=$(now)
    local headline
    headline=$(grep -E '^(OK|REGRESSION|MISSING):' "$out/$tag.log" | tail -n 1 || true)
    [ -n "$headline" ] || headline=$(grep -E '^ci-regression:' "$out/$tag.log" | tail -n 1 || true)
    printf '%s %s %s\n' "$code" "$(seconds "$start" "$end")" "$headline"
}

echo "# collbench CI verdict targets: np $np, $launches baseline launches, $runs identical runs, $slow slowed runs"
echo "# ci-regression.sh arguments: ${ci_args[*]:-(none)}"
bench_banner
echo
echo "## 1. identical runs (load before: $(load))"
alarms=0
compare_times=()
for i in $(seq 1 "$runs"); do
    read -r code secs headline < <(ci_run "run-$i")
    if [ "$i" = 1 ]; then
        echo "run 1: created the baseline in ${secs} s (exit $code)"
        baseline_secs=$secs
        [ "$code" = 0 ] || { echo "the baseline could not be created; see $out/run-1.log"; exit 1; }
        continue
    fi
    compare_times+=("$secs")
    [ "$code" != 4 ] || alarms=$((alarms + 1))
    echo "run $i: exit $code, ${secs} s: $headline"
done
echo "load after: $(load)"
echo
echo "## 2. both ranks on one core (load before: $(load))"
# both ranks unbound, so that taskset alone places them
slow_run() { MPIRUN='mpirun --bind-to none' ci_run "$@"; }
bench_one_core "$slow" slow_run
echo "load after: $(load)"
echo
sorted=$(printf '%s\n' "${compare_times[@]:-0}" | sort -n)
median=$(printf '%s\n' "$sorted" | bench_median)
longest=$(printf '%s\n' "$sorted" | tail -n 1)
echo "## targets"
echo "1. identical runs with any regressed row: $alarms of $((runs - 1)) comparisons (target: at most 1 of 10 runs)"
echo "2. one-core runs flagged as a regression: $caught of $slow (target: $slow of $slow)"
echo "3. one run of the recipe at np $np: median ${median} s, longest ${longest} s (target: under 180 s); baseline of $launches launches: ${baseline_secs:-?} s"
