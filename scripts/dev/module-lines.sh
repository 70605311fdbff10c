#!/usr/bin/env bash
# Lines of Rust per top-level module of src/ (a folder, or a file at the
# top), then the total: for before/after figures of a refactor.
#   scripts/dev/module-lines.sh [SRC]
set -euo pipefail
src=${1:-src}
for entry in "$src"/*; do
    name=$(basename "$entry" .rs)
    if [ -d "$entry" ]; then
        n=$(find "$entry" -name '*.rs' -print0 | xargs -0 cat | wc -l)
    else
        case "$entry" in *.rs) n=$(wc -l < "$entry") ;; *) continue ;; esac
    fi
    printf '%7d  %s\n' "$n" "$name"
done | sort -k2 | awk '{ print; total += $1 } END { printf "%7d  total\n", total }'
