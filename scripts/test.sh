#!/usr/bin/env bash
# Runs every check and test of collbench; installs what is missing first.
# This is what CI runs (.ci/run).
#
#   scripts/test.sh                 lints, builds, then the two tiers of tests, one after the other
#   scripts/test.sh --quick         lints, builds and the main tier alone: the edit-test loop
#   scripts/test.sh [--quick] ARGS  ARGS go to each tier's `cargo nextest run`, e.g. a filter:
#                                   scripts/test.sh --quick -E 'test(/^split::/)'
#
# The tiers (.config/nextest.toml; docs/contributing.md):
#   main     unit tests; the binary alone, on the memory backend (-g N) and under mpirun at
#            1 to 4 ranks; NCCL without a GPU; the NCCL backend on the GPU simulation; the
#            docs' examples
#   cluster  fake nodes with real CPU and link faults, a local Slurm, and the verdicts that
#            statistics over real measurements decide; one test at a time
# Each tier ends with its summary line, its 15 slowest tests and the programs its tests
# started (scripts/dev/slowest-tests.py); the exit code is 0 only if every tier passed.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then
    quick=1
    shift
fi
. scripts/lib/setup.sh
collbench_ensure_deps
collbench_ensure_nextest
collbench_ensure_tmux
collbench_ensure_cluster_tools
collbench_ensure_prom_parser
collbench_mpirun_env
# Each test process of tests/it/slurm.rs runs its own local Slurm, which
# stops when that process ends; this is the belt to its braces.
stop_slurms() {
    local dir
    for dir in "${CARGO_TARGET_DIR:-target}"/tmp/local-slurm/*/; do
        [ -f "$dir/slurm.conf" ] && scripts/local-slurm.sh stop "$dir" >/dev/null 2>&1
    done
    return 0
}
# The tests' temporary files, and what the binaries they start leave in
# TMPDIR (a run that fails keeps its NCCL log there for diagnosis, and
# many tests make runs fail on purpose), in one folder removed at the end.
tests_tmp=$(mktemp -d /tmp/collbench-tests.XXXXXX)
export TMPDIR="$tests_tmp"
finish() {
    stop_slurms
    rm -rf "$tests_tmp"
}
trap finish EXIT

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
echo "== one place for each rule (docs/ARCHITECTURE.md)"
scripts/dev/one-place.sh

echo "== builds without MPI: nothing, and the GPU build (nccl, nvml: docs/launch.md), kept for the tests"
cargo build --locked --no-default-features
cargo build --locked --no-default-features --features nccl,nvml
mkdir -p target/mpi-free
# The workspace's default members build the profiler plugin with the
# binary (docs/algorithms.md); it travels beside it.
cp target/debug/collbench target/debug/libcollbench_profiler.so target/mpi-free/
# tests/it/launch.rs starts it where libmpi cannot be loaded, and
# tests/it/gpu_sim.rs gives it to scripts/gpu-smoke.sh (the build GPU
# machines get).
export COLLBENCH_MPI_FREE_BIN="$PWD/target/mpi-free/collbench"

echo "== building the tests"
cargo nextest run --locked --all-targets --no-run

# Runs one tier: its tests, its summary line, its slowest tests and the
# programs they started. Returns the tier's exit code.
tier() {
    local name=$1 what=$2 store="target/nextest/$1" started rc=0
    shift 2
    echo "== $name tier: $what"
    mkdir -p "$store"
    rm -f "$store/junit.xml"
    export COLLBENCH_TEST_LOG="$PWD/$store/programs.log"
    : > "$COLLBENCH_TEST_LOG"
    started=$(date +%s)
    cargo nextest run --locked --all-targets --profile "$name" --no-tests=warn "$@" || rc=$?
    python3 scripts/dev/slowest-tests.py "$store/junit.xml" --programs "$COLLBENCH_TEST_LOG" \
        --tier "$name" --wall $(($(date +%s) - started)) --exit "$rc" || true
    return "$rc"
}

status=0
tier main "unit tests, the binary alone, on the memory backend and under mpirun, NCCL without a GPU, the GPU simulation, the docs' examples" "$@" || status=1
if [ "$quick" = 0 ]; then
    tier cluster "fake nodes with real faults, a local Slurm, statistical verdicts; one test at a time" "$@" || status=1
fi
exit "$status"
