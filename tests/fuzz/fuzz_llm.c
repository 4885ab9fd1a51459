/*
 * fuzz_llm.c — the chat answers on arbitrary bytes: the first byte picks the
 * wire format (OpenAI-compatible or Anthropic) and whole answer or event
 * stream; the rest is the answer. Never a crash or a leak; a call that is
 * read always has an id, a name and arguments that are text.
 */
#include "../../src/llm/llm.h"
#include "fuzz.h"

int fuzz_llm(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    llm_response out;
    char err[256];
    llm_api api = (data[0] & 1) ? LLM_API_ANTHROPIC : LLM_API_OPENAI;
    bool stream = (data[0] & 2) != 0;
    if (cm_llm_parse(api, stream, (const char *)data + 1, size - 1, &out, err, sizeof err) == CM_OK)
        for (size_t i = 0; i < out.ncalls; i++)
            if (!out.calls[i].id || !out.calls[i].name || !out.calls[i].arguments) __builtin_trap();
    cm_llm_response_release(&out);
    return 0;
}

FUZZ_ENTRY(fuzz_llm)
