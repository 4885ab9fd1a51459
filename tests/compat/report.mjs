// report.mjs — docs/COMPAT.md from the two runs of run.mjs
// (build/compat/ref.json, build/compat/clawmem.json): per scenario the
// observed facts side by side and, per aspect, a verdict — same, different,
// better (clawmem better on purpose) or gap (clawmem lacks it) — with the
// reason. The verdicts are computed from the facts, so a change on either
// side shows up at the next `make compat`; the reasons for deliberate
// differences are written here.
// Usage: node report.mjs <ref.json> <clawmem.json> <out.md>
import { readFileSync, writeFileSync } from "node:fs";

const [refPath, cmPath, outPath] = process.argv.slice(2);
if (!outPath) {
    console.error("usage: node report.mjs <ref.json> <clawmem.json> <out.md>");
    process.exit(2);
}
const ref = JSON.parse(readFileSync(refPath, "utf8"));
const cm = JSON.parse(readFileSync(cmPath, "utf8"));

const minus = (a = [], b = []) => a.filter((x) => !b.includes(x));
const list = (a) => (a && a.length ? a.join(", ") : "none");
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const v = (aspect, verdict, note) => ({ aspect, verdict, note });

// Per scenario: the aspects judged from both sides' facts.
const JUDGES = {
    dm(r, c) {
        const out = [];
        const rt = r.request?.tools ?? [], ct = c.request?.tools ?? [];
        const missing = minus(rt, ct), extra = minus(ct, rt);
        out.push(v("tools offered", missing.length ? "gap" : "same",
            `reference ${rt.length}, clawmem ${ct.length}. Missing in clawmem: ${list(missing)}.` +
            (extra.length ? ` clawmem only: ${list(extra)} (memory_write is clawmem's own memory tool).` : "") +
            " browser, canvas, tts, web_search, nodes, cron, gateway and the sub-agent tools are left out on purpose (issue 28 item 2)."));
        const rb = r.request?.user_blocks ?? {}, cb = c.request?.user_blocks ?? {};
        out.push(v("untrusted-metadata blocks in the user message",
            same(rb, cb) ? "same" : "gap",
            `reference: Conversation info ${rb.conversation_info ? "yes" : "no"}, Sender ${rb.sender ? "yes" : "no"}; ` +
            `clawmem: Conversation info ${cb.conversation_info ? "yes" : "no"}, Sender ${cb.sender ? "yes" : "no"}.` +
            (same(rb, cb) ? "" : " Without them the model does not know who writes or when.")));
        const rh = r.request?.system_headings ?? [], ch = c.request?.system_headings ?? [];
        // the program's own sections: before "# Project Context" (the
        // workspace files' contents) and from "## Silent Replies" on
        const norm = (h) => {
            const a = h.indexOf("# Project Context"), b = h.indexOf("## Silent Replies");
            const own = a < 0 ? h : [...h.slice(0, a), ...(b < 0 ? [] : h.slice(b))];
            return own.filter((x) => x.startsWith("## "));
        };
        const mh = minus(norm(rh), norm(ch));
        out.push(v("system prompt sections", mh.length ? "different" : "same",
            `reference ${r.request?.system_chars ?? 0} chars, clawmem ${c.request?.system_chars ?? 0}. ` +
            `Sections only in the reference: ${list(mh)}; only in clawmem: ${list(minus(norm(ch), norm(rh)))}.`));
        const rk = r.request?.keys ?? [], ck = c.request?.keys ?? [];
        out.push(v("request body keys", same(rk, ck) ? "same" : "different",
            `reference {${rk.join(", ")}}, clawmem {${ck.join(", ")}}.`));
        const rtg = r.telegram ?? {}, ctg = c.telegram ?? {};
        out.push(v("typing indicator", (rtg.actions?.length ?? 0) && !(ctg.actions?.length ?? 0) ? "gap" : "same",
            `sendChatAction: reference ${rtg.actions?.length ?? 0}, clawmem ${ctg.actions?.length ?? 0}.`));
        out.push(v("streamed preview", rtg.edits && !ctg.edits ? "gap" : "same",
            `reference: ${rtg.sends?.length ?? 0} sendMessage + ${rtg.edits ?? 0} editMessageText (a preview edited in place); ` +
            `clawmem: ${ctg.sends?.length ?? 0} sendMessage + ${ctg.edits ?? 0} edits (one final message).`));
        const rp = rtg.sends?.[0]?.parse_mode, cp = ctg.sends?.[0]?.parse_mode;
        out.push(v("parse_mode and markup", rp === cp ? "same" : "different",
            `reference ${rp}, clawmem ${cp}; **bold** becomes <b> and a fence <pre><code> on both (the reference keeps the fence's last line break inside <code>).`));
        out.push(v("session key and file layout", same(r.session_keys, c.session_keys) ? "same" : "different",
            `keys: reference ${list(r.session_keys)}, clawmem ${list(c.session_keys)}; files: sessions.json and <sessionId>.jsonl under agents/main/sessions on both.`));
        const mf = minus(r.session_entry_fields, c.session_entry_fields);
        out.push(v("sessions.json entry fields", mf.length ? "gap" : "same",
            `missing in clawmem: ${list(mf)}; clawmem only: ${list(minus(c.session_entry_fields, r.session_entry_fields))}.`));
        const ml = minus(r.transcript_line_types, c.transcript_line_types);
        out.push(v("transcript line types", ml.length ? "gap" : "same",
            `reference ${list(r.transcript_line_types)}; clawmem ${list(c.transcript_line_types)}.`));
        return out;
    },
    redelivery(r, c) {
        const ok = (x) => x.first_model_requests === 1 && x.redelivered_model_requests === 0;
        return [v("the same message under a new update_id", ok(r) && ok(c) ? "same" : "different",
            `model requests for the redelivery: reference ${r.redelivered_model_requests}, clawmem ${c.redelivered_model_requests}.`)];
    },
    debounce(r, c) {
        return [v("two messages 300 ms apart", r.model_requests === c.model_requests &&
            r.first_request_has_both === c.first_request_has_both ? "same" : "different",
        `model requests: reference ${r.model_requests}, clawmem ${c.model_requests}; both texts in one request: ` +
            `reference ${r.first_request_has_both}, clawmem ${c.first_request_has_both}.`)];
    },
    pairing(r, c) {
        const out = [v("unknown sender reaches no model", r.model_requests === 0 && c.model_requests === 0 ? "same" : "different",
            `model requests: reference ${r.model_requests}, clawmem ${c.model_requests}; replies: reference ${r.sends}, clawmem ${c.sends}.`)];
        out.push(v("pairing reply and store", same(r.credential_files, c.credential_files) &&
            r.reply_mentions_code === c.reply_mentions_code ? "same" : "different",
        `files: reference ${list(r.credential_files)}; clawmem ${list(c.credential_files)}. The reply names the approve command of each ` +
            "program (`openclaw pairing approve` / `clawmem pairing approve`); the request stores are the same file."));
        return out;
    },
    group_no_mention(r, c) {
        return [v("no mention: no turn", r.model_requests === c.model_requests && !c.telegram.methods.length ===
            !r.telegram.methods.length ? "same" : "different",
        `model requests: reference ${r.model_requests}, clawmem ${c.model_requests}; Telegram calls: reference ${list(r.telegram.methods)}, clawmem ${list(c.telegram.methods)}.`)];
    },
    group_mention(r, c) {
        const out = [v("mention runs one turn with the group's history", r.model_requests === c.model_requests &&
            r.history_in_prompt === c.history_in_prompt ? "same" : "different",
        `model requests: reference ${r.model_requests}, clawmem ${c.model_requests}; earlier message in the prompt: reference ${r.history_in_prompt}, clawmem ${c.history_in_prompt}.`)];
        out.push(v("history wrapper", same(r.user_blocks, c.user_blocks) ? "same" : "gap",
            `reference: ${JSON.stringify(r.user_blocks)}; clawmem: ${JSON.stringify(c.user_blocks)}.`));
        const rr = r.telegram.reactions.length, cr = c.telegram.reactions.length;
        out.push(v("ack reaction", rr && !cr ? "gap" : "same",
            `setMessageReaction: reference ${rr} ${rr ? JSON.stringify(r.telegram.reactions[0]) : ""}, clawmem ${cr}.`));
        return out;
    },
    long_reply(r, c) {
        const out = [];
        out.push(v("pieces", c.sends < r.sends ? "better" : c.sends === r.sends ? "same" : "different",
            `${r.answer_chars} characters: reference ${r.sends} sendMessage (+${r.edits} edits, max ${r.max_chars} chars), ` +
            `clawmem ${c.sends} (max ${c.max_chars}). clawmem fills each piece up to the 4096 limit at a line break and keeps code fences balanced.`));
        out.push(v("indentation kept", c.indentation_kept && !r.indentation_kept ? "better"
            : c.indentation_kept === r.indentation_kept ? "same" : "different",
        `reference ${r.indentation_kept}, clawmem ${c.indentation_kept}; whole listing delivered: reference ${r.first_and_last_line}, clawmem ${c.first_and_last_line}.`));
        return out;
    },
    new(r, c) {
        const out = [v("/new notice", r.texts?.[0] === c.texts?.[0] ? "same" : "different", `reference: ${JSON.stringify(r.texts?.[0] ?? null)}; clawmem: ${JSON.stringify(c.texts?.[0] ?? null)}.`)];
        out.push(v("greeting turn", r.model_requests && !c.model_requests ? "gap" : "same",
            `model requests after /new: reference ${r.model_requests}, clawmem ${c.model_requests}; messages: reference ${r.sends}, clawmem ${c.sends}.`));
        return out;
    },
    info(r, c) {
        const rt = r.texts ?? {}, ct = c.texts ?? {};
        // a card's line labels: the first word of each line (the emoji)
        const labels = (t) => (t ?? "").split("\n").map((l) => l.split(" ")[0]).filter(Boolean);
        const out = [v("answered by the gateway, no model asked",
            !r.model_requests && c.model_requests ? "gap" : "same",
            `model requests for /whoami, /help, /status, /commands: reference ${r.model_requests}, clawmem ${c.model_requests}.`)];
        out.push(v("/whoami", rt["/whoami"] === ct["/whoami"] ? "same" : "different",
            `reference ${JSON.stringify(rt["/whoami"] ?? null)}; clawmem ${JSON.stringify(ct["/whoami"] ?? null)}.`));
        out.push(v("/status card lines", same(labels(rt["/status"]), labels(ct["/status"])) ? "same" : "different",
            `reference ${JSON.stringify(rt["/status"] ?? null)}; clawmem ${JSON.stringify(ct["/status"] ?? null)}. ` +
            "The first line names the program: clawmem says \"QuantumClaw 2026.3.22 (clawmem <version>)\"."));
        out.push(v("/help and /commands", rt["/help"] === ct["/help"] && rt["/commands"] === ct["/commands"] ? "same" : "different",
            `/help: reference ${JSON.stringify(rt["/help"] ?? null)}; clawmem ${JSON.stringify(ct["/help"] ?? null)}. ` +
            `/commands: reference ${JSON.stringify((rt["/commands"] ?? "").slice(0, 200))}…; clawmem ${JSON.stringify((ct["/commands"] ?? "").slice(0, 200))}…. ` +
            "On purpose: clawmem lists only the commands it answers (its other commands reach the model as text), in one message " +
            "(the reference pages Telegram's list 8 at a time with buttons)."));
        return out;
    },
    model(r, c) {
        const rt = r.texts ?? {}, ct = c.texts ?? {};
        // the reference sends HTML to Telegram: its text unescaped
        const plain = (t) => (t ?? "").replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&");
        const out = [v("answered by the gateway, no model asked", !r.model_requests && c.model_requests ? "gap" : "same",
            `model requests for the commands: reference ${r.model_requests}, clawmem ${c.model_requests}.`)];
        out.push(v("a switch sets providerOverride/modelOverride, the next turn asks that model, the default clears",
            same(r.override, c.override) && r.turn_model === c.turn_model ? "same" : "different",
            `after /model openai/compat-fallback: reference ${JSON.stringify(r.override?.set)}, clawmem ${JSON.stringify(c.override?.set)}; ` +
            `the next turn's model: reference ${r.turn_model}, clawmem ${c.turn_model}; after /model openai/compat-model: ` +
            `reference ${JSON.stringify(r.override?.cleared)}, clawmem ${JSON.stringify(c.override?.cleared)}.`));
        const acks = ["/model openai/compat-fallback", "/model openai/compat-model", "/model 3"];
        out.push(v("answers to a switch, to the default, to a number",
            acks.every((k) => plain(rt[k]) === plain(ct[k])) ? "same" : "different",
            acks.map((k) => `${k}: reference ${JSON.stringify(plain(rt[k]))}, clawmem ${JSON.stringify(plain(ct[k]))}`).join("; ") + "."));
        const lists = ["/model", "/models", "/models openai"];
        out.push(v("/model and /models on Telegram", lists.every((k) => plain(rt[k]) === plain(ct[k])) ? "same" : "different",
            lists.map((k) => `${k}: reference ${JSON.stringify(plain(rt[k]))}, clawmem ${JSON.stringify(plain(ct[k]))}`).join("; ") +
            ". On purpose: the reference answers Telegram with button pickers (\"Tap below…\", \"Select a provider:\"); " +
            "clawmem sends every channel the reference's text answer, which names /models and /model status instead. " +
            "Its lists hold the configured models (models.providers, agents.defaults.models, the model chain); the " +
            "reference's catalog adds pi-ai's built-in models (41 for openai here)."));
        return out;
    },
    compact(r, c) {
        return [v("/compact writes a compaction record", (r.compaction_records > 0) === (c.compaction_records > 0) ? "same"
            : r.compaction_records > 0 ? "gap" : "different",
        `compaction records in the DM transcript: reference ${r.compaction_records}, clawmem ${c.compaction_records}; ` +
            `notices: reference ${JSON.stringify(r.texts ?? [])}, clawmem ${JSON.stringify(c.texts ?? [])}.`)];
    },
    cli_calls(r, c) {
        const out = [v("`openclaw gateway call` health, status, sessions.list, chat.history, chat.send",
            c.failed.length === 0 && r.failed.length === 0 ? "same" : c.failed.length ? "gap" : "different",
            `succeeded: reference ${list(r.ok)}, clawmem ${list(c.ok)}; failed: reference ${list(r.failed)}, clawmem ${list(c.failed)}. ` +
            "The CLI signs a device identity into every connect; clawmem checks it as the reference does and takes it " +
            "from a loopback client (the reference's silent local pairing) without issuing a device token.")];
        // clawmem may add fields of its own (status: its gateway counters);
        // a field of the reference's missing in clawmem's answer is a difference
        const keysOf = (x) => (x ? x.split(",").filter(Boolean) : []);
        const diff = Object.keys(r.answer_keys ?? {}).filter((m) =>
            minus(keysOf(r.answer_keys[m]), keysOf(c.answer_keys?.[m])).length);
        out.push(v("answer fields the CLI prints", diff.length ? "different" : "same",
            diff.length ? diff.map((m) => `${m}: missing in clawmem {${minus(keysOf(r.answer_keys[m]),
                keysOf(c.answer_keys?.[m])).join(",")}}`).join("; ") + "."
                : "every top-level field of the reference's answers is in clawmem's (status also carries clawmem's own gateway counters)."));
        out.push(v("chat.send runs a turn", r.chat_send_reached_model === c.chat_send_reached_model ? "same" : "gap",
            `the model was asked: reference ${r.chat_send_reached_model}, clawmem ${c.chat_send_reached_model}.`));
        return out;
    },
    tui_chat(r, c) {
        return [v("a chat round in `openclaw tui` (tmux)", r.reply_on_screen === c.reply_on_screen ? "same"
            : r.reply_on_screen ? "gap" : "better",
        `connected: reference ${r.connected}, clawmem ${c.connected}; the stand-in's reply on screen: reference ${r.reply_on_screen}, ` +
            `clawmem ${c.reply_on_screen}; methods the TUI called: ${list(c.methods_sent)}; refused by clawmem: ${list(c.refused)}` +
            ` (by the reference: ${list(r.refused)}).`)];
    },
    rate_limit(r, c) {
        const better = c.primary_attempts < r.primary_attempts && c.fallback_attempts >= 1;
        return [v("429 on the primary, fallback configured", better ? "better" : same(
            [r.primary_attempts, r.fallback_attempts], [c.primary_attempts, c.fallback_attempts]) ? "same" : "different",
        `primary attempts: reference ${r.primary_attempts} over ${(r.primary_retry_span_ms / 1000).toFixed(1)} s, clawmem ${c.primary_attempts}; ` +
            `fallback attempts: reference ${r.fallback_attempts}, clawmem ${c.fallback_attempts}; turn took reference ${(r.turn_ms / 1000).toFixed(1)} s, ` +
            `clawmem ${(c.turn_ms / 1000).toFixed(1)} s (each with ~4 s of quiet waited for at the end). clawmem tries a rate-limited key once, cools it down (persisted) and moves on.`)];
    },
};

const TITLES = {
    dm: "DM text turn", redelivery: "Redelivered update", debounce: "Two quick messages (debounce 1500 ms)",
    pairing: "Unknown sender (dmPolicy pairing)", group_no_mention: "Group message without a mention",
    group_mention: "Group message mentioning the bot", long_reply: "Long reply (~14,000 characters, indented code)",
    new: "/new", rate_limit: "429 from the primary model", compact: "/compact", info: "/whoami, /help, /status, /commands", model: "/model, /models",
    cli_calls: "The reference's CLI (gateway call)", tui_chat: "The reference's TUI",
};

// The facts of a scenario as rows: scalar or short values, flattened.
function rows(a, b, prefix = "") {
    const out = [];
    const keys = [...new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})])];
    for (const k of keys) {
        if (k === "elapsed_ms") continue;
        const x = a?.[k], y = b?.[k];
        if ((x && typeof x === "object" && !Array.isArray(x)) || (y && typeof y === "object" && !Array.isArray(y))) {
            if (k === "request" || k === "telegram" || k === "user_blocks" || k === "answer_keys") out.push(...rows(x, y, `${prefix}${k}.`));
            continue;
        }
        const show = (z) => {
            if (z === undefined) return "—";
            if (k === "greeting_prompt" && typeof z === "string") return `(a prompt of ${z.length} characters)`;
            let s = Array.isArray(z) ? (z.length > 12 ? `${z.length} items` : z.map((e) =>
                typeof e === "object" ? JSON.stringify(e) : e).join(", ")) : String(z);
            if (s.length > 160) s = s.slice(0, 157) + "…";
            return s.replaceAll("|", "\\|").replaceAll("\n", "⏎").replaceAll("<", "&lt;");
        };
        out.push(`| ${prefix}${k} | ${show(x)} | ${show(y)} |`);
    }
    return out;
}

const order = ["gap", "different", "better", "same"];
const md = [];
md.push("# clawmem and QuantumClaw 2026.3.22 side by side", "");
md.push("Written by `make compat` (tests/compat/run.mjs, scenarios.mjs, report.mjs): the real reference gateway",
    "(`openclaw@2026.3.22` under Node 22+, in build/peers) and `clawmem gateway`, each with the same config and",
    "its own loopback stand-ins for the Telegram Bot API and an OpenAI-compatible model (tests/compat/standins.mjs,",
    "which log every request), fed the same scenarios in order. The facts below are read from the stand-ins'",
    "logs and the state files; the verdicts are computed from them:", "",
    "- **same**: the user and the files see no difference;",
    "- **different**: they differ, and the note says how;",
    "- **better**: clawmem differs on purpose, for the user's good;",
    "- **gap**: the reference does it and clawmem does not (yet).", "");
md.push(`Run: ${new Date().toISOString().slice(0, 10)}. Start-up until the first Telegram poll: reference ` +
    `${ref.startup_ms ?? "—"} ms, clawmem ${cm.startup_ms ?? "—"} ms. Workspace files after the run (created by ` +
    `the gateway): reference ${list(ref.workspace_files)}; clawmem ${list(cm.workspace_files)}.`, "");
if (ref.error) md.push(`**Reference run error:** ${ref.error}`, "");
if (cm.error) md.push(`**clawmem run error:** ${cm.error}`, "");

const judged = [];
for (const id of Object.keys(JUDGES)) {
    const r = ref.scenarios?.[id], c = cm.scenarios?.[id];
    if (!r || !c) continue;
    let aspects;
    if (r.error || c.error) aspects = [v("run", "different", `error: ${(r.error || c.error).split("\n")[0]}`)];
    else aspects = JUDGES[id](r, c);
    judged.push({ id, r, c, aspects });
}
{
    const boot = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md"];
    const rw = ref.workspace_files ?? [], cw = cm.workspace_files ?? [];
    const miss = boot.filter((f) => rw.includes(f) && !cw.includes(f));
    judged.unshift({ id: "first_start", r: { workspace_files: rw }, c: { workspace_files: cw },
        aspects: [v("workspace bootstrap files created when missing", miss.length ? "gap" : "same",
            `missing in clawmem's workspace: ${list(miss)} (the reference also creates BOOTSTRAP.md and a git repository).`)] });
    TITLES.first_start = "First start";
}
md.push("## Summary", "", "| scenario | aspect | verdict |", "|---|---|---|");
for (const j of judged)
    for (const a of j.aspects) md.push(`| ${TITLES[j.id] ?? j.id} | ${a.aspect} | ${a.verdict} |`);
const counts = Object.fromEntries(order.map((o) => [o, judged.flatMap((j) => j.aspects).filter((a) => a.verdict === o).length]));
md.push("", `In all: ${order.map((o) => `${counts[o]} ${o}`).join(", ")}.`, "");

for (const j of judged) {
    md.push(`## ${TITLES[j.id] ?? j.id}`, "");
    for (const a of j.aspects) md.push(`- **${a.verdict}** — ${a.aspect}: ${a.note}`);
    md.push("", "| fact | reference | clawmem |", "|---|---|---|", ...rows(j.r, j.c), "");
}
const rs = ref.state_files ?? [], cs = cm.state_files ?? [];
const shape = (f) => f.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<id>")
    .replace(/\d{4}-\d{2}-\d{2}T[\d-]+\.\d+Z/g, "<time>").replace(/\d{4}-\d{2}-\d{2}/g, "<date>")
    .replace(/-[0-9a-f]{16}\.txt$/, "-<hash>.txt");
const rss = [...new Set(rs.map(shape))], css = [...new Set(cs.map(shape))];
md.push("## State directory after the run", "",
    `Both: ${list(rss.filter((f) => css.includes(f)))}.`, "",
    `Only the reference: ${list(rss.filter((f) => !css.includes(f)))}.`, "",
    `Only clawmem: ${list(css.filter((f) => !rss.includes(f)))}.`, "");
md.push("## Deliberate differences", "",
    "- **Failover**: a rate-limited (429) or billing-failed key is tried once, put on a cooldown that is saved in",
    "  auth-profiles.json, and the next profile or fallback model answers; the reference retried the same key",
    "  and saved no cooldown (QUANTUMCLAW-RUNTIME.md, \"Failover as observed\").",
    "- **Long replies**: pieces filled to Telegram's limit at line breaks with code fences closed and reopened, so",
    "  fewer messages arrive and every piece renders.",
    "- **Memory flush before every compaction** (issue 28 item 6): not exercised by these scenarios.",
    "- **State files**: clawmem keeps a journal of accepted messages (gateway/journal.jsonl, answered after a",
    "  crash), a status file for `clawmem gateway status`, and its memory index in memory/main.sqlite; the config",
    "  file is quantumclaw.json where the reference reads openclaw.json (the QuantumClaw renaming).",
    "- **Pairing reply** names `clawmem pairing approve`; the request store is the reference's file, so either",
    "  program approves the other's requests.",
    "- **Tools left out**: browser, canvas, tts, web_search, nodes, cron, gateway and the sub-agent tools",
    "  (sessions_spawn, sessions_yield, subagents) are not offered (issue 28 item 2).", "");
writeFileSync(outPath, md.join("\n"));
console.error(`compat: wrote ${outPath} (${order.map((o) => `${counts[o]} ${o}`).join(", ")})`);
