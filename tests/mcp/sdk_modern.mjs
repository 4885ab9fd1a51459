// sdk_modern.mjs — drives `clawmem mcp` with the official MCP TypeScript SDK 2.x
// client in the stateless 2026-07-28 era (and once in 'auto' mode, which must
// choose that era too). Usage: node sdk_modern.mjs CLAWMEM WORKSPACE STATE_DIR
// Prints one line per check and exits 1 on the first failure. The client is
// strict about the era's wire shapes: server/discover's result, resultType on
// every result, ttlMs/cacheScope on tools/list, structuredContent against the
// declared outputSchema.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [bin, workspace, stateDir] = process.argv.slice(2);
let checks = 0;
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  checks++;
  console.log(`ok ${what}`);
}

async function connect(mode) {
  const transport = new StdioClientTransport({
    command: bin,
    args: ["--workspace", workspace, "--state-dir", stateDir, "mcp", "--allow-write", "--debounce", "50"],
    stderr: "ignore",
  });
  const client = new Client(
    { name: "clawmem-sdk-modern-test", version: "1.0.0" },
    { versionNegotiation: { mode, probe: { timeoutMs: 10000 } } },
  );
  await client.connect(transport);
  return client;
}

const client = await connect({ pin: "2026-07-28" });
check(client.getProtocolEra() === "modern", "pinned 2026-07-28: the modern era is negotiated");
check(client.getNegotiatedProtocolVersion() === "2026-07-28", "the negotiated version is 2026-07-28");
const discovered = client.getDiscoverResult();
check(discovered && discovered.supportedVersions.includes("2026-07-28") &&
  discovered.supportedVersions.includes("2025-11-25"), "server/discover lists both eras");
check(discovered.capabilities.tools !== undefined, "server/discover announces tools");
check(client.getServerVersion()?.name === "clawmem", "serverInfo arrives in the result _meta");

const { tools } = await client.listTools();
check(JSON.stringify(tools.map((t) => t.name)) === JSON.stringify(["memory_search", "memory_get", "memory_write"]),
  "tools/list names the three tools");
check(tools[2].annotations.destructiveHint === false, "memory_write is not destructive");

let found = null;
for (let i = 0; i < 100 && !found; i++) {
  const r = await client.callTool({ name: "memory_search", arguments: { query: "Biscuit", maxResults: 3 } });
  if (r.structuredContent.results.length) found = r;
  else await new Promise((ok) => setTimeout(ok, 50));
}
check(found && found.structuredContent.results[0].path === "MEMORY.md", "memory_search finds the note");

const got = await client.callTool({ name: "memory_get", arguments: { path: "MEMORY.md", from: 3, lines: 1 } });
check(got.structuredContent.text.startsWith("- The dog is called Biscuit."), "memory_get reads a line range");

const bad = await client.callTool({ name: "memory_search", arguments: { query: "x", maxResults: 0 } });
check(bad.isError === true && /maxResults must be an integer from 1 to 1000/.test(bad.content[0].text),
  "a bad argument is a tool error the model can read");

let code = 0;
try {
  await client.callTool({ name: "memory_forget", arguments: {} });
} catch (e) {
  code = e.code;
}
check(code === -32602, "an unknown tool is an invalid-params error");
await client.close();

const auto = await connect("auto");
check(auto.getProtocolEra() === "modern", "auto mode chooses the modern era");
const empty = await auto.callTool({ name: "memory_search", arguments: { query: "" } });
check(empty.isError === true, "an empty query is a tool error, as the schema's minLength says");
await auto.close();

const legacy = await connect("legacy");
check(legacy.getProtocolEra() !== "modern", "legacy mode still initializes");
check((await legacy.listTools()).tools.length === 3, "tools/list in the legacy era");
await legacy.close();
console.log(`${checks} sdk modern checks passed`);
