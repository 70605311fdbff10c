#!/usr/bin/env bash
# The same job under mpirun and under the MPI-free store (docs/launch.md):
# an 8-byte all_reduce at N ranks (default 64) on the host GPU simulation,
# once launched by mpirun (the MPI control plane), once as N processes
# that meet at the TCP store (the Kubernetes-style variables: rank 0's
# store at COLLBENCH_STORE, JOB_COMPLETION_INDEX, WORLD_SIZE), each with
# --repeat samples. Prints each launch's per-sample time and the medians
# side by side. A benchmark script, not a test: it prints figures and
# judges nothing. The simulation's times are host memcpy and scheduling on
# this machine (fewer cores than ranks: every figure includes the wait for
# a core), so it compares the two control planes' barriers and reductions
# around the same data plane, never a network.
#
#   scripts/bench/store-vs-mpirun.sh [--ranks 64] [--iters 20] [--repeat 5]
#
# Needs: mpirun, the simulation (GPUSIM_DIR, else target/gpu-sim; built by
# scripts/gpu-sim.sh), the MPI build (target/debug/collbench, else
# COLLBENCH_BIN) and the MPI-free one (COLLBENCH_MPI_FREE_BIN, else
# target/mpi-free/collbench).
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=64
iters=20
repeat=5
while [ $# -gt 0 ]; do
    case $1 in
        --ranks) ranks=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        *) echo "usage: $0 [--ranks 64] [--iters 20] [--repeat 5]" >&2; exit 2 ;;
    esac
done
sim=${GPUSIM_DIR:-target/gpu-sim}
mpi_bin=${COLLBENCH_BIN:-target/debug/collbench}
free_bin=${COLLBENCH_MPI_FREE_BIN:-target/mpi-free/collbench}
for f in "$sim/libnccl.so.2" "$mpi_bin" "$free_bin"; do
    [ -e "$f" ] || { echo "store-vs-mpirun: missing $f" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export LD_LIBRARY_PATH=$sim COLLBENCH_NCCL_LIB=$sim/libnccl.so.2 GPUSIM_DEVICES=$ranks NO_COLOR=1
args=(run --backend nccl --collectives all_reduce -d float -b 8 -e 8 -n "$iters" -w 5 -N "$repeat" --no-progress --timeout 600)
echo "# store vs mpirun: $ranks ranks, all_reduce 8 B, $iters iterations x $repeat samples; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

root=()
if [ "$(id -u)" = 0 ]; then root=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); fi
start=$(date +%s.%N)
"${root[@]}" mpirun --oversubscribe -np "$ranks" "$mpi_bin" "${args[@]}" --csv "$out/mpirun.csv" > "$out/mpirun.txt" 2>&1 \
    || { echo "mpirun launch failed:"; tail -5 "$out/mpirun.txt"; exit 1; }
mpirun_s=$(echo "$(date +%s.%N) - $start" | bc)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
pids=()
for ((r = 0; r < ranks; r++)); do
    csv=()
    if [ "$r" = 0 ]; then csv=(--csv "$out/store.csv"); fi
    env -u OMPI_COMM_WORLD_RANK -u SLURM_JOB_ID -u RANK COLLBENCH_STORE="127.0.0.1:$port" JOB_COMPLETION_INDEX=$r \
        WORLD_SIZE="$ranks" "$free_bin" "${args[@]}" "${csv[@]}" > "$out/store-$r.txt" 2>&1 &
    pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || { echo "store launch failed:"; tail -5 "$out/store-0.txt"; exit 1; }
store_s=$(echo "$(date +%s.%N) - $start" | bc)

python3 - "$out/mpirun.csv" "$out/store.csv" "$mpirun_s" "$store_s" <<'PY'
import csv, statistics, sys
def times(path):
    with open(path, newline="") as f:
        return [float(r["time_us"]) for r in csv.DictReader(f) if r["placement"] == "out_of_place"]
m, s = times(sys.argv[1]), times(sys.argv[2])
for name, t, wall in (("mpirun", m, sys.argv[3]), ("store", s, sys.argv[4])):
    print(f"{name:<7} samples (us): {' '.join(f'{x:.1f}' for x in t)}  median {statistics.median(t):.1f}  "
          f"min {min(t):.1f}  max {max(t):.1f}  (whole launch {float(wall):.1f} s)")
mm, sm = statistics.median(m), statistics.median(s)
print(f"median store / mpirun: {sm / mm:.3f}; spread of each: mpirun {min(m) / mm:.2f}-{max(m) / mm:.2f}, "
      f"store {min(s) / sm:.2f}-{max(s) / sm:.2f} of its median")
PY
