// register.mjs — lets the MCP conformance suite run on Debian's Node.js 20:
// the suite imports fs.globSync (Node >= 22), which fs.mjs supplies. Loaded
// with `node --import ./compat/register.mjs` only when Node is older than 22.
import { register } from "node:module";
register("./hooks.mjs", import.meta.url);
