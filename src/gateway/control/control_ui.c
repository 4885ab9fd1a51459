/*
 * control_ui.c — the Control UI: one page (Chat, Sessions, Gateway), its
 * stylesheet, script and icon, embedded here so the binary needs no asset at run
 * time and works offline. Served under gateway.controlUi.basePath with a
 * strict Content-Security-Policy (nothing inline, nothing from elsewhere);
 * the page talks to the gateway over the WebSocket of gw_ws.c and keeps the
 * token the user enters in the tab's sessionStorage only. The assets'
 * sources are under share/control-ui/ (this file is generated from them by
 * scripts/embed-control-ui.py).
 */
#include <ctype.h>

#include "gw_ws_int.h"

/* clang-format off */
static const char S_html[] =
    "<!doctype html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>clawmem Control UI</title>\n"
    "<link rel=\"icon\" href=\"@BASE@/favicon.svg\" type=\"image/svg+xml\">\n"
    "<link rel=\"stylesheet\" href=\"@BASE@/app.css\">\n"
    "</head>\n"
    "<body data-base=\"@BASE@\">\n"
    "<header>\n"
    "<h1>clawmem</h1>\n"
    "<nav aria-label=\"pages\"><button id=\"nav-chat\" type=\"button\">Chat</button><button id=\"nav-sessions\" type=\"button\">Sessions</button><button id=\"nav-memory\" type=\"button\">Memory</button><button id=\"nav-gateway\" type=\"button\">Gateway</button></nav>\n"
    "<span id=\"status\" role=\"status\">not connected</span>\n"
    "</header>\n"
    "<main>\n"
    "<form id=\"login\">\n"
    "<p class=\"muted\">Every page needs the gateway token (<code>gateway.auth.token</code>). It is kept in this tab only.</p>\n"
    "<div class=\"row\"><input id=\"token\" type=\"password\" autocomplete=\"off\" placeholder=\"gateway token\" aria-label=\"gateway token\"><button type=\"submit\">Connect</button></div>\n"
    "</form>\n"
    "<section id=\"tab-chat\" hidden>\n"
    "<form id=\"pick\" class=\"row\"><label for=\"session\">Session</label><input id=\"session\" value=\"main\"><button id=\"new\" type=\"button\" title=\"start a new session\">/new</button></form>\n"
    "<div id=\"log\" aria-live=\"polite\"></div>\n"
    "<form id=\"composer\" class=\"row\"><input id=\"text\" autocomplete=\"off\" placeholder=\"Message\" aria-label=\"message\"><button type=\"submit\">Send</button><button id=\"stop\" type=\"button\" disabled>Stop</button></form>\n"
    "</section>\n"
    "<section id=\"tab-sessions\" hidden><h2>Sessions</h2><ul id=\"sessions\" class=\"cards\"></ul></section>\n"
    "<section id=\"tab-memory\" hidden><h2>Memory</h2>\n"
    "<form id=\"msearch\" class=\"row\"><input id=\"mquery\" type=\"search\" autocomplete=\"off\" placeholder=\"Search the memory files\" aria-label=\"memory search\"><button type=\"submit\">Search</button></form>\n"
    "<p class=\"row muted\">Daily notes: <button id=\"today\" type=\"button\" class=\"link\">today</button> <button id=\"yesterday\" type=\"button\" class=\"link\">yesterday</button></p>\n"
    "<p id=\"mmeta\" class=\"muted\"></p><ul id=\"mresults\" class=\"cards\"></ul>\n"
    "<div id=\"note\" hidden><h3 id=\"note-title\"></h3><pre id=\"note-text\" class=\"note\" tabindex=\"0\"></pre></div></section>\n"
    "<section id=\"tab-gateway\" hidden><h2>Gateway</h2><p id=\"gw-summary\"></p><h3>Channels</h3><ul id=\"gw-channels\" class=\"cards\"></ul><h3>Log</h3><pre id=\"gw-log\" class=\"logs\" tabindex=\"0\" aria-label=\"gateway log\"></pre></section>\n"
    "</main>\n"
    "<script src=\"@BASE@/app.js\"></script>\n"
    "</body>\n"
    "</html>\n"
    "\n";

static const char S_css[] =
    "[hidden]{display:none!important}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:15px/1.4 system-ui,sans-serif;color:#1b1b1b;background:#f6f6f4}\n"
    "header{display:flex;flex-wrap:wrap;gap:.2em .5em;align-items:center;padding:.4em .8em;background:#20303c;color:#fff}\n"
    "header h1{font-size:1em;margin:0 .6em 0 0}\n"
    "nav{display:flex;flex-wrap:wrap}\n"
    "nav button{background:none;border:0;border-bottom:2px solid transparent;border-radius:0;color:#cfe;font:inherit;padding:.3em .5em;cursor:pointer}\n"
    "nav button[aria-current=page]{color:#fff;border-bottom-color:#fff}\n"
    "#status{margin-left:auto;font-size:.85em;opacity:.85}\n"
    "main{max-width:56em;margin:0 auto;padding:.8em}\n"
    "h2{font-size:1.15em;margin:.2em 0 .5em}\n"
    "h3{font-size:1em;margin:1em 0 .3em}\n"
    ".row{display:flex;gap:.4em;align-items:center}\n"
    ".row label{font-size:.9em;color:#444}\n"
    "input,button{font:inherit;padding:.45em .6em;border:1px solid #aaa;border-radius:4px;background:#fff}\n"
    "button{background:#eef1f3;cursor:pointer}\n"
    "button:disabled{opacity:.5;cursor:default}\n"
    "input{flex:1;min-width:0}\n"
    ":focus-visible{outline:2px solid #2a7ab0;outline-offset:1px}\n"
    "code{font-size:.9em}\n"
    "#log{height:calc(100vh - 13em);min-height:14em;overflow-y:auto;background:#fff;border:1px solid #ddd;border-radius:4px;padding:.5em;margin:.5em 0;display:flex;flex-direction:column}\n"
    ".msg{white-space:pre-wrap;overflow-wrap:anywhere;margin:.25em 0;padding:.4em .65em;border-radius:8px;max-width:88%;width:fit-content}\n"
    ".user{background:#dceefc;align-self:flex-end}\n"
    ".assistant{background:#eee;align-self:flex-start}\n"
    ".error{color:#a00}\n"
    ".muted{color:#666;font-size:.85em}\n"
    ".cards{list-style:none;padding:0;margin:0}\n"
    ".cards li{background:#fff;border:1px solid #ddd;border-radius:4px;padding:.45em .65em;margin:.35em 0;overflow-wrap:anywhere}\n"
    ".cards .muted{display:block}\n"
    ".link{border:0;background:none;color:#036;text-decoration:underline;padding:0;cursor:pointer;text-align:left;overflow-wrap:anywhere}\n"
    ".ok{color:#1a6b2d}\n"
    ".logs{background:#111;color:#ddd;padding:.5em;margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.8em;max-height:50vh;overflow-y:auto}\n"
    ".score{float:right;font-variant-numeric:tabular-nums;color:#555;font-size:.85em}\n"
    ".snippet{white-space:pre-wrap;margin:.3em 0 0;font-size:.9em;color:#333}\n"
    ".note{background:#fff;border:1px solid #ddd;border-radius:4px;padding:.5em;margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em;max-height:60vh;overflow-y:auto}\n"
    ".note .line{display:block;min-height:1.2em}\n"
    ".note .hit{background:#fff3b0}\n"
    ".note .ln{color:#999;user-select:none}\n"
    "\n";

static const char S_js[] =
    "\"use strict\";\n"
    "(function () {\n"
    "  var base = document.body.getAttribute(\"data-base\") || \"\";\n"
    "  var $ = function (id) { return document.getElementById(id); };\n"
    "  var ws = null, nextId = 1, pending = {}, session = \"main\", runs = {}, connected = false, tab = \"chat\";\n"
    "  function el(tag, cls, text) {\n"
    "    var e = document.createElement(tag);\n"
    "    if (cls) e.className = cls;\n"
    "    if (text !== undefined) e.textContent = text;\n"
    "    return e;\n"
    "  }\n"
    "  function status(t) { $(\"status\").textContent = t; }\n"
    "  function textOf(m) {\n"
    "    if (!m) return \"\";\n"
    "    if (typeof m.content === \"string\") return m.content;\n"
    "    return (m.content || []).map(function (c) { return c.type === \"text\" ? c.text : \"\"; }).join(\"\");\n"
    "  }\n"
    "  function call(method, params) {\n"
    "    return new Promise(function (ok, fail) {\n"
    "      if (!ws || ws.readyState !== 1) return fail(new Error(\"not connected\"));\n"
    "      var id = String(nextId++);\n"
    "      pending[id] = { ok: ok, fail: fail };\n"
    "      ws.send(JSON.stringify({ type: \"req\", id: id, method: method, params: params || {} }));\n"
    "    });\n"
    "  }\n"
    "  function connect() {\n"
    "    var token = sessionStorage.getItem(\"qc.token\") || \"\";\n"
    "    var url = (location.protocol === \"https:\" ? \"wss://\" : \"ws://\") + location.host + base + \"/\";\n"
    "    var sock = ws = new WebSocket(url);\n"
    "    status(\"connecting…\");\n"
    "    sock.onmessage = function (ev) {\n"
    "      if (sock !== ws) return;\n"
    "      var f; try { f = JSON.parse(ev.data); } catch (e) { return; }\n"
    "      if (f.type === \"event\" && f.event === \"connect.challenge\") {\n"
    "        var id = String(nextId++);\n"
    "        pending[id] = { ok: function () { connected = true; status(\"connected\"); showTab(tab); },\n"
    "                        fail: function (e) { status(\"refused: \" + e.message); } };\n"
    "        sock.send(JSON.stringify({ type: \"req\", id: id, method: \"connect\", params: {\n"
    "          minProtocol: 3, maxProtocol: 3,\n"
    "          client: { id: \"clawmem-control-ui\", version: \"1\", platform: navigator.platform || \"web\", mode: \"webchat\" },\n"
    "          role: \"operator\", scopes: [\"operator.read\", \"operator.write\"], auth: { token: token } } }));\n"
    "      } else if (f.type === \"res\" && pending[f.id]) {\n"
    "        var p = pending[f.id]; delete pending[f.id];\n"
    "        if (f.ok) p.ok(f.payload); else p.fail(new Error((f.error && f.error.message) || \"error\"));\n"
    "      } else if (f.type === \"event\" && f.event === \"chat\") {\n"
    "        onChat(f.payload);\n"
    "      }\n"
    "    };\n"
    "    sock.onclose = function () {\n"
    "      if (sock !== ws) return; /* replaced by a newer connection */\n"
    "      if (connected) status(\"disconnected\");\n"
    "      ws = null; connected = false; pending = {};\n"
    "      showTab(tab);\n"
    "    };\n"
    "  }\n"
    "  /* ---- chat ---- */\n"
    "  function bubble(role, text) {\n"
    "    var b = el(\"div\", \"msg \" + role, text);\n"
    "    $(\"log\").appendChild(b);\n"
    "    $(\"log\").scrollTop = $(\"log\").scrollHeight;\n"
    "    return b;\n"
    "  }\n"
    "  function canon(k) { return k.indexOf(\"agent:\") === 0 ? k : \"agent:main:\" + k; }\n"
    "  function onChat(p) {\n"
    "    if (!p || canon(p.sessionKey || \"\") !== canon(session)) return;\n"
    "    var b = runs[p.runId];\n"
    "    if (!b) b = runs[p.runId] = bubble(\"assistant\", \"\");\n"
    "    if (p.state === \"delta\" || p.state === \"final\") b.textContent = textOf(p.message) || b.textContent;\n"
    "    if (p.state === \"error\") b.textContent = \"error: \" + (p.errorMessage || \"\");\n"
    "    if (p.state === \"aborted\") b.textContent += \" [stopped]\";\n"
    "    if (p.state !== \"delta\") { delete runs[p.runId]; $(\"stop\").disabled = true; }\n"
    "  }\n"
    "  function loadHistory() {\n"
    "    $(\"log\").textContent = \"\";\n"
    "    call(\"chat.history\", { sessionKey: session, limit: 200 }).then(function (h) {\n"
    "      (h.messages || []).forEach(function (m) {\n"
    "        if (m.role === \"user\" || m.role === \"assistant\") bubble(m.role, textOf(m));\n"
    "      });\n"
    "    }, function (e) { bubble(\"error\", e.message); });\n"
    "  }\n"
    "  function send(text) {\n"
    "    var key = \"ui-\" + Date.now() + \"-\" + Math.random().toString(16).slice(2);\n"
    "    bubble(\"user\", text);\n"
    "    $(\"stop\").disabled = false;\n"
    "    call(\"chat.send\", { sessionKey: session, message: text, idempotencyKey: key })\n"
    "      .catch(function (e) { bubble(\"error\", e.message); });\n"
    "  }\n"
    "  /* ---- sessions ---- */\n"
    "  function when(ms) { return ms ? new Date(ms).toLocaleString() : \"never\"; }\n"
    "  function loadSessions() {\n"
    "    var list = $(\"sessions\"); list.textContent = \"\";\n"
    "    call(\"sessions.list\", {}).then(function (r) {\n"
    "      if (!(r.sessions || []).length) list.appendChild(el(\"li\", \"muted\", \"no sessions yet\"));\n"
    "      (r.sessions || []).forEach(function (s) {\n"
    "        var li = el(\"li\"), a = el(\"button\", \"link\", s.key);\n"
    "        a.onclick = function () { session = s.key; $(\"session\").value = s.key; showTab(\"chat\"); };\n"
    "        li.appendChild(a);\n"
    "        var facts = [s.chatType || s.kind, \"last activity \" + when(s.updatedAt)];\n"
    "        if (typeof s.totalTokens === \"number\") facts.push(s.totalTokens.toLocaleString() + \" tokens\");\n"
    "        li.appendChild(el(\"span\", \"muted\", facts.join(\" · \")));\n"
    "        list.appendChild(li);\n"
    "      });\n"
    "    }, function (e) { list.appendChild(el(\"li\", \"error\", e.message)); });\n"
    "  }\n"
    "  /* ---- gateway: the summary, channels and a live log tail ---- */\n"
    "  var logCursor = null, logTimer = null;\n"
    "  function pollLog() {\n"
    "    if (!connected || tab !== \"gateway\") return;\n"
    "    var params = { limit: 200 };\n"
    "    if (logCursor !== null) params.cursor = logCursor;\n"
    "    call(\"logs.tail\", params).then(function (l) {\n"
    "      var pre = $(\"gw-log\");\n"
    "      if (l.reset || logCursor === null) pre.textContent = \"\";\n"
    "      logCursor = l.cursor;\n"
    "      if ((l.lines || []).length) {\n"
    "        var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;\n"
    "        pre.appendChild(document.createTextNode(l.lines.join(\"\\n\") + \"\\n\"));\n"
    "        if (atEnd) pre.scrollTop = pre.scrollHeight;\n"
    "      } else if (!pre.textContent) {\n"
    "        pre.textContent = \"(no log lines yet)\\n\";\n"
    "      }\n"
    "    }, function () {});\n"
    "  }\n"
    "  function loadGateway() {\n"
    "    $(\"gw-summary\").textContent = \"\";\n"
    "    $(\"gw-channels\").textContent = \"\";\n"
    "    call(\"status\", {}).then(function (s) {\n"
    "      $(\"gw-summary\").textContent = \"Up \" + Math.round((s.uptimeMs || 0) / 1000) + \" s · \" +\n"
    "        (s.activeRuns || 0) + \" active runs · journal backlog \" + (s.journalBacklog || 0);\n"
    "    }, function (e) { $(\"gw-summary\").textContent = e.message; });\n"
    "    call(\"channels.status\", {}).then(function (c) {\n"
    "      var ul = $(\"gw-channels\");\n"
    "      (c.channelOrder || []).forEach(function (n) {\n"
    "        ((c.channelAccounts || {})[n] || []).forEach(function (a) {\n"
    "          var li = el(\"li\");\n"
    "          li.appendChild(el(\"strong\", \"\", n + \" / \" + a.accountId + \" \"));\n"
    "          li.appendChild(el(\"span\", a.lastError ? \"error\" : \"ok\", a.lastError ? \"error\" : (a.running ? \"running\" : \"stopped\")));\n"
    "          if (a.lastError) li.appendChild(el(\"span\", \"muted\", \"last error: \" + a.lastError));\n"
    "          if (a.lastEventAt) li.appendChild(el(\"span\", \"muted\", \"last update \" + when(a.lastEventAt)));\n"
    "          ul.appendChild(li);\n"
    "        });\n"
    "      });\n"
    "    }, function (e) { $(\"gw-channels\").appendChild(el(\"li\", \"error\", e.message)); });\n"
    "    logCursor = null;\n"
    "    pollLog();\n"
    "    if (!logTimer) logTimer = setInterval(pollLog, 2000);\n"
    "  }\n"
    "  /* ---- memory (clawmem's memory.search / memory.get) ---- */\n"
    "  function search(q) {\n"
    "    var list = $(\"mresults\"); list.textContent = \"\"; $(\"mmeta\").textContent = \"searching…\";\n"
    "    call(\"memory.search\", { query: q, maxResults: 10 }).then(function (r) {\n"
    "      var res = r.results || [];\n"
    "      $(\"mmeta\").textContent = res.length + \" result\" + (res.length === 1 ? \"\" : \"s\") +\n"
    "        \" · \" + (r.mode || \"\") + (r.provider ? \" · \" + r.provider : \"\") + (r.error ? \" · \" + r.error : \"\");\n"
    "      res.forEach(function (h) {\n"
    "        var li = el(\"li\");\n"
    "        li.appendChild(el(\"span\", \"score\", \"score \" + Number(h.score).toFixed(3)));\n"
    "        var a = el(\"button\", \"link\", h.path + \":\" + h.startLine + \"-\" + h.endLine);\n"
    "        a.onclick = function () { openNote(h.path, h.startLine, h.endLine); };\n"
    "        li.appendChild(a);\n"
    "        if (h.citation) li.appendChild(el(\"span\", \"muted\", h.citation));\n"
    "        li.appendChild(el(\"p\", \"snippet\", h.snippet || \"\"));\n"
    "        list.appendChild(li);\n"
    "      });\n"
    "    }, function (e) { $(\"mmeta\").textContent = \"\"; list.appendChild(el(\"li\", \"error\", e.message)); });\n"
    "  }\n"
    "  function openNote(path, from, to) {\n"
    "    $(\"note\").hidden = false;\n"
    "    $(\"note-title\").textContent = path;\n"
    "    var pre = $(\"note-text\"); pre.textContent = \"\";\n"
    "    call(\"memory.get\", { path: path }).then(function (r) {\n"
    "      var lines = (r.text || \"\").split(\"\\n\"), first = null;\n"
    "      if (!r.text) pre.textContent = \"(empty or missing)\";\n"
    "      lines.forEach(function (t, i) {\n"
    "        var n = i + 1, hit = from && n >= from && n <= (to || from);\n"
    "        var row = el(\"span\", hit ? \"line hit\" : \"line\");\n"
    "        row.appendChild(el(\"span\", \"ln\", String(n).padStart(4, \" \") + \"  \"));\n"
    "        row.appendChild(document.createTextNode(t));\n"
    "        pre.appendChild(row);\n"
    "        if (hit && !first) first = row;\n"
    "      });\n"
    "      if (first) pre.scrollTop = first.offsetTop - pre.offsetTop - 20;\n"
    "    }, function (e) { pre.textContent = e.message; });\n"
    "  }\n"
    "  function daily(back) {\n"
    "    var d = new Date(Date.now() - back * 86400000);\n"
    "    var p = function (n) { return String(n).padStart(2, \"0\"); };\n"
    "    openNote(\"memory/\" + d.getFullYear() + \"-\" + p(d.getMonth() + 1) + \"-\" + p(d.getDate()) + \".md\");\n"
    "  }\n"
    "  $(\"msearch\").onsubmit = function (e) {\n"
    "    e.preventDefault();\n"
    "    var q = $(\"mquery\").value.trim();\n"
    "    if (q) search(q);\n"
    "  };\n"
    "  $(\"today\").onclick = function () { daily(0); };\n"
    "  $(\"yesterday\").onclick = function () { daily(1); };\n"
    "  $(\"nav-memory\").onclick = function () { showTab(\"memory\"); };\n"
    "  var TABS = [\"chat\", \"sessions\", \"memory\", \"gateway\"];\n"
    "  /* Every page needs the token: until the gateway accepted it only the login\n"
    "     form shows. */\n"
    "  function showTab(t) {\n"
    "    tab = t;\n"
    "    $(\"login\").hidden = connected;\n"
    "    TABS.forEach(function (n) {\n"
    "      $(\"tab-\" + n).hidden = !connected || n !== t;\n"
    "      $(\"nav-\" + n).setAttribute(\"aria-current\", n === t ? \"page\" : \"false\");\n"
    "    });\n"
    "    if (t !== \"gateway\" && logTimer) { clearInterval(logTimer); logTimer = null; }\n"
    "    if (!connected) { $(\"token\").focus(); return; }\n"
    "    if (t === \"chat\") loadHistory();\n"
    "    if (t === \"sessions\") loadSessions();\n"
    "    if (t === \"memory\") $(\"mquery\").focus();\n"
    "    if (t === \"gateway\") loadGateway();\n"
    "  }\n"
    "  $(\"nav-chat\").onclick = function () { showTab(\"chat\"); };\n"
    "  $(\"nav-sessions\").onclick = function () { showTab(\"sessions\"); };\n"
    "  $(\"nav-gateway\").onclick = function () { showTab(\"gateway\"); };\n"
    "  $(\"login\").onsubmit = function (e) {\n"
    "    e.preventDefault();\n"
    "    sessionStorage.setItem(\"qc.token\", $(\"token\").value);\n"
    "    $(\"token\").value = \"\";\n"
    "    var old = ws;\n"
    "    connected = false;\n"
    "    connect();\n"
    "    if (old) old.close();\n"
    "  };\n"
    "  $(\"composer\").onsubmit = function (e) {\n"
    "    e.preventDefault();\n"
    "    var t = $(\"text\").value.trim();\n"
    "    if (!t) return;\n"
    "    $(\"text\").value = \"\";\n"
    "    send(t);\n"
    "  };\n"
    "  $(\"stop\").onclick = function () { call(\"chat.abort\", { sessionKey: session }); };\n"
    "  $(\"new\").onclick = function () { send(\"/new\"); };\n"
    "  $(\"session\").onchange = function () { session = $(\"session\").value.trim() || \"main\"; loadHistory(); };\n"
    "  if (sessionStorage.getItem(\"qc.token\") !== null) connect(); else showTab(tab);\n"
    "})();\n"
    "\n";

static const char S_icon[] =
    "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\"><rect width=\"16\" height=\"16\" rx=\"3\" fill=\"#20303c\"/><path d=\"M4 11.5l2-7m2 7l2-7m2 7l-1-4\" stroke=\"#cfe\" stroke-width=\"1.6\" stroke-linecap=\"round\" fill=\"none\"/></svg>\n"
    "\n";
/* clang-format on */

/* The Host header when it is a plain host[:port] (it goes into the CSP). */
static bool S_host_ok(const char *h)
{
    if (!h || !*h || strlen(h) > 200) return false;
    for (; *h; h++)
        if (!isalnum((unsigned char)*h) && !strchr(".-:[]", *h)) return false;
    return true;
}

bool cm_gw_ui_serve(const char *base, const httpd_req *rq, httpd_conn *c)
{
    size_t bl = strlen(base);
    if (strncmp(rq->path, base, bl)) return false;
    const char *rest = rq->path + bl;
    const char *type, *body;
    buf page = BUF_INIT, csp = BUF_INIT;
    if (!*rest && bl) {
        /* "/base" without its slash: relative URLs need it */
        char loc[200];
        snprintf(loc, sizeof loc, "Location: %s/", base);
        const char *const h[] = {loc, NULL};
        cm_net_httpd_respond(c, 302, h, "", 0);
        return true;
    }
    if (!strcmp(rest, "/") || !strcmp(rest, "/index.html")) {
        type = "Content-Type: text/html; charset=utf-8";
        for (const char *p = S_html; *p;) {
            const char *at = strstr(p, "@BASE@");
            size_t n = at ? (size_t)(at - p) : strlen(p);
            if (cm_buf_add(&page, p, n) || (at && cm_buf_adds(&page, base))) goto oom;
            p = at ? at + 6 : p + n;
        }
        body = page.data;
    } else if (!strcmp(rest, "/app.js")) {
        type = "Content-Type: text/javascript; charset=utf-8";
        body = S_js;
    } else if (!strcmp(rest, "/app.css")) {
        type = "Content-Type: text/css; charset=utf-8";
        body = S_css;
    } else if (!strcmp(rest, "/favicon.svg")) {
        type = "Content-Type: image/svg+xml";
        body = S_icon;
    } else {
        return false;
    }
    if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD")) {
        cm_buf_release(&page);
        static const char *const h[] = {"Allow: GET, HEAD", NULL};
        cm_net_httpd_respond(c, 405, h, "", 0);
        return true;
    }
    const char *host = cm_net_httpd_header_get(rq, "Host");
    if (cm_buf_adds(&csp, "Content-Security-Policy: default-src 'none'; script-src 'self'; "
                          "style-src 'self'; img-src 'self'; connect-src 'self'") ||
        (S_host_ok(host) && cm_buf_printf(&csp, " ws://%s wss://%s", host, host)) ||
        cm_buf_adds(&csp, "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"))
        goto oom;
    const char *const h[] = {type,
                             csp.data,
                             "X-Content-Type-Options: nosniff",
                             "X-Frame-Options: DENY",
                             "Referrer-Policy: no-referrer",
                             "Cache-Control: no-store",
                             NULL};
    cm_net_httpd_respond(c, 200, h, body, strlen(body));
    cm_buf_release(&page);
    cm_buf_release(&csp);
    return true;
oom:
    cm_buf_release(&page);
    cm_buf_release(&csp);
    cm_net_httpd_respond(c, 500, NULL, "", 0);
    return true;
}
