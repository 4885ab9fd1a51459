#!/usr/bin/env bash
# qmd_backend.sh — part of `make bench`: memory_search through the QMD backend
# (memory.backend = "qmd") vs the builtin engine on the same workspace, and the
# backend's cost over `qmd search` run directly (build/bench_qmd). QMD is the
# pinned one of scripts/install-qmd.sh.
# Usage: bench/qmd_backend.sh SOURCE_MEMORY_DIR [EVERY]
#   takes every EVERY-th .md file (default 30) of SOURCE_MEMORY_DIR into a fresh
#   workspace under build/bench/qmd-backend; the queries are the title, and the
#   title plus the first word of the description, of every 50th of those files
#   (as run.sh makes them). Prints one JSON object.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
say() { printf 'qmd_backend: %s\n' "$*" >&2; }
[[ $# -ge 1 ]] || { say "usage: $0 SOURCE_MEMORY_DIR [EVERY]"; exit 2; }
src=$1 every=${2:-30}
qmd=$(scripts/install-qmd.sh) || { say "QMD not installed"; exit 1; }
work=$PWD/build/bench/qmd-backend
rm -rf "$work"; mkdir -p "$work/ws/memory" "$work/state"
find "$src" -name '*.md' | sort | awk -v n="$every" 'NR % n == 0' | while read -r f; do
  rel=${f#"$src"/}; mkdir -p "$work/ws/memory/$(dirname "$rel")"; cp "$f" "$work/ws/memory/$rel"
done
files=$(find "$work/ws/memory" -name '*.md' | wc -l)
queries=$work/queries.txt
find "$work/ws/memory" -name '*.md' | sort | awk 'NR % 50 == 0' | while read -r f; do
  name=$(sed -n 's/^# //p' "$f" | head -n1)
  word=$(sed -n 's/^> //p' "$f" | head -n1 | awk '{print $1}' | tr -d '.,:;()`"')
  [[ -n $name ]] || continue
  printf '%s\n' "$name"
  [[ -n $word ]] && printf '%s %s\n' "$name" "$word"
done > "$queries"
say "$files files, $(wc -l < "$queries") queries (at most 40 timed)"
out=$(build/bench_qmd "$work/ws" "$work/state" "$queries" "$qmd")
printf '{"files":%s,%s\n' "$files" "${out#\{}"
