/*
 * store_stats.c — what status and doctor read from an SQLite index: counts
 * (by table, by source and month), the files indexed imperfectly, and the
 * integrity checks. PostgreSQL stores answer through store_pg.
 */
#include "../base/utf8.h"
#include "store.h"
#include "store_pg.h"
#include "store_stats.h"

cm_rc cm_store_file_problems(store *s, buf *out, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_file_problems(s, out, err, errlen);
    sqlite3_stmt *q = NULL;
    cm_rc rc = cm_buf_addc(out, '[');
    int r = sqlite3_prepare_v2(
        s->db, "SELECT path, problem FROM files WHERE problem IS NOT NULL ORDER BY path", -1, &q,
        NULL);
    for (int k = 0; r == SQLITE_OK || r == SQLITE_ROW; k++) {
        r = sqlite3_step(q);
        if (r != SQLITE_ROW || rc) break;
        const char *p = cm_store_col_text(q, 0);
        const char *w = cm_store_col_text(q, 1);
        if (!p || !w) {
            sqlite3_finalize(q);
            return cm_store_corrupt(s, "the files table", err, errlen);
        }
        if (k) rc = cm_buf_addc(out, ',');
        if (!rc) rc = cm_buf_adds(out, "{\"path\":");
        if (!rc) rc = cm_utf8_add_json_str(out, p, strlen(p));
        if (!rc) rc = cm_buf_adds(out, ",\"problem\":");
        if (!rc) rc = cm_utf8_add_json_str(out, w, strlen(w));
        if (!rc) rc = cm_buf_addc(out, '}');
    }
    sqlite3_finalize(q);
    if (!rc) rc = cm_buf_addc(out, ']');
    if (rc) return rc;
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "read problems", err, errlen);
}

cm_rc cm_store_count(store *s, const char *from, int64_t *n, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_count(s, from, n, err, errlen);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", from);
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(q);
    if (r == SQLITE_ROW) *n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return r == SQLITE_ROW ? CM_OK : cm_store_fail(s, r, "count", err, errlen);
}

cm_rc cm_store_months(store *s, store_month_fn fn, void *ctx, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_months(s, fn, ctx, err, errlen);
    static const char sql[] =
        "SELECT f.source, coalesce(strftime('%Y-%m', f.mtime / 1000000000, 'unixepoch'), "
        "'unknown'), count(*), sum((SELECT count(*) FROM chunks c WHERE c.path = f.path)) "
        "FROM files f GROUP BY 1, 2 ORDER BY 1, 2";
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    while (r == SQLITE_OK && (r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *src = cm_store_col_text(q, 0), *month = cm_store_col_text(q, 1);
        if (!fn(ctx, src ? src : "", month ? month : "unknown", sqlite3_column_int64(q, 2),
                sqlite3_column_int64(q, 3))) {
            r = SQLITE_DONE;
            break;
        }
        r = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "months", err, errlen);
}

cm_rc cm_store_counts(store *s, int64_t *files, int64_t *chunks, char *err, size_t errlen)
{
    cm_rc rc = cm_store_count(s, "files", files, err, errlen);
    return rc ? rc : cm_store_count(s, "chunks", chunks, err, errlen);
}

cm_rc cm_store_check(store *s, bool *ok, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_check(s, ok, err, errlen);
    sqlite3_stmt *q = NULL;
    *ok = false;
    int r = sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(q);
    if (r == SQLITE_ROW)
        *ok = cm_store_col_text(q, 0) && strcmp(cm_store_col_text(q, 0), "ok") == 0;
    sqlite3_finalize(q);
    if (r != SQLITE_ROW) return cm_store_fail(s, r, "integrity check", err, errlen);
    if (!*ok) return CM_OK;
    /* FTS5 consistency: for a contentless table only the index's own structure
     * can be checked. */
    r = sqlite3_exec(s->db, "INSERT INTO chunks_fts(chunks_fts) VALUES('integrity-check')", NULL,
                     NULL, NULL);
    if ((r & 0xff) == SQLITE_CORRUPT)
        *ok = false;
    else if (r != SQLITE_OK)
        return cm_store_fail(s, r, "keyword index check", err, errlen);
    return CM_OK;
}
