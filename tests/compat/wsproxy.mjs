// wsproxy.mjs — a loopback TCP proxy between a WebSocket client and a
// gateway that records the text frames each side sends (the gateway
// protocol's JSON), so that `make compat` can keep what the reference's own
// clients send as fixtures. Bytes pass through unchanged; the frames are
// parsed from copies (client frames unmasked) after the HTTP upgrade heads.
import { createServer, connect } from "node:net";

// Parses the frames in buf (a Buffer) from at; returns {frames, rest}.
function parseFrames(buf) {
    const frames = [];
    let at = 0;
    for (;;) {
        if (buf.length - at < 2) break;
        const b0 = buf[at], b1 = buf[at + 1];
        let len = b1 & 0x7f, off = at + 2;
        if (len === 126) {
            if (buf.length - off < 2) break;
            len = buf.readUInt16BE(off);
            off += 2;
        } else if (len === 127) {
            if (buf.length - off < 8) break;
            len = Number(buf.readBigUInt64BE(off));
            off += 8;
        }
        const masked = (b1 & 0x80) !== 0;
        const key = masked ? buf.subarray(off, off + 4) : null;
        if (masked) off += 4;
        if (buf.length - off < len) break;
        const payload = Buffer.from(buf.subarray(off, off + len));
        if (key) for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3];
        frames.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload });
        at = off + len;
    }
    return { frames, rest: buf.subarray(at) };
}

// One direction's recorder: skips the HTTP head, then reassembles messages.
function recorder(dir, onMessage) {
    let head = true, pending = Buffer.alloc(0), parts = [];
    return (chunk) => {
        pending = Buffer.concat([pending, chunk]);
        if (head) {
            const end = pending.indexOf("\r\n\r\n");
            if (end < 0) return;
            pending = pending.subarray(end + 4);
            head = false;
        }
        const { frames, rest } = parseFrames(pending);
        pending = Buffer.from(rest);
        for (const f of frames) {
            if (f.opcode >= 8) continue; // close, ping, pong
            parts.push(f.payload);
            if (!f.fin) continue;
            const text = Buffer.concat(parts).toString("utf8");
            parts = [];
            onMessage({ dir, text });
        }
    };
}

// Starts the proxy to 127.0.0.1:target; resolves {port, messages, close()}.
// messages: [{conn, dir: "client"|"server", t, frame}] in arrival order.
export function startProxy(target) {
    const messages = [];
    let conns = 0;
    const sockets = new Set();
    const server = createServer((client) => {
        const conn = ++conns;
        const upstream = connect(target, "127.0.0.1");
        sockets.add(client).add(upstream);
        const push = ({ dir, text }) => {
            let frame;
            try {
                frame = JSON.parse(text);
            } catch {
                frame = { unparsed: text };
            }
            messages.push({ conn, dir, t: Date.now(), frame });
        };
        const fromClient = recorder("client", push), fromServer = recorder("server", push);
        client.on("data", (d) => {
            fromClient(d);
            upstream.write(d);
        });
        upstream.on("data", (d) => {
            fromServer(d);
            client.write(d);
        });
        const end = () => {
            client.destroy();
            upstream.destroy();
        };
        client.on("close", () => {
            messages.push({ conn, dir: "client", t: Date.now(), closed: true });
            end();
        }).on("error", end);
        upstream.on("close", () => {
            messages.push({ conn, dir: "server", t: Date.now(), closed: true });
            end();
        }).on("error", end);
    });
    return new Promise((res, rej) => {
        server.listen(0, "127.0.0.1", () => res({
            port: server.address().port,
            messages,
            close: () => new Promise((r) => {
                for (const s of sockets) s.destroy();
                server.close(() => r());
            }),
        }));
        server.on("error", rej);
    });
}
