#!/usr/bin/env bash
# Runs `collbench workload` with identical configurations again and again
# and counts the verdicts its side-by-side table gives them; nothing is
# asserted, the figures are for a person to read.
#
#   scripts/bench/workload-verdicts.sh [--runs N] [--np N] [--configs N]
#
# Each run is `mpirun --oversubscribe -np NP collbench workload --backend
# mpi --params 1M --layers 2 --strategy ddp --pytorch 2.3 --steps 10` with
# --configs bucket caps from 20M up by 1M: under PyTorch 2.3's rule every
# cap above the model makes the same two all-reduces, so the
# configurations are one schedule (volume x 1.00 each) and every `slower`
# or `faster` in the table is a false verdict. Printed per run: how many
# rows were called slower or faster, and the table's interval level; then
# how many runs had any (docs/workload.md: at most 5% of runs, whatever
# the number of configurations). Defaults: --runs 12 --np 2 --configs 8.
# The load average is printed before and after: other work on the machine
# makes every figure noisier. Files:
# results/bench-workload-verdicts-<UTC time>/ (each run's output).
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

runs=12
np=2
configs=8
while [ $# -gt 0 ]; do
    case "$1" in
        --runs | --np | --configs) bench_opt "$@"; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) bench_unknown "$1" ;;
    esac
done

buckets=$(seq -s, -f '%gM' 20 $((20 + configs - 1)))
args=(workload --backend mpi --params 1M --layers 2 --strategy ddp --bucket "$buckets" --pytorch 2.3 --steps 10 --no-progress)
bench_collbench_mpi
bench_out workload-verdicts
echo "# $runs runs of $configs identical configurations"
echo "# mpirun --oversubscribe -np $np collbench ${args[*]}"
bench_banner
echo "# load before: $(load)"
with_false=0
for i in $(seq 1 "$runs"); do
    if ! mpirun --oversubscribe -np "$np" "$COLLBENCH" "${args[@]}" > "$out/run-$i.txt" 2>&1; then
        echo "run $i: the launch failed: see $out/run-$i.txt"
        continue
    fi
    table=$(sed -n '/^side by side/,$p' "$out/run-$i.txt")
    slower=$(grep -c ' slower ' <<< "$table" || true)
    faster=$(grep -c ' faster ' <<< "$table" || true)
    level=$(head -1 <<< "$table" | grep -o 'its [0-9.]*% interval\|at [0-9.]*%[^;)]*' | head -1 || true)
    [ $((slower + faster)) = 0 ] || with_false=$((with_false + 1))
    echo "run $i (load $(load)): $slower slower, $faster faster of $((configs - 1)) rows (${level:-?})"
done
echo "runs with a false verdict: $with_false of $runs"
echo "# load after: $(load)"
