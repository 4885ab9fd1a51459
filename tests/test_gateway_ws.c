/*
 * test_gateway_ws.c — the gateway protocol over a real socket: `clawmem
 * gateway` (cm_gateway_start) on a loopback port with the fake model, a
 * small WebSocket client (both in ws_client.c); the handshake, a wrong token,
 * a read-only client refused chat.send, chat.send streaming the model's
 * reply, the memory methods on the agent's shared engine,
 * and the Control UI page with its Content-Security-Policy.
 */
#include <arpa/inet.h>
#include <unistd.h>

#include "../src/gateway/core/pairing.h"
#include "../src/net/wsframe.h"
#include "ws_client.h"

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

/* sessions.patch model with agents.defaults.models (2026.3.22's
 * resolveAllowedModelRef): an alias is its model, a model outside the list
 * is refused with "model not allowed: <key>", the default model clears the
 * override and the last run's model goes with a switch (as /model sets it:
 * agent/model_select.h). */
TEST(gateway_ws_sessions_patch_model_aliases_and_allowlist)
{
    wsgw w;
    if (!gw_up(&w)) return;
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"%s\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\",\"memorySearch\":{"
             "\"provider\":\"none\"},\"models\":{\"openai/gpt-t\":{},"
             "\"openai/gpt-u\":{\"alias\":\"quick\"}}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ws-0001\",\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             WTOKEN, w.base);
    write_file(w.dir, "state/quantumclaw.json", cfg);
    cm_gateway_reload(w.g);
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *r = ws_connect(&c, WTOKEN, "[\"operator.admin\"]");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = NULL;
    for (int i = 0; i < 200; i++) { /* the reload runs on its own thread */
        json_decref(r);
        r = ws_call(&c, "2", "sessions.patch", "{\"key\":\"main\",\"model\":\"Quick\"}");
        if (json_is_true(json_object_get(r, "ok"))) break;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    EXPECT_STR(S_entry(r, "providerOverride"), "openai");
    EXPECT_STR(S_entry(r, "modelOverride"), "gpt-u");
    json_decref(r);
    r = ws_call(&c, "3", "sessions.patch", "{\"key\":\"main\",\"model\":\"anthropic/claude-x\"}");
    EXPECT_STR(S_err(r), "model not allowed: anthropic/claude-x");
    json_decref(r);
    r = ws_call(&c, "5", "sessions.patch", "{\"key\":\"main\",\"model\":\"openai/gpt-v\"}");
    EXPECT_STR(S_err(r), "model not allowed: openai/gpt-v"); /* no closest pick here */
    json_decref(r);
    r = ws_call(&c, "4", "sessions.patch", "{\"key\":\"main\",\"model\":\"gpt-t\"}");
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    EXPECT(S_entry(r, "providerOverride") == NULL && S_entry(r, "modelOverride") == NULL);
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
