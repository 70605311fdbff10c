#!/usr/bin/env bash
# How long a timing loop runs changes what a blocking mean measures on a
# shared, oversubscribed machine: the experiment behind docs/measurement.md
# ("The --blocking all_reduce gap"). A benchmark, not a test.
#
#   scripts/bench/exposure.sh [ROUNDS] [HOGS]
#
# raw_collectives.c's blocking MPI_Allreduce loop (np = 2, page-aligned
# buffers, 16 KiB to 1 MiB) with OSU's iteration counts (100 above 8 KiB)
# and with 3000 iterations, each with no extra load and with HOGS (default
# 2) busy loops beside the two ranks (started and stopped here, by process
# id), the four interleaved for ROUNDS (default 3) rounds. Prints each
# condition's mean time per operation per round, and the load average.
set -euo pipefail
. "$(dirname "$0")/../lib/bench.sh"
bench_deps

rounds=${1:-3}
hogs=${2:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/raw" scripts/bench/raw_collectives.c
mpi=(${MPIRUN:-mpirun --oversubscribe} -np 2)

# run HOGS ITERS NAME ROUND
run() {
    local pids=() i
    for i in $(seq "$1"); do
        sh -c 'while :; do :; done' &
        pids+=($!)
    done
    if [ "$2" = osu ]; then
        "${mpi[@]}" "$work/raw" all_reduce 16384 1048576 osu osu blocking > "$work/$3.$4"
    else
        "${mpi[@]}" "$work/raw" all_reduce 16384 1048576 "$2" 10 blocking > "$work/$3.$4"
    fi
    for i in "${pids[@]}"; do kill "$i"; done
    wait "${pids[@]}" 2> /dev/null || true
}

echo "load average (before): $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    for k in 0 1 2 3; do
        case $(((k + r) % 4)) in
            0) run 0 osu short "$r" ;;
            1) run 0 3000 long "$r" ;;
            2) run "$hogs" osu short+hogs "$r" ;;
            3) run "$hogs" 3000 long+hogs "$r" ;;
        esac
    done
done
echo "load average (after): $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work" "$rounds" <<'PY'
import sys
work, rounds = sys.argv[1], int(sys.argv[2])
kinds = ["short", "long", "short+hogs", "long+hogs"]
data = {k: [dict(tuple(l.split()) for l in open(f"{work}/{k}.{r}")) for r in range(1, rounds + 1)] for k in kinds}
print("blocking MPI_Allreduce, np=2: mean us per operation, one figure per round")
print("short = OSU's 100 iterations, long = 3000; +hogs = busy loops beside the ranks")
print(f"{'size (B)':>9} " + " | ".join(f"{k:>{7 * rounds - 1}}" for k in kinds))
for size in data["short"][0]:
    print(f"{size:>9} " + " | ".join(" ".join(f"{float(data[k][r][size]):>6.0f}" for r in range(rounds)) for k in kinds))
PY
