/*
 * store_swap.c — the rebuild's file plumbing: the temporary index's name,
 * the atomic swap that makes it the index (the old index's WAL checkpointed
 * away first, then its WAL and WAL index unlinked, so that neither is ever
 * read with the new file), the guard that keeps a store being opened out of
 * the swap's middle, and the removal of rebuild files left by processes that
 * died.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "store.h"
#include "store_swap.h"

/* The file the index is, its symbolic links followed (path itself when
 * nothing is there yet), so that the new file goes where the index lives
 * rather than over a link to it, and the -wal and -shm handled are the ones
 * SQLite uses, which it names after the file it resolved. The caller frees;
 * NULL: out of memory. */
static char *index_file(const char *path)
{
    char *real = realpath(path, NULL);
    if (real || errno == ENOMEM) return real;
    return cm_strdup(path);
}

char *cm_store_rebuild_path(const char *path)
{
    buf b = BUF_INIT;
    char *real = index_file(path);
    if (!real || cm_buf_printf(&b, "%s.rebuild-%ld", real, (long)getpid())) {
        free(real);
        cm_buf_release(&b);
        return NULL;
    }
    free(real);
    return cm_buf_detach(&b);
}

static void unlink_with_sidecars(const char *path)
{
    static const char *const sfx[] = {"", "-journal", "-wal", "-shm"};
    char p[4096];
    for (size_t i = 0; i < ARRAY_LEN(sfx); i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

static bool lock_fd(int fd, int op)
{
    int r;
    while ((r = flock(fd, op)) < 0 && errno == EINTR) {
    }
    return r == 0;
}

int cm_store_swap_guard(const char *path)
{
    for (int tries = 0; tries < 64; tries++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) return -1;
        /* a file system without flock(): no swap can be kept out, as before */
        if (!lock_fd(fd, LOCK_SH)) return fd;
        struct stat held, now;
        int r = stat(path, &now);
        bool gone = r < 0 && errno == ENOENT;
        if (fstat(fd, &held) < 0 || (r < 0 && !gone)) return fd; /* cannot tell: as before */
        if (!gone && held.st_ino == now.st_ino && held.st_dev == now.st_dev) return fd;
        close(fd); /* a swap put another file at path while this waited: that one */
        if (gone) return errno = ENOENT, -1;
    }
    return errno = EAGAIN, -1;
}

/* Before the swap's lock (the caller holds the writer lock, so the old
 * index's WAL gets no new frames): the new file made durable, the old WAL
 * checkpointed away. Stores keep opening the old file meanwhile. */
static cm_rc swap_prepare(const char *tmp, const char *path, char *err, size_t errlen)
{
    char clip[FS_CLIP_MAX + 1];
    /* Make the new file durable before it becomes the index. */
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return cm_seterr(err, errlen, CM_EIO, "%s: %s", cm_fs_clip(tmp, clip), strerror(e));
    }
    close(fd);
    /* The old index's WAL must not survive: it would be replayed onto the new
     * file. Checkpoint it away (every frame in the old file, for whoever
     * still reads it); if the old file is unreadable, drop its WAL. */
    char wal[4096], shm[4096];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    struct stat st;
    if (stat(wal, &st) == 0) {
        sqlite3 *db = NULL;
        int r = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
        if (r == SQLITE_OK) {
            sqlite3_busy_timeout(db, 5000);
            /* A fresh connection is not in WAL mode until it reads the header:
             * without this, the checkpoint below would silently do nothing. */
            r = sqlite3_exec(db, "PRAGMA journal_mode", NULL, NULL, NULL);
        }
        if (r == SQLITE_OK)
            r = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close_v2(db);
        /* an unreadable old index: its WAL is worthless, and goes below */
        bool unreadable = r != SQLITE_OK && (r & 0xff) != SQLITE_BUSY;
        if (!unreadable && (r != SQLITE_OK || (stat(wal, &st) == 0 && st.st_size > 0)))
            return cm_seterr(err, errlen, CM_EBUSY,
                             "index %s is in use by a reader that does not let go; try again",
                             cm_fs_clip(path, clip));
    }
    return CM_OK;
}

/* Under the swap's lock, as short as it can be. */
static cm_rc swap_rename(const char *tmp, const char *path, char *err, size_t errlen)
{
    char clip[FS_CLIP_MAX + 1], wal[4096], shm[4096];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    /* The new file gets a WAL and a WAL index of its own: a connection still
     * on the old file (another process's, or another engine's of this one)
     * keeps the old pair, now unlinked, and stays consistent with the file it
     * reads, while the first to open the new file creates a new pair. One
     * -shm shared by the two files would hand the old file's readers the new
     * file's frames, and in a process holding both, the old connection's
     * close would drop the locks the process holds on the -shm for the new
     * one (POSIX locks belong to the process), so that the next process to
     * open the index would truncate it under the live mapping. */
    if ((unlink(wal) < 0 && errno != ENOENT) || (unlink(shm) < 0 && errno != ENOENT))
        return cm_seterr(err, errlen, CM_EIO, "remove %s's WAL: %s", cm_fs_clip(path, clip),
                         strerror(errno));
    if (rename(tmp, path) < 0)
        return cm_seterr(err, errlen, CM_EIO, "rename %s: %s", cm_fs_clip(tmp, clip),
                         strerror(errno));
    char jr[4096];
    snprintf(jr, sizeof jr, "%s-journal", tmp);
    unlink(jr);
    cm_fs_sync_dir(path);
    return CM_OK;
}

cm_rc cm_store_swap(const char *tmp, const char *index, char *err, size_t errlen)
{
    char *path = index_file(index);
    if (!path) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    /* From before the old WAL goes until after the rename, no store opens the
     * index (cm_store_swap_guard): one that opened the old file in between
     * would make a new -wal and -shm for it under the names the new file
     * then inherits, the pair the unlink is there to keep apart. */
    cm_rc rc = swap_prepare(tmp, path, err, errlen);
    if (!rc) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd >= 0) lock_fd(fd, LOCK_EX);
        rc = swap_rename(tmp, path, err, errlen);
        if (fd >= 0) close(fd); /* and its flock */
    }
    free(path);
    return rc;
}

void cm_store_remove_leftovers(const char *index, bool mine)
{
    char *path = index_file(index); /* where cm_store_rebuild_path puts them */
    if (!path) return;
    char *dir = cm_fs_dirname(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    DIR *d = dir ? opendir(dir) : NULL;
    size_t bl = strlen(base);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strncmp(n, base, bl) != 0 || strncmp(n + bl, ".rebuild-", 9) != 0) continue;
        char *end;
        long pid = strtol(n + bl + 9, &end, 10);
        if (end == n + bl + 9) continue;
        /* still building; this process's own only while the caller holds the
         * writer lock (else another engine of it may be rebuilding now) */
        if (pid == (long)getpid() ? !mine : kill((pid_t)pid, 0) == 0) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%.*s", dir, (int)(end - n), n);
        unlink_with_sidecars(full);
    }
    if (d) closedir(d);
    free(dir);
    free(path);
}
