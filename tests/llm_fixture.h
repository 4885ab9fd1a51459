/*
 * llm_fixture.h — what the chat-client tests (test_llm.c, test_llm_thinking.c)
 * share: scripted answers for the loopback server, a delta collector, and a
 * request carrying a conversation with one tool round trip.
 */
#ifndef CM_TEST_LLM_FIXTURE_H
#define CM_TEST_LLM_FIXTURE_H

#include "../src/llm/llm.h"

/* An HTTP answer streaming the events, each a complete SSE event text. */
char *fx_sse_answer(const char *const *events);
/* An HTTP answer with a JSON body; extra_headers ends each with CRLF. */
char *fx_json_answer(int status, const char *extra_headers, const char *body);

typedef struct fx_deltas {
    buf text;
    int n;
} fx_deltas;
/* cm_llm_chat's delta callback: appends to the fx_deltas at ctx. */
void fx_on_delta(void *ctx, const char *s, size_t n);

/* The assistant's memory_search call of the conversation below. */
extern const llm_tool_call fx_earlier_call;
/* A request for model: a system prompt, a user question, a memory_search
 * round trip and a second question, the one memory_search tool. */
llm_request fx_request(const char *model, bool stream);
/* The OpenAI body written directly is the tree's compact dump, byte for byte
 * (prints both when not). */
bool fx_same_body(const llm_request *rq);

#endif
