#!/bin/sh
# Installs llama.cpp for the "local" embedding provider, when the system has
# none (pkg-config llama): the prebuilt Linux x64 libraries of the npm package
# @node-llama-cpp/linux-x64 and the matching headers (plus the BERT vocabulary
# the tests build their tiny model from) out of the llama.cpp git bundle that
# the npm package node-llama-cpp ships. Both pinned to one version, checked
# against their registry integrity.
#
# Usage: scripts/install-llama.sh [DIR]   (default build/llama; a no-op once done)
# Then `make` builds clawmem with local support (see the Makefile's LLAMA_DIR).
set -eu

VERSION=3.21.1
LIB_SHA=sha512-Totj6RTDMGo3FoK2yNUaz/oGmZD0olAqTrRluFUWmu0kW2i9TOzHSW0OWCAiGkzRCVX0WsU2CyUQo/W2NYtdPA==
SRC_SHA=sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==

dir=${1:-build/llama}
stamp="$dir/.installed-$VERSION"
[ -f "$stamp" ] && exit 0
if pkg-config --exists llama 2>/dev/null && [ -z "${CLAWMEM_FORCE_NPM_LLAMA:-}" ]; then
    exit 0 # the system's llama.cpp is used instead (Makefile)
fi
case "$(uname -sm)" in
"Linux x86_64") ;;
*) echo "install-llama: prebuilt llama.cpp is only fetched for Linux x86_64; install llama.cpp with pkg-config metadata instead" >&2; exit 1 ;;
esac
for tool in npm git tar; do
    command -v $tool >/dev/null || { echo "install-llama: needs $tool" >&2; exit 1; }
done

echo "install-llama: fetching llama.cpp $VERSION (npm @node-llama-cpp/linux-x64, node-llama-cpp) into $dir" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# npm pack verifies each tarball against the registry's integrity; compare
# that to the pinned one too, so a republished version cannot slip in.
here=$(cd "$(dirname "$0")" && pwd)
if ! (cd "$tmp" && "$here/npm-run.sh" install-llama pack --json --loglevel=error \
        "@node-llama-cpp/linux-x64@$VERSION" "node-llama-cpp@$VERSION" >pack.json); then
    echo "install-llama: npm pack of llama.cpp $VERSION failed" >&2
    exit 1
fi
for want in "$LIB_SHA" "$SRC_SHA"; do
    grep -q "\"integrity\": \"$want\"" "$tmp/pack.json" || {
        echo "install-llama: integrity mismatch (want $want)" >&2
        exit 1
    }
done
mkdir -p "$tmp/lib" "$tmp/src"
tar -xzf "$tmp/node-llama-cpp-linux-x64-$VERSION.tgz" -C "$tmp/lib" \
    --wildcards 'package/bins/linux-x64/lib*.so'
tar -xzf "$tmp/node-llama-cpp-$VERSION.tgz" -C "$tmp/src" package/llama/gitRelease.bundle

# Headers and the vocabulary straight out of the bundle's commit, no checkout.
git init -q --bare "$tmp/git"
git -C "$tmp/git" fetch -q "$tmp/src/package/llama/gitRelease.bundle" HEAD
rm -rf "$dir.new"
mkdir -p "$dir.new/lib" "$dir.new/include" "$dir.new/models"
git -C "$tmp/git" archive FETCH_HEAD include/llama.h ggml/include models/ggml-vocab-bert-bge.gguf |
    tar -x -C "$tmp"
cp "$tmp"/include/llama.h "$tmp"/ggml/include/*.h "$dir.new/include/"
cp "$tmp/models/ggml-vocab-bert-bge.gguf" "$dir.new/models/"
cp "$tmp"/lib/package/bins/linux-x64/lib*.so "$dir.new/lib/"
# The benchmark builds llama.cpp's own llama-embedding from the same source.
cp "$tmp/src/package/llama/gitRelease.bundle" "$dir.new/llama.cpp.bundle"
git -C "$tmp/git" rev-parse FETCH_HEAD >"$dir.new/commit"
touch "$dir.new/.installed-$VERSION"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "install-llama: done ($(ls "$dir/lib" | wc -l) libraries)" >&2
