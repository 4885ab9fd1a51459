/*
 * test_files_stat.c — the no-change check's stat snapshot (files_stat.h):
 * a sync writes it, the check reads it instead of the files table, any
 * write to the files table drops it (the triggers, whoever writes), and a
 * snapshot that does not parse is left for the table. The check still sees
 * a file changed in place (same size, new mtime), added, removed, renamed.
 * "Dirty" is told by the writer lock: held by another open file, a check
 * that finds nothing changed answers CM_OK, one that finds a change needs
 * the lock and answers CM_EBUSY. With directory records (discover.h), an
 * unchanged directory is not read again, and the check still sees all of
 * those changes.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/engine/engine_int.h"
#include "../src/index/discover.h"
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

static int64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A clock 10 s ahead: every directory's ctime is then past the record
 * margin (2 s), as it would be 10 s later, without sleeping. */
static int64_t ahead_ns(void)
{
    return real_ns() + 10 * (int64_t)1000000000;
}

/* A walk of f's workspace with the records hint (NULL: none), recording
 * what is older than record_before; *out then holds the list. */
static void walk_ws(const fs_ws *f, const buf *hint, int64_t record_before, file_list *out)
{
    cm_config c = {0};
    c.workspace = (char *)f->ws;
    problem_list pl = {0};
    EXPECT_INT(cm_discover_files_hinted(&c, hint ? hint->data : NULL, hint ? hint->len : 0,
                                        record_before, out, &pl),
               CM_OK);
    EXPECT_INT(pl.n, 0);
    cm_index_problem_list_release(&pl);
    cm_discover_sort(out);
}

/* Whether the list l has rel with size. */
static bool has_file(const file_list *l, const char *rel, int64_t size)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].rel, rel) == 0) return l->v[i].size == size;
    return false;
}

TEST(files_stat_dir_records_skip_only_unchanged_directories)
{
    fs_ws f;
    ws_init(&f);
    write_file(f.ws, "memory/sub/deep.md", "a deeper note\n");
    file_list rec, l;
    /* Just written, the directories are younger than the margin by the
     * real clock: none is recorded. */
    walk_ws(&f, NULL, real_ns() - DISCOVER_RECORD_MARGIN_NS, &l);
    EXPECT_INT(l.n, 13);
    EXPECT_INT(l.dir_record.len, 0);
    cm_index_file_list_release(&l);
    /* 10 s on, memory/ and memory/sub/ are */
    walk_ws(&f, NULL, ahead_ns() - DISCOVER_RECORD_MARGIN_NS, &rec);
    EXPECT(rec.dir_record.len > 0);
    EXPECT_INT(rec.dirs_hinted, 0);
    /* Unchanged: both taken from the records, not read; the same files. */
    walk_ws(&f, &rec.dir_record, 0, &l);
    EXPECT_INT(l.dirs_hinted, 2);
    EXPECT_INT(l.n, 13);
    for (size_t i = 0; i < rec.n && i < l.n; i++) {
        EXPECT_STR(l.v[i].rel, rec.v[i].rel);
        EXPECT(l.v[i].size == rec.v[i].size && l.v[i].mtime_ns == rec.v[i].mtime_ns);
    }
    cm_index_file_list_release(&l);
    /* An in-place edit changes the file, not the directory: still not
     * read, and the file's new size and mtime are seen (each is stat'd). */
    write_file(f.ws, "memory/n02.md", "note 02 about otters, longer now\n");
    set_mtime(path_in(f.ws, "memory/n02.md"), 1700000001);
    walk_ws(&f, &rec.dir_record, 0, &l);
    EXPECT_INT(l.dirs_hinted, 2);
    EXPECT(has_file(&l, "memory/n02.md", 33));
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.v[i].rel, "memory/n02.md") == 0)
            EXPECT(l.v[i].mtime_ns == 1700000001LL * 1000000000);
    cm_index_file_list_release(&l);
    /* Added: memory/ is read (its ctime moved), memory/sub/ still not; the
     * directory's mtime set back (as tar or rsync -t do) does not hide it. */
    struct stat before;
    EXPECT_INT(stat(path_in(f.ws, "memory"), &before), 0);
    write_file(f.ws, "memory/new.md", "a new note\n");
    struct timespec back[2] = {before.st_atim, before.st_mtim};
    EXPECT_INT(utimensat(AT_FDCWD, path_in(f.ws, "memory"), back, 0), 0);
    walk_ws(&f, &rec.dir_record, 0, &l);
    EXPECT_INT(l.dirs_hinted, 1);
    EXPECT_INT(l.n, 14);
    EXPECT(has_file(&l, "memory/new.md", 11));
    cm_index_file_list_release(&l);
    /* Re-recorded 10 s on; then removed, and renamed in memory/sub/ */
    cm_index_file_list_release(&rec);
    walk_ws(&f, NULL, ahead_ns() - DISCOVER_RECORD_MARGIN_NS, &rec);
    EXPECT_INT(unlink(path_in(f.ws, "memory/n07.md")), 0);
    char from[1200];
    snprintf(from, sizeof from, "%s", path_in(f.ws, "memory/sub/deep.md"));
    EXPECT_INT(rename(from, path_in(f.ws, "memory/sub/deeper.md")), 0);
    walk_ws(&f, &rec.dir_record, 0, &l);
    EXPECT_INT(l.dirs_hinted, 0);
    EXPECT_INT(l.n, 13);
    EXPECT(!has_file(&l, "memory/n07.md", 21));
    EXPECT(has_file(&l, "memory/sub/deeper.md", 14));
    EXPECT(!has_file(&l, "memory/sub/deep.md", 14));
    cm_index_file_list_release(&l);
    /* Records that do not parse are ignored: every directory is read. */
    buf bad = BUF_INIT;
    EXPECT_INT(cm_buf_add(&bad, rec.dir_record.data, rec.dir_record.len - 1), CM_OK);
    walk_ws(&f, &bad, 0, &l);
    EXPECT_INT(l.dirs_hinted, 0);
    EXPECT_INT(l.n, 13);
    cm_index_file_list_release(&l);
    /* nor do records naming anything outside their directory */
    cm_buf_reset(&bad);
    EXPECT_INT(cm_buf_add(&bad, rec.dir_record.data, rec.dir_record.len), CM_OK);
    char *nm = memmem(bad.data, bad.len, "n00.md", 7);
    EXPECT(nm != NULL);
    if (nm) *nm = '/';
    walk_ws(&f, &bad, 0, &l);
    EXPECT_INT(l.dirs_hinted, 0);
    cm_index_file_list_release(&l);
    cm_buf_release(&bad);
    cm_index_file_list_release(&rec);
}

TEST(files_stat_check_with_dir_records_sees_in_place_added_removed_renamed)
{
    fs_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    int plain = snap_len(&f); /* the real clock: the directory is too new */
    EXPECT(plain > 0);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* 10 s on, a sync that changes no row still writes memory/'s record
     * (a search's check, read-only, never does) */
    cm_engine_sync_test_clock(ahead_ns);
    EXPECT_INT(check_locked(&f), CM_OK);
    EXPECT_INT(snap_len(&f), plain);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(snap_len(&f) > plain);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* changed in place: same size, new mtime; then only the mtime */
    write_file(f.ws, "memory/n02.md", "note 02 about beaver\n");
    set_mtime(path_in(f.ws, "memory/n02.md"), 1700000001);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(snap_len(&f) > plain);
    EXPECT_INT(check_locked(&f), CM_OK);
    set_mtime(path_in(f.ws, "memory/n02.md"), 1700000002);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* added, with the directory's mtime set back */
    struct stat before;
    EXPECT_INT(stat(path_in(f.ws, "memory"), &before), 0);
    write_file(f.ws, "memory/new.md", "a new note\n");
    struct timespec back[2] = {before.st_atim, before.st_mtim};
    EXPECT_INT(utimensat(AT_FDCWD, path_in(f.ws, "memory"), back, 0), 0);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* removed */
    EXPECT_INT(unlink(path_in(f.ws, "memory/n07.md")), 0);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    /* renamed */
    char from[1200];
    snprintf(from, sizeof from, "%s", path_in(f.ws, "memory/n08.md"));
    EXPECT_INT(rename(from, path_in(f.ws, "memory/n08-renamed.md")), 0);
    EXPECT_INT(check_locked(&f), CM_EBUSY);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(check_locked(&f), CM_OK);
    cm_engine_sync_test_clock(NULL);
    cm_engine_close(e);
}

/* The bytes of the index's WAL file (-1: none). */
static long wal_bytes(const fs_ws *f)
{
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s-wal", f->db);
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

TEST(files_stat_sync_that_wrote_leaves_the_wal_empty)
{
    fs_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(wal_bytes(&f), 0);
    /* a sync that changed a file: its frames are in the index's file, and
     * the WAL is emptied, so that the next process reads none back */
    write_file(f.ws, "memory/n02.md", "note 02 about beavers now\n");
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(wal_bytes(&f), 0);
    /* one that wrote only the stat snapshot (memory/'s record, 10 s on) */
    int plain = snap_len(&f);
    cm_engine_sync_test_clock(ahead_ns);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(snap_len(&f) > plain);
    EXPECT_INT(wal_bytes(&f), 0);
    /* a reader on an older snapshot: the sync does not wait for it, and the
     * WAL stays until a later sync finds no reader */
    sqlite3 *db = NULL;
    EXPECT_INT(sqlite3_open_v2(f.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    EXPECT_INT(sqlite3_exec(db, "BEGIN; SELECT count(*) FROM files;", NULL, NULL, NULL), SQLITE_OK);
    write_file(f.ws, "memory/n03.md", "note 03 about beavers now\n");
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(wal_bytes(&f) > 0);
    EXPECT_INT(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    write_file(f.ws, "memory/n04.md", "note 04 about beavers now\n");
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(wal_bytes(&f), 0);
    EXPECT_INT(check_locked(&f), CM_OK);
    cm_engine_sync_test_clock(NULL);
    cm_engine_close(e);
}

/* Whether the n names (NUL-terminated in a row) at p are in strcmp order. */
static bool names_sorted(const char *p, size_t len)
{
    const char *prev = NULL;
    for (size_t at = 0; at < len; at += strlen(p + at) + 1) {
        if (prev && strcmp(prev, p + at) >= 0) return false;
        prev = p + at;
    }
    return true;
}

TEST(files_stat_walk_lists_and_records_a_directory_in_path_order)
{
    fs_ws f;
    f.dir = tmp_dir();
    snprintf(f.ws, sizeof f.ws, "%s/ws", f.dir);
    /* written out of order: neither creation nor a hashed directory's
     * order is the names' */
    for (int i = 0; i < 40; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "memory/n%02d.md", (i * 17) % 40);
        write_file(f.ws, rel, "a note\n");
    }
    cm_config c = {0};
    c.workspace = f.ws;
    problem_list pl = {0};
    file_list rec, l;
    EXPECT_INT(cm_discover_files_hinted(&c, NULL, 0, ahead_ns() - DISCOVER_RECORD_MARGIN_NS, &rec,
                                        &pl),
               CM_OK);
    EXPECT_INT(rec.n, 40);
    for (size_t i = 1; i < rec.n; i++)
        EXPECT(strcmp(rec.v[i - 1].rel, rec.v[i].rel) < 0);
    /* the record's names (after its 28-byte head) in the same order */
    EXPECT(rec.dir_record.len > 28);
    if (rec.dir_record.len > 28)
        EXPECT(names_sorted(rec.dir_record.data + 28, rec.dir_record.len - 28));
    /* a walk from the record lists them in that order too */
    EXPECT_INT(cm_discover_files_hinted(&c, rec.dir_record.data, rec.dir_record.len, 0, &l, &pl),
               CM_OK);
    EXPECT_INT(l.dirs_hinted, 1);
    EXPECT_INT(l.n, 40);
    for (size_t i = 0; i < l.n && i < rec.n; i++)
        EXPECT_STR(l.v[i].rel, rec.v[i].rel);
    EXPECT_INT(pl.n, 0);
    cm_index_problem_list_release(&pl);
    cm_index_file_list_release(&l);
    cm_index_file_list_release(&rec);
}

/* How many of this process's descriptors name the file path. */
static int fds_on(const char *path)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++) {
        char link[64], to[1200];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(link, to, sizeof to - 1);
        if (len <= 0) continue;
        to[len] = '\0';
        n += strcmp(to, path) == 0;
    }
    return n;
}

/* Whether another process sees a lock on the -shm's DMS byte (SQLite's
 * "a connection has this WAL index mapped": with none, the next opener
 * truncates the file under every mapping of it). */
static bool dms_locked(const char *shm)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(shm, O_RDWR);
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 128, .l_len = 1};
        _exit(fd >= 0 && fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK ? 0 : 1);
    }
    int st = 1;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* A sync's stat snapshot is a statement on the index; when another process
 * swaps a rebuilt index in while it is held, the reopen finalizes it first:
 * else the old connection lingered (sqlite3_close_v2) beside the new one on
 * the same -shm file, and finalizing it later closed a descriptor of that
 * file, which drops every lock this process holds on it, so that the next
 * process to open the index truncated the -shm under this one's mapping
 * (SIGBUS: watch_many_processes_one_index, once in CI under ASan). */
TEST(files_stat_swap_while_the_snapshot_is_held_keeps_one_shm_connection)
{
    fs_ws f;
    ws_init(&f);
    char shm[1200];
    snprintf(shm, sizeof shm, "%s-shm", f.db);
    cm_engine *e = ws_open(&f), *other = ws_open(&f);
    char err[512];
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT_INT(cm_engine_ensure_store(e, err, sizeof err), CM_OK);
    store_snap snap;
    EXPECT_INT(cm_store_files_stat_open(&e->st, &snap, err, sizeof err), CM_OK);
    EXPECT(snap.p != NULL);
    e->snap_held = &snap; /* as cm_builtin_sync holds it */
    EXPECT_INT(ws_sync(other, CM_SYNC_FORCE), CM_OK); /* the swap */
    cm_engine_close(other);
    EXPECT_INT(cm_engine_ensure_store(e, err, sizeof err), CM_OK); /* the reopen */
    EXPECT(e->snap_held == NULL);
    EXPECT(snap.q == NULL && snap.p == NULL);
    EXPECT_INT(fds_on(shm), 1);
    cm_store_files_stat_close(&snap); /* the sync's own release: nothing left */
    EXPECT(dms_locked(shm));
    EXPECT_INT(fds_on(shm), 1);
    cm_engine_close(e);
}

/* Two engines of one process on the index (as a gateway's or a server's
 * views are) when another swaps a rebuilt index in: one moves to the new
 * file while the other still has the old one open. Their -shm must not be
 * one file: if it were, the second's close would drop the locks the first
 * holds on it (POSIX locks belong to the process), and the next process to
 * open the index would truncate the -shm under the first one's mapping. */
TEST(files_stat_swap_gives_the_new_index_its_own_shm)
{
    fs_ws f;
    ws_init(&f);
    char shm[1200], err[512];
    snprintf(shm, sizeof shm, "%s-shm", f.db);
    cm_engine *a = ws_open(&f), *b = ws_open(&f), *other = ws_open(&f);
    EXPECT_INT(ws_sync(a, 0), CM_OK);
    EXPECT_INT(cm_engine_ensure_store(a, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_ensure_store(b, err, sizeof err), CM_OK);
    struct stat old_shm;
    EXPECT(stat(shm, &old_shm) == 0);
    EXPECT_INT(ws_sync(other, CM_SYNC_FORCE), CM_OK); /* the swap */
    cm_engine_close(other);
    EXPECT_INT(cm_engine_ensure_store(a, err, sizeof err), CM_OK); /* a: the new file */
    struct stat new_shm;
    EXPECT(stat(shm, &new_shm) == 0);
    EXPECT(new_shm.st_ino != old_shm.st_ino);
    cm_engine_close(b); /* b: the old one, closed after */
    EXPECT(dms_locked(shm));
    /* a still reads the index, and a new process's search finds it */
    EXPECT_INT(check_locked(&f), CM_OK);
    cm_engine_close(a);
}

typedef struct open_midway {
    cm_engine *shared;
    cm_engine *view;
} open_midway;

/* The rebuild's progress, after its first file: another call on the shared
 * engine takes a view while the rebuilding one is leased, so a new view is
 * opened (a gateway's second session searching meanwhile). */
static int lease_another(void *ctx, const cm_progress *p)
{
    open_midway *m = ctx;
    char err[512];
    if (p->files_done >= 1 && !m->view && cm_engine_lease(m->shared, &m->view, err, sizeof err))
        fprintf(stderr, "  lease: %s\n", err);
    return 0;
}

/* A view opened while another view of the same shared engine rebuilds the
 * index leaves that rebuild's file alone: before, the open removed every
 * "<index>.rebuild-<pid>" of this process as a leftover, and the rebuild's
 * swap then failed (the file it had written was gone). */
TEST(files_stat_a_view_opened_during_a_rebuild_keeps_its_file)
{
    fs_ws f;
    ws_init(&f);
    cm_options o = {NULL, f.ws, f.cfg, f.state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open_shared(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    open_midway m = {e, NULL};
    cm_sync_stats st;
    cm_rc rc = cm_engine_sync(e, CM_SYNC_FORCE, lease_another, &m, &st, err, sizeof err);
    if (rc) fprintf(stderr, "  sync: %s\n", err);
    EXPECT(m.view != NULL && m.view != e);
    EXPECT_INT(rc, CM_OK);
    EXPECT_INT(st.rebuilt, 1);
    if (m.view) cm_engine_unlease(e, m.view);
    cm_engine_close(e);
}
