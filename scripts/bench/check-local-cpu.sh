#!/usr/bin/env bash
# collbench check's local-cpu gate on this machine (docs/check.md), the
# figures of issue 24's "Done means": how long local-cpu takes at 2 ranks,
# false failures over N healthy runs, and whether each of the 3 injected
# faults fails with the faulty node or link named. Needs root for the fake
# nodes (scripts/fake-nodes.sh). Run it on a quiet machine:
#
#   scripts/bench/check-local-cpu.sh [N]        (N healthy runs, default 20)
#
# COLLBENCH_BIN=PATH uses that binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-20}
if [ -n "${COLLBENCH_BIN:-}" ]; then
    bin=$COLLBENCH_BIN
else
    cargo build --release --quiet
    bin=$PWD/target/release/collbench
fi
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scripts/fake-nodes.sh setup 3 >/dev/null

echo "== healthy: local-cpu at 2 ranks on one node, $runs runs"
fails=0 worst=0
for i in $(seq 1 "$runs"); do
    start=$(date +%s.%N)
    rc=0
    mpirun --oversubscribe -np 2 "$bin" check --profile local-cpu --out "$out/h$i" >"$out/h$i.log" 2>&1 || rc=$?
    took=$(echo "$(date +%s.%N) - $start" | bc)
    worst=$(echo "if ($took > $worst) $took else $worst" | bc)
    medians=$(grep -E '^  (node|job)-' "$out/h$i.log" | awk '{printf "%s=%s ", $1, $5}')
    printf 'run %2d: exit %d  %5.1f s  %s\n' "$i" "$rc" "$took" "$medians"
    [ "$rc" = 0 ] || fails=$((fails + 1))
done
printf 'healthy: %d false failures in %d runs; slowest run %.1f s (target 60 s)\n' "$fails" "$runs" "$worst"

echo "== healthy: 3 fake nodes of 1 rank"
rc=0
scripts/fake-nodes.sh mpirun cbnode1:1,cbnode2:1,cbnode3:1 -- "$bin" check --profile local-cpu --out "$out/f0" \
    >"$out/f0.log" 2>&1 || rc=$?
grep -E '^  (pair|job)-|verdict:' "$out/f0.log"; echo "exit $rc"

named=0
fault() { # NAME EXPECTED-TEXT COMMAND...
    local name=$1 want=$2 rc=0
    shift 2
    "$@" >"$out/$name.log" 2>&1 || rc=$?
    grep -E '^  (node|pair|job)-|verdict:' "$out/$name.log"
    if [ "$rc" = 6 ] && grep -qF "$want" "$out/$name.log"; then
        echo "$name: exit $rc, named: yes"; named=$((named + 1))
    else
        echo "$name: exit $rc, named: NO (wanted '$want')"
    fi
}
echo "== fault 1: a slow node (cbnode2 at 1% of a CPU, cgroup quota)"
fault slow-node "verdict: FAIL: 1 of 3 nodes: cbnode2" \
    scripts/fake-nodes.sh --slow-node cbnode2=1 mpirun cbnode1:1,cbnode2:1,cbnode3:1 -- \
    "$bin" check --profile local-cpu --out "$out/f1"
echo "== fault 2: a slow link (cbnode1-cbnode2 at 100 Mbit/s, HTB on lo)"
fault slow-link "the link cbnode1+cbnode2 (pair-all-reduce-1m) fails" \
    scripts/fake-nodes.sh --slow-link cbnode1-cbnode2=100mbit mpirun cbnode1:1,cbnode2:1,cbnode3:1 -- \
    "$bin" check --profile local-cpu --out "$out/f2"
echo "== fault 3: TCP forced inside a node (--transport tcp)"
fault transport "(node-all-reduce-4k" \
    mpirun --oversubscribe -np 2 "$bin" check --profile local-cpu --transport tcp --out "$out/f3"
echo "faults: $named of 3 failed with the faulty node or link named"
