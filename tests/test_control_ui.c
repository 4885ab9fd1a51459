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
#include <sys/time.h>
#include <time.h>

#include "../include/clawmem.h"
#include "../src/session/flush.h"
#include "../src/session/transcript.h"
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

/* Launches chromium at the gateway's page and logs in with the token (the
 * Chat page open). False after failing the test. */
static bool S_login(cdp *c, uigw *u, const char *chromium)
{
    if (!cdp_launch(c, chromium, 1100, 760)) {
        test_fail(__FILE__, __LINE__, "chromium: %s", c->err);
        return false;
    }
    if (!cdp_goto(c, u->url, 30000) || !cdp_wait(c, "!document.getElementById('login').hidden", 10000) ||
        !type_enter(c, "token", UTOKEN) ||
        !cdp_wait(c, "document.getElementById('status').textContent === 'connected'", 10000) ||
        !js_true(c, "document.getElementById('nav-chat').click(), "
                    "!document.getElementById('tab-chat').hidden")) {
        test_fail(__FILE__, __LINE__, "login: %s", c->err);
        return false;
    }
    return true;
}

/* A card: the tool's name, its arguments in a line, done, folded, the result
 * inside mentioning MEMORY.md. */
#define TOOL_CARD                                                                                  \
    "[...document.querySelectorAll('#log details.tool')].some(d => "                               \
    "d.querySelector('.tname').textContent === 'memory_search' && "                                \
    "d.querySelector('.targs').textContent.indexOf('query: \"Biscuit dog\"') >= 0 && "             \
    "d.querySelector('.tstate').textContent === 'done' && !d.open && "                             \
    "d.querySelector('.tresult').textContent.indexOf('MEMORY.md') >= 0)"

/* Chat: a turn whose model calls memory_search shows a tool-call card (from
 * the "agent" tool events the page asked for with caps ["tool-events"]),
 * between the question and the answer; the card opens to show the result;
 * the history shows it again after a reload. */
TEST(control_ui_browser_tool_cards)
{
    const char *chromium = cdp_find_chromium();
    if (!chromium)
        SKIP("chromium", "no /usr/bin/chromium (apt-get install chromium, or set "
                         "CLAWMEM_TEST_CHROMIUM)");
    uigw u;
    if (!ui_up(&u, NULL)) return;
    fake_push_chat_call(u.fs, "call_ui_1", "memory_search", "{\"query\":\"Biscuit dog\"}");
    fake_push_chat_text(u.fs, "He is called Biscuit.", 30);
    cdp c;
    if (!S_login(&c, &u, chromium)) goto out;
    MUST(type_enter(&c, "text", "Look up my dog"));
    WAIT(&c, TOOL_CARD, 30000);
    WAIT(&c,
         "[...document.querySelectorAll('#log .assistant')].some(e => "
         "e.textContent === 'He is called Biscuit.')",
         30000);
    /* in order: the question, the card, the answer */
    MUST(js_true(&c, "(() => { const k = [...document.getElementById('log').children]"
                     ".map(e => e.className); return k.join(' ') === "
                     "'msg user tool msg assistant'; })()"));
    size_t starts = 0, results = 0, i;
    json_t *f;
    json_array_foreach(c.ws_frames, i, f)
    {
        const char *s = json_string_value(f);
        if (!strstr(s, "\"event\":\"agent\"") || !strstr(s, "\"stream\":\"tool\"")) continue;
        if (strstr(s, "\"phase\":\"start\"") && strstr(s, "\"toolCallId\":\"call_ui_1\"")) starts++;
        if (strstr(s, "\"phase\":\"result\"") && strstr(s, "\"isError\":false")) results++;
    }
    if (starts != 1 || results != 1)
        test_fail(__FILE__, __LINE__, "%zu start and %zu result tool events", starts, results);
    MUST(js_true(&c, "document.querySelector('#log details.tool summary').click(), "
                     "document.querySelector('#log details.tool').open"));
    SHOT(&c, "chat-tool");
    /* from the history: Sessions and back reloads it */
    MUST(js_true(&c, "document.getElementById('nav-sessions').click(), "
                     "document.getElementById('nav-chat').click(), true"));
    WAIT(&c, "document.querySelectorAll('#log .assistant').length === 1 && " TOOL_CARD, 10000);
    if (json_array_size(c.problems)) {
        char *s = json_dumps(c.problems, JSON_INDENT(2));
        test_fail(__FILE__, __LINE__, "the page reported problems:\n%s", s);
        free(s);
    }
out:
    cdp_close(&c);
    ui_down(&u);
}

/* Seeds session agent:main:seeded of the running gateway's store (through the
 * library, as a run writes them): a turn, a compaction record, a memory flush
 * turn with the flush prompt the runtime makes, and one turn more. */
static bool S_seed_transcript(uigw *u)
{
    char ws[4096], state[4096], err[512], id[40];
    snprintf(ws, sizeof ws, "%s", path_in(u->dir, "ws"));
    snprintf(state, sizeof state, "%s", path_in(u->dir, "state"));
    cm_options o = {NULL, ws, NULL, state, NULL, NULL, 1};
    cm_sessions *s = NULL;
    char *js = NULL;
    bool ok = false;
    static const char key[] = "agent:main:seeded";
    flush_settings fs = {0};
    buf fp = BUF_INIT;
    json_t *shown = NULL, *fields = NULL;
    if (cm_sessions_open(&o, &s, err, sizeof err) ||
        cm_sessions_append(s, key, "user", "Plan the trip to the coast", &js, err, sizeof err))
        goto out;
    cm_free(js), js = NULL;
    if (cm_sessions_append(s, key, "assistant", "Train on Friday, back Sunday.", &js, err,
                           sizeof err))
        goto out;
    cm_free(js), js = NULL;
    if (cm_sessions_show(s, key, 1, &js, err, sizeof err)) goto out;
    shown = json_loads(js, 0, NULL);
    const char *tp = json_string_value(json_object_get(shown, "transcript"));
    const char *sid =
        json_string_value(json_object_get(json_object_get(shown, "entry"), "sessionId"));
    const char *kept = json_string_value(json_object_get(json_array_get(json_object_get(shown,
                                                                                         "records"),
                                                                        0),
                                                         "id"));
    fields = json_pack("{s:s,s:s,s:i}", "summary", "The user planned a trip to the coast.",
                       "firstKeptEntryId", kept ? kept : "", "tokensBefore", 181234);
    if (!tp || !sid ||
        cm_transcript_append(tp, sid, ws, "compaction", fields, cm_wall_ms(), id, err,
                             sizeof err))
        goto out;
    if (cm_flush_settings_init(&fs, NULL, err, sizeof err) ||
        cm_flush_prompt_for(fs.prompt, cm_wall_ms(), NULL, &fp))
        goto out;
    cm_free(js), js = NULL;
    if (cm_sessions_append(s, key, "user", fp.data, &js, err, sizeof err)) goto out;
    cm_free(js), js = NULL;
    if (cm_sessions_append(s, key, "assistant", "NO_REPLY", &js, err, sizeof err)) goto out;
    cm_free(js), js = NULL;
    if (cm_sessions_append(s, key, "user", "And the hotel?", &js, err, sizeof err)) goto out;
    cm_free(js), js = NULL;
    if (cm_sessions_append(s, key, "assistant", "The one by the harbour.", &js, err, sizeof err))
        goto out;
    ok = true;
out:
    if (!ok) test_fail(__FILE__, __LINE__, "seeding the transcript: %s", err);
    cm_free(js);
    json_decref(shown);
    json_decref(fields);
    cm_flush_settings_release(&fs);
    cm_buf_release(&fp);
    cm_sessions_close(s);
    return ok;
}

/* Sessions: a session's transcript shows its compaction and its memory
 * flush as markers (the flush turn's records marked, the turns around it
 * not). Memory: the plot of what the index holds draws a bar per source and
 * month (MEMORY.md dated back to March 2026, today's note this month). */
TEST(control_ui_browser_transcript_markers_memory_plot)
{
    const char *chromium = cdp_find_chromium();
    if (!chromium)
        SKIP("chromium", "no /usr/bin/chromium (apt-get install chromium, or set "
                         "CLAWMEM_TEST_CHROMIUM)");
    uigw u;
    if (!ui_up(&u, NULL)) return;
    cdp c;
    memset(&c, 0, sizeof c);
    c.pid = -1;
    c.to = c.from = -1;
    if (!S_seed_transcript(&u)) goto out;
    {
        struct timeval tv[2] = {{1773576000, 0}, {1773576000, 0}}; /* 2026-03-15 */
        MUST(utimes(path_in(u.dir, "ws/MEMORY.md"), tv) == 0);
    }
    if (!S_login(&c, &u, chromium)) goto out;

    /* Sessions: the seeded session's transcript */
    MUST(js_true(&c, "document.getElementById('nav-sessions').click(), true"));
    WAIT(&c,
         "[...document.querySelectorAll('#sessions li')].some(li => "
         "li.textContent.indexOf('agent:main:seeded') >= 0)",
         10000);
    MUST(js_true(&c, "[...document.querySelectorAll('#sessions li')].find(li => "
                     "li.textContent.indexOf('agent:main:seeded') >= 0)"
                     ".querySelector('button[id^=\"tx-\"]').click(), true"));
    WAIT(&c, "document.querySelectorAll('#tx-records li').length >= 6", 10000);
    MUST(js_true(&c, "(() => { const m = [...document.querySelectorAll('#tx-records .marker')];"
                     " return m.length === 2 && m[0].classList.contains('compaction') && "
                     "m[0].textContent.indexOf('181,234 tokens summarised') >= 0 && "
                     "m[0].textContent.indexOf('planned a trip') >= 0 && "
                     "m[1].classList.contains('flush') && "
                     "m[1].textContent.indexOf('Memory flush') === 0; })()"));
    /* the flush turn's two records, marked; the turns around them not */
    MUST(js_true(&c, "(() => { const f = [...document.querySelectorAll('#tx-records .in-flush')];"
                     " return f.length === 2 && f[0].textContent.indexOf('Store durable "
                     "memories') >= 0 && f[1].textContent.indexOf('NO_REPLY') >= 0 && "
                     "[...document.querySelectorAll('#tx-records .rec:not(.in-flush)')].some("
                     "e => e.textContent.indexOf('And the hotel?') >= 0); })()"));
    /* in order: first turn, compaction, flush, last turn */
    MUST(js_true(&c, "(() => { const t = document.getElementById('tx-records').textContent;"
                     " const a = t.indexOf('Plan the trip'), b = t.indexOf('Compaction'),"
                     " f = t.indexOf('Memory flush'), h = t.indexOf('And the hotel?');"
                     " return a >= 0 && a < b && b < f && f < h; })()"));
    MUST(js_true(&c, "document.getElementById('tx-meta').textContent.indexOf("
                     "'1 compaction · 1 memory flush') >= 0"));
    MUST(js_true(&c, "document.querySelector('#tx-records .marker summary').click(), true"));
    SHOT(&c, "sessions-transcript");

    /* Memory: a search (the index synced), then the plot */
    MUST(js_true(&c, "document.getElementById('nav-memory').click(), true"));
    MUST(type_enter(&c, "mquery", "Biscuit"));
    WAIT(&c, "document.querySelectorAll('#mresults li').length > 0", 20000);
    MUST(js_true(&c, "document.getElementById('nav-chat').click(), "
                     "document.getElementById('nav-memory').click(), true"));
    {
        char month[16], js[1024];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(month, sizeof month, "%Y-%m", &tm);
        snprintf(js, sizeof js,
                 "(() => { const b = [...document.querySelectorAll('#mplot svg rect.bar')];"
                 " return b.length === 2 && b.some(r => r.getAttribute('data-month') === "
                 "'2026-03' && r.getAttribute('data-files') === '1' && "
                 "r.getAttribute('data-source') === 'memory' && Number(r.getAttribute('height')) "
                 "> 0) && b.some(r => r.getAttribute('data-month') === '%s' && "
                 "r.getAttribute('data-files') === '1'); })()",
                 month);
        WAIT(&c, js, 20000);
    }
    MUST(js_true(&c, "document.getElementById('mplot-meta').textContent.indexOf('2 files') === 0 "
                     "&& document.getElementById('mplot-legend').textContent.indexOf('memory') "
                     ">= 0"));
    MUST(js_true(&c, "document.getElementById('mplot').scrollIntoView(), true"));
    SHOT(&c, "memory-plot");
    MUST(cdp_viewport(&c, 390, 844));
    if (!js_true(&c, FITS)) test_fail(__FILE__, __LINE__, "the plot scrolls sideways at 390 px");
    SHOT(&c, "memory-plot-phone");
    if (json_array_size(c.problems)) {
        char *p = json_dumps(c.problems, JSON_INDENT(2));
        test_fail(__FILE__, __LINE__, "the page reported problems:\n%s", p);
        free(p);
    }
out:
    cdp_close(&c);
    ui_down(&u);
}

/* Memory: the index's status above the plot — the counts, the provider and
 * each problem the index records, here a note with invalid UTF-8 whose name
 * holds markup, shown as text (no element made of it). */
TEST(control_ui_browser_memory_status_problems)
{
    const char *chromium = cdp_find_chromium();
    if (!chromium)
        SKIP("chromium", "no /usr/bin/chromium (apt-get install chromium, or set "
                         "CLAWMEM_TEST_CHROMIUM)");
    uigw u;
    if (!ui_up(&u, NULL)) return;
    cdp c;
    memset(&c, 0, sizeof c);
    c.pid = -1;
    c.to = c.from = -1;
    write_file(u.dir, "ws/memory/<i>odd</i>.md", "# Odd\n\nCaf\xe9 au lait with Biscuit.\n");
    if (!S_login(&c, &u, chromium)) goto out;
    MUST(js_true(&c, "document.getElementById('nav-memory').click(), true"));
    MUST(type_enter(&c, "mquery", "Biscuit"));
    WAIT(&c, "document.querySelectorAll('#mresults li').length > 0", 20000);
    MUST(js_true(&c, "document.getElementById('nav-chat').click(), "
                     "document.getElementById('nav-memory').click(), true"));
    WAIT(&c,
         "(() => { const s = document.getElementById('mstatus').textContent;"
         " return s.indexOf('3 files · ') === 0 && s.indexOf('provider none') > 0 && "
         "s.indexOf('keyword search') > 0 && s.indexOf('1 problem') > 0; })()",
         20000);
    MUST(js_true(&c, "(() => { const l = [...document.querySelectorAll('#mproblems li')];"
                     " return l.length === 1 && l[0].querySelector('strong').textContent === "
                     "'memory/<i>odd</i>.md' && l[0].textContent.indexOf('invalid UTF-8') > 0 && "
                     "!document.querySelector('#mproblems i'); })()"));
    MUST(js_true(&c, "document.getElementById('mstatus').scrollIntoView(), true"));
    SHOT(&c, "memory-status");
    MUST(cdp_viewport(&c, 390, 844));
    if (!js_true(&c, FITS)) test_fail(__FILE__, __LINE__, "the status scrolls sideways at 390 px");
    if (json_array_size(c.problems)) {
        char *p = json_dumps(c.problems, JSON_INDENT(2));
        test_fail(__FILE__, __LINE__, "the page reported problems:\n%s", p);
        free(p);
    }
out:
    cdp_close(&c);
    ui_down(&u);
}

/* Models: tokens per provider/model, summed over the assistant messages of
 * the agent's transcripts (a user message, a broken line and negative counts
 * count nothing), the most used model first, cost only where recorded. */
TEST(control_ui_browser_models_usage)
{
    const char *chromium = cdp_find_chromium();
    if (!chromium)
        SKIP("chromium", "no /usr/bin/chromium (apt-get install chromium, or set "
                         "CLAWMEM_TEST_CHROMIUM)");
    uigw u;
    if (!ui_up(&u, NULL)) return;
    cdp c;
    memset(&c, 0, sizeof c);
    c.pid = -1;
    c.to = c.from = -1;
#define A(prov, model, in, out, tot, cost)                                                         \
    "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"provider\":\"" prov               \
    "\",\"model\":\"" model "\",\"usage\":{\"input\":" #in ",\"output\":" #out                     \
    ",\"cacheRead\":0,\"cacheWrite\":0,\"totalTokens\":" #tot ",\"cost\":{\"total\":" #cost "}}}}\n"
    write_file(u.dir, "state/agents/main/sessions/s1.jsonl",
               "{\"type\":\"session\",\"id\":\"s1\"}\n"
               "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"usage\":{\"input\":99}}}\n"
               A("openai", "gpt-t", 1200, 300, 1500, 0) "{\"type\":\"mess\n"
               A("openai", "gpt-t", 800, 200, 1000, 0));
    write_file(u.dir, "state/agents/main/sessions/s2.jsonl",
               A("anthropic", "claude-x", 100, 50, 150, 0.0123)
                   A("anthropic", "claude-x", -5, -5, -5, -1));
#undef A
    if (!S_login(&c, &u, chromium)) goto out;
    MUST(js_true(&c, "document.getElementById('nav-models').click(), true"));
    WAIT(&c, "document.querySelectorAll('#md-usage tr[data-model]').length === 2", 10000);
    MUST(js_true(&c, "(() => { const r = [...document.querySelectorAll('#md-usage tr[data-model]')]"
                     ".map(t => [...t.querySelectorAll('td')].map(d => d.textContent).join('|'));"
                     " return r[0] === 'openai/gpt-t|2|2,000|500|0|0|2,500|—' && "
                     "r[1] === 'anthropic/claude-x|2|100|50|0|0|150|$0.0123'; })()"));
    MUST(js_true(&c, "document.getElementById('md-usage-meta').textContent === "
                     "'from 2 transcripts'"));
    MUST(js_true(&c, "document.getElementById('md-usage').scrollIntoView(), true"));
    SHOT(&c, "models-usage");
    MUST(cdp_viewport(&c, 390, 844));
    if (!js_true(&c, FITS)) test_fail(__FILE__, __LINE__, "the usage scrolls sideways at 390 px");
    if (json_array_size(c.problems)) {
        char *p = json_dumps(c.problems, JSON_INDENT(2));
        test_fail(__FILE__, __LINE__, "the page reported problems:\n%s", p);
        free(p);
    }
out:
    cdp_close(&c);
    ui_down(&u);
}
