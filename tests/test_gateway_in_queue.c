/*
 * test_gateway_in_queue.c — the gateway's queue modes
 * (src/gateway/core/queue.h): settings, actions, collect, cap and drop,
 * routes and duplicates, and the /queue command, over a fake clock.
 */
#include "../src/gateway/core/queue.h"
#include "gw_fixture.h"
#include "test.h"

/* ---- queue modes -------------------------------------------------------- */

TEST(gw_in_queue_settings)
{
    static const struct {
        const char *s;
        int want; /* -1: not a mode */
    } modes[] = {
        {"collect", GW_QMODE_COLLECT},
        {" Coalesce ", GW_QMODE_COLLECT},
        {"followup", GW_QMODE_FOLLOWUP},
        {"follow-ups", GW_QMODE_FOLLOWUP},
        {"steer", GW_QMODE_STEER},
        {"queue", GW_QMODE_STEER},
        {"queued", GW_QMODE_STEER},
        {"steer+backlog", GW_QMODE_STEER_BACKLOG},
        {"steer_backlog", GW_QMODE_STEER_BACKLOG},
        {"interrupt", GW_QMODE_INTERRUPT},
        {"abort", GW_QMODE_INTERRUPT},
        {"later", -1},
        {"", -1},
    };
    for (size_t i = 0; i < ARRAY_LEN(modes); i++) {
        gw_queue_mode m = GW_QMODE_COLLECT;
        bool ok = cm_gw_queue_mode_parse(modes[i].s, &m);
        if (ok != (modes[i].want >= 0) || (ok && (int)m != modes[i].want))
            test_fail(__FILE__, __LINE__, "mode \"%s\": ok %d mode %d", modes[i].s, ok, m);
    }
    gw_queue_drop d;
    EXPECT(cm_gw_queue_drop_parse("oldest", &d) && d == GW_QDROP_OLD);
    EXPECT(cm_gw_queue_drop_parse("NEW", &d) && d == GW_QDROP_NEW);
    EXPECT(cm_gw_queue_drop_parse("summary", &d) && d == GW_QDROP_SUMMARIZE);
    EXPECT(!cm_gw_queue_drop_parse("all", &d));

    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, "telegram", NULL, &s);
    EXPECT_INT(s.mode, GW_QMODE_COLLECT);
    EXPECT_INT(s.debounce_ms, 1000);
    EXPECT_INT(s.cap, 20);
    EXPECT_INT(s.drop, GW_QDROP_SUMMARIZE);
    json_t *root = S_json("{\"messages\":{\"queue\":{\"mode\":\"followup\",\"debounceMs\":500,"
                          "\"cap\":5,\"drop\":\"old\",\"byChannel\":{\"discord\":\"steer\"},"
                          "\"debounceMsByChannel\":{\"discord\":50}}}}");
    EXPECT(root);
    cm_rtcfg *c = rtc(root);
    json_decref(root);
    EXPECT(c);
    gw_queue_settings tg, dc, ov;
    cm_gw_queue_settings_resolve(c, "telegram", NULL, &tg);
    cm_gw_queue_settings_resolve(c, "Discord", NULL, &dc);
    gw_queue_override o = {.mode = "interrupt", .drop = "new", .debounce_ms = 0, .cap = 2};
    cm_gw_queue_settings_resolve(c, "discord", &o, &ov);
    cm_rtcfg_unref(c);
    EXPECT(tg.mode == GW_QMODE_FOLLOWUP && tg.debounce_ms == 500 && tg.cap == 5 &&
           tg.drop == GW_QDROP_OLD);
    EXPECT(dc.mode == GW_QMODE_STEER && dc.debounce_ms == 50);
    EXPECT(ov.mode == GW_QMODE_INTERRUPT && ov.debounce_ms == 0 && ov.cap == 2 &&
           ov.drop == GW_QDROP_NEW);
}

TEST(gw_in_queue_actions)
{
    static const struct {
        gw_queue_mode mode;
        bool active, streaming, heartbeat;
        gw_queue_action want;
        size_t depth; /* queued afterwards */
    } cases[] = {
        {GW_QMODE_COLLECT, false, false, false, GW_QACT_RUN_NOW, 0},
        {GW_QMODE_INTERRUPT, false, false, false, GW_QACT_RUN_NOW, 0},
        {GW_QMODE_COLLECT, true, false, true, GW_QACT_DROP, 0},
        {GW_QMODE_COLLECT, true, true, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_FOLLOWUP, true, false, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_STEER, true, true, false, GW_QACT_STEER, 0},
        {GW_QMODE_STEER, true, false, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_STEER_BACKLOG, true, true, false, GW_QACT_STEER_AND_ENQUEUE, 1},
        {GW_QMODE_STEER_BACKLOG, true, false, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_INTERRUPT, true, true, false, GW_QACT_INTERRUPT, 0},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_queue *q = NULL;
        EXPECT_INT(cm_gw_queue_open("agent:main:main", NULL, &q), CM_OK);
        gw_queue_settings s;
        cm_gw_queue_settings_resolve(NULL, "telegram", NULL, &s);
        s.mode = cases[i].mode;
        gw_queue_item m = {.prompt = "hi", .message_id = "1", .channel = "telegram", .peer = "42"};
        gw_queue_action a = cm_gw_queue_on_inbound(q, &s, cases[i].active, cases[i].streaming,
                                                   cases[i].heartbeat, &m, 1000);
        size_t depth = cm_gw_queue_depth(q);
        cm_gw_queue_close(q);
        if (a != cases[i].want || depth != cases[i].depth)
            test_fail(__FILE__, __LINE__, "case %zu: action %d depth %zu, want %d %zu", i, a, depth,
                      cases[i].want, cases[i].depth);
    }
    /* an interrupt drops what was queued */
    gw_queue *q = NULL;
    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, NULL, NULL, &s);
    EXPECT_INT(cm_gw_queue_open("k", NULL, &q), CM_OK);
    gw_queue_item m = {.prompt = "a", .message_id = "1", .channel = "telegram", .peer = "42"};
    cm_gw_queue_on_inbound(q, &s, true, false, false, &m, 0);
    s.mode = GW_QMODE_INTERRUPT;
    m.message_id = "2";
    gw_queue_action a = cm_gw_queue_on_inbound(q, &s, true, false, false, &m, 1);
    size_t depth = cm_gw_queue_depth(q);
    cm_gw_queue_close(q);
    EXPECT_INT(a, GW_QACT_INTERRUPT);
    EXPECT_INT(depth, 0);
}

/* Queues texts "m1".."mN" (ids "1".."N") from telegram:42 during a run. */
static void S_fill(gw_queue *q, const gw_queue_settings *s, int n, int64_t t0, int *enq)
{
    char id[16], text[16];
    for (int i = 1; i <= n; i++) {
        snprintf(id, sizeof id, "%d", i);
        snprintf(text, sizeof text, "m%d", i);
        gw_queue_item m = {.prompt = text, .message_id = id, .channel = "telegram", .peer = "42"};
        *enq += cm_gw_queue_on_inbound(q, s, true, false, false, &m, t0 + i) == GW_QACT_ENQUEUE;
    }
}

TEST(gw_in_queue_collect)
{
    gw_queue *q = NULL;
    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, "telegram", NULL, &s);
    EXPECT_INT(cm_gw_queue_open("k", NULL, &q), CM_OK);
    int enq = 0;
    S_fill(q, &s, 3, 0, &enq);
    gw_queue_run r;
    bool early = true, ready = false;
    cm_rc rc1 = cm_gw_queue_next(q, &s, 3 + 999, &r, &early); /* 1000 ms after the last */
    int64_t deadline = cm_gw_queue_deadline(q, &s);
    cm_rc rc2 = cm_gw_queue_next(q, &s, 3 + 1000, &r, &ready);
    size_t depth = cm_gw_queue_depth(q);
    bool again = true;
    gw_queue_run r2;
    cm_gw_queue_next(q, &s, 10000, &r2, &again);
    cm_gw_queue_close(q);
    char *prompt = r.prompt, *id = r.message_id;
    size_t count = r.count;
    r.prompt = r.message_id = NULL;
    cm_gw_queue_run_release(&r);
    bool ok = rc1 == CM_OK && rc2 == CM_OK && !early && ready && !again;
    bool text_ok = prompt && strcmp(prompt, "[Queued messages while agent was busy]\n\n"
                                            "---\nQueued #1\nm1\n\n---\nQueued #2\nm2\n\n"
                                            "---\nQueued #3\nm3") == 0;
    bool id_ok = id && strcmp(id, "3") == 0;
    if (!text_ok) test_fail(__FILE__, __LINE__, "prompt: %s", prompt ? prompt : "(null)");
    free(prompt);
    free(id);
    EXPECT_INT(enq, 3);
    EXPECT(ok);
    EXPECT(text_ok && id_ok);
    EXPECT_INT(count, 3);
    EXPECT_INT(deadline, 1003);
    EXPECT_INT(depth, 0);
}

/* Drains q into "prompt | prompt | …" (ids after '#'). */
static void S_drain(gw_queue *q, const gw_queue_settings *s, buf *out)
{
    gw_queue_run r;
    bool ready = true;
    for (int guard = 0; guard < 50 && ready; guard++) {
        if (cm_gw_queue_next(q, s, INT64_MAX / 2, &r, &ready) || !ready) break;
        cm_buf_printf(out, "%s%s#%s", out->len ? " | " : "", r.prompt,
                      r.message_id ? r.message_id : "-");
        cm_gw_queue_run_release(&r);
    }
}

TEST(gw_in_queue_cap_and_drop)
{
    static const struct {
        gw_queue_mode mode;
        gw_queue_drop drop;
        int enqueued; /* of 4 messages with cap 2 */
        const char *want;
    } cases[] = {
        {GW_QMODE_FOLLOWUP, GW_QDROP_NEW, 2, "m1#1 | m2#2"},
        {GW_QMODE_FOLLOWUP, GW_QDROP_OLD, 4, "m3#3 | m4#4"},
        {GW_QMODE_FOLLOWUP, GW_QDROP_SUMMARIZE, 4,
         "[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- m1\n- m2#3 | m3#3 | m4#4"},
        {GW_QMODE_COLLECT, GW_QDROP_SUMMARIZE, 4,
         "[Queued messages while agent was busy]\n\n[Queue overflow] Dropped 2 messages due "
         "to cap.\nSummary:\n- m1\n- m2\n\n---\nQueued #1\nm3\n\n---\nQueued #2\nm4#4"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_queue *q = NULL;
        gw_queue_settings s;
        gw_queue_override o = {.debounce_ms = -1, .cap = 2};
        cm_gw_queue_settings_resolve(NULL, NULL, &o, &s);
        s.mode = cases[i].mode;
        s.drop = cases[i].drop;
        EXPECT_INT(cm_gw_queue_open("k", NULL, &q), CM_OK);
        int enq = 0;
        S_fill(q, &s, 4, 0, &enq);
        buf out;
        cm_buf_init(&out, 0);
        S_drain(q, &s, &out);
        cm_gw_queue_close(q);
        bool ok = enq == cases[i].enqueued && out.len && strcmp(out.data, cases[i].want) == 0;
        if (!ok)
            test_fail(__FILE__, __LINE__, "case %zu: enqueued %d, drained:\n%s\nwant:\n%s", i, enq,
                      out.len ? out.data : "", cases[i].want);
        cm_buf_release(&out);
    }
}

TEST(gw_in_queue_routes_and_duplicates)
{
    gw_dedupe *recent = NULL;
    EXPECT_INT(cm_gw_dedupe_open(GW_QUEUE_RECENT_TTL_MS, GW_QUEUE_RECENT_MAX, &recent), CM_OK);
    gw_queue *q = NULL;
    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, NULL, NULL, &s);
    EXPECT_INT(cm_gw_queue_open("agent:main:main", recent, &q), CM_OK);
    /* collect over two routes drains one by one */
    gw_queue_item a = {
        .prompt = "from telegram", .message_id = "1", .channel = "telegram", .peer = "42"};
    gw_queue_item b = {.prompt = "from http", .message_id = "9", .channel = "http", .peer = "u1"};
    gw_queue_action a1 = cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 0);
    gw_queue_action a2 = cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 1); /* again */
    gw_queue_action a3 = cm_gw_queue_on_inbound(q, &s, true, false, false, &b, 2);
    buf out;
    cm_buf_init(&out, 0);
    S_drain(q, &s, &out);
    /* drained, but redelivered within 5 minutes: still not queued again */
    gw_queue_action a4 = cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 60000);
    gw_queue_action a5 =
        cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 2 + GW_QUEUE_RECENT_TTL_MS);
    cm_gw_queue_close(q);
    cm_gw_dedupe_close(recent);
    bool drained_ok = out.len && strcmp(out.data, "from telegram#1 | from http#9") == 0;
    if (!drained_ok) test_fail(__FILE__, __LINE__, "drained: %s", out.len ? out.data : "");
    cm_buf_release(&out);
    EXPECT(drained_ok);
    EXPECT_INT(a1, GW_QACT_ENQUEUE);
    EXPECT_INT(a2, GW_QACT_DROP);
    EXPECT_INT(a3, GW_QACT_ENQUEUE);
    EXPECT_INT(a4, GW_QACT_DROP);
    EXPECT_INT(a5, GW_QACT_ENQUEUE);
}

TEST(gw_in_queue_command)
{
    static const struct {
        const char *text;
        bool is_cmd, reset;
        const char *mode, *drop;
        int64_t debounce;
        long cap;
    } cases[] = {
        {"/queue collect", true, false, "collect", NULL, -1, 0},
        {"/queue steer+backlog debounce:2s cap:25 drop:summarize", true, false, "steer-backlog",
         "summarize", 2000, 25},
        {"/queue: followup debounce=1500 cap=0 drop=oldest", true, false, "followup", "old", 1500,
         0},
        {"/queue interrupt nonsense cap:5", true, false, "interrupt", NULL, -1, 0},
        {"/QUEUE reset", true, true, NULL, NULL, -1, 0},
        {"/queue default", true, true, NULL, NULL, -1, 0},
        {"/queued", false, false, NULL, NULL, -1, 0},
        {"hello /queue collect", false, false, NULL, NULL, -1, 0},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_queue_override o;
        bool reset;
        bool is = cm_gw_queue_parse_command(cases[i].text, &o, &reset);
        bool ok = is == cases[i].is_cmd && reset == cases[i].reset &&
                  (cases[i].mode ? o.mode && !strcmp(o.mode, cases[i].mode) : !o.mode) &&
                  (cases[i].drop ? o.drop && !strcmp(o.drop, cases[i].drop) : !o.drop) &&
                  o.debounce_ms == cases[i].debounce && o.cap == cases[i].cap;
        if (!ok)
            test_fail(__FILE__, __LINE__, "\"%s\": is %d reset %d mode %s drop %s deb %lld cap %ld",
                      cases[i].text, is, reset, o.mode ? o.mode : "-", o.drop ? o.drop : "-",
                      (long long)o.debounce_ms, o.cap);
    }
}
