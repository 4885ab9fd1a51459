// sdk_http.mjs — drives `clawmem serve` over Streamable HTTP with the official
// MCP TypeScript SDK clients: the 1.x client (initialize, protocol 2025-11-25,
// a session) and the 2.x client pinned to the stateless 2026-07-28 era.
// Usage: node sdk_http.mjs URL WRITE_TOKEN READ_TOKEN
// The write token's agent has "Biscuit" in MEMORY.md; the read token belongs
// to another agent. Prints one line per check, exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from "@modelcontextprotocol/client";

const [url, writeToken, readToken] = process.argv.slice(2);
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}
const auth = (t) => ({ requestInit: { headers: { Authorization: `Bearer ${t}` } } });

// 1.x, legacy era, with a session
const client = new Client({ name: "clawmem-sdk-http-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), auth(writeToken));
await client.connect(transport);
check(client.getServerVersion()?.name === "clawmem", "1.x: the server identifies itself");
check(typeof transport.sessionId === "string" && transport.sessionId.length === 32, "1.x: a session id");
const { tools } = await client.listTools();
check(JSON.stringify(tools.map((t) => t.name)) === JSON.stringify(["memory_search", "memory_get", "memory_write"]),
  "1.x: a write token lists the three tools");
let found = null;
for (let i = 0; i < 100 && !found; i++) {
  const r = await client.callTool({ name: "memory_search", arguments: { query: "Biscuit", maxResults: 3 } });
  if (r.structuredContent.results.length) found = r;
  else await new Promise((ok) => setTimeout(ok, 50));
}
check(found && found.structuredContent.results[0].path === "MEMORY.md", "1.x: memory_search finds the note");
const got = await client.callTool({ name: "memory_get", arguments: { path: "MEMORY.md" } });
check(got.structuredContent.text.includes("Biscuit"), "1.x: memory_get reads the file");
const w = await client.callTool({ name: "memory_write", arguments: { text: "Written over HTTP." } });
check(!w.isError && w.structuredContent.path.startsWith("memory/"), "1.x: memory_write appends to today's note");
await transport.terminateSession();
check(transport.sessionId === undefined, "1.x: DELETE ends the session");
await client.close();

// 1.x with the read-only token of another agent
const ro = new Client({ name: "clawmem-sdk-http-test", version: "1.0.0" });
await ro.connect(new StreamableHTTPClientTransport(new URL(url), auth(readToken)));
const roTools = await ro.listTools();
check(JSON.stringify(roTools.tools.map((t) => t.name)) === JSON.stringify(["memory_search", "memory_get"]),
  "1.x: a read-only token lists no memory_write");
const other = await ro.callTool({ name: "memory_search", arguments: { query: "Biscuit" } });
check(other.structuredContent.results.length === 0, "1.x: another agent's token never sees this agent's note");
await ro.close();

// 1.x without a token
const anon = new Client({ name: "clawmem-sdk-http-test", version: "1.0.0" });
let refused = false;
try {
  await anon.connect(new StreamableHTTPClientTransport(new URL(url)));
} catch (e) {
  refused = /401|Unauthorized/i.test(String(e?.message ?? e)) || e?.code === 401;
}
check(refused, "1.x: no token is refused with 401");

// 2.x, pinned to the stateless 2026-07-28 era
const c2 = new Client2({ name: "clawmem-sdk-http-modern", version: "1.0.0" },
  { versionNegotiation: { mode: { pin: "2026-07-28" }, probe: { timeoutMs: 10000 } } });
await c2.connect(new Transport2(new URL(url), auth(writeToken)));
check(c2.getProtocolEra() === "modern" && c2.getNegotiatedProtocolVersion() === "2026-07-28",
  "2.x: the stateless 2026-07-28 era over HTTP");
check(c2.getDiscoverResult()?.supportedVersions.includes("2025-11-25"), "2.x: server/discover lists both eras");
const t2 = await c2.listTools();
check(t2.tools.length === 3, "2.x: tools/list");
const s2 = await c2.callTool({ name: "memory_search", arguments: { query: "Biscuit", maxResults: 3 } });
check(s2.structuredContent.results[0]?.path === "MEMORY.md", "2.x: memory_search finds the note");
await c2.close();
console.log("all checks passed");
