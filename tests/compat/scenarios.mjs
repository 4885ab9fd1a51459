// scenarios.mjs — the table run.mjs plays against each gateway, in order, in
// one gateway process (start-up of the reference takes ~20 s). Each
// scenario acts through the World (Telegram updates in, model answers
// queued) and returns facts: counts and shapes of what reached the model
// and Telegram, never timestamps or ids, so that the two gateways compare.
// Senders: 111 (Alice, allowed), 222 (unknown), 333 (second allowed DM is
// not configured: 333 is unknown too); the group is -100.

import { readFileSync } from "node:fs";

const isChat = (r) => r.svc === "model" && r.path.endsWith("/chat/completions");
const isTg = (m) => (r) => r.svc === "tg" && r.path.endsWith(`/${m}`);
const tgTo = (chat) => (r) => r.svc === "tg" && r.body && String(r.body.chat_id) === String(chat);
const method = (r) => r.path.split("/").pop();

// The text of a chat message's content (a string or parts).
export function contentText(c) {
    if (typeof c === "string") return c;
    if (Array.isArray(c)) return c.map((p) => (typeof p === "string" ? p : p.text ?? "")).join("");
    return "";
}

// The facts of one chat request body.
export function modelFacts(body) {
    const msgs = body.messages || [];
    const sys = msgs.filter((m) => m.role === "system" || m.role === "developer").map((m) => contentText(m.content))
        .join("\n");
    const last = msgs.filter((m) => m.role === "user").pop();
    const user = last ? contentText(last.content) : "";
    return {
        model: body.model,
        stream: body.stream ?? false,
        keys: Object.keys(body).sort(),
        roles: msgs.map((m) => m.role),
        system_chars: sys.length,
        system_headings: (sys.match(/^#{1,3} .+$/gm) || []).map((h) => h.trim()),
        tools: (body.tools || []).map((t) => t.function?.name ?? t.name).filter(Boolean),
        user_text: user,
        user_blocks: {
            conversation_info: user.includes("Conversation info (untrusted metadata)"),
            sender: /(^|\n)Sender\b/.test(user),
            chat_history: user.includes("Chat history since last reply") || user.includes("[Chat messages since"),
        },
    };
}

// What Telegram received (the long polls left out): method names in order,
// and the outgoing texts with their parse modes.
function tgFacts(recs, chat) {
    const mine = recs.filter((r) => r.svc === "tg" && (chat === undefined || tgTo(chat)(r)));
    return {
        methods: mine.map(method),
        sends: mine.filter(isTg("sendMessage")).map((r) => ({
            chars: (r.body.text || "").length, parse_mode: r.body.parse_mode ?? null,
            reply_to: r.body.reply_to_message_id ?? r.body.reply_parameters?.message_id ?? null,
            text: (r.body.text || "").slice(0, 160),
        })),
        edits: mine.filter(isTg("editMessageText")).length,
        actions: mine.filter(isTg("sendChatAction")).map((r) => r.body.action),
        reactions: mine.filter(isTg("setMessageReaction")).map((r) => r.body.reaction),
        deletes: mine.filter(isTg("deleteMessage")).length,
    };
}

function count(recs, pred) {
    return recs.filter(pred).length;
}

// The DM session's transcript records (types in order), read through sessions.json.
function dmTranscript(w) {
    const sj = w.readJson("agents/main/sessions/sessions.json") || {};
    const file = sj["agent:main:main"]?.sessionFile;
    if (!file) return [];
    try {
        return readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    } catch {
        return [];
    }
}

const sleepMs = (ms) => new Promise((r) => setTimeout(r, ms));

// Runs the reference's CLI (`openclaw gateway call METHOD`) against the
// gateway through the recording proxy; its exit code, JSON answer and the
// first line of its complaints.
async function gatewayCall(w, method, params) {
    const args = [w.ref, "gateway", "call", method, "--url", `ws://127.0.0.1:${w.proxy.port}`, "--token",
        w.gwToken, "--json", "--timeout", "30000", "--params", JSON.stringify(params ?? {})];
    const r = await w.runClient(args, 120000);
    let json = null;
    try {
        json = JSON.parse(r.stdout);
    } catch {
        /* not JSON: an error */
    }
    const err = r.stderr.split("\n").map((l) => l.trim()).filter((l) => l && !/^🦞|^$/.test(l));
    return { exit: r.code, json, error: r.code ? (err.find((l) => /error|fail|closed|refused/i.test(l)) ?? err[0] ?? "")
        .slice(0, 200) : null };
}

// The requests the client sent over the proxy since mark, and the
// methods the gateway refused.
function clientFrames(w, mark) {
    const msgs = w.proxy.messages.slice(mark);
    const reqs = msgs.filter((m) => m.dir === "client" && m.frame?.type === "req");
    const res = new Map(msgs.filter((m) => m.dir === "server" && m.frame?.type === "res").map((m) => [m.frame.id, m.frame]));
    return {
        methods: [...new Set(reqs.map((m) => m.frame.method))],
        refused: [...new Set(reqs.filter((m) => res.get(m.frame.id)?.ok === false)
            .map((m) => `${m.frame.method}: ${res.get(m.frame.id).error?.message ?? "?"}`))],
    };
}

const DM_ANSWER = "Hi Alice! I can **help** with that.\n\n```\nmake test\n```\nAnything else?";
const LONG_LINES = 260;

export const SCENARIOS = [
    {
        id: "dm",
        title: "DM text turn",
        async run(w) {
            await w.answer({ text: DM_ANSWER });
            await w.send(w.message(111, 111, "Hello there, what can you do?"));
            const { recs, met } = await w.settle((r) => r.some(isTg("sendMessage")) && r.some(isChat));
            const chats = recs.filter(isChat);
            const sessions = w.files("agents");
            const store = sessions.find((f) => f.endsWith("sessions.json"));
            const sj = store ? w.readJson(store) : null;
            const entry = sj ? Object.values(sj)[0] : null;
            const transcript = sessions.find((f) => f.endsWith(".jsonl"));
            let lineTypes = [];
            if (transcript) {
                const { readFileSync } = await import("node:fs");
                lineTypes = readFileSync(`${w.state}/${transcript}`, "utf8").split("\n").filter(Boolean)
                    .map((l) => JSON.parse(l).type);
            }
            w.fixture = {
                note: "recorded by tests/compat/run.mjs --record from openclaw@2026.3.22: one DM turn",
                inbound_text: "Hello there, what can you do?",
                answer_text: DM_ANSWER,
                model_request: chats[0]?.body ?? null,
                telegram: recs.filter((r) => r.svc === "tg").map((r) => ({ method: method(r), body: r.body })),
                session_files: sessions,
                session_keys: sj ? Object.keys(sj) : [],
                session_entry_fields: entry ? Object.keys(entry).sort() : [],
                transcript_line_types: lineTypes,
            };
            return {
                replied: met,
                model_requests: chats.length,
                request: chats[0] ? modelFacts(chats[0].body) : null,
                telegram: tgFacts(recs, 111),
                session_files: sessions,
                session_keys: sj ? Object.keys(sj) : [],
                session_entry_fields: entry ? Object.keys(entry).sort() : [],
                transcript_line_types: [...new Set(lineTypes)],
            };
        },
    },
    {
        id: "redelivery",
        title: "Redelivered update dropped",
        async run(w) {
            const m = w.message(111, 111, "ping once");
            await w.send(m);
            const first = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000 });
            await w.begin();
            await w.send(m); // same message, a new update_id
            const again = await w.settle(() => false, { timeoutMs: 6000, quietMs: 6000 });
            return {
                first_model_requests: count(first.recs, isChat),
                redelivered_model_requests: count(again.recs, isChat),
                redelivered_sends: count(again.recs, isTg("sendMessage")),
            };
        },
    },
    {
        id: "debounce",
        title: "Two quick messages (debounce 1500 ms)",
        async run(w) {
            await w.send(w.message(111, 111, "first part of my question"));
            await new Promise((r) => setTimeout(r, 300));
            await w.send(w.message(111, 111, "and the second part"));
            const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000, quietMs: 4000 });
            const chats = recs.filter(isChat);
            const u = chats[0] ? modelFacts(chats[0].body).user_text : "";
            return {
                model_requests: chats.length,
                first_request_has_both: u.includes("first part") && u.includes("second part"),
                sends: count(recs, isTg("sendMessage")),
            };
        },
    },
    {
        id: "pairing",
        title: "Unknown sender asks to pair",
        async run(w) {
            await w.send(w.message(222, 222, "hi, who are you?"));
            const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 20000 });
            const creds = w.files("credentials");
            const sends = recs.filter(isTg("sendMessage"));
            const text = sends[0]?.body.text ?? "";
            return {
                model_requests: count(recs, isChat),
                sends: sends.length,
                reply_mentions_code: /\b[A-Z0-9]{6,10}\b/.test(text),
                reply_mentions_command: /pairing approve/.test(text),
                reply_excerpt: text.slice(0, 200),
                credential_files: creds,
            };
        },
    },
    {
        id: "group_no_mention",
        title: "Group message without a mention",
        async run(w) {
            await w.send(w.message(111, -100, "just chatting about lunch"));
            const { recs } = await w.settle(() => false, { timeoutMs: 5000, quietMs: 5000 });
            return { model_requests: count(recs, isChat), telegram: tgFacts(recs, -100) };
        },
    },
    {
        id: "group_mention",
        title: "Group message mentioning the bot",
        async run(w) {
            await w.answer({ text: "Pizza sounds good." });
            const text = "@ClawBot what should we eat?";
            await w.send(w.message(111, -100, text, { entities: [{ type: "mention", offset: 0, length: 8 }] }));
            const { recs, met } = await w.settle((r) => r.some(isTg("sendMessage")) && r.some(isChat),
                { timeoutMs: 40000 });
            const chats = recs.filter(isChat);
            const f = chats[0] ? modelFacts(chats[0].body) : null;
            return {
                replied: met,
                model_requests: chats.length,
                history_in_prompt: f ? f.user_text.includes("just chatting about lunch") : false,
                user_blocks: f?.user_blocks ?? null,
                user_excerpt: f ? f.user_text.slice(-400) : "",
                telegram: tgFacts(recs, -100),
                group_session_keys: Object.keys(w.readJson("agents/main/sessions/sessions.json") || {})
                    .filter((k) => k.includes("group")),
            };
        },
    },
    {
        id: "long_reply",
        title: "Long reply with an indented code block",
        async run(w) {
            const lines = ["Here is the listing:", "", "```python", "def main():"];
            for (let i = 0; i < LONG_LINES; i++) lines.push(`    value_${i} = compute(${i})  # step ${i} of the listing`);
            lines.push("```", "", "That is all.");
            const text = lines.join("\n");
            await w.answer({ text, delayMs: 20 });
            await w.send(w.message(111, 111, "show me the long listing"));
            const { recs } = await w.settle((r) => r.filter(isTg("sendMessage")).some((x) =>
                (x.body.text || "").includes("That is all")), { timeoutMs: 40000, quietMs: 4000 });
            const sends = recs.filter(isTg("sendMessage")).map((r) => r.body.text || "");
            const edits = recs.filter(isTg("editMessageText")).map((r) => r.body.text || "");
            const all = sends.join("\n");
            return {
                answer_chars: text.length,
                sends: sends.length,
                edits: edits.length,
                max_chars: Math.max(0, ...sends.map((s) => s.length)),
                indentation_kept: all.includes("    value_100 = compute(100)"),
                first_and_last_line: all.includes("value_0 = compute(0)") && all.includes(`value_${LONG_LINES - 1} =`),
            };
        },
    },
    {
        id: "new",
        title: "/new",
        async run(w) {
            await w.send(w.message(111, 111, "/new", { entities: [{ type: "bot_command", offset: 0, length: 4 }] }));
            const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000, quietMs: 5000 });
            const sends = recs.filter(isTg("sendMessage")).map((r) => r.body.text || "");
            const chats = recs.filter(isChat);
            return {
                sends: sends.length,
                texts: sends.map((s) => s.slice(0, 120)),
                model_requests: chats.length,
                greeting_prompt: chats[0] ? modelFacts(chats[0].body).user_text.slice(0, 200) : null,
            };
        },
    },
    {
        id: "info",
        title: "/whoami, /help, /status, /commands",
        async run(w) {
            const out = { texts: {}, model_requests: 0 };
            for (const cmd of ["/whoami", "/help", "/status", "/commands"]) {
                await w.begin();
                await w.send(w.message(111, 111, cmd, { entities: [{ type: "bot_command", offset: 0, length: cmd.length }] }));
                const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000, quietMs: 3000 });
                out.texts[cmd] = recs.filter(isTg("sendMessage")).map((r) => r.body.text || "").join("\n---\n");
                out.model_requests += recs.filter(isChat).length;
            }
            return out;
        },
    },
    {
        id: "model",
        title: "/model, /models",
        async run(w) {
            const out = { texts: {}, model_requests: 0, override: {}, turn_model: null };
            const entry = () => (w.readJson("agents/main/sessions/sessions.json") || {})["agent:main:main"] || {};
            const say = async (cmd) => {
                await w.begin();
                const word = cmd.split(" ")[0];
                await w.send(w.message(111, 111, cmd, { entities: [{ type: "bot_command", offset: 0, length: word.length }] }));
                const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000, quietMs: 3000 });
                out.texts[cmd] = recs.filter(isTg("sendMessage")).map((r) => r.body.text || "").join("\n---\n");
                out.model_requests += recs.filter(isChat).length;
            };
            for (const cmd of ["/model", "/models", "/models openai", "/model 3", "/model openai/compat-fallback"])
                await say(cmd);
            const e = entry();
            out.override.set = { providerOverride: e.providerOverride ?? null, modelOverride: e.modelOverride ?? null };
            await w.begin();
            await w.answer({ text: "Answered by the switched model." });
            await w.send(w.message(111, 111, "Which model answers now?"));
            const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000, quietMs: 3000 });
            const chat = recs.find(isChat);
            out.turn_model = chat ? chat.body.model ?? null : null;
            await say("/model openai/compat-model");
            const c = entry();
            out.override.cleared = { providerOverride: c.providerOverride ?? null, modelOverride: c.modelOverride ?? null };
            return out;
        },
    },
    {
        id: "compact",
        title: "/compact",
        async run(w) {
            await w.answer({ text: "Noted: your courier code is BLUEHERON-7." });
            await w.send(w.message(111, 111, "Remember: my courier code is BLUEHERON-7."));
            await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 30000 });
            await w.begin();
            await w.answer({ text: "Summary: Alice's courier code is BLUEHERON-7." });
            await w.send(w.message(111, 111, "/compact", { entities: [{ type: "bot_command", offset: 0, length: 8 }] }));
            const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 60000, quietMs: 5000 });
            const types = dmTranscript(w).map((r) => r.type);
            return {
                model_requests: count(recs, isChat),
                texts: recs.filter(isTg("sendMessage")).map((r) => (r.body.text || "").slice(0, 120)),
                compaction_records: types.filter((t) => t === "compaction").length,
                transcript_line_types: [...new Set(types)],
            };
        },
    },
    {
        id: "cli_calls",
        title: "The reference's CLI: openclaw gateway call",
        async run(w) {
            const mark = w.proxy.messages.length;
            const out = {};
            const calls = [
                ["health", {}], ["status", {}], ["sessions.list", {}],
                ["chat.history", { sessionKey: "main", limit: 20 }],
                ["chat.send", { sessionKey: "main", message: "Hello from the CLI", idempotencyKey: "compat-cli-1" }],
            ];
            await w.answer({ text: "CLI round trip answer." });
            for (const [m, p] of calls) {
                await w.begin();
                const r = await gatewayCall(w, m, p);
                out[m] = { exit: r.exit, keys: r.json && typeof r.json === "object" ? Object.keys(r.json).sort() : [],
                    error: r.error };
                if (m === "chat.send") {
                    const { met } = await w.settle((x) => x.some(isChat), { timeoutMs: 60000, quietMs: 2000 });
                    out[m].model_called = met;
                }
            }
            const f = clientFrames(w, mark);
            w.cliFrames = w.proxy.messages.slice(mark);
            return {
                ok: Object.entries(out).filter(([, r]) => r.exit === 0).map(([m]) => m),
                failed: Object.entries(out).filter(([, r]) => r.exit !== 0).map(([m, r]) => `${m}: ${r.error}`),
                answer_keys: Object.fromEntries(Object.entries(out).map(([m, r]) => [m, r.keys.join(",")])),
                chat_send_reached_model: out["chat.send"].model_called ?? false,
                methods_sent: f.methods, refused: f.refused,
            };
        },
    },
    {
        id: "tui_chat",
        title: "The reference's TUI in tmux: one chat round",
        async run(w) {
            const mark = w.proxy.messages.length;
            const tui = await w.startTui();
            let screen = "";
            const see = async (re, ms) => {
                const end = Date.now() + ms;
                for (;;) {
                    screen = await tui.capture();
                    if (re.test(screen) || Date.now() > end) return re.test(screen);
                    await sleepMs(500);
                }
            };
            // ready: "gateway connected | idle" (or reconnected), not "connecting | idle"
            const connected = await see(/connected \| idle\b/, 120000);
            await sleepMs(1000);
            await w.answer({ text: "TUI round trip answer." });
            // typed keys can be lost while the editor is still being drawn: type
            // until the text shows in the input, then send it
            let typed = false;
            for (let i = 0; i < 3 && !typed; i++) {
                await tui.keys("Hello from the TUI");
                typed = await see(/Hello from the TUI/, 10000);
                w.note?.(`tui-type-${i}.screen`, screen);
                if (!typed) await tui.keys("C-u");
            }
            await tui.keys("Enter");
            const replied = await see(/TUI round trip answer\./, 90000);
            const final = screen;
            await tui.stop();
            const f = clientFrames(w, mark);
            return {
                connected,
                message_on_screen: /Hello from the TUI/.test(final),
                reply_on_screen: replied,
                screen_errors: final.split("\n").filter((l) => /error|failed|unknown method|disconnected/i.test(l))
                    .map((l) => l.trim().slice(0, 120)).slice(0, 5),
                methods_sent: f.methods, refused: f.refused,
            };
        },
    },
    {
        id: "rate_limit",
        title: "429 from the primary model (fallback configured)",
        async run(w) {
            await w.fail({ model: "compat-model", status: 429, count: 100, headers: { "retry-after": "1" },
                body: { error: { message: "Rate limit reached", type: "rate_limit_error", code: "rate_limit_exceeded" } } });
            const t = Date.now();
            await w.send(w.message(111, 111, "are you there?"));
            const { recs } = await w.settle((r) => r.some(isTg("sendMessage")), { timeoutMs: 90000, quietMs: 4000 });
            const chats = recs.filter(isChat);
            const first = chats[0]?.t ?? 0, lastPrimary = chats.filter((r) => r.body.model === "compat-model").pop();
            const sends = recs.filter(isTg("sendMessage")).map((r) => r.body.text || "");
            return {
                primary_attempts: chats.filter((r) => r.body.model === "compat-model").length,
                fallback_attempts: chats.filter((r) => r.body.model === "compat-fallback").length,
                primary_retry_span_ms: lastPrimary ? lastPrimary.t - first : 0,
                reply: sends[0]?.slice(0, 120) ?? null,
                turn_ms: Date.now() - t,
                auth_state: w.files("agents").filter((f) => /auth/.test(f)),
            };
        },
    },
];
