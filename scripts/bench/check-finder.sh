#!/usr/bin/env bash
# collbench check's pair scope with the finder (docs/check.md, "The
# finder") on 4 fake nodes of 1 rank (scripts/fake-nodes.sh; root): the
# figures of issue 35's "Done means". SLOW launches with one node's ranks
# held to QUOTA% of one CPU (a cgroup quota), where the pair check's
# absolute floor holds and the finder must name the node; then HEALTHY
# launches, none of which may fail. Prints one line per launch (exit code,
# seconds, the nodes that fail, what the finder named, the pair check's
# lowest median, the load, and the checks that fail or are not judged)
# and the counts: how often the finder names the slowed node, and how
# often it is the only failing node (target 5 of 5); how often a healthy
# launch fails (target 0 of 10), is not judged, or has the finder name
# anything.
#
#   scripts/bench/check-finder.sh [--slow N] [--healthy N] [--quota PCT] [--checks LIST]
#
# Defaults: 5 slow launches, 10 healthy, 15% of one CPU, local-cpu's pair
# scope: --checks pair-all-reduce-1m,pair-finder (a node of 1 rank has no
# node check to judge, and the job check judges the whole machine's load;
# give pair-finder alone for the finder alone). The nodes are cbnode13 to
# cbnode16, which no test uses: a link fault on lo (another session's
# links test) matches a node's address whoever runs on it. COLLBENCH=PATH
# uses that binary instead of a release build. Each launch's folder (the
# verdicts and the finder's report) is kept under
# results/bench-check-finder-<time>/.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

slow=5
healthy=10
quota=15
checks=pair-all-reduce-1m,pair-finder
while [ $# -gt 0 ]; do
    case "$1" in
        --slow | --healthy | --quota | --checks) bench_opt "$@"; shift 2 ;;
        -h | --help) bench_help; exit 0 ;;
        *) bench_unknown "$1" ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "check-finder.sh: fake nodes need root" >&2; exit 2; }
command -v python3 >/dev/null || { echo "check-finder.sh: python3 is needed to read check.json" >&2; exit 2; }
bench_collbench_mpi
scripts/fake-nodes.sh setup 16 >/dev/null
nodes=cbnode13,cbnode14,cbnode15,cbnode16
target=cbnode15
bench_out check-finder
bench_banner

# "failing nodes|checks failing or not judged|finder's named|lowest pair
# median" from a check.json
summary() {
    python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
failing = [n["host"] for n in doc["nodes"] if n["status"] in ("fail", "flaky")]
bad = sorted({v["check"] + " " + v["status"] for v in doc["verdicts"] if v["status"] in ("fail", "flaky", "not_judged")})
named = [v["group"] for v in doc["verdicts"] if v["check"] == "pair-finder" and v["why"] == "named by the finder"]
pairs = [v["value"] for v in doc["verdicts"] if v["check"] == "pair-all-reduce-1m" and v["value"] is not None]
low = f"{min(pairs):.3f}" if pairs else "-"
print(",".join(failing) or "none", ", ".join(bad) or "-", ",".join(named) or "none", low, sep="|")
PY
}

# One launch: CASE TRY [fake-nodes faults...]; prints its line, sets
# code, failing and named.
launch() {
    local case=$1 try=$2 start dir took bad low
    shift 2
    dir=$out/$case-$try
    start=$(now)
    code=0
    scripts/fake-nodes.sh "$@" mpirun "$nodes" -- "$COLLBENCH" check --profile local-cpu --only "$checks" \
        --out "$dir" >"$dir.txt" 2>&1 || code=$?
    took=$(seconds "$start" "$(now)")
    if [ -f "$dir/check.json" ]; then
        IFS='|' read -r failing bad named low < <(summary "$dir/check.json")
    else
        failing=- bad=- named=- low=-
    fi
    printf '%-8s %2s  exit %s %6s s  failing %-18s finder named %-9s pair min %5s GB/s  load %s  (%s)\n' \
        "$case" "$try" "$code" "$took" "$failing" "$named" "$low" "$(load)" "$bad"
}

echo "# collbench check --profile local-cpu --only $checks on 4 fake nodes ($nodes), 1 rank each; $(nproc) cores"
echo "# load average at start: $(load)"
named_n=0 alone=0
for t in $(seq 1 "$slow"); do
    launch slow "$t" --slow-node "$target=$quota"
    [ "$named" = "$target" ] && named_n=$((named_n + 1))
    [ "$code" = 6 ] && [ "$failing" = "$target" ] && alone=$((alone + 1))
done
fails=0 unjudged=0 passed=0 finder=0
for t in $(seq 1 "$healthy"); do
    launch healthy "$t"
    [ "$named" = none ] || finder=$((finder + 1))
    case $code in
        0) passed=$((passed + 1)) ;;
        6) fails=$((fails + 1)) ;;
        9) unjudged=$((unjudged + 1)) ;;
    esac
done
echo
echo "slow node ($target at $quota% of a CPU): the finder named it in $named_n of $slow launches (target $slow of $slow); exit 6 with it the only failing node in $alone of $slow"
echo "healthy: $fails of $healthy launches failed (target 0), $unjudged not judged (exit 9), $passed passed; the finder named a node or link in $finder of $healthy"
echo "# load average at end: $(load); launches in $out"
