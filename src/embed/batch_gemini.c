/*
 * batch_gemini.c — the Gemini Batch API for embeddings: the JSONL (one
 * {"key", "request": EmbedContentRequest} a line) uploaded through the Files
 * API's multipart upload (<base with /upload>/files?uploadType=multipart),
 * a batch created with models/<model>:asyncBatchEmbedContent naming that
 * file, polled at <base>/batches/<id> (an operation whose metadata, or the
 * batch itself, carries the BATCH_STATE_*), its responses file read through
 * the download endpoint (<base with /download>/files/<id>:download?alt=media).
 */
#include <ctype.h>

#include "batch_int.h"

#define BOUNDARY "clawmem-batch-4e93b1d07c"

cm_rc cm_embed_batch_gemini_line(const embed_provider *p, const char *id, const char *text,
                                 buf *jsonl)
{
    char model[300];
    snprintf(model, sizeof model, "models/%s", p->model);
    json_t *req = json_pack("{s:s, s:{s:[{s:s}]}, s:s}", "model", model, "content", "parts", "text",
                            text, "taskType", "RETRIEVAL_DOCUMENT");
    if (req && p->dims_wanted)
        json_object_set_new(req, "outputDimensionality", json_integer(p->dims_wanted));
    json_t *j = req ? json_pack("{s:s, s:o}", "key", id, "request", req) : NULL;
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    cm_rc rc = s ? cm_buf_adds(jsonl, s) : CM_ENOMEM;
    if (!rc) rc = cm_buf_addc(jsonl, '\n');
    free(s);
    return rc;
}

/* The base URL with `kind` ("upload", "download") inserted before its
 * version segment: …/v1beta → …/upload/v1beta; else appended. */
static cm_rc special_base(const embed_provider *p, const char *kind, buf *out)
{
    const char *v = strstr(p->base_url, "/v1beta");
    if (v && v[7] == 0)
        return cm_buf_printf(out, "%.*s/%s/v1beta", (int)(v - p->base_url), p->base_url, kind);
    return cm_buf_printf(out, "%s/%s", p->base_url, kind);
}

void cm_embed_batch_gemini_status(json_t *j, embed_batch_status *st)
{
    json_t *meta = json_object_get(j, "metadata"), *batch = json_object_get(j, "batch");
    const char *state = json_string_value(json_object_get(j, "state"));
    if (!state) state = json_string_value(json_object_get(meta, "state"));
    if (!state) state = json_string_value(json_object_get(batch, "state"));
    if (state && !strncmp(state, "BATCH_STATE_", 12)) state += 12;
    if (state && !strncmp(state, "JOB_STATE_", 10)) state += 10;
    char low[32];
    cm_embed_batch_copy(low, sizeof low, state ? state : "");
    for (char *c = low; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    const char *why = cm_embed_batch_jstr(j, "error", "message", NULL);
    const char *out = cm_embed_batch_jstr(j, "output", "responsesFile", NULL);
    if (!out) out = cm_embed_batch_jstr(j, "metadata", "output", "responsesFile", NULL);
    if (!out) out = cm_embed_batch_jstr(j, "response", "responsesFile", NULL);
    if (!out) out = cm_embed_batch_jstr(j, "response", "output", "responsesFile", NULL);
    if (!out) out = cm_embed_batch_jstr(j, "batch", "output", "responsesFile", NULL);
    if (!out) out = cm_embed_batch_jstr(j, "outputConfig", "file", NULL);
    cm_embed_batch_copy(st->output, sizeof st->output, out);
    bool done = json_is_true(json_object_get(j, "done"));
    if (!low[0])
        cm_embed_batch_copy(low, sizeof low, done ? (why ? "failed" : "succeeded") : "pending");
    cm_embed_batch_copy(st->state, sizeof st->state, low);
    if (!strcmp(low, "succeeded") || !strcmp(low, "completed") || !strcmp(low, "done")) {
        st->phase = EMBED_BATCH_COMPLETED;
    } else if (!strcmp(low, "failed") || !strcmp(low, "cancelled") || !strcmp(low, "canceled") ||
               !strcmp(low, "expired")) {
        st->phase = EMBED_BATCH_FAILED;
        cm_embed_batch_copy(st->why, sizeof st->why, why ? why : low);
    } else {
        st->phase = EMBED_BATCH_RUNNING;
    }
}

cm_rc cm_embed_batch_gemini_submit(embed_provider *p, const buf *jsonl, char **id,
                                   embed_batch_status *st, uint64_t *sent, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf body = BUF_INIT, url = BUF_INIT;
    batch_call up = {0}, mk = {0};
    json_t *j = NULL, *req = NULL;
    char *req_s = NULL;
    /* 1. the file: multipart/related, the metadata then the JSONL */
    CHECK(cm_buf_printf(&body,
                        "--" BOUNDARY "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
                        "{\"file\":{\"displayName\":\"clawmem-memory-embeddings\",\"mimeType\":"
                        "\"application/jsonl\"}}\r\n--" BOUNDARY
                        "\r\nContent-Type: application/jsonl; charset=UTF-8\r\n\r\n"));
    CHECK(cm_buf_add(&body, jsonl->data ? jsonl->data : "", jsonl->len));
    CHECK(cm_buf_adds(&body, "\r\n--" BOUNDARY "--\r\n"));
    CHECK(special_base(p, "upload", &url));
    CHECK(cm_buf_adds(&url, "/files?uploadType=multipart"));
    up.what = "gemini batch file upload";
    up.url = url.data;
    up.ctype = "multipart/related; boundary=" BOUNDARY;
    up.extra_header = "X-Goog-Upload-Protocol: multipart";
    up.body = body.data;
    up.body_len = body.len;
    *sent += body.len;
    CHECK(cm_embed_batch_http(p, &up, err, errlen));
    CHECK(cm_embed_batch_json(&up, &j, err, errlen));
    const char *file = cm_embed_batch_jstr(j, "file", "name", NULL);
    if (!file) file = cm_embed_batch_jstr(j, "name", NULL);
    if (!file) FAIL(CM_EIO, "gemini batch file upload failed: missing file name");
    /* 2. the batch */
    req = json_pack("{s:{s:s, s:{s:s}}}", "batch", "displayName", "clawmem-memory-embeddings",
                    "inputConfig", "fileName", file);
    if (!req || !(req_s = json_dumps(req, JSON_COMPACT))) CHECK(CM_ENOMEM);
    cm_buf_reset(&url);
    CHECK(cm_buf_printf(&url, "%s/models/%s:asyncBatchEmbedContent", p->base_url, p->model));
    mk.what = "gemini batch create";
    mk.url = url.data;
    mk.ctype = "application/json";
    mk.body = req_s;
    mk.body_len = strlen(req_s);
    *sent += mk.body_len;
    rc = cm_embed_batch_http(p, &mk, err, errlen);
    if (rc == CM_ENOTFOUND)
        FAIL(rc, "gemini batch create failed: 404 (asyncBatchEmbedContent not available for this "
                 "model or baseUrl)");
    CHECK(rc);
    json_decref(j);
    j = NULL;
    CHECK(cm_embed_batch_json(&mk, &j, err, errlen));
    const char *name = cm_embed_batch_jstr(j, "name", NULL);
    if (!name || !*name) FAIL(CM_EIO, "gemini batch create failed: missing batch name");
    if (!(*id = cm_strdup(name))) CHECK(CM_ENOMEM);
    cm_embed_batch_gemini_status(j, st);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(j);
    json_decref(req);
    free(req_s);
    cm_embed_batch_call_release(&up);
    cm_embed_batch_call_release(&mk);
    cm_buf_release(&body);
    cm_buf_release(&url);
    return rc;
}

cm_rc cm_embed_batch_gemini_poll(embed_provider *p, const char *id, embed_batch_status *st,
                                 char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT;
    batch_call c = {0};
    json_t *j = NULL;
    CHECK(cm_buf_printf(&url, "%s/%s%s", p->base_url, strncmp(id, "batches/", 8) ? "batches/" : "",
                        id));
    c.what = "gemini batch status";
    c.url = url.data;
    CHECK(cm_embed_batch_http(p, &c, err, errlen));
    CHECK(cm_embed_batch_json(&c, &j, err, errlen));
    cm_embed_batch_gemini_status(j, st);
    cm_embed_batch_redact(p, url.data, st->why, sizeof st->why);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(j);
    cm_embed_batch_call_release(&c);
    cm_buf_release(&url);
    return rc;
}

cm_rc cm_embed_batch_gemini_results(embed_provider *p, const embed_batch_status *st,
                                    batch_line_fn fn, void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT;
    batch_call c = {0};
    if (!st->output[0]) return CM_OK; /* nothing: every item counts as missing */
    CHECK(special_base(p, "download", &url));
    CHECK(cm_buf_printf(&url, "/%s%s:download?alt=media",
                        strncmp(st->output, "files/", 6) ? "files/" : "", st->output));
    c.what = "gemini batch file content";
    c.url = url.data;
    c.on_line = fn;
    c.ctx = ctx;
    CHECK(cm_embed_batch_http(p, &c, err, errlen));
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_embed_batch_call_release(&c);
    cm_buf_release(&url);
    return rc;
}
