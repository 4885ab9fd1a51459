/*
 * test_llm.c — the chat clients (src/llm): the SSE parser on streams cut
 * into pieces of every size, both wire formats against the loopback server's
 * scripted answers (the exact request sent, streamed text and tool-call
 * deltas assembled, usage, stop reasons), and failures: cut streams, error
 * events, 429 with Retry-After, billing, garbage, a server echoing the key,
 * reasoning fields and the body written directly. Anthropic's thinking and
 * thinking sent back in history: test_llm_thinking.c.
 */
#include <jansson.h>

#include "../src/llm/llm.h"
#include "../src/net/sse.h"
#include "fakeserver.h"
#include "llm_fixture.h"
#include "test.h"

typedef struct seen {
    buf log; /* "name=data|" per event */
    int n;
} seen;

static bool record(void *ctx, const char *event, const char *data, size_t len)
{
    seen *s = ctx;
    cm_buf_printf(&s->log, "%s=%.*s|", event, (int)len, data);
    s->n++;
    return true;
}

static const char sse_text[] = "\xEF\xBB\xBF: keep-alive comment\r\n"
                               "event: first\r\n"
                               "data: one\r\n"
                               "data:two\r\n"
                               "\r\n"
                               "id: 7\n"
                               "retry: 100\n"
                               "data: {\"a\": 1}\n"
                               "\n"
                               "event: nodata\n"
                               "\n"
                               "data\r"
                               "\r"
                               "data: a: b\n"
                               "unknown: x\n"
                               "\n"
                               "data: never finished\n";

TEST(sse_events_in_pieces_of_any_size)
{
    const char *want = "first=one\ntwo|message={\"a\": 1}|message=|message=a: b|";
    size_t n = sizeof sse_text - 1;
    for (size_t piece = 1; piece <= n; piece++) {
        seen s = {BUF_INIT, 0};
        sse_parser p;
        cm_sse_init(&p, 1024, record, &s);
        for (size_t i = 0; i < n; i += piece)
            EXPECT_INT(cm_sse_feed(&p, sse_text + i, CM_MIN(piece, n - i)), CM_OK);
        EXPECT(!cm_sse_finish(&p)); /* the last event had no blank line */
        if (strcmp(s.log.data, want) != 0)
            test_fail(__FILE__, __LINE__, "pieces of %zu: got %s", piece, s.log.data);
        EXPECT_INT(s.n, 4);
        cm_sse_release(&p);
        cm_buf_release(&s.log);
    }
}

static bool stop_at_first(void *ctx, const char *event, const char *data, size_t len)
{
    (void)event, (void)data, (void)len;
    ++*(int *)ctx;
    return false;
}

TEST(sse_caps_and_stops)
{
    int calls = 0;
    sse_parser p;
    cm_sse_init(&p, 64, stop_at_first, &calls);
    char big[200];
    memset(big, 'x', sizeof big);
    EXPECT_INT(cm_sse_feed(&p, "data: ", 6), CM_OK);
    EXPECT_INT(cm_sse_feed(&p, big, sizeof big), CM_ETOOBIG); /* a line over the cap */
    cm_sse_release(&p);
    cm_sse_init(&p, 64, stop_at_first, &calls);
    EXPECT_INT(cm_sse_feed(&p, "data: a\n\ndata: b\n\n", 18), CM_ECANCELED);
    EXPECT_INT(calls, 1);
    cm_sse_release(&p);
}

/* ---- the wire formats against the loopback server (llm_fixture.c) ---- */

TEST(llm_openai_stream_assembles_text_and_tool_calls)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    const char *events[] = {
        "data: "
        "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
        "\"content\":\"Let me \"}}]}\n\n",
        ": keep-alive\n\n",
        "data: "
        "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"check.\"}}]}"
        "\n\n",
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_9\","
        "\"type\":\"function\",\"function\":{\"name\":\"memory_search\",\"arguments\":\"\"}}]}}]}"
        "\n\n",
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
        "\"arguments\":\"{\\\"que\"}}]}}]}\n\n",
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_10\","
        "\"function\":{\"name\":\"memory_get\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
        "\"arguments\":\"ry\\\":\\\"cat\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: "
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"total_"
        "tokens\":150,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n",
        "data: [DONE]\n\n",
        NULL};
    char *raw = fx_sse_answer(events);
    fake_push_raw(fs, raw, true);
    free(raw);
    cm_strlist extra = {0};
    cm_config_header_set(&extra, "X-Team: memory");
    llm_endpoint ep = {LLM_API_OPENAI, base, "sk-test-key-0001", false, &extra, 5000, 5000};
    llm_request rq = fx_request("gpt-test", true);
    llm_response out;
    llm_error e;
    char err[512];
    fx_deltas d = {BUF_INIT, 0};
    EXPECT_INT(cm_llm_chat(&ep, &rq, fx_on_delta, &d, &out, &e, err, sizeof err), CM_OK);
    EXPECT_STR(out.text.data, "Let me check.");
    EXPECT_STR(d.text.data, "Let me check.");
    EXPECT_INT(d.n, 2);
    EXPECT_INT(out.ncalls, 2);
    EXPECT_STR(out.calls[0].id, "call_9");
    EXPECT_STR(out.calls[0].name, "memory_search");
    EXPECT_STR(out.calls[0].arguments, "{\"query\":\"cat\"}");
    EXPECT_STR(out.calls[1].name, "memory_get");
    EXPECT_STR(out.calls[1].arguments, "{}");
    EXPECT_STR(out.stop_reason, "toolUse");
    EXPECT_STR(out.response_id, "chatcmpl-1");
    EXPECT_INT(out.usage.input, 20);
    EXPECT_INT(out.usage.cache_read, 100);
    EXPECT_INT(out.usage.output, 30);
    EXPECT_INT(out.usage.total, 150);
    /* The request as sent. */
    const fake_request *q = fake_get(fs, 0);
    EXPECT_STR(q->method, "POST");
    EXPECT_STR(q->path, "/chat/completions");
    EXPECT_CONTAINS(q->headers, "Authorization: Bearer sk-test-key-0001");
    EXPECT_CONTAINS(q->headers, "X-Team: memory");
    json_t *b = json_loads(q->body, 0, NULL);
    EXPECT(b != NULL);
    EXPECT_STR(json_string_value(json_object_get(b, "model")), "gpt-test");
    EXPECT(json_is_true(json_object_get(b, "stream")));
    EXPECT(json_is_true(json_object_get(json_object_get(b, "stream_options"), "include_usage")));
    json_t *msgs = json_object_get(b, "messages");
    EXPECT_INT(json_array_size(msgs), 5);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(msgs, 0), "role")), "system");
    json_t *asst = json_array_get(msgs, 2);
    EXPECT(json_is_null(json_object_get(asst, "content")));
    json_t *call = json_array_get(json_object_get(asst, "tool_calls"), 0);
    EXPECT_STR(json_string_value(json_object_get(json_object_get(call, "function"), "arguments")),
               "{\"query\":\"dog\"}");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(msgs, 3), "tool_call_id")),
               "call_1");
    json_t *fn = json_object_get(json_array_get(json_object_get(b, "tools"), 0), "function");
    EXPECT_STR(json_string_value(json_object_get(fn, "name")), "memory_search");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(fn, "parameters"), "type")),
               "object");
    json_decref(b);
    cm_llm_response_release(&out);
    cm_buf_release(&d.text);
    for (size_t i = 0; i < extra.n; i++)
        free(extra.v[i]);
    free(extra.v);
    fake_stop(fs);
}

TEST(llm_anthropic_stream_assembles_text_and_tool_calls)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    const char *events[] = {
        "event: message_start\ndata: "
        "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":50,"
        "\"cache_read_input_tokens\":10,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}"
        "\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_start\ndata: "
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
        "\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: "
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"
        "\"Searching\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: "
        "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\","
        "\"id\":\"toolu_1\",\"name\":\"memory_search\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: "
        "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
        "\"partial_json\":\"{\\\"query\\\": \"}}\n\n",
        "event: content_block_delta\ndata: "
        "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
        "\"partial_json\":\"\\\"cat\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: "
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_"
        "tokens\":40}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        NULL};
    char *raw = fx_sse_answer(events);
    fake_push_raw(fs, raw, true);
    free(raw);
    llm_endpoint ep = {LLM_API_ANTHROPIC, base, "sk-ant-api-test-0002", false, NULL, 5000, 5000};
    llm_request rq = fx_request("claude-test", true);
    llm_response out;
    llm_error e;
    char err[512];
    EXPECT_INT(cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err), CM_OK);
    EXPECT_STR(out.text.data, "Searching");
    EXPECT_INT(out.ncalls, 1);
    EXPECT_STR(out.calls[0].id, "toolu_1");
    EXPECT_STR(out.calls[0].arguments, "{\"query\": \"cat\"}");
    EXPECT_STR(out.stop_reason, "toolUse");
    EXPECT_STR(out.response_id, "msg_1");
    EXPECT_INT(out.usage.input, 50);
    EXPECT_INT(out.usage.cache_read, 10);
    EXPECT_INT(out.usage.cache_write, 5);
    EXPECT_INT(out.usage.output, 40);
    EXPECT_INT(out.usage.total, 105);
    const fake_request *q = fake_get(fs, 0);
    EXPECT_STR(q->path, "/v1/messages");
    EXPECT_CONTAINS(q->headers, "x-api-key: sk-ant-api-test-0002");
    EXPECT_CONTAINS(q->headers, "anthropic-version: 2023-06-01");
    json_t *b = json_loads(q->body, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(b, "system")), "You are helpful.");
    EXPECT_INT(json_integer_value(json_object_get(b, "max_tokens")), 4096);
    json_t *msgs = json_object_get(b, "messages");
    /* user, assistant (tool_use), user (tool_result + the next question) */
    EXPECT_INT(json_array_size(msgs), 3);
    json_t *tu = json_array_get(json_object_get(json_array_get(msgs, 1), "content"), 0);
    EXPECT_STR(json_string_value(json_object_get(tu, "type")), "tool_use");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(tu, "input"), "query")), "dog");
    json_t *last = json_object_get(json_array_get(msgs, 2), "content");
    EXPECT_INT(json_array_size(last), 2);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(last, 0), "type")), "tool_result");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(last, 0), "tool_use_id")),
               "call_1");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(last, 1), "text")), "And the cat?");
    EXPECT_STR(
        json_string_value(json_object_get(json_array_get(json_object_get(b, "tools"), 0), "name")),
        "memory_search");
    json_decref(b);
    cm_llm_response_release(&out);
    fake_stop(fs);
}

TEST(llm_whole_answers_both_formats)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    char *raw = fx_json_answer(
        200, NULL,
        "{\"id\":\"c2\",\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"Hi\","
        "\"tool_calls\":[{\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"memory_"
        "get\","
        "\"arguments\":\"{\\\"path\\\":\\\"MEMORY.md\\\"}\"}}]},\"finish_reason\":\"length\"}],"
        "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}");
    fake_push_raw(fs, raw, true);
    free(raw);
    raw = fx_json_answer(
        200, NULL,
        "{\"id\":\"m2\",\"content\":[{\"type\":\"text\",\"text\":\"Yo\"},{\"type\":\"tool_use\","
        "\"id\":\"tu\",\"name\":\"memory_search\",\"input\":{\"query\":\"x\"}}],"
        "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}");
    fake_push_raw(fs, raw, true);
    free(raw);
    llm_response out;
    llm_error e;
    char err[512];
    llm_endpoint ep = {LLM_API_OPENAI, base, NULL, false, NULL, 5000, 5000};
    llm_request rq = fx_request("m", false);
    EXPECT_INT(cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err), CM_OK);
    EXPECT_STR(out.text.data, "Hi");
    EXPECT_STR(out.calls[0].arguments, "{\"path\":\"MEMORY.md\"}");
    EXPECT_STR(out.stop_reason, "length");
    EXPECT_INT(out.usage.total, 11);
    EXPECT(strcasestr(fake_get(fs, 0)->headers, "authorization") == NULL); /* no key, no header */
    cm_llm_response_release(&out);
    ep.api = LLM_API_ANTHROPIC;
    EXPECT_INT(cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err), CM_OK);
    EXPECT_STR(out.text.data, "Yo");
    EXPECT_STR(out.calls[0].arguments, "{\"query\":\"x\"}");
    EXPECT_STR(out.stop_reason, "stop");
    EXPECT_INT(out.usage.total, 7);
    cm_llm_response_release(&out);
    fake_stop(fs);
}

/* One call against one scripted answer; returns the rc, fills e and err. */
static cm_rc one(llm_api api, const char *raw, llm_error *e, char *err, size_t errlen)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    fake_push_raw(fs, raw, true);
    llm_endpoint ep = {api, base, "sk-secret-key-0003", false, NULL, 5000, 5000};
    llm_request rq = fx_request("m", true);
    llm_response out;
    cm_rc rc = cm_llm_chat(&ep, &rq, NULL, NULL, &out, e, err, errlen);
    cm_llm_response_release(&out);
    fake_stop(fs);
    return rc;
}

TEST(llm_failures_are_classified)
{
    llm_error e;
    char err[512];
    /* A stream cut before its end: retryable, a timeout-like failure. */
    const char *cut[] = {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
                         NULL};
    char *raw = fx_sse_answer(cut);
    EXPECT_INT(one(LLM_API_OPENAI, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT(e.retryable);
    EXPECT_INT(e.reason, AUTH_R_TIMEOUT);
    EXPECT_CONTAINS(err, "ended before the answer");
    const char *cut2[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n",
        NULL};
    raw = fx_sse_answer(cut2);
    EXPECT_INT(one(LLM_API_ANTHROPIC, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT(e.retryable);
    /* An error event inside the stream. */
    const char *ov[] = {"event: error\ndata: "
                        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
                        "\"Overloaded\"}}\n\n",
                        NULL};
    raw = fx_sse_answer(ov);
    EXPECT_INT(one(LLM_API_ANTHROPIC, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT_INT(e.reason, AUTH_R_OVERLOADED);
    EXPECT_CONTAINS(err, "Overloaded");
    /* 429 with Retry-After. */
    raw = fx_json_answer(429, "Retry-After: 7\r\n",
                         "{\"error\":{\"message\":\"Rate limit reached\"}}");
    EXPECT_INT(one(LLM_API_OPENAI, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT_INT(e.status, 429);
    EXPECT_INT(e.reason, AUTH_R_RATE_LIMIT);
    EXPECT_INT(e.retry_after_ms, 7000);
    EXPECT(e.retryable);
    EXPECT_CONTAINS(err, "HTTP 429: Rate limit reached");
    /* Billing. */
    raw = fx_json_answer(402, NULL, "{\"error\":{\"message\":\"insufficient credits\"}}");
    EXPECT_INT(one(LLM_API_OPENAI, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT_INT(e.reason, AUTH_R_BILLING);
    EXPECT(!e.retryable);
    /* A server that echoes the key: the message never carries it. */
    raw = fx_json_answer(401, NULL,
                         "{\"error\":{\"message\":\"Incorrect API key provided: "
                         "sk-secret-key-0003\\n\\u001b[31m\"}}");
    EXPECT_INT(one(LLM_API_OPENAI, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT_INT(e.reason, AUTH_R_AUTH);
    EXPECT(strstr(err, "sk-secret-key-0003") == NULL);
    EXPECT(strchr(err, '\x1b') == NULL && strchr(err, '\n') == NULL);
    EXPECT_CONTAINS(err, "[redacted]");
    /* Garbage with 200. */
    raw = fx_json_answer(200, NULL, "<html>proxy</html>");
    EXPECT_INT(one(LLM_API_ANTHROPIC, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT(e.retryable);
    EXPECT_CONTAINS(err, "not a anthropic-messages response");
    /* An unreadable event. */
    const char *bad[] = {"data: {not json\n\n", NULL};
    raw = fx_sse_answer(bad);
    EXPECT_INT(one(LLM_API_OPENAI, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT_CONTAINS(err, "unreadable stream event");
}

TEST(llm_unreachable_server_is_a_timeout_class)
{
    llm_endpoint ep = {
        LLM_API_OPENAI, "http://user:pw@127.0.0.1:9/v1", "sk-x-0004", false, NULL, 2000, 2000};
    llm_request rq = fx_request("m", true);
    llm_response out;
    llm_error e;
    char err[512];
    EXPECT_INT(cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err), CM_EIO);
    cm_llm_response_release(&out);
    EXPECT(e.retryable);
    EXPECT_INT(e.reason, AUTH_R_TIMEOUT);
    EXPECT(strstr(err, "pw@") == NULL);
    EXPECT_CONTAINS(err, "http://127.0.0.1:9/v1/chat/completions");
}

/* An answer larger than the client reads (32 MiB) is stopped by the client:
 * a failure of that answer, not of the provider — not retried, no cooldown
 * reason (a timeout class would cool the profile down). */
TEST(llm_oversized_answer_is_not_a_provider_failure)
{
    size_t n = (33u << 20);
    char *body = malloc(n + 16);
    EXPECT(body != NULL);
    if (!body) return;
    memcpy(body, "{\"x\":\"", 6);
    memset(body + 6, 'a', n);
    memcpy(body + 6 + n, "\"}", 3);
    char *raw = fx_json_answer(200, NULL, body);
    free(body);
    llm_error e;
    char err[512];
    EXPECT_INT(one(LLM_API_OPENAI, raw, &e, err, sizeof err), CM_EIO);
    free(raw);
    EXPECT(!e.retryable);
    EXPECT_INT(e.reason, AUTH_R_NONE);
    EXPECT_CONTAINS(err, "larger than");
}

TEST(llm_reasoning_fields)
{
    llm_response r;
    char err[256];
    /* Anthropic thinking blocks, whole and streamed */
    const char *whole = "{\"id\":\"m1\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"step "
                        "one\",\"signature\":\"sig\"},{\"type\":\"text\",\"text\":\"Hi\"}],"
                        "\"stop_reason\":\"end_turn\",\"usage\":{}}";
    EXPECT_INT(cm_llm_parse(LLM_API_ANTHROPIC, false, whole, strlen(whole), &r, err, sizeof err),
               CM_OK);
    EXPECT_STR(r.reasoning.data, "step one");
    EXPECT_STR(r.text.data, "Hi");
    cm_llm_response_release(&r);
    const char *ev =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"a\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"b\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    EXPECT_INT(cm_llm_parse(LLM_API_ANTHROPIC, true, ev, strlen(ev), &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.reasoning.data, "ab");
    EXPECT_STR(r.text.data, "ok");
    cm_llm_response_release(&r);
    /* OpenAI-compatible: reasoning_content, else reasoning */
    const char *o1 = "{\"choices\":[{\"message\":{\"content\":\"x\",\"reasoning_content\":\"rc\"},"
                     "\"finish_reason\":\"stop\"}]}";
    EXPECT_INT(cm_llm_parse(LLM_API_OPENAI, false, o1, strlen(o1), &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.reasoning.data, "rc");
    EXPECT_INT((int)r.nthinking, 1); /* one block, signed with its member */
    EXPECT_STR(r.thinking[0].signature, "reasoning_content");
    cm_llm_response_release(&r);
    const char *o2 = "data: {\"choices\":[{\"delta\":{\"reasoning\":\"r1\"}}]}\n\n"
                     "data: {\"choices\":[{\"delta\":{\"content\":\"y\"},\"finish_reason\":"
                     "\"stop\"}]}\n\ndata: [DONE]\n\n";
    EXPECT_INT(cm_llm_parse(LLM_API_OPENAI, true, o2, strlen(o2), &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.reasoning.data, "r1");
    EXPECT_STR(r.text.data, "y");
    cm_llm_response_release(&r);
    const char *o3 = "{\"choices\":[{\"message\":{\"content\":\"z\"},\"finish_reason\":\"stop\"}]}";
    EXPECT_INT(cm_llm_parse(LLM_API_OPENAI, false, o3, strlen(o3), &r, err, sizeof err), CM_OK);
    EXPECT_INT((int)r.reasoning.len, 0);
    EXPECT_INT((int)r.nthinking, 0);
    cm_llm_response_release(&r);
    /* pi-ai's thinking blocks: the first member not empty (reasoning_content,
     * reasoning, reasoning_text) signs a block; a run goes on in it whatever
     * member follows; text in between starts another */
    const char *o4 =
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"\",\"reasoning\":\"a\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"reasoning_text\":\"b\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\",\"reasoning_content\":\"c\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\"d\"},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    EXPECT_INT(cm_llm_parse(LLM_API_OPENAI, true, o4, strlen(o4), &r, err, sizeof err), CM_OK);
    EXPECT_STR(r.reasoning.data, "abcd");
    EXPECT_INT((int)r.nthinking, 2);
    EXPECT_STR(r.thinking[0].text, "ab");
    EXPECT_STR(r.thinking[0].signature, "reasoning");
    EXPECT_STR(r.thinking[1].text, "cd");
    EXPECT_STR(r.thinking[1].signature, "reasoning_content");
    cm_llm_response_release(&r);
}

/* The body's text written directly (llm_format.body_text) is the tree's
 * compact dump byte for byte: every ASCII byte, multi-byte UTF-8, each
 * message role, tool calls, tools with schemas of any layout (cached the
 * second time), the optional members; what only the tree path handles (a
 * NULL model, invalid UTF-8) is CM_EINVAL. */
TEST(llm_openai_body_text_is_the_trees_dump)
{
    char ascii[128];
    for (int i = 1; i < 128; i++)
        ascii[i - 1] = (char)i;
    ascii[127] = 0;
    const char *texts[] = {ascii, "", "plain",
                           "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80",
                           "line\nbreak \"q\" \\ / \xE2\x80\xA8 end"};
    char id1[] = "call_1", id2[] = "call_2", n1[] = "memory_search", n2[] = "read",
         a1[] = "{\"query\":\"x\\ny\"}";
    llm_tool_call calls[2] = {{id1, n1, a1}, {id2, n2, NULL}};
    llm_tool_def defs[] = {
        {"memory_search", "Search \"memory\".\n",
         "{ \"type\": \"object\",\n  \"properties\": {\"query\": {\"type\": \"string\", "
         "\"description\": \"caf\\u00e9 \xC3\xA9\"}, \"n\": {\"type\": \"number\", \"minimum\": "
         "1.5, \"maximum\": 1e3}}, \"required\": [\"query\"] }"},
        {"read", NULL, NULL},
        {"odd", "", "[1, 2]"},
        {"bad", "d", "not json"}};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        llm_message msgs[] = {
            {LLM_USER, texts[k], NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
            {LLM_ASSISTANT, texts[k], calls, 2, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
            {LLM_TOOL, texts[k], NULL, 0, "call_1", "memory_search", false, NULL, 0, NULL, NULL,
             NULL},
            {LLM_TOOL, NULL, NULL, 0, NULL, NULL, true, NULL, 0, NULL, NULL, NULL},
            {LLM_ASSISTANT, NULL, NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
            {LLM_USER, NULL, NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
        };
        llm_request rq = {0};
        rq.model = "gpt-x";
        rq.system = texts[k];
        rq.messages = msgs;
        rq.n = sizeof msgs / sizeof *msgs;
        EXPECT(fx_same_body(&rq));
        rq.stream = true;
        rq.max_tokens = 512;
        rq.reasoning_effort = "low";
        rq.tools = defs;
        rq.ntools = sizeof defs / sizeof *defs;
        EXPECT(fx_same_body(&rq));
        rq.max_tokens_field = k % 2; /* pi-ai's compat.maxTokensField */
        json_t *j = cm_llm_openai_format.body(&rq);
        EXPECT_INT(
            json_integer_value(json_object_get(j, k % 2 ? "max_tokens" : "max_completion_tokens")),
            512);
        EXPECT(!json_object_get(j, k % 2 ? "max_completion_tokens" : "max_tokens"));
        json_decref(j);
        EXPECT(fx_same_body(&rq));   /* the schemas from the cache */
        rq.no_stream_usage = k % 2;  /* pi-ai's compat.supportsUsageInStreaming */
        rq.store_false = k % 3 != 0; /* compat.supportsStore */
        EXPECT(fx_same_body(&rq));
        rq.n = 0;
        rq.system = NULL;
        EXPECT(fx_same_body(&rq));
    }
    /* only the tree path: a NULL model, text that is not UTF-8 (what
     * json_string refuses: a bad continuation, overlong, a surrogate, past
     * U+10FFFF, cut short) */
    llm_request rq = {0};
    buf t = BUF_INIT;
    EXPECT_INT(cm_llm_openai_format.body_text(&rq, &t), CM_EINVAL);
    const char *bad[] = {"x\xC3(",           "\xC0\xAF",    "\xED\xA0\x80",
                         "\xF4\x90\x80\x80", "ok \xE4\xB8", "\x80"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        llm_message m = {LLM_USER, bad[k], NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL};
        json_t *js = json_string(bad[k]);
        EXPECT(js == NULL);
        rq.model = "m";
        rq.messages = &m;
        rq.n = 1;
        cm_buf_reset(&t);
        EXPECT_INT(cm_llm_openai_format.body_text(&rq, &t), CM_EINVAL);
    }
    cm_buf_release(&t);
}
