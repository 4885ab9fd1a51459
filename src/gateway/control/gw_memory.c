/*
 * gw_memory.c — clawmem's own gateway methods (not QuantumClaw's): the
 * memory tools for operator clients such as the Control UI's Memory page.
 * memory.search {query, maxResults?, minScore?} answers memory_search's
 * payload (results with path, lines, score, snippet, citation) plus the
 * query; memory.get {path, from?, lines?} answers memory_get's {path, text}
 * (the same path rules: memory files of the workspace only).
 * clawmem.memory.plot {} answers what the index holds by source and month
 * of the files' mtime (UTC): {months:[{source, month "YYYY-MM", files,
 * chunks}], files, chunks}, for the Memory page's plot.
 * clawmem.memory.status {deep?} answers `clawmem status --json`'s object for
 * that agent (files, chunks, provider, search mode, indexError, lastError,
 * problems [{path, problem}]; deep: integrity and dirtyFiles too, which
 * walks the workspace and checks the index, so the page asks without). All need
 * operator.read. Each call uses the default agent's engine — the one its
 * turns use, shared by every thread and kept open (gw_ws_opts.engine) — and
 * syncs it first without waiting for a sync under way.
 */
#include "../../engine/engine.h"
#include "gw_memory.h"

#define MEMORY_MAX_RESULTS 50
#define MEMORY_MAX_LINES   2000

/* The default agent's shared engine (borrowed: not closed here). */
static cm_rc S_open(gw_ws *w, cm_engine **e, char *err, size_t errlen)
{
    *e = NULL;
    if (!w->o.engine) return cm_seterr(err, errlen, CM_EIO, "memory is not available here");
    cm_rc rc = w->o.engine(w->o.engine_ctx, w->agent_id0, e, err, errlen);
    if (rc) return rc;
    char serr[256];
    cm_engine_sync(*e, CM_SYNC_NOWAIT, NULL, NULL, NULL, serr, sizeof serr); /* stale is fine */
    return CM_OK;
}

/* Answers the tool's JSON text as the payload (extra: a key to add, or NULL). */
static void S_answer(gw_ws_client *cl, const char *id, char *js, const char *k, const char *v)
{
    json_t *o = js ? json_loads(js, 0, NULL) : NULL;
    cm_free(js);
    if (!json_is_object(o)) {
        json_decref(o);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "memory answered no JSON", NULL);
    }
    if (k) json_object_set_new(o, k, json_string(v));
    cm_gw_ws_ok(cl, id, o);
}

void cm_gw_ws_memory_search(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    const char *q = json_string_value(json_object_get(p, "query"));
    if (!q || !*q)
        return cm_gw_ws_fail(cl, id, "INVALID_REQUEST",
                             "invalid memory.search params: query (a string) is required", NULL);
    cm_search_opts so = {0, -1, 0};
    json_t *mr = json_object_get(p, "maxResults"), *ms = json_object_get(p, "minScore");
    if (json_is_integer(mr)) {
        json_int_t n = json_integer_value(mr);
        so.max_results = (int)(n < 1 ? 1 : n > MEMORY_MAX_RESULTS ? MEMORY_MAX_RESULTS : n);
    }
    if (json_is_number(ms)) so.min_score = json_number_value(ms);
    char err[512], *js = NULL;
    cm_engine *e = NULL;
    cm_rc rc = S_open(w, &e, err, sizeof err);
    if (!rc) rc = cm_memory_search(e, q, &so, &js, err, sizeof err);
    if (rc)
        return cm_gw_ws_fail(cl, id, rc == CM_EINVAL ? "INVALID_REQUEST" : "UNAVAILABLE", err,
                             NULL);
    S_answer(cl, id, js, "query", q);
}

void cm_gw_ws_memory_get(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    const char *path = json_string_value(json_object_get(p, "path"));
    if (!path || !*path)
        return cm_gw_ws_fail(cl, id, "INVALID_REQUEST",
                             "invalid memory.get params: path (a string) is required", NULL);
    json_t *f = json_object_get(p, "from"), *n = json_object_get(p, "lines");
    long from = json_is_integer(f) && json_integer_value(f) > 0 ? (long)json_integer_value(f) : 1;
    long lines = json_is_integer(n) && json_integer_value(n) > 0 ? (long)json_integer_value(n)
                                                                 : MEMORY_MAX_LINES;
    if (lines > MEMORY_MAX_LINES) lines = MEMORY_MAX_LINES;
    char err[512], *js = NULL;
    cm_engine *e = NULL;
    cm_rc rc = S_open(w, &e, err, sizeof err);
    if (!rc) rc = cm_memory_get(e, path, from, lines, &js, err, sizeof err);
    if (rc)
        return cm_gw_ws_fail(cl, id, rc == CM_EPATH ? "INVALID_REQUEST" : "UNAVAILABLE", err, NULL);
    S_answer(cl, id, js, NULL, NULL);
}

void cm_gw_ws_memory_plot(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    char err[512], *js = NULL;
    cm_engine *e = NULL;
    cm_rc rc = S_open(w, &e, err, sizeof err);
    if (!rc) rc = cm_engine_index_months(e, &js, err, sizeof err);
    if (rc) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
    S_answer(cl, id, js, NULL, NULL);
}

void cm_gw_ws_memory_status(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    int deep = json_is_true(json_object_get(p, "deep")) ? 1 : 0;
    char err[512], *js = NULL;
    cm_engine *e = NULL;
    cm_rc rc = S_open(w, &e, err, sizeof err);
    if (!rc) rc = cm_engine_status(e, deep, &js, err, sizeof err);
    if (rc) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
    S_answer(cl, id, js, NULL, NULL);
}
