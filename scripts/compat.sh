#!/bin/sh
# The differential run of `make compat`: the reference gateway
# (openclaw@2026.3.22, which scripts/install-reference.sh installs into
# build/peers) and build/clawmem's gateway, each against its own loopback
# Telegram/model stand-ins on the scenarios of tests/compat/scenarios.mjs,
# then docs/COMPAT.md from both (tests/compat/report.mjs). Each run is
# bounded (timeout) and stops every process it started. COMPAT_RECORD=1
# also rewrites tests/compat/fixtures/reference-dm.json, the fixture
# `make test` compares clawmem's DM turn with (tests/test_compat.c).
# Usage: scripts/compat.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
node=$root/build/peers/node/bin/node
cd "$root"
record=
[ "${COMPAT_RECORD:-}" = 1 ] && record=--record
mkdir -p build/compat
timeout -k 10 900 "$node" tests/compat/run.mjs --gateway ref $record
timeout -k 10 600 "$node" tests/compat/run.mjs --gateway clawmem
"$node" tests/compat/report.mjs build/compat/ref.json build/compat/clawmem.json docs/COMPAT.md
