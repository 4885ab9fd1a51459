/*
 * status.c — the builtin backend's status (cm_engine_status): the settings in
 * effect, the provider, the index's counts and problems, and (deep) its
 * integrity and the files a sync would read, as one JSON object. What it
 * reads from the index is checked before it is shown.
 */
#include <jansson.h>
#include <sys/stat.h>

#include "../base/utf8.h"
#include "engine_int.h"

static cm_rc add_kv_str(buf *b, const char *k, const char *v)
{
    jw w = {b, CM_OK};
    cm_jw_printf(&w, ",\"%s\":", k);
    cm_jw_str(&w, v);
    return w.rc;
}

/* The last sync's problems (a JSON array kept in the meta table) as JSON
 * again: only {"path","problem"} strings pass, so a crafted value cannot
 * break the status payload; anything else is CM_ECORRUPT. */
static cm_rc problems_json(store *st, const char *stored, buf *out, char *err, size_t errlen)
{
    cm_rc rc = cm_buf_addc(out, '[');
    json_t *j = stored ? json_loads(stored, JSON_REJECT_DUPLICATES, NULL) : json_array();
    if (!j || !json_is_array(j)) {
        json_decref(j);
        return rc ? rc : cm_store_corrupt(st, "the meta table", err, errlen);
    }
    for (size_t i = 0; !rc && i < json_array_size(j); i++) {
        json_t *o = json_array_get(j, i);
        const char *p = json_string_value(json_object_get(o, "path"));
        const char *w = json_string_value(json_object_get(o, "problem"));
        if (!p || !w) {
            rc = cm_store_corrupt(st, "the meta table", err, errlen);
            break;
        }
        jw jo = {out, CM_OK};
        cm_jw_raw(&jo, i ? ",{\"path\":" : "{\"path\":");
        cm_jw_str(&jo, p);
        cm_jw_raw(&jo, ",\"problem\":");
        cm_jw_str(&jo, w);
        cm_jw_raw(&jo, "}");
        rc = jo.rc;
    }
    json_decref(j);
    if (!rc) rc = cm_buf_addc(out, ']');
    return rc;
}

/* A stored vector size: digits only, as the status payload shows it bare. */
static bool dims_valid(const char *d)
{
    size_t n = strspn(d, "0123456789");
    return n > 0 && n < 8 && d[n] == 0;
}

/* Counts files that a sync would read (new, changed) or drop. */
static cm_rc count_dirty(cm_engine *e, size_t *dirty, char *err, size_t errlen)
{
    file_list files = {0};
    problem_list pl = {0};
    cm_rc rc = cm_discover_files(&e->cfg, &files, &pl);
    if (!rc) rc = cm_engine_count_dirty_in(e, &files, NULL, dirty, err, errlen);
    cm_index_file_list_release(&files);
    cm_index_problem_list_release(&pl);
    return rc;
}

cm_rc cm_builtin_status(cm_engine *e, int deep, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    char msg[512] = "";
    char *transient = NULL;
    const cm_config *c = &e->cfg;
    *json = NULL;
    rc = cm_engine_workspace_exists(e, err, errlen);
    if (rc) return rc;
    bool ws = true;
    CHECK(cm_buf_adds(&b, "{\"agentId\":"));
    CHECK(cm_utf8_add_json_str(&b, c->agent_id, strlen(c->agent_id)));
    CHECK(add_kv_str(&b, "workspace", c->workspace));
    CHECK(cm_buf_printf(&b, ",\"workspaceExists\":%s", ws ? "true" : "false"));
    CHECK(add_kv_str(&b, "stateDir", c->state_dir));
    CHECK(add_kv_str(&b, "configPath", c->config_path));
    CHECK(cm_buf_printf(&b, ",\"configFound\":%s,\"enabled\":%s",
                        c->config_found ? "true" : "false", c->enabled ? "true" : "false"));
    CHECK(add_kv_str(&b, "clawmemConfigPath", c->overlay_path));
    CHECK(cm_buf_printf(&b, ",\"clawmemConfigFound\":%s", c->overlay_found ? "true" : "false"));
    CHECK(add_kv_str(&b, "backend", e->be->name));
    cm_engine_provider_check(e);
    CHECK(add_kv_str(&b, "requestedProvider", c->provider));
    CHECK(add_kv_str(&b, "provider", e->provider));
    CHECK(add_kv_str(&b, "model", e->model));
    CHECK(add_kv_str(&b, "providerNote", e->provider_note));
    CHECK(add_kv_str(&b, "search",
                     !e->have_prov       ? "keyword"
                     : c->hybrid_enabled ? "hybrid"
                                         : "vector"));
    CHECK(add_kv_str(&b, "lastError", e->last_error[0] ? e->last_error : NULL));
    CHECK(add_kv_str(&b, "ftsTokenizer", c->fts_tokenizer));
    CHECK(cm_buf_adds(&b, ",\"sources\":["));
    for (size_t i = 0; i < c->sources.n; i++) {
        if (i) CHECK(cm_buf_addc(&b, ','));
        CHECK(cm_utf8_add_json_str(&b, c->sources.v[i], strlen(c->sources.v[i])));
    }
    CHECK(cm_buf_adds(&b, "],\"extraPaths\":["));
    for (size_t i = 0; i < c->extra_paths.n; i++) {
        if (i) CHECK(cm_buf_addc(&b, ','));
        CHECK(cm_utf8_add_json_str(&b, c->extra_paths.v[i], strlen(c->extra_paths.v[i])));
    }
    CHECK(cm_buf_addc(&b, ']'));
    if (c->multimodal) /* only when on: the payload of other configs is unchanged */
        CHECK(cm_buf_printf(&b, ",\"multimodal\":{\"modalities\":[%s%s%s],\"maxFileBytes\":%d}",
                            c->multimodal & CM_MEDIA_IMAGE ? "\"image\"" : "",
                            c->multimodal == (CM_MEDIA_IMAGE | CM_MEDIA_AUDIO) ? "," : "",
                            c->multimodal & CM_MEDIA_AUDIO ? "\"audio\"" : "",
                            c->multimodal_max_bytes));
    CHECK(add_kv_str(&b, "citations", config_citations_name(c->citations)));
    CHECK(cm_buf_printf(
        &b, ",\"sync\":{\"watch\":%s,\"watchDebounceMs\":%d,\"intervalMinutes\":%g}",
        c->sync_watch ? "true" : "false", c->watch_debounce_ms, c->sync_interval_minutes));
    CHECK(cm_buf_printf(&b, ",\"memoryWrite\":%s", engine_writable(e) ? "true" : "false"));
    if (engine_pg(e)) { /* the DSN may hold a password: never shown */
        CHECK(add_kv_str(&b, "indexPath", "postgres (memorySearch.store.dsn)"));
        CHECK(add_kv_str(&b, "storeDriver", "postgres"));
    } else {
        CHECK(add_kv_str(&b, "indexPath", c->store_path));
    }
    rc = cm_engine_ensure_store(e, msg, sizeof msg);
    if (!rc && cm_engine_index_workspace_matches(e, false, msg, sizeof msg) == CM_ENOTFOUND)
        rc = CM_ENOTFOUND;
    if (rc == CM_ENOMEM) CHECK(rc);
    if (rc) {
        CHECK(cm_buf_printf(&b, ",\"indexExists\":%s", rc == CM_ENOTFOUND ? "false" : "true"));
        CHECK(add_kv_str(&b, "indexError", msg));
        rc = CM_OK;
        CHECK(cm_buf_adds(&b, ",\"files\":0,\"chunks\":0,\"problems\":[]}"));
        goto done;
    }
    int64_t nfiles = 0, nchunks = 0, nvec = 0, ncache = 0;
    char *dims = NULL;
    buf fp = BUF_INIT, tp = BUF_INIT;
    /* Everything read from the index is checked before any of it is shown:
     * a damaged or crafted index is an indexError with the --force hint. */
    rc = cm_store_counts(&e->st, &nfiles, &nchunks, msg, sizeof msg);
    if (!rc) rc = cm_store_meta_get(&e->st, STORE_PROBLEMS_KEY, &transient, msg, sizeof msg);
    if (!rc) rc = problems_json(&e->st, transient, &tp, msg, sizeof msg);
    if (!rc) rc = cm_store_file_problems(&e->st, &fp, msg, sizeof msg);
    if (!rc) rc = cm_store_count(&e->st, "vectors WHERE dims > 0", &nvec, msg, sizeof msg);
    if (!rc) rc = cm_store_count(&e->st, "embedding_cache", &ncache, msg, sizeof msg);
    if (!rc) rc = cm_store_meta_get(&e->st, VECTOR_DIMS_KEY, &dims, msg, sizeof msg);
    if (!rc && dims && !dims_valid(dims))
        rc = cm_store_corrupt(&e->st, "the meta table", msg, sizeof msg);
    if (rc && rc != CM_ENOMEM) {
        cm_buf_release(&fp);
        cm_buf_release(&tp);
        free(dims);
        CHECK(cm_buf_adds(&b, ",\"indexExists\":true"));
        CHECK(add_kv_str(&b, "indexError", msg));
        rc = CM_OK;
        CHECK(cm_buf_adds(&b, ",\"files\":0,\"chunks\":0,\"problems\":[]}"));
        goto done;
    }
    if (!rc)
        rc = cm_buf_printf(&b, ",\"indexExists\":true,\"files\":%lld,\"chunks\":%lld",
                           (long long)nfiles, (long long)nchunks);
    if (!rc)
        rc = cm_buf_printf(&b,
                           ",\"vector\":{\"enabled\":%s,\"dims\":%s,\"vectors\":%lld,"
                           "\"path\":\"in-process %s scan\",\"sqliteVec\":\"not loaded: the "
                           "in-process index serves\",\"inMemory\":{\"rows\":%zu,\"scan\":\"%s\","
                           "\"fullLoads\":%u,\"logUpdates\":%u}},\"cache\":{\"enabled\":%s,"
                           "\"entries\":%lld,\"maxEntries\":%d}",
                           e->have_prov ? "true" : "false", dims ? dims : "0", (long long)nvec,
                           cm_vec_kernels_best()->name, e->vx_loaded ? e->vx.n : 0,
                           e->vx_loaded ? cm_vec_search_path(&e->vx) : "not loaded", e->vx_loads,
                           e->vx_updates, c->cache_enabled ? "true" : "false", (long long)ncache,
                           c->cache_max_entries);
    free(dims);
    struct stat ist;
    if (!rc && !engine_pg(e) && stat(c->store_path, &ist) == 0)
        rc = cm_buf_printf(&b, ",\"indexBytes\":%lld", (long long)ist.st_size);
    /* problems: imperfectly indexed files, then what the last sync could not read */
    if (!rc) rc = cm_buf_adds(&b, ",\"problems\":");
    if (!rc) {
        bool a = fp.len > 2, tr = tp.len > 2;
        rc = cm_buf_add(&b, fp.data, a ? fp.len - 1 : 1);
        if (!rc && a && tr) rc = cm_buf_addc(&b, ',');
        if (!rc && tr) rc = cm_buf_add(&b, tp.data + 1, tp.len - 2);
        if (!rc) rc = cm_buf_addc(&b, ']');
    }
    cm_buf_release(&fp);
    cm_buf_release(&tp);
    CHECK(rc);
    CHECK(cm_engine_batch_status(e, &b, err, errlen)); /* remote.batch: pending batches */
    if (deep) {
        bool ok = false;
        size_t dirty = 0;
        rc = cm_store_check(&e->st, &ok, msg, sizeof msg);
        if (!rc) rc = count_dirty(e, &dirty, msg, sizeof msg);
        if (rc == CM_ENOMEM) CHECK(rc);
        if (rc) {
            CHECK(add_kv_str(&b, "integrity", msg));
            rc = CM_OK;
        } else {
            CHECK(add_kv_str(&b, "integrity", ok ? "ok" : "corrupt"));
            CHECK(cm_buf_printf(&b, ",\"dirtyFiles\":%zu", dirty));
        }
    }
    CHECK(cm_buf_addc(&b, '}'));
done:
    *json = cm_buf_detach(&b);
out:
    if (rc) cm_seterr(err, errlen, rc, "status: %s", cm_strerror(rc));
    free(transient);
    cm_buf_release(&b);
    return rc;
}

/* ---- the index by source and month (cm_engine_index_months) ---- */

typedef struct months_ctx {
    json_t *rows;
    int64_t files, chunks;
    bool oom;
} months_ctx;

static bool month_row(void *ctx, const char *source, const char *month, int64_t files,
                      int64_t chunks)
{
    months_ctx *m = ctx;
    /* the index's strings are checked: text only, short */
    char s[64], mo[16];
    size_t ns = cm_utf8_valid_prefix(source, CM_MIN(strlen(source), sizeof s - 1));
    snprintf(s, sizeof s, "%.*s", (int)ns, source);
    snprintf(mo, sizeof mo, "%s", month);
    json_t *r = json_pack("{s:s,s:s,s:I,s:I}", "source", s, "month", mo, "files",
                          (json_int_t)files, "chunks", (json_int_t)chunks);
    if (!r || json_array_append_new(m->rows, r)) {
        m->oom = true;
        return false;
    }
    m->files += files;
    m->chunks += chunks;
    return true;
}

cm_rc cm_engine_index_months(cm_engine *e, char **json, char *err, size_t errlen)
{
    *json = NULL;
    months_ctx m = {json_array(), 0, 0, false};
    cm_rc rc = m.rows ? cm_engine_ensure_store(e, err, errlen) : CM_ENOMEM;
    if (!rc) rc = cm_store_months(&e->st, month_row, &m, err, errlen);
    if (!rc && m.oom) rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    if (!rc) {
        json_t *o = json_pack("{s:O,s:I,s:I}", "months", m.rows, "files", (json_int_t)m.files,
                              "chunks", (json_int_t)m.chunks);
        *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!*json) rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    json_decref(m.rows);
    return rc;
}
