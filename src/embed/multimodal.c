/*
 * multimodal.c — multimodal.h: the request of one media file, built by hand
 * (its base64 is megabytes: no JSON tree copies it), sent with the provider's
 * headers through the shared HTTP client, and read by cm_embed_parse.
 */
#include <strings.h>

#include "../base/utf8.h"
#include "../index/media.h"
#include "multimodal.h"

cm_rc cm_embed_media_body(const embed_provider *p, const embed_media_doc *d, buf *out)
{
    buf model = BUF_INIT;
    cm_rc rc = cm_buf_printf(&model, "models/%s", p->model);
    if (!rc) rc = cm_buf_adds(out, "{\"requests\":[{\"model\":");
    if (!rc) rc = cm_utf8_add_json_str(out, model.data, model.len);
    if (!rc) rc = cm_buf_adds(out, ",\"content\":{\"parts\":[{\"text\":");
    if (!rc) rc = cm_utf8_add_json_str(out, d->label, strlen(d->label));
    if (!rc) rc = cm_buf_adds(out, "},{\"inlineData\":{\"mimeType\":");
    if (!rc) rc = cm_utf8_add_json_str(out, d->mime, strlen(d->mime));
    if (!rc) rc = cm_buf_adds(out, ",\"data\":\"");
    if (!rc) rc = cm_index_media_base64(out, d->data, d->len);
    if (!rc) rc = cm_buf_adds(out, "\"}}]},\"taskType\":\"RETRIEVAL_DOCUMENT\"");
    if (!rc && p->dims_wanted)
        rc = cm_buf_printf(out, ",\"outputDimensionality\":%d", p->dims_wanted);
    if (!rc) rc = cm_buf_adds(out, "}]}");
    cm_buf_release(&model);
    return rc;
}

/* Whether a failed answer says the input was too large (as 2026.3.22 tells). */
static bool too_large(const http_req *r)
{
    if (r->status == 413) return true;
    if (r->status < 400 || r->status >= 500 || !r->resp.data) return false;
    static const char *const says[] = {"payload too large", "request too large", "input too large",
                                       "too many tokens",   "input limit",       "request size"};
    for (size_t i = 0; i < ARRAY_LEN(says); i++)
        if (strcasestr(r->resp.data, says[i])) return true;
    return false;
}

cm_rc cm_embed_media(embed_provider *p, embed_media_doc *docs, size_t n, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    http_req *reqs = NULL;
    buf *bodies = NULL, url = BUF_INIT;
    if (p->kind != CM_PROV_GEMINI)
        return cm_seterr(err, errlen, CM_EINVAL, "%s cannot embed image or audio files",
                         cm_embed_name(p));
    if (!p->http && (rc = cm_http_client_open(&p->http, err, errlen))) return rc;
    reqs = calloc(n ? n : 1, sizeof *reqs);
    bodies = calloc(n ? n : 1, sizeof *bodies);
    if (!reqs || !bodies) CHECK(CM_ENOMEM);
    CHECK(cm_buf_printf(&url, "%s/models/%s:batchEmbedContents", p->base_url, p->model));
    for (size_t i = 0; i < n; i++) {
        docs[i].vec = NULL;
        docs[i].too_large = false;
        docs[i].err[0] = 0;
        CHECK(cm_embed_media_body(p, &docs[i], &bodies[i]));
        reqs[i].url = url.data;
        reqs[i].headers = &p->headers;
        reqs[i].body = bodies[i].data;
        reqs[i].body_len = bodies[i].len;
    }
    http_opts o = cm_http_defaults(120000);
    o.concurrency = p->concurrency;
    char msg[512];
    cm_http_post_all(p->http, reqs, n, &o, msg, sizeof msg); /* each request says how it went */
    for (size_t i = 0; i < n; i++) {
        http_req *r = &reqs[i];
        if (r->status < 200 || r->status >= 300) {
            docs[i].too_large = too_large(r);
            snprintf(docs[i].err, sizeof docs[i].err, "%s embeddings: %s", cm_embed_name(p),
                     r->err[0] ? r->err : "request failed");
            continue;
        }
        const char *why = cm_embed_parse(p, r->resp.data, r->resp.len, 1, &docs[i].vec);
        if (why) {
            free(docs[i].vec);
            docs[i].vec = NULL;
            snprintf(docs[i].err, sizeof docs[i].err, "%s embeddings: %s", cm_embed_name(p), why);
        }
    }
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    for (size_t i = 0; reqs && i < n; i++) {
        cm_buf_release(&reqs[i].resp);
        cm_buf_release(&bodies[i]);
    }
    free(reqs);
    free(bodies);
    cm_buf_release(&url);
    return rc;
}
