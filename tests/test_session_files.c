/*
 * test_session_files.c — sessions.json and transcripts read and written as
 * QuantumClaw 2026.3.22 does, so that either program continues the other's
 * sessions with nothing lost. The fixtures under tests/fixtures/ are in the
 * reference's format (their shapes from its dist/: store-*.js metadata and
 * delivery fields, session-lifecycle-state, session-updates, the
 * pi-coding-agent records); tests/compat/fixtures/reference-dm.json names
 * the fields and line types a real 2026.3.22 DM turn left on disk.
 */
#include <jansson.h>

#include "../src/agent/run_meta.h"
#include "../src/agent/session_turn.h"
#include "../src/base/fs.h"
#include "../src/session/origin.h"
#include "../src/session/sessions.h"
#include "../src/session/transcript.h"
#include "../src/base/utf8.h"
#include "fakeserver.h"
#include "test.h"

#define T0 1800000000000LL /* 2027-01-15 08:00 UTC */

static int64_t clock_now = T0;
static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    clock_now += 250; /* every look at the clock is a quarter second later */
    return clock_now;
}

typedef struct world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
    char sessions[2048], store[2100];
    json_t *cfg;
    llm_runner *runner;
    agent_ctx a;
} world;

/* A gateway's agent against the model stand-in, with the provider the
 * fixtures name ("compat", api openai-completions). */
static bool world_start(world *w, const char *extra_cfg)
{
    memset(w, 0, sizeof *w);
    clock_now = T0;
    w->fs = fake_start(8, w->base);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/AGENTS.md", "# Agents\n");
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"compat/compat-model\"}},"
             "\"models\":{\"providers\":{\"compat\":{\"baseUrl\":\"%s/v1\",\"apiKey\":\"sk-files-1\","
             "\"api\":\"openai-completions\",\"models\":[{\"id\":\"compat-model\","
             "\"name\":\"compat-model\"}]},"
             "\"other\":{\"baseUrl\":\"%s/v1\",\"apiKey\":\"sk-files-2\"}}}}",
             w->base, w->base);
    w->cfg = json_loads(cfg, 0, NULL);
    json_t *x = extra_cfg ? json_loads(extra_cfg, 0, NULL) : NULL;
    if (x) json_object_update_recursive(w->cfg, x);
    json_decref(x);
    char err[512];
    llm_runner_opts ro = {w->cfg, w->state, "main", fake_clock, NULL};
    if (cm_llm_runner_open(&ro, &w->runner, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "runner: %s", err);
        return false;
    }
    snprintf(w->sessions, sizeof w->sessions, "%s/agents/main/sessions", w->state);
    snprintf(w->store, sizeof w->store, "%s/sessions.json", w->sessions);
    w->a = (agent_ctx){w->cfg, w->state,  "main", w->store,   w->ws,
                       NULL,   w->runner, true,   fake_clock, NULL, NULL, NULL, NULL};
    return true;
}

static void world_stop(world *w)
{
    char err[256];
    cm_session_store_sync(NULL, err, sizeof err);
    cm_llm_runner_close(w->runner);
    json_decref(w->cfg);
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

static char *slurp(const char *path)
{
    buf b = BUF_INIT;
    char err[256];
    if (cm_fs_read_file(path, 1 << 24, &b, err, sizeof err) || !b.data) {
        cm_buf_release(&b);
        return cm_strdup("");
    }
    return cm_buf_detach(&b);
}

/* The fixture with "@SESSIONS@" replaced by the sessions directory. */
static char *fixture(const char *name, const char *sessions)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/%s", name);
    char *t = slurp(path);
    buf b = BUF_INIT;
    for (const char *p = t; *p;) {
        const char *m = strstr(p, "@SESSIONS@");
        size_t n = m ? (size_t)(m - p) : strlen(p);
        cm_buf_add(&b, p, n);
        if (!m) break;
        cm_buf_adds(&b, sessions);
        p = m + strlen("@SESSIONS@");
    }
    free(t);
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

/* The entry of key as it is on disk (every pending change written). */
static json_t *disk_entry(world *w, const char *key)
{
    char err[256];
    cm_session_store_sync(NULL, err, sizeof err);
    json_t *doc = json_load_file(w->store, 0, NULL);
    json_t *e = json_incref(json_object_get(doc, key));
    json_decref(doc);
    return e;
}

/* JSON types as a reader sees them: integer and real are both numbers. */
static int kind(const json_t *v)
{
    return json_is_number(v) ? JSON_INTEGER : (int)json_typeof(v);
}

/* Every member of want (recursively into objects) is in got with the same
 * kind; names the first one that is not into bad. */
static bool same_shape(const json_t *want, const json_t *got, buf *bad)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        json_t *g = json_object_get(got, k);
        if (!g || kind(g) != kind(v)) {
            cm_buf_printf(bad, "%s", k);
            return false;
        }
        if (json_is_object(v) && !same_shape(v, g, bad)) {
            cm_buf_printf(bad, " in %s", k);
            return false;
        }
    }
    return true;
}

/* The records of a transcript, in order. */
static bool keep(void *ctx, int line, json_t *rec)
{
    (void)line;
    json_array_append((json_t *)ctx, rec);
    return true;
}

static json_t *records(const char *path)
{
    json_t *all = json_array();
    char err[256];
    cm_transcript_read(path, 1 << 24, keep, all, err, sizeof err);
    return all;
}

static const char *type_of(const json_t *rec)
{
    return json_string_value(json_object_get(rec, "type"));
}

/* A turn from a Telegram chat, as the gateway hands it over. */
static cm_rc tg_turn(world *w, const char *key, const agent_inbound *ib, const char *text,
                     agent_reply *r, char *err, size_t errlen)
{
    agent_turn_opts o = {text, NULL, NULL, NULL, NULL, NULL, NULL, ib};
    return cm_agent_session_turn_opts(&w->a, key, &o, r, err, errlen);
}

static const agent_inbound dm_alice = {.chat_id = "telegram:111",
                                       .account_id = "default",
                                       .channel = "telegram",
                                       .provider = "telegram",
                                       .surface = "telegram",
                                       .chat_type = "direct",
                                       .peer = "111",
                                       .conversation_label = "Alice (@alice) id:111"};
static const agent_inbound group_dev = {.chat_id = "telegram:-1001234567890",
                                        .account_id = "default",
                                        .channel = "telegram",
                                        .provider = "telegram",
                                        .surface = "telegram",
                                        .chat_type = "group",
                                        .peer = "-1001234567890",
                                        .conversation_label = "Dev Team id:-1001234567890",
                                        .group_subject = "Dev Team"};

/* The reference's store and transcripts, continued by clawmem: every field
 * the reference wrote is still there with its type (the ones clawmem does
 * not write, skillsSnapshot and systemPromptReport, unchanged), the run's
 * fields are this run's, and the transcripts keep their lines and grow by
 * the turn's messages only — the model and thinking level records and the
 * model snapshot are there already. */
TEST(session_files_reference_store_round_trips)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char *store = fixture("reference-sessions.json", w.sessions);
    write_file("/", w.store, store);
    json_t *before = json_loads(store, 0, NULL);
    free(store);
    char dm_path[2200], group_path[2200];
    snprintf(dm_path, sizeof dm_path, "%s/38bc1255-9f02-40ea-a7fa-a943f4e61d1b.jsonl", w.sessions);
    snprintf(group_path, sizeof group_path, "%s/5f1c2a7e-0b3d-4e8a-9c6f-1d2e3f4a5b6c.jsonl",
             w.sessions);
    char *dm_before = fixture("reference-transcript-dm.jsonl", w.sessions);
    char *group_before = fixture("reference-transcript-group.jsonl", w.sessions);
    write_file("/", dm_path, dm_before);
    write_file("/", group_path, group_before);

    fake_push_chat_text(w.fs, "Your courier code is BLUEHERON-7.", 9300);
    fake_push_chat_text(w.fs, "Build noted.", 9500);
    agent_reply r;
    char err[512];
    EXPECT_INT(tg_turn(&w, "agent:main:main", &dm_alice, "what is my courier code?", &r, err,
                       sizeof err),
               CM_OK);
    EXPECT_STR(r.text, "Your courier code is BLUEHERON-7.");
    cm_agent_reply_release(&r);
    EXPECT_INT(tg_turn(&w, "agent:main:telegram:group:-1001234567890", &group_dev, "status?", &r,
                       err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    /* the history the model got is the reference's */
    const fake_request *q = fake_get(w.fs, 0);
    EXPECT(q && strstr(q->body, "My courier code is BLUEHERON-7."));

    static const char *const keys[] = {"agent:main:main",
                                       "agent:main:telegram:group:-1001234567890"};
    for (size_t i = 0; i < 2; i++) {
        json_t *was = json_object_get(before, keys[i]);
        json_t *e = disk_entry(&w, keys[i]);
        buf bad = BUF_INIT;
        EXPECT(e != NULL);
        if (!same_shape(was, e, &bad)) test_fail(__FILE__, __LINE__, "%s: %s", keys[i], bad.data);
        cm_buf_release(&bad);
        /* what clawmem does not write stays as the reference wrote it */
        EXPECT(json_equal(json_object_get(e, "skillsSnapshot"),
                          json_object_get(was, "skillsSnapshot")));
        EXPECT(!json_object_get(was, "systemPromptReport") ||
               json_equal(json_object_get(e, "systemPromptReport"),
                          json_object_get(was, "systemPromptReport")));
        EXPECT_STR(json_string_value(json_object_get(e, "sessionId")),
                   json_string_value(json_object_get(was, "sessionId")));
        EXPECT(json_equal(json_object_get(e, "origin"), json_object_get(was, "origin")));
        EXPECT(json_equal(json_object_get(e, "deliveryContext"),
                          json_object_get(was, "deliveryContext")));
        /* this run's lifecycle */
        EXPECT_STR(json_string_value(json_object_get(e, "status")), "done");
        int64_t st = json_integer_value(json_object_get(e, "startedAt"));
        int64_t en = json_integer_value(json_object_get(e, "endedAt"));
        EXPECT(st > T0 && en > st);
        EXPECT_INT(json_integer_value(json_object_get(e, "runtimeMs")), en - st);
        EXPECT(json_is_false(json_object_get(e, "abortedLastRun")));
        EXPECT(json_is_true(json_object_get(e, "systemSent")));
        EXPECT_INT(json_integer_value(json_object_get(e, "contextTokens")), 200000);
        json_decref(e);
    }
    json_t *g = disk_entry(&w, keys[1]);
    EXPECT_STR(json_string_value(json_object_get(g, "verboseLevel")), "on");
    EXPECT_STR(json_string_value(json_object_get(g, "responseUsage")), "tokens");
    EXPECT_STR(json_string_value(json_object_get(g, "displayName")), "telegram:g-dev-team");
    EXPECT_STR(json_string_value(json_object_get(g, "groupId")), "-1001234567890");
    json_decref(g);

    /* the transcripts: the reference's lines unchanged, then the turn */
    const char *paths[] = {dm_path, group_path}, *olds[] = {dm_before, group_before};
    const char *lasts[] = {"e5f6a7b8", "4e5f6071"}; /* the fixtures' last record ids */
    for (size_t i = 0; i < 2; i++) {
        char *now = slurp(paths[i]);
        EXPECT(!strncmp(now, olds[i], strlen(olds[i])));
        json_t *recs = records(paths[i]);
        EXPECT_INT(json_array_size(recs), 8); /* 6 + the user message and the answer */
        json_t *u = json_array_get(recs, 6), *a = json_array_get(recs, 7);
        EXPECT_STR(type_of(u), "message");
        EXPECT_STR(json_string_value(json_object_get(u, "parentId")), lasts[i]);
        json_t *am = json_object_get(a, "message");
        EXPECT_STR(json_string_value(json_object_get(am, "role")), "assistant");
        EXPECT_STR(json_string_value(json_object_get(am, "api")), "openai-completions");
        EXPECT_STR(json_string_value(json_object_get(am, "provider")), "compat");
        EXPECT_STR(json_string_value(json_object_get(am, "model")), "compat-model");
        json_decref(recs);
        free(now);
    }
    json_decref(before);
    free(dm_before);
    free(group_before);
    world_stop(&w);
}

/* The names a real 2026.3.22 DM turn left (tests/compat/fixtures). */
static json_t *reference_dm(void)
{
    return json_load_file("tests/compat/fixtures/reference-dm.json", 0, NULL);
}

/* A session clawmem starts has every field the reference's first turn
 * writes (but skillsSnapshot and systemPromptReport: clawmem has no skills
 * and reports its prompt elsewhere; docs/runtime.md), with the reference's
 * values for a Telegram DM, and its transcript the reference's line types
 * in the reference's order. */
TEST(session_files_new_dm_session_has_the_reference_fields)
{
    world w;
    if (!world_start(&w, NULL)) return;
    json_t *ref = reference_dm();
    EXPECT(ref != NULL);
    fake_push_chat_text(w.fs, "Hi Alice!", 9000);
    agent_reply r;
    char err[512];
    EXPECT_INT(tg_turn(&w, "agent:main:main", &dm_alice, "hello", &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    json_t *e = disk_entry(&w, "agent:main:main");
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(ref, "session_entry_fields"), i, f)
    {
        const char *name = json_string_value(f);
        if (!strcmp(name, "skillsSnapshot") || !strcmp(name, "systemPromptReport")) continue;
        if (!json_object_get(e, name)) test_fail(__FILE__, __LINE__, "no %s in the entry", name);
    }
    json_t *want = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "label", "Alice (@alice) id:111", "provider", "telegram",
        "surface", "telegram", "chatType", "direct", "from", "telegram:111", "to", "telegram:111",
        "accountId", "default");
    EXPECT(json_equal(json_object_get(e, "origin"), want));
    json_decref(want);
    want = json_pack("{s:s,s:s,s:s}", "channel", "telegram", "to", "telegram:111", "accountId",
                     "default");
    EXPECT(json_equal(json_object_get(e, "deliveryContext"), want));
    json_decref(want);
    EXPECT_STR(json_string_value(json_object_get(e, "lastChannel")), "telegram");
    EXPECT_STR(json_string_value(json_object_get(e, "lastTo")), "telegram:111");
    EXPECT_STR(json_string_value(json_object_get(e, "lastAccountId")), "default");
    EXPECT(json_object_get(e, "lastThreadId") == NULL);
    EXPECT(json_is_true(json_object_get(e, "systemSent")));
    EXPECT(json_is_false(json_object_get(e, "abortedLastRun")));
    EXPECT_STR(json_string_value(json_object_get(e, "status")), "done");
    EXPECT(json_is_integer(json_object_get(e, "startedAt")));
    EXPECT(json_integer_value(json_object_get(e, "endedAt")) >
           json_integer_value(json_object_get(e, "startedAt")));
    EXPECT_INT(json_integer_value(json_object_get(e, "runtimeMs")),
               json_integer_value(json_object_get(e, "endedAt")) -
                   json_integer_value(json_object_get(e, "startedAt")));
    EXPECT_INT(json_integer_value(json_object_get(e, "contextTokens")), 200000);
    EXPECT(json_is_number(json_object_get(e, "estimatedCostUsd")));
    EXPECT_STR(json_string_value(json_object_get(e, "chatType")), "direct");
    for (const char *const *gf = (const char *const[]){"channel", "groupId", "subject",
                                                       "displayName", NULL};
         *gf; gf++)
        EXPECT(json_object_get(e, *gf) == NULL); /* groups only */

    /* the transcript: the reference's line types, in its order */
    buf tp = BUF_INIT;
    EXPECT_INT(cm_session_transcript_in(w.sessions, e, &tp), CM_OK);
    json_t *recs = records(tp.data);
    json_t *types = json_object_get(ref, "transcript_line_types");
    EXPECT_INT(json_array_size(recs), json_array_size(types));
    json_array_foreach(types, i, f)
        EXPECT_STR(type_of(json_array_get(recs, i)), json_string_value(f));
    json_t *mc = json_array_get(recs, 1), *tl = json_array_get(recs, 2),
           *snap = json_array_get(recs, 3);
    EXPECT_STR(json_string_value(json_object_get(mc, "provider")), "compat");
    EXPECT_STR(json_string_value(json_object_get(mc, "modelId")), "compat-model");
    EXPECT(json_is_null(json_object_get(mc, "parentId")));
    EXPECT_STR(json_string_value(json_object_get(tl, "thinkingLevel")), "off");
    EXPECT_STR(json_string_value(json_object_get(tl, "parentId")),
               json_string_value(json_object_get(mc, "id")));
    EXPECT_STR(json_string_value(json_object_get(snap, "customType")), "model-snapshot");
    json_t *sd = json_object_get(snap, "data");
    EXPECT_STR(json_string_value(json_object_get(sd, "provider")), "compat");
    EXPECT_STR(json_string_value(json_object_get(sd, "modelApi")), "openai-completions");
    EXPECT_STR(json_string_value(json_object_get(sd, "modelId")), "compat-model");
    EXPECT(json_is_integer(json_object_get(sd, "timestamp")));
    json_t *am = json_object_get(json_array_get(recs, 5), "message");
    EXPECT_STR(json_string_value(json_object_get(am, "api")), "openai-completions");
    json_decref(recs);

    /* a second turn adds messages only: nothing about the model changed */
    fake_push_chat_text(w.fs, "Still here.", 9100);
    EXPECT_INT(tg_turn(&w, "agent:main:main", &dm_alice, "there?", &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    recs = records(tp.data);
    EXPECT_INT(json_array_size(recs), 8);
    EXPECT_STR(type_of(json_array_get(recs, 6)), "message");
    json_decref(recs);
    cm_buf_release(&tp);
    json_decref(e);
    json_decref(ref);
    world_stop(&w);
}

/* A group session gets the group fields the reference derives from the
 * chat (channel, groupId, subject, displayName) and its route; a forum
 * topic's thread goes into the route and the group id. */
TEST(session_files_new_group_session_has_the_group_fields)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "On it.", 9000);
    agent_reply r;
    char err[512];
    EXPECT_INT(tg_turn(&w, "agent:main:telegram:group:-1001234567890", &group_dev, "hi", &r, err,
                       sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    json_t *e = disk_entry(&w, "agent:main:telegram:group:-1001234567890");
    EXPECT_STR(json_string_value(json_object_get(e, "chatType")), "group");
    EXPECT_STR(json_string_value(json_object_get(e, "channel")), "telegram");
    EXPECT_STR(json_string_value(json_object_get(e, "groupId")), "-1001234567890");
    EXPECT_STR(json_string_value(json_object_get(e, "subject")), "Dev Team");
    EXPECT_STR(json_string_value(json_object_get(e, "displayName")), "telegram:g-dev-team");
    json_t *o = json_object_get(e, "origin");
    EXPECT_STR(json_string_value(json_object_get(o, "label")), "Dev Team id:-1001234567890");
    EXPECT_STR(json_string_value(json_object_get(o, "from")), "telegram:group:-1001234567890");
    EXPECT_STR(json_string_value(json_object_get(o, "to")), "telegram:-1001234567890");
    EXPECT_STR(json_string_value(json_object_get(o, "chatType")), "group");
    EXPECT_STR(json_string_value(json_object_get(e, "lastTo")), "telegram:-1001234567890");
    json_decref(e);

    /* a topic: its thread in the route (a number, as Telegram's), the group
     * id and the origin; a later message without a label keeps the label */
    agent_inbound topic = group_dev;
    topic.thread_id = "42";
    topic.conversation_label = "Dev Team id:-1001234567890 topic:42";
    fake_push_chat_text(w.fs, "Topic.", 9000);
    const char *tk = "agent:main:telegram:group:-1001234567890:thread:42";
    EXPECT_INT(tg_turn(&w, tk, &topic, "in the topic", &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    topic.conversation_label = NULL;
    topic.group_subject = NULL;
    fake_push_chat_text(w.fs, "Again.", 9000);
    EXPECT_INT(tg_turn(&w, tk, &topic, "again", &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    e = disk_entry(&w, tk);
    EXPECT_STR(json_string_value(json_object_get(e, "groupId")), "-1001234567890:topic:42");
    EXPECT_STR(json_string_value(json_object_get(e, "subject")), "Dev Team");
    EXPECT_INT(json_integer_value(json_object_get(e, "lastThreadId")), 42);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(e, "deliveryContext"), "threadId")),
               42);
    o = json_object_get(e, "origin");
    EXPECT_STR(json_string_value(json_object_get(o, "from")),
               "telegram:group:-1001234567890:topic:42");
    EXPECT_STR(json_string_value(json_object_get(o, "label")),
               "Dev Team id:-1001234567890 topic:42");
    EXPECT_INT(json_integer_value(json_object_get(o, "threadId")), 42);
    json_decref(e);
    world_stop(&w);
}

/* QuantumClaw's group display names (buildGroupDisplayName). */
TEST(session_files_group_display_names)
{
    static const struct {
        const char *subject, *group_channel, *id, *want;
    } cases[] = {
        {"Dev Team", NULL, "-100", "telegram:g-dev-team"},
        {NULL, NULL, "-1001234567890", "telegram:g-1001234567890"},
        {"  Ops / On-Call!! ", NULL, "-1", "telegram:g-ops-on-call"},
        {"@crew", NULL, "-1", "telegram:@crew"},
        {"#general", NULL, "-1", "telegram:g-general"},
        {NULL, "#general", "-1", "telegram:#general"},
        {"Команда", NULL, "-1", "telegram"},
        {"g-team", NULL, "-1", "telegram:g-team"},
        {"a#b", NULL, "-1", "telegram:a#b"},
        {"..x..", NULL, "-1", "telegram:g-x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf b = BUF_INIT;
        EXPECT_INT(cm_session_group_display_name(&b, "Telegram", cases[i].subject,
                                                 cases[i].group_channel, cases[i].id),
                   CM_OK);
        EXPECT_STR(b.data, cases[i].want);
        cm_buf_release(&b);
    }
}

/* The transcript's model records follow the run's model: a clawmem
 * transcript from before these records gets its thinking level once, and
 * a session whose model changes gets a new model-snapshot naming it and
 * its api — a provider without `api` is spoken to, and recorded as,
 * "openai-completions". */
TEST(session_files_model_records_follow_the_model)
{
    world w;
    if (!world_start(&w, NULL)) return;
    /* an older clawmem transcript: messages, no model records */
    char id[160], err[512];
    session_store st;
    EXPECT_INT(cm_session_store_read(&st, w.store, err, sizeof err), CM_OK);
    EXPECT_INT(cm_session_touch(&st, "agent:main:main", NULL, T0, id, err, sizeof err), CM_OK);
    buf tp = BUF_INIT;
    EXPECT_INT(cm_session_transcript_of(&st, cm_session_store_get(&st, "agent:main:main"), &tp),
               CM_OK);
    cm_session_store_release(&st);
    json_t *m = json_pack("{s:o}", "message", cm_transcript_user_message("old", T0));
    EXPECT_INT(cm_transcript_append(tp.data, id, w.ws, "message", m, T0, NULL, err, sizeof err),
               CM_OK);
    json_decref(m);
    fake_push_chat_text(w.fs, "one", 100);
    agent_reply r;
    EXPECT_INT(tg_turn(&w, "agent:main:main", NULL, "first", &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    json_t *recs = records(tp.data);
    /* header, old message, thinking level, snapshot, user, assistant */
    EXPECT_INT(json_array_size(recs), 6);
    EXPECT_STR(type_of(json_array_get(recs, 2)), "thinking_level_change");
    EXPECT_STR(type_of(json_array_get(recs, 3)), "custom");
    json_decref(recs);
    /* the same model again: no new records but the messages */
    fake_push_chat_text(w.fs, "two", 100);
    EXPECT_INT(tg_turn(&w, "agent:main:main", NULL, "second", &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    recs = records(tp.data);
    EXPECT_INT(json_array_size(recs), 8);
    json_decref(recs);
    /* another model (an override): a new snapshot names it */
    fake_push_chat_text(w.fs, "three", 100);
    agent_turn_opts o = {"third", "other/mini", NULL, NULL, NULL, NULL, NULL, NULL};
    EXPECT_INT(cm_agent_session_turn_opts(&w.a, "agent:main:main", &o, &r, err, sizeof err), CM_OK);
    cm_agent_reply_release(&r);
    recs = records(tp.data);
    EXPECT_INT(json_array_size(recs), 11);
    json_t *snap = json_array_get(recs, 8), *sd = json_object_get(snap, "data");
    EXPECT_STR(type_of(snap), "custom");
    EXPECT_STR(json_string_value(json_object_get(sd, "provider")), "other");
    EXPECT_STR(json_string_value(json_object_get(sd, "modelId")), "mini");
    EXPECT_STR(json_string_value(json_object_get(sd, "modelApi")), "openai-completions");
    json_t *am = json_object_get(json_array_get(recs, 10), "message");
    EXPECT_STR(json_string_value(json_object_get(am, "api")), "openai-completions");
    EXPECT_STR(json_string_value(json_object_get(am, "provider")), "other");
    json_decref(recs);
    cm_buf_release(&tp);
    world_stop(&w);
}

/* The thinking level pi-coding-agent records (clamped to the model's
 * reasoning flag), the entry's contextTokens (agents.defaults.contextTokens
 * first) and the run's cost from the model's per-million rates. */
TEST(session_files_thinking_level_cost_and_context)
{
    json_t *cfg = json_loads(
        "{\"agents\":{\"defaults\":{\"thinkingDefault\":\"high\",\"models\":{\"p/r2\":{\"params\":"
        "{\"thinking\":\"minimal\"}}}}},\"models\":{\"providers\":{\"p\":{\"models\":["
        "{\"id\":\"plain\"},{\"id\":\"r\",\"reasoning\":true,\"contextWindow\":64000,"
        "\"cost\":{\"input\":3,\"output\":15}},{\"id\":\"r2\",\"reasoning\":true}]}}}}",
        0, NULL);
    json_t *entry = json_pack("{s:s}", "thinkingLevel", "xhigh");
    EXPECT_STR(cm_agent_thinking_level(cfg, NULL, "p/plain"), "off"); /* not a reasoning model */
    EXPECT_STR(cm_agent_thinking_level(cfg, NULL, "p/r"), "high");
    EXPECT_STR(cm_agent_thinking_level(cfg, NULL, "p/r2"), "minimal");
    EXPECT_STR(cm_agent_thinking_level(cfg, entry, "p/r"), "high"); /* xhigh clamped */
    EXPECT_STR(cm_agent_thinking_level(NULL, NULL, "q/x"), "off");
    EXPECT_INT(cm_agent_context_tokens(cfg, "p/r"), 64000);
    EXPECT_INT(cm_agent_context_tokens(cfg, "p/plain"), 200000);
    llm_usage u = {1000000, 100000, 0, 0, 0};
    double usd = -1;
    EXPECT(cm_agent_run_cost(cfg, "p/r", &u, &usd));
    EXPECT_NEAR(usd, 4.5, 1e-9);
    EXPECT(cm_agent_run_cost(cfg, "p/plain", &u, &usd));
    EXPECT_NEAR(usd, 0, 1e-12);
    EXPECT(!cm_agent_run_cost(cfg, "q/x", &u, &usd));
    json_object_set_new(json_object_get(cfg, "agents"), "defaults",
                        json_pack("{s:i}", "contextTokens", 32000));
    EXPECT_INT(cm_agent_context_tokens(cfg, "p/r"), 32000);
    json_decref(entry);
    json_decref(cfg);
}

/* Names and titles come from chat senders: any bytes, any length. The
 * entry gets valid JSON strings of at most 512 characters, and the origin
 * of an earlier message is merged, not replaced. */
TEST(session_files_origin_from_hostile_senders)
{
    buf big = BUF_INIT;
    for (int i = 0; i < 100000; i++)
        cm_buf_adds(&big, i % 7 ? "é" : "\xff\"\n");
    json_t *prev = json_pack("{s:{s:s,s:s}}", "origin", "label", "old", "custom", "kept");
    session_origin so = {"Telegram", NULL, "-100", "7", "group", big.data, big.data};
    json_t *p = cm_session_origin_patch(prev, &so);
    EXPECT(p != NULL);
    json_t *o = json_object_get(p, "origin");
    const char *label = json_string_value(json_object_get(o, "label"));
    EXPECT(label != NULL);
    size_t chars = 0;
    if (label) cm_utf8_prefix_chars(label, strlen(label), SIZE_MAX, &chars);
    EXPECT_INT((int)chars, 512);
    EXPECT_STR(json_string_value(json_object_get(o, "custom")), "kept");
    EXPECT_STR(json_string_value(json_object_get(o, "provider")), "telegram");
    EXPECT_STR(json_string_value(json_object_get(o, "accountId")), "default");
    EXPECT_INT(json_integer_value(json_object_get(o, "threadId")), 7);
    EXPECT(json_string_value(json_object_get(p, "subject")) != NULL);
    EXPECT(json_string_value(json_object_get(p, "displayName")) != NULL);
    char *text = json_dumps(p, JSON_COMPACT);
    EXPECT(text && strlen(text) < 16000);
    free(text);
    json_decref(p);
    /* no chat: nothing to record; an unknown chat type is a direct one */
    session_origin none = {"telegram", NULL, NULL, NULL, NULL, NULL, NULL};
    EXPECT(cm_session_origin_patch(NULL, &none) == NULL);
    session_origin odd = {"telegram", "work", "5", "topic-x", "weird", NULL, NULL};
    p = cm_session_origin_patch(NULL, &odd);
    EXPECT_STR(json_string_value(json_object_get(json_object_get(p, "origin"), "chatType")),
               "direct");
    EXPECT(json_object_get(p, "groupId") == NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "lastThreadId")), "topic-x");
    EXPECT_STR(json_string_value(json_object_get(p, "lastAccountId")), "work");
    json_decref(p);
    json_decref(prev);
    cm_buf_release(&big);
}

/* ---- a real run of the reference, continued ------------------------------------- */

#define RUN_DM    "d8910a99-e913-499b-ad80-2e676baa3540"
#define RUN_GROUP "06895a02-bf29-451a-91b3-3c376ad58727"
#define RUN_RESET "8a2d10cc-bb9a-4984-b915-5623f4046253.jsonl.reset.2026-12-01T17-31-02.757Z"

/* The fields a turn rewrites (this run's values); every other field the
 * reference wrote must come back unchanged. */
static bool run_owned(const char *k)
{
    static const char *const own[] = {
        "updatedAt",   "status",         "startedAt",   "endedAt",     "runtimeMs",
        "abortedLastRun", "systemSent",  "inputTokens", "outputTokens", "totalTokens",
        "totalTokensFresh", "cacheRead", "cacheWrite",  "estimatedCostUsd", "contextTokens",
        "model",       "modelProvider",  "lastChannel", "lastTo",      "lastAccountId",
        "deliveryContext", "origin",     NULL};
    for (size_t i = 0; own[i]; i++)
        if (!strcmp(own[i], k)) return true;
    return false;
}

/* tests/fixtures/reference-run/: what openclaw@2026.3.22 left in its
 * sessions directory after a DM, a group mention, /new and /compact
 * (recorded by `make compat`, tests/compat/run.mjs --record). clawmem
 * continues the DM (past its compaction) and the group: no field of any
 * entry is lost or changes type, the fields a turn does not own keep the
 * reference's values, the entry clawmem does not touch (the /new command's
 * slash session) and the reset archive stay byte for byte, and each
 * transcript keeps its lines and grows by the turn, chained to its last
 * record. */
TEST(session_files_recorded_reference_run_continues)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char *store = fixture("reference-run/sessions.json", w.sessions);
    write_file("/", w.store, store);
    json_t *before = json_loads(store, 0, NULL);
    EXPECT(before != NULL);
    free(store);
    static const char *const files[] = {RUN_DM ".jsonl", RUN_GROUP ".jsonl", RUN_RESET};
    char *olds[3], paths[3][2300];
    for (size_t i = 0; i < 3; i++) {
        char rel[300];
        snprintf(rel, sizeof rel, "reference-run/%s", files[i]);
        olds[i] = fixture(rel, w.sessions);
        snprintf(paths[i], sizeof paths[i], "%s/%s", w.sessions, files[i]);
        write_file("/", paths[i], olds[i]);
    }
    static const agent_inbound group = {.chat_id = "telegram:-100",
                                        .account_id = "default",
                                        .channel = "telegram",
                                        .provider = "telegram",
                                        .surface = "telegram",
                                        .chat_type = "group",
                                        .peer = "-100",
                                        .conversation_label = "Compat Group id:-100",
                                        .group_subject = "Compat Group"};
    static const agent_inbound alice = {.chat_id = "telegram:111",
                                        .account_id = "default",
                                        .channel = "telegram",
                                        .provider = "telegram",
                                        .surface = "telegram",
                                        .chat_type = "direct",
                                        .peer = "111",
                                        .conversation_label = "Alice"};
    fake_push_chat_text(w.fs, "It is BLUEHERON-7.", 300);
    fake_push_chat_text(w.fs, "Pasta then.", 300);
    agent_reply r;
    char err[512];
    EXPECT_INT(tg_turn(&w, "agent:main:main", &alice, "what is my courier code?", &r, err,
                       sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    EXPECT_INT(tg_turn(&w, "agent:main:telegram:group:-100", &group, "and tomorrow?", &r, err,
                       sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    /* the DM's model request: the compaction's summary and the kept messages */
    const fake_request *q = fake_get(w.fs, 0);
    EXPECT(q && strstr(q->body, "Summary: Alice's courier code is BLUEHERON-7."));
    EXPECT(q && strstr(q->body, "Remember: my courier code is BLUEHERON-7."));
    q = fake_get(w.fs, 1);
    EXPECT(q && strstr(q->body, "what should we eat?"));

    const char *k;
    json_t *was;
    json_object_foreach(before, k, was)
    {
        json_t *e = disk_entry(&w, k);
        buf bad = BUF_INIT;
        if (!e || !same_shape(was, e, &bad))
            test_fail(__FILE__, __LINE__, "%s: %s", k, e ? bad.data : "entry gone");
        cm_buf_release(&bad);
        bool touched = !strcmp(k, "agent:main:main") || !strcmp(k, "agent:main:telegram:group:-100");
        const char *f;
        json_t *v;
        json_object_foreach(was, f, v)
        {
            if (touched && run_owned(f)) continue;
            if (!json_equal(v, json_object_get(e, f)))
                test_fail(__FILE__, __LINE__, "%s: %s changed", k, f);
        }
        if (touched) EXPECT_STR(json_string_value(json_object_get(e, "status")), "done");
        json_decref(e);
    }
    /* the transcripts: the reference's lines, then the turn's, chained */
    for (size_t i = 0; i < 3; i++) {
        char *now = slurp(paths[i]);
        if (i == 2) {
            EXPECT_STR(now, olds[i]);
        } else {
            EXPECT(!strncmp(now, olds[i], strlen(olds[i])));
            json_t *recs = records(paths[i]);
            size_t n = json_array_size(recs), old_n = 0;
            for (const char *p = olds[i]; *p; p++)
                old_n += *p == '\n';
            EXPECT(n >= old_n + 2);
            const char *last_id =
                json_string_value(json_object_get(json_array_get(recs, old_n - 1), "id"));
            json_t *u = json_array_get(recs, old_n);
            EXPECT_STR(json_string_value(json_object_get(u, "parentId")), last_id);
            json_decref(recs);
        }
        free(now);
        free(olds[i]);
    }
    json_decref(before);
    world_stop(&w);
}
