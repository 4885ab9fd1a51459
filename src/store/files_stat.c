/*
 * files_stat.c — the stat snapshot of the files table (files_stat.h).
 *
 * Layout of the meta value (a BLOB, native byte order: it never leaves the
 * machine that wrote it, and one of another order does not parse):
 *   "cmfstat2"            8 bytes ("cmfstat1": the same without dirs)
 *   n                     uint64: entries
 *   dirs                  uint64: bytes of the directory records (v2 only)
 *   n times: mtime_ns     int64
 *            size         int64
 *            len          uint32: the path's bytes, its NUL included
 *            path         len bytes, NUL-terminated, no other NUL
 *   dirs bytes            the walk's directory records, opaque here
 *                         (file_list.h's dir_record; discover.c parses them)
 * Anything else (short, long, a count or a length that does not fit, a
 * negative size) does not parse, and the caller reads the files table.
 *
 * The triggers delete the snapshot whenever a files row is inserted,
 * updated or deleted, in that write's own transaction; a writer that changed
 * files writes a new one with cm_store_files_stat_refresh at the end of its
 * sync. A rebuild creates its index without them (its thousands of inserts
 * fire nothing); the first refresh after it adds them.
 */
#include "files_stat.h"

#define MAGIC     "cmfstat2"
#define MAGIC_V1  "cmfstat1"
#define MAGIC_LEN 8
#define ENTRY_MIN (8 + 8 + 4 + 1) /* the fixed fields and an empty path's NUL */

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Whether the n bytes at p are a snapshot (every entry checked first, so
 * that fn never sees part of a bad one); *count receives its entries,
 * *head the offset of the first, *dirs the bytes of the directory records
 * (at the end). */
static bool parses(const unsigned char *p, size_t n, uint64_t *count, size_t *head, size_t *dirs)
{
    if (n < MAGIC_LEN + 8) return false;
    bool v2 = memcmp(p, MAGIC, MAGIC_LEN) == 0;
    if (!v2 && memcmp(p, MAGIC_V1, MAGIC_LEN) != 0) return false;
    uint64_t want = get_u64(p + MAGIC_LEN), got = 0;
    size_t at = MAGIC_LEN + 8;
    *dirs = 0;
    if (v2) {
        if (n - at < 8) return false;
        uint64_t d = get_u64(p + at);
        at += 8;
        if (d > n - at) return false;
        *dirs = (size_t)d;
        n -= *dirs;
    }
    *head = at;
    if (want > (n - at) / ENTRY_MIN) return false;
    while (at < n) {
        if (n - at < ENTRY_MIN) return false;
        int64_t size = (int64_t)get_u64(p + at + 8);
        uint32_t len = get_u32(p + at + 16);
        at += 20;
        if (size < 0 || len == 0 || len > n - at || p[at + len - 1] != 0 ||
            memchr(p + at, 0, len - 1) != NULL)
            return false;
        at += len;
        got++;
    }
    *count = got;
    return got == want;
}

cm_rc cm_store_files_stat_open(store *s, store_snap *snap, char *err, size_t errlen)
{
    memset(snap, 0, sizeof *snap);
    if (s->pg) return CM_OK;
    int r = sqlite3_prepare_v2(
        s->db, "SELECT value FROM meta WHERE key = '" STORE_FILES_STAT_KEY "'", -1, &snap->q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(snap->q);
    if (r == SQLITE_ROW && sqlite3_column_type(snap->q, 0) == SQLITE_BLOB) {
        const unsigned char *p = sqlite3_column_blob(snap->q, 0);
        size_t n = (size_t)sqlite3_column_bytes(snap->q, 0), dirs = 0;
        if (p && parses(p, n, &snap->count, &snap->head, &dirs)) {
            snap->p = p;
            snap->n = n;
            snap->dirs = p + n - dirs;
            snap->dirs_len = dirs;
        }
        r = SQLITE_DONE;
    }
    if (r == SQLITE_DONE) return CM_OK;
    cm_store_files_stat_close(snap);
    return cm_store_fail(s, r, "read the files' stat", err, errlen);
}

void cm_store_files_stat_close(store_snap *snap)
{
    sqlite3_finalize(snap->q);
    memset(snap, 0, sizeof *snap);
}

cm_rc cm_store_files_stat_each(store *s, const store_snap *held, store_file_fn fn, void *ctx,
                               bool *used, char *err, size_t errlen)
{
    store_snap own;
    const store_snap *snap = held;
    *used = false;
    if (s->pg) return CM_OK;
    if (!snap) {
        cm_rc rc = cm_store_files_stat_open(s, &own, err, errlen);
        if (rc) return rc;
        snap = &own;
    }
    if (snap->p) {
        *used = true;
        size_t at = snap->head;
        const unsigned char *p = snap->p;
        for (uint64_t i = 0; i < snap->count; i++) {
            int64_t mtime = (int64_t)get_u64(p + at), size = (int64_t)get_u64(p + at + 8);
            uint32_t len = get_u32(p + at + 16);
            if (!fn(ctx, (const char *)p + at + 20, mtime, size)) break;
            at += 20 + (size_t)len;
        }
    }
    if (!held) cm_store_files_stat_close(&own);
    return CM_OK;
}

/* Appends the snapshot of the files table to out, with the directory
 * records dirs (dlen bytes); *ok false when a row is not one a snapshot can
 * hold (then none is written). Returns SQLITE_DONE, or the SQLite code of a
 * failed read. */
static int build(store *s, const void *dirs, size_t dlen, buf *out, bool *ok)
{
    sqlite3_stmt *q = NULL;
    uint64_t n = 0, d = dlen;
    *ok = cm_buf_add(out, MAGIC, MAGIC_LEN) == CM_OK && cm_buf_add(out, &n, sizeof n) == CM_OK &&
          cm_buf_add(out, &d, sizeof d) == CM_OK;
    int r = sqlite3_prepare_v2(s->db, "SELECT path, mtime, size FROM files", -1, &q, NULL);
    while (r == SQLITE_OK && *ok && (r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *path = cm_store_col_text(q, 0);
        int64_t mtime = 0, size = 0;
        size_t len = path ? (size_t)sqlite3_column_bytes(q, 0) : 0;
        *ok = path && strlen(path) == len && len < UINT32_MAX &&
              cm_store_col_int(q, 1, INT64_MIN, INT64_MAX, &mtime) &&
              cm_store_col_int(q, 2, 0, INT64_MAX, &size);
        uint32_t l32 = (uint32_t)len + 1;
        if (*ok)
            *ok = cm_buf_add(out, &mtime, 8) == CM_OK && cm_buf_add(out, &size, 8) == CM_OK &&
                  cm_buf_add(out, &l32, 4) == CM_OK && cm_buf_add(out, path, len + 1) == CM_OK;
        n++;
        r = SQLITE_OK;
    }
    sqlite3_finalize(q);
    if (*ok && dlen) *ok = cm_buf_add(out, dirs, dlen) == CM_OK;
    if (*ok) memcpy(out->data + MAGIC_LEN, &n, sizeof n);
    return r == SQLITE_OK || r == SQLITE_DONE ? SQLITE_DONE : r;
}

cm_rc cm_store_files_stat_refresh(store *s, const void *dirs, size_t dlen, bool replace,
                                  bool *wrote, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    sqlite3_stmt *q = NULL;
    buf b = BUF_INIT;
    bool in_tx = false, ok = false;
    if (wrote) *wrote = false;
    if (s->pg || s->readonly || s->bulk) return CM_OK;
    int r = sqlite3_prepare_v2(s->db, "SELECT 1 FROM meta WHERE key = '" STORE_FILES_STAT_KEY "'",
                               -1, &q, NULL);
    if (r == SQLITE_OK) r = sqlite3_step(q);
    sqlite3_finalize(q);
    q = NULL;
    if (r == SQLITE_ROW && !replace) return CM_OK; /* there, hence current */
    if (r != SQLITE_DONE && r != SQLITE_ROW)
        return cm_store_fail(s, r, "read the files' stat", err, errlen);
    CHECK(cm_store_begin(s, err, errlen));
    in_tx = true;
    r = sqlite3_exec(s->db, STORE_FILES_TRIGGERS_SQL, NULL, NULL, NULL);
    if (r == SQLITE_OK) r = build(s, dirs, dlen, &b, &ok);
    if (r == SQLITE_DONE && ok) {
        r = sqlite3_prepare_v2(
            s->db, "INSERT OR REPLACE INTO meta(key, value) VALUES('" STORE_FILES_STAT_KEY "', ?1)",
            -1, &q, NULL);
        if (r == SQLITE_OK) {
            sqlite3_bind_blob(q, 1, b.data, (int)CM_MIN(b.len, (size_t)INT32_MAX), SQLITE_STATIC);
            r = b.len <= INT32_MAX ? sqlite3_step(q) : SQLITE_TOOBIG;
        }
    }
    if (r != SQLITE_OK && r != SQLITE_DONE)
        CHECK(cm_store_fail(s, r, "write the files' stat", err, errlen));
    CHECK(cm_store_commit(s, err, errlen));
    in_tx = false;
    if (wrote) *wrote = ok;
out:
    sqlite3_finalize(q);
    if (in_tx) cm_store_rollback(s);
    cm_buf_release(&b);
    return rc;
}
