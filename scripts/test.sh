#!/usr/bin/env bash
# Runs every check and test of collbench; installs what is missing first.
# This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/setup.sh
collbench_ensure_deps
collbench_mpirun_env

echo "== formatting and lints"
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all -- --check
else
    echo "(rustfmt not installed: skipped)"
fi
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --locked --all-targets -- -D warnings
    cargo clippy --locked --all-targets --no-default-features -- -D warnings
else
    echo "(clippy not installed: skipped)"
fi

echo "== build without MPI"
cargo build --locked --no-default-features

echo "== tests (unit, and the real binary under mpirun with 1 to 4 ranks)"
cargo test --locked --all-targets "$@"
