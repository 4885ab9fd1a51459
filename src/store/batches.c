/*
 * batches.c — the embedding batches a sync submitted and has not collected
 * yet (memorySearch.remote.batch): one row per batch (its id at the
 * provider, the provider, model and providerKey it was made for, its last
 * state) and the chunk hashes it covers. They live in the index so that a
 * sync that was killed or did not wait picks its batches up again instead of
 * paying for them twice. The tables are created on first use (an older
 * index has none, and reads of it see no batches). A PostgreSQL index keeps
 * them in its own tables, per agent (store_pg_batches.c).
 */
#include <unistd.h>

#include "store_pg.h"

static const char batches_sql[] =
    "CREATE TABLE IF NOT EXISTS embed_batches(id TEXT PRIMARY KEY, provider TEXT NOT NULL, "
    "model TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, items INTEGER NOT NULL, "
    "created INTEGER NOT NULL, updated INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS embed_batch_items(batch_id TEXT NOT NULL, hash TEXT NOT NULL, "
    "PRIMARY KEY(batch_id, hash)) WITHOUT ROWID;";

cm_rc cm_store_batches_ensure(store *s, char *err, size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_batches_ensure(s, err, errlen);
    int r = sqlite3_exec(s->db, batches_sql, NULL, NULL, NULL);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "create the batch tables", err, errlen);
}

/* 1 when the index has the batch tables, 0 when not, -1 on error. */
static int has_tables(store *s, const char *schema)
{
    sqlite3_stmt *q = NULL;
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM %s.sqlite_master WHERE name IN ('embed_batches', "
             "'embed_batch_items')",
             schema);
    int r = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(q);
    int have = r == SQLITE_ROW ? sqlite3_column_int(q, 0) == 2 : -1;
    sqlite3_finalize(q);
    return have;
}

void cm_store_batches_release(store_batch *b, size_t n)
{
    for (size_t i = 0; b && i < n; i++) {
        free(b[i].id);
        free(b[i].provider);
        free(b[i].model);
        free(b[i].key);
        free(b[i].state);
    }
    free(b);
}

cm_rc cm_store_batches_list(store *s, store_batch **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (store_is_pg(s)) return cm_store_pg_batches_list(s, out, n, err, errlen);
    int have = has_tables(s, "main");
    if (have < 0) return cm_store_fail(s, SQLITE_ERROR, "read the batches", err, errlen);
    if (!have) return CM_OK;
    sqlite3_stmt *q = NULL;
    cm_rc rc = CM_OK;
    size_t cap = 0;
    int r = sqlite3_prepare_v2(s->db,
                               "SELECT id, provider, model, key, state, items, created, updated "
                               "FROM embed_batches ORDER BY created, id",
                               -1, &q, NULL);
    while (q && (r = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            store_batch *nb = realloc(*out, nc * sizeof *nb);
            if (!nb) CHECK(CM_ENOMEM);
            *out = nb;
            cap = nc;
        }
        store_batch *b = &(*out)[*n];
        memset(b, 0, sizeof *b);
        (*n)++;
        const char *t[5];
        for (int i = 0; i < 5; i++)
            if (!(t[i] = cm_store_col_text(q, i)))
                CHECK(cm_store_corrupt(s, "the batch table", err, errlen));
        b->id = cm_strdup(t[0]);
        b->provider = cm_strdup(t[1]);
        b->model = cm_strdup(t[2]);
        b->key = cm_strdup(t[3]);
        b->state = cm_strdup(t[4]);
        if (!b->id || !b->provider || !b->model || !b->key || !b->state) CHECK(CM_ENOMEM);
        if (!cm_store_col_int(q, 5, 0, INT64_MAX, &b->items) ||
            !cm_store_col_int(q, 6, INT64_MIN, INT64_MAX, &b->created) ||
            !cm_store_col_int(q, 7, INT64_MIN, INT64_MAX, &b->updated))
            CHECK(cm_store_corrupt(s, "the batch table", err, errlen));
    }
    if (r != SQLITE_DONE) rc = cm_store_fail(s, r, "read the batches", err, errlen);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    sqlite3_finalize(q);
    if (rc) {
        cm_store_batches_release(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cm_rc cm_store_batch_add(store *s, const store_batch *b, const char *const *hashes, size_t n,
                         char *err, size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_batch_add(s, b, hashes, n, err, errlen);
    sqlite3_stmt *q = NULL;
    int r =
        sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO embed_batches(id, provider, model, key, "
                           "state, items, created, updated) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                           -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, b->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, b->provider, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, b->model, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 4, b->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 5, b->state, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 6, (sqlite3_int64)n);
        sqlite3_bind_int64(q, 7, b->created);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    q = NULL;
    if (r != SQLITE_DONE) return cm_store_fail(s, r, "record a batch", err, errlen);
    r = sqlite3_prepare_v2(s->db,
                           "INSERT OR IGNORE INTO embed_batch_items(batch_id, hash) VALUES(?1, ?2)",
                           -1, &q, NULL);
    for (size_t i = 0; r == SQLITE_OK && i < n; i++) {
        sqlite3_bind_text(q, 1, b->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, hashes[i], -1, SQLITE_STATIC);
        r = sqlite3_step(q);
        if (r == SQLITE_DONE) r = sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "record a batch", err, errlen);
}

cm_rc cm_store_batch_hashes(store *s, const char *id, char ***hashes, size_t *n, char *err,
                            size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_batch_hashes(s, id, hashes, n, err, errlen);
    sqlite3_stmt *q = NULL;
    cm_rc rc = CM_OK;
    size_t cap = 0;
    *hashes = NULL;
    *n = 0;
    int r = sqlite3_prepare_v2(s->db, "SELECT hash FROM embed_batch_items WHERE batch_id = ?1", -1,
                               &q, NULL);
    if (r == SQLITE_OK) sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    while (q && (r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *h = cm_store_col_text(q, 0);
        if (!h) CHECK(cm_store_corrupt(s, "the batch table", err, errlen));
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **nh = realloc(*hashes, nc * sizeof *nh);
            if (!nh) CHECK(CM_ENOMEM);
            *hashes = nh;
            cap = nc;
        }
        if (!((*hashes)[*n] = cm_strdup(h))) CHECK(CM_ENOMEM);
        (*n)++;
    }
    if (r != SQLITE_DONE) rc = cm_store_fail(s, r, "read a batch", err, errlen);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    sqlite3_finalize(q);
    if (rc) {
        for (size_t i = 0; i < *n; i++)
            free((*hashes)[i]);
        free(*hashes);
        *hashes = NULL;
        *n = 0;
    }
    return rc;
}

cm_rc cm_store_batch_state(store *s, const char *id, const char *state, int64_t now, char *err,
                           size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_batch_state(s, id, state, now, err, errlen);
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(
        s->db, "UPDATE embed_batches SET state = ?2, updated = ?3 WHERE id = ?1", -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, state, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 3, now);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "record a batch's state", err, errlen);
}

cm_rc cm_store_batch_delete(store *s, const char *id, char *err, size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_batch_delete(s, id, err, errlen);
    static const char *const sql[] = {"DELETE FROM embed_batch_items WHERE batch_id = ?1",
                                      "DELETE FROM embed_batches WHERE id = ?1"};
    int r = SQLITE_OK;
    for (size_t i = 0; i < 2 && r == SQLITE_OK; i++) {
        sqlite3_stmt *q = NULL;
        r = sqlite3_prepare_v2(s->db, sql[i], -1, &q, NULL);
        if (r == SQLITE_OK) {
            sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
            r = sqlite3_step(q);
            if (r == SQLITE_DONE) r = SQLITE_OK;
        }
        sqlite3_finalize(q);
    }
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "forget a batch", err, errlen);
}

cm_rc cm_store_chunk_text(store *s, sqlite3_stmt **q, int64_t id, char **text, char *err,
                          size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_chunk_text(s, id, text, err, errlen);
    *text = NULL;
    int r = *q ? SQLITE_OK
               : sqlite3_prepare_v2(s->db, "SELECT text FROM chunks WHERE id = ?1", -1, q, NULL);
    if (r != SQLITE_OK) return cm_store_fail(s, r, "read a chunk", err, errlen);
    sqlite3_reset(*q);
    sqlite3_bind_int64(*q, 1, id);
    r = sqlite3_step(*q);
    cm_rc rc = CM_OK;
    if (r == SQLITE_ROW) {
        const char *t = cm_store_col_text(*q, 0);
        if (!t)
            rc = cm_store_corrupt(s, "the chunks table", err, errlen);
        else if (!(*text = cm_strdup(t)))
            rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    } else if (r != SQLITE_DONE) {
        rc = cm_store_fail(s, r, "read a chunk", err, errlen);
    }
    sqlite3_reset(*q);
    return rc;
}

cm_rc cm_store_batches_import(store *s, const char *old_path, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    if (store_is_pg(s)) return CM_OK; /* the agent's batch rows stay through a rebuild */
    if (access(old_path, R_OK) != 0) return CM_OK; /* ATTACH would create it */
    if (cm_store_owner(old_path, NULL) != STORE_OWNER_CLAWMEM) return CM_OK; /* not ours */
    int r = sqlite3_prepare_v2(s->db, "ATTACH DATABASE ?1 AS oldb", -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, old_path, -1, SQLITE_STATIC);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    cm_rc rc = CM_OK;
    if (r == SQLITE_DONE && has_tables(s, "oldb") == 1) {
        rc = cm_store_batches_ensure(s, err, errlen);
        /* best effort, as the cache: a batch not carried over is paid again */
        if (!rc) {
            sqlite3_exec(s->db,
                         "INSERT OR IGNORE INTO embed_batches SELECT * FROM oldb.embed_batches",
                         NULL, NULL, NULL);
            sqlite3_exec(s->db,
                         "INSERT OR IGNORE INTO embed_batch_items SELECT * FROM "
                         "oldb.embed_batch_items",
                         NULL, NULL, NULL);
        }
    }
    sqlite3_exec(s->db, "DETACH DATABASE oldb", NULL, NULL, NULL);
    return rc;
}

cm_rc cm_store_batches_lease(store *s, bool wait, bool *held, char *err, size_t errlen)
{
    if (store_is_pg(s)) return cm_store_pg_batch_lease(s, wait, held, err, errlen);
    *held = true; /* the index's writer lock is the caller's */
    return CM_OK;
}

bool cm_store_batches_leased(store *s)
{
    return !store_is_pg(s) || cm_store_pg_batch_leased(s);
}

void cm_store_batches_unlease(store *s)
{
    if (store_is_pg(s)) cm_store_pg_batch_unlease(s);
}
