#!/bin/sh
# Installs the pinned QMD (npm @tobilu/qmd on Bun, both from npm) into
# DIR (default build/peers/qmd-<qmd>-bun-<bun>) when it is missing, and writes
# DIR/bin/qmd, a launcher that runs QMD's CLI with that Bun. Used by the
# tests of the QMD backend (make test) and the benchmarks (bench/qmd_env.sh).
# A no-op once installed (the tests then run offline); bounded in time.
# Prints the launcher's path on stdout.
#   --ignore-scripts: the install hooks of better-sqlite3, node-llama-cpp and
#   the tree-sitter grammars would fetch prebuilt binaries or node headers;
#   under Bun QMD uses bun:sqlite and `qmd search` loads no model. Bun's own
#   postinstall only links its binary out of @oven/bun-<platform>: run by hand.
set -eu
QMD_VERSION=2.8.3 # npm @tobilu/qmd
BUN_VERSION=1.4.5 # npm bun
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${CLAWMEM_PEER_DIR:-$root/build/peers}/qmd-$QMD_VERSION-bun-$BUN_VERSION}
bun=$dir/node_modules/.bin/bun
# QMD runs on Bun, and its install needs no particular Node.js (its package
# asks for 22, which npm only warns about); npm and Bun's install script run on
# the pinned Node.js of scripts/install-node.sh when it is there.
[ -x "$root/build/peers/node/bin/node" ] && PATH=$root/build/peers/node/bin:$PATH
js=$dir/node_modules/@tobilu/qmd/dist/cli/qmd.js
if [ ! -x "$bun" ] || [ ! -f "$js" ]; then
    command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 ||
        "$root/scripts/install-deps.sh" --npm >&2
    parent=$(dirname "$dir")
    mkdir -p "$parent"
    tmp=$(mktemp -d "$parent/.qmd-install.XXXXXX")
    echo "install-qmd: @tobilu/qmd@$QMD_VERSION and bun@$BUN_VERSION into $dir" >&2
    if ! timeout 900 "$root/scripts/npm-run.sh" install-qmd install --prefix "$tmp" --ignore-scripts --no-audit --no-fund \
            --loglevel=error "@tobilu/qmd@$QMD_VERSION" "bun@$BUN_VERSION" >&2 ||
        ! (cd "$tmp/node_modules/bun" && timeout 300 node install.js) >&2; then
        rm -rf "$tmp"
        echo "install-qmd: npm install failed" >&2
        exit 1
    fi
    rm -rf "$dir"
    mv "$tmp" "$dir"
fi
# The package's own bin/qmd picks Node when a package-lock.json sits at the
# install root (it does after npm install); QMD needs Bun here.
mkdir -p "$dir/bin"
launcher=$dir/bin/qmd
if [ ! -x "$launcher" ]; then
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$bun" "$js" >"$launcher.tmp"
    chmod 755 "$launcher.tmp"
    mv "$launcher.tmp" "$launcher"
fi
echo "$launcher"
