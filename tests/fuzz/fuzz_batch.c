/*
 * fuzz_batch.c — the batch APIs' readers on arbitrary bytes: a result line
 * (OpenAI/Voyage and Gemini shapes) and a batch status answer (both
 * shapes): never a crash or a leak, every vector passed on all finite
 * numbers of one length, every status a known phase with terminated strings.
 */
#include <math.h>

#include "../../src/embed/batch_int.h"
#include "fuzz.h"

static cm_rc on_item(void *ctx, const char *id, const float *v, int dims, const char *why)
{
    int *seen = ctx;
    if (!id || (!v && !why) || (v && (dims <= 0 || dims > 65536))) __builtin_trap();
    for (int d = 0; v && d < dims; d++)
        if (!isfinite(v[d])) __builtin_trap();
    if (*seen && v && dims != *seen) __builtin_trap();
    if (v) *seen = dims;
    return CM_OK;
}

int fuzz_batch(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    embed_provider p;
    memset(&p, 0, sizeof p);
    p.kind = data[0] & 1 ? CM_PROV_GEMINI : CM_PROV_OPENAI;
    int seen = 0;
    /* every line of the input, as a results file is read */
    const char *s = (const char *)data + 1, *end = (const char *)data + size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        cm_embed_batch_parse_line(&p, s, len, on_item, &seen);
        s += len + 1;
    }
    json_t *j = json_loadb((const char *)data + 1, size - 1, 0, NULL);
    if (j) {
        embed_batch_status st;
        memset(&st, 0, sizeof st);
        if (data[0] & 2)
            cm_embed_batch_gemini_status(j, &st);
        else
            cm_embed_batch_files_status(j, &st);
        if (st.phase > EMBED_BATCH_FAILED || strlen(st.state) >= sizeof st.state ||
            strlen(st.output) >= sizeof st.output)
            __builtin_trap();
        json_decref(j);
    }
    return 0;
}

FUZZ_ENTRY(fuzz_batch)
