#!/usr/bin/env python3
"""Lists the longest Rust functions under src/ (outside `#[cfg(test)]`
modules, in their files or declared `#[cfg(test)] mod x;`, and `#[test]`
functions), for the "no function over 80 lines" rule (docs/contributing.md).

    scripts/dev/fn-lengths.py            # the 15 longest
    scripts/dev/fn-lengths.py -n 40      # the 40 longest
    scripts/dev/fn-lengths.py --over 80  # every function over 80 lines;
                                         # exit 1 when there is one

A function's length counts the lines from its `fn` line to its closing
brace. The scan is a brace matcher that skips strings, chars and comments;
it is a development aid, not a parser (raw strings with `#` are handled,
macro-generated functions are not seen). Functions in files under
src/backend/nccl/ are listed but can be left out with --skip.
"""

import argparse
import os
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]")
TEST_ATTR = re.compile(r"^\s*#\[(tokio::)?test\]")
ATTR = re.compile(r"^\s*#\[")
MOD_DECL = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def strip(text):
    """The text with strings, chars and comments blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "'":
            # a char literal ('a', '\n', '\u{..}') or a lifetime ('a)
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    with open(path, encoding="utf-8") as f:
        text = strip(f.read())
    lines = text.split("\n")
    found = []
    # test modules: `#[cfg(test)]` followed by `mod x {`, skipped whole
    skip_until = -1
    in_test_attrs = False
    for i, line in enumerate(lines):
        if i <= skip_until:
            continue
        if CFG_TEST.match(line):
            end = block_end(lines, i)
            if end is not None:
                skip_until = end
            continue
        if TEST_ATTR.match(line):
            in_test_attrs = True
            continue
        m = FN.match(line)
        if not m:
            if line.strip() and not ATTR.match(line):
                in_test_attrs = False
            continue
        if in_test_attrs:
            in_test_attrs = False
            continue  # a #[test] function
        end = block_end(lines, i)
        if end is None:
            continue  # a declaration without a body (trait method)
        found.append((end - i + 1, path, i + 1, m.group(7)))
    return found


def test_module_files(root):
    """The files of modules declared `#[cfg(test)] mod NAME;` (their
    functions are tests and test support): NAME.rs, and the folder NAME/
    (its mod.rs and its submodules)."""
    found = set()
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            # a file's submodules live in its folder: x/mod.rs, lib.rs and
            # main.rs in their own; x.rs in x/
            if name in ("mod.rs", "lib.rs", "main.rs"):
                base = dirpath
            else:
                base = os.path.join(dirpath, name[:-3])
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            for i, line in enumerate(lines[1:], 1):
                m = MOD_DECL.match(line)
                if m and CFG_TEST.match(lines[i - 1]):
                    sub = m.group(3)
                    found.add(os.path.join(base, sub + ".rs"))
                    found.add(os.path.join(base, sub) + os.sep)
    return found


def in_tests(path, tests):
    return path in tests or any(t.endswith(os.sep) and path.startswith(t) for t in tests)


def block_end(lines, start):
    """Line index of the brace closing the first block opened at or after
    `start`, or None when a `;` ends the item first."""
    depth = 0
    opened = False
    for j in range(start, len(lines)):
        for ch in lines[j]:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return j
            elif ch == ";" and not opened and depth == 0:
                return None
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=15, help="how many to list")
    p.add_argument("--over", type=int, help="list every function longer than this; exit 1 if any")
    p.add_argument("--skip", action="append", default=[], help="path prefix to leave out (repeatable)")
    p.add_argument("root", nargs="?", default="src")
    a = p.parse_args()
    all_fns = []
    tests = test_module_files(a.root)
    for dirpath, _, files in os.walk(a.root):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                if any(path.startswith(s) for s in a.skip) or in_tests(path, tests):
                    continue
                all_fns.extend(functions(path))
    all_fns.sort(key=lambda f: (-f[0], f[1], f[2]))
    if a.over is not None:
        long = [f for f in all_fns if f[0] > a.over]
        for n, path, line, name in long:
            print(f"{n:5}  {path}:{line}  {name}")
        return 1 if long else 0
    for n, path, line, name in all_fns[: a.n]:
        print(f"{n:5}  {path}:{line}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
