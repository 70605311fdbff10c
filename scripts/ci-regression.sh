#!/usr/bin/env bash
# The CI regression check: runs the benchmark once, compares it with a
# baseline made of several launches, prints the comparison once, writes a
# markdown summary, and exits with compare's code. A baseline is measured
# only when asked (--create-baseline, --update-baseline): a missing one is
# an error, so that a misspelt name can never pass a CI job.
#
#   scripts/ci-regression.sh BASELINE [options] [-- RUN-ARGS...]
#
# BASELINE   a name under results/baselines/ (a folder NAME/ or NAME.csv),
#            or a path to a CSV file or a folder of them
# Options:
#   --np N                 ranks of the run (default: $NP or 2)
#   --config FILE          run options for `collbench run --config` instead of
#                          the recipe's defaults (below)
#   --suite FILE           run `collbench suite FILE` instead of `collbench run`
#                          (ranks and run options come from the suite file)
#   --create-baseline      BASELINE does not exist yet: measure it (--launches
#                          separate launches), compare nothing, exit 0
#   --update-baseline      measure BASELINE anew (replacing it), compare nothing
#   --launches K           launches measured for a baseline (default 5)
#   --threshold PCT        compare's threshold (default: compare's, 5)
#   --alpha A              compare's significance level (default 0.01: a CI job
#                          judges every row at once, see docs/ci.md)
#   --metric busbw|algbw|time
#   --allow-different-ranks, --allow-method-change, --allow-algo-change, --allow-missing
#                          passed to compare
#   --csv FILE             the new run's CSV (default: results/ci-<UTC time>.csv)
#   --summary FILE         markdown summary (default: results/ci-summary.md);
#                          also appended to $GITHUB_STEP_SUMMARY when set
#   -h, --help             this text
# RUN-ARGS after `--` go to `collbench run` after the recipe's defaults, so
# they change what they name (`-- -e 4M` adds a size; a run that drops a
# case of the baseline, such as `-- --collectives all_reduce`, needs
# --allow-missing); `--csv PATH` there is the same as the option above,
# `--overwrite` is implied. Without --config or --suite the recipe is
#   --collectives all_reduce,all_gather -b 1K -e 1M -f 4 -N 5
# (24 cases, 5 samples each, about 20 s at 2 ranks on a quiet machine).
# Environment: COLLBENCH, a collbench binary to use instead of building
# target/release/collbench; MPIRUN, the launcher command (default mpirun;
# words are split: MPIRUN='mpirun --bind-to none'); NP.
#
# Exit codes: 0 no regression (or a baseline measured); 4 a regression or
# cases of the baseline missing from the run; 2 unusable input (no baseline
# of that name, a baseline measured differently or with other rank counts,
# a bad option); a run that fails exits with the run's own code (1, 2, 3
# or 5).
#
# Examples (each is run by the project's tests):
#   scripts/ci-regression.sh local-2ranks --np 2 --threshold 25
#   scripts/ci-regression.sh local-2ranks --np 2 --threshold 25 -- -e 4M
#   scripts/ci-regression.sh local-2ranks --np 2 --threshold 25 --allow-missing -- --collectives all_reduce
#   scripts/ci-regression.sh ci-suite --suite configs/suite-ci.toml --threshold 25
#   scripts/ci-regression.sh my-machine --np 2 --create-baseline --launches 3
# The command that made results/baselines/local-2ranks/:
#   scripts/ci-regression.sh local-2ranks --np 2 --update-baseline
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/setup.sh

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
fail() { printf 'ci-regression: %s\n' "$*" >&2; exit 2; }
need() { [ $# -ge 2 ] && [ -n "$2" ] || fail "$1 needs a value (see $0 --help)"; }

recipe=(--collectives all_reduce,all_gather -b 1K -e 1M -f 4 -N 5)

[ $# -ge 1 ] || { usage 2 >&2; }
case "$1" in -h|--help) usage 0 ;; -*) fail "the first argument is the baseline (see $0 --help)" ;; esac
baseline_arg=$1; shift
np=${NP:-2}
config=""
suite=""
launches=5
update=0
create=0
csv=""
summary="results/ci-summary.md"
alpha=0.01
compare_args=()
run_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage 0 ;;
        --np) need "$@"; np=$2; shift 2 ;;
        --config) need "$@"; config=$2; shift 2 ;;
        --suite) need "$@"; suite=$2; shift 2 ;;
        --launches) need "$@"; launches=$2; shift 2 ;;
        --update-baseline) update=1; shift ;;
        --create-baseline) create=1; shift ;;
        --alpha) need "$@"; alpha=$2; shift 2 ;;
        --threshold|--metric) need "$@"; compare_args+=("$1" "$2"); shift 2 ;;
        --allow-different-ranks|--allow-method-change|--allow-algo-change|--allow-missing) compare_args+=("$1"); shift ;;
        --csv) need "$@"; csv=$2; shift 2 ;;
        --summary) need "$@"; summary=$2; shift 2 ;;
        --) shift; run_args=("$@"); break ;;
        *) fail "unknown option '$1' (see $0 --help)" ;;
    esac
done
case "$np" in ''|*[!0-9]*|0) fail "--np $np: give a rank count of 1 or more" ;; esac
case "$launches" in ''|*[!0-9]*|0) fail "--launches $launches: give 1 or more" ;; esac

# RUN-ARGS: --csv names the new run's CSV; --overwrite is what the script
# does anyway; the rest goes to `collbench run` as given.
passed=()
i=0
while [ $i -lt ${#run_args[@]} ]; do
    a=${run_args[$i]}
    case "$a" in
        --csv) i=$((i + 1)); [ $i -lt ${#run_args[@]} ] || fail "--csv needs a value"; csv=${run_args[$i]} ;;
        --csv=*) csv=${a#--csv=} ;;
        --overwrite) ;;
        *) passed+=("$a") ;;
    esac
    i=$((i + 1))
done
if [ -n "$suite" ] && { [ ${#passed[@]} -gt 0 ] || [ -n "$config" ]; }; then
    fail "with --suite, run options go in the suite file's [run] table, not after -- or in --config"
fi

# The baseline: an existing path, a committed name, or where a new one goes.
baseline=""
if [ -e "$baseline_arg" ]; then
    baseline=$baseline_arg
elif [ -d "results/baselines/$baseline_arg" ]; then
    baseline="results/baselines/$baseline_arg"
elif [ -e "results/baselines/$baseline_arg.csv" ]; then
    baseline="results/baselines/$baseline_arg.csv"
fi
target=$baseline
if [ -z "$target" ]; then
    case "$baseline_arg" in
        */*|*.csv) target=$baseline_arg ;;
        *) target="results/baselines/$baseline_arg" ;;
    esac
fi

if [ $create = 1 ] && [ $update = 1 ]; then
    fail "--create-baseline and --update-baseline: give one (create makes a new baseline, update replaces one)"
fi
if [ $create = 1 ] && [ -n "$baseline" ]; then
    fail "baseline $baseline exists already; --update-baseline measures it anew (replacing it)"
fi
if [ $create = 0 ] && [ $update = 0 ] && [ -z "$baseline" ]; then
    case "$baseline_arg" in
        */*|*.csv) where=$baseline_arg ;;
        *) where="results/baselines/$baseline_arg/ (or $baseline_arg.csv there)" ;;
    esac
    fail "no baseline at $where; to measure one, run this again with --create-baseline"
fi
collbench_mpirun_env
if [ -n "${COLLBENCH:-}" ]; then
    bin=$COLLBENCH
else
    collbench_ensure_deps
    cargo build --locked --release
    bin=target/release/collbench
fi
read -r -a launcher <<< "${MPIRUN:-mpirun}"
[ ${#launcher[@]} -gt 0 ] || fail "MPIRUN is empty"

# One launch of the benchmark into CSV $1; returns the run's exit code.
measure() {
    local out=$1
    if [ -n "$suite" ]; then
        echo "== run: collbench suite $suite -o $out"
        "$bin" suite "$suite" --binary "$bin" --no-progress -o "$out" --overwrite
        return
    fi
    local oversubscribe=() cores
    cores=$(nproc 2>/dev/null || echo 2)
    if [ "$np" -gt "$cores" ] && "${launcher[0]}" --version 2>/dev/null | grep -q "Open MPI"; then
        oversubscribe=(--oversubscribe)
    fi
    local how=("${recipe[@]}")
    [ -z "$config" ] || how=(--config "$config")
    echo "== run: ${launcher[*]} -np $np collbench run ${how[*]} ${passed[*]} --csv $out"
    "${launcher[@]}" "${oversubscribe[@]}" -np "$np" "$bin" run --no-progress "${how[@]}" "${passed[@]}" \
        --csv "$out" --overwrite
}

# Measures a baseline of $launches launches into $target (a folder, or one
# CSV when the path ends in .csv), replacing what is there.
create_baseline() {
    local work
    mkdir -p "$(dirname "$target")"
    work=$(mktemp -d "$(dirname "$target")/.new-baseline.XXXXXX")
    local k code
    for k in $(seq 1 "$launches"); do
        set +e
        measure "$work/launch-$k.csv"
        code=$?
        set -e
        if [ $code -ne 0 ]; then
            rm -rf "$work"
            printf 'ci-regression: launch %s of the baseline failed with exit code %s; no baseline written\n' "$k" "$code" >&2
            exit $code
        fi
    done
    # a suite leaves each launch's files beside its CSV: not baseline data
    rm -rf "$work"/*-launches
    rm -rf "$target"
    case "$target" in
        *.csv) awk 'FNR == 1 && NR != 1 { next } { print }' "$work"/launch-*.csv > "$target"; rm -rf "$work" ;;
        *) mv "$work" "$target" ;;
    esac
}

if [ $update = 1 ] || [ $create = 1 ]; then
    runs="$launches launches"
    [ -z "$suite" ] || runs="$launches runs of the suite"
    if [ -z "$baseline" ]; then
        echo "== measuring baseline '$baseline_arg' ($runs) into $target"
    else
        echo "== measuring a new baseline ($runs) into $target"
    fi
    create_baseline
    echo "ci-regression: baseline created: $target ($runs; nothing compared). Commit it: git add $target"
    exit 0
fi

mkdir -p results "$(dirname "$summary")"
[ -n "$csv" ] || csv="results/ci-$(date -u +%Y%m%dT%H%M%SZ).csv"
mkdir -p "$(dirname "$csv")"
set +e
measure "$csv"
run_code=$?
set -e
if [ $run_code -ne 0 ]; then
    printf 'ci-regression: the run failed with exit code %s; nothing compared\n' "$run_code" >&2
    exit $run_code
fi

echo "== compare $baseline $csv"
set +e
"$bin" compare --alpha "$alpha" "${compare_args[@]}" --export-markdown "$summary" "$baseline" "$csv"
code=$?
set -e
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$summary" ]; then
    cat "$summary" >> "$GITHUB_STEP_SUMMARY"
fi
exit $code
