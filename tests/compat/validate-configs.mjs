// validate-configs.mjs — every example quantumclaw.json in the repository,
// fed to the reference's own `openclaw config validate` (openclaw@2026.3.22):
// examples/**/*.json and *.json5 (clawmem.json overlays left out), and the
// json/json5 blocks of README.md and docs/*.md that are configs. A block that
// is a fragment is placed where it belongs (`memorySearch: {…}` under
// agents.defaults; `memory: {…}` at the top); a block whose first line names
// clawmem.json is an overlay, not checked here.
// Usage: node validate-configs.mjs <openclaw package dir> <repository root>
// Prints one line per config; exits 1 when any is rejected.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, join, relative, resolve } from "node:path";

const [pkg, repo] = process.argv.slice(2).map((p) => p && resolve(p));
if (!pkg || !repo) {
    console.error("usage: node validate-configs.mjs <openclaw package dir> <repository root>");
    process.exit(2);
}
const JSON5 = createRequire(join(pkg, "package.json"))("json5");

// The top-level keys of 2026.3.22's OpenClawSchema.
const TOP = new Set(("$schema meta env wizard diagnostics logging cli update browser ui secrets " +
    "auth acp models nodeHost agents tools bindings broadcast audio media messages commands " +
    "approvals session cron hooks web channels discovery canvasHost talk gateway memory mcp " +
    "skills plugins").split(" "));

function walk(dir, out) {
    for (const name of readdirSync(dir)) {
        const p = join(dir, name);
        if (statSync(p).isDirectory()) walk(p, out);
        else out.push(p);
    }
    return out;
}

// A parsed block as a whole config, or null when it is not one.
function asConfig(obj) {
    if (!obj || typeof obj !== "object" || Array.isArray(obj)) return null;
    const keys = Object.keys(obj);
    if (keys.length && keys.every((k) => TOP.has(k))) return obj;
    if (keys.length === 1 && keys[0] === "memorySearch") return { agents: { defaults: obj } };
    return null;
}

function parseBlock(text) {
    for (const t of [text, `{${text}}`]) {
        try {
            return JSON5.parse(t);
        } catch {
            /* try the next form */
        }
    }
    return undefined;
}

const configs = []; // {name, config}
const skipped = [];
const examples = join(repo, "examples");
for (const p of (statSync(examples, { throwIfNoEntry: false }) ? walk(examples, []) : [])) {
    if (!/\.json5?$/.test(p) || basename(p).startsWith("clawmem.")) continue;
    configs.push({ name: relative(repo, p), config: JSON5.parse(readFileSync(p, "utf8")) });
}
const docs = [join(repo, "README.md")];
const docDir = join(repo, "docs");
if (statSync(docDir, { throwIfNoEntry: false }))
    for (const f of readdirSync(docDir)) if (f.endsWith(".md")) docs.push(join(docDir, f));
for (const doc of docs) {
    const lines = readFileSync(doc, "utf8").split("\n");
    for (let i = 0; i < lines.length; i++) {
        if (!/^\s*```json5?\s*$/.test(lines[i])) continue;
        let j = i + 1;
        while (j < lines.length && !/^\s*```\s*$/.test(lines[j])) j++;
        const body = lines.slice(i + 1, j).join("\n");
        const name = `${relative(repo, doc)}:${i + 1}`;
        i = j;
        if (/^\s*\/\/.*clawmem\.json/.test(body.split("\n")[0])) {
            skipped.push(`${name} (a clawmem.json overlay)`);
            continue;
        }
        const config = asConfig(parseBlock(body));
        if (config) configs.push({ name, config });
        else skipped.push(`${name} (not a config)`);
    }
}

const tmp = mkdtempSync(join(tmpdir(), "clawmem-compat-"));
let failed = 0;
try {
    configs.forEach(({ name, config }, n) => {
        const path = join(tmp, `config-${n}.json`);
        writeFileSync(path, JSON.stringify(config, null, 2));
        const env = {
            ...process.env,
            HOME: tmp,
            OPENCLAW_STATE_DIR: join(tmp, "state"),
            OPENCLAW_CONFIG_PATH: path,
            OPENCLAW_NO_RESPAWN: "1",
        };
        try {
            execFileSync(process.execPath, [join(pkg, "openclaw.mjs"), "config", "validate"],
                         { env, stdio: "pipe", timeout: 60000 });
            console.log(`ok   ${name}`);
        } catch (e) {
            failed++;
            const out = `${e.stdout ?? ""}${e.stderr ?? ""}`.trim().replace(/\n/g, "\n       ");
            console.log(`FAIL ${name}\n       ${out}`);
        }
    });
} finally {
    rmSync(tmp, { recursive: true, force: true });
}
for (const s of skipped) console.log(`skip ${s}`);
console.log(`${configs.length - failed} valid, ${failed} rejected, ${skipped.length} skipped`);
process.exit(failed ? 1 : 0);
