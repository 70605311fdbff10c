# Shared by scripts/run.sh and scripts/test.sh: make sure what collbench
# needs to build and run is installed, installing it where we can.
#   - a Rust toolchain (cargo)
#   - Open MPI: headers and mpicc (libopenmpi-dev), mpirun (openmpi-bin)
#   - libclang, which rsmpi's build uses (bindgen) to read mpi.h
# On Debian/Ubuntu as root, missing packages are installed with apt-get.
# Otherwise the exact command to run is printed, and a missing libclang can
# come from PyPI's `libclang` wheel instead (pointed to by LIBCLANG_PATH).
# Sourcing this file changes nothing that is already in place.

collbench_note() { printf 'collbench setup: %s\n' "$*" >&2; }

collbench_have_libclang() {
    local f
    for f in "${LIBCLANG_PATH:-/nonexistent}"/libclang*.so* \
             /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
             /usr/lib/*-linux-gnu/libclang.so* /usr/lib/*-linux-gnu/libclang-[0-9]*.so* \
             /usr/lib64/libclang.so*; do
        [ -e "$f" ] && return 0
    done
    return 1
}

collbench_libclang_from_pip() {
    command -v python3 >/dev/null 2>&1 || return 1
    python3 -m pip install --quiet --user libclang >/dev/null 2>&1 \
        || python3 -m pip install --quiet libclang >/dev/null 2>&1 || return 1
    local dir
    dir=$(python3 -c 'import clang, os; print(os.path.join(os.path.dirname(clang.__file__), "native"))' 2>/dev/null) || return 1
    [ -d "$dir" ] || return 1
    export LIBCLANG_PATH="$dir"
    collbench_note "using libclang from PyPI: LIBCLANG_PATH=$dir"
}

# apt-get is used only as root on Debian/Ubuntu.
collbench_can_apt() {
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

collbench_apt_install() {
    collbench_note "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# tmux, for the tests that run collbench in a real terminal of a known
# width (tests/it/ux.rs). Installed as root where missing; then the tests
# are required (COLLBENCH_REQUIRE_TMUX=1), otherwise they are skipped
# with a note.
collbench_ensure_tmux() {
    if ! command -v tmux >/dev/null 2>&1 && collbench_can_apt; then
        collbench_apt_install tmux
    fi
    if command -v tmux >/dev/null 2>&1; then
        export COLLBENCH_REQUIRE_TMUX=1
    else
        collbench_note "tmux not found: the terminal tests (tests/it/ux.rs) will be skipped"
    fi
}

# What the multi-node tests need: Slurm's daemons and munge (Debian's
# slurmctld, slurmd, slurm-client, munge: a real Slurm on this host,
# scripts/local-slurm.sh, tests/it/slurm.rs) and the fake nodes' tools
# (unshare, tc, a C compiler: scripts/fake-nodes.sh, tests/it/fake_nodes.rs).
# As root they are installed where missing (no service is started: the
# tests start their own daemons) and the fake nodes set up; then those tests
# are required (COLLBENCH_REQUIRE_SLURM=1, COLLBENCH_REQUIRE_FAKE_NODES=1).
# Otherwise they are skipped with a note.
collbench_ensure_cluster_tools() {
    if ! collbench_can_apt; then
        collbench_note "not root: the Slurm and fake-node tests will be skipped"
        return 0
    fi
    local missing=()
    command -v slurmctld >/dev/null 2>&1 || missing+=(slurmctld)
    command -v slurmd >/dev/null 2>&1 || missing+=(slurmd)
    command -v srun >/dev/null 2>&1 || missing+=(slurm-client)
    command -v munged >/dev/null 2>&1 || missing+=(munge)
    command -v tc >/dev/null 2>&1 || missing+=(iproute2)
    command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
    if [ ${#missing[@]} -gt 0 ]; then
        # Packages must not start their services: the tests run their own.
        local policy=/usr/sbin/policy-rc.d added=0
        if [ ! -e "$policy" ]; then
            printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && added=1
        fi
        collbench_apt_install "${missing[@]}" || { [ $added = 1 ] && rm -f "$policy"; return 1; }
        [ $added = 1 ] && rm -f "$policy"
    fi
    scripts/fake-nodes.sh setup 8 || return 1
    export COLLBENCH_REQUIRE_SLURM=1 COLLBENCH_REQUIRE_FAKE_NODES=1
}

# A real parser of Prometheus' text format for the verdict files of
# `collbench check` (tests/it/check.rs): Debian's python3-prometheus-client.
# Installed as root where missing; then those tests are required
# (COLLBENCH_REQUIRE_PROM_PARSER=1, the interpreter that has it in
# COLLBENCH_PROM_PYTHON), otherwise skipped with a note.
collbench_ensure_prom_parser() {
    local py
    for py in python3 /usr/bin/python3; do
        if "$py" -c 'import prometheus_client.parser' >/dev/null 2>&1; then
            export COLLBENCH_REQUIRE_PROM_PARSER=1 COLLBENCH_PROM_PYTHON=$py
            return 0
        fi
    done
    if collbench_can_apt && collbench_apt_install python3-prometheus-client \
        && /usr/bin/python3 -c 'import prometheus_client.parser' >/dev/null 2>&1; then
        export COLLBENCH_REQUIRE_PROM_PARSER=1 COLLBENCH_PROM_PYTHON=/usr/bin/python3
        return 0
    fi
    collbench_note "python3-prometheus-client not found: the Prometheus parser test will be skipped"
}

# cargo-nextest runs the tests (scripts/test.sh): one process per test, the
# two tiers and the tests that run alone of .config/nextest.toml, and every
# test's wall time in target/nextest/<tier>/junit.xml. Installed where
# missing, into cargo's bin folder: its project's release archive
# (get.nexte.st, as its install guide gives), else built by cargo install.
collbench_ensure_nextest() {
    cargo nextest --version >/dev/null 2>&1 && return 0
    local bin="${CARGO_HOME:-$HOME/.cargo}/bin" platform=linux
    [ "$(uname -m)" = aarch64 ] && platform=linux-arm
    collbench_note "installing cargo-nextest into $bin"
    mkdir -p "$bin"
    if command -v curl >/dev/null 2>&1 \
        && curl -fsSL --connect-timeout 10 --max-time 300 --retry 2 "https://get.nexte.st/latest/$platform" | tar -xzf - -C "$bin" \
        && cargo nextest --version >/dev/null 2>&1; then
        return 0
    fi
    collbench_note "no release archive: building cargo-nextest (cargo install, a few minutes)"
    cargo install --locked cargo-nextest
}

collbench_ensure_deps() {
    local missing=()
    command -v mpicc >/dev/null 2>&1 || missing+=(libopenmpi-dev)
    command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
    collbench_have_libclang || missing+=(libclang-dev)
    command -v cc >/dev/null 2>&1 || missing+=(gcc)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)

    if [ ${#missing[@]} -gt 0 ]; then
        if collbench_can_apt; then
            collbench_apt_install "${missing[@]}"
        else
            local only_libclang=1 p
            for p in "${missing[@]}"; do [ "$p" = libclang-dev ] || only_libclang=0; done
            if [ $only_libclang = 1 ] && collbench_libclang_from_pip; then
                :
            else
                collbench_note "missing: ${missing[*]}"
                collbench_note "install them with: sudo apt-get install ${missing[*]}"
                collbench_note "(other systems: Open MPI with its headers, libclang, a C compiler, pkg-config)"
                return 1
            fi
        fi
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        collbench_note "cargo not found: install Rust from https://rustup.rs and run this again"
        return 1
    fi
}

# Open MPI refuses to run as root, and more ranks than cores, unless told;
# scripts and tests say so only when they run as root, never for users.
collbench_mpirun_env() {
    if [ "$(id -u)" = 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
}

# Downloads WHEEL (a pip requirement) into CACHE/wheels once and prints the
# wheel file's path; FOR says in messages what it is needed for.
collbench_download_wheel() {
    local wheel=$1 cache=$2 for=$3
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
        collbench_note "python3 with pip is needed to fetch $wheel for $for"
        collbench_note "install it (Debian/Ubuntu: apt-get install python3-pip)"
        return 1
    fi
    mkdir -p "$cache/wheels"
    collbench_note "downloading $wheel into $cache (once)"
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: \
            --dest "$cache/wheels" "$wheel" >&2; then
        collbench_note "could not download $wheel from PyPI"
        return 1
    fi
    local name=${wheel%%[=<>]*}
    local file
    file=$(ls -t "$cache/wheels/$(printf '%s' "$name" | tr '-' '_')"-*.whl 2>/dev/null | head -n 1)
    if [ -z "$file" ]; then
        collbench_note "the download of $wheel left no wheel in $cache/wheels"
        return 1
    fi
    printf '%s\n' "$file"
}

# The folder under CACHE that the wheel WHEEL (a pip requirement) is
# unpacked into: one per requirement, named after it.
collbench_wheel_dir() {
    printf '%s/%s\n' "$1" "$(printf '%s' "$2" | tr -c 'A-Za-z0-9._-' '_')"
}

# Extracts from the wheel FILE into DEST the members whose names match the
# regular expression MEMBERS (Python's re.search); fails saying "FILE holds
# no WHAT" when none of them matches REQUIRED.
collbench_unpack_wheel() {
    python3 - "$@" <<'PY'
import re, sys, zipfile
wheel, dest, members, required, what = sys.argv[1:6]
with zipfile.ZipFile(wheel) as z:
    want = [n for n in z.namelist() if re.search(members, n)]
    if not any(re.search(required, n) for n in want):
        sys.exit(f"{wheel} holds no {what}")
    for n in want:
        z.extract(n, dest)
PY
}

# Fails, saying so, when FILE is not there after unpacking WHEEL.
collbench_unpacked() {
    if [ ! -f "$1" ]; then
        collbench_note "no $1 after unpacking $2"
        return 1
    fi
}

# The NCCL library for the tests: PyPI's nvidia-nccl-cu12 wheel (about
# 350 MB), downloaded once into .cache/nccl (ignored by git) and unpacked
# there, so reruns use the copy. Exports COLLBENCH_TEST_NCCL_LIB. No GPU is
# needed: the library loads and answers ncclGetVersion and ncclGetUniqueId
# without one. COLLBENCH_NCCL_WHEEL picks another wheel, e.g.
# nvidia-nccl-cu13 or nvidia-nccl-cu12==2.21.5.
collbench_fetch_nccl() {
    local cache="${COLLBENCH_NCCL_CACHE:-$PWD/.cache/nccl}"
    local wheel="${COLLBENCH_NCCL_WHEEL:-nvidia-nccl-cu12==2.32.3}"
    local unpacked
    unpacked=$(collbench_wheel_dir "$cache" "$wheel")
    local lib="$unpacked/nvidia/nccl/lib/libnccl.so.2"
    if [ ! -f "$lib" ]; then
        local file
        file=$(collbench_download_wheel "$wheel" "$cache" "the NCCL tests") || {
            collbench_note "or set COLLBENCH_TEST_NCCL_LIB to a libnccl.so.2"
            return 1
        }
        # Only the library and its header; the rest of the wheel is not needed.
        local only='/lib/libnccl\.so\.2$|/include/nccl\.h$'
        collbench_unpack_wheel "$file" "$unpacked" "$only" "$only" nvidia/nccl/lib/libnccl.so.2
    fi
    collbench_unpacked "$lib" "$wheel" || return 1
    export COLLBENCH_TEST_NCCL_LIB="$lib"
}

# The CUDA driver header for the host GPU simulation (tests/gpu-sim):
# PyPI's nvidia-cuda-runtime-cu12 wheel (about 3.5 MB), downloaded once into
# .cache/cuda and unpacked there (only its include/ folder). Exports
# COLLBENCH_CUDA_INCLUDE, the folder holding cuda.h. COLLBENCH_CUDA_WHEEL
# picks another wheel.
collbench_fetch_cuda_headers() {
    local cache="${COLLBENCH_CUDA_CACHE:-$PWD/.cache/cuda}"
    local wheel="${COLLBENCH_CUDA_WHEEL:-nvidia-cuda-runtime-cu12==12.9.79}"
    local unpacked
    unpacked=$(collbench_wheel_dir "$cache" "$wheel")
    local include="$unpacked/nvidia/cuda_runtime/include"
    if [ ! -f "$include/cuda.h" ]; then
        local file
        file=$(collbench_download_wheel "$wheel" "$cache" "the GPU simulation") || return 1
        collbench_unpack_wheel "$file" "$unpacked" '/include/' '/include/cuda\.h$' include/cuda.h
    fi
    collbench_unpacked "$include/cuda.h" "$wheel" || return 1
    export COLLBENCH_CUDA_INCLUDE="$include"
}
