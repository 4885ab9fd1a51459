#!/usr/bin/env bash
# bench/sessions.sh DIR — session memory search at scale: indexes a generated
# set of QuantumClaw transcripts (pi JSONL, the LoCoMo dialogues' turns as
# user and assistant messages) and prints one JSON object:
#   index_mb_per_s     full index of the transcripts (`clawmem index --force`)
#   append50_to_hit_s  50 messages appended to one transcript → a search
#                      (with its sync) that finds the one in the middle
#   CLAWMEM_BENCH_SESSIONS_MB=N   size of the set (default 200)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
work=${1:?usage: bench/sessions.sh DIR}
locomo=${CLAWMEM_BENCH_LOCOMO:-$PWD/../shared/data/locomo/locomo10.json}
mb=${CLAWMEM_BENCH_SESSIONS_MB:-200}
rm -rf "$work"
mkdir -p "$work/ws" "$work/state/agents/main/sessions"
printf '# Memory\n\n- the bench keeps nothing here\n' > "$work/ws/MEMORY.md"
cat > "$work/state/quantumclaw.json" <<'EOF'
{agents: {defaults: {memorySearch: {sources: ["memory", "sessions"],
  experimental: {sessionMemory: true}}}}}
EOF

# The transcripts: 2 MB each, every message a LoCoMo turn.
node -e '
const fs = require("fs"), [src, dir, mb] = process.argv.slice(1);
const d = JSON.parse(fs.readFileSync(src, "utf8")), turns = [];
for (const s of d) for (const [k, v] of Object.entries(s.conversation))
  if (Array.isArray(v)) for (const t of v) if (t.text) turns.push(t.text);
let total = 0, n = 0, t0 = Date.parse("2026-01-01T00:00:00Z");
for (let f = 0; total < mb * 1048576; f++) {
  const id = "bench-" + String(f).padStart(5, "0"), lines = [];
  lines.push(JSON.stringify({type: "session", version: 3, id, timestamp: new Date(t0).toISOString(), cwd: "/"}));
  let parent = null, size = 0;
  for (let i = 0; size < 2 * 1048576; i++, n++) {
    const ts = t0 + n * 1000, mid = id + "-" + i;
    const line = JSON.stringify({type: "message", id: mid, parentId: parent, timestamp: new Date(ts).toISOString(),
      message: {role: i % 2 ? "assistant" : "user", content: [{type: "text", text: turns[n % turns.length]}], timestamp: ts}});
    lines.push(line); size += line.length + 1; parent = mid;
  }
  fs.writeFileSync(dir + "/" + id + ".jsonl", lines.join("\n") + "\n");
  total += size;
}
' "$locomo" "$work/state/agents/main/sessions" "$mb"
bytes=$(cat "$work/state/agents/main/sessions"/*.jsonl | wc -c)

cm() { build/clawmem --workspace "$work/ws" --state-dir "$work/state" "$@"; }
t0=$EPOCHREALTIME
cm index --force >/dev/null
t1=$EPOCHREALTIME
chunks=$(cm status --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.chunks ?? j.status?.chunks ?? 0)})')

# 50 messages appended to the last transcript (as QuantumClaw appends them),
# the 25th carrying a word found nowhere else; then one search.
last=$(ls "$work/state/agents/main/sessions"/*.jsonl | tail -n1)
node -e '
const fs = require("fs"), f = process.argv[1], now = Date.now();
let out = "";
for (let i = 0; i < 50; i++)
  out += JSON.stringify({type: "message", id: "tail-" + i, parentId: i ? "tail-" + (i - 1) : null,
    timestamp: new Date(now + i).toISOString(), message: {role: i % 2 ? "assistant" : "user",
    content: [{type: "text", text: i == 25 ? "the quokkazanzibar plan is set for Friday" : "message " + i + " of the tail"}],
    timestamp: now + i}}) + "\n";
fs.appendFileSync(f, out);
' "$last"
t2=$EPOCHREALTIME
hit=$(cm search quokkazanzibar --json)
t3=$EPOCHREALTIME
found=false
[[ $hit == *quokkazanzibar* ]] && found=true
awk -v b="$bytes" -v a="$t0" -v z="$t1" -v c="$chunks" -v s="$t2" -v e="$t3" -v f="$found" 'BEGIN{
  printf "{\"transcript_mb\":%.1f,\"chunks\":%s,\"index_s\":%.2f,\"index_mb_per_s\":%.1f,", b/1048576, c, z-a, b/1048576/(z-a)
  printf "\"append50_to_hit_s\":%.3f,\"found\":%s}\n", e-s, f }'
