/*
 * test_files_stat.c — the no-change check's stat snapshot (files_stat.h):
 * a sync writes it, the check reads it instead of the files table, any
 * write to the files table drops it (the triggers, whoever writes), and a
 * snapshot that does not parse is left for the table. The check still sees
 * a file changed in place (same size, new mtime), added, removed, renamed.
 * "Dirty" is told by the writer lock: held by another open file, a check
 * that finds nothing changed answers CM_OK, one that finds a change needs
 * the lock and answers CM_EBUSY.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define SNAP_KEY "clawmem_files_stat_v1"

typedef struct fs_ws {
    char *dir;
    char ws[1024], state[1024], cfg[1024], db[1100], lock[1200];
} fs_ws;

static void ws_init(fs_ws *f)
{
    f->dir = tmp_dir();
    snprintf(f->ws, sizeof f->ws, "%s/ws", f->dir);
    snprintf(f->state, sizeof f->state, "%s/state", f->dir);
    snprintf(f->cfg, sizeof f->cfg, "%s/qc.json", f->dir);
    snprintf(f->db, sizeof f->db, "%s/memory/main.clawmem.sqlite", f->state);
    snprintf(f->lock, sizeof f->lock, "%s.lock", f->db);
    write_file(f->dir, "qc.json", "{clawmem: {memoryWrite: true}}");
    for (int i = 0; i < 12; i++) {
        char rel[64], text[64];
        snprintf(rel, sizeof rel, "memory/n%02d.md", i);
        snprintf(text, sizeof text, "note %02d about otters\n", i);
        write_file(f->ws, rel, text);
    }
}

static cm_engine *ws_open(const fs_ws *f)
{
    cm_options o = {NULL, f->ws, f->cfg, f->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) fprintf(stderr, "  open: %s\n", err);
    return e;
}

static cm_rc ws_sync(cm_engine *e, unsigned flags)
{
    char err[512];
    cm_sync_stats st;
    cm_rc rc = cm_engine_sync(e, flags, NULL, NULL, &st, err, sizeof err);
    if (rc && rc != CM_EBUSY) fprintf(stderr, "  sync: %s\n", err);
    return rc;
}

/* A search's check (a fresh engine, as a new process) while another holds
 * the writer lock: CM_OK when it found nothing changed, else CM_EBUSY. */
static cm_rc check_locked(const fs_ws *f)
{
    int fd = open(f->lock, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) return CM_EIO;
    cm_engine *e = ws_open(f);
    cm_rc rc = e ? ws_sync(e, CM_SYNC_NOWAIT) : CM_EIO;
    cm_engine_close(e);
    flock(fd, LOCK_UN);
    close(fd);
    return rc;
}

/* Runs sql on the index (another writer, not clawmem's sync). */
static void exec_sql(const fs_ws *f, const char *sql)
{
    sqlite3 *db = NULL;
    EXPECT_INT(sqlite3_open(f->db, &db), SQLITE_OK);
    EXPECT_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* The snapshot's bytes (-1: no row, -2: not a BLOB). */
static int snap_len(const fs_ws *f)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int n = -1;
    if (sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = '" SNAP_KEY "'", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_type(q, 0) == SQLITE_BLOB ? sqlite3_column_bytes(q, 0) : -2;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* Overwrites the first byte of name in the snapshot with c (the same
 * length: it still parses). */
static void rename_in_snapshot(const fs_ws *f, const char *name, char c)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    EXPECT_INT(sqlite3_open(f->db, &db), SQLITE_OK);
    EXPECT_INT(
        sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = '" SNAP_KEY "'", -1, &q, NULL),
        SQLITE_OK);
    EXPECT_INT(sqlite3_step(q), SQLITE_ROW);
    size_t n = (size_t)sqlite3_column_bytes(q, 0);
    char *v = malloc(n);
    memcpy(v, sqlite3_column_blob(q, 0), n);
    sqlite3_finalize(q);
    char *at = memmem(v, n, name, strlen(name));
    EXPECT(at != NULL);
    if (at) *at = c;
    EXPECT_INT(sqlite3_prepare_v2(db, "UPDATE meta SET value = ?1 WHERE key = '" SNAP_KEY "'", -1,
                                  &q, NULL),
               SQLITE_OK);
    sqlite3_bind_blob(q, 1, v, (int)n, SQLITE_STATIC);
    EXPECT_INT(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(v);
}

TEST(files_stat_snapshot_is_what_the_check_reads)
{
    fs_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    int n = snap_len(&f);
    EXPECT(n > 12 * 20); /* written by the sync: twelve entries */
    EXPECT_INT(check_locked(&f), CM_OK);

    /* The check reads the snapshot, not the table: a snapshot that names
     * x03 instead of n03 makes it dirty though the table is right. */
    rename_in_snapshot(&f, "n03.md", 'x');
    EXPECT_INT(snap_len(&f), n);
    EXPECT_INT(check_locked(&f), CM_EBUSY); /* x03 gone, n03 new */
    /* one that does not parse is left for the table */
    exec_sql(&f, "UPDATE meta SET value = x'00112233' WHERE key = '" SNAP_KEY "'");
    EXPECT_INT(check_locked(&f), CM_OK);
    exec_sql(&f, "UPDATE meta SET value = 'text' WHERE key = '" SNAP_KEY "'");
    EXPECT_INT(check_locked(&f), CM_OK);
    exec_sql(&f, "DELETE FROM meta WHERE key = '" SNAP_KEY "'");
    EXPECT_INT(check_locked(&f), CM_OK);
    EXPECT_INT(ws_sync(e, 0), CM_OK); /* an index's sync writes it again */
    EXPECT_INT(snap_len(&f), n);

    /* Another writer changing a files row drops it in the same transaction,
     * and the check then reads the table (which says n05 changed). */
    exec_sql(&f, "UPDATE files SET mtime = mtime + 1 WHERE path = 'memory/n05.md'");
    EXPECT_INT(snap_len(&f), -1);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(snap_len(&f), n);
    exec_sql(&f, "DELETE FROM files WHERE path = 'memory/n06.md'");
    EXPECT_INT(snap_len(&f), -1);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    exec_sql(&f, "INSERT INTO files(path, hash, mtime, size) VALUES('memory/zz.md', 'h', 1, 1)");
    EXPECT_INT(snap_len(&f), -1);
    EXPECT_INT(check_locked(&f), CM_EBUSY); /* a row whose file is not there */
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    cm_engine_close(e);
}

TEST(files_stat_check_sees_in_place_added_removed_renamed)
{
    fs_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    set_mtime(path_in(f.ws, "memory/n02.md"), 1700000000);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(snap_len(&f) > 0);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* changed in place: same size, new mtime */
    write_file(f.ws, "memory/n02.md", "note 02 about beaver\n");
    set_mtime(path_in(f.ws, "memory/n02.md"), 1700000001);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(snap_len(&f) > 0);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* only the mtime (the same bytes) */
    set_mtime(path_in(f.ws, "memory/n02.md"), 1700000002);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* added */
    write_file(f.ws, "memory/new.md", "a new note\n");
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* removed */
    EXPECT_INT(unlink(path_in(f.ws, "memory/n07.md")), 0);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* renamed (size and mtime go with it) */
    char from[1200];
    snprintf(from, sizeof from, "%s", path_in(f.ws, "memory/n08.md"));
    EXPECT_INT(rename(from, path_in(f.ws, "memory/n08-renamed.md")), 0);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* memory_write's indexing of one note keeps a snapshot too */
    char err[512], *out = NULL;
    cm_rc wrc = cm_memory_write(e, "memory/n09.md", "appended otters\n", 0, &out, err, sizeof err);
    if (wrc) fprintf(stderr, "  write: %s\n", err);
    EXPECT_INT(wrc, CM_OK);
    cm_free(out);
    EXPECT(snap_len(&f) > 0);
    EXPECT_INT(check_locked(&f), CM_OK);
    cm_engine_close(e);
}
