// run.mjs — the differential harness of `make compat`: the reference gateway
// (openclaw@2026.3.22 under Node 22+) and `clawmem gateway`, each started
// against its own instance of the loopback stand-ins (standins.mjs: Telegram
// Bot API and an OpenAI-compatible model) with the same config, fed the same
// table of scenarios (scenarios.mjs). What each sent is observed from the
// stand-ins' request logs and the state files, reduced to facts, and written
// to build/compat/<gateway>.json; report.mjs turns both into docs/COMPAT.md.
//
// Every process started here runs in its own process group and is killed
// (SIGTERM, then SIGKILL) on exit, on a signal and on a timeout; everything
// listens on 127.0.0.1 only.
// Usage: node run.mjs --gateway ref|clawmem [--record]
//   --record  also write tests/compat/fixtures/reference-dm.json (ref only)
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, statSync,
    writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SCENARIOS } from "./scenarios.mjs";
import { startProxy } from "./wsproxy.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const REF = join(repo, "build/peers/openclaw-2026.3.22/node_modules/openclaw/openclaw.mjs");
const NODE = join(repo, "build/peers/node/bin/node");
const CLAWMEM = join(repo, "build/clawmem");
const TOKEN = "123456:compat-token";
const GW_TOKEN = "compat-gateway-token-0001";

const argv = process.argv.slice(2);
const which = argv[argv.indexOf("--gateway") + 1];
const record = argv.includes("--record");
const only = argv.includes("--only") ? argv[argv.indexOf("--only") + 1].split(",") : null;
if (which !== "ref" && which !== "clawmem") {
    console.error("usage: node run.mjs --gateway ref|clawmem [--record] [--only a,b]");
    process.exit(2);
}

// ---- processes --------------------------------------------------------------------------

const children = new Set();
function start(cmd, args, opts, logFile) {
    const fd = openSync(logFile, "a");
    const c = spawn(cmd, args, { ...opts, detached: true, stdio: ["ignore", opts.pipe ? "pipe" : fd, fd] });
    children.add(c);
    c.on("exit", () => children.delete(c));
    return c;
}
function killGroup(c, sig) {
    try {
        process.kill(-c.pid, sig);
    } catch {
        /* already gone */
    }
}
async function stop(c, graceMs = 10000) {
    if (c.exitCode !== null || c.signalCode !== null) return;
    const done = new Promise((r) => c.once("exit", r));
    killGroup(c, "SIGTERM");
    const t = setTimeout(() => killGroup(c, "SIGKILL"), graceMs);
    await done;
    clearTimeout(t);
}
function killAll() {
    for (const c of children) killGroup(c, "SIGKILL");
}
process.on("exit", killAll);
for (const s of ["SIGINT", "SIGTERM"])
    process.on(s, () => {
        killAll();
        process.exit(130);
    });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
    return new Promise((res, rej) => {
        const s = createServer();
        s.listen(0, "127.0.0.1", () => {
            const p = s.address().port;
            s.close(() => res(p));
        });
        s.on("error", rej);
    });
}

// ---- the stand-ins' control --------------------------------------------------------------

class Standins {
    constructor(port) {
        this.base = `http://127.0.0.1:${port}`;
    }
    async ctl(path, body) {
        const r = await fetch(this.base + path, body === undefined ? {} : {
            method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
        return r.json();
    }
    log(since = 0) {
        return this.ctl(`/_ctl/log?since=${since}`);
    }
}

// Records other than the Telegram long polls.
const busy = (r) => !(r.svc === "tg" && /\/(getUpdates|getMe)$/.test(r.path));

// The world a scenario acts in: updates in, answers queued, requests observed.
class World {
    constructor(si, dir, state, ws) {
        Object.assign(this, { si, dir, state, ws });
        this.updateId = 1000;
        this.messageId = 1;
        this.mark = 0;
    }
    async begin() {
        this.mark = (await this.si.log()).length;
    }
    async since() {
        return (await this.si.log(this.mark)).filter(busy);
    }
    message(from, chat, text, extra = {}) {
        const isGroup = chat < 0;
        return {
            message_id: this.messageId++, date: Math.floor(Date.now() / 1000),
            from: { id: from, is_bot: false, first_name: from === 111 ? "Alice" : `User${from}`,
                username: from === 111 ? "alice" : `user${from}`, language_code: "en" },
            chat: isGroup ? { id: chat, type: "group", title: "Compat Group" }
                : { id: chat, type: "private", first_name: from === 111 ? "Alice" : `User${from}` },
            text, ...extra,
        };
    }
    async send(message, updateId) {
        const u = { update_id: updateId ?? this.updateId++, message };
        await this.si.ctl("/_ctl/update", u);
        return u;
    }
    answer(a) {
        return this.si.ctl("/_ctl/answer", a);
    }
    fail(f) {
        return this.si.ctl("/_ctl/fail", f);
    }
    // Waits until pred(records since begin) holds, then until nothing new
    // arrived for quietMs; at most timeoutMs in all. Returns the records.
    async settle(pred, { timeoutMs = 60000, quietMs = 3000 } = {}) {
        const end = Date.now() + timeoutMs;
        let recs = await this.since();
        while (!pred(recs) && Date.now() < end) {
            await sleep(250);
            recs = await this.since();
        }
        const met = pred(recs);
        let n = recs.length, quietSince = Date.now();
        while (Date.now() < end && Date.now() - quietSince < quietMs) {
            await sleep(250);
            recs = await this.since();
            if (recs.length !== n) {
                n = recs.length;
                quietSince = Date.now();
            }
        }
        return { recs, met };
    }
    // The files under the state directory (relative paths), as a sorted list.
    files(sub = "") {
        const out = [];
        const walk = (d) => {
            if (!existsSync(d)) return;
            for (const n of readdirSync(d)) {
                const p = join(d, n);
                if (statSync(p).isDirectory()) walk(p);
                else out.push(relative(this.state, p));
            }
        };
        walk(join(this.state, sub));
        return out.sort();
    }
    // A client of the reference (its CLI) run to the end: {code, stdout,
    // stderr}; killed after timeoutMs. Its own state directory, so it reads
    // no gateway's config.
    runClient(args, timeoutMs) {
        return new Promise((res) => {
            const c = spawn(NODE, args, { cwd: this.dir, env: this.clientEnv, detached: true,
                stdio: ["ignore", "pipe", "pipe"] });
            children.add(c);
            let stdout = "", stderr = "";
            c.stdout.on("data", (d) => (stdout += d));
            c.stderr.on("data", (d) => (stderr += d));
            const t = setTimeout(() => killGroup(c, "SIGKILL"), timeoutMs);
            c.on("close", (code, sig) => { // "close": after the last output
                clearTimeout(t);
                children.delete(c);
                res({ code: code ?? (sig ? 128 : 1), stdout, stderr });
            });
        });
    }
    // The reference's TUI in a private tmux server (its own socket): keys in,
    // the screen out.
    async startTui() {
        const sock = `clawmem-compat-${process.pid}`;
        const tmux = (...a) => new Promise((res) => {
            const c = spawn("tmux", ["-L", sock, ...a], { stdio: ["ignore", "pipe", "ignore"] });
            let out = "";
            c.stdout.on("data", (d) => (out += d));
            c.on("close", () => res(out)); // after stdout's last bytes ("exit" may come first)
            c.on("error", () => res(""));
        });
        const envs = Object.entries(this.clientEnv).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(" ");
        const cmd = `cd ${JSON.stringify(this.dir)} && exec env -i ${envs} ${JSON.stringify(NODE)} ${JSON.stringify(REF)} tui ` +
            `--url ws://127.0.0.1:${this.proxy.port} --token ${GW_TOKEN} 2>${JSON.stringify(join(this.dir, "tui.err"))}`;
        await tmux("new-session", "-d", "-s", "tui", "-x", "140", "-y", "45", cmd);
        return {
            capture: () => tmux("capture-pane", "-p", "-t", "tui"),
            // "Enter", "C-u": a key by name; anything else typed literally
            keys: (k) => (/^(Enter|C-.)$/.test(k) ? tmux("send-keys", "-t", "tui", k) : tmux("send-keys", "-t", "tui", "-l", k)),
            stop: async () => {
                const screen = await tmux("capture-pane", "-p", "-t", "tui");
                writeFileSync(join(this.dir, "tui.screen"), screen);
                await tmux("kill-server");
            },
        };
    }
    // Keeps a text under the run's directory (for a look after the run).
    note(name, text) {
        writeFileSync(join(this.dir, name), text);
    }
    readJson(rel) {
        try {
            return JSON.parse(readFileSync(join(this.state, rel), "utf8"));
        } catch {
            return null;
        }
    }
}

// ---- the config both read -----------------------------------------------------------------

function config(port, ws, gwPort) {
    const base = `http://127.0.0.1:${port}`;
    return {
        agents: {
            defaults: {
                workspace: ws,
                model: { primary: "openai/compat-model", fallbacks: ["openai/compat-fallback"] },
                userTimezone: "UTC",
                memorySearch: { provider: "openai", model: "text-embedding-3-small",
                    remote: { baseUrl: `${base}/v1`, apiKey: "sk-compat-embed-0001" } },
            },
        },
        models: {
            providers: {
                openai: { baseUrl: `${base}/v1`, apiKey: "sk-compat-0001", api: "openai-completions",
                    models: [{ id: "compat-model", name: "Compat" }, { id: "compat-fallback", name: "Fallback" }] },
            },
        },
        messages: { inbound: { debounceMs: 1500 } },
        channels: {
            telegram: { enabled: true, botToken: TOKEN, apiRoot: base, dmPolicy: "pairing", allowFrom: ["111"],
                groupPolicy: "open", groups: { "*": { requireMention: true } } },
        },
        gateway: { mode: "local", port: gwPort, bind: "loopback", auth: { token: GW_TOKEN } },
    };
}

// The fixture as kept in the repository: the reference's facts, not its
// prose — the system message reduced to its length, tool and parameter
// descriptions dropped (names, types and required lists stay).
export function slim(fx) {
    const strip = (o) => {
        if (Array.isArray(o)) return o.map(strip);
        if (!o || typeof o !== "object") return o;
        return Object.fromEntries(Object.entries(o).filter(([k]) => k !== "description").map(([k, x]) => [k, strip(x)]));
    };
    const rq = fx.model_request;
    if (!rq) return fx;
    return { ...fx, model_request: { ...rq,
        messages: rq.messages.map((m) => (m.role === "system"
            ? { role: m.role, content: `(${String(m.content).length} characters)` } : m)),
        tools: strip(rq.tools) } };
}

// ---- what --record keeps of the reference's run -----------------------------------------

// tests/fixtures/reference-run/: the reference's sessions directory as it
// was left (sessions.json, the transcripts, the archives of reset sessions),
// every field kept, the local paths replaced by @SESSIONS@, @DIR@ and
// @REPO@ (the tests put their own in), and tests/fixtures/reference-cli-frames.json: the
// frames of the reference's CLI and its gateway, both ways.
function recordRun(world, dir, port) {
    const fixtures = resolve(here, "../fixtures");
    const sessions = join(world.state, "agents/main/sessions");
    const out = join(fixtures, "reference-run");
    mkdirSync(out, { recursive: true });
    const scrub = (t) => t.replaceAll(sessions, "@SESSIONS@").replaceAll(dir, "@DIR@").replaceAll(repo, "@REPO@")
        .replaceAll(`127.0.0.1:${port}`, "127.0.0.1:@PORT@");
    if (existsSync(sessions))
        for (const n of readdirSync(sessions)) {
            if (/\.lock$/.test(n)) continue;
            // ':' is not for every file system: the reset archives' timestamps keep '-'
            writeFileSync(join(out, n.replaceAll(":", "-")), scrub(readFileSync(join(sessions, n), "utf8")));
        }
    if (world.cliFrames) {
        const text = scrub(JSON.stringify({
            note: "recorded by tests/compat/run.mjs --record: openclaw@2026.3.22's `openclaw gateway call` " +
                "(one connection a call) against its own gateway; dir client: what the CLI sent",
            token: GW_TOKEN, frames: world.cliFrames.filter((m) => m.frame) }, null, 1));
        writeFileSync(join(fixtures, "reference-cli-frames.json"), text + "\n");
    }
}

// ---- one run --------------------------------------------------------------------------------

async function main() {
    const out = join(repo, "build/compat");
    mkdirSync(out, { recursive: true });
    const dir = mkdtempSync(join(out, `${which}-`));
    const state = join(dir, "state"), ws = join(dir, "workspace");
    mkdirSync(state, { recursive: true });
    mkdirSync(ws, { recursive: true });
    const si = start(NODE, [join(here, "standins.mjs"), join(dir, "requests.jsonl")], { pipe: true },
        join(dir, "standins.log"));
    const port = await new Promise((res, rej) => {
        let text = "";
        si.stdout.on("data", (d) => {
            text += d;
            const m = text.match(/PORT (\d+)/);
            if (m) res(Number(m[1]));
        });
        si.on("exit", () => rej(new Error("stand-ins exited")));
        setTimeout(() => rej(new Error("stand-ins did not start")), 10000);
    });
    const gwPort = await freePort();
    const cfg = config(port, ws, gwPort);
    const env = { PATH: process.env.PATH, HOME: dir, TZ: "UTC", LANG: "C.UTF-8" };
    let gw;
    const t0 = Date.now();
    if (which === "ref") {
        const cfgPath = join(state, "openclaw.json");
        writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
        gw = start(NODE, [REF, "gateway", "run", "--port", String(gwPort), "--allow-unconfigured"], {
            cwd: dir,
            env: { ...env, OPENCLAW_STATE_DIR: state, OPENCLAW_CONFIG_PATH: cfgPath, OPENCLAW_DISABLE_BONJOUR: "1",
                OPENCLAW_SKIP_CANVAS_HOST: "1", OPENCLAW_SKIP_BROWSER_CONTROL_SERVER: "1",
                OPENCLAW_SKIP_GMAIL_WATCHER: "1", OPENCLAW_NO_RESPAWN: "1" },
        }, join(dir, "gateway.log"));
    } else {
        const cfgPath = join(state, "quantumclaw.json");
        writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
        gw = start(CLAWMEM, ["gateway", "run", "--listen", `127.0.0.1:${gwPort}`], {
            cwd: dir, env: { ...env, QUANTUMCLAW_STATE_DIR: state, QUANTUMCLAW_CONFIG_PATH: cfgPath },
        }, join(dir, "gateway.log"));
    }
    const standins = new Standins(port);
    const world = new World(standins, dir, state, ws);
    const cliState = join(dir, "cli-state");
    mkdirSync(cliState, { recursive: true });
    Object.assign(world, { ref: REF, gwToken: GW_TOKEN, proxy: await startProxy(gwPort),
        clientEnv: { PATH: process.env.PATH, HOME: dir, TZ: "UTC", LANG: "C.UTF-8", TERM: "xterm-256color",
            OPENCLAW_STATE_DIR: cliState, OPENCLAW_CONFIG_PATH: join(cliState, "openclaw.json") } });
    const result = { gateway: which, dir: relative(repo, dir), startup_ms: null, scenarios: {} };
    // ready: the first long poll
    for (let i = 0; i < 480; i++) {
        const l = await standins.log();
        if (l.some((r) => r.svc === "tg" && r.path.endsWith("/getUpdates"))) {
            result.startup_ms = Date.now() - t0;
            break;
        }
        if (gw.exitCode !== null) break;
        await sleep(250);
    }
    if (result.startup_ms === null) {
        result.error = `the gateway did not poll Telegram (exit ${gw.exitCode}); see ${relative(repo, dir)}/gateway.log`;
    } else {
        await sleep(1500); // let start-up calls (setMyCommands, …) finish
        for (const s of SCENARIOS) {
            if (only && !only.includes(s.id)) continue;
            const t = Date.now();
            process.stderr.write(`compat ${which}: ${s.id} … `);
            try {
                await world.begin();
                result.scenarios[s.id] = await s.run(world);
            } catch (e) {
                result.scenarios[s.id] = { error: String(e && e.stack || e) };
            }
            result.scenarios[s.id].elapsed_ms = Date.now() - t;
            process.stderr.write(`${Date.now() - t} ms\n`);
            if (gw.exitCode !== null) {
                result.error = `the gateway exited (${gw.exitCode}) during ${s.id}`;
                break;
            }
        }
        result.workspace_files = readdirSync(ws).sort();
        result.state_files = world.files().filter((f) => !/\.(bak|lock)(\.\d+)?$/.test(f));
    }
    await stop(gw);
    await stop(si, 2000);
    await world.proxy.close();
    writeFileSync(join(dir, "frames.jsonl"), world.proxy.messages.map((m) => JSON.stringify(m)).join("\n") + "\n");
    writeFileSync(join(out, `${which}.json`), JSON.stringify(result, null, 1).replaceAll(dir, "<dir>")
        .replaceAll(`127.0.0.1:${port}`, "127.0.0.1:<port>"));
    if (record && which === "ref" && world.fixture) {
        const fx = join(here, "fixtures");
        mkdirSync(fx, { recursive: true });
        const text = JSON.stringify(slim(world.fixture), null, 1).replaceAll(dir, "<dir>")
            .replaceAll(String(port), "<port>");
        writeFileSync(join(fx, "reference-dm.json"), text + "\n");
    }
    if (record && which === "ref") recordRun(world, dir, port);
    console.error(`compat ${which}: wrote build/compat/${which}.json`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main().catch((e) => {
    console.error(e);
    killAll();
    process.exit(1);
});
