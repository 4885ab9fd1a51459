/*
 * test_agent.c — agent turns (src/agent) against the loopback server
 * playing the model (the world in agent_world.c): the tool loop over the
 * memory tools, a turn inside a session (transcript and sessions.json), the
 * memory flush before a turn (a note written only to today's file, NO_REPLY
 * not delivered, the bookkeeping), compaction (summary record, count, the
 * cut before a user message), and the command.
 */
#include "../src/base/fs.h"
#include "agent_world.h"
#include "test.h"

static void call(world *w, const char *id, const char *name, const char *args_json)
{
    fake_push_chat_call(w->fs, id, name, args_json);
}

TEST(agent_turn_runs_the_memory_tools)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}

TEST(agent_session_turn_records_the_turn)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}

TEST(agent_memory_flush_before_the_turn)
{
    /* A 30,000-token model: the flush threshold is 30000 − 20000 − 4000. */
    world w;
    if (!agent_world_start(&w, "[{\"id\":\"gpt-t\",\"contextWindow\":30000}]")) return;
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
    agent_world_stop(&w);
}

TEST(agent_compaction_summarises_before_a_user_message)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}

/* compaction.keepRecentTokens sets how much of the recent conversation a
 * compaction keeps (QuantumClaw hands it to pi-coding-agent's findCutPoint):
 * 7,000 tokens keep the last two 6,000-token turns, not the default 20,000's four. */
TEST(agent_compaction_keeps_keep_recent_tokens)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}

/* Compaction after a turn when its context passed contextWindow −
 * max(reserveTokens (16384), reserveTokensFloor (20000)), as QuantumClaw
 * sets pi-coding-agent's reserveTokens: a reserveTokens under the floor
 * changes nothing, one above it compacts earlier. */
TEST(agent_compaction_threshold_honours_reserve_tokens)
{
    world w;
    if (!agent_world_start(&w, "[{\"id\":\"gpt-t\",\"contextWindow\":30000}]")) return;
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
    agent_world_stop(&w);
}

/* ---- through the command ---- */

TEST(agent_cli_models_and_flush)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}

/* A memory_get result cut at the tool-text cap never splits a character
 * (the model's request must stay valid UTF-8 JSON): a large non-ASCII note
 * read whole is a normal turn. */
TEST(agent_tool_result_cut_keeps_characters_whole)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}
