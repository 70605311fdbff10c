#!/usr/bin/env bash
# Lines of Rust per top-level module of src/ (`NAME.rs` and a `NAME/`
# folder beside it count as one module), then the total: for before/after
# figures of a refactor.
#   scripts/dev/module-lines.sh [SRC]
set -euo pipefail
src=${1:-src}
find "$src" -name '*.rs' -print0 | xargs -0 wc -l | grep -v ' total$' |
    awk -v src="$src/" '{
        path = $2; sub("^" src, "", path)
        name = path; sub("/.*", "", name); sub("\\.rs$", "", name)
        lines[name] += $1; total += $1
    } END {
        for (n in lines) printf "%7d  %s\n", lines[n], n
        printf "%7d  total\n", total
    }' | sort -k2 | awk '$2 != "total"' ; find "$src" -name '*.rs' -print0 | xargs -0 cat | wc -l | awk '{ printf "%7d  total\n", $1 }'
