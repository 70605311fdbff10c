#!/usr/bin/env bash
# Runs a benchmark, compares it with a committed baseline, writes a markdown
# summary, and exits with compare's code: 0 no regression, 4 a regression,
# 2 unusable input (e.g. a baseline with other rank counts). A run that
# fails exits with the run's own code (1, 2, 3 or 5) before comparing.
#
#   scripts/ci-regression.sh BASELINE [options] [-- RUN-ARGS...]
#
# BASELINE   a name under results/baselines/ (with or without .csv), or a
#            path to a CSV file or a folder of them
# Options:
#   --np N                   ranks of the run (default: $NP or 2)
#   --config FILE            a suite for `collbench run --config`
#   --threshold PCT          compare's threshold (default: compare's, 5)
#   --metric busbw|algbw|time
#   --allow-different-ranks  passed to compare
#   --csv FILE               the new run's CSV (default: results/ci-<UTC time>.csv)
#   --summary FILE           markdown summary (default: results/ci-summary.md);
#                            also appended to $GITHUB_STEP_SUMMARY when set
# RUN-ARGS after `--` go to `collbench run` (e.g. --collectives all_reduce -e 1M).
# Environment: COLLBENCH, a collbench binary to use instead of building
# target/release/collbench; MPIRUN, the launcher (default mpirun).
#
# Example (the command that made results/baselines/local-2ranks.csv):
#   scripts/ci-regression.sh local-2ranks --np 2 --threshold 25 -- \
#       --collectives all_reduce,all_gather -e 1M
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/setup.sh

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { printf 'ci-regression: %s\n' "$*" >&2; exit 2; }

[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
baseline_arg=$1; shift
np=${NP:-2}
config=""
csv=""
summary="results/ci-summary.md"
compare_args=()
run_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --np) np=${2:?--np needs a value}; shift 2 ;;
        --config) config=${2:?--config needs a file}; shift 2 ;;
        --threshold) compare_args+=(--threshold "${2:?--threshold needs a value}"); shift 2 ;;
        --metric) compare_args+=(--metric "${2:?--metric needs a value}"); shift 2 ;;
        --allow-different-ranks) compare_args+=(--allow-different-ranks); shift ;;
        --csv) csv=${2:?--csv needs a file}; shift 2 ;;
        --summary) summary=${2:?--summary needs a file}; shift 2 ;;
        --) shift; run_args=("$@"); break ;;
        *) fail "unknown option '$1' (see $0 --help)" ;;
    esac
done

if [ -e "$baseline_arg" ]; then
    baseline=$baseline_arg
elif [ -e "results/baselines/$baseline_arg.csv" ]; then
    baseline="results/baselines/$baseline_arg.csv"
elif [ -e "results/baselines/$baseline_arg" ]; then
    baseline="results/baselines/$baseline_arg"
else
    fail "no baseline '$baseline_arg'; committed ones: $(ls results/baselines 2>/dev/null | grep -v '^\.' | tr '\n' ' ')"
fi

collbench_mpirun_env
if [ -n "${COLLBENCH:-}" ]; then
    bin=$COLLBENCH
else
    collbench_ensure_deps
    cargo build --locked --release
    bin=target/release/collbench
fi

mkdir -p results "$(dirname "$summary")"
[ -n "$csv" ] || csv="results/ci-$(date -u +%Y%m%dT%H%M%SZ).csv"
launcher=${MPIRUN:-mpirun}
oversubscribe=()
cores=$(nproc 2>/dev/null || echo 2)
if [ "$np" -gt "$cores" ] && "$launcher" --version 2>/dev/null | grep -q "Open MPI"; then
    oversubscribe=(--oversubscribe)
fi
config_args=()
[ -z "$config" ] || config_args=(--config "$config")

echo "== run: $launcher -np $np collbench run ${config_args[*]} ${run_args[*]} --csv $csv"
set +e
"$launcher" "${oversubscribe[@]}" -np "$np" "$bin" run --no-progress "${config_args[@]}" "${run_args[@]}" --csv "$csv" --overwrite
run_code=$?
set -e
if [ $run_code -ne 0 ]; then
    printf 'ci-regression: the run failed with exit code %s; nothing compared\n' "$run_code" >&2
    exit $run_code
fi

echo "== compare against $baseline"
set +e
"$bin" compare "${compare_args[@]}" "$baseline" "$csv"
code=$?
"$bin" compare --format markdown "${compare_args[@]}" "$baseline" "$csv" > "$summary"
set -e
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$summary" >> "$GITHUB_STEP_SUMMARY"
fi
echo "== summary: $summary (exit code $code)"
exit $code
