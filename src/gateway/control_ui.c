/*
 * control_ui.c — the Control UI: one page (Chat, Sessions, Gateway), its
 * stylesheet and script, embedded here so the binary needs no asset at run
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
    "<link rel=\"stylesheet\" href=\"@BASE@/app.css\">\n"
    "</head>\n"
    "<body data-base=\"@BASE@\">\n"
    "<header>\n"
    "<h1>clawmem</h1>\n"
    "<nav><button id=\"nav-chat\" type=\"button\">Chat</button><button id=\"nav-sessions\" type=\"button\">Sessions</button><button id=\"nav-gateway\" type=\"button\">Gateway</button></nav>\n"
    "<span id=\"status\">not connected</span>\n"
    "</header>\n"
    "<main>\n"
    "<form id=\"login\"><input id=\"token\" type=\"password\" autocomplete=\"off\" placeholder=\"gateway token\" aria-label=\"gateway token\"><button type=\"submit\">Connect</button></form>\n"
    "<section id=\"tab-chat\" hidden>\n"
    "<form id=\"pick\"><input id=\"session\" value=\"main\" aria-label=\"session key\"><button id=\"new\" type=\"button\">/new</button></form>\n"
    "<div id=\"log\" aria-live=\"polite\"></div>\n"
    "<form id=\"composer\"><input id=\"text\" autocomplete=\"off\" placeholder=\"Message\" aria-label=\"message\"><button type=\"submit\">Send</button><button id=\"stop\" type=\"button\" disabled>Stop</button></form>\n"
    "</section>\n"
    "<section id=\"tab-sessions\" hidden><ul id=\"sessions\"></ul></section>\n"
    "<section id=\"tab-gateway\" hidden><div id=\"gw\"></div></section>\n"
    "</main>\n"
    "<script src=\"@BASE@/app.js\"></script>\n"
    "</body>\n"
    "</html>\n"
    "\n";

static const char S_css[] =
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:15px/1.4 system-ui,sans-serif;color:#1b1b1b;background:#f6f6f4}\n"
    "header{display:flex;flex-wrap:wrap;gap:.5em;align-items:center;padding:.5em .8em;background:#20303c;color:#fff}\n"
    "header h1{font-size:1em;margin:0 1em 0 0}\n"
    "nav button{background:none;border:0;color:#cfe;font:inherit;padding:.3em .5em;cursor:pointer}\n"
    "nav button[aria-current=page]{color:#fff;border-bottom:2px solid #fff}\n"
    "#status{margin-left:auto;font-size:.85em;opacity:.8}\n"
    "main{max-width:52em;margin:0 auto;padding:.8em}\n"
    "form{display:flex;gap:.4em;flex-wrap:wrap}\n"
    "input,button{font:inherit;padding:.45em .6em;border:1px solid #aaa;border-radius:4px}\n"
    "input{flex:1;min-width:8em}\n"
    "#log{height:60vh;overflow-y:auto;background:#fff;border:1px solid #ddd;border-radius:4px;padding:.5em;margin:.5em 0}\n"
    ".msg{white-space:pre-wrap;word-wrap:break-word;margin:.3em 0;padding:.4em .6em;border-radius:6px;max-width:90%}\n"
    ".user{background:#dceefc;margin-left:auto}\n"
    ".assistant{background:#eee}\n"
    ".error{color:#a00}\n"
    ".muted{color:#777;font-size:.85em}\n"
    ".link{border:0;background:none;color:#036;text-decoration:underline;padding:0;cursor:pointer;word-break:break-all}\n"
    ".logs{background:#111;color:#ddd;padding:.5em;overflow-x:auto;font-size:.8em;max-height:50vh}\n"
    "ul{padding-left:1.2em}\n"
    "\n";

static const char S_js[] =
    "\"use strict\";\n"
    "(function () {\n"
    "  var base = document.body.getAttribute(\"data-base\") || \"\";\n"
    "  var $ = function (id) { return document.getElementById(id); };\n"
    "  var ws = null, nextId = 1, pending = {}, session = \"main\", runs = {};\n"
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
    "    ws = new WebSocket(url);\n"
    "    status(\"connecting…\");\n"
    "    ws.onmessage = function (ev) {\n"
    "      var f; try { f = JSON.parse(ev.data); } catch (e) { return; }\n"
    "      if (f.type === \"event\" && f.event === \"connect.challenge\") {\n"
    "        var id = String(nextId++);\n"
    "        pending[id] = { ok: function () { status(\"connected\"); $(\"login\").hidden = true; showTab(\"chat\"); },\n"
    "                        fail: function (e) { status(\"refused: \" + e.message); $(\"login\").hidden = false; } };\n"
    "        ws.send(JSON.stringify({ type: \"req\", id: id, method: \"connect\", params: {\n"
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
    "    ws.onclose = function () { status(\"disconnected\"); ws = null; };\n"
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
    "  function loadSessions() {\n"
    "    var list = $(\"sessions\"); list.textContent = \"\";\n"
    "    call(\"sessions.list\", {}).then(function (r) {\n"
    "      (r.sessions || []).forEach(function (s) {\n"
    "        var li = el(\"li\"), a = el(\"button\", \"link\", s.key);\n"
    "        a.onclick = function () { session = s.key; $(\"session\").value = s.key; showTab(\"chat\"); };\n"
    "        li.appendChild(a);\n"
    "        li.appendChild(el(\"span\", \"muted\", \" \" + (s.updatedAt ? new Date(s.updatedAt).toLocaleString() : \"\")));\n"
    "        list.appendChild(li);\n"
    "      });\n"
    "    }, function (e) { list.appendChild(el(\"li\", \"error\", e.message)); });\n"
    "  }\n"
    "  /* ---- gateway ---- */\n"
    "  function loadGateway() {\n"
    "    var g = $(\"gw\"); g.textContent = \"\";\n"
    "    call(\"status\", {}).then(function (s) {\n"
    "      g.appendChild(el(\"p\", \"\", \"uptime \" + Math.round((s.uptimeMs || 0) / 1000) + \" s, active runs \" +\n"
    "        (s.activeRuns || 0) + \", journal backlog \" + (s.journalBacklog || 0)));\n"
    "    });\n"
    "    call(\"channels.status\", {}).then(function (c) {\n"
    "      var ul = el(\"ul\");\n"
    "      (c.channelOrder || []).forEach(function (n) {\n"
    "        (c.channelAccounts[n] || []).forEach(function (a) {\n"
    "          ul.appendChild(el(\"li\", a.lastError ? \"error\" : \"\", n + \"/\" + a.accountId +\n"
    "            (a.lastError ? \" — last error: \" + a.lastError : \" — ok\")));\n"
    "        });\n"
    "      });\n"
    "      g.appendChild(ul);\n"
    "    });\n"
    "    call(\"logs.tail\", { limit: 200 }).then(function (l) {\n"
    "      g.appendChild(el(\"pre\", \"logs\", (l.lines || []).join(\"\\n\")));\n"
    "    });\n"
    "  }\n"
    "  function showTab(t) {\n"
    "    [\"chat\", \"sessions\", \"gateway\"].forEach(function (n) {\n"
    "      $(\"tab-\" + n).hidden = n !== t;\n"
    "      $(\"nav-\" + n).setAttribute(\"aria-current\", n === t ? \"page\" : \"false\");\n"
    "    });\n"
    "    if (!ws) return;\n"
    "    if (t === \"chat\") loadHistory();\n"
    "    if (t === \"sessions\") loadSessions();\n"
    "    if (t === \"gateway\") loadGateway();\n"
    "  }\n"
    "  $(\"nav-chat\").onclick = function () { showTab(\"chat\"); };\n"
    "  $(\"nav-sessions\").onclick = function () { showTab(\"sessions\"); };\n"
    "  $(\"nav-gateway\").onclick = function () { showTab(\"gateway\"); };\n"
    "  $(\"login\").onsubmit = function (e) {\n"
    "    e.preventDefault();\n"
    "    sessionStorage.setItem(\"qc.token\", $(\"token\").value);\n"
    "    $(\"token\").value = \"\";\n"
    "    if (ws) ws.close();\n"
    "    connect();\n"
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
    "  if (sessionStorage.getItem(\"qc.token\") !== null) { $(\"login\").hidden = true; connect(); }\n"
    "})();\n"
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
