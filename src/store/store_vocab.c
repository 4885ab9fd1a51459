/*
 * store_vocab.c — the SQLite store's vocabulary counts (store.h's
 * cm_store_term_docs), for the query side's typo tolerance (search.c).
 */
#include "store.h"

cm_rc cm_store_term_docs(store *s, const char *terms, size_t n, int64_t *docs, char *err,
                         size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        docs[i] = 0;
    if (s->pg || !n) return CM_OK;
    cm_rc rc = CM_OK;
    sqlite3_stmt *q = NULL;
    int r = sqlite3_exec(s->db,
                         "CREATE VIRTUAL TABLE IF NOT EXISTS temp.cm_vocab USING "
                         "fts5vocab(main, 'chunks_fts', 'row')",
                         NULL, NULL, NULL);
    if (r == SQLITE_OK)
        r = sqlite3_prepare_v2(s->db, "SELECT j.key, v.doc FROM json_each(?1) j JOIN temp.cm_vocab v "
                               "ON v.term = j.value", -1, &q,
                               NULL);
    if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "read the vocabulary", err, errlen));
    /* one statement: opening an fts5vocab cursor prepares one of its own */
    buf js = BUF_INIT;
    const char *p = terms;
    CHECK(cm_buf_addc(&js, '['));
    for (size_t i = 0; i < n && *p && !rc; i++) { /* terms are letters: no escapes */
        const char *sp = strchr(p, ' ');
        size_t l = sp ? (size_t)(sp - p) : strlen(p);
        rc = i ? cm_buf_adds(&js, ",\"") : cm_buf_addc(&js, '"');
        for (size_t j = 0; j < l && !rc; j++)
            rc = p[j] == '"' || p[j] == '\\' || (unsigned char)p[j] < 0x20 ? CM_OK
                                                                          : cm_buf_addc(&js, p[j]);
        if (!rc) rc = cm_buf_addc(&js, '"');
        p = sp ? sp + 1 : p + l;
    }
    if (!rc) rc = cm_buf_addc(&js, ']');
    if (rc) {
        cm_buf_release(&js);
        goto out;
    }
    sqlite3_bind_text(q, 1, js.data, (int)js.len, SQLITE_TRANSIENT);
    cm_buf_release(&js);
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t k = sqlite3_column_int64(q, 0);
        if (k >= 0 && (size_t)k < n) docs[k] = sqlite3_column_int64(q, 1);
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read the vocabulary", err, errlen));
out:
    sqlite3_finalize(q);
    return rc;
}
