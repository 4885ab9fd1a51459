/*
 * test_session_tools.c — sessions_list, sessions_history, session_status and
 * agents_list (src/tools/session_tools.c): the reference's result shapes,
 * tools.sessions.visibility (tree: the caller's own session only), tool
 * messages left out unless asked for, secrets masked, the byte cap, and a
 * transcript larger than the tail that is read.
 */
#include <jansson.h>
#include <stdio.h>

#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "../src/tools/session_tools.h"
#include "../src/tools/status_card.h"
#include "test.h"

#define NOW 1800000000000LL

typedef struct fixture {
    char *dir;
    char store[2048];
    json_t *cfg;
} fixture;

/* Two sessions of agent main: the main one (a DM) and a Telegram group. */
static void setup(fixture *f, const char *cfg)
{
    f->dir = tmp_dir();
    snprintf(f->store, sizeof f->store, "%s/agents/main/sessions/sessions.json", f->dir);
    f->cfg = json_loads(cfg, 0, NULL);
    session_store st;
    char err[256], id[160];
    EXPECT_INT(cm_session_store_read(&st, f->store, err, sizeof err), CM_OK);
    json_t *p = json_pack("{s:s,s:i}", "model", "gpt-t", "totalTokens", 321);
    EXPECT_INT(cm_session_touch(&st, "agent:main:main", p, NOW - 1000, id, err, sizeof err), CM_OK);
    json_decref(p);
    buf t = BUF_INIT;
    json_t *e = cm_session_store_get(&st, "agent:main:main");
    cm_session_transcript_of(&st, e, &t);
    FILE *fp = fopen(t.data, "w");
    fprintf(fp, "{\"type\":\"session\",\"version\":3,\"id\":\"x\"}\n"
                "{\"type\":\"message\",\"id\":\"a1\",\"message\":{\"role\":\"user\",\"content\":"
                "[{\"type\":\"text\",\"text\":\"my key is sk-abcdefghijklmnopqrstuvwxyz123456\"}]}}\n"
                "{\"type\":\"message\",\"id\":\"a2\",\"message\":{\"role\":\"assistant\",\"content\":"
                "[{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"read\",\"arguments\":{}}]}}\n"
                "{\"type\":\"message\",\"id\":\"a3\",\"message\":{\"role\":\"toolResult\","
                "\"toolCallId\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"file body\"}]}}\n"
                "{\"type\":\"message\",\"id\":\"a4\",\"message\":{\"role\":\"assistant\",\"content\":"
                "[{\"type\":\"text\",\"text\":\"Noted.\"}]}}\n");
    fclose(fp);
    cm_buf_release(&t);
    EXPECT_INT(cm_session_touch(&st, "agent:main:telegram:group:-100", NULL, NOW - 5000, id, err,
                                sizeof err),
               CM_OK);
    cm_session_store_release(&st);
}

static json_t *call(fixture *f, const char *key,
                    cm_rc (*fn)(const session_tool_env *, const json_t *, buf *, char *, size_t),
                    const char *args)
{
    session_tool_env env = {f->cfg, f->store, "main", key, NOW, NULL};
    json_t *a = json_loads(args, 0, NULL);
    buf out = BUF_INIT;
    char err[512];
    cm_rc rc = fn(&env, a, &out, err, sizeof err);
    json_decref(a);
    json_t *j = rc ? json_pack("{s:s}", "ERR", err) : json_loads(out.data, 0, NULL);
    if (!rc && !j) j = json_pack("{s:s}", "TEXT", out.data);
    cm_buf_release(&out);
    return j;
}

TEST(session_tools_tree_visibility_is_the_callers_session)
{
    fixture f;
    setup(&f, "{}");
    json_t *l = call(&f, "agent:main:main", cm_tool_sessions_list, "{}");
    EXPECT_INT(json_integer_value(json_object_get(l, "count")), 1);
    json_t *row = json_array_get(json_object_get(l, "sessions"), 0);
    EXPECT_STR(json_string_value(json_object_get(row, "key")), "main");
    EXPECT_STR(json_string_value(json_object_get(row, "kind")), "main");
    EXPECT_INT(json_integer_value(json_object_get(row, "totalTokens")), 321);
    EXPECT(json_is_string(json_object_get(row, "sessionId")));
    json_decref(l);
    /* the group cannot read the DM */
    json_t *h = call(&f, "agent:main:telegram:group:-100", cm_tool_sessions_history,
                     "{\"sessionKey\":\"main\"}");
    EXPECT_STR(json_string_value(json_object_get(h, "status")), "forbidden");
    json_decref(h);
    json_decref(f.cfg);
}

TEST(session_tools_agent_visibility_lists_every_session)
{
    fixture f;
    setup(&f, "{\"tools\":{\"sessions\":{\"visibility\":\"agent\"}}}");
    json_t *l = call(&f, "agent:main:main", cm_tool_sessions_list, "{}");
    EXPECT_INT(json_integer_value(json_object_get(l, "count")), 2);
    json_t *g = json_array_get(json_object_get(l, "sessions"), 1); /* older: second */
    EXPECT_STR(json_string_value(json_object_get(g, "kind")), "group");
    EXPECT_STR(json_string_value(json_object_get(g, "channel")), "telegram");
    json_decref(l);
    l = call(&f, "agent:main:main", cm_tool_sessions_list, "{\"kinds\":[\"group\"]}");
    EXPECT_INT(json_integer_value(json_object_get(l, "count")), 1);
    json_decref(l);
    l = call(&f, "agent:main:main", cm_tool_sessions_list, "{\"activeMinutes\":1,\"limit\":5}");
    EXPECT_INT(json_integer_value(json_object_get(l, "count")), 2);
    json_decref(l);
    /* another agent's session is never shown */
    json_t *h = call(&f, "agent:main:main", cm_tool_sessions_history,
                     "{\"sessionKey\":\"agent:ops:main\"}");
    EXPECT_STR(json_string_value(json_object_get(h, "status")), "forbidden");
    json_decref(h);
    json_decref(f.cfg);
}

TEST(session_tools_history_strips_tools_and_masks_secrets)
{
    fixture f;
    setup(&f, "{}");
    json_t *h = call(&f, "agent:main:main", cm_tool_sessions_history, "{\"sessionKey\":\"main\"}");
    json_t *m = json_object_get(h, "messages");
    EXPECT_INT(json_array_size(m), 3); /* user, the call, the answer: no toolResult */
    char *s = json_dumps(h, 0);
    EXPECT(!strstr(s, "abcdefghijklmnopqrstuvwxyz123456"));
    EXPECT(!strstr(s, "file body"));
    EXPECT(json_is_true(json_object_get(h, "contentRedacted")));
    free(s);
    json_decref(h);
    h = call(&f, "agent:main:main", cm_tool_sessions_history,
             "{\"sessionKey\":\"current\",\"includeTools\":true,\"limit\":2}");
    EXPECT_INT(json_array_size(json_object_get(h, "messages")), 2);
    s = json_dumps(h, 0);
    EXPECT_CONTAINS(s, "file body");
    free(s);
    json_decref(h);
    h = call(&f, "agent:main:main", cm_tool_sessions_history, "{}");
    EXPECT_CONTAINS(json_string_value(json_object_get(h, "ERR")), "sessionKey required");
    json_decref(h);
    json_decref(f.cfg);
}

TEST(session_tools_history_reads_only_the_tail_and_caps_bytes)
{
    fixture f;
    setup(&f, "{}");
    session_store st;
    char err[256];
    buf t = BUF_INIT, line = BUF_INIT;
    cm_session_store_read(&st, f.store, err, sizeof err);
    cm_session_transcript_of(&st, cm_session_store_get(&st, "agent:main:main"), &t);
    cm_session_store_release(&st);
    /* 12 MiB of 3,000-character messages: past the 8 MiB tail and the 80 KB cap */
    FILE *fp = fopen(t.data, "a");
    cm_buf_adds(&line, "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 3000; i++)
        cm_buf_addc(&line, 'x');
    cm_buf_adds(&line, "\"}}\n");
    for (int i = 0; i < 4200; i++)
        fwrite(line.data, 1, line.len, fp);
    fputs("{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"LAST\"}}\n", fp);
    fclose(fp);
    json_t *h = call(&f, "agent:main:main", cm_tool_sessions_history, "{\"sessionKey\":\"main\"}");
    json_t *m = json_object_get(h, "messages");
    EXPECT(json_array_size(m) > 1 && json_array_size(m) < 30);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(m, json_array_size(m) - 1),
                                                 "content")),
               "LAST");
    EXPECT(json_is_true(json_object_get(h, "droppedMessages")));
    EXPECT(json_integer_value(json_object_get(h, "bytes")) <= SESSION_TOOLS_HISTORY_MAX_BYTES);
    json_decref(h);
    cm_buf_release(&t);
    cm_buf_release(&line);
    json_decref(f.cfg);
}

TEST(session_tools_status_and_agents_list)
{
    fixture f;
    setup(&f, "{\"agents\":{\"list\":[{\"id\":\"main\",\"name\":\"Molty\"}]}}");
    json_t *s = call(&f, "agent:main:main", cm_tool_session_status, "{}");
    const char *text = json_string_value(json_object_get(s, "TEXT"));
    /* 2026.3.22's card, with the user's time (UTC here) */
    EXPECT(text && strstr(text, "\xf0\x9f\xa6\x9e QuantumClaw 2026.3.22 (clawmem ") == text);
    EXPECT_CONTAINS(text, "\n\xf0\x9f\x95\x92 Time: Friday, January 15th, 2027 \xe2\x80\x94 "
                          "8:00 AM (UTC)\n\xf0\x9f\xa7\xa0 Model: anthropic/claude-opus-4-6\n");
    EXPECT_CONTAINS(text, "\n\xf0\x9f\x93\x9a Context: 321/200k (0%) \xc2\xb7 \xf0\x9f\xa7\xb9 "
                          "Compactions: 0\n");
    EXPECT_CONTAINS(text, "\n\xf0\x9f\xa7\xb5 Session: agent:main:main \xe2\x80\xa2 updated just "
                          "now\n");
    EXPECT_CONTAINS(text, "Runtime: direct \xc2\xb7 Think: off\n\xf0\x9f\xaa\xa2 Queue: collect");
    json_decref(s);
    s = call(&f, "agent:main:main", cm_tool_session_status, "{\"model\":\"x/y\"}");
    EXPECT_CONTAINS(json_string_value(json_object_get(s, "ERR")), "/model");
    json_decref(s);
    json_t *a = call(&f, "agent:main:main", cm_tool_agents_list, "{}");
    EXPECT_STR(json_string_value(json_object_get(a, "requester")), "main");
    json_t *row = json_array_get(json_object_get(a, "agents"), 0);
    EXPECT_STR(json_string_value(json_object_get(row, "name")), "Molty");
    EXPECT(json_is_true(json_object_get(row, "configured")));
    json_decref(a);
    json_decref(f.cfg);
}

/* ---- sessions_send ---------------------------------------------------------------- */

typedef struct queued {
    char key[256], text[256];
    int n;
    int64_t wait_ms; /* the last send's */
} queued;

/* Queues; a wait is answered "pong", or times out for the text "slow", or
 * fails for "boom". */
static cm_rc fake_queue(void *ctx, const char *key, const char *text, int64_t wait_ms, char *run_id,
                        size_t n, char **reply, char *err, size_t errlen)
{
    queued *q = ctx;
    snprintf(q->key, sizeof q->key, "%s", key);
    snprintf(q->text, sizeof q->text, "%.255s", text);
    snprintf(run_id, n, "run-%d", ++q->n);
    q->wait_ms = wait_ms;
    *reply = NULL;
    if (!wait_ms) return CM_OK;
    if (!strcmp(text, "slow")) return CM_ETIMEOUT;
    if (!strcmp(text, "boom")) return cm_seterr(err, errlen, CM_EIO, "the model is unavailable");
    *reply = cm_strdup("pong");
    return CM_OK;
}

static json_t *send_call(fixture *f, queued *q, const char *from, json_t *args)
{
    session_tool_env env = {f->cfg, f->store, "main", from, NOW, NULL};
    buf out = BUF_INIT;
    char err[512];
    cm_rc rc = cm_tool_sessions_send(&env, args, fake_queue, q, &out, err, sizeof err);
    json_decref(args);
    json_t *j = rc ? json_pack("{s:s}", "ERR", err) : json_loads(out.data, 0, NULL);
    cm_buf_release(&out);
    return j;
}

#define STATUS(j) json_string_value(json_object_get(j, "status"))

TEST(session_tools_send_follows_visibility)
{
    fixture f;
    queued q = {0};
    /* tree (the default): another session is forbidden, nothing queued */
    setup(&f, "{}");
    json_t *r = send_call(&f, &q, "agent:main:main",
                          json_pack("{s:s,s:s}", "sessionKey", "agent:main:telegram:group:-100",
                                    "message", "hi"));
    EXPECT_STR(STATUS(r), "forbidden");
    json_decref(r);
    EXPECT_INT(q.n, 0);
    json_decref(f.cfg);
    /* agent: any session of the agent, by key or label */
    setup(&f, "{\"tools\":{\"sessions\":{\"visibility\":\"agent\"}}}");
    r = send_call(&f, &q, "agent:main:main",
                  json_pack("{s:s,s:s,s:i}", "sessionKey", "agent:main:telegram:group:-100",
                            "message", "hello group", "timeoutSeconds", 30));
    EXPECT_STR(STATUS(r), "ok"); /* waited for the target's answer */
    EXPECT_STR(json_string_value(json_object_get(r, "reply")), "pong");
    EXPECT_INT((int)q.wait_ms, 30000);
    EXPECT_STR(json_string_value(json_object_get(r, "runId")), "run-1");
    EXPECT_STR(json_string_value(json_object_get(r, "sessionKey")),
               "agent:main:telegram:group:-100");
    EXPECT_STR(q.key, "agent:main:telegram:group:-100");
    EXPECT_STR(q.text, "hello group");
    json_decref(r);
    session_store st;
    char err[256], id[160];
    EXPECT_INT(cm_session_store_read(&st, f.store, err, sizeof err), CM_OK);
    json_t *p = json_pack("{s:s}", "label", "ops room");
    EXPECT_INT(cm_session_touch(&st, "agent:main:telegram:group:-100", p, NOW, id, err,
                                sizeof err),
               CM_OK);
    json_decref(p);
    cm_session_store_release(&st);
    r = send_call(&f, &q, "agent:main:telegram:group:-100",
                  json_pack("{s:s,s:s}", "label", "ops room", "message", "by label"));
    EXPECT_STR(STATUS(r), "ok");
    EXPECT_INT((int)q.wait_ms, 30000); /* the reference's default */
    EXPECT_STR(q.key, "agent:main:telegram:group:-100");
    json_decref(r);
    /* timeoutSeconds 0: queued, not waited for; a fraction is floored */
    r = send_call(
        &f, &q, "agent:main:main",
        json_pack("{s:s,s:s,s:f}", "label", "ops room", "message", "fire", "timeoutSeconds", 0.9));
    EXPECT_STR(STATUS(r), "accepted");
    EXPECT(!json_object_get(r, "reply"));
    EXPECT_INT((int)q.wait_ms, 0);
    json_decref(r);
    r = send_call(
        &f, &q, "agent:main:main",
        json_pack("{s:s,s:s,s:i}", "label", "ops room", "message", "slow", "timeoutSeconds", 5));
    EXPECT_STR(STATUS(r), "timeout");
    EXPECT_INT((int)q.wait_ms, 5000);
    EXPECT_STR(json_string_value(json_object_get(r, "sessionKey")),
               "agent:main:telegram:group:-100");
    json_decref(r);
    r = send_call(&f, &q, "agent:main:main",
                  json_pack("{s:s,s:s}", "label", "ops room", "message", "boom"));
    EXPECT_STR(STATUS(r), "error");
    EXPECT_STR(json_string_value(json_object_get(r, "error")), "the model is unavailable");
    json_decref(r);
    static const struct {
        const char *args, *status, *error;
    } bad[] = {
        {"{\"message\":\"x\"}", "error", "Either sessionKey or label is required"},
        {"{\"sessionKey\":\"main\",\"label\":\"ops room\",\"message\":\"x\"}", "error",
         "Provide either sessionKey or label (not both)."},
        {"{\"label\":\"nobody\",\"message\":\"x\"}", "error", "No session found with label: nobody"},
        {"{\"sessionKey\":\"agent:main:nope\",\"message\":\"x\"}", "error", "Session not found"},
        {"{\"sessionKey\":\"agent:ops:main\",\"message\":\"x\"}", "forbidden", NULL},
        {"{\"label\":\"ops room\",\"agentId\":\"ops\",\"message\":\"x\"}", "forbidden", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = send_call(&f, &q, "agent:main:main", json_loads(bad[i].args, 0, NULL));
        if (!STATUS(r) || strcmp(STATUS(r), bad[i].status) ||
            (bad[i].error &&
             strcmp(json_string_value(json_object_get(r, "error")), bad[i].error)))
            test_fail(__FILE__, __LINE__, "case %zu", i);
        json_decref(r);
    }
    r = send_call(&f, &q, "agent:main:main",
                  json_pack("{s:s,s:o}", "sessionKey", "main", "message", json_stringn("a\0b", 3)));
    EXPECT_CONTAINS(json_string_value(json_object_get(r, "ERR")), "NUL");
    json_decref(r);
    r = send_call(&f, &q, "agent:main:main", json_pack("{s:s}", "sessionKey", "main"));
    EXPECT_CONTAINS(json_string_value(json_object_get(r, "ERR")), "message required");
    json_decref(r);
    EXPECT_INT(q.n, 5); /* none of the bad calls queued anything */
    json_decref(f.cfg);
}

/* 2026.3.22's formatUserTime: weekday, month, the day with its ordinal,
 * the year, then h:mm AM/PM (12 for midnight and noon) or HH:mm. */
TEST(session_tools_status_user_time_as_the_reference)
{
    static const struct {
        int64_t s;
        bool h24;
        const char *want;
    } cases[] = {
        {1767225600, false, "Thursday, January 1st, 2026 \xe2\x80\x94 12:00 AM"},
        {1767268800, false, "Thursday, January 1st, 2026 \xe2\x80\x94 12:00 PM"},
        {1767312000 + 3600 * 13 + 5 * 60, false, "Friday, January 2nd, 2026 \xe2\x80\x94 1:05 PM"},
        {1767312000 + 3600 * 13 + 5 * 60, true, "Friday, January 2nd, 2026 \xe2\x80\x94 13:05"},
        {1767398400 + 86400 * 10, true, "Tuesday, January 13th, 2026 \xe2\x80\x94 00:00"},
        {1767398400 + 86400 * 20, false, "Friday, January 23rd, 2026 \xe2\x80\x94 12:00 AM"},
        {1767398400 + 86400 * 8, false, "Sunday, January 11th, 2026 \xe2\x80\x94 12:00 AM"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char out[96];
        cm_status_user_time(cases[i].s * 1000, NULL, cases[i].h24, out);
        EXPECT_STR(out, cases[i].want);
    }
}
