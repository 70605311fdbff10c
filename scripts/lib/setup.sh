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

collbench_ensure_deps() {
    local missing=()
    command -v mpicc >/dev/null 2>&1 || missing+=(libopenmpi-dev)
    command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
    collbench_have_libclang || missing+=(libclang-dev)
    command -v cc >/dev/null 2>&1 || missing+=(gcc)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)

    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            collbench_note "installing ${missing[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq >/dev/null
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
