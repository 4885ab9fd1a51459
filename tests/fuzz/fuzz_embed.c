/*
 * fuzz_embed.c — the embedding-answer reader on arbitrary bytes, for each
 * wire format (OpenAI-style, Gemini, Ollama): never a crash, a leak, or a
 * vector that is not all finite numbers of one length.
 */
#include <math.h>

#include "../../src/embed/embed.h"
#include "fuzz.h"

int fuzz_embed(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const int kinds[] = {CM_PROV_OPENAI, CM_PROV_GEMINI, CM_PROV_OLLAMA};
    embed_provider p;
    memset(&p, 0, sizeof p);
    p.kind = kinds[data[0] % 3];
    size_t n = 1 + (data[0] >> 2) % 4;
    float *rows[4] = {0};
    const char *why = cm_embed_parse(&p, (const char *)data + 1, size - 1, n, rows);
    for (size_t i = 0; !why && i < n; i++)
        for (int d = 0; d < p.dims; d++)
            if (!isfinite(rows[i][d])) __builtin_trap();
    for (size_t i = 0; i < n; i++) free(rows[i]);
    return 0;
}

FUZZ_ENTRY(fuzz_embed)
