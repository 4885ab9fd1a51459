#!/usr/bin/env bash
# bench/serve.sh — `make bench` (and `make bench-serve`), serve part: 100 agents
# (40 tldr pages each) behind one `clawmem serve` with a bearer token per
# agent, loaded from loopback by build/bench_serve at 1, 16 and 64 concurrent
# clients (memory_search round-robin over the agents). Prints one JSON object:
# each level's requests/s, p50 and p99, then the server's RSS (now and peak),
# its open descriptors and open engines' watchers.
#   CLAWMEM_BENCH_SERVE_AGENTS=N    agents (100)
#   CLAWMEM_BENCH_SERVE_SECONDS=S   seconds per level (5)
#   CLAWMEM_BENCH_SERVE_WATCH=0     no watchers (each search syncs first)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build/bench-serve
agents=${CLAWMEM_BENCH_SERVE_AGENTS:-100}
secs=${CLAWMEM_BENCH_SERVE_SECONDS:-5}
tarball=${CLAWMEM_BENCH_TARBALL:-$root/../shared/data/corpora/tldr.tar.gz}
say() { printf 'bench-serve: %s\n' "$*" >&2; }

rm -rf "$work"
mkdir -p "$work"
src=$root/build/bench/ws/memory
if [[ ! -d $src ]]; then
  [[ -r $tarball ]] || { say "corpus not found: $tarball"; exit 1; }
  say "unpacking $tarball"
  mkdir -p "$work/corpus"
  tar -xzf "$tarball" -C "$work/corpus"
  src=$work/corpus
fi
find "$src" -name '*.md' | sort | awk -v n=$((agents * 40)) 'NR <= n' > "$work/files.txt"

say "$agents agents, 40 pages each"
{
  printf '{agents: {list: [\n'
  for ((i = 0; i < agents; i++)); do printf '  {id: "a%d", workspace: "%s/ws/a%d"},\n' "$i" "$work" "$i"; done
  printf ']}}\n'
} > "$work/qc.json"
printf '{\n' > "$work/tokens.json"
: > "$work/tokens.txt"
for ((i = 0; i < agents; i++)); do
  mkdir -p "$work/ws/a$i/memory"
  tok=$(printf 'bench-token-%04d-%s' "$i" "$(printf '%s' "$i" | sha256sum | cut -c1-16)")
  printf '  "%s": {agent: "a%d", write: false},\n' "$tok" "$i" >> "$work/tokens.json"
  printf '%s\n' "$tok" >> "$work/tokens.txt"
done
printf '}\n' >> "$work/tokens.json"
n=0
while read -r f; do
  cp "$f" "$work/ws/a$((n % agents))/memory/$n.md"
  n=$((n + 1))
done < "$work/files.txt"
# queries: the first 400 pages' command names, in order: page k is agent
# k % N's, and bench_serve sends query k with agent k % N's token, so each
# search is for a page its agent has
awk 'NR <= 400' "$work/files.txt" | while read -r f; do
  q=$(sed -n '0,/^# /s/^# //p' "$f" | tr -d '"\\')
  printf '%s\n' "${q:-none}"
done > "$work/queries.txt"

watch=()
[[ ${CLAWMEM_BENCH_SERVE_WATCH:-1} == 0 ]] && watch=(--no-watch)
build/clawmem --config "$work/qc.json" --state-dir "$work/state" serve --listen 127.0.0.1:0 \
  --tokens "$work/tokens.json" --max-engines $((agents + 28)) "${watch[@]}" > "$work/serve.out" 2> "$work/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$work/serve.out" && break; sleep 0.1; done
port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)/mcp|\1|p' "$work/serve.out")
[[ -n $port ]] || { say "serve did not start: $(cat "$work/serve.err")"; exit 1; }

say "warm-up: every agent's engine opened and indexed"
build/bench_serve "$port" "$work/tokens.txt" "$work/queries.txt" 4 3 > /dev/null || true
sleep 1
runs=()
for c in 1 16 64; do
  say "$c client(s), ${secs}s"
  runs+=("$(build/bench_serve "$port" "$work/tokens.txt" "$work/queries.txt" "$c" "$secs")")
done
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
fds=$(ls /proc/$pid/fd | wc -l)
threads=$(awk '/Threads/ {print $2}' /proc/$pid/status)
kill $pid
wait $pid || true
trap - EXIT
printf '{"serve":{"agents":%d,"pages_per_agent":40,"watch":%s,"levels":[%s],"rss_mb":%.1f,"peak_rss_mb":%.1f,"fds":%d,"threads":%d}}\n' \
  "$agents" "$([[ ${#watch[@]} -eq 0 ]] && echo true || echo false)" "$(IFS=,; echo "${runs[*]}")" \
  "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$fds" "$threads"
