/*
 * tools_api.c — the agent tools' entry points of include/clawmem.h
 * (cm_memory_search, cm_memory_get, cm_memory_write): the engine answers
 * with data (engine.h: hits and head facts, a file's text, a note's place),
 * tools.c shapes it into QuantumClaw's payloads.
 */
#include <jansson.h>

#include "../engine/engine.h"
#include "tools.h"

/* QMD failed and the builtin index answered: "fallback" becomes
 * "qmd: <why>[; <the provider's fallback>]" and "backend":"builtin" is added,
 * the payload re-serialised in its order. */
static cm_rc add_qmd_fallback(buf *payload, const char *why)
{
    cm_rc rc = CM_OK;
    buf f = BUF_INIT;
    char *s = NULL;
    json_t *o = json_loadb(payload->data, payload->len, 0, NULL);
    if (!json_is_object(o)) goto out;
    const char *prev = json_string_value(json_object_get(o, "fallback"));
    if (cm_buf_printf(&f, "qmd: %s%s%s", why, prev ? "; " : "", prev ? prev : "") ||
        json_object_set_new(o, "fallback", json_string(f.data)) ||
        json_object_set_new(o, "backend", json_string("builtin")))
        CHECK(CM_ENOMEM);
    if (!(s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER))) CHECK(CM_ENOMEM);
    cm_buf_reset(payload);
    CHECK(cm_buf_adds(payload, s));
out:
    free(s);
    json_decref(o);
    cm_buf_release(&f);
    return rc;
}

cm_rc cm_memory_search(cm_engine *e, const char *query, const cm_search_opts *opts, char **json,
                       char *err, size_t errlen)
{
    return cm_memory_search_session(e, query, opts, NULL, json, err, errlen);
}

cm_rc cm_memory_search_session(cm_engine *e, const char *query, const cm_search_opts *opts,
                               const char *session_key, char **json, char *err, size_t errlen)
{
    engine_result r = {0};
    buf out = BUF_INIT;
    *json = NULL;
    cm_rc rc = cm_engine_search(e, query, opts, session_key, &r, err, errlen);
    if (!rc) {
        tools_head head = {r.provider, r.model,   r.fallback, cm_engine_config(e)->citations,
                           session_key, r.mode};
        rc = r.error ? cm_tools_search_error(r.error, &head, &out)
                     : cm_tools_search_payload(r.v, r.n, &head, &out);
        if (!rc && r.qmd_why) rc = add_qmd_fallback(&out, r.qmd_why);
        if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    }
    if (!rc) *json = cm_buf_detach(&out);
    cm_engine_result_release(&r);
    cm_buf_release(&out);
    return rc;
}

cm_rc cm_memory_search_each(cm_engine *e, const char *query, const cm_search_opts *opts,
                            const char *session_key, cm_search_result_fn fn, void *ctx, char *err,
                            size_t errlen)
{
    engine_result r = {0};
    cm_rc rc = cm_engine_search(e, query, opts, session_key, &r, err, errlen);
    if (!rc && r.error) rc = cm_seterr(err, errlen, CM_EUNAVAILABLE, "%s", r.error);
    if (!rc) {
        bool cite = cm_tools_cite(cm_engine_config(e)->citations, session_key);
        rc = cm_tools_search_each(r.v, r.n, cite, fn, ctx);
        if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
        if (rc == CM_ECANCELED) cm_seterr(err, errlen, rc, "stopped by the caller");
    }
    cm_engine_result_release(&r);
    return rc;
}

cm_rc cm_memory_get(cm_engine *e, const char *path, long from, long lines, char **json, char *err,
                    size_t errlen)
{
    return cm_memory_get_at(e, path, from, 0, lines, json, err, errlen);
}

cm_rc cm_memory_get_at(cm_engine *e, const char *path, long from, long offset, long lines,
                       char **json, char *err, size_t errlen)
{
    memfile_text t = {0};
    buf out = BUF_INIT;
    *json = NULL;
    cm_rc rc = cm_engine_get(e, path ? path : "", from, offset, lines, &t, err, errlen);
    if (!rc) rc = cm_tools_get_payload(&t, &out);
    if (!rc) *json = cm_buf_detach(&out);
    cm_index_memfile_text_release(&t);
    cm_buf_release(&out);
    return rc;
}

cm_rc cm_memory_write(cm_engine *e, const char *path, const char *text, int64_t now, char **json,
                      char *err, size_t errlen)
{
    *json = NULL;
    if (!cm_engine_writable(e))
        return cm_seterr(err, errlen, CM_EINVAL,
                         "memory_write is disabled (enable it with clawmem.memoryWrite: true "
                         "in the config, or --allow-write)");
    memfile_note n = {0};
    buf out = BUF_INIT;
    cm_rc rc = cm_engine_write(e, path, text, now, &n, err, errlen);
    if (!rc) rc = cm_tools_write_payload(&n, &out);
    if (!rc) *json = cm_buf_detach(&out);
    free(n.path);
    cm_buf_release(&out);
    return rc;
}
