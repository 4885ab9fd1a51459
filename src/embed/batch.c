/*
 * batch.c — the batch APIs of batch.h: the reading of a result line
 * (OpenAI/Voyage and Gemini shapes) and the dispatch to batch_files.c
 * (OpenAI, Voyage) and batch_gemini.c, which share batch_call.c.
 */
#include <math.h>

#include "batch_int.h"

/* ---- result lines --------------------------------------------------------- */

/* Reads a vector into a new array; NULL and *why when it is not one this
 * provider may give. */
static float *read_vector(embed_provider *p, json_t *v, int *dims, const char **why)
{
    size_t d = json_array_size(v);
    *why = NULL;
    if (!json_is_array(v) || d == 0) {
        *why = "empty embedding";
        return NULL;
    }
    if (d > 65536 || (p->dims_wanted && (int)d != p->dims_wanted) ||
        (p->dims && (int)d != p->dims)) {
        *why = "embedding of the wrong dimensions";
        return NULL;
    }
    float *out = malloc(d * sizeof *out);
    if (!out) {
        *why = "out of memory";
        return NULL;
    }
    for (size_t i = 0; i < d; i++) {
        json_t *x = json_array_get(v, i);
        double f = json_number_value(x);
        if (!json_is_number(x) || !isfinite(f) || fabs(f) > 1e30) {
            free(out);
            *why = "an embedding holds a non-number";
            return NULL;
        }
        out[i] = (float)f;
    }
    *dims = (int)d;
    return out;
}

/* The message of an error member: {"message": …} or a plain string. */
static const char *error_text(json_t *e)
{
    if (json_is_string(e)) return json_string_value(e);
    const char *m = json_string_value(json_object_get(e, "message"));
    if (m) return m;
    return json_is_object(e) && json_object_size(e) ? "unknown error" : NULL;
}

cm_rc cm_embed_batch_parse_line(embed_provider *p, const char *line, size_t len,
                                embed_batch_item_fn fn, void *ctx)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    cm_rc rc = CM_OK;
    float *v = NULL;
    int dims = 0;
    const char *id = json_string_value(json_object_get(j, "custom_id"));
    if (!id) id = json_string_value(json_object_get(j, "key"));
    if (!id) id = json_string_value(json_object_get(j, "request_id"));
    if (!id) goto out; /* unattributable: the item counts as missing */
    const char *why = error_text(json_object_get(j, "error"));
    json_t *resp = json_object_get(j, "response"), *vec = NULL;
    if (!why && p->kind == CM_PROV_GEMINI) {
        why = error_text(json_object_get(resp, "error"));
        vec = json_object_get(json_object_get(resp ? resp : j, "embedding"), "values");
    } else if (!why) {
        json_t *body = json_object_get(resp, "body");
        json_int_t code = json_integer_value(json_object_get(resp, "status_code"));
        if (code >= 400) {
            why = json_is_string(body) ? json_string_value(body)
                                       : error_text(json_object_get(body, "error"));
            if (!why) why = "unknown error";
        }
        vec = json_object_get(json_array_get(json_object_get(body, "data"), 0), "embedding");
    }
    if (!why) {
        v = read_vector(p, vec, &dims, &why);
        if (v && !p->dims) p->dims = dims;
    }
    rc = fn(ctx, id, v, dims, v ? NULL : why);
out:
    free(v);
    json_decref(j);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------- */

bool cm_embed_batch_supported(const embed_provider *p)
{
    return p->kind == CM_PROV_OPENAI || p->kind == CM_PROV_GEMINI || p->kind == CM_PROV_VOYAGE;
}

cm_rc cm_embed_batch_line(const embed_provider *p, const char *id, const char *text, buf *jsonl)
{
    return p->kind == CM_PROV_GEMINI ? cm_embed_batch_gemini_line(p, id, text, jsonl)
                                     : cm_embed_batch_files_line(p, id, text, jsonl);
}

cm_rc cm_embed_batch_submit(embed_provider *p, const buf *jsonl, size_t n, char **id,
                            embed_batch_status *st, uint64_t *bytes_sent, char *err, size_t errlen)
{
    uint64_t sent = 0;
    (void)n;
    *id = NULL;
    memset(st, 0, sizeof *st);
    if (!cm_embed_batch_supported(p))
        return cm_seterr(err, errlen, CM_EINVAL, "%s has no batch API", cm_embed_name(p));
    cm_rc rc = p->kind == CM_PROV_GEMINI
                   ? cm_embed_batch_gemini_submit(p, jsonl, id, st, &sent, err, errlen)
                   : cm_embed_batch_files_submit(p, jsonl, id, st, &sent, err, errlen);
    if (bytes_sent) *bytes_sent += sent;
    return rc;
}

cm_rc cm_embed_batch_poll(embed_provider *p, const char *id, embed_batch_status *st, char *err,
                          size_t errlen)
{
    memset(st, 0, sizeof *st);
    return p->kind == CM_PROV_GEMINI ? cm_embed_batch_gemini_poll(p, id, st, err, errlen)
                                     : cm_embed_batch_files_poll(p, id, st, err, errlen);
}

typedef struct relay {
    embed_provider *p;
    embed_batch_item_fn fn;
    void *ctx;
} relay;

static cm_rc relay_line(void *ctx, const char *line, size_t len)
{
    relay *r = ctx;
    return cm_embed_batch_parse_line(r->p, line, len, r->fn, r->ctx);
}

cm_rc cm_embed_batch_results(embed_provider *p, const embed_batch_status *st,
                             embed_batch_item_fn fn, void *ctx, char *err, size_t errlen)
{
    relay r = {p, fn, ctx};
    return p->kind == CM_PROV_GEMINI
               ? cm_embed_batch_gemini_results(p, st, relay_line, &r, err, errlen)
               : cm_embed_batch_files_results(p, st, relay_line, &r, err, errlen);
}
