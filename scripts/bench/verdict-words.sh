#!/usr/bin/env bash
# Two of issue 35's verdicts, run for real and printed for a person to
# read (nothing is asserted; the targets are given beside the figures):
#
#   scripts/bench/verdict-words.sh [--pairs N]
#
#   1. a check without a launcher: `collbench check --profile local-cpu`
#      as one process (a cron job that forgot mpirun), with --prometheus
#      DIR: its exit code (target 9, not judged), its verdict line and the
#      node's value in DIR/HOST.prom (target 4, not judged; 0 would be a
#      pass);
#   2. two single launches, a bandwidth halved: N pairs of launches of the
#      README's recipe run (mpirun -np 2, one launch a side), the second
#      launch of each pair rewritten with every sample's time doubled and
#      its bandwidths halved (a planted 50% drop on top of the real
#      launch-to-launch noise), then `collbench compare first.csv
#      halved.csv`: how many exited 4 (target: all) and on how many rows;
#      and the same pairs unchanged (`compare first.csv second.csv`): how
#      many exited 4 (only the launch bound can fail them).
# Default: --pairs 5. Each line carries the load average (1, 5, 15
# minutes). Files: results/bench-verdict-words-<UTC time>/.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

pairs=5
while [ $# -gt 0 ]; do
    case "$1" in
        --pairs) bench_opt "$@"; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) bench_unknown "$1" ;;
    esac
done

bench_collbench_mpi
bench_out verdict-words
bench_banner

echo
echo "## 1. check without a launcher (load before: $(load))"
check_code=0
mkdir -p "$out/prom"    # a textfile directory, as node_exporter's
"$COLLBENCH" check --profile local-cpu --out "$out/check" --prometheus "$out/prom" \
    > "$out/check.log" 2>&1 || check_code=$?
echo "exit: $check_code (target 9: not judged)"
grep -m1 -E '^# verdict:' "$out/check.log" || echo "no verdict line: see $out/check.log"
value=$(grep -h '^collbench_check_node_result' "$out/prom/"*.prom 2>/dev/null || echo "none written")
echo "prometheus: $value (target value 4: not judged)"

# The README's run line, as readme-compare.sh reads it.
run_line=$(sed -n '/^## Compare two runs/,/^## /p' README.md | grep -m1 -E 'collbench run .*--csv base/' || true)
if [ -z "$run_line" ]; then
    echo "verdict-words.sh: README.md's \"Compare two runs\" recipe is not where this script reads it" >&2
    exit 2
fi
read -r -a run_args <<< "$(printf '%s\n' "$run_line" | sed -E 's/.*collbench run (.*) --csv .*/\1/')"

# Rewrites CSV $1 into $2 with the time columns doubled and the bandwidth
# columns halved, under another run_id: a launch at half the speed.
halve() {
    python3 - "$1" "$2" <<'EOF'
import csv, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, newline="") as f:
    rows = list(csv.DictReader(f))
fields = list(rows[0].keys())
for r in rows:
    r["run_id"] = r["run_id"] + "-halved"
    for c in ("time_us", "time_min_us", "time_max_us"):
        r[c] = repr(float(r[c]) * 2)
    for c in ("algbw_gbps", "busbw_gbps"):
        r[c] = repr(float(r[c]) / 2)
with open(dst, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
EOF
}

echo
echo "## 2. two single launches, a bandwidth halved ($pairs pairs; load before: $(load))"
caught=0 false=0
for i in $(seq 1 "$pairs"); do
    dir="$out/pair-$i"
    mkdir -p "$dir"
    for side in first second; do
        mpirun -np 2 "$COLLBENCH" run "${run_args[@]}" --no-progress --csv "$dir/$side.csv" \
            > "$dir/$side.log" 2>&1 || { echo "pair $i: launch $side failed: see $dir/$side.log"; continue 2; }
    done
    halve "$dir/second.csv" "$dir/halved.csv"
    code=0
    "$COLLBENCH" compare "$dir/first.csv" "$dir/halved.csv" > "$dir/halved.txt" 2>&1 || code=$?
    [ "$code" = 4 ] && caught=$((caught + 1))
    echo "pair $i halved: exit $code: $(grep -m1 -E '^(REGRESSION|OK|NO VERDICT)' "$dir/halved.txt" || true) (load $(load))"
    code=0
    "$COLLBENCH" compare "$dir/first.csv" "$dir/second.csv" > "$dir/same.txt" 2>&1 || code=$?
    [ "$code" = 4 ] && false=$((false + 1))
    echo "pair $i unchanged: exit $code: $(grep -m1 -E '^(REGRESSION|OK|NO VERDICT)' "$dir/same.txt" || true)"
done

echo
echo "## targets"
echo "1. one process: exit $check_code (target 9); prometheus: $value (target 4)"
echo "2. halved: $caught of $pairs exited 4 (target: all); unchanged: $false of $pairs exited 4"
