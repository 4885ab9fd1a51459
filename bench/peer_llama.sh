#!/usr/bin/env bash
# peer_llama.sh: llama.cpp's own llama-embedding on a model and a file of texts (one per line),
# one text per call (-np 1) and batched (-np 64), for the local-embedding overhead figure.
# Usage: bench/peer_llama.sh MODEL.gguf TEXTS.txt THREADS
# On first use it builds llama-embedding (CPU, native, static) from the llama.cpp bundle that
# scripts/install-llama.sh keeps in build/llama, into $CLAWMEM_PEER_DIR (default build/peers).
# Prints one JSON object: tokens per second from llama.cpp's own timing of its prompt evaluation.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
say() { printf 'peer_llama: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $# -eq 3 ]] || die "usage: $0 MODEL.gguf TEXTS.txt THREADS"
model=$1 texts=$2 threads=$3
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

# tokens/s of one run: llama.cpp prints "prompt eval time = X ms / N tokens (..., Y tokens per second)"
run() {
  local np=$1 log
  log=$("$tool" -m "$model" -f "$texts" -t "$threads" -tb "$threads" -c 1024 -b 1024 -ub 1024 \
    -np "$np" --kv-unified --embd-output-format array 2>&1 >/dev/null) || { say "llama-embedding failed"; echo null; return; }
  awk '/prompt eval time/ { for (i = 1; i <= NF; i++) if ($i == "tokens" && $(i+1) == "per") print $(i-1) }' <<<"$log" |
    tail -n 1 | tr -d '(,'
}
single=$(run 1)
batched=$(run 64)
printf '{"tool":"llama-embedding","commit":"%s","single_tokens_per_s":%s,"batched_tokens_per_s":%s}\n' \
  "${commit:0:12}" "${single:-null}" "${batched:-null}"
