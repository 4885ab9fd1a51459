// mcp_bench.mjs — `make bench`, MCP part: drives `clawmem mcp` with the official
// SDK client on an indexed workspace and prints one JSON object: memory_search
// round trips (p50/p99 over N calls), the server's RSS and open descriptors
// with the watcher on, and the time from a file write to its text being
// searchable (the seeds' 1500 ms debounce included).
// Usage: node bench/mcp_bench.mjs CLAWMEM WORKSPACE STATE_DIR QUERIES_FILE [CALLS]
import { readFileSync, writeFileSync, unlinkSync, readdirSync } from "node:fs";
import { Client } from "../tests/mcp/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../tests/mcp/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";

const [bin, workspace, stateDir, queriesFile, callsArg] = process.argv.slice(2);
const calls = Number(callsArg || 1000);
const queries = readFileSync(queriesFile, "utf8").split("\n").filter(Boolean);
const now = () => Number(process.hrtime.bigint()) / 1e6;
const pct = (v, p) => v.toSorted((a, b) => a - b)[Math.min(v.length - 1, Math.round(p * (v.length - 1)))];
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

const transport = new StdioClientTransport({
  command: bin, args: ["--workspace", workspace, "--state-dir", stateDir, "mcp"], stderr: "ignore",
});
const client = new Client({ name: "clawmem-bench", version: "1.0.0" });
let t0 = now();
await client.connect(transport);
const connectMs = now() - t0;
await client.listTools();
const search = (q) => client.callTool({ name: "memory_search", arguments: { query: q } });

// Let the start-up sync (a no-op on an indexed workspace) finish.
await sleep(2000);
const lat = [];
let withHits = 0;
for (let i = 0; i < calls; i++) {
  t0 = now();
  const r = await search(queries[i % queries.length]);
  lat.push(now() - t0);
  if (r.structuredContent.results.length) withHits++;
}
const pid = transport.pid;
const status = readFileSync(`/proc/${pid}/status`, "utf8");
const rssMb = Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
const hwmMb = Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
const fds = readdirSync(`/proc/${pid}/fd`).length;

// Write → searchable: a new note with a word found nowhere else.
const fresh = [];
for (let i = 0; i < 5; i++) {
  const word = `zqxfresh${Date.now().toString(36)}${i}`;
  const path = `${workspace}/memory/bench-fresh-${i}.md`;
  t0 = now();
  writeFileSync(path, `# fresh ${i}\n\n${word} written by the benchmark\n`);
  for (;;) {
    const r = await search(word);
    if (r.structuredContent.results.length) break;
    if (now() - t0 > 30000) throw new Error("a written note never became searchable");
    await sleep(10);
  }
  fresh.push(now() - t0);
  unlinkSync(path);
  await sleep(200);
}
await client.close();
console.log(JSON.stringify({
  calls, queries_with_hits: withHits, connect_ms: +connectMs.toFixed(1),
  search_rt_ms_p50: +pct(lat, 0.5).toFixed(3), search_rt_ms_p99: +pct(lat, 0.99).toFixed(3),
  server_rss_mb: +rssMb.toFixed(1), server_peak_rss_mb: +hwmMb.toFixed(1), server_open_fds: fds,
  write_to_searchable_ms_p50: +pct(fresh, 0.5).toFixed(0), write_to_searchable_ms_max: +Math.max(...fresh).toFixed(0),
}));
