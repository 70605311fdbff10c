#!/usr/bin/env bash
# Runs the README's `--hierarchy all` example again and again under the
# same conditions and prints what each run claimed (speedups, winners,
# crossovers); nothing is asserted, the figures are for a person to read.
#
#   scripts/bench/hierarchy-claims.sh [--runs N]
#
# Each run is the README's "Compare flat and hierarchical all-reduce"
# command (read from README.md), then `collbench compare --by hierarchy`
# on its CSV. Printed per run: its crossover line (or none) and how many
# sizes had a winner and how many a claimed speedup; then how many runs
# claimed any crossover (issue 21's target: none of 10), and each claimed
# crossover or winner with the number of runs that claimed it, and at how
# many points different runs named different winners. Noise names
# different winners at the same point in different runs; a real difference
# between the modes names the same one wherever it is claimed (though a
# noisy machine may claim it in few runs), so read the counts together.
# Default: --runs 10. Files: results/bench-hierarchy-claims-<UTC time>/.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

runs=10
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) bench_opt "$@"; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) bench_unknown "$1" ;;
    esac
done

line=$(sed -n '/^## Compare flat and hierarchical/,/^## /p' README.md | grep -m1 -E '^mpirun .*collbench run .*--hierarchy all' || true)
if [ -z "$line" ]; then
    echo "hierarchy-claims.sh: README.md's --hierarchy all example is not where this script reads it" >&2
    exit 2
fi
read -r -a mpirun_args <<< "$(printf '%s\n' "$line" | sed -E 's/^mpirun (.*) collbench run .*/\1/')"
read -r -a run_args <<< "$(printf '%s\n' "$line" | sed -E 's/.*collbench run //')"

bench_collbench_mpi
bench_out hierarchy-claims
# The crossovers FILE claims, one a line: "PLACEMENT SIZE (FROM -> TO)"
# (each group's "* crossover at SIZE (A -> B), SIZE (B -> C)" line).
crossovers() {
    awk '/ ranks, transport / { grp = $4; sub(/,$/, "", grp) }
         /^\* crossover at / {
             line = $0; sub(/^\* crossover at /, "", line)
             while (match(line, /[^,(]+\([^)]*\)/)) {
                 c = substr(line, RSTART, RLENGTH); sub(/^ +/, "", c)
                 print grp " " c; line = substr(line, RSTART + RLENGTH)
             }
         }' "$1"
}

# The winners FILE (compare --by hierarchy's table) claims, one a line:
# "PLACEMENT SIZE: MODE" (rows are a size, the modes' cells, the winner
# last, a crossover's with " *"; group titles name the placement).
winners() {
    awk '/ ranks, transport / { grp = $4; sub(/,$/, "", grp) }
         $1 ~ /^[0-9.]+$/ && $2 ~ /B$/ {
             line = $0; sub(/ \*$/, "", line); n = split(line, f, " ")
             if (line ~ /no significant difference$/ || f[n] == "-") next
             print grp " " $1 " " $2 ": " f[n]
         }' "$1"
}

echo "# --hierarchy all, $runs runs under the same conditions"
echo "# mpirun ${mpirun_args[*]} collbench run ${run_args[*]}"
echo "# then: collbench compare --by hierarchy run.csv"
bench_banner
echo "# load before: $(load)"
with_crossover=0
for i in $(seq 1 "$runs"); do
    if ! mpirun "${mpirun_args[@]}" "$COLLBENCH" run "${run_args[@]}" --no-progress \
            --csv "$out/run-$i.csv" > "$out/run-$i.log" 2>&1; then
        echo "run $i: the launch failed: see $out/run-$i.log"
        continue
    fi
    if ! "$COLLBENCH" compare --by hierarchy "$out/run-$i.csv" > "$out/by-$i.txt" 2>&1; then
        echo "run $i: compare --by hierarchy failed: see $out/by-$i.txt"
        continue
    fi
    # each claimed crossover, "PLACEMENT SIZE (FROM -> TO)", one a line
    crossovers "$out/by-$i.txt" > "$out/crossovers-$i.txt"
    crossover=$(paste -sd ';' "$out/crossovers-$i.txt" | sed 's/;/; /g')
    [ -z "$crossover" ] || with_crossover=$((with_crossover + 1))
    winners "$out/by-$i.txt" > "$out/winners-$i.txt"
    won=$(wc -l < "$out/winners-$i.txt")
    rows=$(awk '$1 ~ /^[0-9.]+$/ && $2 ~ /B$/' "$out/by-$i.txt" | wc -l)
    claims=$(grep -oE '[0-9]+\.[0-9]+x \[' "$out/by-$i.txt" | wc -l || true)
    echo "run $i: crossover: ${crossover:-none}; sizes with a winner: $won of $rows; speedups claimed: $claims"
    cat "$out/crossovers-$i.txt" >> "$out/crossovers.txt"
    cat "$out/winners-$i.txt" >> "$out/winners.txt"
done
echo "# load after: $(load)"
echo
echo "## results"
echo "runs that claimed a crossover: $with_crossover of $runs (target: 0 of $runs)"
echo "each crossover claimed, with the number of runs that claimed it:"
if [ -s "$out/crossovers.txt" ]; then sort "$out/crossovers.txt" | uniq -c | sed 's/^/  /'; else echo "  (none)"; fi
echo "each winner claimed (size: mode), with the number of runs that claimed it:"
if [ -s "$out/winners.txt" ]; then sort "$out/winners.txt" | uniq -c | sed 's/^/  /'; else echo "  (none)"; fi
contradicted=$(sort -u "$out/winners.txt" | awk -F': ' '{ n[$1]++ } END { k = 0; for (p in n) if (n[p] > 1) k++; print k }')
echo "points where runs named different winners: $contradicted (noise names different ones; a real difference, the same)"
