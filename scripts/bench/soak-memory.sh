#!/usr/bin/env bash
# Soak check: runs an endless sweep (--cycles 0) for a while and prints the
# resident memory of every rank over time, then the growth from the first
# full cycle to the end. Memory should stay flat: buffers are reused per
# point, CSV rows are flushed, the JSON report streams to disk.
#
#   scripts/bench/soak-memory.sh [SECONDS] [NP] [extra collbench run options]
#
# A benchmark script, not a test: it prints figures and judges nothing.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"
bench_deps

seconds=${1:-60}
np=${2:-2}
shift $(( $# > 2 ? 2 : $# )) || true
cargo build --locked --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

mpirun --oversubscribe -np "$np" target/release/collbench run -e 1M --cycles 0 --no-progress \
    --csv "$out/soak.csv" --json "$out/soak.json" "$@" > "$out/table.txt" 2> "$out/stderr.txt" &
job=$!

# rank pids from the table header: "#  Rank    N on HOST pid PID"
for _ in $(seq 100); do
    [ "$(grep -c ' pid ' "$out/table.txt" 2>/dev/null)" -ge "$np" ] && break
    sleep 0.1
done
pids=$(grep ' pid ' "$out/table.txt" | awk '{print $NF}' | head -n "$np")

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
printf '%8s %8s %10s' "elapsed" "cycle" "csv rows"
for p in $pids; do printf ' %14s' "rss pid $p"; done
printf '\n'
start=$(date +%s)
first=""
while [ $(( $(date +%s) - start )) -lt "$seconds" ]; do
    sleep 5
    rows=$(( $(wc -l < "$out/soak.csv") - 1 ))
    cycle=$(grep -c '^# cycle ' "$out/table.txt" || true)
    line=$(printf '%7ss %8s %10s' "$(( $(date +%s) - start ))" "$cycle" "$rows")
    sizes=""
    for p in $pids; do sizes="$sizes $(rss "$p")"; line="$line $(printf ' %11s KiB' "$(rss "$p")")"; done
    echo "$line"
    if [ -z "$first" ] && [ "$cycle" -ge 2 ]; then first=$sizes; fi
    last=$sizes
done
kill -TERM $pids 2>/dev/null || true
wait "$job" || true
echo
echo "resident memory (KiB), first sample after a full cycle -> last sample, per rank:"
paste -d' ' <(echo ${first:-$last} | tr ' ' '\n') <(echo $last | tr ' ' '\n') \
    | awk '{printf "  %s -> %s (%+d KiB)\n", $1, $2, $2 - $1}'
grep '^collbench' "$out/stderr.txt" || true
