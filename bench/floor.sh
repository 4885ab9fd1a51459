#!/usr/bin/env bash
# bench/floor.sh — a search process's own floor (issue 30 item 7): the minor
# page faults (the kernel's accounting of the finished process, read through
# GNU time) and, where valgrind is installed, the user-space instructions of
#   /bin/true                                  (any process's floor)
#   clawmem search --no-sync QUERY             (no freshness check)
#   clawmem search QUERY                       (the default check, no watcher)
# for a query that matches nothing, so that the figures hold the process and
# not the ranking. Prints one JSON object; the median of RUNS runs (21).
# Usage: bench/floor.sh CLAWMEM WORKSPACE STATE_DIR [QUERY]
set -euo pipefail
export LC_ALL=C
[[ $# -ge 3 ]] || { echo "usage: $0 CLAWMEM WORKSPACE STATE_DIR [QUERY]" >&2; exit 2; }
bin=$1 ws=$2 st=$3 query=${4:-zzqxnohitzz}
runs=${RUNS:-21}

# The median of the minor page faults of runs of the command.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
faults() {
  local vals=()
  for _ in $(seq "$runs"); do
    /usr/bin/time -o "$tmp" -f '%R' "$@" >/dev/null 2>&1
    vals+=("$(tail -n1 "$tmp")")
  done
  printf '%s\n' "${vals[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}
# User-space instructions of one run (valgrind's count), or null.
instructions() {
  command -v valgrind >/dev/null || { echo null; return; }
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    awk '/refs:/{gsub(",", "", $NF); n=$NF} END{print n ? n : "null"}'
}
one() { # NAME COMMAND...
  local name=$1
  shift
  printf '"%s":{"page_faults":%s,"instructions":%s}' "$name" "$(faults "$@")" "$(instructions "$@")"
}
c=("$bin" --workspace "$ws" --state-dir "$st" search)
"${c[@]}" --no-sync "$query" >/dev/null # the index in the page cache
printf '{"query":"%s",%s,%s,%s}\n' "$query" "$(one true /bin/true)" \
  "$(one search_nosync "${c[@]}" --no-sync "$query")" "$(one search_check "${c[@]}" "$query")"
