#!/usr/bin/env bash
# bench/local.sh — `make bench`, local embeddings: a bge-small-shaped BERT model (random weights,
# the real BERT vocabulary, F16; tests/tools/make_bert_gguf.c) over the first 300 SciFact
# abstracts (cut to 1,200 characters, under the model's 512 tokens: llama-embedding refuses longer
# lines where clawmem would cut them), embedded by clawmem's local provider (build/bench_local) and by llama.cpp's own
# llama-embedding built from the same source (bench/peer_llama.sh), one text per call and batched,
# on THREADS threads; and the static model's chunks per second on the same texts when it is
# installed. Prints one JSON object with our overhead against llama-embedding (1 - ours/theirs,
# both on the libllama llama-embedding was built with).
# Usage: bench/local.sh WORKDIR [THREADS]
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
say() { printf 'bench/local: %s\n' "$*" >&2; }
work=$1 threads=${2:-$(nproc)}
mkdir -p "$work"
model=$work/bge-small-shape.gguf texts=$work/local-texts.txt
[[ -f $model ]] || build/make-bert-gguf build/llama/models/ggml-vocab-bert-bge.gguf "$model" bge-small
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").slice(0, 300);
console.log(lines.map((l) => { const d = JSON.parse(l); return (d.title + " " + d.text).replace(/\s+/g, " ").slice(0, 1200); }).join("\n"));
' ../shared/data/scifact/corpus.jsonl >"$texts"
static=${CLAWMEM_STATIC_MODEL:-${QUANTUMCLAW_STATE_DIR:-$HOME/.quantumclaw}/models/clawmem-static-100d.bin}
[[ -f $static ]] || { say "no static model at $static (scripts/install-static-model.sh); skipping it"; static=; }

say "clawmem local provider: 300 texts, $threads threads"
ours=$(build/bench_local "$model" "$texts" "$threads" $static) || ours=null
peer=null same=null
if [[ ${CLAWMEM_BENCH_PEER:-1} != 0 && $ours != null ]]; then
  # The overhead is measured on one library: clawmem again, on the libllama that
  # llama-embedding was built with (the npm build's code generation differs).
  say "llama-embedding on the same model and texts, and clawmem on its libllama"
  lib=$(bench/peer_llama.sh --lib) || lib=
  if [[ -n $lib ]]; then
    same=$(CLAWMEM_LLAMA_LIB=$lib build/bench_local "$model" "$texts" "$threads") || same=null
    args=$(node -e 'const o = JSON.parse(process.argv[1]); console.log(o.tokens, o.single_texts, o.single_tokens)' "$ours")
    peer=$(bench/peer_llama.sh "$model" "$texts" "$threads" $args) || peer=null
  fi
fi
node -e '
const ours = JSON.parse(process.argv[1]), peer = JSON.parse(process.argv[2]), same = JSON.parse(process.argv[4]);
const out = {threads: +process.argv[3], clawmem: ours, clawmem_on_peer_libllama: same, llama_embedding: peer};
if (same && peer) out.overhead = {
  single: +(1 - same.single_tokens_per_s / peer.single_tokens_per_s).toFixed(3),
  batched: +(1 - same.batched_tokens_per_s / peer.batched_tokens_per_s).toFixed(3)};
console.log(JSON.stringify(out));
' "$ours" "$peer" "$threads" "$same"
