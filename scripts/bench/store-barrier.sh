#!/usr/bin/env bash
# Measures the MPI-free control plane (the TCP store, docs/launch.md) at
# scale: N store clients as threads of one process on this machine, each a
# rank of one job, and prints per N the start-up (threads started until the
# last rank joined) and the release skew of a barrier (the last rank's
# release less the first's, median, p90 and max over the barriers), the
# skew of the release frames' sending (when the frame for the last rank
# was written, by rank 0 or a relay, less the first: the release's own
# spread, without the receivers' wait for a core), and how long after
# rank 0 enters a barrier the last rank leaves it. A benchmark
# script, not a test: it prints figures and judges nothing. On a machine
# with fewer cores than clients the figures include the wait for a core.
#
#   scripts/bench/store-barrier.sh [--clients 64,256,1024] [--barriers 50] [--star]
#
# Answers go down a tree of 16 children per rank (src/world/store/tree.rs);
# --star also measures each size with rank 0 answering every rank itself,
# as the store did before.
# Runs the ignored test world::store::bench::tests::benchmark in release
# mode, built without the MPI and NCCL features (the store needs neither).
set -euo pipefail
cd "$(dirname "$0")/../.."
clients=64,256,1024
barriers=50
star=0
while [ $# -gt 0 ]; do
    case $1 in
        --clients) clients=$2; shift 2 ;;
        --barriers) barriers=$2; shift 2 ;;
        --star) star=1; shift ;;
        *) echo "usage: $0 [--clients 64,256,1024] [--barriers 50] [--star]" >&2; exit 2 ;;
    esac
done
echo "# store barrier at scale: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
STORE_BENCH_CLIENTS=$clients STORE_BENCH_BARRIERS=$barriers STORE_BENCH_STAR=$star \
    cargo test --locked --release --quiet --no-default-features --lib world::store::bench::tests::benchmark \
    -- --ignored --nocapture --test-threads 1 2>&1 | grep -v -E '^(running [0-9]+ tests?|test result: .*|\.)$'
