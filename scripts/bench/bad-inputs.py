#!/usr/bin/env python3
"""Bad input of every kind against the real binary: how many get one clear
line and a documented exit code, with nothing lost.

    scripts/bench/bad-inputs.py [--bin target/debug/collbench] [--only KIND] [--verbose]

The cases are tests/fixtures/bad-inputs/cases.txt (one a line: KIND |
EXPECTED EXIT CODES | COMMAND; its header says how to read it). Each runs
in a scratch folder holding the inputs it names (made here first: a run's
CSV, a workload CSV, logs, config, suite and profile files, broken copies
of them). A case passes when:

- its exit code is one the case expects, and a documented one
  (the table of docs/exit-codes.md, read here, 128+N as 129, 130, 143
  and 146: SIGHUP, SIGINT, SIGTERM, a launcher's SIGCONT; 1 for mpirun
  after Ctrl-C);
- it says why in one clear line: exactly one `collbench:` error line
  (warnings and progress aside), or the parser's one `error:` block; a
  case expecting 0 with `+warn` exactly one `collbench: warning:` line;
  never a panic, a backtrace or an `internal error`;
- nothing is lost: every CSV it left ends with a whole row, no
  `.partial` JSON is left, a JSON it left parses.

Signal cases start the command, wait for three CSV rows, send the
signals, and expect the one `stopped by` line; full-disk cases write to a
64 KiB tmpfs (root only; skipped and counted as such otherwise). Prints
one line per failing case and the count. Exit 0 when every case ran
passes, 1 otherwise. Timing is not measured: a case running past 120 s
is a hang and fails.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests/fixtures/bad-inputs/cases.txt"
EXIT_CODES_PAGE = ROOT / "docs/exit-codes.md"
HANG_S = 120


def documented_codes():
    """The codes of docs/exit-codes.md's table (generated from
    error::EXIT_CODES), 128+N as the three stop signals' codes."""
    text = EXIT_CODES_PAGE.read_text()
    table = text.split("<!-- exit codes: generated", 1)[1].split("<!-- end of exit codes -->", 1)[0]
    codes = set()
    for line in table.splitlines():
        cell = line.split("|")[1].strip() if line.startswith("|") else ""
        if cell.isdigit():
            codes.add(int(cell))
        elif cell == "128+N":
            codes.update({129, 130, 143, 146})
    return codes


DOCUMENTED = documented_codes()


def mpirun_prefix():
    line = "mpirun --oversubscribe"
    return line


def environment(binary, scratch):
    env = dict(os.environ)
    env.pop("OMPI_COMM_WORLD_RANK", None)
    env.pop("SLURM_JOB_ID", None)
    env.update({"B": str(binary), "D": str(scratch), "OUT": str(scratch / "out"), "NO_COLOR": "1"})
    env["MPI"] = mpirun_prefix()
    env["FIX"] = str(ROOT / "tests/fixtures")
    if os.geteuid() == 0:
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return env


def setup(binary, scratch, env):
    """The inputs the cases name."""
    (scratch / "out").mkdir()
    run = lambda cmd: subprocess.run(cmd, shell=True, cwd=scratch, env=env, capture_output=True, timeout=HANG_S)
    made = run("$MPI -np 2 $B run --collectives all_reduce,all_gather -e 4K -n 2 -w 1 --csv good.csv --no-progress")
    if made.returncode != 0:
        sys.exit(f"cannot make the good CSV: {made.stderr.decode()}")
    run("$MPI -np 2 $B workload --backend mpi --params 1M --layers 1 --vocab 1000 --strategy ddp --steps 2 --csv wl.csv")
    good = (scratch / "good.csv").read_text()
    header, first = good.splitlines()[0], good.splitlines()[1]
    files = {
        "good2.csv": good,
        "empty.csv": "",
        "header-only.csv": header + "\n",
        "other-schema.csv": "size,time\n8,1.0\n",
        "garbled.csv": good.replace(",all_reduce,", ",all_redux,", 1),
        "bad-number.csv": header + "\n" + first.replace(",2,1,2,", ",two,1,2,", 1) + "\n",
        "torn.csv": good + first[: len(first) // 2],
        "binary.csv": "\x00\x01\x02garbage\xff\n",
        "json.csv": '{"not": "a csv"}\n',
        "eight-ranks.csv": good.replace(",2,1,2,", ",8,1,8,"),
        "notes.txt": "hello\n",
        "bad.toml": 'maxbyte = "1K"\n',
        "badval.toml": 'maxbytes = "1Q"\n',
        "syntax.toml": "minbytes = 8\n[section\n",
        "dup.toml": "iters = 5\niters = 6\n",
        "switch.toml": "blocking = 3\n",
        "table.toml": "[run]\niters = 5\n",
        "config-key.toml": 'config = "x.toml"\n',
        "good.toml": 'maxbytes = "1K"\niters = 2\n',
        "suite-noname.toml": "ranks = 2\n[run]\nbackend = \"mpi\"\n",
        "suite-transport.toml": 'name = "s"\nranks = 2\ntransports = ["warp"]\n',
        "suite-key.toml": 'name = "s"\nranks = 2\nbogus = 1\n',
        "suite-ranks.toml": 'name = "s"\nranks = 0\n',
        "suite-run.toml": 'name = "s"\nranks = 2\n[run]\nmaxbytes = "1Q"\n',
        "suite-syntax.toml": 'name = "s\n',
        "profile-key.toml": 'name = "p"\nbogus = 1\n',
        "profile-syntax.toml": "name = [\n",
        "empty.log": "",
        "garbage.log": "this is not a log\nat all\n",
        "cut.json": '{"version": 3, "results": [{"size": 8,',
        "noresults.json": '{"version": 3}\n',
        "fake.gz": "\x1f\x8bnot really gzip",
        "exists.svg": "<svg/>\n",
    }
    for name, text in files.items():
        (scratch / name).write_bytes(text.encode("latin-1") if name in ("binary.csv", "fake.gz") else text.encode())
    shutil.copy(ROOT / "tests/fixtures/import/nccl-tests-2.13-all_reduce_perf.txt", scratch / "nccl.log")
    shutil.copy(ROOT / "tests/fixtures/import/osu-7.3-allreduce.txt", scratch / "osu.txt")
    replay = ROOT / "tests/fixtures/nccl-coll-logs/own-2.21-ddp-gpt2-2ranks.log"
    shutil.copy(replay, scratch / "replay.log")
    lines = replay.read_text().splitlines(keepends=True)
    (scratch / "replay-mid-garbled.log").write_text("".join(lines[: len(lines) // 2]) + "NCCL INFO AllReduce: opCount zz\n" + "".join(lines[len(lines) // 2 :]))
    (scratch / "sub").mkdir()
    (scratch / "nocsv").mkdir()


def judge_lines(stderr, expect_warn, stdout="", expect_note=False):
    """(clear, why): one clear line, no panic."""
    if any(s in stderr for s in ("panicked", "RUST_BACKTRACE", "internal error")):
        return False, "a panic or internal error"
    lines = stderr.splitlines()
    ours = [l for l in lines if l.startswith("collbench:") or l.startswith("collbench suite:")]
    warnings = [l for l in ours if l.startswith("collbench: warning:")]
    errors = [l for l in ours if l not in warnings and not l.startswith("collbench: progress") and ": ok," not in l and "collbench suite: [" not in l]
    parser = [l for l in lines if l.startswith("error: ")]
    if expect_warn:
        # a command that succeeds says what it did besides its warning
        return (len(warnings) == 1 and not parser), f"{len(warnings)} warnings"
    if expect_note:
        # a report that names what it left out, by its line, among its notes
        notes = [l for l in stdout.splitlines() if "skipped" in l and re.search(r"\bline \d+", l)]
        return (len(notes) == 1 and not ours and not parser), f"{len(notes)} notes naming a line, {len(ours)} stderr lines"
    if "Usage: collbench <COMMAND>" in stderr and "Commands:" in stderr and not errors:
        return True, "the help"  # `collbench` alone: its usage, exit 2
    if parser:
        # the parser's block, and for a run option given to another command
        # the one line saying whose option it is (cli::run_option_tip)
        tips = [l for l in errors if "is an option of `collbench run`" in l]
        ok = len(parser) == 1 and len(errors) == len(tips) <= 1 and "For more information" in stderr
        return ok, f"{len(parser)} parser errors, {len(errors)} collbench lines"
    return len(errors) == 1, f"{len(errors)} error lines"


def nothing_lost(out_dir):
    for p in out_dir.rglob("*"):
        if p.name.endswith(".partial"):
            return False, f"{p.name} left"
        if p.suffix == ".csv" and p.is_file():
            data = p.read_bytes()
            if data and not data.endswith(b"\n"):
                return False, f"{p.name} ends mid-row"
        if p.suffix == ".json" and p.is_file():
            try:
                json.loads(p.read_text())
            except ValueError:
                return False, f"{p.name} is not whole JSON"
    return True, ""


def rows(path):
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except OSError:
        return 0


def run_signal(command, env, scratch, spec):
    """`SIGS@TARGET`: start, wait for 3 rows of $OUT/s.csv, signal."""
    sigs, target = spec.split("@")
    proc = subprocess.Popen(command, shell=True, cwd=scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + HANG_S
    while rows(scratch / "out/s.csv") < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    leader = proc.pid
    children = subprocess.run(["pgrep", "-P", str(leader)], capture_output=True, text=True).stdout.split()
    mpirun = [int(c) for c in children]
    ranks = []
    for m in mpirun:
        ranks += [int(p) for p in subprocess.run(["pgrep", "-P", str(m)], capture_output=True, text=True).stdout.split()]
    targets = {"ranks": ranks, "rank1": ranks[1:2], "launcher": mpirun, "self": mpirun or [leader]}[target]
    for s in sigs.split(","):
        for pid in targets:
            try:
                os.kill(pid, getattr(signal, "SIG" + s))
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    try:
        out, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return None, "", "hung"
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def mount_small_disk(scratch):
    full = scratch / "full"
    full.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True)
    return done.returncode == 0


def one_case(kind, expect, command, env, scratch):
    """(status, why): status is 'pass', 'fail' or 'skip'."""
    out_dir = scratch / "out"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    expect_warn = expect.endswith("+warn")
    expect_note = expect.endswith("+note")
    codes = {int(c) for c in expect.replace("+warn", "").replace("+note", "").split("/")}
    mounted = False
    if kind == "disk":
        if os.geteuid() != 0:
            return "skip", "a full disk needs root (tmpfs)"
        mounted = mount_small_disk(scratch)
        if not mounted:
            return "skip", "cannot mount a tmpfs"
    try:
        if kind == "signal":
            spec, command = command.split(" ", 1)
            code, out, err = run_signal(command, env, scratch, spec)
            if code is None:
                return "fail", "hung"
        else:
            proc = subprocess.Popen(command, shell=True, cwd=scratch, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
            try:
                out, err = proc.communicate(timeout=HANG_S)
            except subprocess.TimeoutExpired:
                # the whole session: the shell, mpirun and its ranks
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return "fail", "hung"
            code, out, err = proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        if kind == "disk":
            lost, why_lost = nothing_lost(scratch / "full")
        else:
            lost, why_lost = nothing_lost(out_dir)
    finally:
        if mounted:
            subprocess.run(["umount", str(scratch / "full")], capture_output=True)
    if code not in codes or code not in DOCUMENTED:
        return "fail", f"exit {code}, expected {expect}: {err.strip().splitlines()[-1:] if err.strip() else 'no stderr'}"
    clear, why = judge_lines(err, expect_warn, out, expect_note)
    if kind == "signal":
        stopped = [l for l in err.splitlines() if "stopped by" in l or "timeout:" in l]
        clear, why = len(stopped) >= 1 and "panicked" not in err, f"{len(stopped)} stop lines"
    if not clear:
        return "fail", f"not one clear line ({why}): {err.strip()[:300]!r}"
    if not lost:
        return "fail", f"something lost: {why_lost}"
    return "pass", ""


def read_cases(only):
    cases = []
    for n, line in enumerate(CASES.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        kind, expect, command = (p.strip() for p in line.split("|", 2))
        if only and kind != only:
            continue
        cases.append((n, kind, expect, command))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "target/debug/collbench"))
    ap.add_argument("--only", help="run the cases of one kind")
    ap.add_argument("--verbose", action="store_true", help="a line for every case")
    args = ap.parse_args()
    binary = Path(args.bin).resolve()
    cases = read_cases(args.only)
    tally = {"pass": 0, "fail": 0, "skip": 0}
    kinds = {}
    with tempfile.TemporaryDirectory(prefix="collbench-bad-inputs-") as d:
        scratch = Path(d)
        env = environment(binary, scratch)
        setup(binary, scratch, env)
        for n, kind, expect, command in cases:
            status, why = one_case(kind, expect, command, env, scratch)
            tally[status] += 1
            k = kinds.setdefault(kind, {"pass": 0, "fail": 0, "skip": 0})
            k[status] += 1
            if status != "pass" or args.verbose:
                print(f"{status.upper():4} cases.txt:{n} [{kind}] {command}\n     {why}" if why else f"PASS cases.txt:{n} [{kind}] {command}")
    ran = tally["pass"] + tally["fail"]
    print()
    for kind, k in sorted(kinds.items()):
        print(f"  {kind:<10} {k['pass']:>3} of {k['pass'] + k['fail']:>3} clear" + (f" ({k['skip']} skipped)" if k["skip"] else ""))
    print(f"bad inputs: {tally['pass']} of {ran} got one clear line and a documented exit code with nothing lost"
          + (f"; {tally['skip']} skipped" if tally["skip"] else ""))
    sys.exit(0 if tally["fail"] == 0 else 1)


if __name__ == "__main__":
    main()
