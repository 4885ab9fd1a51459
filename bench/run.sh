#!/usr/bin/env bash
# bench/run.sh — `make bench`: indexes a corpus with clawmem and with the peer
# QMD on the same files in the same run, and prints one JSON object with both
# sets of figures and the ratios. Default corpus: the 38,404 tldr pages from
# ../shared/data/corpora/tldr.tar.gz, unpacked into a workspace's memory/.
#   CLAWMEM_BENCH_CORPUS=DIR   use DIR (a folder of .md files) instead
#   CLAWMEM_BENCH_PEER=0       skip QMD
#   CLAWMEM_BENCH_SCIFACT=DIR  BEIR SciFact (default ../shared/data/scifact)
#   CLAWMEM_BENCH_1M=1         also the 1M runs (vectors and the scale curve:
#                              ~15 minutes more, ~6 GB of memory)
#   CLAWMEM_BENCH_LOCAL=0      skip the local-embeddings part (its first run
#                              builds llama.cpp's llama-embedding: ~20 min)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build/bench
tarball=${CLAWMEM_BENCH_TARBALL:-$root/../shared/data/corpora/tldr.tar.gz}
say() { printf 'bench: %s\n' "$*" >&2; }

rm -rf "$work/ws" "$work/state" "$work/cli-state"
mkdir -p "$work/ws/memory"
if [[ -n ${CLAWMEM_BENCH_CORPUS:-} ]]; then
  cp -r "$CLAWMEM_BENCH_CORPUS"/. "$work/ws/memory/"
  corpus=$CLAWMEM_BENCH_CORPUS
else
  [[ -r $tarball ]] || { say "corpus not found: $tarball (set CLAWMEM_BENCH_TARBALL or CLAWMEM_BENCH_CORPUS)"; exit 1; }
  say "unpacking $tarball"
  tar -xzf "$tarball" -C "$work/ws/memory"
  corpus=tldr
fi

# Queries: each sampled page's command name plus the first word of its
# description, and the name alone, in every language of the corpus (≥ 200).
queries=$work/queries.txt
find "$work/ws/memory" -name '*.md' | sort | awk 'NR % 150 == 0' | while read -r f; do
  name=$(sed -n 's/^# //p' "$f" | head -n1)
  word=$(sed -n 's/^> //p' "$f" | head -n1 | awk '{print $1}' | tr -d '.,:;()`"')
  [[ -n $name ]] || continue
  printf '%s\n' "$name"
  [[ -n $word ]] && printf '%s %s\n' "$name" "$word"
done > "$queries"
say "$(wc -l < "$queries") queries"
# 1% of the files change for the resync figure
find "$work/ws/memory" -name '*.md' | sort | awk 'NR % 100 == 0' > "$work/changed.txt"

say "clawmem: in-process index, resync and search"
ours=$(build/bench_search "$work/ws" "$work/state" "$queries" "$work/changed.txt")

# Whole-process `clawmem search` (includes start-up, config, the stat-only sync).
build/clawmem --workspace "$work/ws" --state-dir "$work/cli-state" index >/dev/null
# Median wall time of `clawmem search` over the first 20 queries, with extra
# flags $@, on workspace $cws with state $cst (default: the tldr ones).
cws=$work/ws cst=$work/cli-state cq=$queries
cli_p50() {
  local q t0 t1 walls=()
  while read -r q; do
    t0=$EPOCHREALTIME
    build/clawmem --workspace "$cws" --state-dir "$cst" search "$q" "$@" >/dev/null
    t1=$EPOCHREALTIME
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')")
  done < <(head -n 20 "$cq")
  printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}
cli_sync_p50=$(cli_p50)      # checks every file first (one stat each, read-only), then searches
cli_nosync_p50=$(cli_p50 --no-sync) # like `qmd search`, which never looks at the files
# The same default `clawmem search` while `clawmem watch` keeps the index fresh:
# the search trusts the watcher's liveness record and looks at no file.
build/clawmem --workspace "$work/ws" --state-dir "$work/cli-state" watch 2>/dev/null &
watch_pid=$!
rec=$work/cli-state/memory/main.clawmem.sqlite.watch
for _ in $(seq 600); do grep -q '^clawmem-watch 1 fresh' "$rec" 2>/dev/null && break; sleep 0.1; done
cli_watched_p50=$(cli_p50)
kill "$watch_pid"; wait "$watch_pid" 2>/dev/null || true
# A corpus of larger files: the 5,183 SciFact abstracts (title + text) as
# Markdown files, indexed by clawmem (whole process, best of 3) and by QMD.
scidir=${CLAWMEM_BENCH_SCIFACT:-$root/../shared/data/scifact}
scifact=$scidir/corpus.jsonl
sci='null'
if [[ -r $scifact ]]; then
  rm -rf "$work/sci"; mkdir -p "$work/sci/ws/memory"
  node -e '
const fs = require("fs"), [src, dir] = process.argv.slice(1);
for (const line of fs.readFileSync(src, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const d = JSON.parse(line);
  fs.writeFileSync(`${dir}/${d._id}.md`, `# ${d.title}\n\n${d.text}\n`);
}' "$scifact" "$work/sci/ws/memory"
  say "scifact: $(ls "$work/sci/ws/memory" | wc -l) files, $(du -sk "$work/sci/ws/memory" | cut -f1) KiB"
  best=
  for _ in 1 2 3; do
    rm -rf "$work/sci/state"
    t0=$EPOCHREALTIME
    build/clawmem --workspace "$work/sci/ws" --state-dir "$work/sci/state" index >/dev/null
    t1=$EPOCHREALTIME
    best=$(awk -v a="$t0" -v b="$t1" -v m="$best" 'BEGIN{t=b-a; if (m == "" || t < m) m = t; printf "%.3f", m}')
  done
  node -e 'const fs=require("fs");for(const l of fs.readFileSync(process.argv[1],"utf8").split("\n").slice(0,20)){if(l.trim())console.log(JSON.parse(l).text.split(" ").slice(0,4).join(" "))}' \
    "$scidir/queries.jsonl" > "$work/sci/queries.txt"
  sci_peer='null'
  if [[ ${CLAWMEM_BENCH_PEER:-1} != 0 ]]; then
    say "peer: QMD on the SciFact files"
    sci_peer=$(bench/peer_qmd.sh "$work/sci/ws" "$work/sci/queries.txt") || sci_peer='null'
  fi
  sci="{\"files\":$(ls "$work/sci/ws/memory" | wc -l),\"clawmem_index_s\":$best,\"qmd\":$sci_peer}"

  # The issue's workspace size for the search figure: ~1,300 files, ~16 MB
  # (the abstracts four to a file); `clawmem search` with its default check
  # (no watcher: a read-only stat of each file) and with a live watcher,
  # against `qmd search` on the same files.
  rm -rf "$work/ws1300"; mkdir -p "$work/ws1300/ws/memory"
  node -e '
const fs = require("fs"), [src, dir] = process.argv.slice(1);
const docs = fs.readFileSync(src, "utf8").split("\n").filter(l => l.trim()).map(l => JSON.parse(l));
for (let i = 0; i < docs.length; i += 4)
  fs.writeFileSync(`${dir}/a${String(i / 4).padStart(4, "0")}.md`,
    docs.slice(i, i + 4).map(d => `# ${d.title}\n\n${d.text}\n`).join("\n").repeat(2));' "$scifact" "$work/ws1300/ws/memory"
  cws=$work/ws1300/ws cst=$work/ws1300/state cq=$work/sci/queries.txt
  build/clawmem --workspace "$cws" --state-dir "$cst" index >/dev/null
  # a workspace as users have it, its directories older than the index by
  # more than 2 s: a second index records them, and the check reads no
  # directory whose ctime is unchanged (BENCHMARKS.md §5, eighth round)
  sleep 2.1
  build/clawmem --workspace "$cws" --state-dir "$cst" index >/dev/null
  # the process's own floor: page faults and instructions of a no-hit search
  # against /bin/true (issue 30 item 7), before any watcher runs
  ws1300_floor=$(bench/floor.sh build/clawmem "$cws" "$cst") || ws1300_floor='null'
  ws1300_sync_p50=$(cli_p50)
  ws1300_nosync_p50=$(cli_p50 --no-sync) # the search alone
  build/clawmem --workspace "$cws" --state-dir "$cst" watch 2>/dev/null &
  watch_pid=$!
  for _ in $(seq 600); do grep -q '^clawmem-watch 1 fresh' "$cst/memory/main.clawmem.sqlite.watch" 2>/dev/null && break; sleep 0.1; done
  ws1300_watched_p50=$(cli_p50)
  kill "$watch_pid"; wait "$watch_pid" 2>/dev/null || true
  cws=$work/ws cst=$work/cli-state cq=$queries
  ws1300_peer='null'
  if [[ ${CLAWMEM_BENCH_PEER:-1} != 0 ]]; then
    say "peer: QMD on the 1,300-file workspace"
    ws1300_peer=$(bench/peer_qmd.sh "$work/ws1300/ws" "$work/sci/queries.txt") || ws1300_peer='null'
  fi
  sci="${sci%\}},\"ws1300\":{\"files\":$(ls "$work/ws1300/ws/memory" | wc -l),\"kib\":$(du -sk "$work/ws1300/ws/memory" | cut -f1),\"clawmem_search_wall_p50_s\":$ws1300_sync_p50,\"clawmem_search_watched_wall_p50_s\":$ws1300_watched_p50,\"clawmem_search_nosync_wall_p50_s\":$ws1300_nosync_p50,\"floor\":$ws1300_floor,\"qmd\":$ws1300_peer}}"
fi

# Peak RSS of a whole-process full index
rss_kb=$( { /usr/bin/time -f '%M' build/clawmem --workspace "$work/ws" --state-dir "$work/cli-state" index --force >/dev/null; } 2>&1 | tail -n1)

# MCP: round trips from the official SDK client, the server's RSS and
# descriptors with the watcher on the whole corpus, write-to-searchable time.
say "clawmem mcp: 1000 memory_search round trips"
mcp=$(node bench/mcp_bench.mjs build/clawmem "$work/ws" "$work/cli-state" "$queries" 1000) || mcp='null'

# Vectors: clawmem's scans against sqlite-vec 0.1.9 (npm sqlite-vec-linux-x64,
# vec0.so loaded into Debian's SQLite) on the same random vectors.
vec0=$root/build/peers/sqlite-vec/node_modules/sqlite-vec-linux-x64/vec0.so
if [[ ! -f $vec0 && ${CLAWMEM_BENCH_PEER:-1} != 0 ]]; then
  mkdir -p "$root/build/peers/sqlite-vec"
  npm install --prefix "$root/build/peers/sqlite-vec" --no-audit --no-fund --loglevel=error \
    sqlite-vec-linux-x64@0.1.9 >&2 || say "sqlite-vec install failed; skipping it"
fi
say "vectors: top-10 over 10k and 100k random vectors, with sqlite-vec"
vectors=$(build/bench_vector $([[ -f $vec0 ]] && echo "$vec0")) || vectors='null'

say "hybrid: memory_search at 100k chunks through the loopback fake embedding server"
rm -rf "$work/hybrid"; mkdir -p "$work/hybrid"
hybrid=$(build/bench_hybrid "$work/hybrid") || hybrid='null'

# Scale curve: 10k and 100k chunks (and 1M with CLAWMEM_BENCH_1M=1: ~10 min),
# keyword-only and hybrid with the static model, one process per size; the
# table goes into the JSON and the plot into build/bench/scale.svg.
say "scale: 10k, 100k$([[ ${CLAWMEM_BENCH_1M:-0} == 1 ]] && echo ', 1M') chunks"
static_model=$work/models/clawmem-static-100d.bin
BUILD=build scripts/install-static-model.sh "$static_model" >&2
: > "$work/scale.jsonl"
for n in 10000 100000 $([[ ${CLAWMEM_BENCH_1M:-0} == 1 ]] && echo 1000000); do
  rm -rf "$work/scale"; mkdir -p "$work/scale"
  build/bench_scale "$work/scale" "$n" "$static_model" >> "$work/scale.jsonl" || say "scale: $n failed"
done
rm -rf "$work/scale"
scale=$(node -e 'const fs = require("fs"); console.log(JSON.stringify(fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map(l => JSON.parse(l))))' "$work/scale.jsonl")
if command -v gnuplot >/dev/null || { command -v apt-get >/dev/null && apt-get install -y -q gnuplot-nox >/dev/null 2>&1; }; then
  node -e 'for (const r of JSON.parse(process.argv[1])) console.log(r.chunks, r.keyword.index_s, r.hybrid_static.index_s, r.keyword.search_ms_p50, r.keyword.search_ms_p99, r.hybrid_static.search_ms_p50, r.hybrid_static.search_ms_p99, r.peak_rss_mb, r.hybrid_static.index_mb)' "$scale" > "$work/scale.dat"
  gnuplot <<GP 2>/dev/null || say "gnuplot failed; no plot"
set terminal svg size 900,380 font "sans,11"
set output "$work/scale.svg"
set multiplot layout 1,2
set logscale xy
set xlabel "chunks"
set key top left
set title "search latency (ms)"
plot "$work/scale.dat" u 1:4 w lp t "keyword p50", "" u 1:5 w lp t "keyword p99", "" u 1:6 w lp t "hybrid p50", "" u 1:7 w lp t "hybrid p99"
set title "index time (s), size (MB), peak RSS (MB)"
plot "$work/scale.dat" u 1:2 w lp t "keyword index s", "" u 1:3 w lp t "hybrid index s", "" u 1:9 w lp t "hybrid index MB", "" u 1:8 w lp t "peak RSS MB"
unset multiplot
GP
fi

local_embed='null'
if [[ ${CLAWMEM_BENCH_LOCAL:-1} != 0 ]]; then
  say "local embeddings: clawmem's local provider against llama-embedding"
  local_embed=$(bench/local.sh "$work/local") || local_embed='null'
fi

say "batch: a 100k-chunk backfill through the fake OpenAI, Gemini and Voyage batch APIs vs synchronous"
rm -rf "$work/batch"; mkdir -p "$work/batch"
batch=$(nice -n 10 build/bench_batch "$work/batch" 3000) || batch='null'
rm -rf "$work/batch"

say "model runner: overhead over a raw HTTP round trip, ordering 1,000 auth profiles"
mkdir -p "$work/runner"
runner=$(build/bench_runner "$work/runner") || runner='null'

say "gateway: 10,000 messages over 1,000 conversations through the HTTP channel, zero-latency model"
mkdir -p "$work/gateway"
gateway=$(nice -n 10 build/bench_gateway "$work/gateway") || gateway='null'

say "sessions at scale: agent turns with 0, 10k and 100k sessions.json entries; transcript reads at 1 MB, 100 MB, 1 GB"
store_scale='['
for n in 0 10000 100000; do
  r=$(nice -n 10 build/bench_gateway "$work/gateway" 2000 200 agent $n paced) || r='null'
  store_scale+="$r"; [[ $n == 100000 ]] || store_scale+=','
done
store_scale+=']'
transcript_sizes="1 100"; [[ ${CLAWMEM_BENCH_TRANSCRIPT_GB:-1} == 0 ]] || transcript_sizes+=" 1024"
transcripts=$(nice -n 10 build/bench_transcript "$work" $transcript_sizes) || transcripts='null'
# The soak (issue 27): messages over 10,000 conversations, RSS, descriptors,
# journal sizes and added latency at 10%, 50% and the end. make bench runs a
# short one (CLAWMEM_BENCH_SOAK_MESSAGES, default 50,000); `make soak` the
# full 1,000,000 (bench/soak.sh).
say "soak: ${CLAWMEM_BENCH_SOAK_MESSAGES:-50000} messages over 10,000 conversations through the HTTP channel, agent turns, zero-latency model"
soak=$(CLAWMEM_SOAK_MESSAGES=${CLAWMEM_BENCH_SOAK_MESSAGES:-50000} bench/soak.sh "$work/soak") || soak='null'
export STORE_SCALE_JSON="$store_scale" TRANSCRIPT_JSON="$transcripts" SOAK_JSON="$soak"
say "http: TCP connections per 100 model turns and per 100 Telegram sends (loopback), pooled vs new per call"
rm -rf "$work/http"; mkdir -p "$work/http"
http=$(build/bench_http "$work/http") || http='null'

say "sessions: indexing ${CLAWMEM_BENCH_SESSIONS_MB:-200} MB of transcripts, 50 appended messages to a hit"
sessions=$(bench/sessions.sh "$work/sessions") || sessions='null'

peer='null'
if [[ ${CLAWMEM_BENCH_PEER:-1} != 0 ]]; then
  say "peer: QMD (this takes a few minutes)"
  rm -rf "$work/peer-ws"; mkdir -p "$work/peer-ws/memory"
  cp -r "$work/ws/memory"/. "$work/peer-ws/memory/"
  peer=$(bench/peer_qmd.sh "$work/peer-ws" "$queries") || { say "peer run failed"; peer='null'; }
fi

# memory_search through the QMD backend vs builtin, and the backend's cost over `qmd search`
export QMD_BACKEND_JSON=null
if [[ ${CLAWMEM_BENCH_PEER:-1} != 0 ]]; then
  say "QMD backend: memory_search via memory.backend = qmd vs builtin"
  QMD_BACKEND_JSON=$(nice -n 10 bench/qmd_backend.sh "$work/ws/memory") || QMD_BACKEND_JSON=null
fi

node -e '
const ours = JSON.parse(process.argv[1]), peer = JSON.parse(process.argv[2]), mcp = JSON.parse(process.argv[8]),
  vectors = JSON.parse(process.argv[9]), hybrid = JSON.parse(process.argv[10]),
  local_embeddings = JSON.parse(process.argv[11]);
const sync = Number(process.argv[3]), nosync = Number(process.argv[7]), watched = Number(process.argv[12]),
  scifact = JSON.parse(process.argv[13]), scale = JSON.parse(process.argv[14]),
  runner = JSON.parse(process.argv[15]), sessions = JSON.parse(process.argv[16]),
  batch = JSON.parse(process.argv[17]), gateway = JSON.parse(process.argv[18]),
  http = JSON.parse(process.argv[19]);
const out = {machine: process.argv[6], corpus: process.argv[5], clawmem: ours,
  clawmem_cli_search_wall_p50_s: sync, clawmem_cli_search_nosync_wall_p50_s: nosync,
  clawmem_cli_search_watched_wall_p50_s: watched, scifact, scale, runner, sessions, batch, gateway, http,
  clawmem_cli_index_peak_rss_mb: +(Number(process.argv[4]) / 1024).toFixed(1), clawmem_mcp: mcp, vectors, hybrid, local_embeddings, qmd: peer};
if (peer) out.ratios = {
  full_index_speedup: +(peer.index_s / ours.index_s).toFixed(1),
  cli_search_speedup_nosync: +(peer.search_wall_p50_s / nosync).toFixed(1),
  cli_search_speedup_with_sync: +(peer.search_wall_p50_s / sync).toFixed(1),
  cli_search_speedup_watched: +(peer.search_wall_p50_s / watched).toFixed(1),
  scifact_index_speedup: scifact && scifact.qmd ? +(scifact.qmd.index_s / scifact.clawmem_index_s).toFixed(1) : null,
  ws1300_search_speedup: scifact && scifact.ws1300 && scifact.ws1300.qmd ? +(scifact.ws1300.qmd.search_wall_p50_s / scifact.ws1300.clawmem_search_wall_p50_s).toFixed(1) : null,
  ws1300_search_speedup_watched: scifact && scifact.ws1300 && scifact.ws1300.qmd ? +(scifact.ws1300.qmd.search_wall_p50_s / scifact.ws1300.clawmem_search_watched_wall_p50_s).toFixed(1) : null,
  noop_resync_speedup: +(peer.noop_update_s / ours.noop_resync_s).toFixed(1),
  index_size_ratio: +(peer.index_bytes / ours.index_bytes).toFixed(2)};
out.qmd_backend = JSON.parse(process.env.QMD_BACKEND_JSON || "null");
out.sessions_store_scale = JSON.parse(process.env.STORE_SCALE_JSON || "null");
out.gateway_soak = JSON.parse(process.env.SOAK_JSON || "null");
out.transcript_turn_read = JSON.parse(process.env.TRANSCRIPT_JSON || "null");
console.log(JSON.stringify(out, null, 2));
' "$ours" "$peer" "$cli_sync_p50" "$rss_kb" "$corpus" "$(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)" "$cli_nosync_p50" "$mcp" "$vectors" "$hybrid" "$local_embed" "$cli_watched_p50" "$sci" "$scale" "$runner" "$sessions" "$batch" "$gateway" "$http"
