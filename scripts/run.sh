#!/usr/bin/env bash
# Installs what is missing, builds collbench, and runs the default sweep
# (every collective, 8 B to 32 MiB) under mpirun with one rank per core
# (at least 2, at most 8). Extra arguments go to `collbench run`, e.g.
#   scripts/run.sh -e 1M --collectives all_reduce
# Set NP to choose the rank count. The CSV lands in results/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/setup.sh
collbench_ensure_deps
collbench_mpirun_env

cargo build --locked --release
cores=$(nproc 2>/dev/null || echo 2)
np=${NP:-$(( cores < 2 ? 2 : (cores > 8 ? 8 : cores) ))}
oversubscribe=()
if [ "$np" -gt "$cores" ] && mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    oversubscribe=(--oversubscribe)
fi
exec mpirun "${oversubscribe[@]}" -np "$np" target/release/collbench run "$@"
