#!/usr/bin/env bash
# qmd_backend.sh — part of `make bench`: memory_search through the QMD backend
# (memory.backend = "qmd") vs the builtin engine on the same workspace, and the
# backend's cost over `qmd search` run directly (build/bench_qmd). QMD is the
# pinned one of scripts/install-qmd.sh.
# Usage: bench/qmd_backend.sh SOURCE_MEMORY_DIR QUERIES_FILE [EVERY]
#   takes every EVERY-th .md file (default 30) of SOURCE_MEMORY_DIR into a fresh
#   workspace under build/bench/qmd-backend. Prints one JSON object.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
say() { printf 'qmd_backend: %s\n' "$*" >&2; }
[[ $# -ge 2 ]] || { say "usage: $0 SOURCE_MEMORY_DIR QUERIES_FILE [EVERY]"; exit 2; }
src=$1 queries=$2 every=${3:-30}
qmd=$(scripts/install-qmd.sh) || { say "QMD not installed"; exit 1; }
work=$PWD/build/bench/qmd-backend
rm -rf "$work"; mkdir -p "$work/ws/memory" "$work/state"
find "$src" -name '*.md' | sort | awk -v n="$every" 'NR % n == 0' | while read -r f; do
  rel=${f#"$src"/}; mkdir -p "$work/ws/memory/$(dirname "$rel")"; cp "$f" "$work/ws/memory/$rel"
done
files=$(find "$work/ws/memory" -name '*.md' | wc -l)
say "$files files, queries from $queries"
out=$(build/bench_qmd "$work/ws" "$work/state" "$queries" "$qmd")
printf '{"files":%s,%s\n' "$files" "${out#\{}"
