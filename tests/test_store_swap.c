/*
 * test_store_swap.c — a rebuild's swap and the stores opened beside it: a
 * store opened while a swap is in its middle waits and opens the new index,
 * and a swap waits for a store that is being opened on the old one; a FIFO
 * at the index's path is an error, not a wait; an index path that is a
 * symbolic link is rebuilt at its target.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/store/store.h"
#include "test.h"

/* An index at path whose meta holds marker=what, everything in the main
 * file (as a rebuild leaves its new file), nothing in a -wal. */
static void make_index(const char *path, const char *what)
{
    store s;
    char err[256], sql[128];
    EXPECT_INT(cm_store_open(&s, path, "unicode61", STORE_CREATE, 1000, err, sizeof err), CM_OK);
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta(key, value) VALUES('marker', '%s')",
             what);
    EXPECT_INT(sqlite3_exec(s.db, sql, NULL, NULL, NULL), SQLITE_OK);
    EXPECT_INT(sqlite3_wal_checkpoint_v2(s.db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL),
               SQLITE_OK);
    cm_store_close(&s);
    char side[1100];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

typedef struct opener {
    const char *path;
    cm_rc rc;
    char marker[32];
    volatile int done;
} opener;

static void *open_and_read(void *arg)
{
    opener *o = arg;
    store s;
    char err[256];
    o->rc = cm_store_open(&s, o->path, "unicode61", 0, 1000, err, sizeof err);
    if (o->rc == CM_OK) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(s.db, "SELECT value FROM meta WHERE key='marker'", -1, &q, NULL) ==
                SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW)
            snprintf(o->marker, sizeof o->marker, "%s", (const char *)sqlite3_column_text(q, 0));
        sqlite3_finalize(q);
        cm_store_close(&s);
    }
    o->done = 1;
    return NULL;
}

/* What a swap does while it holds its lock, done by hand: a store opened
 * then must not pair the old file with the -wal and -shm the new one gets. */
TEST(store_open_during_a_swap_waits_and_opens_the_new_index)
{
    char *d = tmp_dir();
    char path[1024], tmp[1100], wal[1100], shm[1100];
    snprintf(path, sizeof path, "%s", path_in(d, "i.sqlite"));
    snprintf(tmp, sizeof tmp, "%s.rebuild-1", path);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    make_index(path, "old");
    make_index(tmp, "new");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    EXPECT(fd >= 0 && flock(fd, LOCK_EX) == 0);
    opener o = {.path = path};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, open_and_read, &o) == 0);
    sleep_ms(150);
    EXPECT_INT(o.done, 0); /* waiting for the swap */
    unlink(wal);
    unlink(shm);
    EXPECT(rename(tmp, path) == 0);
    close(fd);
    pthread_join(t, NULL);
    EXPECT_INT(o.rc, CM_OK);
    EXPECT_STR(o.marker, "new");
}

typedef struct swapper {
    const char *tmp, *path;
    cm_rc rc;
    volatile int done;
} swapper;

static void *do_swap(void *arg)
{
    swapper *w = arg;
    char err[256];
    w->rc = cm_store_swap(w->tmp, w->path, err, sizeof err);
    w->done = 1;
    return NULL;
}

TEST(store_swap_waits_for_a_store_being_opened)
{
    char *d = tmp_dir();
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s", path_in(d, "i.sqlite"));
    snprintf(tmp, sizeof tmp, "%s.rebuild-1", path);
    make_index(path, "old");
    make_index(tmp, "new");
    /* the guard a store holds while it opens */
    int g = cm_store_swap_guard(path);
    EXPECT(g >= 0);
    swapper w = {.tmp = tmp, .path = path};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, do_swap, &w) == 0);
    sleep_ms(150);
    EXPECT_INT(w.done, 0);
    EXPECT(access(tmp, F_OK) == 0); /* not renamed yet */
    close(g);
    pthread_join(t, NULL);
    EXPECT_INT(w.rc, CM_OK);
    EXPECT(access(tmp, F_OK) != 0);
    opener o = {.path = path};
    open_and_read(&o);
    EXPECT_INT(o.rc, CM_OK);
    EXPECT_STR(o.marker, "new");
}

/* The guard follows the file a finished swap put at the path, and says
 * plainly when there is none. */
TEST(store_swap_guard_holds_the_file_now_at_the_path)
{
    char *d = tmp_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s", path_in(d, "i.sqlite"));
    errno = 0;
    EXPECT_INT(cm_store_swap_guard(path), -1);
    EXPECT_INT(errno, ENOENT);
    make_index(path, "old");
    int g = cm_store_swap_guard(path);
    EXPECT(g >= 0);
    struct stat a, b;
    EXPECT(fstat(g, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino);
    /* shared: a second store opening at the same time is not held up */
    int g2 = cm_store_swap_guard(path);
    EXPECT(g2 >= 0);
    int x = open(path, O_RDONLY | O_CLOEXEC);
    EXPECT(flock(x, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK); /* a swap would wait */
    close(x);
    close(g);
    close(g2);
}

/* A FIFO where the index should be: the guard's open does not wait for a
 * writer, and the open fails instead of hanging. */
TEST(store_open_on_a_fifo_fails_without_waiting)
{
    char *d = tmp_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s", path_in(d, "i.sqlite"));
    EXPECT(mkfifo(path, 0600) == 0);
    pid_t pid = fork();
    EXPECT(pid >= 0);
    if (pid == 0) {
        alarm(10);
        store s;
        char err[256];
        cm_rc rc = cm_store_open(&s, path, "unicode61", 0, 1000, err, sizeof err);
        if (rc == CM_OK) cm_store_close(&s);
        _exit(rc == CM_OK ? 1 : 0);
    }
    int st = 0;
    EXPECT(waitpid(pid, &st, 0) == pid);
    EXPECT(WIFEXITED(st)); /* not the alarm */
    EXPECT_INT(WEXITSTATUS(st), 0);
}

static void read_marker(const char *path, char *out, size_t n)
{
    store s;
    char err[256];
    *out = 0;
    if (cm_store_open(&s, path, "unicode61", 0, 1000, err, sizeof err) != CM_OK) return;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s.db, "SELECT value FROM meta WHERE key='marker'", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        snprintf(out, n, "%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    cm_store_close(&s);
}

/* An index path that is a symbolic link to a file elsewhere: the rebuild's
 * file is made beside that file and renamed over it, so that the link stays
 * and the index stays where it lives; and the -wal the old file left there
 * (SQLite names it after the file it resolved) is not read with the new one.
 * Before, the rename replaced the link with the new file and left the old
 * one, stale, at the link's target. */
TEST(store_swap_through_a_symbolic_link_keeps_the_link)
{
    char *d = tmp_dir();
    char link[1024], real[1024], wal[1100], marker[32];
    snprintf(link, sizeof link, "%s", path_in(d, "state/i.sqlite"));
    snprintf(real, sizeof real, "%s", path_in(d, "big/i.sqlite"));
    EXPECT(mkdir(path_in(d, "state"), 0700) == 0 && mkdir(path_in(d, "big"), 0700) == 0);
    make_index(real, "old");
    EXPECT(symlink(real, link) == 0);
    /* a write through the link, left in the real file's -wal */
    store s;
    char err[256];
    EXPECT_INT(cm_store_open(&s, link, "unicode61", 0, 1000, err, sizeof err), CM_OK);
    EXPECT_INT(
        sqlite3_exec(s.db, "UPDATE meta SET value='old2' WHERE key='marker'", NULL, NULL, NULL),
        SQLITE_OK);
    cm_store_close(&s);
    snprintf(wal, sizeof wal, "%s-wal", real);
    struct stat st;
    EXPECT(stat(wal, &st) == 0 && st.st_size > 0);
    char *tmp = cm_store_rebuild_path(link);
    EXPECT(tmp != NULL && strncmp(tmp, real, strlen(real)) == 0); /* beside the real file */
    make_index(tmp, "new");
    EXPECT_INT(cm_store_swap(tmp, link, err, sizeof err), CM_OK);
    EXPECT(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    read_marker(link, marker, sizeof marker);
    EXPECT_STR(marker, "new");
    read_marker(real, marker, sizeof marker);
    EXPECT_STR(marker, "new");
    EXPECT(access(tmp, F_OK) < 0);
    free(tmp);
}
