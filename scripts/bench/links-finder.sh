#!/usr/bin/env bash
# Measures the links finder (issue 23, docs/links.md) on the simulated
# cluster of src/links/sim.rs and prints, per cluster size and injected
# fault, recall, precision and the rounds used beyond the matrix. A
# benchmark script, not a test: it prints figures and judges nothing.
#
#   scripts/bench/links-finder.sh [--ranks 16,64,256] [--trials 100]
#       [--slowdown 1.5] [--per-node 1] [--level node|rank|rail] [--seed 1]
#       [--oversubscription 1] [--noise 1] [--heatmap STEM | --no-heatmap]
#
# Each trial is a fresh simulated cluster with its own seed and one fault
# at a random place: a slow node (bandwidth / slowdown, latency x
# slowdown), a slow link (one pair of measured ranks, bandwidth /
# slowdown), a host that only all-reduces see, or none (healthy).
# Columns: recall (trials whose fault was named, with the right kind and
# place), precision (named findings that were the injected fault),
# flagged (trials with any finding: on healthy rows, false alarms), named
# (findings in all), rounds beyond the matrix (mean, max) and the target
# bound ceil(log2 n) + 2. Targets of issue 23: slow node recall >= 0.98 and
# precision >= 0.95, slow link >= 0.9 both, healthy runs no suspect.
# With 8 ranks per node at --level rank, n counts ranks: --per-node 8
# --level rank --ranks 64,256. Harder fabrics: --oversubscription 2 (leaf
# uplinks carry half their hosts' NICs: crowded rounds slow cross-leaf
# pairs), --noise 3 (every noise of the model three times larger), and a
# --slowdown closer to 1 (1.15: 13% slower, near the rule's 10%).
# The heatmap (default: results/bench-links-<UTC time>/heatmap-<n>.png and
# .svg) shows the largest size with one slow node, and its report follows
# the table.
#
# Runs the ignored test links::bench::tests::benchmark in release mode,
# built without the MPI and NCCL features (the simulation needs neither).
set -euo pipefail
cd "$(dirname "$0")/../.."

ranks=16,64,256
trials=100
slowdown=1.5
per_node=1
level=node
seed=1
oversub=1
noise=1
heatmap=default
while [ $# -gt 0 ]; do
    case "$1" in
        --ranks) ranks=${2:?--ranks needs a value}; shift 2 ;;
        --trials) trials=${2:?--trials needs a value}; shift 2 ;;
        --slowdown) slowdown=${2:?--slowdown needs a value}; shift 2 ;;
        --per-node) per_node=${2:?--per-node needs a value}; shift 2 ;;
        --level) level=${2:?--level needs a value}; shift 2 ;;
        --seed) seed=${2:?--seed needs a value}; shift 2 ;;
        --oversubscription) oversub=${2:?--oversubscription needs a value}; shift 2 ;;
        --noise) noise=${2:?--noise needs a value}; shift 2 ;;
        --heatmap) heatmap=${2:?--heatmap needs a value}; shift 2 ;;
        --no-heatmap) heatmap=""; shift ;;
        -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) printf 'links-finder.sh: unknown option %s (see --help)\n' "$1" >&2; exit 2 ;;
    esac
done
if [ "$heatmap" = default ]; then
    out="results/bench-links-$(date -u +%Y%m%dT%H%M%SZ)"
    mkdir -p "$out"
    heatmap="$out/heatmap-${ranks##*,}"
fi

echo "# collbench links finder on the simulation: ranks $ranks, $per_node per node, level $level, $trials trials per cell, slowdown $slowdown, seed $seed, oversubscription $oversub, noise x$noise"
echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
export LINKS_BENCH_RANKS="$ranks" LINKS_BENCH_TRIALS="$trials" LINKS_BENCH_SLOWDOWN="$slowdown" \
    LINKS_BENCH_PER_NODE="$per_node" LINKS_BENCH_LEVEL="$level" LINKS_BENCH_SEED="$seed" \
    LINKS_BENCH_OVERSUBSCRIPTION="$oversub" LINKS_BENCH_NOISE="$noise"
if [ -n "$heatmap" ]; then
    export LINKS_BENCH_HEATMAP="$heatmap"
fi
cargo test --locked --release --quiet --no-default-features --lib links::bench::tests::benchmark \
    -- --ignored --nocapture --test-threads 1 2>&1 | grep -v -E '^(running [0-9]+ tests?|test result: .*|\.)$'
