/*
 * store_owner.c — whose index a file is, and the one-time move of clawmem's
 * index off QuantumClaw's path.
 *
 * QuantumClaw 2026.3.22 keeps its memory index at
 * <stateDir>/memory/<agentId>.sqlite with tables named as clawmem's (meta,
 * files, chunks, chunks_fts, embedding_cache) but other columns: chunks.id is
 * TEXT and chunks carries the embedding as JSON text, and its chunks_fts
 * stores the text with UNINDEXED columns beside it. clawmem's chunks_fts is
 * contentless (content=''), since its first schema: that is how an index of
 * clawmem's is told from any other SQLite database. Reading a file's schema
 * here writes nothing (an immutable read of the main file: no lock, no -wal,
 * no -shm), so a file of another program keeps its bytes and its mtime.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "store.h"

int cm_store_schema_owner(sqlite3 *db, store_owner *out, bool *quantumclaw)
{
    sqlite3_stmt *q = NULL;
    bool any = false, ours = false, qc = false;
    int r = sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_master WHERE type = 'table'", -1,
                               &q, NULL);
    while (r == SQLITE_OK && (r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *name = cm_store_col_text(q, 0), *sql = cm_store_col_text(q, 1);
        any = true;
        if (!name || !sql) continue;
        if (!strcmp(name, "chunks_fts")) {
            if (strstr(sql, "content=''")) ours = true;
            if (strstr(sql, "UNINDEXED")) qc = true;
        } else if (!strcmp(name, "chunks") && strstr(sql, "embedding TEXT")) {
            qc = true;
        }
        r = SQLITE_OK;
    }
    sqlite3_finalize(q);
    if (r != SQLITE_DONE) return r;
    *out = ours ? STORE_OWNER_CLAWMEM : any ? STORE_OWNER_OTHER : STORE_OWNER_UNKNOWN;
    if (quantumclaw) *quantumclaw = !ours && qc;
    return SQLITE_OK;
}

store_owner cm_store_owner(const char *path, bool *quantumclaw)
{
    store_owner who = STORE_OWNER_UNKNOWN;
    struct stat st;
    buf uri = BUF_INIT;
    sqlite3 *db = NULL;
    if (quantumclaw) *quantumclaw = false;
    if (stat(path, &st) != 0) return errno == ENOENT ? STORE_OWNER_NONE : STORE_OWNER_UNKNOWN;
    if (!S_ISREG(st.st_mode) || st.st_size == 0) return STORE_OWNER_UNKNOWN;
    /* a URI names the file: '%', '?' and '#' in the path are escaped */
    bool ok = cm_buf_adds(&uri, "file:") == CM_OK;
    for (const char *c = path; *c && ok; c++)
        ok = (*c == '%' || *c == '?' || *c == '#') ? cm_buf_printf(&uri, "%%%02X", *c) == CM_OK
                                                   : cm_buf_addc(&uri, *c) == CM_OK;
    if (ok && cm_buf_adds(&uri, "?immutable=1") == CM_OK &&
        sqlite3_open_v2(uri.data, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
                        NULL) == SQLITE_OK &&
        cm_store_schema_owner(db, &who, quantumclaw) != SQLITE_OK)
        who = STORE_OWNER_UNKNOWN;
    sqlite3_close_v2(db);
    cm_buf_release(&uri);
    return who;
}

cm_rc cm_store_foreign(const char *path, bool quantumclaw, char *err, size_t errlen)
{
    char clip[FS_CLIP_MAX + 1];
    return cm_seterr(err, errlen, CM_EDB,
                     "%s is another program's index%s, not clawmem's; it is left as it is: set "
                     "memorySearch.store.path in clawmem.json to a file of clawmem's own, or run "
                     "`clawmem index --force` to replace it",
                     cm_fs_clip(path, clip), quantumclaw ? " (QuantumClaw's)" : "");
}

/* Copies what the WAL of the index at path holds into its main file and
 * empties it, so that the main file alone is the whole index. Best effort. */
static void checkpoint(const char *path)
{
    sqlite3 *db = NULL;
    int r = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (r == SQLITE_OK) {
        sqlite3_busy_timeout(db, 2000);
        r = sqlite3_exec(db, "PRAGMA journal_mode", NULL, NULL, NULL); /* reads the header */
    }
    if (r == SQLITE_OK) sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_close_v2(db);
}

/* rename(from, to) that never replaces an existing to (where the file system
 * can say so). */
static int rename_noreplace(const char *from, const char *to)
{
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    struct stat st;
    if (lstat(to, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

cm_rc cm_store_migrate(const char *old_path, const char *path, store_move *how, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat st, held;
    char ow[4096], os[4096], nw[4096], ns[4096], clip[FS_CLIP_MAX + 1];
    int fd = -1;
    bool wal = false, shm = false;
    *how = STORE_MOVE_NONE;
    if (lstat(path, &st) == 0 || errno != ENOENT) goto out; /* there already (or unknowable) */
    if (cm_store_owner(old_path, NULL) != STORE_OWNER_CLAWMEM) goto out; /* not ours to move */
    if (snprintf(ow, sizeof ow, "%s-wal", old_path) >= (int)sizeof ow ||
        snprintf(os, sizeof os, "%s-shm", old_path) >= (int)sizeof os ||
        snprintf(nw, sizeof nw, "%s-wal", path) >= (int)sizeof nw ||
        snprintf(ns, sizeof ns, "%s-shm", path) >= (int)sizeof ns)
        FAIL(CM_EINVAL, "index path too long");
    /* Movers serialise on an flock() of the old file (SQLite's own locks are
     * fcntl() locks: independent). Whoever comes second finds it moved. */
    fd = open(old_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) goto out; /* moved meanwhile, or not a file of ours */
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) goto out;
    if (lstat(path, &st) == 0 || fstat(fd, &held) != 0 || stat(old_path, &st) != 0 ||
        st.st_dev != held.st_dev || st.st_ino != held.st_ino)
        goto out; /* another process moved it first */
    checkpoint(old_path);
    /* The sidecars first, the main file last: its rename is the move. A crash
     * in between leaves the index whole at the old path (the WAL was emptied,
     * or its frames went along and come back with the next attempt). */
    wal = lstat(ow, &st) == 0 && rename(ow, nw) == 0;
    shm = lstat(os, &st) == 0 && rename(os, ns) == 0;
    if (rename_noreplace(old_path, path) != 0) {
        int e = errno;
        if (wal && rename(nw, ow) != 0) wal = false;
        if (shm && rename(ns, os) != 0) shm = false;
        if (e == EEXIST) goto out; /* an index of clawmem's appeared there: that one serves */
        *how = STORE_MOVE_STAY;
        FAIL(CM_EIO, "cannot move the index %s: %s", cm_fs_clip(old_path, clip), strerror(e));
    }
    *how = STORE_MOVE_DONE;
out:
    if (fd >= 0) close(fd); /* and its flock */
    return rc;
}
