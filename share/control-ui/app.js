"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";
  var $ = function (id) { return document.getElementById(id); };
  var ws = null, nextId = 1, pending = {}, session = "main", runs = {}, connected = false, tab = "chat";
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function status(t) { $("status").textContent = t; }
  function textOf(m) {
    if (!m) return "";
    if (typeof m.content === "string") return m.content;
    return (m.content || []).map(function (c) { return c.type === "text" ? c.text : ""; }).join("");
  }
  function call(method, params) {
    return new Promise(function (ok, fail) {
      if (!ws || ws.readyState !== 1) return fail(new Error("not connected"));
      var id = String(nextId++);
      pending[id] = { ok: ok, fail: fail };
      ws.send(JSON.stringify({ type: "req", id: id, method: method, params: params || {} }));
    });
  }
  function connect() {
    var token = sessionStorage.getItem("qc.token") || "";
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + base + "/";
    var sock = ws = new WebSocket(url);
    status("connecting…");
    sock.onmessage = function (ev) {
      if (sock !== ws) return;
      var f; try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f.type === "event" && f.event === "connect.challenge") {
        var id = String(nextId++);
        pending[id] = { ok: function () { connected = true; status("connected"); showTab(tab); },
                        fail: function (e) { status("refused: " + e.message); } };
        sock.send(JSON.stringify({ type: "req", id: id, method: "connect", params: {
          minProtocol: 3, maxProtocol: 3,
          client: { id: "clawmem-control-ui", version: "1", platform: navigator.platform || "web", mode: "webchat" },
          role: "operator", scopes: ["operator.read", "operator.write", "operator.admin"],
          caps: ["tool-events"], auth: { token: token } } }));
      } else if (f.type === "res" && pending[f.id]) {
        var p = pending[f.id]; delete pending[f.id];
        if (f.ok) p.ok(f.payload); else p.fail(new Error((f.error && f.error.message) || "error"));
      } else if (f.type === "event" && f.event === "chat") {
        onChat(f.payload);
      } else if (f.type === "event" && f.event === "agent" && f.payload && f.payload.stream === "tool") {
        onTool(f.payload);
      }
    };
    sock.onclose = function () {
      if (sock !== ws) return; /* replaced by a newer connection */
      if (connected) status("disconnected");
      ws = null; connected = false; pending = {};
      showTab(tab);
    };
  }
  /* ---- chat ---- */
  function bubble(role, text) {
    var b = el("div", "msg " + role, text);
    $("log").appendChild(b);
    $("log").scrollTop = $("log").scrollHeight;
    return b;
  }
  function canon(k) { return k.indexOf("agent:") === 0 ? k : "agent:main:" + k; }
  /* A run: its current bubble and how much of the streamed text (which runs
     on across tool calls) earlier bubbles showed. */
  function runOf(id) { return runs[id] || (runs[id] = { b: null, off: 0, cards: {} }); }
  function onChat(p) {
    if (!p || canon(p.sessionKey || "") !== canon(session)) return;
    var r = runOf(p.runId), t = textOf(p.message);
    if (p.state === "delta") t = t.slice(r.off);
    if (!r.b && (t || p.state !== "delta")) r.b = bubble("assistant", "");
    if (p.state === "delta" || p.state === "final") { if (t) r.b.textContent = t; }
    if (p.state === "final" && !r.b.textContent) r.b.remove();
    if (p.state === "error") r.b.textContent = "error: " + (p.errorMessage || "");
    if (p.state === "aborted") r.b.textContent += " [stopped]";
    if (p.state !== "delta") { delete runs[p.runId]; $("stop").disabled = true; }
  }
  /* ---- tool-call cards: the tool, its arguments in a line, the result folded ---- */
  function clip(t, n) { t = String(t); return t.length > n ? t.slice(0, n - 1) + "…" : t; }
  function argLine(a) {
    if (!a || typeof a !== "object") return "";
    return clip(Object.keys(a).map(function (k) {
      var v = a[k];
      return k + ": " + clip(typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v) || "", 60);
    }).join(", "), 160);
  }
  function card(name, args) {
    var d = el("details", "tool"), s = el("summary");
    s.appendChild(el("span", "tname", name));
    s.appendChild(el("span", "targs", argLine(args)));
    s.appendChild(el("span", "tstate", "running…"));
    d.appendChild(s);
    d.appendChild(el("pre", "tresult", ""));
    $("log").appendChild(d);
    $("log").scrollTop = $("log").scrollHeight;
    return d;
  }
  function cardDone(d, text, isError) {
    d.querySelector(".tresult").textContent = text || "(no output)";
    var st = d.querySelector(".tstate");
    st.textContent = isError ? "error" : "done";
    st.className = "tstate " + (isError ? "error" : "ok");
    if (isError) d.classList.add("failed");
  }
  function onTool(p) {
    if (canon(p.sessionKey || "") !== canon(session) || !p.data) return;
    var r = runOf(p.runId), d = p.data, id = d.toolCallId || "";
    if (d.phase === "start") {
      if (r.b) { r.off += r.b.textContent.length; r.b = null; }
      r.cards[id] = card(d.name || "tool", d.args);
    } else if (d.phase === "result") {
      var c = r.cards[id] || (r.cards[id] = card(d.name || "tool", null));
      cardDone(c, textOf(d.result) + (d.truncated ? "\n…" : ""), d.isError);
    }
  }
  function loadHistory() {
    $("log").textContent = "";
    runs = {};
    call("chat.history", { sessionKey: session, limit: 200 }).then(function (h) {
      var cards = {};
      (h.messages || []).forEach(function (m) {
        if (m.role === "user" || m.role === "assistant") {
          var t = textOf(m);
          if (t || m.role === "user") bubble(m.role, t);
        }
        if (m.role === "assistant" && Array.isArray(m.content))
          m.content.forEach(function (c) { if (c.type === "toolCall") cards[c.id] = card(c.name, c.arguments); });
        if (m.role === "toolResult") {
          var d = cards[m.toolCallId] || card(m.toolName || "tool", null);
          cardDone(d, textOf(m), m.isError);
        }
      });
    }, function (e) { bubble("error", e.message); });
  }
  function send(text) {
    var key = "ui-" + Date.now() + "-" + Math.random().toString(16).slice(2);
    bubble("user", text);
    $("stop").disabled = false;
    call("chat.send", { sessionKey: session, message: text, idempotencyKey: key })
      .catch(function (e) { bubble("error", e.message); });
  }
  /* ---- sessions ---- */
  function when(ms) { return ms ? new Date(ms).toLocaleString() : "never"; }
  var OVR = [["label", "sx-label", "label"], ["thinkingLevel", "sx-think", "thinking"],
             ["reasoningLevel", "sx-reason", "reasoning"], ["verboseLevel", "sx-verbose", "verbose"]];
  var editing = null;
  function modelOf(s) {
    return s.modelOverride ? (s.providerOverride ? s.providerOverride + "/" : "") + s.modelOverride : "";
  }
  function editSession(s) {
    editing = s.key;
    $("sx").hidden = false;
    $("sx-title").textContent = "Settings of " + s.key;
    $("sx-status").textContent = "";
    OVR.forEach(function (o) { $(o[1]).value = s[o[0]] || ""; });
    $("sx-model").value = modelOf(s);
    call("models.list", {}).then(function (r) {
      var dl = $("sx-models"); dl.textContent = "";
      (r.models || []).forEach(function (m) {
        var o = el("option"); o.value = (m.provider ? m.provider + "/" : "") + m.id; dl.appendChild(o);
      });
    }, function () {});
    $("sx-label").focus();
  }
  function loadSessions() {
    var list = $("sessions"); list.textContent = "";
    call("sessions.list", {}).then(function (r) {
      if (!(r.sessions || []).length) list.appendChild(el("li", "muted", "no sessions yet"));
      (r.sessions || []).forEach(function (s, i) {
        var li = el("li"), a = el("button", "link", s.key);
        a.onclick = function () { session = s.key; $("session").value = s.key; showTab("chat"); };
        li.appendChild(a);
        if (s.label) li.appendChild(el("strong", "", " " + s.label));
        var facts = [s.chatType || s.kind, "last activity " + when(s.updatedAt)];
        if (typeof s.totalTokens === "number") facts.push(s.totalTokens.toLocaleString() + " tokens");
        if (s.model) facts.push("model " + (s.modelProvider ? s.modelProvider + "/" : "") + s.model);
        li.appendChild(el("span", "muted", facts.join(" · ")));
        var ov = [];
        if (modelOf(s)) ov.push("model " + modelOf(s));
        OVR.slice(1).forEach(function (o) { if (s[o[0]]) ov.push(o[2] + " " + s[o[0]]); });
        li.appendChild(el("span", "muted overrides", "overrides: " + (ov.join(" · ") || "none")));
        var b = el("button", "", "Settings");
        b.id = "edit-" + i;
        b.setAttribute("aria-label", "settings of " + s.key);
        b.onclick = function () { editSession(s); };
        var tb = el("button", "", "Transcript");
        tb.id = "tx-" + i;
        tb.setAttribute("aria-label", "transcript of " + s.key);
        tb.onclick = function () { openTranscript(s.key); };
        var row = el("div", "actions"); row.appendChild(b); row.appendChild(tb); li.appendChild(row);
        list.appendChild(li);
      });
    }, function (e) { list.appendChild(el("li", "error", e.message)); });
  }
  $("sx").onsubmit = function (e) {
    e.preventDefault();
    if (!editing) return;
    var p = { key: editing };
    OVR.forEach(function (o) { var v = $(o[1]).value.trim(); p[o[0]] = v || null; });
    p.model = $("sx-model").value.trim() || null;
    $("sx-status").textContent = "saving…";
    call("sessions.patch", p).then(function () {
      $("sx-status").textContent = "saved"; loadSessions();
    }, function (e) { $("sx-status").textContent = e.message; });
  };
  $("sx-reset").onclick = function () {
    if (!editing) return;
    call("sessions.reset", { key: editing, reason: "reset" }).then(function (r) {
      $("sx-status").textContent = "reset: new session " + ((r.entry && r.entry.sessionId) || "");
      loadSessions();
    }, function (e) { $("sx-status").textContent = e.message; });
  };
  $("sx-close").onclick = function () { $("sx").hidden = true; editing = null; };
  /* ---- a session's transcript as the store holds it: messages, tool calls,
     compactions and memory flushes marked ---- */
  function recText(m) {
    var t = textOf(m);
    if (!t && Array.isArray(m.content))
      t = m.content.filter(function (c) { return c.type === "toolCall"; })
        .map(function (c) { return "→ " + c.name + " " + argLine(c.arguments); }).join("\n");
    return clip(t, 600);
  }
  function marker(cls, title, detail) {
    var li = el("li", "marker " + cls), d = el("details"), s = el("summary", "", title);
    d.appendChild(s);
    if (detail) d.appendChild(el("p", "snippet", detail));
    li.appendChild(d);
    return li;
  }
  function openTranscript(key) {
    $("tx").hidden = false;
    $("tx-title").textContent = "Transcript of " + key;
    $("tx-meta").textContent = "loading…";
    var ol = $("tx-records"); ol.textContent = "";
    call("clawmem.sessions.transcript", { key: key, limit: 500 }).then(function (r) {
      var recs = r.records || [], flushes = 0, comps = 0, inFlush = false;
      recs.forEach(function (x) {
        var m = x.message, when = x.timestamp ? new Date(x.timestamp).toLocaleString() : "";
        if (x.type === "compaction") {
          comps++;
          ol.appendChild(marker("compaction", "Compaction · " + Number(x.tokensBefore || 0).toLocaleString() +
            " tokens summarised · " + when, x.summary || ""));
          inFlush = false;
          return;
        }
        if (x.flush && !inFlush) {
          flushes++;
          ol.appendChild(marker("flush", "Memory flush · " + when,
            "A silent turn before compaction: the agent saved what should last to memory/."));
        }
        inFlush = !!x.flush;
        if (x.type === "message" && m) {
          var li = el("li", "rec " + (m.role || "") + (x.flush ? " in-flush" : ""));
          li.appendChild(el("span", "role", m.role === "toolResult" ? "tool " + (m.toolName || "") : m.role));
          li.appendChild(el("span", "rtext", x.omitted ? "(too large to show)" : recText(m)));
          ol.appendChild(li);
        } else if (x.omitted) {
          ol.appendChild(el("li", "rec muted", x.type + " (too large to show)"));
        } else if (x.type !== "message") {
          var what = x.type === "session" ? "session started " + when :
            x.type === "model_change" ? "model " + (x.provider ? x.provider + "/" : "") + (x.modelId || "") :
            x.type === "thinking_level_change" ? "thinking " + (x.thinkingLevel || "") : x.type;
          ol.appendChild(el("li", "rec meta muted", what));
        }
      });
      $("tx-meta").textContent = recs.length + " records" + (r.omitted ? " (" + r.omitted + " older not shown)" : "") +
        " · " + comps + " compaction" + (comps === 1 ? "" : "s") + " · " + flushes + " memory flush" +
        (flushes === 1 ? "" : "es") + " · compactionCount " + (r.compactionCount || 0);
      if (!recs.length) ol.appendChild(el("li", "muted", "no transcript yet"));
    }, function (e) { $("tx-meta").textContent = e.message; });
  }
  $("tx-close").onclick = function () { $("tx").hidden = true; };
  /* ---- gateway: the summary, channels and a live log tail ---- */
  var logCursor = null, logTimer = null;
  function pollLog() {
    if (!connected || tab !== "gateway") return;
    var params = { limit: 200 };
    if (logCursor !== null) params.cursor = logCursor;
    call("logs.tail", params).then(function (l) {
      var pre = $("gw-log");
      if (l.reset || logCursor === null) pre.textContent = "";
      logCursor = l.cursor;
      if ((l.lines || []).length) {
        var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.appendChild(document.createTextNode(l.lines.join("\n") + "\n"));
        if (atEnd) pre.scrollTop = pre.scrollHeight;
      } else if (!pre.textContent) {
        pre.textContent = "(no log lines yet)\n";
      }
    }, function () {});
  }
  function loadGateway() {
    $("gw-summary").textContent = "";
    $("gw-channels").textContent = "";
    call("status", {}).then(function (s) {
      $("gw-summary").textContent = "Up " + Math.round((s.uptimeMs || 0) / 1000) + " s · " +
        (s.activeRuns || 0) + " active runs · journal backlog " + (s.journalBacklog || 0);
    }, function (e) { $("gw-summary").textContent = e.message; });
    call("channels.status", {}).then(function (c) {
      var ul = $("gw-channels");
      (c.channelOrder || []).forEach(function (n) {
        ((c.channelAccounts || {})[n] || []).forEach(function (a) {
          var li = el("li");
          li.appendChild(el("strong", "", n + " / " + a.accountId + " "));
          li.appendChild(el("span", a.lastError ? "error" : "ok", a.lastError ? "error" : (a.running ? "running" : "stopped")));
          if (a.lastError) li.appendChild(el("span", "muted", "last error: " + a.lastError));
          if (a.lastEventAt) li.appendChild(el("span", "muted", "last update " + when(a.lastEventAt)));
          ul.appendChild(li);
        });
      });
    }, function (e) { $("gw-channels").appendChild(el("li", "error", e.message)); });
    logCursor = null;
    pollLog();
    if (!logTimer) logTimer = setInterval(pollLog, 2000);
  }
  /* ---- access: pending pairing requests, allow-from lists (clawmem.pairing.*) ---- */
  var pageTimer = null;
  function resolveReq(ch, r, approve) {
    call(approve ? "clawmem.pairing.approve" : "clawmem.pairing.deny",
         { channel: ch, code: r.code, accountId: r.accountId })
      .then(function () { loadAccess(true); },
            function (e) { loadAccess(true, e.message); });
  }
  var accessSeen = "";
  function loadAccess(force, note) {
    call("clawmem.pairing.list", {}).then(function (r) {
      /* re-drawn only when something changed: a focused button keeps its focus */
      var seen = JSON.stringify(r.channels || []);
      if (!force && seen === accessSeen) return;
      accessSeen = seen;
      $("ac-status").textContent = note || "";
      var reqs = $("ac-requests"), allow = $("ac-allow"), n = 0;
      reqs.textContent = ""; allow.textContent = "";
      (r.channels || []).forEach(function (c) {
        (c.requests || []).forEach(function (q) {
          var li = el("li"); n++;
          li.appendChild(el("strong", "", c.channel + " "));
          li.appendChild(el("span", "code", q.code));
          li.appendChild(el("span", "muted", "sender " + q.id + " · account " + q.accountId +
            " · asked " + when(Date.parse(q.createdAt))));
          var row = el("div", "actions"), ok = el("button", "", "Approve"), no = el("button", "", "Deny");
          ok.id = "approve-" + q.code; no.id = "deny-" + q.code;
          ok.setAttribute("aria-label", "approve " + q.id + " on " + c.channel);
          no.setAttribute("aria-label", "deny " + q.id + " on " + c.channel);
          ok.onclick = function () { ok.disabled = no.disabled = true; resolveReq(c.channel, q, true); };
          no.onclick = function () { ok.disabled = no.disabled = true; resolveReq(c.channel, q, false); };
          row.appendChild(ok); row.appendChild(no); li.appendChild(row);
          reqs.appendChild(li);
        });
        var li = el("li");
        li.appendChild(el("strong", "", c.channel + " "));
        li.appendChild(el("span", "muted", "dmPolicy " + c.dmPolicy + " · allowFrom (config): " +
          ((c.allowFrom || []).join(", ") || "none")));
        (c.accounts || []).forEach(function (a) {
          li.appendChild(el("span", "muted", "approved (" + a.accountId + "): " +
            ((a.approved || []).join(", ") || "none")));
        });
        allow.appendChild(li);
      });
      if (!n) reqs.appendChild(el("li", "muted", "no pending requests"));
      if (!(r.channels || []).length) allow.appendChild(el("li", "muted", "no channels configured"));
    }, function (e) { $("ac-requests").textContent = ""; $("ac-requests").appendChild(el("li", "error", e.message)); });
  }
  /* ---- models: the chain, auth profiles with cooldowns counting down ---- */
  var skew = 0;
  function left(ms) {
    var s = Math.max(0, Math.ceil(ms / 1000)), h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60);
    return h ? h + " h " + m + " min" : m ? m + " min " + (s % 60) + " s" : s + " s";
  }
  function tick() {
    var now = Date.now() + skew;
    [].forEach.call(document.querySelectorAll("#md-providers .cd"), function (e) {
      var until = Number(e.getAttribute("data-until"));
      e.textContent = until > now ? e.getAttribute("data-what") + " " + left(until - now) : "ready";
    });
  }
  function loadModels() {
    call("clawmem.models.status", {}).then(function (r) {
      skew = (r.ts || Date.now()) - Date.now();
      $("md-chain").textContent = "Chain: " + ((r.chain || []).join(" → ") || "none") +
        ((r.imageChain || []).length ? " · images: " + r.imageChain.join(" → ") : "");
      $("md-store").textContent = "Auth store: " + (r.authStore || "");
      var ul = $("md-providers"); ul.textContent = "";
      Object.keys(r.providers || {}).forEach(function (name) {
        var p = r.providers[name], li = el("li");
        li.appendChild(el("strong", "", name + " "));
        li.appendChild(el("span", "muted", (p.api || "") + (p.baseUrl ? " · " + p.baseUrl : "")));
        if (!(p.profiles || []).length) li.appendChild(el("span", "muted", "no auth profiles (a key from the config or the environment)"));
        (p.profiles || []).forEach(function (a, i) {
          var row = el("div", "profile");
          row.appendChild(el("span", "", (i + 1) + ". " + a.id + " [" + a.type + "] "));
          var st = el("span", a.unusableUntil ? "cd" : "ok", "ready");
          if (a.unusableUntil) {
            st.setAttribute("data-until", String(a.unusableUntil));
            st.setAttribute("data-what", a.disabledReason ? "disabled (" + a.disabledReason + ") for" : "cooldown");
          }
          row.appendChild(st);
          var facts = [a.errorCount + " error" + (a.errorCount === 1 ? "" : "s")];
          if (a.failureCounts) facts.push("failures: " + Object.keys(a.failureCounts).map(function (k) {
            return k + " ×" + a.failureCounts[k]; }).join(", "));
          if (a.lastFailureAt) facts.push("last error " + when(a.lastFailureAt));
          facts.push("last used " + when(a.lastUsed));
          row.appendChild(el("span", "muted", facts.join(" · ")));
          li.appendChild(row);
        });
        ul.appendChild(li);
      });
      tick();
    }, function (e) { $("md-chain").textContent = e.message; });
  }
  /* Tokens per provider/model summed over the transcripts' assistant messages
     (clawmem.models.usage): read when the page opens, not on the 5 s timer. */
  function loadUsage() {
    var t = $("md-usage"), meta = $("md-usage-meta");
    call("clawmem.models.usage", {}).then(function (r) {
      t.textContent = "";
      var ms = r.models || [], n = function (x) { return Number(x || 0).toLocaleString("en-US"); };
      meta.textContent = "from " + (r.files || 0) + " transcript" + (r.files === 1 ? "" : "s") +
        (r.partialFiles ? " (" + r.partialFiles + " read in part: the last 4 MB)" : "") +
        (r.truncated ? " · more transcripts left unread (64 MB read)" : "");
      if (!ms.length) { meta.textContent += " · no usage recorded yet"; return; }
      var head = el("tr");
      ["Model", "Replies", "Input", "Output", "Cache read", "Cache write", "Total", "Cost"].forEach(function (h) {
        head.appendChild(el("th", "", h));
      });
      t.appendChild(head);
      ms.forEach(function (m) {
        var tr = el("tr");
        tr.setAttribute("data-model", (m.provider ? m.provider + "/" : "") + m.model);
        [(m.provider ? m.provider + "/" : "") + m.model, n(m.messages), n(m.input), n(m.output),
          n(m.cacheRead), n(m.cacheWrite), n(m.totalTokens),
          m.cost > 0 ? "$" + Number(m.cost).toFixed(4) : "—"].forEach(function (v, i) {
          tr.appendChild(el("td", i ? "num" : "", v));
        });
        t.appendChild(tr);
      });
    }, function (e) { meta.textContent = e.message; });
  }
  /* ---- memory (clawmem's memory.search / memory.get) ---- */
  function search(q) {
    var list = $("mresults"); list.textContent = ""; $("mmeta").textContent = "searching…";
    call("memory.search", { query: q, maxResults: 10 }).then(function (r) {
      var res = r.results || [];
      $("mmeta").textContent = res.length + " result" + (res.length === 1 ? "" : "s") +
        " · " + (r.mode || "") + (r.provider ? " · " + r.provider : "") + (r.error ? " · " + r.error : "");
      res.forEach(function (h) {
        var li = el("li");
        li.appendChild(el("span", "score", "score " + Number(h.score).toFixed(3)));
        var a = el("button", "link", h.path + ":" + h.startLine + "-" + h.endLine);
        a.onclick = function () { openNote(h.path, h.startLine, h.endLine); };
        li.appendChild(a);
        if (h.citation) li.appendChild(el("span", "muted", h.citation));
        li.appendChild(el("p", "snippet", h.snippet || ""));
        list.appendChild(li);
      });
    }, function (e) { $("mmeta").textContent = ""; list.appendChild(el("li", "error", e.message)); });
  }
  function openNote(path, from, to) {
    $("note").hidden = false;
    $("note-title").textContent = path;
    var pre = $("note-text"); pre.textContent = "";
    call("memory.get", { path: path }).then(function (r) {
      var lines = (r.text || "").split("\n"), first = null;
      if (!r.text) pre.textContent = "(empty or missing)";
      lines.forEach(function (t, i) {
        var n = i + 1, hit = from && n >= from && n <= (to || from);
        var row = el("span", hit ? "line hit" : "line");
        row.appendChild(el("span", "ln", String(n).padStart(4, " ") + "  "));
        row.appendChild(document.createTextNode(t));
        pre.appendChild(row);
        if (hit && !first) first = row;
      });
      if (first) pre.scrollTop = first.offsetTop - pre.offsetTop - 20;
    }, function (e) { pre.textContent = e.message; });
  }
  function daily(back) {
    var d = new Date(Date.now() - back * 86400000);
    var p = function (n) { return String(n).padStart(2, "0"); };
    openNote("memory/" + d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + ".md");
  }
  $("msearch").onsubmit = function (e) {
    e.preventDefault();
    var q = $("mquery").value.trim();
    if (q) search(q);
  };
  /* ---- the plot of what the index holds: chunks by month, a bar per source ---- */
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function loadPlot() {
    var box = $("mplot"), leg = $("mplot-legend");
    call("clawmem.memory.plot", {}).then(function (r) {
      box.textContent = ""; leg.textContent = "";
      var rows = r.months || [], months = [], sources = [];
      rows.forEach(function (x) {
        if (months.indexOf(x.month) < 0) months.push(x.month);
        if (sources.indexOf(x.source) < 0) sources.push(x.source);
      });
      months.sort();
      $("mplot-meta").textContent = (r.files || 0) + " files · " + (r.chunks || 0) + " chunks" +
        (months.length ? " · " + months[0] + (months.length > 1 ? " to " + months[months.length - 1] : "") : "");
      if (!rows.length) { box.appendChild(el("p", "muted", "the index is empty")); return; }
      var max = 1;
      rows.forEach(function (x) { max = Math.max(max, x.chunks); });
      var bw = 18, gap = 14, top = 16, h = 140, lab = 34;
      var gw = Math.max(52, sources.length * bw + gap), width = Math.max(320, 48 + months.length * gw);
      var s = svg("svg", { viewBox: "0 0 " + width + " " + (top + h + lab), width: width,
        height: top + h + lab, role: "img",
        "aria-label": "chunks and files by month and source" });
      s.appendChild(svg("line", { x1: 36, y1: top + h, x2: width, y2: top + h, "class": "axis" }));
      s.appendChild(svg("text", { x: 32, y: top + 4, "class": "tick", "text-anchor": "end" }, String(max)));
      s.appendChild(svg("text", { x: 32, y: top + h, "class": "tick", "text-anchor": "end" }, "0"));
      months.forEach(function (mo, i) {
        var x0 = 44 + i * gw + (gw - gap - sources.length * bw) / 2;
        sources.forEach(function (src, j) {
          var row = rows.filter(function (x) { return x.month === mo && x.source === src; })[0];
          if (!row) return;
          var bh = Math.max(1, Math.round(row.chunks / max * h));
          var b = svg("rect", { x: x0 + j * bw, y: top + h - bh, width: bw - 3, height: bh,
            "class": "bar s" + (j % 4), "data-source": src, "data-month": mo,
            "data-chunks": row.chunks, "data-files": row.files });
          b.appendChild(svg("title", {}, src + " · " + mo + ": " + row.files + " file" +
            (row.files === 1 ? "" : "s") + ", " + row.chunks + " chunk" + (row.chunks === 1 ? "" : "s")));
          s.appendChild(b);
          s.appendChild(svg("text", { x: x0 + j * bw + (bw - 3) / 2, y: top + h - bh - 3, "class": "val",
            "text-anchor": "middle" }, String(row.files)));
        });
        s.appendChild(svg("text", { x: x0 + sources.length * bw / 2, y: top + h + 14, "class": "tick",
          "text-anchor": "middle" }, mo));
      });
      box.appendChild(s);
      sources.forEach(function (src, j) {
        var k = el("span", "key");
        k.appendChild(el("span", "swatch s" + (j % 4)));
        k.appendChild(document.createTextNode(src));
        leg.appendChild(k);
      });
      leg.appendChild(el("span", "muted", "bar height: chunks · number: files"));
    }, function (e) { box.textContent = ""; box.appendChild(el("p", "error", e.message)); });
  }
  /* ---- the index's status (clawmem status --json): counts, provider, problems ---- */
  function loadStatus() {
    var st = $("mstatus"), ul = $("mproblems");
    call("clawmem.memory.status", {}).then(function (r) {
      st.textContent = ""; ul.textContent = "";
      var pr = r.problems || [], parts = [(r.files || 0) + " files", (r.chunks || 0) + " chunks",
        "provider " + (r.provider || "none") + (r.model ? " (" + r.model + ")" : ""),
        (r.search || "") + " search", pr.length + " problem" + (pr.length === 1 ? "" : "s")];
      st.appendChild(el("span", "", parts.join(" · ")));
      if (r.providerNote) st.appendChild(el("span", "muted", " · " + r.providerNote));
      [r.indexError, r.lastError].forEach(function (t) {
        if (t) st.appendChild(el("span", "error", " · " + t));
      });
      pr.forEach(function (x) {
        var li = el("li", "problem");
        li.appendChild(el("strong", "", x.path || ""));
        li.appendChild(el("span", "muted", x.problem || ""));
        ul.appendChild(li);
      });
    }, function (e) { st.textContent = ""; st.appendChild(el("span", "error", e.message)); });
  }
  $("today").onclick = function () { daily(0); };
  $("yesterday").onclick = function () { daily(1); };
  $("nav-memory").onclick = function () { showTab("memory"); };
  var TABS = ["chat", "sessions", "memory", "access", "models", "gateway"];
  /* Every page needs the token: until the gateway accepted it only the login
     form shows. */
  function showTab(t) {
    tab = t;
    $("login").hidden = connected;
    TABS.forEach(function (n) {
      $("tab-" + n).hidden = !connected || n !== t;
      $("nav-" + n).setAttribute("aria-current", n === t ? "page" : "false");
    });
    if (t !== "gateway" && logTimer) { clearInterval(logTimer); logTimer = null; }
    if (pageTimer) { clearInterval(pageTimer); pageTimer = null; }
    if (!connected) { $("token").focus(); return; }
    if (t === "chat") loadHistory();
    if (t === "sessions") loadSessions();
    if (t === "memory") { $("mquery").focus(); loadStatus(); loadPlot(); }
    if (t === "gateway") loadGateway();
    if (t === "access") { loadAccess(true); pageTimer = setInterval(function () { if (connected) loadAccess(); }, 3000); }
    if (t === "models") {
      loadModels();
      loadUsage();
      var n = 0;
      pageTimer = setInterval(function () { if (!connected) return; if (++n % 5) tick(); else loadModels(); }, 1000);
    }
  }
  $("nav-chat").onclick = function () { showTab("chat"); };
  $("nav-sessions").onclick = function () { showTab("sessions"); };
  $("nav-gateway").onclick = function () { showTab("gateway"); };
  $("nav-access").onclick = function () { showTab("access"); };
  $("nav-models").onclick = function () { showTab("models"); };
  $("login").onsubmit = function (e) {
    e.preventDefault();
    sessionStorage.setItem("qc.token", $("token").value);
    $("token").value = "";
    var old = ws;
    connected = false;
    connect();
    if (old) old.close();
  };
  $("composer").onsubmit = function (e) {
    e.preventDefault();
    var t = $("text").value.trim();
    if (!t) return;
    $("text").value = "";
    send(t);
  };
  $("stop").onclick = function () { call("chat.abort", { sessionKey: session }); };
  $("new").onclick = function () { send("/new"); };
  $("session").onchange = function () { session = $("session").value.trim() || "main"; loadHistory(); };
  if (sessionStorage.getItem("qc.token") !== null) connect(); else showTab(tab);
})();
