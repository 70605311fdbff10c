#!/usr/bin/env bash
# Checks the slow-rank verdict (`-I`, the footer's Stragglers line) with a
# rank slowed for real and prints what it named; nothing is asserted, the
# figures are for a person to read.
#
#   scripts/bench/stragglers.sh [--runs N] [--np N] [--slow-rank R]
#                               [--quota-us Q] [--period-us P] [-- RUN-ARGS...]
#
# Runs N slowed and N healthy launches of `collbench run -I`, alternating:
#   - slowed: rank R's process (and only it) is moved into a cgroup v1 CPU
#     controller group with cpu.cfs_quota_us Q per cpu.cfs_period_us P
#     (default 1000 per 10000: a tenth of one CPU) before it starts, by a
#     wrapper that writes its own pid to the group's cgroup.procs and execs
#     collbench;
#   - healthy: the same launch without the group.
# and prints, per launch, the Stragglers line and, for comparison, how
# often the duration signal (the CSV's slowest_rank) named rank R and its
# median excess, then how many slowed
# launches named rank R, how many named any rank, and how many healthy
# launches named any rank (targets: R in N of N; none in N of N), with the
# time of a launch and the load average before and after.
# Defaults: --runs 10 --np 2 --slow-rank 1; RUN-ARGS replace the default
#   --collectives all_reduce,all_gather -b 64K -e 4M -f 4 -n 20 -N 3
# (a slowed CPU shows where a rank's own work is long: the larger sizes).
# Needs root and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu; ranks
# are not bound to cores (mpirun --bind-to none), so that no rank shares a
# core with a busier process by placement. Files:
# results/bench-stragglers-<UTC time>/ (one log and CSV per launch).
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"

runs=10
np=2
slow_rank=1
quota_us=1000
period_us=10000
run_args=(--collectives all_reduce,all_gather -b 64K -e 4M -f 4 -n 20 -N 3)
while [ $# -gt 0 ]; do
    case "$1" in
        --runs | --np | --slow-rank | --quota-us | --period-us) bench_opt "$@"; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        --) shift; run_args=("$@"); break ;;
        *) bench_unknown "$1" ;;
    esac
done

controller=/sys/fs/cgroup/cpu
if [ "$(id -u)" != 0 ] || [ ! -w "$controller/cgroup.procs" ]; then
    echo "stragglers.sh: needs root and the cgroup v1 cpu controller at $controller" >&2
    exit 2
fi
bench_collbench_mpi
bench_out stragglers
group="$controller/collbench-slow-$$"
mkdir "$group"
cleanup() {
    # the group empties as its process ends; then it can go
    rmdir "$group" 2>/dev/null || true
}
trap cleanup EXIT
echo "$period_us" > "$group/cpu.cfs_period_us"
echo "$quota_us" > "$group/cpu.cfs_quota_us"
wrapper="$out/slowed-rank.sh"
cat > "$wrapper" <<EOF
#!/bin/sh
# rank $slow_rank alone joins the quota group, then becomes collbench
rank=\${OMPI_COMM_WORLD_RANK:-\${PMIX_RANK:-\${PMI_RANK:-}}}
if [ "\$rank" = "$slow_rank" ]; then echo \$\$ > "$group/cgroup.procs"; fi
exec "\$@"
EOF
chmod +x "$wrapper"


# The duration signal of a launch's CSV, for comparison: "duration's
# slowest rank was R at K of N rows, its excess median X%".
durations() {
    local rows
    rows=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "slowest_rank") c = i; if ($i == "slowest_excess_pct") e = i }; next }
                   c && $c != "" { print $c, $e + 0 }' "$1")
    [ -n "$rows" ] || { echo "no slowest_rank rows"; return; }
    printf '%s\n' "$rows" | awk -v r="$slow_rank" '$1 == r { k++ } END { printf "duration names rank %s at %d of %d rows", r, k, NR }'
    printf '%s\n' "$rows" | awk '{ print $2 }' | sort -g \
        | awk '{ v[NR] = $1 } END { printf ", slowest excess median %.2f%%\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# One launch; prints "seconds named-rank-or-none | Stragglers line".
launch() {
    local tag=$1
    shift
    local start end line named
    start=$(now)
    set +e
    mpirun --bind-to none -np "$np" "$@" "$COLLBENCH" run "${run_args[@]}" -I --no-progress \
        --csv "$out/$tag.csv" --overwrite > "$out/$tag.log" 2>&1
    set -e
    end=$(now)
    line=$(grep -E '^# Stragglers' "$out/$tag.log" | sed 's/^# Stragglers *: //' || true)
    [ -n "$line" ] || line="(no Stragglers line: see $out/$tag.log)"
    named=$(printf '%s\n' "$line" | sed -n 's/^rank \([0-9]*\) on .*/\1/p')
    printf '%s %s | %s\n    (%s)\n' "$(seconds "$start" "$end")" "${named:-none}" "$line" \
        "$(durations "$out/$tag.csv" 2>/dev/null || echo 'no CSV')"
}

echo "# collbench slow-rank verdict: np $np, rank $slow_rank held to $quota_us us of CPU per $period_us us, $runs slowed and $runs healthy launches"
echo "# run arguments: ${run_args[*]} -I"
bench_banner
echo "# load before: $(load)"
slowed_right=0
slowed_any=0
healthy_any=0
times=()
for i in $(seq 1 "$runs"); do
    { read -r secs named rest; read -r dur; } < <(launch "slowed-$i" "$wrapper")
    times+=("$secs")
    [ "$named" = none ] || slowed_any=$((slowed_any + 1))
    [ "$named" != "$slow_rank" ] || slowed_right=$((slowed_right + 1))
    echo "slowed  $i: ${secs} s ${rest}"
    echo "            $dur"
    { read -r secs named rest; read -r dur; } < <(launch "healthy-$i")
    times+=("$secs")
    [ "$named" = none ] || healthy_any=$((healthy_any + 1))
    echo "healthy $i: ${secs} s ${rest}"
    echo "            $dur"
done
echo "# load after: $(load)"
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(printf '%s\n' "$sorted" | bench_median)
echo
echo "## results"
echo "slowed launches that named rank $slow_rank: $slowed_right of $runs (target: $runs of $runs)"
echo "slowed launches that named any rank:  $slowed_any of $runs"
echo "healthy launches that named any rank: $healthy_any of $runs (target: 0 of $runs)"
echo "one launch: median ${median} s, longest $(printf '%s\n' "$sorted" | tail -n 1) s"
