#!/usr/bin/env bash
# GPU smoke test of the NCCL backend, for a machine with one GPU or more and
# no Rust toolchain or package registry (e.g. one H200, driver 580, Python
# with nvidia-nccl-cu13 and PyTorch): checks every collective on the real GPU
# and NCCL in under 4 minutes, and says in one look whether all validated.
#
#   OUT=/some/dir scripts/gpu-smoke.sh        (or: scripts/gpu-smoke.sh DIR)
#
# Writes everything to $OUT (else DIR, else ./gpu-smoke-out): SUMMARY.txt
# (first line `gpu-smoke: PASS ...` or `gpu-smoke: FAIL ...`, then one line
# per collective run: validated or not, points, wrong elements, best busbw;
# then what `-R` gave each step that registers; with two GPUs or more, the
# algorithm, protocol and channels NCCL chose on two sizes, from
# collbench's profiler plugin and from its TUNING lines, side by side),
# info.txt (`collbench info`), nccl.txt (the NCCL libraries found), and per
# step STEP.csv, STEP.txt (the printed table) and STEP.err.
#
# The binary: $COLLBENCH_BIN, else ./collbench beside this script or in the
# current folder, else target/release/collbench. Build it elsewhere with
#   cargo build --release --no-default-features --features nccl,nvml
# (no MPI needed; the CUDA driver and libnccl are loaded at run time, so the
# binary carries no link to either) and carry it over, with
# libcollbench_profiler.so (built beside it) in the same folder.
#
# NCCL: $COLLBENCH_NCCL_LIB if set; else, tried in order, the nvidia/nccl/lib
# folder of the site-packages of every python3 found (the one on PATH,
# $VIRTUAL_ENV, /opt/torch/.venv), then PyTorch's own lib folder
# (torch/lib/libnccl*.so*). The first that `collbench info` accepts runs the
# sweep; PyTorch's, where it is another library, gets a short all_reduce run
# of its own (step torch).
#
# Environment: COLLBENCH_BIN, COLLBENCH_NCCL_LIB, SMOKE_MAXBYTES (caps every
# step's largest size; default: 16M for the type sweep, 512M for the large
# sizes), SMOKE_ITERS (timed iterations, default 20), SMOKE_BUDGET_S (the
# whole run's time, default 220 s), SMOKE_EXTRA (extra arguments for every
# run).
#
# The budget is kept by construction: each step gets its share of the time
# left (by weight), runs under `timeout` for that long (SIGINT, on which
# collbench completes its CSV with every point measured so far), and a step
# with no time left is skipped; SUMMARY.txt is written whatever finished,
# naming the steps cut or skipped. Results are read with the Python of
# /opt/torch/.venv where there is one, else python3.
# Exit code: 0 when every collective validated, else collbench's worst (1
# runtime failure, 2 usage, 3 wrong results, 5 timeout), 1 for a setup
# problem.
set -uo pipefail

say() { printf 'gpu-smoke: %s\n' "$*" >&2; }
die() {
    say "$*"
    if [ -n "${out:-}" ]; then printf 'gpu-smoke: FAIL (setup): %s\n' "$*" > "$out/SUMMARY.txt"; fi
    exit 1
}

here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-${1:-gpu-smoke-out}}
mkdir -p "$out" || { echo "gpu-smoke: cannot create $out" >&2; exit 1; }
out=$(cd "$out" && pwd)
started=$SECONDS
budget=${SMOKE_BUDGET_S:-220}
# Kept back for the summary and for a cut step to finish its reports.
reserve=$(( budget / 20 > 5 ? budget / 20 : 5 ))
deadline=$(( started + budget - reserve ))
iters=${SMOKE_ITERS:-20}
read -r -a extra <<< "${SMOKE_EXTRA:-}"
command -v timeout >/dev/null 2>&1 || die "no timeout command (GNU coreutils) to keep the time budget"

# --- the binary
bin=${COLLBENCH_BIN:-}
if [ -z "$bin" ]; then
    for c in "$here/collbench" "$PWD/collbench" "$here/../target/release/collbench"; do
        if [ -x "$c" ]; then bin=$c; break; fi
    done
fi
[ -n "$bin" ] || die "no collbench binary: set COLLBENCH_BIN (build it elsewhere with cargo build --release --no-default-features --features nccl,nvml)"
[ -x "$bin" ] || die "COLLBENCH_BIN=$bin is not an executable file"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
version=$("$bin" --version 2>"$out/version.err") \
    || die "$bin does not start here ($(head -c 300 "$out/version.err")); a build with MPI needs libmpi: build with --no-default-features --features nccl,nvml, on a system with a glibc no newer than this one's"
# Which build: GPU machines often have no MPI, so the no-MPI build is the
# one to carry; a build that links libmpi is said so.
mpi_lib=$( (ldd "$bin" 2>/dev/null || true) | sed -n 's/^[[:space:]]*\(libmpi[^ ]*\).*/\1/p' | head -n 1)
if [ -n "$mpi_lib" ]; then
    build="with MPI ($mpi_lib): the no-MPI build is cargo build --release --no-default-features --features nccl,nvml"
else
    build="without MPI"
fi
binary_line="binary: $bin ($version, built $build)"
say "$binary_line"

# --- Python for the summary: PyTorch's virtual environment's, else python3
py=""
for p in /opt/torch/.venv/bin/python /opt/torch/.venv/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1; then py=$(command -v "$p"); break; fi
done

# --- NCCL candidates
python_bins=()
for p in python3 "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python3}" /opt/torch/.venv/bin/python3; do
    [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 && python_bins+=("$(command -v "$p")")
done
candidates=()
torch_libs=()
if [ -n "${COLLBENCH_NCCL_LIB:-}" ]; then
    candidates+=("$COLLBENCH_NCCL_LIB")
fi
for pybin in "${python_bins[@]}"; do
    while IFS= read -r d; do
        [ -n "$d" ] || continue
        for f in "$d"/nvidia/nccl/lib/libnccl.so*; do [ -f "$f" ] && candidates+=("$f"); done
        for f in "$d"/torch/lib/libnccl*.so*; do [ -f "$f" ] && torch_libs+=("$f"); done
    done < <("$pybin" -c 'import site, sys
d = []
try: d += site.getsitepackages()
except Exception: pass
try: d.append(site.getusersitepackages())
except Exception: pass
print("\n".join(d + [p for p in sys.path if p]))' 2>/dev/null)
done
candidates+=("${torch_libs[@]}")
{
    echo "NCCL candidates, in order (the first that loads runs the sweep):"
    printf '  %s\n' "${candidates[@]:-none}"
} > "$out/nccl.txt"

lib=""
for c in "${candidates[@]}"; do
    if "$bin" info --nccl-lib "$c" 2>/dev/null | grep -q "^NCCL  *[0-9]"; then lib=$c; break; fi
done
if [ -z "$lib" ]; then
    if "$bin" info 2>/dev/null | grep -q "^NCCL  *[0-9]"; then
        lib=""  # collbench's own search (NCCL_HOME, the loader) finds one
    else
        "$bin" info > "$out/info.txt" 2>&1
        die "no usable NCCL library (tried: ${candidates[*]:-none}; see info.txt); pip install nvidia-nccl-cu13 or set COLLBENCH_NCCL_LIB"
    fi
fi
nccl_opt=()
if [ -n "$lib" ]; then nccl_opt=(--nccl-lib "$lib"); fi
echo "using: ${lib:-the library search of collbench}" >> "$out/nccl.txt"

"$bin" info "${nccl_opt[@]}" > "$out/info.txt" 2>&1
cat "$out/info.txt" >&2
grep -q '^GPUs *[1-9]' "$out/info.txt" \
    || die "no GPU visible (see info.txt): run this on a machine with an NVIDIA GPU and its driver"
gpus=$(sed -n 's/^GPUs *\([0-9][0-9]*\) visible.*/\1/p' "$out/info.txt")
gpus=${gpus:-1}

# --- the steps, each bounded by its share of the time left
worst=0
steps_run=()
steps_cut=()
steps_skipped=()
weight_left=0
# Every step's weight is counted before the first runs.
plan() { weight_left=$(( weight_left + $1 )); }
step() {
    local name=$1 weight=$2
    shift 2
    local left=$(( deadline - SECONDS ))
    local allowed=$(( left * weight / (weight_left > 0 ? weight_left : 1) ))
    weight_left=$(( weight_left - weight ))
    if (( allowed < 3 )); then
        say "$name: skipped, no time left of the ${budget} s budget"
        steps_skipped+=("$name")
        return
    fi
    local watchdog=$(( allowed < 120 ? allowed : 120 ))
    say "$name: at most ${allowed} s: collbench $*"
    timeout --signal=INT --kill-after=5 "$allowed" \
        "$bin" run --backend nccl --no-progress --overwrite --timeout "$watchdog" -n "$iters" "$@" "${extra[@]}" \
        --csv "$out/$name.csv" > "$out/$name.txt" 2> "$out/$name.err"
    local rc=$?
    steps_run+=("$name")
    tail -n 3 "$out/$name.txt" >&2
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        # its share ran out: the CSV holds every point measured until then
        say "$name: cut after ${allowed} s, its share of the budget"
        steps_cut+=("$name")
    elif [ "$rc" -ne 0 ]; then
        say "$name: collbench exited with $rc: $(head -n 1 "$out/$name.err")"
        if [ "$rc" -gt "$worst" ]; then worst=$rc; fi
    fi
}
small=${SMOKE_MAXBYTES:-16M}
large_min=${SMOKE_MAXBYTES:-256M}
large_max=${SMOKE_MAXBYTES:-512M}
per_node=0
if [ "$gpus" -ge 2 ]; then
    per_node=1
    for ((d = gpus / 2; d >= 1; d--)); do
        if ((gpus % d == 0)); then per_node=$d; break; fi
    done
fi
torch=""
for t in "${torch_libs[@]}"; do
    if [ "$t" != "$lib" ] && "$bin" info --nccl-lib "$t" 2>/dev/null | grep -q "^NCCL  *[0-9]"; then
        torch=$t
        break
    fi
done
# What the library has: symmetric windows (-R 2, NCCL 2.27 and later) and
# ncclCommSplit (--split, NCCL 2.18 and later); a step it lacks is skipped,
# and SUMMARY.txt says so.
windows=1
grep -q 'no ncclCommWindowRegister' "$out/info.txt" && windows=0
split=1
grep -q 'no ncclCommSplit' "$out/info.txt" && split=0
plan 4; plan 2; plan 3; plan 2; plan 2
if [ "$windows" -eq 1 ]; then plan 1; plan 1; fi
if [ "$split" -eq 1 ]; then plan 1; fi
if [ "$per_node" -gt 0 ]; then plan 2; plan 1; plan 1; fi
if [ -n "$torch" ]; then plan 1; fi

# Every collective, both placements, six types, 8 B to 16 MiB.
step types 4 "${nccl_opt[@]}" -g "$gpus" --collectives all -d int8,int32,half,bfloat16,float,double -o sum \
    -b 8 -e "$small" -f 4 -w 5
# Every reduction operation, on the collectives that reduce.
step ops 2 "${nccl_opt[@]}" -g "$gpus" --collectives all_reduce,reduce_scatter,reduce -d float,half,double -o all \
    -b 8 -e "$small" -f 8 -w 5
# Large sizes, where bandwidth shows: every collective on float.
step large 3 "${nccl_opt[@]}" -g "$gpus" --collectives all -d float -o sum -b "$large_min" -e "$large_max" -f 2 -w 2
# nccl-tests' extras: 4 operations per group, a graph replayed 10 times
# (validated through the graph), registered buffers; then per-iteration
# times (which a graph cannot give).
step extras 2 "${nccl_opt[@]}" -g "$gpus" --collectives all -d float -o sum -b 8 -e "$small" -f 16 -w 5 \
    -m 4 -G 10 -R
step periter 2 "${nccl_opt[@]}" -g "$gpus" --collectives all -d float -o sum -b 8 -e "$small" -f 16 -w 5 -I
# Symmetric windows (-R 2) on every collective; then with NCCL_WIN_ENABLE=0,
# where NCCL returns no window: the run goes on unregistered and says so
# (its rows' register column is false).
if [ "$windows" -eq 1 ]; then
    step symmetric 1 "${nccl_opt[@]}" -g "$gpus" --collectives all -d float -o sum -b 8 -e "$small" -f 64 -w 2 -R 2
    NCCL_WIN_ENABLE=0 step symmetric-nowin 1 "${nccl_opt[@]}" -g "$gpus" --collectives all_reduce,alltoallv \
        -d float -o sum -b 8 -e "$small" -f 64 -w 2 -R 2
else
    say "symmetric, symmetric-nowin: skipped, this NCCL has no symmetric windows (2.27 and later)"
    steps_skipped+=("symmetric(no-windows)" "symmetric-nowin(no-windows)")
fi
# A --split point, buffers registered (-R 1) on the split communicator (the
# ranks of one process share nccl-tests' colour: one group with -g).
if [ "$split" -eq 1 ]; then
    step split 1 "${nccl_opt[@]}" -g "$gpus" --split "MOD 2" --collectives all_reduce,alltoallv -d float -o sum \
        -b 8 -e 1M -f 64 -w 2 -R 1
else
    say "split: skipped, this NCCL has no ncclCommSplit (2.18 and later)"
    steps_skipped+=("split(no-ncclCommSplit)")
fi
# With several GPUs: flat against hierarchical all-reduce on virtual nodes.
if [ "$per_node" -gt 0 ]; then
    step hierarchy 2 "${nccl_opt[@]}" -g "$gpus" --ranks-per-node "$per_node" --collectives all_reduce \
        --hierarchy all --phase-times -d int32,float,half -o sum,avg -b 4 -e "$small" -f 7 -w 5
fi
# With several GPUs: which algorithm and protocol NCCL chose per size, from
# collbench's profiler plugin (libcollbench_profiler.so beside the binary,
# NCCL 2.23 and later), then from rank 0's TUNING lines, on the same two
# sizes (one rank chooses nothing: NCCL copies); the summary prints both.
if [ "$per_node" -gt 0 ]; then
    for how in plugin log; do
        step "algo-$how" 1 "${nccl_opt[@]}" -g "$gpus" --collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce \
            -d float -o sum -b 4K -e 4M -f 1024 -n 20 -w 2 --algo-record "$how"
    done
    # pinned sweeps (--algo): a communicator per pin, made with NCCL_ALGO
    # set in the process's environment; the summary says what NCCL ran
    step algo-pinned 1 "${nccl_opt[@]}" -g "$gpus" --collectives all_reduce,all_gather \
        -d float -o sum -b 4K -e 4M -f 1024 -n 20 -w 2 --algo ring,tree
fi
# PyTorch's own NCCL, where it is another library than the sweep's.
if [ -n "$torch" ]; then
    step torch 1 --nccl-lib "$torch" -g "$gpus" --collectives all_reduce,all_gather -d float,bfloat16 -o sum \
        -b 8 -e "$small" -f 8 -w 5
fi

# --- one look: SUMMARY.txt
if [ -z "$py" ]; then
    { echo "gpu-smoke: FAIL (no python3 to read the CSVs; see the .txt tables)"; echo "$binary_line"; } > "$out/SUMMARY.txt"
else
    "$py" - "$out" "$worst" "${steps_run[*]:-}" "${steps_cut[*]:-}" "${steps_skipped[*]:-}" "$binary_line" \
        "$(( SECONDS - started ))" "$budget" > "$out/SUMMARY.txt" <<'PY'
import csv, os, sys
out, worst = sys.argv[1], int(sys.argv[2])
ran, cut, skipped = sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
binary, took, budget = sys.argv[6], sys.argv[7], sys.argv[8]
order = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
         "alltoall", "alltoallv", "gather", "scatter", "sendrecv"]
stats = {c: [0, 0, 0, 0.0] for c in order}  # points, checked, wrong, best busbw
versions, sim, rows, registered = set(), False, {}, {}
for step in ran:
    path = os.path.join(out, step + ".csv")
    rows[step] = 0
    if not os.path.exists(path):
        continue
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows[step] += 1
            registered.setdefault(step, set()).add(r.get("register", ""))
            if r["collective"] not in order:
                order.append(r["collective"])  # every collective run is judged
            s = stats.setdefault(r["collective"], [0, 0, 0, 0.0])
            s[0] += 1
            if r["wrong"] != "":
                s[1] += 1
                s[2] += int(r["wrong"])
            try:
                s[3] = max(s[3], float(r["busbw_gbps"]))
            except ValueError:
                pass
            versions.add(r["backend_version"])
            sim = sim or r["backend_version"].endswith("-sim")
bad = [c for c in order if stats[c][1] == 0 or stats[c][2] > 0]
ok = not bad and worst == 0
points = sum(s[0] for s in stats.values())
wrong = sum(s[2] for s in stats.values())
head = "gpu-smoke: PASS: every collective validated" if ok else "gpu-smoke: FAIL: " + (
    ", ".join(bad) + " not validated" if bad else "a step failed")
notes = [f"{points} points", f"{wrong} wrong elements", f"steps {' '.join(ran) or 'none'}"]
if cut:
    notes.append("cut by the budget: " + " ".join(f"{s} ({rows.get(s, 0)} points)" for s in cut))
if skipped:
    notes.append("skipped, no time left: " + " ".join(skipped))
notes.append(f"worst exit {worst}")
print(f"{head} ({', '.join(notes)})")
print(f"time: {took} s of a {budget} s budget")
print(binary)
if sim:
    print("SIMULATED: host GPU simulation (tests/gpu-sim); no figure here is a measurement")
print("NCCL: " + ", ".join(sorted(versions)))
for c in order:
    p, checked, w, bw = stats[c]
    verdict = "validated" if checked and not w else ("WRONG" if w else "NOT CHECKED")
    print(f"  {c:<15} {verdict:<11} {p:>5} points, {checked:>5} checked, {w:>6} wrong, best busbw {bw:9.2f} GB/s")
# what -R gave each step's rows (NCCL may decline a symmetric window)
regs = [f"{s} {'/'.join(sorted(v))}" for s, v in registered.items() if v - {"", "false"} or s.startswith("symmetric")]
if regs:
    print("register: " + ", ".join(regs))
# steps algo-plugin and algo-log: NCCL's choice per collective and size
# (out-of-place rows) from the plugin and from the TUNING lines, side by side
def choices(step):
    path = os.path.join(out, f"{step}.csv")
    got = {}
    if step in ran and os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["placement"] == "out_of_place":
                    ch = f"{r['algo']}/{r['proto']}/{r['nchannels'] or '-'}ch" if r["algo"] else "unknown"
                    got[(r["collective"], int(r["size_bytes"]))] = f"{ch} ({r['algo_source']})"
    return got
by_plugin, by_log = choices("algo-plugin"), choices("algo-log")
if by_plugin or by_log:
    print("NCCL's algorithm/protocol/channels by size: profiler plugin | TUNING lines (steps algo-plugin, algo-log):")
    for k in sorted(set(by_plugin) | set(by_log)):
        a, b = by_plugin.get(k, "-"), by_log.get(k, "-")
        same = "same" if a.split(" ")[0] == b.split(" ")[0] else "DIFFERENT"
        print(f"  {k[0]:<15} {k[1]:>9} B  {a:<32} | {b:<32} {same}")
# step algo-pinned: each pin and what NCCL ran under it
path = os.path.join(out, "algo-pinned.csv")
if "algo-pinned" in ran and os.path.exists(path):
    print("pinned sweeps (step algo-pinned): pin -> what NCCL ran:")
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["placement"] == "out_of_place":
                ran_ = f"{r['algo']}/{r['proto']}" if r["algo"] else "unknown"
                ok = "" if r["algo"] == r["algo_pin"] or r["algo_source"] == "pinned" else "  NOT THE PIN"
                print(f"  {r['algo_pin']:<6} {r['collective']:<15} {int(r['size_bytes']):>9} B  {ran_} ({r['algo_source']}){ok}")
PY
fi
cat "$out/SUMMARY.txt"
say "everything is in $out"
if head -n 1 "$out/SUMMARY.txt" | grep -q '^gpu-smoke: PASS'; then
    exit 0
fi
exit $(( worst > 0 ? worst : 1 ))
