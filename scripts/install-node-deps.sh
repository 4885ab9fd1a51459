#!/bin/sh
# Installs the test suite's Node.js packages (the official MCP SDK clients 1.x
# and 2.x, the MCP Inspector, whose CLI mode the tests run, and the MCP
# conformance suite; pinned in tests/mcp/package-lock.json) when they are
# missing, with npm running on the pinned Node.js of scripts/install-node.sh
# (installed first; the packages need Node.js 22 or newer). npm itself comes
# from Debian when absent. Run by `make test`; a no-op once installed, and
# the tests then run offline.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-node.sh"
PATH=$root/build/peers/node/bin:$PATH
export PATH
cd "$root/tests/mcp"
[ -f node_modules/@modelcontextprotocol/sdk/package.json ] &&
    [ -f node_modules/@modelcontextprotocol/client/package.json ] &&
    [ -x node_modules/.bin/mcp-inspector ] &&
    [ -x node_modules/.bin/conformance ] &&
    [ node_modules/.package-lock.json -nt package-lock.json ] && exit 0
command -v npm >/dev/null 2>&1 || "$root/scripts/install-deps.sh" --npm >&2
echo "install-node-deps: npm ci in tests/mcp (Node.js $(node --version))" >&2
"$root/scripts/npm-run.sh" install-node-deps ci --no-audit --no-fund --loglevel=error >&2
