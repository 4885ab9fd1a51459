#!/usr/bin/env bash
# bench/soak.sh DIR — the gateway soak (issue 27, "Bench and soak"):
# CLAWMEM_SOAK_MESSAGES messages (default 1,000,000) over
# CLAWMEM_SOAK_CONVERSATIONS conversations (default 10,000) POSTed to the
# HTTP channel and answered by real agent turns (sessions.json, transcripts,
# the runner) against a zero-latency loopback model (its usage counts the
# request, 4 bytes a token, and its window is 27,000 tokens, so that every
# conversation compacts about every 28 turns), 8 clients each waiting for
# its reply before its next message. Prints bench_gateway's JSON: the whole
# run's rate and latency, and under "soak" RSS, open descriptors, the
# gateway journal's, sessions.json's and its journal's sizes, the added
# latency p50/p99 of the 5% of messages before each point and the CPU time
# per reply, at every 10% (flat is the goal; each mark is also printed on
# stderr as it is taken). `make soak` runs it with the defaults; make
# bench runs a shorter one.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:?usage: bench/soak.sh DIR}
mkdir -p "$work"
exec nice -n 10 build/bench_gateway "$work" "${CLAWMEM_SOAK_MESSAGES:-1000000}" \
  "${CLAWMEM_SOAK_CONVERSATIONS:-10000}" agent 0 soak
