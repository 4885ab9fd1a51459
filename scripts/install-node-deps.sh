#!/bin/sh
# Installs the test suite's Node.js packages (the official MCP SDK clients 1.x
# and 2.x and the MCP Inspector, whose CLI mode the tests run; pinned in
# tests/mcp/package-lock.json) when they are missing; Node.js and npm come from
# Debian when absent. Run by `make test`; a no-op once installed, and the tests
# then run offline.
set -eu
cd "$(dirname "$0")/../tests/mcp"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "install-node-deps: installing nodejs and npm" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq nodejs npm >/dev/null
fi
[ -f node_modules/@modelcontextprotocol/sdk/package.json ] &&
    [ -f node_modules/@modelcontextprotocol/client/package.json ] &&
    [ -x node_modules/.bin/mcp-inspector ] &&
    [ -x node_modules/.bin/conformance ] &&
    [ node_modules/.package-lock.json -nt package-lock.json ] && exit 0
echo "install-node-deps: npm ci in tests/mcp" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
