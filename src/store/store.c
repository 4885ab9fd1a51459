/*
 * store.c — SQLite schema, statements and the atomic rebuild swap.
 *
 * Schema (version 1):
 *   meta(key PRIMARY KEY, value)           one JSON row, key memory_index_meta_v1
 *   files(path PRIMARY KEY, source, hash, mtime, size, problem)   problem: why the
 *                                          file is indexed imperfectly (binary, bad UTF-8), or NULL
 *   chunks(id INTEGER PRIMARY KEY, path, source, start_line, end_line, hash, model, text,
 * updated_at) chunks_fts  fts5(text), contentless, rowid = chunks.id; holds the keyword text,
 *               ranked by cm_bm25() (fts_rank.h)
 *   vectors(chunk_id PRIMARY KEY, dims, embedding BLOB)          little-endian float32
 *   embedding_cache(provider, model, provider_key, hash, dims, embedding BLOB, updated_at)
 *   term_rows(term PRIMARY KEY, n)         rows of chunks_fts holding each term (term_rows.h)
 * The FTS table is contentless, so deleting a chunk re-supplies its keyword
 * text (derived from chunks.text) to FTS5's 'delete' command.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/utf8.h"
#include "fts_rank.h"
#include "term_rows.h"
#include "store.h"
#include "store_pg.h"

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, source TEXT NOT NULL DEFAULT "
    "'memory', hash TEXT NOT NULL, mtime INTEGER NOT NULL, size INTEGER NOT NULL, problem TEXT);"
    "CREATE TABLE IF NOT EXISTS chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, source TEXT "
    "NOT NULL DEFAULT 'memory', start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash "
    "TEXT NOT NULL, model TEXT NOT NULL DEFAULT '', text TEXT NOT NULL, updated_at INTEGER NOT "
    "NULL);"
    "CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);"
    "CREATE TABLE IF NOT EXISTS vectors(chunk_id INTEGER PRIMARY KEY, dims INTEGER NOT NULL, "
    "embedding BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS embedding_cache(provider TEXT NOT NULL, model TEXT NOT NULL, "
    "provider_key TEXT NOT NULL, hash TEXT NOT NULL, dims INTEGER NOT NULL, embedding BLOB NOT "
    "NULL, updated_at INTEGER NOT NULL, PRIMARY KEY(provider, model, provider_key, hash));";

static cm_rc map_rc(int code)
{
    switch (code & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return CM_OK;
    case SQLITE_NOMEM:
        return CM_ENOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return CM_EBUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_ERROR: /* our statements are fixed: a missing table or column */
    case SQLITE_MISMATCH:
    case SQLITE_CONSTRAINT:
        return CM_ECORRUPT;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_FULL:
    case SQLITE_PERM:
        return CM_EIO;
    default:
        return CM_EDB;
    }
}

/* The one place SQLite failures become messages: what we were doing and
 * SQLite's reason, never SQL text (a schema mismatch gives messages such as
 * 'near "x"' or 'no such column', so it is named, not quoted); a long index
 * path is clipped in the middle so the reason always fits. */
cm_rc cm_store_fail(store *s, int code, const char *what, char *err, size_t errlen)
{
    cm_rc rc = map_rc(code);
    int base = code & 0xff;
    const char *msg = base == SQLITE_ERROR ? "its tables do not match clawmem's"
                      : base == SQLITE_MISMATCH || base == SQLITE_CONSTRAINT
                          ? "a value of the wrong type or a broken constraint"
                      : s->db ? sqlite3_errmsg(s->db)
                              : sqlite3_errstr(code);
    char clip[FS_CLIP_MAX + 1];
    const char *path = cm_fs_clip(s->path ? s->path : "", clip);
    if (rc == CM_ECORRUPT)
        return cm_seterr(err, errlen, rc,
                         "index is corrupt (%s, while trying to %s); run `clawmem index --force` "
                         "to rebuild it: %s",
                         msg, what, path);
    if (rc == CM_EBUSY)
        return cm_seterr(err, errlen, rc, "index %s is locked by another process (%s)", path, what);
    return cm_seterr(err, errlen, rc, "index %s: %s: %s", path, what, msg);
}

const char *cm_store_col_text(sqlite3_stmt *q, int i)
{
    return sqlite3_column_type(q, i) == SQLITE_TEXT ? (const char *)sqlite3_column_text(q, i)
                                                    : NULL;
}

bool cm_store_col_int(sqlite3_stmt *q, int i, int64_t lo, int64_t hi, int64_t *v)
{
    if (sqlite3_column_type(q, i) != SQLITE_INTEGER) return false;
    *v = sqlite3_column_int64(q, i);
    return *v >= lo && *v <= hi;
}

static cm_rc exec(store *s, const char *sql, const char *what, char *err, size_t errlen)
{
    int r = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, what, err, errlen);
}

/* The statements a store reuses, prepared on first use: a process that only
 * searches parses only the search. */
enum {
    INS_CHUNK,
    INS_FTS,
    DEL_FTS,
    SEL_CHUNKS_OF,
    DEL_CHUNKS_OF,
    DEL_VECTORS_OF,
    UPSERT_FILE,
    DEL_FILE,
    SEARCH,
    BULK_FILE
};

static const char *const stmt_sql[] = {
    [INS_CHUNK] = "INSERT INTO chunks(path, source, start_line, end_line, hash, model, text, "
                  "updated_at) VALUES(?1, ?2, ?3, ?4, ?5, '', ?6, ?7)",
    [INS_FTS] = "INSERT INTO chunks_fts(rowid, text) VALUES(?1, ?2)",
    [DEL_FTS] = "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES('delete', ?1, ?2)",
    [SEL_CHUNKS_OF] = "SELECT id, text FROM chunks WHERE path = ?1",
    [DEL_CHUNKS_OF] = "DELETE FROM chunks WHERE path = ?1",
    [DEL_VECTORS_OF] =
        "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE path = ?1)",
    [UPSERT_FILE] = "INSERT INTO files(path, source, hash, mtime, size, problem) "
                    "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(path) DO UPDATE SET "
                    "source = excluded.source, hash = excluded.hash, mtime = excluded.mtime, "
                    "size = excluded.size, problem = excluded.problem",
    [DEL_FILE] = "DELETE FROM files WHERE path = ?1",
    /* cm_bm25 called as a column, ordered by SQLite (ORDER BY 2: its value;
     * ties by rowid, as FTS5's ORDER BY rank sorted them): FTS5's ORDER BY rank
     * would sort in a statement of its own and call the function again for
     * each row read, on a cursor that counts every phrase's rows again */
    [SEARCH] =
        "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.rank, " STORE_HIT_TIME(
            "c") " FROM (SELECT rowid, cm_bm25(chunks_fts, ?2, ?3, ?1) AS rank FROM chunks_fts "
                 "WHERE chunks_fts MATCH ?1 ORDER BY 2 LIMIT ?2) AS f "
                 "JOIN chunks AS c ON c.id = f.rowid ORDER BY f.rank",
    [BULK_FILE] = "INSERT INTO temp.bulk_files(path, source, hash, mtime, size, problem) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
};

cm_rc cm_store_hit_row(store *s, sqlite3_stmt *q, int i, fts_hit *h, char *err, size_t errlen)
{
    const char *path = cm_store_col_text(q, i), *source = cm_store_col_text(q, i + 1),
               *text = cm_store_col_text(q, i + 4);
    int64_t start = 0, end = 0, mtime = 0;
    memset(h, 0, sizeof *h);
    if (!path || !source || !text || !cm_store_col_int(q, i + 2, 1, INT32_MAX, &start) ||
        !cm_store_col_int(q, i + 3, start, INT32_MAX, &end) ||
        !cm_store_col_int(q, i + 6, INT64_MIN, INT64_MAX, &mtime) ||
        sqlite3_column_type(q, i - 1) != SQLITE_INTEGER)
        return cm_store_corrupt(s, "the chunks table", err, errlen);
    h->id = sqlite3_column_int64(q, i - 1);
    h->start_line = (int)start;
    h->end_line = (int)end;
    h->mtime_ns = mtime;
    return cm_store_hit_strings(h, path, source, text, err, errlen);
}

static cm_rc stmt(store *s, int id, sqlite3_stmt **out, char *err, size_t errlen)
{
    if (!s->stmts[id]) {
        int r = sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                   &s->stmts[id], NULL);
        if (r != SQLITE_OK) return cm_store_fail(s, r, "prepare", err, errlen);
    }
    *out = s->stmts[id];
    return CM_OK;
}

/* For a program, before any thread and any other use of SQLite (public:
 * include/clawmem.h). Each connection's page cache would otherwise set aside
 * 20 pages at its first read, and a search touches one of them (the index is
 * read through a memory map): ~40 of a search process's 280 page faults. The
 * per-allocation statistics clawmem never reads cost a mutex each. Both are
 * process-wide, so a library call leaves them to the program; a call after
 * SQLite has started changes nothing (SQLITE_MISUSE, ignored). */
void cm_process_init(void)
{
    sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* Whether an open failed for lack of write access (a read-only state dir
 * or index file), which a read-only connection may get around. */
static bool no_write_access(int code)
{
    int b = code & 0xff;
    return b == SQLITE_READONLY || b == SQLITE_CANTOPEN || b == SQLITE_PERM || b == SQLITE_AUTH;
}

/* Keeps the tokenize='...' words of the keyword table's CREATE statement
 * sql (for term_rows.c), when they are plain words; false: out of memory. */
static bool set_tokenize(store *s, const char *sql)
{
    free(s->tokenize);
    s->tokenize = NULL;
    const char *p = sql ? strstr(sql, "tokenize='") : NULL;
    if (!p) return true;
    p += strlen("tokenize='");
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_ ");
    if (p[n] != '\'' || !n) return true;
    return (s->tokenize = cm_strndup(p, n)) != NULL;
}

/* Reads whether the keyword table exists and its tokenizer: the first read,
 * which also turns "not a database" into CM_ECORRUPT. Returns the SQLite
 * code (SQLITE_ROW: it exists, SQLITE_DONE: it does not). */
static int read_schema(store *s)
{
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db, "SELECT sql FROM sqlite_master WHERE name='chunks_fts'", -1,
                               &q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(q);
    if (r == SQLITE_ROW) {
        const char *sql = cm_store_col_text(q, 0);
        s->trigram = sql && strstr(sql, "trigram") != NULL;
        if (!set_tokenize(s, sql)) r = SQLITE_NOMEM;
    }
    sqlite3_finalize(q);
    return r;
}

/* Opens path read-only: from a read-only state dir a WAL index is readable
 * when its -wal and -shm files exist; without a -wal file (everything is in
 * the main file) it is opened immutable, as nothing can be appended to it. */
static int open_readonly(store *s, const char *path)
{
    sqlite3_close_v2(s->db);
    s->db = NULL;
    int r = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (r == SQLITE_OK) r = read_schema(s);
    if (r == SQLITE_ROW || r == SQLITE_DONE || !no_write_access(r)) return r;
    buf wal = BUF_INIT, uri = BUF_INIT;
    struct stat st;
    if (cm_buf_printf(&wal, "%s-wal", path) == CM_OK && stat(wal.data, &st) < 0 &&
        errno == ENOENT && cm_buf_adds(&uri, "file:") == CM_OK) {
        bool ok = true;
        for (const char *c = path; *c && ok; c++)
            ok = (*c == '%' || *c == '?' || *c == '#') ? cm_buf_printf(&uri, "%%%02X", *c) == CM_OK
                                                       : cm_buf_addc(&uri, *c) == CM_OK;
        if (ok && cm_buf_adds(&uri, "?immutable=1") == CM_OK) {
            sqlite3_close_v2(s->db);
            s->db = NULL;
            r = sqlite3_open_v2(uri.data, &s->db,
                                SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
            if (r == SQLITE_OK) r = read_schema(s);
        }
    }
    cm_buf_release(&wal);
    cm_buf_release(&uri);
    return r;
}

cm_rc cm_store_open(store *s, const char *path, const char *tokenizer, unsigned flags, int busy_ms,
                    char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *dir = NULL;
    int guard = -1;
    memset(s, 0, sizeof *s);
    cm_buf_init(&s->scratch, 0);
    if (!(s->path = cm_strdup(path))) CHECK(CM_ENOMEM);
    char clip[FS_CLIP_MAX + 1];
    struct stat st;
    /* Held until the connection has read the file (and so opened its -wal
     * and -shm): a rebuild's swap waits for it, and it for the swap. A bulk
     * build's file is its own. */
    if (!(flags & STORE_BULK)) guard = cm_store_swap_guard(path);
    if (guard < 0 && ((!(flags & STORE_BULK) && errno == ENOENT) || stat(path, &st) < 0)) {
        if (!(flags & STORE_CREATE))
            FAIL(CM_ENOTFOUND, "index %s does not exist yet", cm_fs_clip(path, clip));
        if (!(dir = cm_fs_dirname(path))) CHECK(CM_ENOMEM);
        CHECK(cm_fs_mkdirs(dir, err, errlen));
    }
    bool existing = !(flags & (STORE_CREATE | STORE_BULK));
    int oflags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                 ((flags & STORE_CREATE) ? SQLITE_OPEN_CREATE : 0);
    int r = sqlite3_open_v2(path, &s->db, oflags, NULL);
    if (r != SQLITE_OK && existing && no_write_access(r)) {
        s->readonly = true;
        r = open_readonly(s, path);
        if (r == SQLITE_ROW || r == SQLITE_DONE) r = SQLITE_OK;
    }
    if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "open", err, errlen));
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, busy_ms);
    s->busy_ms = busy_ms;
    if (!(flags & STORE_BULK)) {
        /* Before anything is written (the journal mode is): another program's
         * index (QuantumClaw's, same table names) is left as it is. */
        store_owner who = STORE_OWNER_UNKNOWN;
        bool qc = false;
        if (cm_store_schema_owner(s->db, &who, &qc) == SQLITE_OK && who == STORE_OWNER_OTHER)
            CHECK(cm_store_foreign(path, qc, err, errlen));
    }
    r = cm_fts_rank_register(s->db, &s->fts, cm_term_rows_lookup, s);
    if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "register cm_bm25", err, errlen));
    if (flags & STORE_BULK) {
        s->bulk = true;
        /* the files rows wait in memory for cm_store_bulk_keywords */
        CHECK(exec(s,
                   "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536; "
                   "PRAGMA temp_store=MEMORY; CREATE TEMP TABLE bulk_files(path TEXT, source TEXT, "
                   "hash TEXT, mtime INTEGER, size INTEGER, problem TEXT);",
                   "set up a new index", err, errlen));
    } else if (!s->readonly && existing && sqlite3_db_readonly(s->db, "main") == 1) {
        s->readonly = true; /* the file is read-only: SQLite opened it so */
    }
    if (!(flags & STORE_BULK) && !s->readonly) {
        /* The WAL file is kept when the last connection closes, so a short-lived
         * process (one CLI search) does not recreate and delete it each time;
         * pages are read through a memory map rather than a read() each. */
        int persist = 1;
        sqlite3_file_control(s->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        /* nor checkpoint on close: writers checkpoint after a sync (cm_store_checkpoint) */
        sqlite3_db_config(s->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        r = sqlite3_exec(s->db,
                         "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                         "PRAGMA mmap_size=268435456;",
                         NULL, NULL, NULL);
        if (r != SQLITE_OK && existing && no_write_access(r)) {
            s->readonly = true; /* a read-only state dir: no -shm can be made */
        } else if (r != SQLITE_OK) {
            CHECK(cm_store_fail(s, r, "set the journal mode", err, errlen));
        }
    }
    if (s->readonly) {
        /* Searches only: nothing is written, not even the journal mode. */
        r = open_readonly(s, path);
        if (r != SQLITE_ROW && r != SQLITE_DONE)
            CHECK(cm_store_fail(s, r, "read schema", err, errlen));
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, busy_ms);
        r = cm_fts_rank_register(s->db, &s->fts, cm_term_rows_lookup, s);
        if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "register cm_bm25", err, errlen));
        sqlite3_exec(s->db, "PRAGMA mmap_size=268435456", NULL, NULL, NULL);
    }
    r = read_schema(s);
    bool have_fts = r == SQLITE_ROW;
    if (r != SQLITE_ROW && r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read schema", err, errlen));
    if (!have_fts) {
        if (!(flags & STORE_CREATE))
            FAIL(CM_ECORRUPT, "index has no keyword table; run `clawmem index --force`: %s",
                 cm_fs_clip(path, clip));
        s->trigram = tokenizer && strcmp(tokenizer, "trigram") == 0;
        CHECK(exec(s, schema_sql, "create the tables", err, errlen));
        buf b = BUF_INIT;
        rc = cm_buf_printf(&b,
                           "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='', "
                           "tokenize='%s');",
                           s->trigram ? "trigram"
                           : tokenizer && strcmp(tokenizer, "porter") == 0
                               ? "porter unicode61 remove_diacritics 2"
                               : "unicode61 remove_diacritics 2");
        if (!rc) rc = exec(s, b.data, "create the keyword table", err, errlen);
        if (!rc && !set_tokenize(s, b.data)) rc = CM_ENOMEM;
        cm_buf_release(&b);
        CHECK(rc);
    }
out:
    free(dir);
    if (guard >= 0) close(guard); /* and its flock */
    if (rc) cm_store_close(s);
    return rc;
}

cm_rc cm_store_wal(store *s, char *err, size_t errlen)
{
    if (s->pg) return CM_OK;
    return exec(s, "PRAGMA journal_mode=WAL", "switch the new index to WAL", err, errlen);
}

void cm_store_close(store *s)
{
    if (s->pg) {
        cm_store_pg_close(s);
        return;
    }
    for (size_t i = 0; i < ARRAY_LEN(s->stmts); i++)
        sqlite3_finalize(s->stmts[i]);
    cm_term_rows_free(s);
    if (s->db) sqlite3_close_v2(s->db);
    free(s->path);
    free(s->tokenize);
    cm_buf_release(&s->scratch);
    memset(s, 0, sizeof *s);
}

cm_rc cm_store_meta_get_recent(store *s, const char *key, char **json, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_meta_get_recent(s, key, json, err, errlen);
    return cm_store_meta_get(s, key, json, err, errlen);
}

cm_rc cm_store_meta_get(store *s, const char *key, char **json, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_meta_get(s, key, json, err, errlen);
    *json = NULL;
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?1", -1, &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
        r = sqlite3_step(q);
    }
    cm_rc rc = CM_OK;
    if (r == SQLITE_ROW) {
        const char *v = cm_store_col_text(q, 0);
        if (!v)
            rc = cm_store_corrupt(s, "the meta table", err, errlen);
        else if (!(*json = cm_strdup(v)))
            rc = CM_ENOMEM;
    } else if (r != SQLITE_DONE) {
        rc = cm_store_fail(s, r, "read meta", err, errlen);
    }
    sqlite3_finalize(q);
    return rc;
}

cm_rc cm_store_meta_set(store *s, const char *key, const char *json, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_meta_set(s, key, json, err, errlen);
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)", -1,
                               &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, json, -1, SQLITE_STATIC);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "write meta", err, errlen);
}

void cm_store_checkpoint(store *s)
{
    if (s->pg) {
        cm_store_pg_merge_pending(s);
        return;
    }
    int log = -1, done = -1;
    if (sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done) !=
            SQLITE_OK ||
        log <= 0 || done != log)
        return;
    /* Every frame is in the file: truncate the WAL unless a reader is still
     * on an older snapshot (then SQLITE_BUSY at once, and it stays as is). */
    sqlite3_busy_timeout(s->db, 0);
    sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(s->db, s->busy_ms);
}

cm_rc cm_store_begin(store *s, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_begin(s, err, errlen);
    return exec(s, "BEGIN IMMEDIATE", "begin a transaction", err, errlen);
}

cm_rc cm_store_commit(store *s, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_commit(s, err, errlen);
    cm_rc rc = cm_term_rows_flush(s, err, errlen);
    if (!rc) rc = exec(s, "COMMIT", "commit", err, errlen);
    if (!rc) cm_term_rows_end(s);
    return rc;
}

void cm_store_rollback(store *s)
{
    if (s->pg) {
        cm_store_pg_rollback(s);
        return;
    }
    if (s->db && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    cm_term_rows_end(s);
}

/* SQLite's BINARY collation: strcmp's order (paths hold no NUL). */
static int by_path(const void *a, const void *b)
{
    return strcmp(((const stored_file *)a)->path, ((const stored_file *)b)->path);
}

cm_rc cm_store_files_load(store *s, stored_files *out, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_files_load(s, out, err, errlen);
    cm_rc rc = CM_OK;
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *q = NULL;
    /* In table order, sorted here: ORDER BY path would walk the path index
     * and look each row up in the table (a seek per file, a fifth of a
     * no-change check over 1,300 files). */
    int r = sqlite3_prepare_v2(s->db, "SELECT path, hash, mtime, size FROM files", -1, &q, NULL);
    while (r == SQLITE_OK || r == SQLITE_ROW) {
        r = sqlite3_step(q);
        if (r != SQLITE_ROW) break;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 256;
            stored_file *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) FAIL(CM_ENOMEM, "out of memory");
            out->v = nv;
        }
        const char *path = cm_store_col_text(q, 0), *hash = cm_store_col_text(q, 1);
        int64_t mtime = 0, size = 0;
        if (!path || !hash || !cm_store_col_int(q, 2, INT64_MIN, INT64_MAX, &mtime) ||
            !cm_store_col_int(q, 3, 0, INT64_MAX, &size))
            CHECK(cm_store_corrupt(s, "the files table", err, errlen));
        stored_file *f = &out->v[out->n];
        f->path = cm_strdup(path);
        f->hash = cm_strdup(hash);
        f->mtime_ns = mtime;
        f->size = size;
        out->n++;
        if (!f->path || !f->hash) FAIL(CM_ENOMEM, "out of memory");
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read files", err, errlen));
    bool sorted = true; /* usually: a sync writes the rows in path order */
    for (size_t i = 1; i < out->n && sorted; i++)
        sorted = strcmp(out->v[i - 1].path, out->v[i].path) < 0;
    if (!sorted) qsort(out->v, out->n, sizeof *out->v, by_path);
out:
    sqlite3_finalize(q);
    if (rc) cm_store_stored_files_release(out);
    return rc;
}

cm_rc cm_store_files_each(store *s, const struct store_snap *held, store_file_fn fn, void *ctx,
                          char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    sqlite3_stmt *q = NULL;
    if (s->pg) { /* over the loaded rows */
        stored_files f;
        CHECK(cm_store_pg_files_load(s, &f, err, errlen));
        for (size_t i = 0; i < f.n && fn(ctx, f.v[i].path, f.v[i].mtime_ns, f.v[i].size); i++)
            ;
        cm_store_stored_files_release(&f);
        goto out;
    }
    bool used = false; /* the stat snapshot when there is one (files_stat.h) */
    CHECK(cm_store_files_stat_each(s, held, fn, ctx, &used, err, errlen));
    if (used) goto out;
    int r = sqlite3_prepare_v2(s->db, "SELECT path, mtime, size FROM files", -1, &q, NULL);
    while (r == SQLITE_OK || r == SQLITE_ROW) {
        r = sqlite3_step(q);
        if (r != SQLITE_ROW) break;
        const char *path = cm_store_col_text(q, 0);
        int64_t mtime = 0, size = 0;
        if (!path || !cm_store_col_int(q, 1, INT64_MIN, INT64_MAX, &mtime) ||
            !cm_store_col_int(q, 2, 0, INT64_MAX, &size))
            CHECK(cm_store_corrupt(s, "the files table", err, errlen));
        if (!fn(ctx, path, mtime, size)) {
            r = SQLITE_DONE;
            break;
        }
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read files", err, errlen));
out:
    sqlite3_finalize(q);
    return rc;
}

/* Runs a bound statement that returns no rows, then resets it. */
static cm_rc step_done(store *s, sqlite3_stmt *st, const char *what, char *err, size_t errlen)
{
    int r = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, what, err, errlen);
}

/* Deletes a file's chunks from chunks and from the contentless FTS table. */
static cm_rc delete_chunks(store *s, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL, *del_fts = NULL, *del_chunks = NULL;
    cm_rc rc = stmt(s, SEL_CHUNKS_OF, &q, err, errlen);
    if (!rc) rc = stmt(s, DEL_FTS, &del_fts, err, errlen);
    if (!rc) rc = stmt(s, DEL_CHUNKS_OF, &del_chunks, err, errlen);
    if (rc) return rc;
    sqlite3_bind_text(q, 1, path, -1, SQLITE_STATIC);
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(q, 0);
        const char *text = (const char *)sqlite3_column_text(q, 1);
        int len = sqlite3_column_bytes(q, 1);
        CHECK(cm_store_keyword_text(s, &s->scratch, text ? text : "", (size_t)len));
        sqlite3_bind_int64(del_fts, 1, id);
        sqlite3_bind_text(del_fts, 2, s->scratch.data, (int)s->scratch.len, SQLITE_STATIC);
        CHECK(step_done(s, del_fts, "delete keyword entry", err, errlen));
        CHECK(cm_term_rows_note(s, s->scratch.data, s->scratch.len, -1, err, errlen));
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read chunks", err, errlen));
    sqlite3_reset(q);
    sqlite3_stmt *del_vectors = NULL;
    CHECK(stmt(s, DEL_VECTORS_OF, &del_vectors, err, errlen));
    sqlite3_bind_text(del_vectors, 1, path, -1, SQLITE_STATIC);
    CHECK(step_done(s, del_vectors, "delete vectors", err, errlen));
    sqlite3_bind_text(del_chunks, 1, path, -1, SQLITE_STATIC);
    rc = step_done(s, del_chunks, "delete chunks", err, errlen);
out:
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return rc;
}

cm_rc cm_store_file_replace(store *s, const char *path, const char *source, const char *hash,
                            int64_t mtime_ns, int64_t size, const char *problem,
                            const chunk_list *chunks, char *err, size_t errlen)
{
    if (s->pg)
        return cm_store_pg_file_replace(s, path, source, hash, mtime_ns, size, problem, chunks, err,
                                        errlen);
    cm_rc rc = CM_OK;
    sqlite3_stmt *ins_chunk = NULL, *ins_fts = NULL, *q = NULL;
    CHECK(stmt(s, INS_CHUNK, &ins_chunk, err, errlen));
    CHECK(stmt(s, INS_FTS, &ins_fts, err, errlen));
    CHECK(stmt(s, s->bulk ? BULK_FILE : UPSERT_FILE, &q, err, errlen));
    CHECK(cm_term_rows_arm(s, err, errlen)); /* before the files triggers fire */
    CHECK(delete_chunks(s, path, err, errlen));
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < chunks->n; i++) {
        const chunk *c = &chunks->v[i];
        sqlite3_stmt *ic = ins_chunk;
        sqlite3_bind_text(ic, 1, path, -1, SQLITE_STATIC);
        sqlite3_bind_text(ic, 2, source, -1, SQLITE_STATIC);
        sqlite3_bind_int(ic, 3, c->start_line);
        sqlite3_bind_int(ic, 4, c->end_line);
        sqlite3_bind_text(ic, 5, c->hash, SHA256_HEX_LEN, SQLITE_STATIC);
        sqlite3_bind_text(ic, 6, c->text, (int)c->len, SQLITE_STATIC);
        sqlite3_bind_int64(ic, 7, c->time_s ? c->time_s : now);
        CHECK(step_done(s, ic, "insert chunk", err, errlen));
        if (s->bulk) continue; /* cm_store_bulk_keywords */
        int64_t id = sqlite3_last_insert_rowid(s->db);
        CHECK(cm_store_keyword_text(s, &s->scratch, c->text, c->len));
        sqlite3_bind_int64(ins_fts, 1, id);
        sqlite3_bind_text(ins_fts, 2, s->scratch.data, (int)s->scratch.len, SQLITE_STATIC);
        CHECK(step_done(s, ins_fts, "insert keyword entry", err, errlen));
        CHECK(cm_term_rows_note(s, s->scratch.data, s->scratch.len, 1, err, errlen));
    }
    sqlite3_bind_text(q, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, mtime_ns);
    sqlite3_bind_int64(q, 5, size);
    if (problem) sqlite3_bind_text(q, 6, problem, -1, SQLITE_STATIC);
    CHECK(step_done(s, q, "write file row", err, errlen));
out:
    return rc;
}

cm_rc cm_store_bulk_keywords(store *s, char *err, size_t errlen)
{
    if (!s->bulk) return CM_OK;
    cm_rc rc = CM_OK;
    sqlite3_stmt *q = NULL, *ins = NULL;
    /* FTS5 keeps up to 'hashsize' bytes of postings in memory before it
     * writes a segment (1 MiB unless set); here 16 MiB, which a search's
     * page faults do not tell from 64 (201 each on the SciFact workspace;
     * 225 at 1 MiB). Its real cost is more: 60,000 chunks of 2 M distinct
     * made-up words peak at 118 MB (76 written file by file, 248 at 64). */
    /* The files rows first, in the order they came (a rebuild's: by path),
     * so that the no-change check's scan of the table reads contiguous
     * pages rather than one among the chunks' per few dozen rows. */
    CHECK(exec(s,
               "INSERT INTO files(path, source, hash, mtime, size, problem) SELECT path, source, "
               "hash, mtime, size, problem FROM temp.bulk_files ORDER BY rowid ON CONFLICT(path) "
               "DO UPDATE SET source = excluded.source, hash = excluded.hash, mtime = "
               "excluded.mtime, size = excluded.size, problem = excluded.problem; "
               "DELETE FROM temp.bulk_files;",
               "write the file rows", err, errlen));
    CHECK(exec(s, "INSERT INTO chunks_fts(chunks_fts, rank) VALUES('hashsize', 16777216)",
               "set up the keyword table", err, errlen));
    CHECK(stmt(s, INS_FTS, &ins, err, errlen));
    int r = sqlite3_prepare_v2(s->db, "SELECT id, text FROM chunks ORDER BY id", -1, &q, NULL);
    if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "read chunks", err, errlen));
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(q, 1);
        int len = sqlite3_column_bytes(q, 1);
        CHECK(cm_store_keyword_text(s, &s->scratch, text ? text : "", (size_t)len));
        sqlite3_bind_int64(ins, 1, sqlite3_column_int64(q, 0));
        sqlite3_bind_text(ins, 2, s->scratch.data, (int)s->scratch.len, SQLITE_STATIC);
        CHECK(step_done(s, ins, "insert keyword entry", err, errlen));
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read chunks", err, errlen));
    /* later writers keep FTS5's own bound (the postings still pending are
     * written at commit) */
    CHECK(exec(s, "INSERT INTO chunks_fts(chunks_fts, rank) VALUES('hashsize', 1048576)",
               "write the keyword table", err, errlen));
    CHECK(cm_term_rows_fill(s, err, errlen));
out:
    sqlite3_finalize(q);
    return rc;
}

cm_rc cm_store_file_touch(store *s, const char *path, int64_t mtime_ns, int64_t size, char *err,
                          size_t errlen)
{
    if (s->pg) return cm_store_pg_file_touch(s, path, mtime_ns, size, err, errlen);
    sqlite3_stmt *q = NULL;
    cm_rc rc = cm_term_rows_arm(s, err, errlen); /* the files triggers drop the mark */
    if (rc) return rc;
    int r = sqlite3_prepare_v2(s->db, "UPDATE files SET mtime = ?2, size = ?3 WHERE path = ?1", -1,
                               &q, NULL);
    if (r == SQLITE_OK) {
        sqlite3_bind_text(q, 1, path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 2, mtime_ns);
        sqlite3_bind_int64(q, 3, size);
        r = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return r == SQLITE_DONE ? CM_OK : cm_store_fail(s, r, "update file row", err, errlen);
}

cm_rc cm_store_file_delete(store *s, const char *path, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_file_delete(s, path, err, errlen);
    sqlite3_stmt *q = NULL;
    cm_rc rc = stmt(s, DEL_FILE, &q, err, errlen);
    if (!rc) rc = cm_term_rows_arm(s, err, errlen);
    if (!rc) rc = delete_chunks(s, path, err, errlen);
    if (rc) return rc;
    sqlite3_bind_text(q, 1, path, -1, SQLITE_STATIC);
    return step_done(s, q, "delete file row", err, errlen);
}

cm_rc cm_store_trigram_terms(store *s, const char *term, size_t len, buf *out, char *err,
                             size_t errlen)
{
    if (s->pg) return CM_OK;
    cm_rc rc = CM_OK;
    sqlite3_stmt *q = NULL;
    size_t start = out->len, nterms = 0;
    char hi[16];
    if (len + 1 > sizeof hi) return CM_OK;
    memcpy(hi, term, len);
    hi[len] = (char)0xFF; /* above every continuation of the prefix */
    int r = sqlite3_exec(s->db,
                         "CREATE VIRTUAL TABLE IF NOT EXISTS temp.cm_trigrams USING "
                         "fts5vocab(main, 'chunks_fts', 'row')",
                         NULL, NULL, NULL);
    if (r == SQLITE_OK)
        r = sqlite3_prepare_v2(s->db,
                               "SELECT term FROM temp.cm_trigrams WHERE term >= ?1 AND term < ?2 "
                               "ORDER BY doc DESC LIMIT ?3",
                               -1, &q, NULL);
    if (r != SQLITE_OK) CHECK(cm_store_fail(s, r, "read the trigram vocabulary", err, errlen));
    sqlite3_bind_text(q, 1, term, (int)len, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, hi, (int)len + 1, SQLITE_STATIC);
    sqlite3_bind_int(q, 3, STORE_TRIGRAM_TERMS);
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(q, 0);
        if (!t) continue;
        CHECK(cm_buf_adds(out, nterms++ ? " OR \"" : "(\""));
        for (; *t && !rc; t++)
            rc = *t == '"' ? cm_buf_adds(out, "\"\"") : cm_buf_addc(out, *t);
        CHECK(rc);
        CHECK(cm_buf_addc(out, '"'));
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read the trigram vocabulary", err, errlen));
    if (nterms) CHECK(cm_buf_addc(out, ')'));
out:
    if (rc && out->cap) out->data[out->len = start] = 0;
    sqlite3_finalize(q);
    return rc;
}

cm_rc cm_store_fts_search_and_or(store *s, const char *match, const char *weights,
                                 const char *or_match, const char *or_weights, int limit,
                                 fts_hits *out, bool *used_or, char *err, size_t errlen)
{
    *used_or = false;
    if (s->pg) return cm_store_pg_fts_search(s, match, or_match, limit, out, used_or, err, errlen);
    cm_rc rc = cm_store_fts_search(s, match, weights, limit, out, err, errlen);
    if (rc || out->n >= (size_t)limit || !or_match) return rc;
    cm_fts_hits_release(out);
    *used_or = true;
    return cm_store_fts_search(s, or_match, or_weights, limit, out, err, errlen);
}

cm_rc cm_store_fts_search(store *s, const char *match, const char *weights, int limit,
                          fts_hits *out, char *err, size_t errlen)
{
    if (s->pg) return cm_store_pg_fts_search(s, match, NULL, limit, out, NULL, err, errlen);
    sqlite3_stmt *q = NULL;
    /* the weights: digits, the characters of a number and the '/' of an
     * absent weight only, else none */
    size_t wl = weights ? strlen(weights) : 0;
    bool ok = wl && wl <= QUERY_WEIGHTS_MAX;
    for (size_t i = 0; ok && i < wl; i++)
        ok = strchr("0123456789. e+-c/", weights[i]) != NULL;
    cm_rc rc = stmt(s, SEARCH, &q, err, errlen);
    if (rc) return rc;
    /* in a read transaction of its own: each of the statements FTS5 steps
     * for a row (its length, cm_bm25's term counts) then resets without
     * SQLite's autocommit bookkeeping (~440 instructions a row) */
    bool tx = sqlite3_get_autocommit(s->db) &&
              sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_bind_text(q, 1, match, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 2, limit);
    sqlite3_bind_text(q, 3, ok ? weights : "", -1, SQLITE_STATIC);
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 32;
            fts_hit *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) FAIL(CM_ENOMEM, "out of memory");
            out->v = nv;
            out->cap = cap;
        }
        CHECK(cm_store_hit_row(s, q, 1, out->v + out->n, err, errlen));
        out->v[out->n].rank = sqlite3_column_double(q, 6);
        out->n++;
    }
    if (r != SQLITE_DONE) {
        /* the statement was prepared, so the tables are there: the query itself */
        if ((r & 0xff) == SQLITE_ERROR)
            FAIL(CM_EINVAL, "keyword query rejected: %s", sqlite3_errmsg(s->db));
        CHECK(cm_store_fail(s, r, "keyword search", err, errlen));
    }
out:
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (tx) sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    return rc;
}

cm_rc cm_store_chunks_dated(store *s, const char *from, const char *to, int64_t t0, int64_t t1,
                            int limit, fts_hits *out, char *err, size_t errlen)
{
    if (s->pg) return CM_OK; /* not kept in PostgreSQL: the keyword hits' dates only */
    sqlite3_stmt *q = NULL;
    cm_rc rc = CM_OK;
    int r = sqlite3_prepare_v2(
        s->db,
        "SELECT id, path, source, start_line, end_line, text, 0, " STORE_HIT_TIME(
            "chunks") " FROM chunks WHERE (path >= ?1 AND path < ?2) OR (source = 'sessions' AND "
                      "updated_at >= ?3 AND updated_at < ?4) ORDER BY path, start_line LIMIT ?5",
        -1, &q, NULL);
    if (r != SQLITE_OK) return cm_store_fail(s, r, "read dated chunks", err, errlen);
    sqlite3_bind_text(q, 1, from, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, to, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, t0);
    sqlite3_bind_int64(q, 4, t1);
    sqlite3_bind_int(q, 5, limit);
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 16;
            fts_hit *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) FAIL(CM_ENOMEM, "out of memory");
            out->v = nv;
            out->cap = cap;
        }
        CHECK(cm_store_hit_row(s, q, 1, out->v + out->n, err, errlen));
        out->v[out->n++].rank = 0;
    }
    if (r != SQLITE_DONE) CHECK(cm_store_fail(s, r, "read dated chunks", err, errlen));
out:
    sqlite3_finalize(q);
    return rc;
}

void cm_fts_hits_release(fts_hits *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].path);
        free(h->v[i].source);
        free(h->v[i].text);
    }
    free(h->v);
    memset(h, 0, sizeof *h);
}
