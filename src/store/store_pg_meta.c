/*
 * store_pg_meta.c — the PostgreSQL store's reads and small writes of one
 * agent's rows (store_pg.h's twins of the SQLite store's calls): its meta
 * keys, its file rows, the files with problems, row counts, the integrity
 * check and the data version. Statements run through cm_store_pg_run
 * (store_pg.c) on the store's connection; not thread safe, as the store.
 */
#include <libpq-fe.h>

#include "../base/utf8.h"
#include "store_pg_int.h"

/* ---- meta and file rows ------------------------------------------------------- */

cm_rc cm_store_pg_meta_get(store *s, const char *key, char **json, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent, key};
    *json = NULL;
    cm_rc rc = cm_store_pg_run(s, "SELECT value FROM clawmem_meta WHERE agent_id = $1 AND key = $2",
                               2, pa, "read meta", &r, err, errlen);
    if (rc) return rc;
    if (cm_store_pg_lib.ntuples(r) && !(*json = cm_strdup(cm_store_pg_lib.getvalue(r, 0, 0))))
        rc = CM_ENOMEM;
    cm_store_pg_lib.clear(r);
    return rc;
}

void cm_store_pg_saw_version(store *s, int64_t v)
{
    s->pg->seen_version = v;
    s->pg->version_fresh = true;
}

void cm_store_pg_meta_forget(store *s)
{
    free(s->pg->meta_key);
    free(s->pg->meta_val);
    s->pg->meta_key = s->pg->meta_val = NULL;
    s->pg->meta_have = false;
    s->pg->meta_version = -1;
    s->pg->seen_version = -1;
    s->pg->version_fresh = false;
}

/* One statement reads the row and the version it belongs to; the copy
 * serves while no later statement saw another version. */
cm_rc cm_store_pg_meta_get_recent(store *s, const char *key, char **json, char *err,
                                  size_t errlen)
{
    struct store_pg *p = s->pg;
    *json = NULL;
    if (p->meta_key && p->meta_version >= 0 && p->meta_version == p->seen_version &&
        strcmp(p->meta_key, key) == 0) {
        if (p->meta_have && !(*json = cm_strdup(p->meta_val))) return CM_ENOMEM;
        return CM_OK;
    }
    PGresult *r = NULL;
    const char *pa[] = {p->agent, key};
    cm_rc rc = cm_store_pg_run(s,
                               "SELECT (SELECT value FROM clawmem_meta WHERE agent_id = $1 AND "
                               "key = $2), (SELECT version FROM clawmem_agents WHERE agent_id = $1)",
                               2, pa, "read meta", &r, err, errlen);
    if (rc) return rc;
    bool have = !cm_store_pg_lib.getisnull(r, 0, 0);
    int64_t v = cm_store_pg_lib.getisnull(r, 0, 1)
                    ? -1
                    : strtoll(cm_store_pg_lib.getvalue(r, 0, 1), NULL, 10);
    if (have && !(*json = cm_strdup(cm_store_pg_lib.getvalue(r, 0, 0)))) rc = CM_ENOMEM;
    cm_store_pg_meta_forget(s);
    if (!rc && v >= 0 && (p->meta_key = cm_strdup(key)) &&
        (!have || (p->meta_val = cm_strdup(*json)))) {
        p->meta_have = have;
        p->meta_version = p->seen_version = v;
    }
    cm_store_pg_lib.clear(r);
    return rc;
}

cm_rc cm_store_pg_meta_set(store *s, const char *key, const char *json, char *err, size_t errlen)
{
    cm_store_pg_meta_forget(s);
    bool own;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (rc) return rc;
    const char *pa[] = {s->pg->agent, key, json};
    rc = cm_store_pg_run(
        s,
        "INSERT INTO clawmem_meta(agent_id, key, value) VALUES($1, $2, $3) ON CONFLICT "
        "(agent_id, key) DO UPDATE SET value = excluded.value",
        3, pa, "write meta", NULL, err, errlen);
    return cm_store_pg_w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_files_load(store *s, stored_files *out, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    memset(out, 0, sizeof *out);
    cm_rc rc = cm_store_pg_run(
        s,
        "SELECT path, hash, mtime, size FROM clawmem_files WHERE agent_id = $1 ORDER "
        "BY path COLLATE \"C\"",
        1, pa, "read files", &r, err, errlen);
    if (rc) return rc;
    int n = cm_store_pg_lib.ntuples(r);
    if (n && !(out->v = calloc((size_t)n, sizeof *out->v))) CHECK(CM_ENOMEM);
    for (int i = 0; i < n; i++) {
        stored_file *f = &out->v[out->n++];
        f->path = cm_strdup(cm_store_pg_lib.getvalue(r, i, 0));
        f->hash = cm_strdup(cm_store_pg_lib.getvalue(r, i, 1));
        f->mtime_ns = strtoll(cm_store_pg_lib.getvalue(r, i, 2), NULL, 10);
        f->size = strtoll(cm_store_pg_lib.getvalue(r, i, 3), NULL, 10);
        if (!f->path || !f->hash) FAIL(CM_ENOMEM, "out of memory");
    }
out:
    cm_store_pg_lib.clear(r);
    if (rc) cm_store_stored_files_release(out);
    return rc;
}

/* ---- status -------------------------------------------------------------------- */

cm_rc cm_store_pg_file_problems(store *s, buf *out, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    cm_rc rc = cm_store_pg_run(
        s,
        "SELECT path, problem FROM clawmem_files WHERE agent_id = $1 AND problem IS "
        "NOT NULL ORDER BY path COLLATE \"C\"",
        1, pa, "read problems", &r, err, errlen);
    if (rc) return rc;
    rc = cm_buf_addc(out, '[');
    for (int i = 0; !rc && i < cm_store_pg_lib.ntuples(r); i++) {
        const char *p = cm_store_pg_lib.getvalue(r, i, 0), *w = cm_store_pg_lib.getvalue(r, i, 1);
        if (i) rc = cm_buf_addc(out, ',');
        if (!rc) rc = cm_buf_adds(out, "{\"path\":");
        if (!rc) rc = cm_utf8_add_json_str(out, p, strlen(p));
        if (!rc) rc = cm_buf_adds(out, ",\"problem\":");
        if (!rc) rc = cm_utf8_add_json_str(out, w, strlen(w));
        if (!rc) rc = cm_buf_addc(out, '}');
    }
    if (!rc) rc = cm_buf_addc(out, ']');
    cm_store_pg_lib.clear(r);
    return rc;
}

cm_rc cm_store_pg_count(store *s, const char *from, int64_t *n, char *err, size_t errlen)
{
    /* from: one of the SQLite store's table names with an optional WHERE */
    static const struct {
        const char *sqlite, *pg;
    } map[] = {{"files", "clawmem_files"},
               {"chunks", "clawmem_chunks"},
               {"vectors", "clawmem_vectors"},
               {"embedding_cache", "clawmem_cache"}};
    size_t tl = strcspn(from, " ");
    const char *table = NULL;
    for (size_t i = 0; i < ARRAY_LEN(map); i++)
        if (strlen(map[i].sqlite) == tl && strncmp(from, map[i].sqlite, tl) == 0) table = map[i].pg;
    if (!table) return cm_seterr(err, errlen, CM_EINVAL, "no table %.*s", (int)tl, from);
    const char *where = strstr(from + tl, "WHERE ");
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE agent_id = $1%s%s", table,
             where ? " AND " : "", where ? where + 6 : "");
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    cm_rc rc = cm_store_pg_run(s, sql, 1, pa, "count", &r, err, errlen);
    if (rc) return rc;
    *n = strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
    cm_store_pg_lib.clear(r);
    return CM_OK;
}

cm_rc cm_store_pg_months(store *s, store_month_fn fn, void *ctx, char *err, size_t errlen)
{
    static const char sql[] =
        "SELECT f.source, coalesce(to_char(to_timestamp(f.mtime / 1000000000) AT TIME ZONE 'UTC', "
        "'YYYY-MM'), 'unknown'), count(*), coalesce(sum((SELECT count(*) FROM clawmem_chunks c "
        "WHERE c.agent_id = f.agent_id AND c.path = f.path)), 0) FROM clawmem_files f "
        "WHERE f.agent_id = $1 GROUP BY 1, 2 ORDER BY 1, 2";
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    cm_rc rc = cm_store_pg_run(s, sql, 1, pa, "months", &r, err, errlen);
    if (rc) return rc;
    int n = cm_store_pg_lib.ntuples(r);
    for (int i = 0; i < n; i++)
        if (!fn(ctx, cm_store_pg_lib.getvalue(r, i, 0), cm_store_pg_lib.getvalue(r, i, 1),
                strtoll(cm_store_pg_lib.getvalue(r, i, 2), NULL, 10),
                strtoll(cm_store_pg_lib.getvalue(r, i, 3), NULL, 10)))
            break;
    cm_store_pg_lib.clear(r);
    return CM_OK;
}

cm_rc cm_store_pg_check(store *s, bool *ok, char *err, size_t errlen)
{
    /* The server keeps its own pages sound; what can go wrong is ours: a
     * chunk without its file row, a vector without its chunk, totals that
     * do not add up. */
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    *ok = false;
    cm_rc rc = cm_store_pg_run(
        s,
        "SELECT (SELECT count(*) FROM clawmem_chunks c WHERE c.agent_id = $1 AND NOT "
        "EXISTS (SELECT 1 FROM clawmem_files f WHERE f.agent_id = $1 AND f.path = "
        "c.path)) + (SELECT count(*) FROM clawmem_vectors v WHERE v.agent_id = $1 AND "
        "NOT EXISTS (SELECT 1 FROM clawmem_chunks c WHERE c.agent_id = $1 AND c.id = "
        "v.chunk_id)) + (SELECT count(*) FROM clawmem_agents a WHERE a.agent_id = $1 "
        "AND (a.nchunks <> (SELECT count(*) FROM clawmem_chunks c WHERE c.agent_id = "
        "$1) OR a.ntok <> (SELECT coalesce(sum(ntok), 0) FROM clawmem_chunks c WHERE "
        "c.agent_id = $1)))",
        1, pa, "integrity check", &r, err, errlen);
    if (rc) return rc;
    *ok = strcmp(cm_store_pg_lib.getvalue(r, 0, 0), "0") == 0;
    cm_store_pg_lib.clear(r);
    return CM_OK;
}

int64_t cm_store_pg_data_version(store *s)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    char ignore[8];
    int64_t v = -1;
    if (s->pg->version_fresh) { /* the search just run read it: no round trip */
        s->pg->version_fresh = false;
        return s->pg->seen_version;
    }
    if (cm_store_pg_run(s, "SELECT version FROM clawmem_agents WHERE agent_id = $1", 1, pa, "", &r,
                        ignore, sizeof ignore) == CM_OK) {
        if (cm_store_pg_lib.ntuples(r)) v = strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
        cm_store_pg_lib.clear(r);
    }
    if (v >= 0) s->pg->seen_version = v;
    return v;
}
