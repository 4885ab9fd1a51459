#!/usr/bin/env bash
# peer_qmd.sh: measure the peer QMD (@tobilu/qmd, BM25 `qmd search`, on Bun) on a bench workspace.
# Usage: bench/peer_qmd.sh WORKSPACE_DIR QUERIES_FILE   (corpus: WORKSPACE_DIR/memory/**/*.md)
# On first use it installs the pinned QMD and Bun from npm into $CLAWMEM_PEER_DIR (default build/peers).
# QMD runs fully offline with all its state in a throwaway temp dir. Prints one JSON object on stdout;
# progress and errors go to stderr.
set -euo pipefail
export LC_ALL=C # '.' as the decimal point in EPOCHREALTIME and awk

QMD_VERSION=2.8.3 # npm @tobilu/qmd
BUN_VERSION=1.4.5 # npm bun (ships the binary in @oven/bun-<platform>)
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

peer_root=${CLAWMEM_PEER_DIR:-$(dirname "$here")/build/peers}
mkdir -p "$peer_root" || die "cannot create $peer_root"
peer_root=$(cd "$peer_root" && pwd)
prefix=$peer_root/qmd-$QMD_VERSION-bun-$BUN_VERSION

# --- install (once per pinned version pair) -----------------------------------
# --ignore-scripts: the install hooks of better-sqlite3, node-llama-cpp and the tree-sitter
# grammars would try to fetch prebuilt binaries or node headers; under Bun QMD uses bun:sqlite and
# `qmd search` never loads node-llama-cpp. Bun's own postinstall only links the binary out of
# @oven/bun-<platform>, so it is run by hand.
install_peer() {
  if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    die "installing QMD needs node and npm on PATH"
  fi
  local tmp
  tmp=$(mktemp -d "$peer_root/.qmd-install.XXXXXX")
  say "installing @tobilu/qmd@$QMD_VERSION and bun@$BUN_VERSION into $prefix (~1 GB, ~30 s)"
  if ! npm install --prefix "$tmp" --ignore-scripts --no-audit --no-fund --loglevel=error \
         "@tobilu/qmd@$QMD_VERSION" "bun@$BUN_VERSION" >&2 ||
     ! (cd "$tmp/node_modules/bun" && node install.js) >&2; then
    rm -rf "$tmp"
    die "npm install of @tobilu/qmd@$QMD_VERSION / bun@$BUN_VERSION failed"
  fi
  rm -rf "$prefix"
  mv "$tmp" "$prefix"
}

bun=$prefix/node_modules/.bin/bun
# Run the CLI entry with Bun directly: the package's bin/qmd launcher picks Node whenever a
# package-lock.json sits at the install root (as it does after npm install), and QMD needs Node >= 22
# plus a compiled better-sqlite3 there.
qmd_js=$prefix/node_modules/@tobilu/qmd/dist/cli/qmd.js

[[ -x $bun && -f $qmd_js ]] || install_peer
bun_version=$("$bun" --version 2>/dev/null) || die "bun at $bun does not run (remove $prefix to reinstall)"
[[ $bun_version == "$BUN_VERSION" ]] || die "bun at $bun is $bun_version, want $BUN_VERSION"

# --- isolated, offline QMD state ----------------------------------------------
state=$(mktemp -d "${TMPDIR:-/tmp}/peer_qmd.XXXXXX")
if [[ ${CLAWMEM_PEER_KEEP:-0} == 1 ]]; then say "keeping state in $state"; else trap 'rm -rf "$state"' EXIT; fi
mkdir -p "$state/home" "$state/config" "$state/cache" "$state/run"
export HOME=$state/home
export XDG_CONFIG_HOME=$state/config     # $XDG_CONFIG_HOME/qmd/index.yml: collections + models
export QMD_CONFIG_DIR=$state/config/qmd  # takes precedence over XDG_CONFIG_HOME; pin it too
export XDG_CACHE_HOME=$state/cache       # default index, model cache, Bun transpiler cache
export INDEX_PATH=$state/index.sqlite    # the SQLite index itself (FTS5 + vector tables)
export NO_COLOR=1
# Offline guard: `collection add`, `update` and `search` load no model, but should anything try,
# it meets a local path that does not exist instead of an hf: URI it would download.
export QMD_EMBED_MODEL=$state/no-models/embed.gguf
export QMD_GENERATE_MODEL=$state/no-models/generate.gguf
export QMD_RERANK_MODEL=$state/no-models/rerank.gguf
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
unset QMD_SOURCE_MODE QMD_LLAMA_GPU
# QMD also honours a project-local .qmd/index.yml found by walking up from the working directory,
# so run it from inside the temp dir.
cd "$state/run"

qmd() { "$bun" "$qmd_js" "$@"; }

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
