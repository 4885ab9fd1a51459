#!/usr/bin/env python3
# gateway_rss.py — the gateway's resident memory with 8 workers and 2 agents
# (issue 27 item 10; not part of `make bench`, it needs python3):
#   bench/gateway_rss.py setup DIR            two workspaces from the tldr corpus
#                                             (common → main, linux → ops), a
#                                             config, both indexes (static provider)
#   bench/gateway_rss.py run DIR CLAWMEM_BIN  `clawmem gateway --workers 8`, 128
#                                             conversations (half routed to ops by
#                                             bindings' accountId), each turn a
#                                             memory_search tool call and a reply
#                                             from a zero-latency model on loopback;
#                                             prints VmRSS/VmHWM once all are answered
import glob, json, os, shutil, socket, subprocess, sys, tarfile, threading, time
import urllib.error, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "tok-rss-measure-0001"
GW_PORT, MODEL_PORT = 18931, 18932
HERE = os.path.dirname(os.path.abspath(__file__))

class Model(BaseHTTPRequestHandler):
    """The first call of a turn asks for memory_search, the next answers."""
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        if any(m.get("role") == "tool" for m in body.get("messages", [])):
            delta, fin = {"content": "ok"}, "stop"
        else:
            call = {"name": "memory_search", "arguments": json.dumps({"query": "list files in a directory"})}
            delta, fin = {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": call}]}, "tool_calls"
        if body.get("stream"):
            out, ctype = "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}) + "\n\ndata: [DONE]\n\n", "text/event-stream"
        else:
            out, ctype = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", **delta}, "finish_reason": fin}]}), "application/json"
        b = out.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype); self.send_header("Content-Length", str(len(b)))
        self.send_header("Connection", "close"); self.end_headers(); self.wfile.write(b)

class ModelServer(ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True

def setup(d):
    tgz = os.path.join(HERE, "..", "..", "shared", "data", "corpora", "tldr.tar.gz")
    os.makedirs(os.path.join(d, "state"), exist_ok=True)
    with tarfile.open(os.environ.get("CLAWMEM_BENCH_TARBALL", tgz)) as t:
        t.extractall(d, [m for m in t.getmembers() if m.name.startswith(("tldr/pages/common/", "tldr/pages/linux/"))])
    for agent, sub in (("main", "common"), ("ops", "linux")):
        ws = os.path.join(d, "ws-" + agent)
        shutil.rmtree(ws, ignore_errors=True)
        shutil.copytree(os.path.join(d, "tldr", "pages", sub), os.path.join(ws, "memory"))
        open(os.path.join(ws, "MEMORY.md"), "w").write("# " + agent + "\n")
    qc = {"gateway": {"port": GW_PORT, "auth": {"token": TOKEN}},
          "agents": {"defaults": {"model": "openai/m"},
                     "list": [{"id": "main", "workspace": d + "/ws-main"}, {"id": "ops", "workspace": d + "/ws-ops"}]},
          "bindings": [{"agentId": "ops", "match": {"channel": "http", "accountId": "ops"}}],
          "models": {"providers": {"openai": {"baseUrl": "http://127.0.0.1:%d/v1" % MODEL_PORT, "apiKey": "sk-rss", "models": []}}},
          "session": {"dmScope": "per-peer"}, "messages": {"inbound": {"debounceMs": 0}}}
    cm = {"agents": {"defaults": {"memorySearch": {"provider": "static"}}},
          "channels": {"http": {"dmPolicy": "open", "allowFrom": ["*"]}},
          "clawmem": {"staticModel": os.path.abspath(os.path.join(HERE, "..", "build", "share", "clawmem", "clawmem-static-100d.bin"))}}
    json.dump(qc, open(os.path.join(d, "state", "quantumclaw.json"), "w"))
    json.dump(cm, open(os.path.join(d, "state", "clawmem.json"), "w"))
    env = dict(os.environ, QUANTUMCLAW_STATE_DIR=d + "/state")
    for agent in ("main", "ops"):
        subprocess.run([os.path.join(HERE, "..", "build", "clawmem"), "--agent", agent, "index"], env=env, check=True)

def run(d, binary):
    shutil.rmtree(d + "/state/gateway", ignore_errors=True)
    for s in glob.glob(d + "/state/agents/*/sessions"): shutil.rmtree(s, ignore_errors=True)
    srv = ModelServer(("127.0.0.1", MODEL_PORT), Model)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = dict(os.environ, QUANTUMCLAW_STATE_DIR=d + "/state")
    log = open(d + "/gateway.log", "w")
    gw = subprocess.Popen([binary, "gateway", "--workers", "8"], env=env, stderr=log, stdout=subprocess.DEVNULL)
    def req(path, body=None):
        r = urllib.request.Request("http://127.0.0.1:%d%s" % (GW_PORT, path),
                                   data=json.dumps(body).encode() if body else None,
                                   headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=30) as f: return json.loads(f.read() or b"{}")
    for _ in range(100):
        try: req("/v1/status"); break
        except Exception: time.sleep(0.1)
    else:
        gw.kill(); sys.exit("the gateway did not start: see " + d + "/gateway.log")
    def status():
        d2 = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/%d/status" % gw.pid)) if k in ("VmRSS", "VmHWM")}
        d2["fds"] = len(os.listdir("/proc/%d/fd" % gw.pid))
        return d2
    idle, n, busy = status(), 128, [0]
    def send(i):
        body = {"peer": "p%d" % i, "sender": "p%d" % i, "messageId": "m%d" % i, "text": "hello"}
        if i % 2: body["account"] = "ops"
        for _ in range(50):
            try: req("/v1/messages", body); return
            except urllib.error.HTTPError as e:
                if e.code != 503: raise
                busy[0] += 1; time.sleep(0.2)
    th = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    [t.start() for t in th]; [t.join() for t in th]
    t0, got = time.time(), 0
    while time.time() - t0 < 120:
        got = sum(len(req("/v1/replies?peer=p%d&after=0%s" % (i, "&account=ops" if i % 2 else "")).get("replies", [])) for i in range(n))
        if got >= n: break
        time.sleep(0.5)
    print(json.dumps({"bin": binary, "answered": got, "idle": idle, "answered_all": status(),
                      "secs": round(time.time() - t0, 1), "post_503": busy[0]}))
    gw.terminate(); gw.wait(30); srv.shutdown()

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "setup": setup(os.path.abspath(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "run": run(os.path.abspath(sys.argv[2]), sys.argv[3])
    else: sys.exit(__doc__ or "usage: gateway_rss.py setup DIR | run DIR CLAWMEM_BIN")
