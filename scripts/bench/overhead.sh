#!/usr/bin/env bash
# collbench's own overhead against a minimal timing loop (raw_allreduce.c),
# and the wall time of one launch of every collective against nine.
# A benchmark, not a test: it prints measured figures, it judges nothing.
#
#   scripts/bench/overhead.sh [REPETITIONS] [ITERS]
#
# Both sides: all_reduce of floats at np = 2, 8 B to 16 MiB doubling, ITERS
# (default 200) back-to-back operations after 20 warm-up ones, time per
# operation averaged over ranks. collbench runs with -n ITERS -w 20 -c 0
# --no-rotate so that it times the same thing the loop does (fixed
# buffers, no checking). The two alternate, first one then the other, for
# REPETITIONS (default 7) rounds; the table gives each side's median per
# size and collbench / raw.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"
bench_deps

reps=${1:-7}
iters=${2:-200}
np=2
cargo build --locked --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/raw_allreduce" scripts/bench/raw_allreduce.c

mpi=(mpirun --oversubscribe -np "$np")
raw() { "${mpi[@]}" "$work/raw_allreduce" 8 16777216 "$iters" 20 > "$work/raw.$1"; }
cb() {
    "${mpi[@]}" target/release/collbench run --collectives all_reduce -b 8 -e 16M -f 2 -n "$iters" -w 20 -c 0 \
        --no-rotate --no-progress --csv "$work/cb.$1.csv" > /dev/null
    # size_bytes time_us of the out-of-place rows
    awk -F, 'NR > 1 && $13 == "out_of_place" {print $14, $21}' "$work/cb.$1.csv" > "$work/cb.$1"
}
for r in $(seq "$reps"); do
    if [ $((r % 2)) = 1 ]; then raw "$r"; cb "$r"; else cb "$r"; raw "$r"; fi
done

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(mpirun --version | head -1)"
echo "all_reduce float, np=$np, $iters iterations, median of $reps alternating repetitions"
printf '%10s %12s %12s %8s %18s\n' "size (B)" "raw (us)" "collbench" "ratio" "per-round ratios"
python3 - "$work" "$reps" <<'PY'
import statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
def load(kind):
    rounds = []
    for r in range(1, reps + 1):
        rounds.append({int(s): float(t) for s, t in (line.split() for line in open(f"{work}/{kind}.{r}"))})
    return rounds
raw, cb = load("raw"), load("cb")
medians = []
for size in sorted(raw[0]):
    r = statistics.median(x[size] for x in raw)
    c = statistics.median(x[size] for x in cb)
    # each round runs both tools back to back: their ratio shows the noise
    per_round = sorted(b[size] / a[size] for a, b in zip(raw, cb))
    q1, q3 = per_round[len(per_round) // 4], per_round[(3 * len(per_round)) // 4]
    medians.append(c / r)
    print(f"{size:>10} {r:>12.2f} {c:>12.2f} {c / r:>8.3f}   {q1:.2f} .. {q3:.2f} (IQR)")
print(f"ratio of medians: median {statistics.median(medians):.3f}, min {min(medians):.3f}, max {max(medians):.3f}")
PY

echo
echo "wall time: one launch of all nine collectives against nine launches (np=$np, 8 B to 1 MiB, -n 20)"
opts=(-b 8 -e 1M -f 2 -n 20 --no-progress)
start=$(date +%s.%N)
"${mpi[@]}" target/release/collbench run "${opts[@]}" --csv "$work/all.csv" > /dev/null
one=$(echo "$(date +%s.%N) - $start" | bc)
start=$(date +%s.%N)
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
    "${mpi[@]}" target/release/collbench run "${opts[@]}" --collectives "$c" --csv "$work/$c.csv" > /dev/null
done
nine=$(echo "$(date +%s.%N) - $start" | bc)
printf 'one launch: %.2f s, nine launches: %.2f s\n' "$one" "$nine"
