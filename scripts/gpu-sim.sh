#!/usr/bin/env bash
# Builds the host GPU simulation (tests/gpu-sim) into DIR:
#
#   scripts/gpu-sim.sh DIR
#
# writes DIR/libcuda.so.1 (the CUDA driver calls collbench and cudarc make)
# and DIR/libnccl.so.2 (the NCCL calls collbench makes), both compiled
# against the real headers: cuda.h from PyPI's nvidia-cuda-runtime-cu12
# wheel (cached in .cache/cuda), nccl.h from nvidia-nccl-cu12 (cached in
# .cache/nccl, as scripts/test.sh fetches it; COLLBENCH_NCCL_CACHE points
# elsewhere). Then, on N simulated GPUs:
#
#   LD_LIBRARY_PATH=DIR COLLBENCH_NCCL_LIB=DIR/libnccl.so.2 GPUSIM_DEVICES=N \
#       collbench run --backend nccl -g N ...        (or under mpirun -np N)
#
# Every run on it says so (backend_version 2.32.3-sim, the table header,
# `collbench info`). For tests only: it proves plumbing, semantics, counts,
# offsets, validation, error paths and the ABI, never speed. The fault
# switches (GPUSIM_*), the NCCL release it plays and the misuses it refuses
# are listed at the top of the two C files and in docs/gpu-simulation.md;
# tests/gpu-sim/misuse.c (compiled by tests/it/gpu_sim.rs) plants each
# misuse.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/gpu-sim.sh DIR" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
. scripts/lib/setup.sh

collbench_fetch_cuda_headers
if [ -n "${COLLBENCH_NCCL_INCLUDE:-}" ] && [ -f "$COLLBENCH_NCCL_INCLUDE/nccl.h" ]; then
    nccl_include=$COLLBENCH_NCCL_INCLUDE
else
    collbench_fetch_nccl
    nccl_include=$(dirname "$(dirname "$COLLBENCH_TEST_NCCL_LIB")")/include
fi
[ -f "$nccl_include/nccl.h" ] || { collbench_note "no nccl.h in $nccl_include"; exit 1; }

cc=${CC:-cc}
src=tests/gpu-sim
# The stand-ins in $src/include come first: nccl.h includes
# <cuda_runtime.h>, which needs headers the runtime wheel lacks.
flags=(-std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -I"$src/include" -I"$COLLBENCH_CUDA_INCLUDE" -I"$nccl_include")
"$cc" "${flags[@]}" -o "$out/libcuda.so.1.tmp" -Wl,-soname,libcuda.so.1 "$src/cuda_sim.c" -lpthread
mv "$out/libcuda.so.1.tmp" "$out/libcuda.so.1"
"$cc" "${flags[@]}" -o "$out/libnccl.so.2.tmp" -Wl,-soname,libnccl.so.2 "$src/nccl_sim.c" "$src/nccl_env.c" "$src/nccl_log.c" "$src/profiler.c" \
    -L"$out" -l:libcuda.so.1 -Wl,-rpath,'$ORIGIN' -lpthread -lm -ldl
mv "$out/libnccl.so.2.tmp" "$out/libnccl.so.2"
# Where the headers were, for the ABI check (tests/it/gpu_sim.rs).
printf 'CUDA_INCLUDE=%s\nNCCL_INCLUDE=%s\n' "$COLLBENCH_CUDA_INCLUDE" "$nccl_include" > "$out/headers.env"
echo "gpu-sim: built $out/libcuda.so.1 and $out/libnccl.so.2 (NCCL $(sed -n 's/^#define NCCL_VERSION_CODE //p' "$nccl_include/nccl.h"))"
