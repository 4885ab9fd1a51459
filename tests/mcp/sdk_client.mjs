// sdk_client.mjs — drives `clawmem mcp` with the official MCP TypeScript SDK
// client, as an agent runtime would. Usage: node sdk_client.mjs CLAWMEM WORKSPACE STATE_DIR
// Prints one line per check and exits 1 on the first failure. The SDK itself
// checks what it is strict about: the negotiated protocol version, responses
// with nothing beyond jsonrpc/id/result|error, and structuredContent against
// each tool's declared outputSchema.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

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

const transport = new StdioClientTransport({
  command: bin,
  args: ["--workspace", workspace, "--state-dir", stateDir, "mcp", "--allow-write", "--debounce", "50"],
  stderr: "ignore",
});
const client = new Client({ name: "clawmem-sdk-test", version: "1.0.0" });
await client.connect(transport);

check(client.getServerVersion()?.name === "clawmem", "server identifies itself");
const { tools } = await client.listTools();
check(
  JSON.stringify(tools.map((t) => t.name)) === JSON.stringify(["memory_search", "memory_get", "memory_write"]),
  "tools/list names the three tools",
);

let found = null;
for (let i = 0; i < 100 && !found; i++) {
  const r = await client.callTool({ name: "memory_search", arguments: { query: "Biscuit", maxResults: 3 } });
  if (r.structuredContent.results.length) found = r;
  else await new Promise((ok) => setTimeout(ok, 50));
}
check(found && found.structuredContent.results[0].path === "MEMORY.md", "memory_search finds the note");
check(JSON.parse(found.content[0].text).results.length === found.structuredContent.results.length,
  "text content carries the same payload");

const got = await client.callTool({ name: "memory_get", arguments: { path: "MEMORY.md", from: 3, lines: 1 } });
check(got.structuredContent.text === "- The dog is called Biscuit.", "memory_get reads a line range");

const missing = await client.callTool({ name: "memory_get", arguments: { path: "memory/2099-01-01.md" } });
check(missing.structuredContent.text === "" && !missing.isError, "a missing file reads as empty text");

const bad = await client.callTool({ name: "memory_get", arguments: { path: "../secret.md" } });
check(bad.isError === true && /leaves the workspace/.test(bad.content[0].text), "an escaping path is refused");

const wrote = await client.callTool({ name: "memory_write", arguments: { text: "The SDK wrote this: kumquat." } });
check(/^memory\/\d{4}-\d{2}-\d{2}\.md$/.test(wrote.structuredContent.path), "memory_write appends to today's note");

let fresh = false;
for (let i = 0; i < 100 && !fresh; i++) {
  const r = await client.callTool({ name: "memory_search", arguments: { query: "kumquat" } });
  fresh = r.structuredContent.results.length > 0;
  if (!fresh) await new Promise((ok) => setTimeout(ok, 50));
}
check(fresh, "the written note becomes searchable");

const noQuery = await client.callTool({ name: "memory_search", arguments: {} });
check(noQuery.isError === true && /query is required/.test(noQuery.content[0].text),
  "a missing query is a tool error the model can read");

let code = 0;
try {
  await client.callTool({ name: "memory_forget", arguments: {} });
} catch (e) {
  code = e.code;
}
check(code === -32602, "an unknown tool is an invalid-params error");

await client.ping();
check(true, "ping");
await client.close();
console.log(`${checks} sdk checks passed`);
