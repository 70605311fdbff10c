#!/usr/bin/env bash
# GPU smoke test of the NCCL backend on a machine with one GPU (world size 1:
# NCCL does not put two ranks on one GPU).
#
#   scripts/gpu-smoke.sh OUTDIR
#
# Runs every collective from 8 B to 1 GiB with checking, out-of-place and
# in-place, in several types (then every reduction on float), then the
# hierarchical all-reduce modes with phase times over every visible GPU (as
# virtual nodes: 8 GPUs are 2 nodes of 4, so that counts the node size does
# not divide take the padded path), then nccl-tests' extras (-m, -G, -R);
# prints the tables, and writes into OUTDIR: info.txt (what `collbench info`
# found), types.csv, ops.csv, hierarchy.csv, extras.csv and the printed
# tables (types.txt, ...).
#
# Which binary: $COLLBENCH_BIN if set; else target/release/collbench if it
# exists; else it is built here with `cargo build --release --no-default-features
# --features nccl` (no MPI needed to build or to run). The run uses `-g 1`
# (one rank, no MPI), so a binary built with or without MPI works.
#
# NCCL is found as `collbench run` finds it: --nccl-lib / COLLBENCH_NCCL_LIB,
# NCCL_HOME/lib, the dynamic loader (system packages), then the nvidia/nccl/lib
# folder of Python site-packages (pip install nvidia-nccl-cu12).
#
# Environment: COLLBENCH_BIN, COLLBENCH_NCCL_LIB, SMOKE_MAXBYTES (default 1G),
# SMOKE_TYPES (default int8,int32,half,float,bfloat16,double).
# Exit code: collbench's (0 ok, 1 runtime failure, 2 usage, 3 wrong results).
set -euo pipefail

say() { printf 'gpu-smoke: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[ $# -ge 1 ] || die "usage: scripts/gpu-smoke.sh OUTDIR"
out=$1
shift
mkdir -p "$out" || die "cannot create the output folder $out"
out=$(cd "$out" && pwd)

cd "$(dirname "$0")/.."

bin=${COLLBENCH_BIN:-}
if [ -z "$bin" ]; then
    if [ -x target/release/collbench ]; then
        bin=target/release/collbench
    elif command -v cargo >/dev/null 2>&1; then
        say "building collbench (release, NCCL backend, no MPI)"
        cargo build --release --no-default-features --features nccl >&2 \
            || die "the build failed; set COLLBENCH_BIN to a collbench binary built elsewhere"
        bin=target/release/collbench
    else
        die "no collbench binary: set COLLBENCH_BIN, or install Rust (cargo) to build one"
    fi
fi
[ -x "$bin" ] || die "COLLBENCH_BIN=$bin is not an executable file"
if ! "$bin" --version >/dev/null 2>&1; then
    die "$bin does not start (a build with MPI needs the MPI library at run time; build with --no-default-features --features nccl)"
fi

maxbytes=${SMOKE_MAXBYTES:-1G}
types=${SMOKE_TYPES:-int8,int32,half,float,bfloat16,double}

"$bin" info | tee "$out/info.txt"
if grep -q '^NCCL *not usable' "$out/info.txt"; then
    die "no usable NCCL library (see info.txt); install it (pip install nvidia-nccl-cu12, or the system package) or set COLLBENCH_NCCL_LIB"
fi
if ! grep -q '^GPUs *[1-9]' "$out/info.txt"; then
    die "no GPU visible (see info.txt): run this on a machine with an NVIDIA GPU and its driver"
fi

gpus=$(sed -n 's/^GPUs *\([0-9][0-9]*\) visible.*/\1/p' "$out/info.txt")
gpus=${gpus:-1}
# Virtual nodes for the hierarchical modes: the largest proper divisor of
# the GPU count (two nodes or more, several ranks each), else one node.
per_node=$gpus
for ((d = gpus / 2; d >= 2; d--)); do
    if ((gpus % d == 0)); then
        per_node=$d
        break
    fi
done

common=(run --backend nccl --no-progress --overwrite -c 1 -n 20 -w 5)
worst=0
step() {
    local name=$1
    shift
    say "$name: collbench ${common[*]} $*"
    set +e
    "$bin" "${common[@]}" "$@" --csv "$out/$name.csv" | tee "$out/$name.txt"
    local rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" -ne 0 ]; then
        say "$name: collbench exited with $rc"
        if [ "$rc" -gt "$worst" ]; then
            worst=$rc
        fi
    fi
}

# Every collective, both placements, several types, 8 B to 1 GiB.
step types -g 1 --collectives all -d "$types" -o sum -b 8 -e "$maxbytes" -f 2 "$@"
# Every reduction on float, on the collectives that reduce.
step ops -g 1 --collectives all_reduce,reduce_scatter,reduce -d float -o all -b 8 -e 64M -f 4 "$@"
# Flat against hierarchical all-reduce over every GPU: 1, 7, 49, ... elements
# of 4 bytes, so that most counts take rs-ar-ag's padded path.
step hierarchy -g "$gpus" --ranks-per-node "$per_node" --collectives all_reduce --hierarchy all --phase-times \
    -d int32,float,half -o sum,max,avg -b 4 -e 64M -f 7 "$@"
# nccl-tests' extras: 4 operations per group, a graph replayed 10 times,
# registered buffers.
step extras -g "$gpus" --collectives all -d float -o sum -b 8 -e 16M -f 4 -m 4 -G 10 -R "$@"

say "CSV and tables in $out"
exit "$worst"
