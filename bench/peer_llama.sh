#!/usr/bin/env bash
# peer_llama.sh: llama.cpp's own llama-embedding on a model and a file of texts (one per line),
# batched and one text per call, for the local-embedding overhead figure.
# Usage: bench/peer_llama.sh MODEL.gguf TEXTS.txt THREADS TOKENS SINGLE SINGLE_TOKENS
# On first use it builds llama-embedding (CPU, native, static) from the llama.cpp bundle that
# scripts/install-llama.sh keeps in build/llama, into $CLAWMEM_PEER_DIR (default build/peers).
# Prints one JSON object: tokens per second, batched and one by one.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
say() { printf 'peer_llama: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $# -eq 6 ]] || die "usage: $0 MODEL.gguf TEXTS.txt THREADS TOKENS SINGLE SINGLE_TOKENS"
model=$1 texts=$2 threads=$3 tokens=$4 single_n=$5 single_tokens=$6
bundle=$root/build/llama/llama.cpp.bundle
[[ -r $bundle ]] || die "no $bundle: run scripts/install-llama.sh"
commit=$(cat "$root/build/llama/commit")
peer_root=${CLAWMEM_PEER_DIR:-$root/build/peers}
prefix=$peer_root/llama.cpp-${commit:0:12}
tool=$prefix/build/bin/llama-embedding

if [[ ! -x $tool ]]; then
  command -v cmake >/dev/null || die "building llama-embedding needs cmake"
  say "building llama-embedding from $bundle (once; a few minutes on 2 cores)"
  rm -rf "$prefix"
  mkdir -p "$peer_root"
  git clone -q "$bundle" "$prefix" 2>/dev/null || die "cannot clone $bundle"
  cmake -S "$prefix" -B "$prefix/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF >"$prefix/cmake.log" 2>&1 || die "cmake failed: $prefix/cmake.log"
  cmake --build "$prefix/build" --target llama-embedding -j "$(nproc)" >"$prefix/build.log" 2>&1 ||
    die "build failed: $prefix/build.log"
fi

# llama-embedding prints no timing of its own evaluation, so its time is the process's wall
# time minus that of a run on one word (start-up and model load, measured the same way).
# Batched: every text in one process, packed by llama-embedding into calls of 1024 tokens (the
# same limit as clawmem's). One by one: the first SINGLE texts, one process each. Token counts
# come from clawmem's tokenisation of the same texts (the same vocabulary): TOKENS for all,
# SINGLE_TOKENS for the first SINGLE.
wall() { # FILE -> seconds
  local t0 t1
  t0=$EPOCHREALTIME
  "$tool" -m "$model" -f "$1" -t "$threads" -tb "$threads" -c 1024 -b 1024 -ub 1024 \
    --embd-output-format array >/dev/null 2>&1 || { say "llama-embedding failed on $1"; echo nan; return; }
  t1=$EPOCHREALTIME
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "a" >"$tmp/one.txt"
base=0
for _ in 1 2 3; do base=$(awk -v s="$base" -v t="$(wall "$tmp/one.txt")" 'BEGIN { print s + t / 3 }'); done
all=$(wall "$texts")
single=0
head -n "$single_n" "$texts" >"$tmp/first.txt"
for ((i = 1; i <= single_n; i++)); do
  sed -n "${i}p" "$tmp/first.txt" >"$tmp/t.txt"
  single=$(awk -v s="$single" -v t="$(wall "$tmp/t.txt")" -v b="$base" 'BEGIN { print s + t - b }')
done
awk -v tok="$tokens" -v stok="$single_tokens" -v all="$all" -v base="$base" -v single="$single" \
  -v commit="${commit:0:12}" 'BEGIN {
  printf "{\"tool\":\"llama-embedding\",\"commit\":\"%s\",\"startup_s\":%.3f,", commit, base
  printf "\"batched_tokens_per_s\":%.1f,\"single_tokens_per_s\":%.1f}\n", tok / (all - base), stok / single }'
