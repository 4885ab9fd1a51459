/*
 * test_llm_thinking.c — reasoning on the wire (src/llm): Anthropic's thinking
 * requests (adaptive effort or a budget), the interleaved-thinking beta,
 * thinking blocks streamed with their signatures, and thinking sent back in
 * the history in both formats, as pi-ai does.
 */
#include <jansson.h>

#include "../src/llm/llm.h"
#include "fakeserver.h"
#include "llm_fixture.h"
#include "test.h"

static json_t *anthropic_body_for(const char *model, const char *level, int model_max)
{
    llm_request rq = fx_request(model, true);
    rq.reasoning_effort = level;
    rq.model_max_tokens = model_max;
    return cm_llm_anthropic_format.body(&rq);
}

static const char *jstr(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static json_int_t jint(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_integer_value(b ? json_object_get(v, b) : v);
}

/* Opus/Sonnet 4.6 think adaptively with an effort; older models get a
 * budget added to max_tokens (capped by the model's maxTokens, the budget
 * then leaving 1024 output tokens); off or no level sends no thinking. */
TEST(llm_anthropic_thinking_request)
{
    json_t *b = anthropic_body_for("claude-opus-4-6", "medium", 0);
    EXPECT_STR(jstr(b, "thinking", "type"), "adaptive");
    EXPECT_STR(jstr(b, "output_config", "effort"), "medium");
    EXPECT_INT(jint(b, "max_tokens", NULL), 4096);
    EXPECT(!json_object_get(json_object_get(b, "thinking"), "budget_tokens"));
    json_decref(b);
    b = anthropic_body_for("claude-sonnet-4.6-20260101", "minimal", 0);
    EXPECT_STR(jstr(b, "output_config", "effort"), "low");
    json_decref(b);
    b = anthropic_body_for("claude-opus-4-6", "xhigh", 0);
    EXPECT_STR(jstr(b, "output_config", "effort"), "max");
    json_decref(b);
    b = anthropic_body_for("claude-sonnet-4-6", "xhigh", 0);
    EXPECT_STR(jstr(b, "output_config", "effort"), "high");
    json_decref(b);
    /* budget: 4096 + 2048 */
    b = anthropic_body_for("claude-sonnet-4-5", "low", 0);
    EXPECT_STR(jstr(b, "thinking", "type"), "enabled");
    EXPECT_INT(jint(b, "thinking", "budget_tokens"), 2048);
    EXPECT_INT(jint(b, "max_tokens", NULL), 6144);
    EXPECT(!json_object_get(b, "output_config"));
    json_decref(b);
    /* high: 4096 + 16384 capped at 16000, the budget 16000 - 1024 */
    b = anthropic_body_for("claude-sonnet-4-5", "high", 16000);
    EXPECT_INT(jint(b, "max_tokens", NULL), 16000);
    EXPECT_INT(jint(b, "thinking", "budget_tokens"), 14976);
    json_decref(b);
    /* the base is min(the model's maxTokens, 32000) (pi-ai's streamSimple) */
    b = anthropic_body_for("claude-sonnet-4-5", "medium", 64000);
    EXPECT_INT(jint(b, "max_tokens", NULL), 32000 + 8192);
    EXPECT_INT(jint(b, "thinking", "budget_tokens"), 8192);
    json_decref(b);
    b = anthropic_body_for("claude-sonnet-4-5", NULL, 64000);
    EXPECT_INT(jint(b, "max_tokens", NULL), 32000);
    json_decref(b);
    b = anthropic_body_for("claude-opus-4-6", "high", 20000);
    EXPECT_INT(jint(b, "max_tokens", NULL), 20000); /* adaptive: no budget added */
    json_decref(b);
    b = anthropic_body_for("claude-sonnet-4-5", "off", 0);
    EXPECT(!json_object_get(b, "thinking") && !json_object_get(b, "output_config"));
    EXPECT_INT(jint(b, "max_tokens", NULL), 4096);
    json_decref(b);
    b = anthropic_body_for("claude-opus-4-6", NULL, 0);
    EXPECT(!json_object_get(b, "thinking") && !json_object_get(b, "output_config"));
    json_decref(b);
}

/* The interleaved-thinking beta goes to every model but the adaptive ones
 * (joined with the OAuth beta for a setup token). */
TEST(llm_anthropic_interleaved_thinking_beta)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    const char *ev[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", NULL};
    const char *model[] = {"claude-sonnet-4-5", "claude-opus-4-6", "claude-sonnet-4-5"};
    const char *key[] = {"sk-ant-api-test-0003", "sk-ant-api-test-0003", "sk-ant-oat-test-0004"};
    for (int i = 0; i < 3; i++) {
        char *raw = fx_sse_answer(ev);
        fake_push_raw(fs, raw, true);
        free(raw);
        llm_endpoint ep = {LLM_API_ANTHROPIC, base, key[i], false, NULL, 5000, 5000};
        llm_request rq = fx_request(model[i], true);
        rq.reasoning_effort = "low";
        llm_response out;
        llm_error e;
        char err[512];
        EXPECT_INT(cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err), CM_OK);
        cm_llm_response_release(&out);
    }
    EXPECT_CONTAINS(fake_get(fs, 0)->headers, "anthropic-beta: interleaved-thinking-2025-05-14");
    EXPECT(!strstr(fake_get(fs, 1)->headers, "interleaved-thinking"));
    EXPECT_CONTAINS(fake_get(fs, 2)->headers,
                    "anthropic-beta: oauth-2025-04-20,interleaved-thinking-2025-05-14");
    fake_stop(fs);
}

static void count_reasoning(void *ctx, const char *s, size_t n)
{
    cm_buf_add(ctx, s, n);
}

/* Thinking deltas are the reasoning and a block with its signature;
 * a redacted block keeps its data as the signature. */
TEST(llm_anthropic_stream_keeps_thinking_signatures)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    const char *events[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"think.\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqSig1\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque==\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        NULL};
    char *raw = fx_sse_answer(events);
    fake_push_raw(fs, raw, true);
    free(raw);
    llm_endpoint ep = {LLM_API_ANTHROPIC, base, "sk-ant-api-test-0005", false, NULL, 5000, 5000};
    llm_request rq = fx_request("claude-sonnet-4-5", true);
    buf shown = BUF_INIT;
    rq.on_reasoning = count_reasoning;
    rq.reasoning_ctx = &shown;
    llm_response out;
    llm_error e;
    char err[512];
    EXPECT_INT(cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err), CM_OK);
    EXPECT_STR(out.text.data, "Done.");
    EXPECT_STR(out.reasoning.data, "Let me think.");
    EXPECT_STR(shown.data, "Let me think.");
    EXPECT_INT(out.nthinking, 2);
    if (out.nthinking == 2) {
        EXPECT_STR(out.thinking[0].text, "Let me think.");
        EXPECT_STR(out.thinking[0].signature, "EqSig1");
        EXPECT(!out.thinking[0].redacted);
        EXPECT_STR(out.thinking[1].text, "[Reasoning redacted]");
        EXPECT_STR(out.thinking[1].signature, "opaque==");
        EXPECT(out.thinking[1].redacted);
    }
    cm_llm_response_release(&out);
    cm_buf_release(&shown);
    /* a whole answer likewise */
    const char *doc = "{\"id\":\"m2\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"Hm.\","
                      "\"signature\":\"S2\"},{\"type\":\"redacted_thinking\",\"data\":\"R2\"},"
                      "{\"type\":\"text\",\"text\":\"Ok\"}],\"stop_reason\":\"end_turn\"}";
    EXPECT_INT(cm_llm_parse(LLM_API_ANTHROPIC, false, doc, strlen(doc), &out, err, sizeof err),
               CM_OK);
    EXPECT_INT(out.nthinking, 2);
    if (out.nthinking == 2) {
        EXPECT_STR(out.thinking[0].signature, "S2");
        EXPECT(out.thinking[1].redacted);
        EXPECT_STR(out.thinking[1].signature, "R2");
    }
    cm_llm_response_release(&out);
    fake_stop(fs);
}

/* Thinking deltas go to their own block, the blocks' texts kept apart when
 * the deltas alternate between them; a long thinking of many pieces comes
 * out whole; the blocks are listed in the order they came. */
TEST(llm_anthropic_thinking_deltas_follow_their_block)
{
    buf sse = BUF_INIT;
#define START                                                                                      \
    "event: content_block_start\ndata: {\"type\":\"content_block_start\","                         \
    "\"index\":%d,\"content_block\":{\"type\":\"%s\",\"%s\":\"%s\"}}\n\n"
#define DELTA                                                                                      \
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","                         \
    "\"index\":%d,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"%s\"}}\n\n"
    cm_buf_printf(&sse, START, 0, "text", "text", "Hi. ");
    cm_buf_printf(&sse, START, 1, "thinking", "thinking", "a");
    cm_buf_printf(&sse, START, 2, "thinking", "thinking", "b");
    cm_buf_printf(&sse, DELTA, 1, "c");
    cm_buf_printf(&sse, DELTA, 2, "d");
    cm_buf_printf(&sse, DELTA, 1, "e");
    for (int i = 0; i < 5000; i++)
        cm_buf_printf(&sse, DELTA, 2, "0123456789");
    cm_buf_adds(&sse, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    llm_response out;
    char err[256];
    EXPECT_INT(cm_llm_parse(LLM_API_ANTHROPIC, true, sse.data, sse.len, &out, err, sizeof err),
               CM_OK);
    EXPECT_INT(out.nthinking, 2);
    if (out.nthinking == 2) {
        EXPECT_STR(out.thinking[0].text, "ace");
        EXPECT_INT(strlen(out.thinking[1].text), 2 + 50000);
        EXPECT(!strncmp(out.thinking[1].text, "bd0123456789", 12));
    }
    EXPECT_INT(out.norder, 3);
    if (out.norder == 3) {
        EXPECT_INT(out.order[0].kind, LLM_BLOCK_TEXT);
        EXPECT_INT(out.order[1].kind, LLM_BLOCK_THINKING);
        EXPECT_INT(out.order[1].index, 0);
        EXPECT_INT(out.order[2].kind, LLM_BLOCK_THINKING);
        EXPECT_INT(out.order[2].index, 1);
    }
    cm_llm_response_release(&out);
    cm_buf_release(&sse);
}
#undef START
#undef DELTA

/* History: this model's signed thinking goes back as thinking and its
 * redacted thinking as redacted_thinking, before the text and tool calls;
 * unsigned thinking as text; blank thinking not at all; another model's
 * thinking as text and its redacted thinking not at all. OpenAI never
 * gets thinking back. */
TEST(llm_anthropic_history_sends_thinking_back)
{
    /* llm_thinking's strings are not const (a response owns them) */
    static char t1[] = "Plan: search.", s1[] = "SigA", red[] = "[Reasoning redacted]",
                d1[] = "DataB", t2[] = "unsigned idea", t3[] = "  \n", s3[] = "SigC",
                t4[] = "their idea", s4[] = "SigD", d2[] = "DataE";
    const llm_thinking mine[] = {
        {t1, s1, false}, {red, d1, true}, {t2, NULL, false}, {t3, s3, false}};
    const llm_thinking theirs[] = {{t4, s4, false}, {red, d2, true}};
    llm_message msgs[] = {
        {LLM_USER, "q1", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
        {LLM_ASSISTANT, NULL, &fx_earlier_call, 1, NULL, NULL, false, mine, 4, "claude-sonnet-4-5",
         "anthropic", "anthropic-messages"},
        {LLM_TOOL, "Biscuit", NULL, 0, "call_1", "memory_search", false, NULL, 0, NULL, NULL, NULL},
        {LLM_ASSISTANT, "ok", NULL, 0, NULL, NULL, false, theirs, 2, "claude-opus-4-1", "anthropic",
         "anthropic-messages"},
        {LLM_USER, "q2", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
    };
    llm_request rq = fx_request("claude-sonnet-4-5", true);
    rq.messages = msgs;
    rq.n = ARRAY_LEN(msgs);
    rq.provider = "anthropic";
    json_t *b = cm_llm_anthropic_format.body(&rq);
    json_t *a1 = json_object_get(json_array_get(json_object_get(b, "messages"), 1), "content");
    EXPECT_INT(json_array_size(a1), 4);
    EXPECT_STR(jstr(json_array_get(a1, 0), "type", NULL), "thinking");
    EXPECT_STR(jstr(json_array_get(a1, 0), "thinking", NULL), "Plan: search.");
    EXPECT_STR(jstr(json_array_get(a1, 0), "signature", NULL), "SigA");
    EXPECT_STR(jstr(json_array_get(a1, 1), "type", NULL), "redacted_thinking");
    EXPECT_STR(jstr(json_array_get(a1, 1), "data", NULL), "DataB");
    EXPECT_STR(jstr(json_array_get(a1, 2), "type", NULL), "text");
    EXPECT_STR(jstr(json_array_get(a1, 2), "text", NULL), "unsigned idea");
    EXPECT_STR(jstr(json_array_get(a1, 3), "type", NULL), "tool_use");
    json_t *a2 = json_object_get(json_array_get(json_object_get(b, "messages"), 3), "content");
    EXPECT_INT(json_array_size(a2), 2);
    EXPECT_STR(jstr(json_array_get(a2, 0), "type", NULL), "text");
    EXPECT_STR(jstr(json_array_get(a2, 0), "text", NULL), "their idea");
    EXPECT_STR(jstr(json_array_get(a2, 1), "text", NULL), "ok");
    json_decref(b);
    /* the same model id through another provider is another model */
    rq.provider = "my-proxy";
    b = cm_llm_anthropic_format.body(&rq);
    a1 = json_object_get(json_array_get(json_object_get(b, "messages"), 1), "content");
    EXPECT_INT(json_array_size(a1), 3); /* the two texts, the call: no signed or redacted block */
    EXPECT_STR(jstr(json_array_get(a1, 0), "text", NULL), "Plan: search.");
    EXPECT_STR(jstr(json_array_get(a1, 1), "text", NULL), "unsigned idea");
    json_decref(b);
    /* through the OpenAI format every one of them is another model's: text */
    rq.provider = "anthropic";
    b = cm_llm_openai_format.body(&rq);
    json_t *m = json_object_get(b, "messages");
    EXPECT_STR(jstr(json_array_get(m, 2), "content", NULL), "Plan: search.unsigned idea");
    EXPECT_STR(jstr(json_array_get(m, 4), "content", NULL), "their ideaok");
    char *s = json_dumps(b, JSON_COMPACT);
    EXPECT(s && !strstr(s, "SigA") && !strstr(s, "DataB") && !strstr(s, "Reasoning redacted"));
    free(s);
    json_decref(b);
}

/* The openai-completions body sends earlier assistant messages back as
 * pi-ai's transformMessages and convertMessages do: this model's (same
 * provider, api and id) thinking under the reasoning field its signature
 * names, joined with "\n"; another model's thinking as text before the
 * answer (the blocks joined with nothing between), its redacted or blank
 * thinking not at all; an assistant message left with no content and no
 * tool call not at all; the text path byte for byte as the tree's. */
TEST(llm_openai_history_sends_thinking_as_pi_ai)
{
    static char r1[] = "first thought", r2[] = "second thought", rc[] = "reasoning_content",
                blank_t[] = " \n ", o1[] = "their plan", os[] = "SigX",
                red[] = "[Reasoning redacted]", rd[] = "DataR", bad[] = "content";
    const llm_thinking mine[] = {{blank_t, NULL, false}, {r1, rc, false}, {r2, NULL, false}};
    const llm_thinking theirs[] = {{o1, os, false}, {red, rd, true}, {blank_t, os, false}};
    const llm_thinking only_redacted[] = {{red, rd, true}};
    const llm_thinking hostile[] = {{r1, bad, false}};
    llm_message msgs[] = {
        {LLM_USER, "q1", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
        {LLM_ASSISTANT, "A1", NULL, 0, NULL, NULL, false, mine, 3, "gpt-x", "openai",
         "openai-completions"},
        {LLM_ASSISTANT, "ok", NULL, 0, NULL, NULL, false, theirs, 3, "claude-opus-4-1", "anthropic",
         "anthropic-messages"},
        {LLM_ASSISTANT, NULL, NULL, 0, NULL, NULL, false, only_redacted, 1, "claude-opus-4-1",
         "anthropic", "anthropic-messages"},
        {LLM_ASSISTANT, " ", &fx_earlier_call, 1, NULL, NULL, false, mine, 3, "gpt-x", "other",
         "openai-completions"},
        {LLM_TOOL, "Biscuit", NULL, 0, "call_1", "memory_search", false, NULL, 0, NULL, NULL, NULL},
        {LLM_ASSISTANT, "A3", NULL, 0, NULL, NULL, false, hostile, 1, "gpt-x", "openai",
         "openai-completions"},
        {LLM_USER, "q2", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
    };
    llm_request rq = fx_request("gpt-x", true);
    rq.messages = msgs;
    rq.n = ARRAY_LEN(msgs);
    rq.provider = "openai";
    json_t *b = cm_llm_openai_format.body(&rq);
    json_t *m = json_object_get(b, "messages");
    EXPECT_INT(json_array_size(m), 1 + 7); /* the system prompt; the redacted-only answer skipped */
    json_t *a1 = json_array_get(m, 2);
    EXPECT_STR(jstr(a1, "content", NULL), "A1");
    EXPECT_STR(jstr(a1, "reasoning_content", NULL), "first thought\nsecond thought");
    EXPECT_STR(jstr(json_array_get(m, 3), "content", NULL), "their planok");
    json_t *a3 = json_array_get(m, 4); /* another provider: its thinking as text, with the call */
    EXPECT_STR(jstr(a3, "content", NULL), "first thoughtsecond thought");
    EXPECT(json_object_get(a3, "reasoning_content") == NULL);
    EXPECT_INT(json_array_size(json_object_get(a3, "tool_calls")), 1);
    EXPECT_STR(jstr(json_array_get(m, 5), "role", NULL), "tool");
    json_t *a4 = json_array_get(m, 6); /* a signature naming a member of the message: not sent */
    EXPECT_STR(jstr(a4, "content", NULL), "A3");
    EXPECT_INT(json_object_size(a4), 2);
    char *s = json_dumps(b, JSON_COMPACT);
    EXPECT(s && !strstr(s, "SigX") && !strstr(s, "DataR") && !strstr(s, "Reasoning redacted"));
    free(s);
    json_decref(b);
    EXPECT(fx_same_body(&rq));
    /* the blank answer with a call and no thinking: content null */
    msgs[4].thinking = NULL;
    msgs[4].nthinking = 0;
    b = cm_llm_openai_format.body(&rq);
    EXPECT(json_is_null(
        json_object_get(json_array_get(json_object_get(b, "messages"), 4), "content")));
    json_decref(b);
    EXPECT(fx_same_body(&rq));
}
