/*
 * test_control_ui.c — the Control UI in a real browser: `clawmem gateway`
 * (cm_gateway_start) on a loopback port with the fake model, Debian's headless
 * Chromium driven over the DevTools protocol (cdp.h). Without the token every
 * page and method is refused; with it the token is entered with the keyboard,
 * a chat message streams the model's reply, the Sessions page lists the
 * session, the Memory page finds a note and opens it at its lines, the
 * Gateway page shows the channels and the log tail; no console
 * message, log entry or exception on the way. Screenshots of each page, at
 * desktop and phone width, are kept in <build>/test-artifacts/. Chromium is
 * installed by `make test` (scripts/install-deps.sh --chromium) when missing;
 * without it the test skips ("chromium" in $CLAWMEM_TEST_REQUIRE fails it).
 */
#include <libgen.h>
#include <sys/stat.h>
#include <time.h>

#include "../include/clawmem.h"
#include "cdp.h"
#include "fakeserver.h"
#include "test.h"

#define UTOKEN "tok-ui-test-5521"
#define REPLY  "Your dog is called Biscuit; your notes say so in MEMORY.md, line 2."

typedef struct uigw {
    fake_server *fs;
    char base[64], url[96], *dir;
    cm_gateway *g;
} uigw;

/* profiles: the auth-profiles.json to write, or NULL (the config's key). */
static bool ui_up(uigw *u, const char *profiles)
{
    memset(u, 0, sizeof *u);
    u->fs = fake_start(8, u->base);
    u->dir = tmp_dir();
    write_file(u->dir, "ws/MEMORY.md",
               "# Facts\n\nThe dog is called Biscuit.\nHe likes the beach.\n\n# Work\n\n"
               "Standup at nine.\n");
    char today[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(today, sizeof today, "ws/memory/%Y-%m-%d.md", &tm);
    write_file(u->dir, today, "# Today\n\nWalked Biscuit on the beach at seven.\n");
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"" UTOKEN "\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\",\"memorySearch\":{"
             "\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ui-0001\",\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             u->base);
    write_file(u->dir, "state/quantumclaw.json", cfg);
    if (profiles) write_file(u->dir, "state/agents/main/agent/auth-profiles.json", profiles);
    char ws[4096], state[4096];
    snprintf(ws, sizeof ws, "%s", path_in(u->dir, "ws"));
    snprintf(state, sizeof state, "%s", path_in(u->dir, "state"));
    cm_options o = {NULL, ws, NULL, state, NULL, NULL, 1};
    cm_gateway_opts go = {"127.0.0.1:0", 1};
    char err[512];
    if (cm_gateway_start(&o, &go, &u->g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        fake_stop(u->fs);
        return false;
    }
    snprintf(u->url, sizeof u->url, "http://%s/", cm_gateway_address(u->g));
    return true;
}

static void ui_down(uigw *u)
{
    cm_gateway_drain(u->g, 5000);
    cm_gateway_free(u->g);
    fake_stop(u->fs);
}

/* <dir of $CLAWMEM_BIN or build/>/test-artifacts/control-ui-<name>.png */
static const char *artefact(const char *name)
{
    static char path[4200];
    char bin[4096];
    const char *b = getenv("CLAWMEM_BIN");
    snprintf(bin, sizeof bin, "%s", b && *b ? b : "build/clawmem");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/test-artifacts", dirname(bin));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/control-ui-%s.png", dir, name);
    return path;
}

/* Types text into the element with id (focused first) and presses Enter:
 * the keyboard path a user takes. */
static bool type_enter(cdp *c, const char *id, const char *text)
{
    char js[256];
    snprintf(js, sizeof js, "document.getElementById('%s').focus(), true", id);
    json_t *v = cdp_eval(c, js, 5000);
    json_t *r =
        v ? cdp_call(c, true, "Input.insertText", json_pack("{s:s}", "text", text), 5000) : NULL;
    json_decref(v);
    if (!r) return false;
    json_decref(r);
    static const char *const kinds[] = {"keyDown", "keyUp"};
    for (int i = 0; i < 2; i++) {
        json_t *k = json_pack("{s:s,s:s,s:s,s:i}", "type", kinds[i], "key", "Enter", "code",
                              "Enter", "windowsVirtualKeyCode", 13);
        if (i == 0) json_object_set_new(k, "text", json_string("\r"));
        r = cdp_call(c, true, "Input.dispatchKeyEvent", k, 5000);
        if (!r) return false;
        json_decref(r);
    }
    return true;
}

static bool js_true(cdp *c, const char *expr)
{
    json_t *v = cdp_eval(c, expr, 10000);
    bool yes = json_is_true(v);
    json_decref(v);
    return yes;
}

/* Each method on a socket of its own, without a connect: every answer must be
 * a refusal; then a connect without a token: AUTH_TOKEN_MISSING. Evaluated in
 * the page, so it is the browser's own WebSocket. */
static const char S_refusals_js[] =
    "(async () => {\n"
    "  const url = 'ws://' + location.host + '/';\n"
    "  const one = (frame) => new Promise((ok) => {\n"
    "    const s = new WebSocket(url);\n"
    "    s.onmessage = (ev) => {\n"
    "      const f = JSON.parse(ev.data);\n"
    "      if (f.type === 'event' && f.event === 'connect.challenge') "
    "s.send(JSON.stringify(frame));\n"
    "      else if (f.type === 'res') { s.close(); ok(f); }\n"
    "    };\n"
    "    s.onclose = () => ok(null);\n"
    "  });\n"
    "  const methods = ['health','status','channels.status','sessions.list','chat.history',\n"
    "    'chat.send','chat.abort','models.list','logs.tail','config.get','memory.search',\n"
    "    'memory.get','clawmem.pairing.list','clawmem.pairing.approve','clawmem.pairing.deny',\n"
    "    'clawmem.models.status'];\n"
    "  const out = [];\n"
    "  for (const m of methods) {\n"
    "    const f = await one({type:'req', id:'1', method:m, params:{sessionKey:'main',\n"
    "      message:'hi', idempotencyKey:'x', query:'Biscuit', path:'MEMORY.md'}});\n"
    "    out.push(m + '=' + (f && f.ok === false ? 'refused' : 'ANSWERED'));\n"
    "  }\n"
    "  const c = await one({type:'req', id:'1', method:'connect', params:{minProtocol:3,\n"
    "    maxProtocol:3, client:{id:'t', version:'1', platform:'web', mode:'webchat'},\n"
    "    role:'operator', scopes:['operator.read','operator.write']}});\n"
    "  out.push('connect=' + (c && c.ok === false ? c.error.details.code : 'ANSWERED'));\n"
    "  return out.join(',');\n"
    "})()";

/* Waits for expr; on timeout fails the test naming what was awaited. */
#define WAIT(c, expr, ms)                                                                          \
    do {                                                                                           \
        if (!cdp_wait((c), (expr), (ms))) {                                                        \
            test_fail(__FILE__, __LINE__, "%s", (c)->err);                                         \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
#define SHOT(c, name)                                                                              \
    do {                                                                                           \
        if (!cdp_screenshot((c), artefact(name))) {                                                \
            test_fail(__FILE__, __LINE__, "screenshot %s: %s", (name), (c)->err);                  \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
#define MUST(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_fail(__FILE__, __LINE__, "expected: %s", #cond);                                  \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* No horizontal scrolling: the page fits its viewport. */
#define FITS "document.documentElement.scrollWidth <= window.innerWidth"

TEST(control_ui_browser_token_chat_sessions_memory_gateway)
{
    const char *chromium = cdp_find_chromium();
    if (!chromium)
        SKIP("chromium", "no /usr/bin/chromium (apt-get install chromium, or set "
                         "CLAWMEM_TEST_CHROMIUM)");
    uigw u;
    if (!ui_up(&u, NULL)) return;
    fake_push_chat_text(u.fs, REPLY, 40);
    cdp c;
    bool up = cdp_launch(&c, chromium, 1100, 760);
    if (!up) {
        test_fail(__FILE__, __LINE__, "chromium: %s", c.err);
        goto out;
    }
    if (!cdp_goto(&c, u.url, 30000)) {
        test_fail(__FILE__, __LINE__, "%s", c.err);
        goto out;
    }
    /* without the token: the login form, no page opens, every method refused */
    WAIT(&c, "!document.getElementById('login').hidden", 10000);
    SHOT(&c, "login");
    static const char *const pages[] = {"chat", "sessions", "memory", "gateway"};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        char js[512];
        snprintf(js, sizeof js,
                 "document.getElementById('nav-%s').click(),"
                 "document.getElementById('tab-%s').hidden && "
                 "!document.getElementById('login').hidden",
                 pages[i], pages[i]);
        MUST(js_true(&c, js));
    }
    json_t *v = cdp_eval(&c, S_refusals_js, 60000);
    const char *got = json_string_value(v);
    bool refused = got && !strstr(got, "ANSWERED") && strstr(got, "connect=AUTH_TOKEN_MISSING") &&
                   strstr(got, "config.get=refused");
    if (!refused) test_fail(__FILE__, __LINE__, "without a token: %s", got ? got : c.err);
    json_decref(v);
    if (!refused) goto out;
    MUST(type_enter(&c, "token", "not-the-token"));
    WAIT(&c, "document.getElementById('status').textContent.indexOf('refused') >= 0", 10000);
    MUST(js_true(&c, "!document.getElementById('login').hidden && "
                     "document.getElementById('tab-chat').hidden"));
    SHOT(&c, "refused");
    EXPECT_INT(fake_count(u.fs), 0);

    /* the token, typed: connected, the page last asked for (Gateway) opens */
    MUST(type_enter(&c, "token", UTOKEN));
    WAIT(&c, "document.getElementById('status').textContent === 'connected'", 10000);
    MUST(js_true(&c, "document.getElementById('login').hidden && "
                     "!document.getElementById('tab-gateway').hidden && "
                     "document.getElementById('tab-chat').hidden"));
    MUST(js_true(&c, "document.getElementById('nav-chat').click(), "
                     "!document.getElementById('tab-chat').hidden"));
    MUST(js_true(&c, "sessionStorage.getItem('qc.token') === '" UTOKEN "' && "
                     "localStorage.length === 0 && document.cookie === '' && "
                     "location.href.indexOf('" UTOKEN "') < 0"));

    /* a chat message: the reply streams in (delta events), then is final */
    MUST(type_enter(&c, "text", "What is my dog called?"));
    WAIT(&c,
         "[...document.querySelectorAll('#log .assistant')].some(e => e.textContent === '" REPLY
         "')",
         30000);
    MUST(js_true(&c, "[...document.querySelectorAll('#log .user')].some(e => e.textContent === "
                     "'What is my dog called?')"));
    WAIT(&c, "document.getElementById('stop').disabled", 10000); /* the final event came */
    size_t deltas = 0, finals = 0, i;
    json_t *f;
    json_array_foreach(c.ws_frames, i, f)
    {
        const char *s = json_string_value(f);
        if (strstr(s, "\"event\":\"chat\"") && strstr(s, "\"state\":\"delta\"")) deltas++;
        if (strstr(s, "\"event\":\"chat\"") && strstr(s, "\"state\":\"final\"")) finals++;
    }
    if (deltas < 1 || finals != 1) {
        char *s = json_dumps(c.ws_frames, JSON_INDENT(1));
        test_fail(__FILE__, __LINE__, "%zu delta and %zu final chat events among:\n%s", deltas,
                  finals, s);
        free(s);
        goto out;
    }
    SHOT(&c, "chat");

    /* Sessions: the session of that chat */
    MUST(js_true(&c, "document.getElementById('nav-sessions').click(), true"));
    WAIT(&c, "document.getElementById('sessions').textContent.indexOf('agent:main:main') >= 0",
         10000);
    SHOT(&c, "sessions");

    /* Memory: a search finds the note (score, snippet), a click opens it at its
     * lines; today's daily note opens from its button */
    MUST(js_true(&c, "document.getElementById('nav-memory').click(), true"));
    MUST(type_enter(&c, "mquery", "Biscuit"));
    WAIT(&c, "document.querySelectorAll('#mresults li').length > 0", 20000);
    MUST(js_true(&c, "[...document.querySelectorAll('#mresults li')].some(li => "
                     "li.textContent.indexOf('MEMORY.md:') >= 0 && "
                     "li.querySelector('.snippet').textContent.indexOf('Biscuit') >= 0 && "
                     "/score \\d\\.\\d{3}/.test(li.querySelector('.score').textContent))"));
    MUST(js_true(&c, "[...document.querySelectorAll('#mresults .link')].find(b => "
                     "b.textContent.indexOf('MEMORY.md:') === 0).click(), true"));
    WAIT(&c,
         "[...document.querySelectorAll('#note-text .hit')].some(e => "
         "e.textContent.indexOf('The dog is called Biscuit.') >= 0)",
         10000);
    MUST(js_true(&c, "document.getElementById('note-title').textContent === 'MEMORY.md' && "
                     "document.getElementById('note-text').textContent.indexOf('Standup at nine.') "
                     ">= 0"));
    SHOT(&c, "memory");
    MUST(js_true(&c, "document.getElementById('today').click(), true"));
    WAIT(&c, "document.getElementById('note-text').textContent.indexOf('Walked Biscuit') >= 0",
         10000);

    /* Gateway: the channels and the log tail */
    MUST(js_true(&c, "document.getElementById('nav-gateway').click(), true"));
    WAIT(&c,
         "document.getElementById('gw-channels').textContent.indexOf('webchat / default') >= 0 && "
         "document.getElementById('gw-summary').textContent.indexOf('Up ') === 0 && "
         "document.getElementById('gw-log').textContent.indexOf("
         "'ws client clawmem-control-ui connected') >= 0",
         10000);
    MUST(js_true(&c, "document.getElementById('tab-gateway').textContent.indexOf('" UTOKEN
                     "') < 0 && document.getElementById('gw-log').textContent.indexOf("
                     "'gateway token mismatch') >= 0"));
    SHOT(&c, "gateway");

    /* phone width: every page fits, nothing scrolls sideways */
    MUST(cdp_viewport(&c, 390, 844));
    for (size_t k = 0; k < sizeof pages / sizeof *pages; k++) {
        char js[256], name[64];
        snprintf(js, sizeof js, "document.getElementById('nav-%s').click(), true", pages[k]);
        MUST(js_true(&c, js));
        WAIT(&c, "document.readyState === 'complete'", 5000);
        if (!strcmp(pages[k], "gateway"))
            WAIT(&c, "document.getElementById('gw-log').textContent.length > 0", 10000);
        if (!strcmp(pages[k], "memory"))
            WAIT(&c, "document.querySelectorAll('#mresults li').length > 0", 10000);
        if (!strcmp(pages[k], "sessions"))
            WAIT(&c, "document.querySelectorAll('#sessions li').length > 0", 10000);
        if (!js_true(&c, FITS))
            test_fail(__FILE__, __LINE__, "%s scrolls sideways at 390 px", pages[k]);
        snprintf(name, sizeof name, "%s-phone", pages[k]);
        SHOT(&c, name);
    }

    /* nothing on the console, no exception, no failed load */
    if (json_array_size(c.problems)) {
        char *s = json_dumps(c.problems, JSON_INDENT(2));
        test_fail(__FILE__, __LINE__, "the page reported problems:\n%s", s);
        free(s);
    }
out:
    cdp_close(&c);
    ui_down(&u);
}

/* A connect with operator.read only, then sessions.patch: the error message. */
static const char S_readonly_patch_js[] =
    "new Promise((ok) => {\n"
    "  const s = new WebSocket('ws://' + location.host + '/');\n"
    "  s.onmessage = (ev) => {\n"
    "    const f = JSON.parse(ev.data);\n"
    "    if (f.type === 'event' && f.event === 'connect.challenge')\n"
    "      s.send(JSON.stringify({type:'req', id:'c', method:'connect', params:{minProtocol:3,\n"
    "        maxProtocol:3, client:{id:'t', version:'1', platform:'web', mode:'webchat'},\n"
    "        role:'operator', scopes:['operator.read'], auth:{token:'" UTOKEN "'}}}));\n"
    "    else if (f.type === 'res' && f.id === 'c')\n"
    "      s.send(JSON.stringify({type:'req', id:'p', method:'sessions.patch',\n"
    "        params:{key:'main', thinkingLevel:'low'}}));\n"
    "    else if (f.type === 'res' && f.id === 'p') { s.close(); ok(f.ok ? 'ANSWERED' : "
    "f.error.message); }\n"
    "  };\n"
    "  s.onclose = () => ok('closed');\n"
    "})";

/* POSTs a direct message of sender carol to the HTTP channel (from the page,
 * with the gateway token as the channel's Bearer): the HTTP status. */
static int S_carol_says(cdp *c, const char *mid, const char *text)
{
    char js[1024];
    snprintf(js, sizeof js,
             "fetch('/v1/messages', {method:'POST', headers:{'Authorization':'Bearer " UTOKEN
             "','Content-Type':'application/json'}, body:JSON.stringify({peer:'carol',"
             "sender:'carol', chatType:'direct', messageId:'%s', text:'%s'})})"
             ".then(r => r.status, e => -1)",
             mid, text);
    json_t *v = cdp_eval(c, js, 10000);
    int st = json_is_integer(v) ? (int)json_integer_value(v) : -2;
    json_decref(v);
    return st;
}

/* An expression true once one of carol's replies contains what. */
#define CAROL_GOT(what)                                                                            \
    "fetch('/v1/replies?peer=carol&after=0', {headers:{'Authorization':'Bearer " UTOKEN "'}})"     \
    ".then(r => r.json()).then(j => (j.replies || []).some(r => r.text.indexOf('" what             \
    "') >= 0), e => false)"

#define PROFILES_AB                                                                                \
    "{\"version\":1,\"profiles\":{"                                                                \
    "\"openai:a\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-ui-aaaa\"},"          \
    "\"openai:b\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-ui-bbbb\"}},"         \
    "\"usageStats\":{\"openai:a\":{\"lastUsed\":100},\"openai:b\":{\"lastUsed\":200}}}"

/* Access: a sender's pairing request appears on the page, Approve answers
 * the sender (the reference's approval message) and lets its next message
 * through. Models: that message meets a 429 on the first profile (the next
 * one answers), and the page shows the first profile cooling down, counting
 * down, with the failure counted. Sessions: a session's settings saved
 * through its form (sessions.patch); a read-only client refused. */
TEST(control_ui_browser_access_models)
{
    const char *chromium = cdp_find_chromium();
    if (!chromium)
        SKIP("chromium", "no /usr/bin/chromium (apt-get install chromium, or set "
                         "CLAWMEM_TEST_CHROMIUM)");
    uigw u;
    if (!ui_up(&u, PROFILES_AB)) return;
    cdp c;
    bool up = cdp_launch(&c, chromium, 1100, 760);
    if (!up) {
        test_fail(__FILE__, __LINE__, "chromium: %s", c.err);
        goto out;
    }
    if (!cdp_goto(&c, u.url, 30000)) {
        test_fail(__FILE__, __LINE__, "%s", c.err);
        goto out;
    }
    WAIT(&c, "!document.getElementById('login').hidden", 10000);
    MUST(js_true(&c, "document.getElementById('nav-access').click(),"
                     "document.getElementById('tab-access').hidden"));
    MUST(type_enter(&c, "token", UTOKEN));
    WAIT(&c, "document.getElementById('status').textContent === 'connected'", 10000);
    MUST(js_true(&c, "!document.getElementById('tab-access').hidden"));

    /* carol asks: the code goes back to her, the request shows on the page */
    EXPECT_INT(S_carol_says(&c, "m1", "hello?"), 202);
    WAIT(&c, CAROL_GOT("Pairing code"), 20000);
    EXPECT_INT(fake_count(u.fs), 0);
    WAIT(&c,
         "[...document.querySelectorAll('#ac-requests li')].some(li => "
         "li.textContent.indexOf('sender carol') >= 0 && li.querySelector('button'))",
         10000);
    MUST(js_true(&c, "document.getElementById('ac-allow').textContent.indexOf('http') >= 0"));
    SHOT(&c, "access");
    /* Approve, from the keyboard: focus the button, press Enter */
    MUST(js_true(&c, "document.querySelector('#ac-requests button').id.indexOf('approve-') === 0"));
    {
        json_t *v =
            cdp_eval(&c, "document.querySelector('#ac-requests button').focus(), true", 5000);
        json_decref(v);
        static const char *const kinds[] = {"keyDown", "keyUp"};
        for (int i = 0; i < 2; i++) {
            json_t *k = json_pack("{s:s,s:s,s:s,s:i}", "type", kinds[i], "key", "Enter", "code",
                                  "Enter", "windowsVirtualKeyCode", 13);
            if (i == 0) json_object_set_new(k, "text", json_string("\r"));
            json_t *r = cdp_call(&c, true, "Input.dispatchKeyEvent", k, 5000);
            MUST(r);
            json_decref(r);
        }
    }
    WAIT(&c, CAROL_GOT("access approved"), 20000);
    WAIT(&c,
         "document.getElementById('ac-requests').textContent.indexOf('no pending requests') >= 0 "
         "&& document.getElementById('ac-allow').textContent.indexOf('approved (default): carol') "
         ">= 0",
         10000);
    SHOT(&c, "access-approved");

    /* carol again: let through; the first profile gets a 429, the second answers */
    fake_push_raw(u.fs,
                  "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                  "Content-Length: 47\r\nConnection: close\r\n\r\n"
                  "{\"error\":{\"message\":\"Rate limit reached.....\"}}",
                  true);
    fake_push_chat_text(u.fs, "Hello carol.", 20);
    EXPECT_INT(S_carol_says(&c, "m2", "hello again"), 202);
    WAIT(&c, CAROL_GOT("Hello carol."), 30000);
    EXPECT_INT(fake_count(u.fs), 2);

    /* Models: the chain, openai:a cooling down (counting), openai:b ready */
    MUST(js_true(&c, "document.getElementById('nav-models').click(), true"));
    WAIT(&c,
         "document.getElementById('md-chain').textContent.indexOf('openai/gpt-t') >= 0 && "
         "[...document.querySelectorAll('#md-providers .profile')].some(p => "
         "p.textContent.indexOf('openai:a') >= 0 && "
         "/cooldown \\d+ (min|s)/.test(p.querySelector('.cd').textContent) && "
         "p.textContent.indexOf('rate_limit') >= 0)",
         10000);
    MUST(js_true(&c, "[...document.querySelectorAll('#md-providers .profile')].some(p => "
                     "p.textContent.indexOf('openai:b') >= 0 && "
                     "p.textContent.indexOf('ready') >= 0)"));
    MUST(js_true(&c, "document.getElementById('tab-models').textContent.indexOf('sk-ui-') < 0"));
    {
        json_t *a = cdp_eval(&c, "document.querySelector('#md-providers .cd').textContent", 5000);
        char first[64];
        snprintf(first, sizeof first, "%s", json_string_value(a) ? json_string_value(a) : "");
        json_decref(a);
        char js[256];
        snprintf(js, sizeof js, "document.querySelector('#md-providers .cd').textContent !== '%s'",
                 first);
        WAIT(&c, js, 5000); /* it counts down */
    }
    SHOT(&c, "models");

    /* Sessions: a session's settings saved with sessions.patch (the form
     * submitted with Enter), shown on its card */
    MUST(js_true(&c, "document.getElementById('nav-sessions').click(), true"));
    WAIT(&c, "document.getElementById('edit-0') !== null", 10000);
    MUST(js_true(&c, "document.getElementById('edit-0').click(), "
                     "!document.getElementById('sx').hidden && "
                     "document.activeElement.id === 'sx-label'"));
    MUST(js_true(&c, "document.getElementById('sx-think').value = 'high', true"));
    MUST(type_enter(&c, "sx-label", "Carol"));
    WAIT(&c,
         "document.getElementById('sx-status').textContent === 'saved' && "
         "[...document.querySelectorAll('#sessions li')].some(li => "
         "li.textContent.indexOf('thinking high') >= 0 && li.textContent.indexOf('Carol') >= 0)",
         10000);
    SHOT(&c, "sessions-settings");
    /* a read-only client may not: the reference's error */
    {
        json_t *v = cdp_eval(&c, S_readonly_patch_js, 20000);
        const char *got = json_string_value(v);
        if (!got || strcmp(got, "missing scope: operator.admin"))
            test_fail(__FILE__, __LINE__, "read-only sessions.patch: %s", got ? got : c.err);
        json_decref(v);
    }

    /* phone width */
    MUST(cdp_viewport(&c, 390, 844));
    static const char *const pages[] = {"access", "models", "sessions"};
    for (size_t k = 0; k < 3; k++) {
        char js[256], name[64];
        snprintf(js, sizeof js, "document.getElementById('nav-%s').click(), true", pages[k]);
        MUST(js_true(&c, js));
        WAIT(&c,
             k == 2   ? "document.querySelectorAll('#sessions li').length > 0"
             : k == 1 ? "document.querySelectorAll('#md-providers .profile').length > 0"
                      : "document.querySelectorAll('#ac-allow li').length > 0",
             10000);
        if (!js_true(&c, FITS))
            test_fail(__FILE__, __LINE__, "%s scrolls sideways at 390 px", pages[k]);
        snprintf(name, sizeof name, "%s-phone", pages[k]);
        SHOT(&c, name);
    }
    if (json_array_size(c.problems)) {
        char *s = json_dumps(c.problems, JSON_INDENT(2));
        test_fail(__FILE__, __LINE__, "the page reported problems:\n%s", s);
        free(s);
    }
out:
    cdp_close(&c);
    ui_down(&u);
}
