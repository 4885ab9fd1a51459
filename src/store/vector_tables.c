/*
 * vector_tables.c — the store's vector side: per-chunk vectors and the embedding
 * cache, both little-endian float32 BLOBs (never JSON text), the cache keyed
 * by (provider, model, provider_key, chunk hash) so text that moves is never
 * embedded twice, and loading every vector into a vec_index.
 *
 * The vector log: triggers on `vectors` append the chunk id of every row
 * inserted, replaced or deleted to vector_log(seq AUTOINCREMENT, chunk_id),
 * whoever writes. A reader that loaded the vectors at seq S brings its
 * in-memory index up to date by reading the ids logged after S and looking
 * each one up (k changes cost k lookups, not a reload). The writer trims the
 * log to its last VECTOR_LOG_KEEP entries; a reader that fell further behind
 * (or an index without the log) reloads.
 */
#include <unistd.h>

#include "store.h"
#include "store_pg.h"

/* BLOBs are little-endian float32; convert on big-endian hosts. */
static void to_le(float *v, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, &v[i], 4);
        x = __builtin_bswap32(x);
        memcpy(&v[i], &x, 4);
    }
#else
    (void)v;
    (void)n;
#endif
}

cm_rc cm_store_pending_vectors(store *s, int64_t after_id, size_t limit, pending_chunk **out,
                               size_t *n, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_pending_vectors(s, after_id, limit, out, n, err, errlen);
    sqlite3_stmt *q = NULL;
    cm_rc rc = CM_OK;
    *out = calloc(limit ? limit : 1, sizeof **out);
    *n = 0;
    if (!*out) return CM_ENOMEM;
    int r = sqlite3_prepare_v2(
        s->db,
        "SELECT c.id, c.hash, c.text, c.path FROM chunks c LEFT JOIN vectors v "
        "ON v.chunk_id = c.id WHERE v.chunk_id IS NULL AND c.id > ?2 ORDER BY c.id "
        "LIMIT ?1",
        -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, (sqlite3_int64)limit);
        sqlite3_bind_int64(q, 2, after_id);
    }
    while (r == SQLITE_OK && (r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *hash = cm_store_col_text(q, 1), *text = cm_store_col_text(q, 2);
        const char *path = cm_store_col_text(q, 3);
        if (!hash || !text || !path || strlen(hash) != SHA256_HEX_LEN) {
            rc = cm_store_corrupt(s, "the chunks table", err, errlen);
            break;
        }
        pending_chunk *p = &(*out)[(*n)++];
        p->id = sqlite3_column_int64(q, 0);
        snprintf(p->hash, sizeof p->hash, "%s", hash);
        p->text = cm_strdup(text);
        p->path = cm_strdup(path);
        if (!p->text || !p->path) {
            rc = CM_ENOMEM;
            break;
        }
        r = SQLITE_OK;
    }
    if (!rc && r != SQLITE_DONE) rc = cm_store_fail(s, r, "read chunks to embed", err, errlen);
    sqlite3_finalize(q);
    if (rc) cm_store_pending_release(*out, *n);
    if (rc) *out = NULL;
    return rc;
}

cm_rc cm_store_cache_get(store *s, const char *provider, const char *model, const char *key,
                         const char *hash, float **out, int *dims, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_cache_get(s, provider, model, key, hash, out, dims, err, errlen);
    sqlite3_stmt *q = NULL;
    *out = NULL;
    *dims = 0;
    int r = sqlite3_prepare_v2(s->db,
                               "SELECT dims, embedding FROM embedding_cache WHERE provider = ?1 "
                               "AND model = ?2 AND provider_key = ?3 AND hash = ?4",
                               -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, provider, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, model, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 4, hash, -1, SQLITE_STATIC);
        r = sqlite3_step(q);
    }
    cm_rc rc = CM_OK;
    int d = r == SQLITE_ROW ? sqlite3_column_int(q, 0) : 0;
    if (r == SQLITE_ROW && d > 0 && sqlite3_column_bytes(q, 1) == d * 4) {
        if (!(*out = malloc((size_t)d * 4)))
            rc = CM_ENOMEM;
        else {
            memcpy(*out, sqlite3_column_blob(q, 1), (size_t)d * 4);
            to_le(*out, (size_t)d);
            *dims = d;
        }
    } else if (r != SQLITE_ROW && r != SQLITE_DONE) {
        rc = cm_store_fail(s, r, "read the embedding cache", err, errlen);
    }
    sqlite3_finalize(q);
    return rc;
}

static cm_rc put_blob(store *s, const char *sql, const float *v, int dims, const char *const *text,
                      int ntext, int64_t id, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    float *le = malloc(dims ? (size_t)dims * 4 : 1);
    if (!le) return CM_ENOMEM;
    if (dims) memcpy(le, v, (size_t)dims * 4);
    to_le(le, (size_t)dims);
    int r = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    if (r == SQLITE_OK) {
        int k = 1;
        for (int i = 0; i < ntext; i++)
            sqlite3_bind_text(q, k++, text[i], -1, SQLITE_STATIC);
        if (id >= 0) sqlite3_bind_int64(q, k++, id);
        sqlite3_bind_int(q, k++, dims);
        sqlite3_bind_blob(q, k++, le, dims * 4, SQLITE_STATIC);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    free(le);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "write a vector", err, errlen);
}

cm_rc cm_store_cache_put(store *s, const char *provider, const char *model, const char *key,
                         const char *hash, const float *v, int dims, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_cache_put(s, provider, model, key, hash, v, dims, err, errlen);
    const char *t[] = {provider, model, key, hash};
    return put_blob(s,
                    "INSERT OR REPLACE INTO embedding_cache(provider, model, provider_key, hash, "
                    "dims, embedding, updated_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, "
                    "CAST(strftime('%s','now') AS INTEGER))",
                    v, dims, t, 4, -1, err, errlen);
}

cm_rc cm_store_vector_put(store *s, int64_t chunk_id, const float *v, int dims, char *err,
                          size_t errlen)
{
    if (s->pg) return cm_store_pg_vector_put(s, chunk_id, v, dims, err, errlen);
    return put_blob(s,
                    "INSERT OR REPLACE INTO vectors(chunk_id, dims, embedding) VALUES(?1, ?2, ?3)",
                    v, dims, NULL, 0, chunk_id, err, errlen);
}

cm_rc cm_store_cache_trim(store *s, int max_entries, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_cache_trim(s, max_entries, err, errlen);
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db,
                               "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM "
                               "embedding_cache ORDER BY updated_at, rowid LIMIT max(0, "
                               "(SELECT count(*) FROM embedding_cache) - ?1))",
                               -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_int(q, 1, max_entries);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "trim the embedding cache", err, errlen);
}

cm_rc cm_store_cache_import(store *s, const char *old_path, char *err, size_t errlen)
{
    if (s->pg) return CM_OK; /* the agent's cache stays through a rebuild */
    sqlite3_stmt *q = NULL;
    if (access(old_path, R_OK) != 0) return CM_OK; /* ATTACH would create it */
    /* another program's embedding_cache has other columns (--force over it) */
    if (cm_store_owner(old_path, NULL) != STORE_OWNER_CLAWMEM) return CM_OK;
    int r = sqlite3_prepare_v2(s->db, "ATTACH DATABASE ?1 AS old", -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, old_path, -1, SQLITE_STATIC);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    if (r != SQLITE_DONE) {
        sqlite3_exec(s->db, "DETACH DATABASE old", NULL, NULL, NULL);
        return CM_OK; /* no usable old index: nothing to reuse */
    }
    /* An unreadable old cache only costs re-embedding: errors are not fatal. */
    sqlite3_exec(s->db, "INSERT OR IGNORE INTO embedding_cache SELECT * FROM old.embedding_cache",
                 NULL, NULL, NULL);
    sqlite3_exec(s->db, "DETACH DATABASE old", NULL, NULL, NULL);
    (void)err;
    (void)errlen;
    return CM_OK;
}

static const char vector_log_sql[] =
    "CREATE TABLE IF NOT EXISTS vector_log(seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id "
    "INTEGER NOT NULL);"
    "CREATE TRIGGER IF NOT EXISTS vector_log_ins AFTER INSERT ON vectors BEGIN INSERT INTO "
    "vector_log(chunk_id) VALUES(new.chunk_id); END;"
    "CREATE TRIGGER IF NOT EXISTS vector_log_upd AFTER UPDATE ON vectors BEGIN INSERT INTO "
    "vector_log(chunk_id) VALUES(new.chunk_id); INSERT INTO vector_log(chunk_id) "
    "VALUES(old.chunk_id); END;"
    "CREATE TRIGGER IF NOT EXISTS vector_log_del AFTER DELETE ON vectors BEGIN INSERT INTO "
    "vector_log(chunk_id) VALUES(old.chunk_id); END;";

/* 1 when the index has the vector log, 0 when not, -1 on error. */
static int has_log(store *s)
{
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db,
                               "SELECT count(*) FROM sqlite_master WHERE name IN ('vector_log', "
                               "'vector_log_ins', 'vector_log_upd', 'vector_log_del')",
                               -1, &q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(q);
    int have = r == SQLITE_ROW ? sqlite3_column_int(q, 0) == 4 : -1;
    sqlite3_finalize(q);
    return have;
}

cm_rc cm_store_vector_log_ensure(store *s, char *err, size_t errlen)
{
    if (s->pg) return CM_OK; /* part of the schema (store_pg.c) */
    int have = has_log(s);
    if (have == 1) return CM_OK;
    int r = have < 0 ? SQLITE_ERROR : sqlite3_exec(s->db, vector_log_sql, NULL, NULL, NULL);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "create the vector log", err, errlen);
}

cm_rc cm_store_vector_log_trim(store *s, char *err, size_t errlen)
{
    if (s->pg) return CM_OK; /* at each commit (store_pg.c) */
    if (has_log(s) != 1) return CM_OK;
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db,
                               "DELETE FROM vector_log WHERE seq <= (SELECT max(seq) FROM "
                               "vector_log) - ?1",
                               -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_int(q, 1, VECTOR_LOG_KEEP);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "trim the vector log", err, errlen);
}

/* The last seq of the log (0 when empty), -1 when there is no log. */
static int64_t log_head(store *s)
{
    if (has_log(s) != 1) return -1;
    sqlite3_stmt *q = NULL;
    int64_t seq = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT coalesce(max(seq), 0) FROM vector_log", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        seq = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return seq;
}

int64_t cm_store_vector_log_head(store *s)
{
    return s->pg ? -1 : log_head(s);
}

static uint8_t source_number(const char *src)
{
    return src && !strcmp(src, "sessions") ? 1 : 0;
}

/* A read transaction, so the vectors and the log's head are one snapshot.
 * Inside a transaction already (a writer's), nothing is begun. */
static bool read_begin(store *s)
{
    if (!sqlite3_get_autocommit(s->db)) return false;
    return sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
}

static void read_end(store *s, bool begun)
{
    if (begun) sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
}

cm_rc cm_store_vectors_update(store *s, int dims, vec_index *x, int64_t *seq, bool *reload,
                              char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_vectors_update(s, dims, x, seq, reload, err, errlen);
    cm_rc rc = CM_OK;
    sqlite3_stmt *q = NULL, *g = NULL;
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    float *v = NULL;
    *reload = false;
    if (*seq < 0) {
        *reload = true;
        return CM_OK;
    }
    bool begun = read_begin(s);
    int64_t head = log_head(s);
    if (head < 0 || head < *seq) { /* no log, or another file: start over */
        *reload = true;
        goto out;
    }
    if (head == *seq) goto out;
    int r = sqlite3_prepare_v2(
        s->db, "SELECT seq, chunk_id FROM vector_log WHERE seq > ?1 ORDER BY seq", -1, &q, NULL);
    if (r == SQLITE_OK) sqlite3_bind_int64(q, 1, *seq);
    int64_t first = -1;
    while (r == SQLITE_OK && (r = sqlite3_step(q)) == SQLITE_ROW) {
        r = SQLITE_OK;
        if (first < 0) first = sqlite3_column_int64(q, 0);
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            int64_t *ni = realloc(ids, cap * sizeof *ni);
            if (!ni) CHECK(CM_ENOMEM);
            ids = ni;
        }
        ids[n++] = sqlite3_column_int64(q, 1);
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read the vector log", err, errlen));
    /* entries trimmed away before this reader saw them, or so many changes
     * that loading everything is cheaper */
    if (first != *seq + 1 || n > x->n / 2 + 1024) {
        *reload = true;
        goto out;
    }
    if (!(v = malloc((size_t)dims * 4))) CHECK(CM_ENOMEM);
    r = sqlite3_prepare_v2(s->db,
                           "SELECT v.embedding, c.source FROM vectors v JOIN chunks c ON c.id = "
                           "v.chunk_id WHERE v.chunk_id = ?1 AND v.dims = ?2",
                           -1, &g, NULL);
    if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "read a vector", err, errlen));
    for (size_t i = 0; i < n; i++) {
        sqlite3_reset(g);
        sqlite3_bind_int64(g, 1, ids[i]);
        sqlite3_bind_int(g, 2, dims);
        r = sqlite3_step(g);
        if (r == SQLITE_ROW && sqlite3_column_bytes(g, 0) == dims * 4) {
            memcpy(v, sqlite3_column_blob(g, 0), (size_t)dims * 4);
            to_le(v, (size_t)dims);
            rc = cm_vec_index_put(x, ids[i], v, source_number(cm_store_col_text(g, 1)));
            if (rc == CM_OK) continue;
            if (rc != CM_EINVAL) CHECK(rc);
            rc = CM_OK; /* a zero vector is not searchable: as absent */
        } else if (r != SQLITE_ROW && r != SQLITE_DONE) {
            CHECK(cm_store_fail(s, r, "read a vector", err, errlen));
        }
        bool removed;
        CHECK(cm_vec_index_remove(x, ids[i], &removed));
    }
    *seq = head;
out:
    sqlite3_finalize(q);
    sqlite3_finalize(g);
    read_end(s, begun);
    free(ids);
    free(v);
    return rc;
}

cm_rc cm_store_vectors_load(store *s, int dims, vec_index *x, int64_t *seq, char *err,
                            size_t errlen)
{
    if (s->pg) return cm_store_pg_vectors_load(s, dims, x, seq, err, errlen);
    sqlite3_stmt *q = NULL;
    cm_rc rc = cm_vec_index_init(x, (size_t)dims);
    if (rc) return cm_seterr(err, errlen, rc, "bad vector dimensions %d", dims);
    float *v = malloc((size_t)dims * 4);
    if (!v) return CM_ENOMEM;
    bool begun = read_begin(s);
    *seq = log_head(s);
    int r = sqlite3_prepare_v2(s->db,
                               "SELECT v.chunk_id, v.embedding, c.source FROM vectors v JOIN "
                               "chunks c ON c.id = v.chunk_id WHERE v.dims = ?1",
                               -1, &q, NULL);
    if (r == SQLITE_OK) sqlite3_bind_int(q, 1, dims);
    while (r == SQLITE_OK && (r = sqlite3_step(q)) == SQLITE_ROW) {
        r = SQLITE_OK;
        if (sqlite3_column_bytes(q, 1) != dims * 4) continue;
        memcpy(v, sqlite3_column_blob(q, 1), (size_t)dims * 4);
        to_le(v, (size_t)dims);
        uint8_t sn = source_number(cm_store_col_text(q, 2));
        cm_rc ar = cm_vec_index_add(x, sqlite3_column_int64(q, 0), v, sn);
        if (ar == CM_ENOMEM) {
            rc = ar;
            break;
        }
    }
    if (!rc && r != SQLITE_DONE) rc = cm_store_fail(s, r, "load vectors", err, errlen);
    sqlite3_finalize(q);
    read_end(s, begun);
    free(v);
    if (rc) cm_vec_index_release(x);
    return rc;
}

cm_rc cm_store_chunk_get(store *s, int64_t id, fts_hit *out, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_chunk_get(s, id, out, err, errlen);
    sqlite3_stmt *q = NULL;
    memset(out, 0, sizeof *out);
    int r = sqlite3_prepare_v2(
        s->db,
        "SELECT id, path, source, start_line, end_line, text, 0, " STORE_HIT_TIME(
            "chunks") " FROM chunks WHERE id = ?1",
        -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, id);
        r = sqlite3_step(q);
    }
    cm_rc rc = CM_OK;
    if (r == SQLITE_ROW) {
        rc = cm_store_hit_row(s, q, 1, out, err, errlen);
    } else if (r == SQLITE_DONE) {
        rc = CM_ENOTFOUND; /* deleted since the vectors were loaded */
    } else {
        rc = cm_store_fail(s, r, "read a chunk", err, errlen);
    }
    sqlite3_finalize(q);
    return rc;
}

int64_t cm_store_data_version(store *s)
{
    if (s->pg) return cm_store_pg_data_version(s);
    sqlite3_stmt *q = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(s->db, "PRAGMA data_version", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return v;
}
