#!/usr/bin/env bash
# A real Slurm on this one host, for tests and for trying srun and sbatch
# without a cluster: munged, slurmctld and slurmd from Debian's packages
# (slurmctld, slurmd, slurm-client, munge), with a configuration, key,
# state and logs of their own in DIR, on free ports, so that nothing of a
# system Slurm is touched. No cgroup plugins (proctrack/linuxproc,
# task/none); the one node offers 8 CPUs whatever the machine has, so that
# 4-rank steps fit on 2 cores. Root only (slurmd runs jobs as their user).
#
#   scripts/local-slurm.sh start DIR [--owner PID]
#       starts the daemons; with --owner, a watcher stops them when PID ends
#       (tests pass their own pid, so that a killed test run leaves nothing)
#   scripts/local-slurm.sh stop DIR
#   scripts/local-slurm.sh env DIR     # prints SLURM_CONF=..., for eval
#
# Then: SLURM_CONF=DIR/slurm.conf srun -n 4 --mpi=pmix hostname
set -euo pipefail

die() { printf 'local-slurm: %s\n' "$*" >&2; exit 2; }

command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || die "usage: local-slurm.sh start|stop|env DIR [--owner PID]"
shift 2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pid_of() { [ -f "$1" ] && cat "$1" 2>/dev/null || true; }

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

stop() {
    if [ -f "$conf" ] && alive "$(pid_of "$dir/slurmctld.pid")"; then
        SLURM_CONF=$conf timeout 10 scontrol shutdown >/dev/null 2>&1 || true
    fi
    local f pid i
    for f in slurmd.pid slurmctld.pid munged.pid watcher.pid; do
        pid=$(pid_of "$dir/$f")
        # The watcher runs this stop itself.
        [ "$pid" != "$$" ] || continue
        alive "$pid" || continue
        kill "$pid" 2>/dev/null || true
        for i in $(seq 1 50); do
            alive "$pid" || break
            sleep 0.1
        done
        alive "$pid" && kill -9 "$pid" 2>/dev/null || true
    done
    rm -f "$dir"/*.pid
}

start() {
    [ "$(id -u)" = 0 ] || die "start needs root (slurmd runs the jobs)"
    local owner=
    if [ "${1:-}" = "--owner" ]; then
        owner=${2:?--owner PID}
    fi
    for p in munged mungekey slurmctld slurmd srun scontrol; do
        command -v "$p" >/dev/null 2>&1 \
            || die "$p not found (Debian: apt-get install slurmctld slurmd slurm-client munge)"
    done
    stop
    rm -rf "$dir/state" "$dir/spool" "$dir/munge"
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/log"
    chmod 700 "$dir/munge"
    mungekey --create --keyfile="$dir/munge/munge.key" --force >/dev/null 2>&1 \
        || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 600 "$dir/munge/munge.key"
    munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
    local host ctld_port d_port
    host=$(hostname -s)
    ctld_port=$(free_port)
    d_port=$(free_port)
    cat > "$conf" <<EOF
# Written by scripts/local-slurm.sh: one host, its own munge, no cgroups.
ClusterName=collbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
KillWait=5
InactiveLimit=0
MinJobAge=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    slurmctld -f "$conf"
    slurmd -f "$conf"
    local i
    for i in $(seq 1 100); do
        if SLURM_CONF=$conf sinfo -h -o %t 2>/dev/null | grep -qx idle; then
            break
        fi
        sleep 0.1
    done
    if ! SLURM_CONF=$conf sinfo -h -o %t 2>/dev/null | grep -qx idle; then
        tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
        stop
        die "the node did not become idle (logs in $dir/log)"
    fi
    if [ -n "$owner" ]; then
        # Stops the daemons when the owner ends, whatever way it ends.
        nohup bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" stop "$3"' \
            watcher "$owner" "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" "$dir" \
            >/dev/null 2>&1 &
        echo $! > "$dir/watcher.pid"
    fi
    echo "SLURM_CONF=$conf"
}

case $command in
    start) start "$@" ;;
    stop) stop ;;
    env) echo "SLURM_CONF=$conf" ;;
    *) die "unknown command '$command' (start, stop, env)" ;;
esac
