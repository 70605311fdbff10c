#!/usr/bin/env bash
# `collbench links --find` on 4 fake nodes (scripts/fake-nodes.sh) with
# real faults, TRIES times each: healthy, a slow link (an HTB rate limit on
# lo between two nodes) and a slow node (a cgroup v1 CPU quota on one
# node's ranks). Prints, per try, what the finder named and how long the
# launch took, then per case how many tries named exactly the fault (and,
# healthy, named nothing). A measurement, not a test: it needs root and a
# machine that is not busy with other jobs for figures that mean much.
#
#   scripts/bench/links-faults.sh [--tries N] [--rate RATE] [--quota PCT] [--size SIZE]
#
# Defaults: 5 tries, 100mbit, 5% of one CPU, 256K. COLLBENCH_BIN picks the
# binary (default: a release build, made if need be). Each try's JSON and
# CSV are kept under results/bench-links-faults-<time>/.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

tries=5
rate=100mbit
quota=5
size=256K
while [ $# -gt 0 ]; do
    case "$1" in
        --tries | --rate | --quota | --size) bench_opt "$@"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) bench_unknown "$1" ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "links-faults.sh: fake nodes need root" >&2; exit 2; }
command -v python3 >/dev/null || { echo "links-faults.sh: python3 is needed to read the JSON" >&2; exit 2; }
bin=${COLLBENCH_BIN:-}
if [ -z "$bin" ]; then
    cargo build --locked --release --quiet
    bin=$PWD/target/release/collbench
fi
# nodes no test uses (a link fault on lo matches addresses)
scripts/fake-nodes.sh setup 12 >/dev/null
nodes=cbnode9,cbnode10,cbnode11,cbnode12
bench_out links-faults

# what a JSON report's finder named: "kind:host+host;..." or "none"
named() {
    python3 - "$1" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
f = doc["report"]["findings"]
print(";".join(x["kind"] + ":" + "+".join(x["hosts"]) for x in f) or "none")
EOF
}

echo "# collbench links --find on 4 fake nodes ($nodes), $tries tries per case, --size $size; binary $bin"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf '%-10s %-5s %-8s %s\n' case try seconds named
declare -A hits
for case in healthy slow-link slow-node; do
    case $case in
        healthy) faults=(); want=none ;;
        slow-link) faults=(--slow-link "cbnode10-cbnode12=$rate"); want="link:cbnode10+cbnode12" ;;
        slow-node) faults=(--slow-node "cbnode11=$quota"); want="node:cbnode11" ;;
    esac
    hits[$case]=0
    for t in $(seq 1 "$tries"); do
        json=$out/$case-$t.json
        start=$(date +%s.%N)
        if ! scripts/fake-nodes.sh "${faults[@]}" mpirun "$nodes" -- "$bin" links --backend mpi --find --size "$size" \
            --csv "$out/$case-$t.csv" --json "$json" > "$out/$case-$t.txt" 2>&1; then
            printf '%-10s %-5s %-8s %s\n' "$case" "$t" - "failed (see $out/$case-$t.txt)"
            continue
        fi
        took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
        got=$(named "$json")
        printf '%-10s %-5s %-8s %s\n' "$case" "$t" "$took" "$got"
        if [ "$got" = "$want" ]; then hits[$case]=$((hits[$case] + 1)); fi
    done
done
echo
printf '%-10s %-24s %s\n' case expected "exactly that"
printf '%-10s %-24s %s/%s\n' healthy none "${hits[healthy]}" "$tries"
printf '%-10s %-24s %s/%s\n' slow-link "link:cbnode10+cbnode12" "${hits[slow-link]}" "$tries"
printf '%-10s %-24s %s/%s\n' slow-node "node:cbnode11" "${hits[slow-node]}" "$tries"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); reports in $out"
