#!/usr/bin/env python3
"""Prints the slowest tests of a cargo-nextest run, read from its JUnit
file, and what the tests started, read from the integration tests' own
log (`COLLBENCH_TEST_LOG`, written by tests/it/common: one line per
program a test ran, with its wall time).

    scripts/dev/slowest-tests.py target/nextest/main/junit.xml
    scripts/dev/slowest-tests.py -n 30 JUNIT --programs target/nextest/main/programs.log

scripts/test.sh prints this at the end of each tier, after the tier's
summary line (--tier NAME --wall SECONDS --exit CODE: passed or failed,
the counts, the wall time and the machine's load). The times are wall
times on the machine as it was: figures to read, never a verdict.
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter


def tests(junit):
    """(seconds, binary, name, outcome) of every test case of the file."""
    out = []
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        binary = suite.get("name", "?").split("::")[-1]
        for case in suite.iter("testcase"):
            if case.find("skipped") is not None:
                continue
            failed = case.find("failure") is not None or case.find("error") is not None
            flaky = case.find("flakyFailure") is not None or case.find("rerunFailure") is not None
            outcome = "FAILED" if failed else ("retried" if flaky else "")
            out.append((float(case.get("time", "0")), binary, case.get("name", "?"), outcome))
    return out


def programs(log):
    """(seconds, test, program) of every program line of the log."""
    out = []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                try:
                    out.append((float(parts[0]), parts[1], parts[2]))
                except ValueError:
                    pass
    return out


def load():
    """The machine's load average over the last minute, as text."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def summary(tier, cases, wall, code):
    """One line: the tier's verdict, its counts, its wall time, the load."""
    failed = sum(1 for c in cases if c[3] == "FAILED")
    verdict = "passed" if code == 0 and failed == 0 else f"FAILED (exit {code})"
    minutes, seconds = divmod(wall, 60)
    return (
        f"== {tier} tier: {verdict}: {len(cases) - failed} of {len(cases)} tests passed, "
        f"in {minutes} min {seconds:02d} s (load {load()} at the end)"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("junit")
    p.add_argument("-n", type=int, default=15, help="how many to list (15)")
    p.add_argument("--programs", help="the tests' program log (COLLBENCH_TEST_LOG)")
    p.add_argument("--tier", help="print the summary line of this tier first")
    p.add_argument("--wall", type=int, default=0, help="the tier's wall time in seconds")
    p.add_argument("--exit", type=int, default=0, help="the tier's exit code")
    a = p.parse_args()
    try:
        cases = tests(a.junit)
    except (OSError, ET.ParseError) as e:
        if a.tier:
            print(f"== {a.tier} tier: FAILED (exit {a.exit}), no test report ({e})")
        print(f"slowest-tests: cannot read {a.junit}: {e}", file=sys.stderr)
        return 1
    if a.tier:
        print(summary(a.tier, cases, a.wall, a.exit))
    total = sum(c[0] for c in cases)
    print(f"== the {min(a.n, len(cases))} slowest of {len(cases)} tests ({total:.0f} s of test time in all)")
    for secs, binary, name, outcome in sorted(cases, reverse=True)[: a.n]:
        print(f"  {secs:7.1f} s  {binary:<10} {name}{'  (' + outcome + ')' if outcome else ''}")
    if a.programs:
        try:
            runs = programs(a.programs)
        except OSError as e:
            print(f"slowest-tests: cannot read {a.programs}: {e}", file=sys.stderr)
            return 1
        kinds = Counter(r[2] for r in runs)
        mpirun = kinds.get("mpirun", 0)
        secs = sum(r[0] for r in runs)
        print(f"== programs the tests started: {len(runs)} ({secs:.0f} s), {mpirun} of them mpirun")
        for prog, n in kinds.most_common(6):
            print(f"  {n:5d}  {prog}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
