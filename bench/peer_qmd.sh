#!/usr/bin/env bash
# peer_qmd.sh: measure the peer QMD (@tobilu/qmd, BM25 `qmd search`, on Bun) on a bench workspace.
# Usage: bench/peer_qmd.sh WORKSPACE_DIR QUERIES_FILE   (corpus: WORKSPACE_DIR/memory/**/*.md)
# On first use it installs the pinned QMD and Bun from npm into $CLAWMEM_PEER_DIR (default build/peers).
# QMD runs fully offline with all its state in a throwaway temp dir. Prints one JSON object on stdout;
# progress and errors go to stderr.
set -euo pipefail
export LC_ALL=C # '.' as the decimal point in EPOCHREALTIME and awk

SEARCH_QUERIES=20 # how many queries from QUERIES_FILE are timed

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { printf 'peer_qmd: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 WORKSPACE_DIR QUERIES_FILE"
workspace=$(cd "$1" 2>/dev/null && pwd) || die "no such workspace: $1"
queries_file=$2
[[ -d $workspace/memory ]] || die "$workspace has no memory/ folder"
[[ -r $queries_file ]] || die "cannot read queries file: $queries_file"
mapfile -t queries < <(tr -d '\r' <"$queries_file" | grep -v '^[[:space:]]*$' | head -n "$SEARCH_QUERIES")
[[ ${#queries[@]} -gt 0 ]] || die "no queries in $queries_file"

# shellcheck source=bench/qmd_env.sh
source "$here/qmd_env.sh"
qmd_install
qmd_isolate

now() { printf '%s' "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# Run one timed QMD step, its stdout kept in NAME.log and stderr in NAME.err; print the seconds.
timed_step() { # NAME QMD-ARGS...
  local name=$1 t0 t1
  shift
  t0=$(now)
  if ! qmd "$@" >"$state/$name.log" 2>"$state/$name.err"; then
    tail -n 20 "$state/$name.log" "$state/$name.err" >&2
    die "qmd $* failed"
  fi
  t1=$(now)
  elapsed "$t0" "$t1"
}

version=$(qmd --version | awk '{ print $2 }') || die "qmd does not start under bun"
[[ $version == "$QMD_VERSION" ]] || die "qmd reports version '$version', want $QMD_VERSION"
files=$(find "$workspace/memory" -type f -name '*.md' | wc -l)
say "qmd $version on bun $bun_version; $files .md files under $workspace/memory; state in $state"

# --- (a) full index ---------------------------------------------------------------
say "index: qmd collection add $workspace/memory --name memory --mask '**/*.md'"
index_s=$(timed_step index collection add "$workspace/memory" --name memory --mask '**/*.md')
indexed=$(sed -n 's/^Indexed: \([0-9]*\) new.*/\1/p' "$state/index.log")
[[ -n $indexed && $indexed -gt 0 ]] || { cat "$state/index.log" >&2; die "qmd indexed no documents"; }
say "index: ${index_s}s, $indexed documents (QMD's glob skips dotfiles such as '..md')"

# --- (b) no-op update -------------------------------------------------------------
say "no-op update: qmd update"
noop_update_s=$(timed_step update update)
grep -q '^Indexed: 0 new, 0 updated' "$state/update.log" ||
  say "warning: the no-op update re-indexed something: $(grep '^Indexed:' "$state/update.log")"
say "no-op update: ${noop_update_s}s"

# --- (c) search: whole-process wall time per query --------------------------------
say "search: qmd search --json -- QUERY, ${#queries[@]} queries"
times=()
for i in "${!queries[@]}"; do
  times+=("$(timed_step "search$i" search --json -- "${queries[i]}")")
done
# Each search log holds the JSON array QMD printed; count the queries that found something.
with_hits=$(node -e '
  let n = 0;
  for (const f of process.argv.slice(1)) {
    const hits = JSON.parse(require("fs").readFileSync(f, "utf8"));
    if (Array.isArray(hits) && hits.length > 0) n++;
  }
  console.log(n);' "$state"/search*.log) || die "qmd search printed something that is not JSON"
[[ $with_hits -gt 0 ]] || die "no query returned any result"
read -r p50 mean < <(printf '%s\n' "${times[@]}" | sort -n | awk '
  { t[NR] = $1; sum += $1 }
  END { m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
        printf "%.4f %.4f\n", m, sum / NR }')
say "search: p50 ${p50}s, mean ${mean}s, $with_hits/${#queries[@]} queries with results"

index_bytes=$(stat -c %s "$INDEX_PATH"* | awk '{ n += $1 } END { print n }') # .sqlite + any -wal/-shm

printf '{"peer":"qmd","version":"%s","bun":"%s","files":%d,"indexed_docs":%d,"index_s":%s,' \
  "$version" "$bun_version" "$files" "$indexed" "$index_s"
printf '"noop_update_s":%s,"search_wall_p50_s":%s,"search_wall_mean_s":%s,' \
  "$noop_update_s" "$p50" "$mean"
printf '"search_queries":%d,"search_queries_with_hits":%d,"index_bytes":%d}\n' \
  "${#queries[@]}" "$with_hits" "$index_bytes"
