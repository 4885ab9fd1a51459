#!/usr/bin/env bash
# peer_llama.sh: llama.cpp's own llama-embedding on a model and a file of texts (one per line),
# batched and one text per call, for the local-embedding overhead figure.
# Usage: bench/peer_llama.sh MODEL.gguf TEXTS.txt THREADS TOKENS SINGLE SINGLE_TOKENS
# On first use it builds llama-embedding and the shared libllama it runs on (CPU, native) from the
# llama.cpp bundle that scripts/install-llama.sh keeps in build/llama, into $CLAWMEM_PEER_DIR
# (default build/peers); bench/local.sh also runs clawmem on that same libllama.
# Usage: bench/peer_llama.sh --lib   prints the path of that libllama (building it first).
# Prints one JSON object: tokens per second, batched and one by one.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
say() { printf 'peer_llama: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $# -eq 6 || ${1:-} == --lib ]] || die "usage: $0 MODEL.gguf TEXTS.txt THREADS TOKENS SINGLE SINGLE_TOKENS"
bundle=$root/build/llama/llama.cpp.bundle
[[ -r $bundle ]] || die "no $bundle: run scripts/install-llama.sh"
commit=$(cat "$root/build/llama/commit")
peer_root=${CLAWMEM_PEER_DIR:-$root/build/peers}
prefix=$peer_root/llama.cpp-${commit:0:12}-shared
tool=$prefix/build/bin/llama-embedding

if [[ ! -x $tool ]]; then
  command -v cmake >/dev/null || die "building llama-embedding needs cmake"
  say "building llama-embedding from $bundle (once; a few minutes on 2 cores)"
  rm -rf "$prefix"
  mkdir -p "$peer_root"
  git clone -q "$bundle" "$prefix" 2>/dev/null || die "cannot clone $bundle"
  cmake -S "$prefix" -B "$prefix/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF >"$prefix/cmake.log" 2>&1 || die "cmake failed: $prefix/cmake.log"
  cmake --build "$prefix/build" --target llama-embedding -j "$(nproc)" >"$prefix/build.log" 2>&1 ||
    die "build failed: $prefix/build.log"
fi
if [[ $1 == --lib ]]; then
  echo "$prefix/build/bin/libllama.so"
  exit 0
fi
model=$1 texts=$2 threads=$3 tokens=$4 single_n=$5 single_tokens=$6

# llama-embedding's own timing (--perf): its "total time" runs from the context's creation (after
# the model load) to the end, so it holds the embedding plus llama.cpp's one-token warm-up and the
# writing out of the vectors (a few ms). Batched: every text in one run, packed by llama-embedding
# into calls of 512 tokens (clawmem's limit for this 512-token model). One by one: the first
# SINGLE texts, one run each. Token counts come from clawmem's tokenisation of the same texts
# (the same vocabulary): TOKENS for all, SINGLE_TOKENS for the first SINGLE.
embed_ms() { # FILE -> milliseconds spent embedding
  "$tool" -m "$model" -f "$1" -t "$threads" -tb "$threads" -c 512 -b 512 -ub 512 \
    --embd-output-format array --perf -lv 4 2>&1 |
    awk '/llama_perf_context_print: +total time/ { for (i = 1; i <= NF; i++) if ($i == "=") t = $(i+1) }
         END { if (t == "") print "nan"; else printf "%.1f", t }'
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
all=$(embed_ms "$texts")
single=0
head -n "$single_n" "$texts" >"$tmp/first.txt"
for ((i = 1; i <= single_n; i++)); do
  sed -n "${i}p" "$tmp/first.txt" >"$tmp/t.txt"
  single=$(awk -v s="$single" -v t="$(embed_ms "$tmp/t.txt")" 'BEGIN { print s + t }')
done
awk -v tok="$tokens" -v stok="$single_tokens" -v all="$all" -v single="$single" \
  -v commit="${commit:0:12}" 'BEGIN {
  printf "{\"tool\":\"llama-embedding\",\"commit\":\"%s\",", commit
  b = all + 0 > 0 ? sprintf("%.1f", tok / (all / 1e3)) : "null"
  o = single + 0 > 0 && single !~ /nan/ ? sprintf("%.1f", stok / (single / 1e3)) : "null"
  printf "\"batched_tokens_per_s\":%s,\"single_tokens_per_s\":%s}\n", b, o }'
