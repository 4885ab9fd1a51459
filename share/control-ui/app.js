"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";
  var $ = function (id) { return document.getElementById(id); };
  var ws = null, nextId = 1, pending = {}, session = "main", runs = {};
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
    ws = new WebSocket(url);
    status("connecting…");
    ws.onmessage = function (ev) {
      var f; try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f.type === "event" && f.event === "connect.challenge") {
        var id = String(nextId++);
        pending[id] = { ok: function () { status("connected"); $("login").hidden = true; showTab("chat"); },
                        fail: function (e) { status("refused: " + e.message); $("login").hidden = false; } };
        ws.send(JSON.stringify({ type: "req", id: id, method: "connect", params: {
          minProtocol: 3, maxProtocol: 3,
          client: { id: "clawmem-control-ui", version: "1", platform: navigator.platform || "web", mode: "webchat" },
          role: "operator", scopes: ["operator.read", "operator.write"], auth: { token: token } } }));
      } else if (f.type === "res" && pending[f.id]) {
        var p = pending[f.id]; delete pending[f.id];
        if (f.ok) p.ok(f.payload); else p.fail(new Error((f.error && f.error.message) || "error"));
      } else if (f.type === "event" && f.event === "chat") {
        onChat(f.payload);
      }
    };
    ws.onclose = function () { status("disconnected"); ws = null; };
  }
  /* ---- chat ---- */
  function bubble(role, text) {
    var b = el("div", "msg " + role, text);
    $("log").appendChild(b);
    $("log").scrollTop = $("log").scrollHeight;
    return b;
  }
  function canon(k) { return k.indexOf("agent:") === 0 ? k : "agent:main:" + k; }
  function onChat(p) {
    if (!p || canon(p.sessionKey || "") !== canon(session)) return;
    var b = runs[p.runId];
    if (!b) b = runs[p.runId] = bubble("assistant", "");
    if (p.state === "delta" || p.state === "final") b.textContent = textOf(p.message) || b.textContent;
    if (p.state === "error") b.textContent = "error: " + (p.errorMessage || "");
    if (p.state === "aborted") b.textContent += " [stopped]";
    if (p.state !== "delta") { delete runs[p.runId]; $("stop").disabled = true; }
  }
  function loadHistory() {
    $("log").textContent = "";
    call("chat.history", { sessionKey: session, limit: 200 }).then(function (h) {
      (h.messages || []).forEach(function (m) {
        if (m.role === "user" || m.role === "assistant") bubble(m.role, textOf(m));
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
  function loadSessions() {
    var list = $("sessions"); list.textContent = "";
    call("sessions.list", {}).then(function (r) {
      (r.sessions || []).forEach(function (s) {
        var li = el("li"), a = el("button", "link", s.key);
        a.onclick = function () { session = s.key; $("session").value = s.key; showTab("chat"); };
        li.appendChild(a);
        li.appendChild(el("span", "muted", " " + (s.updatedAt ? new Date(s.updatedAt).toLocaleString() : "")));
        list.appendChild(li);
      });
    }, function (e) { list.appendChild(el("li", "error", e.message)); });
  }
  /* ---- gateway ---- */
  function loadGateway() {
    var g = $("gw"); g.textContent = "";
    call("status", {}).then(function (s) {
      g.appendChild(el("p", "", "uptime " + Math.round((s.uptimeMs || 0) / 1000) + " s, active runs " +
        (s.activeRuns || 0) + ", journal backlog " + (s.journalBacklog || 0)));
    });
    call("channels.status", {}).then(function (c) {
      var ul = el("ul");
      (c.channelOrder || []).forEach(function (n) {
        (c.channelAccounts[n] || []).forEach(function (a) {
          ul.appendChild(el("li", a.lastError ? "error" : "", n + "/" + a.accountId +
            (a.lastError ? " — last error: " + a.lastError : " — ok")));
        });
      });
      g.appendChild(ul);
    });
    call("logs.tail", { limit: 200 }).then(function (l) {
      g.appendChild(el("pre", "logs", (l.lines || []).join("\n")));
    });
  }
  function showTab(t) {
    ["chat", "sessions", "gateway"].forEach(function (n) {
      $("tab-" + n).hidden = n !== t;
      $("nav-" + n).setAttribute("aria-current", n === t ? "page" : "false");
    });
    if (!ws) return;
    if (t === "chat") loadHistory();
    if (t === "sessions") loadSessions();
    if (t === "gateway") loadGateway();
  }
  $("nav-chat").onclick = function () { showTab("chat"); };
  $("nav-sessions").onclick = function () { showTab("sessions"); };
  $("nav-gateway").onclick = function () { showTab("gateway"); };
  $("login").onsubmit = function (e) {
    e.preventDefault();
    sessionStorage.setItem("qc.token", $("token").value);
    $("token").value = "";
    if (ws) ws.close();
    connect();
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
  if (sessionStorage.getItem("qc.token") !== null) { $("login").hidden = true; connect(); }
})();
