/*
 * test_agent_prompt.c — what an agent turn (src/agent) sends the model and
 * keeps of its answers (the world in agent_world.c): the system prompt
 * (MEMORY.md, daily logs, bootstrap caps), reasoning (to another model as
 * text, off or on the stream), the assistant message's usage priced, and
 * Anthropic thinking in the tool loop and max_tokens from the model.
 */
#include "../src/agent/session_cmds.h"
#include "agent_world.h"
#include "test.h"

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
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
}

TEST(agent_prompt_daily_logs_of_the_session_start)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_world_stop(&w);
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
 * to the model that wrote them, the reasoning under the member it came in
 * (reasoning_content), the answer as content; to another model (here the
 * next in the config), the reasoning as text before the answer. */
TEST(agent_history_reasoning_to_another_model_as_text)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    EXPECT_STR(json_string_value(json_object_get(a1, "reasoning_content")), "my plan\nthen answer");
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
    agent_world_stop(&w);
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
    if (!agent_world_start(&w, NULL)) return;
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
    /* the transcript keeps it as a thinking block signed with the member it
     * came in, which is where it goes back to this model (below) */
    char *t = transcript_of(&w, key);
    EXPECT_CONTAINS(t, "\"type\":\"thinking\"");
    EXPECT_CONTAINS(t, "\"thinkingSignature\":\"reasoning_content\"");
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
    json_t *b = request_body(&w, 2); /* the reasoning never as text, only as itself */
    json_t *msgs = json_object_get(b, "messages");
    for (size_t i = 2; i < 6; i += 2) {
        json_t *a = json_array_get(msgs, i);
        EXPECT_STR(json_string_value(json_object_get(a, "content")), "Because.");
        EXPECT_STR(json_string_value(json_object_get(a, "reasoning_content")),
                   "think first\nthen answer");
    }
    json_decref(b);
    EXPECT_INT(cm_agent_session_reasoning_command(&w.a, key, "/reasoning off", &handled, &reply,
                                                  err, sizeof err),
               CM_OK);
    EXPECT_STR(reply, "\xe2\x9a\x99\xef\xb8\x8f Reasoning visibility disabled.");
    free(reply);
    agent_world_stop(&w);
}

/* An assistant message's usage.cost is priced as pi-ai's calculateCost
 * prices it (rate per million tokens × tokens, each part and their total)
 * from the model's cost in models.providers; a model not listed costs 0,
 * written as integers as the reference writes them. */
TEST(agent_turn_prices_the_assistant_message_usage)
{
    world w;
    if (!agent_world_start(&w, "[{\"id\":\"gpt-t\",\"cost\":{\"input\":3,\"output\":15,"
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
    agent_world_stop(&w);
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

/* One agent turn of text to model (session agent:main:main) with effort as
 * its thinking level (NULL: none); a failure fails the running test. */
static cm_rc run_turn(world *w, const char *model, const char *text,
                      const char *(*effort)(void *, const char *), agent_turn_out *out)
{
    llm_pin pin = {"", false};
    agent_tools tools = {.engine = w->eng, .session_key = "agent:main:main"};
    agent_turn_in in = {.runner = w->runner,
                        .turn = {model, false, &pin},
                        .user_text = text,
                        .now_ms = T0,
                        .effort = effort};
    char err[512];
    cm_rc rc = cm_agent_turn_run(&tools, &in, out, err, sizeof err);
    if (rc) test_fail(__FILE__, __LINE__, "%s: %s", model, err);
    return rc;
}

/* Whether block i of content (an assistant message's) is thinking text
 * signed sig. */
static bool thinking_is(const json_t *content, size_t i, const char *text, const char *sig)
{
    const json_t *b = json_array_get(content, i);
    const char *t = json_string_value(json_object_get(b, "thinking"));
    const char *g = json_string_value(json_object_get(b, "thinkingSignature"));
    bool ok = t && g && !strcmp(t, text) && !strcmp(g, sig);
    if (!ok) fprintf(stderr, "  block %zu: %s / %s\n", i, t ? t : "(none)", g ? g : "(none)");
    return ok;
}

/* With a thinking level an Anthropic model gets a thinking budget; the
 * answer's thinking (signed) and redacted thinking are stored as pi-ai
 * stores them and go back to the model on the tool loop's next step. */
TEST(agent_anthropic_thinking_goes_back_in_the_tool_loop)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
    agent_turn_out out;
    if (run_turn(&w, "anthropic/claude-sonnet-4-5", "What is the dog called?", effort_low, &out))
        return;
    EXPECT_STR(out.reply, "Biscuit.");
    /* stored: {type:thinking, thinking, thinkingSignature}, redacted with its data */
    json_t *c = json_object_get(json_array_get(out.messages, 1), "content");
    EXPECT(thinking_is(c, 0, "Search memory.", "SigX"));
    EXPECT(thinking_is(c, 1, "[Reasoning redacted]", "RedY"));
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
    agent_world_stop(&w);
}

/* Whether content's blocks have the types listed (NULL-terminated). */
static bool block_types_are(const json_t *content, const char *const *want)
{
    size_t n = 0;
    bool ok = true;
    for (; want[n]; n++) {
        const char *t =
            json_string_value(json_object_get(json_array_get(content, n), "type"));
        if (!t || strcmp(t, want[n])) ok = false;
        if (!ok) fprintf(stderr, "  block %zu: %s, want %s\n", n, t ? t : "(none)", want[n]);
    }
    return ok && json_array_size(content) == n;
}

/* The transcript keeps an answer's blocks in the order the stream brought
 * them, as pi-ai's content array does: text, then thinking, then the tool
 * call (not the thinking first), for both wire formats. */
TEST(agent_transcript_keeps_the_blocks_in_arrival_order)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
    char prov[512];
    snprintf(prov, sizeof prov,
             "{\"api\":\"anthropic-messages\",\"baseUrl\":\"%s\",\"apiKey\":\"sk-ant-api-test-"
             "0008\",\"models\":[{\"id\":\"claude-sonnet-4-5\",\"reasoning\":true}]}",
             w.base);
    json_object_set_new(json_object_get(json_object_get(w.cfg, "models"), "providers"),
                        "anthropic", json_loads(prov, 0, NULL));
    const char *oa[] = {
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me look.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Memory \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"first.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":"
        "\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"memory_search\","
        "\"arguments\":\"{\\\"query\\\":\\\"dog\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
        NULL};
    const char *an[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me look.\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Memory \"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"first.\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"SigZ\"}}\n\n",
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
    const char *an_done[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m2\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"Biscuit.\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        NULL};
    static const char *const want[] = {"text", "thinking", "toolCall", NULL};
    for (int k = 0; k < 2; k++) {
        push_sse(&w, k ? an : oa);
        if (k)
            push_sse(&w, an_done);
        else
            say(&w, "Biscuit.", 50);
        agent_turn_out out;
        if (run_turn(&w, k ? "anthropic/claude-sonnet-4-5" : "openai/gpt-t", "The dog?",
                     effort_low, &out))
            return;
        EXPECT_STR(out.reply, "Biscuit.");
        json_t *c = json_object_get(json_array_get(out.messages, 1), "content");
        EXPECT(block_types_are(c, want));
        EXPECT_STR(json_string_value(json_object_get(json_array_get(c, 0), "text")),
                   "Let me look.");
        EXPECT(thinking_is(c, 1, "Memory first.", k ? "SigZ" : "reasoning_content"));
        cm_agent_turn_out_release(&out);
    }
    agent_world_stop(&w);
}

/* An Anthropic request's max_tokens with no thinking: pi-ai's default
 * min(maxTokens, 32000), the model's maxTokens as QuantumClaw's config
 * defaults make it (listed without one: min(8192, contextWindow)); 4096 for
 * a model the config does not list. */
TEST(agent_anthropic_max_tokens_from_the_model)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
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
        agent_turn_out out;
        if (run_turn(&w, cases[k].model, "hello", NULL, &out)) return;
        cm_agent_turn_out_release(&out);
        json_t *b = request_body(&w, (int)k);
        if (json_integer_value(json_object_get(b, "max_tokens")) != cases[k].max_tokens)
            test_fail(__FILE__, __LINE__, "%s: max_tokens %lld, want %d", cases[k].model,
                      (long long)json_integer_value(json_object_get(b, "max_tokens")),
                      cases[k].max_tokens);
        json_decref(b);
    }
    agent_world_stop(&w);
}

/* An OpenAI-compatible answer's reasoning is stored as pi-ai stores it (a
 * thinking block signed with the member it came in, a run of it per block)
 * and goes back under that member to the same model on the tool loop's next
 * step, with the call; the tool result follows. */
TEST(agent_openai_reasoning_goes_back_in_the_tool_loop)
{
    world w;
    if (!agent_world_start(&w, NULL)) return;
    const char *first[] = {
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Search \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"memory.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Looking.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"Then answer.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":"
        "\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"memory_search\","
        "\"arguments\":\"{\\\"query\\\":\\\"dog\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
        NULL};
    push_sse(&w, first);
    say(&w, "Biscuit.", 50);
    agent_turn_out out;
    if (run_turn(&w, "openai/gpt-t", "What is the dog called?", NULL, &out)) return;
    EXPECT_STR(out.reply, "Biscuit.");
    /* stored: two runs of reasoning, each signed with its member */
    json_t *c = json_object_get(json_array_get(out.messages, 1), "content");
    EXPECT(thinking_is(c, 0, "Search memory.", "reasoning_content"));
    EXPECT(thinking_is(c, 2, "Then answer.", "reasoning")); /* after the text, as it came */
    /* the second request: the assistant turn with its reasoning under the
     * first block's member, the runs joined with "\n", and its call */
    json_t *b = request_body(&w, 1);
    json_t *a = json_array_get(json_object_get(b, "messages"), 1);
    EXPECT_STR(json_string_value(json_object_get(a, "role")), "assistant");
    EXPECT_STR(json_string_value(json_object_get(a, "content")), "Looking.");
    EXPECT_STR(json_string_value(json_object_get(a, "reasoning_content")),
               "Search memory.\nThen answer.");
    EXPECT(json_object_get(a, "reasoning") == NULL);
    EXPECT_STR(json_string_value(
                   json_object_get(json_array_get(json_object_get(a, "tool_calls"), 0), "id")),
               "call_1");
    EXPECT_STR(json_string_value(
                   json_object_get(json_array_get(json_object_get(b, "messages"), 2), "role")),
               "tool");
    json_decref(b);
    cm_agent_turn_out_release(&out);
    agent_world_stop(&w);
}

/* An OpenAI-compatible request's token limit as pi-ai's openai-completions
 * sends it: max_completion_tokens of min(maxTokens, 32000), the model's
 * maxTokens as QuantumClaw's config defaults make it (listed without one:
 * min(8192, contextWindow)); max_tokens where the model's
 * compat.maxTokensField says so; none for a model the config does not list. */
TEST(agent_openai_max_completion_tokens_from_the_model)
{
    world w;
    if (!agent_world_start(&w, "[{\"id\":\"gpt-a\"},{\"id\":\"gpt-b\",\"contextWindow\":4000},"
                               "{\"id\":\"gpt-c\",\"maxTokens\":64000},{\"id\":\"gpt-d\","
                               "\"maxTokens\":1000,\"compat\":{\"maxTokensField\":"
                               "\"max_tokens\"}}]"))
        return;
    static const struct {
        const char *model, *field;
        int max_tokens;
    } cases[] = {{"openai/gpt-a", "max_completion_tokens", 8192},
                 {"openai/gpt-b", "max_completion_tokens", 4000},
                 {"openai/gpt-c", "max_completion_tokens", 32000},
                 {"openai/gpt-d", "max_tokens", 1000},
                 {"openai/gpt-unlisted", NULL, 0}};
    for (size_t k = 0; k < ARRAY_LEN(cases); k++) {
        say(&w, "Hi.", 10);
        agent_turn_out out;
        if (run_turn(&w, cases[k].model, "hello", NULL, &out)) return;
        cm_agent_turn_out_release(&out);
        json_t *b = request_body(&w, (int)k);
        json_t *mct = json_object_get(b, "max_completion_tokens"),
               *mt = json_object_get(b, "max_tokens");
        json_t *got = cases[k].field && !strcmp(cases[k].field, "max_tokens") ? mt : mct;
        bool ok = cases[k].field
                      ? json_integer_value(got) == cases[k].max_tokens && (got == mt ? !mct : !mt)
                      : !mct && !mt;
        if (!ok)
            test_fail(__FILE__, __LINE__, "%s: max_completion_tokens %lld, max_tokens %lld",
                      cases[k].model, (long long)json_integer_value(mct),
                      (long long)json_integer_value(mt));
        json_decref(b);
    }
    agent_world_stop(&w);
}

/* stream_options and store as the reference sends them to an
 * OpenAI-compatible server: QuantumClaw leaves stream_options out on any
 * host but api.openai.com unless the model's compat.supportsUsageInStreaming
 * says true; pi-ai says "store": false unless compat.supportsStore is false
 * or the provider is non-standard (cerebras, xai, zai, opencode, or a
 * cerebras.ai / api.x.ai / deepseek.com / chutes.ai baseUrl). All on the
 * loopback server, under provider names. */
TEST(agent_openai_stream_usage_and_store_as_the_reference)
{
    world w;
    if (!agent_world_start(&w, "[{\"id\":\"gpt-a\"},{\"id\":\"gpt-off\",\"compat\":"
                               "{\"supportsStore\":false}}]"))
        return;
    json_t *providers = json_object_get(json_object_get(w.cfg, "models"), "providers");
    json_t *openai = json_object_get(providers, "openai");
    json_t *cb = json_deep_copy(openai), *xai = json_deep_copy(openai);
    json_object_set_new(cb, "models",
                        json_loads("[{\"id\":\"llama\"},{\"id\":\"llama-on\",\"compat\":"
                                   "{\"supportsStore\":true,\"supportsUsageInStreaming\":true}}]",
                                   0, NULL));
    json_object_set_new(providers, "cerebras", cb);
    json_object_set_new(providers, "XAI", xai); /* provider names compared normalised */
    static const struct {
        const char *model;
        int usage, store; /* 1: stream_options / "store": false sent */
    } cases[] = {{"openai/gpt-a", 0, 1},       {"openai/gpt-off", 0, 0},
                 {"cerebras/llama", 0, 0},     {"cerebras/llama-on", 1, 1},
                 {"XAI/grok", 0, 0}};
    for (size_t k = 0; k < ARRAY_LEN(cases); k++) {
        say(&w, "Hi.", 10);
        agent_turn_out out;
        if (run_turn(&w, cases[k].model, "hello", NULL, &out)) return;
        cm_agent_turn_out_release(&out);
        json_t *b = request_body(&w, (int)k);
        json_t *so = json_object_get(b, "stream_options"), *st = json_object_get(b, "store");
        bool usage = json_is_true(json_object_get(so, "include_usage"));
        bool ok = usage == (cases[k].usage == 1) && (cases[k].usage || !so) &&
                  (cases[k].store ? json_is_false(st) : !st);
        if (!ok)
            test_fail(__FILE__, __LINE__, "%s: stream_options %s, store %s", cases[k].model,
                      so ? "sent" : "absent", st ? (json_is_false(st) ? "false" : "other") : "absent");
        json_decref(b);
    }
    agent_world_stop(&w);
}
