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
# Replicas over one PostgreSQL (issue 31): CLAWMEM_BENCH_SERVE_REPLICAS=N (N > 1)
# starts N `clawmem serve` processes with --allow-write over a private
# cluster (scripts/pg-test-cluster.sh), the same config, agents and tokens,
# and loads them together (request i to replica i % N) with a mix of
# memory_search and memory_write; it prints requests/s, p50/p99 (all, search,
# write), each replica's RSS and the most PostgreSQL connections seen.
#   CLAWMEM_BENCH_SERVE_AGENTS=N    agents (1000 in this mode)
#   CLAWMEM_BENCH_SERVE_PAGES=P     pages per agent (40; 4 in this mode)
#   CLAWMEM_BENCH_SERVE_LEVELS="C…" client levels ("1 16 64"; "64" in this mode)
#   CLAWMEM_BENCH_SERVE_WRITES=PCT  share of writes in this mode (10)
#   CLAWMEM_BENCH_SERVE_MAX_ENGINES=M  open engines per replica (agents + 28;
#                                   in this mode 100, each a PostgreSQL connection)
#   (in this mode CLAWMEM_BENCH_SERVE_WATCH defaults to 0: a watcher's lease
#   is one more connection per open engine)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build/bench-serve
replicas=${CLAWMEM_BENCH_SERVE_REPLICAS:-1}
if ((replicas > 1)) && [[ -z ${CLAWMEM_TEST_PG_DSN:-} ]]; then # again, beside a private cluster
  export CLAWMEM_PG_MAX_CONNECTIONS=${CLAWMEM_PG_MAX_CONNECTIONS:-400}
  exec scripts/pg-test-cluster.sh "$0" "$@"
fi
if ((replicas > 1)); then
  agents=${CLAWMEM_BENCH_SERVE_AGENTS:-1000}
  pages=${CLAWMEM_BENCH_SERVE_PAGES:-4}
  levels=${CLAWMEM_BENCH_SERVE_LEVELS:-64}
  writes=${CLAWMEM_BENCH_SERVE_WRITES:-10}
  max_engines=${CLAWMEM_BENCH_SERVE_MAX_ENGINES:-100}
else
  agents=${CLAWMEM_BENCH_SERVE_AGENTS:-100}
  pages=${CLAWMEM_BENCH_SERVE_PAGES:-40}
  levels=${CLAWMEM_BENCH_SERVE_LEVELS:-1 16 64}
  writes=0
  max_engines=${CLAWMEM_BENCH_SERVE_MAX_ENGINES:-$((agents + 28))}
fi
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
find "$src" -name '*.md' | sort | awk -v n=$((agents * pages)) 'NR <= n' > "$work/files.txt"

say "$agents agents, $pages pages each, $replicas replica(s)"
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
  printf '  "%s": {agent: "a%d", write: %s},\n' "$tok" "$i" "$( ((writes > 0)) && echo true || echo false)" >> "$work/tokens.json"
  printf '%s\n' "$tok" >> "$work/tokens.txt"
done
printf '}\n' >> "$work/tokens.json"
n=0
while read -r f; do
  cp "$f" "$work/ws/a$((n % agents))/memory/$n.md"
  n=$((n + 1))
done < "$work/files.txt"
# queries: the first 400 pages' command names (at most one a page), in
# order: page k is agent k % N's, and bench_serve sends query k with agent
# k % N's token, so each search is for a page its agent has
awk -v n=$(( agents < 400 || replicas > 1 ? agents : 400 )) 'NR <= n' "$work/files.txt" | while read -r f; do
  q=$(sed -n '0,/^# /s/^# //p' "$f" | tr -d '"\\')
  printf '%s\n' "${q:-none}"
done > "$work/queries.txt"

watch=()
# replicas: no watchers unless asked (each would hold a connection of its own)
[[ ${CLAWMEM_BENCH_SERVE_WATCH:-$((replicas > 1 ? 0 : 1))} == 0 ]] && watch=(--no-watch)
if ((replicas > 1)); then
  # every replica: the same config over one PostgreSQL, its own state dir
  echo "{agents:{defaults:{memorySearch:{store:{driver:'postgres',dsn:'$CLAWMEM_TEST_PG_DSN'}}}}}" > "$work/clawmem.json"
  pids=()
  ports=()
  trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
  for ((r = 0; r < replicas; r++)); do
    mkdir -p "$work/state$r"
    cp "$work/clawmem.json" "$work/state$r/clawmem.json"
    build/clawmem --config "$work/qc.json" --state-dir "$work/state$r" serve --listen 127.0.0.1:0 \
      --tokens "$work/tokens.json" --allow-write --max-engines "$max_engines" "${watch[@]}" \
      > "$work/serve$r.out" 2> "$work/serve$r.err" &
    pids+=($!)
  done
  for ((r = 0; r < replicas; r++)); do
    for _ in $(seq 900); do grep -q '^listening on' "$work/serve$r.out" && break; sleep 0.1; done
    p=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)/mcp|\1|p' "$work/serve$r.out")
    [[ -n $p ]] || { say "replica $r did not start: $(cat "$work/serve$r.err")"; exit 1; }
    ports+=("$p")
  done
  portlist=$(IFS=,; echo "${ports[*]}")
  say "warm-up: every agent indexed once (its first search), through every replica"
  t0=$(date +%s.%N)
  build/bench_serve "$portlist" "$work/tokens.txt" "$work/queries.txt" 4 $(( agents / 20 + 10 )) > "$work/warm.json" || true
  warm_s=$(echo "$(date +%s.%N) - $t0" | bc -l)
  conns() { psql "$CLAWMEM_TEST_PG_DSN" -Atc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" 2>/dev/null || echo 0; }
  runs=()
  maxconn=0
  for c in $levels; do
    say "$c client(s), ${secs}s, ${writes}% writes"
    build/bench_serve "$portlist" "$work/tokens.txt" "$work/queries.txt" "$c" "$secs" "$writes" > "$work/run$c.json" &
    lp=$!
    while kill -0 $lp 2>/dev/null; do
      n=$(conns); ((n > maxconn)) && maxconn=$n
      sleep 0.5
    done
    wait $lp || say "$c clients: more than 1% errors"
    runs+=("$(cat "$work/run$c.json")")
  done
  rss=()
  for pid in "${pids[@]}"; do
    rss+=("$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' /proc/$pid/status)")
  done
  kill "${pids[@]}"
  wait "${pids[@]}" 2>/dev/null || true
  trap - EXIT
  printf '{"serve_replicas":{"replicas":%d,"agents":%d,"pages_per_agent":%d,"watch":%s,"max_engines":%d,"write_pct":%d,"warmup_s":%.1f,"levels":[%s],"rss_mb":[%s],"pg_connections_max":%d}}\n' \
    "$replicas" "$agents" "$pages" "$([[ ${#watch[@]} -eq 0 ]] && echo true || echo false)" "$max_engines" "$writes" \
    "$warm_s" "$(IFS=,; echo "${runs[*]}")" "$(IFS=,; echo "${rss[*]}")" "$maxconn"
  exit 0
fi
build/clawmem --config "$work/qc.json" --state-dir "$work/state" serve --listen 127.0.0.1:0 \
  --tokens "$work/tokens.json" --max-engines "$max_engines" "${watch[@]}" > "$work/serve.out" 2> "$work/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$work/serve.out" && break; sleep 0.1; done
port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)/mcp|\1|p' "$work/serve.out")
[[ -n $port ]] || { say "serve did not start: $(cat "$work/serve.err")"; exit 1; }

say "warm-up: every agent's engine opened and indexed"
build/bench_serve "$port" "$work/tokens.txt" "$work/queries.txt" 4 3 > /dev/null || true
sleep 1
runs=()
for c in $levels; do
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
printf '{"serve":{"agents":%d,"pages_per_agent":%d,"watch":%s,"levels":[%s],"rss_mb":%.1f,"peak_rss_mb":%.1f,"fds":%d,"threads":%d}}\n' \
  "$agents" "$pages" "$([[ ${#watch[@]} -eq 0 ]] && echo true || echo false)" "$(IFS=,; echo "${runs[*]}")" \
  "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$fds" "$threads"
