// fs.mjs — node:fs plus the one form of globSync the suite uses ("**/NAME").
import fs from "node:fs";
import path from "node:path";
export * from "node:fs";
export default fs;
export function globSync(pattern, { cwd = "." } = {}) {
  const name = pattern.replace(/^\*\*\//, "");
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(cwd, rel), { withFileTypes: true })) {
      const r = rel ? path.join(rel, e.name) : e.name;
      if (e.isDirectory()) walk(r);
      else if (e.name === name) out.push(r);
    }
  };
  walk("");
  return out;
}
