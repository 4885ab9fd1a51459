/*
 * test_caps.c — caps and input tolerance (issue 27 item 6): numbers out of
 * range in state files, a model streaming without end, hostile Telegram
 * updates, and tokens in long error URLs.
 */
#include <jansson.h>

#include "../src/base/buf.h"
#include "../src/base/caps.h"
#include "../src/base/jnum.h"
#include "../src/base/utf8.h"
#include "../src/llm/llm.h"
#include "../src/session/sessions.h"
#include "fakeserver.h"
#include "test.h"

#define T0 1800000000000LL

TEST(caps_jnum_clamps_before_converting)
{
    static const struct {
        const char *json;
        int64_t want;
    } cases[] = {
        {"1e300", 1000},          {"-1e300", -1000}, {"1.7976931348623157e308", 1000},
        {"9223372036854775807", 1000}, {"-9223372036854775808", -1000}, {"12.9", 12},
        {"-12.9", -12},           {"\"5\"", 7},      {"null", 7},
        {"true", 7},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
        EXPECT(v != NULL);
        EXPECT_INT(cm_jnum_int64(v, -1000, 1000, 7), cases[i].want);
        json_decref(v);
    }
    EXPECT_INT(cm_jnum_int64(NULL, 0, 1, 7), 7);
    json_t *big = json_real(1e300);
    EXPECT_INT(cm_jnum_int64(big, INT64_MIN, INT64_MAX, 0), INT64_MAX);
    json_decref(big);
}

/* sessions.json with out-of-range numbers: updatedAt 1e300 and
 * compactionCount 1e300 / -1e300 were cast as they were (on x86 to
 * INT64_MIN, so the count went negative and updatedAt backwards). */
TEST(caps_session_numbers_range_checked)
{
    char *state = tmp_dir();
    write_file(state, "agents/main/sessions/sessions.json",
               "{\"agent:main:main\":{\"sessionId\":\"0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a11\","
               "\"updatedAt\":1e300,\"compactionCount\":1e300,\"totalTokens\":-1e300},"
               "\"agent:main:other\":{\"sessionId\":\"0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a12\","
               "\"updatedAt\":-1e300,\"compactionCount\":-1e300}}");
    buf p = BUF_INIT;
    char err[256];
    session_store s;
    cm_session_store_path(&p, state, "main");
    EXPECT_INT(cm_session_store_read(&s, p.data, err, sizeof err), CM_OK);
    cm_buf_release(&p);
    EXPECT_INT(cm_session_compacted(&s, "agent:main:main", 0, T0, err, sizeof err), CM_OK);
    json_t *e = cm_session_store_get(&s, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), (int64_t)INT32_MAX + 1);
    EXPECT_INT(json_integer_value(json_object_get(e, "updatedAt")), CM_JNUM_MS_MAX);
    EXPECT_INT(cm_session_compacted(&s, "agent:main:other", 0, T0, err, sizeof err), CM_OK);
    e = cm_session_store_get(&s, "agent:main:other");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 1);
    EXPECT_INT(json_integer_value(json_object_get(e, "updatedAt")), T0);
    cm_session_store_release(&s);
}

static void count_delta(void *ctx, const char *text, size_t n)
{
    (void)text;
    *(size_t *)ctx += n;
}

/* One chat call against a server streaming chunk for ever. */
static void endless_call(llm_api api, const char *chunk, const char *what)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    fake_push_endless(fs, chunk);
    static const llm_message hi[] = {{LLM_USER, "hi", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL}};
    llm_endpoint ep = {api, base, "sk-test", false, NULL, 60000, 60000};
    size_t text = 0, reasoning = 0;
    llm_request rq = {"m",         "sys",      hi,   1,    NULL, 0,    0,   true,
                      count_delta, &reasoning, NULL, NULL, NULL, NULL, NULL, 0, NULL, false, false, false};
    llm_response out;
    llm_error e;
    char err[512];
    cm_rc rc = cm_llm_chat(&ep, &rq, count_delta, &text, &out, &e, err, sizeof err);
    long long sent = fake_endless_sent(fs);
    fake_stop(fs);
    EXPECT_INT(rc, CM_ETOOBIG);
    EXPECT_CONTAINS(err, "longer than");
    EXPECT_STR(out.stop_reason, "length");
    EXPECT(!e.retryable);
    EXPECT(out.text.len + out.reasoning.len <= CM_CAP_LLM_STREAMED);
    EXPECT(text + reasoning <= CM_CAP_LLM_STREAMED);
    EXPECT(out.text.len + out.reasoning.len + 64 * 1024 > CM_CAP_LLM_STREAMED ||
           out.ncalls == CM_CAP_LLM_CALLS || strcmp(what, "calls") == 0);
    /* the read stopped soon after the cap (socket buffers aside) */
    EXPECT(sent < (long long)CM_CAP_LLM_STREAMED * 3);
    cm_llm_response_release(&out);
}

/* A model streaming deltas without end: the answer stops at the cap with
 * stop reason "length" (was: grew until memory ran out, 803 MiB in 20 s). */
TEST(caps_llm_endless_stream_stops_at_the_cap)
{
    char chunk[8300];
    char xs[8001];
    memset(xs, 'x', 8000);
    xs[8000] = 0;
    snprintf(chunk, sizeof chunk, "data: {\"choices\":[{\"delta\":{\"content\":\"%s\"}}]}\n\n",
             xs);
    endless_call(LLM_API_OPENAI, chunk, "text");
    snprintf(chunk, sizeof chunk,
             "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"%s\"}}]}\n\n", xs);
    endless_call(LLM_API_OPENAI, chunk, "reasoning");
    /* tool calls without end: each a new call */
    endless_call(LLM_API_ANTHROPIC,
                 "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
                 "\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\"}}\n\n",
                 "calls");
}

/* The lenient reading of Telegram answers, case by case (same length). */
TEST(caps_json_tolerate_rewrites_only_what_jansson_refuses)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"{\"a\":\"x\\u0000y\"}", "{\"a\":\"x\\ufffdy\"}"},
        {"{\"a\":\"\\ud83d\"}", "{\"a\":\"\\ufffd\"}"},
        {"{\"a\":\"\\uDC00\\ud83d\\ude00\"}", "{\"a\":\"\\ufffd\\ud83d\\ude00\"}"},
        {"{\"a\":\"\\\\u0000\"}", "{\"a\":\"\\\\u0000\"}"}, /* an escaped backslash */
        {"{\"\\u0000\":1}", "{\"\\ufffd\":1}"},              /* keys too */
        {"{\"a\":\"\\ud83d\\u0041\"}", "{\"a\":\"\\ufffd\\u0041\"}"},
        {"{\"a\":\"t\tb\"}", "{\"a\":\"t b\"}"},
        {"{\"a\":\"\xff\xc3\xa9\"}", "{\"a\":\"?\xc3\xa9\"}"},
        {"{\"a\":\"\\ud83d", "{\"a\":\"\\ufffd"}, /* cut: still rewritten, parser refuses */
        {"{\"a\":\"\\u00", "{\"a\":\"\\u00"},
        {"[\"\\\"\\u0000\"]", "[\"\\\"\\ufffd\"]"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *s = cm_strdup(cases[i].in);
        cm_utf8_json_tolerate(s, strlen(s));
        EXPECT_STR(s, cases[i].out);
        free(s);
    }
    char doc[] = "{\"ok\":true,\"result\":[{\"t\":\"a\\u0000\\udfff\\ud800\"}]}";
    cm_utf8_json_tolerate(doc, strlen(doc));
    json_t *j = json_loads(doc, 0, NULL);
    EXPECT(j != NULL);
    json_decref(j);
}
