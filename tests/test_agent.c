/*
 * test_agent.c — agent turns (src/agent) against the loopback server
 * playing the model: the tool loop over the memory tools, a turn inside a
 * session (transcript and sessions.json), the memory flush before a turn
 * (a note written only to today's file, NO_REPLY not delivered, the
 * bookkeeping), and compaction (summary record, count, the cut before a
 * user message).
 */
#include <jansson.h>
#include <time.h>
#include <unistd.h>

#include "../src/agent/session_cmds.h"
#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "fakeserver.h"
#include "test.h"

#define T0 1800000000000LL /* 2027-01-15 08:00 UTC */

static int64_t clock_now = T0;
static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return clock_now;
}

typedef struct world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
    json_t *cfg;
    cm_engine *eng;
    llm_runner *runner;
    char store[2048];
    agent_ctx a;
} world;

static bool world_start(world *w, const char *models_json)
{
    memset(w, 0, sizeof *w);
    clock_now = T0;
    w->fs = fake_start(8, w->base);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/"
             "v1\",\"apiKey\":\"sk-test-agent-0001\","
             "\"models\":%s}}}}",
             w->base, models_json ? models_json : "[]");
    w->cfg = json_loads(cfg, 0, NULL);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    char err[512];
    write_file(w->dir, "state/quantumclaw.json", "{}");
    if (cm_engine_open(&o, &w->eng, err, sizeof err) ||
        cm_engine_sync(w->eng, 0, NULL, NULL, NULL, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "engine: %s", err);
        return false;
    }
    llm_runner_opts ro = {w->cfg, w->state, "main", fake_clock, NULL};
    if (cm_llm_runner_open(&ro, &w->runner, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "runner: %s", err);
        return false;
    }
    snprintf(w->store, sizeof w->store, "%s/agents/main/sessions/sessions.json", w->state);
    w->a = (agent_ctx){w->cfg, w->state,  "main", w->store,   w->ws,
                       w->eng, w->runner, true,   fake_clock, NULL, NULL, NULL, NULL};
    return true;
}

static void world_stop(world *w)
{
    cm_llm_runner_close(w->runner);
    cm_engine_close(w->eng);
    json_decref(w->cfg);
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

/* The fake model's next answer (fakeserver.c). */
static void say(world *w, const char *text, int prompt_tokens)
{
    fake_push_chat_text(w->fs, text, prompt_tokens);
}

static void call(world *w, const char *id, const char *name, const char *args_json)
{
    fake_push_chat_call(w->fs, id, name, args_json);
}

static json_t *request_body(world *w, int i)
{
    const fake_request *q = fake_get(w->fs, i);
    return q ? json_loads(q->body, 0, NULL) : NULL;
}

TEST(agent_turn_runs_the_memory_tools)
{
    world w;
    if (!world_start(&w, NULL)) return;
    call(&w, "c1", "memory_search", "{\"query\":\"dog called\"}");
    call(&w, "c2", "memory_get", "{\"path\":\"../etc/passwd\"}");
    say(&w, "The dog is called Biscuit.", 100);
    llm_pin pin = {"", false};
    agent_tools tools = {.engine = w.eng, .session_key = "agent:main:main"};
    agent_turn_in in = {w.runner,
                        {NULL, false, &pin},
                        "Be brief.",
                        NULL,
                        "What is the dog called?",
                        T0,
                        0,
                        NULL,
                        NULL,
                        NULL,
                        NULL,
                        NULL,
                        NULL,
                        NULL};
    agent_turn_out out;
    char err[512];
    EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_OK);
    EXPECT_STR(out.reply, "The dog is called Biscuit.");
    EXPECT_INT(out.steps, 3);
    EXPECT_INT(out.tool_calls, 2);
    EXPECT_INT(json_array_size(out.messages), 6); /* user, call, result, call, result, answer */
    json_t *r1 = json_array_get(out.messages, 2);
    EXPECT_STR(json_string_value(json_object_get(r1, "role")), "toolResult");
    EXPECT(json_is_false(json_object_get(r1, "isError")));
    EXPECT_CONTAINS(json_string_value(
                        json_object_get(json_array_get(json_object_get(r1, "content"), 0), "text")),
                    "Biscuit");
    json_t *r2 = json_array_get(out.messages, 4);
    EXPECT(json_is_true(json_object_get(r2, "isError"))); /* the escaping path is refused */
    /* The second request carried the tool result back to the model. */
    json_t *b = request_body(&w, 1);
    json_t *msgs = json_object_get(b, "messages");
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    EXPECT_STR(json_string_value(json_object_get(last, "role")), "tool");
    EXPECT_STR(json_string_value(json_object_get(last, "tool_call_id")), "c1");
    EXPECT_CONTAINS(json_string_value(json_object_get(last, "content")), "Biscuit");
    EXPECT_INT(json_array_size(json_object_get(b, "tools")), 2); /* no memory_write offered */
    json_decref(b);
    cm_agent_turn_out_release(&out);
    /* A model that never stops calling tools is stopped. */
    for (int i = 0; i < 3; i++)
        call(&w, "cx", "memory_search", "{\"query\":\"x\"}");
    in.max_steps = 3;
    EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "after 3 model calls");
    cm_agent_turn_out_release(&out);
    world_stop(&w);
}

static json_t *entry_of(world *w, const char *key)
{
    session_store s;
    char err[256];
    if (cm_session_store_read(&s, w->store, err, sizeof err)) return NULL;
    json_t *e = json_incref(cm_session_store_get(&s, key));
    cm_session_store_release(&s);
    return e;
}

static char *transcript_of(world *w, const char *key)
{
    json_t *e = entry_of(w, key);
    const char *f = json_string_value(json_object_get(e, "sessionFile"));
    buf b = BUF_INIT;
    char err[256];
    if (f) cm_fs_read_file(f, 1 << 24, &b, err, sizeof err);
    json_decref(e);
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

TEST(agent_session_turn_records_the_turn)
{
    world w;
    if (!world_start(&w, NULL)) return;
    say(&w, "Hello! How can I help?", 1234);
    agent_reply r;
    char err[512];
    EXPECT_INT(
        cm_agent_session_turn(&w.a, "agent:main:main", "hi", NULL, NULL, NULL, &r, err, sizeof err),
        CM_OK);
    EXPECT_STR(r.text, "Hello! How can I help?");
    EXPECT(!r.silent && !r.flushed && !r.compacted);
    EXPECT_STR(r.model, "openai/gpt-t");
    cm_agent_reply_release(&r);
    json_t *e = entry_of(&w, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "totalTokens")), 1234);
    EXPECT(json_is_true(json_object_get(e, "totalTokensFresh")));
    EXPECT_STR(json_string_value(json_object_get(e, "model")), "gpt-t");
    EXPECT_STR(json_string_value(json_object_get(e, "modelProvider")), "openai");
    json_decref(e);
    char *t = transcript_of(&w, "agent:main:main");
    EXPECT_CONTAINS(t, "\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]");
    EXPECT_CONTAINS(t, "Hello! How can I help?");
    free(t);
    /* The next turn sends the history. */
    say(&w, "Still here.", 1300);
    EXPECT_INT(cm_agent_session_turn(&w.a, "agent:main:main", "still there?", NULL, NULL, NULL, &r,
                                     err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    json_t *b = request_body(&w, 1);
    EXPECT_INT(json_array_size(json_object_get(b, "messages")), 4); /* the system prompt first */
    json_decref(b);
    world_stop(&w);
}

TEST(agent_memory_flush_before_the_turn)
{
    /* A 30,000-token model: the flush threshold is 30000 − 20000 − 4000. */
    world w;
    if (!world_start(&w, "[{\"id\":\"gpt-t\",\"contextWindow\":30000}]")) return;
    say(&w, "Noted.", 7000); /* the first turn leaves 7,000 tokens in the context */
    agent_reply r;
    char err[512];
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "I prefer green tea, by the way.", NULL, NULL,
                                     NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT(!r.flushed);
    cm_agent_reply_release(&r);
    /* The next message: the flush runs first. The model tries another
     * file (refused), writes today's, says NO_REPLY; then the turn. */
    clock_now = T0 + 3600 * 1000;
    call(&w, "f1", "memory_write", "{\"path\":\"MEMORY.md\",\"text\":\"- Prefers green tea.\"}");
    call(&w, "f2", "memory_write", "{\"text\":\"- Prefers green tea.\"}");
    say(&w, "NO_REPLY", 7100);
    say(&w, "Green tea it is.", 7200);
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "What do I like to drink?", NULL, NULL, NULL, &r,
                                     err, sizeof err),
               CM_OK);
    EXPECT(r.flushed);
    EXPECT_STR(r.text, "Green tea it is.");
    cm_agent_reply_release(&r);
    buf note = BUF_INIT;
    EXPECT_INT(
        cm_fs_read_file(path_in(w.dir, "ws/memory/2027-01-15.md"), 1 << 20, &note, err, sizeof err),
        CM_OK);
    EXPECT_CONTAINS(note.data, "Prefers green tea.");
    cm_buf_release(&note);
    buf mem = BUF_INIT;
    cm_fs_read_file(path_in(w.dir, "ws/MEMORY.md"), 1 << 20, &mem, err, sizeof err);
    EXPECT(strstr(mem.data, "green tea") == NULL); /* MEMORY.md untouched during the flush */
    cm_buf_release(&mem);
    /* The flush turn saw the flush prompts. */
    json_t *b = request_body(&w, 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(
                        json_array_get(json_object_get(b, "messages"), 0), "content")),
                    "Session nearing compaction.");
    json_decref(b);
    /* Bookkeeping: once per compaction cycle. */
    json_t *e = entry_of(&w, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "memoryFlushCompactionCount")), 0);
    EXPECT_INT(json_integer_value(json_object_get(e, "memoryFlushAt")), clock_now);
    EXPECT_INT((int)strlen(json_string_value(json_object_get(e, "memoryFlushContextHash")) ?: ""),
               16);
    json_decref(e);
    /* The note is searchable now. */
    char *js = NULL;
    EXPECT_INT(cm_memory_search(w.eng, "green tea", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "memory/2027-01-15.md");
    cm_free(js);
    /* Not again in this cycle. */
    say(&w, "Sure.", 7300);
    int before = fake_count(w.fs);
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "thanks", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT(!r.flushed);
    EXPECT_INT(fake_count(w.fs), before + 1);
    cm_agent_reply_release(&r);
    world_stop(&w);
}

TEST(agent_compaction_summarises_before_a_user_message)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char err[512];
    agent_reply r;
    /* Six turns of about 6,000 tokens each. */
    char *big = malloc(24001);
    memset(big, 'a', 24000);
    big[24000] = 0;
    for (int i = 0; i < 6; i++) {
        char p[64];
        snprintf(p, sizeof p, "turn %d ", i);
        buf msg = BUF_INIT;
        cm_buf_printf(&msg, "%s%s", p, big);
        say(&w, "ok", 100);
        EXPECT_INT(
            cm_agent_session_turn(&w.a, "main", msg.data, NULL, NULL, NULL, &r, err, sizeof err),
            CM_OK);
        cm_agent_reply_release(&r);
        cm_buf_release(&msg);
    }
    free(big);
    say(&w, "NO_REPLY", 500); /* the memory flush of the cycle comes first */
    say(&w, "## Goal\nThe user sent six long messages.", 500);
    EXPECT_INT(cm_agent_session_compact(&w.a, "main", &r, err, sizeof err), CM_OK);
    EXPECT(r.compacted);
    EXPECT(r.flushed);
    cm_agent_reply_release(&r);
    json_t *e = entry_of(&w, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 1);
    EXPECT(json_integer_value(json_object_get(e, "totalTokens")) > 0);
    const char *f = json_string_value(json_object_get(e, "sessionFile"));
    json_t *hist = NULL;
    EXPECT_INT(cm_agent_session_history(f, &hist, err, sizeof err), CM_OK);
    json_decref(e);
    /* summary, then whole turns from a user message on (about 20k tokens: 3 turns) */
    EXPECT_CONTAINS(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_array_get(hist, 0), "content"), 0), "text")),
        "<summary>\n## Goal\nThe user sent six long messages.\n</summary>");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(hist, 1), "role")), "user");
    EXPECT_INT(json_array_size(hist), 1 + 2 * 4 + 2); /* + the flush's prompt and NO_REPLY */
    json_decref(hist);
    /* The summariser got the conversation as text, not as turns to continue. */
    json_t *b = request_body(&w, 7);
    json_t *msgs = json_object_get(b, "messages");
    EXPECT_INT(json_array_size(msgs), 2); /* system + one user message */
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
                    "<conversation>\n[User]: turn 0 ");
    json_decref(b);
    world_stop(&w);
}

/* compaction.keepRecentTokens sets how much of the recent conversation a
 * compaction keeps (QuantumClaw hands it to pi-coding-agent's findCutPoint):
 * 7,000 tokens keep the last two 6,000-token turns, not the default 20,000's four. */
TEST(agent_compaction_keeps_keep_recent_tokens)
{
    world w;
    if (!world_start(&w, NULL)) return;
    json_object_set_new(json_object_get(json_object_get(w.cfg, "agents"), "defaults"),
                        "compaction", json_pack("{s:i}", "keepRecentTokens", 7000));
    char err[512];
    agent_reply r;
    char *big = malloc(24001);
    memset(big, 'a', 24000);
    big[24000] = 0;
    for (int i = 0; i < 6; i++) {
        buf msg = BUF_INIT;
        cm_buf_printf(&msg, "turn %d %s", i, big);
        say(&w, "ok", 100);
        EXPECT_INT(
            cm_agent_session_turn(&w.a, "main", msg.data, NULL, NULL, NULL, &r, err, sizeof err),
            CM_OK);
        cm_agent_reply_release(&r);
        cm_buf_release(&msg);
    }
    free(big);
    say(&w, "NO_REPLY", 500);
    say(&w, "## Goal\nSix long messages.", 500);
    EXPECT_INT(cm_agent_session_compact(&w.a, "main", &r, err, sizeof err), CM_OK);
    EXPECT(r.compacted);
    cm_agent_reply_release(&r);
    json_t *e = entry_of(&w, "agent:main:main");
    json_t *hist = NULL;
    EXPECT_INT(cm_agent_session_history(json_string_value(json_object_get(e, "sessionFile")),
                                        &hist, err, sizeof err),
               CM_OK);
    json_decref(e);
    EXPECT_INT(json_array_size(hist), 1 + 2 * 2 + 2); /* summary, turns 4 and 5, the flush */
    EXPECT_CONTAINS(json_string_value(json_object_get(
                        json_array_get(json_object_get(json_array_get(hist, 1), "content"), 0),
                        "text")),
                    "turn 4 ");
    json_decref(hist);
    world_stop(&w);
}

/* Compaction after a turn when its context passed contextWindow −
 * max(reserveTokens (16384), reserveTokensFloor (20000)), as QuantumClaw
 * sets pi-coding-agent's reserveTokens: a reserveTokens under the floor
 * changes nothing, one above it compacts earlier. */
TEST(agent_compaction_threshold_honours_reserve_tokens)
{
    world w;
    if (!world_start(&w, "[{\"id\":\"gpt-t\",\"contextWindow\":30000}]")) return;
    json_t *defaults = json_object_get(json_object_get(w.cfg, "agents"), "defaults");
    json_object_set_new(defaults, "compaction",
                        json_pack("{s:i,s:{s:b}}", "reserveTokens", 1000, "memoryFlush",
                                  "enabled", 0));
    char err[512];
    agent_reply r;
    say(&w, "ok", 100);
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "first", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT(!r.compacted);
    cm_agent_reply_release(&r);
    say(&w, "ok", 7000); /* 7,000 < 30000 − max(1000, 20000) */
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "second", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT(!r.compacted);
    cm_agent_reply_release(&r);
    json_object_set_new(json_object_get(defaults, "compaction"), "reserveTokens",
                        json_integer(25000));
    say(&w, "ok", 7000); /* 7,000 > 30000 − 25000 */
    say(&w, "## Goal\nTwo short messages.", 50);
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "third", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT(r.compacted);
    cm_agent_reply_release(&r);
    json_t *e = entry_of(&w, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 1);
    json_decref(e);
    world_stop(&w);
}

/* ---- through the command ---- */

TEST(agent_cli_models_and_flush)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{agents:{defaults:{model:{primary:'openai/gpt-t',fallbacks:['openai/gpt-u']}}},"
             "models:{providers:{openai:{baseUrl:'%s/v1'}}}}",
             w.base);
    write_file(w.dir, "state/quantumclaw.json", cfg);
    /* keyword memory: the openai profile would otherwise give embeddings too */
    write_file(w.dir, "state/clawmem.json",
               "{clawmem:{memoryWrite:true},agents:{defaults:{memorySearch:{provider:'none'}}}}");
    write_file(w.dir, "state/agents/main/agent/auth-profiles.json",
               "{\"version\":1,\"profiles\":{\"openai:work\":{\"type\":\"api_key\",\"provider\":"
               "\"openai\","
               "\"key\":\"sk-cli-secret-000111\"}},\"usageStats\":{\"openai:work\":{"
               "\"cooldownUntil\":1}}}");
    const char *st[] = {"--state-dir", w.state, "--workspace", w.ws, "models", "status", NULL};
    run_result r = run_clawmem(NULL, st);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "openai/gpt-t → openai/gpt-u");
    EXPECT_CONTAINS(r.out, "1. openai:work [api_key] ready");
    EXPECT(strstr(r.out, "sk-cli-secret") == NULL);
    run_result_release(&r);
    /* one turn with the memory tools, streamed */
    call(&w, "c1", "memory_search", "{\"query\":\"dog\"}");
    say(&w, "Biscuit.", 50);
    const char *run[] = {
        "--state-dir", w.state, "--workspace", w.ws, "models", "run", "What is the dog called?",
        NULL};
    r = run_clawmem(NULL, run);
    if (r.status != 0) test_fail(__FILE__, __LINE__, "models run: %s", r.err);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "Biscuit.\n");
    EXPECT_CONTAINS(r.err, "[openai/gpt-t]");
    EXPECT_CONTAINS(fake_get(w.fs, 0)->headers, "Bearer sk-cli-secret-000111");
    run_result_release(&r);
    /* a turn in a session, then its memory flush */
    say(&w, "Hi.", 50);
    const char *srun[] = {"--state-dir", w.state, "--workspace",    w.ws, "models", "run",
                          "--session",   "main",  "I like hiking.", NULL};
    r = run_clawmem(NULL, srun);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    call(&w, "f1", "memory_write", "{\"text\":\"- Likes hiking.\"}");
    say(&w, "NO_REPLY", 60);
    const char *fl[] = {"--state-dir", w.state, "--workspace", w.ws, "sessions",
                        "flush",       "main",  "--json",      NULL};
    r = run_clawmem(NULL, fl);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"flushed\":true");
    run_result_release(&r);
    /* today's note, by the real clock */
    char day[32], rel[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(day, sizeof day, "%Y-%m-%d", &tm);
    snprintf(rel, sizeof rel, "ws/memory/%s.md", day);
    buf note = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file(path_in(w.dir, rel), 1 << 20, &note, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(note.data, "Likes hiking.");
    cm_buf_release(&note);
    /* no model reachable: a clear error, no secret */
    fake_push(w.fs, FAKE_STATUS, 401, -1);
    fake_push(w.fs, FAKE_STATUS, 401, -1);
    r = run_clawmem(NULL, run);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "every model failed");
    EXPECT(strstr(r.err, "sk-cli-secret") == NULL);
    run_result_release(&r);
    world_stop(&w);
}

/* A memory_get result cut at the tool-text cap never splits a character
 * (the model's request must stay valid UTF-8 JSON): a large non-ASCII note
 * read whole is a normal turn. */
TEST(agent_tool_result_cut_keeps_characters_whole)
{
    world w;
    if (!world_start(&w, NULL)) return;
    buf big = BUF_INIT;
    cm_buf_addc(&big, 'a');
    for (int i = 0; i < 200000; i++)
        cm_buf_adds(&big, "\xc3\xa9");
    cm_buf_addc(&big, '\n');
    write_file(w.dir, "ws/memory/big.md", big.data);
    cm_buf_release(&big);
    call(&w, "c1", "memory_get", "{\"path\":\"memory/big.md\"}");
    say(&w, "done", 100);
    llm_pin pin = {"", false};
    agent_tools tools = {.engine = w.eng, .session_key = "agent:main:main"};
    agent_turn_in in = {w.runner,   {NULL, false, &pin},
                        NULL,       NULL,
                        "read big", T0,
                        0,          NULL,
                        NULL,       NULL,
                        NULL,       NULL,
                        NULL,       NULL};
    agent_turn_out out;
    char err[512] = "";
    EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_OK);
    cm_agent_turn_out_release(&out);
    world_stop(&w);
}

/* ---- the system prompt (src/agent/prompt.c) and reasoning ---- */

/* The system message of request i. */
static char *system_of(world *w, int i)
{
    json_t *b = request_body(w, i);
    json_t *m = json_array_get(json_object_get(b, "messages"), 0);
    const char *role = json_string_value(json_object_get(m, "role"));
    const char *c = json_string_value(json_object_get(m, "content"));
    char *s = cm_strdup(role && !strcmp(role, "system") && c ? c : "");
    json_decref(b);
    return s;
}

TEST(agent_prompt_memory_md_only_in_the_main_session)
{
    world w;
    if (!world_start(&w, NULL)) return;
    write_file(w.dir, "ws/AGENTS.md", "Always answer in haiku.\n");
    write_file(w.dir, "ws/SOUL.md", "Warm and dry.\n");
    char err[512];
    static const struct {
        const char *key;
        bool memory;
    } cases[] = {
        {"agent:main:main", true},
        {"main", true}, /* the same session, named short */
        {"agent:main:telegram:group:-100", false},
        {"agent:main:telegram:group:-100:thread:7", false},
        {"agent:main:telegram:channel:-1002", false},
        {"agent:main:telegram:direct:42", false}, /* a per-peer DM session is not the main one */
        {"agent:ops:main", false},                /* another agent's main session */
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        int n0 = fake_count(w.fs);
        say(&w, "ok", 100);
        agent_reply r;
        EXPECT_INT(
            cm_agent_session_turn(&w.a, cases[i].key, "hi", NULL, NULL, NULL, &r, err, sizeof err),
            CM_OK);
        cm_agent_reply_release(&r);
        char *sys = system_of(&w, n0);
        EXPECT_CONTAINS(sys, "Always answer in haiku.");
        EXPECT_CONTAINS(sys, "Warm and dry.");
        EXPECT_CONTAINS(sys, "SOUL.md sets your persona");
        EXPECT_CONTAINS(sys, "# Project Context");
        EXPECT_CONTAINS(sys, "memory_write");           /* offered: the workspace is writable */
        EXPECT_CONTAINS(sys, "[MISSING] Expected at:"); /* TOOLS.md and others */
        if (cases[i].memory) {
            EXPECT_CONTAINS(sys, "Biscuit");
            EXPECT_CONTAINS(sys, "/MEMORY.md\n");
        } else if (strstr(sys, "Biscuit") || strstr(sys, "MEMORY.md\n")) {
            test_fail(__FILE__, __LINE__, "MEMORY.md reached session %s", cases[i].key);
            free(sys);
            break;
        }
        free(sys);
        /* the memory tools are offered in every session */
        json_t *b = request_body(&w, n0);
        char *tools = json_dumps(json_object_get(b, "tools"), JSON_COMPACT);
        EXPECT_CONTAINS(tools, "memory_search");
        EXPECT_CONTAINS(tools, "memory_get");
        EXPECT_CONTAINS(tools, "memory_write");
        free(tools);
        json_decref(b);
    }
    world_stop(&w);
}

TEST(agent_prompt_daily_logs_of_the_session_start)
{
    world w;
    if (!world_start(&w, NULL)) return;
    /* T0 is 2027-01-15 08:00 UTC */
    write_file(w.dir, "ws/memory/2027-01-15.md", "- today: fed the cat\n");
    write_file(w.dir, "ws/memory/2027-01-14.md", "- yesterday: bought tea\n");
    write_file(w.dir, "ws/memory/2027-01-13.md", "- older: painted the fence\n");
    write_file(w.dir, "ws/memory/2027-01-17.md", "- later: a trip\n");
    char err[512];
    agent_reply r;
    const char *group = "agent:main:telegram:group:-100";
    say(&w, "ok", 100);
    EXPECT_INT(cm_agent_session_turn(&w.a, group, "hi", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    char *sys = system_of(&w, 0);
    EXPECT_CONTAINS(sys, "today: fed the cat");
    EXPECT_CONTAINS(sys, "yesterday: bought tea");
    EXPECT(!strstr(sys, "older: painted"));
    EXPECT(!strstr(sys, "later: a trip"));
    EXPECT(strstr(sys, "bought tea") < strstr(sys, "fed the cat")); /* oldest first */
    EXPECT(!strstr(sys, "Biscuit"));
    free(sys);
    /* two days on, the same session keeps the logs of its start */
    clock_now = T0 + 2 * 86400000LL;
    say(&w, "ok", 100);
    EXPECT_INT(cm_agent_session_turn(&w.a, group, "again", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    sys = system_of(&w, 1);
    EXPECT_CONTAINS(sys, "today: fed the cat");
    EXPECT(!strstr(sys, "later: a trip"));
    free(sys);
    /* a session that starts now gets the 17th and the 16th */
    say(&w, "ok", 100);
    EXPECT_INT(cm_agent_session_turn(&w.a, "agent:main:main", "morning", NULL, NULL, NULL, &r, err,
                                     sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    sys = system_of(&w, 2);
    EXPECT_CONTAINS(sys, "later: a trip");
    EXPECT(!strstr(sys, "fed the cat"));
    EXPECT_CONTAINS(sys, "Biscuit");
    free(sys);
    world_stop(&w);
}

TEST(agent_prompt_bootstrap_caps)
{
    char *dir = tmp_dir();
    buf big = BUF_INIT;
    for (int i = 0; i < 100; i++)
        cm_buf_printf(&big, "line %03d of the agents file\n", i);
    write_file(dir, "AGENTS.md", big.data);
    write_file(dir, "SOUL.md", "short soul\n\n\n");
    write_file(dir, "MEMORY.md", "secret long-term note\n");
    json_t *cfg = json_loads("{\"agents\":{\"defaults\":{\"bootstrapMaxChars\":500,"
                             "\"bootstrapTotalMaxChars\":700}}}",
                             0, NULL);
    agent_prompt_in in = {.config = cfg,
                          .workspace = dir,
                          .agent_id = "main",
                          .session_key = "agent:main:main",
                          .memory_tools = true};
    buf p = BUF_INIT;
    EXPECT_INT(cm_agent_system_prompt(&in, &p), CM_OK);
    /* AGENTS.md cut to 500 characters: 350 from the head, 100 from the tail */
    EXPECT_CONTAINS(p.data, "[...truncated, read AGENTS.md for full content...]");
    EXPECT_CONTAINS(p.data, "line 000 of the agents file");
    EXPECT_CONTAINS(p.data, "line 099 of the agents file");
    EXPECT(!strstr(p.data, "line 050 of"));
    /* 700 in all: SOUL.md fits what is left (trimmed), the rest does not */
    EXPECT_CONTAINS(p.data, "short soul\n\n## ");
    EXPECT(!strstr(p.data, "secret long-term note"));
    EXPECT(!strstr(p.data, "memory_write"));
    EXPECT_CONTAINS(p.data, "Reasoning: off");
    cm_buf_release(&p);
    /* an empty budget for MEMORY.md aside, a group key never reads it */
    json_decref(cfg);
    in.config = NULL;
    in.session_key = "agent:main:telegram:group:1";
    EXPECT_INT(cm_agent_system_prompt(&in, &p), CM_OK);
    EXPECT(!strstr(p.data, "secret long-term note"));
    EXPECT_CONTAINS(p.data, "line 050 of"); /* no cut at the default 20000 */
    cm_buf_release(&p);
    in.session_key = "agent:main:main";
    in.reasoning = AGENT_REASONING_STREAM;
    EXPECT_INT(cm_agent_system_prompt(&in, &p), CM_OK);
    EXPECT_CONTAINS(p.data, "secret long-term note");
    EXPECT_CONTAINS(p.data, "Reasoning: stream");
    cm_buf_release(&p);
    cm_buf_release(&big);
}

/* An OpenAI-compatible streamed answer with reasoning_content first. */
static void say_reasoning(world *w, const char *why, const char *text)
{
    json_t *a = json_string(why), *b = json_string(text);
    char *qa = json_dumps(a, JSON_ENCODE_ANY), *qb = json_dumps(b, JSON_ENCODE_ANY);
    json_decref(a);
    json_decref(b);
    buf m = BUF_INIT;
    cm_buf_printf(&m,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                  "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":%s}}]}\n\n"
                  "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\\nthen "
                  "answer\"}}]}\n\n"
                  "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},"
                  "\"finish_reason\":\"stop\"}]}\n\n"
                  "data: [DONE]\n\n",
                  qa, qb);
    fake_push_raw(w->fs, m.data, true);
    cm_buf_release(&m);
    free(qa);
    free(qb);
}

/* A session's earlier answers go back to the model as pi-ai sends them:
 * to the model that wrote them, the answer alone (its reasoning came with
 * no field name to send it under); to another model (here the next in the
 * config), the reasoning as text before the answer. */
TEST(agent_history_reasoning_to_another_model_as_text)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char err[512];
    agent_reply r;
    say_reasoning(&w, "my plan", "Done.");
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "go", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    say(&w, "Again.", 50);
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "again", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    json_t *b = request_body(&w, 1);
    json_t *a1 = json_array_get(json_object_get(b, "messages"), 2);
    EXPECT_STR(json_string_value(json_object_get(a1, "role")), "assistant");
    EXPECT_STR(json_string_value(json_object_get(a1, "content")), "Done.");
    json_decref(b);
    json_object_set_new(json_object_get(json_object_get(w.cfg, "agents"), "defaults"), "model",
                        json_string("openai/gpt-u"));
    say(&w, "Other.", 50);
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "and now", NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT_STR(r.model, "openai/gpt-u");
    cm_agent_reply_release(&r);
    b = request_body(&w, 2);
    EXPECT_STR(json_string_value(json_object_get(b, "model")), "gpt-u");
    a1 = json_array_get(json_object_get(b, "messages"), 2);
    EXPECT_STR(json_string_value(json_object_get(a1, "content")), "my plan\nthen answerDone.");
    json_decref(b);
    world_stop(&w);
}

typedef struct drafts {
    int calls;
    char last[512];
} drafts;

static void on_draft(void *ctx, const char *text, size_t n)
{
    drafts *d = ctx;
    d->calls++;
    snprintf(d->last, sizeof d->last, "%.*s", (int)n, text);
}

TEST(agent_reasoning_off_on_stream)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char err[512], *reply = NULL;
    bool handled;
    agent_reply r;
    drafts d = {0};
    const char *key = "agent:main:main";
    agent_turn_opts o = {"why?", NULL, NULL, NULL, on_draft, &d, NULL, NULL};
    /* off (the default): dropped */
    say_reasoning(&w, "think first", "Because.");
    EXPECT_INT(cm_agent_session_turn_opts(&w.a, key, &o, &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.text, "Because.");
    EXPECT_STR(r.reasoning, "");
    EXPECT_INT(r.reasoning_level, AGENT_REASONING_OFF);
    EXPECT_INT(d.calls, 0);
    cm_agent_reply_release(&r);
    char *sys = system_of(&w, 0);
    EXPECT_CONTAINS(sys, "Reasoning: off");
    free(sys);
    /* the command: not one, a query, a bad level, then on */
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, "/reasons", &handled, &reply, err,
                                                  sizeof err),
               CM_OK);
    EXPECT(!handled && !reply);
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, "/reasoning", &handled, &reply, err,
                                                  sizeof err),
               CM_OK);
    EXPECT(handled);
    EXPECT_CONTAINS(reply, "Current reasoning level: off.");
    free(reply);
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, "/reasoning loud", &handled, &reply,
                                                  err, sizeof err),
               CM_OK);
    EXPECT_CONTAINS(reply, "Unrecognized reasoning level \"loud\"");
    free(reply);
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, " /reasoning: Show", &handled, &reply,
                                                  err, sizeof err),
               CM_OK);
    EXPECT_STR(reply, "\xe2\x9a\x99\xef\xb8\x8f Reasoning visibility enabled.");
    free(reply);
    json_t *e = entry_of(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "reasoningLevel")), "on");
    json_decref(e);
    /* on: a separate message, formatted */
    say_reasoning(&w, "think first", "Because.");
    EXPECT_INT(cm_agent_session_turn_opts(&w.a, key, &o, &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.text, "Because.");
    EXPECT_STR(r.reasoning, "Reasoning:\n_think first_\n_then answer_");
    EXPECT_INT(d.calls, 0);
    cm_agent_reply_release(&r);
    sys = system_of(&w, 1);
    EXPECT_CONTAINS(sys, "Reasoning: on");
    free(sys);
    /* the transcript keeps it as a thinking block; the model is not sent it again */
    char *t = transcript_of(&w, key);
    EXPECT_CONTAINS(t, "\"type\":\"thinking\"");
    free(t);
    /* stream: drafts as it arrives, nothing with the reply */
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, "/reason stream", &handled, &reply,
                                                  err, sizeof err),
               CM_OK);
    EXPECT_STR(reply, "\xe2\x9a\x99\xef\xb8\x8f Reasoning stream enabled (Telegram only).");
    free(reply);
    say_reasoning(&w, "think first", "Because.");
    EXPECT_INT(cm_agent_session_turn_opts(&w.a, key, &o, &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.text, "Because.");
    EXPECT_STR(r.reasoning, "");
    EXPECT_INT(d.calls, 2);
    EXPECT_STR(d.last, "Reasoning:\n_think first_\n_then answer_");
    cm_agent_reply_release(&r);
    json_t *b = request_body(&w, 2);
    char *msgs = json_dumps(json_object_get(b, "messages"), JSON_COMPACT);
    EXPECT(!strstr(msgs, "think first"));
    free(msgs);
    json_decref(b);
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, "/reasoning off", &handled, &reply,
                                                  err, sizeof err),
               CM_OK);
    EXPECT_STR(reply, "\xe2\x9a\x99\xef\xb8\x8f Reasoning visibility disabled.");
    free(reply);
    world_stop(&w);
}

/* An assistant message's usage.cost is priced as pi-ai's calculateCost
 * prices it (rate per million tokens × tokens, each part and their total)
 * from the model's cost in models.providers; a model not listed costs 0,
 * written as integers as the reference writes them. */
TEST(agent_turn_prices_the_assistant_message_usage)
{
    world w;
    if (!world_start(&w, "[{\"id\":\"gpt-t\",\"cost\":{\"input\":3,\"output\":15,"
                         "\"cacheRead\":0.3,\"cacheWrite\":3.75}}]"))
        return;
    say(&w, "Hello.", 1000);
    llm_pin pin = {"", false};
    agent_tools tools = {.config = w.cfg};
    agent_turn_in in = {.runner = w.runner,
                        .turn = {NULL, false, &pin},
                        .user_text = "hi",
                        .now_ms = T0};
    agent_turn_out out;
    char err[512];
    EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_OK);
    json_t *am = json_array_get(out.messages, json_array_size(out.messages) - 1);
    json_t *cost = json_object_get(json_object_get(am, "usage"), "cost");
    EXPECT(json_real_value(json_object_get(cost, "input")) > 0.002999 &&
           json_real_value(json_object_get(cost, "input")) < 0.003001);
    EXPECT(json_real_value(json_object_get(cost, "output")) > 0.0001499 &&
           json_real_value(json_object_get(cost, "output")) < 0.0001501);
    EXPECT(json_is_integer(json_object_get(cost, "cacheRead")));
    EXPECT(json_real_value(json_object_get(cost, "total")) > 0.003149 &&
           json_real_value(json_object_get(cost, "total")) < 0.003151);
    cm_agent_turn_out_release(&out);

    /* the same model unpriced (no config): every part 0 */
    say(&w, "Hello.", 1000);
    tools.config = NULL;
    EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_OK);
    am = json_array_get(out.messages, json_array_size(out.messages) - 1);
    char *text = json_dumps(json_object_get(json_object_get(am, "usage"), "cost"), JSON_COMPACT);
    EXPECT_STR(text, "{\"input\":0,\"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\"total\":0}");
    free(text);
    cm_agent_turn_out_release(&out);
    world_stop(&w);
}

static const char *effort_low(void *ctx, const char *model)
{
    (void)ctx;
    (void)model;
    return "low";
}

static void push_sse(world *w, const char *const *events)
{
    buf b = BUF_INIT;
    cm_buf_adds(&b,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
    for (size_t i = 0; events[i]; i++)
        cm_buf_adds(&b, events[i]);
    fake_push_raw(w->fs, b.data, true);
    cm_buf_release(&b);
}

/* With a thinking level an Anthropic model gets a thinking budget; the
 * answer's thinking (signed) and redacted thinking are stored as pi-ai
 * stores them and go back to the model on the tool loop's next step. */
TEST(agent_anthropic_thinking_goes_back_in_the_tool_loop)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char prov[512];
    snprintf(prov, sizeof prov,
             "{\"api\":\"anthropic-messages\",\"baseUrl\":\"%s\",\"apiKey\":\"sk-ant-api-test-"
             "0006\",\"models\":[{\"id\":\"claude-sonnet-4-5\",\"reasoning\":true,"
             "\"maxTokens\":5000}]}",
             w.base);
    json_object_set_new(json_object_get(json_object_get(w.cfg, "models"), "providers"),
                        "anthropic", json_loads(prov, 0, NULL));
    const char *first[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Search memory.\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"SigX\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"RedY\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,"
        "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"memory_search\","
        "\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,"
        "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"query\\\":\\\"dog\\\"}\"}}"
        "\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"tool_use\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        NULL};
    const char *second[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m2\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"Biscuit.\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"end_turn\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        NULL};
    push_sse(&w, first);
    push_sse(&w, second);
    llm_pin pin = {"", false};
    agent_tools tools = {.engine = w.eng, .session_key = "agent:main:main"};
    agent_turn_in in = {.runner = w.runner,
                        .turn = {"anthropic/claude-sonnet-4-5", false, &pin},
                        .user_text = "What is the dog called?",
                        .now_ms = T0,
                        .effort = effort_low};
    agent_turn_out out;
    char err[512];
    EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_OK);
    EXPECT_STR(out.reply, "Biscuit.");
    /* stored: {type:thinking, thinking, thinkingSignature}, redacted with its data */
    json_t *c = json_object_get(json_array_get(out.messages, 1), "content");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(c, 0), "thinking")),
               "Search memory.");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(c, 0), "thinkingSignature")),
               "SigX");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(c, 1), "thinking")),
               "[Reasoning redacted]");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(c, 1), "thinkingSignature")),
               "RedY");
    EXPECT(json_is_true(json_object_get(json_array_get(c, 1), "redacted")));
    /* the first request: a budget on maxTokens 5000 */
    json_t *b = request_body(&w, 0);
    EXPECT_STR(json_string_value(json_object_get(json_object_get(b, "thinking"), "type")),
               "enabled");
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(b, "thinking"), "budget_tokens")),
               2048);
    EXPECT_INT(json_integer_value(json_object_get(b, "max_tokens")), 5000);
    json_decref(b);
    /* the second: the assistant turn carries its thinking back, first */
    b = request_body(&w, 1);
    json_t *a = json_object_get(json_array_get(json_object_get(b, "messages"), 1), "content");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(a, 0), "type")), "thinking");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(a, 0), "signature")), "SigX");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(a, 1), "type")),
               "redacted_thinking");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(a, 1), "data")), "RedY");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(a, 2), "type")), "tool_use");
    json_decref(b);
    cm_agent_turn_out_release(&out);
    world_stop(&w);
}

/* An Anthropic request's max_tokens with no thinking: pi-ai's default
 * min(maxTokens, 32000), the model's maxTokens as QuantumClaw's config
 * defaults make it (listed without one: min(8192, contextWindow)); 4096 for
 * a model the config does not list. */
TEST(agent_anthropic_max_tokens_from_the_model)
{
    world w;
    if (!world_start(&w, NULL)) return;
    char prov[512];
    snprintf(prov, sizeof prov,
             "{\"api\":\"anthropic-messages\",\"baseUrl\":\"%s\",\"apiKey\":\"sk-ant-api-test-"
             "0007\",\"models\":[{\"id\":\"claude-a\"},{\"id\":\"claude-b\",\"contextWindow\":"
             "4000},{\"id\":\"claude-c\",\"maxTokens\":64000},{\"id\":\"claude-d\",\"maxTokens\":"
             "20000}]}",
             w.base);
    json_object_set_new(json_object_get(json_object_get(w.cfg, "models"), "providers"),
                        "anthropic", json_loads(prov, 0, NULL));
    const char *answer[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"Hi.\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"end_turn\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        NULL};
    static const struct {
        const char *model;
        int max_tokens;
    } cases[] = {{"anthropic/claude-a", 8192},
                 {"anthropic/claude-b", 4000},
                 {"anthropic/claude-c", 32000},
                 {"anthropic/claude-d", 20000},
                 {"anthropic/claude-unlisted", 4096}};
    for (size_t k = 0; k < ARRAY_LEN(cases); k++) {
        push_sse(&w, answer);
        llm_pin pin = {"", false};
        agent_tools tools = {.engine = w.eng, .session_key = "agent:main:main"};
        agent_turn_in in = {.runner = w.runner,
                            .turn = {cases[k].model, false, &pin},
                            .user_text = "hello",
                            .now_ms = T0};
        agent_turn_out out;
        char err[512];
        EXPECT_INT(cm_agent_turn_run(&tools, &in, &out, err, sizeof err), CM_OK);
        cm_agent_turn_out_release(&out);
        json_t *b = request_body(&w, (int)k);
        if (json_integer_value(json_object_get(b, "max_tokens")) != cases[k].max_tokens)
            test_fail(__FILE__, __LINE__, "%s: max_tokens %lld, want %d", cases[k].model,
                      (long long)json_integer_value(json_object_get(b, "max_tokens")),
                      cases[k].max_tokens);
        json_decref(b);
    }
    world_stop(&w);
}
