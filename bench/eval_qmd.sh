#!/usr/bin/env bash
# eval_qmd.sh — the peer QMD's keyword search for the quality evaluations
# (bench/eval_locomo.mjs, bench/eval_scifact.mjs): indexes WORKSPACE/memory as
# one collection in a throwaway offline QMD state, then for each query line on
# stdin runs `qmd search --json -n N -- QUERY` and prints QMD's answer as one
# compact JSON line (an empty array when it finds nothing).
# Usage: bench/eval_qmd.sh WORKSPACE N < queries > answers.jsonl
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { printf 'eval_qmd: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
[[ $# -eq 2 ]] || die "usage: $0 WORKSPACE N < queries"
workspace=$(cd "$1" 2>/dev/null && pwd) || die "no such workspace: $1"
n=$2
# shellcheck source=bench/qmd_env.sh
source "$here/qmd_env.sh"
qmd_install
qmd_isolate
qmd collection add "$workspace/memory" --name memory --mask '**/*.md' >"$state/index.log" 2>&1 ||
  { cat "$state/index.log" >&2; die "qmd collection add failed"; }
while IFS= read -r q; do
  out=$(qmd search --json -n "$n" -- "$q" 2>"$state/search.err") ||
    { cat "$state/search.err" >&2; die "qmd search failed for: $q"; }
  # QMD prints a pretty JSON array, or a message when nothing matched.
  node -e 'let a; try { a = JSON.parse(process.argv[1]); } catch { a = []; }
           console.log(JSON.stringify(Array.isArray(a) ? a : []));' "$out"
done
