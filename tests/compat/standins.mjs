// standins.mjs — the loopback stand-ins `make compat` runs both gateways
// against, as one process: a Telegram Bot API (/bot<token>/<method>, the
// subset a polling bot uses) and an OpenAI-compatible model
// (/v1/chat/completions streamed or not, /v1/embeddings as hashed bags of
// words). Every request is appended to a JSONL log as
// {seq, t, svc: "tg"|"model", method, path, body} so that the harness
// compares what each gateway sent.
//
// Control (same port, /_ctl/…, loopback only):
//   POST /_ctl/update  {update}        queue a Telegram update (update_id kept)
//   POST /_ctl/answer  {text}|{status, body}|{call: {name, arguments}}
//                                      queue the model's next answer (FIFO);
//                                      with none queued it answers "OK."
//   POST /_ctl/fail    {model, status, count, body, headers}
//                                      answer that model's next count requests
//                                      with status (before any queued answer)
//   GET  /_ctl/log?since=N             the records from seq N on
// Usage: node standins.mjs <log.jsonl>   prints "PORT <n>" once listening.
import { appendFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createHash } from "node:crypto";

export const TOKEN = "123456:compat-token";
export const BOT = { id: 123456, is_bot: true, first_name: "Claw", username: "ClawBot",
    can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false };

const logPath = process.argv[2];
if (!logPath) {
    console.error("usage: node standins.mjs <log.jsonl>");
    process.exit(2);
}
writeFileSync(logPath, "");
const log = [];
const updates = [];
const answers = [];
const failures = []; // {model, status, count, body, headers}: answers for one model first
let pollWaiters = [];
let nextMessageId = 1000;
const t0 = Date.now();

function record(svc, req, body) {
    let parsed = body;
    try {
        parsed = body ? JSON.parse(body) : null;
    } catch {
        /* a form or text body stays a string */
    }
    const r = { seq: log.length, t: Date.now() - t0, svc, method: req.method, path: req.url, body: parsed };
    log.push(r);
    appendFileSync(logPath, JSON.stringify(r) + "\n");
    return r;
}

function send(res, status, obj, headers = {}) {
    const text = typeof obj === "string" ? obj : JSON.stringify(obj);
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(text);
}

function vector(text, dims = 64) {
    const v = new Array(dims).fill(0);
    for (const w of String(text).toLowerCase().match(/[\p{L}\p{N}]+/gu) || []) {
        const h = createHash("sha256").update(w).digest();
        v[h.readUInt32LE(0) % dims] += h[4] & 1 ? 1 : -1;
    }
    const n = Math.hypot(...v) || 1;
    return v.map((x) => x / n);
}

// ---- Telegram ---------------------------------------------------------------------------

function tgMessage(p) {
    const chatId = Number(p.chat_id);
    return { message_id: nextMessageId++, date: Math.floor(Date.now() / 1000),
        chat: { id: chatId, type: chatId < 0 ? "group" : "private" }, from: BOT, text: p.text ?? "" };
}

function flushPolls() {
    const w = pollWaiters;
    pollWaiters = [];
    for (const f of w) f();
}

function telegram(req, res, method, p) {
    switch (method) {
    case "getMe":
        return send(res, 200, { ok: true, result: BOT });
    case "getUpdates": {
        const off = p.offset;
        if (typeof off === "number")
            while (updates.length && updates[0].update_id < off) updates.shift();
        const hold = Math.min(Number(p.timeout ?? 0), 5) * 1000;
        const answer = () => send(res, 200, { ok: true, result: updates.slice(0, p.limit ?? 100) });
        if (updates.length || !hold) return answer();
        const timer = setTimeout(() => {
            pollWaiters = pollWaiters.filter((f) => f !== wake);
            answer();
        }, hold);
        const wake = () => {
            clearTimeout(timer);
            answer();
        };
        pollWaiters.push(wake);
        req.on("close", () => clearTimeout(timer));
        return;
    }
    case "sendMessage":
    case "sendPhoto":
    case "sendDocument":
        return send(res, 200, { ok: true, result: tgMessage(p) });
    case "editMessageText":
        return send(res, 200, { ok: true, result: { ...tgMessage(p), message_id: Number(p.message_id) } });
    case "getWebhookInfo":
        return send(res, 200, { ok: true, result: { url: "", has_custom_certificate: false, pending_update_count: 0 } });
    case "getMyCommands":
        return send(res, 200, { ok: true, result: [] });
    case "getChat":
        return send(res, 200, { ok: true, result: { id: Number(p.chat_id), type: "private" } });
    default: // sendChatAction, setMessageReaction, deleteMessage, setMyCommands, deleteWebhook, …
        return send(res, 200, { ok: true, result: true });
    }
}

// ---- the model --------------------------------------------------------------------------

function sse(res, chunks, delayMs) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let i = 0;
    const next = () => {
        if (i < chunks.length) {
            res.write(`data: ${JSON.stringify(chunks[i++])}\n\n`);
            setTimeout(next, delayMs);
        } else {
            res.end("data: [DONE]\n\n");
        }
    };
    next();
}

function model(req, res, path, p) {
    if (path.endsWith("/embeddings")) {
        const input = Array.isArray(p.input) ? p.input : [p.input];
        return send(res, 200, { object: "list", model: p.model,
            data: input.map((t, index) => ({ object: "embedding", index, embedding: vector(t) })),
            usage: { prompt_tokens: 1, total_tokens: 1 } });
    }
    if (path.endsWith("/models"))
        return send(res, 200, { object: "list", data: [{ id: "compat-model", object: "model" }] });
    if (!path.endsWith("/chat/completions"))
        return send(res, 404, { error: { message: "not found", type: "invalid_request_error" } });
    const f = failures.find((x) => x.count > 0 && (!x.model || x.model === p.model));
    if (f) {
        f.count--;
        return send(res, f.status, f.body ?? { error: { message: "fault", type: "error" } }, f.headers ?? {});
    }
    const a = answers.shift() ?? { text: "OK." };
    if (a.status) return send(res, a.status, a.body ?? { error: { message: "fault", type: "error" } },
        a.headers ?? {});
    const id = "chatcmpl-compat", created = Math.floor(Date.now() / 1000), m = p.model;
    const base = { id, object: "chat.completion.chunk", created, model: m };
    const usage = { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 };
    if (a.call) {
        const tc = { index: 0, id: a.call.id ?? "call_compat_1", type: "function",
            function: { name: a.call.name, arguments: JSON.stringify(a.call.arguments ?? {}) } };
        if (!p.stream)
            return send(res, 200, { id, object: "chat.completion", created, model: m, usage,
                choices: [{ index: 0, finish_reason: "tool_calls",
                    message: { role: "assistant", content: null, tool_calls: [tc] } }] });
        return sse(res, [
            { ...base, choices: [{ index: 0, delta: { role: "assistant", tool_calls: [tc] }, finish_reason: null }] },
            { ...base, choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
            { ...base, choices: [], usage },
        ], 5);
    }
    const text = a.text;
    if (!p.stream)
        return send(res, 200, { id, object: "chat.completion", created, model: m, usage,
            choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: text } }] });
    // streamed in pieces, slowly enough that a gateway's preview can show
    const pieces = [];
    const step = Math.max(8, Math.ceil(text.length / 8));
    for (let i = 0; i < text.length; i += step) pieces.push(text.slice(i, i + step));
    sse(res, [
        { ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
        ...pieces.map((c) => ({ ...base, choices: [{ index: 0, delta: { content: c }, finish_reason: null }] })),
        { ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
        { ...base, choices: [], usage },
    ], a.delayMs ?? 150);
}

// ---- the server ---------------------------------------------------------------------------

const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const url = new URL(req.url, "http://127.0.0.1");
        let p = {};
        try {
            p = body ? JSON.parse(body) : Object.fromEntries(url.searchParams);
        } catch {
            p = Object.fromEntries(new URLSearchParams(body));
        }
        if (url.pathname.startsWith("/_ctl/")) {
            if (url.pathname === "/_ctl/update") {
                updates.push(p);
                flushPolls();
                return send(res, 200, { ok: true });
            }
            if (url.pathname === "/_ctl/answer") {
                answers.push(p);
                return send(res, 200, { ok: true, queued: answers.length });
            }
            if (url.pathname === "/_ctl/fail") {
                failures.push(p);
                return send(res, 200, { ok: true });
            }
            if (url.pathname === "/_ctl/log") {
                const since = Number(url.searchParams.get("since") ?? 0);
                return send(res, 200, log.slice(since));
            }
            return send(res, 404, { ok: false });
        }
        const tg = url.pathname.match(/^\/bot([^/]+)\/([A-Za-z]+)$/);
        if (tg) {
            record("tg", req, body);
            if (tg[1] !== TOKEN)
                return send(res, 401, { ok: false, error_code: 401, description: "Unauthorized" });
            return telegram(req, res, tg[2], p);
        }
        record("model", req, body);
        return model(req, res, url.pathname, p);
    });
});
server.listen(0, "127.0.0.1", () => {
    console.log(`PORT ${server.address().port}`);
});
for (const s of ["SIGTERM", "SIGINT"])
    process.on(s, () => {
        flushPolls();
        server.closeAllConnections?.();
        server.close(() => process.exit(0));
        setTimeout(() => process.exit(0), 500).unref();
    });
