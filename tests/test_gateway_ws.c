/*
 * test_gateway_ws.c — the gateway protocol over a real socket: `clawmem
 * gateway` (cm_gateway_start) on a loopback port with the fake model, a
 * small WebSocket client here; the handshake, a wrong token, a read-only
 * client refused chat.send, chat.send streaming the model's reply, the
 * memory methods on the agent's shared engine,
 * and the Control UI page with its Content-Security-Policy.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../include/clawmem.h"
#include "../src/base/sha256.h"
#include "../src/gateway/core/pairing.h"
#include "../src/net/wsframe.h"
#include "fakeserver.h"
#include "test.h"

#define WTOKEN "tok-ws-test-9137"

typedef struct wsgw {
    fake_server *fs;
    char base[64], *dir, *ws, *state;
    cm_gateway *g;
    int port;
} wsgw;

static bool gw_up_token(wsgw *w, const char *token);
static bool gw_up(wsgw *w)
{
    return gw_up_token(w, WTOKEN);
}

static bool gw_up_token(wsgw *w, const char *token)
{
    memset(w, 0, sizeof *w);
    w->fs = fake_start(8, w->base);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n");
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"%s\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\",\"memorySearch\":{"
             "\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ws-0001\",\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             token ? token : WTOKEN, w->base);
    write_file(w->dir, "state/quantumclaw.json", cfg);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    cm_gateway_opts go = {"127.0.0.1:0", 1};
    char err[512];
    if (cm_gateway_start(&o, &go, &w->g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        return false;
    }
    const char *a = cm_gateway_address(w->g);
    const char *colon = a ? strrchr(a, ':') : NULL;
    w->port = colon ? (int)strtol(colon + 1, NULL, 10) : 0;
    return true;
}

static void gw_down(wsgw *w)
{
    cm_gateway_drain(w->g, 5000);
    cm_gateway_free(w->g);
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

/* ---- a small client ---------------------------------------------------------- */

typedef struct wsc {
    int fd;
    buf in;
} wsc;

static int t_dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until the HTTP head ends; returns it (malloc'd), or NULL. */
static char *t_read_head(int fd, buf *rest)
{
    buf b = BUF_INIT;
    char tmp[4096];
    for (int i = 0; i < 200; i++) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) break;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) break;
        cm_buf_add(&b, tmp, (size_t)r);
        char *end = strstr(b.data, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end - b.data) + 4;
            cm_buf_add(rest, b.data + hl, b.len - hl);
            b.len = hl;
            b.data[hl] = 0;
            return cm_buf_detach(&b);
        }
    }
    cm_buf_release(&b);
    return NULL;
}

static bool ws_open(wsc *c, int port, const char *origin, char **head_out)
{
    memset(c, 0, sizeof c[0]);
    c->fd = t_dial(port);
    if (c->fd < 0) return false;
    char req[512];
    snprintf(req, sizeof req,
             "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: "
             "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Version: 13\r\n%s%s%s\r\n",
             port, origin ? "Origin: " : "", origin ? origin : "", origin ? "\r\n" : "");
    send(c->fd, req, strlen(req), MSG_NOSIGNAL);
    char *head = t_read_head(c->fd, &c->in);
    bool ok = head && !strncmp(head, "HTTP/1.1 101", 12) &&
              strstr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    if (head_out)
        *head_out = head;
    else
        free(head);
    return ok;
}

static void ws_close(wsc *c)
{
    if (c->fd >= 0) close(c->fd);
    cm_buf_release(&c->in);
}

static void ws_send(wsc *c, const char *text)
{
    static const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
    buf f = BUF_INIT;
    cm_ws_frame_encode(&f, WS_OP_TEXT, text, strlen(text), true, key);
    send(c->fd, f.data, f.len, MSG_NOSIGNAL);
    cm_buf_release(&f);
}

/* The next text frame as JSON (NULL on close or after timeout_ms). */
static json_t *ws_recv(wsc *c, int timeout_ms)
{
    for (;;) {
        ws_frame fr;
        long k = cm_ws_frame_parse((uint8_t *)c->in.data, c->in.len, false, 1 << 24, &fr);
        if (k < 0) return NULL;
        if (k > 0) {
            json_t *o = fr.opcode == WS_OP_TEXT ? json_loadb((char *)fr.payload, fr.len, 0, NULL)
                                                : NULL;
            bool closing = fr.opcode == WS_OP_CLOSE;
            memmove(c->in.data, c->in.data + k, c->in.len - (size_t)k);
            c->in.len -= (size_t)k;
            if (closing) return NULL;
            if (o) return o;
            continue;
        }
        struct pollfd p = {c->fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return NULL;
        char tmp[8192];
        ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
        if (r <= 0) return NULL;
        cm_buf_add(&c->in, tmp, (size_t)r);
    }
}

/* The next res frame (events skipped) or NULL. */
static json_t *ws_res(wsc *c)
{
    for (int i = 0; i < 100; i++) {
        json_t *o = ws_recv(c, 10000);
        if (!o) return NULL;
        const char *t = json_string_value(json_object_get(o, "type"));
        if (t && !strcmp(t, "res")) return o;
        json_decref(o);
    }
    return NULL;
}

static json_t *ws_connect(wsc *c, const char *token, const char *scopes)
{
    json_t *ch = ws_recv(c, 5000);
    bool challenged =
        ch && !strcmp(json_string_value(json_object_get(ch, "event")), "connect.challenge");
    json_decref(ch);
    if (!challenged) return NULL;
    char req[1024];
    snprintf(req, sizeof req,
             "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
             "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"test\",\"version\":\"1\","
             "\"platform\":\"linux\",\"mode\":\"test\"},\"role\":\"operator\",\"scopes\":%s,"
             "\"auth\":{\"token\":\"%s\"}}}",
             scopes, token);
    ws_send(c, req);
    return ws_res(c);
}

static json_t *ws_call(wsc *c, const char *id, const char *method, const char *params)
{
    char req[2048];
    snprintf(req, sizeof req, "{\"type\":\"req\",\"id\":\"%s\",\"method\":\"%s\",\"params\":%s}",
             id, method, params);
    ws_send(c, req);
    return ws_res(c);
}

/* ---- tests -------------------------------------------------------------------- */

TEST(gateway_ws_accept_key_rfc_example)
{
    char out[29];
    cm_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
    EXPECT_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    unsigned char md[20];
    cm_ws_sha1("abc", 3, md);
    EXPECT_INT(md[0], 0xa9);
    EXPECT_INT(md[19], 0x9d);
}

TEST(gateway_ws_frames_masked_fragmented_and_refused)
{
    uint8_t k[4] = {1, 2, 3, 4};
    buf f = BUF_INIT;
    char big[70000];
    memset(big, 'x', sizeof big);
    EXPECT(!cm_ws_frame_encode(&f, WS_OP_TEXT, big, sizeof big, true, k));
    ws_frame fr;
    EXPECT_INT(cm_ws_frame_parse((uint8_t *)f.data, f.len - 1, true, 1 << 20, &fr), 0);
    EXPECT_INT(cm_ws_frame_parse((uint8_t *)f.data, f.len, true, 1 << 20, &fr), (long)f.len);
    EXPECT(fr.len == sizeof big && fr.payload[0] == 'x' && fr.payload[69999] == 'x');
    EXPECT_INT(cm_ws_frame_parse((uint8_t *)f.data, f.len, true, 1000, &fr), -WS_CLOSE_TOO_BIG);
    uint8_t unmasked[] = {0x81, 0x02, 'h', 'i'};
    EXPECT_INT(cm_ws_frame_parse(unmasked, 4, true, 100, &fr), -WS_CLOSE_PROTOCOL);
    uint8_t rsv[] = {0xC1, 0x80, 0, 0, 0, 0};
    EXPECT_INT(cm_ws_frame_parse(rsv, 6, true, 100, &fr), -WS_CLOSE_PROTOCOL);
    uint8_t frag_ping[] = {0x09, 0x80, 0, 0, 0, 0};
    EXPECT_INT(cm_ws_frame_parse(frag_ping, 6, true, 100, &fr), -WS_CLOSE_PROTOCOL);
    cm_buf_release(&f);
}

TEST(gateway_ws_handshake_hello_ok_and_bad_token)
{
    wsgw w;
    if (!gw_up(&w)) return;
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.read\",\"operator.write\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_t *pl = json_object_get(r, "payload");
    EXPECT_STR(json_string_value(json_object_get(pl, "type")), "hello-ok");
    EXPECT_INT(json_integer_value(json_object_get(pl, "protocol")), 3);
    char *m = json_dumps(json_object_get(json_object_get(pl, "features"), "methods"), 0);
    EXPECT(m && strstr(m, "\"chat.send\"") && strstr(m, "\"chat.history\"") &&
           strstr(m, "\"logs.tail\""));
    free(m);
    json_decref(r);
    r = ws_call(&c, "2", "config.get", "{}");
    char *s = r ? json_dumps(r, 0) : NULL;
    EXPECT(s && strstr(s, "__QUANTUMCLAW_REDACTED__") && !strstr(s, WTOKEN) &&
           !strstr(s, "sk-test-ws-0001"));
    free(s);
    json_decref(r);
    ws_close(&c);

    EXPECT(ws_open(&c, w.port, NULL, NULL));
    r = ws_connect(&c, "wrong-token", "[\"operator.read\"]");
    EXPECT(r && json_is_false(json_object_get(r, "ok")));
    json_t *e = json_object_get(r, "error");
    EXPECT_STR(json_string_value(json_object_get(e, "code")), "INVALID_REQUEST");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(e, "details"), "code")),
               "AUTH_TOKEN_MISMATCH");
    json_decref(r);
    EXPECT(ws_recv(&c, 5000) == NULL); /* closed */
    ws_close(&c);

    /* a browser of another origin is refused at the upgrade */
    char *head = NULL;
    EXPECT(!ws_open(&c, w.port, "http://evil.example", &head));
    EXPECT(head && !strncmp(head, "HTTP/1.1 403", 12));
    free(head);
    ws_close(&c);
    gw_down(&w);
}

/* config.get and models.list show the config the gateway runs with after a
 * reload (SIGHUP's, or the file watch's), not the one it started with. */
TEST(gateway_ws_config_get_shows_the_reloaded_config)
{
    wsgw w;
    if (!gw_up(&w)) return;
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.read\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = NULL;
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"%s\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\",\"memorySearch\":{"
             "\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ws-0001\",\"models\":[{\"id\":\"gpt-new\"}]}}},"
             "\"messages\":{\"responsePrefix\":\"[reloaded]\",\"inbound\":{\"debounceMs\":0}}}",
             WTOKEN, w.base);
    write_file(w.dir, "state/quantumclaw.json", cfg);
    cm_gateway_reload(w.g);
    const char *prefix = NULL;
    for (int i = 0; i < 200 && !prefix; i++) { /* the reload runs on its own thread */
        json_decref(r);
        r = ws_call(&c, "2", "config.get", "{}");
        prefix = json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(r, "payload"), "config"), "messages"),
            "responsePrefix"));
        if (!prefix) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    EXPECT_STR(prefix ? prefix : "(start config)", "[reloaded]");
    char *s = r ? json_dumps(r, 0) : NULL;
    EXPECT(s && !strstr(s, WTOKEN) && !strstr(s, "sk-test-ws-0001")); /* still redacted */
    free(s);
    json_decref(r);
    r = ws_call(&c, "3", "models.list", "{}");
    s = r ? json_dumps(r, 0) : NULL;
    EXPECT(s && strstr(s, "\"id\": \"gpt-new\""));
    free(s);
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}

TEST(gateway_ws_read_scope_cannot_chat_send_node_refused)
{
    wsgw w;
    if (!gw_up(&w)) return;
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.read\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_call(&c, "2", "chat.send",
                "{\"sessionKey\":\"main\",\"message\":\"hi\",\"idempotencyKey\":\"k1\"}");
    EXPECT(r && json_is_false(json_object_get(r, "ok")));
    EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
               "missing scope: operator.write");
    json_decref(r);
    r = ws_call(&c, "3", "sessions.list", "{}");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    EXPECT_INT(fake_count(w.fs), 0);
    ws_close(&c);
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *ch = ws_recv(&c, 5000);
    json_decref(ch);
    ws_send(&c, "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
                "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"n\",\"version\":\"1\","
                "\"platform\":\"ios\",\"mode\":\"node\"},\"role\":\"node\",\"auth\":{\"token\":\"" WTOKEN
                "\"}}}");
    r = ws_res(&c);
    EXPECT(r && json_is_false(json_object_get(r, "ok")));
    EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "error"), "code")),
               "NOT_PAIRED");
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}

TEST(gateway_ws_chat_send_streams_reply_and_history)
{
    wsgw w;
    if (!gw_up(&w)) return;
    fake_push_chat_text(w.fs, "The dog is called Biscuit, as your notes say.", 50);
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.write\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    ws_send(&c, "{\"type\":\"req\",\"id\":\"2\",\"method\":\"chat.send\",\"params\":{"
                "\"sessionKey\":\"main\",\"message\":\"What is the dog called?\","
                "\"idempotencyKey\":\"idem-1\"}}");
    int deltas = 0;
    json_int_t last_seq = 0; /* the reference's per-run seq: grows with each event */
    bool res_ok = false;
    char *final = NULL;
    for (int i = 0; i < 200 && !final; i++) {
        json_t *o = ws_recv(&c, 20000);
        if (!o) break;
        const char *t = json_string_value(json_object_get(o, "type"));
        json_t *p = json_object_get(o, "payload");
        if (!strcmp(t, "res")) {
            res_ok = json_is_true(json_object_get(o, "ok")) &&
                     !strcmp(json_string_value(json_object_get(p, "runId")), "idem-1") &&
                     !strcmp(json_string_value(json_object_get(p, "status")), "started");
        } else if (!strcmp(json_string_value(json_object_get(o, "event")), "chat")) {
            const char *st = json_string_value(json_object_get(p, "state"));
            EXPECT_STR(json_string_value(json_object_get(p, "runId")), "idem-1");
            EXPECT_STR(json_string_value(json_object_get(p, "sessionKey")), "agent:main:main");
            json_t *txt = json_object_get(
                json_array_get(json_object_get(json_object_get(p, "message"), "content"), 0),
                "text");
            json_int_t seq = json_integer_value(json_object_get(p, "seq"));
            if (seq <= last_seq) test_fail(__FILE__, __LINE__, "chat seq %lld after %lld",
                                           (long long)seq, (long long)last_seq);
            last_seq = seq;
            if (!strcmp(st, "delta")) deltas++;
            if (!strcmp(st, "final")) final = cm_strdup(json_string_value(txt));
        }
        json_decref(o);
    }
    EXPECT(res_ok);
    EXPECT(deltas >= 1);
    EXPECT_STR(final, "The dog is called Biscuit, as your notes say.");
    free(final);
    r = ws_call(&c, "3", "chat.history", "{\"sessionKey\":\"main\"}");
    char *s = r ? json_dumps(json_object_get(r, "payload"), 0) : NULL;
    EXPECT(s && strstr(s, "What is the dog called?") && strstr(s, "Biscuit"));
    free(s);
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}

TEST(gateway_ws_control_ui_page_with_csp)
{
    wsgw w;
    if (!gw_up(&w)) return;
    int fd = t_dial(w.port);
    char req[256];
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n",
             w.port);
    send(fd, req, strlen(req), MSG_NOSIGNAL);
    buf rest = BUF_INIT;
    char *head = t_read_head(fd, &rest);
    EXPECT(head && !strncmp(head, "HTTP/1.1 200", 12));
    EXPECT(head && strstr(head, "Content-Security-Policy: default-src 'none'; script-src 'self'"));
    EXPECT(head && strstr(head, "frame-ancestors 'none'"));
    free(head);
    cm_buf_release(&rest);
    close(fd);
    gw_down(&w);
}

static const char *S_err(const json_t *r)
{
    return json_string_value(json_object_get(json_object_get(r, "error"), "message"));
}

static const char *S_entry(const json_t *r, const char *k)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(r, "payload"), "entry"), k));
}

/* sessions.patch / sessions.reset: operator.admin only (read and write
 * clients get the reference's "missing scope: operator.admin"); values
 * normalised as the reference does, bad ones refused with its messages; the
 * model override is what the session's next run asks the model for; null
 * clears; reset gives the session a new id. */
TEST(gateway_ws_sessions_patch_reset_admin_scope)
{
    wsgw w;
    if (!gw_up(&w)) return;
    static const char *const weak[] = {"[\"operator.read\"]", "[\"operator.write\"]"};
    for (int i = 0; i < 2; i++) {
        wsc c;
        EXPECT(ws_open(&c, w.port, NULL, NULL));
        json_t *r = ws_connect(&c, WTOKEN, weak[i]);
        EXPECT(r && json_is_true(json_object_get(r, "ok")));
        json_decref(r);
        r = ws_call(&c, "2", "sessions.patch", "{\"key\":\"main\",\"thinkingLevel\":\"high\"}");
        EXPECT(r && json_is_false(json_object_get(r, "ok")));
        EXPECT_STR(S_err(r), "missing scope: operator.admin");
        json_decref(r);
        r = ws_call(&c, "3", "sessions.reset", "{\"key\":\"main\"}");
        EXPECT_STR(S_err(r), "missing scope: operator.admin");
        json_decref(r);
        ws_close(&c);
    }
    wsc c;
    /* a webchat client (not a Control UI) may not patch, even as admin */
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *ch = ws_recv(&c, 5000);
    json_decref(ch);
    ws_send(&c, "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
                "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"webchat-ui\","
                "\"version\":\"1\",\"platform\":\"web\",\"mode\":\"webchat\"},\"role\":"
                "\"operator\",\"scopes\":[\"operator.admin\"],\"auth\":{\"token\":\"" WTOKEN
                "\"}}}");
    json_t *r = ws_res(&c);
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_call(&c, "2", "sessions.patch", "{\"key\":\"main\",\"thinkingLevel\":\"high\"}");
    EXPECT_STR(S_err(r), "webchat clients cannot patch sessions; use chat.send for "
                         "session-scoped updates");
    json_decref(r);
    ws_close(&c);
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    r = ws_connect(&c, WTOKEN, "[\"operator.admin\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_call(&c, "2", "sessions.patch", "{\"key\":\"main\",\"thinkingLevel\":\"lots\"}");
    EXPECT_STR(S_err(r), "invalid thinkingLevel (use off|minimal|low|medium|high|adaptive)");
    json_decref(r);
    r = ws_call(&c, "3", "sessions.patch", "{\"key\":\"main\",\"bogus\":1}");
    EXPECT_STR(S_err(r), "invalid sessions.patch params: at root: unexpected property 'bogus'");
    json_decref(r);
    r = ws_call(&c, "4", "sessions.patch", "{\"thinkingLevel\":\"on\"}");
    EXPECT_STR(S_err(r), "invalid sessions.patch params: must have required property 'key'");
    json_decref(r);
    r = ws_call(&c, "5", "sessions.patch",
                "{\"key\":\"main\",\"thinkingLevel\":\"on\",\"responseUsage\":\"enable\","
                "\"reasoningLevel\":\"show\",\"label\":\" Work \",\"model\":\"gpt-x\"}");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_t *p = json_object_get(r, "payload");
    EXPECT_STR(json_string_value(json_object_get(p, "key")), "agent:main:main");
    EXPECT_CONTAINS(json_string_value(json_object_get(p, "path")), "sessions.json");
    EXPECT_STR(S_entry(r, "thinkingLevel"), "low");
    EXPECT_STR(S_entry(r, "responseUsage"), "tokens");
    EXPECT_STR(S_entry(r, "reasoningLevel"), "on");
    EXPECT_STR(S_entry(r, "label"), "Work");
    EXPECT_STR(S_entry(r, "providerOverride"), "openai");
    EXPECT_STR(S_entry(r, "modelOverride"), "gpt-x");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(p, "resolved"), "model")),
               "gpt-x");
    char sid[160];
    snprintf(sid, sizeof sid, "%s", S_entry(r, "sessionId") ? S_entry(r, "sessionId") : "");
    json_decref(r);
    r = ws_call(&c, "6", "sessions.list", "{}");
    json_t *row = json_array_get(json_object_get(json_object_get(r, "payload"), "sessions"), 0);
    EXPECT_STR(json_string_value(json_object_get(row, "thinkingLevel")), "low");
    EXPECT_STR(json_string_value(json_object_get(row, "modelOverride")), "gpt-x");
    json_decref(r);
    /* the session's next run asks for the override */
    fake_push_chat_text(w.fs, "ok", 10);
    r = ws_call(&c, "7", "chat.send",
                "{\"sessionKey\":\"main\",\"message\":\"hi\",\"idempotencyKey\":\"p-1\"}");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    bool final = false;
    for (int i = 0; i < 200 && !final; i++) {
        json_t *o = ws_recv(&c, 20000);
        if (!o) break;
        final = !strcmp(json_string_value(json_object_get(o, "event")) ?: "", "chat") &&
                !strcmp(json_string_value(json_object_get(json_object_get(o, "payload"),
                                                          "state")) ?: "", "final");
        json_decref(o);
    }
    EXPECT(final);
    EXPECT_INT(fake_count(w.fs), 1);
    if (fake_count(w.fs) >= 1) EXPECT_CONTAINS(fake_get(w.fs, 0)->body, "\"model\":\"gpt-x\"");
    /* null clears the model override */
    r = ws_call(&c, "8", "sessions.patch", "{\"key\":\"main\",\"model\":null,\"label\":null}");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    EXPECT(S_entry(r, "modelOverride") == NULL && S_entry(r, "label") == NULL);
    EXPECT_STR(S_entry(r, "thinkingLevel"), "low");
    json_decref(r);
    r = ws_call(&c, "9", "sessions.reset", "{\"key\":\"main\",\"reason\":\"later\"}");
    EXPECT(r && json_is_false(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_call(&c, "10", "sessions.reset", "{\"key\":\"main\",\"reason\":\"new\"}");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    EXPECT(S_entry(r, "sessionId") && strcmp(S_entry(r, "sessionId"), sid) != 0);
    EXPECT_STR(S_entry(r, "thinkingLevel"), "low"); /* settings stay */
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}

/* clawmem.pairing.*: a pending request listed, approve refused to a read
 * client, deny drops it (no sender approved), a code no longer pending is
 * NOT_FOUND. */
TEST(gateway_ws_pairing_list_deny_scopes)
{
    wsgw w;
    if (!gw_up(&w)) return;
    gw_access_result ar;
    char err[256];
    EXPECT_INT(cm_gw_pairing_request(w.state, "telegram", "default", "dave", cm_wall_ms(), &ar,
                                     err, sizeof err),
               CM_OK);
    EXPECT_INT(ar.verdict, GW_ACCESS_PAIRING_ISSUED);
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.read\"]");
    json_decref(r);
    r = ws_call(&c, "2", "clawmem.pairing.list", "{}");
    char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
    EXPECT(s && strstr(s, "\"channel\":\"telegram\"") && strstr(s, ar.code) &&
           strstr(s, "\"id\":\"dave\""));
    free(s);
    json_decref(r);
    char req[256];
    snprintf(req, sizeof req, "{\"channel\":\"telegram\",\"code\":\"%s\"}", ar.code);
    r = ws_call(&c, "3", "clawmem.pairing.approve", req);
    EXPECT_STR(S_err(r), "missing scope: operator.write");
    json_decref(r);
    ws_close(&c);
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    r = ws_connect(&c, WTOKEN, "[\"operator.write\"]");
    json_decref(r);
    r = ws_call(&c, "4", "clawmem.pairing.deny", req);
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "payload"), "id")), "dave");
    json_decref(r);
    r = ws_call(&c, "5", "clawmem.pairing.approve", req);
    EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "error"), "code")),
               "NOT_FOUND");
    json_decref(r);
    r = ws_call(&c, "6", "clawmem.pairing.list", "{}");
    s = r ? json_dumps(r, JSON_COMPACT) : NULL;
    EXPECT(s && !strstr(s, ar.code) && !strstr(s, "dave"));
    free(s);
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}

/* Reads c's frames until the chat final of runId: the "agent" tool events
 * seen (their phases in order into phases, "start,result"), whether the
 * seqs of the run's events grew throughout; false without a final. */
static bool S_run_events(wsc *c, const char *run_id, buf *phases, json_t **start, json_t **result,
                         bool *seq_ok)
{
    json_int_t last = 0;
    *seq_ok = true;
    for (int i = 0; i < 300; i++) {
        json_t *o = ws_recv(c, 20000);
        if (!o) return false;
        const char *ev = json_string_value(json_object_get(o, "event"));
        json_t *p = json_object_get(o, "payload");
        bool mine = ev && !strcmp(json_string_value(json_object_get(p, "runId")), run_id);
        if (mine) {
            json_int_t seq = json_integer_value(json_object_get(p, "seq"));
            if (seq <= last) *seq_ok = false;
            last = seq;
        }
        if (mine && !strcmp(ev, "agent")) {
            json_t *d = json_object_get(p, "data");
            const char *ph = json_string_value(json_object_get(d, "phase"));
            cm_buf_printf(phases, "%s%s", phases->len ? "," : "", ph ? ph : "?");
            json_t **keep = ph && !strcmp(ph, "start") ? start : result;
            json_decref(*keep);
            *keep = json_incref(p);
        }
        bool final = mine && !strcmp(ev, "chat") &&
                     !strcmp(json_string_value(json_object_get(p, "state")), "final");
        json_decref(o);
        if (final) return true;
    }
    return false;
}

/* A client whose connect caps have "tool-events" gets an "agent" event
 * (stream "tool") as the run's memory_search starts (its arguments) and
 * ends (isError, the result's text), in the run's seq order; a client
 * without the cap gets the chat events only. */
TEST(gateway_ws_tool_events_only_with_caps)
{
    wsgw w;
    if (!gw_up(&w)) return;
    fake_push_chat_call(w.fs, "call_7", "memory_search", "{\"query\":\"Facts\"}");
    fake_push_chat_text(w.fs, "Found them.", 30);
    wsc a, b;
    EXPECT(ws_open(&a, w.port, NULL, NULL));
    EXPECT(ws_open(&b, w.port, NULL, NULL));
    json_t *ch = ws_recv(&a, 5000);
    json_decref(ch);
    ws_send(&a, "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
                "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"test\",\"version\":"
                "\"1\",\"platform\":\"linux\",\"mode\":\"test\"},\"role\":\"operator\","
                "\"scopes\":[\"operator.write\"],\"caps\":[\"tool-events\"],"
                "\"auth\":{\"token\":\"" WTOKEN "\"}}}");
    json_t *r = ws_res(&a);
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_connect(&b, WTOKEN, "[\"operator.read\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    ws_send(&a, "{\"type\":\"req\",\"id\":\"2\",\"method\":\"chat.send\",\"params\":{"
                "\"sessionKey\":\"main\",\"message\":\"Search the facts\","
                "\"idempotencyKey\":\"idem-tool\"}}");
    buf pa = BUF_INIT, pb = BUF_INIT;
    json_t *start = NULL, *result = NULL, *bs = NULL, *br = NULL;
    bool seq_a, seq_b;
    EXPECT(S_run_events(&a, "idem-tool", &pa, &start, &result, &seq_a));
    EXPECT(S_run_events(&b, "idem-tool", &pb, &bs, &br, &seq_b));
    EXPECT_STR(pa.data, "start,result");
    EXPECT(seq_a);
    EXPECT_INT((int)pb.len, 0);
    EXPECT_STR(json_string_value(json_object_get(start, "stream")), "tool");
    EXPECT_STR(json_string_value(json_object_get(start, "sessionKey")), "agent:main:main");
    json_t *sd = json_object_get(start, "data"), *rd = json_object_get(result, "data");
    EXPECT_STR(json_string_value(json_object_get(sd, "name")), "memory_search");
    EXPECT_STR(json_string_value(json_object_get(sd, "toolCallId")), "call_7");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(sd, "args"), "query")), "Facts");
    EXPECT(json_is_false(json_object_get(rd, "isError")));
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(json_object_get(rd, "result"), "content"), 0),
                        "text"));
    EXPECT(text && strstr(text, "MEMORY.md"));
    json_decref(start), json_decref(result), json_decref(bs), json_decref(br);
    cm_buf_release(&pa), cm_buf_release(&pb);
    ws_close(&a);
    ws_close(&b);
    gw_down(&w);
}

/* memory.search and memory.get use the default agent's engine, the one its
 * turns use (opened once, config read then): they keep answering after the
 * config file is broken on disk; an engine opened per call (the old way)
 * reads the config again and fails. */
TEST(gateway_ws_memory_methods_use_the_agents_engine)
{
    wsgw w;
    if (!gw_up(&w)) return;
    write_file(w.dir, "ws/memory/notes.md", "The lighthouse keeper is named Ottoline.\n");
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.read\"]");
    json_decref(r);
    for (int round = 0; round < 2; round++) {
        if (round == 1) write_file(w.dir, "state/quantumclaw.json", "{ not json");
        r = ws_call(&c, round ? "4" : "2", "memory.search", "{\"query\":\"lighthouse keeper\"}");
        char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
        EXPECT(s && strstr(s, "\"ok\":true") && strstr(s, "memory/notes.md"));
        free(s);
        json_decref(r);
        r = ws_call(&c, round ? "5" : "3", "memory.get", "{\"path\":\"memory/notes.md\"}");
        EXPECT_CONTAINS(json_string_value(json_object_get(json_object_get(r, "payload"), "text")),
                        "Ottoline");
        json_decref(r);
    }
    ws_close(&c);
    gw_down(&w);
}

/* ---- the reference CLI's frames, replayed ---------------------------------------- */

/* Ed25519 signing by libcrypto (dlopen, as src/base/ed25519.c verifies): the
 * tests' stand-in for the key a client keeps. */
static bool t_sign(const unsigned char priv[32], const char *msg, unsigned char sig[64],
                   unsigned char pub[32])
{
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    void *(*new_priv)(int, void *, const unsigned char *, size_t);
    int (*get_pub)(const void *, unsigned char *, size_t *);
    void *(*ctx_new)(void);
    void (*ctx_free)(void *), (*pkey_free)(void *);
    int (*init)(void *, void **, const void *, void *, void *);
    int (*sign)(void *, unsigned char *, size_t *, const unsigned char *, size_t);
    *(void **)&new_priv = dlsym(h, "EVP_PKEY_new_raw_private_key");
    *(void **)&get_pub = dlsym(h, "EVP_PKEY_get_raw_public_key");
    *(void **)&ctx_new = dlsym(h, "EVP_MD_CTX_new");
    *(void **)&ctx_free = dlsym(h, "EVP_MD_CTX_free");
    *(void **)&pkey_free = dlsym(h, "EVP_PKEY_free");
    *(void **)&init = dlsym(h, "EVP_DigestSignInit");
    *(void **)&sign = dlsym(h, "EVP_DigestSign");
    bool ok = false;
    if (new_priv && get_pub && ctx_new && ctx_free && pkey_free && init && sign) {
        void *k = new_priv(1087, NULL, priv, 32), *ctx = ctx_new();
        size_t pl = 32, sl = 64;
        ok = k && ctx && get_pub(k, pub, &pl) == 1 && init(ctx, NULL, NULL, NULL, k) == 1 &&
             sign(ctx, sig, &sl, (const unsigned char *)msg, strlen(msg)) == 1 && sl == 64;
        if (ctx) ctx_free(ctx);
        if (k) pkey_free(k);
    }
    dlclose(h);
    return ok;
}

static void t_b64url(const unsigned char *p, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        if (i + 1 < n) out[o++] = a[v >> 6 & 63];
        if (i + 2 < n) out[o++] = a[v & 63];
    }
    out[o] = 0;
}

/* Re-signs a recorded connect's params for a live challenge with the test's
 * key, as the reference's client signs (the v3 payload): everything else
 * the CLI sent stays as it sent it. False without libcrypto. */
static bool t_resign(json_t *p, const char *nonce, int64_t now)
{
    static const unsigned char priv[32] = {7, 1, 4, 2, 8, 5, 7, 1, 4, 2, 8, 5, 7, 1, 4, 2,
                                           8, 5, 7, 1, 4, 2, 8, 5, 7, 1, 4, 2, 8, 5, 7, 1};
    unsigned char sig[64], pub[32], md[32];
    if (!t_sign(priv, "x", sig, pub)) return false; /* the public key first: the id is its hash */
    char id[65], pk[64], sg[100];
    cm_sha256(pub, 32, md);
    for (int i = 0; i < 32; i++)
        snprintf(id + 2 * i, 3, "%02x", md[i]);
    t_b64url(pub, 32, pk);
    json_t *client = json_object_get(p, "client");
    buf m = BUF_INIT;
    cm_buf_printf(&m, "v3|%s|%s|%s|%s|", id, json_string_value(json_object_get(client, "id")),
                  json_string_value(json_object_get(client, "mode")),
                  json_string_value(json_object_get(p, "role")));
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(p, "scopes"), i, s)
    {
        cm_buf_printf(&m, "%s%s", i ? "," : "", json_string_value(s));
    }
    const char *plat = json_string_value(json_object_get(client, "platform"));
    cm_buf_printf(&m, "|%lld|%s|%s|%s|", (long long)now,
                  json_string_value(json_object_get(json_object_get(p, "auth"), "token")), nonce,
                  plat ? plat : "");
    bool ok = t_sign(priv, m.data, sig, pub);
    cm_buf_release(&m);
    t_b64url(sig, 64, sg);
    json_object_set_new(p, "device", json_pack("{s:s,s:s,s:s,s:I,s:s}", "id", id, "publicKey", pk,
                                               "signature", sg, "signedAt", (json_int_t)now,
                                               "nonce", nonce));
    return ok;
}

/* The frames `openclaw gateway call` sent (one connection per call: the
 * connect with its signed device identity, then the method), replayed
 * against clawmem's gateway with the device re-signed for clawmem's
 * challenge: each connect is accepted, and each method answers ok as the
 * reference's gateway did (tests/fixtures/reference-cli-frames.json). */
TEST(gateway_ws_replays_the_reference_cli_frames)
{
    json_t *doc = json_load_file("tests/fixtures/reference-cli-frames.json", 0, NULL);
    EXPECT(doc != NULL);
    const char *token = json_string_value(json_object_get(doc, "token"));
    wsgw w;
    if (!gw_up_token(&w, token)) return;
    fake_push_chat_text(w.fs, "CLI round trip answer.", 50);
    json_t *frames = json_object_get(doc, "frames");
    int conns = 0, methods = 0;
    wsc c;
    bool open = false;
    int conn = 0;
    size_t i;
    json_t *m;
    json_array_foreach(frames, i, m)
    {
        const char *dir = json_string_value(json_object_get(m, "dir"));
        json_t *f = json_object_get(m, "frame");
        if (strcmp(dir, "client")) continue;
        int n = (int)json_integer_value(json_object_get(m, "conn"));
        if (n != conn) {
            if (open) ws_close(&c);
            conn = n;
            EXPECT(ws_open(&c, w.port, NULL, NULL));
            open = true;
        }
        const char *method = json_string_value(json_object_get(f, "method"));
        json_t *sent = json_deep_copy(f);
        if (!strcmp(method, "connect")) {
            json_t *ch = ws_recv(&c, 5000);
            const char *nonce =
                json_string_value(json_object_get(json_object_get(ch, "payload"), "nonce"));
            EXPECT(nonce != NULL);
            if (!t_resign(json_object_get(sent, "params"), nonce, cm_wall_ms())) {
                json_decref(ch), json_decref(sent), json_decref(doc), ws_close(&c), gw_down(&w);
                SKIP("libcrypto", "libcrypto.so.3 cannot be loaded");
            }
            json_decref(ch);
            conns++;
        } else {
            methods++;
        }
        char *text = json_dumps(sent, JSON_COMPACT);
        ws_send(&c, text);
        free(text);
        json_decref(sent);
        json_t *r = ws_res(&c);
        /* what the reference's gateway answered the same frame */
        json_t *want = NULL;
        size_t j;
        json_t *x;
        json_array_foreach(frames, j, x)
        {
            json_t *xf = json_object_get(x, "frame");
            if (json_integer_value(json_object_get(x, "conn")) == n &&
                !strcmp(json_string_value(json_object_get(x, "dir")), "server") &&
                json_equal(json_object_get(xf, "id"), json_object_get(f, "id")))
                want = xf;
        }
        if (!r || !want || json_is_true(json_object_get(r, "ok")) !=
                               json_is_true(json_object_get(want, "ok")))
            test_fail(__FILE__, __LINE__, "%s: clawmem answered %s", method,
                      r ? json_dumps(r, JSON_COMPACT) : "nothing");
        if (r && !strcmp(method, "connect"))
            EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "payload"), "type")),
                       "hello-ok");
        /* every field of the reference's answer, with its JSON type (a new
         * gateway has no session "main" yet: no sessionId then) */
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(want, "payload"), key, v)
        {
            json_t *got = json_object_get(json_object_get(r, "payload"), key);
            if (!strcmp(method, "connect") || (!got && !strcmp(key, "sessionId"))) continue;
            if (!got || json_typeof(got) != json_typeof(v))
                test_fail(__FILE__, __LINE__, "%s: %s missing or of another type", method, key);
        }
        json_decref(r);
    }
    if (open) ws_close(&c);
    EXPECT(conns >= 5 && methods >= 5);
    json_decref(doc);
    gw_down(&w);
}

/* A signed device is taken from a loopback client only when it is not a
 * browser page, as the reference's silent local pairing; a signature that
 * does not cover what was sent is refused with the reference's codes. */
TEST(gateway_ws_device_identity_checks)
{
    wsgw w;
    if (!gw_up(&w)) return;
    static const char base[] =
        "{\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"cli\",\"version\":\"1\","
        "\"platform\":\"linux\",\"mode\":\"cli\"},\"role\":\"operator\","
        "\"scopes\":[\"operator.read\"],\"auth\":{\"token\":\"" WTOKEN "\"}}";
    for (int k = 0; k < 3; k++) {
        wsc c;
        char origin[64];
        snprintf(origin, sizeof origin, "http://127.0.0.1:%d", w.port);
        EXPECT(ws_open(&c, w.port, k == 1 ? origin : NULL, NULL));
        json_t *ch = ws_recv(&c, 5000);
        const char *nonce =
            json_string_value(json_object_get(json_object_get(ch, "payload"), "nonce"));
        json_t *p = json_loads(base, 0, NULL);
        if (!t_resign(p, nonce ? nonce : "", cm_wall_ms())) {
            json_decref(p), json_decref(ch), ws_close(&c), gw_down(&w);
            SKIP("libcrypto", "libcrypto.so.3 cannot be loaded");
        }
        if (k == 2) /* signed for read, asks for admin */
            json_array_append_new(json_object_get(p, "scopes"), json_string("operator.admin"));
        json_t *req = json_pack("{s:s,s:s,s:s,s:o}", "type", "req", "id", "1", "method",
                                "connect", "params", p);
        char *text = json_dumps(req, JSON_COMPACT);
        ws_send(&c, text);
        free(text);
        json_decref(req);
        json_decref(ch);
        json_t *r = ws_res(&c);
        json_t *e = json_object_get(r, "error");
        const char *dcode = json_string_value(json_object_get(json_object_get(e, "details"), "code"));
        if (k == 0) {
            EXPECT(r && json_is_true(json_object_get(r, "ok")));
            json_t *h = ws_call(&c, "2", "health", "{}");
            EXPECT(h && json_is_true(json_object_get(h, "ok")));
            json_decref(h);
            /* the TUI's first call */
            h = ws_call(&c, "3", "agents.list", "{}");
            json_t *pl = json_object_get(h, "payload");
            EXPECT_STR(json_string_value(json_object_get(pl, "defaultId")), "main");
            EXPECT_STR(json_string_value(json_object_get(pl, "mainKey")), "main");
            EXPECT_STR(json_string_value(json_object_get(pl, "scope")), "per-sender");
            EXPECT_STR(json_string_value(
                           json_object_get(json_array_get(json_object_get(pl, "agents"), 0), "id")),
                       "main");
            json_decref(h);
        } else if (k == 1) {
            EXPECT(r && json_is_false(json_object_get(r, "ok")));
            EXPECT_STR(json_string_value(json_object_get(e, "code")), "NOT_PAIRED");
            EXPECT_STR(dcode, "PAIRING_REQUIRED");
        } else {
            EXPECT(r && json_is_false(json_object_get(r, "ok")));
            EXPECT_STR(json_string_value(json_object_get(e, "code")), "INVALID_REQUEST");
            EXPECT_STR(dcode, "DEVICE_AUTH_SIGNATURE_INVALID");
        }
        json_decref(r);
        ws_close(&c);
    }
    gw_down(&w);
}
