#!/usr/bin/env bash
# Each rule of the code lives in one place (docs/ARCHITECTURE.md, "One
# place for each rule"); this script fails, listing the lines, where
# production code (not tests) breaks one:
#
#   - a backend launch (`.launch(`, `.launch_p2p(`) outside src/engine/ and
#     src/backend/: every timed loop is the engine's (engine/context.rs);
#   - an element comparison (`count_mismatches`, `count_outside`) outside
#     src/engine/check.rs and src/buffer.rs: every validation is engine::check;
#   - a bus-bandwidth factor written out (`(n - 1) / n`, a `bus_factor`
#     function) outside src/collective/: every factor is a collective's;
#   - the bandwidth formula (`/ 1e9` of bytes over seconds) outside
#     record::bandwidth_gbps;
#   - a line to stderr (`eprintln!`, `std::io::stderr()`) outside
#     error::say and the progress bar;
#   - a run id made outside report::identity (which session::prepare calls
#     once, for the run's identity that every header and file takes).
#
# Test code is left out: files named tests.rs or under a tests/ folder,
# session/golden.rs, and everything after a file's first `#[cfg(test)]`.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Production lines of src/: "file:line:text", test code left out.
production_lines() {
    find src -name '*.rs' ! -name tests.rs ! -path '*/tests/*' ! -path src/session/golden.rs -print0 |
        xargs -0 awk '
            FNR == 1 { in_test = 0 }
            /^[[:space:]]*#\[cfg\(test\)\]/ { in_test = 1 }
            !in_test { print FILENAME ":" FNR ":" $0 }'
}

lines=$(production_lines)
failed=0

# rule NAME REGEX ALLOWED: the lines matching REGEX outside the files
# matching the regular expression ALLOWED break the rule NAME.
rule() {
    local name=$1 regex=$2 allowed=$3 found
    found=$(printf '%s\n' "$lines" | grep -E -- "$regex" | grep -vE "^($allowed):" || true)
    # comments do not count
    found=$(printf '%s\n' "$found" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
    if [ -n "$found" ]; then
        echo "one place: $name"
        printf '%s\n' "$found" | sed 's/^/  /'
        failed=1
    fi
}

rule "backend launches only in the engine (src/engine/) and the backends (src/backend/)" \
    '\.(launch|launch_p2p)\(' 'src/engine/[^:]*|src/backend/[^:]*|src/suite/mod\.rs'
rule "element comparisons only in src/engine/check.rs and src/buffer.rs" \
    '(count_mismatches|count_outside)\(' 'src/engine/check\.rs|src/buffer\.rs'
rule "bus factors only in src/collective/" \
    '\((n|k) - 1(\.0)?\) / (n|k)|fn [a-z_]*bus_factor' 'src/collective/[^:]*'
rule "the bandwidth formula only in record::bandwidth_gbps (src/record/mod.rs)" \
    '/ *t(ime)?(_s)? */ *1e9' 'src/record/mod\.rs'
rule "stderr only through error::say (and the progress bar)" \
    'eprintln!|eprint!|std::io::stderr\(\)' 'src/error\.rs|src/report/progress\.rs'
rule "run ids made only by report::identity, for session::prepare's run identity" \
    '[^_.a-z]run_id\(&' 'src/report/identity\.rs|src/session/prepare\.rs'

if [ "$failed" -ne 0 ]; then
    echo "(docs/ARCHITECTURE.md, \"One place for each rule\", says where each belongs)"
    exit 1
fi
echo "one place for each rule: ok"
