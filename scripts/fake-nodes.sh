#!/usr/bin/env bash
# Several "nodes" on this one machine, for real: each fake node is a host
# name (cbnode1 .. cbnodeN, on 127.0.77.1 .. 127.0.77.N in /etc/hosts) whose
# processes run under `unshare --uts` with that hostname and send their TCP
# traffic from that address (scripts/lib/fake-node.c, preloaded). Open MPI
# starts one daemon per node through this script as its rsh agent. Two real
# faults can be put on a node for the length of a command: a CPU quota (a
# slow node) and a rate limit on its traffic with the other nodes (a slow
# link). Root only. docs/contributing.md#fake-nodes has the details.
#
#   scripts/fake-nodes.sh setup [N]
#       nodes cbnode1..N (default 8) in /etc/hosts; builds the shim
#   scripts/fake-nodes.sh [FAULTS] mpirun HOSTS [MPIRUN OPTIONS] -- PROGRAM [ARGS]
#       mpirun with one daemon per node, HOSTS as for --host (cbnode1:2,cbnode2:2);
#       -np is the sum of the slots unless the options give it
#   scripts/fake-nodes.sh [FAULTS] run -- COMMAND [ARGS]
#       COMMAND with the faults in place (start its ranks with `on`)
#   scripts/fake-nodes.sh on NODE -- COMMAND [ARGS]
#       COMMAND as a process of NODE (its hostname, its address, its faults)
#   scripts/fake-nodes.sh cleanup
#       removes what a killed run left (cgroups, the qdisc on lo)
#
# FAULTS (each undone when the command ends):
#   --slow-node NODE=PCT       NODE's processes share PCT% of one CPU
#                              (cgroup v1: cpu.cfs_quota_us)
#   --slow-link NODE=RATE      NODE's traffic with every other node at RATE
#                              (tc: an HTB class on lo, u32 filters on NODE's
#                              address), RATE as tc writes it: 20mbit, 1gbit
#   --slow-link NODE-NODE=RATE only the traffic between those two nodes
set -euo pipefail

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
repo=$(cd "$(dirname "$0")/.." && pwd)
shim_dir=${COLLBENCH_FAKE_NODES_DIR:-$repo/target/fake-nodes}
shim=$shim_dir/libfakenode.so
prefix=127.0.77
# The qdisc handle on lo: ours alone (cleanup removes only this one).
qdisc=cb0
cpu_root=/sys/fs/cgroup/cpu
tc_lock=/run/lock/collbench-fake-nodes-tc.lock

die() { printf 'fake-nodes: %s\n' "$*" >&2; exit 2; }
note() { printf 'fake-nodes: %s\n' "$*" >&2; }

need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root"; }

# The address of NODE, from /etc/hosts.
addr_of() {
    local a
    a=$(getent ahostsv4 "$1" | awk 'NR == 1 { print $1 }')
    [ -n "$a" ] || die "unknown node '$1' (run: scripts/fake-nodes.sh setup)"
    printf '%s\n' "$a"
}

setup() {
    need_root setup
    local n=${1:-8} i
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 254 ] || die "setup: N must be 1..254"
    exec 8>>/etc/hosts.collbench-lock
    flock 8
    for i in $(seq 1 "$n"); do
        if ! grep -qE "^$prefix\\.$i[[:space:]]+cbnode$i([[:space:]]|\$)" /etc/hosts; then
            printf '%s.%s cbnode%s   # collbench fake node (scripts/fake-nodes.sh)\n' "$prefix" "$i" "$i" >> /etc/hosts
        fi
    done
    flock -u 8
    build_shim
}

build_shim() {
    local src=$repo/scripts/lib/fake-node.c
    if [ ! -f "$shim" ] || [ "$src" -nt "$shim" ]; then
        command -v cc >/dev/null 2>&1 || die "a C compiler (cc) is needed to build $shim"
        mkdir -p "$shim_dir"
        cc -shared -fPIC -O2 -Wall -Werror -o "$shim.tmp" "$src" -ldl
        mv "$shim.tmp" "$shim"
    fi
}

# `on NODE -- COMMAND`: as a process of NODE.
on_node() {
    local node=$1
    shift
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "on $node: no command"
    local addr
    addr=$(addr_of "$node")
    [ -f "$shim" ] || build_shim
    export COLLBENCH_FAKE_NODE_ADDR=$addr
    export LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}"
    if [ -n "${COLLBENCH_FAKE_CGROUPS:-}" ] && [ -d "$COLLBENCH_FAKE_CGROUPS/$node" ]; then
        echo $$ > "$COLLBENCH_FAKE_CGROUPS/$node/cgroup.procs"
    fi
    exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}

# Open MPI's rsh agent: `rsh [ssh options] NODE COMMAND...`.
rsh_agent() {
    while [ $# -gt 0 ]; do
        case $1 in
            -o|-p|-l|-i|-F|-E|-b|-c|-e|-m|-S|-w|-W) shift 2 ;;
            -*) shift ;;
            *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "rsh: expected NODE COMMAND"
    local node=$1
    shift
    on_node "$node" -- sh -c "$*"
}

# The faults, applied now and undone by `undo_faults` (set as the trap).
slow_nodes=()
slow_links=()
cgroups_dir=
tc_added=0

apply_faults() {
    local spec node pct
    if [ ${#slow_nodes[@]} -gt 0 ]; then
        need_root --slow-node
        [ -f "$cpu_root/cpu.cfs_quota_us" ] || die "--slow-node needs the cgroup v1 cpu controller at $cpu_root"
        cgroups_dir=$cpu_root/collbench-fake-$$
        mkdir "$cgroups_dir"
        export COLLBENCH_FAKE_CGROUPS=$cgroups_dir
        for spec in "${slow_nodes[@]}"; do
            node=${spec%%=*}
            pct=${spec#*=}
            [[ $pct =~ ^[0-9]+$ ]] && [ "$pct" -ge 1 ] || die "--slow-node $spec: PCT must be a whole percentage of one CPU"
            addr_of "$node" >/dev/null
            mkdir "$cgroups_dir/$node"
            echo 100000 > "$cgroups_dir/$node/cpu.cfs_period_us"
            echo $((pct * 1000)) > "$cgroups_dir/$node/cpu.cfs_quota_us"
            note "slow node: $node at $pct% of one CPU ($cgroups_dir/$node)"
        done
    fi
    if [ ${#slow_links[@]} -gt 0 ]; then
        need_root --slow-link
        command -v tc >/dev/null 2>&1 || die "--slow-link needs tc (Debian: iproute2)"
        exec 9>"$tc_lock"
        flock 9
        if tc qdisc show dev lo | grep -q '^qdisc htb'; then
            die "lo has an htb qdisc already (another run with --slow-link? scripts/fake-nodes.sh cleanup removes a stale one)"
        fi
        tc qdisc add dev lo root handle $qdisc: htb default 1 r2q 100000
        tc_added=1
        tc class add dev lo parent $qdisc: classid $qdisc:1 htb rate 100gbit quantum 60000
        local class=10 rate a b
        for spec in "${slow_links[@]}"; do
            rate=${spec#*=}
            spec=${spec%%=*}
            tc class add dev lo parent $qdisc: classid $qdisc:$class htb rate "$rate" ceil "$rate" quantum 60000 \
                || die "--slow-link: tc refused the rate '$rate'"
            if [[ $spec == *-* ]] && getent ahostsv4 "${spec%%-*}" >/dev/null && getent ahostsv4 "${spec#*-}" >/dev/null; then
                a=$(addr_of "${spec%%-*}")
                b=$(addr_of "${spec#*-}")
                tc filter add dev lo parent $qdisc: protocol ip prio 2 u32 \
                    match ip src "$a/32" match ip dst "$b/32" flowid $qdisc:$class
                tc filter add dev lo parent $qdisc: protocol ip prio 2 u32 \
                    match ip src "$b/32" match ip dst "$a/32" flowid $qdisc:$class
                note "slow link: ${spec%%-*} <-> ${spec#*-} at $rate"
            else
                a=$(addr_of "$spec")
                # Inside the node stays fast (as shared memory would be).
                tc filter add dev lo parent $qdisc: protocol ip prio 1 u32 \
                    match ip src "$a/32" match ip dst "$a/32" flowid $qdisc:1
                tc filter add dev lo parent $qdisc: protocol ip prio 2 u32 match ip src "$a/32" flowid $qdisc:$class
                tc filter add dev lo parent $qdisc: protocol ip prio 2 u32 match ip dst "$a/32" flowid $qdisc:$class
                note "slow link: $spec with every other node at $rate"
            fi
            class=$((class + 1))
        done
    fi
}

remove_cgroup() {
    local dir=$1 sub pid
    for sub in "$dir"/*/; do
        [ -d "$sub" ] || continue
        # Stragglers go back to the root group, so that the group can go.
        while read -r pid; do
            echo "$pid" > "$cpu_root/cgroup.procs" 2>/dev/null || true
        done < "$sub/cgroup.procs"
        rmdir "$sub" 2>/dev/null || note "could not remove $sub"
    done
    rmdir "$dir" 2>/dev/null || note "could not remove $dir"
}

undo_faults() {
    if [ "$tc_added" = 1 ]; then
        tc qdisc del dev lo root handle $qdisc: 2>/dev/null || true
        tc_added=0
    fi
    if [ -n "$cgroups_dir" ] && [ -d "$cgroups_dir" ]; then
        remove_cgroup "$cgroups_dir"
        cgroups_dir=
    fi
}

cleanup() {
    need_root cleanup
    if tc qdisc show dev lo | grep -q "^qdisc htb $qdisc:"; then
        tc qdisc del dev lo root handle $qdisc: && note "removed the htb qdisc on lo"
    fi
    local dir
    for dir in "$cpu_root"/collbench-fake-*; do
        [ -d "$dir" ] || continue
        remove_cgroup "$dir" && note "removed $dir"
    done
}

run_mpirun() {
    local hosts=${1:?mpirun: HOSTS missing (cbnode1:2,cbnode2:2)}
    shift
    local opts=() np=0 has_np=0 h
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        case $1 in -np|-n|--np|-c) has_np=1 ;; esac
        opts+=("$1")
        shift
    done
    [ "${1:-}" = "--" ] || die "mpirun: put -- before the program"
    shift
    [ $# -gt 0 ] || die "mpirun: no program"
    for h in ${hosts//,/ }; do
        addr_of "${h%%:*}" >/dev/null
        if [[ $h == *:* ]]; then np=$((np + ${h#*:})); else np=$((np + 1)); fi
    done
    [ "$has_np" = 1 ] || opts=(-np "$np" "${opts[@]}")
    [ -f "$shim" ] || build_shim
    if [ "$(id -u)" = 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    # routed direct: every daemon talks to mpirun itself; TCP only, on lo
    # (shared memory between fake nodes crashes Open MPI 4.1.4), IPv4 (the
    # nodes' addresses); yield, since ranks outnumber cores.
    mpirun --host "$hosts" --mca plm_rsh_agent "$self rsh" --mca routed direct \
        --mca btl self,tcp --mca btl_tcp_if_include lo --mca btl_tcp_disable_family 6 \
        --mca mpi_yield_when_idle 1 "${opts[@]}" "$@"
}

# Options, then the command.
while [ $# -gt 0 ]; do
    case $1 in
        --slow-node) [ $# -ge 2 ] || die "--slow-node NODE=PCT"; slow_nodes+=("$2"); shift 2 ;;
        --slow-node=*) slow_nodes+=("${1#*=}"); shift ;;
        --slow-link) [ $# -ge 2 ] || die "--slow-link NODE=RATE"; slow_links+=("$2"); shift 2 ;;
        --slow-link=*) slow_links+=("${1#*=}"); shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
command=${1:-}
[ -n "$command" ] || die "no command (setup, mpirun, run, on, cleanup; --help)"
shift
case $command in
    setup) setup "$@" ;;
    cleanup) cleanup ;;
    on) [ $# -ge 1 ] || die "on NODE -- COMMAND"; on_node "$@" ;;
    rsh) rsh_agent "$@" ;;
    mpirun|run)
        for spec in "${slow_nodes[@]}" "${slow_links[@]}"; do
            [[ $spec == *=* ]] || die "a fault is NODE=VALUE, not '$spec'"
        done
        trap undo_faults EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        trap 'exit 129' HUP
        apply_faults
        status=0
        if [ "$command" = mpirun ]; then
            run_mpirun "$@" || status=$?
        else
            [ "${1:-}" = "--" ] && shift
            [ $# -gt 0 ] || die "run: no command"
            "$@" || status=$?
        fi
        exit "$status"
        ;;
    *) die "unknown command '$command' (setup, mpirun, run, on, cleanup; --help)" ;;
esac
