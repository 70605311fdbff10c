#!/usr/bin/env bash
# Runs every check and test of collbench; installs what is missing first.
# This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/setup.sh
collbench_ensure_deps
collbench_ensure_tmux
collbench_ensure_cluster_tools
collbench_ensure_prom_parser
collbench_mpirun_env
# The local Slurm of tests/it/slurm.rs stops when the tests end; this is
# the belt to its braces.
trap 'scripts/local-slurm.sh stop "${CARGO_TARGET_DIR:-target}/tmp/local-slurm" >/dev/null 2>&1 || true' EXIT

echo "== NCCL library for the tests (PyPI's nvidia-nccl-cu12 wheel, cached in .cache/nccl)"
if [ -n "${COLLBENCH_TEST_NCCL_LIB:-}" ] && [ -f "$COLLBENCH_TEST_NCCL_LIB" ]; then
    echo "using $COLLBENCH_TEST_NCCL_LIB"
else
    collbench_fetch_nccl
    echo "using $COLLBENCH_TEST_NCCL_LIB"
fi
# The NCCL tests fail, rather than skip, when the library is missing.
export COLLBENCH_REQUIRE_NCCL=1

echo "== host GPU simulation (tests/gpu-sim, against the real cuda.h and nccl.h) into target/gpu-sim"
scripts/gpu-sim.sh target/gpu-sim
# tests/it/gpu_sim.rs runs the NCCL backend on it (and fails without it).
export GPUSIM_DIR="$PWD/target/gpu-sim"

echo "== formatting and lints"
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all -- --check
else
    echo "(rustfmt not installed: skipped)"
fi
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --locked --all-targets -- -D warnings
    cargo clippy --locked --all-targets --no-default-features -- -D warnings
    cargo clippy --locked --all-targets --no-default-features --features nccl -- -D warnings
else
    echo "(clippy not installed: skipped)"
fi
echo "== no function over 80 lines outside tests (docs/contributing.md)"
python3 scripts/dev/fn-lengths.py --over 80

echo "== builds without MPI: nothing, and the GPU build (nccl, nvml: docs/launch.md), kept for the tests"
cargo build --locked --no-default-features
cargo build --locked --no-default-features --features nccl,nvml
mkdir -p target/mpi-free
cp target/debug/collbench target/mpi-free/collbench
# tests/it/launch.rs starts it where libmpi cannot be loaded, and
# tests/it/gpu_sim.rs gives it to scripts/gpu-smoke.sh (the build GPU
# machines get).
export COLLBENCH_MPI_FREE_BIN="$PWD/target/mpi-free/collbench"

echo "== tests (unit, the real binary under mpirun with 1 to 4 ranks, across fake nodes, under a local Slurm and without MPI, the NCCL library without a GPU, the NCCL backend on the GPU simulation)"
cargo test --locked --all-targets "$@"
