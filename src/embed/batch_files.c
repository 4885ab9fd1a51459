/*
 * batch_files.c — the batch API of OpenAI and Voyage (the same shape): the
 * JSONL uploaded as multipart/form-data to <base>/files with purpose
 * "batch", a batch created on <base>/batches for endpoint /v1/embeddings
 * (OpenAI: completion window 24h, the model in every line; Voyage: 12h, the
 * model and input type in request_params), polled at <base>/batches/<id>,
 * its output and error files read from <base>/files/<id>/content.
 */
#include "batch_int.h"

#define BOUNDARY "clawmem-batch-7d1f0c2a9b"

static const char *who(const embed_provider *p)
{
    return p->kind == CM_PROV_VOYAGE ? "voyage" : "openai";
}

cm_rc cm_embed_batch_files_line(const embed_provider *p, const char *id, const char *text,
                                buf *jsonl)
{
    json_t *body = p->kind == CM_PROV_VOYAGE ? json_pack("{s:[s]}", "input", text)
                                             : json_pack("{s:s, s:s, s:s}", "model", p->model,
                                                         "input", text, "encoding_format", "float");
    if (body && p->kind == CM_PROV_OPENAI && p->dims_wanted)
        json_object_set_new(body, "dimensions", json_integer(p->dims_wanted));
    json_t *j = !body ? NULL
                : p->kind == CM_PROV_VOYAGE
                    ? json_pack("{s:s, s:o}", "custom_id", id, "body", body)
                    : json_pack("{s:s, s:s, s:s, s:o}", "custom_id", id, "method", "POST", "url",
                                "/v1/embeddings", "body", body);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    cm_rc rc = s ? cm_buf_adds(jsonl, s) : CM_ENOMEM;
    if (!rc) rc = cm_buf_addc(jsonl, '\n');
    free(s);
    return rc;
}

void cm_embed_batch_files_status(json_t *j, embed_batch_status *st)
{
    const char *state = json_string_value(json_object_get(j, "status"));
    cm_embed_batch_copy(st->state, sizeof st->state, state ? state : "unknown");
    cm_embed_batch_copy(st->output, sizeof st->output,
                        json_string_value(json_object_get(j, "output_file_id")));
    cm_embed_batch_copy(st->error_file, sizeof st->error_file,
                        json_string_value(json_object_get(j, "error_file_id")));
    if (!strcmp(st->state, "completed")) {
        st->phase = EMBED_BATCH_COMPLETED;
    } else if (!strcmp(st->state, "failed") || !strcmp(st->state, "expired") ||
               !strcmp(st->state, "cancelled") || !strcmp(st->state, "canceled")) {
        st->phase = EMBED_BATCH_FAILED;
        const char *m = json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(j, "errors"), "data"), 0), "message"));
        cm_embed_batch_copy(st->why, sizeof st->why, m ? m : st->state);
    } else {
        st->phase = EMBED_BATCH_RUNNING;
    }
}

cm_rc cm_embed_batch_files_submit(embed_provider *p, const buf *jsonl, char **id,
                                  embed_batch_status *st, uint64_t *sent, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf body = BUF_INIT, url = BUF_INIT, what = BUF_INIT;
    batch_call up = {0}, mk = {0};
    json_t *j = NULL, *req = NULL;
    char *req_s = NULL;
    /* 1. the file */
    CHECK(cm_buf_printf(
        &body, "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n"
               "batch\r\n--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"file\"; "
               "filename=\"memory-embeddings.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n"));
    CHECK(cm_buf_add(&body, jsonl->data ? jsonl->data : "", jsonl->len));
    CHECK(cm_buf_adds(&body, "\r\n--" BOUNDARY "--\r\n"));
    CHECK(cm_buf_printf(&url, "%s/files", p->base_url));
    CHECK(cm_buf_printf(&what, "%s batch file upload", who(p)));
    up.what = what.data;
    up.url = url.data;
    up.ctype = "multipart/form-data; boundary=" BOUNDARY;
    up.body = body.data;
    up.body_len = body.len;
    *sent += body.len;
    CHECK(cm_embed_batch_http(p, &up, err, errlen));
    CHECK(cm_embed_batch_json(&up, &j, err, errlen));
    const char *file_id = json_string_value(json_object_get(j, "id"));
    if (!file_id) FAIL(CM_EIO, "%s batch file upload failed: missing file id", who(p));
    /* 2. the batch */
    if (p->kind == CM_PROV_VOYAGE)
        req = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "input_file_id", file_id,
                        "endpoint", "/v1/embeddings", "completion_window", "12h", "request_params",
                        "model", p->model, "input_type", "document", "metadata", "source",
                        "clawmem-memory");
    else
        req = json_pack("{s:s, s:s, s:s, s:{s:s}}", "input_file_id", file_id, "endpoint",
                        "/v1/embeddings", "completion_window", "24h", "metadata", "source",
                        "clawmem-memory");
    if (!req || !(req_s = json_dumps(req, JSON_COMPACT))) CHECK(CM_ENOMEM);
    cm_buf_reset(&url);
    cm_buf_reset(&what);
    CHECK(cm_buf_printf(&url, "%s/batches", p->base_url));
    CHECK(cm_buf_printf(&what, "%s batch create", who(p)));
    mk.what = what.data;
    mk.url = url.data;
    mk.ctype = "application/json";
    mk.body = req_s;
    mk.body_len = strlen(req_s);
    *sent += mk.body_len;
    CHECK(cm_embed_batch_http(p, &mk, err, errlen));
    json_decref(j);
    j = NULL;
    CHECK(cm_embed_batch_json(&mk, &j, err, errlen));
    const char *bid = json_string_value(json_object_get(j, "id"));
    if (!bid || !*bid) FAIL(CM_EIO, "%s batch create failed: missing batch id", who(p));
    if (!(*id = cm_strdup(bid))) CHECK(CM_ENOMEM);
    cm_embed_batch_files_status(j, st);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(j);
    json_decref(req);
    free(req_s);
    cm_embed_batch_call_release(&up);
    cm_embed_batch_call_release(&mk);
    cm_buf_release(&body);
    cm_buf_release(&url);
    cm_buf_release(&what);
    return rc;
}

cm_rc cm_embed_batch_files_poll(embed_provider *p, const char *id, embed_batch_status *st,
                                char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT, what = BUF_INIT;
    batch_call c = {0};
    json_t *j = NULL;
    CHECK(cm_buf_printf(&url, "%s/batches/%s", p->base_url, id));
    CHECK(cm_buf_printf(&what, "%s batch status", who(p)));
    c.what = what.data;
    c.url = url.data;
    CHECK(cm_embed_batch_http(p, &c, err, errlen));
    CHECK(cm_embed_batch_json(&c, &j, err, errlen));
    cm_embed_batch_files_status(j, st);
    cm_embed_batch_redact(p, url.data, st->why, sizeof st->why);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(j);
    cm_embed_batch_call_release(&c);
    cm_buf_release(&url);
    cm_buf_release(&what);
    return rc;
}

static cm_rc read_file(embed_provider *p, const char *file, batch_line_fn fn, void *ctx, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT, what = BUF_INIT;
    batch_call c = {0};
    CHECK(cm_buf_printf(&url, "%s/files/%s/content", p->base_url, file));
    CHECK(cm_buf_printf(&what, "%s batch file content", who(p)));
    c.what = what.data;
    c.url = url.data;
    c.on_line = fn;
    c.ctx = ctx;
    CHECK(cm_embed_batch_http(p, &c, err, errlen));
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_embed_batch_call_release(&c);
    cm_buf_release(&url);
    cm_buf_release(&what);
    return rc;
}

cm_rc cm_embed_batch_files_results(embed_provider *p, const embed_batch_status *st,
                                   batch_line_fn fn, void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    if (st->output[0]) rc = read_file(p, st->output, fn, ctx, err, errlen);
    /* the error file names the items that failed; they are retried either way */
    if (!rc && st->error_file[0]) rc = read_file(p, st->error_file, fn, ctx, err, errlen);
    return rc;
}
