/*
 * llm_fixture.c — what the chat-client tests share (llm_fixture.h).
 */
#include <jansson.h>

#include "llm_fixture.h"
#include "test.h"

char *fx_sse_answer(const char *const *events)
{
    buf b = BUF_INIT;
    cm_buf_adds(&b,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
    for (size_t i = 0; events[i]; i++)
        cm_buf_adds(&b, events[i]);
    return cm_buf_detach(&b);
}

char *fx_json_answer(int status, const char *extra_headers, const char *body)
{
    buf b = BUF_INIT;
    cm_buf_printf(&b,
                  "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s"
                  "Connection: close\r\n\r\n%s",
                  status, strlen(body), extra_headers ? extra_headers : "", body);
    return cm_buf_detach(&b);
}

void fx_on_delta(void *ctx, const char *s, size_t n)
{
    fx_deltas *d = ctx;
    cm_buf_add(&d->text, s, n);
    d->n++;
}

/* A conversation with a tool round trip, as the agent layer sends it. */
static char call_id[] = "call_1", call_name[] = "memory_search",
            call_args[] = "{\"query\":\"dog\"}";
const llm_tool_call fx_earlier_call = {call_id, call_name, call_args};
static const llm_message convo[] = {
    {LLM_USER, "What is the dog called?", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
    {LLM_ASSISTANT, NULL, &fx_earlier_call, 1, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
    {LLM_TOOL, "Biscuit", NULL, 0, "call_1", "memory_search", false, NULL, 0, NULL, NULL, NULL},
    {LLM_USER, "And the cat?", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL},
};
static const llm_tool_def tools[] = {
    {"memory_search", "Search memory",
     "{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"}}}"},
};

llm_request fx_request(const char *model, bool stream)
{
    llm_request rq = {model, "You are helpful.",
                      convo, ARRAY_LEN(convo),
                      tools, 1,
                      0,     stream,
                      NULL,  NULL,
                      NULL,  NULL,
                      NULL,  NULL,
                      NULL,  0,
                      NULL,  false,
                      false, false};
    return rq;
}

bool fx_same_body(const llm_request *rq)
{
    const llm_format *f = &cm_llm_openai_format;
    buf t = BUF_INIT;
    json_t *j = f->body(rq);
    char *want = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    bool ok = want && f->body_text(rq, &t) == CM_OK && !strcmp(t.data, want);
    if (!ok)
        fprintf(stderr, "  tree: %s\n  text: %s\n", want ? want : "(null)", t.data ? t.data : "");
    free(want);
    cm_buf_release(&t);
    return ok;
}
