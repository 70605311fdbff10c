# Shared by the scripts in scripts/bench, which source it right after
# `set -euo pipefail`: it moves to the repository root (two folders above
# this file) and sources scripts/lib/setup.sh, then defines the pieces the
# scripts have in common: option parsing, the binary, the output folder,
# clocks and the load average.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. scripts/lib/setup.sh

# The script's help: its header comment, line 2 up to `set -euo pipefail`.
bench_help() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

# `bench_opt "$@"` on an option that takes a value (--slow-rank 1): sets
# the variable it names (slow_rank) to that value; a missing or empty value
# ends the script as ${2:?} does.
bench_opt() {
    local name=${1#--}
    printf -v "${name//-/_}" '%s' "${2:?$1 needs a value}"
}

# Refuses an option the script does not know (exit 2).
bench_unknown() {
    printf '%s: unknown option %s (see --help)\n' "$(basename "$0")" "$1" >&2
    exit 2
}

# The collbench binary: $COLLBENCH when set, else a release build (made
# here, with its dependencies).
bench_collbench() {
    if [ -z "${COLLBENCH:-}" ]; then
        collbench_ensure_deps
        cargo build --locked --release
        COLLBENCH=target/release/collbench
    fi
}

# bench_collbench, by its absolute path, and mpirun's environment
# (collbench_mpirun_env): for a script that launches the binary itself.
bench_collbench_mpi() {
    bench_collbench
    COLLBENCH=$(realpath "$COLLBENCH")
    collbench_mpirun_env
}

# The build's and mpirun's needs, for a script that builds what it runs.
bench_deps() {
    collbench_ensure_deps
    collbench_mpirun_env
}

# Makes the run's folder, results/bench-NAME-<UTC time>, and sets out to it.
bench_out() {
    out="results/bench-$1-$(date -u +%Y%m%dT%H%M%SZ)"
    mkdir -p "$out"
}

# The load average (1, 5 and 15 minutes), or ? where it cannot be read.
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }
now() { date +%s.%N; }
# The seconds from clock reading A to B, to a tenth.
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# The median of the sorted numbers on stdin, one a line.
bench_median() {
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The header lines every report starts with: the binary and its version,
# and the output folder.
bench_banner() {
    echo "# binary: $COLLBENCH ($("$COLLBENCH" --version 2>/dev/null || echo '?'))"
    echo "# output: $out"
}

# Part 2 of readme-compare.sh and verdicts.sh: SLOW runs of TRIAL ARGS...
# (a command that prints "code seconds headline"), each with the tag
# slow-I and its launch under `taskset -c 0`, one line each; sets caught to
# how many exited 4. Without taskset, says the part is skipped.
bench_one_core() {
    local slow=$1 i code secs headline
    shift
    caught=0
    if command -v taskset >/dev/null 2>&1; then
        for i in $(seq 1 "$slow"); do
            read -r code secs headline < <("$@" "slow-$i" taskset -c 0)
            [ "$code" != 4 ] || caught=$((caught + 1))
            echo "slow $i: exit $code, ${secs} s: $headline"
        done
    else
        echo "taskset not found: part 2 skipped"
    fi
}
